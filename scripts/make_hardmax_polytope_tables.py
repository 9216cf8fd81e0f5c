"""Write the hardmax output-function table ``Phi_T(tau)`` (``T = 3``) into ``aimlib/data``.

Run from the repository root: ``python scripts/make_hardmax_polytope_tables.py``
(``hardmax_polytope_tables.npz``, 13 nested quasi-Monte Carlo averages, about half an hour
on one core).  See ``aimlib/data/hardmax_polytope_tables.md``.
"""
import argparse
import time

from aimlib.channels import hardmax_polytope

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    start = time.perf_counter()
    path = hardmax_polytope.write_table()
    print("wrote", path, f"in {time.perf_counter() - start:.0f} s")
