"""Writes of the sweep's files: whole lines or nothing, atomic replacement, clear errors.

:func:`append` writes a line to a file opened with ``O_APPEND`` and ``fsync``-s
it; if the write fails part way (a full disk, a quota, an I/O error) the file
is cut back to its previous size, so a ``csv`` reader never sees a torn row,
and :class:`StorageError` says which file and how much space is left.
:func:`replace` writes a new file under a fresh hidden name beside the old one,
created with ``O_EXCL`` (never an existing file or a link planted there), and
renames it over it (a failed write removes the temporary file and leaves the
old file as it was); a path that :func:`aimlib.files.check_output` refuses (a
symbolic link, another user's file) is not replaced.
"""
from __future__ import annotations

import errno
import os
import secrets
import shutil
from pathlib import Path

from .. import files

try:  # POSIX only: without it (Windows) a results file is not locked
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

_NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


class StorageError(OSError):
    """A sweep file could not be written; nothing partial was left in it.

    The message names the file and, for a full disk or quota, the free space;
    ``errno`` is that of the failed write.
    """

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.errno = code


def _free(path: Path) -> str:
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:  # pragma: no cover - the folder vanished meanwhile
        return "unknown space"
    return f"{free / 2**20:.1f} MiB"


def storage_error(exc: OSError, path: Path) -> StorageError:
    """The :class:`StorageError` of a failed write of ``path``."""
    if exc.errno in _NO_SPACE:
        reason = f"no space left on its device ({_free(path)} free)"
        advice = "free some space"
    else:
        reason = exc.strerror or str(exc)
        advice = "make the file and its folder writable (or choose another --out)"
    return StorageError(f"cannot write {path}: {reason}; nothing partial was written: {advice} "
                        "and run the same command again to resume", exc.errno)


def write_all(fd: int, data: bytes):
    """Write all of ``data`` to ``fd`` (``os.write`` may write less than asked)."""
    written = 0
    while written < len(data):
        written += os.write(fd, data[written:])


def append(fd: int, data: bytes, path: Path):
    """Append ``data`` to ``path``, open as ``fd`` with ``O_APPEND``, and fsync it; all or nothing.

    Raises
    ------
    StorageError
        The write failed; the file was cut back to its size before the call.
    """
    size = os.fstat(fd).st_size
    try:
        write_all(fd, data)
        os.fsync(fd)
    except OSError as exc:
        os.ftruncate(fd, size)
        raise storage_error(exc, path) from None


def replace(path: Path, data: bytes, *, keep_open: bool = False) -> int | None:
    """Atomically replace ``path`` by a file holding ``data``.

    With ``keep_open`` the new file stays open for appending, locked
    (:func:`flock`), and its descriptor is returned; otherwise it is closed.

    Raises
    ------
    aimlib.files.RefusedFile
        ``path`` is a symbolic link, not a regular file, another user's or has
        hard links; nothing was written.
    StorageError
        The new file could not be written; ``path`` is as it was.
    """
    try:
        files.check_output("--out", path)
    except OSError as exc:
        raise storage_error(exc, path) from None
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND  # O_EXCL: a link is not followed
    while True:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, flags, 0o644)
            break
        except FileExistsError:  # pragma: no cover - a name drawn twice
            continue
        except OSError as exc:
            raise storage_error(exc, path) from None
    try:
        if keep_open:
            flock(fd, tmp)
        write_all(fd, data)
        os.fsync(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, StorageError):
            raise storage_error(exc, path) from None
        raise
    fsync_dir(path.parent)
    if keep_open:
        return fd
    os.close(fd)
    return None


def read_all(fd: int) -> bytes:
    """The whole contents of ``fd`` (read to its end: special files report a size of 0)."""
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def flock(fd: int, path: Path):
    """Lock ``fd`` exclusively, or raise ``ValueError`` if another sweep holds the lock."""
    if fcntl is None:  # pragma: no cover - Windows: no locking
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise ValueError(f"{path} is being written by another sweep (it is locked)") from None


def fsync_dir(path: Path):
    """Make a rename in the folder ``path`` durable (where the system allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - not supported everywhere
        pass
    finally:
        os.close(fd)
