"""LLM-path benchmark (issue 3): what the summariser sends, how many calls, how long, how parallel.

    .venv/bin/python evals/bench_llm.py [--no-local] [--delay 0.5 --delay 5] [--jobs 8]
    .venv/bin/python evals/bench_llm.py --embedded [--baseline REV]   (evals/bench_embedded.py)

One run measures and prints (and writes to ``evals/reports/bench_llm.md``):

1. **Input tokens per session.** Real sessions are imported into a Hermes-shaped state.db
   (``pipeline.hermes.importdb.import_sessions``), read back through ``HermesDB`` and summarised by the real
   ``asummarise_llm`` against a recording stub server (``evals/stub_llm_server.py``, no delay). The
   request bodies it records *are* what the summariser sends; their messages plus tool schema are
   counted with ``litellm.token_counter`` (offline, tiktoken's bundled encoding), against the raw
   transcript (every message's text, tool arguments and tool outputs, unshaped; reasoning excluded
   because the pipeline never sends it). Output files: ``Facts.output_files`` beside the summary's.
2. **Calls per session**: chunks + 1 reduce from the chunking, and the calls the stub saw.
3. **Seconds per session with the local model**: the ``distill`` CLI on two short sessions against
   the llama.cpp server running Qwen2.5-Coder-1.5B (through the recorder, which times each call).
   ``--no-local`` skips it; a server that does not come up within the timeout is reported, not fatal.
4. **--jobs speed-up**: the ``distill`` CLI over ≥ 16 sessions against the stub with a fixed delay (each ``--delay``),
   ``--jobs 1`` then ``--jobs N``, each with a fresh ``HERMES_HOME`` (so a fresh cache). Reported: wall
   time of the process, and the *model-bound span* (first request in to last answer out, as the stub
   saw it), plus the peak and mean number of requests in flight.

Network: only 127.0.0.1. litellm's cost map is the bundled one (``LITELLM_LOCAL_MODEL_COST_MAP``).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evals.dataset import shared_dir  # noqa: E402
from evals.stub_llm_server import StubServer  # noqa: E402
from pipeline.llm import local as localmodel  # noqa: E402
from pipeline.models import Session  # noqa: E402

SHARED = shared_dir() / "agent-transcripts"
FIXTURE_DB = ROOT / "fixtures" / "db" / "hermes-v31.db"
REPORT = ROOT / "evals" / "reports" / "bench_llm.md"
DISTILL = [sys.executable, "-m", "pipeline"]
#: The [local] extra's llama.cpp server and the GGUF it assembles into the user cache.
QWEN_PYTHON = Path(localmodel.llama_python() or sys.executable)
QWEN_GGUF = localmodel.cache_dir() / localmodel.GGUF_NAME
QWEN_ALIAS = "qwen2.5-coder-1.5b-instruct"
#: The tokenizer the counts use: model-agnostic on purpose, both sides of the ratio use it.
TOKEN_MODEL = "gpt-3.5-turbo"
TARGET_RATIO, TARGET_SPEEDUP = 0.35, 6.0
TOOL_HEAVY_CALLS = 10

#: Part 1: tool-heavy Claude Code / Codex / Hermes sessions, plus a long Cursor one and a text-only aider one.
TOKEN_SESSIONS: list[tuple[str, Path]] = [
    ("claude-code", SHARED / "claude-code-jsonl/payment-kit-fix-coverage-tests-zh.jsonl"),
    ("claude-code", SHARED / "claude-code-jsonl/payment-kit-billing-knowledge-skill-zh.jsonl"),
    ("claude-code", SHARED / "claude-code-jsonl/cloak-squads-grant-setup.jsonl"),
    ("codex", SHARED / "codex-rollout/raze-agno-multimodal-plan-review.jsonl"),
    ("codex", SHARED / "codex-rollout/edgerunner-trading-agent-hackathon.jsonl"),
    ("hermes-dump", SHARED / "hermes-request-dump/hermes-image-gen-ui-research-zh.json"),
    ("hermes-dump", SHARED / "hermes-request-dump/hermes-xiaosuan-bizplan-ppt-and-iching-site-zh.json"),
    ("specstory", SHARED / "specstory/opsfleet-devops-terraform-eks-assignment.md"),
    ("aider", SHARED / "aider-md/doc-processor-langgraph-design.md"),
]
#: Part 1 also reads one session written by real Hermes (fixture role ``cli_tools``).
HERMES_FIXTURE_SESSION = "20261102_090000_c11a01"
#: Part 3: two short sessions, one chunk each.
LOCAL_SESSIONS = [
    SHARED / "claude-code-jsonl/agentic-wallet-grant-skill-short.jsonl",
    SHARED / "codex-rollout/privacy-x402-init-agents-md.jsonl",
]
#: Part 4: short sessions imported beside the fixture DB's own (≥ 16 selected in all).
JOBS_TRANSCRIPTS = [
    SHARED.parent / "hermes/exports/all.jsonl",
    SHARED / "claude-code-jsonl/agentic-wallet-grant-skill-short.jsonl",
    SHARED / "claude-code-jsonl/cloak-squads-grant-setup.jsonl",
    SHARED / "codex-rollout/fundwise-grant-skill.jsonl",
    SHARED / "codex-rollout/privacy-x402-init-agents-md.jsonl",
    SHARED / "hermes-request-dump/hermes-image-gen-ui-research-zh.json",
    SHARED / "specstory/skillz-combine-design-docs.md",
    SHARED / "specstory/lifeblog-svg-icons-theme.md",
]


# --------------------------------------------------------------------------- helpers


def read_all(paths: Sequence[Path]) -> list[Session]:
    from pipeline.read.detect import read_sessions

    return [s for p in paths for s in read_sessions(p)]


def as_hermes_rows(sessions: Sequence[Session], db: Path) -> list[Session]:
    """Import into a Hermes-shaped state.db, read back through ``HermesDB`` (what ``distill --db`` sees)."""
    from pipeline.hermes.importdb import import_sessions
    from pipeline.read.hermes import HermesDB

    import_sessions(sessions, db, allow_existing=db.exists())
    with HermesDB(db) as h:
        return [h.read_session(h.resolve(s.id)) for s in sessions]


def raw_text(session: Session) -> str:
    """Everything the session holds, unshaped: message text, tool arguments, tool outputs."""
    parts: list[str] = []
    for m in session.messages:
        parts.append(m.content or "")
        parts.append(m.carrier_summary or "")
        parts.extend(
            c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments, ensure_ascii=False)
            for c in m.tool_calls
        )
    return "\n".join(p for p in parts if p)


def tokens(text: str = "", messages: list[dict[str, Any]] | None = None, tools: list[Any] | None = None) -> int:
    import litellm

    if messages is not None:
        return int(litellm.token_counter(model=TOKEN_MODEL, messages=messages, tools=tools))
    return int(litellm.token_counter(model=TOKEN_MODEL, text=text))


def wait_http(url: str, seconds: float, proc: subprocess.Popen[bytes] | None = None) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except OSError:
            time.sleep(0.5)
    return False


def distill_cli(args: list[str], home: Path, timeout: float) -> tuple[float, dict[str, Any], str]:
    """Run the real ``distill`` process: (wall seconds, its --json report, stderr tail)."""
    env = {**os.environ, "HERMES_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for var in ("DISTILL_MODEL", "DISTILL_CONFIG", "OPENAI_API_KEY"):
        env.pop(var, None)
    started = time.monotonic()
    proc = subprocess.run(
        [*DISTILL, *args, "--json"], env=env, capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT
    )
    wall = time.monotonic() - started
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        report = {"error": f"exit {proc.returncode}"}
    return wall, report, proc.stderr[-600:]


# --------------------------------------------------------------------------- parts 1 and 2


@dataclass
class TokenRow:
    name: str
    fmt: str
    messages: int
    tool_calls: int
    raw: int
    sent_text: int
    sent: int
    chunks: int
    calls: int
    facts_files: list[str]
    summary_files: list[str]
    fallback: bool

    @property
    def ratio(self) -> float:
        return self.sent / self.raw if self.raw else 0.0

    @property
    def tool_heavy(self) -> bool:
        return self.tool_calls >= TOOL_HEAVY_CALLS

    @property
    def recall(self) -> float | None:
        if not self.facts_files:
            return None
        return sum(1 for f in self.facts_files if f in self.summary_files) / len(self.facts_files)


def measure_tokens(work: Path) -> list[TokenRow]:
    from pipeline.llm.client import NO_KEY, LLMClient, ModelChoice
    from pipeline.models import RunReport
    from pipeline.read.hermes import HermesDB
    from pipeline.run.steps import Prepared, prepare
    from pipeline.summarize.mapreduce import asummarise_llm

    db = work / "tokens.db"
    sessions = as_hermes_rows(read_all([p for _, p in TOKEN_SESSIONS]), db)
    names = [(fmt, p.stem) for fmt, p in TOKEN_SESSIONS]
    with HermesDB(FIXTURE_DB) as h:
        sessions.append(h.read_session(h.resolve(HERMES_FIXTURE_SESSION)))
        names.append(("hermes (state.db)", "fixture cli_tools"))
    rows: list[TokenRow] = []
    with StubServer(delay=0.0) as stub:
        from pipeline.config import build_settings

        settings = build_settings(summarizer="llm", model="openai/stub", api_base=stub.api_base, jobs=1)
        client = LLMClient(ModelChoice("openai/stub", "bench", api_base=stub.api_base, api_key=NO_KEY), num_retries=0)
        try:
            for (fmt, name), session in zip(names, sessions, strict=True):
                prep = prepare(session, chunk_tokens=settings.chunk_tokens, summariser_id="openai/stub", is_current=None)
                assert isinstance(prep, Prepared), name
                stub.reset()
                report = RunReport()
                summary = client.run(
                    asummarise_llm(prep.session, prep.chunks, prep.facts, settings, client, None, report)
                )
                bodies = [c.body for c in stub.calls]
                rows.append(
                    TokenRow(
                        name=name,
                        fmt=fmt,
                        messages=len(session.messages),
                        tool_calls=sum(len(m.tool_calls) for m in session.messages),
                        raw=tokens(raw_text(session)),
                        sent_text=sum(tokens(messages=b["messages"]) for b in bodies),
                        sent=sum(tokens(messages=b["messages"], tools=b.get("tools")) for b in bodies),
                        chunks=len(prep.chunks),
                        calls=len(bodies),
                        facts_files=list(prep.facts.output_files),
                        summary_files=list(summary.output_files),
                        fallback=bool(report.fallbacks),
                    )
                )
        finally:
            client.close()
    return rows


# --------------------------------------------------------------------------- part 3


@dataclass
class LocalRun:
    name: str
    wall_s: float
    calls: int
    call_s: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    summarizer: str = ""
    fallbacks: int = 0
    note: str = ""


@contextmanager
def qwen_server(port: int, startup_s: float) -> Iterator[str | None]:
    """The llama.cpp server on 127.0.0.1, or None when it cannot start (missing venv/model, timeout)."""
    if not (QWEN_PYTHON.exists() and QWEN_GGUF.exists()):
        yield None
        return
    log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in the finally below, after the server)
    proc = subprocess.Popen(
        [str(QWEN_PYTHON), "-m", "llama_cpp.server", "--model", str(QWEN_GGUF), "--model_alias", QWEN_ALIAS,
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192", "--n_threads", "2"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}/v1"
        yield base if wait_http(base + "/models", startup_s, proc) else None
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def measure_local(work: Path, port: int, startup_s: float, timeout_s: float) -> tuple[list[LocalRun], str]:
    with qwen_server(port, startup_s) as base:
        if base is None:
            return [], f"skipped: the llama.cpp server did not come up within {startup_s:.0f}s"
        runs: list[LocalRun] = []
        with StubServer(upstream=base) as recorder:
            for path in LOCAL_SESSIONS:
                recorder.reset()
                home = work / f"local-{path.stem}"
                try:
                    wall, report, err = distill_cli(
                        [str(path), "--out", str(home / "out"), "--summarizer", "llm", "--model", f"openai/{QWEN_ALIAS}",
                         "--api-base", recorder.api_base, "--jobs", "1"], home, timeout_s)
                except subprocess.TimeoutExpired:
                    runs.append(LocalRun(path.stem, timeout_s, len(recorder.calls), note=f"timed out after {timeout_s:.0f}s"))
                    continue
                calls = [c for c in recorder.calls if c.ended]
                runs.append(LocalRun(
                    name=path.stem, wall_s=wall, calls=len(calls), call_s=[c.ended - c.started for c in calls],
                    prompt_tokens=sum(int((c.answer.get("usage") or {}).get("prompt_tokens") or 0) for c in calls),
                    summarizer=str(report.get("summarizer", "")), fallbacks=int(report.get("fallbacks", 0)),
                    note="; ".join(report.get("notices", []))[:200] or ("" if "error" not in report else err),
                ))
        return runs, ""


# --------------------------------------------------------------------------- part 4


@dataclass
class JobsRun:
    jobs: int
    wall_s: float
    elapsed_s: float
    span_s: float
    calls: int
    peak: int
    written: int
    fallbacks: int
    summarizers: set[str]

    @property
    def mean_inflight(self) -> float:
        return 0.0 if not self.span_s else self.busy / self.span_s

    busy: float = 0.0


def jobs_db(work: Path) -> Path:
    """The fixture state.db (real Hermes rows) plus short transcripts imported beside them."""
    db = work / "state.db"
    shutil.copy(FIXTURE_DB, db)
    from pipeline.hermes.importdb import import_sessions

    import_sessions(read_all(JOBS_TRANSCRIPTS), db, allow_existing=True)
    return db


def note_summarizers(out: Path) -> list[str]:
    import frontmatter

    return [str(frontmatter.load(p).get("summarizer")) for p in sorted(out.rglob("*.md")) if p.name != "index.md"]


def run_jobs(db: Path, stub: StubServer, jobs: int, work: Path, timeout_s: float = 900) -> JobsRun:
    home = work / f"jobs-{jobs}-{time.monotonic_ns()}"
    stub.reset()
    wall, report, err = distill_cli(
        ["--db", str(db), "--all", "--out", str(home / "out"), "--summarizer", "llm", "--model", "openai/stub",
         "--api-base", stub.api_base, "--jobs", str(jobs)], home, timeout_s)
    if "error" in report:
        raise RuntimeError(f"distill --jobs {jobs} failed: {report['error']}\n{err}")
    calls = [c for c in stub.calls if c.ended]
    return JobsRun(
        jobs=jobs, wall_s=wall, elapsed_s=float(report["elapsed_s"]), span_s=stub.busy_span(), calls=len(calls),
        peak=stub.peak, written=int(report["written"]), fallbacks=int(report["fallbacks"]),
        summarizers=set(note_summarizers(home / "out")), busy=sum(c.ended - c.started for c in calls),
    )


def import_overhead() -> float:
    """Seconds a fresh process needs to import litellm + instructor (paid once per ``distill`` run)."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import litellm, instructor"], check=True,
                   env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    return time.monotonic() - started


