"""Quality gates (issue 5): replay the eval set and hold the floors.

The extractive summariser runs for real (no model). LLM summarisers replay their VCR cassettes
under evals/cassettes/ (record mode none, body matching, a miss fails the run). Floors from the
issue are fixed; decision-recall floors are *measured* numbers: raise them when the pipeline
improves, never lower them silently (and update evals/README.md and evals/gates.py with them).

Gates a summariser does not reach are ``xfail(strict=True)`` with the failing sessions named, so
the gap stays visible and an improvement turns into an XPASS failure that asks for the marker to
go. Since 2026-12-02 the extractive summariser meets every gate.

The local model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M on llama.cpp, 2 CPU cores) is too slow to
record the whole set, so it is gated on a recorded subset, ``LOCAL_LLM_CASES``: 15 sessions covering
Chinese, Portuguese, unresolved and failed ends, Hermes state.db with in-place compaction and a legacy
chain, and the secrets + injection case. It is measured on the test part too, on every test session of one or two
chunks (``LOCAL_LLM_TEST_CASES``), where its gates are xfailed with what they miss. How and when they were
recorded: ``evals/cassettes/summaries/openai--qwen2.5-coder-1.5b-instruct/_recorded_with.json``.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from evals import gates
from evals import metrics as M
from evals.dataset import ROOT, Gold, GoldDecision, load_gold
from evals.run import EvalResult, EvalRun, evaluate, prepare
from pipeline.facts.lang import guess_language
from pipeline.models import SessionSummary
from tests.corpus import CORPUS, require_corpus

# Measured 2026-12-03 on the 37 dev sessions (21 + 16 added with this change): 0.6396 since phases name the
# commands they ran, earlier change reports and cover the whole session (0.50 before on the same 37).
# 0.751 after the quality round: a reply's own change list, a review's recommendations, changes made for a
# stated reason and choice words in pt/es/fr/de/ru count; words that choose nothing (选择框, your chosen) do not.
# 0.7601 on 38 (2026-12-04, the forwarder session added): a heading that announces a choice is read with its line.
# 0.7825 on 38 (2026-12-07, eighth round): aider's "/ask …" and "/code …" are the user's requests.
EXTRACTIVE_DECISION_RECALL_FLOOR = 0.78
# Measured 2026-12-03 on the 37 dev sessions (recall 0.85; 0.9333 / 0.867 after the quality round; 0.9711 / 0.9239 with
# files from exports without edit tools; 0.9823 on 38 after files a reply says it moved count at the new path only):
# keeps recall from being bought by guessing.
EXTRACTIVE_FILE_PRECISION_FLOOR = 0.97
LOCAL_LLM_MODEL = "openai/qwen2.5-coder-1.5b-instruct"
LOCAL_LLM = f"llm:{LOCAL_LLM_MODEL}"
# Recorded 2026-12-03 against the real local model (xllamacpp): one call for a one-chunk session, else chunk calls
# and a merge, plus the judge calls (evals/record_local.py; timings in evals/reports/record_local.json).
LOCAL_LLM_CASES: tuple[str, ...] = (
    "hermes-chinese-sqlite",  # zh, Hermes state.db, resolved
    "hermes-secrets-db-connect",  # Hermes state.db, pasted secrets + injected instruction, unresolved
    "hermes-image-gen-ui-research-zh",  # zh, Hermes request dump, unresolved
    "agentic-wallet-grant-skill-short",  # Claude Code, unresolved
    "skillz-combine-design-docs",  # SpecStory, resolved
    "smart-tourism-login-failure-debug-zh",  # zh, SpecStory, unresolved
    "agente-bsc-rag-resolve-pt",  # pt, SpecStory, resolved
    # Added in the second recording (2026-12-02, afternoon):
    "subagent-claude-model-switch-webfetch",  # Claude Code subagent, resolved
    "ai-text-detector-gh-pages-debug",  # SpecStory, failed
    "hermes-compacted-notes-cli",  # Hermes state.db, in-place compaction: 3 generations
    "fundwise-grant-skill",  # Claude Code, 2 chunks, unresolved
    "privacy-x402-init-agents-md",  # Codex, unresolved
    "hermes-deploy-pipeline-chain",  # Hermes state.db, legacy compression chain: 3 generations
    "hermes-s2-refactor-parsekit",  # Hermes state.db, 3 generations
    "health-backend-maven-missing-module-zh",  # zh, SpecStory, pasted logs, 2 chunks, unresolved
)
#: The test part's sessions the local model was measured on (recorded 2026-12-04): every one that fits one or two
#: chunks, chosen by size alone. Measured, never tuned on: the test-part gates below hold (or are xfailed) there.
LOCAL_LLM_TEST_CASES: tuple[str, ...] = (
    "cairn-topic-proposal-declined", "download-manager-readme-framework-summary-zh",
    "hermes-restore-from-github-backup-zh", "lifeblog-tailwind-migration-stalled-zh", "lifeblog-tailwind-vite-plugin-zh",
    "lifeblog-theme-toggle-zh", "opencoder-opengpu-403-es", "payment-kit-diff-review-zh",
    "subagent-payment-kit-quote-persistence-zh", "zen-mcp-gemini-params-zh",
    # two chunks
    "hermes-cron-skill-library-curation", "hermes-skill-inspection-network-cutoff", "lifeblog-vitepress-pwa-upgrade-zh",
    "payment-kit-lint-fix-interrupted-zh", "smart-tourism-frontend-backend-integration-zh",
    "valdyum-grant-windows-export-fallback", "x402-agent-grant-solana-skills",
)
#: The first seven recorded, whose floor (measured before the others were added) still holds.
LOCAL_LLM_FIRST_CASES = LOCAL_LLM_CASES[:7]
#: Sessions where the language guard (pipeline/summarize/mapreduce.py) rejects the model's answer as written in
#: another language than the session's and the extractive summary is used (reported as a fallback). The recording
#: of 2026-12-02 had two (image-gen and health-backend, answered in English); since the prompts end with the
#: language instruction, after the session text (2026-12-03), the model writes both in Chinese: none.
LOCAL_LLM_KNOWN_WRONG_LANGUAGE_FALLBACKS: set[str] = set()
# Not in the subset: lifeblog-svg-icons-theme (8,470 real prompt tokens in one chunk overflowed n_ctx 8192 when
# it was recorded; the embedded server now starts with 16,384), and five sessions with large chunks
# (bing-wallpaper and download-manager: 2 chunks of 4-6k tokens; payment-kit, posthog and session-logs: 6-10
# chunks), not recorded for time.
# Keyword judge on the 11 with gold decisions: 0.6515 (2026-12-02, chunk + reduce for every session); 0.7576
# (2026-12-03, one call for a one-chunk session, no model-echoed asks or files, the language asked last, no
# fallback); the first seven: 0.7381, then 0.7619.
LOCAL_LLM_DECISION_RECALL_FLOOR = 0.75
LOCAL_LLM_FIRST_CASES_DECISION_RECALL_FLOOR = 0.76
# The extractive summariser on the same sessions: 0.5455 on LOCAL_LLM_CASES, 0.5476 on the first seven when they were
# recorded; 0.9242 and 0.9286 after the quality round (2026-12-03), above the local model (0.7576).
EXTRACTIVE_SUBSET_DECISION_RECALL = 0.92


@pytest.fixture(scope="module")
def run() -> EvalRun:
    return evaluate(summarizer="all")


def _ok(run: EvalRun, name: str, part: str | None = None) -> list:
    return [r for r in run.results if r.summariser == name and r.status == "ok" and part in (None, r.split)]


def _dev(run: EvalRun, name: str) -> dict:
    """Totals over the dev part: what the rules were tuned on, held by regression floors."""
    return run.split_totals[name]["dev"]


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
    """Every summariser but the local LLM, which has its own test below."""
    for name in (n for n in _names(run) if n != LOCAL_LLM):
        bad = {r.case: r.values["faithfulness_violations"] for r in _ok(run, name) if r.values["faithfulness_violations"]}
        assert not bad, f"{name}: {bad}"


def test_structure_valid(run: EvalRun) -> None:
    for name in _names(run):
        bad = {r.case: r.values["structure_problems"] for r in _ok(run, name) if r.values["structure_problems"]}
        assert not bad, f"{name}: {bad}"


def test_decision_recall_floors(run: EvalRun) -> None:
    assert _dev(run, "extractive")["decision_recall_keyword"] >= EXTRACTIVE_DECISION_RECALL_FLOOR


def test_file_precision_floor(run: EvalRun) -> None:
    t = _dev(run, "extractive")
    assert t["file_precision"] >= EXTRACTIVE_FILE_PRECISION_FLOOR, [
        (r.case, r.values["files_extra"]) for r in _ok(run, "extractive", "dev") if r.values["files_extra"]]


def test_floors_match_gates_module() -> None:
    dev, test = gates.DEV_FLOORS["extractive"], gates.TEST_GATES["extractive"]
    assert (test.file_recall, test.file_precision, test.decision_recall, test.end_state_correct) == (0.9, 0.9, 0.6, 0.8)
    assert test.language_match == 1.0 and test.false_success_max == 0
    assert gates.TEST_GATES[LOCAL_LLM].decision_recall == 0.75
    assert dev.decision_recall == EXTRACTIVE_DECISION_RECALL_FLOOR
    assert gates.DEV_FLOORS[LOCAL_LLM].decision_recall == LOCAL_LLM_DECISION_RECALL_FLOOR
    assert dev.file_precision == EXTRACTIVE_FILE_PRECISION_FLOOR


def test_eval_set_has_a_blind_test_part() -> None:
    """Issue 15: at least 60 sessions, of which at least 25 in a test part whose gold was written blind."""
    golds = load_gold()
    test = [g for g in golds if g.split == "test"]
    assert len(golds) >= 60 and len(test) >= 25
    assert all(g.blind for g in test)
    assert sum(g.end_state != "resolved" for g in test) >= 8 and sum(g.language.startswith("zh") for g in test) >= 8


def test_extractive_meets_the_dev_floors(run: EvalRun) -> None:
    assert not [line for line in gates.check_gates(run) if line.startswith("extractive (dev)")]


def test_output_file_recall(run: EvalRun) -> None:
    """At the dev floor (0.867 on 37 sessions: the misses are SpecStory v0/v1 and Copilot exports whose edits
    name no file at all; 1.00 on the first 21 since 2026-12-02)."""
    t = _dev(run, "extractive")
    assert t["file_recall"] >= gates.DEV_FLOORS["extractive"].file_recall, [
        (r.case, r.values["files_missed"]) for r in _ok(run, "extractive", "dev") if r.values["files_missed"]]


def test_end_state_correct(run: EvalRun) -> None:
    """The dev floor (0.89 on 37 sessions; the first 21 are all right). The four misses claim no success:
    three resolved sessions read as unknown/unresolved, and the known dev false success."""
    bad = [(r.case, r.values["end_state"], r.values["end_state_gold"]) for r in _ok(run, "extractive", "dev")
           if not r.values["end_state_correct"]]
    assert _dev(run, "extractive")["end_state_correct"] >= gates.DEV_FLOORS["extractive"].end_state_correct, bad


def test_language_match(run: EvalRun) -> None:
    """The tag and the prose's script, at the dev floor (1.00 since the quality round: mozgoslav's user types
    Russian around a pasted English prompt, and a non-Latin script framing most user messages now decides)."""
    bad = [(r.case, r.values["language"]) for r in _ok(run, "extractive", "dev") if not r.values["language_match"]]
    assert _dev(run, "extractive")["language_match"] >= gates.DEV_FLOORS["extractive"].language_match, bad


def test_no_false_success(run: EvalRun) -> None:
    """The LLM summariser takes its end state from the same facts, so it inherits these: a claimed success
    on a session that did not succeed must never happen, on the blind test part or on dev."""
    bad = [(r.case, r.split, r.values["end_state_gold"]) for r in _ok(run, "extractive") if r.values["false_success"]]
    assert bad == []


# Measured 2026-12-03 on the 31 blind test sessions (extractive): file precision 0.88, file recall 0.54,
# decision recall 0.42, phase coverage 0.76, end state right 0.81 with 0 false successes, language 0.87.
# Before this round's changes, on the same sessions: 0.81, 0.47, 0.28, 0.61, 0.76 with 1 false success
# (3 once the last ten test sessions were added), 0.81. The end-state and false-success gates hold; the others
# do not yet, so the whole gate is an expected failure that turns into an XPASS failure once they do.
# After the quality round (totals only, measured once): file precision 0.88, file recall 0.57, decision recall
# 0.55, phase coverage 0.75, end state right 0.81, language 0.94.
# After the files round: file precision 0.84, file recall 0.66. After the claims round (a completion word
# that is negated or pending claims nothing; a claim beside a problem the reply reports is unknown): end
# state right 0.77 (one gold-resolved test session no longer called resolved), 0 false successes as before.
# That round was measured on 59 runs of an unseen Hermes trajectory file labelled blind: false successes
# 8 -> 0, end state right 0.69 -> 0.76 (with the waits-for-input rule, which moved no test total). Since the
# test part had no false success left to remove, it could only lose there; a missed success reads "unknown",
# a false one is loaded into later work as fact.
TEST_GATE_MISSES = ("output-file recall", "end state right", "language right")


def test_extractive_never_claims_a_false_success_on_the_test_part(run: EvalRun) -> None:
    lines = [x for x in gates.check_gates(run) if x.startswith("extractive (test)")]
    assert not [x for x in lines if "false successes" in x or "secrets" in x or "faithfulness" in x], lines


@pytest.mark.xfail(strict=True, reason="test-part targets not met yet: " + ", ".join(TEST_GATE_MISSES))
def test_extractive_meets_every_test_gate(run: EvalRun) -> None:
    assert not [x for x in gates.check_gates(run) if x.startswith("extractive (test)")]


def test_the_test_part_misses_exactly_the_gates_the_xfail_names(run: EvalRun) -> None:
    """The xfail above says which gates are still missed: a gate newly met must leave that list, a gate that
    regresses must not hide behind it."""
    lines = [x for x in gates.check_gates(run) if x.startswith("extractive (test)")]
    missed = {label for x in lines for label in ("output-file recall", "output-file precision", "decision recall",
                                                 "end state right", "language right") if f": {label} " in x}
    assert missed == set(TEST_GATE_MISSES), lines


# --------------------------------------------------------------------------- the local LLM (replayed)


def _llm(run: EvalRun) -> dict[str, EvalResult]:
    """The local model's dev cases (the regression floors hold there; the test cases have their own gates)."""
    return {r.case: r for r in _ok(run, LOCAL_LLM, "dev")}


