"""The results file: a CSV with one row per run, appended to atomically, resumable.

Only the parent process writes.  The file is held open under an exclusive
lock (``fcntl.flock``, so two sweeps cannot write one file; POSIX only, no
lock on Windows) and each finished row is appended as one line, then
``fsync``-ed, so a crash or a ``kill -9`` loses at most the runs in flight.

A file is only ever written after its first line is recognised as exactly
the header :data:`COLUMNS` (an empty file, or one that holds a prefix of
that header, as a writer killed while creating it leaves, is a new results
file).  Anything else -- another CSV, a spec, a one-line file, binary data --
is refused with a ``ValueError`` and left untouched, and so is a path that
:func:`aimlib.files.open_output` refuses (a symbolic link, a file of another
user, ...).  In a recognised file a last line without its newline is kept when
it is a whole row (every column, each value valid, the timestamp whole; a
row copied or edited by hand may lack the final newline),
and the newline is added; otherwise it is a row cut off by a killed writer, cut
off the file with a warning that says what was found, and its run is
recomputed.  Rows repeated with the same key are removed; rewrites go to a
locked, ``fsync``-ed temporary file that replaces the file with
``os.replace``.  A row that cannot be written (a full disk) is not written at
all (:mod:`~aimlib.sweep.diskio`).
"""
from __future__ import annotations

import csv
import datetime
import io
import json
import os
import re
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from .. import files
from . import diskio

#: the CSV columns, in order
COLUMNS = [
    "key",
    # parameters
    "method", "channel", "T", "rho", "alpha", "alpha_bar", "beta", "noise", "c", "d", "seed",
    "restarts", "steps", "max_iter", "dtype", "options",
    # metrics
    "n", "mmse", "q", "iterations", "converged", "reason", "mmse_pred", "mmse_single", "mmse_single_std",
    "mmse_averaged", "mmse_layers", "mmse_pred_layers", "train_loss", "test_loss", "n_nonzero",
    "curve", "seconds",
    # provenance
    "aimlib_version", "backend", "hostname", "timestamp",
]

#: the columns of files written before ``curve`` (a gradient-descent run's recorded errors), before that
#: before ``reason`` (why a GAMP-RIE run ended), and before that before ``train_loss``, ``test_loss``,
#: ``n_nonzero``; such a file is read as it is and rewritten with the current header (empty new
#: fields) when a sweep writes to it
OLD_COLUMNS = ([c for c in COLUMNS if c != "curve"],
               [c for c in COLUMNS if c not in ("curve", "reason")],
               [c for c in COLUMNS if c not in ("curve", "reason", "train_loss", "test_loss", "n_nonzero")])

_INT_COLUMNS = {"T", "d", "seed", "restarts", "steps", "max_iter", "n", "iterations"}
_FLOAT_COLUMNS = {"alpha", "alpha_bar", "beta", "noise", "c", "mmse", "q", "mmse_pred",
                  "mmse_single", "mmse_single_std", "mmse_averaged", "train_loss", "test_loss",
                  "n_nonzero", "seconds"}
_BOOL_COLUMNS = {"converged"}
#: one number, or a JSON list of one number per teacher (layered channels)
_LIST_COLUMNS = {"rho", "mmse_layers", "mmse_pred_layers"}
#: a JSON object of lists (:func:`aimlib.gd.schedule.kept_curve`)
_OBJECT_COLUMNS = {"curve"}
#: a row's ``timestamp`` (:func:`timestamp`): UTC, to the second, with its offset
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d")


def timestamp() -> str:
    """The ``timestamp`` of a row finished now.

    ISO 8601, UTC, to the second, with its offset (``2025-01-31T12:34:56+00:00``).
    """
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _format(x) -> str:
    if x is None:
        return ""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, (tuple, list)):
        return json.dumps([float(v) for v in x], separators=(",", ":"))
    if isinstance(x, dict):
        return json.dumps(x, separators=(",", ":"))
    return str(x)


def _csv_line(values: Iterable) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(list(values))
    return buf.getvalue()


_HEADER = _csv_line(COLUMNS)
_HEADER_BYTES = _HEADER.encode()
_OLD_HEADERS = tuple((_csv_line(cols).encode(), cols) for cols in OLD_COLUMNS)


def _parse(name: str, text: str):
    if text == "":
        return None
    if name in _INT_COLUMNS:
        return int(text)
    if name in _FLOAT_COLUMNS:
        return float(text)
    if name in _BOOL_COLUMNS:
        return text == "true"
    if name in _LIST_COLUMNS:
        return tuple(json.loads(text)) if text.startswith("[") else float(text)
    if name in _OBJECT_COLUMNS:
        return json.loads(text)
    return text


