"""How the scripts write their data: a ``# made by:`` line, a CSV header, then one row per run; their ``--out``.

Each row is flushed as it comes, so a long run that stops keeps what it made.
"""
from __future__ import annotations

import argparse
import csv
from pathlib import Path

#: where the committed data live
DATA = Path(__file__).resolve().parents[1] / "book" / "data"


def data_parser(doc: str, name: str | None) -> argparse.ArgumentParser:
    """The command line of a data script: its docstring's first line, and ``--out`` (default ``DATA / name``)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    where = f"book/data/{name}" if name else "the grid's file in book/data"
    parser.add_argument("--out", default=None if name is None else str(DATA / name),
                        help=f"the CSV to write (default: {where})")
    return parser


def write_rows(path, command: str, columns, rows) -> int:
    """Write ``rows`` (dicts; keys outside ``columns`` are left out) to ``path``; returns 0, the exit status."""
    with open(path, "w", newline="") as fh:
        fh.write(f"# made by: {command}\n")
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow(row)
            fh.flush()
    return 0
