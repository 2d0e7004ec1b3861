"""Shared test setup. The first lines keep litellm off the network before anything imports it."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="session")
def transcripts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of real transcripts in every format, linked from the shared corpus (tests/corpus.py)."""
    from tests.corpus import build_tree

    return build_tree(tmp_path_factory.mktemp("transcripts"))


# --------------------------------------------------------------------------- replaying LLM cassettes
# For the modules marked @pytest.mark.vcr (tests/test_summarise_cassettes.py, tests/test_skill_cassettes.py).

HEADERS_TO_STRIP = [
    "authorization",
    "api-key",
    "x-api-key",
    "openai-organization",
    "openai-project",
    "cookie",
    "set-cookie",
    "anthropic-api-key",
    "x-goog-api-key",
]


def _scrub_response(response: dict) -> dict:
    for h in ("date", "server", "set-cookie", "x-request-id"):
        response["headers"].pop(h, None)
        response["headers"].pop(h.title(), None)
    return response


@pytest.fixture(scope="module")
def vcr_config() -> dict:
    return {
        "filter_headers": HEADERS_TO_STRIP,
        "match_on": ["method", "scheme", "host", "port", "path", "query", "body"],
        "decode_compressed_response": True,
        "before_record_response": _scrub_response,
        "allow_playback_repeats": False,
    }


@pytest.fixture
def client() -> Iterator[Any]:
    """The client the cassette tests use: no retries (a retry would hide a miss), a dummy key."""
    from pipeline.llm.choice import NO_KEY, ModelChoice
    from pipeline.llm.client import LLMClient
    from tests.llm_fixtures import API_BASE, MODEL

    api_base = API_BASE or None
    key = os.environ.get("DISTILL_TEST_API_KEY") or (NO_KEY if api_base else None)
    c = LLMClient(ModelChoice(MODEL, "test", api_base=api_base, api_key=key), num_retries=0, max_reasks=2)
    yield c
    c.close()
