"""The embedded model against its hardware limit, and against an earlier revision, in one run.

    .venv/bin/python evals/bench_embedded.py [--baseline REV] [--case ID ...] [--out FILE]
    .venv/bin/python evals/bench_llm.py --embedded ...      (the same)

Needs the ``[local]`` extra (xllamacpp and the Qwen2.5-Coder-1.5B-Instruct packages). One run:

1. Starts the embedded model once (``pipeline.llm.local.LocalServer``, threads = the CPUs this
   process may use) behind a recorder on 127.0.0.1 (``evals/stub_llm_server.py``), which keeps each
   call's body and llama.cpp's own timings.
2. **Calibrates** the machine: a fixed ~1,500-token prompt with the prompt cache off, answered with
   200 tokens, before and after the sessions. The faster of the two readings of prompt tokens/s and
   of generated tokens/s is the hardware's rate in this run.
3. Runs the ``distill`` CLI (``python -m pipeline FILE --summarizer llm``, fresh ``HERMES_HOME`` so
   nothing is cached) on each session, first with ``--baseline``'s code (a temporary git worktree,
   the same Python and the same server), then with this checkout's.
4. Per session and revision: calls, tokens in (and how many llama.cpp reused from its prompt cache),
   tokens out, model seconds (first request to last answer), wall seconds, and the **limit**:
   tokens in / prompt rate + tokens out / generation rate. Ratios: wall over the limit, and this
   checkout over the baseline.

The sessions default to eight dev-split eval sessions of different sizes and formats (never the
test split). Quality is not measured here: the eval cassettes are recorded from the same model
(``evals/record_local.py``) and ``python -m evals --summarizer llm`` scores them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evals.dataset import load_gold  # noqa: E402
from evals.stub_llm_server import Call, StubServer  # noqa: E402
from pipeline.llm.local import ALIAS, LocalServer  # noqa: E402

REPORT = ROOT / "evals" / "reports" / "bench_embedded.md"
MODEL = f"openai/{ALIAS}"
#: Dev-split sessions, short to multi-chunk, five formats, three languages.
CASES = (
    "agentic-wallet-grant-skill-short",  # Claude Code, short
    "skillz-combine-design-docs",  # SpecStory
    "cloak-squads-grant-setup",  # Claude Code
    "privacy-x402-init-agents-md",  # Codex
    "ai-text-detector-gh-pages-debug",  # SpecStory, failed
    "smart-tourism-login-failure-debug-zh",  # SpecStory, Chinese
    "agente-bsc-rag-resolve-pt",  # SpecStory, Portuguese
    "fundwise-grant-skill",  # Claude Code, 2 chunks
)
#: The calibration prompt: fixed text, so every run measures the same work.
CALIBRATION = " ".join(f"Line {i}: the quick brown fox jumps over the lazy dog near the river bank." for i in range(90))


@dataclass
class Rates:
    prompt_tps: float
    generate_tps: float


@dataclass
class Row:
    case: str
    rev: str
    calls: int = 0
    tokens_in: int = 0
    cached: int = 0
    tokens_out: int = 0
    model_s: float = 0.0
    wall_s: float = 0.0
    error: str = ""
    schemas: list[str] = field(default_factory=list)

    def limit(self, rates: Rates) -> float:
        return self.tokens_in / rates.prompt_tps + self.tokens_out / rates.generate_tps


def calibrate(api_base: str) -> Rates:
    body = {"model": ALIAS, "temperature": 0, "max_tokens": 200, "cache_prompt": False,
            "messages": [{"role": "user", "content": "Repeat this text word for word:\n" + CALIBRATION}]}
    req = urllib.request.Request(api_base.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=900) as resp:
        timings = json.loads(resp.read())["timings"]
    return Rates(float(timings["prompt_per_second"]), float(timings["predicted_per_second"]))


def tally(row: Row, calls: list[Call]) -> Row:
    for c in calls:
        usage, timings = c.answer.get("usage") or {}, c.answer.get("timings") or {}
        row.calls += 1
        row.tokens_in += int(usage.get("prompt_tokens") or 0)
        row.tokens_out += int(usage.get("completion_tokens") or 0)
        row.cached += int(timings.get("cache_n") or 0)
        row.schemas.append(((c.body.get("tools") or [{}])[0].get("function") or {}).get("name", "?"))
    if calls:
        row.model_s = max(c.ended for c in calls) - min(c.started for c in calls)
    return row


def run_cli(code: Path, transcript: Path, api_base: str, work: Path) -> tuple[float, str]:
    """``distill FILE`` with ``code``'s package, as a user runs it: (wall seconds, error or "")."""
    home = Path(tempfile.mkdtemp(dir=work, prefix="home-"))
    env = {**os.environ, "HERMES_HOME": str(home), "PYTHONPATH": str(code), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for var in ("DISTILL_MODEL", "DISTILL_CONFIG", "OPENAI_API_KEY"):
        env.pop(var, None)
    cmd = [sys.executable, "-m", "pipeline", str(transcript), "--summarizer", "llm", "--model", MODEL,
           "--api-base", api_base, "--out", str(home / "notes"), "--jobs", "1"]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=code, env=env, capture_output=True, text=True, timeout=1800, check=False)
    wall = time.monotonic() - started
    error = "" if proc.returncode == 0 else f"exit {proc.returncode}: {proc.stderr[-300:]}"
    if "used the extractive summary" in proc.stderr + proc.stdout:
        error = error or "fell back to the extractive summary"
    if not error and "1 written" not in proc.stderr + proc.stdout:
        error = "no note written"
    return wall, error


