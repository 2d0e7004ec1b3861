"""Hermes request dumps (``~/.hermes/sessions/request_dump_<session>_<ts>.json``).

A dump is the chat-completions request Hermes was sending when an API call failed: the whole
live context of one session, OpenAI-shaped, mapped 1:1 onto rows. There are no per-message
times, so rows are spread between the session start (encoded in the id,
``YYYYMMDD_HHMMSS_<hex>``) and the dump time. A compaction carrier inside the context is found
by Hermes's own summary prefix. The system prompt is not a row in state.db, so it is dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.errors import InputError
from pipeline.models import Message, Session
from pipeline.read._common import interpolate, parse_ts, read_text, time_bounds
from pipeline.read.decode import decode_row

ORIGIN = "hermes-request-dump"
_SID_TIME = re.compile(r"^(\d{8})_(\d{6})")


def openai_messages(
    messages: list[Any], problems: list[str], start: float | None, end: float | None
) -> list[Message]:
    """Messages from an OpenAI chat ``messages`` list, decoded like state.db rows.

    Each dict is already a Hermes row in all but name (``name`` is the ``tool_name`` column),
    so it goes through the same ``decode_row`` as extract; times are spread from start to end.
    """
    rows = [m for m in messages if isinstance(m, dict) and m.get("role") != "system"]
    stamps = interpolate([start] + [None] * max(len(rows) - 2, 0) + ([end] if len(rows) > 1 else []))
    out: list[Message] = []
    for i, (m, ts) in enumerate(zip(rows, stamps, strict=False), 1):
        row = dict(m, id=i, timestamp=ts, tool_name=m.get("tool_name") or m.get("name"))
        out.extend(decode_row(row, problems))
    return out


def read(path: Path) -> Iterator[Session]:
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg}); a request dump is a single JSON object") from exc
    body = ((data.get("request") or {}).get("body") or {}) if isinstance(data, dict) else {}
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise InputError(f"{path}: no request.body.messages; is this a Hermes request_dump_*.json file?")
    problems: list[str] = []
    sid = str(data.get("session_id") or path.stem.removeprefix("request_dump_"))
    start = None
    if m := _SID_TIME.match(sid):
        start = parse_ts(f"{m[1][:4]}-{m[1][4:6]}-{m[1][6:]}T{m[2][:2]}:{m[2][2:4]}:{m[2][4:]}")
    end = parse_ts(data.get("timestamp"))
    if data.get("reason"):
        problems.append(f"dump written because: {data['reason']}")
    # The dump holds only the live context: rows before a carrier are protected head copies, all active.
    msgs = tuple(openai_messages(messages, problems, start if start is not None else end, end))
    started, ended = time_bounds(msgs)
    yield Session(
        id=sid,
        source="hermes-dump",
        origin=ORIGIN,
        model=body.get("model"),
        started_at=started,
        ended_at=ended,
        last_active_at=ended,
        end_reason=data.get("reason"),
        messages=msgs,
        problems=tuple(problems),
    )
