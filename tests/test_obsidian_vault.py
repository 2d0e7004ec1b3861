"""The output read as an Obsidian vault reads it (issue 21): every wikilink resolves, every property
has the type Obsidian infers, tags are lists without ``#``, and nothing under ``.obsidian/`` changes.

The vault is built the way a user builds one: the installed ``distill --all --out <vault>`` over the
real fixture databases (``tests/shell.py``), into a folder that already holds an ``.obsidian/``.
The reader below follows Obsidian's documented rules (peers-and-formats.md D.1, obsidian-help
"Internal links", "Properties", "Tags"):

* **Links.** ``[[path]]``, ``[[path|shown]]``, ``[[path#heading]]`` and embeds ``![[...]]`` in the
  body outside code, and in text or list properties. A link path resolves to a vault-relative file
  (``path.md``), to a file relative to the linking note's folder, or, like Obsidian's shortest-path
  links, to the one file whose vault path ends with it. Aliases are *not* link targets: Obsidian
  inserts ``[[File|alias]]`` for them because ``[[alias]]`` resolves to nothing.
* **Properties.** Text, List, Number, Checkbox, Date (``YYYY-MM-DD``) and Date & time
  (``YYYY-MM-DDTHH:mm[:ss]``); one type per property name across the vault; no nested properties
  (maps, or lists inside lists), which Obsidian shows only in source mode.
* **Tags.** A list; each made of letters, digits, ``_``, ``-``, ``/``, with at least one
  non-digit, and no ``#`` or space.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from tests.shell import run_distill

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_DBS = [ROOT / "fixtures" / "hermes" / "state-v31.db", *sorted((ROOT / "fixtures" / "db").glob("*.db"))]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)")
_WIKILINK = re.compile(r"!?\[\[([^\[\]]*?)\]\]")
_TAG = re.compile(r"^[\w/-]+$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$")

#: What distill's properties must be read as.
EXPECTED = {
    "date": "date", "started_at": "datetime", "ended_at": "datetime", "distilled_at": "datetime",
    "tags": "list", "aliases": "list", "projects": "list", "output_files": "list", "deleted_files": "list",
    "message_count": "number", "input_tokens": "number", "output_tokens": "number", "generations": "number",
    "cost_usd": "number", "title": "text", "id": "text",
}  # fmt: skip


class _VaultLoader(yaml.SafeLoader):
    """YAML as a vault reads it: a date stays the string written; Obsidian types it by its shape."""


_VaultLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _tree_digest(folder: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tuple[str, int]]]:
    home = tmp_path_factory.mktemp("obsidian-home")
    vault = home / "Vault"
    (vault / ".obsidian" / "plugins").mkdir(parents=True)
    (vault / ".obsidian" / "app.json").write_text('{"alwaysUpdateLinks": true}\n')
    (vault / ".obsidian" / "types.json").write_text('{"types": {"aliases": "aliases", "tags": "tags"}}\n')
    (vault / "Welcome.md").write_text("# Welcome\n\nA note of the user's own.\n")
    before = _tree_digest(vault / ".obsidian")
    for i, fixture in enumerate(FIXTURE_DBS):
        db = home / f"state-{i}.db"  # a copy: never the fixture itself
        shutil.copy(fixture, db)
        res = run_distill("--all", "--db", str(db), "--out", str(vault), "--summarizer", "extractive", home=home)
        assert res.returncode == 0, res.stderr
    return vault, before


def _notes(vault: Path) -> list[Path]:
    return sorted(p for p in vault.rglob("*.md") if ".obsidian" not in p.parts and ".distill" not in p.parts)


def _split(text: str) -> tuple[dict[str, Any], str]:
    if not text.startswith("---\n"):
        return {}, text
    end = text.index("\n---", 4)
    meta = yaml.load(text[4:end], Loader=_VaultLoader) or {}  # a SafeLoader subclass
    return meta, text[end + 4 :]


def _body_links(body: str) -> list[str]:
    """Wikilink targets in Markdown outside fenced code and code spans, as Obsidian parses them."""
    found: list[str] = []
    fence: str | None = None
    for line in body.split("\n"):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * 3
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        found += _WIKILINK.findall(_CODE_SPAN.sub("", line.replace("\\[", "")))
    return found


def _property_links(meta: dict[str, Any]) -> list[str]:
    values = [v for value in meta.values() for v in (value if isinstance(value, list) else [value])]
    return [link for v in values if isinstance(v, str) for link in _WIKILINK.findall(v)]


def _resolves(link: str, source: Path, vault: Path, files: set[str]) -> bool:
    path = re.split(r"[|#^]", link, maxsplit=1)[0].strip()
    if not path:
        return True  # [[#Heading]]: a heading of the same note
    want = path if PurePosixPath(path).suffix else f"{path}.md"
    if want in files:
        return True
    relative = (source.parent / want).resolve()
    if relative.is_relative_to(vault) and str(relative.relative_to(vault)) in files:
        return True
    return sum(f == want or f.endswith("/" + want) for f in files) == 1


def _kind(value: Any) -> str | None:
    if value is None or value == []:
        return None  # empty: fits any type
    if isinstance(value, bool):
        return "checkbox"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "nested"
    if _DATE.match(value):
        return "date"
    if _DATETIME.match(value):
        return "datetime"
    return "text"


def test_every_wikilink_resolves(vault: tuple[Path, Any]) -> None:
    root, _ = vault
    files = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".obsidian" not in p.parts}
    notes = _notes(root)
    assert len(notes) > 15
    dangling, count = [], 0
    for note in notes:
        meta, body = _split(note.read_text("utf-8"))
        for link in [*_property_links(meta), *_body_links(body)]:
            count += 1
            if not _resolves(link, note, root, files):
                dangling.append(f"{note.relative_to(root)}: [[{link}]]")
    assert count > 10, "the fixtures have lineage: some notes must link to others"
    assert not dangling, "\n".join(dangling)


def test_every_property_has_the_type_obsidian_infers(vault: tuple[Path, Any]) -> None:
    root, _ = vault
    seen: dict[str, dict[str, str]] = {}
    problems: list[str] = []
    for note in _notes(root):
        meta, _ = _split(note.read_text("utf-8"))
        rel = str(note.relative_to(root))
        for key, value in meta.items():
            kind = _kind(value)
            if kind is None:
                continue
            if kind == "list" and any(isinstance(v, list | dict) for v in value):
                problems.append(f"{rel}: {key} nests a list or map in a list")
            if kind == "nested":
                problems.append(f"{rel}: {key} is a nested property")
            if key in EXPECTED and kind != EXPECTED[key]:
                problems.append(f"{rel}: {key}={value!r} reads as {kind}, not {EXPECTED[key]}")
            seen.setdefault(key, {}).setdefault(kind, rel)
    problems += [f"{key} has several types across the vault: {kinds}" for key, kinds in seen.items() if len(kinds) > 1]
    assert {"date", "started_at", "tags", "aliases", "message_count"} <= set(seen)
    assert not problems, "\n".join(problems)


def test_tags_are_lists_of_valid_tags_without_hash(vault: tuple[Path, Any]) -> None:
    root, _ = vault
    for note in _notes(root):
        meta, _ = _split(note.read_text("utf-8"))
        if "tags" not in meta:
            continue
        tags = meta["tags"]
        assert isinstance(tags, list), note
        for tag in tags:
            assert isinstance(tag, str) and _TAG.match(tag) and not tag.isdigit(), (note, tag)
            assert not tag.startswith("#") and " " not in tag


def test_nothing_under_dot_obsidian_is_touched(vault: tuple[Path, Any]) -> None:
    root, before = vault
    assert _tree_digest(root / ".obsidian") == before
    assert (root / "Welcome.md").read_text() == "# Welcome\n\nA note of the user's own.\n"
