"""The Hermes post-session hook: plugin registration, the detached worker, the shell hook, install."""

from __future__ import annotations

import inspect
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

import pipeline
from pipeline.cli.hook import hook_app
from pipeline.hermes import hook
from pipeline.hermes import plugin as hp

ROOT = Path(__file__).resolve().parent.parent
SID = "20261202_101010_ab12cd"

# Every payload shape Hermes sends to on_session_finalize (hermes_cli/cli_session_mixin.py,
# cli_shutdown.py, tui_gateway/session_lifecycle.py, gateway/run_shutdown_session_end.py).
PAYLOADS: dict[str, dict[str, Any]] = {
    "cli": {"session_id": SID, "platform": "cli", "reason": "session_boundary"},
    "cli-shutdown": {"session_id": SID, "platform": "cli", "reason": "shutdown"},
    "tui": {"session_id": SID, "platform": "tui"},
    "gateway": {
        "session_id": SID,
        "old_session_id": SID,
        "new_session_id": "20261202_111111_ffffff",
        "platform": "telegram",
        "reason": "reset",
        "telemetry_schema_version": "hermes.observer.v1",
    },
}
SKIPPED: dict[str, dict[str, Any]] = {
    "none": {"session_id": None, "platform": "cli"},
    "empty": {"session_id": "", "platform": "cli"},
    "no-id": {"platform": "cli", "reason": "shutdown"},
    **{p: {"session_id": SID, "platform": p} for p in sorted(hp.SKIPPED_PLATFORMS)},
    "option-like": {"session_id": "--all", "platform": "cli"},
}


class RecordingCtx:
    def __init__(self) -> None:
        self.hooks: list[tuple[str, Any]] = []

    def register_hook(self, name: str, callback: Any) -> None:
        self.hooks.append((name, callback))


FAKE_DISTILL = """\
import json, os, sys, time
marker = os.environ["MARKER_DIR"]
start = time.time()
time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
gate = os.environ.get("FAKE_GATE")  # wait until the test opens the gate: the hook must not wait with it
while gate and not os.path.exists(gate):
    time.sleep(0.02)
rec = {"argv": sys.argv[1:], "child": os.environ.get("DISTILL_CHILD"), "home": os.environ.get("HERMES_HOME"),
       "start": start, "end": time.time(), "pid": os.getpid(), "sid": os.getsid(0)}
with open(os.path.join(marker, f"{os.getpid()}.json"), "w") as fh:
    json.dump(rec, fh)
"""


@pytest.fixture
def fake_distill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the worker at a fake distill that writes one JSON marker per run; no delay."""
    script = tmp_path / "fake_distill.py"
    script.write_text(FAKE_DISTILL)
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv(hp.COMMAND_ENV, shlex.join([sys.executable, str(script)]))
    monkeypatch.setenv("MARKER_DIR", str(markers))
    monkeypatch.setenv(hp.DELAY_ENV, "0")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.delenv(hp.CHILD_ENV, raising=False)
    return markers


def wait_for(predicate: Any, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return predicate()


def last_run(home: Path, timeout: float = 15.0) -> dict[str, Any]:
    """The worker's record in hook.json, once it has written one."""

    def read() -> dict[str, Any] | None:
        try:
            return json.loads(hp.state_path_for(home).read_text())["last_run"]
        except (OSError, ValueError, KeyError):
            return None

    run = wait_for(read, timeout)
    assert run, (
        f"the worker recorded no run; log:\n{hp.log_path_for(home).read_text() if hp.log_path_for(home).exists() else ''}"
    )
    return run


def markers(directory: Path, n: int = 1, timeout: float = 15.0) -> list[dict[str, Any]]:
    def read() -> list[dict[str, Any]]:
        found = []
        for p in directory.glob("*.json"):
            try:
                found.append(json.loads(p.read_text()))
            except ValueError:  # half-written
                return []
        return found if len(found) >= n else []

    return wait_for(read, timeout) or []


# --------------------------------------------------------------------------- plugin registration


