"""Decode one stored Hermes message row into ``Message`` objects.

Kept apart from ``extract`` because the JSONL-export reader decodes the same row shapes.
A row can yield two messages: a compaction carrier that also holds authentic text (the
force-user-leading carrier puts the live user turn after the END marker; a merged carrier puts
the prior tail message before its delimiter) becomes the checkpoint plus that authentic turn.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pipeline.models import Message, ToolCall

CONTENT_JSON_PREFIXES = ("\x00json:", "\x01json:")
IMAGE_MARKER = "[image]"
#: Tool arguments nested deeper than this are kept as their JSON text: every later stage (redaction,
#: facts, hashing) walks them, and a hostile ``[[[[...]]]]`` must not exhaust the stack there.
MAX_JSON_DEPTH = 64
_BAD_JSON = object()


def as_text(value: Any) -> str:
    """A column value as text: blobs decoded (invalid UTF-8 replaced), numbers spelled out."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace").replace("\x00", "")
    return "" if value is None else str(value)


def load_json(raw: Any, default: Any = None) -> Any:
    """``json.loads`` that returns ``default`` for invalid JSON, and for JSON nested past the stack."""
    try:
        return json.loads(raw)
    except (ValueError, TypeError, RecursionError):
        return default


def too_deep(value: Any, limit: int = MAX_JSON_DEPTH, *, text: str | bytes | None = None) -> bool:
    """Whether a parsed JSON value nests deeper than ``limit`` (checked without recursion).

    With the JSON ``text`` it was parsed from, a text with fewer than ``limit`` brackets answers at once:
    ``limit`` levels need ``limit`` opening brackets (and most tool arguments have a handful).
    """
    if isinstance(text, str) and text.count("[") + text.count("{") < limit:
        return False
    if isinstance(text, bytes) and text.count(b"[") + text.count(b"{") < limit:
        return False
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False

# Hermes's compaction markers (agent/context_compressor.py). Match stable heads, not full texts.
CARRIER_HEADS = (
    "[CONTEXT COMPACTION — REFERENCE ONLY]",
    "[CONTEXT COMPACTION]",
    "[CONTEXT SUMMARY]:",
)
SUMMARY_END_MARKER = "--- END OF CONTEXT SUMMARY — respond to the message below, not the summary above ---"
MERGED_HEADER = "[PRIOR CONTEXT — for reference only; not a new message]"
MERGED_DELIMITER = "[END OF PRIOR CONTEXT — COMPACTION SUMMARY BELOW]"
CONTINUATION_FILLER = "Continue from the compressed conversation context above."


def content_text(raw: Any, problems: list[str], where: str) -> tuple[str, int]:
    """Stored content → (plain text, image count). Handles ``\\x00json:``/``\\x01json:`` part lists."""
    if raw is None:
        return "", 0
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if isinstance(raw, list):
        return parts_text(raw)
    text = str(raw)
    if text.startswith(CONTENT_JSON_PREFIXES):
        raw_parts = text[len(CONTENT_JSON_PREFIXES[0]) :]
        parts = load_json(raw_parts, _BAD_JSON)
        if parts is not _BAD_JSON and not too_deep(parts, text=raw_parts):
            return parts_text(parts)
        problems.append(f"{where}: structured content is not valid JSON; kept as text")
        text = text[len(CONTENT_JSON_PREFIXES[0]) :]
    if "\x00" in text:
        problems.append(f"{where}: NUL bytes removed")
        text = text.replace("\x00", "")
    if "\ufffd" in text:
        # extract's text factory replaces undecodable bytes; say so once per message
        problems.append(f"{where}: invalid UTF-8 bytes replaced")
    return text, 0


def parts_text(parts: Any) -> tuple[str, int]:
    """OpenAI/Anthropic-style content parts → text with an image marker per image."""
    if isinstance(parts, str):
        return parts, 0
    if isinstance(parts, dict):
        parts = [parts]
    if not isinstance(parts, list):
        return str(parts), 0
    texts: list[str] = []
    images = 0
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            continue
        kind = str(part.get("type", ""))
        if kind in ("text", "input_text", "output_text"):
            texts.append(str(part.get("text", "")))
        elif "image" in kind:
            images += 1
            texts.append(IMAGE_MARKER)
    return "\n".join(t for t in texts if t).replace("\x00", ""), images


