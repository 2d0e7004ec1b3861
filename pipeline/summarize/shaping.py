"""Input shaping: a redacted chunk → the plain-text transcript the model reads.

Tool results are cut head+tail with a marker saying how much went, long text and tool-call
arguments likewise; reasoning is never included; images become a marker; compaction carriers
are skipped (their text arrives as the chunk's checkpoint). Everything taken from a session is
passed through ``defence`` before it goes between our ``<session_data>``-style fences, so a
session cannot close a fence and speak outside it.

How hard to cut depends on the chunk's size. A chunk within the run's chunk size
(``Settings.chunk_tokens``) is sent with the loosest limits: cutting such chunks to a third made the
local model miss decisions (eval decision recall 0.65 → 0.55, no better than extractive). A chunk
that outgrew the budget (splits fall only at user turns, so one turn with huge tool output makes
one) gets a budget in proportion to its size, and the loosest limits that fit it. Tool output
tails and long prose go first (the files and commands are already in the deterministic facts);
commands, paths and flags keep at least 200 characters; a user turn is cut last and only when
long (a paste), because goals and decisions are stated in the asks.

``grounding_text`` is the other direction: everything the session said or did, for grounding what
the model answers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.chunk import estimate_tokens, model_text
from pipeline.config import DEFAULT_CHUNK_TOKENS
from pipeline.models import Chunk, Message, Session


@dataclass(frozen=True)
class Limits:
    """Characters kept, as (head, tail), of a tool result, tool arguments, the assistant's text and the user's."""

    tool: tuple[int, int]
    args: tuple[int, int]
    text: tuple[int, int]
    user: tuple[int, int] = (3000, 1000)


#: Loosest first; level 0 is what a chunk within the chunk size gets (the module docstring says why).
#: A SpecStory tool result opens with its command, hence the 200-character heads.
LEVELS = (
    Limits(tool=(700, 300), args=(333, 166), text=(3000, 1000)),
    Limits(tool=(400, 120), args=(333, 166), text=(1800, 500)),
    Limits(tool=(250, 60), args=(250, 100), text=(1000, 300), user=(1500, 500)),
    Limits(tool=(200, 40), args=(200, 80), text=(600, 200), user=(900, 300)),
)
#: The chunk size chunks are split to by default; a chunk estimated above the run's size is oversized.
FULL_CHUNK = DEFAULT_CHUNK_TOKENS
#: An oversized chunk's transcript may take this share of the chunk's estimated tokens...
BUDGET_SHARE = 0.22
#: ...and never needs to be smaller than this: the fixed prompt (instructions, schema, candidate
#: decisions: about 1k tokens) already dominates a call that small.
BUDGET_FLOOR = 1750
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


def _args(arguments: dict[str, Any] | str, limits: Limits) -> str:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return truncate(raw, *limits.args)


def render_message(m: Message, limits: Limits = LEVELS[0]) -> str | None:
    if m.is_carrier:
        return None  # its text is the chunk checkpoint
    ident = f"#{m.row_id}" if m.row_id is not None else ""
    content = model_text(m.content or "")
    if m.images and "[image" not in content:
        content = (content + f" [image ×{m.images}]").strip()
    if m.role == "tool":
        head = f"[tool{ident} {m.tool_name or ''}]".replace(" ]", "]")
        return f"{head} {truncate(content, *limits.tool)}"
    text = limits.user if m.role == "user" else limits.text
    lines = (
        [f"[{m.role}{ident}] {truncate(content, *text)}".rstrip()]
        if content or not m.tool_calls
        else [f"[{m.role}{ident}]"]
    )
    lines += [f"  → {c.name}({_args(c.arguments, limits)})" for c in m.tool_calls]
    return "\n".join(lines)


def transcript_budget(chunk: Chunk, chunk_tokens: int = FULL_CHUNK) -> int | None:
    """Estimated tokens an oversized chunk's transcript may take (``estimate_tokens``' scale); None: no cut.

    ``chunk_tokens`` is the size the run split chunks to (``Settings.chunk_tokens``).
    """
    if chunk.token_estimate <= chunk_tokens:
        return None
    return max(BUDGET_FLOOR, int(BUDGET_SHARE * chunk.token_estimate))


def shape_transcript(chunk: Chunk, chunk_tokens: int = FULL_CHUNK) -> str:
    """The chunk as plain text for the model, cut with the loosest limits that fit its budget."""
    budget = transcript_budget(chunk, chunk_tokens)
    for limits in LEVELS:
        text = defence("\n".join(t for m in chunk.messages if (t := render_message(m, limits))))
        if budget is None or estimate_tokens(text) <= budget:
            break
    return text


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