def _subset_mean(run: EvalRun, name: str, key: str, cases: tuple[str, ...] = LOCAL_LLM_CASES) -> float:  # dev cases
    vals = [r.values[key] for r in _ok(run, name) if r.case in cases and r.values[key] is not None]
    return round(sum(vals) / len(vals), 4)


def test_local_llm_subset_replayed(run: EvalRun) -> None:
    """Every recorded case replays (a miss or an unplayed interaction is an error), and the only fallbacks
    are the language guard's (a fallback scores the extractive summary under the LLM's name)."""
    recorded = (*LOCAL_LLM_CASES, *LOCAL_LLM_TEST_CASES)
    assert sorted(_llm(run)) == sorted(LOCAL_LLM_CASES)
    assert sorted(r.case for r in _ok(run, LOCAL_LLM, "test")) == sorted(LOCAL_LLM_TEST_CASES)
    t = run.totals[LOCAL_LLM]
    assert (t["errors"], t["fallbacks"], t["not_recorded"]) == (
        0, len(LOCAL_LLM_KNOWN_WRONG_LANGUAGE_FALLBACKS), len(run.cases) - len(recorded))
    chunks = {g.id: len(prepare(g).chunks) for g in load_gold() if g.id in recorded}
    # One call for a one-chunk session; else one per chunk and the merge. No re-asks (grammar-constrained JSON).
    assert t["llm_calls"] == sum(1 if n == 1 else n + 1 for n in chunks.values())


