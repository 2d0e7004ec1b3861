"""The whole pipeline on the fixture databases built by real Hermes code (fixtures/db/MANIFEST.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import frontmatter
import pytest
from typer.testing import CliRunner

from pipeline.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
DBS = ROOT / "fixtures" / "db"
IDS = json.loads((DBS / "sessions.json").read_text("utf-8"))
FIXTURE_SECRETS = ("sk-proj-Zq8vN3xT5bL2mK9pR4wY7cH1dF6gJ0sA", "hunter2-Prod!", "Sup3rS3cretPass")


@pytest.fixture(params=["hermes-v31.db", "hermes-v22.db"])
def distilled(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[dict, Path]:
    db = tmp_path / "state.db"
    shutil.copy(DBS / request.param, db)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["--db", str(db), "--all", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout), out


def _note(out: Path, sid: str) -> frontmatter.Post:
    [path] = [p for p in out.rglob("*.md") if frontmatter.load(p).get("id") == sid]
    return frontmatter.load(path)


def test_every_row_class_is_handled(distilled: tuple[dict, Path]) -> None:
    report, _ = distilled
    status = {r["session_id"]: r["status"] for r in report["results"]}
    assert status[IDS["empty"]] == "skipped"
    assert all(v == "written" for k, v in status.items() if k != IDS["empty"])
    # cron, tool and subagent sessions are skipped by default; chain segments fold into their root
    for role in ("cron", "tool", "subagent", "chain_mid", "chain_tip"):
        assert IDS[role] not in status
    assert report["failed"] == 0


def test_lineage_and_generations(distilled: tuple[dict, Path]) -> None:
    _, out = distilled
    chain = _note(out, IDS["chain_root"])
    assert chain["generations"] == 3
    assert IDS["chain_tip"] in chain["aliases"] or IDS["chain_tip"] in chain.content
    compacted = _note(out, IDS["compacted"])
    assert compacted["generations"] == 3
    parent = _note(out, IDS["cli_tools"])
    assert IDS["branch"] in parent.content or "branch" in parent.content.lower()


def test_codex_items_and_multimodal_text_reach_the_note(distilled: tuple[dict, Path]) -> None:
    _, out = distilled
    assert _note(out, IDS["codex_items"])["message_count"] > 0
    assert _note(out, IDS["telegram_dm"])["message_count"] > 0


def test_no_secret_reaches_a_file_and_injection_does_not_steer(distilled: tuple[dict, Path]) -> None:
    _, out = distilled
    for path in out.rglob("*"):
        if path.is_file():
            text = path.read_text("utf-8", errors="replace")
            for secret in FIXTURE_SECRETS:
                assert secret not in text, (path, secret)
    note = _note(out, IDS["secrets"])
    assert note["title"] != "pwned" and "pwned" not in note.content.split("## ")[1]


def test_chinese_session_gets_chinese_headings(distilled: tuple[dict, Path]) -> None:
    _, out = distilled
    note = _note(out, IDS["chinese"])
    assert note["language"] == "zh"
    assert "## 目标" in note.content and "## 关键决策" in note.content
    assert "SQLite" in note.content


def test_corrupt_rows_are_reported_and_the_run_goes_on(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(ROOT / "fixtures"))
    from handmade import write_handmade_db

    db, out = tmp_path / "state.db", tmp_path / "out"
    ids = write_handmade_db(db)
    result = CliRunner().invoke(app, ["--db", str(db), "--all", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    by_id = {r["session_id"]: r for r in report["results"]}
    assert by_id[ids["empty"]]["status"] == "skipped"
    assert by_id[ids["harness_only"]]["status"] == "skipped"  # nothing left once harness turns go
    corrupt = by_id[ids["corrupt"]]
    assert corrupt["status"] == "written"
    problems = " ".join(corrupt["problems"])
    assert "tool_calls is not valid JSON" in problems and "NUL bytes removed" in problems
    assert "invalid UTF-8" in problems
    big = Path(by_id[ids["big"]]["path"])
    assert big.stat().st_size < 200_000  # a 10 MB tool output is summarised, never pasted
    for path in out.rglob("*.md"):
        assert "\x00" not in path.read_text("utf-8")


def test_notes_link_the_skills_they_fed_and_keep_evidence(tmp_path: Path) -> None:
    db, out = tmp_path / "state.db", tmp_path / "out"
    shutil.copy(DBS / "hermes-v31.db", db)
    sid = IDS["cli_tools"]
    runner = CliRunner()
    assert runner.invoke(app, ["--db", str(db), sid, "--out", str(out)]).exit_code == 0
    sidecar = out / ".distill" / "evidence" / f"{sid}.json"
    evidence = json.loads(sidecar.read_text("utf-8"))
    assert evidence["session_id"] == sid and evidence["commands"]  # what skill detection clusters on
    registry = out / ".distill" / "skills.json"  # as `distill skills approve` leaves it
    registry.write_text(json.dumps({"skills": {"csv-importer-fix": {"evidence": [sid], "version": 1}}}), "utf-8")
    assert runner.invoke(app, ["--db", str(db), sid, "--out", str(out), "--force"]).exit_code == 0
    note = _note(out, sid)
    assert note["skills"] == ["csv-importer-fix"]
    assert "- [[csv-importer-fix]]" in note.content


def test_promote_skill_from_the_main_command(tmp_path: Path) -> None:
    from skills_ref.validator import validate

    db, out = tmp_path / "state.db", tmp_path / "out"
    shutil.copy(DBS / "hermes-v31.db", db)
    result = CliRunner().invoke(app, ["--db", str(db), IDS["cli_tools"], "--out", str(out), "--promote-skill",
                                      "--summarizer", "extractive", "--json"])
    assert result.exit_code == 0, result.stderr
    assert any("skill drafted for review" in n for n in json.loads(result.stdout)["notices"])
    [skill] = list((out / "skills" / "pending").glob("*/SKILL.md"))
    assert validate(skill.parent) == []
    text = skill.read_text("utf-8")
    assert IDS["cli_tools"] not in text.split("---", 2)[2]  # no session ids in the body
