"""``--jobs`` really runs sessions concurrently: the distill CLI against a real HTTP model server.

The server is ``evals/stub_llm_server.py`` on 127.0.0.1, answering every call after a fixed delay
with a tool call instructor accepts. The speed-up is measured on the *model-bound span* the server
saw (first request in, last answer out), so litellm's multi-second import and process start-up do
not hide the concurrency (``evals/bench_llm.py`` reports the wall-clock numbers). A socket guard
fails the test on any connection that is not to 127.0.0.1.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import frontmatter
import pytest
from typer.testing import CliRunner

from evals.stub_llm_server import StubServer
from pipeline.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_DB = ROOT / "fixtures" / "db" / "hermes-v31.db"
ROLES = ("cli_tools", "branch", "compacted", "chain_root", "telegram_dm", "codex_items", "chinese", "secrets")
DELAY = 0.3


@pytest.fixture
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"network beyond 127.0.0.1: {address!r}")
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(delay=DELAY) as server:
        yield server


def _distill(stub: StubServer, jobs: int, tmp_path: Path) -> tuple[dict[str, Any], float, int, Path]:
    home = tmp_path / f"home-jobs{jobs}"  # a fresh HERMES_HOME: a fresh summary cache
    out = home / "out"
    ids = [json.loads((FIXTURE_DB.parent / "sessions.json").read_text())[r] for r in ROLES]
    stub.reset()
    result = CliRunner().invoke(
        app,
        [*ids, "--db", str(FIXTURE_DB), "--out", str(out), "--summarizer", "llm", "--model", "openai/stub",
         "--api-base", stub.api_base, "--jobs", str(jobs), "--json"],
        env={"HERMES_HOME": str(home)},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), stub.busy_span(), stub.peak, out


def test_jobs_8_runs_sessions_concurrently(stub: StubServer, tmp_path: Path, loopback_only: None) -> None:
    serial, serial_span, serial_peak, _ = _distill(stub, 1, tmp_path)
    parallel, parallel_span, parallel_peak, out = _distill(stub, 8, tmp_path)

    assert serial["written"] == parallel["written"] == len(ROLES)
    assert serial["fallbacks"] == parallel["fallbacks"] == 0, parallel["notices"]
    assert serial_peak == 1 and parallel_peak >= 8
    assert serial_span >= serial["llm_calls"] * DELAY  # one call at a time
    assert serial_span / parallel_span >= 3, (serial_span, parallel_span)

    notes = [p for p in out.rglob("*.md") if p.name != "index.md" and p.relative_to(out).parts[0] != "projects"]
    assert len(notes) == len(ROLES)
    assert {frontmatter.load(p)["summarizer"] for p in notes} == {"openai/stub"}
