"""Reading a spec file: a strict subset of YAML, bounded in size, nesting and expansion.

A spec is small and written by hand, so the reader refuses what YAML allows but
a spec never needs, each with a :class:`~aimlib.sweep.fields.SpecError` that
names the line:

* anchors and aliases (``&a``, ``*a``): nested aliases expand exponentially
  (a "billion laughs" file of 1 KB becomes gigabytes once printed or compared);
* a key repeated in one mapping (plain YAML keeps the last one silently);
* nesting deeper than :data:`MAX_DEPTH` levels, and files larger than
  :data:`MAX_BYTES`;
* a path that is not a regular file (a pipe, a device, a folder, a socket),
  refused without waiting on it (:func:`aimlib.files.open_input`).
"""
from __future__ import annotations

import os
from pathlib import Path

from .. import files
from .._optional import optional_import
from .fields import SpecError, shown

#: the largest spec file read (bytes)
MAX_BYTES = 1 << 20
#: the deepest nesting of lists and mappings in a spec file
MAX_DEPTH = 16


def _where(path: Path, node_or_event) -> str:
    return f"spec file {str(path)!r}, line {node_or_event.start_mark.line + 1}"


def _loader(yaml, path: Path):
    """A ``SafeLoader`` of the module ``yaml`` that refuses anchors, aliases, repeated keys and deep nesting."""
    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent, index):
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise SpecError(f"{_where(path, event)}: YAML anchors and aliases (&name, *name) "
                                "are not allowed in a spec; write the values out")
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise SpecError(f"{_where(path, event)}: lists and mappings nest deeper than "
                                f"{MAX_DEPTH} levels; a spec needs at most 4")
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, (str, int, float, bool)) or key is None:
                    if key in seen:
                        raise SpecError(f"{_where(path, key_node)}: the key {shown(key)} is "
                                        "repeated in one mapping; keep one of them")
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return Loader


def read_spec_file(path: Path):
    """The parsed contents of the YAML spec file ``path`` (a :class:`SpecError` for a bad file)."""
    try:
        with os.fdopen(files.open_input("spec file", path), "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
        text = raw.decode()
    except files.RefusedFile as exc:
        raise SpecError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise SpecError(f"cannot read spec file {str(path)!r}: {reason}") from None
    if len(raw) > MAX_BYTES:
        raise SpecError(f"spec file {str(path)!r} is larger than {MAX_BYTES} bytes; a spec is a "
                        "few lines (split a large grid into several specs)")
    yaml = optional_import("yaml", "reading a YAML sweep spec")
    try:
        data = yaml.load(text, Loader=_loader(yaml, path))  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "parse error"
        raise SpecError(f"spec file {str(path)!r} is not valid YAML{where}: {problem}") from None
    if data is None:
        raise SpecError(f"spec file {str(path)!r} is empty")
    return data
