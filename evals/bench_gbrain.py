"""Benchmark: ``distill gbrain push`` of ~2,000 notes, cold and again with nothing changed.

    .venv/bin/python evals/bench_gbrain.py --db evals/big/state-h19-2000.db
    GBRAIN_BIN=~/.bun/bin/gbrain .venv/bin/python evals/bench_gbrain.py --db ... --limit 200

The database is ``evals/gen_big.py``'s (real ``SessionDB``, 2,000 sessions); every session is distilled
(extractive, every source) into a temp folder, then pushed to a fresh brain per transport:

- cold: ``distill gbrain push --all`` into an empty brain (one ``put_page`` per page, project pages, lineage
  ``add_link``s; over MCP every edge is an ``add_link``);
- no-op: the same command again, nothing changed (answered from the push state by ``stat``: no gbrain call);
- touched: every note's mtime moved, text unchanged (each note read and hashed; still no gbrain call);
- one changed: one note edited (one ``put_page``, one new gbrain version).

Against the stand-in (``tests/gbrain_standin``, the default) the times are distill's own cost plus a Python
process per ``gbrain call``; set ``GBRAIN_BIN`` to measure a real gbrain (each CLI call starts Bun and PGLite,
~2-3 s: use ``--limit`` and read the per-page column). Prints a Markdown table; stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "tests" / "gbrain_standin" / "gbrain"
DISTILL = Path(sys.executable).with_name("distill")
SOURCES = ["cli", "telegram", "cron", "subagent", "tool"]


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}... failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, proc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", type=Path, default=ROOT / "evals" / "big" / "state-h19-2000.db")
    ap.add_argument("--limit", type=int, default=0, help="distil (and push) only the N newest sessions")
    ap.add_argument("--transport", default="cli,mcp", help="comma-separated: cli, mcp")
    args = ap.parse_args()
    if not args.db.is_file():
        raise SystemExit(f"{args.db}: missing; build it with HERMES_HOME=$(mktemp -d) .venv-hermes/bin/python "
                         f"evals/gen_big.py --sessions 2000 --out {args.db}")
    gbrain = Path(os.environ.get("GBRAIN_BIN") or STANDIN)
    with tempfile.TemporaryDirectory(prefix="bench-gbrain-") as tmp:
        root = Path(tmp)
        env = {"HOME": str(root), "PATH": f"{DISTILL.parent}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
               "HERMES_HOME": str(root / "hermes"), "DISTILL_EMBEDDED": "0", "GBRAIN_BIN": str(gbrain),
               "GBRAIN_STANDIN_PYTHON": sys.executable, "GBRAIN_SELF_UPGRADE_MODE": "off"}
        notes = root / "notes"
        cmd = [str(DISTILL), "--all", "--db", str(args.db), "--out", str(notes), "--summarizer", "extractive", "--quiet"]
        cmd += [x for s in SOURCES for x in ("--source", s)] + (["--limit", str(args.limit)] if args.limit else [])
        wall, _ = run(cmd, env)
        n = sum(1 for p in notes.rglob("*.md") if ".distill" not in p.parts)
        rows = [("distill --all (extractive), for reference", "-", n, wall)]
        for transport in args.transport.split(","):
            benv = {**env, "GBRAIN_HOME": str(root / f"brain-{transport}")}
            wall, _ = run([str(gbrain), "init", "--pglite", "--no-embedding", "--non-interactive"], benv)
            rows.append(("gbrain init (fresh brain)", transport, 0, wall))
            push = [str(DISTILL), "gbrain", "push", "--all", "--out", str(notes), "--transport", transport, "--json"]
            state = notes / ".distill" / "gbrain.db"
            wall, proc = run(push, benv)
            report = json.loads(proc.stdout)
            created = sum(i["action"] == "created" for i in report["items"])
            rows.append((f"cold push: {created} pages, {len(report['projects_created'])} project pages, "
                         f"{report['links_added']} add_link", transport, created, wall))
            wall, proc = run(push, benv)
            rows.append(("no-op re-push (stat only)", transport, n, wall))
            assert all(i["action"] == "unchanged" for i in json.loads(proc.stdout)["items"])
            now = time.time()
            for p in notes.rglob("*.md"):
                os.utime(p, (now, now))
            wall, proc = run(push, benv)
            rows.append(("re-push, every note touched (read + hash)", transport, n, wall))
            assert all(i["action"] == "unchanged" for i in json.loads(proc.stdout)["items"])
            one = next(p for p in sorted(notes.rglob("*.md")) if ".distill" not in p.parts)
            one.write_text(one.read_text("utf-8") + f"\nEdited for the {transport} benchmark.\n", "utf-8")
            wall, proc = run(push, benv)
            updated = sum(i["action"] == "updated" for i in json.loads(proc.stdout)["items"])
            rows.append((f"re-push, one note changed ({updated} updated)", transport, n, wall))
            state.unlink()  # the next transport starts from no push state, like a new brain would
    print(f"gbrain: {'stand-in (tests/gbrain_standin)' if gbrain == STANDIN else gbrain}; {n} notes\n")
    print("| step | transport | pages | wall s | per page ms |")
    print("|---|---|---:|---:|---:|")
    for step, transport, pages, wall in rows:
        per = f"{wall / pages * 1000:.1f}" if pages else "-"
        print(f"| {step} | {transport} | {pages} | {wall:.2f} | {per} |")


if __name__ == "__main__":
    main()