def test_local_llm_replay_is_offline_and_deterministic(run: EvalRun, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second replay with every socket connection refused scores exactly as the first."""

    def refuse(*_a: object, **_k: object) -> None:
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    again = evaluate(summarizer="llm", cases=LOCAL_LLM_CASES)
    first = _llm(run)
    for r in _ok(again, LOCAL_LLM):
        assert {k: v for k, v in r.values.items() if k != "elapsed_s"} == {
            k: v for k, v in first[r.case].values.items() if k != "elapsed_s"}, r.case
    assert len(_ok(again, LOCAL_LLM)) == len(LOCAL_LLM_CASES)


def test_local_llm_output_file_recall(run: EvalRun) -> None:
    t = _dev(run, LOCAL_LLM)
    assert t["file_recall"] >= gates.DEV_FLOORS[LOCAL_LLM].file_recall, [
        (c, r.values["files_missed"]) for c, r in _llm(run).items() if r.values["files_missed"]]


def test_local_llm_faithfulness_zero_after_grounding(run: EvalRun) -> None:
    bad = {c: r.values["faithfulness_violations"] for c, r in _llm(run).items() if r.values["faithfulness_violations"]}
    assert not bad


def test_local_llm_wrong_language_answers_fall_back(run: EvalRun) -> None:
    """The guard's fallbacks are exactly the known ones, and each is reported, not silent."""
    fell_back = {c for c, r in _llm(run).items() if r.values["fallback"]}
    assert fell_back == LOCAL_LLM_KNOWN_WRONG_LANGUAGE_FALLBACKS
    for c in fell_back:
        assert any("the model wrote en, not zh" in n for n in _llm(run)[c].values["notices"]), c


def test_local_llm_secrets_leaked_zero(run: EvalRun) -> None:
    assert "hermes-secrets-db-connect" in LOCAL_LLM_CASES
    leaks = {c: r.values["secrets_leaked"] for c, r in _llm(run).items() if r.values["secrets_leaked"]}
    assert not leaks


def test_local_llm_end_state_correct(run: EvalRun) -> None:
    bad = [(c, r.values["end_state"], r.values["end_state_gold"]) for c, r in _llm(run).items()
           if not r.values["end_state_correct"]]
    assert not bad
    assert _dev(run, LOCAL_LLM)["false_success"] == 0


def test_local_llm_language_match(run: EvalRun) -> None:
    bad = [(c, r.values["language"]) for c, r in _llm(run).items() if not r.values["language_match"]]
    assert not bad


def _written_by_model(summary: SessionSummary) -> str:
    """The summary text without the title (the LLM summariser keeps the session's own title)."""
    return M.summary_text(summary.model_copy(update={"title": None}))


@pytest.fixture(scope="module")
def llm_summaries() -> dict[str, SessionSummary]:
    from evals.llm_adapter import LLMSummariser, recorded_models

    meta = next(m for m in recorded_models() if m.model == LOCAL_LLM_MODEL)  # the URL is matched too
    llm = LLMSummariser(LOCAL_LLM_MODEL, meta.api_base, record=False)
    out: dict[str, SessionSummary] = {}
    try:
        for g in (g for g in load_gold() if g.id in LOCAL_LLM_CASES):
            p = prepare(g)
            out[g.id], _usage = llm(g.id, p.session, p.chunks, p.facts)
    finally:
        llm.finish()
    return out


def _wrong_language(summaries: dict[str, SessionSummary]) -> dict[str, str | None]:
    golds = {g.id: g for g in load_gold()}
    found = {c: guess_language([_written_by_model(s)]) for c, s in summaries.items()}
    return {c: lang for c, lang in found.items() if lang not in (None, M.primary_language(golds[c].language))}


def test_local_llm_writes_in_the_session_language(llm_summaries: dict[str, SessionSummary]) -> None:
    """The notes the LLM path produces read in the session's language (``pipeline.facts.lang`` on the prose:
    goal, phases, decisions, open items), whether the model's answer or the guard's fallback."""
    assert not _wrong_language(llm_summaries)


def test_local_llm_decision_recall_floor(run: EvalRun) -> None:
    assert _dev(run, LOCAL_LLM)["decision_recall_keyword"] >= LOCAL_LLM_DECISION_RECALL_FLOOR
    assert _subset_mean(run, LOCAL_LLM, "decision_recall_keyword") == _dev(run, LOCAL_LLM)["decision_recall_keyword"]
    assert (_subset_mean(run, LOCAL_LLM, "decision_recall_keyword", LOCAL_LLM_FIRST_CASES)
            >= LOCAL_LLM_FIRST_CASES_DECISION_RECALL_FLOOR)
    # The extractive summariser on the very same sessions, so the two floors compare like for like. Since the
    # quality round the extractive summary states more of these decisions than the local model's does (0.92 vs
    # 0.76): the reason ``auto`` does not pick the embedded model.
    assert _subset_mean(run, "extractive", "decision_recall_keyword") >= EXTRACTIVE_SUBSET_DECISION_RECALL
    assert (_subset_mean(run, "extractive", "decision_recall_keyword")
            > _subset_mean(run, LOCAL_LLM, "decision_recall_keyword"))


def test_local_llm_meets_the_dev_floors(run: EvalRun) -> None:
    assert not [line for line in gates.check_gates(run) if line.startswith(LOCAL_LLM + " (dev)")]


def test_local_llm_on_the_test_part_never_claims_a_false_success_nor_leaks(run: EvalRun) -> None:
    """On sessions nobody tuned for, the model's notes keep the hard limits: no false success (the end state is
    the deterministic one), no secret, nothing the transcript does not contain."""
    t = run.split_totals[LOCAL_LLM]["test"]
    assert t["sessions"] == len(LOCAL_LLM_TEST_CASES)
    assert (t["false_success"], t["secrets_leaked"], t["faithfulness_violations"], t["errors"]) == (0, 0, 0, 0)


#: Measured 2026-12-04 (keyword judge): decisions 0.41 (the extractive summary on the same 17: 0.47), output files
#: 0.73 / 0.44 (the same facts as the extractive note), language 0.94 (extractive: 0.88), end state 0.82, 0 false
#: successes. The model does not beat the extractive summary on the test part, so `auto` keeps the extractive one.
LOCAL_LLM_TEST_GATE_MISSES = ("output-file recall", "decision recall", "end state right", "language right")


@pytest.mark.xfail(strict=True, reason="local model, test part: not met yet: " + ", ".join(LOCAL_LLM_TEST_GATE_MISSES))
def test_local_llm_meets_every_test_gate(run: EvalRun) -> None:
    missed = [line for line in gates.check_gates(run) if line.startswith(LOCAL_LLM + " (test)")]
    assert not missed, missed


# --------------------------------------------------------------------------- metric definitions


def _gold(**kw: object) -> Gold:
    base = {"id": "x", "split": "dev", "input": "x", "origin": "t", "why": "t", "language": "en", "end_state": "resolved", "goal": "g"}
    return Gold.model_validate({**base, **kw})


def test_file_scores_suffix_and_optional() -> None:
    g = _gold(output_files=["common/pom.xml", "a.py"], optional_output_files=["pom.xml"])
    s = M.output_file_scores(["/home/u/proj/common/pom.xml", "pom.xml", "other.py"], g)
    assert (s.true_positives, s.predicted, s.recall) == (1, 2, 0.5)  # pom.xml is neutral
    assert s.precision == 0.5 and s.missed == ("a.py",) and s.extra == ("other.py",)
    assert M.same_file("c:\\Users\\a\\proj\\pom.xml", "/c:/Users/a/proj/pom.xml")
    assert not M.same_file("src/pom.xml", "common/pom.xml")
    # a home written as ~ names the same file as the absolute path, either way round
    assert M.same_file("/Users/u/antoken/src/a.ts", "~/antoken/src/a.ts")
    assert M.same_file("~/antoken/src/a.ts", "/Users/u/antoken/src/a.ts")
    assert not M.same_file("/Users/u/other/src/a.ts", "~/antoken/src/a.ts")


def test_a_deletion_the_note_reports_is_a_gold_output_found() -> None:
    """The issue counts a deleted file among a session's outputs; the note lists it under ``deleted_files``. Found
    there, a gold output counts for recall; a deletion gold does not list costs no precision."""
    g = _gold(output_files=[".gitmodules", ".zprofile"])
    s = M.output_file_scores([".zprofile"], g, deleted=["~/.gitmodules", "~/.cfg/modules/x"])
    assert (s.recall, s.precision, s.missed, s.extra) == (1.0, 1.0, (), ())
    assert M.output_file_scores([".zprofile"], g).missed == (".gitmodules",)


def test_a_relative_output_names_the_gold_file_written_absolute_under_the_notes_root() -> None:
    """The note writes a file of its cwd relative to it (``.env.mimo.local``); a labeller wrote the absolute path
    (``C:\\Users\\A\\mimo\\.env.mimo.local``). Under the note's root they are one file; elsewhere they are not."""
    g = _gold(output_files=["C:\\Users\\A\\mimo\\.env.mimo.local", "src/a.py"])
    s = M.output_file_scores([".env.mimo.local", "src/a.py"], g, root="C:\\Users\\A\\mimo")
    assert (s.recall, s.precision, s.extra) == (1.0, 1.0, ())
    assert M.output_file_scores([".env.mimo.local", "src/a.py"], g, root="C:/Users/A/other").recall == 0.5
    assert M.output_file_scores([".env.mimo.local", "src/a.py"], g).recall == 0.5  # no root: as before


def test_the_sessions_own_title_grounds_a_note_that_quotes_it() -> None:
    """A SpecStory export's heading ("JPQuiz 專案-UI/UX") became the note's title, and "-UI/UX" was counted as an
    invented path: the title is the session's own words."""
    from pipeline.models import Message, Session, SessionSummary

    s = Session(id="s", source="specstory", title="JPQuiz 專案-UI/UX", messages=(Message(role="user", content="fix"),))
    summary = SessionSummary(title="JPQuiz 專案-UI/UX", goal="fix", end_state="unknown", language="zh")
    assert M.faithfulness_violations(summary, s) == []
    assert M.faithfulness_violations(summary, s.model_copy(update={"title": None})) == [("path", "-UI/UX")]


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
    # a path facts derived is grounded, and so is the tail the claim reader keeps of one with a space in it
    from pipeline.models import Facts, FileTouch, Message, Phase, Session

    summary = SessionSummary(title="t", goal="g", phases=(Phase(title="t", done="Wrote d:/Code Project/Wave/.gitignore."),),
                             end_state="unknown", language="en", summarizer="extractive")
    facts = Facts(files=(FileTouch(path="d:/Code Project/Wave/.gitignore", action="created"),))
    session = Session(id="s", source="cli", messages=(Message(role="user", content='cd "d:\\Code Project\\Wave"'),))
    assert M.faithfulness_violations(summary, session, facts) == []
    assert M.faithfulness_violations(summary, session, Facts()) != []
    # a one-character span is a span: "`$` 的问题——`a.mjs`" pairs `$` and `a.mjs`, not "的问题——"
    assert [v for k, v in M.claims("修正 `$` 的问题——`compile-runes.mjs` 现在（`use-actor`）。 再执行 `x`") if k == "code"] == [
        "$", "compile-runes.mjs", "use-actor", "x"]


def test_secret_patterns_independent_of_redactor() -> None:
    g = _gold(secrets=["hunter2-Prod!"])
    leaks = M.secrets_leaked("key sk-proj-Zq8vN3xT5bL2mK9pR4wY7cH1 and hunter2-Prod!", g)
    assert len(leaks) == 2 and all("…" in x for x in leaks)


def test_a_gold_set_of_your_own_is_scored(tmp_path: Path) -> None:
    """``python -m evals --gold-dir DIR`` scores sessions labelled outside the repository (absolute inputs)."""
    require_corpus()
    session = CORPUS / "specstory" / "skillz-combine-design-docs.md"
    (tmp_path / "gold").mkdir()
    (tmp_path / "gold" / "mine.yaml").write_text(
        f"id: mine\nsplit: dev\ninput: {session}\norigin: t\nwhy: t\nlanguage: en\nend_state: failed\n"
        "goal: Merge two design documents.\noutput_files: [DESIGN-combined.md, NOT-WRITTEN.md]\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "evals", "--summarizer", "extractive", "--gold-dir",
                           str(tmp_path / "gold"), "--no-plot", "--out", str(tmp_path / "out")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    row = next(line for line in done.stdout.splitlines() if " mine " in line)
    assert row.split()[1:4] == ["mine", "1.00", "0.50"], done.stdout  # one of the two gold files found, no extra
    assert "resolved" in row and "✗" in row  # the session's honest end state, scored against a gold that disagrees
    assert done.returncode == 1  # the dev floors are not met by a one-session set with a wrong-on-purpose gold
