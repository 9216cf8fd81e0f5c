"""The files aimlib writes and reads: regular files only, never through a link, never another user's.

In a folder that other users can write (``/tmp``, a group's scratch space) any
of them can create a name before you use it: a symbolic link there sends what
you write into a file of their choosing (one of yours, truncated and
overwritten), and a file they own is one they can read and change under you.
So every file aimlib writes -- a sweep's results and failures files, the
scripts' data, the benchmark records -- is opened by :func:`open_output`,
which refuses, before a byte is written:

* a symbolic link as the last component of the path (checked with ``lstat``,
  and the file is opened with ``O_NOFOLLOW``, so a link planted between the
  check and the open is not followed either);
* anything but a regular file (a directory, a pipe, a device, a socket);
* a file that belongs to another user;
* a file with more than one name (hard links: another name of the file may be
  one that you did not mean to change).

The checks run again on the opened descriptor (``fstat``), so the file written
is the file checked.  Inputs (a spec, a results or failures file) are opened
by :func:`open_input` with ``O_NONBLOCK``, so a pipe or a device refuses at
once instead of waiting forever, and anything but a regular file is refused
before a byte is read.  A refusal is a :class:`RefusedFile` (a
``ValueError``) that names the option or file and says what was found.
"""
from __future__ import annotations

import os
import stat

__all__ = ["RefusedFile", "check_output", "open_output", "open_input"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_SPECIAL = ((stat.S_ISDIR, "is a directory"), (stat.S_ISFIFO, "is a pipe (FIFO)"),
            (stat.S_ISCHR, "is a device"), (stat.S_ISBLK, "is a device"),
            (stat.S_ISSOCK, "is a socket"))


class RefusedFile(ValueError):
    """A path that aimlib does not read or write; ``finding`` says what was found there.

    The message is ``"<name> must be <requirement>, but '<path>' <finding>"``.
    """

    def __init__(self, name: str, path, requirement: str, finding: str):
        super().__init__(f"{name} must be {requirement}, but {str(os.fspath(path))!r} {finding}")
        self.finding = finding


def _check(st: os.stat_result, name: str, path, *, output: bool) -> None:
    """Raise :class:`RefusedFile` unless ``st`` is a regular file (``output``: yours, one name)."""
    if stat.S_ISLNK(st.st_mode):
        raise RefusedFile(name, path, "the file itself, not a symbolic link",
                          "is a symbolic link (never followed: a link can point at any file)")
    for test, finding in _SPECIAL:
        if test(st.st_mode):
            requirement = "a file" if test is stat.S_ISDIR else "a regular file"
            raise RefusedFile(name, path, requirement, finding)
    if not stat.S_ISREG(st.st_mode):  # pragma: no cover - a kind of file of another system
        raise RefusedFile(name, path, "a regular file", "is not a regular file")
    if not output:
        return
    uid = os.geteuid() if hasattr(os, "geteuid") else st.st_uid
    if st.st_uid != uid:
        raise RefusedFile(name, path, f"a file of your own (user id {uid})",
                          f"belongs to user id {st.st_uid}")
    if st.st_nlink > 1:
        raise RefusedFile(name, path, "a file with one name",
                          f"has {st.st_nlink} hard links (another name of it may be a file "
                          "you did not mean to change)")


def check_output(name: str, path) -> None:
    """Refuse (:class:`RefusedFile`) an existing ``path`` that :func:`open_output` would refuse.

    A missing file passes (it is created when written).  The last component of
    ``path`` is not followed (``lstat``).  Other errors (e.g. a path below a
    file) propagate as ``OSError``.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    _check(st, name, path, output=True)


def open_output(name: str, path, *, append: bool = False) -> int:
    """A descriptor of ``path`` open for writing, created (``0o644`` less the umask) if missing.

    The file is checked (:func:`check_output`), opened without following a link
    (``O_NOFOLLOW``) or blocking (``O_NONBLOCK``, which a regular file ignores),
    and checked again on the descriptor.  With ``append`` it is opened with
    ``O_APPEND`` for reading and appending; otherwise it is emptied, after the
    checks (never a truncation on opening).

    Raises
    ------
    RefusedFile
        ``path`` is a link, not a regular file, another user's, or has hard links.
    OSError
        It cannot be opened (``ELOOP``: a link appeared after the check).
    """
    check_output(name, path)
    flags = os.O_RDWR | os.O_CREAT | _NOFOLLOW | _NONBLOCK | _CLOEXEC
    fd = os.open(path, flags | (os.O_APPEND if append else 0), 0o644)
    try:
        _check(os.fstat(fd), name, path, output=True)
        if not append:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_input(name: str, path) -> int:
    """A descriptor of the regular file ``path`` open for reading; a pipe or device is not waited on.

    ``path`` is checked (``stat``: a link to a regular file is read), opened
    with ``O_NONBLOCK`` and checked again on the descriptor, so a pipe swapped
    in after the first check is refused too, never waited on.

    Raises
    ------
    RefusedFile
        ``path`` is a directory, a pipe, a device or a socket.
    OSError
        It cannot be opened (``FileNotFoundError`` when missing).
    """
    _check(os.stat(path), name, path, output=False)
    fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC)
    try:
        _check(os.fstat(fd), name, path, output=False)
    except BaseException:
        os.close(fd)
        raise
    return fd
