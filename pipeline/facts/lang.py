"""Guess the language a session was conducted in, without a model.

The note is written in the user's language, so this only has to be right about the *prose*
people typed, not about the code they pasted. Design:

1. Strip what is not prose: fenced code blocks, inline code, URLs, path-like tokens (``C:\\x``
   too) and log/paste lines (``[INFO] …``, stack frames, prompts). A Chinese ask about
   ``src/parser.py`` must not count the path as English, and a pasted Maven log is not the
   user's language.
2. Count script units. Each CJK/kana/hangul character is one unit and each word in an
   alphabetic script is one unit, because one Chinese character carries about as much as one
   English word; counting letters instead would let a few identifiers outvote a Chinese sentence.
3. Non-Latin scripts win by share (kana decides ja over zh, since Chinese never uses kana).
4. Latin-script text is split by stopword counts plus a few diacritics that only one language uses.

5. ``session_language``: the user's prose decides. When there is too little of it (a session
   of pasted logs, a one-word "init"), the assistant's prose joins in at a third of the user's
   weight: the agent answers in the user's language, so it is the next best witness.

Everything is stdlib and deterministic: same texts, same answer. Unknown → ``default`` ("en").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from pipeline.facts.turns import typed_line
from pipeline.screen import Screen

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
# A URL ends at CJK text glued to it ("https://x.com/m/#/home帮我注册一个账号"): no one types a raw CJK character
# into a URL, and swallowing the ask behind it made that ask "pasted output".
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]+", re.I)
# Paths, dotted names and flags carry no language signal (``~/src/x.py``, ``os.path``, ``--dry-run``).
# ASCII-only classes: ``\w`` would also swallow the Chinese text glued to a path.
_PATHISH = re.compile(
    r"(?:[~.]?/[A-Za-z0-9_.~/-]+|[A-Za-z0-9_.~-]+/[A-Za-z0-9_./~-]*"
    r"|(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z0-9]{1,5}(?![A-Za-z0-9_])"
    r"|(?<![A-Za-z0-9])--?[A-Za-z][A-Za-z0-9-]*)"
)

_WIN_PATH = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]:\\\S*|\S*\\\S+")
# Lines a person pastes rather than types: log levels, timestamps, stack frames, prompts, exceptions.
_LOGLINE = re.compile(
    r"^\s*(?:\[(?:INFO|WARN(?:ING)?|ERROR|DEBUG|TRACE|FATAL|SEVERE|NOTICE)\]|(?:INFO|WARN(?:ING)?|ERROR|DEBUG|TRACE"
    r"|FATAL)\b[:\s]|\d{4}-\d\d-\d\d[ T]\d|\d\d:\d\d:\d\d|at [\w.$<>]+\(|Caused by:|Traceback \(|File \""
    r"|[A-Za-z]:\\|PS [A-Za-z]:|\$ |>>> |[\w.]*(?:Error|Exception)(?::|\s*$)|npm (?:ERR|WARN)|E\s{2,})"
)

_BLANK_LINE = re.compile(r"\n[ \t]*\n")
#: Something every ``_LOGLINE`` match contains, found anywhere in a text (its anchors and narrowing parts left
#: out: ``splitlines`` ends lines at more characters than RE2's multiline anchors know). A superset, checked
#: line by line on the shared transcripts (tests/test_screen.py): a "no" means no line is a log line.
_MAY_LOG = Screen([re.compile(
    r"INFO|WARN|ERROR|DEBUG|TRACE|FATAL|SEVERE|NOTICE|\d{4}-\d\d-\d\d[ T]\d|\d\d:\d\d:\d\d|at [^(]+\(|Caused by:"
    r"|Traceback \(|File \"|[A-Za-z]:\\|PS [A-Za-z]:|\$ |>>> |Error|Exception|npm (?:ERR|WARN)|E\s{2,}")])

_NON_LATIN = re.compile(r"[\u0370-\u03ff\u0400-\u04ff\u0590-\u06ff\u0900-\u097f\u0e00-\u0e7f\u3040-\u30ff"
                        r"\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
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
_NON_LATIN_CODES = frozenset({"zh", "ja", "ko", "uk", "fa", "ur", *(code for _lo, _hi, code in _SCRIPTS)})
_UK_LETTERS = set("іїєґІЇЄҐ")
_UK_RE = re.compile("[" + "".join(sorted(_UK_LETTERS)) + "]")
# Persian writes Arabic script with letters Arabic has not (پ چ ژ گ) and its own kaf and yeh (ک ی for Arabic's ك ي);
# Urdu adds its retroflex letters and final forms (ٹ ڈ ڑ ں ے). Either, a few times over, outvotes "ar".
_ARABIC_SCRIPT_LETTERS = (("ur", re.compile("[\u0679\u0688\u0691\u06ba\u06d2]")),
                          ("fa", re.compile("[\u067e\u0686\u0698\u06af\u06a9\u06cc]")))
_ARABIC_SCRIPT = re.compile("[\u0600-\u06ff]")

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
    "it": frozenset(["il", "gli", "della", "che", "è", "sono", "questo", "anche", "puoi", "grazie", "nel", "perché", "funziona", "ciao",
                     # words no other language here spells so (an ask of one sentence has few of the above)
                     "questi", "questa", "quello", "quella", "essere", "delle", "degli", "nella", "alla", "alle", "più",
                     "voglio", "vorrei", "abbiamo", "fatto", "tutti", "tutto", "ancora", "senza", "dopo", "ogni",
                     "molto", "aggiungi", "rimuovi", "correggi", "controlla"]),
    "nl": frozenset(["het", "een", "niet", "ik", "ook", "kun", "maar", "zijn", "van", "voor", "wat", "dat", "waarom", "werkt"]),
    "pl": frozenset(["nie", "jest", "się", "że", "jak", "czy", "co", "proszę", "dlaczego", "możesz", "już", "też", "tak",
                     "działa", "mam", "oraz", "jeszcze"]),
    "tr": frozenset(["bir", "ve", "bu", "için", "ile", "çok", "değil", "var", "yok", "mı", "mi", "nasıl", "neden",
                     "lütfen", "şu", "ama", "çalışmıyor", "misin"]),
    "vi": frozenset(["không", "của", "và", "là", "có", "được", "cho", "này", "một", "những", "tôi", "bạn", "giúp",
                     "lỗi", "hãy", "với", "thêm",
                     # typed without tone marks ("toi muon hoc hoi", "ban dang hoat dong tren may nao"): the words
                     # no other language here spells so
                     "toi", "khong", "duoc", "nhung", "cua", "voi", "nhe", "minh", "giup", "chao", "dang", "chung",
                     "tren", "trong", "muon", "tiep", "tuc", "phien", "xoa", "lam", "nao"]),
    "id": frozenset(["yang", "dan", "ini", "itu", "tidak", "bisa", "untuk", "dengan", "saya", "tolong", "apa", "ada",
                     "akan", "sudah", "belum", "kenapa", "perbaiki"]),
    # A blind set's Czech session ("Žádná změna, stále stejne odmítnutí od bota") read as English: no Latin language
    # outside the ones above had a vote. Words no language above spells so, with the forms typed without diacritics.
    "cs": frozenset(["proč", "prosím", "není", "jsem", "jsi", "mám", "můžeš", "udělej", "ještě", "také", "taky",
                     "nebo", "když", "tohle", "tady", "nevím", "chci", "potřebuju", "potřebuji", "stále", "žádná",
                     "žádný", "který", "která", "které", "jsou", "bude", "děkuji", "díky", "funguje", "nefunguje",
                     "podívej", "zkus", "oprav", "přidej", "jenom", "teď", "proc", "prosim", "neni", "jeste", "nevim"]),
    "sv": frozenset(["och", "är", "inte", "jag", "att", "som", "för", "på", "vad", "varför", "hur", "snälla",
                     "fungerar", "också", "ska", "vill", "måste", "lägg", "ändra", "tack"]),
    "ro": frozenset(["și", "să", "pentru", "sunt", "poți", "rog", "funcționează", "acum", "vreau", "asta",
                     "această", "acest", "făcut", "adaugă", "repară", "mulțumesc"]),
    "hu": frozenset(["és", "hogy", "egy", "ez", "az", "meg", "mert", "kérlek", "miért", "hogyan",
                     "működik", "szeretném", "csak", "még", "már", "javítsd", "köszönöm"]),
}
_STOPWORDS["es"] = _STOPWORDS["es"] | {"hola", "necesito", "ayuda", "ayudes", "ayúdame", "gracias", "proyecto"}
_STOPWORDS["de"] = _STOPWORDS["de"] | {"danke", "nein", "alles", "deutsch", "schreibe", "mach"}
# Letters used by exactly one of the Latin languages above: a strong, cheap tie-breaker.
_DIACRITICS: dict[str, str] = {
    "ñ": "es", "¿": "es", "¡": "es", "ã": "pt", "õ": "pt", "ß": "de", "œ": "fr", "ù": "fr", "ë": "nl",
    **dict.fromkeys("łąęśźżćń", "pl"), **dict.fromkeys("ışğ", "tr"), **dict.fromkeys("řůě", "cs"),
    **dict.fromkeys("șț", "ro"), **dict.fromkeys("őű", "hu"),
    # Vietnamese: its own letters and the tone-marked vowels no other language here writes.
    **dict.fromkeys("đơưạảầấẩẫậắằẳẵặẹẻẽềếểễệỉịọỏồốổỗộờớởỡợụủừứửữựỳỵỷỹ", "vi"),
}


def _unpasted(text: str) -> str:
    """``text`` without log lines; in a block that is mostly log lines, Latin-script lines go too.

    Terminals wrap long log lines, so a pasted log leaves fragments ("n class -> [Help 1]") that
    no pattern recognises; they sit among log lines, while a line the person typed in Chinese or
    Russian next to the paste keeps its script and stays.
    """
    blocks = _BLANK_LINE.split(text)
    if not _MAY_LOG.may_match(text):  # no line is a log line: every line the person wrote stays
        return "\n".join(ln for block in blocks for ln in block.splitlines() if ln.strip())
    kept: list[str] = []
    for block in blocks:
        lines = [ln for ln in block.splitlines() if ln.strip()]
        logs = sum(1 for ln in lines if _LOGLINE.match(ln))
        pasted = logs and logs * 2 >= len(lines)
        kept += [ln for ln in lines if not _LOGLINE.match(ln) and not (pasted and not _NON_LATIN.search(ln))]
    return "\n".join(kept)


def _prose(text: str) -> str:
    # Each pattern needs its literal (a backtick, "://", a backslash): a text without it skips that scan.
    text = _unpasted(_FENCE.sub(" ", text) if "```" in text else text)
    if "`" in text:
        text = _INLINE_CODE.sub(" ", text)
    if "://" in text:
        text = _URL.sub(" ", text)
    if "\\" in text:
        text = _WIN_PATH.sub(" ", text)
    return _PATHISH.sub(" ", text)


def typed_prose(text: str) -> str:
    """What a person typed in ``text``: no fenced or inline code, URLs, paths or pasted log lines."""
    return _prose(text)


@dataclass
class _Tally:
    """Script units and Latin evidence counted over some texts (see the module docstring)."""

    units: Counter[str] = field(default_factory=Counter)
    latin: Counter[str] = field(default_factory=Counter)
    diacritics: Counter[str] = field(default_factory=Counter)
    uk: int = 0
    #: letters only Persian or Urdu write in Arabic script (``_ARABIC_SCRIPT_LETTERS``), by language
    arabic_script: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.units.values()) + sum(self.latin.values())

    def add(self, other: _Tally, weight: int = 1) -> None:
        for mine, theirs in ((self.units, other.units), (self.latin, other.latin), (self.diacritics, other.diacritics)):
            for key, n in theirs.items():
                mine[key] += n * weight
        self.uk += other.uk * weight
        for key, n in other.arabic_script.items():
            self.arabic_script[key] += n * weight


def _tally(texts: Iterable[str]) -> _Tally:
    t = _Tally()
    for raw in texts:
        text = _prose(raw or "")
        t.units["zh"] += len(_HAN.findall(text))
        t.units["ja"] += len(_KANA.findall(text))
        t.units["ko"] += len(_HANGUL.findall(text))
        if not text.isascii():  # ASCII text has no Ukrainian letters, no diacritics, only Latin words
            t.uk += len(_UK_RE.findall(text))
            if _ARABIC_SCRIPT.search(text):
                for code, letters in _ARABIC_SCRIPT_LETTERS:
                    t.arabic_script[code] += len(letters.findall(text))
            for ch, code in _DIACRITICS.items():
                t.diacritics[code] += text.count(ch)
        for word in _WORD.findall(text):
            if word.isascii():
                t.latin[word.lower()] += 1
                continue
            first = word[0]
            for lo, hi, code in _SCRIPTS:
                if lo <= first <= hi:
                    t.units[code] += 1
                    break
            else:
                if not _HAN.match(first) and not _KANA.match(first) and not _HANGUL.match(first):
                    t.latin[word.lower()] += 1
    return t


def _decide(t: _Tally) -> str | None:
    units, total = t.units, t.total
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
            if code == "ar":
                return next((c for c, _letters in _ARABIC_SCRIPT_LETTERS if t.arabic_script[c] >= 2), code)
            return "uk" if code == "ru" and t.uk >= 2 else code
    return _latin(t.latin, t.diacritics)


def guess_language(texts: Iterable[str]) -> str | None:
    """Return a language code, or None when the texts carry too little prose to tell."""
    return _decide(_tally(texts))


#: Fewer script units than this in the user's own prose is too little to decide on alone.
SCARCE_USER_UNITS = 12
#: How much more one unit of the user's prose counts than one of the assistant's.
USER_WEIGHT = 3


#: The least a non-Latin script must add up to across the user's messages to outvote pasted English.
OWN_SCRIPT_UNITS = 4


def _script_only(t: _Tally) -> _Tally:
    """``t`` without its Latin words: which non-Latin language, if any, the text is written in."""
    return _Tally(units=Counter(t.units), uk=t.uk, arabic_script=Counter(t.arabic_script))


#: What tells one machine line from the next of its kind: identifiers, paths and numbers.
_SHAPE = re.compile(r"\S*[./:\\]\S*|\b\w*[A-Z]\w*[A-Z]\w*\b|\d+")


def _votes(texts: list[str], each: list[_Tally]) -> list[str | None]:
    """Each message's vote in ``_own_latin`` (``_message_vote``), from its tally in ``each``. A message with output in
    it votes by the typed lines that frame it ("folgende fehler nach builden:" above an English build log), not by the
    paste; a message whose words repeat an earlier voter's but for identifiers and numbers (a compiler's "Warning
    occurs in the template of component X." sent once per component) votes once. Only messages that vote at all are
    looked at again: a part of one has no more function words than the whole."""
    seen: set[str] = set()
    out: list[str | None] = []
    for text, tally in zip(texts, each, strict=True):
        vote = _message_vote(tally)
        if vote is not None and "\n" in text.strip():
            lines = [ln.strip() for ln in _prose(text).splitlines() if _WORD.search(ln)]
            typed = [ln for ln in lines if typed_line(ln)]
            if len(typed) < len(lines):
                vote = _message_vote(_tally(typed[:1] + typed[-1:] if len(typed) > 1 else typed))
        if vote is not None:
            shape = " ".join(_SHAPE.sub(" ", text).lower().split())
            if shape in seen:
                vote = None
            seen.add(shape)
        out.append(vote)
    return out


def _framing_lines(text: str) -> list[str]:
    """The first and last prose lines of a message: where a person's own words frame a paste."""
    lines = [ln for ln in _prose(text).splitlines() if _WORD.search(ln)]
    return lines[:1] + lines[-1:] if len(lines) > 1 else lines


