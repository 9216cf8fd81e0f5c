"""Printed results that fit the book's output box: fixed-width tables and packed lines.

The chapters print their numbers as plain text in the HTML output box of the book's theme;
a line wider than the box is hidden behind a sideways scroll on screen and cut in print.
:func:`format_table` lays rows out as a text table no wider than the box and
:func:`pack_line` packs short pieces (``"d = 50: 0.12"``) into lines that fit it. Both only
lay text out: the numbers are formatted by the caller's format specifications, unchanged.
"""
from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence

import numpy as np

from . import _validate as v

__all__ = ["OUTPUT_WIDTH", "format_table", "mean_se", "pack_line"]

#: Characters per line of a cell output. In the book's theme (pydata-sphinx-theme, the
#: output ``pre``) the box is 688 px wide at a 1280 px window, of which 2 x 1rem = 32 px
#: are padding, leaving 656 px of text; the text is set at ``font-size: .875em`` = 14 px in
#: the theme's monospace stack, whose widest face (DejaVu Sans Mono, Menlo: 0.602 em per
#: character) takes 14 x 0.602 = 8.43 px a character: 656 / 8.43 = 77.8, so 77 fit.
OUTPUT_WIDTH = 77


def _columns(rows) -> dict[str, list]:
    """``rows`` (a list of dicts with the same keys, or a dict of equal-length columns) as columns."""
    if isinstance(rows, Mapping):
        cols = {str(k): list(c) for k, c in rows.items()}
        lengths = {len(c) for c in cols.values()}
        if len(lengths) > 1:
            raise ValueError(f"rows: the columns have different lengths {sorted(lengths)}")
    elif isinstance(rows, Sequence) and not isinstance(rows, str) and all(isinstance(r, Mapping) for r in rows):
        keys = list(rows[0]) if rows else []
        for i, r in enumerate(rows):
            if list(r) != keys:
                raise ValueError(f"rows: row {i} has the keys {list(r)}, row 0 has {keys}")
        cols = {str(k): [r[k] for r in rows] for k in keys}
    else:
        raise TypeError(f"rows must be a list of dicts or a dict of columns, got {type(rows).__name__}")
    if not cols or not next(iter(cols.values())):
        raise ValueError("rows must hold at least one row and one column")
    return cols


def _cell(x, spec: str) -> tuple[str, bool]:
    """One entry as text (``format(x, spec)``) and whether it is a number (right-aligned)."""
    number = isinstance(x, (numbers.Number, np.number)) and not isinstance(x, bool)
    spec = spec if number and not isinstance(x, (numbers.Integral, np.integer)) else ""
    try:
        return format(x, spec), number
    except (TypeError, ValueError) as err:
        raise ValueError(f"formats: {spec!r} cannot format {x!r} ({err})") from None


def format_table(rows, *, formats=None, width: int = OUTPUT_WIDTH, gap: int = 2) -> str:
    """Lay ``rows`` out as a fixed-width text table that fits ``width`` characters.

    Parameters
    ----------
    rows : list of dict or dict of sequences
        The rows, as dicts with the same keys in the same order (the keys are the header),
        or the columns, as a dict from header to a sequence (all of one length).
    formats : str or dict, optional
        Format specification of the real numbers (``".4f"``), one for all columns or a dict
        from header to specification (columns not named print with ``str``). Integers and
        text print as they are; text may carry numbers the caller formatted.
    width : int
        The widest line allowed, at least 1 (default :data:`OUTPUT_WIDTH`, the book's box).
    gap : int
        Spaces between two columns, at least 1.

    Returns
    -------
    str
        The header line and one line per row, without a trailing newline. Column ``j`` is
        ``w_j = max(len(header_j), max_i len(cell_ij))`` wide; numbers are right-aligned,
        text left-aligned, and the header is aligned like its column.

    Raises
    ------
    ValueError
        If the table, ``sum_j w_j + gap (columns - 1)`` characters wide, exceeds ``width``;
        if the rows are empty or ragged; if a specification cannot format its entry.
    TypeError
        If ``rows`` is neither form.
    """
    width = v.integer("width", width, minimum=1)
    gap = v.integer("gap", gap, minimum=1)
    cols = _columns(rows)
    if formats is not None and not isinstance(formats, (str, Mapping)):
        raise TypeError(f"formats must be a format string or a dict, got {type(formats).__name__}")
    unknown = set(formats) - set(cols) if isinstance(formats, Mapping) else set()
    if unknown:
        raise ValueError(f"formats names columns that are not in rows: {sorted(unknown)}")
    lines = [[] for _ in range(len(next(iter(cols.values()))) + 1)]
    for name, column in cols.items():
        spec = formats if isinstance(formats, str) else (formats or {}).get(name, "")
        cells = [_cell(x, spec) for x in column]
        w = max(len(name), *(len(text) for text, _ in cells))
        right = all(number for _, number in cells)
        for line, text in zip(lines, [name] + [text for text, _ in cells]):
            line.append(text.rjust(w) if right else text.ljust(w))
    out = [(" " * gap).join(line).rstrip() for line in lines]
    widest = max(len(line) for line in out)
    if widest > width:
        raise ValueError(f"width: the table needs {widest} characters, more than width = {width}; "
                         "print fewer columns, shorter headers or fewer digits")
    return "\n".join(out)


