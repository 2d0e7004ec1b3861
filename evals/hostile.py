"""Run the hostile-input catalogue and write ``evals/hostile.md``.

    .venv/bin/python -m evals.hostile            # every case, then the table
    .venv/bin/python -m evals.hostile -k llm     # only cases whose id contains "llm" (table not written)

The cases live with the tests (``tests/hostile_cases.py``), so the table and the test suite cannot
drift: ``tests/test_hostile.py`` runs each case and checks that this file lists exactly those cases.
The "observed" column is what each case printed when it ran here.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
OUT = ROOT / "evals" / "hostile.md"


def cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", help="run only cases whose id contains this")
    args = ap.parse_args(argv)
    from tests.hostile_cases import CASES, run_case

    rows = []
    held = 0
    for n, c in enumerate(CASES, 1):
        if args.k and args.k not in c.id:
            continue
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
            try:
                observed, result = run_case(c, Path(tmp)), "held"
                held += 1
            except AssertionError as exc:
                observed, result = f"FAILED: {str(exc)[:200]}", "FAILED"
            except BaseException as exc:
                if type(exc).__name__ == "Skipped":
                    observed, result = f"skipped: {exc}", "skipped"
                else:
                    observed, result = f"ERROR: {traceback.format_exception_only(exc)[-1].strip()[:200]}", "FAILED"
        print(f"{n:3d} {result:7s} {time.monotonic() - t0:5.1f}s {c.id}: {observed}", flush=True)
        rows.append(f"| {n} | `{c.id}` | {cell(c.area)} | {cell(c.input)} | {cell(c.expected)} | {cell(observed)} | {result} |")
    if args.k:
        return 0 if held == len(rows) else 1
    OUT.write_text(
        "# Hostile inputs\n\n"
        "What distill does with inputs a careless or malicious user, a sync tool, a damaged disk, a killed\n"
        "process or a misbehaving model server hands it. Each row is a case in `tests/hostile_cases.py`,\n"
        "run by `tests/test_hostile.py`; this table is written by `python -m evals.hostile`, and *observed*\n"
        f"is what each case printed when it ran ({datetime.now(UTC):%Y-%m-%d}, {held}/{len(rows)} held).\n\n"
        "| # | case | area | input | expected | observed | result |\n|---:|---|---|---|---|---|---|\n"
        + "\n".join(rows) + "\n", "utf-8")
    print(f"{held}/{len(rows)} held -> {OUT.relative_to(ROOT)}")
    return 0 if held == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
