"""Run summarisers over the eval set and score them: ``python -m evals``.

Each session goes through the same stages as ``pipeline.run.steps.distill_session`` (redact → chunk →
facts → summarise → render), minus the note store, and the rendered note is scored with
``evals.metrics``. Summarisers run side by side on the same inputs:

* ``extractive``: always available, no model.
* ``llm:<model>``: every model with cassettes under ``evals/cassettes/summaries/`` (replayed), plus
  ``--model M`` (replayed if recorded, recorded with ``--record``). Sessions a model has no
  cassette for are listed as "not recorded", never silently re-run against a server.

Decision recall is always computed with the keyword judge (deterministic, survives pipeline
changes); where a judge cassette exists, the LLM judge's recall is reported beside it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evals import metrics as M
from evals.dataset import Gold, load_gold, load_session
from pipeline.models import Chunk, Facts, Session, SessionSummary

REPORTS = Path(__file__).resolve().parent / "reports"
#: Notes are rendered with a fixed clock so reports only change when the pipeline does.
EVAL_CLOCK = datetime(2026, 1, 1, tzinfo=UTC)

SummariseFn = Callable[[str, Session, list[Chunk], Facts], tuple[SessionSummary, dict[str, Any]]]


@dataclass
class Prepared:
    gold: Gold
    session: Session
    chunks: list[Chunk]
    facts: Facts


@dataclass
class EvalResult:
    """One summariser on one session: every metric plus what it cost."""

    summariser: str
    case: str
    split: str = "dev"  # the gold's part: dev (tuned on) or test (blind)
    status: str = "ok"  # ok | not-recorded | error
    error: str | None = None
    values: dict[str, Any] = field(default_factory=dict)


def prepare(gold: Gold, chunk_tokens: int | None = None) -> Prepared:
    """The session as the summariser sees it: redacted, chunked, with Facts."""
    from pipeline.chunk import chunk_session
    from pipeline.config import DEFAULT_CHUNK_TOKENS
    from pipeline.facts.derive import derive_facts
    from pipeline.redact import redact_session

    session = redact_session(load_session(gold))
    chunks = chunk_session(session, budget=chunk_tokens or DEFAULT_CHUNK_TOKENS)
    return Prepared(gold, session, chunks, derive_facts(session, chunks))


def extractive(case_id: str, session: Session, chunks: list[Chunk], facts: Facts) -> tuple[SessionSummary, dict[str, Any]]:
    from pipeline.summarize.extractive import summarise_extractive

    return summarise_extractive(session, chunks, facts), {"llm_calls": 0, "input_tokens": 0, "output_tokens": 0,
                                                           "cost_usd": 0.0, "fallback": False}


def score(p: Prepared, summary: SessionSummary, usage: dict[str, Any], summariser: str,
          llm_judge: Any | None = None) -> dict[str, Any]:
    """Render the note and compute every metric for it."""
    from pipeline.facts.derive import work_root
    from pipeline.notes.render import note_text, render_note
    from pipeline.run.steps import content_hash

    note = render_note(p.session, summary, p.facts, content_hash=content_hash(p.session, p.chunks, summariser),
                       distilled_at=EVAL_CLOCK)
    text = note_text(note)
    files = M.output_file_scores(note.frontmatter.get("output_files") or [], p.gold,
                                 note.frontmatter.get("deleted_files") or [], root=work_root(p.session))
    kw_recall, kw_hits = M.decision_recall(summary, p.gold, M.keyword_judge)
    values: dict[str, Any] = {
        "file_precision": files.precision, "file_recall": files.recall,
        "files_missed": list(files.missed), "files_extra": list(files.extra),
        "decision_recall_keyword": kw_recall, "decision_hits_keyword": kw_hits,
        "phase_coverage": M.phase_coverage(summary, p.gold),
        "decision_recall_llm": None, "decision_hits_llm": None,
        "end_state": summary.end_state, "end_state_gold": p.gold.end_state,
        "end_state_correct": M.end_state_correct(summary.end_state, p.gold),
        "end_state_exact": M.end_state_exact(summary.end_state, p.gold),
        "false_success": M.false_success(summary.end_state, p.gold),
        "faithfulness_violations": [f"{k}: {v}" for k, v in M.faithfulness_violations(summary, p.session, p.facts)],
        "language": summary.language, "language_gold": p.gold.language,
        "language_match": M.language_match(summary, p.gold),
        "secrets_leaked": M.secrets_leaked(text, p.gold),
        "structure_problems": M.structure_problems(text, summary, p.facts),
        **M.length_stats(text, p.session),
        **{k: usage.get(k) for k in ("llm_calls", "input_tokens", "output_tokens", "cost_usd", "fallback",
                                     "hallucinations_dropped")},
    }
    if usage.get("notices"):
        values["notices"] = usage["notices"]
    if llm_judge is not None and p.gold.decisions and llm_judge.has(summariser, p.gold.id):
        hits = llm_judge.judge_all(summariser, p.gold.id, list(p.gold.decisions), M.summary_text(summary, errors=False))
        values["decision_recall_llm"], values["decision_hits_llm"] = sum(hits) / len(hits), hits
    return values


# --------------------------------------------------------------------------- totals


def _mean(xs: Sequence[float | None]) -> float | None:
    vals = [float(x) for x in xs if x is not None]
    return round(sum(vals) / len(vals), 4) if vals else None


def totals(results: Sequence[EvalResult]) -> dict[str, Any]:
    """Per-summariser totals: macro means of defined per-session values, sums of counts."""
    ok = [r.values for r in results if r.status == "ok"]
    n = len(ok)
    return {
        "sessions": n,
        "not_recorded": sum(r.status == "not-recorded" for r in results),
        "errors": sum(r.status == "error" for r in results),
        "file_precision": _mean([v["file_precision"] for v in ok]),
        "file_recall": _mean([v["file_recall"] for v in ok]),
        "decision_recall_keyword": _mean([v["decision_recall_keyword"] for v in ok]),
        "decision_recall_llm": _mean([v["decision_recall_llm"] for v in ok]),
        "phase_coverage": _mean([v.get("phase_coverage") for v in ok]),
        "end_state_correct": _mean([float(v["end_state_correct"]) for v in ok]),
        "end_state_exact": _mean([float(v["end_state_exact"]) for v in ok]),
        "false_success": sum(bool(v["false_success"]) for v in ok),
        "faithfulness_violations": sum(len(v["faithfulness_violations"]) for v in ok),
        "language_match": _mean([float(v["language_match"]) for v in ok]),
        "secrets_leaked": sum(len(v["secrets_leaked"]) for v in ok),
        "structure_valid": _mean([float(not v["structure_problems"]) for v in ok]),
        "note_tokens_mean": _mean([v["note_tokens"] for v in ok]),
        "llm_calls": sum(v.get("llm_calls") or 0 for v in ok),
        "input_tokens": sum(v.get("input_tokens") or 0 for v in ok),
        "output_tokens": sum(v.get("output_tokens") or 0 for v in ok),
        "cost_usd": round(sum(v.get("cost_usd") or 0.0 for v in ok), 6),
        "fallbacks": sum(bool(v.get("fallback")) for v in ok),
    }


# --------------------------------------------------------------------------- the run


@dataclass
class EvalRun:
    started_at: str
    cases: list[str]
    summarisers: list[str]
    results: list[EvalResult]
    totals: dict[str, dict[str, Any]]
    elapsed_s: float
    judge: str | None = None
    #: summariser → part (``dev``, ``test``) → totals over that part's sessions; gates read ``test``.
    split_totals: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)


def evaluate(
    *,
    summarizer: str = "all",
    model: str | None = None,
    api_base: str | None = None,
    record: bool = False,
    judge_model: str | None = None,
    cases: Sequence[str] | None = None,
    split: str | None = None,
    record_judge: bool = False,
    progress: Callable[[str], None] | None = None,
    gold_dir: Path | None = None,
) -> EvalRun:
    """Run the chosen summarisers over the eval set (``cases`` filters by id) and score them.

    ``summarizer``: ``extractive``, ``llm`` (every recorded model and/or ``model``) or ``all``.
    ``record``: re-record ``model``'s cassettes (and the judge's) against the live endpoint.
    ``judge_model``: the LLM judge; default: the model the judge cassettes were recorded with.
    ``split``: only the ``dev`` or the ``test`` part (tune on dev; read test as totals).
    ``record_judge``: re-record only the judge's cassettes against ``judge_model`` at ``api_base``, the
    summaries replayed: for a case whose summary text changed (an extractive fallback) but whose
    summary requests did not.
    ``gold_dir``: another set of gold files (default ``evals/gold``), e.g. sessions of your own labelled
    before reading distill's output on them; their ``input`` may be an absolute path.
    """
    from evals.llm_adapter import LLMJudge, LLMSummariser, ModelMeta, recorded_models

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    say = progress or (lambda _msg: None)
    t0 = time.perf_counter()
    all_golds = load_gold(gold_dir) if gold_dir else load_gold()
    golds = [g for g in all_golds if (not cases or g.id in cases) and (split is None or g.split == split)]
    if cases and len(golds) != len(set(cases)):
        known = {g.id for g in all_golds}
        raise ValueError(f"unknown eval case(s): {', '.join(sorted(set(cases) - known))}")
    if record and not model:
        raise ValueError("--record needs --model (the litellm model string to record against)")

    runners: list[tuple[str, SummariseFn, Any]] = []
    if summarizer in ("extractive", "all"):
        runners.append(("extractive", extractive, None))
    if summarizer in ("llm", "all"):
        metas = {m.model: m for m in recorded_models()}
        if model:
            metas[model] = ModelMeta(model=model, api_base=api_base or (metas.get(model).api_base if model in metas else None))
        for meta in metas.values():
            llm = LLMSummariser(meta.model, meta.api_base, record=record and meta.model == model)
            runners.append((llm.name, llm, llm))

    judge = None
    judge_dir_meta = None
    if record_judge:
        if not judge_model or not api_base:
            raise ValueError("--record-judge needs --judge-model and --api-base (the live judge endpoint)")
        judge = LLMJudge(judge_model, api_base, record=True)
    elif judge_model or record:
        jm = judge_model or model
        judge = LLMJudge(jm, api_base if jm == model else None, record=record)  # type: ignore[arg-type]
    else:
        from evals.llm_adapter import CASSETTES

        for d in sorted((CASSETTES / "judge").glob("*")):
            if (judge_dir_meta := ModelMeta.load(d)) is not None:
                judge = LLMJudge(judge_dir_meta.model, judge_dir_meta.api_base, record=False)
                break

    results: list[EvalResult] = []
    try:
        prepared = {}
        for g in golds:
            say(f"reading {g.id}")
            prepared[g.id] = prepare(g)
        for name, fn, llm in runners:
            for g in golds:
                if llm is not None and not llm.has(g.id):
                    results.append(EvalResult(name, g.id, g.split, status="not-recorded"))
                    continue
                say(f"{name}: {g.id}")
                t = time.perf_counter()
                summary, usage = fn(g.id, prepared[g.id].session, prepared[g.id].chunks, prepared[g.id].facts)
                values = score(prepared[g.id], summary, usage, name, judge)
                values["elapsed_s"] = round(time.perf_counter() - t, 2)
                results.append(EvalResult(name, g.id, g.split, values=values))
            if llm is not None:
                llm.finish()
    finally:
        if judge is not None:
            judge.finish()
    names = [n for n, _f, _l in runners]
    return EvalRun(
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        cases=[g.id for g in golds],
        summarisers=names,
        results=results,
        totals={n: totals([r for r in results if r.summariser == n]) for n in names},
        elapsed_s=round(time.perf_counter() - t0, 2),
        judge=judge.model if judge is not None else None,
        split_totals={n: {part: totals([r for r in results if r.summariser == n and r.split == part])
                          for part in ("dev", "test")} for n in names},
    )
