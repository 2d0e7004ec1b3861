"""Is a unit safe to prune? Its guards (live, pinned, being compacted) and its sidecar, compared
row for row and column for column with the database inside the caller's transaction."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from pipeline.cold.rows import (
    SYSTEM_PROMPTS,
    Schema,
    Sessions,
    Unit,
    encode_row,
    prompt_hashes,
    read_rows,
)
from pipeline.cold.sidecar import Sidecar, session_lines


def _s(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _ago(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def live_reason(sessions: Sessions, unit: Unit, *, now: float, idle: float) -> str | None:
    """Why the unit is still live (not ended, or active within ``idle`` seconds), or None."""
    for sid in unit.ids:
        if sessions.info[sid].ended_at is None:
            return f"{sid} is not ended (still live in Hermes)"
    quiet = now - unit.last_active
    if quiet < idle:
        return f"active {_ago(quiet)} ago, within the --idle {_ago(idle)} window"
    return None


def held_reason(conn: sqlite3.Connection, sessions: Sessions, unit: Unit, *, now: float) -> str | None:
    """Why the unit must not be deleted right now: pinned, or a live compression lock / turn lease."""
    for sid in unit.ids:
        if sessions.info[sid].pinned:
            return f"{sid} is pinned (unpin it with `hermes sessions unpin {sid}` to allow pruning)"
    tables = {_s(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    ids = list(unit.ids)
    marks = ",".join("?" * len(ids))
    for table, col, what in (("compression_locks", "session_id", "being compacted"),
                             ("session_turn_leases", "conversation_id", "in the middle of a turn")):
        if table not in tables:
            continue
        row = conn.execute(f'SELECT "{col}", holder, expires_at FROM {table} WHERE "{col}" IN ({marks}) '
                           "AND expires_at > ? ORDER BY expires_at DESC LIMIT 1", [*ids, now]).fetchone()
        if row:
            sid, holder = _s(row[0]), _s(row[1])
            return f"{sid} is {what} ({table} held by {holder!r} for {_ago(float(row[2]) - now)} more)"
    return None


def diff(conn: sqlite3.Connection, schema: Schema, sessions: Sessions, unit_ids: Sequence[str],
         sidecar: Sidecar) -> str | None:
    """None when the database holds exactly what the sidecar holds for the sessions still present
    (an earlier prune may have removed some: those must be wholly gone); else what differs."""
    archived = sidecar.sessions
    extra = [sid for sid in unit_ids if sid not in archived]
    if extra:
        return f"session {extra[0]} joined this lineage after it was archived; run distill archive again"
    present = {sid for sid in archived if sid in sessions.info}
    columns = sidecar.columns
    if set(columns) - {"system_prompts"} != set(schema.tables):
        return (f"the database's tables changed since the sidecar was written "
                f"({sorted(set(columns) ^ set(schema.tables) - {'system_prompts'})}); run distill archive again")
    db = read_rows(conn, schema, archived)
    for name, table in schema.tables.items():
        if list(table.columns) != columns[name]:
            return f"{name} columns changed since the sidecar was written; run distill archive again"
        if name == "sessions":
            expected = [_orphaned(line, columns[name], sessions) for line, sid
                        in zip(sidecar.lines.get(name, []), archived, strict=False) if sid in present]
        elif table.owned:
            expected = session_lines(sidecar, name, columns[name], table.refs, present)
        else:
            expected = list(sidecar.lines.get(name, ()))
        got = [encode_row(name, r) for r in db[name]]
        if got != expected:
            return _first_difference(name, expected, got)
    if "system_prompts" in db:
        wanted = prompt_hashes(columns["sessions"], (r for r in sidecar.rows("sessions") if r[0] in present))
        expected = [line for line in sidecar.lines.get("system_prompts", ())
                    if _prompt_hash(line) in wanted]
        got = [encode_row(SYSTEM_PROMPTS.name, r) for r in db["system_prompts"]]
        if got != expected:
            return _first_difference("system_prompts", expected, got)
    return None


def _orphaned(line: str, columns: Sequence[str], sessions: Sessions) -> str:
    """The sessions line as Hermes leaves it once its parent is deleted: ``parent_session_id`` NULL.

    Deleting a session orphans its children (``SessionDB.delete_session``); a reset child archived
    before its parent was pruned still matches its sidecar, which keeps the link for ``pull``.
    """
    if "parent_session_id" not in columns:
        return line
    row = json.loads(line)
    i = columns.index("parent_session_id") + 1
    if isinstance(row[i], str) and row[i] not in sessions.info:
        row[i] = None
        return json.dumps(row, ensure_ascii=False, separators=(",", ":"))
    return line


def _prompt_hash(line: str) -> str:
    return str(json.loads(line)[1])


def _first_difference(table: str, expected: list[str], got: list[str]) -> str:
    if len(expected) != len(got):
        return (f"{table}: the database has {len(got)} rows, the sidecar {len(expected)}; the session changed "
                "since it was archived: run distill archive again")
    for n, (a, b) in enumerate(zip(expected, got, strict=True)):
        if a != b:
            return f"{table}: row {n + 1} differs from the sidecar; run distill archive again"
    return f"{table}: differs"
