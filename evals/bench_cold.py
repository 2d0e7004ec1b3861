"""Cold-storage benchmark: archive, prune and pull a big Hermes database, and check the round trip.

    .venv/bin/python evals/bench_cold.py --db evals/big/state-h19-2000.db [--hermes-sample 40]

On a copy of ``--db`` in a temp ``HERMES_HOME`` (the original is never written), with the installed
``distill`` console script, each step in its own process:

1. ``distill --all`` (every source): the notes archive needs, timed apart so (2) is the sidecars alone;
2. ``distill archive --all``: one sidecar per lineage, the database only read;
3. ``distill archive --all --prune --via sqlite``: each sidecar read back, compared row for row inside
   the delete transaction, rows deleted;
4. ``distill pull`` of every pruned lineage (one process, one transaction per lineage);
5. the round trip: every row of every table of the restored database against the original, and
   SQLite's FTS5 ``integrity-check`` on every full-text index;
6. ``--via hermes`` (``hermes sessions delete`` per session) on ``--hermes-sample`` lineages of a fresh
   copy, when a Hermes matching the database's schema is installed: its cost per session.

Then sizes: the database before and after (pages in use, ``VACUUM INTO`` of the pruned file), the raw
row data (text and blob bytes, 8 per number) against the sidecars, and the same rows compressed by
zstd at three levels and by gzip (compressed in this process from the sidecars' own content).

Prints a Markdown table; wall time and peak RSS are the child's own (``RUSAGE_CHILDREN`` read in a
wrapper that runs exactly one child). Stdlib only, plus zstandard (a distill dependency).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DISTILL = Path(sys.executable).with_name("distill")
SOURCES = ["--source", "cli", "--source", "telegram", "--source", "cron", "--source", "tool", "--source", "subagent"]

WRAPPER = r"""
import json, resource, subprocess, sys, time
report, cmd = sys.argv[1], sys.argv[2:]
t = time.perf_counter()
p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(report, "w") as fh:
    json.dump({"wall_s": wall, "maxrss_kb": ru.ru_maxrss, "rc": p.returncode,
               "stdout": p.stdout.decode("utf-8", "replace"), "stderr": p.stderr[-3000:].decode("utf-8", "replace")}, fh)
"""


def timed(cmd: list[str], env: dict[str, str], tmp: Path) -> dict:
    report = tmp / f"run-{time.monotonic_ns()}.json"
    subprocess.run([sys.executable, "-c", WRAPPER, str(report), *cmd], env=env, check=True)
    out = json.loads(report.read_text())
    if out["rc"] != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out['rc']}): {out['stderr']}")
    return out


def table_rows(db: Path) -> dict[str, list]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.text_factory = bytes
    try:
        names = [r[0].decode() for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n: sorted(con.execute(f'SELECT * FROM "{n}"').fetchall(), key=repr)
                for n in names if not n.startswith(("messages_fts", "sqlite_"))}
    finally:
        con.close()


def fts_check(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%fts5%'")]
        for name in names:
            con.execute(f"INSERT INTO {name}({name}) VALUES('integrity-check')")
        return len(names)
    finally:
        con.close()


def schema_version(db: Path) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT MAX(version) FROM schema_version").fetchone()[0])
    finally:
        con.close()


def mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def codecs(sidecars: list[Path]) -> list[tuple[str, int, float]]:
    """Total size and time of the sidecars' content under each codec (one file per lineage, as stored)."""
    import zstandard

    texts = []
    for p in sidecars:
        blob = p.read_bytes()
        texts.append(zstandard.ZstdDecompressor().decompress(blob) if blob[:4] == b"\x28\xb5\x2f\xfd"
                     else gzip.decompress(blob))
    out = [("none (JSON lines)", sum(map(len, texts)), 0.0)]
    for level in (3, 10, 19):
        comp = zstandard.ZstdCompressor(level=level, write_checksum=True)
        t = time.perf_counter()
        size = sum(len(comp.compress(x)) for x in texts)
        out.append((f"zstd -{level}", size, time.perf_counter() - t))
    t = time.perf_counter()
    size = sum(len(gzip.compress(x, 9, mtime=0)) for x in texts)
    out.append(("gzip -9", size, time.perf_counter() - t))
    return out