def _own_script(texts: list[str], user: _Tally) -> str | None:
    """A non-Latin language the user writes in around the English they paste, or None.

    Pasted material (a prompt, a spec, an English log that no log pattern knows) is Latin script far
    more often than not, while a person typing Russian or Chinese types it in their own script. So
    a non-Latin script opening or closing at least half of the user's messages decides, however many
    English words the pastes between those lines bring (one typed Russian sentence before a 1,700-word
    English prompt is a Russian session).
    """
    code = _decide(_script_only(user))
    if code is None or sum(user.units.values()) < OWN_SCRIPT_UNITS:
        return None
    # A message that opens on a shell prompt ("$ mount", then its output) is a terminal pasted as it was: no line of it
    # frames anything, and its words are the machine's.
    # Nor does a long document that opens on a Markdown heading ("# Prompt for Cursor: …", "**Part 1: …**"): a prompt
    # another tool wrote, pasted whole between the user's own short lines.
    with_prose = [t for t in texts if _WORD.search(_prose(t)) and not _PROMPT_FIRST.match(t)
                  and not (len(t) > _DOCUMENT_CHARS and _DOCUMENT_FIRST.match(t))]
    framed = [t for t in with_prose
              if any(_decide(_script_only(_tally([ln]))) == code for ln in _framing_lines(t))]
    return code if with_prose and 2 * len(framed) >= len(with_prose) else None


