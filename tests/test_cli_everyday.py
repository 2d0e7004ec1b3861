"""Everyday use (issue 17), tested the way a user runs it: the installed ``distill`` in a subprocess
with the environment a shell gives (``tests/shell.py``), never the in-process app."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import frontmatter

from tests.shell import DISTILL, run_distill, user_env

ROOT = Path(__file__).resolve().parent.parent
V31 = ROOT / "fixtures" / "hermes" / "state-v31.db"
#: 12 logical sessions in the fixture, minus the subagent, cron and tool ones skipped by default.
DEFAULT_NOTES = 9


def _db(tmp_path: Path, fixture: Path = V31) -> Path:
    db = tmp_path / "state.db"
    shutil.copy(fixture, db)
    return db


def _imported(stderr: str, module: str) -> bool:
    """Whether ``PYTHONPROFILEIMPORTTIME`` output on stderr shows ``module`` imported."""
    return any(line.startswith("import time:") and line.split("|")[-1].strip() == module
               for line in stderr.splitlines())


def test_unchanged_rerun_is_answered_from_the_record_in_a_users_shell(tmp_path: Path) -> None:
    """README: an unchanged re-run prints the last report without importing pydantic (~50 ms)."""
    db = _db(tmp_path)
    args = ("--db", str(db), "--all", "--out", str(tmp_path / "notes"), "--summarizer", "extractive")
    env = {"PYTHONPROFILEIMPORTTIME": "1"}  # in both runs, as any variable a user's shell exports
    first = run_distill(*args, home=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    assert _imported(first.stderr, "pydantic")
    records = list((tmp_path / ".hermes" / "distill" / "runs").glob("*.json"))
    assert len(records) == 1
    again = run_distill(*args, home=tmp_path, env=env)
    assert again.returncode == 0, again.stderr
    assert not _imported(again.stderr, "pydantic"), "the re-run took the full path, not the record"
    assert f"{DEFAULT_NOTES} selected, 0 written, {DEFAULT_NOTES} unchanged" in again.stderr


def _keys(note: Path) -> list[str]:
    return list(frontmatter.load(note).metadata)


def test_rerender_keeps_the_frontmatter_key_order(tmp_path: Path) -> None:
    db, out = _db(tmp_path), tmp_path / "notes"
    args = ("--db", str(db), "--all", "--out", str(out), "--summarizer", "extractive")
    assert run_distill(*args, home=tmp_path).returncode == 0
    # Session notes only: projects/<name>.md are the archive's project index notes.
    notes = sorted(p for p in out.rglob("*.md") if p.relative_to(out).parts[0] not in ("projects", ".git"))
    first = {note: _keys(note) for note in notes}
    assert all(keys.index("aliases") == 3 for keys in first.values())  # type, id, title, aliases, ...
    note = notes[0]
    post = frontmatter.load(note)
    post["rating"] = 5  # a key of the user's own
    note.write_text(frontmatter.dumps(post) + "\n", "utf-8")
    edited = _keys(note)
    again = run_distill(*args, "--force", home=tmp_path)
    assert again.returncode == 0, again.stderr
    for path, keys in first.items():
        # The re-render edits distill's keys in place: the user's order, their key included, stays.
        assert _keys(path) == (edited if path == note else keys), path


# --------------------------------------------------------------------------- runs with a model

FAKE_LLAMA = Path(__file__).resolve().parent / "fake_llama"


def _local(tmp_path: Path, delay: float = 0.0) -> tuple[list[str], dict[str, str]]:
    """Arguments and environment for the embedded model, served by the fake runtime (``tests/fake_llama``:
    xllamacpp, ahead of the real one on the path; only the model is missing)."""
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")  # the fake runtime only checks the magic
    env = {"PYTHONPATH": str(FAKE_LLAMA), "FAKE_LLAMA_DELAY": str(delay)}
    return ["--local-model", str(gguf)], env


def _server_starts(tmp_path: Path) -> list[int]:
    """Pids of every fake llama.cpp server started under this HOME, from the log LocalServer keeps."""
    log = tmp_path / ".cache" / "hermes-distill" / "models" / "llama-server.log"
    text = log.read_text("utf-8") if log.exists() else ""
    return [int(line.split("pid ")[1].split()[0]) for line in text.splitlines() if "fake llama.cpp server started" in line]


def test_no_model_server_starts_for_an_empty_selection(tmp_path: Path) -> None:
    """A quiet day's nightly run (nothing since yesterday) must not start llama.cpp. A start attempt
    would show as the 'embedded model unavailable' notice: this 4-byte file is no model for llama.cpp."""
    db, (model, _) = _db(tmp_path), _local(tmp_path)  # no fake server on the path: llama.cpp is missing
    proc = run_distill("--db", str(db), "--since", "2099-01-01", *model, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "0 selected" in proc.stderr
    assert "embedded model unavailable" not in proc.stderr, proc.stderr


def test_no_model_server_starts_when_every_session_is_unchanged(tmp_path: Path) -> None:
    db, (model, env) = _db(tmp_path), _local(tmp_path)
    args = ("--db", str(db), "--all", "--out", str(tmp_path / "notes"), *model)
    first = run_distill(*args, home=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    assert f"{DEFAULT_NOTES} written" in first.stderr and "fallback" not in first.stderr
    assert len(_server_starts(tmp_path)) == 1
    again = run_distill(*args, home=tmp_path, env={**env, "DISTILL_NO_QUICK": "1"})  # the per-session check
    assert again.returncode == 0, again.stderr
    assert f"0 written, {DEFAULT_NOTES} unchanged" in again.stderr
    assert len(_server_starts(tmp_path)) == 1, "the server was started with nothing to summarise"


def _started(out: Path) -> dict[str, str]:
    """Session id → its note's ``started_at``. In the fixture, start order is also last-activity order."""
    metas = (frontmatter.load(p).metadata for p in out.rglob("*.md"))
    return {str(m["id"]): str(m["started_at"]) for m in metas if m.get("type") == "conversation"}


