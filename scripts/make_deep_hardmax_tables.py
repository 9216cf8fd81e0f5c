"""Write ``aimlib/data/deep_hardmax_tables.npz``: the two-layer hardmax interpolants for the stored residuals.

Run from the repository root: ``python scripts/make_deep_hardmax_tables.py``
(about a minute per residual strength on one core).  See
``aimlib/data/deep_hardmax_tables.md``.
"""
from aimlib.channels import deep_patterns

if __name__ == "__main__":
    print("wrote", deep_patterns.write_tables())
