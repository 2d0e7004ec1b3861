from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tenacity import wait_none

from pipeline.config import build_settings
from pipeline.llm.choice import NO_KEY, ModelChoice, resolve_model
from pipeline.llm.client import BudgetExceeded, LLMClient, is_retryable, open_client
from pipeline.models import RunReport

# --------------------------------------------------------------------------- model resolution


def _settings(home: Path, **kw):
    return build_settings(db=home / "state.db", env={"HERMES_HOME": str(home)}, **kw)


@pytest.fixture
def no_embedded(monkeypatch):
    monkeypatch.setattr("pipeline.llm.local.embedded_available", lambda: False)


def test_flag_wins(hermes_home, no_embedded):
    (hermes_home / "config.yaml").write_text("model:\n  provider: openrouter\n  default: x/y\n")
    c = resolve_model(
        _settings(hermes_home, model="anthropic/claude-3-5-haiku-latest"), env={"ANTHROPIC_API_KEY": "k1"}
    )
    assert (c.model, c.source, c.api_key) == ("anthropic/claude-3-5-haiku-latest", "flag", "k1")


def test_env_then_distill_config(hermes_home, no_embedded):
    s = _settings(hermes_home)
    assert resolve_model(s, env={"DISTILL_MODEL": "openai/gpt-4o-mini"}).source == "env:DISTILL_MODEL"
    (hermes_home / "distill.yaml").write_text("model: ollama/qwen2.5\napi_base: http://127.0.0.1:11434\n")
    c = resolve_model(s, env={})
    assert c.model == "ollama/qwen2.5" and c.api_base == "http://127.0.0.1:11434"


def test_hermes_main_model_with_key_from_dotenv(hermes_home, no_embedded):
    (hermes_home / "config.yaml").write_text(
        "model:\n  provider: openrouter\n  default: anthropic/claude-opus-4.7\n  base_url: ''\n"
    )
    (hermes_home / ".env").write_text("OPENROUTER_API_KEY=sk-or-v1-abc\n")
    (hermes_home / "auth.json").write_text("{never read}")
    c = resolve_model(_settings(hermes_home), env={})
    assert c.model == "openrouter/anthropic/claude-opus-4.7"
    assert c.api_key == "sk-or-v1-abc" and c.source == "hermes:model"
    assert "sk-or" not in repr(c)


def test_hermes_auxiliary_compression_preferred(hermes_home, no_embedded):
    (hermes_home / "config.yaml").write_text(
        "model: {provider: openrouter, default: big/model}\n"
        "auxiliary:\n  compression: {provider: gemini, model: gemini-2.5-flash, base_url: '', api_key: ''}\n"
    )
    c = resolve_model(_settings(hermes_home), env={"GEMINI_API_KEY": "g", "OPENROUTER_API_KEY": "o"})
    assert (c.model, c.source) == ("gemini/gemini-2.5-flash", "hermes:auxiliary.compression")


def test_hermes_auto_aux_means_main_and_base_url_wins(hermes_home, no_embedded):
    (hermes_home / "config.yaml").write_text(
        "model:\n  provider: custom\n  model: qwen3\n  base_url: http://10.0.0.2:8080/v1\n"
        "auxiliary:\n  compression: {provider: auto, model: ''}\n"
    )
    c = resolve_model(_settings(hermes_home), env={})
    assert (c.model, c.api_base, c.api_key) == ("openai/qwen3", "http://10.0.0.2:8080/v1", NO_KEY)


def test_hermes_legacy_string_and_oauth(hermes_home, no_embedded):
    (hermes_home / "config.yaml").write_text("model: openai/gpt-4o\n")
    assert resolve_model(_settings(hermes_home), env={"OPENAI_API_KEY": "k"}).model == "openai/gpt-4o"
    (hermes_home / "config.yaml").write_text("model: {provider: openai-codex, default: gpt-5}\n")
    notes: list[str] = []
    assert resolve_model(_settings(hermes_home), env={}, notes=notes) is None
    assert any("OAuth" in n for n in notes)


def test_missing_key_is_explained(hermes_home, no_embedded):
    (hermes_home / "config.yaml").write_text("model: {provider: anthropic, default: claude-sonnet-4}\n")
    notes: list[str] = []
    assert resolve_model(_settings(hermes_home), env={}, notes=notes) is None
    assert any("ANTHROPIC_API_KEY" in n for n in notes)


