"""Foreign-format readers on real transcripts, read in place from the shared corpus (``tests/corpus.py``).

Expected numbers were hand-checked against the raw files (tool_use / function_call / marker
counts with jq-style scripts and by reading the files), not copied from reader output.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from pipeline.errors import InputError
from pipeline.models import Message, Session
from pipeline.read.detect import FORMATS, detect_format, read_sessions
from tests.corpus import corpus_file

CJK = re.compile(r"[\u4e00-\u9fff]")


def one(path: Path, fmt: str | None = None) -> Session:
    sessions = list(read_sessions(path, fmt))
    assert len(sessions) == 1
    return sessions[0]


def roles(s: Session) -> Counter[str]:
    return Counter(m.role for m in s.messages)


def calls(s: Session) -> list:
    return [c for m in s.messages for c in m.tool_calls]


def paths(s: Session, names: set[str] | None = None) -> set[str]:
    out = set()
    for c in calls(s):
        if isinstance(c.arguments, dict) and (names is None or c.name in names):
            p = c.arguments.get("file_path") or c.arguments.get("path")
            if p:
                out.add(p)
    return out


def carriers(s: Session) -> int:
    return sum(m.is_carrier for m in s.messages)


def assert_tool_rows_pair(s: Session) -> None:
    """Every tool row answers a call issued earlier in the same session."""
    seen: set[str] = set()
    for m in s.messages:
        seen.update(c.id for c in m.tool_calls if c.id)
        if m.role == "tool" and m.tool_call_id:
            assert m.tool_call_id in seen, m.tool_call_id


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("rel", "fmt"),
    [
        ("claude-code/cloak-squads-grant-setup.jsonl", "claude-code"),
        ("claude-code/session-logs-auto-worklog-skill-zh.jsonl", "claude-code"),  # starts with summary lines
        ("codex/fundwise-grant-skill.jsonl", "codex"),
        ("specstory/shadcn-admin-feature-help-zh.md", "specstory"),  # v0 "## SpecStory"
        ("specstory/forwarder-system-freight-planning-zh.md", "specstory"),
        ("aider/mozgoslav-rag-hotkey-ru.md", "aider"),
        ("hermes-dump/hermes-image-gen-ui-research-zh.json", "hermes-dump"),
        ("hermes-export/all.jsonl", "hermes-export"),
        ("README.md", None),
    ],
)
def test_detect_format(rel: str, fmt: str | None, transcripts: Path) -> None:
    if fmt is None:
        with pytest.raises(InputError, match="not a session format"):
            detect_format(transcripts / rel)
    else:
        assert detect_format(transcripts / rel) == fmt


def test_formats_listed() -> None:
    assert set(FORMATS) == {"hermes-export", "hermes-dump", "sharegpt", "claude-code", "codex", "specstory", "aider"}


def test_unknown_and_missing_input_raise_input_error(tmp_path: Path) -> None:
    junk = tmp_path / "notes.jsonl"
    junk.write_text('{"hello": 1}\n')
    with pytest.raises(InputError, match=r"notes\.jsonl.*--from"):
        list(read_sessions(junk))
    with pytest.raises(InputError, match="no such file"):
        list(read_sessions(tmp_path / "absent.jsonl"))
    with pytest.raises(InputError, match="unknown format"):
        list(read_sessions(junk, "cursor"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no session files"):
        list(read_sessions(empty))


def test_directory_walk_reads_every_format_and_skips_readme(transcripts: Path) -> None:
    sessions = list(read_sessions(transcripts))
    assert Counter(s.source for s in sessions)["claude-code"] == 4
    assert {s.source for s in sessions} >= {"claude-code", "codex", "specstory", "aider", "hermes-dump", "cli"}
    only = list(read_sessions(transcripts, "codex"))
    assert [s.source for s in only] == ["codex", "codex"]


# --------------------------------------------------------------------------- Claude Code


def test_claude_code_merges_blocks_by_message_id() -> None:
    s = one(corpus_file("claude-code-jsonl/cloak-squads-grant-setup.jsonl"))
    assert (s.id, s.source, s.origin) == ("6677d86c-a0d1-484d-946c-b89a8c928c0b", "claude-code", "claude-code-jsonl")
    assert s.title == "Apply for Superteam agentic engineering grant"  # last ai-title line
    # 13 assistant lines share 6 message ids -> 6 rows; 7 tool_use, 7 tool_result.
    assert roles(s) == {"assistant": 6, "tool": 7, "user": 3, "system": 1}
    assert Counter(c.name for c in calls(s)) == {"Bash": 4, "Read": 2, "Skill": 1}
    assert paths(s, {"Read"}) == {"/Users/rafazaum/.claude/skills/apply-grant", "/Users/rafazaum/.claude/skills/apply-grant/SKILL.md"}
    assert s.model == "claude-sonnet-4-6"
    assert s.cwd == "/Users/rafazaum/Desktop/cloak-squads"
    assert_tool_rows_pair(s)
    first_tool = next(m for m in s.messages if m.role == "tool")
    assert first_tool.tool_name == "Bash" and first_tool.tool_call_id
    assert all(m.timestamp is not None for m in s.messages)


def test_claude_code_cut_off_session() -> None:
    s = one(corpus_file("claude-code-jsonl/agentic-wallet-grant-skill-short.jsonl"))
    assert [c.name for c in calls(s)] == ["Skill", "Bash"]  # the Bash result was never written
    assert roles(s)["tool"] == 1
    assert roles(s)["system"] == 1  # isMeta skill body is harness text, not the user
    assert s.messages[0].content == "help me apply for the agentic engineering grant by Superteam"


def test_claude_code_compaction_is_a_generation() -> None:
    s = one(corpus_file("claude-code-jsonl/session-logs-auto-worklog-skill-zh.jsonl"))
    assert carriers(s) == 1
    carrier = next(m for m in s.messages if m.is_carrier)
    assert carrier.content.startswith("This session is being continued from a previous conversation")
    assert carrier.carrier_summary and not carrier.carrier_summary.startswith("This session")
    idx = s.messages.index(carrier)
    assert all(m.compacted and not m.active for m in s.messages[:idx])
    assert all(m.active for m in s.messages[idx:])
    assert len(calls(s)) == 128 and roles(s)["tool"] == 128
    assert Counter(c.name for c in calls(s))["Edit"] == 34
    written = paths(s, {"Write", "Edit", "MultiEdit"})
    assert "~/.claude/hooks/auto-daily-summary.sh" in written and len(written) == 11
    assert CJK.search(next(m.content for m in s.messages if m.role == "user"))  # Chinese, decoded cleanly
    assert s.input_tokens > 0 and s.output_tokens > 0


def test_claude_code_subagent_file_is_linked_child() -> None:
    s = one(corpus_file("claude-code-jsonl/subagent-claude-model-switch-webfetch.jsonl"))
    assert s.id == "2f8c41c3-1c48-4a04-aa9f-c0d3e00d8d40-agent-a7268cc"
    assert s.lineage.delegated_from == "2f8c41c3-1c48-4a04-aa9f-c0d3e00d8d40"
    assert [c.name for c in calls(s)] == ["WebFetch", "WebFetch"]


# --------------------------------------------------------------------------- Codex


def test_codex_rollout_with_cut_off_call() -> None:
    s = one(corpus_file("codex-rollout/fundwise-grant-skill.jsonl"))
    assert s.id == "019df370-6a11-7552-b639-f3069ba86732" and s.source == "codex"
    assert s.model == "gpt-5.5" and s.cwd == "/Users/sarthiborkar/Build/FundWise"
    assert [c.name for c in calls(s)] == ["exec_command"] * 5
    assert roles(s) == {"user": 1, "assistant": 4, "tool": 4, "system": 2}  # 5 calls, 4 outputs
    assert any("without output" in p for p in s.problems)
    assert isinstance(calls(s)[0].arguments, dict) and "SKILL.md" in calls(s)[0].arguments["cmd"]
    assert [m.content for m in s.messages if m.role == "user"] == ["use  apply grant skill"]
    assert_tool_rows_pair(s)


def test_codex_injected_context_is_system() -> None:
    s = one(corpus_file("codex-rollout/privacy-x402-init-agents-md.jsonl"))
    assert [m.content for m in s.messages if m.role == "user"] == ["init"]
    assert roles(s) == {"system": 4, "user": 1, "assistant": 3, "tool": 5}
    assert all(m.tool_name == "exec_command" for m in s.messages if m.role == "tool")
    assert any(m.reasoning for m in s.messages if m.role == "assistant")  # reasoning summaries kept


# --------------------------------------------------------------------------- SpecStory


def test_specstory_v2_tool_use_blocks() -> None:
    s = one(corpus_file("specstory/skillz-combine-design-docs.md"))
    assert s.id == "9ccb9925-163e-43b1-bcd0-40a387b69c76"
    assert s.title == "Combine design documents into final version"
    assert s.model == "gpt-5-codex"
    assert Counter(c.name for c in calls(s)) == {"todo_write": 2, "apply_patch": 1, "read_lints": 1}
    assert paths(s) == {"/Users/kevinlin/code/skillz/DESIGN-combined.md"}  # from "*** Add File:" not "undefined"
    assert roles(s)["user"] == 1
    assert_tool_rows_pair(s)


def test_specstory_v2_copilot_input_bullets() -> None:
    s = one(corpus_file("specstory/bing-wallpaper-copilot-java21-upgrade.md"))
    assert s.id == "d3703dc8-ac9f-44b1-b501-9cf4fff1e84a"
    c = Counter(x.name for x in calls(s))
    assert c["run_in_terminal"] == 19 and c["apply_patch"] == 8 and c["create_file"] == 1
    create = next(x for x in calls(s) if x.name == "create_file")
    assert create.arguments["path"].endswith("bing-wallpaper\\rewrite.yml")
    run = next(x for x in calls(s) if x.name == "run_in_terminal")
    assert run.arguments["command"].startswith("Push-Location")
    assert roles(s)["user"] == 4


def test_specstory_v2_cursor_nul_crlf_and_twin_blocks() -> None:
    raw = (corpus_file("specstory/forwarder-system-freight-planning-zh.md")).read_bytes()
    assert b"\x00" in raw and b"\r\n" in raw
    s = one(corpus_file("specstory/forwarder-system-freight-planning-zh.md"))
    assert all("\x00" not in m.content and "\r" not in m.content for m in s.messages)
    assert roles(s)["user"] == 91  # 91 _**User**_ markers
    c = Counter(x.name for x in calls(s))
    # 1043 <tool-use> blocks; Cursor writes an empty twin after 518 of them.
    assert sum(c.values()) == 525
    assert c["edit_file_v2"] == 194 and c["run_terminal_command_v2"] == 156
    edited = paths(s, {"edit_file_v2"})
    assert "e:\\cursor-projects\\Forwarder System\\AGENTS.md" in edited
    run = next(x for x in calls(s) if x.name == "run_terminal_command_v2")
    assert run.arguments["command"] == "dir /b"
    assert s.model == "claude-opus-4-7-thinking-xhigh"
    assert CJK.search(s.messages[0].content + s.messages[2].content)


def test_specstory_v15_tool_use_lines() -> None:
    s = one(corpus_file("specstory/agente-bsc-rag-resolve-pt.md"))
    c = Counter(x.name for x in calls(s))
    assert c == {"run_terminal_cmd": 25, "grep": 1, "read_file": 1, "search_replace": 1}
    assert paths(s) == {".gitignore"}
    assert roles(s)["user"] == 4
    assert any("gitignore" in m.content for m in s.messages if m.role == "assistant")


def test_specstory_v1_markers() -> None:
    s = one(corpus_file("specstory/health-backend-maven-missing-module-zh.md"))
    c = Counter(x.name for x in calls(s))
    assert c == {"read_file": 7, "list_dir": 3, "codebase_search": 3, "run_terminal_cmd": 3, "grep_search": 1}
    assert paths(s, {"read_file"}) == {"pom.xml", "common/pom.xml", "admin/src/main/resources/application.properties"}
    assert s.started_at is not None and s.started_at.isoformat().startswith("2025-09-10T02:10")


def test_specstory_v0_without_tool_calls() -> None:
    s = one(corpus_file("specstory/shadcn-admin-feature-help-zh.md"))
    assert calls(s) == []
    # 8 user markers; 46 assistant markers, 8 of them empty (tools ran but were not exported).
    assert roles(s) == {"user": 8, "assistant": 38}
    assert s.title == "实现功能的帮助请求"
    assert s.started_at is not None and s.started_at.year == 2025


def test_specstory_unclosed_fence_does_not_swallow_turns() -> None:
    s = one(corpus_file("specstory/download-manager-analysis-doc-writing-zh.md"))
    assert roles(s)["user"] == 8  # a ```kotlin fence is never closed before the 5th user turn


def test_specstory_v21_codex_rendered_patch_and_shell_commands(tmp_path: Path) -> None:
    """SpecStory v2.1 renders a Codex CLI apply_patch as one bold header per file over a diff fence (no
    "*** Update File:" line survives), and a shell call's command as a code span in the summary; a Claude
    Code Bash call as a code span under its description. The reader gives the calls their input back."""
    f = tmp_path / "export.md"
    f.write_text(
        "<!-- Generated by SpecStory, Markdown v2.1.0 -->\n\n"
        "<!-- Codex CLI Session 0aaa1111-2222-3333-4444-555566667777 (2026-01-02 10:00:00Z) -->\n\n"
        "_**User (2026-01-02 10:00:00Z)**_\n\nrename the helper and drop the old stylesheet\n\n---\n\n"
        "_**Agent (gpt-x 2026-01-02 10:00:05Z)**_\n\n"
        '<tool-use data-tool-type="write" data-tool-name="apply_patch"><details>\n'
        "<summary>Tool use: **apply_patch**</summary>\n"
        "**Update: `lib/util.js`**\n\n```diff\n*** Move to: lib/helpers.js\n@@\n-old\n+new\n```\n\n"
        "**Add: `lib/new.js`**\n\n````diff\n+const t = ```x```;\n````\n\n"
        "**Delete: `css/old.css`**\n\n"
        "</details></tool-use>\n\n"
        "_**Agent (gpt-x 2026-01-02 10:00:09Z)**_\n\n"
        '<tool-use data-tool-type="shell" data-tool-name="exec_command"><details>\n'
        "<summary>Tool use: **exec_command** `npm test`</summary>\n"
        "```\nProcess exited with code 0\nOutput:\nok\n```\n"
        "</details></tool-use>\n\n"
        "_**Agent (gpt-x 2026-01-02 10:00:12Z)**_\n\n"
        '<tool-use data-tool-type="shell" data-tool-name="Bash"><details>\n'
        "<summary>Tool use: **Bash**</summary>\nRestore the fixture\n\n`git checkout -- data/a.csv && ls data`\n\n"
        "```text\na.csv\n```\n</details></tool-use>\n\n"
        "_**Agent (gpt-x 2026-01-02 10:00:15Z)**_\n\n"
        '<tool-use data-tool-type="shell" data-tool-name="exec_command"><details>\n'
        "<summary>Tool use: **exec_command**</summary>\n```bash\nnpm run build &&\n  echo done > build.log\n```\n"
        "```\nProcess exited with code 0\n```\n</details></tool-use>\n",
        encoding="utf-8",
    )
    s = one(f)
    patch, test, bash, build = calls(s)
    assert patch.arguments["input"].splitlines() == [
        "*** Begin Patch", "*** Update File: lib/util.js", "*** Move to: lib/helpers.js", "@@", "-old", "+new",
        "*** Add File: lib/new.js", "+const t = ```x```;", "*** Delete File: css/old.css", "*** End Patch"]
    assert (test.arguments["command"], bash.arguments["command"]) == ("npm test", "git checkout -- data/a.csv && ls data")
    assert build.arguments["command"] == "npm run build &&\n  echo done > build.log"

    from pipeline.facts.derive import derive_facts

    facts = derive_facts(s)
    assert [(t.path, t.action) for t in facts.files] == [
        ("lib/util.js", "deleted"), ("lib/helpers.js", "moved"), ("lib/new.js", "created"), ("css/old.css", "deleted"),
        ("build.log", "created")]
    assert "npm test" in facts.commands


def test_specstory_of_a_session_codex_imported_from_cursor(tmp_path: Path) -> None:
    """A blind set's SpecStory "Codex CLI" export of a Cursor chat Codex imported: each call is an
    ``[external_agent_tool_call: Write]`` block (``input: {json}`` or ``key: value`` lines) with no result, so the
    session's 49 writes and edits were read as prose and the note listed no file."""
    f = tmp_path / "export.md"
    f.write_text(
        "<!-- Generated by SpecStory, Markdown v2.1.0 -->\n\n# 2026-08-20 03:09:44Z\n\n"
        "<!-- Codex CLI Session 01a01d25-6406-7c80-bf90-111b3e189974 (2026-08-20 03:09:44Z) -->\n\n"
        "_**User (2026-08-20 03:09:44Z)**_\n\nadd an NTC driver\n\n---\n\n"
        "_**Agent (2026-08-20 03:09:44Z)**_\n\nI'll write the driver.\n\n"
        "[external_agent_tool_call: Write]\n"
        'input: {"path":"c:\\\\fw\\\\ntc\\\\ntc.c","contents":"int x;\\n"}\n'
        "[/external_agent_tool_call]\n\n"
        "[external_agent_tool_call: StrReplace]\n"
        'input: {"path":"c:\\\\fw\\\\main.c","old_string":"a","new_string":"b"}\n'
        "[/external_agent_tool_call]\n\n"
        "_**Agent (2026-08-20 03:09:45Z)**_\n\n"
        "[external_agent_tool_call: Shell]\ndescription: List the folder\ncommand: dir /b c:\\fw\n"
        "[/external_agent_tool_call]\n\nDone: `ntc.c` is in.\n",
        encoding="utf-8",
    )
    s = one(f)
    write, edit, shell = calls(s)
    assert (write.name, write.arguments["path"], write.arguments["contents"]) == ("Write", "c:\\fw\\ntc\\ntc.c", "int x;\n")
    assert edit.arguments["new_string"] == "b"
    assert shell.arguments == {"description": "List the folder", "command": "dir /b c:\\fw"}
    # no result was recorded: none is made up (an empty one would read as a run that passed)
    assert not [m for m in s.messages if m.role == "tool"]
    assert [m.content for m in s.messages if m.role == "assistant" and m.content] == [
        "I'll write the driver.", "Done: `ntc.c` is in."]

    from pipeline.facts.derive import derive_facts

    assert [(t.path, t.action) for t in derive_facts(s).files if t.action != "read"] == [
        ("c:/fw/ntc/ntc.c", "created"), ("c:/fw/main.c", "modified")]


