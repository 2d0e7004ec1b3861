"""Re-record the eval cassettes of the embedded model, from the real model, in one command.

    .venv/bin/python evals/record_local.py [--case ID ...] [--port 8766]

Starts the embedded model (``pipeline.llm.local.LocalServer``: xllamacpp, the sha256-pinned
Qwen2.5-Coder-1.5B-Instruct from the ``[local]`` packages) on a free port, puts a recorder on
127.0.0.1:``--port`` in front of it (the address the cassettes name, since the URL is matched), runs
``python -m evals --summarizer llm --record`` for the cases (default: every case already recorded),
then stops both. Each model call's prompt and output tokens, prompt-cache hits and seconds, as
llama.cpp timed them, go to ``evals/reports/record_local.json``. Never edit a cassette by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evals.dataset import load_gold  # noqa: E402
from evals.llm_adapter import ModelMeta  # noqa: E402
from evals.stub_llm_server import StubServer  # noqa: E402
from pipeline.llm.local import LocalServer  # noqa: E402

MODEL = "openai/qwen2.5-coder-1.5b-instruct"
CASSETTES = ROOT / "evals" / "cassettes" / "summaries" / MODEL.replace("/", "--")
LOG = ROOT / "evals" / "reports" / "record_local.json"


def call_rows(stub: StubServer) -> list[dict[str, object]]:
    """One row per model call the recorder saw: which schema, tokens, cache hits and llama.cpp's timings."""
    rows = []
    for c in stub.calls:
        timings = c.answer.get("timings") or {}
        usage = c.answer.get("usage") or {}
        fmt = c.body.get("tools") or [{}]
        rows.append({
            "schema": (fmt[0].get("function") or {}).get("name", "?"),
            "prompt_tokens": usage.get("prompt_tokens"),
            "completion_tokens": usage.get("completion_tokens"),
            "cached_tokens": timings.get("cache_n"),
            "prompt_s": round(float(timings.get("prompt_ms", 0)) / 1000, 1),
            "generate_s": round(float(timings.get("predicted_ms", 0)) / 1000, 1),
            "wall_s": round(c.ended - c.started, 1),
            "prompt_tps": round(float(timings.get("prompt_per_second", 0)), 1),
            "generate_tps": round(float(timings.get("predicted_per_second", 0)), 1),
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", help="a case id (repeatable; default: the recorded cases)")
    ap.add_argument("--port", type=int, default=8766, help="the port the cassettes name")
    ap.add_argument("--judge-only", action="store_true",
                    help="re-record only the judge's cassettes (the summaries replay), after a change that only "
                         "alters what the pipeline does with the model's answers")
    args = ap.parse_args(argv)
    meta = ModelMeta.load(CASSETTES)
    cases = args.case or (meta.sessions if meta else [])
    if not cases:
        ap.error("no --case given and no recorded cases found")
    log: dict[str, object] = {"recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
                              "machine": f"{os.cpu_count()} CPU, load {os.getloadavg()[0]:.1f}", "cases": {}}
    previous = json.loads(LOG.read_text(encoding="utf-8")) if args.case and LOG.exists() else None
    # A test-part case is blind: recording it must not show its per-case row, only the totals line.
    blind = {g.id for g in load_gold() if g.split == "test"}
    with LocalServer() as server, StubServer(port=args.port, upstream=server.api_base) as stub:
        log["runtime"], log["load_s"], log["threads"] = server.runtime_name, server.load_s, server.n_threads
        for case in cases:
            stub.reset()
            started = time.monotonic()
            cmd = [sys.executable, "-m", "evals", "--summarizer", "llm", "--model", MODEL, "--api-base",
                   stub.api_base, *(["--record-judge", "--judge-model", MODEL] if args.judge_only else ["--record"]),
                   "--case", case, *(["--totals-only"] if case in blind else []), "--no-plot",
                   "--out", str(ROOT / "evals" / "reports" / "record")]
            done = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True"),
                                  capture_output=True, text=True)
            wall = round(time.monotonic() - started, 1)
            log["cases"][case] = {"wall_s": wall, "exit": done.returncode, "calls": call_rows(stub)}  # type: ignore[index]
            print(f"{case}: {wall:.0f} s, {len(stub.calls)} calls, exit {done.returncode}", file=sys.stderr)
            if done.returncode:
                print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
            LOG.parent.mkdir(parents=True, exist_ok=True)
            # Re-recording a few cases adds to the log; the calls of every other case stay measured.
            kept = {**previous, "rerecorded": [*previous.get("rerecorded", []), log]} if previous else log
            LOG.write_text(json.dumps(kept, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
