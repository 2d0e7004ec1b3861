"""A one-pass screen in front of Python regexes: skip a text no pattern can match, at RE2's speed.

Python's ``re`` tries a big alternation at every position of a text, and most texts match none of
them (most replies choose nothing). ``Screen`` compiles a *superset* of the patterns into one
``re2.Set`` (a lazy DFA): word boundaries (``\\b``) and lookarounds over one atom (``(?<![…])``, ``(?<!替)``)
only narrow a match, so removing them can only widen it. ``may_match`` is a cheap "no" or a "maybe";
the caller still runs its own ``re`` patterns on a maybe, so its answers do not change.

Without the google-re2 wheel, or for a pattern RE2 cannot take (backreferences, other lookarounds),
the screen says maybe to everything: slower, never different.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

#: What only narrows a match: ``\b``, ``\B`` and lookarounds over one atom (a bracket class, an escape or one
#: literal character: ``(?<![…])``, ``(?<!替)``).
_NARROWING = re.compile(r"\\[bB]|\(\?<?[!=](?:\[(?:\\.|[^\]\\])*\]|\\.|[^()\\|*+?{}\[\]])\)")
_CLASS = re.compile(r"\[(?:\\.|[^\]\\])*\]")
#: RE2's ``\s``, ``\w`` and ``\d`` are ASCII; Python's are Unicode. The wide pattern spells out Python's.
_UNICODE = {r"\s": r"[\s\p{Z}\x{85}\x{0b}\x{1c}-\x{1f}]", r"\w": r"[\p{L}\p{N}_]", r"\d": r"\p{Nd}"}


def widen(pattern: str, *, ignore_case: bool = False) -> str | None:
    """``pattern`` with its word boundaries and one-atom lookarounds removed and its shorthand classes made
    Unicode; None where the result could be narrower than ``pattern`` in RE2 (another lookaround, a
    backreference, a negated shorthand, a shorthand or ``\\b`` inside a bracket class)."""
    if any(re.search(r"\\[swdb]", c) for c in _CLASS.findall(pattern)):
        return None  # inside a class, ``\b`` is a backspace, not a boundary, and RE2's ``\s`` is ASCII
    wide = _NARROWING.sub("", pattern)
    if "(?=" in wide or "(?!" in wide or "(?<" in wide or re.search(r"\\[1-9SWD]", wide):
        return None
    if ignore_case:
        wide = _fold_i(wide)
    # A long bounded repeat (``^[^—\n]{3,60}\s—``) costs a lazy DFA one state per count, times every other
    # pattern's states in the set: one such pattern made the decision screen ten times slower. ``{m,}`` takes
    # every text ``{m,n}`` does, in a loop of one state.
    wide = _LONG_REPEAT.sub(lambda m: m.group(0) if int(m.group(2)) - int(m.group(1)) < 8 else f"{{{m.group(1)},}}", wide)
    return re.sub(r"\\[swd]", lambda m: _UNICODE[m.group(0)], wide)


_LONG_REPEAT = re.compile(r"(?<!\\)\{(\d+),(\d+)\}")


def _fold_i(pattern: str) -> str:
    """Python's ``re.I`` lets ``i`` match ``İ`` and ``ı``; RE2's case folding does not (of all ASCII
    letters, only ``i`` differs). Every literal ``i``, and every bracket class holding it, gets the two back."""
    out: list[str] = []
    class_start = -1
    escaped = False
    for ch in pattern:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "[" and class_start < 0:
            class_start = len(out)
        elif ch == "]" and class_start >= 0 and "".join(out[class_start:]) not in ("[", "[^"):
            # (a ``]`` first in a class, after ``[`` or ``[^``, is a literal)
            body = "".join(out[class_start:]) + "]"
            if not body.startswith("[^") and re.fullmatch(body, "i", re.I):
                out.append("İı")
            class_start = -1
        elif ch in "iI" and class_start < 0:
            out.append("[iİı]")
            continue
        out.append(ch)
    return "".join(out)


class Screen:
    """One RE2 pass over a text for several ``re`` patterns (each with its own ``re.I``, ``re.M``, ``re.S``)."""

    def __init__(self, patterns: Sequence[re.Pattern[str]]) -> None:
        self._set = _compile(patterns)

    def may_match(self, text: str) -> bool:
        """False only when no pattern can match ``text``."""
        return self._set is None or self._set.Match(text) is not None

    @property
    def active(self) -> bool:
        return self._set is not None


#: ``re`` flags and the inline group that gives RE2 the same meaning. Any other flag (``re.X``, ``re.A``)
#: turns the screen off.
_FLAGS = ((re.I, "i"), (re.M, "m"), (re.S, "s"))
_KNOWN_FLAGS = re.I | re.M | re.S | re.U


def _compile(patterns: Sequence[re.Pattern[str]]) -> Any:
    try:
        import re2
    except ImportError:
        return None
    if any(p.flags & ~_KNOWN_FLAGS for p in patterns):
        return None
    wide = [widen(p.pattern, ignore_case=bool(p.flags & re.I)) for p in patterns]
    if any(w is None for w in wide):
        return None
    # Each pattern keeps its own flags as an inline group: a multiline ``^`` read as RE2's start of text, or a
    # case-sensitive RE2 reading an ``re.I`` pattern, would be narrower than the pattern.
    wide = [(f"(?{inline})" if (inline := "".join(c for f, c in _FLAGS if p.flags & f)) else "") + w
            for p, w in zip(patterns, wide, strict=True)]
    options = re2.Options()
    options.max_mem = 32 << 20
    screen = re2.Set.SearchSet(options)
    try:
        for w in wide:
            screen.Add(w)
        screen.Compile()
    except Exception:  # a construct RE2 rejects: screen nothing rather than guess
        return None
    return screen