def test_specstory_copilot_edit_group_named_by_its_bare_file_name(tmp_path: Path) -> None:
    """A blind set's VS Code Copilot export (v2.1) edits through ``textEditGroup`` blocks whose summary is only
    "Edit: **LoginController.cs**": no path was read, so 14 of 19 edited files were missing. The bare name is the
    one file of that name the session read; a name read at two paths, or never read, stays as written."""
    f = tmp_path / "export.md"
    read = ('<tool-use data-tool-type="read" data-tool-name="read_file"><details>\n'
            "<summary>Tool use: **read_file**</summary>\n\nRead `{name}`\n\n**Input:**\n\n- filePath: `{path}`\n\n"
            "**Result:**\n\n```\nclass X {{}}\n```\n</details></tool-use>\n\n")
    edit = ('<tool-use data-tool-type="write" data-tool-name="textEditGroup"><details>\n'
            "<summary>Edit: **{name}**</summary>\n\n@@ lines 3-5 @@\n\n```\nclass X {{}}\n```\n</details></tool-use>\n\n")
    root = "c:\\Users\\v\\vr\\Assets\\Scripts"
    f.write_text(
        "<!-- Generated by SpecStory, Markdown v2.1.0 -->\n\n"
        "<!-- VS Code Copilot IDE Session 0eee1111-2222-3333-4444-555566667777 (2026-01-02 10:00:00Z) -->\n\n"
        "_**User (2026-01-02 10:00:00Z)**_\n\nrefactoriza los controladores\n\n---\n\n"
        "_**Agent (copilot/claude-sonnet-4.5)**_\n\n"
        + read.format(name="LoginController.cs", path=f"{root}\\UI\\LoginController.cs")
        + read.format(name="Utils.cs", path=f"{root}\\Core\\Utils.cs")
        + read.format(name="Utils.cs", path=f"{root}\\UI\\Utils.cs")
        + edit.format(name="LoginController.cs") + edit.format(name="Utils.cs") + edit.format(name="New.cs")
        + '<tool-use data-tool-type="read" data-tool-name="read_file"><details>\n'
        "<summary>Read file: LoginController.cs</summary>\n</details></tool-use>\n",
        encoding="utf-8",
    )
    paths = [c.arguments.get("path") for c in calls(one(f))]
    # only the edit group drops the folder: a bare "Read file: X" names the root's X (a root pom.xml read after
    # common/pom.xml in an eval session)
    assert paths[3:] == [f"{root}\\UI\\LoginController.cs", "Utils.cs", "New.cs", "LoginController.cs"]


