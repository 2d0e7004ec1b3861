"""What Hermes's own ``SessionDB`` reads from a state.db: run under a Hermes Python.

    HERMES_HOME=$(mktemp -d) .venv-hermes/bin/python tests/hermes_reads.py --db COPY.db --query pytest ID...

Prints one JSON object: per session id, ``get_session`` (title, parent, ended), ``get_messages`` (every
row, inactive included where the version can), ``get_messages_as_conversation``, and the session ids
``search_messages`` finds for each ``--query``. Point it at a copy: opening a SessionDB may migrate.
"""

from __future__ import annotations

import argparse
import inspect
import json
from pathlib import Path
from typing import Any


def _kw(func: Any, **wanted: Any) -> dict[str, Any]:
    params = inspect.signature(func).parameters
    return {k: v for k, v in wanted.items() if k in params}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--query", action="append", default=[])
    ap.add_argument("ids", nargs="*")
    args = ap.parse_args()
    from hermes_state import SessionDB

    db = SessionDB(db_path=args.db)
    out: dict[str, Any] = {"sessions": {}, "search": {}}
    for sid in args.ids:
        s = db.get_session(sid)
        msgs = db.get_messages(sid, **_kw(db.get_messages, include_inactive=True))
        conv = db.get_messages_as_conversation(sid)
        out["sessions"][sid] = {
            "session": None if s is None else {k: s.get(k) for k in ("id", "title", "parent_session_id", "ended_at")},
            "messages": [{k: m.get(k) for k in ("id", "role", "content", "tool_calls", "timestamp", "active")}
                         for m in msgs],
            "conversation": conv,
        }
    for q in args.query:
        hits = db.search_messages(q, **_kw(db.search_messages, limit=1000, include_inactive=True))
        out["search"][q] = sorted({h.get("session_id") for h in hits})
    db.close()
    print(json.dumps(out, default=str, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