def test_embedded_only_when_asked_for(hermes_home, monkeypatch):
    """``auto`` does not pick the embedded model (not shown to beat extractive on the blind test part);
    ``--summarizer llm`` does, and the notice says how to get a model."""
    monkeypatch.setattr("pipeline.llm.local.embedded_available", lambda: True)
    notes: list[str] = []
    assert resolve_model(_settings(hermes_home), env={}, notes=notes) is None
    assert "--summarizer llm uses the embedded local model" in notes[0] and "--model" in notes[0]
    c = resolve_model(_settings(hermes_home, summarizer="llm"), env={})
    assert c.embedded and c.model == "openai/qwen2.5-coder-1.5b-instruct"


def test_extractive_setting_disables(hermes_home):
    assert resolve_model(_settings(hermes_home, summarizer="extractive", model="openai/x"), env={}) is None


def test_open_client_without_model_notices_once(hermes_home, no_embedded):
    report = RunReport()
    with open_client(_settings(hermes_home), report, env={}) as client:
        assert client is None
    assert len(report.notices) == 1 and "extractive" in report.notices[0]


def test_litellm_not_imported_by_resolution(hermes_home, no_embedded):
    import subprocess
    import sys

    code = (
        "import sys; from pipeline.llm.client import resolve_model; from pipeline.summarize import mapreduce as summarise; from pipeline import redact; from pipeline.summarize import cache; "
        "print('litellm' in sys.modules, 'instructor' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent.parent,
    )
    assert out.stdout.split() == ["False", "False"]


# --------------------------------------------------------------------------- retry policy


def test_retry_classification():
    import litellm

    assert is_retryable(litellm.RateLimitError(message="m", llm_provider="openai", model="m"))
    assert is_retryable(litellm.Timeout(message="m", llm_provider="openai", model="m"))
    assert is_retryable(litellm.InternalServerError(message="m", llm_provider="openai", model="m"))
    assert not is_retryable(litellm.BadRequestError(message="m", llm_provider="openai", model="m"))
    assert not is_retryable(litellm.AuthenticationError(message="m", llm_provider="openai", model="m"))
    assert not is_retryable(ValueError("validation"))


class _Server:
    """A tiny OpenAI-compatible endpoint on 127.0.0.1 answering with scripted status codes."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = list(statuses)
        self.hits = 0
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.hits += 1
                status = outer.statuses.pop(0) if outer.statuses else 200
                body = (
                    {"error": {"message": "scripted", "type": "x"}}
                    if status != 200
                    else {
                        "id": "1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": "ok"},
                            }
                        ],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
                    }
                )
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __exit__(self, *a):
        self.httpd.shutdown()


def _call(api_base: str, num_retries: int) -> LLMClient:
    c = LLMClient(
        ModelChoice("openai/m", "test", api_base=api_base, api_key=NO_KEY),
        num_retries=num_retries,
        retry_wait=wait_none(),
    )
    asyncio.run(c._acompletion(messages=[{"role": "user", "content": "hi"}], max_tokens=5))
    return c


def test_5xx_is_retried_then_succeeds():
    srv = _Server([500, 503])
    with srv as base:
        c = _call(base, num_retries=3)
    assert srv.hits == 3 and c.usage.calls == 1 and c.usage.input_tokens == 5


def test_429_is_retried():
    srv = _Server([429])
    with srv as base:
        _call(base, num_retries=2)
    assert srv.hits == 2


@pytest.mark.parametrize("status", [400, 401, 404])
def test_4xx_is_never_retried(status):
    import litellm

    srv = _Server([status, status, status])
    with (
        srv as base,
        pytest.raises((litellm.BadRequestError, litellm.AuthenticationError, litellm.NotFoundError)),
    ):
        _call(base, num_retries=3)
    assert srv.hits == 1


def test_num_retries_zero_fails_at_once():
    import litellm

    srv = _Server([500, 500])
    with srv as base, pytest.raises(litellm.InternalServerError):
        _call(base, num_retries=0)
    assert srv.hits == 1


# --------------------------------------------------------------------------- budgets


def test_max_tokens_stops_before_the_call():
    srv = _Server([])
    with srv as base:
        c = LLMClient(
            ModelChoice("openai/m", "t", api_base=base, api_key=NO_KEY), num_retries=0, max_tokens=50
        )
        with pytest.raises(BudgetExceeded):
            asyncio.run(c._acompletion(messages=[{"role": "user", "content": "x" * 400}], max_tokens=100))
    assert srv.hits == 0 and c.exhausted


def test_max_cost_uses_the_price_table():
    c = LLMClient(ModelChoice("openai/gpt-4o", "t", api_key="k"), num_retries=0, max_cost=0.000001)
    with pytest.raises(BudgetExceeded, match="max-cost"):
        asyncio.run(c._acompletion(messages=[{"role": "user", "content": "x" * 4000}], max_tokens=500))
