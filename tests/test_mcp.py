"""``distill mcp`` as an agent's host runs it: the installed console script started over stdio by the
MCP SDK's own client (``stdio_client`` + ``ClientSession``), on a real archive distilled from
``fixtures/db/hermes-v31.db`` with one published and one pending skill.

Each test opens one client session: initialize, then the calls it checks. The server is a child
process of the client; the last tests check it leaves when the client closes, with no orphan.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.shell import DISTILL, run_distill, user_env

ROOT = Path(__file__).resolve().parent.parent
V31 = ROOT / "fixtures" / "db" / "hermes-v31.db"
SID = json.loads((ROOT / "fixtures" / "db" / "sessions.json").read_text())
TOOLS = {"search_sessions", "list_sessions", "get_session", "load_session", "list_skills", "get_skill"}


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An archive of the v31 fixture's sessions, a published skill and a pending one."""
    home = tmp_path_factory.mktemp("mcp")
    db, out = home / "state.db", home / "archive"
    shutil.copy(V31, db)
    ok(run_distill("--db", str(db), "--all", "--source", "cli", "--source", "telegram", "--source", "subagent",
                   "--out", str(out), "--summarizer", "extractive", home=home))
    staged = [Path(ok(run_distill("skills", "promote", sid, "--db", str(db), "--out", str(out), "--summarizer",
                                  "extractive", home=home)).stdout.strip()).parent.name
              for sid in (SID["chain_root"], SID["cli_tools"])]
    ok(run_distill("skills", "approve", staged[0], "--out", str(out), home=home))
    (home / "skills.txt").write_text("\n".join(staged))
    return home


def skills(home: Path) -> tuple[str, str]:
    published, pending = (home / "skills.txt").read_text().split("\n")
    return published, pending


def serve(home: Path, scenario: Callable[[ClientSession], Awaitable[Any]], *args: str) -> Any:
    """Start ``distill mcp --out <archive> ARGS`` under the SDK's stdio client, initialize, run ``scenario``."""
    params = StdioServerParameters(command=str(DISTILL), args=["mcp", "--out", str(home / "archive"), *args],
                                   env=user_env(home), cwd=str(home))

    async def main() -> Any:
        with (home / "server.stderr").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                info = await session.initialize()
                assert info.server_info.name == "distill"
                return await scenario(session)

    return anyio.run(main)


def text(result: Any) -> str:
    assert len(result.content) == 1
    return result.content[0].text


def good(result: Any) -> str:
    assert not result.is_error, text(result)
    return text(result)


def error(result: Any) -> str:
    assert result.is_error, text(result)
    message = text(result)
    assert "Traceback" not in message
    return message


# --------------------------------------------------------------------------- the tools


def test_the_six_tools_are_listed_with_what_they_return_and_their_limits(home: Path) -> None:
    async def scenario(session: ClientSession) -> Any:
        return (await session.list_tools()).tools

    tools = {t.name: t for t in serve(home, scenario)}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert "Limits:" in (tool.description or ""), tool.name
        assert tool.annotations is not None and tool.annotations.read_only_hint
    schema = tools["search_sessions"].input_schema["properties"]
    assert schema["limit"]["maximum"] == 50 and schema["max_chars"]["maximum"] == 60_000
    assert {"tags", "projects", "sources", "models", "since", "until", "end_states", "semantic"} <= set(schema)
    assert tools["load_session"].input_schema["properties"]["budget"]["maximum"] == 8_000
    assert tools["list_sessions"].input_schema["properties"]["limit"]["maximum"] == 200