def read_results(path, *, keys: Iterable[str] | None = None) -> list[dict]:
    """The rows of a sweep CSV as dicts with typed values, one per key, in file order.

    A last line cut off by an interrupted write is skipped (one that lacks only
    its newline is a whole row); a file that is not a sweep
    results file, or not a regular file, is refused with a ``ValueError``.
    ``keys`` (e.g. ``[r.key for r in expand(spec)]``) selects and orders rows.
    """
    found = _contents(Path(path))
    rows = [{k: _parse(k, v) for k, v in zip(COLUMNS, next(csv.reader([found.lines[key]])))}
            for key in found.order]
    if keys is None:
        return rows
    by_key = {r["key"]: r for r in rows}
    return [by_key[k] for k in keys if k in by_key]


@dataclass
class _Contents:
    """A recognised results file: its rows by key, their order, and what to repair."""

    old: list | None  # the columns of an earlier header (OLD_COLUMNS; the lines are converted to COLUMNS)
    end: int = 0  # bytes of the header and the rows kept (0: no complete header)
    lines: dict = field(default_factory=dict)  # key -> CSV line of COLUMNS (first occurrence)
    order: list = field(default_factory=list)  # keys in file order
    duplicates: int = 0  # rows repeating an earlier key
    torn: str = ""  # what was found after the rows kept, to be cut off ("": nothing)
    unterminated: bool = False  # the last row kept lacks its newline

    def add(self, fields: list[str], line: str):
        """Keep the row ``fields`` (the CSV ``line``, no newline) unless its key came before."""
        if fields[0] in self.lines:
            self.duplicates += 1
            return
        if self.old:
            line = _csv_line(dict(zip(self.old, fields)).get(c, "") for c in COLUMNS)
        else:
            line += "\n"
        self.lines[fields[0]] = line
        self.order.append(fields[0])


def _foreign(path) -> ValueError:
    return ValueError(f"{path} is not a sweep results file (its header differs from the "
                      "sweep columns of this aimlib version); it was left untouched, "
                      "choose another --out")


def _whole_row(tail: bytes, columns: list[str]) -> tuple[list[str] | None, str]:
    """The fields of ``tail`` (a last line without its newline) if it is a whole row, else what it is.

    A whole row has every column, each value valid by its column's rules
    (``_parse``: integers, numbers, ``true``/``false``, JSON lists) and a
    whole ``timestamp`` (:func:`timestamp`): the last column, so a row cut inside it still has
    every column and only the timestamp tells it from a whole one.

    Returns
    -------
    (fields, "") for a whole row, (None, what was found) otherwise.
    """
    try:
        fields = next(csv.reader([tail.decode()], strict=True))
    except (UnicodeDecodeError, csv.Error):
        return None, "not a line of CSV text"
    if len(fields) != len(columns):
        return None, f"{len(fields)} of the {len(columns)} fields"
    for name, text in zip(columns, fields):
        try:
            _parse(name, text)
            valid = ((name not in _BOOL_COLUMNS or text in ("", "true", "false"))
                     and (name != "timestamp" or _TIMESTAMP.fullmatch(text)))
        except ValueError:
            valid = False
        if not valid:
            return None, f"every field, but its {name} {text[:40]!r} is cut off or invalid"
    return fields, ""


def _scan(data: bytes, path) -> _Contents:
    """Recognise ``data`` as a results file and parse its rows; refuse anything else.

    The bytes after the last newline are a row kept (``unterminated``) when
    ``_whole_row`` finds one, else ``torn`` says what they are.
    """
    header, old = _HEADER_BYTES, None
    if not data.startswith(_HEADER_BYTES):
        header, old = next(((h, cols) for h, cols in _OLD_HEADERS if data.startswith(h)), (b"", None))
    if not header:
        if b"\n" not in data and _HEADER_BYTES.startswith(data):  # empty, or a torn header
            torn = f"a header cut short ({len(data)} bytes); it is written again" if data else ""
            return _Contents(None, torn=torn)
        raise _foreign(path)
    end = data.rfind(b"\n") + 1
    try:
        text = data[len(header):end].decode()
    except UnicodeDecodeError:
        raise ValueError(f"{path}: the rows are not UTF-8 text; the file is corrupt") from None
    columns = old or COLUMNS
    found = _Contents(old, end)
    for i, line in enumerate(text.split("\n")[:-1], start=2):
        fields = next(csv.reader([line]))
        if len(fields) != len(columns):
            raise ValueError(f"{path}: line {i} has {len(fields)} fields, expected "
                             f"{len(columns)}; the file is corrupt")
        found.add(fields, line)
    if end < len(data):
        fields, what = _whole_row(data[end:], columns)
        if fields is None:
            found.torn = (f"an incomplete last line ({len(data) - end} bytes after the last "
                          f"newline: {what}), a row cut off by an interrupted sweep; its "
                          "run is computed again")
        else:
            found.add(fields, data[end:].decode())
            found.end, found.unterminated = len(data), True
    return found