def hermes_venv(version: int) -> Path | None:
    names = ("HERMES_IOT_PYTHON", ".venv-hermes-iot") if version >= 30 else ("HERMES_PYTHON", ".venv-hermes")
    for c in (os.environ.get(names[0], ""), str(ROOT / names[1] / "bin/python")):
        if c and Path(c).exists():
            return Path(c).parent
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--hermes-sample", type=int, default=40, help="lineages to prune through `hermes sessions delete`")
    args = ap.parse_args()
    rows_out: list[tuple[str, str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmpdir:
        tmp = Path(tmpdir)
        home = tmp / "hermes"
        home.mkdir()
        db = home / "state.db"
        shutil.copyfile(args.db, db)
        original = tmp / "original.db"
        shutil.copyfile(args.db, original)
        env = {"HOME": str(tmp), "PATH": f"{DISTILL.parent}:/usr/bin:/bin", "LANG": "C.UTF-8",
               "HERMES_HOME": str(home), "DISTILL_EMBEDDED": "0"}
        con = sqlite3.connect(f"file:{original}?mode=ro", uri=True)
        n_sessions, n_messages = (con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("sessions", "messages"))
        con.close()

        r = timed([str(DISTILL), "--all", *SOURCES, "--summarizer", "extractive", "-q"], env, tmp)
        rows_out.append(("notes first (`distill --all`, every source)", f"{r['wall_s']:.1f}", f"{r['maxrss_kb'] / 1024:.0f}", ""))

        r = timed([str(DISTILL), "archive", "--all", *SOURCES, "--json"], env, tmp)
        archived = json.loads(r["stdout"])
        ok = [x for x in archived["results"] if x["status"] == "archived"]
        rows_out.append(("`archive --all` (sidecars, db read-only)", f"{r['wall_s']:.1f}", f"{r['maxrss_kb'] / 1024:.0f}",
                         f"{len(ok)} lineages, {sum(len(x['sessions']) for x in ok)} sessions"))

        r = timed([str(DISTILL), "archive", "--all", *SOURCES, "--prune", "--via", "sqlite", "--json"], env, tmp)
        pruned_report = json.loads(r["stdout"])
        pruned = [x for x in pruned_report["results"] if x["status"] == "pruned"]
        refused = [x for x in pruned_report["results"] if x["status"] == "refused"]
        deleted: dict[str, int] = {}
        for x in pruned:
            for t, n in x["deleted"].items():
                deleted[t] = deleted.get(t, 0) + n
        rows_out.append(("`archive --all --prune --via sqlite` (read back, compare, delete)", f"{r['wall_s']:.1f}",
                         f"{r['maxrss_kb'] / 1024:.0f}",
                         f"{len(pruned)} lineages pruned ({deleted.get('sessions', 0)} sessions, "
                         f"{deleted.get('messages', 0)} messages), {len(refused)} refused (live or recent)"))
        before, after = pruned_report["before"], pruned_report["after"]
        vac = tmp / "vacuumed.db"
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        con.execute("VACUUM INTO ?", (str(vac),))
        con.close()
        vac_size = vac.stat().st_size
        # What `hermes sessions optimize` (FTS 'optimize', then VACUUM) gets back: FTS5 keeps deleted
        # entries in its segments until they are merged, which Hermes also does every 1,000 writes.
        opt = tmp / "optimized.db"
        shutil.copyfile(vac, opt)
        con = sqlite3.connect(opt)
        for (name,) in con.execute("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%fts5%'").fetchall():
            con.execute(f"INSERT INTO {name}({name}) VALUES('optimize')")
        con.commit()
        con.execute("VACUUM")
        con.close()
        opt_size = opt.stat().st_size
        sidecars = sorted((home / "distilled").rglob("*.hermes.jsonl.zst"))
        side_bytes = sum(p.stat().st_size for p in sidecars)
        data_bytes = sum(x["data_bytes"] for x in ok)

        r = timed([str(DISTILL), "pull", *[x["root"] for x in pruned], "--json"], env, tmp)
        rows_out.append((f"`pull` of the {len(pruned)} pruned lineages (one process)", f"{r['wall_s']:.1f}",
                         f"{r['maxrss_kb'] / 1024:.0f}", ""))
        t = time.perf_counter()
        same = table_rows(db) == table_rows(original)
        n_fts = fts_check(db)
        rows_out.append(("round-trip check (every row of every table; FTS integrity-check)",
                         f"{time.perf_counter() - t:.1f}", "",
                         f"{'identical' if same else 'DIFFERENT'}; {n_fts} FTS indexes consistent"))

        hermes_line = None
        venv = hermes_venv(schema_version(original))
        if venv is not None and (venv / "hermes").exists() and args.hermes_sample:
            home2 = tmp / "hermes2"
            home2.mkdir()
            shutil.copyfile(original, home2 / "state.db")
            shutil.copytree(home / "distilled", home2 / "distilled")
            env2 = {**env, "HERMES_HOME": str(home2), "PATH": f"{DISTILL.parent}:{venv}:/usr/bin:/bin"}
            sample = [x["root"] for x in ok[: args.hermes_sample]]
            r = timed([str(DISTILL), "archive", *sample, *SOURCES, "--prune", "--via", "hermes", "--json"], env2, tmp)
            rep = json.loads(r["stdout"])
            n = sum(len(x["sessions"]) for x in rep["results"] if x["status"] == "pruned")
            hermes_line = (f"`archive --prune --via hermes`, {len(sample)} lineages", f"{r['wall_s']:.1f}",
                           f"{r['maxrss_kb'] / 1024:.0f}", f"{n} sessions, {r['wall_s'] / max(n, 1):.2f} s per session")
            rows_out.append(hermes_line)
        table = codecs(sidecars)

    print(f"# bench_cold: {args.db.name} ({n_sessions} sessions, {n_messages} messages, schema v{schema_version(args.db)})\n")
    print("| step | wall s | peak RSS MB | result |\n|---|---:|---:|---|")
    for step, wall, rss, note in rows_out:
        print(f"| {step} | {wall} | {rss} | {note} |")
    print("\n| size | bytes |\n|---|---:|")
    print(f"| state.db file before | {mb(before['file_bytes'])} |")
    print(f"| pages in use before → after prune | {mb((before['pages'] - before['free_pages']) * before['page_size'])} → "
          f"{mb((after['pages'] - after['free_pages']) * after['page_size'])} |")
    print(f"| `VACUUM INTO` copy of the pruned db | {mb(vac_size)} |")
    print(f"| the same after an FTS merge (what `hermes sessions optimize` does) | {mb(opt_size)} |")
    print(f"| raw row data archived (text/blob bytes, 8 per number) | {mb(data_bytes)} |")
    print(f"| sidecars ({len(sidecars)} files, zstd -10) | {mb(side_bytes)} ({side_bytes / data_bytes:.3f} of raw) |")
    print("\n| codec | total bytes | / raw row data | compress s |\n|---|---:|---:|---:|")
    for name, size, secs in table:
        print(f"| {name} | {mb(size)} | {size / data_bytes:.3f} | {secs:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
