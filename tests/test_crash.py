"""Crash safety as a repeatable run: SIGKILLs at random points of every command that writes.

The full run is ``python -m evals.crash_run`` (50 kills, prints the table); this test runs ten of
them (the process group and the main process alone, over every scenario) so CI stays in budget.
Each kill must leave no orphan process, no torn file, no stale lock (the rerun finishes), no stray
temp file after the rerun, and files equal to an uninterrupted run's apart from timestamps.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find orphans")
def test_ten_random_sigkills_leave_nothing_wrong(tmp_path: Path) -> None:
    from evals.crash_run import crash_run, table

    lines: list[str] = []
    results = crash_run(10, seed=16, copies=3, root=tmp_path, report=lines.append)
    assert {k.mode for k in results} == {"group", "main"}
    assert len({k.scenario for k in results}) == 8
    bad = [k for k in results if not k.ok]
    assert not bad, "\n".join(lines) + "\n" + table(results)
