"""ShareGPT trajectories (Hermes ``trajectory_samples.jsonl`` / ``failed_trajectories.jsonl``).

One record per agent run: ``{"conversations": [{"from", "value"}], "timestamp", "model",
"completed"}``. ``gpt`` turns embed Hermes/Qwen function calls as ``<tool_call>{json}</tool_call>``
and ``tool`` turns answer with ``<tool_response>{json}</tool_response>``. The ids in those
responses repeat (``qwen_tc_0`` every turn), so calls get synthetic ids and responses are paired
with the calls of the preceding ``gpt`` turn by position. A plain ``.json`` array of records,
or records with OpenAI-style ``messages``, are read too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.errors import InputError
from pipeline.models import Session, ToolCall
from pipeline.read._common import (
    Draft,
    build_messages,
    iter_json_lines,
    parse_args,
    parse_ts,
    read_text,
    stable_id,
    time_bounds,
    to_datetime,
)
from pipeline.read.hermes_dump import openai_messages

ORIGIN = "sharegpt-jsonl"
_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "tool": "tool",
          "function_call": "assistant", "observation": "tool", "function": "tool"}
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
_RESPONSE = re.compile(r"<tool_response>\s*(.*?)\s*</tool_response>", re.S)
_THINK = re.compile(r"<think>(.*?)</think>", re.S)
#: A tag left over once the blocks are gone: models that think in the prompt's open <think> (or close it
#: twice) write "reasoning</think>answer".
_STRAY_THINK = re.compile(r"</?think>")


def _records(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    if path.suffix == ".json":
        try:
            data = json.loads(read_text(path))
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON ({exc.msg}); ShareGPT files are a JSON array or JSONL") from exc
        return [r for r in (data if isinstance(data, list) else [data]) if isinstance(r, dict)]
    return [obj for _, obj in iter_json_lines(path, problems)]


def read(path: Path) -> Iterator[Session]:
    problems: list[str] = []
    for n, record in enumerate(_records(path, problems), 1):
        yield _session(path, n, record, list(problems))


def _session(path: Path, n: int, record: dict[str, Any], problems: list[str]) -> Session:
    ts = parse_ts(record.get("timestamp"))
    sid = str(record.get("id") or stable_id("sharegpt", path.name, n, record.get("timestamp")))
    if isinstance(record.get("messages"), list) and not record.get("conversations"):
        msgs = tuple(openai_messages(record["messages"], problems, ts, None))
    else:
        drafts = _conversation(sid, record.get("conversations") or [], problems)
        if drafts:
            drafts[0].timestamp = ts  # one run timestamp: every row shares it
        msgs = build_messages(drafts, mark_compacted=False)
    completed = record.get("completed")
    return Session(
        id=sid,
        source="sharegpt",
        origin=ORIGIN,
        model=record.get("model"),
        started_at=time_bounds(msgs)[0] or to_datetime(ts),
        ended_at=time_bounds(msgs)[1] or to_datetime(ts),
        end_reason=None if completed is None else ("completed" if completed else "failed"),
        messages=msgs,
        problems=tuple(problems),
    )


def _conversation(sid: str, turns: list[Any], problems: list[str]) -> list[Draft]:
    drafts: list[Draft] = []
    pending: list[ToolCall] = []
    serial = 0
    for turn in turns:
        if not isinstance(turn, dict):
            continue
        role = _ROLES.get(str(turn.get("from") or turn.get("role")))
        value = str(turn.get("value") or turn.get("content") or "")
        if role is None:  # system prompt (tool schemas) is not a state.db row
            continue
        if role == "assistant":
            reasoning = "\n".join(t.strip() for t in _THINK.findall(value) if t.strip()) or None
            calls = []
            for raw in _CALL.findall(value):
                try:
                    obj = json.loads(raw)
                except json.JSONDecodeError:
                    problems.append(f"unparseable <tool_call> in run {sid}")
                    obj = {"name": "unknown", "arguments": raw}
                serial += 1
                calls.append(ToolCall(id=f"{sid}-call-{serial}", name=str(obj.get("name") or "unknown"),
                                      arguments=parse_args(obj.get("arguments"))))
            text = _STRAY_THINK.sub("", _CALL.sub("", _THINK.sub("", value))).strip()
            drafts.append(Draft(role="assistant", content=text, tool_calls=calls, reasoning=reasoning))
            pending = list(calls)
        elif role == "tool":
            bodies = _RESPONSE.findall(value) or [value]
            for body in bodies:
                try:
                    obj = json.loads(body)
                except json.JSONDecodeError:
                    obj = {"content": body}
                call = pending.pop(0) if pending else None
                content = obj.get("content") if isinstance(obj, dict) else obj
                drafts.append(Draft(
                    role="tool",
                    content=content if isinstance(content, str) else json.dumps(content, ensure_ascii=False),
                    tool_call_id=call.id if call else None,
                    tool_name=(obj.get("name") if isinstance(obj, dict) else None) or (call.name if call else None),
                ))
        else:
            drafts.append(Draft(role="user", content=value))
    return drafts
