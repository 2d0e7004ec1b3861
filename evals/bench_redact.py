"""How fast redaction is, on real transcripts: every text field of every session, best of N runs.

    .venv/bin/python evals/bench_redact.py                     # the redactor in this checkout
    .venv/bin/python evals/bench_redact.py --impl /tmp/old.py  # another redact.py, same texts

Texts are the sessions of ``../shared/agent-transcripts`` (34 MB of real Claude Code, Codex,
SpecStory, aider and Hermes transcripts) and of the fixture databases, read by distill's own
readers; each is redacted field by field, as ``redact_session`` does in a run. Prints one table row:
sessions, MB of text, CPU seconds (best run), MB/s and ms per session, plus how many texts changed.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
TRANSCRIPTS = ROOT.parent / "shared" / "agent-transcripts"
DBS = [ROOT / "fixtures" / "hermes" / "state-v31.db", ROOT / "fixtures" / "hermes" / "state-v22.db",
       ROOT / "fixtures" / "demo" / "state.db"]


def texts_by_session() -> list[list[str]]:
    """Every string ``redact_session`` would redact, grouped by session."""
    from pipeline.facts.derive import arg_strings
    from pipeline.read.detect import read_sessions as read_files
    from pipeline.read.hermes import read_sessions as read_db

    sessions = []
    if TRANSCRIPTS.is_dir():
        for path in sorted(p for p in TRANSCRIPTS.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".md", ".json")):
            if path.name in ("README.md", "FORMATS.md"):
                continue
            try:
                sessions.extend(read_files(path, None))
            except Exception:
                continue
    for db in DBS:
        sessions.extend(read_db(db))
    out = []
    for s in sessions:
        texts = [s.title or ""]
        for m in s.messages:
            texts += [m.content, m.reasoning or "", m.carrier_summary or ""]
            for c in m.tool_calls:
                texts += arg_strings(c.arguments)
        out.append([t for t in texts if t])
    return out


def load_impl(path: Path | None) -> ModuleType:
    if path is None:
        import pipeline.redact as mod

        return mod
    spec = importlib.util.spec_from_file_location("redact_under_test", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def bench(impl: ModuleType, groups: list[list[str]], runs: int) -> tuple[float, int]:
    best = float("inf")
    changed = 0
    for _ in range(runs):
        t = time.process_time()
        changed = sum(impl.redact(text) != text for texts in groups for text in texts)
        best = min(best, time.process_time() - t)
    return best, changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", type=Path, help="a redact.py to time instead of this checkout's")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    groups = texts_by_session()
    impl = load_impl(args.impl)
    size = sum(len(t.encode("utf-8")) for g in groups for t in g) / 1e6
    secs, changed = bench(impl, groups, args.runs)
    print("| redactor | sessions | texts | MB | CPU s (best) | MB/s | ms/session | texts changed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    name = str(args.impl) if args.impl else "pipeline/redact.py"
    n = sum(len(g) for g in groups)
    print(f"| {name} | {len(groups)} | {n} | {size:.1f} | {secs:.3f} | {size / secs:.1f} | "
          f"{1000 * secs / len(groups):.2f} | {changed} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
