"""Claude Code project transcripts (``~/.claude/projects/<dir>/<sessionId>.jsonl``).

Claude Code writes each content block of one API message as its own line (same
``message.id``), so blocks are merged back into one assistant row. Tool results arrive as
``user`` lines with ``tool_result`` blocks and become ``tool`` rows. A compaction leaves a
``system/compact_boundary`` line followed by a ``user`` line with ``isCompactSummary``; that
summary row is the generation's carrier, exactly like a Hermes checkpoint. Sub-agent files
(``agent-*.jsonl``, ``isSidechain: true``) become their own session, linked to the parent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.models import Lineage, Session
from pipeline.read._common import (
    Draft,
    build_messages,
    flatten_content,
    iter_json_lines,
    parse_ts,
    time_bounds,
    tool_call,
)

ORIGIN = "claude-code-jsonl"

# Bookkeeping line types that carry no conversation; anything else unknown is counted.
_KNOWN_TYPES = {
    "queue-operation", "attachment", "file-history-snapshot", "permission-mode", "last-prompt",
    "ai-title", "custom-title", "mode", "summary", "progress", "system", "tag", "agent-name", "pr-link",
}
_COMPACT_HEAD = "This session is being continued from a previous conversation"
_COMPACT_TAILS = ("\n\nIf you need specific details from before compaction", "\nPlease continue the conversation from where")


def _carrier_text(text: str) -> str:
    # Strip Claude Code's fixed preamble paragraph and closing instructions; keep the summary proper.
    body = text.strip()
    if body.startswith(_COMPACT_HEAD) and "\n\n" in body:
        body = body.split("\n\n", 1)[1]
    for tail in _COMPACT_TAILS:
        body = body.split(tail, 1)[0]
    body = body.strip()
    return body.removeprefix("Summary:").strip() or text.strip()


def read(path: Path) -> Iterator[Session]:
    problems: list[str] = []
    drafts: list[Draft] = []
    by_msg_id: dict[str, int] = {}
    call_names: dict[str, str] = {}
    usage: dict[str, dict[str, Any]] = {}
    unknown: Counter[str] = Counter()
    uuids: set[str] = set()
    summaries: list[tuple[str, str]] = []
    meta: dict[str, Any] = {}
    title: str | None = None
    boundaries = 0

    for _, obj in iter_json_lines(path, problems):
        kind = obj.get("type")
        if isinstance(obj.get("uuid"), str):
            uuids.add(obj["uuid"])
        if kind == "ai-title" and obj.get("aiTitle"):
            title = str(obj["aiTitle"])
        elif kind == "custom-title" and obj.get("customTitle"):
            title = str(obj["customTitle"])
        elif kind == "summary" and obj.get("summary"):
            summaries.append((str(obj.get("leafUuid")), str(obj["summary"])))
        elif kind == "system" and obj.get("subtype") == "compact_boundary":
            boundaries += 1
        if kind not in ("user", "assistant"):
            if kind not in _KNOWN_TYPES:
                unknown[str(kind)] += 1
            continue
        message = obj.get("message")
        if not isinstance(message, dict):
            problems.append(f"{kind} line without a message object skipped")
            continue
        for key in ("sessionId", "cwd", "gitBranch", "agentId", "isSidechain"):
            if obj.get(key) is not None:
                meta.setdefault(key, obj[key])
        ts = parse_ts(obj.get("timestamp"))
        if kind == "assistant":
            _add_assistant(message, ts, drafts, by_msg_id, call_names, usage, meta, obj.get("cwd"))
        else:
            _add_user(obj, message, ts, drafts, call_names)

    if unknown:
        problems.append("skipped unknown line types: " + ", ".join(f"{k}×{n}" for k, n in sorted(unknown.items())))
    carriers = sum(d.is_carrier for d in drafts)
    if boundaries != carriers:
        problems.append(f"{boundaries} compact_boundary lines but {carriers} compaction summaries")
    if title is None:
        # A summary line titles the conversation whose leaf it names; older files carry several.
        title = next((s for leaf, s in reversed(summaries) if leaf in uuids), None)

    messages = build_messages(drafts)
    started, ended = time_bounds(messages)
    parent_id = str(meta.get("sessionId") or path.stem)
    sidechain = bool(meta.get("isSidechain")) or path.name.startswith("agent-") or "-agent-" in path.stem
    if sidechain and meta.get("agentId"):
        sid = f"{parent_id}-agent-{meta['agentId']}"
        lineage = Lineage(parent=parent_id, delegated_from=parent_id)
    else:
        sid, lineage = parent_id, Lineage()
    totals = Counter[str]()
    for u in usage.values():
        for key in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            if isinstance(u.get(key), int):
                totals[key] += u[key]
    yield Session(
        id=sid,
        source="claude-code",
        origin=ORIGIN,
        title=title,
        title_source="claude-code" if title else None,
        model=meta.get("model"),
        provider="anthropic" if str(meta.get("model", "")).startswith("claude") else None,
        started_at=started,
        ended_at=ended,
        last_active_at=ended,
        cwd=meta.get("cwd"),
        git_branch=meta.get("gitBranch"),
        input_tokens=totals["input_tokens"],
        output_tokens=totals["output_tokens"],
        cache_read_tokens=totals["cache_read_input_tokens"],
        cache_write_tokens=totals["cache_creation_input_tokens"],
        lineage=lineage,
        messages=messages,
        problems=tuple(problems),
    )


def _add_assistant(
    message: dict[str, Any],
    ts: float | None,
    drafts: list[Draft],
    by_msg_id: dict[str, int],
    call_names: dict[str, str],
    usage: dict[str, dict[str, Any]],
    meta: dict[str, Any],
    where: object = None,
) -> None:
    mid = message.get("id")
    model = message.get("model")
    if isinstance(model, str) and model != "<synthetic>":
        meta.setdefault("model", model)
    if isinstance(mid, str) and mid in by_msg_id:
        draft = drafts[by_msg_id[mid]]
    else:
        draft = Draft(role="assistant", timestamp=ts)
        drafts.append(draft)
        if isinstance(mid, str):
            by_msg_id[mid] = len(drafts) - 1
    if isinstance(mid, str) and isinstance(message.get("usage"), dict):
        usage[mid] = message["usage"]  # repeated on every block line; the last copy is the final count
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            draft.content = f"{draft.content}\n\n{block['text']}" if draft.content else str(block["text"])
        elif kind == "thinking" and block.get("thinking"):
            draft.reasoning = f"{draft.reasoning}\n\n{block['thinking']}" if draft.reasoning else str(block["thinking"])
        elif kind == "tool_use":
            args = block.get("input")
            if (block.get("name") == "Bash" and isinstance(args, dict) and "workdir" not in args
                    and isinstance(where, str) and where != meta.get("cwd")):
                # Claude Code's shell keeps its directory from one call to the next ("cd contracts && npm init",
                # then "npm install dotenv"): each line records where it ran, and the command's relative paths
                # are relative to that, not to the folder the session started in.
                args = {**args, "workdir": where}
            call = tool_call(block.get("id"), block.get("name"), args)
            draft.tool_calls.append(call)
            if call.id:
                call_names[call.id] = call.name
        elif kind == "image":
            draft.images += 1


def _add_user(
    obj: dict[str, Any], message: dict[str, Any], ts: float | None, drafts: list[Draft], call_names: dict[str, str]
) -> None:
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    texts: list[str] = []
    images = 0
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            text, n = flatten_content(block.get("content"))
            tid = block.get("tool_use_id")
            drafts.append(
                Draft(role="tool", content=text, images=n, tool_call_id=tid, tool_name=call_names.get(tid or ""), timestamp=ts)
            )
        else:
            text, n = flatten_content([block])
            if text:
                texts.append(text)
            images += n
    if not texts and not images:
        return
    text = "\n\n".join(texts)
    if obj.get("isCompactSummary"):
        drafts.append(Draft(role="user", content=text, timestamp=ts, is_carrier=True, carrier_summary=_carrier_text(text)))
    else:
        # isMeta rows are harness injections (skill bodies, command caveats), not something the human typed.
        drafts.append(Draft(role="system" if obj.get("isMeta") else "user", content=text, images=images, timestamp=ts))