PROGRESS = re.compile(r"^(\d+)/(\d+) done, (\d+) left · (\d\S*) a session · (about \S+ left|done) · (\S+) (written|unchanged)$")


def test_model_run_says_its_plan_progress_and_usage_on_a_non_terminal(tmp_path: Path) -> None:
    """README: every run reports calls, tokens and cost; a model run shows progress even when stderr
    is a file (cron, a log), one line per session; the embedded model is named as local."""
    db, out, (model, env) = _db(tmp_path), tmp_path / "notes", _local(tmp_path)
    proc = run_distill("--db", str(db), "--all", "--out", str(out), *model, home=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == (f"{DEFAULT_NOTES} sessions need a summary from the local model qwen2.5-coder-1.5b-instruct "
                        "(llama.cpp on this machine), newest first.")
    assert any(line.startswith("Faster: a hosted model (--model ") and "--summarizer extractive" in line for line in lines)
    assert any(line.startswith("Ctrl-C stops;") for line in lines)
    progress = [m.groups() for m in map(PROGRESS.match, lines) if m]
    assert [(int(done), int(total), int(left)) for done, total, left, *_ in progress] == [
        (i, DEFAULT_NOTES, DEFAULT_NOTES - i) for i in range(1, DEFAULT_NOTES + 1)]
    started = _started(out)
    assert [sid for *_, sid, _ in progress] == sorted(started, key=started.__getitem__, reverse=True)  # newest first
    assert progress[-1][4] == "done" and all(p[4].startswith("about ") for p in progress[:-1])
    summary = re.fullmatch(
        rf"{DEFAULT_NOTES} selected, {DEFAULT_NOTES} written, 0 unchanged, 0 skipped, 0 failed \(local model "
        r"qwen2\.5-coder-1\.5b-instruct: (\d+) model calls, ([\d,]+) tokens in, ([\d,]+) out, \$0; [\d.]+s\) → .*",
        lines[-1])
    assert summary, lines[-1]
    calls, tokens_in, tokens_out = (int(g.replace(",", "")) for g in summary.groups())
    assert calls >= DEFAULT_NOTES and tokens_in > 0 and tokens_out > 0
    assert "openai" not in lines[-1]


def test_extractive_summary_line_reports_calls_tokens_and_cost(tmp_path: Path) -> None:
    proc = run_distill("--db", str(_db(tmp_path)), "--all", "--summarizer", "extractive", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(rf"{DEFAULT_NOTES} selected, {DEFAULT_NOTES} written, 0 unchanged, 0 skipped, 0 failed "
                        r"\(extractive: 0 model calls, 0 tokens in, 0 out, \$0; [\d.]+s\) → .*",
                        proc.stderr.splitlines()[-1])
    assert "need a summary" not in proc.stderr  # no model, no plan or progress


def test_ctrl_c_says_what_is_kept_stops_the_server_and_the_same_command_goes_on(tmp_path: Path) -> None:
    db, out, (model, env) = _db(tmp_path), tmp_path / "notes", _local(tmp_path, delay=1.5)
    # One call at a time: notes land one by one, so the first note leaves the others to interrupt (with
    # four at once they could all land before the signal, on a busy machine). Since a one-chunk session is one
    # call, a short delay let the rest finish before the signal arrived: 1.5 s a call leaves seconds.
    cmd = [str(DISTILL), "--db", str(db), "--all", "--out", str(out), "--jobs", "1", *model]
    # A terminal delivers Ctrl-C to a process whose SIGINT is at its default; a suite started in the background
    # (``.ci/run &``) inherits SIGINT ignored, and Python then rightly ignores it too.
    proc = subprocess.Popen(cmd, env={**user_env(tmp_path), **env}, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not list(out.rglob("*.md")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)  # what Ctrl-C in a terminal sends
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr[-1500:]
    assert "Traceback" not in stderr
    kept = {p: p.stat().st_mtime_ns for p in out.rglob("*.md")}
    assert 0 < len(kept) < DEFAULT_NOTES
    n = len(kept)
    assert stderr.splitlines()[-1] == (f"Interrupted: the {n} note{'s' * (n != 1)} written so far are complete; run the "
                                       "same command again to go on (finished summaries are cached).")
    [pid] = _server_starts(tmp_path)
    for _ in range(100):  # the server is stopped on the way out, never left behind
        if not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists(), f"llama.cpp server {pid} outlived the run"

    again = run_distill(*cmd[1:], home=tmp_path, env={**env, "FAKE_LLAMA_DELAY": "0"})
    assert again.returncode == 0, again.stderr
    head = again.stderr.splitlines()
    assert head[0].startswith(f"{DEFAULT_NOTES - n} of {DEFAULT_NOTES} sessions need a summary"), head[0]
    assert re.match(r"Estimated time: about \S+ \(\S+ a session in the last run\)\.$", head[1]), head[1]
    assert f"{DEFAULT_NOTES - n} written, {n} unchanged" in head[-1]
    assert {p: p.stat().st_mtime_ns for p in kept} == kept


def test_limit_distils_the_newest(tmp_path: Path) -> None:
    db = _db(tmp_path)
    proc = run_distill("--db", str(db), "--all", "--limit", "2", "--summarizer", "extractive", "--json", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["selected"] == report["written"] == 2
    everything = run_distill("--db", str(db), "--all", "--out", str(tmp_path / "all"), "--summarizer", "extractive",
                             home=tmp_path)
    assert everything.returncode == 0, everything.stderr
    started = _started(tmp_path / "all")
    assert {r["session_id"] for r in report["results"]} == set(sorted(started, key=started.__getitem__)[-2:])


def test_demo_touches_nothing_in_the_hermes_home(tmp_path: Path) -> None:
    from evals.stub_llm_server import StubServer

    work = tmp_path / "work"
    work.mkdir()
    with StubServer(delay=0) as stub:  # a configured model: the demo's summaries are cached too
        env = {"DISTILL_MODEL": "openai/stub", "DISTILL_API_BASE": stub.api_base}
        for _ in range(2):
            proc = run_distill("--demo", home=tmp_path, env=env, cwd=work)
            assert proc.returncode == 0, proc.stderr
        assert stub.calls
    assert len(list((work / "distill-demo").rglob("*.md"))) >= 3
    assert not (tmp_path / ".hermes").exists(), sorted(map(str, (tmp_path / ".hermes").rglob("*")))


def test_what_selects_nothing_or_is_mistyped_says_so(tmp_path: Path) -> None:
    db = str(_db(tmp_path))
    quiet_day = run_distill("--db", db, "--since", "yesterday", home=tmp_path)
    assert quiet_day.returncode == 0
    assert re.search(r"no sessions selected \(active since \S+ 00:00; .*\): \S+ has 12 sessions, "
                     r"the newest active 2026-11-23 \d\d:\d\d", quiet_day.stderr), quiet_day.stderr

    def error(*args: str) -> str:
        proc = run_distill(*args, home=tmp_path)
        assert proc.returncode == 2 and proc.stdout == "", proc
        [line] = proc.stderr.splitlines()
        assert line.startswith("Error: ")
        return line

    typo = error("--db", db, "--all", "--source", "clii")
    assert "--source clii" in typo and "cli (7)" in typo and typo.endswith("did you mean --source cli?")
    assert error("--db", db, "skils", "pending").endswith("did you mean `distill skills pending`?")
    assert error("--db", db, "--idle", "2").startswith("Error: --idle '2': not an age")


def test_version(tmp_path: Path) -> None:
    from pipeline import __version__

    proc = run_distill("--version", home=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, f"distill {__version__}\n")


def test_model_run_on_a_terminal_shows_a_progress_bar(tmp_path: Path) -> None:
    """stderr on a terminal (a pty here): a rich bar with sessions done of total, the rate and the time left."""
    import os
    import pty
    import select

    db, (model, env) = _db(tmp_path), _local(tmp_path, delay=0.1)
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(DISTILL), "--db", str(db), "--all", "--out", str(tmp_path / "notes"), *model],
                            env={**user_env(tmp_path), **env, "TERM": "xterm", "COLUMNS": "150"}, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    seen = b""
    try:
        while True:  # read as it comes: a full pty buffer would block the run
            ready, _, _ = select.select([master], [], [], 60)
            if not ready:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the other end closed
                break
            if not chunk:
                break
            seen += chunk
        stdout, _ = proc.communicate(timeout=60)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, seen.decode(errors="replace")
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode("utf-8", "replace"))
    assert re.search(rf"distilling .* {DEFAULT_NOTES}/{DEFAULT_NOTES} .* \d+s a session, done", text), text[-2000:]
    assert re.search(rf"distilling .* 1/{DEFAULT_NOTES} .* a session, about \S+ left", text), text[-2000:]
    assert stdout.count("written ") == DEFAULT_NOTES  # note paths stay on stdout, apart from the bar
