"""``python -m evals [--summarizer extractive|llm|all] [--model M] [--record] [--case ID ...]``."""

from __future__ import annotations

import os

# Before anything imports litellm: its cost-map fetch would be a cassette miss under replay.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import sys
from pathlib import Path

from evals.gates import check_gates
from evals.report import terminal_table, write_reports
from evals.run import evaluate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evals", description=__doc__)
    ap.add_argument("--summarizer", choices=["extractive", "llm", "all"], default="all")
    ap.add_argument("--model", help="litellm model string (replayed if recorded; recorded with --record)")
    ap.add_argument("--api-base", help="OpenAI-compatible endpoint for --model, e.g. http://127.0.0.1:8766/v1")
    ap.add_argument("--record", action="store_true", help="re-record --model's cassettes and the judge's")
    ap.add_argument("--judge-model", help="LLM judge model (default: the recorded judge, if any)")
    ap.add_argument("--record-judge", action="store_true",
                    help="re-record only the judge (--judge-model at --api-base); summaries are replayed")
    ap.add_argument("--case", action="append", help="only this eval case id (repeatable)")
    ap.add_argument("--split", choices=["dev", "test"], help="only this part (tune on dev; read test as totals)")
    ap.add_argument("--totals-only", action="store_true", help="print only the totals (for the blind test part)")
    ap.add_argument("--out", help="report directory (default evals/reports)")
    ap.add_argument("--no-plot", action="store_true", help="skip the PNG")
    ap.add_argument("--gold-dir", help="score another gold set (e.g. your own sessions, inputs as absolute paths)")
    args = ap.parse_args(argv)
    run = evaluate(summarizer=args.summarizer, model=args.model, api_base=args.api_base, record=args.record,
                   judge_model=args.judge_model, cases=args.case, split=args.split, record_judge=args.record_judge,
                   progress=lambda m: print(m, file=sys.stderr, flush=True),
                   gold_dir=Path(args.gold_dir) if args.gold_dir else None)
    print(terminal_table(run, totals_only=args.totals_only))

    kwargs = {"directory": Path(args.out)} if args.out else {}
    for p in write_reports(run, png=not args.no_plot, **kwargs):
        print(f"wrote {p}", file=sys.stderr)
    failed = check_gates(run)
    for line in failed:
        print(f"GATE: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
