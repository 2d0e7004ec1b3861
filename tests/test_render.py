"""render: frontmatter round-trips, paths are safe and stable, session text cannot break the body."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import frontmatter
import pytest

import pipeline
from pipeline.models import Decision, Facts, FileTouch, Lineage, Phase, Problem, Session, SessionSummary
from pipeline.notes.frontmatter import load_frontmatter
from pipeline.notes.render import (
    GENERATED_KEYS,
    headings_for,
    md_block,
    md_code,
    md_inline,
    note_text,
    render_note,
    short_id,
    slugify,
    tag_name,
)

SID = "20261120_080000_abc123"
START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
DISTILLED = datetime(2026, 11, 21, 9, 30, tzinfo=UTC)

HOSTILE_TITLES = [
    "Fix: the reader: again",
    "She said \"no\" and 'yes'",
    "---",
    "--- timeline ---",
    "line one\nline two\r\n# line three",
    "修复 SQLite 读取器的竞态问题",
    "🚀 ship it 🎉",
    "a # b | c ^ d [e] [[f]] %% g",
    "yes",
    "null",
    "123456",
    "1234e567",
    "key: value\n---\nother: 1",
    "  padded  ",
    "CON",
    "..",
    'back\\slash / and * ? < > "',
    "<!-- timeline -->",
    "x" * 300,
    "\x00\x1b[31mred\x07",
    "{{ 7 * 7 }} {% raw %}",
]


def make_session(**kw: Any) -> Session:
    base: dict[str, Any] = {
        "id": SID,
        "source": "cli",
        "title": "Fix flaky SQLite reader",
        "model": "anthropic/claude-sonnet-4",
        "provider": "openrouter",
        "started_at": START,
        "ended_at": START + timedelta(hours=1),
        "cwd": "/home/u/proj",
        "git_branch": "main",
        "input_tokens": 1000,
        "output_tokens": 200,
        "cost_usd": 0.01,
    }
    return Session(**{**base, **kw})


def make_summary(**kw: Any) -> SessionSummary:
    base: dict[str, Any] = {
        "goal": "Make the state.db reader stop failing under WAL.",
        "phases": (
            Phase(
                title="Reproduce",
                asks=("why does it fail?",),
                done="Ran the reader in a loop.",
                outcome="done",
            ),
            Phase(title="Fix", asks=(), done="Copied the db before reading.", outcome="partial"),
        ),
        "decisions": (
            Decision(choice="Copy then read", rationale="avoids lock races", rejected=("ro open",)),
        ),
        "output_files": ("src/reader.py",),
        "open_items": ("add a regression test",),
        "errors": (
            Problem(error="sqlite3.OperationalError: database is locked", fix="Opened the db read-only with a busy timeout."),
            Problem(error="disk I/O error"),
        ),
        "end_state": "resolved",
        "tags": ("sqlite", "Bug Fix"),
        "projects": ("distill",),
    }
    return SessionSummary(**{**base, **kw})


def make_facts(**kw: Any) -> Facts:
    base: dict[str, Any] = {
        "files": (
            FileTouch(path="src/reader.py", action="modified"),
            FileTouch(path="README.md", action="read"),
        ),
        "message_count": 12,
        "generations": 2,
    }
    return Facts(**{**base, **kw})


def render(session: Session | None = None, summary: SessionSummary | None = None, **kw: Any):
    return render_note(
        session or make_session(),
        summary or make_summary(),
        kw.pop("facts", None) or make_facts(),
        content_hash=kw.pop("content_hash", "sha256:abc"),
        distilled_at=kw.pop("distilled_at", DISTILLED),
        **kw,
    )


def outside_fences(body: str) -> list[str]:
    lines, fence = [], None
    for line in body.split("\n"):
        m = re.match(r"^ {0,3}(`{3,}|~{3,})", line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None:
            if m and m.group(1).startswith(fence):
                fence = None
        else:
            lines.append(line)
    return lines


# --------------------------------------------------------------------------- frontmatter


def test_frontmatter_keys_and_values() -> None:
    note = render(skills=["sqlite-wal"])
    fm = note.frontmatter
    assert fm["type"] == "conversation"
    assert fm["id"] == SID and fm["aliases"] == [SID]
    # UTC without an offset: Obsidian's Date & time form (peers-and-formats.md D.1)
    assert fm["started_at"] == "2026-11-20T08:00:00"
    assert fm["ended_at"] == "2026-11-20T09:00:00"
    assert fm["distilled_at"] == "2026-11-21T09:30:00"
    text = note_text(note)
    assert "\ndate: 2026-11-20\n" in text and "\nstarted_at: 2026-11-20T08:00:00\n" in text  # unquoted: typed
    assert fm["distill_version"] == pipeline.__version__
    assert fm["content_hash"] == "sha256:abc"
    assert fm["message_count"] == 12 and fm["generations"] == 2
    assert fm["input_tokens"] == 1000 and fm["output_tokens"] == 200 and fm["cost_usd"] == 0.01
    assert fm["output_files"] == ["src/reader.py"]
    assert fm["projects"] == ["distill"]
    assert fm["tags"] == ["distill", "source/cli", "sqlite", "bug-fix"]
    assert list(fm)[-1] == "tags"
    assert fm["skills"] == ["sqlite-wal"]
    assert set(fm) <= GENERATED_KEYS
    assert "skills" not in render().frontmatter


def test_open_session_and_naive_or_offset_datetimes() -> None:
    naive = make_session(started_at=datetime(2026, 11, 20, 8, 0), ended_at=None)
    assert render(naive).frontmatter["started_at"] == "2026-11-20T08:00:00"
    assert render(naive).frontmatter["ended_at"] is None
    tokyo = make_session(started_at=datetime(2026, 12, 1, 1, 0, tzinfo=timezone(timedelta(hours=9))))
    note = render(tokyo)
    assert note.frontmatter["started_at"] == "2026-11-30T16:00:00"
    assert note.relpath.startswith("2026/11/2026-11-30-")  # the path follows the UTC day


def _read(text: str) -> frontmatter.Post:
    """The note as distill's reader (``load_frontmatter``) sees it: dates as the strings written."""
    meta, body = load_frontmatter(text)
    return frontmatter.Post(body.strip(), **meta)


