"""How the scripts write their data: a ``# made by:`` line, a CSV header, then one row per run.

Each row is flushed as it comes, so a long run that stops keeps what it made.
"""
from __future__ import annotations

import csv


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