_DOCUMENT_FIRST = re.compile(r"\A\s*(?:#{1,3} \S|\*\*[^*\n]{3,}\*\*)")
_DOCUMENT_CHARS = 400
_PROMPT_FIRST = re.compile(r"\A\s*(?:\$ |PS [A-Za-z]:[^>\n]*> |[A-Za-z]:\\[^>\n]*>|[\w.-]+@[\w.-]+:\S*[$#] )\S")


def _own_latin(votes: list[str | None]) -> str | None:
    """A Latin-script language other than English that most of the user's messages are written in, or None.

    Long English templates sent in the user's role (a project's custom prompt, Codex's ``/init`` text) outweigh a
    Spanish user's short typed messages by words; by messages they do not. Each message that says clearly which
    language it is in (``_message_vote``) votes once; a language other than English wins with more votes than English
    and at least half of them.
    """
    count = Counter(code for code in votes if code is not None)
    best = next((code for code, _n in count.most_common() if code != "en"), None)
    if best is None:
        return None
    return best if count[best] > count["en"] and 2 * count[best] >= sum(count.values()) else None


def _message_vote(t: _Tally) -> str | None:
    """The Latin-script language one message (its ``_tally``) is clearly in: two or more of its function words or
    telling letters, more than any other language has; else None ("ok", "violate it", "hazlo tu" say too little)."""
    scores = _scores(t.latin, t.diacritics)
    ranked = sorted(scores.values(), reverse=True)
    best = max(scores, key=lambda c: scores[c])
    return best if ranked[0] >= 2 and ranked[0] > ranked[1] else None