def tool_calls(raw: Any, problems: list[str], where: str) -> tuple[ToolCall, ...]:
    """The ``tool_calls`` column (JSON list of OpenAI-style calls) → ``ToolCall``s."""
    if raw in (None, "", "[]"):
        return ()
    value = raw
    if isinstance(raw, str | bytes):
        value = load_json(raw, _BAD_JSON)
        if value is _BAD_JSON or too_deep(value, MAX_JSON_DEPTH + 4, text=raw):
            problems.append(f"{where}: tool_calls is not valid JSON; calls dropped")
            return ()
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        problems.append(f"{where}: tool_calls is not a list; calls dropped")
        return ()
    calls = []
    for item in value:
        if not isinstance(item, dict):
            continue
        fn = item.get("function") if isinstance(item.get("function"), dict) else item
        name = fn.get("name") or item.get("name")
        if not name:
            continue
        call_id = item.get("id") or item.get("call_id")
        calls.append(ToolCall(id=None if call_id is None else as_text(call_id), name=as_text(name),
                              arguments=parse_args(fn.get("arguments", fn.get("input")))))
    return tuple(calls)


def parse_args(raw: Any) -> dict[str, Any] | str:
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return raw if not too_deep(raw) else json.dumps(raw)[:100_000]
    if isinstance(raw, str):
        value = load_json(raw, raw)
        return value if isinstance(value, dict) and not too_deep(value, text=raw) else raw
    return str(raw)


def codex_text(raw: Any) -> str:
    """Text of a Responses-API reply stored only in ``codex_message_items``."""
    items = load_json(raw, None) if isinstance(raw, str | bytes) else raw
    if too_deep(items):
        return ""
    if isinstance(items, dict):
        items = [items]
    texts: list[str] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type", "message") == "message":
            text, _ = parts_text(item.get("content", []))
            texts.append(text)
    return "\n".join(t for t in texts if t)


def unwrap_json(raw: Any, layers: int = 2) -> Any:
    """``display_metadata`` rows written before Hermes's guard are JSON-encoded twice."""
    value = raw
    for _ in range(layers + 1):
        if not isinstance(value, str | bytes):
            break
        value = load_json(value, _BAD_JSON)
        if value is _BAD_JSON:
            return None
    return value


def is_carrier_text(text: str) -> bool:
    head = text.lstrip()
    if head.startswith(CARRIER_HEADS):
        return True
    return head.startswith(MERGED_HEADER) and MERGED_DELIMITER in head


def split_carrier(text: str) -> tuple[str, str, str]:
    """Carrier text → (authentic text before, checkpoint summary, authentic text after)."""
    before = ""
    body = text
    if MERGED_DELIMITER in body:
        before, body = body.split(MERGED_DELIMITER, 1)
        before = before.replace(MERGED_HEADER, "").strip()
    after = ""
    if SUMMARY_END_MARKER in body:
        body, after = body.split(SUMMARY_END_MARKER, 1)
        after = after.strip()
    body = body.strip()
    for head in CARRIER_HEADS:
        if body.startswith(head):
            # The prefix is one long instruction line; the checkpoint starts on the next line.
            first_nl = body.find("\n")
            body = body[len(head) :].strip() if first_nl < 0 or head.endswith(":") else body[first_nl + 1 :]
            break
    return before, body.strip(), after


