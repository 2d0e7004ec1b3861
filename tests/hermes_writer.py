"""A live Hermes writer for concurrency tests: keeps appending to a session through the real SessionDB.

Run under a Hermes Python (hermes-agent 0.19.0 uses WAL, which is the interesting case for a concurrent
reader; the iot build works too, in journal_mode=delete)::

    HERMES_HOME=$(mktemp -d) .venv-hermes/bin/python tests/hermes_writer.py --db /tmp/state.db \
        --session 20261201_120000_live01 --seconds 5

Every turn is one user row, an assistant row with a terminal tool call, the tool result and a final
assistant row, written the way the agent flushes them. Halfway through (``--compact-at``) it performs one
in-place compaction (``archive_and_compact``: head copy + carrier + tail copy). On exit it prints one JSON
object with counts and exits 0; any Hermes error propagates (non-zero exit) so the test sees it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures"))


class WallClock:
    """The driver's clock interface over real time: a concurrency test wants real timestamps."""

    def __call__(self) -> float:
        return time.time()

    def advance(self, seconds: float) -> float:
        return time.time()

    def jump_to(self, epoch: float) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--session", required=True)
    ap.add_argument("--seconds", type=float, required=True, help="how long to keep writing")
    ap.add_argument("--compact-at", type=float, default=0.5, help="fraction of --seconds at which to compact")
    ap.add_argument("--pause", type=float, default=0.02, help="sleep between turns (s)")
    args = ap.parse_args(argv)
    if not os.environ.get("HERMES_HOME"):
        print("set HERMES_HOME to a temp dir: Hermes writes a home skeleton on import", file=sys.stderr)
        return 2

    from hermes_driver import Hermes, terminal_output

    h = Hermes(args.db, WallClock())  # type: ignore[arg-type]
    started = time.monotonic()
    deadline = started + args.seconds
    compact_after = started + args.seconds * args.compact_at
    h.session(args.session, "cli", model="test/live-writer", cwd="/tmp/live")
    first: list[dict] = []
    last: list[dict] = []
    turns = appended = compactions = 0
    while time.monotonic() < deadline:
        turns += 1
        call = h.call("terminal", command=f"echo turn {turns}")
        last = h.append(
            args.session,
            [
                h.user(f"Live turn {turns}: run echo."),
                h.assistant(f"Running turn {turns}.", tool_calls=[call]),
                h.result(call, terminal_output(f"turn {turns}")),
                h.assistant(f"Turn {turns} done."),
            ],
        )
        first = first or last
        appended += len(last)
        if not compactions and time.monotonic() >= compact_after and turns >= 2:
            summary = f"## Goal\nKeep a live session going.\n\n## Completed Actions\n- {turns} echo turns"
            h.compact_in_place(args.session, first[:1], h.carrier(summary, "assistant"), last)
            compactions += 1
        time.sleep(args.pause)
    h.end(args.session, "user_exit")
    live = len(h.db.get_messages(args.session))
    h.close()
    print(
        json.dumps(
            {
                "session": args.session,
                "turns": turns,
                "appended": appended,
                "compactions": compactions,
                "live_rows": live,
                "elapsed_s": round(time.monotonic() - started, 3),
                "schema_version": h.schema_version(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
