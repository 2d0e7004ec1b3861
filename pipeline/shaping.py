"""Input shaping: a redacted chunk → the plain-text transcript the model reads.

Tool results are cut head+tail with a marker saying how much went, long text and tool-call
arguments likewise; reasoning is never included; images become a marker; compaction carriers
are skipped (their text arrives as the chunk's checkpoint). Everything taken from a session is
passed through ``defence`` before it goes between our ``<session_data>``-style fences, so a
session cannot close a fence and speak outside it.

``grounding_text`` is the other direction: everything the session said or did, for grounding what
the model answers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pipeline.models import Chunk, Message, Session

TOOL_HEAD, TOOL_TAIL = 700, 300
TEXT_HEAD, TEXT_TAIL = 3000, 1000
ARGS_LIMIT = 500
_FENCES = ("session_data", "checkpoint_data", "parts_data")


def defence(text: str) -> str:
    """Keep session text from closing (or opening) our data fences."""
    for tag in _FENCES:
        text = text.replace(f"<{tag}>", f"<{tag.replace('_', '-')}>").replace(
            f"</{tag}>", f"</{tag.replace('_', '-')}>"
        )
    return text


def defence_obj(obj: Any) -> Any:
    """``defence`` applied to every string inside a JSON-like value."""
    if isinstance(obj, str):
        return defence(obj)
    if isinstance(obj, dict):
        return {k: defence_obj(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [defence_obj(v) for v in obj]
    return obj


def truncate(text: str, head: int, tail: int) -> str:
    """Head and tail of ``text`` with a marker saying how much was cut."""
    if len(text) <= head + tail + 40:
        return text
    cut = len(text) - head - tail
    return f"{text[:head]}\n[… {cut:,} chars omitted …]\n{text[-tail:]}"


def _args(arguments: dict[str, Any] | str) -> str:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return truncate(raw, ARGS_LIMIT * 2 // 3, ARGS_LIMIT // 3)


def render_message(m: Message) -> str | None:
    if m.is_carrier:
        return None  # its text is the chunk checkpoint
    ident = f"#{m.row_id}" if m.row_id is not None else ""
    content = m.content or ""
    if m.images and "[image" not in content:
        content = (content + f" [image ×{m.images}]").strip()
    if m.role == "tool":
        head = f"[tool{ident} {m.tool_name or ''}]".replace(" ]", "]")
        return f"{head} {truncate(content, TOOL_HEAD, TOOL_TAIL)}"
    lines = (
        [f"[{m.role}{ident}] {truncate(content, TEXT_HEAD, TEXT_TAIL)}".rstrip()]
        if content or not m.tool_calls
        else [f"[{m.role}{ident}]"]
    )
    lines += [f"  → {c.name}({_args(c.arguments)})" for c in m.tool_calls]
    return "\n".join(lines)


def shape_transcript(chunk: Chunk) -> str:
    """The chunk as plain text for the model. Reasoning is never included."""
    return defence("\n".join(t for m in chunk.messages if (t := render_message(m))))


def grounding_text(session: Session, chunks: Sequence[Chunk]) -> str:
    """Everything the session said or did, for grounding (lowercased)."""
    parts: list[str] = []
    for m in session.messages:
        parts.append(m.content or "")
        parts.append(m.carrier_summary or "")
        for c in m.tool_calls:
            parts.append(
                c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments, ensure_ascii=False)
            )
    parts.extend(c.checkpoint or "" for c in chunks)
    return "\n".join(parts).lower()
