"""The RE2 screen in front of the decision patterns: a cheap "no" that is never wrong.

``Screen.may_match`` may say yes where no ``re`` pattern matches (the caller checks again), but it
must never say no where one does, or a decision silently disappears from a note. The property is
checked on every paragraph of the real shared transcripts (English, Chinese, Russian, Portuguese…)
and on the Unicode corners where RE2 and Python's ``re`` differ.
"""

from __future__ import annotations

import re

import pytest

from pipeline.screen import Screen, widen
from pipeline.summarize import decisions
from tests.corpus import CORPUS, require_corpus

PATTERNS = [decisions._DECISION, decisions._RECOMMEND, decisions._DECISION_OTHER, decisions._REASON, decisions._TERSE_FIX,
            decisions._SO_REASON, decisions._SUBSTITUTION]


def _misses(screen: Screen, texts: list[str]) -> list[str]:
    return [t for t in texts if any(p.search(t) for p in PATTERNS) and not screen.may_match(t)]


def test_the_decision_screen_is_active_with_re2() -> None:
    pytest.importorskip("re2")
    screen = Screen(PATTERNS)
    assert screen.active, "a decision pattern stopped compiling into the screen: every reply is scanned in full"
    assert decisions._MAY_CHOOSE_OR_RECOMMEND.active  # the module's own screen, with every pattern it holds
    assert not screen.may_match("Ran the tests; 12 passed.")


def test_the_screen_never_says_no_where_a_pattern_matches_on_real_transcripts() -> None:
    require_corpus()
    pytest.importorskip("re2")
    screen = Screen(PATTERNS)
    texts: list[str] = []
    for path in sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.suffix in (".md", ".jsonl", ".json", ".txt")):
        raw = path.read_text("utf-8", errors="replace")
        texts.extend(part for part in re.split(r"\n\s*\n|\\n\\n", raw) if part.strip())
    screened_out = [t for t in texts if not screen.may_match(t)]
    assert [t for t in screened_out if any(p.search(t) for p in PATTERNS)] == []
    # and it earns its place: a third of the paragraphs are a cheap no, and many are a maybe
    assert len(texts) // 3 < len(screened_out) < len(texts) - 500


@pytest.mark.parametrize("text", [
    "we\u00a0chose the queue",                 # NBSP: Python's \s, not RE2's
    "my recommendation\u2003: keep it",        # em space before the colon (\s in the pattern)
    "Recommendation\u3000：用这个",              # ideographic space and a full-width colon
    "Решили, вместо этого выбрали SQLite",     # Cyrillic beside a bracket lookaround
    "решилась",                               # no match in re either: the screen may still say maybe
    "Best\u00a0option is the cache",
    "I'd rather go with the cache",
    "ı went with it, INSTEAD of the old one",  # dotless i and upper case
    "İnstead of Redis",                       # Python's re.I folds İ and ı into i; RE2's does not
    "用缓存，因为它更快",
    "em vez de usar o Redis",
])
def test_unicode_corners_are_never_screened_out(text: str) -> None:
    pytest.importorskip("re2")
    assert _misses(Screen(PATTERNS), [text]) == []


@pytest.mark.parametrize("pattern", [r"(\w)\1", r"foo(?=bar)", r"(?<!xy)z", r"\S+", r"[\w.]+", r"[\bx]y"])
def test_a_pattern_re2_could_read_more_narrowly_turns_the_screen_off(pattern: str) -> None:
    assert widen(pattern) is None
    screen = Screen([re.compile(pattern)])
    assert not screen.active and screen.may_match("anything")  # slower, never different


def test_widen_drops_only_what_narrows() -> None:
    assert widen(r"\bchose\b") == "chose"
    assert widen(r"(?<![А-Я])вместо(?![А-Я])") == "вместо"
    assert widen(r"(?<!替)换成|(?<!`)``(?!`)|(?<=\.)x") == "换成|``|x"
    assert widen(r"a\sb") == r"a[\s\p{Z}\x{85}\x{0b}\x{1c}-\x{1f}]b"


def test_a_long_bounded_repeat_is_opened_and_a_short_one_kept() -> None:
    """``{3,60}`` costs a lazy DFA a state per count, multiplied across the set; ``{3,}`` takes every text it does."""
    assert widen(r"^[^\n]{3,60}\s—\s+(?:moving|using)") == r"^[^\n]{3,}[\s\p{Z}\x{85}\x{0b}\x{1c}-\x{1f}]—" \
        r"[\s\p{Z}\x{85}\x{0b}\x{1c}-\x{1f}]+(?:moving|using)"
    assert widen(r"a\s{0,4}b\{1,99\}") == r"a[\s\p{Z}\x{85}\x{0b}\x{1c}-\x{1f}]{0,4}b\{1,99\}"
    screen = Screen([re.compile(r"^[^\n]{3,60}\s—\s+moving", re.M)])
    assert screen.may_match("x\nThe import cycle — moving it into main()") and not screen.may_match("moving on")


