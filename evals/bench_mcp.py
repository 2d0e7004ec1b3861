"""Latency of ``distill mcp``'s ``search_sessions`` on a 2,000-note archive: ``python -m evals.bench_mcp``.

The archive is ``evals.bench_archive.synthesise``'s (2,000 notes by the real renderer and note store,
a tenth in Chinese) with its index built once by ``distill index``, as a user's archive has it. Then
the installed ``distill mcp --out <archive>`` is started once under the MCP SDK's stdio client, as
Hermes or Claude Code start it, and timed from the client's side:

* start: spawning the server until ``initialize`` is answered;
* the first ``search_sessions`` call (the archive and query modules load on first use);
* ``--calls`` warm calls, cycling through ``QUERIES`` (half of them with a project filter): median,
  p95 and max wall time per call, and the server's CPU time per call, read from ``/proc`` (on a
  shared machine wall time also counts other processes' turns; CPU time is what the call costs);
* for comparison, ``list_sessions`` and ``load_session`` warm medians.

Every call refreshes the index as every distill command does (a ``stat`` of each note, none read),
so a note written while the server runs is found by the next call. The table is printed; nothing is
written to the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

QUERIES = ("deploy retry webhook", "sqlite migration schema", "auth login token", "数据库连接失败",
           "billing invoice export", "nginx docker release", "thumbnail upload worker", "parser config cache")


def _server_cpu(marker: str) -> float:
    """CPU seconds so far of the ``distill mcp`` process serving ``marker`` (its archive path)."""
    tick = os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"mcp" not in cmdline or marker.encode() not in cmdline:
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        return (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return float("nan")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


async def _bench(out: Path, env: dict[str, str], calls: int) -> list[tuple[str, str, str, str]]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    exe = str(Path(sys.executable).with_name("distill"))
    params = StdioServerParameters(command=exe, args=["mcp", "--out", str(out)], env=env)
    rows: list[tuple[str, str, str, str]] = []
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        rows.append(("server start until initialize answered", f"{(time.perf_counter() - started) * 1000:.0f}", "",
                     "Python start + imports"))

        async def call(name: str, args: dict[str, Any]) -> tuple[float, str]:
            t = time.perf_counter()
            result = await session.call_tool(name, args)
            wall = time.perf_counter() - t
            text = result.content[0].text
            assert not result.is_error, text
            return wall, text

        cpu = _server_cpu(str(out))
        wall, text = await call("search_sessions", {"query": QUERIES[0]})
        hits = len(json.loads(text)["hits"])
        rows.append(("search_sessions, first call", f"{wall * 1000:.0f}", f"{(_server_cpu(str(out)) - cpu) * 1000:.0f}",
                     f"{hits} hits"))

        walls: list[float] = []
        sizes: list[int] = []
        cpu = _server_cpu(str(out))
        for i in range(calls):
            args: dict[str, Any] = {"query": QUERIES[i % len(QUERIES)]}
            if i % 2:
                args["projects"] = ["billing"]
            wall, text = await call("search_sessions", args)
            walls.append(wall)
            sizes.append(len(text))
        per_call = (_server_cpu(str(out)) - cpu) / calls
        rows.append((f"search_sessions, warm: median of {calls}", f"{statistics.median(walls) * 1000:.1f}",
                     f"{per_call * 1000:.1f}", f"results {min(sizes):,}-{max(sizes):,} characters"))
        rows.append((f"search_sessions, warm: p95 of {calls}", f"{percentile(walls, 95) * 1000:.1f}", "", ""))
        rows.append((f"search_sessions, warm: max of {calls}", f"{max(walls) * 1000:.1f}", "", ""))

        for label, name, args in (("list_sessions limit 20, warm", "list_sessions", {"limit": 20}),
                                  ("load_session of a query, warm", "load_session", {"refs": [QUERIES[0]]})):
            samples = [(await call(name, args))[0] for _ in range(max(5, calls // 10))]
            rows.append((f"{label}: median of {len(samples)}", f"{statistics.median(samples) * 1000:.1f}", "", ""))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evals.bench_mcp", description=__doc__.split("\n")[0])
    ap.add_argument("--notes", type=int, default=2000)
    ap.add_argument("--calls", type=int, default=100, help="warm search_sessions calls")
    ap.add_argument("--archive", type=Path, help="reuse (or keep) the synthesised archive in this folder")
    args = ap.parse_args(argv)

    import anyio

    from evals.bench_archive import synthesise

    tmp = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    out = args.archive or tmp / "archive"
    env = {"HOME": str(tmp), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "DISTILL_EMBEDDED": "0"}
    try:
        if not (out / ".distill").is_dir():
            started = time.perf_counter()
            synthesise(out, args.notes)
            print(f"synthesised {args.notes} notes in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        exe = str(Path(sys.executable).with_name("distill"))
        subprocess.run([exe, "index", "--out", str(out)], env=env, check=True, capture_output=True, text=True)
        rows = anyio.run(_bench, out, env, args.calls)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    width = max(len(r[0]) for r in rows)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.notes} notes; client-side wall ms, "
          "server CPU ms per call")
    print(f"| {'step'.ljust(width)} | wall ms | server CPU ms | |")
    print(f"|{'-' * (width + 2)}|---:|---:|---|")
    for label, wall, cpu, note in rows:
        print(f"| {label.ljust(width)} | {wall} | {cpu} | {note} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