def test_specstory_run_command_keeps_its_closing_quote(tmp_path: Path) -> None:
    """Class seen on a new set (a Cursor export, v2.1): a "Run command:" summary ending in a quote (a multi-line
    ``python -c "…"``) lost that quote, so the whole script was read as shell lines and "if idx > i: break" wrote a file
    named "i". Only a value quoted at both ends, with no quote inside, is a quoted query or path to unwrap."""
    f = tmp_path / "export.md"
    f.write_text(
        "<!-- Generated by SpecStory, Markdown v2.1.0 -->\n\n"
        "<!-- cursor Session 0ddd1111-2222-3333-4444-555566667777 (2026-01-02 10:00:00Z) -->\n\n"
        "_**User (2026-01-02 10:00:00Z)**_\n\nfind the 500 in the capture\n\n---\n\n"
        "_**Agent (default)**_\n\n"
        '<tool-use data-tool-type="shell" data-tool-name="run_terminal_command_v2">\n'
        '<details><summary>Tool use: **run_terminal_command_v2** \u2022 Run command: python -c "\n'
        "data = open('cap.pcap', 'rb').read()\ni = data.find(b'500')\nif i > 0: print(data[i:i + 80])\n"
        '"\n</summary>\n\n```\nb\'500 Internal\'\n```\n</details></tool-use>\n\n'
        "_**Agent (default)**_\n\n"
        '<tool-use data-tool-type="search" data-tool-name="grep"><details>\n'
        '<summary>Tool use: **grep** \u2022 Grep search for "openApp" \u2022 **2** results</summary>\n'
        "</details></tool-use>\n",
        encoding="utf-8",
    )
    s = one(f)
    run, grep = calls(s)
    assert run.arguments["command"].endswith("print(data[i:i + 80])\n\"")
    assert grep.arguments["query"] == "openApp"

    from pipeline.facts.derive import derive_facts

    assert derive_facts(s).files == ()


def test_specstory_copilot_multi_file_edit_names_each_file(tmp_path: Path) -> None:
    """Class seen on a held-out VS Code Copilot export: ``multi_replace_string_in_file`` edits several files in one
    call, and SpecStory renders its list of edits Go-style ("[map[filePath:… newString:… oldString:…] map[…]]")
    under a "- replacements:" bullet with no value. The reader gives the call that list back, one object per edit
    with its file (a Windows path, code with spaces and "key:" text in it), and facts list each file once."""
    f = tmp_path / "export.md"
    f.write_text(
        "<!-- Generated by SpecStory, Markdown v2.1.0 -->\n\n"
        "<!-- VS Code Copilot IDE Session 0ccc1111-2222-3333-4444-555566667777 (2026-01-02 10:00:00Z) -->\n\n"
        "_**User (2026-01-02 10:00:00Z)**_\n\nshow the label outside the box\n\n---\n\n"
        "_**Agent (copilot/auto)**_\n\n"
        '<tool-use data-tool-type="unknown" data-tool-name="multi_replace_string_in_file"><details>\n'
        "<summary>Tool use: **multi_replace_string_in_file**</summary>\n\n"
        "**Input:**\n\n- explanation: `Move the label outside the box.`\n- replacements:\n\n"
        "```\n[map[explanation:first filePath:c:\\w\\vis\\box.h newString:int y = top - h;\n"
        "label: draw(y); oldString:int y = top;\n] map[filePath:c:\\w\\vis\\track.h newString:a oldString:b] "
        "map[filePath:c:\\w\\vis\\box.h newString:c oldString:d]]\n```\n\n"
        "</details></tool-use>\n",
        encoding="utf-8",
    )
    (edit,) = calls(one(f))
    assert edit.arguments["replacements"] == [
        {"filePath": "c:\\w\\vis\\box.h"}, {"filePath": "c:\\w\\vis\\track.h"}, {"filePath": "c:\\w\\vis\\box.h"}]

    from pipeline.facts.derive import derive_facts

    assert [(t.path, t.action) for t in derive_facts(one(f)).files] == [
        ("c:/w/vis/box.h", "modified"), ("c:/w/vis/track.h", "modified")]


