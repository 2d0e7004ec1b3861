"""Quality gates (issue 5): replay the eval set and hold the floors.

The extractive summariser runs for real (no model). LLM summarisers replay their VCR cassettes
under evals/cassettes/ (record mode none, body matching, a miss fails the run). Floors from the
issue are fixed; decision-recall floors are *measured* numbers: raise them when the pipeline
improves, never lower them silently (and update evals/README.md and evals/gates.py with them).

Gates the extractive summariser does not reach are ``xfail(strict=True)`` with the failing
sessions named, so the gap stays visible and an improvement turns into an XPASS failure that
asks for the marker to go. Since 2026-12-02 it meets every gate, so there are none.
"""

from __future__ import annotations

import pytest

from evals import gates
from evals import metrics as M
from evals.dataset import Gold, GoldDecision, load_gold
from evals.run import EvalRun, evaluate

# Measured 2026-12-02 on 21 sessions (16 real, 5 synthetic Hermes), keyword judge (0.61 before this change).
EXTRACTIVE_DECISION_RECALL_FLOOR = 0.63
# Measured 2026-12-02 (0.85 before this change); recall is 1.00 there, so this keeps it from being bought by guessing.
EXTRACTIVE_FILE_PRECISION_FLOOR = 0.98
# Measured for the local Qwen2.5-Coder-1.5B on the recorded subset; None until recorded.
LOCAL_LLM_DECISION_RECALL_FLOOR: float | None = None
LOCAL_LLM = "llm:openai/qwen2.5-coder-1.5b-instruct"


@pytest.fixture(scope="module")
def run() -> EvalRun:
    return evaluate(summarizer="all")


def _ok(run: EvalRun, name: str) -> list:
    return [r for r in run.results if r.summariser == name and r.status == "ok"]


def _names(run: EvalRun) -> list[str]:
    return [n for n in run.summarisers if run.totals[n]["sessions"]]


def test_eval_set_shape() -> None:
    golds = load_gold()
    real = [g for g in golds if not g.origin.startswith(("synthetic", "real hermes"))]
    assert len(real) >= 15
    assert sum(g.language.startswith("zh") for g in real) >= 5
    assert sum(g.long for g in real) >= 3
    assert sum(g.end_state != "resolved" for g in real) >= 2
    assert len({g.path.suffix for g in real}) >= 3  # mixed formats
    assert all(g.path.exists() for g in golds)


def test_no_errors_and_every_session_scored(run: EvalRun) -> None:
    assert not [r for r in run.results if r.status == "error"]
    assert len(_ok(run, "extractive")) == len(run.cases)


def test_secrets_leaked_zero(run: EvalRun) -> None:
    for name in _names(run):
        leaks = {r.case: r.values["secrets_leaked"] for r in _ok(run, name) if r.values["secrets_leaked"]}
        assert not leaks, f"{name}: {leaks}"


def test_faithfulness_zero_after_grounding(run: EvalRun) -> None:
    for name in _names(run):
        bad = {r.case: r.values["faithfulness_violations"] for r in _ok(run, name) if r.values["faithfulness_violations"]}
        assert not bad, f"{name}: {bad}"


def test_structure_valid(run: EvalRun) -> None:
    for name in _names(run):
        bad = {r.case: r.values["structure_problems"] for r in _ok(run, name) if r.values["structure_problems"]}
        assert not bad, f"{name}: {bad}"


def test_decision_recall_floors(run: EvalRun) -> None:
    assert run.totals["extractive"]["decision_recall_keyword"] >= EXTRACTIVE_DECISION_RECALL_FLOOR
    if LOCAL_LLM_DECISION_RECALL_FLOOR is not None and run.totals.get(LOCAL_LLM, {}).get("sessions"):
        assert run.totals[LOCAL_LLM]["decision_recall_keyword"] >= LOCAL_LLM_DECISION_RECALL_FLOOR


def test_file_precision_floor(run: EvalRun) -> None:
    t = run.totals["extractive"]
    assert t["file_precision"] >= EXTRACTIVE_FILE_PRECISION_FLOOR, [
        (r.case, r.values["files_extra"]) for r in _ok(run, "extractive") if r.values["files_extra"]]


