"""Render stage: ``Session`` + ``SessionSummary`` + ``Facts`` → ``Note`` (pure, no I/O but templates).

A note is one Markdown file that three readers must agree on: Obsidian (flat properties, list
tags, quoted wikilinks), gbrain (``type``/``title``/``tags`` columns, ``<!-- timeline -->`` splits the
body) and Trilium's importer. So the frontmatter is a flat dict of plain JSON-able values built
here in Python and serialised with PyYAML, and the body comes from ``templates/session.md.j2``.

Session text is *data*: it reaches the template only as variables, and every value passes one of
three filters that neutralise Markdown structure (headings, rules, setext underlines, HTML
comments, Obsidian ``%%`` comments and ``#tags``) while leaving code spans and fenced code alone.
That keeps the user's ``## Notes`` section, which ``write`` preserves across runs, findable.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import yaml

import pipeline
from pipeline.models import Facts, Note, Session, SessionSummary
from pipeline.resources import data_dir

if TYPE_CHECKING:
    from jinja2.sandbox import SandboxedEnvironment

TEMPLATE = "session.md.j2"
SLUG_MAX = 50

#: Every key ``render_note`` can emit. ``write`` treats any other key in an existing file as the
#: user's own and carries it over; a generated key is always replaced by the fresh value.
GENERATED_KEYS: frozenset[str] = frozenset(
    {
        "type", "id", "title", "aliases", "date", "source", "model", "provider", "started_at",
        "ended_at", "message_count", "input_tokens", "output_tokens", "cost_usd", "parent_session",
        "tags", "projects", "cwd", "git_branch", "transcript", "generations", "output_files", "deleted_files", "end_state", "end_evidence",
        "language", "distill_version", "content_hash", "distilled_at", "summarizer", "skills",
        # Life-cycle keys (pipeline/archive): content version, what distill derived for the lists a person
        # may edit (see ``notes.store.merge_managed``), and the related notes the run links.
        "version", "distill_projects", "distill_tags", "related",
    }
)  # fmt: skip

_WINDOWS_RESERVED = frozenset(
    {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}
)


# --------------------------------------------------------------------------- headings


@lru_cache(maxsize=1)
def _all_headings() -> dict[str, dict[str, Any]]:
    with open(data_dir("templates") / "headings.yaml", encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def headings_for(language: str | None) -> dict[str, Any]:
    """Labels for ``language`` (``zh-CN`` → ``zh``), each missing key filled from ``en``."""
    table = _all_headings()
    primary = re.split(r"[-_]", (language or "en").strip().lower(), maxsplit=1)[0]
    labels = {**table["en"], **table.get(primary, {})}
    labels["outcomes"] = {**table["en"]["outcomes"], **table.get(primary, {}).get("outcomes", {})}
    return labels


@lru_cache(maxsize=64)  # the link pass asks it for each section of each note it reads (33,000 times at 2,000)
def section_labels(key: str) -> frozenset[str]:
    """The label of section ``key`` in every language, casefolded (``write`` finds Notes with it)."""
    return frozenset(str(t[key]).casefold() for t in _all_headings().values() if key in t)


def generated_section_labels() -> frozenset[str]:
    """Every H2 label the template can emit, in any language, casefolded."""
    keys = ("goal", "summary", "decisions", "errors", "output_files", "open_items", "lineage", "skills", "related",
            "notes")
    return frozenset().union(*(section_labels(k) for k in keys))


# --------------------------------------------------------------------------- Markdown neutralising

# A fence opener (CommonMark: a backtick fence's info string has no backticks) and a closer.
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}(?=[^`]*$)|~{3,})")
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*$")
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)")
# Lines that would become a rule, a setext underline (turning the line above into a heading) or
# gbrain's "--- timeline ---" sentinel; a backslash before the first character makes them text.
_BLOCK_BREAK = re.compile(r"^( {0,3})(?=[-=]+\s*$|([-*_])(\s*\2){2,}\s*$|---|===|<)")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# gbrain splits a page at the first "<!-- timeline -->" even inside code; break the exact string there.
_SENTINEL = "<!-- timeline -->"
_SENTINEL_IN_CODE = "<!-- timeline - ->"


def _escape_prose(segment: str) -> str:
    # `#` after whitespace would open a heading (at line start) or an Obsidian tag (anywhere);
    # `<!--` would hide everything up to a later `-->`; `%%` is an Obsidian comment.
    segment = re.sub(r"(?<!\S)#", r"\\#", segment)
    return segment.replace("<!--", "&lt;!--").replace("%%", "&#37;&#37;")


def _escape_line(line: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _CODE_SPAN.finditer(line):
        out.append(_escape_prose(line[pos : m.start()]))
        out.append(m.group(0).replace(_SENTINEL, _SENTINEL_IN_CODE))
        pos = m.end()
    out.append(_escape_prose(line[pos:]))
    escaped = "".join(out)
    if _FENCE_OPEN.match(escaped):  # only reachable from `inline`: a fence there would swallow the note
        escaped = re.sub(r"^( {0,3})", r"\1\\", escaped, count=1)
    return _BLOCK_BREAK.sub(r"\1\\", escaped, count=1)


def _clean(text: str) -> str:
    return _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def md_inline(text: object) -> str:
    """One line of prose: whitespace collapsed, structure neutralised, code spans untouched."""
    return _escape_line(" ".join(_clean(str(text)).split()))


def md_block(text: object) -> str:
    """Paragraphs: each prose line neutralised; fenced code kept verbatim and always closed."""
    lines = _clean(str(text)).strip("\n").split("\n")
    out: list[str] = []
    fence: str | None = None
    for line in lines:
        if fence is None and (m := _FENCE_OPEN.match(line)):
            fence = m.group(1)
            out.append(line)
        elif fence is not None:
            close = _FENCE_CLOSE.match(line)
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence):
                fence = None
            out.append(line.replace(_SENTINEL, _SENTINEL_IN_CODE))
        else:
            out.append(_escape_line(line))
    if fence is not None:  # an unclosed fence would turn the rest of the note into code
        out.append(fence)
    return "\n".join(out).rstrip()


def md_code(text: object) -> str:
    """A code span that survives backticks in the value (CommonMark: a longer fence)."""
    # A code span is inert in CommonMark, but gbrain splits a page at its sentinel even inside code;
    # a %% pair is broken too, as in prose, so no reader can take it for an Obsidian comment.
    value = " ".join(_clean(str(text)).split()).replace(_SENTINEL, _SENTINEL_IN_CODE).replace("%%", "%\u200b%")
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{ticks}{pad}{value}{pad}{ticks}"


@lru_cache(maxsize=1)
def _env() -> SandboxedEnvironment:
    # Sandboxed + StrictUndefined: a template typo fails loudly, and templates cannot reach
    # Python internals. Autoescape is off because the output is Markdown, not HTML; the
    # md_* filters do the escaping that matters here. Imported here: a run that renders nothing
    # (every note current) never needs jinja2.
    from jinja2 import FileSystemLoader, StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(
        loader=FileSystemLoader(str(data_dir("templates"))),
        undefined=StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(inline=md_inline, block=md_block, code=md_code)
    return env


# --------------------------------------------------------------------------- names and values


def slugify(text: str, max_len: int = SLUG_MAX) -> str:
    """Lowercase letters/digits of any script joined by ``-``; safe as a file name and a gbrain slug."""
    text = unicodedata.normalize("NFKC", text).lower()
    slug = "".join(c if c.isalnum() else "-" for c in text)
    slug = re.sub(r"-{2,}", "-", slug).strip("-")[:max_len].strip("-")
    if not slug or slug in _WINDOWS_RESERVED:
        slug = f"session-{slug}".strip("-")
    return slug


def short_id(session_id: str) -> str:
    """Last token of the id (Hermes ``YYYYMMDD_HHMMSS_<hex6>`` → hex6), at most 8 chars, lowercase."""
    tokens = [t for t in re.split(r"[^0-9A-Za-z]+", session_id) if t]
    if tokens and len(tokens[-1]) >= 6:
        return tokens[-1][-8:].lower()
    return ("".join(tokens)[-8:] or "x").lower()


def note_title(session: Session, summary: SessionSummary) -> str:
    """Single-line title: summary title, else the session's, else the goal, else the id."""
    for raw in (summary.title, session.title, summary.goal):
        title = " ".join(_clean(raw or "").split())
        if title:
            return title if len(title) <= 120 else title[:119].rstrip() + "…"
    return f"Session {session.id}"