@pytest.mark.parametrize("title", HOSTILE_TITLES)
def test_hostile_title_round_trips(title: str) -> None:
    note = render(make_session(title=title), make_summary(title=None))
    text = note_text(note)
    post = _read(text)
    assert post.metadata == note.frontmatter
    assert post.content == note.body.rstrip("\n")
    assert "\n" not in note.frontmatter["title"]
    assert text.count("\n---\n") == 1  # only the closing delimiter


def test_number_like_strings_are_quoted_for_yaml_1_2_readers() -> None:
    note = render(make_session(id="1234e567"))
    text = note_text(note)
    assert "id: '1234e567'" in text
    assert _read(text).metadata["id"] == "1234e567"


def test_parent_uses_link_for_and_lineage_section() -> None:
    lineage = Lineage(
        parent="p1p1p1",
        segments=("seg000", SID),
        children=("c1c1c1",),
        branches=("b1b1b1",),
        subagents=("s1s1s1",),
    )
    note = render(make_session(lineage=lineage), link_for=lambda sid: f"[[x/{sid}|T {sid}]]")
    assert note.frontmatter["parent_session"] == "[[x/p1p1p1|T p1p1p1]]"
    section = note.body.split("## Lineage\n", 1)[1]
    for sid in ("p1p1p1", "seg000", "c1c1c1", "b1b1b1", "s1s1s1"):
        assert f"[[x/{sid}|T {sid}]]" in section
    assert f"[[x/{SID}" not in section  # the session itself is not its own segment
    default = render(make_session(lineage=Lineage(parent="p1p1p1")))
    # No note for the parent: its id as text, never a link that resolves to nothing
    assert default.frontmatter["parent_session"] == "p1p1p1"
    assert "- Parent: p1p1p1\n" in default.body and "[[p1p1p1]]" not in default.body
    assert render().frontmatter["parent_session"] is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Bug Fix", "bug-fix"),
        ("#sqlite", "sqlite"),
        ("1984", "tag-1984"),
        ("a/b", "a/b"),
        ("!!", None),
        ("数据库", "数据库"),
    ],
)
def test_tag_name(raw: str, expected: str | None) -> None:
    assert tag_name(raw) == expected


def test_tags_are_obsidian_valid() -> None:
    note = render(summary=make_summary(tags=("my tag", "#x", "2024", "a#b", "c|d", "🚀", "Mixed/Case")))
    for tag in note.frontmatter["tags"]:
        assert re.fullmatch(r"[\w\-/]+", tag), tag
        assert not tag.isdigit()
    assert len({t.casefold() for t in note.frontmatter["tags"]}) == len(note.frontmatter["tags"])


