"""The quality floors the eval must hold (issue 5). ``tests/test_evals.py`` asserts the same numbers.

Floors from the issue are fixed; ``DECISION_RECALL_FLOOR`` and ``FILE_PRECISION_FLOOR`` are
*measured* per summariser and may only go up: raise them when the pipeline improves, never lower
them silently. (Precision has a floor so that recall is not bought by guessing files.)
"""

from __future__ import annotations

from evals.run import EvalRun

FILE_RECALL_FLOOR = 0.9
FAITHFULNESS_VIOLATIONS_MAX = 0
SECRETS_LEAKED_MAX = 0
END_STATE_CORRECT_FLOOR = 1.0
LANGUAGE_MATCH_FLOOR = 1.0
#: Measured keyword-judge decision recall per summariser (see tests/test_evals.py for the dates).
DECISION_RECALL_FLOOR: dict[str, float] = {
    "extractive": 0.66,
    # On its 15 recorded sessions (evals/cassettes/summaries/openai--qwen2.5-coder-1.5b-instruct/), 11 of
    # them with gold decisions. The first 7 recorded still score 0.74 (floor 0.73, held in tests/test_evals.py).
    "llm:openai/qwen2.5-coder-1.5b-instruct": 0.65,
}
#: Measured output-file precision per summariser (see tests/test_evals.py for the dates).
FILE_PRECISION_FLOOR: dict[str, float] = {"extractive": 0.98}


def check_gates(run: EvalRun) -> list[str]:
    """Every floor a summariser misses in ``run``, as one line each (empty: all gates hold)."""
    failed: list[str] = []
    for name, t in run.totals.items():
        if not t["sessions"]:
            continue
        if t["file_recall"] is not None and t["file_recall"] < FILE_RECALL_FLOOR:
            failed.append(f"{name}: output-file recall {t['file_recall']:.2f} < {FILE_RECALL_FLOOR}")
        if t["faithfulness_violations"] > FAITHFULNESS_VIOLATIONS_MAX:
            failed.append(f"{name}: {t['faithfulness_violations']} faithfulness violations")
        if t["secrets_leaked"] > SECRETS_LEAKED_MAX:
            failed.append(f"{name}: {t['secrets_leaked']} secrets leaked")
        if (t["end_state_correct"] or 0) < END_STATE_CORRECT_FLOOR:
            failed.append(f"{name}: end-state correctness {t['end_state_correct']:.2f} < {END_STATE_CORRECT_FLOOR}")
        if (t["language_match"] or 0) < LANGUAGE_MATCH_FLOOR:
            failed.append(f"{name}: language match {t['language_match']:.2f} < {LANGUAGE_MATCH_FLOOR}")
        floor = FILE_PRECISION_FLOOR.get(name)
        if floor is not None and t["file_precision"] is not None and t["file_precision"] < floor:
            failed.append(f"{name}: output-file precision {t['file_precision']:.2f} < measured floor {floor}")
        floor = DECISION_RECALL_FLOOR.get(name)
        # None: no selected session has gold decisions (a --case run), so there is nothing to hold.
        if floor is not None and t["decision_recall_keyword"] is not None and t["decision_recall_keyword"] < floor:
            failed.append(f"{name}: decision recall {t['decision_recall_keyword']:.2f} < measured floor {floor}")
    return failed