def baseline_tree(rev: str, work: Path) -> Path:
    tree = work / "baseline"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), rev], cwd=ROOT, check=True,
                   capture_output=True)
    return tree


def render(rows: list[Row], rates: list[Rates], best: Rates, rev: str, runtime: str, threads: int) -> str:
    by = {(r.case, r.rev): r for r in rows}
    cases = list(dict.fromkeys(r.case for r in rows))
    out = [
        "# Embedded model: seconds per session against the hardware limit and the baseline",
        "",
        f"Runtime {runtime}, {threads} threads, model {ALIAS} (Q4_K_M). Calibration (prompt cache off): "
        + ", ".join(f"{r.prompt_tps:.1f} prompt tok/s and {r.generate_tps:.1f} generated tok/s" for r in rates)
        + f"; the limit uses the faster readings, {best.prompt_tps:.1f} and {best.generate_tps:.1f}.",
        f"Load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}.",
        "",
        "| session | rev | calls | tokens in (cached) | tokens out | model s | wall s | limit s | wall / limit | "
        "wall / baseline |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    totals: dict[str, list[float]] = {}
    for case in cases:
        base = by.get((case, rev))
        for name in (rev, "this checkout"):
            r = by.get((case, name))
            if r is None:
                continue
            vs = f"{r.wall_s / base.wall_s:.2f}×" if base and name != rev and base.wall_s else ""
            err = f" ({r.error})" if r.error else ""
            over = f"{r.wall_s / r.limit(best):.2f}×" if r.calls else "–"
            out.append(f"| {case}{err} | {name} | {r.calls} | {r.tokens_in:,} ({r.cached:,}) | {r.tokens_out:,} | "
                       f"{r.model_s:.0f} | {r.wall_s:.0f} | {r.limit(best):.0f} | {over} | {vs} |")
            t = totals.setdefault(name, [0.0, 0.0, 0.0, 0.0])
            t[0] += r.wall_s
            t[1] += r.limit(best)
            t[2] += r.calls
            t[3] += r.model_s
    out.append("")
    for name, (wall, limit, calls, model_s) in totals.items():
        line = (f"**{name}**: {calls:.0f} calls, {wall:.0f} s wall ({model_s:.0f} s in the model) for "
                f"{len(cases)} sessions, {wall / max(limit, 1e-9):.2f}× the limit")
        if name != rev and rev in totals:
            line += f", {wall / totals[rev][0]:.2f}× the baseline's wall time"
        out.append(line + ".")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default="3c9e041", help="the revision to compare with (default: before issue 18 §1)")
    ap.add_argument("--case", action="append", help="an eval case id, dev split (repeatable)")
    ap.add_argument("--out", type=Path, default=REPORT)
    args = ap.parse_args(argv)
    # A kill (not only Ctrl-C) still removes the worktree and stops the server: ``finally`` runs on SystemExit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    golds = {g.id: g for g in load_gold()}
    cases = args.case or list(CASES)
    for c in cases:
        if c not in golds or golds[c].split != "dev":
            ap.error(f"{c}: not a dev-split eval case (the test split is never benchmarked on)")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-embedded-") as tmp:
        work = Path(tmp)
        tree = baseline_tree(args.baseline, work)
        try:
            with LocalServer() as server, StubServer(upstream=server.api_base) as stub:
                rates = [calibrate(server.api_base)]
                for name, code in ((args.baseline, tree), ("this checkout", ROOT)):
                    for case in cases:
                        stub.reset()
                        wall, error = run_cli(code, golds[case].path, stub.api_base, work)
                        row = tally(Row(case=case, rev=name, wall_s=wall, error=error), list(stub.calls))
                        rows.append(row)
                        print(f"{name} {case}: {row.calls} calls, {wall:.0f} s", file=sys.stderr)
                rates.append(calibrate(server.api_base))
                runtime, threads = server.runtime_name or "?", server.n_threads
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False,
                           capture_output=True)
            shutil.rmtree(tree, ignore_errors=True)
    best = Rates(max(r.prompt_tps for r in rates), max(r.generate_tps for r in rates))
    table = render(rows, rates, best, args.baseline, runtime, threads)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table, encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