def note_relpath(session: Session, title: str) -> str:
    """``YYYY/MM/YYYY-MM-DD-<slug>-<short id>.md`` from the UTC start (``undated/`` when unknown)."""
    when = session.started_at or session.last_active_at or session.ended_at
    stem = f"{slugify(title)}-{short_id(session.id)}"
    if when is None:
        return f"undated/{stem}.md"
    when = _utc(when)
    return f"{when:%Y}/{when:%m}/{when:%Y-%m-%d}-{stem}.md"


def _utc(dt: datetime) -> datetime:
    # Naive datetimes from the readers are UTC by contract (Hermes stores epoch seconds).
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


class YamlDate(str):
    """A date (``2026-11-20``) or UTC date-time (``2026-11-20T08:00:00``) written unquoted.

    Obsidian types a property by its value's shape: ``YYYY-MM-DD`` is a Date and
    ``YYYY-MM-DDTHH:mm:ss`` a Date & time (it has no time-zone form, so the offset is left out and
    every time in a note is UTC). Quoted, or with ``+00:00``, it would be Text. It is still a ``str``
    to Python, and ``notes.frontmatter`` reads it back as one; gbrain gets it quoted (its js-yaml
    would turn a bare date into a midnight timestamp, peers-and-formats.md B.6).
    """

    __slots__ = ()