def test_every_ascii_letter_folds_in_the_screen_as_in_python() -> None:
    pytest.importorskip("re2")
    for letter in "abcdefghijklmnopqrstuvwxyz":
        screen = Screen([re.compile(letter, re.I)])
        folded = [chr(c) for c in range(0x80, 0x3000) if re.fullmatch(letter, chr(c), re.I)]
        assert all(screen.may_match(ch) for ch in folded), (letter, folded)


def test_a_bracket_first_in_a_class_is_a_literal_when_folding() -> None:
    pytest.importorskip("re2")
    pattern = re.compile(r"[^]i]x", re.I)  # "]" is the class's first member, not its end
    assert pattern.search("ax") and Screen([pattern]).may_match("ax")


def test_each_pattern_keeps_its_own_flags() -> None:
    pytest.importorskip("re2")
    # A multiline anchor read as RE2's start of text, a dot that must cross lines, and an re.I pattern beside
    # a case-sensitive one would each be narrower than the pattern (the first two said no here before).
    screen = Screen([re.compile(r"^Removed\b", re.M), re.compile(r"a.b", re.S), re.compile("chose", re.I)])
    assert screen.active
    for text in ("intro\nRemoved the flag", "a\nb", "We CHOSE it"):
        assert screen.may_match(text), text
    assert not screen.may_match("removed the flag; ab")
    assert not Screen([re.compile("x", re.X)]).active  # a flag it cannot carry over: off, never narrower


def test_the_log_line_screen_holds_every_log_line_of_the_shared_transcripts() -> None:
    require_corpus()
    pytest.importorskip("re2")
    from pipeline.facts import lang

    assert lang._MAY_LOG.active
    lines = [ln for path in sorted(p for p in CORPUS.rglob("*") if p.is_file())
             for ln in path.read_text("utf-8", errors="replace").splitlines()]
    logs = [ln for ln in lines if lang._LOGLINE.match(ln)]
    assert len(logs) > 1000  # the corpus has pasted logs to check against
    assert [ln for ln in logs if not lang._MAY_LOG.may_match(ln)] == []
    assert sum(1 for ln in lines if not lang._MAY_LOG.may_match(ln)) > len(lines) // 2  # and it says no often


def test_the_completion_and_failure_screens_hold_every_reply_of_the_shared_transcripts() -> None:
    require_corpus()
    pytest.importorskip("re2")
    from pipeline.facts import endstate

    assert endstate._MAY_BE_DONE.active and endstate._MAY_HAVE_FAILED.active
    texts = [part for path in sorted(p for p in CORPUS.rglob("*") if p.is_file())
             for part in re.split(r"\n\s*\n|\\n\\n", path.read_text("utf-8", errors="replace")) if part.strip()]
    for pattern, screen in ((endstate._DONE, endstate._MAY_BE_DONE), (endstate._FAILED, endstate._MAY_HAVE_FAILED)):
        assert [t for t in texts if pattern.search(t) and not screen.may_match(t)] == []


def _split_texts() -> list[str]:
    texts: list[str] = []
    for path in sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.suffix in (".md", ".jsonl", ".json", ".txt")):
        texts += [t for t in path.read_text(encoding="utf-8", errors="replace").split("\n\n\n") if t.strip()]
    return texts


def test_sentences_cut_by_re2_are_the_sentences_re_cuts() -> None:
    """``turns._split_sentences`` (RE2, where the lookbehind is a matched character) gives exactly the parts
    ``_SENTENCE_BREAK.split`` gives: on random strings of the break characters and Unicode blanks, and on every
    stretch of the real shared transcripts."""
    import random

    from pipeline.facts import turns

    pytest.importorskip("re2")
    assert turns._RE2_BREAK is not None
    rng = random.Random(7)
    alphabet = ["a", "é", "字", ".", "!", "?", "。", "！", "？", "；", " ", "\n", "\t", "\u3000", "\xa0", "\x85", "\x1c",
                "\u2028", "\r", "\x0b", "`", "…"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(20000)]
    for text in texts:
        assert turns._split_sentences(text) == turns._SENTENCE_BREAK.split(text), repr(text)
    require_corpus()
    real = _split_texts()
    assert len(real) > 1000
    for text in real:
        assert turns._split_sentences(text) == turns._SENTENCE_BREAK.split(text), text[:200]
