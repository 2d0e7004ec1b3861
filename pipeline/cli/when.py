"""``--since`` and ``--idle`` values: ``yesterday``, ``today``, an age like ``6h``, or an ISO date.

One module for every command that reads a time: ``cli.app`` imports the command groups, so a
group importing the parsers from it would be a cycle (``tests/test_layers.py``).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from pipeline.errors import InputError

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_age(text: str, option: str = "--idle") -> float:
    """'90m', '2h', '3d', '1w' → seconds."""
    m = _AGE.match(text.lower())
    if not m:
        raise InputError(f"{option} {text!r}: not an age; use forms like 30m, 2h, 3d or 1w (a unit is required)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_when(text: str, now: datetime | None = None) -> datetime:
    """'yesterday' (00:00 local), 'today', an age like '6h' (that long ago) or an ISO date/time."""
    now = now or datetime.now().astimezone()
    word = text.strip().lower()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if word == "today":
        return midnight
    if word == "yesterday":
        return midnight - timedelta(days=1)
    if _AGE.match(word):
        return now - timedelta(seconds=parse_age(word))
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(f"--since {text!r}: use yesterday, today, an age like 6h, or a date like 2026-11-30") from None
    return when if when.tzinfo else when.astimezone()
