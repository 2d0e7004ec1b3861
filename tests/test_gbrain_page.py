"""Note ⇄ gbrain page (``pipeline.integrations.gbrain_page``) and the client's reading of gbrain's
output (``pipeline.integrations.gbrain``): pure functions, checked on their own."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pipeline.errors import InputError
from pipeline.integrations.gbrain import CliClient, PageNotFound, parse_json_output
from pipeline.integrations.gbrain_page import (
    apply_gbrain_edit,
    build_page,
    check_prefix,
    note_from_page,
    parse_page_text,
    same_page,
    to_note_links,
    to_page_links,
)
from pipeline.notes.frontmatter import load_frontmatter
from pipeline.notes.store import extract_notes

P = "conversations/distill"
NOTE = """---
type: conversation
id: '20261123_171935_d039b9'
title: Release checklist
aliases:
- '20261123_171935_d039b9'
date: 2026-11-23
started_at: 2026-11-23T17:19:35
parent_session: '[[2026/11/2026-11-20-parent-aaaaaa|Parent]]'
projects:
- parsekit
rating: 5
tags:
- distill
- release
---

# Release checklist

## Goal

Write down the release checklist.

## Summary

### 1. Checklist

Saved to docs/RELEASING.md.

## Lineage

- Parent: [[2026/11/2026-11-20-parent-aaaaaa|Parent]]
- Child: 20261124_000000_cccccc

