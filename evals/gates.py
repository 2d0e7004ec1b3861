"""The quality gates. They hold on the **test** part of the eval set: sessions whose gold was
written blind and on which no rule was tuned. The dev part keeps regression floors (measured
numbers that may only go up) so a change that helps one part while hurting the other shows.

``tests/test_evals.py`` asserts the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evals.run import EvalRun

LOCAL_LLM = "llm:openai/qwen2.5-coder-1.5b-instruct"


@dataclass(frozen=True)
class Gate:
    """Floors (and the false-success ceiling) one summariser must meet on one part of the set."""

    file_recall: float | None = None
    file_precision: float | None = None
    decision_recall: float | None = None
    end_state_correct: float | None = None
    language_match: float | None = None
    false_success_max: int = 0
    faithfulness_violations_max: int = 0
    secrets_leaked_max: int = 0


#: The targets on the blind test part (issue 15).
TEST_GATES: dict[str, Gate] = {
    "extractive": Gate(file_recall=0.9, file_precision=0.9, decision_recall=0.6, end_state_correct=0.8,
                       language_match=1.0),
    LOCAL_LLM: Gate(file_recall=0.9, file_precision=0.9, decision_recall=0.75, end_state_correct=0.8,
                    language_match=1.0),
}
#: Regression floors on the dev part: measured, raised when the pipeline improves, never lowered silently.
#: Re-measured 2026-12-03 when the dev part grew from 21 to 37 sessions (16 long, multi-format real
#: sessions with gold written from their transcripts); on the first 21 the numbers are unchanged.
#: Raised the same evening by the quality round (branch ``quality``): file precision 0.9333, recall 0.867,
#: decision recall 0.751, end state 0.8919, language 1.00 (from 0.9279, 0.855, 0.6396, 0.8919, 0.973).
#: Raised 2026-12-03 (late) by files from exports without edit tools (claims, the work tree's report, bare
#: names resolved): file precision 0.9711, recall 0.9239.
#: Raised 2026-12-04 by pathless blocks placed through the session's imports (``pipeline/facts/modules.py``):
#: file recall 0.9652, precision 0.9722.
#: Raised 2026-12-05 by "a claim after a source change nothing ran on is unknown": end state 0.9189 (from
#: 0.8919), and the one known dev false success (doc-processor-langgraph-design: a six-block plan whose last
#: applied block claimed done, nothing ever run) is gone, so none is allowed.
#: Raised 2026-12-06 by files a reply says it moved (listed at the new path only): file precision 0.9823; and by
#: the end-state round on unseen sessions: end state 1.00 (from 0.9211): a request for a text (commit message), a
#: review of a plan, and a trajectory's "Say …" are answered.
DEV_FLOORS: dict[str, Gate] = {
    "extractive": Gate(file_recall=0.96, file_precision=0.97, decision_recall=0.78, end_state_correct=1.0,
                       language_match=1.0, false_success_max=0),
    LOCAL_LLM: Gate(file_recall=0.9, decision_recall=0.75, end_state_correct=1.0, language_match=1.0),
}


def failures(name: str, part: str, t: dict[str, Any], gate: Gate) -> list[str]:
    """Each way ``t`` (a part's totals) misses ``gate``, one line each."""
    out: list[str] = []
    where = f"{name} ({part})"
    for key, floor, label in (
        ("file_recall", gate.file_recall, "output-file recall"),
        ("file_precision", gate.file_precision, "output-file precision"),
        ("decision_recall_keyword", gate.decision_recall, "decision recall"),
        ("end_state_correct", gate.end_state_correct, "end state right"),
        ("language_match", gate.language_match, "language right"),
    ):
        # None: no session of this part has gold for the metric, so there is nothing to hold.
        if floor is not None and t.get(key) is not None and t[key] < floor:
            out.append(f"{where}: {label} {t[key]:.2f} < {floor}")
    for key, ceiling, label in (("false_success", gate.false_success_max, "false successes"),
                                ("faithfulness_violations", gate.faithfulness_violations_max, "faithfulness violations"),
                                ("secrets_leaked", gate.secrets_leaked_max, "secrets leaked")):
        if t.get(key, 0) > ceiling:
            out.append(f"{where}: {t[key]} {label} (max {ceiling})")
    return out


def check_gates(run: EvalRun) -> list[str]:
    """Every gate or floor a summariser misses in ``run``, one line each (empty: all hold)."""
    failed: list[str] = []
    for name, parts in run.split_totals.items():
        for part, table in (("test", TEST_GATES), ("dev", DEV_FLOORS)):
            t = parts.get(part) or {}
            if t.get("sessions") and name in table:
                failed += failures(name, part, t, table[name])
    return failed
