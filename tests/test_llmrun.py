"""LLM summaries inside a run: a model that fails falls back per session and is retried next run."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

from typer.testing import CliRunner

from pipeline.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
SID = "20261102_090000_c11a01"


def _closed_port() -> int:
    with socket.socket() as s:  # bound then released: nothing listens there during the test
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_model_falls_back_and_is_retried(tmp_path: Path) -> None:
    db, out = tmp_path / "state.db", tmp_path / "out"
    shutil.copy(ROOT / "fixtures" / "db" / "hermes-v31.db", db)
    args = ["--db", str(db), SID, "--out", str(out), "--model", "openai/unreachable",
            "--api-base", f"http://127.0.0.1:{_closed_port()}/v1", "--json"]
    first = json.loads(CliRunner().invoke(app, args).stdout)
    assert first["written"] == 1 and first["fallbacks"] == 1 and first["failed"] == 0
    assert any("used the extractive summary" in n for n in first["notices"])
    [note] = [p for p in out.rglob("*.md") if p.relative_to(out).parts[0] != "projects"]  # not project notes
    assert "summarizer: extractive" in note.read_text("utf-8")
    second = json.loads(CliRunner().invoke(app, args).stdout)
    assert second["fallbacks"] == 1  # the model was asked again, not skipped as "unchanged"


def test_summarizer_llm_without_a_model_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--db", str(ROOT / "fixtures" / "hermes" / "state-v31.db"), "--all",
                                      "--out", str(tmp_path / "o"), "--summarizer", "llm"])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: --summarizer llm:")
