"""The Hermes plugin: distil a session when Hermes finalises it.

Hermes loads ``register(ctx)`` through the ``hermes_agent.plugins`` entry point (once the user
enables ``distill``) and calls ``on_session_finalize`` synchronously on its teardown path: CLI
quit, ``/new``, a gateway reset or shutdown. So the callback does almost nothing in Hermes's
process: it checks the payload and starts a detached worker, then returns ``None`` (Hermes shows
a ``str`` or ``{"message": ...}`` return to the user, so we return neither).

Two processes do the work, both outside Hermes (hermes-state.md §5.5: a process that opens and
closes a descriptor on state.db drops its fcntl locks, so Hermes's process must never touch it):

1. the **worker**, ``python -m pipeline.hermes.plugin <session_id>``, started in its own session
   (``start_new_session``) with stdin from /dev/null and output appended to the hook log. It waits
   a few seconds for Hermes to flush the last turn, takes a per-session lock, then runs
2. ``distill <session_id>`` with the same ``HERMES_HOME`` and ``DISTILL_CHILD=1``, and records the
   outcome in ``$HERMES_HOME/distilled/.distill/hook.json`` for ``distill hook status``.

``DISTILL_CHILD=1`` marks everything distill starts: a Hermes process that inherits it (distill
calling ``hermes chat --oneshot`` for a model, say) skips its own finalisations, so distill never
triggers itself. The shell-hook path (``distill hook run``, in ``hook.py``) reuses ``spawn_distill``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.config import DEFAULT_EXCLUDED_SOURCES
from pipeline.config import hermes_home as _env_hermes_home

logger = logging.getLogger(__name__)

PLUGIN_NAME = "distill"
HOOK_EVENT = "on_session_finalize"

#: Set in every process distill starts; a hook that sees it does nothing.
CHILD_ENV = "DISTILL_CHILD"
#: Replaces the ``distill`` command the worker runs (shlex-split; the session id is appended).
COMMAND_ENV = "DISTILL_HOOK_COMMAND"
#: Interpreter for the worker when Hermes's own ``sys.executable`` cannot import ``pipeline``
#: (e.g. Hermes's ``plugins.isolation: host`` runs plugins under a separate Python).
PYTHON_ENV = "DISTILL_HOOK_PYTHON"
#: Seconds the worker waits before reading: CLI ``/new`` fires finalize *before* it flushes the
#: current turn to state.db (hermes_cli/cli_session_mixin.py), so an immediate read can miss it.
DELAY_ENV = "DISTILL_HOOK_DELAY"
DEFAULT_DELAY = 5.0
#: How long a second finalisation of the same session waits for the first one's distill.
LOCK_WAIT = 900.0
#: A distill that runs longer than this is killed, so a hung model call cannot pin the lock forever.
RUN_TIMEOUT = 3600.0
LOG_MAX_BYTES = 1_000_000

#: Platforms whose sessions are machine-made; the same names as the sources distill skips.
SKIPPED_PLATFORMS: frozenset[str] = frozenset(DEFAULT_EXCLUDED_SOURCES)

# Hermes ids look like 20261202_101010_ab12cd; anything else (a leading "-" above all) could be
# read as an option by distill's argument parser, so it is refused rather than quoted.
_SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,255}$")


# --------------------------------------------------------------------------- paths


def state_dir(home: Path) -> Path:
    """``$HERMES_HOME/distilled/.distill``: the hook's log, state and locks."""
    return home / "distilled" / ".distill"


def log_path_for(home: Path) -> Path:
    return state_dir(home) / "hook.log"


def state_path_for(home: Path) -> Path:
    return state_dir(home) / "hook.json"


def resolve_home(hermes_home: Path, profile: str | None) -> Path:
    """The directory that holds the profile's state.db.

    Hermes exports the *resolved* profile directory as ``HERMES_HOME`` to hooks, and the shell
    payload's ``profile`` is a name derived from it, so normally ``hermes_home`` is already right.
    Only a named profile whose directory exists under ``hermes_home/profiles`` moves us there
    (someone ran ``distill hook run`` by hand from the root home).
    """
    home = Path(hermes_home).expanduser()
    if not profile or profile in ("default", "custom"):
        return home
    if home.name == profile and home.parent.name == "profiles":
        return home
    candidate = home / "profiles" / profile
    return candidate if candidate.is_dir() else home