def decode_row(row: dict[str, Any], problems: list[str], *, segment: str | None = None) -> list[Message]:
    """One stored row → zero, one or two messages (see module docstring)."""
    rid = row.get("id")
    if not isinstance(rid, int | None):
        rid = None if isinstance(rid, bytes | float) else as_text(rid)
        rid = int(rid) if isinstance(rid, str) and rid.isdigit() else None
    where = "message (no usable id)" if rid is None else f"message {rid}"
    role = as_text(row.get("role")).strip()
    if role not in ("user", "assistant", "tool", "system"):
        shown = repr(role) if len(role) <= 12 and role.isprintable() else f"of {len(role)} characters"
        problems.append(f"{where}: unknown role {shown} skipped")
        return []
    if row.get("observed"):
        return []  # ambient gateway message, observed but not a turn
    meta = unwrap_json(row.get("display_metadata"))
    if isinstance(meta, dict) and meta.get("model_only"):
        return []
    text, images = content_text(row.get("content"), problems, where)
    if not text.strip() and role == "assistant" and row.get("codex_message_items"):
        text = codex_text(row.get("codex_message_items"))
    flagged = bool(row.get("_compressed_summary"))
    carrier = flagged or (role != "tool" and is_carrier_text(text))
    if row.get("display_kind") == "hidden" and not carrier:
        return []
    if role == "user" and text.startswith(CONTINUATION_FILLER):
        return []
    common: dict[str, Any] = {
        "row_id": rid,
        "timestamp": _float(row.get("timestamp"), problems, where),
        "active": bool(row.get("active", 1)),
        "compacted": bool(row.get("compacted", 0)),
        "identity": identity(row),
        "segment": segment,
    }
    calls = tool_calls(row.get("tool_calls"), problems, where)
    reasoning = as_text(row.get("reasoning") or row.get("reasoning_content")) or None
    if carrier:
        before, summary, after = split_carrier(text)
        out = [Message(role=role, content="", is_carrier=True, carrier_summary=summary, **common)]  # type: ignore[arg-type]
        live = "\n\n".join(t for t in (before, after) if t)
        if live or calls:
            # The authentic turn keeps its own identity so the dedupe in ``chunk`` can still match
            # it against its copies; the carrier part gets a distinct one.
            out[0] = out[0].model_copy(update={"identity": f"carrier:{rid}"})
            out.append(Message(role=role, content=live, tool_calls=calls, images=images, reasoning=reasoning, **common))  # type: ignore[arg-type]
        return out
    return [
        Message(
            role=role,  # type: ignore[arg-type]
            content=text,
            tool_calls=calls,
            tool_call_id=None if row.get("tool_call_id") is None else as_text(row.get("tool_call_id")),
            tool_name=None if row.get("tool_name") is None else as_text(row.get("tool_name")),
            reasoning=reasoning,
            images=images,
            **common,
        )
    ]


#: Prefix of an identity derived from the row's payload, valid within one process only.
PAYLOAD_IDENTITY = "payload:"


def identity(row: dict[str, Any]) -> str:
    """Cross-generation identity of a stored message, as Hermes's display dedupe defines it.

    v31 stamps ``message_uid`` once per logical message and copies keep it; v30 keeps
    ``display_order``; older databases only have the payload, hashed like Hermes's
    ``_display_identity`` over (role, content, timestamp, tool_call_id, tool_calls, tool_name).
    """
    if row.get("message_uid"):
        return f"uid:{row['message_uid']}"
    if row.get("display_order") is not None:
        return f"order:{row['display_order']}"
    # Only compared within one read of one session (``chunk.logical_transcript``), so Python's own
    # tuple hash will do (hashing a repr with sha256 was a tenth of reading's cost). It differs from
    # one process to the next, so it is never stored (``importdb`` leaves such rows without a
    # message_uid). 64 bits: two different payloads in one session collide with odds of about n²/2⁶⁵.
    get = row.get
    key = (get("role"), get("content"), get("timestamp"), get("tool_call_id"), get("tool_calls"), get("tool_name"))
    try:
        h = hash(key)
    except TypeError:  # a column already decoded into a list or dict (JSON exports)
        h = hash(repr(key))
    return f"{PAYLOAD_IDENTITY}{h & 0xFFFFFFFFFFFFFFFF:016x}"


def _float(value: Any, problems: list[str] | None = None, where: str = "") -> float | None:
    """A message timestamp in epoch seconds; anything else is dropped (and said so)."""
    if value is None:
        return None
    if type(value) is float and math.isfinite(value):  # what SQLite's REAL gives: no need to spell it out
        return value
    got = None
    if isinstance(value, int | float | str) and not isinstance(value, bool) and len(str(value)) < 64:
        try:
            got = float(value)
        except ValueError:
            got = None
    if got is None or not math.isfinite(got):
        if problems is not None:
            text = value if isinstance(value, str) else None
            shown = repr(text) if text is not None and len(text) <= 12 and text.isprintable() else type(value).__name__
            problems.append(f"{where}: timestamp {shown} is not a time; ignored")
        return None
    return got
