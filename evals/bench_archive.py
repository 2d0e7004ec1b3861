"""Speed of the archive commands on a 2,000-note archive: ``python -m evals.bench_archive [--notes N]``.

The archive is synthesised, not distilled: 2,000 sessions with seeded random titles, goals, phases,
decisions, files, tags and projects (a tenth in Chinese) are rendered by the real renderer
(``pipeline.notes.render.render_note``) and written by the real note store, so the files are exactly
what ``distill`` writes, in seconds instead of the minutes ``evals/gen_big.py`` + a cold run take.
Then, on that archive:

* (a) the index built from nothing (every note read);
* (b) ``ls`` and (c) ``search`` warm: refresh (a ``stat`` of every note, nothing read) and the query;
* (d) ``ls`` and (e) ``search`` right after a person edited 50 notes in place, as Obsidian does (text
  added under Notes, a tag added): the refresh must read exactly those 50;
* (f) the same commands end to end, as the installed ``distill`` in a fresh process (Python start,
  imports, output), warm;
* (g) a run's commit of 50 re-rendered notes (``git`` plumbing) and (h) ``distill tag`` end to end.

Each timing is the median of ``--repeat`` runs. The table is printed; nothing is written to the repo.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

WORDS = ["parser", "config", "cache", "retry", "deploy", "backup", "schema", "index", "export", "import", "queue", "worker", "token", "session", "build", "release", "migration", "test", "fixture", "logger", "metrics", "router", "handler", "client", "server", "upload", "download", "thumbnail", "sqlite", "docker", "nginx", "webhook", "scheduler", "billing", "invoice", "search", "auth", "login"]
ZH = ["数据库", "连接", "部署", "失败", "缓存", "配置", "登录", "测试", "迁移", "备份", "下载", "上传", "日志", "接口", "权限"]
PROJECTS = ("parsekit", "docs-site", "billing", "infra", "mobile-app", "data-pipeline", "blog", "crm")
SOURCES = ("cli", "cli", "cli", "telegram", "discord")
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def synthesise(out: Path, n: int, seed: int = 42) -> None:
    """``n`` session notes under ``out``, rendered and written as distill writes them."""
    from pipeline.models import Decision, Facts, Phase, Session, SessionSummary
    from pipeline.notes.render import render_note
    from pipeline.notes.store import NoteStore

    rng = random.Random(seed)

    def words(k: int, zh: bool = False) -> str:
        return ("".join if zh else " ".join)(rng.choice(ZH if zh else WORDS) for _ in range(k))

    with NoteStore(out, autosave=False) as store:
        for i in range(n):
            zh = i % 10 == 0
            start = EPOCH + timedelta(hours=i * 3, minutes=rng.randrange(60))
            sid = f"{start:%Y%m%d_%H%M%S}_{rng.randrange(16**6):06x}"
            files = tuple(f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py" for _ in range(rng.randrange(1, 6)))
            summary = SessionSummary(
                title=words(4, zh).capitalize(),
                goal=words(14, zh) + ("。" if zh else "."),
                phases=tuple(Phase(title=words(5, zh), asks=(words(12, zh),), done=words(30, zh),
                                   outcome=rng.choice(("done", "partial", "failed"))) for _ in range(rng.randrange(1, 5))),
                decisions=tuple(Decision(choice=words(10, zh), rationale=words(8, zh)) for _ in range(rng.randrange(0, 4))),
                output_files=files,
                open_items=tuple(words(8, zh) for _ in range(rng.randrange(0, 3))),
                end_state=rng.choice(("resolved", "resolved", "unresolved", "failed", "unknown")),
                language="zh" if zh else "en",
                tags=tuple(rng.sample(WORDS, 2)),
                projects=(rng.choice(PROJECTS),),
            )
            session = Session(id=sid, source=rng.choice(SOURCES), title=summary.title, model="anthropic/claude-sonnet-4.5",
                              started_at=start, ended_at=start + timedelta(minutes=rng.randrange(5, 120)),
                              cost_usd=round(rng.random() * 2, 4), input_tokens=rng.randrange(10**5))
            facts = Facts(message_count=rng.randrange(4, 200), language="zh" if zh else "en")
            store.write(render_note(session, summary, facts, content_hash=f"sha256:{i}", distilled_at=EPOCH))


def edit_like_a_person(out: Path, notes: list[Path], rng: random.Random) -> None:
    """Obsidian-style edits, in place: a tag added to the properties and a line under Notes."""
    for path in notes:
        text = path.read_text(encoding="utf-8")
        head, sep, body = text.partition("\n---\n")
        with path.open("w", encoding="utf-8") as fh:  # same inode, new mtime: as an editor saves
            fh.write(head + f"\n- reviewed-{rng.randrange(100)}" + sep + body + f"\nchecked on {rng.random():.6f}\n")


def _cpu() -> float:
    """CPU seconds of this process and its finished children: on a shared machine, wall time also
    counts the other processes' turns; CPU time is what the command itself costs."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn: Callable[[], Any], repeat: int) -> tuple[tuple[float, float], Any]:
    """((median wall s, median CPU s), last result) of ``repeat`` calls."""
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        started, cpu = time.perf_counter(), _cpu()
        result = fn()
        walls.append(time.perf_counter() - started)
        cpus.append(_cpu() - cpu)
    return (statistics.median(walls), statistics.median(cpus)), result


