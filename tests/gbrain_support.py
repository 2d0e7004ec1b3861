"""The gbrain a test talks to: the stand-in in ``tests/gbrain_standin`` by default, a real gbrain when
``GBRAIN_BIN`` names one (``GBRAIN_BIN=~/.bun/bin/gbrain pytest tests/test_gbrain_contract.py tests/test_gbrain.py``).

Every test gets a fresh brain: its own ``GBRAIN_HOME`` and ``HOME`` under ``tmp_path`` and
``gbrain init --pglite --no-embedding --non-interactive``, with no API keys and gbrain's update
check off (peers-and-formats.md B.10), so a real gbrain runs offline too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

STANDIN = Path(__file__).resolve().parent / "gbrain_standin" / "gbrain"
#: Set by the developer or CI to run the suite against a real gbrain; empty means the stand-in.
REAL = os.environ.get("GBRAIN_BIN", "")
GBRAIN = Path(REAL).expanduser() if REAL else STANDIN


def brain_env(root: Path) -> dict[str, str]:
    """What gbrain needs for an isolated brain under ``root`` (added to a test's shell environment)."""
    root.mkdir(parents=True, exist_ok=True)
    return {
        "GBRAIN_BIN": str(GBRAIN),
        "GBRAIN_HOME": str(root),
        "GBRAIN_SELF_UPGRADE_MODE": "off",
        # Only the stand-in reads this: the interpreter with PyYAML (this venv's).
        "GBRAIN_STANDIN_PYTHON": sys.executable,
    }


def run_gbrain(env: dict[str, str], *args: str, stdin: str | None = None, check: bool = True
               ) -> subprocess.CompletedProcess[str]:
    full = {"HOME": env["GBRAIN_HOME"], "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8", **env}
    proc = subprocess.run([str(GBRAIN), *args], env=full, input=stdin, capture_output=True, text=True,
                          timeout=600, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"gbrain {' '.join(args)[:200]} failed ({proc.returncode}): {proc.stderr}")
    return proc


def fresh_brain(root: Path) -> dict[str, str]:
    env = brain_env(root)
    run_gbrain(env, "init", "--pglite", "--no-embedding", "--non-interactive")
    return env


def call(env: dict[str, str], tool: str, params: dict[str, Any]) -> Any:
    """``gbrain call TOOL JSON`` → the JSON it prints (any notice lines before it are skipped)."""
    out = run_gbrain(env, "call", tool, json.dumps(params)).stdout
    start = min((i for i in (out.find("{"), out.find("[")) if i >= 0), default=0)
    return json.loads(out[start:])