# What a harness writes into a user message beside the person's words, in English whatever the user's language:
# Claude Code's IDE context ("<ide_opened_file>The user opened the file … in the IDE. This may or may not be
# related to the current task.</ide_opened_file>") and system reminders, and Hermes's account of an attached
# image, written by a vision model ("[The user attached an image. Here's what it contains:\n…]", then "[If you
# need a closer look, use vision_analyze with image_url: …]", or "[User attached image: name.png]"). A Chinese ask
# of six characters after a 20-word IDE line, or a 300-word description, must stay Chinese.
_HARNESS_TAGS = ("ide_opened_file", "ide_selection", "ide_diagnostics", "system-reminder")
_IMAGE_NOTE = "[The user attached an image"
_IMAGE_HINT = re.compile(r"^\[If you need a closer look, use vision_analyze[^\n]*$", re.M)
_IMAGE_END = re.compile(r"\]\n\n|\]\s*$")
_IMAGE_NAME = re.compile(r"^\[User attached image: [^\]\n]*\]", re.M)


def _without(text: str, spans: list[tuple[int, int]]) -> str:
    kept, pos = [], 0
    for start, stop in spans:
        kept.append(text[pos:start])
        pos = stop
    return "\n".join([*kept, text[pos:]])


def _typed_part(text: str) -> str:
    """``text`` without the harness's own lines around what the user typed (IDE tags, image notes).

    Each search starts where the last one ended and stops at the next note: linear in the text, however many
    notes or unclosed tags it holds.
    """
    for tag in _HARNESS_TAGS:
        spans, pos = [], 0
        while (start := text.find(f"<{tag}>", pos)) >= 0 and (close := text.find(f"</{tag}>", start)) >= 0:
            pos = close + len(tag) + 3
            spans.append((start, pos))
        text = _without(text, spans) if spans else text
    spans, start = [], text.find(_IMAGE_NOTE)
    while start >= 0:
        # A note ends at its own hint line, else at the "]" that closes it before a blank line, the next note or the
        # end (a description may hold a "]" of its own, so not the first "]").
        following = text.find(_IMAGE_NOTE, start + 1)
        bound = following if following >= 0 else len(text)
        hint = _IMAGE_HINT.search(text, start, bound)
        end = _IMAGE_END.search(text, start + len(_IMAGE_NOTE), bound)
        spans.append((start, hint.end() if hint else (end.start() + 1 if end else bound)))
        start = following
    text = _without(text, spans) if spans else text
    return _IMAGE_NAME.sub(" ", text) if "[User attached image" in text else text