def current_hermes_home() -> Path:
    """The active profile home inside Hermes.

    A multi-profile gateway routes each session through a context-local override
    (``hermes_constants.get_hermes_home``), so the environment alone can name the wrong profile.
    We only use that module if Hermes already imported it: the plugin never imports Hermes code.
    """
    constants = sys.modules.get("hermes_constants")
    getter = getattr(constants, "get_hermes_home", None)
    if callable(getter):
        with contextlib.suppress(Exception):
            return Path(getter())
    return _env_hermes_home()


# --------------------------------------------------------------------------- deciding


def skip_reason(
    session_id: object, platform: object = None, env: Mapping[str, str] | None = None
) -> str | None:
    """Why this finalisation should not be distilled, or ``None`` to go ahead."""
    env = os.environ if env is None else env
    if env.get(CHILD_ENV):
        return f"{CHILD_ENV} is set (a process distill started)"
    if not session_id:
        return "no session_id"
    if not isinstance(session_id, str) or not _SESSION_ID_RE.match(session_id):
        return f"unusable session_id {session_id!r}"
    if isinstance(platform, str) and platform.lower() in SKIPPED_PLATFORMS:
        return f"platform {platform!r} is skipped"
    return None


def _iso_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _interpreter(env: Mapping[str, str]) -> str:
    return env.get(PYTHON_ENV) or sys.executable


def worker_command(
    session_id: str, *, trigger: str, spawned_at: float, env: Mapping[str, str] | None = None
) -> list[str]:
    env = os.environ if env is None else env
    return [
        _interpreter(env), "-m", "pipeline.hermes.plugin",
        "--trigger", trigger, "--spawned-at", f"{spawned_at:.6f}", session_id,
    ]  # fmt: skip


def distill_command(session_id: str, env: Mapping[str, str] | None = None) -> list[str]:
    """What the worker runs: the override, else ``distill`` beside this Python, else ``-m pipeline``."""
    import shlex

    env = os.environ if env is None else env
    override = env.get(COMMAND_ENV)
    if override:
        return [*shlex.split(override), session_id]
    exe = Path(sys.executable).parent / ("distill.exe" if os.name == "nt" else "distill")
    if exe.is_file():
        return [str(exe), session_id]
    return [sys.executable, "-m", "pipeline", session_id]


# --------------------------------------------------------------------------- spawning (in Hermes)


def _rotate(log_path: Path) -> None:
    with contextlib.suppress(OSError):
        if log_path.stat().st_size > LOG_MAX_BYTES:
            os.replace(log_path, log_path.with_name(log_path.name + ".1"))


def spawn_distill(
    session_id: str,
    *,
    hermes_home: Path,
    profile: str | None = None,
    log_path: Path | None = None,
    trigger: str = "plugin",
) -> int | None:
    """Start the detached worker for one session and return its pid, or ``None`` if skipped.

    Never blocks on the child and never raises for an OS failure: this runs on Hermes's teardown
    path, where an exception would at best be logged and at worst delay the user's exit.
    """
    reason = skip_reason(session_id)
    if reason:
        logger.info("distill hook: skipped (%s)", reason)
        return None
    home = resolve_home(Path(hermes_home), profile)
    log_path = Path(log_path) if log_path else log_path_for(home)
    env = dict(os.environ)
    # The child must see this profile even if Hermes resolved it through an in-process override.
    env["HERMES_HOME"] = str(home)
    env[CHILD_ENV] = "1"
    spawned_at = time.time()
    cmd = worker_command(session_id, trigger=trigger, spawned_at=spawned_at, env=env)
    kwargs: dict[str, Any] = {"close_fds": True}
    if os.name == "nt":  # pragma: no cover - Hermes hooks are POSIX-first; kept for completeness
        kwargs["creationflags"] = subprocess.DETACHED_PROCESS | subprocess.CREATE_NEW_PROCESS_GROUP
    else:
        # Own session: no SIGHUP when the terminal closes, no Ctrl-C from Hermes's foreground group,
        # and a shell hook's timeout (which kills its process group) cannot reach the worker.
        kwargs["start_new_session"] = True
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        _rotate(log_path)
        with open(log_path, "ab") as log:
            log.write(f"{_iso_now()} [{trigger}] finalize session={session_id} home={home}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=str(home) if home.is_dir() else None, env=env, **kwargs,
            )  # fmt: skip
    except OSError as exc:
        logger.warning("distill hook: could not start the worker for %s: %s", session_id, exc)
        return None
    # Reap the worker when it ends so a long-lived gateway does not collect zombies; the thread
    # only sits in waitpid and dies with Hermes, after which init adopts the worker.
    threading.Thread(target=proc.wait, name=f"distill-reap-{proc.pid}", daemon=True).start()
    return proc.pid


