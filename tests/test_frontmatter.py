"""Bounded reading and byte-preserving editing of note frontmatter (``pipeline.notes.frontmatter``)."""

from __future__ import annotations

import pytest

from pipeline.notes.frontmatter import FrontmatterError, edit_frontmatter, load_frontmatter

NOTE = """---
type: conversation
id: '20261120_131945_b12aa1'
# my own comment, keep it
title: "Refactor CLI"
tags:
- distill
- source/cli
mine: {a: 1,   b: [x, y]}
---

# Refactor CLI

## Notes
my text
"""


def test_edit_replaces_one_key_and_keeps_every_other_byte() -> None:
    out = edit_frontmatter(NOTE, {"tags": ["distill", "source/cli", "python"]})
    assert out == NOTE.replace("- source/cli\n", "- source/cli\n- python\n")


def test_edit_appends_new_keys_and_removes_others() -> None:
    out = edit_frontmatter(NOTE, {"version": 2}, remove=["mine"])
    assert out == NOTE.replace("mine: {a: 1,   b: [x, y]}\n", "version: 2\n")


def test_edit_keeps_crlf_and_quoted_keys() -> None:
    text = NOTE.replace("\n", "\r\n").replace("mine:", "'odd: key':")
    out = edit_frontmatter(text, {"title": "New"})
    assert out == text.replace('title: "Refactor CLI"', "title: New")
    assert load_frontmatter(out)[0]["odd: key"] == {"a": 1, "b": ["x", "y"]}


def test_edit_refuses_what_it_cannot_do_in_place() -> None:
    with pytest.raises(FrontmatterError, match="no frontmatter"):
        edit_frontmatter("# just a body\n", {"tags": []})
    # an anchor used by another key: replacing the anchored value would change the other key
    shared = "---\na: &x [1, 2]\nb: *x\n---\nbody\n"
    with pytest.raises(FrontmatterError, match="other keys"):
        edit_frontmatter(shared, {"a": [3]})


@pytest.mark.parametrize("levels", [5, 9])
def test_alias_bombs_are_refused_before_anything_is_built(levels: int) -> None:
    lines = ['a0: ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    lines[0] = "a0: &a0 " + lines[0].split(": ", 1)[1]
    bomb = "---\n" + "\n".join(lines) + "\n---\nbody\n"
    with pytest.raises(FrontmatterError, match="alias"):
        load_frontmatter(bomb)


def test_deep_nesting_and_huge_blocks_are_refused() -> None:
    with pytest.raises(FrontmatterError, match="deeper"):
        load_frontmatter("---\nx: " + "[" * 100 + "]" * 100 + "\n---\n")
    with pytest.raises(FrontmatterError, match="larger"):
        load_frontmatter("---\nx: '" + "a" * 300_000 + "'\n---\n")
    with pytest.raises(FrontmatterError, match="mapping"):
        load_frontmatter("---\n- a\n- b\n---\n")


def test_load_returns_metadata_and_body() -> None:
    meta, body = load_frontmatter(NOTE)
    assert meta["id"] == "20261120_131945_b12aa1" and meta["tags"] == ["distill", "source/cli"]
    assert body.startswith("# Refactor CLI")
    assert load_frontmatter("no frontmatter\n") == ({}, "no frontmatter\n")


def test_edit_round_trips_on_what_distill_writes() -> None:
    from pipeline.notes.render import dump_note

    meta = {"type": "conversation", "id": "0x1f", "title": "a: b # c", "goal": "line one\nline two",
            "tags": ["distill", "源/cli"], "cost_usd": None, "projects": [], "n": 3}
    text = dump_note(meta, "# T\n\n## Notes\n")
    for key, value in (("tags", ["x"]), ("goal", "one"), ("projects", ["p"]), ("new", {"k": [1]})):
        out = edit_frontmatter(text, {key: value})
        assert load_frontmatter(out)[0] == {**meta, key: value}
        untouched = [line for line in text.splitlines() if not line.startswith((key, "-", " "))]
        assert all(line in out.splitlines() for line in untouched)


def _odd_strings(seed: int, n: int) -> list[str]:
    """Strings built from YAML's indicators, look-alike scalars and characters from all of Unicode."""
    import random

    rng = random.Random(seed)
    pieces = [*"abc :#-'\"\\\n\r\t{}[],&*!|>%@`?=~.0123456789eExX+_/ ", "yes", "null", "true", "~", "0x", "1e5",
              "2026-11-20", ".inf", ".nan", "<<", "---", "...", "\n---\n", "- ", ": ", " #", "\n\n", "  ", "\x85",
              "\u2028", "\ufeff", "\x00", "\x7f", "\ud800", "\xa0", "\u3000", "\u200b", "😀", "中"]

    def char() -> str:
        r = rng.random()
        return rng.choice(pieces) if r < 0.6 else chr(rng.randint(0xA0, 0xFFFF) if r < 0.9 else rng.randint(0x10000, 0x10FFFF))

    return ["".join(char() for _ in range(rng.randint(0, 12))) for _ in range(n)]


@pytest.mark.parametrize("seed", range(2))
def test_load_written_reads_what_load_frontmatter_reads(seed: int) -> None:
    """The worker's shortcut (no YAML parse of a note it just dumped) agrees with parsing, or parses."""
    from pipeline.notes import frontmatter
    from pipeline.notes.frontmatter import load_written
    from pipeline.notes.render import YamlDate, dump_note

    fast = 0
    for value in _odd_strings(seed, 1500):
        meta = {"type": "conversation", "id": value or "x", "title": value, "tags": [value, "distill"], "n": 3,
                "cost_usd": 0.692248, "tiny": 1e-07, "date": YamlDate("2026-11-20"), "none": None, "flag": True,
                "nested": {"k": [value, {"z": value}]}, (value[:3] or "k"): value}
        text = dump_note(meta, f"# {value}\n\n## Notes\n{value}\n")
        try:
            want: object = load_frontmatter(text)
        except FrontmatterError as exc:
            want = type(exc)
        try:
            got: object = load_written(text, meta)
        except FrontmatterError as exc:
            got = type(exc)
        assert got == want, repr(value)
        fast += frontmatter._as_read(meta) is not frontmatter._UNSURE
    assert fast > 500  # the shortcut is taken for most of it; the rest is parsed