def iso(dt: datetime | None) -> YamlDate | None:
    """``2026-11-20T08:00:00``, in UTC: a Date & time property in Obsidian, the same in every time zone."""
    return None if dt is None else YamlDate(_utc(dt).replace(tzinfo=None).isoformat(timespec="seconds"))


def tag_name(raw: str) -> str | None:
    """An Obsidian-valid tag (letters, digits, ``_ - /``; never purely numeric) or ``None``."""
    text = unicodedata.normalize("NFKC", raw).strip().lstrip("#").lower()
    tag = "".join(c if c.isalnum() or c in "_-/" else "-" for c in text)
    tag = re.sub(r"/{2,}", "/", re.sub(r"-{2,}", "-", tag)).strip("-/")
    if not tag:
        return None
    return tag if any(c.isalpha() for c in tag) else f"tag-{tag}"


def _unique(items: Iterable[str]) -> list[str]:
    seen: dict[str, str] = {}
    for item in items:
        seen.setdefault(item.casefold(), item)
    return list(seen.values())


def default_link(session_id: str) -> str:
    """A session that has no note (yet): its id as text, not a link.

    ``[[<session id>]]`` would dangle: Obsidian resolves links by file path, never by ``aliases``
    (it writes ``[[File|alias]]`` for an alias), and gbrain stores no edge to a missing page.
    """
    return session_id


# --------------------------------------------------------------------------- the stage