def test_floors_match_gates_module() -> None:
    assert gates.FILE_RECALL_FLOOR == 0.9
    assert gates.END_STATE_CORRECT_FLOOR == gates.LANGUAGE_MATCH_FLOOR == 1.0
    assert gates.DECISION_RECALL_FLOOR.get("extractive") == EXTRACTIVE_DECISION_RECALL_FLOOR
    assert gates.FILE_PRECISION_FLOOR.get("extractive") == EXTRACTIVE_FILE_PRECISION_FLOOR


def test_extractive_meets_every_gate(run: EvalRun) -> None:
    assert not [line for line in gates.check_gates(run) if line.startswith("extractive:")]


def test_output_file_recall(run: EvalRun) -> None:
    """1.00 since 2026-12-02 (0.54 before: SpecStory apply_patch bodies, ```lang:path fences and bare diff
    fences named in prose were not read)."""
    t = run.totals["extractive"]
    assert t["file_recall"] >= gates.FILE_RECALL_FLOOR, [
        (r.case, r.values["files_missed"]) for r in _ok(run, "extractive") if r.values["files_missed"]]


def test_end_state_correct(run: EvalRun) -> None:
    """1.00 since 2026-12-02 (0.57 before: "继续"/"Yes" were read as closers, and answered questions,
    Portuguese/Chinese completion claims and cut-off exports were not recognised)."""
    bad = [(r.case, r.values["end_state"], r.values["end_state_gold"]) for r in _ok(run, "extractive")
           if not r.values["end_state_correct"]]
    assert not bad


def test_language_match(run: EvalRun) -> None:
    """1.00 since 2026-12-02 (0.95 before: health-backend's user turns are pasted Maven logs)."""
    bad = [(r.case, r.values["language"]) for r in _ok(run, "extractive") if not r.values["language_match"]]
    assert not bad


def test_no_false_success(run: EvalRun) -> None:
    """The LLM summariser takes its end state from extractive.infer_end_state, so it inherits these:
    a claimed success on an unresolved session must never happen (2 before the end-state rework, 0 since)."""
    assert run.totals["extractive"]["false_success"] == 0


# --------------------------------------------------------------------------- metric definitions


def _gold(**kw: object) -> Gold:
    base = {"id": "x", "input": "x", "origin": "t", "why": "t", "language": "en", "end_state": "resolved", "goal": "g"}
    return Gold.model_validate({**base, **kw})


def test_file_scores_suffix_and_optional() -> None:
    g = _gold(output_files=["common/pom.xml", "a.py"], optional_output_files=["pom.xml"])
    s = M.output_file_scores(["/home/u/proj/common/pom.xml", "pom.xml", "other.py"], g)
    assert (s.true_positives, s.predicted, s.recall) == (1, 2, 0.5)  # pom.xml is neutral
    assert s.precision == 0.5 and s.missed == ("a.py",) and s.extra == ("other.py",)
    assert M.same_file("c:\\Users\\a\\proj\\pom.xml", "/c:/Users/a/proj/pom.xml")
    assert not M.same_file("src/pom.xml", "common/pom.xml")


def test_end_state_definition() -> None:
    assert M.end_state_correct("unknown", _gold(end_state="unresolved"))
    assert M.end_state_correct("failed", _gold(end_state="unresolved"))
    assert not M.end_state_correct("unknown", _gold(end_state="resolved"))
    assert not M.end_state_correct("resolved", _gold(end_state="failed"))
    assert M.false_success("resolved", _gold(end_state="unresolved"))


def test_keyword_judge_groups() -> None:
    d = GoldDecision(text="t", keywords=("SQLite", "PostgreSQL|而不是"))
    assert M.keyword_judge(d, "决定改用 sqlite 而不是 X")
    assert not M.keyword_judge(d, "用 SQLite")


def test_claims_and_grounding() -> None:
    claims = M.claims("Ran `pytest -q` on src/app.py, 48 passed in 3 steps; see https://x.io/a/b")
    assert ("code", "pytest -q") in claims and ("path", "src/app.py") in claims and ("number", "48") in claims
    assert not any(v == "3" for _k, v in claims)


def test_secret_patterns_independent_of_redactor() -> None:
    g = _gold(secrets=["hunter2-Prod!"])
    leaks = M.secrets_leaked("key sk-proj-Zq8vN3xT5bL2mK9pR4wY7cH1 and hunter2-Prod!", g)
    assert len(leaks) == 2 and all("…" in x for x in leaks)
