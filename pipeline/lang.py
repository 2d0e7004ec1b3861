"""Guess the language a session was conducted in, without a model.

The note is written in the user's language, so this only has to be right about the *prose*
people typed, not about the code they pasted. Design:

1. Strip what is not prose: fenced code blocks, inline code, URLs and path-like tokens. A
   Chinese ask about ``src/parser.py`` must not count the path as English.
2. Count script units. Each CJK/kana/hangul character is one unit and each word in an
   alphabetic script is one unit, because one Chinese character carries about as much as one
   English word; counting letters instead would let a few identifiers outvote a Chinese sentence.
3. Non-Latin scripts win by share (kana decides ja over zh, since Chinese never uses kana).
4. Latin-script text is split by stopword counts plus a few diacritics that only one language uses.

Everything is stdlib and deterministic: same texts, same answer. Unknown → ``default`` ("en").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
# Paths, dotted names and flags carry no language signal (``~/src/x.py``, ``os.path``, ``--dry-run``).
# ASCII-only classes: ``\w`` would also swallow the Chinese text glued to a path.
_PATHISH = re.compile(
    r"(?:[~.]?/[A-Za-z0-9_.~/-]+|[A-Za-z0-9_.~-]+/[A-Za-z0-9_./~-]*"
    r"|(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z0-9]{1,5}(?![A-Za-z0-9_])"
    r"|(?<![A-Za-z0-9])--?[A-Za-z][A-Za-z0-9-]*)"
)

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff]")
_HANGUL = re.compile(r"[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")
_WORD = re.compile(r"[^\W\d_]+", re.U)

# Alphabetic scripts other than Latin: first-letter range → code. Ukrainian-only letters are
# checked separately so Ukrainian is not reported as Russian.
_SCRIPTS: tuple[tuple[str, str], ...] = (
    ("\u0400", "\u04ff", "ru"),
    ("\u0370", "\u03ff", "el"),
    ("\u0590", "\u05ff", "he"),
    ("\u0600", "\u06ff", "ar"),
    ("\u0900", "\u097f", "hi"),
    ("\u0e00", "\u0e7f", "th"),
)
_UK_LETTERS = set("іїєґІЇЄҐ")

# Only frequent function words, and (mostly) ones that do not collide across these languages;
# shared words like "que"/"para" would only add noise to the vote.
_STOPWORDS: dict[str, frozenset[str]] = {
    "en": frozenset(
        ["the", "and", "is", "are", "to", "of", "it", "this", "that", "with", "for", "you", "can", "please", "what", "why", "how", "not", "be", "have", "i", "my", "we", "on", "in", "should", "would", "does", "do", "there", "was", "it's", "don't", "i'm", "when", "which"]
    ),
    "es": frozenset(
        ["el", "los", "las", "es", "y", "pero", "del", "lo", "hay", "puedes", "también", "muy", "qué", "cómo", "una", "con", "en", "mi", "esto", "porque", "quiero", "hacer", "está", "funciona", "ahora"]
    ),
    "pt": frozenset(
        ["o", "os", "é", "não", "uma", "com", "em", "do", "da", "dos", "das", "no", "na", "você", "isso", "mas", "também", "meu", "pode", "ao", "são", "quero", "fazer", "está", "funciona", "agora", "porque"]
    ),
    "de": frozenset(
        ["der", "die", "das", "und", "ist", "nicht", "ich", "du", "ein", "eine", "mit", "auf", "für", "zu", "den", "dem", "wie", "bitte", "kannst", "auch", "noch", "wir", "habe", "wird", "funktioniert", "warum", "jetzt"]
    ),
    "fr": frozenset(
        ["le", "les", "et", "est", "une", "des", "du", "pour", "avec", "je", "tu", "vous", "pas", "ce", "cette", "dans", "sur", "qui", "mais", "ne", "peux", "oui", "merci", "fichier", "pourquoi", "fonctionne"]
    ),
    "it": frozenset(["il", "gli", "della", "che", "è", "sono", "questo", "anche", "puoi", "grazie", "nel", "perché", "funziona", "ciao"]),
    "nl": frozenset(["het", "een", "niet", "ik", "ook", "kun", "maar", "zijn", "van", "voor", "wat", "dat", "waarom", "werkt"]),
}
# Letters used by exactly one of the Latin languages above: a strong, cheap tie-breaker.
_DIACRITICS: dict[str, str] = {"ñ": "es", "¿": "es", "¡": "es", "ã": "pt", "õ": "pt", "ß": "de",
                               "œ": "fr", "ù": "fr", "ë": "nl"}


def _prose(text: str) -> str:
    text = _FENCE.sub(" ", text)
    text = _INLINE_CODE.sub(" ", text)
    text = _URL.sub(" ", text)
    return _PATHISH.sub(" ", text)


def guess_language(texts: Iterable[str]) -> str | None:
    """Return a language code, or None when the texts carry too little prose to tell."""
    units: Counter[str] = Counter()
    latin_words: list[str] = []
    diacritics: Counter[str] = Counter()
    uk = 0
    for raw in texts:
        text = _prose(raw or "")
        units["zh"] += len(_HAN.findall(text))
        units["ja"] += len(_KANA.findall(text))
        units["ko"] += len(_HANGUL.findall(text))
        uk += sum(1 for ch in text if ch in _UK_LETTERS)
        for ch, code in _DIACRITICS.items():
            diacritics[code] += text.count(ch)
        for word in _WORD.findall(text):
            first = word[0]
            for lo, hi, code in _SCRIPTS:
                if lo <= first <= hi:
                    units[code] += 1
                    break
            else:
                if not _HAN.match(first) and not _KANA.match(first) and not _HANGUL.match(first):
                    latin_words.append(word.lower())
    total = sum(units.values()) + len(latin_words)
    if total == 0:
        return None
    cjk = units["zh"] + units["ja"]
    # Any real Japanese text is dense in kana; a stray katakana loanword in Chinese is not.
    if cjk and units["ja"] >= 3 and units["ja"] / cjk >= 0.15 and cjk / total >= 0.2:
        return "ja"
    if units["ko"] / total >= 0.25:
        return "ko"
    if units["zh"] / total >= 0.2 and units["zh"] >= 2:
        return "zh"
    for _lo, _hi, code in _SCRIPTS:
        if units[code] / total >= 0.3:
            return "uk" if code == "ru" and uk >= 2 else code
    return _latin(latin_words, diacritics)


def _latin(words: list[str], diacritics: Counter[str]) -> str | None:
    scores = {code: sum(1 for w in words if w in stop) for code, stop in _STOPWORDS.items()}
    for code, n in diacritics.items():
        scores[code] += 2 * n
    best = max(scores, key=lambda c: (scores[c], c == "en"))
    if scores[best] == 0:
        return "en" if words else None
    # Another language must clearly beat English: identifiers and English loanwords leak into
    # every technical conversation, so a near tie is English.
    if best != "en" and (scores[best] < 2 or scores[best] < 1.2 * scores["en"]):
        return "en"
    return best


def detect_language(texts: Iterable[str], default: str = "en") -> str:
    """The language of the prose in ``texts`` as a short BCP-47 code; ``default`` when unclear."""
    return guess_language(texts) or default