def ms(t: tuple[float, float]) -> str:
    return f"{t[0] * 1000:.0f} | {t[1] * 1000:.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evals.bench_archive", description=__doc__.split("\n")[0])
    ap.add_argument("--notes", type=int, default=2000)
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)

    from pipeline.archive.index import open_index
    from pipeline.archive.query import Filters, list_notes, search

    rows: list[tuple[str, str, str]] = []
    tmp = Path(tempfile.mkdtemp(prefix="bench-archive-"))
    try:
        out = tmp / "archive"
        started = time.perf_counter()
        synthesise(out, args.notes)
        print(f"synthesised {args.notes} notes in {time.perf_counter() - started:.1f}s", file=sys.stderr)

        def ls() -> Any:
            index, stats = open_index(out)
            try:
                return stats, list_notes(index, Filters(projects=("billing",)), limit=50)
            finally:
                index.close()

        def find() -> Any:
            index, stats = open_index(out)
            try:
                return stats, search(index, "deploy retry webhook", limit=10)
            finally:
                index.close()

        cold, (stats, _) = timed(ls, 1)
        rows.append(("(a) index built from nothing, then ls", ms(cold), f"read {stats.read} notes"))
        for label, fn in (("(b) ls --project billing, warm", ls), ("(c) search 'deploy retry webhook', warm", find)):
            t, (stats, _) = timed(fn, args.repeat)
            rows.append((label, ms(t), f"read {stats.read} of {stats.scanned}"))

        rng = random.Random(7)
        notes = sorted(p for p in out.rglob("*.md") if ".distill" not in p.parts)
        for label, fn in ((f"(d) ls after a person edited {args.edits} notes", ls),
                          (f"(e) search after a person edited {args.edits} notes", find)):
            samples = []
            for _ in range(args.repeat):
                edit_like_a_person(out, rng.sample(notes, args.edits), rng)
                t, (stats, _) = timed(fn, 1)
                assert stats.read == args.edits, stats  # the incremental promise: only the changed notes
                samples.append(t)
            median = (statistics.median(x[0] for x in samples), statistics.median(x[1] for x in samples))
            rows.append((label, ms(median), f"read {stats.read} of {stats.scanned}"))

        env = {**os.environ, "HOME": str(tmp), "DISTILL_NO_QUICK": "1"}
        exe = str(Path(sys.executable).with_name("distill"))
        for label, cmd in (("(f) distill ls --limit 20, end to end", [exe, "ls", "--out", str(out), "--limit", "20"]),
                           ("(f) distill search 'deploy retry', end to end", [exe, "search", "deploy retry", "--out",
                                                                               str(out)])):
            t, _ = timed(lambda c=cmd: subprocess.run(c, env=env, capture_output=True, text=True, check=True), args.repeat)
            rows.append((label, ms(t), "Python start + imports + query"))

        from pipeline.archive.versions import checkpoint

        everything = [p.relative_to(out).as_posix() for p in notes]  # what a first run names as written
        t, done = timed(lambda: checkpoint(out, everything), 1)
        rows.append((f"(g) first commit of {args.notes} notes (git init + plumbing)", ms(t),
                     f"{len(done.paths)} files"))
        changed = rng.sample(notes, args.edits)
        for path in changed:
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace("version: 1", "version: 2", 1) + "\nre-rendered\n", encoding="utf-8")
        t, done = timed(lambda: checkpoint(out, [p.relative_to(out).as_posix() for p in changed]), 1)
        rows.append((f"(g) a run's commit of {args.edits} re-rendered notes", ms(t),
                     f"{len(done.paths)} files"))
        target = notes[3].relative_to(out).as_posix()
        t, _proc = timed(lambda: subprocess.run([exe, "tag", target, "+benchmarked", "--out", str(out)], env=env,
                                               capture_output=True, text=True, check=True), 1)
        rows.append(("(h) distill tag ID +tag, end to end (edit, commit)", ms(t), "one note"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    width = max(len(r[0]) for r in rows)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; wall and CPU ms, medians of {args.repeat}")
    print(f"| {'step'.ljust(width)} | wall ms | CPU ms | |")
    print(f"|{'-' * (width + 2)}|---:|---:|---|")
    for label, t, note in rows:
        print(f"| {label.ljust(width)} | {t} | {note} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