def test_each_tool_answers_as_the_commands_do(home: Path) -> None:
    out = home / "archive"
    published, pending = skills(home)

    async def scenario(session: ClientSession) -> dict[str, str]:
        calls = {
            "search": ("search_sessions", {"query": "csv importer crash"}),
            "search_filtered": ("search_sessions", {"query": "csv importer", "sources": ["telegram"]}),
            "search_zh": ("search_sessions", {"query": "记账小工具"}),
            "semantic": ("search_sessions", {"query": "数据库连接失败", "semantic": True, "limit": 3}),
            "list": ("list_sessions", {"limit": 3, "sort": "messages"}),
            "list_since": ("list_sessions", {"since": "2026-11-07", "until": "2026-11-07"}),
            "get": ("get_session", {"id": SID["cli_tools"][-6:]}),
            "load": ("load_session", {"refs": [SID["cli_tools"]], "budget": 300}),
            "load_query": ("load_session", {"refs": ["csv importer"], "sections": ["goal", "open"], "limit": 1}),
            "skills": ("list_skills", {}),
            "pending": ("list_skills", {"status": "pending"}),
            "skill": ("get_skill", {"name": published}),
            "pending_skill": ("get_skill", {"name": pending}),
        }
        return {key: good(await session.call_tool(name, args)) for key, (name, args) in calls.items()}

    got = serve(home, scenario)
    # search_sessions is distill search: the same hits in the same order, matches in bold.
    cli = json.loads(ok(run_distill("search", "csv importer crash", "--out", str(out), "--json", home=home)).stdout)
    found = json.loads(got["search"])
    assert [h["id"] for h in found["hits"]] == [h["note"]["id"] for h in cli["hits"]]
    assert found["hits"][0]["id"] == SID["cli_tools"] and "**" in found["hits"][0]["snippet"]
    assert all(h["source"] == "telegram" for h in json.loads(got["search_filtered"])["hits"])
    assert json.loads(got["search_zh"])["hits"][0]["id"] == SID["chinese"]
    meaning = json.loads(got["semantic"])  # a Chinese query finds the English database session by meaning
    assert meaning["semantic"] is True and SID["secrets"] in [h["id"] for h in meaning["hits"]]
    # list_sessions is distill ls.
    rows = json.loads(got["list"])["sessions"]
    cli_rows = json.loads(ok(run_distill("ls", "--out", str(out), "--json", "--sort", "messages", "--limit", "3",
                                         home=home)).stdout)
    assert [r["id"] for r in rows] == [r["id"] for r in cli_rows] and len(rows) == 3
    assert {r["id"] for r in json.loads(got["list_since"])["sessions"]} == {SID["chinese"], SID["secrets"]}
    # get_session is the note as distill show --raw prints it, under the reference frame.
    raw = ok(run_distill("show", SID["cli_tools"], "--raw", "--out", str(out), home=home)).stdout
    assert got["get"].startswith("> [DISTILLED SESSIONS — REFERENCE ONLY]") and got["get"].endswith(raw)
    # load_session is distill load's block, byte for byte.
    block = ok(run_distill("load", SID["cli_tools"], "--budget", "300", "--out", str(out), home=home)).stdout
    assert got["load"] == block and "do not re-execute" in block
    assert SID["cli_tools"] in got["load_query"] and "**Goal:**" in got["load_query"]
    # Skills: the published one and the pending one, each marked for what it is.
    listed = {s["name"]: s for s in json.loads(got["skills"])["skills"]}
    assert listed[published]["status"] == "published" and listed[pending]["status"] == "pending review"
    assert [s["name"] for s in json.loads(got["pending"])["skills"]] == [pending]
    assert f"Skill `{published}` (published v1)" in got["skill"] and f"name: {published}" in got["skill"]
    assert "PENDING REVIEW" in got["pending_skill"] and "## Procedure" in got["pending_skill"]


def test_results_are_bounded_and_say_what_was_cut(home: Path) -> None:
    async def scenario(session: ClientSession) -> dict[str, str]:
        return {
            "note": good(await session.call_tool("get_session", {"id": SID["cli_tools"], "max_chars": 1000})),
            "list": good(await session.call_tool("list_sessions", {"limit": 200, "max_chars": 1000})),
            "search": good(await session.call_tool("search_sessions", {"query": "the", "limit": 50,
                                                                       "max_chars": 1000})),
            "load": good(await session.call_tool("load_session", {"refs": ["csv importer"], "budget": 200,
                                                                  "limit": 10})),
        }

    got = serve(home, scenario)
    assert len(got["note"]) <= 1000 and "[truncated: " in got["note"] and "max_chars" in got["note"]
    listing = json.loads(got["list"])  # still valid JSON: whole rows are dropped, never half a row
    assert len(got["list"]) <= 1000 and 0 < len(listing["sessions"]) < listing["sessions_in_archive"]
    assert "not shown" in listing["truncated"]
    assert len(got["search"]) <= 1000
    assert len(got["load"]) // 4 <= 200 + 10  # distill load's budget (about four characters a token)


# --------------------------------------------------------------------------- errors


