"""Plan, apply and inspect the edits that wire distill into Hermes's session end, and the shell-hook entry point.

Two ways in, both ending in ``hermes_plugin.spawn_distill``:

* **plugin** (default): add ``distill`` to ``plugins.enabled`` in the profile's config.yaml (what
  ``hermes plugins enable distill`` does; some Hermes builds try to download a Python for that
  command, so we edit the file). Needs hermes-distill installed in Hermes's own environment.
* **shell** (``--shell``): add a ``hooks: on_session_finalize`` entry running ``distill hook run``
  and its approval in ``$HERMES_HOME/shell-hooks-allowlist.json`` (Hermes silently skips
  unapproved hooks in gateway and cron runs). Works wherever distill is installed.

``install``/``uninstall`` print a unified diff and change nothing without ``--apply``. With it they
back each file up (``<file>.<timestamp>.bak``) and write atomically. config.yaml is edited as text,
with the smallest insertion or deletion, so comments survive; every edit is checked by parsing the
result and comparing with the intended data, and only if that fails is the file re-dumped (comments
lost, and the diff says so). The text edits are in ``yamledit.py``; the allowlist's format and lock
are in ``hook_allowlist.py``. This module plans, shows and applies the changes.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import shlex
import shutil
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.atomic import atomic_write_text, private_tempdir, temp_path
from pipeline.config import hermes_home, profile_home
from pipeline.errors import DistillError, InputError
from pipeline.hermes import plugin as hp
from pipeline.hermes.allowlist import ALLOWLIST, hermes_flock, load_allowlist, plan_allowlist
from pipeline.hermes.yamledit import load_config, plan_list_edit

HOOK_TIMEOUT = 30  # seconds Hermes waits for `hook run`; it returns in well under one

def profile_dir(profile: str | None) -> Path:
    """The Hermes home a ``--profile`` names (``default`` or none: ``$HERMES_HOME``)."""
    return profile_home(profile) if profile and profile != "default" else hermes_home()


def default_hook_command() -> str:
    """The exact string for config.yaml and the allowlist (Hermes matches approvals verbatim).

    Absolute paths, because gateway and cron runs do not share the user's PATH.
    """
    exe = Path(sys.executable).parent / "distill"
    argv = [str(exe), "hook", "run"] if exe.is_file() else [sys.executable, "-m", "pipeline", "hook", "run"]
    return shlex.join(argv)


def is_distill_command(command: object) -> bool:
    """True for any command string we could have installed, including from an older venv path."""
    if not isinstance(command, str):
        return False
    try:
        t = shlex.split(command)
    except ValueError:
        return False
    if not t or t[-1] != "run":
        return False
    if "pipeline.hook" in t:  # what distill < 0.2 installed
        return True
    return len(t) >= 3 and t[-2] == "hook" and (Path(t[0]).name.startswith("distill") or "pipeline" in t)


# --------------------------------------------------------------------------- files and plans


@dataclass
class Change:
    path: Path
    old: str
    new: str
    note: str = ""

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def diff(self) -> str:
        old_name = str(self.path) if self.old or self.path.exists() else "/dev/null"
        return "".join(
            difflib.unified_diff(
                self.old.splitlines(keepends=True),
                self.new.splitlines(keepends=True),
                old_name,
                str(self.path),
            )
        )


def edit_config(
    path: Path, parent: str, child: str, *, add: object = None, remove: Callable[[object], bool] | None = None,
    present: Callable[[object], bool] | None = None, keep_empty: bool = False,
) -> Change:  # fmt: skip
    """Plan removing the items ``remove`` matches from ``parent.child``, then appending ``add``
    unless an item already satisfies ``present`` (default: equals ``add``)."""
    old, new, comments_kept = plan_list_edit(
        path, parent, child, add=add, remove=remove, present=present, keep_empty=keep_empty
    )
    if comments_kept:
        return Change(path, old, new)
    return Change(
        path, old, new, note=f"{path.name} re-written by the YAML dumper: its comments are not kept"
    )


def edit_allowlist(path: Path, *, add: str | None) -> Change:
    """Plan the allowlist: drop our stale approvals, keep or add the one for ``add``."""
    return Change(path, *plan_allowlist(path, add=add, is_ours=is_distill_command))


def _backup(path: Path) -> Path:
    # An install that was killed after its backup: that backup still holds these bytes, reuse it.
    olds = sorted(path.parent.glob(f"{path.name}.*.bak"), key=lambda p: p.stat().st_mtime_ns)
    if olds and olds[-1].read_bytes() == path.read_bytes():
        return olds[-1]
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    dest = path.with_name(f"{path.name}.{stamp}.bak")
    n = 1
    while dest.exists():
        dest, n = path.with_name(f"{path.name}.{stamp}-{n}.bak"), n + 1
    tmp = temp_path(dest)  # a backup cut short by a crash must not look like a whole one
    try:
        shutil.copy2(path, tmp)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest

def apply_change(change: Change) -> Path | None:
    """Back up, then atomically replace; returns the backup path (None for a new file)."""
    if not change.changed:
        return None
    path = change.path
    with hermes_flock(path) if path.name == ALLOWLIST else contextlib.nullcontext():
        backup = _backup(path) if path.exists() else None
        if path.name == ALLOWLIST:
            mode: int | None = 0o600  # as Hermes writes it: approvals decide what runs unattended
        else:
            mode = stat.S_IMODE(backup.stat().st_mode) if backup is not None else 0o600  # as mkstemp made it
        # Atomic, and named so a temp left by a killed install is swept by the next write here.
        atomic_write_text(path, change.new, mode=mode)
    return backup


Step = Callable[[Path], Change]


def _is_ours(item: object) -> bool:
    return isinstance(item, dict) and is_distill_command(item.get("command"))


def plugin_steps(install: bool) -> list[Step]:
    """config.yaml edits for the plugin: ``plugins.enabled`` gains or loses ``distill``.

    ``enabled`` is kept as an explicit list even when emptied: Hermes treats a missing key as
    "never configured" and grandfathers every installed plugin in on its next config migration.
    Install also drops ``distill`` from ``plugins.disabled``, which wins over ``enabled``.
    """
    name = hp.PLUGIN_NAME
    if not install:
        return [
            lambda h: edit_config(
                h / "config.yaml", "plugins", "enabled", remove=lambda i: i == name, keep_empty=True
            )
        ]
    return [
        lambda h: edit_config(
            h / "config.yaml", "plugins", "disabled", remove=lambda i: i == name, keep_empty=True
        ),
        lambda h: edit_config(h / "config.yaml", "plugins", "enabled", add=name, keep_empty=True),
    ]


def shell_steps(install: bool, command: str | None = None) -> list[Step]:
    """config.yaml ``hooks.on_session_finalize`` entry plus its allowlist approval.

    Install replaces any other distill command (an old venv path) rather than adding a second one.
    """
    if not install:
        return [
            lambda h: edit_config(h / "config.yaml", "hooks", hp.HOOK_EVENT, remove=_is_ours),
            lambda h: edit_allowlist(h / ALLOWLIST, add=None),
        ]
    cmd = command or default_hook_command()

    def mine(item: object) -> bool:
        return isinstance(item, dict) and item.get("command") == cmd

    return [
        lambda h: edit_config(
            h / "config.yaml",
            "hooks",
            hp.HOOK_EVENT,
            add={"command": cmd, "timeout": HOOK_TIMEOUT},
            remove=lambda i: _is_ours(i) and not mine(i),
            present=mine,
        ),
        lambda h: edit_allowlist(h / ALLOWLIST, add=cmd),
    ]


def plan(home: Path, steps: list[Step]) -> list[Change]:
    """Run ``steps`` on a scratch copy of the profile's files; one ``Change`` per file touched.

    Pure with respect to ``home``: nothing there is written. Steps chain (each sees the last one's
    result), so a dry run shows exactly what ``--apply`` would write.
    """
    changes: dict[str, Change] = {}
    scratch = private_tempdir("distill-hook-")  # swept if a killed install left one
    try:
        originals: dict[str, str] = {}
        for name in ("config.yaml", ALLOWLIST):
            if (home / name).exists():
                originals[name] = (home / name).read_text(encoding="utf-8")
                (scratch / name).write_text(originals[name], encoding="utf-8")
        for step in steps:
            try:
                c = step(scratch)
            except InputError as exc:  # name the user's file, not our scratch copy
                raise InputError(str(exc).replace(str(scratch), str(home))) from exc
            name = c.path.name
            prev = changes.get(name)
            changes[name] = Change(
                home / name, originals.get(name, ""), c.new, (prev.note if prev else "") or c.note
            )
            c.path.write_text(c.new, encoding="utf-8")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return list(changes.values())


# --------------------------------------------------------------------------- status


def entry_point_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.name == hp.PLUGIN_NAME for ep in entry_points(group="hermes_agent.plugins"))


def status_data(home: Path) -> dict[str, Any]:
    """What is installed in this profile and what the hook last did."""
    config_path = home / "config.yaml"
    info: dict[str, Any] = {"home": str(home), "config": str(config_path), "errors": []}
    try:
        _, cfg = load_config(config_path)
        plugins = cfg.get("plugins") if isinstance(cfg.get("plugins"), dict) else {}
        enabled, disabled = plugins.get("enabled") or [], plugins.get("disabled") or []
        hooks = cfg.get("hooks") if isinstance(cfg.get("hooks"), dict) else {}
        shell = [e.get("command") for e in hooks.get(hp.HOOK_EVENT) or [] if isinstance(e, dict)]
    except DistillError as exc:
        info["errors"].append(str(exc))
        enabled, disabled, shell = [], [], []
    try:
        _, allow = load_allowlist(home / ALLOWLIST)
        approved = {
            e.get("command")
            for e in allow["approvals"]
            if isinstance(e, dict) and e.get("event") == hp.HOOK_EVENT
        }
    except DistillError as exc:
        info["errors"].append(str(exc))
        approved = set()
    info["plugin"] = {
        "enabled": hp.PLUGIN_NAME in enabled and hp.PLUGIN_NAME not in disabled,
        "disabled": hp.PLUGIN_NAME in disabled,
        "entry_point_installed": entry_point_installed(),
    }
    info["shell_hooks"] = [
        {"command": c, "allowlisted": c in approved} for c in shell if is_distill_command(c)
    ]
    state_path, log_path = hp.state_path_for(home), hp.log_path_for(home)
    info["state"], info["log"] = str(state_path), str(log_path)
    with contextlib.suppress(OSError, ValueError):
        info["last_run"] = json.loads(state_path.read_text(encoding="utf-8")).get("last_run")
    with contextlib.suppress(OSError):
        tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        info["last_log_line"] = tail[-1] if tail else None
    return info


