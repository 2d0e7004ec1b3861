"""Minimal-text edits to block-style YAML lists, so a user's comments and layout survive.

PyYAML drops comments on a load and dump, and a round-trip parser (ruamel.yaml) would be another
dependency for two list edits. So the edit is made on the text: find ``parent:`` / ``child:`` by
indentation, then insert the lines of one dumped item after the list's last item, or delete the
lines of the items that match (each item's lines are parsed on their own to decide). Everything
outside the deleted items stays as it was; a comment after an item belongs to what follows it.

Text editing YAML is only safe for the layouts it understands, so it is checked, not trusted:
``plan_list_edit`` re-parses the edited text and accepts it only if it loads to exactly the intended
data. Anything else (flow style such as ``hooks: {}`` or ``enabled: [a]``, an edit that parses
differently) falls back to dumping the intended data, and the caller is told the comments were
lost. A file that does not parse, or has the wrong type at ``parent`` or ``parent.child``, is an
``InputError`` and is never rewritten.
"""

from __future__ import annotations

import contextlib
import copy
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pipeline.errors import DistillError, InputError

# --------------------------------------------------------------------------- text edits


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _content(line: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith("#")


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """Index after the last content line of the block whose key line is ``lines[start]``."""
    end = start + 1
    for i in range(start + 1, len(lines)):
        if not _content(lines[i]):
            continue
        ind, s = _indent(lines[i]), lines[i].strip()
        if ind > indent or (ind == indent and (s == "-" or s.startswith("- "))):
            end = i + 1
        else:
            break
    return end


def _find_key(lines: list[str], key: str, lo: int, hi: int, indent: int) -> tuple[int, str] | None:
    pattern = re.compile(rf"^ {{{indent}}}{re.escape(key)}:(\s.*|)$")
    for i in range(lo, hi):
        m = pattern.match(lines[i].rstrip("\n"))
        if m:
            return i, m.group(1).strip()
    return None


def _child_indent(lines: list[str], lo: int, hi: int) -> int | None:
    return next((_indent(lines[i]) for i in range(lo, hi) if _content(lines[i])), None)


@dataclass
class _Located:
    lines: list[str]
    parent: int | None = None
    parent_end: int = 0
    child: int | None = None
    child_indent: int = 2
    child_end: int = 0
    item_indent: int | None = None


def _locate(text: str, parent: str, child: str) -> _Located | None:
    """Find ``parent: / child:`` in block style; ``None`` when the layout is beyond a text edit."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    loc = _Located(lines)
    found = _find_key(lines, parent, 0, len(lines), 0)
    if found is None:
        return loc
    loc.parent, rest = found
    if rest and not rest.startswith("#"):
        return None  # inline value such as `hooks: {}`: let the dump path handle it
    loc.parent_end = _block_end(lines, loc.parent, 0)
    loc.child_indent = _child_indent(lines, loc.parent + 1, loc.parent_end) or 2
    found = _find_key(lines, child, loc.parent + 1, loc.parent_end, loc.child_indent)
    if found is None:
        return loc
    loc.child, rest = found
    if rest and not rest.startswith("#"):
        return None
    loc.child_end = _block_end(lines, loc.child, loc.child_indent)
    first = next((i for i in range(loc.child + 1, loc.child_end) if _content(lines[i])), None)
    if first is not None:
        if not lines[first].strip().startswith("-"):
            return None
        loc.item_indent = _indent(lines[first])
    return loc


def _item_lines(item: object, indent: int) -> list[str]:
    body = yaml.safe_dump([item], sort_keys=False, default_flow_style=False, allow_unicode=True, width=4096)
    return [" " * indent + line + "\n" for line in body.splitlines()]


def text_add_item(text: str, parent: str, child: str, item: object) -> str | None:
    """Append ``item`` to the block list ``parent.child`` by inserting lines; ``None`` if unsure."""
    loc = _locate(text, parent, child)
    if loc is None:
        return None
    lines = loc.lines
    if loc.parent is None:
        sep = ["\n"] if lines and lines[-1].strip() else []
        return "".join([*lines, *sep, f"{parent}:\n", f"  {child}:\n", *_item_lines(item, 4)])
    if loc.child is None:
        ci = loc.child_indent
        new = [" " * ci + f"{child}:\n", *_item_lines(item, ci + 2)]
        return "".join(lines[: loc.parent_end] + new + lines[loc.parent_end :])
    indent = loc.item_indent if loc.item_indent is not None else loc.child_indent + 2
    return "".join(lines[: loc.child_end] + _item_lines(item, indent) + lines[loc.child_end :])


def text_remove_items(
    text: str, parent: str, child: str, match: Callable[[object], bool], *, keep_empty: bool
) -> str | None:
    """Delete the items of ``parent.child`` that ``match``; an emptied list becomes ``[]`` or goes."""
    loc = _locate(text, parent, child)
    if loc is None:
        return None
    if loc.child is None or loc.item_indent is None:
        return text
    lines, ii = loc.lines, loc.item_indent
    starts = [
        i for i in range(loc.child + 1, loc.child_end)
        if _content(lines[i]) and _indent(lines[i]) == ii and lines[i].strip().startswith("-")
    ]  # fmt: skip
    drop: set[int] = set()
    for n, s in enumerate(starts):
        e = starts[n + 1] if n + 1 < len(starts) else loc.child_end
        while e > s + 1 and not _content(lines[e - 1]):
            e -= 1  # trailing comments belong to whatever follows
        try:
            parsed = yaml.safe_load(textwrap.dedent("".join(lines[s:e])))
        except yaml.YAMLError:
            return None
        if isinstance(parsed, list) and len(parsed) == 1 and match(parsed[0]):
            drop.update(range(s, e))
    if not drop:
        return text
    if not any(_content(lines[i]) and i not in drop for i in range(loc.child + 1, loc.child_end)):
        # Every item went: keep an explicit empty list, or remove the key (and an emptied parent).
        if keep_empty:
            lines[loc.child] = " " * loc.child_indent + f"{child}: []\n"
        else:
            drop.add(loc.child)
            parent_line = loc.parent if loc.parent is not None else loc.child
            if not any(_content(lines[i]) and i not in drop for i in range(parent_line + 1, loc.parent_end)):
                drop.add(parent_line)
    return "".join(line for i, line in enumerate(lines) if i not in drop)


# --------------------------------------------------------------------------- planning an edit


def load_config(path: Path) -> tuple[str, dict[str, Any]]:
    """The file's text and data; a broken file raises ``InputError`` and is never rewritten."""
    if not path.exists():
        return "", {}
    text = path.read_text(encoding="utf-8")
    from pipeline.notes.frontmatter import FrontmatterLimit, parse_yaml

    try:
        parse_yaml(text)  # bounded first: an alias bomb or a 1000-level nest must not hang distill
    except FrontmatterLimit as exc:
        raise InputError(f"{path}: {str(exc).replace('frontmatter', 'the file')}, so distill left it untouched; "
                         "fix it (or restore a .bak), then run `distill hook install` again") from exc
    except DistillError:
        pass  # plain YAML errors (and a top level that is not a mapping) are reported below
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(
            f"{path} is not valid YAML, so distill left it untouched: {exc}. "
            "Fix it (or restore a .bak), then run `distill hook install` again."
        ) from exc
    if data is None:
        return text, {}
    if not isinstance(data, dict):
        raise InputError(
            f"{path}: expected a mapping at the top level, found {type(data).__name__}; left untouched."
        )
    return text, data


def _section(data: dict[str, Any], path: Path, parent: str, child: str) -> list[Any]:
    """``data[parent][child]`` as a list (creating neither); wrong types are an ``InputError``."""
    section = data.get(parent)
    if section is None:
        return []
    if not isinstance(section, dict):
        raise InputError(
            f"{path}: `{parent}:` should be a mapping, found {type(section).__name__}; left untouched."
        )
    value = section.get(child)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(
            f"{path}: `{parent}.{child}` should be a list, found {type(value).__name__}; left untouched."
        )
    return list(value)



def plan_list_edit(
    path: Path, parent: str, child: str, *, add: object = None, remove: Callable[[object], bool] | None = None,
    present: Callable[[object], bool] | None = None, keep_empty: bool = False,
) -> tuple[str, str, bool]:  # fmt: skip
    """Remove the items ``remove`` matches from ``parent.child``, then append ``add`` unless an
    item already satisfies ``present`` (default: equals ``add``). Nothing is written.

    Returns the file's text before and after, and False when the text edit failed its check and
    the data was re-dumped (comments lost).
    """
    old, data = load_config(path)
    items = _section(data, path, parent, child)
    kept = [i for i in items if not (remove and remove(i))]
    present = present or (lambda i: i == add)
    adding = add is not None and not any(present(i) for i in kept)
    want = [*kept, add] if adding else kept
    if want == items:
        return old, old, True
    expected = copy.deepcopy(data)
    if want or keep_empty:
        if not isinstance(expected.get(parent), dict):
            expected[parent] = {}
        expected[parent][child] = want
    else:
        expected[parent].pop(child, None)
        if not expected[parent]:
            del expected[parent]
    text: str | None = old
    if remove and len(kept) != len(items):
        text = text_remove_items(old, parent, child, remove, keep_empty=keep_empty or adding)
    if adding and text is not None:
        text = text_add_item(text, parent, child, add)
    if text is not None:
        with contextlib.suppress(yaml.YAMLError):
            if (yaml.safe_load(text) or {}) == expected:
                return old, text, True
    return old, yaml.safe_dump(expected, sort_keys=False, default_flow_style=False, allow_unicode=True), False