def test_bad_arguments_and_unknown_ids_are_tool_errors_and_the_server_keeps_serving(home: Path) -> None:
    published, _ = skills(home)

    async def scenario(session: ClientSession) -> dict[str, str]:
        got = {
            "limit": error(await session.call_tool("search_sessions", {"query": "csv", "limit": 500})),
            "type": error(await session.call_tool("list_sessions", {"limit": "many"})),
            "missing": error(await session.call_tool("get_session", {})),
            "since": error(await session.call_tool("list_sessions", {"since": "whenever"})),
            "section": error(await session.call_tool("load_session", {"refs": ["csv"], "sections": ["nonsense"]})),
            "budget": error(await session.call_tool("load_session", {"refs": ["csv"], "budget": 10})),
            "id": error(await session.call_tool("get_session", {"id": "Fix CSV importr crash on empty rows"})),
            "load_id": error(await session.call_tool("load_session", {"refs": ["zzzzqqqq"]})),
            "skill": error(await session.call_tool("get_skill", {"name": published[:-2]})),
            "tool": error(await session.call_tool("no_such_tool", {})),
        }
        got["after"] = good(await session.call_tool("get_session", {"id": SID["cli_tools"]}))
        return got

    got = serve(home, scenario)
    assert "limit" in got["limit"] and "less than or equal to 50" in got["limit"]
    assert "limit" in got["type"] and "integer" in got["type"]
    assert "id" in got["missing"] and "required" in got["missing"].lower()
    assert "'whenever'" in got["since"] and "7d" in got["since"]
    assert "sections" in got["section"]
    assert "budget" in got["budget"]
    # An unknown id names the closest ones, as distill show does, and the tool that lists them.
    assert f"closest: {SID['cli_tools']} (Fix CSV importer crash on empty rows)" in got["id"]
    assert "list_sessions" in got["id"]
    assert "no session 'zzzzqqqq'" in got["load_id"]
    assert f"closest: {published}" in got["skill"]
    assert "no_such_tool" in got["tool"]
    assert "Fix CSV importer crash on empty rows" in got["after"]  # still serving
    assert "Traceback" not in (home / "server.stderr").read_text()


def test_a_missing_archive_is_a_tool_error_not_a_dead_server(tmp_path: Path) -> None:
    async def scenario(session: ClientSession) -> str:
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        return error(await session.call_tool("list_sessions", {}))

    message = serve(tmp_path, scenario)
    assert f"no archive at {tmp_path / 'archive'}" in message and "distill --all" in message


# --------------------------------------------------------------------------- the process


def _servers(marker: str) -> list[int]:
    """Pids of live processes whose command line holds ``marker`` (zombies are dead and excluded)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and "mcp" in cmdline and state != "Z":
            found.append(int(pid))
    return found


def test_the_server_leaves_with_its_client(home: Path, tmp_path: Path) -> None:
    """No orphan: after the SDK client closes, no ``distill mcp`` over this archive is left running."""
    marker = str(tmp_path / "archive")
    shutil.copytree(home / "archive", marker, symlinks=True)
    shutil.copytree(home / ".hermes", tmp_path / ".hermes", symlinks=True)

    async def scenario(session: ClientSession) -> list[int]:
        good(await session.call_tool("list_sessions", {"limit": 1}))
        return _servers(marker)

    assert len(serve(tmp_path, scenario)) == 1  # running while the session was open
    assert _servers(marker) == []


def test_the_server_exits_by_itself_when_stdin_closes(home: Path) -> None:
    """Closing stdin is how a client says goodbye (the SDK kills only what does not leave in time)."""
    proc = subprocess.Popen([str(DISTILL), "mcp", "--out", str(home / "archive")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=user_env(home), cwd=home)
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}
    try:
        stdout, stderr = proc.communicate((json.dumps(request) + "\n").encode(), timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    answer = json.loads(stdout.decode().splitlines()[0])  # stdout holds protocol messages and nothing else
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "distill"


def test_check_lists_the_tools_without_a_client(home: Path) -> None:
    proc = ok(run_distill("mcp", "--out", str(home / "archive"), "--check", home=home))
    assert set(proc.stdout.split(": ", 1)[1].strip().split(", ")) == TOOLS


def test_help_has_examples_and_mcp_is_never_answered_from_a_run_record() -> None:
    from typer.testing import CliRunner

    from pipeline.cli.app import TOOL_NAMES
    from pipeline.cli.mcp import mcp_app
    from pipeline.cli.record import TOOL_COMMANDS

    result = CliRunner().invoke(mcp_app, ["--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output and "distill mcp --out" in result.output and "mcp_servers" in result.output
    assert "mcp" in TOOL_NAMES and "mcp" in TOOL_COMMANDS  # a server is started, never replayed