def test_specstory_copilot_localised_reads_and_unnamed_patches(tmp_path: Path) -> None:
    """A VS Code Copilot export in the editor's language: a read's summary only links its file ("正在读取
    [](vscode-vfs://github/o/r/Scripts/a.sh)"), and ``copilot_applyPatch`` shows the new code in one fence and names
    no file. The link is the read's path (relative to the repository); a patch is the file read before in its
    fence's language, and among several, the one the next words say changed ("在 `a.sh` 中新增", not "校验了 `b.sh`")."""
    def read(uri: str) -> str:
        return ('<tool-use data-tool-type="read" data-tool-name="copilot_readFile"><details>\n'
                f"<summary>Tool use: **copilot_readFile** • 正在读取 [](vscode-vfs://github/o/r/{uri})</summary>\n\n"
                f"读取 [](vscode-vfs://github/o/r/{uri})\n\n</details></tool-use>\n\n")

    def patch(lang: str, code: str) -> str:
        return ('<tool-use data-tool-type="write" data-tool-name="copilot_applyPatch"><details>\n'
                '<summary>Tool use: **copilot_applyPatch** • 正在使用 "应用修补程序"</summary>\n\n'
                f"```{lang}\n{code}\n```\n\n</details></tool-use>\n\n")

    f = tmp_path / "export.md"
    f.write_text(
        "<!-- Generated by SpecStory, Markdown v2.1.0 -->\n\n"
        "<!-- VS Code Copilot IDE Session 0ddd1111-2222-3333-4444-555566667777 (2026-01-02 10:00:00Z) -->\n\n"
        "_**User (2026-01-02 10:00:00Z)**_\n\n看看构建脚本\n\n---\n\n_**Agent (copilot/gpt-5)**_\n\n"
        + read("Scripts/a.sh") + read("Scripts/b.sh") + read(".github/workflows/core.yml#1-1") +
        "---\n\n_**User (2026-01-02 10:01:00Z)**_\n\n修一下\n\n---\n\n_**Agent (copilot/gpt-5)**_\n\n"
        + patch("yaml", "name: CORE\non: push") + patch("shellscript", "#!/bin/bash\necho ok") +
        "我已做的改进：\n1. 在 `a.sh` 中新增逻辑。\n2. 校验了 `b.sh`。\n3. `core.yml` 改为每次推送构建。\n",
        encoding="utf-8",
    )
    from pipeline.facts.derive import derive_facts

    files = [(t.path, t.action) for t in derive_facts(one(f)).files]
    assert files == [("Scripts/a.sh", "modified"), ("Scripts/b.sh", "read"), (".github/workflows/core.yml", "modified")]


def test_specstory_copilot_reasoning_glued_into_the_reply_is_reasoning(tmp_path: Path) -> None:
    """VS Code Copilot exports of reasoning models (seen on two new sessions) glue the reasoning summary into the reply:
    titles run together ("**Checking indentation****Fixing the method**"), a title straight after the last sentence of
    its text or run into the answer's first word, a reply that opens with a title and plans in the first person, and
    English planning run into a Chinese answer. That is reasoning (never quoted as what was done); the answer stays."""
    f = tmp_path / "export.md"
    f.write_text(
        "<!-- Generated by SpecStory, Markdown v2.1.0 -->\n\n<!-- vscode Session 0eee1111-2222-3333-4444-555566667777 "
        "(2026-01-02 10:00Z) -->\n\n_**User (2026-01-02 10:00Z)**_\n\n这是什么问题\n\n---\n\n_**Agent (copilot/gpt-5)**_\n\n"
        "**Describing TLOG error**The publish failed because the entry already exists.\n\n"
        "**Checking indentation issues****Fixing inconsistent indentation in method**\n\n"
        "I'm weighing the risks of each fix.**Handling existing todo items****Preparing final response**\n\n"
        "---\n\n_**User (2026-01-02 10:01Z)**_\n\n修一下\n\n---\n\n_**Agent (copilot/gpt-5)**_\n\n"
        "**Proposing dual-build strategy**\n\nI need to be careful with secrets. I plan to add an example.\n\n"
        "I'll reference specific files in Chinese.已在源头修正 `$` 的问题。\n- 移除 `compile-runes` 额外步骤。\n\n"
        "**Note:** run `pnpm build` again.\n\n---\n\n_**User (2026-01-02 10:02Z)**_\n\nclicks do nothing\n\n---\n\n"
        "_**Agent (copilot/claude-sonnet-4)**_\n\nThe user is having an issue with clicks. Let me examine the code."
        "I found the issue.\n\nBoth components call `on_click()` now.\n",
        encoding="utf-8",
    )
    replies = [m for m in one(f).messages if m.role == "assistant"]
    assert [m.content for m in replies][2:] == ["I found the issue.\n\nBoth components call `on_click()` now."]
    replies = replies[:2]
    assert [m.content for m in replies] == [
        "The publish failed because the entry already exists.",
        "已在源头修正 `$` 的问题。\n- 移除 `compile-runes` 额外步骤。\n\n**Note:** run `pnpm build` again."]
    assert replies[0].reasoning == ("Describing TLOG error\nChecking indentation issues\nFixing inconsistent indentation "
                                    "in method\nI'm weighing the risks of each fix.\nHandling existing todo items\n"
                                    "Preparing final response")
    assert replies[1].reasoning.startswith("Proposing dual-build strategy\nI need to be careful with secrets.")
    # Markdown written for a reader is the reply, in any export: "**Note:** text", "1. **Bold** text"
    g = tmp_path / "cursor.md"
    g.write_text(f.read_text(encoding="utf-8").replace("vscode Session", "Cursor Session"), encoding="utf-8")
    assert "I need to be careful" in [m for m in one(g).messages if m.role == "assistant"][1].content


def test_specstory_copilot_replace_string_with_no_file_is_its_read_file(tmp_path: Path) -> None:
    """``copilot_replaceString`` rendered with only its result's JSON (the new code as ``content``, the fence's backticks
    HTML-escaped, no file): the code in one fence, like an unnamed ``copilot_applyPatch``, so facts find the file the
    session read of that language (a new Copilot session's only edited file was missing from its note)."""
    result = json.dumps({"invocationMessage": 'Using "Replace String in File"', "isConfirmed": {"type": 1},
                         "content": "&#96;&#96;&#96;tsx\n  useEffect(() =&gt; reload(), [pathname]);\n&#96;&#96;&#96;",
                         "toolCallResult": None}, indent=2)
    f = tmp_path / "export.md"
    f.write_text(
        "<!-- Generated by SpecStory, Markdown v2.1.0 -->\n\n<!-- vscode Session 0fff1111-2222-3333-4444-555566667777 "
        "(2026-01-02 10:00Z) -->\n\n_**User (2026-01-02 10:00Z)**_\n\nthe unread count is stale\n\n---\n\n"
        "_**Agent (copilot/claude-sonnet-4.5)**_\n\n"
        '<tool-use data-tool-type="read" data-tool-name="copilot_readFile"><details>\n<summary>Tool use: '
        "**copilot_readFile** • Reading [](file:///c%3A/w/app/src/Library.tsx#1-1), lines 1 to 150</summary>\n\n"
        "</details></tool-use>\n\n"
        '<tool-use data-tool-type="unknown" data-tool-name="copilot_replaceString"><details>\n'
        "<summary>Tool use: **copilot_replaceString**</summary>\n\nAdditional data:\n\n```json\n"
        '{\n  "vscodeToolId": "copilot_replaceString",\n  "isHidden": true\n}\n```\nResult:\n\n```json\n'
        + result + "\n```\nStatus: **completed**\n\n</details></tool-use>\n\nThe list now reloads when you come back.\n",
        encoding="utf-8",
    )
    from pipeline.facts.derive import derive_facts

    assert [(t.path, t.action) for t in derive_facts(one(f)).files] == [("c:/w/app/src/Library.tsx", "modified")]


def test_specstory_v21_a_tool_rendered_by_its_parameters_json_keeps_them(tmp_path: Path) -> None:
    """v2.1 renders a tool it has no template for by its JSON arguments ("Parameters: ```json {"file_path": …}```"):
    a blind set's VS Code Copilot session created README.txt and INSTALL.txt with ``copilot_createFile`` and its note
    listed neither."""
    params = json.dumps({"file_path": "c:\\w\\app\\README.txt", "relativeWorkspacePath": "c:\\w\\app\\README.txt"},
                        indent=2)
    f = tmp_path / "export.md"
    f.write_text(
        "<!-- Generated by SpecStory, Markdown v2.1.0 -->\n\n<!-- vscode Session 0fff1111-2222-3333-4444-555566667778 "
        "(2026-01-02 10:00Z) -->\n\n_**User (2026-01-02 10:00Z)**_\n\nadd a readme\n\n---\n\n"
        "_**Agent (copilot/claude-haiku-4.5)**_\n\n"
        '<tool-use data-tool-type="unknown" data-tool-name="copilot_createFile">\n<details>\n'
        "<summary>Tool use: **copilot_createFile**</summary>\n\n\nParameters:\n\n```json\n" + params + "\n```\n"
        'Additional data:\n\n```json\n{\n  "vscodeToolId": "copilot_createFile",\n  "isHidden": false\n}\n```\n'
        'Result:\n\n```json\n{\n  "invocationMessage": "Creating [](file:///c%3A/w/app/README.txt)"\n}\n```\n'
        "Status: **completed**\n\n</details>\n</tool-use>\n\nCreated README.txt.\n",
        encoding="utf-8",
    )
    from pipeline.facts.derive import derive_facts

    (create,) = calls(one(f))
    assert create.arguments["path"] == "c:\\w\\app\\README.txt"
    assert [(t.path, t.action) for t in derive_facts(one(f)).files] == [("c:/w/app/README.txt", "created")]


