"""Shared test setup. The first lines keep litellm off the network before anything imports it."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HERMES_HOME and DISTILL_* at a temp dir so no test can touch a real ~/.hermes."""
    home = tmp_path_factory.mktemp("hermes_home")
    monkeypatch.setenv("HERMES_HOME", str(home))
    # A developer's venv may have the [local] extra: tests must not start llama.cpp unless they ask.
    monkeypatch.setenv("DISTILL_EMBEDDED", "0")
    for var in ("DISTILL_MODEL", "DISTILL_CONFIG", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def hermes_home(_isolated_home: Path) -> Path:
    return _isolated_home
