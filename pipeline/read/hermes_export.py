"""Hermes's own JSONL export (``hermes sessions export FILE``): one session dict per line.

Each line is every ``sessions`` column plus ``messages`` (decoded: list content, parsed
``tool_calls``, ``_compressed_summary: true`` on carriers). Rows keep their Hermes ids and
``active``/``compacted`` flags so chunk dedupes protected copies the same way it does for
state.db. Rewound or superseded rows (``active=0, compacted=0``) are not display history and
are dropped, as Hermes's own md export does. A legacy compression chain whose segments are all
in the file is merged into one logical session, as the state.db reader does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.models import Lineage, Message, Session
from pipeline.read._common import iter_json_lines, parse_ts, read_text, to_datetime
from pipeline.read.decode import decode_row
from pipeline.read.hermes import session_fields, strip_harness

ORIGIN = "hermes-jsonl"


def _markers(record: dict[str, Any]) -> dict[str, Any]:
    raw = record.get("model_config")
    try:
        config = json.loads(raw) if isinstance(raw, str) else raw or {}
    except json.JSONDecodeError:
        config = {}
    config = config if isinstance(config, dict) else {}
    return {k: record.get(k) or config.get(k) for k in ("_branched_from", "_delegate_from", "_reset_from")}


def _messages(record: dict[str, Any], problems: list[str], segment: str | None) -> list[Message]:
    """Decode the export's message dicts exactly as extract decodes state.db rows."""
    out: list[Message] = []
    dropped = 0
    for m in record.get("messages") or []:
        if not isinstance(m, dict):
            problems.append(f"session {record.get('id')}: message that is not an object skipped")
            continue
        if not m.get("active", 1) and not m.get("compacted", 0):
            dropped += 1  # rewound / superseded duplicate: not display history
            continue
        out.extend(decode_row(m, problems, segment=segment))
    if dropped:
        problems.append(f"session {record.get('id')}: {dropped} rewound/superseded rows (active=0, compacted=0) dropped")
    return out


def _is_continuation(child: dict[str, Any], parents: dict[str, dict[str, Any]]) -> bool:
    parent = parents.get(str(child.get("parent_session_id")))
    return (
        parent is not None
        and parent.get("end_reason") == "compression"
        and child.get("source") != "tool"
        and not any(_markers(child).values())
    )


def read(path: Path) -> Iterator[Session]:
    problems: list[str] = []
    if path.suffix == ".json":
        # A single-session export (/save json) is one object, not a line per session.
        try:
            data = json.loads(read_text(path))
        except json.JSONDecodeError as exc:
            from pipeline.errors import InputError

            raise InputError(f"{path}: not valid JSON ({exc.msg}); re-export with `hermes sessions export`") from exc
        records = [r for r in (data if isinstance(data, list) else [data]) if isinstance(r, dict)]
    else:
        records = [obj for _, obj in iter_json_lines(path, problems)]
    by_id = {str(r.get("id")): r for r in records if r.get("id") is not None}
    children = {str(r.get("parent_session_id")): r for r in records if _is_continuation(r, by_id)}
    merged = {str(c.get("id")) for c in children.values()}
    for record in records:
        if record.get("id") is None or "messages" not in record:
            problems.append("a line without id/messages was skipped")
            continue
        if str(record["id"]) in merged:
            continue  # emitted as part of its chain root
        chain = [record]
        while str(chain[-1]["id"]) in children and len(chain) < 1000:
            chain.append(children[str(chain[-1]["id"])])
        yield _session(chain, list(problems))


def _session(chain: list[dict[str, Any]], problems: list[str]) -> Session:
    root, tip = chain[0], chain[-1]
    multi = len(chain) > 1  # segments only matter for a merged compression chain
    messages = strip_harness([m for seg in chain for m in _messages(seg, problems, str(seg["id"]) if multi else None)])
    markers = _markers(root)
    return Session(
        id=str(root["id"]),
        origin=ORIGIN,
        **session_fields(root, chain, last_active=tip.get("last_activity_at") or tip.get("last_active"),
                         to_dt=lambda v: to_datetime(parse_ts(v))),
        lineage=Lineage(
            parent=None if len(chain) > 1 and root.get("parent_session_id") is None else root.get("parent_session_id"),
            segments=tuple(str(s["id"]) for s in chain) if len(chain) > 1 else (),
            branched_from=markers["_branched_from"],
            delegated_from=markers["_delegate_from"],
            reset_from=markers["_reset_from"],
        ),
        messages=tuple(messages),
        problems=tuple(problems),
    )