## Notes
"""
REL = "2026/11/2026-11-23-release-checklist-d039b9.md"


def _page(text: str, slug: str) -> dict:
    return {"slug": slug, **parse_page_text(text)}


def test_links_to_notes_become_links_to_pages_and_back() -> None:
    text = ("[[2026/11/2026-11-20-a-b12aa1|A]] ![[undated/x-1]] [[2026/11/2026-11-20-a-b12aa1#Goal]] "
            "[[projects/parsekit]] [[Some Note]] `[[not/a/note]]`")
    there = to_page_links(text, P)
    assert there == (f"[[{P}/2026-11-20-a-b12aa1|A]] ![[{P}/x-1]] [[{P}/2026-11-20-a-b12aa1#Goal]] "
                     "[[projects/parsekit]] [[Some Note]] `[[not/a/note]]`")
    assert to_note_links(there, P) == text


def test_the_page_keeps_the_note_and_adds_what_gbrain_needs() -> None:
    meta, body = load_frontmatter(NOTE)
    page = build_page(meta, body, REL, P)
    assert page.slug == f"{P}/2026-11-23-release-checklist-d039b9"
    fm, _ = load_frontmatter(page.text)
    assert list(fm)[:4] == ["type", "id", "session_id", "title"] and list(fm)[-1] == "tags"
    assert fm["id"] == "distill-20261123_171935_d039b9" and fm["session_id"] == "20261123_171935_d039b9"
    assert "\ndate: '2026-11-23'\n" in page.text and "\nstarted_at: '2026-11-23T17:19:35'\n" in page.text  # quoted
    assert fm["parent_session"] == f"[[{P}/2026-11-20-parent-aaaaaa|Parent]]"
    assert fm["related"] == ["[[projects/parsekit]]"] and fm["rating"] == 5
    assert page.links == {(f"{P}/2026-11-20-parent-aaaaaa", "derived_from"), (f"{P}/2026-11-20-parent-aaaaaa", "mentions"),
                          ("projects/parsekit", "related_to")}
    assert page.projects == (("projects/parsekit", "parsekit"),) and page.tags == ("distill", "release")
    assert build_page(meta, body, REL, P).sha == page.sha  # deterministic: an unchanged note sends nothing


@pytest.mark.parametrize("bad", ["", "Has Space", "a//b", "-lead", "a/../b"])
def test_a_prefix_gbrain_would_change_is_refused(bad: str) -> None:
    with pytest.raises(InputError, match="--prefix"):
        check_prefix(bad)
    assert check_prefix("/Notes/Distill/") == "notes/distill"  # slashes at the ends and case are normalised


def test_a_persons_edit_in_gbrain_becomes_the_notes_next_version() -> None:
    meta, body = load_frontmatter(NOTE)
    pushed = build_page(meta, body, REL, P).text
    edited = (pushed.replace("# Release checklist", "# Release checklist, v2")
              .replace("title: Release checklist", "title: Release checklist, v2")
              .replace("Saved to docs/RELEASING.md.", "Saved to docs/RELEASING.md, reviewed by Ana.")
              .replace("\n## Lineage", "\nAlso tag the release in git.\n\n## Lineage")
              .replace("- release\n", "- shipping\n")
              .replace("rating: 5\n", "rating: 5\nreviewer: ana\n")
              + "\nMy own closing note.\n")
    text, edit = apply_gbrain_edit(NOTE, pushed, _page(edited, f"{P}/x"), P)
    meta2, body2 = load_frontmatter(text)
    notes = extract_notes(body2)
    assert "Also tag the release in git." in notes and "reviewed by Ana." in notes and "My own closing note." in notes
    assert body2.startswith("# Release checklist, v2\n")  # the title line stays where it is
    summary = body2.split("## Summary", 1)[1].split("## Lineage", 1)[0]
    assert "Ana" not in summary and "git" not in summary  # moved, not left to be lost at the next re-render
    assert "[[2026/11/2026-11-20-parent-aaaaaa|Parent]]" in body2  # links back to vault paths
    assert meta2["tags"] == ["distill", "shipping"] and meta2["title"] == "Release checklist, v2"
    assert meta2["reviewer"] == "ana" and meta2["date"] == "2026-11-23"
    assert "\ndate: 2026-11-23\n" in text and "\nrating: 5\n" in text  # the other bytes as they were
    assert edit.tags_added == ("shipping",) and edit.tags_removed == ("release",) and edit.moved_lines == 2


def test_an_unedited_page_is_the_same_page() -> None:
    meta, body = load_frontmatter(NOTE)
    pushed = build_page(meta, body, REL, P).text
    page = _page(pushed, f"{P}/x")
    page["tags"] = sorted(page["tags"])  # gbrain sorts them
    assert same_page(pushed, page)
    page["compiled_truth"] += "\n\nmore"
    assert not same_page(pushed, page)


def test_a_page_with_no_note_here_becomes_one() -> None:
    meta, body = load_frontmatter(NOTE)
    page = _page(build_page(meta, body, REL, P).text, f"{P}/2026-11-23-release-checklist-d039b9")
    page["frontmatter"]["date"] = "2026-11-23T00:00:00.000Z"  # what js-yaml made of a bare date
    rel, text, sid = note_from_page(page, P)
    assert rel == REL and sid == "20261123_171935_d039b9"
    got, _ = load_frontmatter(text)
    assert got["id"] == sid and "session_id" not in got and "related" not in got
    assert "\ndate: 2026-11-23\n" in text and got["parent_session"] == "[[2026/11/2026-11-20-parent-aaaaaa|Parent]]"
    foreign = {"slug": "concepts/trains", "type": "concept", "title": "Trains", "tags": ["x"], "frontmatter": {},
               "compiled_truth": "See [[conversations/distill/2026-11-23-release-checklist-d039b9]].", "timeline": ""}
    rel, text, sid = note_from_page(foreign, P)
    assert rel == "gbrain/concepts/trains.md" and sid is None and "[[2026/11/2026-11-23-release-checklist-d039b9]]" in text


def _failed(stdout: str, stderr: str) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(["gbrain"], 1, stdout, stderr)


def test_the_client_reads_gbrains_error_and_json_forms() -> None:
    client = CliClient(Path("/bin/false"), env={"HOME": "/tmp"})
    err = client._failure("get_page", _failed("", "Error [page_not_found]: Page not found: people/x\n"
                                                  "Fix: Page may be soft-deleted; pass include_deleted: true to verify"))
    assert isinstance(err, PageNotFound) and err.code == "page_not_found"
    assert "include_deleted" in (err.suggestion or "")
    plain = client._failure("get_page", _failed("", "Error [page_not_found] Page not found: people/x"))
    assert isinstance(plain, PageNotFound)
    assert "gbrain init --pglite" in str(client._failure("get_page", _failed("No brain configured. Run: gbrain init", "")))
    assert parse_json_output('[config] notice line\n{\n  "a": 1\n}\n') == {"a": 1}
    assert parse_json_output("[]") == []