def test_specstory_v21_cursor_apply_patch_names_its_file_by_the_workspace_relative_path(tmp_path: Path) -> None:
    """Cursor's ``apply_patch`` is exported by its Parameters alone, ``{"relativeWorkspacePath": …}``, the patch left
    out: a blind set's Unity session edited its one C# file twice and its note listed no file."""
    f = tmp_path / "export.md"
    f.write_text(
        "<!-- Generated by SpecStory, Markdown v2.1.0 -->\n\n<!-- cursor Session 0fff1111-2222-3333-4444-555566667779 "
        "(2026-01-02 10:00Z) -->\n\n_**User (2026-01-02 10:00Z)**_\n\n窗口标题为空时也要嵌入\n\n---\n\n"
        "_**Agent (gpt-5.2-xhigh)**_\n\n"
        '<tool-use data-tool-type="unknown" data-tool-name="apply_patch">\n<details>\n'
        "<summary>Tool use: **apply_patch**</summary>\n\n\nParameters:\n\n```json\n"
        '{\n  "relativeWorkspacePath": "pkg/Editor/WindowEmbedding.cs"\n}\n```\n'
        'Result:\n\n```json\n{\n  "resultForModel": "Success. Updated the following files:\\nM pkg/Editor/WindowEmbedding.cs"'
        "\n}\n```\nUser decision: **accepted**\n\nStatus: **completed**\n\n</details>\n</tool-use>\n\n已修改。\n",
        encoding="utf-8",
    )
    from pipeline.facts.derive import derive_facts

    assert [(t.path, t.action) for t in derive_facts(one(f)).files] == [("pkg/Editor/WindowEmbedding.cs", "modified")]


def test_specstory_v21_claude_code_write_keeps_its_content(tmp_path: Path) -> None:
    """A Claude Code Write is rendered as its content in a fence, then its result: the content is its input."""
    f = tmp_path / "export.md"
    f.write_text(
        "<!-- Generated by SpecStory, Markdown v2.1.0 -->\n\n"
        "<!-- Claude Code Session 0bbb1111-2222-3333-4444-555566667777 (2026-01-02 10:00:00Z) -->\n\n"
        "_**User (2026-01-02 10:00:00Z)**_\n\ncount the rows\n\n---\n\n"
        "_**Agent (claude-x 2026-01-02 10:00:05Z)**_\n\n"
        '<tool-use data-tool-type="write" data-tool-name="Write"><details>\n'
        "<summary>Tool use: **Write**</summary>\n\n````python\nprint('```')\nopen('n.txt', 'w')\n````\n\n"
        "```text\nFile created successfully at: /w/p/count.py\n```\n</details></tool-use>\n",
        encoding="utf-8",
    )
    (write,) = calls(one(f))
    assert write.arguments["content"] == "print('```')\nopen('n.txt', 'w')"


def test_specstory_v21_model_time_markers_and_sidechain_turns(tmp_path: Path) -> None:
    """v2.1 writes "_**Agent (model time)**_" and marks a sub-agent's turns "_**Agent - sidechain (…)**_": the
    model is the parent's, the times are the turns' own, and no marker is left in the text. A marker right
    after a tool block starts a turn even where an output fence looked unclosed."""
    f = tmp_path / "export.md"
    f.write_text(
        "<!-- Generated by SpecStory, Markdown v2.1.0 -->\n\n"
        "<!-- Claude Code Session 0ccc1111-2222-3333-4444-555566667777 (2026-01-02 10:00:00Z) -->\n\n"
        "_**User (2026-01-02 10:00:00Z)**_\n\nreview the project\n\n---\n\n"
        "_**Agent (claude-big 2026-01-02 10:00:05Z)**_\n\nI'll ask a helper.\n\n"
        "_**Agent (claude-big 2026-01-02 10:00:06Z)**_\n\n"
        '<tool-use data-tool-type="generic" data-tool-name="Task"><details>\n<summary>Tool use: **Task**</summary>\n'
        "```text\nreport: ```java\n```\n</details></tool-use>\n\n"
        "_**Agent - sidechain (2026-01-02 10:00:07Z)**_\n\nExplore the project layout.\n\n"
        "_**Agent - sidechain (claude-small 2026-01-02 10:00:09Z)**_\n\nLooking at the files.\n\n"
        "_**Agent - sidechain (claude-small 2026-01-02 10:00:11Z)**_\n\nIt is a Spring app.\n",
        encoding="utf-8",
    )
    s = one(f)
    assert s.model == "claude-big"
    assert not any("sidechain" in m.content or "_**Agent" in m.content for m in s.messages)
    said = [(m.role, m.content, m.timestamp) for m in s.messages if m.role != "tool" and m.content]
    assert [x[:2] for x in said][-3:] == [("assistant", "Explore the project layout."),
                                         ("assistant", "Looking at the files."), ("assistant", "It is a Spring app.")]
    from datetime import UTC, datetime

    assert said[1][2] == datetime(2026, 1, 2, 10, 0, 5, tzinfo=UTC).timestamp()  # the turn's own time
    assert s.ended_at is not None and s.ended_at.isoformat().startswith("2026-01-02T10:00:11")


# --------------------------------------------------------------------------- aider


def test_aider_several_sessions_per_file() -> None:
    sessions = list(read_sessions(corpus_file("aider-md/mozgoslav-rag-hotkey-ru.md")))
    assert len(sessions) == 3  # three "# aider chat started at" headers
    assert sessions[0].started_at is not None and sessions[0].started_at.isoformat().startswith("2026-04-22T22:40:12")
    assert len({s.id for s in sessions}) == 3
    users = sum(roles(s)["user"] for s in sessions)
    # 21 "####" lines, 10 of which are answers to aider's own "Add file to the chat? (Y)es/(N)o..." prompt
    assert users == 11
    assert not any("(Y)es/(N)o" in m.content for s in sessions for m in s.messages if m.role == "user")
    # reasoning models' <thinking-content-…> blocks are reasoning, not the reply
    assert not any("<thinking-content" in m.content for s in sessions for m in s.messages)
    assert any(m.reasoning and "thinking-content" in m.reasoning for s in sessions for m in s.messages)
    edits = [c for s in sessions for c in calls(s)]
    # 3 "Applied edit to", 2 "Commit", 3 "Create new file? … y" lines
    assert len(edits) == 8 and Counter(c.name for c in edits) == {"aider_apply_edit": 3, "aider_commit": 2,
                                                                   "aider_create_file": 3}
    assert any(re.search("[а-яА-Я]", m.content) for s in sessions for m in s.messages if m.role == "user")
    assert all(s.source == "aider" and s.origin == "aider-md" for s in sessions)


def test_aider_create_new_file_confirmations(tmp_path: Path) -> None:
    """aider asks before creating a file the model named; a yes creates it even when the edit batch then
    fails before any "Applied edit to" line; a no, or a write aider reports it could not make, creates nothing."""
    f = tmp_path / ".aider.chat.history.md"
    f.write_text(
        "# aider chat started at 2026-02-03 09:00:00\n\n"
        "> Main model: some-model with whole edit format  \n\n"
        "#### build the package skeleton  \n\n"
        "pkg/core.py\n```\nX = 1\n```\n\nnotes\n```\nsome prose the model fenced\n```\n\n"
        "> Tokens: 1k sent, 2k received.  \n"
        "> pkg/core.py  \n> Create new file? (Y)es/(N)o [Yes]: y  \n"
        "> pkg/__init__.py  \n> Create new file? (Y)es/(N)o [Yes]: y  \n"
        "> notes  \n> Create new file? (Y)es/(N)o [Yes]: n  \n> Skipping edits to notes  \n"
        "> locked/out.py  \n> Create new file? (Y)es/(N)o [Yes]: y  \n"
        "> Unable to write file C:\\work\\proj\\locked\\out.py after 5 attempts: [Errno 13] Permission denied  \n"
        "> list index out of range  \n"
        "> Commit 1a2b3c4 feat: skeleton  \n\n"
        "#### fix core  \n\n"
        "pkg/core.py\n```\nX = 2\n```\n\n"
        "> Applied edit to pkg/core.py  \n",
        encoding="utf-8",
    )
    s = one(f)
    from pipeline.facts.derive import derive_facts

    assert [(t.path, t.action) for t in derive_facts(s).files] == [
        ("pkg/core.py", "created"), ("pkg/__init__.py", "created")]
    assert not any("Create new file" in m.content for m in s.messages if m.role == "user")