def _read(fd: int, path: Path) -> bytes:
    """The contents of the results file open as ``fd``; a foreign file is refused unread.

    Only the header's length is read before the header is recognised, so a
    huge or endless special file (``/proc/kcore``) costs nothing.
    """
    try:
        head = os.pread(fd, len(_HEADER_BYTES), 0)
        if not (_HEADER_BYTES.startswith(head) or any(head.startswith(h) for h, _ in _OLD_HEADERS)):
            raise _foreign(path)
        return diskio.read_all(fd)
    except OSError as exc:
        raise ValueError(f"cannot read the results file {path}: {exc.strerror or exc}; "
                         "choose another --out") from None


def _contents(path: Path) -> _Contents:
    """The recognised contents of the results file ``path`` (``FileNotFoundError`` if missing).

    It is opened without waiting (:func:`aimlib.files.open_input`): a pipe, a
    device or a folder is refused, not read.
    """
    try:
        fd = files.open_input("the results file", path)
    except FileNotFoundError:  # the caller's to handle: no results yet
        raise
    except OSError as exc:
        raise ValueError(f"cannot read the results file {path}: {exc.strerror or exc}; "
                         "choose another --out") from None
    try:
        return _scan(_read(fd, path), path)
    finally:
        os.close(fd)


def stored_keys(path: Path) -> set:
    """The keys of the rows of the results file ``path`` (none if it does not exist)."""
    try:
        return set(_contents(path).lines)
    except FileNotFoundError:
        return set()


class ResultsFile:
    """The CSV, held open with an exclusive lock; rows are appended atomically and fsync-ed."""

    def __init__(self, path: Path):
        self.path = path
        self.lock = threading.Lock()
        self.fd = _open_locked(path)
        try:
            self._load()
        except BaseException:
            self.close()
            raise

    def _load(self):
        data = _read(self.fd, self.path)
        found = _scan(data, self.path)  # raises before anything is written to a foreign file
        if found.torn:
            warnings.warn(f"{self.path}: dropping {found.torn}", RuntimeWarning, stacklevel=4)
            os.ftruncate(self.fd, found.end)
        if found.end == 0:
            self._append(_HEADER)
        elif found.unterminated:  # a whole last row that lacked only its newline: kept
            self._append("\n")
        self.lines, self.order = found.lines, found.order
        if found.duplicates:
            warnings.warn(f"{self.path}: removing {found.duplicates} duplicate row(s) (a key "
                          "already on an earlier line)", RuntimeWarning, stacklevel=4)
        if found.duplicates or found.old:
            self._replace(self.order)

    def _append(self, line: str):
        with self.lock:
            diskio.append(self.fd, line.encode(), self.path)

    def add(self, row: dict):
        """Append ``row`` (a dict over :data:`COLUMNS`) unless its key is already in the file."""
        key = row["key"]
        if key in self.lines:  # never duplicate (a run finished twice, e.g. after a retry)
            return
        line = _csv_line(_format(row[c]) for c in COLUMNS)
        self._append(line)
        self.lines[key] = line
        self.order.append(key)

    def rewrite(self, first: list[str]):
        """Rewrite the file with the rows of ``first`` (in that order), then the others."""
        head = [k for k in first if k in self.lines]
        seen = set(head)
        self._replace(head + [k for k in self.order if k not in seen])

    def _replace(self, keys: list[str]):
        """Atomically replace the file by the header and the rows ``keys``; keep it locked."""
        fd = diskio.replace(self.path, (_HEADER + "".join(self.lines[k] for k in keys)).encode(),
                            keep_open=True)
        os.close(self.fd)  # the old file and its lock; the new one is locked already
        self.fd = fd
        self.order = keys

    def close(self):
        if self.fd is not None:
            os.close(self.fd)  # releases the lock
            self.fd = None


def _open_locked(path: Path) -> int:
    """Open (create) ``path`` for appending and lock it (:func:`aimlib.files.open_output`'s refusals).

    The last component of ``path`` is never followed, so a link planted in a
    shared folder cannot send the rows into another file.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = files.open_output("--out", path, append=True)
            try:
                diskio.flock(fd, path)
                opened, named = os.fstat(fd), os.lstat(path)
                same = (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino)
            except FileNotFoundError:
                same = False
            except BaseException:
                os.close(fd)
                raise
            if same:  # not replaced by another sweep's final rewrite meanwhile
                return fd
            os.close(fd)
    except OSError as exc:
        raise ValueError(f"cannot open the results file {path}: {exc.strerror or exc}") from None