# --------------------------------------------------------------------------- paths


@pytest.mark.parametrize("title", HOSTILE_TITLES)
def test_path_is_safe(title: str) -> None:
    relpath = render(make_session(title=title), make_summary(title=None)).relpath
    year, month, name = relpath.split("/")
    assert (year, month) == ("2026", "11")
    assert name.startswith("2026-11-20-") and name.endswith(f"-{short_id(SID)}.md")
    assert not set(name) & set('#|^:%[]\\/*?"<> \t\n'), name
    stem = name.removesuffix(".md")
    assert stem == stem.strip(". ")
    assert len(stem) <= len("2026-11-20-") + 50 + 1 + 8


def test_path_is_stable_and_cjk_slug() -> None:
    a = render(make_session(title="修复 读取器"), distilled_at=DISTILLED)
    b = render(
        make_session(title="修复 读取器"), distilled_at=DISTILLED + timedelta(days=3), content_hash="other"
    )
    assert a.relpath == b.relpath == "2026/11/2026-11-20-修复-读取器-abc123.md"


def test_path_without_start_time() -> None:
    note = render(make_session(started_at=None, ended_at=None))
    assert note.relpath == "undated/fix-flaky-sqlite-reader-abc123.md"


@pytest.mark.parametrize(
    ("sid", "expected"),
    [
        (SID, "abc123"),
        ("3f2a9c1e", "3f2a9c1e"),
        ("550e8400-e29b-41d4-a716-446655440000", "55440000"),
        ("a/b", "ab"),
    ],
)
def test_short_id(sid: str, expected: str) -> None:
    assert short_id(sid) == expected


def test_slugify_edge_cases() -> None:
    assert slugify("") == "session"
    assert slugify("CON") == "session-con"
    assert slugify("Ünïcödé Straße") == "ünïcödé-straße"
    assert len(slugify("word " * 40)) <= 50


# --------------------------------------------------------------------------- body


def test_body_sections_in_order() -> None:
    body = render().body
    heads = [line for line in body.split("\n") if line.startswith("#")]
    assert heads == [
        "# Fix flaky SQLite reader",
        "## Goal",
        "## Summary",
        "### 1. Reproduce",
        "### 2. Fix",
        "## Key decisions",
        "## Errors and fixes",
        "## Output files",
        "## Open items",
        "## Notes",
    ]
    assert "- Copy then read — avoids lock races; rejected: ro open" in body
    assert ("- `sqlite3.OperationalError: database is locked` — fix: Opened the db read-only with a busy timeout."
            in body)
    assert "- `disk I/O error`\n" in body
    assert "- `src/reader.py`" in body
    assert "- [ ] add a regression test" in body
    assert "**Outcome:** partial" in body
    assert body.endswith("## Notes\n")
    # A rationale the choice already states (the extractive summary cuts it from the same sentence) is not repeated.
    said = Decision(choice="Parse only ISO 8601, because the bank feed is the only producer.",
                    rationale="the bank feed is the only producer.", rejected=("guessing",))
    assert "- Parse only ISO 8601, because the bank feed is the only producer.; rejected: guessing\n" in render(
        summary=make_summary(decisions=(said,))).body
    assert "\n\n\n" not in body


def test_minimal_summary_says_nothing_was_done() -> None:
    """A session with nothing asked or done still has its Summary, which says so (no silent gap)."""
    note = render_note(
        Session(id="abc", source="cli"),
        SessionSummary(goal=" "),
        Facts(),
        content_hash="h",
        distilled_at=DISTILLED,
    )
    assert note.body == "# Session abc\n\n## Summary\n\nNothing was asked or done in this session.\n\n## Notes\n"
    assert note.relpath == "undated/session-abc-abc.md"


def test_chinese_headings() -> None:
    note = render(
        summary=make_summary(language="zh-CN"), session=make_session(lineage=Lineage(parent="p1p1p1"))
    )
    heads = [line for line in note.body.split("\n") if line.startswith("## ")]
    assert heads == [
        "## 目标",
        "## 会话摘要",
        "## 关键决策",
        "## 错误与修复",
        "## 产出文件",
        "## 待办事项",
        "## 会话谱系",
        "## 笔记",
    ]
    assert "**结果:** 部分完成" in note.body
    assert note.frontmatter["language"] == "zh-CN"


