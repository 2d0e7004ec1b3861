"""Where a cold extractive run spends its CPU: each pipeline stage timed alone, in one process.

    .venv/bin/python evals/bench_stages.py --db evals/big/state-h19-2000.db

``bench_core.py`` times whole commands; this script explains them. It runs every session the
default source filters select through the stages ``run.py`` composes (read+decode, redact, chunk,
facts, extractive summary, render, YAML, skill evidence, the note's archive index row), in one
process and without writing, and prints the CPU seconds of each (``time.process_time``), in total
and per session. It also times the smallest possible unchanged-re-run check for comparison: a bare
interpreter that reads the sessions table, aggregates message counts and hashes one fingerprint per
session, with nothing of ``pipeline`` imported (the floor for any fingerprint-based ``distill`` re-run).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: What the minimal re-check does: one scan of each table, one hash per session.
FLOOR = r"""
import hashlib, json, sqlite3, sys
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
rows = con.execute("SELECT * FROM sessions").fetchall()
stats = {r[0]: r for r in con.execute(
    "SELECT session_id, COUNT(*), MAX(id), SUM(active) FROM messages GROUP BY session_id")}
for r in rows:
    hashlib.sha256(json.dumps([list(r), list(stats.get(r[0], ()))], default=str).encode()).hexdigest()
"""


def stage_times(db_path: Path) -> tuple[int, Counter[str]]:
    from pipeline.archive.index import written_row
    from pipeline.chunk import chunk_session
    from pipeline.config import DEFAULT_CHUNK_TOKENS, build_settings
    from pipeline.facts.derive import derive_facts
    from pipeline.notes.render import default_link, dump_note, render_note
    from pipeline.read.hermes import HermesDB
    from pipeline.redact import redact_session
    from pipeline.run.runner import select_sessions
    from pipeline.skills.evidence import evidence_from_session, sidecar_text
    from pipeline.summarize.extractive import summarise_extractive

    spent: Counter[str] = Counter()
    now = datetime.now(UTC)
    n = 0
    mark = [0.0]

    def lap(stage: str) -> None:
        t = time.process_time()
        spent[stage] += t - mark[0]
        mark[0] = t
    with HermesDB(db_path) as db:
        db.preload_message_stats()
        for sid in select_sessions(db, build_settings(db=db_path, select_all=True)):  # as `distill --all`
            mark[0] = time.process_time()
            session = db.read_session(sid)
            lap("read + decode")
            session = redact_session(session)
            lap("redact")
            chunks = chunk_session(session, budget=DEFAULT_CHUNK_TOKENS)
            lap("chunk")
            if not chunks:
                continue
            facts = derive_facts(session, chunks)
            lap("facts")
            summary = summarise_extractive(session, chunks, facts)
            lap("extractive summary")
            note = render_note(session, summary, facts, content_hash="sha256:-", distilled_at=now,
                               link_for=default_link, skills=())
            lap("render")
            text = dump_note(note.frontmatter, note.body)
            lap("YAML + file text")
            sidecar = sidecar_text(evidence_from_session(session, summary, facts, note_path=note.relpath))
            lap("skill evidence")
            written_row(note.relpath, text, note.frontmatter, sidecar)
            lap("archive index row")
            n += 1
    return n, spent


def floor_seconds(db_path: Path, runs: int = 3) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", FLOOR, str(db_path)], check=True)
        out.append(time.perf_counter() - started)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, required=True, help="a state.db (e.g. the 2,000-session one)")
    args = ap.parse_args(argv)
    n, spent = stage_times(args.db)
    total = sum(spent.values())
    print(f"{n:,} sessions, {total:.2f} CPU s in the stages ({1000 * total / max(n, 1):.1f} ms per session)\n")
    print("| stage | CPU s | share | ms per session |")
    print("|---|--:|--:|--:|")
    for stage, secs in spent.items():
        print(f"| {stage} | {secs:.2f} | {100 * secs / total:.0f} % | {1000 * secs / n:.2f} |")
    floors = floor_seconds(args.db)
    print(f"\nMinimal unchanged-re-run check (bare interpreter, sqlite3 + hashlib): "
          f"{', '.join(f'{s:.2f}' for s in floors)} s wall")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
