"""gbrain's contract, pinned to the responses recorded from a real gbrain 0.46.28.0
(peers-and-formats.md §B and its appendix). Run against the stand-in in CI, and against a real gbrain
with ``GBRAIN_BIN=/path/to/gbrain``: the stand-in is only trusted as far as these tests hold for both.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.gbrain_support import GBRAIN, call, fresh_brain, run_gbrain

SLUG = "conversations/sessions/2026-11-30-hermes-abc123"
PAGE = """---
type: conversation
title: 'Distill: fix flaky sqlite reader'
date: "2026-11-30"
goal: Fix the flaky SQLite reader in distill
aliases:
  - flaky-sqlite
projects:
  - distill
session_id: 20261130_101500_abc123
parent_session: "[[conversations/sessions/2026-11-29-hermes-parent]]"
tags: [distill, sqlite, hermes]
---

# Distill: fix flaky sqlite reader

The reader retries on SQLITE_BUSY; see [[projects/distill]].
"""
PROJECT = "---\ntype: project\ntitle: distill\n---\n\n# distill\n"
#: Keys of the first ``put_page`` answer over the CLI (B.10).
PUT_KEYS = {"slug", "status", "chunks", "auto_links", "auto_timeline", "facts_backstop", "chronicle_backstop",
            "write_through"}
GET_KEYS = {"id", "slug", "type", "title", "compiled_truth", "timeline", "frontmatter", "tags", "content_hash",
            "created_at", "updated_at", "deleted_at", "effective_date", "effective_date_source", "source_kind",
            "source_uri", "ingested_via", "ingested_at", "source_id"}
SEARCH_KEYS = {"slug", "page_id", "title", "type", "chunk_text", "chunk_source", "chunk_id", "chunk_index", "score",
               "stale", "source_id", "effective_date", "effective_date_source", "keyword_hit", "base_score",
               "title_match_boost", "evidence", "create_safety", "id"}


@pytest.fixture
def brain(tmp_path: Path) -> dict[str, str]:
    return fresh_brain(tmp_path / "brain")


def test_first_put_then_identical_put(brain: dict[str, str]) -> None:
    call(brain, "put_page", {"slug": "projects/distill", "content": PROJECT})
    first = call(brain, "put_page", {"slug": SLUG, "content": PAGE})
    assert set(first) >= PUT_KEYS
    assert first["slug"] == SLUG and first["status"] == "created_or_updated" and first["chunks"] == 1
    # The recorded first put made 1 edge (appendix) or 2 (B.10) depending on the page: at least the
    # body's [[projects/distill]] mention; parent_session is no link field, so it is not listed.
    links = first["auto_links"]
    assert set(links) == {"created", "removed", "errors", "unresolved"}
    assert links["created"] >= 1 and links["removed"] == links["errors"] == 0 and links["unresolved"] == []
    assert first["auto_timeline"] == {"created": 0}
    assert first["facts_backstop"] == {"skipped": "kind:conversation"}
    assert first["write_through"] == {"written": False, "skipped": "no_repo_configured"}
    again = call(brain, "put_page", {"slug": SLUG, "content": PAGE})
    assert again["status"] == "skipped" and again["chunks"] == 0 and again["chunk_skip_reason"] == "write_skipped"
    assert call(brain, "get_versions", {"slug": SLUG}) == [], "an identical write made a version"


def test_a_body_wikilink_and_related_make_mentions_and_related_to_edges(brain: dict[str, str]) -> None:
    call(brain, "put_page", {"slug": "projects/distill", "content": PROJECT})
    page = PAGE.replace("tags:", 'related:\n  - "[[projects/distill]]"\ntags:')
    call(brain, "put_page", {"slug": SLUG, "content": page})
    links = call(brain, "get_links", {"slug": SLUG})
    assert {(link["to_slug"], link["link_type"]) for link in links} == {
        ("projects/distill", "mentions"), ("projects/distill", "related_to")}


def test_a_link_to_a_missing_page_is_unresolved(brain: dict[str, str]) -> None:
    res = call(brain, "put_page", {"slug": SLUG, "content": PAGE})
    assert res["auto_links"]["created"] == 0 and len(res["auto_links"]["unresolved"]) == 1
    assert call(brain, "get_links", {"slug": SLUG}) == []


def test_get_page_fields_and_canonical_markdown(brain: dict[str, str]) -> None:
    call(brain, "put_page", {"slug": SLUG, "content": PAGE})
    page = call(brain, "get_page", {"slug": SLUG, "include_content": True})
    assert set(page) >= GET_KEYS
    assert page["type"] == "conversation" and page["title"] == "Distill: fix flaky sqlite reader"
    assert page["tags"] == ["distill", "hermes", "sqlite"]  # sorted
    assert page["frontmatter"]["date"] == "2026-11-30"  # quoted: kept as written
    assert page["compiled_truth"].startswith("# Distill: fix flaky sqlite reader")
    # The recorded `gbrain get` output: type, title, the other keys in order, tags last and sorted.
    assert page["content"].startswith(
        "---\ntype: conversation\ntitle: 'Distill: fix flaky sqlite reader'\ndate: '2026-11-30'\n"
        "goal: Fix the flaky SQLite reader in distill\naliases:\n  - flaky-sqlite\nprojects:\n  - distill\n"
        "session_id: 20261130_101500_abc123\n"
        "parent_session: '[[conversations/sessions/2026-11-29-hermes-parent]]'\n"
        "tags:\n  - distill\n  - hermes\n  - sqlite\n---\n")
    printed = run_gbrain(brain, "get", SLUG).stdout
    assert printed.startswith("---\ntype: conversation\n") and "tags:\n  - distill\n" in printed


def test_unquoted_date_is_coerced_and_versions_snapshot_the_old_page(brain: dict[str, str]) -> None:
    call(brain, "put_page", {"slug": SLUG, "content": PAGE.replace('date: "2026-11-30"', "date: 2026-11-30")})
    call(brain, "put_page", {"slug": SLUG, "content": PAGE.replace("retries on", "backs off on")})
    versions = call(brain, "get_versions", {"slug": SLUG})
    assert len(versions) == 1
    v = versions[0]
    assert set(v) == {"id", "page_id", "compiled_truth", "frontmatter", "snapshot_at"}
    assert v["frontmatter"]["date"] == "2026-11-30T00:00:00.000Z"  # B.6 #1
    assert v["frontmatter"]["session_id"] == "20261130_101500_abc123"
    assert "retries on" in v["compiled_truth"]
    assert call(brain, "revert_version", {"slug": SLUG, "version_id": v["id"]}) == {"status": "reverted"}
    assert "retries on" in call(brain, "get_page", {"slug": SLUG})["compiled_truth"]
    assert len(call(brain, "get_versions", {"slug": SLUG})) == 2  # revert snapshots first


def test_a_duplicate_frontmatter_id_skips_the_write(brain: dict[str, str]) -> None:
    a = "---\ntitle: A\nid: dup-1\n---\n\nfirst\n"
    call(brain, "put_page", {"slug": "notes/dup-a", "content": a})
    res = call(brain, "put_page", {"slug": "notes/dup-b", "content": a.replace("first", "second")})
    assert res["status"] == "skipped" and res["slug"] == "notes/dup-a"
    missing = run_gbrain(brain, "call", "get_page", json.dumps({"slug": "notes/dup-b"}), check=False)
    assert missing.returncode != 0 and "page_not_found" in missing.stderr


def test_tags_from_put_are_add_only_and_remove_tag_drops_one(brain: dict[str, str]) -> None:
    call(brain, "put_page", {"slug": SLUG, "content": PAGE})
    call(brain, "put_page", {"slug": SLUG, "content": PAGE.replace("[distill, sqlite, hermes]", "[distill, hermes]")
                             .replace("retries", "retries twice")})
    assert call(brain, "get_tags", {"slug": SLUG}) == ["distill", "hermes", "sqlite"]  # B.6 #3
    call(brain, "remove_tag", {"slug": SLUG, "tag": "sqlite"})
    assert call(brain, "get_tags", {"slug": SLUG}) == ["distill", "hermes"]


def test_soft_delete_and_restore(brain: dict[str, str]) -> None:
    call(brain, "put_page", {"slug": SLUG, "content": PAGE})
    deleted = call(brain, "delete_page", {"slug": SLUG})
    assert deleted["status"] == "soft_deleted" and deleted["slug"] == SLUG
    assert deleted["recoverable_until"] == "now + 72h via restore_page"
    gone = run_gbrain(brain, "get", SLUG, check=False)
    assert gone.returncode != 0
    assert "page_not_found" in gone.stderr and "Page may be soft-deleted; pass include_deleted: true" in gone.stderr
    assert call(brain, "get_page", {"slug": SLUG, "include_deleted": True})["deleted_at"]
    assert call(brain, "restore_page", {"slug": SLUG})["status"] == "restored"
    assert call(brain, "get_page", {"slug": SLUG})["deleted_at"] is None


def test_search_result_fields(brain: dict[str, str]) -> None:
    call(brain, "put_page", {"slug": SLUG, "content": PAGE})
    hits = call(brain, "search", {"query": "sqlite reader", "limit": 2})
    assert hits and set(hits[0]) >= SEARCH_KEYS and hits[0]["slug"] == SLUG
    assert hits[0]["effective_date"] == "2026-11-30"


def _mcp(env: dict[str, str], *requests: dict[str, Any]) -> list[dict[str, Any]]:
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    full = {"HOME": env["GBRAIN_HOME"], "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", **env}
    proc = subprocess.run([str(GBRAIN), "serve"], input=lines, env=full, capture_output=True, text=True, timeout=600)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_mcp_initialize_and_put_page_skips_links_as_a_remote_caller(brain: dict[str, str]) -> None:
    call(brain, "put_page", {"slug": "projects/distill", "content": PROJECT})
    replies = _mcp(
        brain,
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "put_page",
                                                                      "arguments": {"slug": SLUG, "content": PAGE}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "get_page",
                                                                      "arguments": {"slug": "nope/nope"}}},
    )
    by_id = {r["id"]: r for r in replies}
    init = by_id[1]["result"]
    assert init["serverInfo"]["name"] == "gbrain" and init["protocolVersion"] == "2025-06-18"
    names = {t["name"] for t in by_id[2]["result"]["tools"]}
    assert {"put_page", "get_page", "search", "get_versions", "add_link", "remove_tag", "restore_page"} <= names
    put = json.loads(by_id[3]["result"]["content"][0]["text"])
    assert put["status"] == "created_or_updated"
    assert put["auto_links"] == {"skipped": "remote"} and put["auto_timeline"] == {"skipped": "remote"}
    assert call(brain, "get_links", {"slug": SLUG}) == []  # no edges from an MCP write
    err = by_id[4]["result"]
    assert err.get("isError") is True and json.loads(err["content"][0]["text"])["error"] == "page_not_found"


def test_without_a_brain_gbrain_says_to_init(tmp_path: Path) -> None:
    from tests.gbrain_support import brain_env

    res = run_gbrain(brain_env(tmp_path / "none"), "call", "get_page", '{"slug": "x"}', check=False)
    assert res.returncode != 0 and "gbrain init" in res.stdout + res.stderr