def test_unknown_language_falls_back_to_english() -> None:
    assert headings_for("tlh")["goal"] == "Goal"
    assert headings_for("ja")["goal"] == "目標"
    assert headings_for("ko")["asked"] == "요청"


def test_every_language_labels_every_part_of_a_note() -> None:
    """A Japanese or Spanish note with "Related", "Project:" or "**Outcome:** done" left in English reads as two
    languages; every language the table has names every label and outcome en names."""
    import yaml

    from pipeline.resources import data_dir

    table = yaml.safe_load((data_dir("templates") / "headings.yaml").read_text(encoding="utf-8"))
    for lang, labels in table.items():
        assert set(labels) == set(table["en"]), lang
        assert set(labels["outcomes"]) == set(table["en"]["outcomes"]), lang
    # no label of one part is another part's label in some language: sections are found by label
    for key in ("goal", "summary", "decisions", "errors", "output_files", "open_items", "lineage", "skills", "related",
                "notes"):
        others = {str(t[k]).casefold() for t in table.values() for k in t if k != key and isinstance(t[k], str)}
        assert not {str(t[key]).casefold() for t in table.values()} & others, key


def test_every_language_a_note_is_written_in_has_its_labels() -> None:
    """A Vietnamese session's note read "## Goal", "**Asked:**", "Files changed:" around its Vietnamese asks (a blind
    set): the languages the summarisers write in (``LANGUAGES``) and Arabic have a table of their own."""
    import yaml

    from pipeline.resources import data_dir
    from pipeline.summarize.extractive import _LABELS
    from pipeline.summarize.mapreduce import LANGUAGES

    table = yaml.safe_load((data_dir("templates") / "headings.yaml").read_text(encoding="utf-8"))
    for lang in {*LANGUAGES, "ar"}:
        assert lang in table and set(_LABELS.get(lang, {})) == set(_LABELS["en"]), lang
    assert headings_for("vi")["goal"] == "Mục tiêu" and headings_for("tr")["asked"] == "İstek"