def render_note(
    session: Session,
    summary: SessionSummary,
    facts: Facts,
    *,
    content_hash: str,
    distilled_at: datetime,
    link_for: Callable[[str], str] | None = None,
    skills: Sequence[str] = (),
) -> Note:
    """Build the note for one session. Deterministic for the same inputs (no clock, no I/O)."""
    link = link_for or default_link
    title = note_title(session, summary)
    language = summary.language or facts.language
    h = headings_for(language)
    lineage = session.lineage
    output_files = _unique([*facts.output_files, *summary.output_files])
    tags = _unique(
        t for t in (tag_name(x) for x in ("distill", f"source/{session.source}", *summary.tags)) if t
    )

    fm: dict[str, Any] = {
        "type": "conversation",
        "id": session.id,
        "title": title,
        "aliases": [session.id],
        "date": YamlDate(f"{_utc(session.started_at):%Y-%m-%d}") if session.started_at else None,
        "source": session.source,
        "model": session.model or (facts.models[0] if facts.models else None),
        "provider": session.provider,
        "started_at": iso(session.started_at),
        "ended_at": iso(session.ended_at),
        "message_count": facts.message_count or len(session.messages),
        # A session with replies used tokens: 0 means the source records none (a SpecStory or aider export), and
        # unknown is null, not zero (as ``cost_usd``).
        "input_tokens": facts.input_tokens or session.input_tokens or None,
        "output_tokens": facts.output_tokens or session.output_tokens or None,
        "cost_usd": facts.cost_usd if facts.cost_usd is not None else session.cost_usd,
        "parent_session": link(lineage.parent) if lineage.parent else None,
        "projects": list(summary.projects),
        "cwd": session.cwd,
        "git_branch": session.git_branch,
        **({"transcript": session.transcript} if session.transcript else {}),
        "generations": facts.generations,
        "output_files": output_files,
        **({"deleted_files": facts.deleted_files} if facts.deleted_files else {}),
        "end_state": summary.end_state,
        "end_evidence": summary.end_evidence or None,
        "language": language,
        "distill_version": pipeline.__version__,
        "content_hash": content_hash,
        "distilled_at": iso(distilled_at),
        "summarizer": summary.summarizer,
    }
    if skills:
        fm["skills"] = list(skills)
    # ``version`` counts content changes; the store sets the real value when it replaces a note.
    fm["version"] = 1
    # What distill derived, so a person's own and removed entries can be told apart on re-render.
    fm["distill_projects"] = list(summary.projects)
    fm["distill_tags"] = list(tags)
    fm["tags"] = tags  # last, where gbrain's serialiser puts it too

    def body_link(target: str) -> str:
        # A session without a note is named as text, neutralised like any session text.
        found = link(target)
        return found if found.startswith("[[") else md_inline(found)

    related: list[tuple[str, str]] = []
    for key in ("parent", "branched_from", "delegated_from", "reset_from"):
        if target := getattr(lineage, key):
            related.append((h[key], body_link(target)))
    related += [(h["segment"], body_link(s)) for s in lineage.segments if s != session.id]
    for key, ids in (
        ("child", lineage.children),
        ("branch", lineage.branches),
        ("subagent", lineage.subagents),
    ):
        related += [(h[key], body_link(s)) for s in ids]

    template = _env().get_template(TEMPLATE)
    body = template.render(
        h=h,
        title=title,
        goal=summary.goal,
        phases=[
            {
                "title": p.title,
                "asks": list(p.asks),
                "done": p.done,
                "outcome": h["outcomes"].get(p.outcome, p.outcome),
            }
            for p in summary.phases
        ],
        decisions=list(summary.decisions),
        output_files=output_files,
        open_items=list(summary.open_items),
        errors=list(summary.errors),
        lineage=_unique_pairs(related),
        skills=list(skills),
    )
    return Note(
        session_id=session.id,
        relpath=note_relpath(session, title),
        frontmatter=fm,
        body=body,
        content_hash=content_hash,
    )