def test_register_adds_one_finalize_hook_taking_kwargs() -> None:
    ctx = RecordingCtx()
    hp.register(ctx)
    assert [name for name, _ in ctx.hooks] == ["on_session_finalize"]
    params = inspect.signature(ctx.hooks[0][1]).parameters.values()
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def test_plugin_yaml_matches_registration() -> None:
    manifest = yaml.safe_load((ROOT / "pipeline" / "plugin.yaml").read_text())
    assert manifest["name"] == hp.PLUGIN_NAME == "distill"
    assert manifest["version"] == pipeline.__version__
    assert manifest["description"]
    ctx = RecordingCtx()
    hp.register(ctx)
    assert manifest["provides_hooks"] == [name for name, _ in ctx.hooks]


def test_hook_returns_fast_and_never_opens_state_db(
    fake_distill: Path, hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (hermes_home / "state.db").write_bytes(b"")
    connects: list[Any] = []
    monkeypatch.setattr(
        sqlite3, "connect", lambda *a, **k: connects.append(a) or pytest.fail("sqlite3.connect")
    )
    opened: list[str] = []
    real_open = open

    def spy_open(file: Any, *a: Any, **k: Any) -> Any:
        opened.append(str(file))
        return real_open(file, *a, **k)

    monkeypatch.setattr("builtins.open", spy_open)
    gate = fake_distill.parent / "gate"
    monkeypatch.setenv("FAKE_GATE", str(gate))
    ctx = RecordingCtx()
    hp.register(ctx)
    callback = ctx.hooks[0][1]
    result = callback(**PAYLOADS["cli"])
    # "Fast" without a clock: the hook has returned while the distill it started is still held at the
    # gate, so Hermes's session close never waits on a run, however slow the machine.
    returned_before_the_run = not list(fake_distill.glob("*.json"))
    gate.touch()
    monkeypatch.undo()  # restore open/connect before waiting on the child
    assert result is None  # Hermes would show a str or {"message"} to the user
    assert returned_before_the_run, "the hook waited for distill to finish"
    assert connects == []
    assert not [f for f in opened if "state.db" in f]
    assert "hermes_state" not in sys.modules
    assert markers(fake_distill)


@pytest.mark.parametrize("shape", sorted(PAYLOADS))
def test_each_payload_shape_runs_a_detached_distill(
    shape: str, fake_distill: Path, hermes_home: Path
) -> None:
    assert hp.on_session_finalize(**PAYLOADS[shape]) is None
    [rec] = markers(fake_distill)
    assert rec["argv"] == [SID]  # the gateway's old session, never new_session_id
    assert rec["child"] == "1"
    assert Path(rec["home"]) == hermes_home
    assert rec["sid"] != os.getsid(0)  # its own session: Ctrl-C / SIGHUP in Hermes do not reach it
    run = last_run(hermes_home)
    assert run["session_id"] == SID and run["exit_code"] == 0 and run["trigger"] == "plugin"
    log = hp.log_path_for(hermes_home).read_text()
    assert f"finalize session={SID}" in log and "exit 0" in log


@pytest.mark.parametrize("shape", sorted(SKIPPED))
def test_skipped_payloads_spawn_nothing(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: calls.append(a))
    assert hp.on_session_finalize(**SKIPPED[shape]) is None
    assert calls == []


def test_distill_child_marker_stops_self_triggering(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: calls.append(a))
    monkeypatch.setenv(hp.CHILD_ENV, "1")
    hp.on_session_finalize(**PAYLOADS["cli"])
    assert calls == []


def test_popen_is_detached_with_redirected_io(hermes_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class FakePopen:
        pid = 4242

        def __init__(self, cmd: list[str], **kwargs: Any) -> None:
            seen.update(kwargs, cmd=cmd)

        def wait(self) -> int:
            return 0

    monkeypatch.delenv(hp.CHILD_ENV, raising=False)
    monkeypatch.setattr(subprocess, "Popen", FakePopen)
    pid = hp.spawn_distill(SID, hermes_home=hermes_home, profile=None, log_path=hermes_home / "x.log")
    assert pid == 4242
    assert seen["start_new_session"] is True and seen["close_fds"] is True
    assert seen["stdin"] is subprocess.DEVNULL and seen["stderr"] is subprocess.STDOUT
    assert seen["env"]["HERMES_HOME"] == str(hermes_home) and seen["env"][hp.CHILD_ENV] == "1"
    assert seen["cmd"][:3] == [sys.executable, "-m", "pipeline.hermes.plugin"] and seen["cmd"][-1] == SID


def test_hook_never_raises(monkeypatch: pytest.MonkeyPatch, hermes_home: Path) -> None:
    monkeypatch.delenv(hp.CHILD_ENV, raising=False)

    def boom(*a: Any, **k: Any) -> None:
        raise OSError("no fork for you")

    monkeypatch.setattr(subprocess, "Popen", boom)
    assert hp.spawn_distill(SID, hermes_home=hermes_home) is None
    monkeypatch.setattr(hp, "spawn_distill", lambda *a, **k: 1 / 0)
    assert hp.on_session_finalize(**PAYLOADS["cli"]) is None
    assert hp.on_session_finalize(unexpected=object()) is None


def test_named_profile_resolves_to_its_directory(tmp_path: Path) -> None:
    (tmp_path / "profiles" / "work").mkdir(parents=True)
    assert hp.resolve_home(tmp_path, "work") == tmp_path / "profiles" / "work"
    assert hp.resolve_home(tmp_path / "profiles" / "work", "work") == tmp_path / "profiles" / "work"
    assert hp.resolve_home(tmp_path, "default") == tmp_path
    assert hp.resolve_home(tmp_path, "missing") == tmp_path


# --------------------------------------------------------------------------- the per-session lock


def _worker(home: Path, spawned_at: float) -> subprocess.Popen[bytes]:
    env = dict(os.environ, HERMES_HOME=str(home), **{hp.CHILD_ENV: "1"})
    cmd = hp.worker_command(SID, trigger="test", spawned_at=spawned_at)
    log = hp.log_path_for(home)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)


def test_two_finalisations_of_one_session_do_not_race(
    fake_distill: Path, hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SLEEP", "0.8")
    first = _worker(hermes_home, time.time())
    assert wait_for(lambda: (hp.state_dir(hermes_home) / "locks" / f"{SID}.lock").exists(), 10)
    time.sleep(0.3)  # first is now inside distill
    second = _worker(hermes_home, time.time())  # triggered after the first run started: must run again
    assert first.wait(20) == 0 and second.wait(20) == 0
    runs = sorted(markers(fake_distill, 2), key=lambda r: r["start"])
    assert len(runs) == 2
    assert runs[0]["end"] <= runs[1]["start"], "the second distill started before the first ended"


def test_simultaneous_finalisations_coalesce(fake_distill: Path, hermes_home: Path) -> None:
    at = time.time()
    procs = [_worker(hermes_home, at), _worker(hermes_home, at)]
    assert [p.wait(20) for p in procs] == [0, 0]
    assert len(markers(fake_distill, 1)) == 1  # the later one saw a run that started after it was triggered
    assert "a later run already covered" in hp.log_path_for(hermes_home).read_text()


# --------------------------------------------------------------------------- shell hook


def shell_payload(session_id: str | None = SID, platform: str = "cli", **extra: Any) -> str:
    """Exactly what agent/shell_hooks.py::_serialize_payload writes (session_id None becomes "")."""
    return json.dumps({
        "hook_event_name": "on_session_finalize", "tool_name": None, "tool_input": None,
        "session_id": session_id or "", "cwd": "/home/u/project", "profile": "default",
        "extra": {"platform": platform, "reason": "shutdown", **extra},
    })  # fmt: skip


def test_shell_hook_command_detaches_and_answers_empty_json(fake_distill: Path, hermes_home: Path) -> None:
    """Run the exact command `install --shell` writes, the way Hermes does (argv, stdin, timeout)."""
    argv = shlex.split(hook.default_hook_command())
    t0 = time.monotonic()
    done = subprocess.run(
        argv, input=shell_payload(), capture_output=True, text=True, timeout=30, start_new_session=True
    )
    elapsed = time.monotonic() - t0
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {}
    assert elapsed < 10
    [rec] = markers(fake_distill)
    assert rec["argv"] == [SID] and rec["child"] == "1"
    assert last_run(hermes_home)["trigger"] == "shell"


@pytest.mark.parametrize(
    "stdin",
    [
        shell_payload(None),
        shell_payload(platform="cron"),
        shell_payload(platform="kanban"),
        "not json",
        "",
        "[1]",
        json.dumps({"hook_event_name": "pre_tool_call", "session_id": SID}),
    ],
)
def test_shell_hook_skips_quietly(stdin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(hp, "spawn_distill", lambda *a, **k: calls.append(a))
    result = CliRunner().invoke(hook_app, ["run"], input=stdin)
    assert result.exit_code == 0
    assert result.stdout.strip() == "{}"
    assert calls == []


def test_shell_hook_passes_profile(monkeypatch: pytest.MonkeyPatch, hermes_home: Path) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(hp, "spawn_distill", lambda sid, **k: calls.append({"sid": sid, **k}))
    payload = json.loads(shell_payload())
    payload["profile"] = "work"
    CliRunner().invoke(hook_app, ["run"], input=json.dumps(payload), catch_exceptions=False)
    assert calls == [{"sid": SID, "hermes_home": hermes_home, "profile": "work", "trigger": "shell"}]


# --------------------------------------------------------------------------- install / uninstall

CONFIG = """\
# my Hermes config
model:
  provider: openrouter   # keep me
  default: anthropic/claude-opus-4.7

plugins:
  enabled:
    - session-titler   # titles
  disabled:
  - distill

hooks:
  pre_tool_call:
    - command: "~/.hermes/agent-hooks/guard.sh"
# trailing comment
"""


def invoke(*args: str) -> Any:
    return CliRunner().invoke(hook_app, list(args))


def backups(home: Path) -> list[Path]:
    return sorted(home.glob("*.bak"))


def test_install_without_apply_changes_nothing(hermes_home: Path) -> None:
    cfg = hermes_home / "config.yaml"
    cfg.write_text(CONFIG)
    for args in (["install"], ["install", "--shell"], ["uninstall"]):
        result = invoke(*args)
        assert result.exit_code == 0, result.output
        assert cfg.read_text() == CONFIG
    assert not (hermes_home / "shell-hooks-allowlist.json").exists() and not backups(hermes_home)
    shell = invoke("install", "--shell").output
    assert "+  on_session_finalize:" in shell and f"+    - command: {hook.default_hook_command()}" in shell
    assert "--- /dev/null" in shell and '"event": "on_session_finalize"' in shell
    assert "Dry run" in shell


def test_plugin_install_twice_is_one_entry_and_uninstall_reverses(hermes_home: Path) -> None:
    cfg = hermes_home / "config.yaml"
    cfg.write_text(CONFIG)
    first = invoke("install", "--apply")
    assert first.exit_code == 0, first.output
    assert "hermes plugins enable distill" in first.output
    data = yaml.safe_load(cfg.read_text())
    assert data["plugins"] == {"enabled": ["session-titler", "distill"], "disabled": []}
    assert "# keep me" in cfg.read_text() and "# trailing comment" in cfg.read_text()
    [bak] = backups(hermes_home)
    assert bak.read_text() == CONFIG
    second = invoke("install", "--apply")
    assert "Nothing to change" in second.output and len(backups(hermes_home)) == 1
    assert yaml.safe_load(cfg.read_text())["plugins"]["enabled"].count("distill") == 1
    assert invoke("uninstall", "--apply").exit_code == 0
    after = yaml.safe_load(cfg.read_text())
    assert after["plugins"]["enabled"] == ["session-titler"]
    assert (
        after["hooks"] == yaml.safe_load(CONFIG)["hooks"]
        and after["model"] == yaml.safe_load(CONFIG)["model"]
    )


def test_shell_install_twice_is_one_entry_and_uninstall_restores_the_file(hermes_home: Path) -> None:
    cfg, allow = hermes_home / "config.yaml", hermes_home / "shell-hooks-allowlist.json"
    original = CONFIG.replace("  disabled:\n  - distill\n", "")
    cfg.write_text(original)
    allow.write_text(
        json.dumps({"approvals": [{"event": "pre_tool_call", "command": "~/.hermes/agent-hooks/guard.sh"}]})
    )
    for _ in range(2):
        assert invoke("install", "--shell", "--apply").exit_code == 0
    command = hook.default_hook_command()
    entries = yaml.safe_load(cfg.read_text())["hooks"]["on_session_finalize"]
    assert entries == [{"command": command, "timeout": hook.HOOK_TIMEOUT}]
    approvals = json.loads(allow.read_text())["approvals"]
    assert [a["command"] for a in approvals] == ["~/.hermes/agent-hooks/guard.sh", command]
    assert approvals[1]["event"] == "on_session_finalize" and approvals[1]["approved_at"]
    assert oct(allow.stat().st_mode & 0o777) == "0o600"
    assert len(backups(hermes_home)) == 2  # one per file, first apply only
    status = invoke("status", "--json")
    info = json.loads(status.stdout)
    assert info["shell_hooks"] == [{"command": command, "allowlisted": True}]
    assert invoke("uninstall", "--apply").exit_code == 0
    assert cfg.read_text() == original  # comments and layout come back byte for byte
    assert [a["command"] for a in json.loads(allow.read_text())["approvals"]] == [
        "~/.hermes/agent-hooks/guard.sh"
    ]


def test_shell_install_replaces_a_stale_distill_command(hermes_home: Path) -> None:
    cfg = hermes_home / "config.yaml"
    cfg.write_text(
        "hooks:\n  on_session_finalize:\n    - command: /old/venv/bin/distill hook run\n      timeout: 30\n"
    )
    assert invoke("install", "--shell", "--apply", "--command", "/new/bin/distill hook run").exit_code == 0
    assert yaml.safe_load(cfg.read_text())["hooks"]["on_session_finalize"] == [
        {"command": "/new/bin/distill hook run", "timeout": 30}
    ]


def test_custom_command_install_is_idempotent(hermes_home: Path) -> None:
    allow = hermes_home / "shell-hooks-allowlist.json"
    allow.write_text(json.dumps({"approvals": [{"event": "pre_tool_call", "command": "/w/wrap.sh"}]}))
    for _ in range(2):
        result = invoke("install", "--shell", "--apply", "--command", "/w/wrap.sh")
        assert result.exit_code == 0, result.output
    assert "will not recognise" in result.output
    assert yaml.safe_load((hermes_home / "config.yaml").read_text())["hooks"]["on_session_finalize"] == [
        {"command": "/w/wrap.sh", "timeout": 30}
    ]
    events = [a["event"] for a in json.loads(allow.read_text())["approvals"]]
    assert events == ["pre_tool_call", "on_session_finalize"]


def test_install_into_missing_config_and_profile(hermes_home: Path) -> None:
    profile = hermes_home / "profiles" / "work"
    profile.mkdir(parents=True)
    assert invoke("install", "--profile", "work", "--shell", "--apply").exit_code == 0
    assert yaml.safe_load((profile / "config.yaml").read_text())["hooks"]["on_session_finalize"]
    assert (profile / "shell-hooks-allowlist.json").exists()
    assert not (hermes_home / "config.yaml").exists()
    result = invoke("install", "--profile", "work")
    assert "hermes -p work plugins enable distill" in result.output


def test_flow_style_config_falls_back_to_a_dump_and_says_so(hermes_home: Path) -> None:
    cfg = hermes_home / "config.yaml"
    cfg.write_text("model: {default: x}\nplugins: {enabled: [a]}  # flow\n")
    result = invoke("install", "--apply")
    assert "comments are not kept" in result.output
    assert yaml.safe_load(cfg.read_text()) == {
        "model": {"default": "x"},
        "plugins": {"enabled": ["a", "distill"]},
    }


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("config.yaml", "model:\n  default: [unclosed\n", "is not valid YAML"),
        ("config.yaml", "- just\n- a list\n", "expected a mapping"),
        ("config.yaml", "hooks:\n  - command: x\n", "should be a mapping"),
        ("shell-hooks-allowlist.json", "{not json", "is not valid JSON"),
    ],
)
def test_broken_files_are_left_untouched_with_a_clear_error(
    hermes_home: Path, name: str, content: str, message: str
) -> None:
    target = hermes_home / name
    target.write_text(content)
    before = {p.name: p.read_bytes() for p in hermes_home.iterdir()}
    for args in (["install", "--shell", "--apply"], ["uninstall", "--apply"]):
        result = invoke(*args)
        assert result.exit_code == 2, result.output
        assert message in result.output and str(target) in result.output
    assert {p.name: p.read_bytes() for p in hermes_home.iterdir()} == before


def test_status_reports_install_and_last_run(fake_distill: Path, hermes_home: Path) -> None:
    assert "last run: never" in invoke("status").output
    invoke("install", "--apply")
    hp.on_session_finalize(**PAYLOADS["cli"])
    assert markers(fake_distill) and last_run(hermes_home)
    out = invoke("status").output
    assert "plugin: enabled" in out and f"last run: session {SID} via plugin, exit 0" in out


@pytest.mark.parametrize(
    ("command", "ours"),
    [
        ("/v/bin/distill hook run", True),
        ("'/path with space/distill' hook run", True),
        ("/v/bin/python -m pipeline.hook run", True),
        ("/v/bin/python -m pipeline hook run", True),
        ("~/.hermes/agent-hooks/distill.sh", False),
        ("/v/bin/other hook run", False),
        ("unbalanced 'quote", False),
    ],
)
def test_is_distill_command(command: str, ours: bool) -> None:
    assert hook.is_distill_command(command) is ours


def test_commands_have_help() -> None:
    for name in ("install", "uninstall", "status", "run"):
        result = invoke(name, "--help")
        assert result.exit_code == 0 and "Example" in result.output


# --------------------------------------------------------------------------- real distill, end to end

VENV_DISTILL = ROOT / ".venv" / "bin" / "distill"
FIXTURE_DBS = [ROOT / "fixtures" / "demo" / "state.db", ROOT / "fixtures" / "hermes" / "state-v31.db"]


def _usable_fixture_db() -> Path | None:
    for path in FIXTURE_DBS:
        if not path.is_file() or path.stat().st_size == 0:
            continue
        con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            con.execute("SELECT id, source FROM sessions LIMIT 1")
            return path
        except sqlite3.Error:
            continue
        finally:
            con.close()
    return None


def _real_distill_skip_reason() -> str | None:
    if not VENV_DISTILL.is_file():
        return f"{VENV_DISTILL} is not installed (pip install -e . in the venv)"
    try:
        ok = subprocess.run([str(VENV_DISTILL), "--help"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`distill --help` failed: {exc}"
    if not ok:
        return "`distill --help` exits non-zero"
    if _usable_fixture_db() is None:
        return "no usable fixture db (a sessions table) at fixtures/demo/state.db or fixtures/hermes/state-v31.db"
    return None


@pytest.mark.slow
def test_real_distill_writes_a_note_after_finalize(
    hermes_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reason = _real_distill_skip_reason()
    if reason:
        pytest.skip(reason)
    db = _usable_fixture_db()
    assert db is not None
    shutil.copy(db, hermes_home / "state.db")
    ro = sqlite3.connect((hermes_home / "state.db").resolve().as_uri() + "?mode=ro", uri=True)
    try:
        sid = ro.execute(
            "SELECT id FROM sessions WHERE source = 'cli' ORDER BY started_at LIMIT 1"
        ).fetchone()[0]
    finally:
        ro.close()
    for var in (hp.COMMAND_ENV, hp.CHILD_ENV, hp.PYTHON_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(hp.DELAY_ENV, "0")
    monkeypatch.setattr(sys, "executable", str(ROOT / ".venv" / "bin" / "python"))
    hp.on_session_finalize(session_id=sid, platform="cli", reason="shutdown")
    notes = wait_for(lambda: list((hermes_home / "distilled").rglob("*.md")), timeout=30)
    log = hp.log_path_for(hermes_home)
    assert notes, f"no note after 30 s; hook log:\n{log.read_text() if log.exists() else '(none)'}"
    assert last_run(hermes_home)["exit_code"] == 0
