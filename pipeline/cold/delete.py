"""Deleting a unit's rows the way Hermes deletes a session.

Two ways, same effect:

* ``hermes sessions delete ID --yes``, one session at a time, children first, when the ``hermes``
  command is installed and the database is its home's ``state.db``: Hermes's own code, including
  whatever a newer Hermes adds to deletion. The check before each call and the delete are two
  transactions in two processes, so a session resumed in that second would lose what it wrote
  then; ``--via sqlite`` closes that window.
* One ``BEGIN IMMEDIATE`` transaction per batch of units (``delete_rows``), with Hermes's write
  discipline (``rows.begin_immediate``) and ``foreign_keys`` on, in Hermes's order: children
  orphaned (``parent_session_id = NULL``) as ``SessionDB.delete_session`` does, then messages
  before their session row (the trigram FTS trigger looks the session up while it deletes), then
  the session; usage rows go by their ``ON DELETE CASCADE`` and explicitly. FTS tables stay
  consistent through Hermes's own triggers, which fire on these deletes. System prompts no
  session refers to any more are removed, as the current Hermes does
  (``_delete_unreferenced_system_prompts``), but only those this unit referred to.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pipeline.cold.errors import ColdError
from pipeline.cold.rows import Schema, prompt_hashes, read_rows


def delete_rows(conn: sqlite3.Connection, schema: Schema, ids: Sequence[str]) -> dict[str, int]:
    """Delete ``ids`` (a unit, parents first) inside the caller's write transaction; row counts."""
    counts: dict[str, int] = {}
    member = list(ids)
    hashes = sorted(prompt_hashes(schema.session_columns, read_rows(conn, schema, member)["sessions"])) \
        if schema.has_system_prompts else []
    marks = ",".join("?" * len(member))
    for sid in reversed(member):
        conn.execute(f"UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id = ? "
                     f"AND id NOT IN ({marks})", [sid, *member])
        for name, table in schema.tables.items():
            if name == "sessions" or not table.owned:
                continue
            where = " OR ".join(f'"{c}" = ?' for c in table.refs)
            cur = conn.execute(f'DELETE FROM "{name}" WHERE {where}', [sid] * len(table.refs))
            counts[name] = counts.get(name, 0) + cur.rowcount
        cur = conn.execute("DELETE FROM sessions WHERE id = ?", (sid,))
        counts["sessions"] = counts.get("sessions", 0) + cur.rowcount
    if hashes:
        cur = conn.execute(
            f"DELETE FROM system_prompts WHERE hash IN ({','.join('?' * len(hashes))}) "
            "AND NOT EXISTS (SELECT 1 FROM sessions WHERE sessions.system_prompt_hash = system_prompts.hash) "
            "AND NOT EXISTS (SELECT 1 FROM sessions WHERE sessions.tool_names = system_prompts.hash)", hashes)
        counts["system_prompts"] = cur.rowcount
    return counts


def hermes_command() -> str | None:
    """The ``hermes`` executable on PATH, if any."""
    return shutil.which("hermes")


def hermes_can_delete_in(db: Path, home: Path) -> bool:
    """``hermes sessions delete`` works on ``$HERMES_HOME/state.db`` only, and opening any other
    directory as a home would fill it with Hermes's skeleton: use it only for a home's own db."""
    db = Path(db).expanduser().resolve()
    return db.name == "state.db" and (db == (home / "state.db").resolve() or db.parent.parent.name == "profiles"
                                      or (db.parent / "config.yaml").exists())


def hermes_delete(hermes: str, db: Path, session_id: str, *, timeout: float = 120) -> None:
    """``hermes sessions delete ID --yes`` against ``db``'s home; raises ``ColdError`` if it refused."""
    env = dict(os.environ)
    env["HERMES_HOME"] = str(Path(db).expanduser().resolve().parent)
    try:
        proc = subprocess.run([hermes, "sessions", "delete", session_id, "--yes"], env=env, capture_output=True,
                              text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ColdError(f"{session_id}: `hermes sessions delete` failed to run ({exc}); retry with --via sqlite") from exc
    said = (proc.stdout + proc.stderr).strip().splitlines()
    if proc.returncode != 0 or not any(line.startswith("Deleted session") for line in said):
        last = said[-1] if said else f"exit {proc.returncode}"
        raise ColdError(f"{session_id}: `hermes sessions delete` refused: {last}")
