"""Run the installed ``distill`` the way a user's shell does.

``conftest.py`` presets variables for in-process tests (``LITELLM_LOCAL_MODEL_COST_MAP``,
``DISTILL_EMBEDDED``...); a subprocess that inherited them once hid a bug that made every user's
re-run ten times slower. ``user_env`` builds the environment from scratch: what a login shell has
(``HOME``, ``PATH``, ``LANG``, ``TERM``) plus only what the test names.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

#: The console script pip installed beside this interpreter.
DISTILL = Path(sys.executable).with_name("distill")


def user_env(home: Path, **extra: str) -> dict[str, str]:
    """A shell's environment: a fresh ``HOME`` (so ``~/.hermes`` is under it), the PATH, nothing else."""
    env = {
        "HOME": str(home),
        "PATH": f"{DISTILL.parent}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        # The embedded model stays off unless a test asks: a developer's venv may have [local].
        "DISTILL_EMBEDDED": "0",
    }
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def run_distill(
    *args: str, home: Path, env: Mapping[str, str] | None = None, cwd: Path | None = None,
    input: str | None = None, timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``distill ARGS`` as a subprocess of a shell with ``user_env(home)`` (updated by ``env``)."""
    full = user_env(home)
    full.update(env or {})
    return subprocess.run([str(DISTILL), *args], env=full, cwd=cwd or home, capture_output=True, text=True,
                          input=input, timeout=timeout, check=False)


def session_notes(out: Path) -> list[Path]:
    """The session notes under ``out``: not distill's own folders, the archive's git repository, the
    project index notes the link pass writes (``projects/``), staged skills or gbrain's foreign pages."""
    skip = {"projects", "skills", "gbrain"}
    return sorted(p for p in out.rglob("*.md")
                  if not {".distill", ".git"} & set(p.parts) and p.relative_to(out).parts[0] not in skip)