def on_session_finalize(**kwargs: Any) -> None:
    """Hermes ``on_session_finalize`` callback. Accepts every payload shape; never raises."""
    try:
        session_id = kwargs.get("session_id")
        reason = skip_reason(session_id, kwargs.get("platform"))
        if reason:
            logger.debug("distill hook: %s skipped (%s)", session_id, reason)
            return None
        spawn_distill(str(session_id), hermes_home=current_hermes_home(), trigger="plugin")
    except Exception:  # the hook must never break Hermes's teardown
        logger.warning("distill hook failed for %r", kwargs.get("session_id"), exc_info=True)
    return None


def register(ctx: Any) -> None:
    """Hermes plugin entry point: register the finalize hook. No I/O, no imports of Hermes code."""
    ctx.register_hook(HOOK_EVENT, on_session_finalize)


# --------------------------------------------------------------------------- the worker (detached)


def _lock_key(session_id: str) -> str:
    # Ids are already restricted to a safe alphabet; ":" is still awkward on some filesystems.
    return re.sub(r"[^A-Za-z0-9._-]", "_", session_id)


def record_run(home: Path, entry: dict[str, Any], keep: int = 20) -> None:
    """Append a run to hook.json (``last_run`` plus a short ``recent`` list) under a file lock."""
    from filelock import FileLock

    path = state_path_for(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=30):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                data = {}
        except (OSError, ValueError):
            data = {}
        recent = [e for e in data.get("recent", []) if isinstance(e, dict)]
        data.update(last_run=entry, recent=[*recent, entry][-keep:], log=str(log_path_for(home)))
        from pipeline.atomic import atomic_write_text

        atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def run_worker(session_id: str, *, trigger: str = "plugin", spawned_at: float | None = None) -> int:
    """Wait for Hermes to flush, take the session's lock, run distill, record the outcome."""
    from filelock import FileLock, Timeout

    home = _env_hermes_home()
    spawned_at = time.time() if spawned_at is None else spawned_at
    say = lambda msg: print(f"{_iso_now()} [worker {os.getpid()}] session={session_id}: {msg}", flush=True)  # noqa: E731
    try:
        delay = float(os.environ.get(DELAY_ENV, DEFAULT_DELAY))
    except ValueError:
        delay = DEFAULT_DELAY
    time.sleep(max(0.0, delay))

    locks = state_dir(home) / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    key = _lock_key(session_id)
    entry: dict[str, Any] = {"session_id": session_id, "trigger": trigger, "pid": os.getpid()}
    try:
        with FileLock(str(locks / f"{key}.lock"), timeout=LOCK_WAIT):
            # A run that *started* after we were triggered saw everything we would see: skip.
            done = locks / f"{key}.ok"
            with contextlib.suppress(OSError, ValueError):
                if float(done.read_text()) >= spawned_at:
                    say("skipped: a later run already covered this finalisation")
                    return 0
            cmd = distill_command(session_id)
            started = time.time()
            entry.update(started_at=_iso_now(), command=cmd)
            say(f"running {' '.join(cmd)}")
            env = dict(os.environ, HERMES_HOME=str(home), **{CHILD_ENV: "1"})
            try:
                rc = subprocess.run(cmd, stdin=subprocess.DEVNULL, env=env, timeout=RUN_TIMEOUT).returncode
            except subprocess.TimeoutExpired:
                rc = 124
                say(f"timed out after {RUN_TIMEOUT:.0f}s")
            except OSError as exc:
                rc = 127
                say(f"could not run distill: {exc}")
            if rc == 0:
                done.write_text(f"{started:.6f}")
            entry.update(finished_at=_iso_now(), exit_code=rc, seconds=round(time.time() - started, 2))
            say(f"exit {rc} after {entry['seconds']}s")
    except Timeout:
        say(f"skipped: another distill of this session held the lock for {LOCK_WAIT:.0f}s")
        entry.update(finished_at=_iso_now(), exit_code=None, skipped="lock busy")
    record_run(home, entry)
    return int(entry["exit_code"] or 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.hermes.plugin", description=run_worker.__doc__)
    parser.add_argument("session_id")
    parser.add_argument("--trigger", default="plugin")
    parser.add_argument("--spawned-at", type=float, default=None)
    args = parser.parse_args(argv)
    if skip_reason(args.session_id, env={}):
        print(f"refusing session id {args.session_id!r}", file=sys.stderr)
        return 2
    return run_worker(args.session_id, trigger=args.trigger, spawned_at=args.spawned_at)


if __name__ == "__main__":
    raise SystemExit(main())