def _unique_pairs(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return list(dict.fromkeys(pairs))


# --------------------------------------------------------------------------- serialising


class _NoteDumper(yaml.SafeDumper):
    """SafeDumper that never emits anchors and quotes strings other YAML readers would retype."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


# libyaml's emitter is ~5x faster than the pure-Python one and, for text in the Basic Multilingual
# Plane, writes byte-identical YAML (fuzzed against it). It differs on a few characters: it
# escapes astral ones (an emoji title would read "\U0001F680"), writes NEL/LS/PS differently and
# rejects lone surrogates. Metadata holding any of those goes through the Python emitter, so
# every note's text is exactly what it was before the C emitter was used.
_C_UNSAFE = re.compile(r"[\x85\u2028\u2029\ud800-\udfff\U00010000-\U0010ffff]")
_FastNoteDumper: type[yaml.SafeDumper] | None = None
if hasattr(yaml, "CSafeDumper"):

    class _FastNoteDumper(yaml.CSafeDumper):  # type: ignore[no-redef]
        ignore_aliases = _NoteDumper.ignore_aliases


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    # js-yaml (gbrain) and Obsidian use YAML 1.2, where an unquoted "1234e567" or "0x1f" is a number
    # although PyYAML (1.1) writes it plain; quoting anything that starts like a number avoids that.
    if value[:1] in _NUMBER_START and "\n" not in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="'")
    return dumper.represent_str(value)


def _represent_when(dumper: yaml.SafeDumper, value: YamlDate | date) -> yaml.Node:
    # Plain, so YAML and Obsidian read a date. A ``datetime`` a reader loaded from a note keeps
    # the ``T`` form (PyYAML would write a space, which Obsidian reads as Text).
    # libyaml's emitter takes only an exact ``str``.
    text = str.__str__(value) if isinstance(value, str) else value.isoformat()
    return dumper.represent_scalar("tag:yaml.org,2002:timestamp", text)


_NUMBER_START = frozenset("0123456789+-.")
for _dumper in (_NoteDumper, _FastNoteDumper):
    if _dumper is not None:
        _dumper.add_representer(str, _represent_str)
        _dumper.add_representer(tuple, yaml.SafeDumper.represent_list)
        for _type in (YamlDate, date, datetime):
            _dumper.add_representer(_type, _represent_when)


def _strings(value: Any, found: list[str]) -> list[str]:
    """Every string in ``value`` (keys too), appended to ``found``."""
    if isinstance(value, str):
        found.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _strings(k, found)
            _strings(v, found)
    elif isinstance(value, list | tuple):
        for v in value:
            _strings(v, found)
    return found


def _dumper_for(metadata: dict[str, Any]) -> type[yaml.SafeDumper]:
    # One search over the strings joined by a newline (which the pattern never matches), not one each.
    if _FastNoteDumper is None or _C_UNSAFE.search("\n".join(_strings(metadata, []))):
        return _NoteDumper
    return _FastNoteDumper


def dump_note(metadata: dict[str, Any], body: str) -> str:
    """The file text: ``---`` YAML ``---``, a blank line, the body, one trailing newline."""
    # Exactly what ``frontmatter.dumps`` produced (delimiters, blank line, outer strip), without
    # building a ``Post``.
    meta = _plain_yaml(metadata)
    if meta is None:
        meta = yaml.dump(
            metadata, Dumper=_dumper_for(metadata), sort_keys=False, width=1_000_000,
            default_flow_style=False, allow_unicode=True,
        ).strip()
    content = body.rstrip("\n")
    return f"---\n{meta}\n---\n\n{content}\n".strip() + "\n"


# --------------------------------------------------------------------------- the common case, without PyYAML

# A note's frontmatter is a flat mapping of short strings, numbers and lists of strings, and PyYAML's
# Python representer and resolver cost 0.35 ms a note: most of what dumping it took. ``_plain_yaml``
# writes exactly what ``yaml.dump`` writes with the settings above, for the values where that is
# simple to state, and answers None for everything else (which ``yaml.dump`` then writes):
#
# * a string of printable characters with no line break, no space other than U+0020 and nothing
#   outside the Basic Multilingual Plane is written plain when the emitter would allow a plain
#   scalar in block context (no indicator first, no ``: `` or `` #`` inside, no space at either end,
#   no ``---``/``...`` start) and PyYAML's resolver reads the plain text back as a string; else
#   single-quoted, ``'`` doubled, which the emitter allows for such text and ``_represent_str``
#   asks for when it starts like a number; the empty string is ``''``;
# * None, booleans and whole numbers as their YAML words; a float as ``represent_float`` spells it,
#   when the resolver reads that back as a float; a ``YamlDate`` plain when it reads back as a date;
# * a list of such strings as ``- item`` lines under its key (``[]`` when empty).
#
# ``tests/test_render.py`` fuzzes it against ``yaml.dump``; the width is a million, so nothing folds.

_PLAIN_TEXT = re.compile(r"[\x20-\x7e\xa1-\xac\xae-\u167f\u1681-\u180d\u180f-\u1fff\u2010-\u2027\u2030-\u205e"
                         r"\u2070-\u2fff\u3001-\ud7ff\ue000-\ufefe\uff00-\ufffd]+")
_FIRST_INDICATORS = frozenset("#,[]{}&*!|>'\"%@`")
_KEY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STR_TAG, _FLOAT_TAG, _TIMESTAMP_TAG = ("tag:yaml.org,2002:str", "tag:yaml.org,2002:float",
                                        "tag:yaml.org,2002:timestamp")


@lru_cache(maxsize=1)
def _resolver() -> yaml.resolver.Resolver:
    return yaml.resolver.Resolver()


@lru_cache(maxsize=8192)  # tags, sources, models and paths repeat from note to note
def _implicit_tag(text: str) -> str:
    """The tag PyYAML's resolver gives ``text`` written plain."""
    return _resolver().resolve(yaml.ScalarNode, text, (True, False))


def _block_plain(text: str) -> bool:
    """Whether the emitter may write ``text`` (printable, one line) as a plain scalar in block context."""
    first = text[0]
    if first in _FIRST_INDICATORS or text.startswith(("---", "...")) or first == " " or text[-1] == " ":
        return False
    if first in "?:-" and (len(text) == 1 or text[1] == " "):
        return False
    return ": " not in text and not text.endswith(":") and " #" not in text


@lru_cache(maxsize=8192)
def _string_yaml(text: str) -> str | None:
    if not text:
        return "''"
    if not _PLAIN_TEXT.fullmatch(text):
        return None
    if text[0] not in _NUMBER_START and _block_plain(text) and _implicit_tag(text) == _STR_TAG:
        return text
    return "'" + text.replace("'", "''") + "'"


def _scalar_yaml(value: Any) -> str | None:
    kind = type(value)
    if kind is str:
        return _string_yaml(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if kind is float:
        if value != value or value in (float("inf"), float("-inf")):
            return None
        text = repr(value).lower()
        if "." not in text and "e" in text:
            text = text.replace("e", ".0e", 1)
        return text if _implicit_tag(text) == _FLOAT_TAG else None
    if kind is YamlDate:
        text = str.__str__(value)
        return text if _PLAIN_TEXT.fullmatch(text) and _implicit_tag(text) == _TIMESTAMP_TAG else None
    return None


def _plain_yaml(metadata: dict[str, Any]) -> str | None:
    """``yaml.dump(metadata, ...)`` as ``dump_note`` calls it, stripped; None when not certain (see above)."""
    lines: list[str] = []
    for key, value in metadata.items():
        if type(key) is not str or not _KEY_NAME.fullmatch(key) or _string_yaml(key) != key:
            return None
        if type(value) is list or type(value) is tuple:
            if not value:
                lines.append(f"{key}: []")
                continue
            lines.append(f"{key}:")
            for item in value:
                if type(item) is not str or (text := _string_yaml(item)) is None:
                    return None
                lines.append(f"- {text}")
            continue
        text = _scalar_yaml(value)
        if text is None:
            return None
        lines.append(f"{key}: {text}")
    return "\n".join(lines) if lines else None


def note_text(note: Note) -> str:
    return dump_note(note.frontmatter, note.body)