def session_language(user_texts: Iterable[str], assistant_texts: Iterable[str], default: str = "en") -> str:
    """The language a session was conducted in: the user's prose, helped by the assistant's when scarce.

    ``user_texts`` should be what the user typed: harness text in the user role (compaction summaries,
    task notifications, command output) is written by software, usually in English, and would outvote
    a Chinese user's own words. What a harness adds inside a typed message (IDE context, an image's
    description) is dropped here (``_typed_part``).
    """
    texts = [_typed_part(t) for t in user_texts]
    # Each message is tallied once: the session's tally is their sum, and ``_own_latin`` lets each one vote.
    each = [_tally([t]) for t in texts]
    user = _Tally()
    for one in each:
        user.add(one)
    votes = _votes(texts, each)
    if user.total >= SCARCE_USER_UNITS:
        decided = _decide(user)
        if decided not in _NON_LATIN_CODES and (own := _own_script(texts, user)):
            return own
        if decided == "en" and (own := _own_latin(votes)):
            return own
        return decided or default
    if own := _own_latin(votes):
        # Little typed, but each message that says clearly which language it is in says the same one ("schreibe alles
        # auf deutsch"): the user's language, however much English the assistant wrote before it switched.
        return own
    both = _tally(assistant_texts)
    both.add(user, USER_WEIGHT)
    return _decide(both) or default


