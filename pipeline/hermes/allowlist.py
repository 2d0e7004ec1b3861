"""Hermes's shell-hook allowlist (``$HERMES_HOME/shell-hooks-allowlist.json``).

Hermes runs a ``hooks:`` command from config.yaml unattended (gateway, cron) only if this file
approves that exact command string for that event; unapproved hooks are skipped silently. So a
shell-hook install writes the approval too, in Hermes's own format (``approved_at`` plus the
script's mtime), and an uninstall removes it. Other approvals and keys are kept as data (the file
is re-written as sorted, indented JSON, as Hermes writes it). Writers take Hermes's lock
(``hermes_flock``) so an approval Hermes writes at the same moment is not lost.

Which commands are "ours" is ``hook.is_distill_command``, passed in by the caller so that this
module does not import ``hook`` (which imports it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.errors import InputError
from pipeline.hermes import plugin as hp

ALLOWLIST = "shell-hooks-allowlist.json"


def load_allowlist(path: Path) -> tuple[str, dict[str, Any]]:
    """The file's text and data (``{"approvals": []}`` when absent); broken files raise ``InputError``."""
    if not path.exists():
        return "", {"approvals": []}
    text = path.read_text(encoding="utf-8-sig")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(
            f"{path} is not valid JSON ({exc}); left untouched. Fix or delete it, then retry."
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("approvals", []), list):
        raise InputError(f'{path}: expected {{"approvals": [...]}}; left untouched.')
    data.setdefault("approvals", [])
    return text, data


def _script_mtime(command: str) -> str | None:
    # Hermes records the approved script's mtime beside each approval (agent/shell_hooks.py).
    with contextlib.suppress(OSError, ValueError, IndexError):
        ts = os.path.getmtime(shlex.split(command)[0])
        return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")
    return None


def plan_allowlist(path: Path, *, add: str | None, is_ours: Callable[[object], bool]) -> tuple[str, str]:
    """The allowlist text before and after dropping our stale approvals and keeping or adding ``add``.

    ``is_ours`` recognises a command distill may have installed (``hook.is_distill_command``).
    """
    old, data = load_allowlist(path)
    approvals = data["approvals"]

    def ours(e: object) -> bool:
        return isinstance(e, dict) and e.get("event") == hp.HOOK_EVENT and is_ours(e.get("command"))

    keep = [e for e in approvals if not ours(e) or (add is not None and e.get("command") == add)]
    if add is not None and not any(
        isinstance(e, dict) and e.get("event") == hp.HOOK_EVENT and e.get("command") == add for e in keep
    ):
        stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        keep.append({"event": hp.HOOK_EVENT, "command": add, "approved_at": stamp,
                     "script_mtime_at_approval": _script_mtime(add)})  # fmt: skip
    if keep == approvals:
        return old, old
    return old, json.dumps({**data, "approvals": keep}, indent=2, sort_keys=True) + "\n"


@contextlib.contextmanager
def hermes_flock(path: Path) -> Iterator[None]:
    """Hermes serialises allowlist writes with flock on ``<file>.lock``; take the same lock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".lock", "a+", encoding="utf-8") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