def mean_se(values, digits: int = 4) -> str:
    r"""The mean of ``values`` and, in brackets, its standard error in units of the last digit shown.

    ``0.0490(4)`` is :math:`\bar v = 0.0490` with :math:`s/\sqrt{n} = 0.0004`, where
    :math:`s^2 = \sum_i (v_i - \bar v)^2/(n - 1)` over the ``n`` values (seeds, data sets).

    Parameters
    ----------
    values : array-like of float
        The measurements, one per independent run; one value prints its mean alone, none ``"-"``.
    digits : int
        Digits after the decimal point, ``0 <= digits <= 12``.

    Returns
    -------
    str
    """
    digits = v.integer("digits", digits, minimum=0, maximum=12)
    values = np.asarray(values, dtype=float).ravel()
    if values.size < 2:
        return f"{values.mean():.{digits}f}" if values.size else "-"
    err = values.std(ddof=1) / np.sqrt(values.size) * 10**digits
    return f"{values.mean():.{digits}f}({err:.0f})"


def pack_line(parts, *, head: str = "", sep: str = ", ", width: int = OUTPUT_WIDTH, indent: int = 2) -> str:
    """Join the text pieces ``parts`` with ``sep`` after ``head``, breaking lines to fit ``width`` characters.

    The first line starts with ``head`` and the first piece (the piece goes to the next
    line, indented, if both do not fit). Pieces are placed greedily: a
    piece goes on the current line if the line with ``sep`` and the piece stays within
    ``width`` (counting the stripped separator that may yet end it), else it starts a new
    line indented by ``indent`` spaces, and the separator, stripped of trailing spaces,
    ends the previous line. A piece is never split: ``pack_line(text.split(" "), sep=" ")``
    wraps a text at its spaces.

    Parameters
    ----------
    parts : sequence of str
        The pieces, at least one.
    head : str
        Text before the first piece (``"alpha = 0.1: "``), on the first line.
    sep : str
        The separator between two pieces on one line.
    width : int
        The widest line allowed, at least 1 (default :data:`OUTPUT_WIDTH`).
    indent : int
        Spaces before each continuation line, ``0 <= indent < width``.

    Returns
    -------
    str
        The lines, joined by newlines.

    Raises
    ------
    ValueError
        If a piece (with the indent, on a continuation line) cannot fit ``width``.
    """
    width = v.integer("width", width, minimum=1)
    indent = v.integer("indent", indent, minimum=0, maximum=width - 1)
    if isinstance(parts, str) or not isinstance(parts, Sequence) or not parts:
        raise ValueError("parts must be a non-empty sequence of strings")
    if not all(isinstance(p, str) for p in (head, sep, *parts)):
        raise TypeError("head, sep and parts must be strings")
    end, lines = sep.rstrip(), [head + parts[0]]
    if head and len(lines[0] + (end if len(parts) > 1 else "")) > width:
        lines = [head.rstrip(), " " * indent + parts[0]]
    for i, piece in enumerate(parts[1:], 2):
        if len(lines[-1] + sep + piece + (end if i < len(parts) else "")) <= width:
            lines[-1] += sep + piece
        else:
            lines[-1] = (lines[-1] + sep).rstrip()
            lines.append(" " * indent + piece)
    too_wide = [line for line in lines if len(line) > width]
    if too_wide:
        raise ValueError(f"parts: the piece {too_wide[0].strip()!r} needs {len(too_wide[0])} characters "
                         f"with its indent, more than width = {width}")
    return "\n".join(lines)
