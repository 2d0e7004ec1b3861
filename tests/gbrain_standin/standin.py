"""A stand-in for gbrain (garrytan/gbrain 0.46.28.0), for machines that cannot install it.

gbrain is TypeScript on Bun, on neither PyPI nor npm, so CI runs distill's gbrain suite against
this program instead: a real executable (``tests/gbrain_standin/gbrain``) that distill's client
runs as a subprocess through ``GBRAIN_BIN``, exactly as it runs gbrain. It reproduces the
documented contract and the responses recorded from a real gbrain in
``shared/reference/peers-and-formats.md`` §B (and nothing it could not check there):

* ``gbrain init --pglite [--no-embedding] [--non-interactive]`` makes ``$GBRAIN_HOME/.gbrain/``
  (``$HOME`` when unset); every other command without it says ``No brain configured. Run: gbrain init``.
* ``gbrain call <tool> '<json>'``: the trusted local surface, JSON on stdout; a failure is
  ``Error [<code>]: <message>`` / ``Fix: <suggestion>`` on stderr and exit 1. The verbs ``put``
  (stdin), ``get``, ``delete``, ``restore``, ``history``, ``tags`` map onto the same operations.
* ``gbrain serve``: MCP over stdio (JSON-RPC, one object per line). Its caller is remote:
  ``put_page`` extracts no links and no timeline (``"skipped": "remote"``) and stamps
  ``ingested_via: mcp:put_page``; errors come back as ``isError`` with a JSON envelope.
* Pages: frontmatter parsed as js-yaml would (an unquoted date becomes
  ``2026-11-30T00:00:00.000Z``); ``type``/``title``/``tags``/``slug`` pulled into columns; body
  split at ``<!-- timeline -->``; slugs lower-cased and validated; a frontmatter ``id`` already
  used by another page resolves to that page and skips the write; content identical to the page
  (tags compared as the union, since ``put_page`` only adds tags) is ``skipped`` with no new
  version; any other overwrite snapshots the old page first (``get_versions``); soft delete,
  restore, revert (snapshot first); ``include_content`` returns the canonical Markdown (``type``,
  ``title``, other keys, ``tags`` last and sorted).
* Links (CLI writes only): ``[[slug]]`` / ``[[slug|text]]`` / ``[[slug#h]]`` in the body become
  ``mentions``, ``related``/``see_also`` in the frontmatter ``related_to`` and ``source``
  ``source``, each only when the target page exists (else it is listed in ``unresolved``); they
  are reconciled on every write. ``add_link`` refuses the reconciliation-managed sources.

Not reproduced: embeddings, hybrid ranking (search is keyword counting), chunking, the timeline
extractor, multi-source brains, schema packs. What a write to a soft-deleted slug does was not
recorded; the stand-in refuses it (``page_deleted``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

import yaml

VERSION = "0.46.28.0"
PROTOCOL = "2025-06-18"
SENTINELS = ("<!-- timeline -->", "<!--timeline-->")
MANAGED_LINK_SOURCES = ("markdown", "frontmatter", "mentions", "wikilink-resolved")
NOT_FOUND_HINT = "Page may be soft-deleted; pass include_deleted: true to verify"
_WIKILINK = re.compile(r"\[\[([^\[\]|#]+)(?:#[^\[\]|]*)?(?:\|[^\[\]]*)?\]\]")
_MDLINK = re.compile(r"\[[^\]]*\]\(((?:\.\./)*[^)\s:]+)\.md\)")
_BAD_SLUG = re.compile(r"[\x00-\x1f\x7f\\\u202a-\u202e\u2066-\u2069]|%2e|%2f|%5c", re.I)


class OpError(Exception):
    def __init__(self, code: str, message: str, suggestion: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.suggestion = code, message, suggestion


# --------------------------------------------------------------------------- the brain


def brain_dir() -> Path:
    return Path(os.environ.get("GBRAIN_HOME") or os.environ.get("HOME") or ".").expanduser() / ".gbrain"


SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
  id INTEGER PRIMARY KEY, slug TEXT NOT NULL UNIQUE, type TEXT, title TEXT, frontmatter TEXT,
  compiled_truth TEXT, timeline TEXT, content_hash TEXT, created_at TEXT, updated_at TEXT,
  deleted_at TEXT, effective_date TEXT, effective_date_source TEXT, source_kind TEXT,
  source_uri TEXT, ingested_via TEXT, ingested_at TEXT);
CREATE TABLE IF NOT EXISTS tags (page_id INTEGER, tag TEXT, PRIMARY KEY (page_id, tag));
CREATE TABLE IF NOT EXISTS versions (
  id INTEGER PRIMARY KEY, page_id INTEGER, compiled_truth TEXT, frontmatter TEXT, snapshot_at TEXT);
CREATE TABLE IF NOT EXISTS links (
  from_id INTEGER, to_id INTEGER, link_type TEXT, link_source TEXT, context TEXT, origin_id INTEGER,
  PRIMARY KEY (from_id, to_id, link_type, link_source));
"""


