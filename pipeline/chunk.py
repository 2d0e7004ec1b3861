"""Stage 2: the logical transcript, split by compaction generation.

Hermes never stores a generation number; it is derived from rows (hermes-state.md §2.2):

1. The display history is every row with ``active=1 OR compacted=1`` (``extract`` selects them).
   In-place compaction inserts *copies* of protected head/tail messages into each new generation,
   so the same logical message appears several times. We dedupe by cross-generation identity
   (``message_uid`` > ``display_order`` > payload hash), keep the live row (else the newest), and
   order each logical message by its *first* row id — exactly Hermes's display dedupe. A protected
   message therefore lands in the generation where it first appeared and is summarised once.
2. Generation *g* of a message = the number of compaction carriers that precede it. The carrier's
   checkpoint text is Hermes's own summary of the turns it closes: it becomes context for the
   previous generation's chunk, never a turn of its own.
3. A legacy compression chain arrives as one session whose rows carry their ``segment``; a segment
   that starts without a carrier still starts a new generation.
4. A generation larger than the token budget is split further at turn boundaries (a user turn).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence

from pipeline.config import DEFAULT_CHUNK_TOKENS
from pipeline.models import Chunk, Message, Session


def logical_transcript(messages: Sequence[Message]) -> list[Message]:
    """Dedupe Hermes's display history: one message per identity, live row first, first-id order."""
    groups: dict[str, list[Message]] = {}
    order: list[str] = []
    for m in messages:
        key = m.identity or f"row:{m.row_id}:{id(m)}"
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(m)
    picked: list[tuple[int, int, Message]] = []
    for pos, key in enumerate(order):
        rows = groups[key]
        best = max(rows, key=lambda m: (m.active, m.row_id or 0))
        first = min(rows, key=lambda m: m.row_id if m.row_id is not None else pos)
        if best is not first:
            # Content from the live copy, place (row id, chain segment) from the original.
            best = best.model_copy(update={"row_id": first.row_id, "segment": first.segment})
        picked.append((first.row_id if first.row_id is not None else pos, pos, best))
    picked.sort(key=lambda t: (t[0], t[1]))
    return [m for _, _, m in picked]


# CJK punctuation, kana, ideographs (U+3000-9FFF) and Hangul syllables (U+AC00-D7AF).
_NOT_CJK = re.compile(r"[^\u3000-\u9fff\uac00-\ud7af]+")


def estimate_tokens(text: str) -> int:
    """Cheap token estimate: ~4 characters per token for Latin text, ~1 per CJK character."""
    # Tool results run to megabytes; a per-character Python loop over them was the stage's
    # main cost. ASCII text has no CJK at all, and otherwise the regex counts in C.
    cjk = 0 if text.isascii() else len(_NOT_CJK.sub("", text))
    return cjk + (len(text) - cjk) // 4 + 1


_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})[^`\n]*$")


def model_text(content: str) -> str:
    """A message's text as the model is sent it: without empty fences. An empty fence is how SpecStory shows an
    applied edit whose code it did not export (VS Code Copilot, early Cursor); it tells facts where an edit was
    and the model nothing. Fence-aware: one block's closing line and the next one's opening are no empty fence."""
    if "```" not in content and "~~~" not in content:
        return content
    lines = content.split("\n")
    keep: list[str] = []
    opened: int | None = None  # index in ``keep`` of the open fence's first line
    mark = ""
    for line in lines:
        m = _FENCE_LINE.match(line)
        if opened is None:
            if m:
                opened, mark = len(keep), m.group(1)
        elif m and line.strip() == mark[0] * len(line.strip()) and len(line.strip()) >= len(mark):
            if not any(x.strip() for x in keep[opened + 1:]):
                del keep[opened:]
                while keep and not keep[-1].strip():
                    keep.pop()  # the blank lines that set the fence apart go with it
                opened = None
                continue
            opened = None
        keep.append(line)
    return "\n".join(keep)


def message_tokens(m: Message) -> int:
    args = sum(len(json.dumps(c.arguments, ensure_ascii=False)) for c in m.tool_calls) // 4
    return estimate_tokens(model_text(m.content)) + args + 4


def assign_generations(transcript: Sequence[Message]) -> tuple[list[tuple[int, Message]], dict[int, str]]:
    """Pair each non-carrier message with its generation; return checkpoints by the generation they close."""
    gen = 0
    out: list[tuple[int, Message]] = []
    checkpoints: dict[int, str] = {}
    segment = transcript[0].segment if transcript else None
    # A continuation segment normally carries its own compaction carrier, which counts below;
    # one without any (older Hermes) still starts a new generation where it begins.
    with_carrier = {m.segment for m in transcript if m.is_carrier}
    for m in transcript:
        if m.segment != segment:
            segment = m.segment
            if segment not in with_carrier and out:
                gen += 1
        if m.is_carrier:
            if m.carrier_summary:
                prior = checkpoints.get(gen)
                checkpoints[gen] = f"{prior}\n\n{m.carrier_summary}" if prior else m.carrier_summary
            gen += 1
            continue
        out.append((gen, m))
    return out, checkpoints


def split_by_budget(messages: list[Message], budget: int) -> list[list[Message]]:
    """Split at user turns so no part exceeds ``budget`` tokens (a single huge turn stays whole)."""
    return [part for part, _tokens in _split_counted(messages, budget)]


def _split_counted(messages: list[Message], budget: int) -> list[tuple[list[Message], int]]:
    """``split_by_budget`` with each part's token estimate, so no message is measured twice."""
    parts: list[tuple[list[Message], int]] = []
    part: list[Message] = []
    used = 0
    for m in messages:
        cost = message_tokens(m)
        if part and used + cost > budget and m.role == "user":
            parts.append((part, used))
            part, used = [], 0
        part.append(m)
        used += cost
    if part:
        parts.append((part, used))
    return parts


def chunk_hash(session_id: str, generation: int, messages: Sequence[Message], checkpoint: str | None) -> str:
    """Content address of a chunk: what the summariser sees, nothing else (no row ids, no flags)."""
    payload = {
        "checkpoint": checkpoint or "",
        "messages": [
            [m.role, m.content, m.tool_name or "", m.tool_call_id or "",
             [[c.name, c.arguments] for c in m.tool_calls], m.images]
            for m in messages
        ],
    }
    canonical = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "replace")).hexdigest()


def chunk_session(session: Session, *, budget: int = DEFAULT_CHUNK_TOKENS) -> list[Chunk]:
    """``Session`` → generation chunks, in order. An empty session gives no chunks."""
    paired, checkpoints = assign_generations(logical_transcript(session.messages))
    by_gen: dict[int, list[Message]] = {}
    for gen, m in paired:
        by_gen.setdefault(gen, []).append(m)
    chunks: list[Chunk] = []
    for gen in sorted(by_gen):
        parts = _split_counted(by_gen[gen], budget)
        for i, (part, tokens) in enumerate(parts):
            # The checkpoint summarises the whole generation: attach it to its last part.
            checkpoint = checkpoints.get(gen) if i == len(parts) - 1 else None
            chunks.append(
                Chunk(
                    session_id=session.id,
                    generation=gen,
                    part=i,
                    messages=tuple(part),
                    checkpoint=checkpoint,
                    token_estimate=tokens,
                    content_hash=chunk_hash(session.id, gen, part, checkpoint),
                )
            )
    return chunks
