"""Read and edit a note's YAML frontmatter the way a person's vault needs it.

Notes are shared with people and sync tools (Obsidian, git, gbrain), so two rules hold here:

* **Reading is bounded.** A frontmatter block a person or a tool edited may hold anything,
  including a YAML alias bomb (nine levels of ``&a [*b, *b, ...]`` hang PyYAML's constructor for
  minutes, five levels re-dump as megabytes). ``load_frontmatter`` refuses a block over
  ``MAX_BYTES``, more than ``MAX_ALIASES`` aliases or nesting deeper than ``MAX_DEPTH`` with a
  ``FrontmatterError`` before constructing anything, so one hostile note is reported and skipped.
* **Editing keeps every other byte.** ``edit_frontmatter`` replaces, adds or removes whole
  top-level keys and leaves the rest of the file (the user's own keys, their order, comments,
  quoting, the body) exactly as it was. The result is parsed back and compared with the intended
  data, so an edit that would change anything else raises instead of writing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from pipeline.errors import DistillError

#: Limits for frontmatter a person or a tool may have edited; distill's own notes stay far below.
MAX_BYTES = 256 * 1024
MAX_ALIASES = 100
MAX_DEPTH = 32

_OPEN = re.compile(r"\A---[ \t]*\r?\n")
_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.M)
#: A top-level key line: column 0, not a comment, list item, document marker or continuation.
_KEY_LINE = re.compile(r"""^(?![\s#\-]|\.\.\.|---)('(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|[^:#\s][^:#]*?)[ \t]*:(?=[ \t\r\n]|$)""")
#: Expanded size (nodes, counting each alias as a copy of what it names) past which a block is refused.
MAX_NODES = 20_000


class FrontmatterError(DistillError):
    """A note's frontmatter cannot be read safely or edited without touching other bytes."""


class FrontmatterLimit(FrontmatterError):
    """The frontmatter breaks a limit (size, aliases, depth, expansion): hostile or damaged.

    Unlike plain invalid YAML, which a re-render may replace, such a note is left as it is.
    """


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that counts aliases and nesting while composing, before any object is built.

    Dates stay the strings written: notes write them unquoted so Obsidian types them
    (``notes.render.YamlDate``), and every reader here expects the text, as before.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise FrontmatterLimit(f"more than {MAX_ALIASES} YAML aliases (an alias bomb?)")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise FrontmatterLimit(f"YAML nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_BoundedLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


#: libyaml's parser, when PyYAML was built with it: ~7x faster than the pure-Python one, which made
#: reading the frontmatter of the notes a run just wrote (archive index, links) a third of a cold run.
#: Its composer is C and counts nothing, so it only reads blocks that cannot break the limits (``_c_safe``).
_CLoader: type | None = None
if getattr(yaml, "__with_libyaml__", False):

    class _CBoundedLoader(yaml.CSafeLoader):  # type: ignore[misc, name-defined]
        """``_BoundedLoader``'s resolvers (dates stay strings) over libyaml's parser."""

    _CBoundedLoader.yaml_implicit_resolvers = _BoundedLoader.yaml_implicit_resolvers
    _CLoader = _CBoundedLoader

#: Characters both parsers read alike: newline, printable ASCII and printable non-ASCII; not tab, CR,
#: NEL, the Unicode line/paragraph separators or the BOM (whitespace, line breaks and byte order marks
#: are where libyaml and PyYAML disagree on odd input), nor anything unprintable or unpaired.
_C_UNSAFE_CHAR = re.compile(r"[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
#: One line of the YAML distill itself writes (``notes.render.dump_note``): ``key: value``, ``key:``
#: or a list item ``- value`` (at most two spaces in), where a value is one single- or double-quoted
#: line, ``[]``/``{}``, or a plain scalar that starts with no indicator and holds no ``: `` or `` #``.
_C_VALUE = (r"(?:'(?:[^'\n]|'')*'|\"(?:[^\"\\\n]|\\.)*\"|\[\]|\{\}"
            r"|[^\s\-?:,\[\]{}#&*!|>'\"%@`](?:[^\n#:]|:(?! |$)|(?<! )#)*?)")
_C_LINE = re.compile(rf"(?:[A-Za-z_][A-Za-z0-9_-]*:(?: +{_C_VALUE})?|(?:  )?- {_C_VALUE})[ ]*")


def _c_safe(block: str) -> bool:
    """Whether libyaml may read ``block``: it holds only the YAML distill writes (``_C_LINE``).

    Such a block has no anchor, alias, tag, complex key, block scalar or flow collection, and nests
    three deep at most, so the limits cannot be reached and the two parsers build the same data (a
    differential fuzz found them parting ways on bare ``!`` tags, ``? `` keys and block scalar
    headers, all outside this subset). Anything else, including notes a person edited into other
    shapes, takes the counting loader.
    """
    if "&" in block or "*" in block or "!" in block or _C_UNSAFE_CHAR.search(block):
        return False
    return all(_C_LINE.fullmatch(line) for line in block.split("\n") if line)


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Nodes the value would have if every alias were copied out: what re-dumping it would write."""
    key = id(node)
    if key not in memo:
        memo[key] = 1  # a cycle counts once; the loader builds it as a shared reference
        if isinstance(node, yaml.SequenceNode):
            memo[key] += sum(_expanded_size(child, memo) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            memo[key] += sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
        memo[key] = min(memo[key], MAX_NODES + 1)
    return memo[key]


def split_note(text: str) -> tuple[str, str, str] | None:
    """``(opening, yaml, rest)`` where ``rest`` starts at the closing ``---``; None without frontmatter."""
    opened = _OPEN.match(text)
    if not opened:
        return None
    closed = _CLOSE.search(text, opened.end())
    if not closed:
        return None
    return text[: opened.end()], text[opened.end() : closed.start()], text[closed.start() :]


def parse_yaml(block: str) -> dict[str, Any]:
    """The mapping a frontmatter block holds, within the limits; ``{}`` for an empty block."""
    if len(block.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise FrontmatterLimit(f"frontmatter larger than {MAX_BYTES // 1024} KiB")
    fast = _CLoader is not None and _c_safe(block)
    loader = _CLoader(block) if fast else _BoundedLoader(block)
    try:
        node = loader.get_single_node()
        # Without aliases a block holds at most about one node per character, so a short one cannot
        # expand past MAX_NODES, and counting (a Python walk over every node) is skipped.
        small = fast and len(block) * 4 < MAX_NODES
        if node is not None and not small and _expanded_size(node, {}) > MAX_NODES:
            raise FrontmatterLimit(f"frontmatter expands to more than {MAX_NODES} values (an alias bomb?)")
        data = None if node is None else loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise FrontmatterError(f"frontmatter is not valid YAML ({exc.__class__.__name__})") from exc
    except RecursionError as exc:
        raise FrontmatterLimit("frontmatter nests too deeply") from exc
    finally:
        loader.dispose()
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FrontmatterError("frontmatter is not a mapping of keys to values")
    return data


def load_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """(metadata, body) of a note's text, read within the limits. No frontmatter: ``({}, text)``."""
    parts = split_note(text)
    if parts is None:
        return {}, text
    _, block, rest = parts
    body = _CLOSE.sub("", rest, count=1).lstrip("\r\n")
    return parse_yaml(block), body


def load_written(text: str, meta: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """``load_frontmatter(text)`` for a ``text`` that ``notes.render.dump_note`` just wrote from ``meta``.

    The worker that rendered a note already holds its data, and parsing the YAML back was most of
    what indexing the note cost. Data YAML writes and reads back unchanged (strings of printable
    characters and newlines, which include the ``YamlDate`` strings this loader reads as text,
    whole numbers, finite floats, booleans, null, lists and string-keyed mappings of those) is
    returned as it would be read; anything else, and any block long enough that the loader would
    count its nodes, is parsed as before. ``tests/test_frontmatter.py`` fuzzes the two against
    each other.
    """
    parts = split_note(text)
    if parts is None:
        return load_frontmatter(text)
    _, block, rest = parts
    data = _as_read(dict(meta)) if len(block) * 4 < MAX_NODES else _UNSURE
    if data is _UNSURE:
        return load_frontmatter(text)
    return data, _CLOSE.sub("", rest, count=1).lstrip("\r\n")


#: ``_as_read``'s answer for a value whose YAML round trip it does not vouch for.
_UNSURE: Any = object()
#: Spaces other than U+0020 and the invisible formatting marks: the emitter keeps them at a scalar's
#: end while the loader may strip them (a fuzz found ``"x\u3000"`` in a nested list read back as ``"x"``).
_ODD_SPACE = re.compile(r"[\xa0\xad\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\ufeff]")


def _as_read(value: Any) -> Any:
    """What the bounded loader reads back for ``value`` as distill dumps it, or ``_UNSURE``."""
    texts: list[str] = []
    data = _as_data(value, texts)
    # Line breaks other than \n, tabs, unprintable and unpaired characters are where a round trip
    # changes or refuses a string (NEL folds to a space, a lone surrogate fails to load). One search
    # over every string (keys too) joined by \n, which is allowed, instead of one per string.
    joined = "\n".join(texts)
    if data is _UNSURE or _C_UNSAFE_CHAR.search(joined) or _ODD_SPACE.search(joined):
        return _UNSURE
    return data


def _as_data(value: Any, texts: list[str]) -> Any:
    """``value`` as plain data of the types YAML round-trips, its strings added to ``texts``; else ``_UNSURE``."""
    kind = type(value)
    if kind is str:
        texts.append(value)
        return value
    if value is None or kind is bool or kind is int:
        return value
    if kind is float:
        return value if value == value and value not in (float("inf"), float("-inf")) else _UNSURE
    if isinstance(value, str):  # a str subclass (``YamlDate``) is written as its text and read as a str
        texts.append(value)
        return str(value)
    if kind is list or kind is tuple:
        items = [_as_data(v, texts) for v in value]
        return _UNSURE if any(v is _UNSURE for v in items) else items
    if kind is dict:
        if not all(isinstance(k, str) for k in value):
            return _UNSURE
        texts.extend(value)
        mapping = {str(k): _as_data(v, texts) for k, v in value.items()}
        return _UNSURE if any(v is _UNSURE for v in mapping.values()) else mapping
    return _UNSURE


def dump_value(key: str, value: Any) -> str:
    """One top-level ``key: value`` entry as distill writes frontmatter (see ``notes.render``)."""
    from pipeline.notes.render import dump_note

    return dump_note({key: value}, "").split("---\n", 2)[1]


def _segments(block: str) -> list[tuple[str | None, str]]:
    """The block cut into (key, text) runs: each top-level key with its continuation lines.

    Lines before the first key (comments, blanks) form a run with key None.
    """
    runs: list[tuple[str | None, str]] = [(None, "")]
    for line in block.splitlines(keepends=True):
        found = _KEY_LINE.match(line)
        if found:
            raw = found.group(1)
            key = yaml.safe_load(raw) if raw[:1] in "'\"" else raw.strip()
            runs.append((str(key), line))
        else:
            key, text = runs[-1]
            runs[-1] = (key, text + line)
    return runs


def edit_frontmatter(text: str, values: Mapping[str, Any] | None = None, remove: Iterable[str] = ()) -> str:
    """``text`` with top-level keys set to ``values`` (replaced in place, or appended at the end of the
    block) and keys in ``remove`` dropped; every other byte stays as it was."""
    values = dict(values or {})
    remove = [k for k in remove if k not in values]
    parts = split_note(text)
    if parts is None:
        raise FrontmatterError("the note has no frontmatter block to edit")
    opening, block, rest = parts
    before = parse_yaml(block)
    runs = _segments(block)
    newline = "\r\n" if "\r\n" in block else "\n"
    out: list[str] = []
    done: set[str] = set()
    for key, run in runs:
        if key is not None and key in remove:
            continue
        if key is not None and key in values:
            if key not in done:  # a duplicated key (YAML keeps the last) is written once
                out.append(_entry(key, values[key], newline))
            done.add(key)
            continue
        out.append(run)
    if out and out[-1] and not out[-1].endswith("\n"):
        out[-1] += newline
    out.extend(_entry(k, v, newline) for k, v in values.items() if k not in done)
    new_block = "".join(out)
    expected = {k: v for k, v in before.items() if k not in remove}
    expected.update(values)
    try:
        got = parse_yaml(new_block)
    except FrontmatterError:
        got = None  # e.g. another key aliased the value that was replaced
    if got is None or _plain(got) != _plain(expected):
        raise FrontmatterError("editing the frontmatter in place would change other keys; edit it by hand")
    return opening + new_block + rest


def _entry(key: str, value: Any, newline: str) -> str:
    entry = dump_value(key, value)
    return entry.replace("\n", newline) if newline != "\n" else entry


def _plain(value: Any) -> Any:
    """Compare YAML data the way it reads: tuples as lists."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def read_key(text: str, key: str) -> Any:
    """The value of one top-level key, parsing only that key's lines (within the same limits).

    For a key distill owns and reads often (``cold``): the whole block of a long note took ~15 ms
    to parse per read. Falls back to the whole block when the key's lines could lean on the rest
    (an alias, an anchor, a duplicated key). ``None`` when absent.
    """
    parts = split_note(text)
    if parts is None:
        return None
    runs = [run for k, run in _segments(parts[1]) if k == key]
    if not runs:
        return None
    if len(runs) > 1 or "*" in runs[0] or "&" in runs[0]:
        return parse_yaml(parts[1]).get(key)
    return parse_yaml(runs[0]).get(key)


def set_key(text: str, key: str, value: Any) -> str:
    """``edit_frontmatter(text, {key: value})`` that parses only the key's own lines.

    Every other byte stays as it was by construction (only the key's run of lines is replaced or
    appended); the new run is parsed back and compared with ``value``. Whenever the block holds
    anchors or aliases (another key could refer into the replaced lines) or the key twice, the
    whole-block ``edit_frontmatter`` decides instead.
    """
    parts = split_note(text)
    if parts is None:
        raise FrontmatterError("the note has no frontmatter block to edit")
    opening, block, rest = parts
    runs = _segments(block)
    mine = [i for i, (k, _) in enumerate(runs) if k == key]
    if len(mine) > 1 or "*" in block or "&" in block:
        return edit_frontmatter(text, {key: value})
    newline = "\r\n" if "\r\n" in block else "\n"
    entry = _entry(key, value, newline)
    if _plain(parse_yaml(entry).get(key)) != _plain(value):
        raise FrontmatterError(f"{key}: the value does not survive YAML; edit it by hand")
    texts = [run for _, run in runs]
    if mine:
        texts[mine[0]] = entry
    else:
        if texts and texts[-1] and not texts[-1].endswith("\n"):
            texts[-1] += newline
        texts.append(entry)
    return opening + "".join(texts) + rest
