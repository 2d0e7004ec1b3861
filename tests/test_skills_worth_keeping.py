"""Issue 17, "Skills worth keeping", run the way a user runs it: the installed ``distill`` in a subprocess
with a shell's environment (``tests/shell.py``), on a copy of the real Hermes database in fixtures/
and on a Hermes export written here and imported with ``distill import --into-db``.

Before the fix, ``distill 20261121_101748_56947a --promote-skill`` staged ``gh-run-been-days`` (name and
tags from stopwords), its step hard-coded ``gh run view 9900`` (the run id changed on every call), its
pitfall was the signature "error - config value : the plugin is", and ``distill skills candidates``
printed only "no candidates".
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.shell import run_distill

ROOT = Path(__file__).resolve().parent.parent
REAL_DB = ROOT / "fixtures" / "hermes" / "state-v31.db"
DEPLOY = "20261121_101748_56947a"  # "Deploy pipeline": a compression chain of three rows, 18 `gh run view`s
RUN_IDS = [str(n) for n in (*range(9900, 9906), *range(9910, 9916), *range(9920, 9926))]
#: Verbs these sessions' tasks are named by (defined here, not imported: the test must fail, not
#: error, on code from before the fix).
VERBS = {"fix", "rerun", "debug", "deploy"}
#: Words that were the name and tags before: the most frequent goal words.
STOPWORDS = {"been", "days", "has", "red", "for", "the", "it", "and", "please", "again"}


def _skill(path: Path) -> tuple[dict[str, Any], str]:
    text = path.read_text(encoding="utf-8")
    _, front, body = text.split("---\n", 2)
    return yaml.safe_load(front), body


def _assert_names_a_task(name: str, tags: list[str]) -> None:
    verb, *obj = name.split("-")
    assert verb in VERBS and obj, f"{name!r} is not a verb and an object"
    assert not set(name.split("-")) & STOPWORDS and not set(tags) & STOPWORDS, (name, tags)


@pytest.fixture
def real_db(tmp_path: Path) -> Path:
    db = tmp_path / "state.db"
    shutil.copy(REAL_DB, db)
    return db


@pytest.fixture(scope="module")
def promoted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    """``distill 20261121_101748_56947a --promote-skill --db … --out …``, once for the three defects."""
    tmp = tmp_path_factory.mktemp("promote")
    db, out = tmp / "state.db", tmp / "out"
    shutil.copy(REAL_DB, db)
    proc = run_distill(DEPLOY, "--promote-skill", "--db", str(db), "--out", str(out), home=tmp)
    assert proc.returncode == 0, proc.stderr
    (path,) = (out / "skills" / "pending").glob("*/SKILL.md")
    return (path, *_skill(path))


def test_promoted_skill_name_and_tags_say_the_task(promoted: tuple[Path, dict[str, Any], str]) -> None:
    path, meta, _ = promoted
    name, tags = meta["name"], meta["metadata"]["hermes"]["tags"]
    assert name == path.parent.name == "fix-docs-deploy-workflow"
    _assert_names_a_task(name, tags)


def test_promoted_steps_generalise_the_run_id(promoted: tuple[Path, dict[str, Any], str]) -> None:
    _, _, body = promoted
    # The run id varied 18 times in the session: one step with a placeholder, no hard-coded id.
    assert "`gh run view <run-id> --log-failed | tail -40`" in body
    assert not [r for r in RUN_IDS if r in body]


def test_promoted_pitfall_is_a_whole_sentence_from_the_evidence(promoted: tuple[Path, dict[str, Any], str]) -> None:
    _, _, body = promoted
    # The pitfall quotes the error line whole, not its signature.
    pitfalls = body.split("## Pitfalls", 1)[1].split("##", 1)[0]
    assert "“ERROR - Config value 'plugins': The \"mkdocstrings\" plugin is not installed”" in pitfalls
    assert "the plugin is”" not in pitfalls and "error - config value :" not in pitfalls


def test_no_candidates_says_why(tmp_path: Path, real_db: Path) -> None:
    out = tmp_path / "out"
    proc = run_distill("--all", "--db", str(real_db), "--out", str(out), "--summarizer", "extractive", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = run_distill("skills", "candidates", "--out", str(out), "--lexical-only", home=tmp_path)
    assert proc.returncode == 0 and proc.stdout == ""
    said = proc.stderr.strip()
    m = re.match(r"no candidates among (\d+) sessions \((\d+) successful; lexical only\): the closest pair, "
                 r"(\S+) and (\S+), has similarity (\d\.\d\d), at or above the threshold (\d\.\d\d) that groups "
                 r"sessions; the largest group has (\d) successful sessions, --min-sessions is 3$", said)
    assert m, said
    # The two parser fixes (the real pair) group, but two sessions are fewer than --min-sessions.
    assert int(m.group(1)) == 9 and float(m.group(5)) >= float(m.group(6)) == 0.22 and m.group(7) == "2"
    # With a stricter threshold the closest pair is the reason.
    proc = run_distill("skills", "candidates", "--out", str(out), "--lexical-only", "--min-sessions", "2",
                       home=tmp_path)
    assert "no candidates" not in proc.stderr and m.group(3) in proc.stdout
    proc = run_distill("skills", "candidates", "--out", str(out), "--lexical-only", "--json", home=tmp_path)
    report = json.loads(proc.stdout)
    assert report["candidates"] == [] and report["sessions"] == 9
    assert report["closest_pair"]["sessions"] == [m.group(3), m.group(4)]
    # `skills propose` (what the nightly run does) says the same when it stages nothing.
    proc = run_distill("skills", "propose", "--out", str(out), "--summarizer", "extractive", home=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "" and "no candidates among 9 sessions" in proc.stderr
    # An empty output directory says so, instead of an unexplained "no candidates".
    proc = run_distill("skills", "candidates", "--out", str(tmp_path / "empty"), "--lexical-only", home=tmp_path)
    assert "among 0 sessions" in proc.stderr and "distill --all" in proc.stderr


# --------------------------------------------------------------------------- a repeated task, three times


def _record(sid: str, day: int, title: str, turns: list[tuple[str, ...]]) -> dict[str, Any]:
    """One Hermes export line: ("user"|"assistant", text) or ("run"|"fail", command, output)."""
    t0 = 1_795_000_000 + day * 86_400
    messages: list[dict[str, Any]] = []
    for k, turn in enumerate(turns):
        ts = t0 + k * 30
        if turn[0] in ("run", "fail"):
            cid = f"call_{sid[-6:]}_{k}"
            messages.append({"role": "assistant", "content": "", "timestamp": ts, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "terminal",
                                                             "arguments": json.dumps({"command": turn[1]})}}]})
            messages.append({"role": "tool", "content": json.dumps({"output": turn[2], "exit_code": int(turn[0] == "fail")}),
                             "tool_call_id": cid, "tool_name": "terminal", "timestamp": ts + 5})
        else:
            messages.append({"role": turn[0], "content": turn[1], "timestamp": ts})
    return {"id": sid, "source": "cli", "title": title, "started_at": t0, "ended_at": t0 + len(turns) * 30,
            "end_reason": "user_exit", "cwd": "/home/ana/src/parsekit", "model": "anthropic/claude-sonnet-4.5",
            "message_count": len(messages), "messages": messages}


FAILED = "X lint in 12s (ID 3301)\nProcess completed with exit code 1."
LINT = ("src/parsekit/lexer.py:3:8: F401 `os` imported but unused\n"
        "error: Found 2 errors. Run ruff check --fix to remove them.")


def _rerun(sid: str, day: int, goal: str, run: str, branch: str) -> dict[str, Any]:
    return _record(sid, day, "CI rerun", [
        ("user", goal),
        ("run", f"gh run list --branch {branch} --limit 5", f"X  CI  {branch}  {run}"),
        ("run", f"gh run view {run} --log-failed", FAILED),
        ("fail", "ruff check src", LINT),
        ("run", "ruff check --fix src", "Found 2 errors (2 fixed, 0 remaining)."),
        ("run", f"gh run rerun {run} --failed", f"✓ Requested rerun of run {run}"),
        ("run", f"gh run watch {run} --exit-status", f"✓ Run CI ({run}) completed with 'success'"),
        ("assistant", f"Done: run {run} on {branch} is green after the rerun."),
    ])


def _export(path: Path) -> list[str]:
    repeats = [
        _rerun("20261201_090000_aa0001", 1, "CI on main is red again, rerun the failed CI jobs", "4711", "main"),
        _rerun("20261203_090000_aa0002", 3, "please rerun the failed CI jobs on the release branch", "5120",
               "release-1.2"),
        _rerun("20261205_090000_aa0003", 5, "The nightly failed. Rerun the failed CI jobs and watch them.", "6033",
               "nightly"),
    ]
    others = [
        _record("20261202_100000_bb0001", 2, "parser", [
            ("user", "the parser tests started failing after the lexer merge, can you fix them?"),
            ("run", "pytest tests/test_parser.py -x", "12 passed in 0.31s"),
            ("assistant", "Done: fixed the escape handling, all parser tests pass.")]),
        _record("20261204_100000_bb0002", 4, "migration", [
            ("user", "add a created_at column to the orders table with a migration"),
            ("run", "sqlite3 app.db < migrations/0042_orders_created_at.sql", ""),
            ("assistant", "Done: the migration is applied to app.db.")]),
        _record("20261206_100000_bb0003", 6, "backup", [
            ("user", "why is my backup cron job failing on pve2?"),
            ("run", "journalctl -u restic-backup --since yesterday", "Fatal: unable to open repository"),
            ("assistant", "Done: the password file was only readable by root; fixed its permissions.")]),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in [*repeats, *others]), encoding="utf-8")
    return [r["id"] for r in repeats]


def test_repeated_task_with_varying_values_is_staged_as_one_general_skill(tmp_path: Path) -> None:
    export, db, out = tmp_path / "export.jsonl", tmp_path / "state.db", tmp_path / "out"
    repeat_ids = _export(export)
    steps = [("import", "--into-db", str(db), str(export)),
             ("--all", "--db", str(db), "--out", str(out), "--summarizer", "extractive"),
             ("skills", "propose", "--out", str(out), "--summarizer", "extractive")]
    for args in steps:
        proc = run_distill(*args, home=tmp_path)
        assert proc.returncode == 0, (args, proc.stderr)
    assert proc.stdout.startswith("staged"), proc.stdout + proc.stderr
    (path,) = (out / "skills" / "pending").glob("*/SKILL.md")
    meta, body = _skill(path)
    _assert_names_a_task(meta["name"], meta["metadata"]["hermes"]["tags"])
    assert meta["name"] == "rerun-failed-ci-jobs"
    assert set(meta["metadata"]["distill-evidence-sessions"].split(", ")) == set(repeat_ids)
    procedure = body.split("## Procedure", 1)[1].split("## ", 1)[0]
    for step in ("gh run list --branch <branch> --limit 5", "gh run view <run-id> --log-failed",
                 "gh run rerun <run-id> --failed"):
        assert f"`{step}`" in procedure, procedure
    assert "gh run watch <run-id> --exit-status" in body
    for value in ("4711", "5120", "6033", "release-1.2", "nightly", " main "):
        assert value not in body, value
    # The error all three hit, as the evidence wrote it: whole sentences.
    assert "“error: Found 2 errors. Run ruff check --fix to remove them.”" in body


# --------------------------------------------------------------------------- the rules, in process


@pytest.mark.parametrize(("goal", "task"), [
    ("the docs deploy workflow has been red for 3 days, fix it", ("fix", ["docs", "deploy", "workflow"])),
    ("Please deploy the docs site to GitHub Pages, the new setup guide should be live.", ("deploy", ["docs", "site"])),
    ("the parser tests started failing after the lexer merge, can you fix them?", ("fix", ["parser", "tests"])),
    ("why is my backup cron job failing on pve2?", ("debug", ["backup", "cron", "job"])),
    ("Help me apply for the agentic engineering grant by Superteam", ("apply", ["agentic", "engineering", "grant"])),
    ("帮我把文档站点重新发布到 GitHub Pages 上", ("publish", ["github", "pages"])),
])
def test_goal_task_is_a_verb_and_its_object(goal: str, task: tuple[str, list[str]]) -> None:
    from pipeline.skills.generalise import goal_task

    assert goal_task(goal) == task


def test_values_that_vary_become_named_placeholders() -> None:
    from pipeline.skills.generalise import generalise_commands

    general = generalise_commands([
        "gh run view 9900 --log-failed | tail -40", "gh run view 9901 --log-failed | tail -40",
        "gh run rerun 9901 --failed",  # another step: never aligned with `view`
        "git commit -m 'fix lint'", "git commit -m 'bump version'", "pytest tests/a.py -x", "pytest tests/b.py -x",
        "mkdocs gh-deploy --force", "mkdocs gh-deploy --clean",  # flags differ: two steps, no placeholder
        "git checkout 4f2e9a1", "minsky tasks get 009 --json", "curl -sI https://ana.github.io/proj/ | head -1",
    ])
    assert general["gh run view 9900 --log-failed | tail -40"] == "gh run view <run-id> --log-failed | tail -40"
    assert general["gh run rerun 9901 --failed"] == "gh run rerun <run-id> --failed"
    assert general["git commit -m 'fix lint'"] == "git commit -m <message>"
    assert general["pytest tests/b.py -x"] == "pytest <file> -x"
    assert general["mkdocs gh-deploy --clean"] == "mkdocs gh-deploy --clean"
    assert general["git checkout 4f2e9a1"] == "git checkout <commit>"
    assert general["minsky tasks get 009 --json"] == "minsky tasks get <task-id> --json"
    # One user's home is everyone's ~.
    assert generalise_commands(["cd /Users/edobry/.local/state/minsky && bun test"]) == {
        "cd /Users/edobry/.local/state/minsky && bun test": "cd ~/.local/state/minsky && bun test"}
    # A value seen once that is no identifier stays: the URL is where this site lives.
    assert general["curl -sI https://ana.github.io/proj/ | head -1"] == "curl -sI https://ana.github.io/proj/ | head -1"


def test_whole_sentences_drop_clipped_and_tiny_fragments() -> None:
    from pipeline.skills.generalise import whole_sentences

    assert whole_sentences("Error one is here. And then a clipped bit…") == "Error one is here."
    assert whole_sentences("clipped from the start…") is None
    assert whole_sentences("exit 1") is None
    err = "ERROR - Config value 'plugins': The \"mkdocstrings\" plugin is not installed"
    assert whole_sentences(err) == err


def test_the_eval_rubric_rejects_the_skill_issue_17_reported() -> None:
    """The draft staged before the fix, rebuilt: the rubric of evals/skills_eval.py fails it on the
    three defects the issue names, and passes the draft staged now."""
    from evals.skills_eval import judge
    from pipeline.skills.evidence import Evidence
    from pipeline.skills.store import Pitfall, SkillDraft, Step
    from pipeline.skills.synthesis import extractive_draft

    ev = Evidence(session_id=DEPLOY, goal="the docs deploy workflow has been red for 3 days, fix it",
                  commands=tuple(f"gh run view {r} --log-failed | tail -40" for r in RUN_IDS),
                  errors=("ERROR - Config value 'plugins': The \"mkdocstrings\" plugin is not installed",),
                  end_state="resolved")
    before = SkillDraft(
        name="gh-run-been-days", description="Run gh run in order.", title="gh run", when_to_use=("A task.",),
        procedure=(Step(text="Run gh run", command="gh run view 9900 --log-failed | tail -40"),),
        pitfalls=(Pitfall(rule="If the output shows “error - config value : the plugin is”, fix that"),),
        verification=(Step(text="Re-run the last step"),), evidence=(DEPLOY,))
    verdict = judge(before, [ev])
    assert not verdict["name"] and not verdict["values"] and not verdict["pitfalls"] and not verdict["useful"]
    assert judge(extractive_draft([ev], single=True), [ev])["useful"]


def test_repeated_task_groups_lie_in_one_split() -> None:
    from evals.skills_eval import load_groups

    groups = load_groups()
    assert {g.split for g in groups} == {"dev", "test"}
    assert any(g.id == "fix-docs-deploy-workflow" for g in groups)