def test_aider_single_turn_without_edits() -> None:
    s = one(corpus_file("aider-md/ai-text-detector-gh-pages-debug.md"))
    assert roles(s)["user"] == 1 and calls(s) == []
    assert s.model == "gemini/gemini-2.5-pro-preview-03-25"


# --------------------------------------------------------------------------- Hermes


def test_hermes_request_dump() -> None:
    s = one(corpus_file("hermes-request-dump/hermes-image-gen-ui-research-zh.json"))
    assert (s.id, s.source, s.model) == ("20260615_113941_cf6894", "hermes-dump", s.model)
    assert roles(s) == {"user": 1, "assistant": 5, "tool": 5}  # system prompt is not a row
    assert Counter(c.name for c in calls(s)) == {"web_search": 4, "browser_navigate": 1}
    assert s.started_at is not None and s.started_at.isoformat().startswith("2026-06-15T11:39:41")
    ts = [m.timestamp for m in s.messages]
    assert ts == sorted(ts) and ts[0] < ts[-1]  # spread between session start and dump time
    assert_tool_rows_pair(s)


def test_hermes_export_sessions_chains_and_flags() -> None:
    sessions = {s.id: s for s in read_sessions(corpus_file("hermes-export/all.jsonl"))}
    assert len(sessions) == 12  # 14 lines, one 3-segment compression chain merged
    chain = sessions["20261121_101748_56947a"]
    assert chain.lineage.segments == ("20261121_101748_56947a", "20261121_103803_865922", "20261121_105132_cef61d")
    # 97 rows; carrier row 164 also holds the assistant's own turn, which decode_row splits off.
    assert len(chain.messages) == 25 + 35 + 37 + 1 and carriers(chain) == 2
    assert chain.end_reason == "user_exit" and chain.origin == "hermes-jsonl" and chain.source == "cli"
    inplace = sessions["20261120_131945_b12aa1"]
    # 107 rows - 18 rewound (0/0) = 89; force-user carrier row 120 also carries the live user turn.
    assert carriers(inplace) == 2 and len(inplace.messages) == 89 + 1
    assert Counter((m.active, m.compacted) for m in inplace.messages) == {(False, True): 75, (True, False): 15}
    carrier = next(m for m in inplace.messages if m.is_carrier)
    assert carrier.carrier_summary.startswith("## Historical Task Snapshot")
    assert all(m.identity for m in inplace.messages)  # message_uid kept for cross-generation dedupe
    assert sessions["20261120_081651_19f991"].lineage.branched_from == "20261120_080000_f2a74d"
    assert sessions["20261120_081257_ad1b72"].lineage.delegated_from == "20261120_080000_f2a74d"
    assert sum(m.images for m in sessions["20261122_131238_c379023e"].messages) == 1  # list content
    release = sessions["20261123_171935_d039b9"]
    assert [c.name for c in calls(release)] == ["write_file"] and release.title == "Release checklist"


def test_hermes_dump_with_compaction_from_corpus() -> None:
    s = one(corpus_file("hermes-request-dump/hermes-xiaosuan-bizplan-ppt-and-iching-site-zh.json"))
    assert len(s.messages) == 932 and carriers(s) == 1  # 933 minus the system prompt
    assert s.messages[3].is_carrier and s.messages[3].role == "user"


def test_sharegpt_trajectories_from_corpus() -> None:
    sessions = list(read_sessions(corpus_file("hermes-trajectory/neurareport-pdf-template-pipeline-118-runs.jsonl")))
    assert len(sessions) == 118 and len({s.id for s in sessions}) == 118
    assert sum(len(s.messages) for s in sessions) == 1359  # MANIFEST approx_messages
    assert all(s.source == "sharegpt" for s in sessions)
    for s in sessions:
        assert_tool_rows_pair(s)
    # Some runs close their thinking twice ("<think>a</think>b</think>c"): no tag may reach a reply.
    assert not [m.content for s in sessions for m in s.messages if m.role == "assistant" and "think>" in m.content]


def test_sharegpt_tool_calls_pair_by_position(tmp_path: Path) -> None:
    record = {
        "timestamp": "2026-04-05T14:19:06", "model": "m", "completed": False,
        "conversations": [
            {"from": "system", "value": "<tools>[]</tools>"},
            {"from": "human", "value": "make it"},
            {"from": "gpt", "value": '<think>plan</think>ok\n<tool_call>\n{"name": "write_file", "arguments": {"path": "a.txt"}}\n</tool_call>\n<tool_call>\n{"name": "read_file", "arguments": {"path": "b.txt"}}\n</tool_call>'},
            {"from": "tool", "value": '<tool_response>\n{"tool_call_id": "qwen_tc_0", "name": "write_file", "content": {"ok": true}}\n</tool_response>\n<tool_response>\n{"tool_call_id": "qwen_tc_0", "name": "read_file", "content": "B"}\n</tool_response>'},
        ],
    }
    f = tmp_path / "trajectory_samples.jsonl"
    f.write_text(json.dumps(record) + "\n")
    s = one(f)
    assert s.end_reason == "failed"
    a = s.messages[1]
    assert a.content == "ok" and a.reasoning == "plan" and [c.arguments["path"] for c in a.tool_calls] == ["a.txt", "b.txt"]
    assert [m.tool_call_id for m in s.messages[2:]] == [c.id for c in a.tool_calls]
    assert s.messages[3].content == "B"


# --------------------------------------------------------------------------- robustness


def _cc_line(kind: str, ts: str | None, content: object, mid: str = "m1", **extra: object) -> str:
    message = {"role": kind, "content": content} | ({"id": mid} if kind == "assistant" else {})
    obj = {"type": kind, "sessionId": "s1", "uuid": f"u{ts}{kind}", "message": message} | extra
    if ts:
        obj["timestamp"] = ts
    return json.dumps(obj, ensure_ascii=False)


def test_corrupt_claude_code_file(tmp_path: Path) -> None:
    big = "x" * 2_000_000
    lines = [
        _cc_line("user", "2026-01-01T00:00:00Z", "héllo"),
        json.dumps({"type": "brand-new-event", "sessionId": "s1"}),
        _cc_line("assistant", None, [{"type": "tool_use", "id": "t1", "name": "Write", "input": {"file_path": "/a.py"}}]),
        _cc_line("user", None, [{"type": "tool_result", "tool_use_id": "t1", "content": big}]),
        _cc_line("assistant", "2026-01-01T00:00:10Z", [{"type": "text", "text": "done"}], mid="m2"),
        '{"type": "assistant", "message": {"id": "m3", "content": [{"type": "te',  # cut off mid-write
    ]
    data = ("\r\n".join(lines)).encode("utf-8").replace(b"h\xc3\xa9llo", b"h\xe9llo\x00")  # latin-1 byte + NUL
    f = tmp_path / "session.jsonl"
    f.write_bytes(data)
    s = one(f)
    assert s.messages[0].content == "h\ufffdllo"
    assert [m.role for m in s.messages] == ["user", "assistant", "tool", "assistant"]
    assert len(s.messages[2].content) == 2_000_000
    ts = [m.timestamp for m in s.messages]
    assert ts[0] < ts[1] < ts[2] < ts[3]  # the two missing stamps are interpolated
    assert any("truncated last line" in p for p in s.problems)
    assert any("brand-new-event" in p for p in s.problems)


def test_codex_unknown_items_are_counted_not_fatal(tmp_path: Path) -> None:
    lines = [
        {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "abc", "cwd": "/w"}},
        {"timestamp": "2026-01-01T00:00:01Z", "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}},
        {"timestamp": "2026-01-01T00:00:02Z", "type": "response_item", "payload": {"type": "hologram", "x": 1}},
        {"timestamp": "2026-01-01T00:00:03Z", "type": "compacted", "payload": {"message": "summary of before"}},
        {"timestamp": "2026-01-01T00:00:04Z", "type": "response_item", "payload": {"type": "custom_tool_call", "name": "apply_patch", "call_id": "c1", "input": "*** Begin Patch\n*** Add File: x.py\n+1\n*** End Patch"}},
    ]
    f = tmp_path / "rollout-2026-01-01T00-00-00-abc.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines))
    s = one(f)
    assert carriers(s) == 1 and s.messages[0].compacted and s.messages[1].is_carrier
    assert s.messages[-1].tool_calls[0].arguments == {"input": lines[-1]["payload"]["input"]}
    assert any("hologram" in p for p in s.problems) and any("without output" in p for p in s.problems)


