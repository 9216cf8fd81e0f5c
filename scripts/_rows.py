"""How the scripts write their data: a ``# made by:`` line, a CSV header, then one row per run; their ``--out``.

Each row is flushed as it comes, so a long run that stops keeps what it made.
``--out`` is opened by :func:`aimlib.files.open_output`: a symbolic link,
another user's file or a file with hard links is refused (checked when the
command line is read, before any run, and again when the file is opened).
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

from aimlib import files

#: where the committed data live
DATA = Path(__file__).resolve().parents[1] / "book" / "data"
#: how the first line of a data file begins; the command that made the file follows
MADE_BY = "# made by: "


def _out_path(text: str) -> str:
    """``--out`` as given, if :func:`aimlib.files.check_output` accepts it (else an argparse error)."""
    try:
        files.check_output("--out", text)
    except (ValueError, OSError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def data_parser(doc: str, name: str | None) -> argparse.ArgumentParser:
    """The command line of a data script: its docstring's first line, and ``--out`` (default ``DATA / name``)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    where = f"book/data/{name}" if name else "the grid's file in book/data"
    parser.add_argument("--out", type=_out_path, default=None if name is None else str(DATA / name),
                        help=f"the CSV to write (default: {where})")
    return parser


def command_line(base: str, parser: argparse.ArgumentParser, args, names) -> str:
    """The ``# made by:`` command: ``base`` and, of the options ``names``, those whose value in ``args`` differs
    from ``parser``'s default, in that order (a list as its numbers by ``:g``, a flag by its name alone)."""
    parts = [base]
    for name in names:
        value = getattr(args, name)
        if value == parser.get_default(name):
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            parts.append(flag)
        elif isinstance(value, list):
            parts.append(f"{flag} " + " ".join(f"{x:g}" for x in value))
        else:
            parts.append(f"{flag} {value}")
    return " ".join(parts)


def read_rows(path) -> list[dict]:
    """The rows of a data file written by :func:`write_rows` (none if ``path`` does not exist)."""
    if not os.path.exists(path):
        return []
    with os.fdopen(files.open_input("--out", path), newline="") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def made_by(path) -> str:
    """The command on the ``# made by:`` line that :func:`write_rows` puts first in ``path``."""
    with os.fdopen(files.open_input("--out", path), newline="") as fh:
        first = fh.readline().rstrip("\n")
    if not first.startswith(MADE_BY):
        raise ValueError(f"{path} does not begin with a '{MADE_BY}' line: {first[:60]!r}")
    return first.removeprefix(MADE_BY)


def write_rows(path, command: str, columns, rows, *, append: bool = False) -> int:
    """Write ``rows`` (dicts; keys outside ``columns`` are left out) to ``path``; returns 0, the exit status.

    A ``path`` that :func:`aimlib.files.open_output` refuses ends the script
    with a one-line message and exit status 2, before a row is made.  With
    ``append``, the rows go after those already in ``path`` (whose header must
    be ``columns``), so that a stopped run can be resumed.
    """
    old = read_rows(path) if append else []
    if old and list(old[0]) != list(columns):
        print(f"error: {path} has the columns {list(old[0])}, not {list(columns)}", file=sys.stderr)
        raise SystemExit(2)
    try:
        fd = files.open_output("--out", path, append=bool(old))
    except files.RefusedFile as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    with os.fdopen(fd, "a" if old else "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        if not old:
            fh.write(f"{MADE_BY}{command}\n")
            writer.writeheader()
        for row in rows:
            writer.writerow(row)
            fh.flush()
    return 0
