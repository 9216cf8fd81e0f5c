"""Write the deep-hardmax interpolants for the stored residuals into ``aimlib/data``.

Run from the repository root: ``python scripts/make_deep_hardmax_tables.py`` for two layers
(``deep_hardmax_tables.npz``, about fifteen seconds per residual strength on one core), or
``python scripts/make_deep_hardmax_tables.py --layers 3`` for three (``deep_hardmax3_tables.npz``,
about thirty seconds per residual strength).  See the ``.md`` beside each file.
"""
import argparse

from aimlib.channels import deep_histories, deep_patterns

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, choices=[2, 3], default=2)
    args = parser.parse_args()
    print("wrote", deep_patterns.write_tables() if args.layers == 2 else deep_histories.write_tables3())