def test_codex_ide_context_is_not_the_users_words(tmp_path: Path) -> None:
    """The Codex IDE extension sends "# Context from my IDE setup:" (active file, selection, open tabs) before "## My
    request for Codex:" and what the user typed. Only the request is the ask (on a new Spanish session the English
    context made the note English and every ask a quoted file list)."""
    ide = ("# Context from my IDE setup:\n\n## Active file: src/components/ui/sidebar.tsx\n\n## Open tabs:\n"
           "- sidebar.tsx: src/components/ui/sidebar.tsx\n\n## My request for Codex:\nquiero los iconos mas grandes\n")
    lines = [
        {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "abd", "cwd": "/w"}},
        {"timestamp": "2026-01-01T00:00:01Z", "type": "response_item",
         "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ide}]}},
        {"timestamp": "2026-01-01T00:00:02Z", "type": "response_item",
         "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Listo."}]}},
    ]
    f = tmp_path / "rollout-2026-01-01T00-00-00-abd.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines))
    assert [m.content for m in one(f).messages if m.role == "user"] == ["quiero los iconos mas grandes"]


def test_a_note_from_a_transcript_names_its_file_and_leaves_unrecorded_tokens_unknown(tmp_path: Path) -> None:
    """Issue 15, class 6 and 7: a note read from a file says which file (redacted like the text: a name can
    hold a token), and an export that records no token counts gives ``null`` tokens, not 0."""
    import frontmatter

    from tests.shell import run_distill, session_notes

    token = "ghp_4Tq9Lm2Xv8Rb6Nc1Zs7Kd3Wf5Hj0Gp9Ya2Ue"
    src = tmp_path / token / "export.md"  # a folder named by a pasted token
    src.parent.mkdir()
    src.write_bytes(corpus_file("specstory/download-manager-analysis-doc-writing-zh.md").read_bytes())
    out = tmp_path / "notes"
    done = run_distill(str(src), "--summarizer", "extractive", "--out", str(out), home=tmp_path)
    assert done.returncode == 0, done.stderr
    [note] = session_notes(out)
    fm = frontmatter.load(note)
    assert fm["transcript"] == str(src.resolve()).replace(token, "[REDACTED:GITHUB_TOKEN]")
    assert token not in note.read_text(encoding="utf-8")
    assert fm["input_tokens"] is None and fm["output_tokens"] is None and fm["cost_usd"] is None


def test_aider_diff_edit_blocks_stay_in_the_reply(tmp_path: Path) -> None:
    """A diff-format edit block ends on ">>>>>>> REPLACE", which starts with ">" like aider's own output; read as
    aider's, it cut the reply at every block and each piece opened on the block's closing fence."""
    fence = "````"
    history = "\n".join([
        "# aider chat started at 2026-01-02 10:00:00", "", "#### make the clock faster", "",
        "I will change the timer.", "", "app/clock.py", f"{fence}python", "<<<<<<< SEARCH", "TICK = 100",
        "=======", "TICK = 50", ">>>>>>> REPLACE", fence, "", "The clock now ticks every 50 ms instead of 100.", "",
        "> Applied edit to app/clock.py", "> Commit 1a2b3c4 feat: faster clock", ""])
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(history, "utf-8")
    s = one(path)
    replies = [m.content for m in s.messages if m.role == "assistant" and m.content]
    assert len(replies) == 1 and replies[0].endswith("The clock now ticks every 50 ms instead of 100.")
    assert ">>>>>>> REPLACE" in replies[0] and not any(m.role == "system" for m in s.messages)
    assert [c.name for c in calls(s)] == ["aider_apply_edit", "aider_commit"]


def _legacy_rollout(tmp_path: Path) -> Path:
    """A Codex rollout as the CLI wrote them until about September 2025: no ``payload`` wrapper, a metadata line
    without a type, ``record_type`` markers, and no time on the items (written here, not copied from anyone)."""
    env = "<environment_context>\n  <cwd>/workspaces/planner</cwd>\n  <approval_policy>never</approval_policy>\n</environment_context>"
    patch = "*** Begin Patch\n*** Add File: web/index.html\n+<h1>Planner</h1>\n*** End Patch"
    lines = [
        {"id": "5f1c0e2a-0000-4000-8000-00000000c0de", "timestamp": "2025-08-20T09:00:00.000Z", "instructions": None,
         "git": {"branch": "main"}},
        {"record_type": "state"},
        {"type": "message", "id": None, "role": "user", "content": [{"type": "input_text", "text": env}]},
        {"record_type": "state"},
        {"type": "message", "id": None, "role": "user",
         "content": [{"type": "input_text", "text": "もしもし"}]},
        {"type": "message", "id": "m1", "role": "assistant", "content": [{"type": "output_text", "text": "はい、何をしましょうか？"}]},
        {"record_type": "state"},
        {"type": "message", "id": None, "role": "user",
         "content": [{"type": "input_text", "text": "予定表のページを web/index.html に作ってください。"}]},
        {"type": "reasoning", "id": "r1", "summary": [{"type": "summary_text", "text": "Plan the page"}], "content": None,
         "encrypted_content": "gAAAA"},
        {"type": "function_call", "id": "fc1", "name": "shell", "call_id": "c1",
         "arguments": json.dumps({"command": ["apply_patch", patch]})},
        {"type": "function_call_output", "call_id": "c1",
         "output": json.dumps({"output": "Success. Updated the following files:\nA web/index.html\n",
                               "metadata": {"exit_code": 0}})},
        {"type": "message", "id": "m2", "role": "assistant",
         "content": [{"type": "output_text", "text": "web/index.html を作成しました。"}]},
    ]
    f = tmp_path / "rollout-2025-08-20T09-00-00-5f1c0e2a-0000-4000-8000-00000000c0de.jsonl"
    f.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines), encoding="utf-8")
    return f


def test_a_legacy_codex_rollout_is_read(tmp_path: Path) -> None:
    """Codex rollouts from before the CLI wrapped each line in ``{"type", "payload"}`` were "no session files found":
    a user's sessions of summer 2025 gave no note at all. They are detected, read as the same response items, and
    their working directory comes from the injected environment context."""
    f = _legacy_rollout(tmp_path)
    assert detect_format(f) == "codex"
    s = one(f)
    assert s.id == "5f1c0e2a-0000-4000-8000-00000000c0de" and s.source == "codex" and s.cwd == "/workspaces/planner"
    assert s.git_branch == "main" and s.started_at is not None
    assert [m.role for m in s.messages] == ["system", "user", "assistant", "user", "assistant", "tool", "assistant"]
    assert s.messages[4].tool_calls[0].name == "shell" and s.messages[4].reasoning == "Plan the page"
    assert not s.problems


def test_a_legacy_codex_rollout_gets_a_note_whose_goal_is_the_task_not_the_greeting(tmp_path: Path) -> None:
    import frontmatter

    from tests.shell import run_distill, session_notes

    f = _legacy_rollout(tmp_path)
    out = tmp_path / "notes"
    done = run_distill(str(f.parent), "--summarizer", "extractive", "--out", str(out), home=tmp_path)
    assert done.returncode == 0, done.stderr
    [note] = session_notes(out)
    post = frontmatter.load(note)
    assert post["output_files"] == ["web/index.html"] and post["language"] == "ja"
    goal = post.content.split("\n## ", 2)[1]
    assert "予定表のページ" in goal and "もしもし" not in goal  # a phone "hello" sets no task


