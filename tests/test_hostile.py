"""Every hostile input of ``tests/hostile_cases.py`` (the catalogue in ``evals/hostile.md``) holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.hostile_cases import CASES, Case, run_case

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_hostile_case(c: Case, tmp_path: Path) -> None:
    observed = run_case(c, tmp_path)
    assert observed and "\n" not in observed


def test_catalogue_is_big_enough_and_in_sync() -> None:
    """``evals/hostile.md`` lists exactly these cases, with these inputs and expectations."""
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)
    areas = {c.area for c in CASES}
    assert {"database", "JSON column", "wrong type", "output", "user-edited note", "crash", "LLM failure",
            "prompt injection"} <= areas
    from evals.hostile import cell

    table = (ROOT / "evals" / "hostile.md").read_text("utf-8")
    rows = [line for line in table.splitlines() if re.match(r"^\| \d+ \|", line)]
    assert len(rows) == len(CASES), "regenerate it: python -m evals.hostile"
    for line, c in zip(rows, CASES, strict=True):
        assert f"| `{c.id}` | {cell(c.area)} | {cell(c.input)} | {cell(c.expected)} |" in line, (c.id, line)
        assert "| held |" in line, f"{c.id} did not hold when the catalogue was made: {line}"
