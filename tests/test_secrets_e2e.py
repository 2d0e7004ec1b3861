"""Every secret format of the corpus, seeded into every field Hermes stores, reaches no file distill
writes (names included), no report and no log.

The database is the real-Hermes v31 fixture plus one session per secret: the secret sits in the
title, the system prompt (inline and in ``system_prompts``), a user turn, the assistant's reasoning
(both columns), a tool call's arguments, the tool's result, a Responses-API reply, a compaction
carrier and ``display_metadata``. Then the commands that write run as a user runs them.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.hostile_cases import V31, distill, report
from tests.secrets_corpus import ALL_SECRETS


def _seed(db: Path) -> list[str]:
    con = sqlite3.connect(db)
    ids = []
    for n, s in enumerate(ALL_SECRETS):
        sid = f"20261201_0900{n:02d}_sec{n:03d}"[:22] if n < 100 else f"20261201_09{n:04d}_sec{n:03d}"
        ids.append(sid)
        start = 1796115600.0 + n * 60
        con.execute("INSERT INTO system_prompts(hash, prompt) VALUES (?, ?)", (f"sp{n}", f"You are Hermes. {s.context}"))
        con.execute(
            "INSERT INTO sessions(id, source, model, started_at, ended_at, title, system_prompt, system_prompt_hash, "
            "cwd) VALUES (?, 'cli', 'anthropic/claude-sonnet-4.5', ?, ?, ?, ?, ?, '/home/ada/app')",
            (sid, start, start + 50, f"deploy: {s.context}", f"system: {s.context}", f"sp{n}"))
        args = json.dumps({"command": f"deploy --verbose; {s.context}", "env": {"NOTE": s.context}})
        call = json.dumps([{"id": f"c{n}", "type": "function", "function": {"name": "terminal", "arguments": args}}])
        codex = json.dumps([{"type": "message", "content": [{"type": "output_text", "text": f"Reply: {s.context}"}]}])
        rows = [
            ("user", f"Please deploy. My credentials:\n{s.context}", None, None, None, None, None, None),
            ("assistant", "Running the deploy.", call, None, f"thinking about {s.context}", s.context, None, None),
            ("tool", f"deploy log\n{s.context}\nexit 0", None, f"c{n}", None, None, None, None),
            ("assistant", "", None, None, None, None, codex, json.dumps({"note": s.context})),
            ("assistant", f"Done. Rotate the key shown above ({s.context}).", None, None, None, None, None, None),
        ]
        for i, (role, content, calls, call_id, reasoning, reasoning_content, items, meta) in enumerate(rows):
            con.execute(
                "INSERT INTO messages(session_id, role, content, tool_calls, tool_call_id, tool_name, timestamp, "
                "reasoning, reasoning_content, codex_message_items, display_metadata, active) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
                (sid, role, content, calls, call_id, "terminal" if role == "tool" else None, start + i, reasoning,
                 reasoning_content, items, meta))
    con.commit()
    con.close()
    return ids


def test_no_secret_reaches_any_file_report_or_log(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    db.write_bytes(V31.read_bytes())
    ids = _seed(db)
    out = tmp_path / "out"
    outputs = []
    p = distill(tmp_path, "--db", db, "--all", "--out", out, "--summarizer", "extractive", "--json")
    rep = report(p)
    assert all(r["status"] == "written" for r in rep["results"] if r["session_id"] in ids)
    outputs.append(p.stdout + p.stderr)
    # The commands that write more: a re-render, a promoted skill, candidates, and a human-readable run.
    for args in (["--db", db, "--all", "--out", out, "--summarizer", "extractive", "--force"],
                 [ids[0], "--db", db, "--out", out, "--summarizer", "extractive", "--promote-skill"],
                 ["skills", "candidates", "--out", out], ["skills", "pending", "--out", out]):
        p = distill(tmp_path, *args)
        assert "Traceback" not in p.stderr, p.stderr
        outputs.append(p.stdout + p.stderr)
    files = [f for f in tmp_path.rglob("*") if f.is_file() and f != db and not f.name.startswith("state.db")]
    assert len([f for f in files if f.suffix == ".md"]) >= len(ids)
    blobs = {f: f.read_bytes() for f in files}
    names = "\n".join(str(f.relative_to(tmp_path)) for f in files)
    leaks = []
    for s in ALL_SECRETS:
        needles = {s.secret, json.dumps(s.secret)[1:-1]}
        for needle in needles:
            raw = needle.encode("utf-8")
            leaks += [f"{s.kind} in {f.relative_to(tmp_path)}" for f, b in blobs.items() if raw in b]
            leaks += [f"{s.kind} in a file name" for _ in [1] if needle in names or needle.lower() in names]
            leaks += [f"{s.kind} in command output" for o in outputs if needle in o]
    assert not leaks, sorted(set(leaks))
