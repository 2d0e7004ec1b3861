"""Eval metrics: one function per metric, each defined precisely by its docstring.

Every function is pure and deterministic except ``decision_recall``, which takes the judge as a
parameter (the recorded LLM judge, or ``keyword_judge``). Inputs are the pipeline's own models
(``SessionSummary``, ``Facts``, the rendered note text) plus the hand-written ``Gold``.

"Summary text" below means the text a summariser wrote: title, goal, each phase's title, asks and
"done" text, each decision's choice, rationale and rejected options, the open items, and each
error with its fix. It
excludes the sections the renderer fills from ``Facts`` (output files, frontmatter numbers),
which come from the transcript by construction and so cannot be unfaithful.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import frontmatter

from evals.dataset import Gold, GoldDecision
from pipeline.facts.derive import arg_strings
from pipeline.models import Facts, Session, SessionSummary

# --------------------------------------------------------------------------- shared helpers


def summary_text(summary: SessionSummary, *, errors: bool = True) -> str:
    """The text a summariser wrote (see the module docstring), one piece per line.

    ``errors=False`` leaves out the errors section: decision recall is judged on what the summary
    says was done and chosen, and the recorded judge cassettes hold exactly that text.
    """
    parts: list[str] = [summary.title or "", summary.goal]
    for p in summary.phases:
        parts += [p.title, *p.asks, p.done]
    for d in summary.decisions:
        parts += [d.choice, d.rationale, *d.rejected]
    parts += list(summary.open_items)
    for e in summary.errors if errors else ():
        parts += [e.error, e.fix]
    return "\n".join(x for x in parts if x)


def transcript_text(session: Session) -> str:
    """Everything the session said or did: message text, tool arguments, carrier summaries.

    Reasoning is included too: a summary quoting the agent's own reasoning is grounded in the
    session even though the pipeline never sends reasoning to a model. So is the session's own title (a
    SpecStory export's heading, Hermes's ``sessions.title``): a note titled with it invents nothing.
    """
    parts: list[str] = [session.title or ""]
    for m in session.messages:
        parts += [m.content, m.carrier_summary or "", m.reasoning or ""]
        for c in m.tool_calls:
            parts.append(c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments, ensure_ascii=False))
            # and each string value as written: a quoted command is the command, not its JSON escape
            parts += list(arg_strings(c.arguments))
    return "\n".join(p for p in parts if p)


def _norm_text(text: str) -> str:
    # JSON-escaped Windows paths ("c:\\Users\\x") and real ones ("c:\Users\x") both become "c:/users/x".
    return re.sub(r"\s+", " ", text.replace("\\\\", "/").replace("\\", "/")).casefold()


def norm_path(path: str) -> str:
    """A path for comparison: slashes forward, no quotes, no leading ./, ~/ or drive, casefolded.

    ``~/p/a.ts`` is compared as ``p/a.ts``, so it names ``/Users/u/p/a.ts`` by suffix (``same_file``) and the
    other way round: a session with no cwd writes its home both ways, and gold may use either."""
    p = path.strip().strip("`'\"").replace("\\", "/")
    p = re.sub(r"^/?[a-zA-Z]:/", "/", p)  # c:/Users/... and /c:/Users/... -> /Users/...
    p = re.sub(r"/{2,}", "/", p).removeprefix("./").removeprefix("~/").rstrip("/")
    return p.casefold()


def same_file(predicted: str, gold: str) -> bool:
    """A predicted path names a gold file: equal after ``norm_path``, or more specific than gold.

    Gold is written relative to the project root ("common/pom.xml"), or as a bare name when the
    session never shows the directory ("DownloadQueueDispatcher.kt"); a summariser may report the
    absolute path the agent used ("/home/u/proj/common/pom.xml"). So the prediction may end with
    "/" + gold. The reverse (gold ends with "/" + prediction) counts only when the prediction has
    a directory itself: a bare "pom.xml" is the root file, not "common/pom.xml".
    """
    x, y = norm_path(predicted), norm_path(gold)
    if not (x and y):
        return False
    return x == y or x.endswith("/" + y) or ("/" in x and y.endswith("/" + x))


# --------------------------------------------------------------------------- output files


def _rooted(path: str, root: str) -> str:
    """``path`` under ``root`` when it is relative (as the note writes a file of its cwd), else as written."""
    if re.match(r"^(?:[/~\\]|[A-Za-z]:[/\\])", path):
        return path
    return root.replace("\\", "/").rstrip("/") + "/" + path


@dataclass(frozen=True)
class FileScore:
    precision: float | None
    recall: float | None
    true_positives: int
    predicted: int
    gold: int
    missed: tuple[str, ...]
    extra: tuple[str, ...]


def output_file_scores(predicted: Sequence[str], gold: Gold, deleted: Sequence[str] = (),
                       root: str | None = None) -> FileScore:
    """Precision and recall of the files a note lists as produced, against gold ``output_files``.

    * A predicted path is a true positive when it names (``same_file``) a gold output file; it is
      neutral when it names a gold ``optional_output_files`` entry (excluded from precision's
      denominator); otherwise it is a false positive.
    * Recall = gold files named by at least one prediction / gold files. A gold file the note lists under
      ``deleted`` (its ``deleted_files``) counts as found: the issue counts a deletion among a session's
      outputs, and the note reports it, apart from what the session left on disk. A deletion gold does not
      list is neither right nor wrong (it is not in ``output_files``, so precision never sees it).
    * ``None`` when undefined: precision with nothing predicted, recall with no gold files. Totals
      average only the defined values (macro average over sessions).

    ``predicted`` is the note's ``output_files`` frontmatter list (Facts plus whatever the
    summariser added), i.e. exactly what a reader of the note is told. The note writes them relative
    to ``root`` (its ``cwd``, or the root its files imply); with ``root`` given, a relative prediction
    also names the gold file written absolute (``.env.local`` in ``C:\\app`` is ``C:\\app\\.env.local``).
    """
    preds = list(dict.fromkeys(p for p in predicted if p.strip()))

    def names(p: str, g: str) -> bool:  # as written, or (relative) under the note's root
        return same_file(p, g) or (root is not None and same_file(_rooted(p, root), g))

    scored = [p for p in preds if not any(names(p, o) for o in gold.optional_output_files)
              or any(names(p, g) for g in gold.output_files)]
    tp = [p for p in scored if any(names(p, g) for g in gold.output_files)]
    gone = [d for d in deleted if d.strip()]
    found = [g for g in gold.output_files if any(names(p, g) for p in [*preds, *gone])]
    return FileScore(
        precision=len(tp) / len(scored) if scored else None,
        recall=len(found) / len(gold.output_files) if gold.output_files else None,
        true_positives=len(tp),
        predicted=len(scored),
        gold=len(gold.output_files),
        missed=tuple(g for g in gold.output_files if g not in found),
        extra=tuple(p for p in scored if p not in tp),
    )


# --------------------------------------------------------------------------- decisions

Judge = Callable[[GoldDecision, str], bool]


def keyword_judge(decision: GoldDecision, text: str) -> bool:
    """Deterministic fallback judge: every keyword group of the gold decision occurs in ``text``.

    A group is ``"a|b|c"``; it matches when any alternative occurs as a case-insensitive substring
    (whitespace-normalised, so keyword lists work for Chinese as well as English).
    """
    hay = _norm_text(text)
    return all(any(_norm_text(alt.strip()) in hay for alt in group.split("|") if alt.strip())
               for group in decision.keywords)


def decision_recall(summary: SessionSummary, gold: Gold, judge: Judge = keyword_judge) -> tuple[float | None, list[bool]]:
    """Share of gold decisions the summary states, per ``judge``; ``None`` when gold has none.

    The judge sees one gold decision and the whole summary text (not only the decisions list: a
    decision stated in a phase's "done" text is still stated), without the errors section.
    """
    if not gold.decisions:
        return None, []
    text = summary_text(summary, errors=False)
    hits = [bool(judge(d, text)) for d in gold.decisions]
    return sum(hits) / len(hits), hits


def phase_coverage(summary: SessionSummary, gold: Gold) -> float | None:
    """Share of the gold phases (the topics a long session worked through) that the note covers.

    A gold phase is covered when every keyword group matches the summary text (``keyword_judge``,
    errors excluded). None when gold lists no phases. This catches a long session collapsed into
    one phase, or topics surfacing only as quotes: those quotes rarely carry every group.
    """
    if not gold.phases:
        return None
    text = summary_text(summary, errors=False)
    hits = [keyword_judge(GoldDecision(text=p.text, keywords=p.keywords), text) for p in gold.phases]
    return sum(hits) / len(hits)


# --------------------------------------------------------------------------- end state


def end_state_correct(predicted: str, gold: Gold) -> bool:
    """The note's end state agrees with gold on the one question a reader acts on: did it succeed?

    ``resolved`` is correct only for a gold-resolved session. ``unresolved`` and ``failed`` are
    one class here ("did not succeed": where an abandoned fix ends and a failure starts is a
    judgement call), correct only for a gold unresolved/failed session. ``unknown`` claims no
    success, so it is correct for a gold unresolved/failed session, but it is *wrong* for a
    resolved one: the reader is not told the work succeeded. So a claimed success on an
    unresolved session is always an error, and so is a missed success.
    """
    succeeded = gold.end_state == "resolved"
    return predicted == "resolved" if succeeded else predicted != "resolved"


def end_state_exact(predicted: str, gold: Gold) -> bool:
    """Informational: the predicted end state equals gold exactly (unresolved ≠ failed, unknown never)."""
    return predicted == gold.end_state


def false_success(predicted: str, gold: Gold) -> bool:
    """The summary claims success for a session that gold says did not succeed (unresolved, failed or
    partial): the worst thing a note can say, since later readers and agents trust it (gate: 0)."""
    return predicted == "resolved" and gold.end_state != "resolved"


# --------------------------------------------------------------------------- faithfulness

_CODE_SPAN = re.compile(r"`([^`\n]{1,200})`")  # one character is a span too (`$`): else the next pairs wrongly
# A path: has a '/' or '\' between word characters, or ends in a short extension (file.ext).
# Path characters are word characters minus CJK/kana/hangul/fullwidth: Chinese prose puts no space
# around a file name ("调整了request.ts中的配置"), and the claim to check there is "request.ts".
_W = r"[^\W\u3000-\u9fff\uac00-\ud7af\uff00-\uffef]"
_PATH = re.compile(
    rf"(?<!{_W})(?<!@)(?:~|\.{{1,2}})?(?:(?:{_W}|[.@+-])+[/\\])+(?:{_W}|[.@+-])+"
    rf"|(?<!{_W})(?<![/\\.-])(?:{_W}|-)+(?:\.(?:{_W}|-)+)*\.[A-Za-z][A-Za-z0-9_]{{0,7}}(?![A-Za-z0-9_])"
)
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?%?(?![\w])")
_URLISH = re.compile(r"https?://\S+")


def claims(text: str) -> list[tuple[str, str]]:
    """The checkable claims in a text: ``(kind, value)`` with kind ``code``, ``path`` or ``number``.

    * ``code``: every backtick span (commands, identifiers, paths the summariser quoted).
    * ``path``: path-like tokens outside code spans: ``a/b`` or ``x\\y`` shapes, and ``name.ext``
      with a letter-led extension of ≤ 8 characters (``pom.xml``, ``DESIGN.md``); URLs are skipped
      (their host/path pieces are checked as a whole URL would be, which a summary rarely quotes).
    * ``number``: digit runs of two or more characters (``42``, ``3.5``, ``1,200``, ``95%``)
      outside code spans and paths; single digits are list numbering and step counts far more
      often than facts, so they are not checked.
    """
    out: list[tuple[str, str]] = []
    rest = text
    for m in _CODE_SPAN.finditer(text):
        out.append(("code", m.group(1).strip()))
    rest = _CODE_SPAN.sub(" ", rest)
    rest = _URLISH.sub(" ", rest)
    for m in _PATH.finditer(rest):
        value = m.group(0).rstrip(".")
        if re.search(r"[A-Za-z]", value) and not re.fullmatch(r"[\d.]+[A-Za-z]{0,2}", value):
            out.append(("path", value))
    rest = _PATH.sub(" ", rest)
    for m in _NUMBER.finditer(rest):
        digits = re.sub(r"\D", "", m.group(0))
        if len(m.group(0).rstrip("%")) >= 2 and digits:
            out.append(("number", m.group(0)))
    return list(dict.fromkeys(out))


def _grounded(kind: str, value: str, hay: str) -> bool:
    v = _norm_text(value)
    if v in hay:
        return True
    if kind == "number":  # "1,200" vs "1200", "95%" vs "95"
        bare = v.replace(",", "").rstrip("%")
        return bool(re.search(rf"(?<![\d.]){re.escape(bare)}(?![\d])", hay.replace(",", "")))
    if kind == "path":
        return norm_path(value) in hay or norm_path(value).removeprefix("/") in hay
    return False


def faithfulness_violations(summary: SessionSummary, session: Session,
                            facts: Facts | None = None) -> list[tuple[str, str]]:
    """Claims in the summary text (``claims``) that occur nowhere in the transcript.

    The transcript is ``transcript_text(session)`` of the session the summariser was given (after
    redaction), compared whitespace- and case-insensitively with backslashes as slashes. Each
    distinct claim counts once. "After grounding" in the gate means this is measured on the
    final ``SessionSummary``, after the LLM summariser's own grounding step has dropped files it
    could not find: what is left must be fully grounded. A path ``facts`` derived (``cd x && echo >
    y`` touched ``x/y``) is grounded too, and so is its tail: it comes from the transcript by construction.
    """
    hay = _norm_text(transcript_text(session))
    derived = {_norm_text(f.path) for f in facts.files} if facts is not None else set()
    # A derived path with a space in it ("d:/Code Project/app/.gitignore") is read back as its tail: a tail of one counts.
    return [(k, v) for k, v in claims(summary_text(summary))
            if not (k == "path" and any(d == (n := _norm_text(v)) or d.endswith((" " + n, "/" + n)) for d in derived))
            and not _grounded(k, v, hay)]


# --------------------------------------------------------------------------- language


def primary_language(tag: str | None) -> str:
    return re.split(r"[-_]", (tag or "").strip().lower(), maxsplit=1)[0]


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]{2,}")
_CJK_LANGUAGES = {"zh", "ja", "ko"}


def written_script_matches(summary: SessionSummary, gold: Gold) -> bool:
    """The prose is in gold's script: CJK for zh/ja/ko sessions, alphabetic for the rest.

    Counted over the summary text without the title (the session's own, in any language), with
    code spans, URLs and paths removed (identifiers are English in every language). One CJK
    character counts as one unit and so does one alphabetic word of 2+ letters, since each carries
    about a word's meaning. A CJK session needs at least as many CJK units as alphabetic ones; any
    other session at most one CJK unit per five words. Under 10 units in all: not judged (True).
    Independent of ``pipeline.facts.lang`` on purpose, so the metric does not share the guard's blind spots.
    """
    text = summary_text(summary.model_copy(update={"title": None}))
    text = _PATH.sub(" ", _URLISH.sub(" ", _CODE_SPAN.sub(" ", text)))
    cjk, words = len(_CJK.findall(text)), len(_LATIN_WORD.findall(text))
    if cjk + words < 10:
        return True
    if primary_language(gold.language) in _CJK_LANGUAGES:
        return cjk >= words
    return cjk * 5 <= words


def language_match(summary: SessionSummary, gold: Gold) -> bool:
    """The summary is tagged with gold's primary subtag (``zh-TW`` gold matches ``zh``) and its
    prose is written in that language's script (``written_script_matches``)."""
    tag_ok = primary_language(summary.language) == primary_language(gold.language)
    return tag_ok and written_script_matches(summary, gold)


# --------------------------------------------------------------------------- secrets

#: Independent of pipeline/redact.py on purpose: the check must not share the redactor's blind spots.
SECRET_PATTERNS: dict[str, re.Pattern[str]] = {
    "openai": re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"),
    "github": re.compile(r"\b(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{30,}"),
    "aws": re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    "slack": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    "google": re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
    "private_key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "jwt": re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
    "dsn_password": re.compile(r"\b[a-z][a-z0-9+]*://[^\s:/@]+:(?!\*|\[)[^\s@/]{3,}@"),
}


def secrets_leaked(note_text: str, gold: Gold, extra_literals: Iterable[str] = ()) -> list[str]:
    """Secrets that reach the note: gold literal secrets, ``extra_literals``, and ``SECRET_PATTERNS``.

    Returns one entry per distinct leak: ``literal:<first 6 chars>…`` or ``<pattern>:<first 6>…``
    (never the whole secret, so the report itself does not leak). Must be empty.
    """
    leaks: list[str] = []
    for lit in (*gold.secrets, *extra_literals):
        if lit and lit in note_text:
            leaks.append(f"literal:{lit[:6]}…")
    for name, pattern in SECRET_PATTERNS.items():
        for m in pattern.finditer(note_text):
            leaks.append(f"{name}:{m.group(0)[:6]}…")
    return list(dict.fromkeys(leaks))


# --------------------------------------------------------------------------- structure

REQUIRED_KEYS: dict[str, type | tuple[type, ...]] = {
    "type": str, "id": str, "title": str, "aliases": list, "source": str, "message_count": int,
    "generations": int, "output_files": list, "end_state": str, "language": str, "content_hash": str,
    "summarizer": str, "tags": list,
}
END_STATES = {"resolved", "unresolved", "failed", "unknown"}


def structure_problems(note_text: str, summary: SessionSummary, facts: Facts) -> list[str]:
    """What is wrong with the note's shape; empty means valid.

    * Frontmatter: parses as YAML between ``---`` lines; every ``REQUIRED_KEYS`` key is present with
      that type; ``end_state`` is one of the four states and equals the summary's; ``language``
      equals the summary's.
    * Sections (H2, in the summary's language per ``templates/headings.yaml``): Goal, Summary and
      Notes always; Key decisions when the summary has decisions; Output files when the note lists
      any; Open items when the summary has any. Exactly one H1.
    """
    from pipeline.notes.render import headings_for

    problems: list[str] = []
    try:
        post = frontmatter.loads(note_text)
    except Exception as exc:  # any parse failure is the finding itself
        return [f"frontmatter does not parse: {type(exc).__name__}: {exc}"]
    fm = post.metadata
    for key, typ in REQUIRED_KEYS.items():
        if key not in fm:
            problems.append(f"frontmatter: missing {key}")
        elif not isinstance(fm[key], typ) or (typ is int and isinstance(fm[key], bool)):
            problems.append(f"frontmatter: {key} is {type(fm[key]).__name__}, expected {getattr(typ, '__name__', typ)}")
    if fm.get("end_state") not in END_STATES or fm.get("end_state") != summary.end_state:
        problems.append(f"frontmatter: end_state {fm.get('end_state')!r} invalid or not the summary's")
    if fm.get("language") != summary.language:
        problems.append(f"frontmatter: language {fm.get('language')!r} is not the summary's {summary.language!r}")
    h = headings_for(summary.language)
    body = post.content
    h2 = {ln[3:].strip() for ln in body.splitlines() if ln.startswith("## ")}
    want = ["goal", "summary", "notes"]
    if summary.decisions:
        want.append("decisions")
    if fm.get("output_files"):
        want.append("output_files")
    if summary.open_items:
        want.append("open_items")
    problems += [f"section missing: {h[k]}" for k in want if h[k] not in h2]
    if sum(1 for ln in body.splitlines() if ln.startswith("# ")) != 1:
        problems.append("body: expected exactly one H1 title")
    return problems


# --------------------------------------------------------------------------- length


def length_stats(note_text: str, session: Session) -> dict[str, int | float]:
    """Note size in characters and estimated tokens, and its ratio to the transcript's tokens.

    Tokens are estimated with ``pipeline.chunk.estimate_tokens`` (the same estimate the chunker
    budgets with), so the ratio is comparable across languages.
    """
    from pipeline.chunk import estimate_tokens

    note_tokens = estimate_tokens(note_text)
    source_tokens = max(1, estimate_tokens(transcript_text(session)))
    return {"note_chars": len(note_text), "note_tokens": note_tokens, "transcript_tokens": source_tokens,
            "compression": round(note_tokens / source_tokens, 4)}