def _languages_of_words() -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {}
    for code, stop in _STOPWORDS.items():
        for word in stop:
            found[word] = (*found.get(word, ()), code)
    return found


#: word → the languages whose function word it is: ``_scores`` looks each word up once, not once per language.
_STOPWORD_OF = _languages_of_words()


def _scores(words: Counter[str], diacritics: Counter[str]) -> dict[str, int]:
    """Each Latin language's evidence: its function words, and twice each letter only it uses."""
    scores = dict.fromkeys(_STOPWORDS, 0)  # in ``_STOPWORDS``'s order: ``_latin`` breaks ties by it
    for w, n in words.items():
        for code in _STOPWORD_OF.get(w, ()):
            scores[code] += n
    for code, n in diacritics.items():
        scores[code] += 2 * n
    return scores


def _latin(words: Counter[str], diacritics: Counter[str]) -> str | None:
    scores = _scores(words, diacritics)
    best = max(scores, key=lambda c: (scores[c], c == "en"))
    if scores[best] == 0:
        return "en" if words else None
    # Another language must clearly beat English: identifiers and English loanwords leak into
    # every technical conversation, so a near tie is English.
    if best != "en" and (scores[best] < 2 or scores[best] < 1.2 * scores["en"]):
        return "en"
    return best


def written_language(texts: Iterable[str]) -> str | None:
    """``guess_language``, but ``None`` for Latin-script text without a single function word or
    telling diacritic: "stub done" or "Fixed build" is too little to say which language it is in."""
    t = _tally(texts)
    code = _decide(t)
    evidence = any(t.diacritics.values()) or any(w in stop for stop in _STOPWORDS.values() for w in t.latin)
    return None if code in _STOPWORDS and not evidence else code


def detect_language(texts: Iterable[str], default: str = "en") -> str:
    """The language of the prose in ``texts`` as a short BCP-47 code; ``default`` when unclear."""
    return guess_language(texts) or default
