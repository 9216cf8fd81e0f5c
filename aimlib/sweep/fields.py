"""Checks of single spec fields; every error names the field (``spec field 'alpha[1]': ...``)."""
from __future__ import annotations

import difflib
import reprlib
from typing import Any, Callable, Iterable, Mapping

from .._validate import shortened

#: the longest message of a check, and of a value's repr in a message (characters)
MAX_MESSAGE = 400
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 3, 60, 60, 40
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6


class SpecError(ValueError):
    """An invalid sweep spec; the message names the offending field."""


def shown(value) -> str:
    """``repr(value)``, shortened (``'...'``): a huge or deeply nested value stays one short line."""
    return _REPR.repr(value)


def fail(fieldname: str, message: str):
    """Raise :class:`SpecError` for ``fieldname`` (shortened to one line of :data:`MAX_MESSAGE`)."""
    raise SpecError(f"spec field {shortened(fieldname)!r}: {shortened(message, MAX_MESSAGE)}")


def checked(fieldname: str, check: Callable, value, *args, **kwargs):
    """``check(fieldname, value, ...)`` (an :mod:`aimlib._validate` check), its error as a SpecError.

    The check's message ``'<name> must be ...'`` becomes ``spec field '<field>': must be ...``.
    """
    try:
        return check(fieldname, value, *args, **kwargs)
    except (TypeError, ValueError) as exc:
        _, sep, rest = str(exc).partition(" must ")
        fail(fieldname, f"must {rest}" if sep else str(exc))


def _hint(value, allowed: list) -> str:
    if not isinstance(value, str) or len(value) > 80:  # no close match, and difflib is quadratic
        return ""
    close = difflib.get_close_matches(value, allowed, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def choice(fieldname: str, value, allowed: tuple):
    """``value`` if it is one of ``allowed``, else a SpecError with the closest match."""
    if not isinstance(value, str) or value not in allowed:
        fail(fieldname, f"must be one of {', '.join(map(repr, allowed))}, got {shown(value)}"
                        f"{_hint(value, list(allowed))}")
    return value


def unknown_keys(where: str, keys: Iterable, allowed: Iterable):
    """Refuse any of ``keys`` that is not ``allowed`` (``where`` is the mapping's field)."""
    allowed = list(allowed)
    for k in keys:
        if k not in allowed:
            name = f"{where}.{k}" if where else str(k)
            fail(name, f"unknown key{_hint(k, allowed)}; allowed: {', '.join(allowed)}")


def as_list(fieldname: str, value) -> list[tuple[str, Any]]:
    """``[(field[i], item), ...]`` for a list, ``[(field, value)]`` for a scalar; ``[]`` is refused."""
    if isinstance(value, (list, tuple)):
        if len(value) == 0:
            fail(fieldname, "must not be an empty list")
        return [(f"{fieldname}[{i}]", x) for i, x in enumerate(value)]
    if isinstance(value, (Mapping, set)):
        fail(fieldname, f"must be a value or a list of values, got {type(value).__name__}")
    return [(fieldname, value)]


def unique(values: Iterable) -> tuple:
    """The values in their first order, without repeats (one hash per value: linear time)."""
    return tuple(dict.fromkeys(values))


def grid_axis(fieldname: str, value, check: Callable, *args, **kwargs) -> tuple:
    """A scalar or a list, each item ``checked`` with ``check``, repeats removed."""
    return unique(checked(f, check, x, *args, **kwargs) for f, x in as_list(fieldname, value))