def test_claude_code_commands_run_where_the_shell_was(tmp_path: Path) -> None:
    """Claude Code's shell keeps its directory between calls: "cd contracts && npm init -y", then "npm install dotenv"
    runs in contracts/. Each line records its cwd; a command run elsewhere than the session's folder carries it, so
    its files are found where they are (the note listed ./package.json for contracts/package.json)."""
    from pipeline.facts.derive import derive_facts

    def line(kind: str, cwd: str, message: dict[str, object], n: int) -> dict[str, object]:
        return {"type": kind, "sessionId": "cc-cwd", "cwd": cwd, "uuid": f"u{n}", "timestamp": f"2026-01-01T00:00:0{n}Z",
                "message": message}

    root = "/home/ana/poly"
    bash = [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "mkdir -p contracts && cd contracts && npm init -y"}}]
    bash2 = [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "npm install dotenv"}}]
    lines = [
        line("user", root, {"role": "user", "content": "set up the contracts package"}, 1),
        line("assistant", root, {"role": "assistant", "id": "m1", "content": bash}, 2),
        line("user", f"{root}/contracts", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Wrote to package.json"}]}, 3),
        line("assistant", f"{root}/contracts", {"role": "assistant", "id": "m2", "content": bash2}, 4),
        line("user", f"{root}/contracts", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "added 1 package"}]}, 5),
    ]
    f = tmp_path / "cc-cwd.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines))
    s = one(f)
    assert s.cwd == root
    calls = [c for m in s.messages for c in m.tool_calls]
    assert "workdir" not in calls[0].arguments and calls[1].arguments["workdir"] == f"{root}/contracts"
    # npm init said "Wrote to package.json" from contracts/, and the install changed it again
    assert [(t.path, t.action) for t in derive_facts(s).files] == [("contracts/package.json", "created")]


def test_specstory_early_cursor_empty_section_is_an_edit_that_facts_place(tmp_path: Path) -> None:
    """Class seen on early Cursor exports (no session line, no tool blocks, held-out sets): an applied edit is an
    empty section between two rules, right after the words that announce it. It becomes an empty fence, the way
    VS Code Copilot's exports show an edit, so the file those words name is an output. A block's closing rule
    before the next turn is no edit, nor is an empty section in an export that carries a session line."""
    from pipeline.facts.derive import derive_facts

    body = ("<!-- Generated by SpecStory -->\n\n# Fix the header (2025-03-20 14:37:36)\n\n_**User**_\n\nfix the header\n\n"
            "---\n\n_**Assistant**_\n\nLet me update `src/Header.tsx`:\n\n---\n\n---\n\n\n\n---\n\n"
            "The header now wraps on small screens.\n\n---\n\n_**User**_\n\nthanks\n\n---\n\n")
    f = tmp_path / "early.md"
    f.write_text(body, encoding="utf-8")
    s = one(f)
    replies = [m.content for m in s.messages if m.role == "assistant"]
    assert replies == ["Let me update `src/Header.tsx`:\n\n```\n```\n\nThe header now wraps on small screens."]
    assert derive_facts(s).output_files == ["src/Header.tsx"]
    g = tmp_path / "v2.md"
    g.write_text(body.replace("<!-- Generated by SpecStory -->",
                              "<!-- Generated by SpecStory -->\n\n<!-- cursor Session 39fd830a-6778-4c9e (2025-03-20 14:37Z) -->"),
                 encoding="utf-8")
    assert "```" not in next(m.content for m in one(g).messages if m.role == "assistant")


def test_empty_edit_section_named_by_a_bare_code_name(tmp_path: Path) -> None:
    """Class seen on a new set (an early Cursor export in Russian): the words before an empty edit section call the file
    by its bare name, no extension, no backticks ("Давайте начнем с изменения AuthPage:", "Теперь обновим Tasktracker:"),
    after the session read it. The one file read or touched with that name is the edit's, not the file edited before."""
    from pipeline.facts.derive import derive_facts

    body = ("<!-- Generated by SpecStory -->\n\n# Auth (2025-03-20 14:37:36)\n\n_**User**_\n\nSMS по умолчанию\n\n"
            "---\n\n_**Assistant**_\n\nRead file: src/pages/AuthPage.tsx\n\n---\n\nRead file: src/pages/HomePage.tsx\n\n"
            "---\n\nRead file: docs/Tasktracker.md\n\n---\n\nТеперь изменим HomePage.tsx:\n\n---\n\n\n\n---\n\n"
            "Давайте начнем с изменения AuthPage:\n\n---\n\n\n\n---\n\nТеперь обновим Tasktracker:\n\n---\n\n\n\n---\n\n"
            "Уберем дублирующийся блок внизу страницы:\n\n---\n\n\n\n---\n\nГотово.\n\n---\n\n")
    f = tmp_path / "early.md"
    f.write_text(body, encoding="utf-8")
    # the last section's words name no file: it goes on with the file edited before, as before
    assert sorted(derive_facts(one(f)).output_files) == ["docs/Tasktracker.md", "src/pages/AuthPage.tsx", "src/pages/HomePage.tsx"]


def test_aider_ask_mode_carries_the_users_request(tmp_path: Path) -> None:
    """Class seen on two new sets' aider histories (and a dev one): "#### /ask what does delta represent in this file?"
    is the user's question in aider's ask mode, "/code …" and "/architect …" requests in those modes. Read as slash
    commands, their runs had no request ("(no request recorded)") and their decisions went unread. "/model x" and
    "/add f" stay commands."""
    from pipeline.facts.turns import _kind, user_words

    body = ("# aider chat started at 2026-06-24 10:00:00\n\n> /home/b/.local/bin/aider car.cs\n\n"
            "#### /model openai/gpt-5.4  \n\n#### /ask what does delta represent in this file? I am working with godot  \n\n"
            "In this file, `delta` is the time since the previous physics tick, in seconds.\n\n"
            "> Tokens: 587 sent, 345 received.\n")
    f = tmp_path / ".aider.chat.history.md"
    f.write_text(body, encoding="utf-8")
    s = one(f)
    asks = [m for m in s.messages if m.role == "user" and _kind(m) == "ask"]
    assert [user_words(m.content) for m in asks] == ["what does delta represent in this file? I am working with godot"]
    assert _kind(Message(role="user", content="/add scenes/road.tscn")) is None


def test_aider_launch_message_lines_are_the_command_not_a_reply(tmp_path: Path) -> None:
    """Class seen on a blind set's unattended aider runs (``aider --yes-always --message`` with a message of several
    lines): the history logs the command, then the message's lines unprefixed, then the message again as the user's
    "####" lines. Read as the model's reply, the user's ask looked like a paste of it and the session had no ask."""
    from pipeline.facts.derive import derive_facts
    from pipeline.facts.endstate import judge_end_state

    body = ("# aider chat started at 2026-02-23 23:25:19\n\n"
            "> C:\\Users\\A\\.local\\bin\\aider --yes-always --message \n"
            "        1. Read TODO.md and implement the first open task.\n"
            "        2. Mark it done in TODO.md.\n"
            "> Aider v0.86.2  \n> Model: deepseek/deepseek-chat with diff edit format  \n\n"
            "#### 1. Read TODO.md and implement the first open task.  \n"
            "####         2. Mark it done in TODO.md.  \n\n"
            "The first open task is 6.2; it is already implemented, so I implement 7.1 instead.\n\n"
            "> Applied edit to Assets/Scripts/Core/Inventory.cs  \n")
    f = tmp_path / ".aider.chat.history.md"
    f.write_text(body, encoding="utf-8")
    s = one(f)
    assert [m.role for m in s.messages if m.role in ("user", "assistant") and m.content] == ["user", "assistant"]
    assert s.messages[0].role == "system" and "Read TODO.md" in s.messages[0].content
    assert judge_end_state(s, derive_facts(s)).reason != "the user never asked for anything"


def test_aider_architect_handing_its_plan_to_the_editor_is_no_ask(tmp_path: Path) -> None:
    """In architect mode aider sends the architect's reply to the editor model as a user message, logged as "####"
    lines (a blind set's unattended runs): the note listed that plan as the user's ask, and its "Actually, …"
    sentences as the user's corrections. It is the harness talking to its second model; a user who types the same
    words outside architect mode is still the user."""
    plan = "Looking at TODO.md, task 6.2 is open.\\nActually, it is done; I will create Inventory.cs instead."
    body = ("# aider chat started at 2026-02-23 23:25:19\n\n"
            "> aider --architect\n> Model: deepseek/deepseek-chat with architect edit format, prompt cache\n\n"
            "#### implement the first open task in TODO.md  \n\n"
            + plan.replace("\\n", "\n") + "\n\n"
            "> Tokens: 9.2k sent, 3.6k received.  \n\n"
            + "".join(f"#### {line}  \n" for line in plan.split("\\n")) + "\n"
            "Creating the file.\n\n> Applied edit to Assets/Scripts/Core/Inventory.cs  \n")
    f = tmp_path / ".aider.chat.history.md"
    f.write_text(body, encoding="utf-8")
    assert [m.content for m in one(f).messages if m.role == "user"] == ["implement the first open task in TODO.md"]
    g = tmp_path / "plain" / ".aider.chat.history.md"
    g.parent.mkdir()
    g.write_text(body.replace(" with architect edit format", " with diff edit format").replace(" --architect", ""),
                 encoding="utf-8")
    assert len([m for m in one(g).messages if m.role == "user"]) == 2