def test_session_text_cannot_add_structure() -> None:
    hostile = "\n".join(
        [
            "# Injected H1",
            "## Notes",
            "---",
            "===",
            "* * *",
            "<!-- timeline -->",
            "<!-- unclosed comment",
            "--- timeline ---",
            "%% obsidian comment",
            "<script>",
            "keep `# code span` and `<!-- x -->` intact, tag #oops",
        ]
    )
    summary = make_summary(
        goal=hostile,
        phases=(Phase(title="## phase", asks=(hostile,), done=hostile),),
        decisions=(Decision(choice=hostile, rationale=hostile, rejected=(hostile,)),),
        open_items=(hostile,),
        errors=(Problem(error=hostile, fix=hostile), Problem(error="`x` ``y`` \n## z")),
    )
    body = render(summary=summary).body
    lines = outside_fences(body)
    heads = [line for line in lines if line.lstrip().startswith("#")]
    assert heads == [
        "# Fix flaky SQLite reader",
        "## Goal",
        "## Summary",
        "### 1. \\## phase",
        "## Key decisions",
        "## Errors and fixes",
        "## Output files",
        "## Open items",
        "## Notes",
    ]
    assert "<!-- timeline -->" not in body
    assert not any(line.startswith("--- timeline ---") for line in lines)  # gbrain's other sentinel
    # Code spans are literal in CommonMark (`<!--` or `#tag` inside one opens nothing): check the prose.
    prose = re.sub(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", "", body)
    assert "<!--" not in prose
    assert "%%" not in body
    assert not any(re.fullmatch(r" {0,3}([-=*_] *)+", line) for line in lines if line)
    assert "`# code span`" in body and "`<!-- x -->`" in body
    assert " #oops" not in prose and "\\#oops" in body


def test_fenced_code_is_kept_and_closed() -> None:
    done = "Before\n```python\n# a comment\nx = 1\n## not a heading\n"  # fence never closed
    body = render(summary=make_summary(phases=(Phase(title="Code", done=done),))).body
    assert "```python\n# a comment\nx = 1\n## not a heading\n```" in body
    assert body.endswith("## Notes\n")
    assert [line for line in outside_fences(body) if line == "## Notes"] == ["## Notes"]


def test_template_syntax_in_session_text_is_literal() -> None:
    summary = make_summary(goal="{{ 7 * 7 }} {% for x in y %} {# c #}")
    assert "{{ 7 * 7 }} {% for x in y %} {# c \\#}" in render(summary=summary).body


def test_filters() -> None:
    assert md_inline("a\n  b\tc") == "a b c"
    assert md_inline("```x") == "\\```x"
    assert md_inline("```x```") == "```x```"  # a code span, not a fence
    assert md_code("a`b") == "``a`b``"
    assert md_code("`x`") == "`` `x` ``"
    assert md_block("ok\n\n# h") == "ok\n\n\\# h"
    assert md_block("see https://x.test/a#b") == "see https://x.test/a#b"


@pytest.mark.parametrize("value", [*HOSTILE_TITLES, "ZJZd\ufffe\u200b}b?", "\x7faq\x16", "tab\there", "nel\x85x",
                                   "ls\u2028ps\u2029", "😀", "", "0x1f", "- dash", "'quoted'", "a: b", "#tag"])
def test_fast_and_python_emitters_write_the_same_text(value: str) -> None:
    """libyaml is used only where it writes exactly what the pure-Python emitter writes."""
    import yaml

    from pipeline.notes import render as r

    meta = {"title": value, "tags": [value, "x"], "n": 1, "cost": 0.5, "none": None, "flag": True}
    python = yaml.dump(meta, Dumper=r._NoteDumper, sort_keys=False, width=1_000_000,
                       default_flow_style=False, allow_unicode=True)
    assert r.dump_note(meta, "body").startswith("---\n" + python.strip() + "\n---\n\nbody")


def test_emoji_titles_stay_readable() -> None:
    text = note_text(render(make_session(title="🚀 ship it 🎉"), make_summary(title=None)))
    assert "title: 🚀 ship it 🎉\n" in text and "\\U0001F680" not in text


def test_plain_yaml_writes_what_yaml_dump_writes() -> None:
    """The frontmatter writer without PyYAML agrees byte for byte with ``yaml.dump``, or defers to it."""
    import random

    import yaml

    from pipeline.notes import render as r
    from tests.test_frontmatter import _odd_strings

    rng = random.Random(5)
    extra = ["Router queue #0", "x: y", "-x", "- x", "1.5", "yes", "it's", "?x", "? x", "a:b", "a #b", "a#b", "中文 标题",
             "", " lead", "trail ", "@x", "=", "<<", "~", "---x", "...", "[x]", "x]", "'q'", '"q"', "x:", ":x", "!x",
             "null", "Null", "on", "OFF", "0x1f", "1e5", "2026-11-20", "2026-11-20T08:00:00", ".inf", "-.5", "+1",
             "ok.", "a\\b", "src/a.py", "~/x", "%x", "|x", ">x", "{x", "*x", "&x", "`x`", "a, b", "C:\\x"]
    # Printable text heavy in YAML's indicators, where plain, quoted and deferred cases meet.
    printable = ["".join(rng.choice("ab :#-'\"?,[]{}&*!|>%@`~=.0123456789eE+/\\_中é") for _ in range(rng.randint(1, 9)))
                 for _ in range(3000)]
    odd = _odd_strings(7, 1500)
    taken = 0
    for i in range(4500):
        pool = extra + printable if i % 3 else odd
        pick = [pool[(i * 7 + k * 13) % len(pool)] for k in range(5)]
        meta = {"type": "conversation", "title": pick[0], "aliases": [pick[1]], "date": r.YamlDate("2026-11-20"),
                "started_at": r.YamlDate(pick[2][:19]) if i % 5 == 0 else r.YamlDate("2026-11-20T08:00:00"),
                "n": rng.choice([0, 3, -7, 10**15, True, False, None]),
                "cost_usd": rng.choice([0.692248, 1e-05, 1e16, 0.1 + 0.2, 12.0, -0.0, float("nan"), float("inf"), None]),
                "projects": [], "tags": [*pick[3:5], pick[0]], "end_evidence": pick[4] if i % 3 else None,
                pick[1] if i % 11 == 0 else "extra": rng.choice(["x", 1, ["y"], {"k": "v"}, (), ("a", "b")])}
        want = yaml.dump(meta, Dumper=r._dumper_for(meta), sort_keys=False, width=1_000_000,
                         default_flow_style=False, allow_unicode=True).strip()
        got = r._plain_yaml(meta)
        if got is not None:
            taken += 1
            assert got == want, (meta, got, want)
    assert taken > 1000  # most metadata takes the shortcut
