"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl``).

Only ``response_item`` lines are read as conversation: ``event_msg`` lines replay the same
content for the UI and would double every message. Calls after an assistant message become
that row's ``tool_calls``; each ``*_output`` becomes a ``tool`` row. A ``compacted`` line (the
CLI's own context compaction) is the generation's carrier. A rollout copied mid-turn ends with
calls that never got an output; they are kept (the call still shows intent) and reported.

Rollouts written before the CLI wrapped its lines (summer 2025) have no ``payload``: a first line
``{"id", "timestamp", "instructions", "git"}`` (the session's metadata), then each response item as
a line of its own (``{"type": "message", "role": …}``, ``{"type": "function_call", …}``), with
``{"record_type": "state"}`` markers between turns and no time per line. They are read as the
same items; the working directory comes from the ``<environment_context>`` Codex injected.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.models import Session
from pipeline.read._common import (
    Draft,
    build_messages,
    flatten_content,
    iter_json_lines,
    parse_ts,
    time_bounds,
    to_datetime,
    tool_call,
)

ORIGIN = "codex-rollout"

_KNOWN_TOP = {"session_meta", "turn_context", "response_item", "event_msg", "compacted", "world_state"}
_IGNORED_ITEMS = {"ghost_snapshot", "compaction", "compaction_summary"}
# Context Codex injects as user/developer items; the human never typed these.
_INJECTED_PREFIXES = (
    "# AGENTS.md instructions", "<environment_context>", "<user_instructions>", "<INSTRUCTIONS>",
    "<permissions instructions>", "<skills_instructions>", "<collaboration_mode>", "<turn_aborted>",
)
# The Codex IDE extension wraps what the user typed in the editor's context (active file, selection, open tabs):
# "# Context from my IDE setup: … ## My request for Codex:\n<the request>". The request is the user's message.
_IDE_CONTEXT = "# Context from my IDE setup:"
_IDE_REQUEST = "## My request for Codex:"
_CALL_TYPES = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call", "tool_search_call"}
_OUTPUT_TYPES = {"function_call_output", "custom_tool_call_output", "local_shell_call_output", "tool_search_output"}
#: What a line of a legacy rollout (no ``payload``, see the module docstring) can be: a response item itself.
LEGACY_ITEMS = frozenset({"message", "reasoning", *_CALL_TYPES, *_OUTPUT_TYPES})
_ENV_CWD = re.compile(r"<environment_context>.*?<cwd>([^<\n]+)</cwd>", re.S)


def _output_text(output: Any) -> str:
    # custom_tool_call_output.output is itself JSON: {"output": "...", "metadata": {...}}.
    if isinstance(output, str):
        try:
            inner = json.loads(output)
        except json.JSONDecodeError:
            return output
        if isinstance(inner, dict) and isinstance(inner.get("output"), str):
            return inner["output"]
        return output
    if isinstance(output, dict):
        if isinstance(output.get("content"), str | list):
            return flatten_content(output["content"])[0]
        return json.dumps(output, ensure_ascii=False)
    return flatten_content(output)[0]


def read(path: Path) -> Iterator[Session]:
    problems: list[str] = []
    items: list[tuple[str, dict[str, Any], float | None]] = []
    typed: set[str] = set()
    meta: dict[str, Any] = {}
    tokens: dict[str, Any] = {}
    unknown: Counter[str] = Counter()
    for _, obj in iter_json_lines(path, problems):
        kind = obj.get("type")
        payload = obj.get("payload") if isinstance(obj.get("payload"), dict) else {}
        ts = parse_ts(obj.get("timestamp"))
        if "payload" not in obj:
            if kind in LEGACY_ITEMS:
                kind, payload = "response_item", obj
            elif kind is None and not meta and "id" in obj and "instructions" in obj:
                kind, payload = "session_meta", obj
            elif kind is None and obj.get("record_type") == "state":
                continue
        if kind == "session_meta":
            meta.update({k: v for k, v in payload.items() if k not in ("instructions", "base_instructions")})
        elif kind == "turn_context":
            if payload.get("model"):
                meta.setdefault("model", payload["model"])
            if payload.get("cwd"):
                meta.setdefault("cwd", payload["cwd"])
        elif kind == "event_msg":
            if payload.get("type") == "user_message" and isinstance(payload.get("message"), str):
                typed.add(payload["message"].strip())
            elif payload.get("type") == "token_count" and isinstance(payload.get("info"), dict):
                tokens = payload["info"].get("total_token_usage") or tokens
        elif kind in ("response_item", "compacted"):
            items.append((str(kind), payload, ts))
            if "cwd" not in meta and payload.get("type") == "message" and payload.get("role") == "user":
                # A legacy rollout records its working directory only in the context Codex injected.
                found = _ENV_CWD.search(flatten_content(payload.get("content"))[0])
                if found:
                    meta["cwd"] = found.group(1).strip()
        elif kind not in _KNOWN_TOP:
            unknown[f"line:{kind}"] += 1

    drafts: list[Draft] = []
    names: dict[str, str] = {}
    answered: set[str] = set()
    reasoning: list[str] = []
    for kind, item, ts in items:
        itype = item.get("type")
        if kind == "compacted":
            text = str(item.get("message") or "")
            drafts.append(Draft(role="user", content=text, timestamp=ts, is_carrier=True, carrier_summary=text.strip()))
        elif itype == "message":
            text, images = flatten_content(item.get("content"))
            role = {"assistant": "assistant", "user": "user"}.get(str(item.get("role")), "system")
            if role == "user" and text.lstrip().startswith(_INJECTED_PREFIXES) and text.strip() not in typed:
                role = "system"
            elif role == "user" and text.lstrip().startswith(_IDE_CONTEXT) and _IDE_REQUEST in text:
                text = text.split(_IDE_REQUEST, 1)[1].strip()
            draft = Draft(role=role, content=text, images=images, timestamp=ts)
            if role == "assistant" and reasoning:
                draft.reasoning, reasoning = "\n\n".join(reasoning), []
            drafts.append(draft)
        elif itype == "reasoning":
            summary = item.get("summary") or []
            reasoning.extend(s.get("text", "") for s in summary if isinstance(s, dict) and s.get("text"))
        elif itype in _CALL_TYPES:
            call_id = item.get("call_id") or item.get("id")
            if itype == "function_call":
                call = tool_call(call_id, item.get("name"), item.get("arguments"))
            elif itype == "custom_tool_call":
                call = tool_call(call_id, item.get("name"), {"input": item.get("input", "")})
            else:
                call = tool_call(call_id, itype.removesuffix("_call"), item.get("action") or {})
            if not drafts or drafts[-1].role != "assistant":
                drafts.append(Draft(role="assistant", timestamp=ts))
            if reasoning:
                drafts[-1].reasoning, reasoning = "\n\n".join(reasoning), []
            drafts[-1].tool_calls.append(call)
            if call.id:
                names[call.id] = call.name
            if itype == "web_search_call":
                answered.add(call.id or "")  # searches never get an output item
        elif itype in _OUTPUT_TYPES:
            cid = item.get("call_id")
            answered.add(cid or "")
            drafts.append(
                Draft(role="tool", content=_output_text(item.get("output")), tool_call_id=cid, tool_name=names.get(cid or ""), timestamp=ts)
            )
        elif itype not in _IGNORED_ITEMS:
            unknown[f"item:{itype}"] += 1

    pending = [cid for cid in names if cid not in answered]
    if pending:
        problems.append(f"{len(pending)} tool call(s) without output (rollout cut off mid-turn)")
    if unknown:
        problems.append("skipped unknown items: " + ", ".join(f"{k}×{n}" for k, n in sorted(unknown.items())))

    messages = build_messages(drafts)
    started, ended = time_bounds(messages)
    git = meta.get("git") if isinstance(meta.get("git"), dict) else {}
    yield Session(
        id=str(meta.get("id") or path.stem.removeprefix("rollout-")),
        source="codex",
        origin=ORIGIN,
        model=meta.get("model"),
        provider=meta.get("model_provider"),
        started_at=started or to_datetime(parse_ts(meta.get("timestamp"))),
        ended_at=ended,
        last_active_at=ended,
        cwd=meta.get("cwd"),
        git_branch=git.get("branch"),
        input_tokens=int(tokens.get("input_tokens") or 0),
        output_tokens=int(tokens.get("output_tokens") or 0),
        cache_read_tokens=int(tokens.get("cached_input_tokens") or 0),
        reasoning_tokens=int(tokens.get("reasoning_output_tokens") or 0),
        messages=messages,
        problems=tuple(problems),
    )

