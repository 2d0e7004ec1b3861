"""Generate a big, realistic state.db for benchmarks with the real Hermes ``SessionDB``.

    HERMES_HOME=$(mktemp -d) .venv-hermes/bin/python evals/gen_big.py --sessions 2000 \
        --out evals/big/state-2000.db

Shape (like hermes-real-data.md §3.4): ~50 messages per session in agent turns (user, assistant with 1-3
tool calls, tool results, final assistant), one ``append_messages_batch`` per turn where the API has it
(iot), else ``append_message`` per row (0.19.0); one ``update_token_counts`` per turn; LLM titles; 98% ended.
Mix: 70% cli, 20% telegram, 5% cron, 3% subagent, 2% tool; 3% of sessions get an in-place compaction and
2% a rotation (compression child). Deterministic for a given --seed and --sessions. evals/big/ is gitignored.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fixtures"))

from hermes_driver import epoch, terminal_output, tidy  # noqa: E402

MODEL = "anthropic/claude-sonnet-4.5"
WORDS = [
    "parser",
    "config",
    "cache",
    "retry",
    "deploy",
    "backup",
    "schema",
    "index",
    "export",
    "import",
    "queue",
    "worker",
    "token",
    "session",
    "build",
    "release",
    "migration",
    "test",
    "fixture",
    "logger",
    "metrics",
    "router",
    "handler",
    "client",
    "server",
    "upload",
    "download",
    "thumbnail",
]
TOOLS = ("terminal", "read_file", "write_file", "patch", "search_files")
SOURCES = (("cli", 70), ("telegram", 20), ("cron", 5), ("subagent", 3), ("tool", 2))


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def tool_call(h, rng: random.Random) -> dict:
    name = rng.choice(TOOLS)
    path = f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py"
    args = {
        "terminal": {"command": f"pytest tests/test_{rng.choice(WORDS)}.py -q"},
        "read_file": {"path": path},
        "write_file": {"path": path, "content": sentence(rng, 12)},
        "patch": {"path": path, "old_string": rng.choice(WORDS), "new_string": rng.choice(WORDS)},
        "search_files": {"pattern": rng.choice(WORDS), "path": "src"},
    }[name]
    return h.call(name, **args)


def tool_result(rng: random.Random, call: dict) -> str:
    name = call["function"]["name"]
    if name == "terminal":
        return terminal_output("\n".join(sentence(rng, 8) for _ in range(rng.randint(2, 20))))
    if name == "read_file":
        return "\n".join(f"def {rng.choice(WORDS)}_{i}(x):\n    return x" for i in range(rng.randint(5, 60)))
    return json.dumps({"success": True})


def turn(h, rng: random.Random) -> list[dict]:
    calls = [tool_call(h, rng) for _ in range(rng.randint(1, 3))]
    msgs = [h.user(sentence(rng, rng.randint(6, 30)), gap=rng.uniform(10, 120))]
    msgs.append(h.assistant(sentence(rng, 10), tool_calls=calls, gap=rng.uniform(2, 10)))
    msgs += [h.result(c, tool_result(rng, c), gap=rng.uniform(0.2, 5)) for c in calls]
    # Two rounds of tools in about a third of turns, to vary the turn length around the ~50 message target.
    if rng.random() < 0.35:
        more = [tool_call(h, rng) for _ in range(rng.randint(1, 2))]
        msgs.append(h.assistant(sentence(rng, 8), tool_calls=more, gap=rng.uniform(2, 8)))
        msgs += [h.result(c, tool_result(rng, c), gap=rng.uniform(0.2, 5)) for c in more]
    msgs.append(h.assistant(sentence(rng, rng.randint(15, 60)), gap=rng.uniform(2, 15)))
    return msgs


def usage(h, sid: str, rng: random.Random) -> None:
    inp, out = rng.randint(2000, 30000), rng.randint(50, 1500)
    h.usage(
        sid,
        input_tokens=inp,
        output_tokens=out,
        model=MODEL,
        billing_provider="openrouter",
        estimated_cost_usd=round(inp * 3e-6 + out * 15e-6, 6),
        cost_status="estimated",
        api_call_count=3,
    )


def build(out: Path, sessions: int, seed: int) -> None:
    from hermes_driver import Hermes, install_determinism

    start = epoch("2026-10-03 08:00:00")
    clock = install_determinism(start, seed)
    rng = random.Random(seed)
    h = Hermes(out, clock)
    span = 55 * 86400 / max(sessions, 1)
    weights = [w for _, w in SOURCES]
    last_cli: str | None = None
    t0 = time.monotonic()
    try:
        for i in range(sessions):
            clock.jump_to(start + i * span)
            source = rng.choices([s for s, _ in SOURCES], weights)[0]
            stamp = time.strftime("%Y%m%d_%H%M%S", time.gmtime(clock.now))
            sid = (
                f"cron_{rng.getrandbits(32):08x}_{stamp}"
                if source == "cron"
                else f"{stamp}_{rng.getrandbits(24):06x}"
            )
            kw: dict = {
                "model": MODEL,
                "system_prompt": "You are Hermes.",
                "cwd": f"/home/dev/src/{rng.choice(WORDS)}",
            }
            if source == "subagent" and last_cli:
                kw.update(parent_session_id=last_cli, model_config={"_delegate_from": last_cli})
            h.session(sid, source, **kw)
            target = rng.randint(40, 60)
            written: list[dict] = []
            turns: list[list[dict]] = []
            kind = rng.random()
            while len(written) < target:
                t = h.append(sid, turn(h, rng))
                written += t
                turns.append(t)
                usage(h, sid, rng)
                if kind < 0.03 and len(turns) == 3:
                    carrier = h.carrier(
                        f"## Goal\n{sentence(rng, 12)}\n\n## Completed Actions\n- {sentence(rng, 8)}",
                        "assistant",
                    )
                    h.compact_in_place(sid, turns[0][:1], carrier, turns[-1])
            if source != "cron":
                h.title(sid, f"{sentence(rng, 5)[:-1]} #{i}", auto=True)
            if 0.03 <= kind < 0.05 and source in ("cli", "telegram"):
                child = (
                    f"{time.strftime('%Y%m%d_%H%M%S', time.gmtime(clock.now + 1))}_{rng.getrandbits(24):06x}"
                )
                carrier = h.carrier(f"## Goal\n{sentence(rng, 12)}", "user")
                h.rotate(sid, child, source, [carrier, *h.copies(turns[-1][-1:])], **kw)
                h.append(child, turn(h, rng))
                sid = child
            if rng.random() < 0.98:
                h.end(sid, "cron_complete" if source == "cron" else "user_exit")
            if source == "cli":
                last_cli = sid
            if (i + 1) % 100 == 0:
                rate = (i + 1) / (time.monotonic() - t0)
                print(f"{i + 1}/{sessions} sessions, {rate:.1f}/s", file=sys.stderr, flush=True)
    finally:
        h.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=2000)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--force", action="store_true", help="replace --out if it exists")
    ap.add_argument("--in-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.in_child:
        build(args.out, args.sessions, args.seed)
        return 0
    if args.out.exists():
        if not args.force:
            ap.error(f"{args.out} exists (use --force)")
        for side in ("", "-wal", "-shm"):
            Path(str(args.out) + side).unlink(missing_ok=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    cmd = [
        sys.executable,
        __file__,
        "--out",
        str(args.out),
        "--sessions",
        str(args.sessions),
        "--seed",
        str(args.seed),
        "--in-child",
    ]
    subprocess.run(cmd, check=True)
    tidy(args.out)
    import sqlite3

    con = sqlite3.connect(f"file:{args.out}?mode=ro", uri=True)
    n_s, n_m = con.execute(
        "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM messages)"
    ).fetchone()
    con.close()
    tidy(args.out)
    print(
        json.dumps(
            {
                "out": str(args.out),
                "sessions": n_s,
                "messages": n_m,
                "wall_s": round(time.monotonic() - t, 1),
                "bytes": args.out.stat().st_size,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