def open_brain() -> sqlite3.Connection:
    path = brain_dir() / "brain.standin.db"
    if not (brain_dir() / "config.json").is_file():
        raise OpError("no_brain", "No brain configured. Run: gbrain init", "gbrain init --pglite")
    con = sqlite3.connect(path, timeout=30, isolation_level=None)
    con.row_factory = sqlite3.Row
    return con


def init(args: list[str]) -> int:
    home = brain_dir()
    home.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(home / "brain.standin.db")
    con.executescript(SCHEMA)
    con.close()
    config = {"engine": "pglite", "database_path": str(home / "brain.pglite"),
              "embedding": None if "--no-embedding" in args else "auto"}
    (home / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    print(f"Brain ready at {home} (PGLite, keyword search only)")
    return 0


def now() -> str:
    return _js(dt.datetime.now(dt.UTC))


# --------------------------------------------------------------------------- Markdown, as gbrain parses it


def _js(value: Any) -> Any:
    """A value as js-yaml hands it over: dates become Date objects, i.e. ISO timestamps in JSON."""
    if isinstance(value, dt.datetime):
        value = value.astimezone(dt.UTC) if value.tzinfo else value
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if isinstance(value, dt.date):
        return f"{value.isoformat()}T00:00:00.000Z"
    if isinstance(value, dict):
        return {str(k): _js(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_js(v) for v in value]
    return value


def _coerce(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.date):
        return value.isoformat()[:10]
    return str(value)


def parse_markdown(content: str, slug: str) -> dict[str, Any]:
    fm: dict[str, Any] = {}
    body = content
    m = re.match(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", content, re.S)
    if m:
        loaded = yaml.safe_load(m.group(1))
        fm = loaded if isinstance(loaded, dict) else {}
        body = content[m.end():]
    lines = body.split("\n")
    cut = next((i for i, line in enumerate(lines) if line.strip() in SENTINELS
                or re.fullmatch(r"---\s+timeline\s+---", line.strip(), re.I)), None)
    truth, timeline = (body, "") if cut is None else ("\n".join(lines[:cut]), "\n".join(lines[cut + 1:]))
    tags = fm.get("tags")
    tag_list = [str(t) for t in tags] if isinstance(tags, list) else (
        [t.strip() for t in tags.split(",") if t.strip()] if isinstance(tags, str) else [])
    clean = {k: v for k, v in fm.items() if k not in ("type", "title", "tags", "slug")}
    title = _coerce(fm.get("title")).strip() or slug.rsplit("/", 1)[-1].replace("-", " ").title()
    page_type = _coerce(fm.get("type")) or infer_type(slug)
    return {"frontmatter": _js(clean), "compiled_truth": truth.strip(), "timeline": timeline.strip(),
            "type": page_type, "title": title, "tags": tag_list}


def infer_type(slug: str) -> str:
    lower = "/" + slug.lower()
    for prefix, kind in (("/conversations/", "conversation"), ("/projects/", "project"), ("/people/", "person"),
                         ("/companies/", "company"), ("/notes/", "note"), ("/meetings/", "meeting")):
        if prefix in lower:
            return kind
    return "concept"


class _Dumper(yaml.SafeDumper):
    """js-yaml's layout: list items indented under their key."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def serialize(page: sqlite3.Row, tags: list[str]) -> str:
    meta: dict[str, Any] = {"type": page["type"], "title": page["title"], **json.loads(page["frontmatter"])}
    if tags:
        meta["tags"] = tags
    text = yaml.dump(meta, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False,
                     width=1_000_000)
    body = page["compiled_truth"] or ""
    if page["timeline"]:
        body += "\n\n<!-- timeline -->\n\n" + page["timeline"]
    return f"---\n{text}---\n\n{body}\n"


def check_slug(raw: Any) -> str:
    slug = str(raw or "").strip().lower()
    if not slug or slug.startswith("/") or ".." in slug.split("/") or _BAD_SLUG.search(slug):
        raise OpError("invalid_slug", f"Invalid slug: {raw!r}", "Use lower-case path segments like notes/my-page")
    return slug


# --------------------------------------------------------------------------- pages


def page_row(con: sqlite3.Connection, slug: str, *, deleted: bool = False) -> sqlite3.Row | None:
    row = con.execute("SELECT * FROM pages WHERE slug = ?", (slug,)).fetchone()
    if row is None or (row["deleted_at"] and not deleted):
        return None
    return row


def require(con: sqlite3.Connection, slug: str, *, deleted: bool = False) -> sqlite3.Row:
    row = page_row(con, check_slug(slug), deleted=deleted)
    if row is None:
        raise OpError("page_not_found", f"Page not found: {slug}",
                      "Check the slug or use fuzzy: true" if deleted else NOT_FOUND_HINT)
    return row


def tags_of(con: sqlite3.Connection, page_id: int) -> list[str]:
    return [r[0] for r in con.execute("SELECT tag FROM tags WHERE page_id = ? ORDER BY tag", (page_id,))]


def canonical(page: dict[str, Any], tags: list[str]) -> str:
    return json.dumps([page["type"], page["title"], page["frontmatter"], page["compiled_truth"], page["timeline"],
                       sorted(set(tags))], sort_keys=True, ensure_ascii=False)


def put_page(con: sqlite3.Connection, p: dict[str, Any], remote: bool) -> dict[str, Any]:
    slug = check_slug(p.get("slug"))
    content = p.get("content")
    if not isinstance(content, str):
        raise OpError("invalid_params", "Missing required parameter: content")
    parsed = parse_markdown(content, slug)
    con.execute("BEGIN IMMEDIATE")
    try:
        result = _put(con, slug, parsed, p, remote)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return result


def _put(con: sqlite3.Connection, slug: str, parsed: dict[str, Any], p: dict[str, Any], remote: bool) -> dict[str, Any]:
    fid = parsed["frontmatter"].get("id")
    if fid is not None:
        for other in con.execute("SELECT slug, frontmatter FROM pages WHERE slug != ? AND deleted_at IS NULL", (slug,)):
            if json.loads(other["frontmatter"]).get("id") == fid:
                return {"slug": other["slug"], "status": "skipped", "chunks": 0, "chunk_skip_reason": "write_skipped"}
    existing = con.execute("SELECT * FROM pages WHERE slug = ?", (slug,)).fetchone()
    if existing is not None and existing["deleted_at"]:
        raise OpError("page_deleted", f"Page is soft-deleted: {slug}", "restore_page it first")
    stamp = now()
    if existing is not None:
        old = dict(existing) | {"frontmatter": json.loads(existing["frontmatter"])}
        union = sorted(set(tags_of(con, existing["id"])) | set(parsed["tags"]))
        if canonical(old, union) == canonical(parsed, union):
            return {"slug": slug, "status": "skipped", "chunks": 0, "chunk_skip_reason": "write_skipped"}
        if not (parsed["compiled_truth"] or parsed["timeline"]) and existing["compiled_truth"] and not p.get("allow_empty"):
            raise OpError("empty_overwrite", f"Refusing to overwrite {slug} with an empty body",
                          "pass allow_empty: true")
        con.execute("INSERT INTO versions (page_id, compiled_truth, frontmatter, snapshot_at) VALUES (?, ?, ?, ?)",
                    (existing["id"], existing["compiled_truth"], existing["frontmatter"], stamp))
    date = parsed["frontmatter"].get("date")
    effective = str(date)[:10] if date else None
    values = (parsed["type"], parsed["title"], json.dumps(parsed["frontmatter"], ensure_ascii=False),
              parsed["compiled_truth"], parsed["timeline"], hashlib.sha256(canonical(parsed, parsed["tags"]).encode()).hexdigest(), stamp,
              effective, "date" if effective else None, p.get("source_kind") if not remote else None,
              p.get("source_uri") if not remote else None, "mcp:put_page" if remote else p.get("ingested_via"), stamp)
    if existing is None:
        cur = con.execute(
            "INSERT INTO pages (type, title, frontmatter, compiled_truth, timeline, content_hash, updated_at,"
            " effective_date, effective_date_source, source_kind, source_uri, ingested_via, ingested_at, slug,"
            " created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", (*values, slug, stamp))
        page_id = cur.lastrowid
    else:
        page_id = existing["id"]
        con.execute(
            "UPDATE pages SET type=?, title=?, frontmatter=?, compiled_truth=?, timeline=?, content_hash=?,"
            " updated_at=?, effective_date=?, effective_date_source=?, source_kind=?, source_uri=?, ingested_via=?,"
            " ingested_at=? WHERE id=?", (*values, page_id))
    con.executemany("INSERT OR IGNORE INTO tags VALUES (?, ?)", [(page_id, t) for t in parsed["tags"]])
    result: dict[str, Any] = {"slug": slug, "status": "created_or_updated", "chunks": 1}
    if remote:
        result["auto_links"] = {"skipped": "remote"}
        result["auto_timeline"] = {"skipped": "remote"}
    else:
        result["auto_links"] = reconcile_links(con, page_id, parsed)
        result["auto_timeline"] = {"created": 0}
    result["facts_backstop"] = ({"skipped": "kind:conversation"} if parsed["type"] == "conversation"
                                else {"skipped": "auto_facts_off"})
    result["chronicle_backstop"] = {"skipped": "auto_chronicle_off"}
    result["write_through"] = {"written": False, "skipped": "no_repo_configured"}
    return result


def _targets(value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value]
    out = []
    for v in values:
        if isinstance(v, str) and v.strip():
            m = _WIKILINK.search(v)
            out.append((m.group(1) if m else v).strip().lower())
    return out


def reconcile_links(con: sqlite3.Connection, page_id: int, parsed: dict[str, Any]) -> dict[str, Any]:
    wanted: list[tuple[str, str, str]] = []
    body = parsed["compiled_truth"] + "\n" + parsed["timeline"]
    for m in _WIKILINK.finditer(body):
        target = m.group(1).strip().lower().split(":", 1)[-1]
        wanted.append((target, "mentions", "markdown"))
    for m in _MDLINK.finditer(body):
        wanted.append((m.group(1).lstrip("./").lower(), "mentions", "markdown"))
    fm = parsed["frontmatter"]
    for key, kind in (("related", "related_to"), ("see_also", "related_to"), ("source", "source")):
        wanted += [(t, kind, "frontmatter") for t in _targets(fm.get(key))]
    old = {(r["to_id"], r["link_type"], r["link_source"]) for r in con.execute(
        "SELECT to_id, link_type, link_source FROM links WHERE origin_id = ? AND link_source IN (?, ?)",
        (page_id, "markdown", "frontmatter"))}
    new: set[tuple[int, str, str]] = set()
    unresolved: list[str] = []
    for target, kind, source in dict.fromkeys(wanted):
        row = page_row(con, target)
        if row is None or row["id"] == page_id:
            if row is None and target not in unresolved:
                unresolved.append(target)
            continue
        new.add((row["id"], kind, source))
    for to_id, kind, source in old - new:
        con.execute("DELETE FROM links WHERE from_id=? AND to_id=? AND link_type=? AND link_source=?",
                    (page_id, to_id, kind, source))
    for to_id, kind, source in new - old:
        con.execute("INSERT OR IGNORE INTO links VALUES (?, ?, ?, ?, '', ?)", (page_id, to_id, kind, source, page_id))
    return {"created": len(new - old), "removed": len(old - new), "errors": 0, "unresolved": unresolved}


def page_json(con: sqlite3.Connection, row: sqlite3.Row, include_content: bool) -> dict[str, Any]:
    tags = tags_of(con, row["id"])
    out = {"id": row["id"], "slug": row["slug"], "type": row["type"], "title": row["title"],
           "compiled_truth": row["compiled_truth"], "timeline": row["timeline"],
           "frontmatter": json.loads(row["frontmatter"]), "tags": tags, "content_hash": row["content_hash"],
           "created_at": row["created_at"], "updated_at": row["updated_at"], "deleted_at": row["deleted_at"],
           "effective_date": row["effective_date"], "effective_date_source": row["effective_date_source"],
           "source_kind": row["source_kind"], "source_uri": row["source_uri"], "ingested_via": row["ingested_via"],
           "ingested_at": row["ingested_at"], "source_id": "default"}
    if include_content:
        out["content"] = serialize(row, tags)
    return out


def link_json(con: sqlite3.Connection, rows: list[sqlite3.Row]) -> list[dict[str, Any]]:
    slugs = {r["id"]: r["slug"] for r in con.execute("SELECT id, slug FROM pages")}
    return [{"from_slug": slugs.get(r["from_id"]), "to_slug": slugs.get(r["to_id"]), "link_type": r["link_type"],
             "context": r["context"], "link_source": r["link_source"], "origin_slug": slugs.get(r["origin_id"])}
            for r in rows]


def dispatch(tool: str, p: dict[str, Any], *, remote: bool) -> Any:
    con = open_brain()
    try:
        return _dispatch(con, tool, p, remote)
    finally:
        con.close()


def _dispatch(con: sqlite3.Connection, tool: str, p: dict[str, Any], remote: bool) -> Any:
    if tool == "put_page":
        return put_page(con, p, remote)
    if tool == "get_page":
        row = require(con, str(p.get("slug")), deleted=bool(p.get("include_deleted")))
        return page_json(con, row, bool(p.get("include_content")))
    if tool == "list_pages":
        rows = con.execute("SELECT * FROM pages ORDER BY updated_at DESC, id DESC").fetchall()
        out = []
        for r in rows:
            if (r["deleted_at"] and not p.get("include_deleted")) or (p.get("type") and r["type"] != p["type"]):
                continue
            if p.get("tag") and p["tag"] not in tags_of(con, r["id"]):
                continue
            out.append({"id": r["id"], "slug": r["slug"], "type": r["type"], "title": r["title"],
                        "updated_at": r["updated_at"], "effective_date": r["effective_date"]})
        offset = int(p.get("offset") or 0)
        return out[offset: offset + int(p.get("limit") or 50)]
    if tool == "delete_page":
        row = require(con, str(p.get("slug")))
        con.execute("UPDATE pages SET deleted_at = ? WHERE id = ?", (now(), row["id"]))
        return {"status": "soft_deleted", "slug": row["slug"], "source_id": "default",
                "recoverable_until": "now + 72h via restore_page"}
    if tool == "restore_page":
        row = require(con, str(p.get("slug")), deleted=True)
        if not row["deleted_at"]:
            return {"status": "already_active", "slug": row["slug"], "source_id": "default"}
        con.execute("UPDATE pages SET deleted_at = NULL WHERE id = ?", (row["id"],))
        return {"status": "restored", "slug": row["slug"], "source_id": "default"}
    if tool == "get_versions":
        row = require(con, str(p.get("slug")))
        return [{"id": v["id"], "page_id": v["page_id"], "compiled_truth": v["compiled_truth"],
                 "frontmatter": json.loads(v["frontmatter"]), "snapshot_at": v["snapshot_at"]}
                for v in con.execute("SELECT * FROM versions WHERE page_id = ? ORDER BY id DESC", (row["id"],))]
    if tool == "revert_version":
        row = require(con, str(p.get("slug")))
        v = con.execute("SELECT * FROM versions WHERE id = ? AND page_id = ?", (p.get("version_id"), row["id"])).fetchone()
        if v is None:
            raise OpError("version_not_found", f"Version {p.get('version_id')} not found for {row['slug']}",
                          "List versions with get_versions")
        con.execute("INSERT INTO versions (page_id, compiled_truth, frontmatter, snapshot_at) VALUES (?, ?, ?, ?)",
                    (row["id"], row["compiled_truth"], row["frontmatter"], now()))
        con.execute("UPDATE pages SET compiled_truth = ?, frontmatter = ?, updated_at = ? WHERE id = ?",
                    (v["compiled_truth"], v["frontmatter"], now(), row["id"]))
        return {"status": "reverted"}
    if tool == "search":
        return search(con, str(p.get("query") or ""), int(p.get("limit") or 20))
    if tool in ("add_tag", "remove_tag"):
        row = require(con, str(p.get("slug")))
        sql = "INSERT OR IGNORE INTO tags VALUES (?, ?)" if tool == "add_tag" else "DELETE FROM tags WHERE page_id=? AND tag=?"
        con.execute(sql, (row["id"], str(p.get("tag"))))
        return {"status": "ok"}
    if tool == "get_tags":
        return tags_of(con, require(con, str(p.get("slug")))["id"])
    if tool == "add_link":
        source = str(p.get("link_source") or "manual").strip()
        if source in MANAGED_LINK_SOURCES:
            raise OpError("invalid_params", f"link_source '{source}' is reconciliation-managed and cannot be set manually")
        a, b = require(con, str(p.get("from"))), require(con, str(p.get("to")))
        con.execute("INSERT OR IGNORE INTO links VALUES (?, ?, ?, ?, ?, NULL)",
                    (a["id"], b["id"], str(p.get("link_type") or ""), source, str(p.get("context") or "")))
        return {"status": "ok"}
    if tool == "remove_link":
        a, b = require(con, str(p.get("from"))), require(con, str(p.get("to")))
        sql, args = "DELETE FROM links WHERE from_id=? AND to_id=?", [a["id"], b["id"]]
        for key in ("link_type", "link_source"):
            if p.get(key):
                sql += f" AND {key}=?"
                args.append(p[key])
        return {"status": "ok", "removed": con.execute(sql, args).rowcount}
    if tool in ("get_links", "get_backlinks"):
        row = require(con, str(p.get("slug")))
        column = "from_id" if tool == "get_links" else "to_id"
        return link_json(con, con.execute(f"SELECT * FROM links WHERE {column} = ? ORDER BY rowid", (row["id"],)).fetchall())
    raise OpError("unknown_tool", f"Unknown tool: {tool}")


def search(con: sqlite3.Connection, query: str, limit: int) -> list[dict[str, Any]]:
    words = [w for w in re.findall(r"\w+", query.lower()) if w]
    hits = []
    for r in con.execute("SELECT * FROM pages WHERE deleted_at IS NULL"):
        text = f"{r['title']}\n{r['compiled_truth']}\n{r['timeline']}".lower()
        score = sum(text.count(w) for w in words)
        if words and score:
            exact = r["title"].lower() == query.lower().strip()
            hits.append({"slug": r["slug"], "page_id": r["id"], "title": r["title"], "type": r["type"],
                         "chunk_text": (r["compiled_truth"] or "")[:500], "chunk_source": "compiled_truth",
                         "chunk_id": r["id"], "chunk_index": 0, "score": float(score), "stale": False,
                         "source_id": "default", "effective_date": r["effective_date"],
                         "effective_date_source": r["effective_date_source"], "keyword_hit": True,
                         "base_score": float(score), "title_match_boost": 1.0 if exact else 0.0,
                         "evidence": "exact_title_match" if exact else "keyword", "create_safety": "exists",
                         "id": r["id"]})
    hits.sort(key=lambda h: (-h["score"], h["slug"]))
    return hits[:limit]


# --------------------------------------------------------------------------- surfaces

TOOLS = {
    "put_page": ["slug", "content"], "get_page": ["slug"], "list_pages": [], "delete_page": ["slug"],
    "restore_page": ["slug"], "get_versions": ["slug"], "revert_version": ["slug", "version_id"],
    "search": ["query"], "add_tag": ["slug", "tag"], "remove_tag": ["slug", "tag"], "get_tags": ["slug"],
    "add_link": ["from", "to"], "remove_link": ["from", "to"], "get_links": ["slug"], "get_backlinks": ["slug"],
}  # fmt: skip


def fail(exc: OpError) -> int:
    if exc.code == "no_brain":  # gbrain prints this one bare
        print(exc.message, file=sys.stderr)
        return 1
    print(f"Error [{exc.code}]: {exc.message}", file=sys.stderr)
    if exc.suggestion:
        print(f"Fix: {exc.suggestion}", file=sys.stderr)
    return 1


def cli_call(tool: str, params: dict[str, Any]) -> int:
    try:
        missing = [k for k in TOOLS.get(tool, []) if params.get(k) in (None, "")]
        if tool in TOOLS and missing:
            raise OpError("invalid_params", f"Missing required parameter: {missing[0]}")
        result = dispatch(tool, params, remote=False)
    except OpError as exc:
        return fail(exc)
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


def serve() -> int:
    """MCP over stdio: JSON-RPC 2.0, one message per line; the caller is remote."""
    try:
        open_brain().close()
    except OpError as exc:
        return fail(exc)
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        if "id" not in msg:
            continue  # a notification (notifications/initialized)
        method, params = msg.get("method"), msg.get("params") or {}
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": msg["id"]}
        if method == "initialize":
            reply["result"] = {"protocolVersion": PROTOCOL, "capabilities": {"tools": {}},
                               "serverInfo": {"name": "gbrain", "version": VERSION}}
        elif method == "ping":
            reply["result"] = {}
        elif method == "tools/list":
            reply["result"] = {"tools": [{"name": n, "description": n.replace("_", " "),
                                          "inputSchema": {"type": "object", "properties": {k: {"type": "string"} for k in req},
                                                          "required": req}} for n, req in TOOLS.items()]}
        elif method == "tools/call":
            try:
                result = dispatch(params.get("name"), params.get("arguments") or {}, remote=True)
                reply["result"] = {"content": [{"type": "text", "text": json.dumps(result, indent=2, ensure_ascii=False)}]}
            except OpError as exc:
                envelope = {"error": exc.code, "message": exc.message, **({"suggestion": exc.suggestion} if exc.suggestion else {})}
                reply["result"] = {"content": [{"type": "text", "text": json.dumps(envelope)}], "isError": True}
        else:
            reply["error"] = {"code": -32601, "message": f"Method not found: {method}"}
        sys.stdout.write(json.dumps(reply, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    return 0


VERBS = {"get": "get_page", "delete": "delete_page", "restore": "restore_page", "history": "get_versions",
         "tags": "get_tags"}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("--help", "-h", "help"):
        print("gbrain (stand-in) — init | call <tool> '<json>' | serve | put|get|delete|restore|history|tags <slug>")
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd in ("--version", "version"):
        print(f"gbrain {VERSION}")
        return 0
    if cmd == "init":
        return init(rest)
    if cmd == "serve":
        return serve()
    if cmd == "call":
        if not rest:
            print("Usage: gbrain call [--source <id>] <tool> '<json>'", file=sys.stderr)
            return 1
        return cli_call(rest[0], json.loads(rest[1]) if len(rest) > 1 else {})
    if cmd == "put" and rest:
        return cli_call("put_page", {"slug": rest[0], "content": sys.stdin.read()})
    if cmd == "get" and rest:
        try:
            con = open_brain()
            row = require(con, rest[0])
            sys.stdout.write(serialize(row, tags_of(con, row["id"])))
            return 0
        except OpError as exc:
            return fail(exc)
    if cmd in VERBS and rest:
        return cli_call(VERBS[cmd], {"slug": rest[0]})
    print(f"Unknown command: {cmd}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
