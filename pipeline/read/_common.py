"""Small helpers every foreign-format reader shares.

Readers are deliberately forgiving: real transcripts carry NUL bytes, CRLF, half-written last
lines (a session exported while still running), non-UTF-8 bytes and timestamps in half a dozen
spellings. Nothing here raises on odd data; it returns ``None`` or records a problem so the
reader can go on and report it in ``Session.problems``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from pipeline.errors import InputError
from pipeline.models import Message, ToolCall

# --------------------------------------------------------------------------- text and lines


def read_text(path: Path) -> str:
    """The whole file as clean text: undecodable bytes replaced, NULs dropped, newlines unified."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc}); check the path and permissions") from exc
    return clean_text(raw.decode("utf-8", errors="replace"))


def clean_text(text: str) -> str:
    # NULs appear inside captured tool output (Windows terminals); CR-only lines come from old Macs.
    return text.lstrip("\ufeff").replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")


def iter_json_lines(path: Path, problems: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_no, object)`` for each JSON object line; bad lines become problems, not errors."""
    lines = read_text(path).split("\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            # A cut-off last line is what a live session looks like when copied; anything else is corruption.
            problems.append(f"line {i + 1}: truncated last line skipped" if i == last else f"line {i + 1}: invalid JSON skipped")
            continue
        if isinstance(obj, dict):
            yield i + 1, obj
        else:
            problems.append(f"line {i + 1}: not a JSON object, skipped")


def peek_json_lines(path: Path, limit: int = 25) -> list[dict[str, Any]]:
    """The first few JSON object lines, read cheaply (for format detection of big files)."""
    out: list[dict[str, Any]] = []
    try:
        with path.open("rb") as fh:
            for n, raw in enumerate(fh):
                if n >= limit * 4 or len(out) >= limit:
                    break
                line = clean_text(raw.decode("utf-8", errors="replace")).strip()
                if not line:
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(obj, dict):
                    out.append(obj)
    except OSError:
        return []
    return out


# --------------------------------------------------------------------------- timestamps

_TS_RE = re.compile(
    r"(?P<y>\d{4})[-/](?P<mo>\d{1,2})[-/](?P<d>\d{1,2})[ T_]?"
    r"(?:(?P<h>\d{1,2}):?(?P<mi>\d{2})(?::?(?P<s>\d{2})(?P<frac>\.\d+)?)?)?\s*(?P<tz>Z|[+-]\d{2}:?\d{2})?"
)


def parse_ts(value: Any) -> float | None:
    """Epoch seconds from epoch numbers (s or ms) or ISO-ish strings; naive times are taken as UTC."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        v = float(value)
        return v / 1000.0 if v > 1e11 else v
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        m = _TS_RE.search(text)
        if not m:
            return None
        try:
            dt = datetime(
                int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"] or 0), int(m["mi"] or 0), int(m["s"] or 0),
                int(float(m["frac"] or 0) * 1_000_000),
            )
        except ValueError:
            return None
        if m["tz"] and m["tz"] != "Z":
            tz = m["tz"].replace(":", "")
            offset = (int(tz[1:3]) * 60 + int(tz[3:5])) * (1 if tz[0] == "+" else -1)
            return dt.replace(tzinfo=UTC).timestamp() - offset * 60
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def to_datetime(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, tz=UTC)


def interpolate(values: list[float | None]) -> list[float | None]:
    """Fill gaps linearly between known anchors; before the first / after the last, hold the anchor.

    Known values are never changed: Hermes protected copies legitimately carry older stamps, and
    a copy's timestamp is part of its display identity.
    """
    known = [(i, v) for i, v in enumerate(values) if v is not None]
    if not known:
        return list(values)
    out: list[float | None] = list(values)
    first_i, first_v = known[0]
    for i in range(first_i):
        out[i] = first_v
    for (a, va), (b, vb) in pairwise(known):
        step = max(vb - va, 0.0) / (b - a)  # a clock that runs backwards gets no invented slope
        for i in range(a + 1, b):
            out[i] = va + step * (i - a)
    last_i, last_v = known[-1]
    for i in range(last_i + 1, len(values)):
        out[i] = last_v
    return out


# --------------------------------------------------------------------------- content and tools


def parse_args(raw: Any) -> dict[str, Any] | str:
    """Tool arguments as a dict when they are (a JSON string of) an object, else the raw string."""
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            return raw
        return parsed if isinstance(parsed, dict) else raw
    return json.dumps(raw, ensure_ascii=False)


_IMAGE_TYPES = {"image", "image_url", "input_image", "image_file"}


def flatten_content(content: Any) -> tuple[str, int]:
    """Plain text and image count from a string or an OpenAI/Anthropic-style list of parts."""
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False), 0
    texts: list[str] = []
    images = 0
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            kind = part.get("type")
            if kind in _IMAGE_TYPES:
                images += 1
                texts.append("[image]")
            elif isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind == "tool_result":
                text, n = flatten_content(part.get("content"))
                texts.append(text)
                images += n
    return "\n".join(t for t in texts if t), images


def tool_call(id_: str | None, name: str | None, arguments: Any) -> ToolCall:
    return ToolCall(id=id_, name=name or "unknown", arguments=parse_args(arguments))


# --------------------------------------------------------------------------- building sessions


def stable_id(prefix: str, *parts: object) -> str:
    digest = hashlib.sha1("\x1f".join(str(p) for p in parts).encode("utf-8", "replace")).hexdigest()
    return f"{prefix}-{digest[:12]}"


@dataclass
class Draft:
    """A mutable message under construction; readers append these, then ``build_messages``."""

    role: str
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    timestamp: float | None = None
    reasoning: str | None = None
    images: int = 0
    is_carrier: bool = False
    carrier_summary: str | None = None
    active: bool = True
    compacted: bool = False
    identity: str | None = None
    row_id: int | None = None
    segment: str | None = None


def build_messages(drafts: list[Draft], *, mark_compacted: bool = True) -> tuple[Message, ...]:
    """Freeze drafts into Messages: ordinal row ids, interpolated timestamps, generations marked.

    With ``mark_compacted`` every row before the last carrier is flagged ``active=False,
    compacted=True`` -- the shape Hermes's in-place compaction leaves -- so chunk and importdb
    treat a Claude Code or Codex compaction exactly like a Hermes one.
    """
    times = interpolate([d.timestamp for d in drafts])
    last_carrier = max((i for i, d in enumerate(drafts) if d.is_carrier), default=-1)
    out = []
    for i, (d, ts) in enumerate(zip(drafts, times, strict=True)):
        archived = mark_compacted and i < last_carrier
        out.append(
            Message(
                row_id=d.row_id if d.row_id is not None else i + 1,
                role=d.role,  # type: ignore[arg-type]
                content=d.content,
                tool_calls=tuple(d.tool_calls),
                tool_call_id=d.tool_call_id,
                tool_name=d.tool_name,
                timestamp=ts,
                reasoning=d.reasoning or None,
                images=d.images,
                active=False if archived else d.active,
                compacted=True if archived else d.compacted,
                is_carrier=d.is_carrier,
                carrier_summary=d.carrier_summary,
                identity=d.identity,
                segment=d.segment,
            )
        )
    return tuple(out)


def time_bounds(messages: tuple[Message, ...]) -> tuple[datetime | None, datetime | None]:
    stamps = [m.timestamp for m in messages if m.timestamp is not None]
    return (to_datetime(min(stamps)), to_datetime(max(stamps))) if stamps else (None, None)


def first_line(text: str, limit: int = 80) -> str | None:
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line[:limit]
    return None