# --------------------------------------------------------------------------- report


def fmt_files(row: TokenRow) -> str:
    recall = "–" if row.recall is None else f"{row.recall:.2f}"
    return f"{len(row.facts_files)} / {len(row.summary_files)} ({recall})"


def render(
    rows: list[TokenRow], local: list[LocalRun], local_note: str, pairs: list[tuple[float, JobsRun, JobsRun]],
    overhead: float | None, load: str,
) -> str:
    out = ["# LLM-path benchmark (issue 3)", "",
           f"Machine: {os.cpu_count()} CPUs, load average at start {load}. Tokens: `litellm.token_counter` "
           f"({TOKEN_MODEL} encoding, offline) on the exact request bodies the summariser sent. Raw = every message's "
           "text + tool arguments + tool outputs, unshaped (reasoning excluded). Sent = messages + tool schema, "
           f"all calls. Tool-heavy = ≥ {TOOL_HEAVY_CALLS} tool calls; target ratio ≤ {TARGET_RATIO}.", "",
           "| session | format | msgs | tool calls | raw tok | sent tok (text only) | ratio | target | chunks | "
           "calls (chunks+1 / seen) | output files facts / summary (recall) |",
           "|---|---|--:|--:|--:|--:|--:|:-:|--:|--:|--|"]
    for r in rows:
        target = ("✅" if r.ratio <= TARGET_RATIO else "❌") if r.tool_heavy else "–"
        fb = " (fallback!)" if r.fallback else ""
        out.append(f"| {r.name}{fb} | {r.fmt} | {r.messages} | {r.tool_calls} | {r.raw:,} | {r.sent:,} "
                   f"({r.sent_text:,}) | {r.ratio:.2f} | {target} | {r.chunks} | {r.chunks + 1} / {r.calls} | "
                   f"{fmt_files(r)} |")
    heavy = [r for r in rows if r.tool_heavy]
    if heavy:
        tot = sum(r.sent for r in heavy) / sum(r.raw for r in heavy)
        out += ["", f"Tool-heavy sessions together: sent/raw = {tot:.2f}."]
    out += ["", "## Local model (Qwen2.5-Coder-1.5B, llama.cpp, 2 threads, `--jobs 1`)", ""]
    if local_note:
        out.append(local_note)
    else:
        out += ["| session | wall s (process) | calls | s per call (each) | prompt tok (server) | summarizer | note |",
                "|---|--:|--:|--|--:|---|---|"]
        for lr in local:
            each = ", ".join(f"{s:.1f}" for s in lr.call_s)
            per = sum(lr.call_s) / len(lr.call_s) if lr.call_s else 0.0
            out.append(f"| {lr.name} | {lr.wall_s:.1f} | {lr.calls} | {per:.1f} ({each}) | {lr.prompt_tokens:,} | "
                       f"{lr.summarizer}{' fallback' if lr.fallbacks else ''} | {lr.note} |")
    out += ["", "## `--jobs` speed-up (stub server with a fixed delay per call, fresh cache each run)", ""]
    if not pairs:
        out.append("skipped")
        return "\n".join(out) + "\n"
    out += ["| delay s | jobs | sessions written | calls | wall s (process) | run elapsed s | model-bound span s | "
            "peak in flight | mean in flight | fallbacks | note summarizer |",
            "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    for delay, j1, jn in pairs:
        for j in (j1, jn):
            out.append(f"| {delay:g} | {j.jobs} | {j.written} | {j.calls} | {j.wall_s:.1f} | {j.elapsed_s:.1f} | "
                       f"{j.span_s:.1f} | {j.peak} | {j.mean_inflight:.1f} | {j.fallbacks} | "
                       f"{', '.join(sorted(j.summarizers))} |")
    out.append("")
    for delay, j1, jn in pairs:
        wall_x, span_x = j1.wall_s / jn.wall_s, j1.span_s / jn.span_s
        fixed = j1.wall_s - j1.span_s
        out.append(f"- {delay:g} s per call: `--jobs {jn.jobs}` over `--jobs 1` **wall {wall_x:.1f}×**, model-bound "
                   f"span {span_x:.1f}× (target ≥ {TARGET_SPEEDUP:.0f}× {'met' if wall_x >= TARGET_SPEEDUP else 'missed'});"
                   f" {fixed:.1f} s of each run is outside the model-bound span (process start, litellm import, "
                   f"reading, rendering), which caps the wall speed-up at {j1.wall_s / fixed:.1f}×.")
    if overhead:
        out.append(f"- A bare `import litellm, instructor` in a fresh process took {overhead:.1f} s in this run.")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--embedded" in argv:  # issue 18 §1: the embedded model against its hardware limit
        from evals import bench_embedded

        return bench_embedded.main([a for a in argv if a != "--embedded"])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-local", action="store_true", help="skip part 3 (the real Qwen server)")
    parser.add_argument("--delay", type=float, action="append",
                        help="stub seconds per call for part 4; repeat for several (default: 0.5 and 5)")
    parser.add_argument("--jobs", type=int, default=8, help="the --jobs compared with --jobs 1")
    parser.add_argument("--qwen-port", type=int, default=8765)
    parser.add_argument("--qwen-startup", type=float, default=180.0, help="seconds to wait for the Qwen server")
    parser.add_argument("--qwen-timeout", type=float, default=900.0, help="seconds per local session")
    parser.add_argument("--out", type=Path, default=REPORT)
    args = parser.parse_args(argv)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="bench-llm-") as tmp:
        work = Path(tmp)
        rows = measure_tokens(work)
        print(f"parts 1-2: {len(rows)} sessions measured", file=sys.stderr)
        db = jobs_db(work)
        pairs: list[tuple[float, JobsRun, JobsRun]] = []
        for delay in args.delay or [0.5, 5.0]:
            with StubServer(delay=delay) as stub:
                j1 = run_jobs(db, stub, 1, work)
                jn = run_jobs(db, stub, args.jobs, work)
            pairs.append((delay, j1, jn))
            print(f"part 4 ({delay:g} s): jobs 1 {j1.wall_s:.1f}s, jobs {args.jobs} {jn.wall_s:.1f}s", file=sys.stderr)
        overhead = import_overhead()
        local: list[LocalRun] = []
        local_note = "skipped (--no-local)"
        if not args.no_local:
            local, local_note = measure_local(work, args.qwen_port, args.qwen_startup, args.qwen_timeout)
    table = render(rows, local, local_note, pairs, overhead, load)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table, encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
