"""derive_facts: files, commands, errors and usage from hand-built sessions and the real v31 fixture."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from typing import Any

import pytest

from pipeline.facts.derive import derive_facts, error_lines, file_touches
from pipeline.facts.shell import shell_file_ops, staged_files
from pipeline.models import Chunk, FileTouch, Message, ModelUsage, Session, ToolCall, is_scratch
from tests.conftest import FIXTURES

CWD = "/home/ana/src/proj"
REAL_DB = FIXTURES / "hermes" / "state-v31.db"


def call(cid: str, name: str, args: dict[str, Any] | str, text: str = "") -> Message:
    return Message(role="assistant", content=text, tool_calls=(ToolCall(id=cid, name=name, arguments=args),))


def result(cid: str, content: dict[str, Any] | str, name: str | None = None) -> Message:
    body = content if isinstance(content, str) else json.dumps(content)
    return Message(role="tool", content=body, tool_call_id=cid, tool_name=name)


def session(*messages: Message, **kw: Any) -> Session:
    return Session(id="s1", source="cli", cwd=kw.pop("cwd", CWD), messages=messages, **kw)


def touches(*messages: Message) -> list[tuple[str, str]]:
    return [(t.path, t.action) for t in derive_facts(session(*messages)).files]


# --------------------------------------------------------------------------- file tools


def test_hermes_file_tools_and_result_path_wins() -> None:
    got = derive_facts(session(
        call("1", "write_file", {"path": "src/new.py", "content": "x"}),
        result("1", {"success": True, "path": f"{CWD}/src/new.py", "bytes_written": 1}),
        call("2", "write_file", {"path": "src/new.py", "content": "y"}),
        result("2", {"success": True, "path": "src/new.py", "bytes_written": 1}),
        call("3", "read_file", {"path": "README.md"}),
        result("3", {"content": "Error: this is file text, not an error", "path": "README.md"}),
        call("4", "patch", {"path": "README.md", "old_string": "a", "new_string": "b"}),
        result("4", {"success": True, "path": "README.md"}),
        call("5", "search_files", {"pattern": "x", "path": "src"}),
        result("5", {"matches": [{"path": "src/other.py"}]}),
        call("6", "read_file", {"path": "docs/a.md"}),
        result("6", {"content": "...", "path": "docs/a.md"}),
        call("7", "write_file", {"path": "docs/a.md", "content": "z"}),
        result("7", {"success": True, "path": "docs/a.md"}),
    ))
    assert got.files == (
        FileTouch(path="src/new.py", action="created", tool="write_file"),
        FileTouch(path="README.md", action="modified", tool="patch"),
        FileTouch(path="docs/a.md", action="modified", tool="write_file"),
    )
    assert got.output_files == ["src/new.py", "README.md", "docs/a.md"]
    assert got.errors == ()
    assert got.tools == {"write_file": 3, "read_file": 2, "patch": 1, "search_files": 1}


def test_failed_write_touches_nothing_and_reports_error() -> None:
    got = derive_facts(session(
        call("1", "write_file", {"path": "/etc/passwd", "content": "x"}),
        result("1", {"success": False, "error": "Permission denied: /etc/passwd"}),
    ))
    assert got.files == ()
    assert got.errors == ("Permission denied: /etc/passwd",)


def test_an_edit_the_user_turned_down_changes_nothing() -> None:
    """Claude Code answers a rejected tool use with "The user doesn't want to proceed with this tool use. … the
    new_string was NOT written to the file": the file is no output (a note listed such a file; the test part's file
    precision went 0.88 → 0.93 with this)."""
    rejected = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
                "edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell "
                "you how to proceed.")
    assert touches(
        call("a", "Edit", {"file_path": f"{CWD}/EllipsisText.tsx", "old_string": "a", "new_string": "b"}),
        result("a", rejected),
        call("b", "Edit", {"file_path": f"{CWD}/Right.tsx", "old_string": "a", "new_string": "b"}),
        result("b", f"The file {CWD}/Right.tsx has been updated successfully."),
    ) == [("Right.tsx", "modified")]


def test_claude_code_tools() -> None:
    assert touches(
        call("a", "Write", {"file_path": f"{CWD}/app.ts", "content": "x"}),
        result("a", f"File created successfully at: {CWD}/app.ts"),
        call("b", "Write", {"file_path": f"{CWD}/old.ts", "content": "x"}),
        result("b", f"The file {CWD}/old.ts has been updated. Here's the result..."),
        call("c", "Edit", {"file_path": f"{CWD}/lib/util.ts", "old_string": "a", "new_string": "b"}),
        result("c", "The file has been updated."),
        call("d", "MultiEdit", {"file_path": "/tmp/outside.ts", "edits": []}),
        result("d", "Applied 2 edits"),
        call("e", "NotebookEdit", {"notebook_path": f"{CWD}/nb.ipynb", "new_source": "x"}),
        result("e", "Updated cell"),
        call("f", "Read", {"file_path": f"{CWD}/package.json"}),
        result("f", '     1\t{"name": "x"}'),
        call("g", "Edit", {"file_path": f"{CWD}/missing.ts", "old_string": "a", "new_string": "b"}),
        result("g", "<tool_use_error>String to replace not found in file.</tool_use_error>"),
    ) == [
        ("app.ts", "created"), ("old.ts", "modified"), ("lib/util.ts", "modified"),
        ("/tmp/outside.ts", "modified"), ("nb.ipynb", "modified"), ("package.json", "read"),
    ]


def test_write_and_edit_without_a_path_argument_take_the_file_their_result_names() -> None:
    """An export that drops a Write's arguments (SpecStory shows the content alone) still has the tool's own
    result line naming the file: "File created successfully at: …", "The file … has been updated"."""
    assert touches(
        call("a", "Write", {"summary": ""}),
        result("a", "```python\nprint('x')\n```\n\n```text\nFile created successfully at: "
                    f"{CWD}/scripts/report.py (file state is current in your context)\n```"),
        call("b", "Edit", {}),
        result("b", f"```text\nThe file {CWD}/My Docs/a.md has been updated. Here's the result of running `cat -n`…\n```"),
        call("c", "Write", {}),
        result("c", "The file has been updated."),  # names no file: nothing to list
        call("d", "Write", {}),
        result("d", "<tool_use_error>File has not been read yet.</tool_use_error>"),
        call("e", "Read", {}),
        result("e", f"File created successfully at: {CWD}/quoted.py"),  # a read's text is the file's, not the tool's
    ) == [("scripts/report.py", "created"), ("My Docs/a.md", "modified")]


def test_files_a_script_the_session_wrote_writes_once_it_ran() -> None:
    """A script the session wrote writes what its code writes, once the session shows it ran: a later command
    that names it and did not fail, or (the export hid the command) a later reply that names the file."""
    code = "import pandas as pd\ndf = pd.read_csv('in.csv')\ndf.to_csv('out/summary.csv')\nopen('report.md', 'w').write('x')\n"
    assert touches(
        call("w", "Write", {"file_path": f"{CWD}/analysis.py", "content": code}),
        result("w", f"File created successfully at: {CWD}/analysis.py"),
        call("r", "Bash", {"command": "cd /home/ana/src/proj && python analysis.py"}),
        result("r", "done"),
    ) == [("analysis.py", "created"), ("out/summary.csv", "created"), ("report.md", "created")]
    never_ran = touches(call("w", "Write", {"file_path": f"{CWD}/analysis.py", "content": code}), result("w", "ok"),
                        a("Next I will run it to write `report.md`. Should it also write summary.csv?"),
                        call("r", "Bash", {"command": "python other_analysis.py"}), result("r", "ok"))
    assert never_ran == [("analysis.py", "created")]  # a plan and a question are no evidence it ran
    failed = touches(call("w", "Write", {"file_path": f"{CWD}/analysis.py", "content": code}), result("w", "ok"),
                     call("r", "Bash", {"command": "python analysis.py"}), result("r", "Exit code 1\nTraceback…"))
    assert failed == [("analysis.py", "created")]
    hidden = touches(call("w", "Write", {"content": code}),
                     result("w", f"File created successfully at: {CWD}/analysis.py"),
                     call("r", "PowerShell", {"description": "Run the analysis"}), result("r", "rows: 12"),
                     a("Artifacts: `analysis.py` and `summary.csv`."))
    assert hidden == [("analysis.py", "created"), ("out/summary.csv", "created")]


def test_codex_exec_command_exit_line() -> None:
    """Codex's exec_command reports "Process exited with code N": a non-zero code is a failed run."""
    from pipeline.facts.derive import result_failed

    assert result_failed(result("x", "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 1\nOutput:\nFAIL"))
    assert not result_failed(result("x", "Chunk ID: 1\nProcess exited with code 0\nOutput:\nok"))


def test_codex_apply_patch_headers() -> None:
    patch = (
        "*** Begin Patch\n*** Add File: web/index.html\n+<html>\n*** Update File: web/app.js\n"
        "*** Move to: web/main.js\n@@\n-a\n+b\n*** Delete File: web/old.css\n"
        "*** Update File: README.md\n@@\n-x\n+y\n*** End Patch"
    )
    assert touches(
        call("p", "apply_patch", {"input": patch}),
        result("p", {"output": "Success. Updated the following files:\nA web/index.html\n", "metadata": {"exit_code": 0}}),
    ) == [
        ("web/index.html", "created"), ("web/app.js", "deleted"), ("web/main.js", "moved"),
        ("web/old.css", "deleted"), ("README.md", "modified"),
    ]


def test_a_patch_codex_did_not_apply_touches_nothing() -> None:
    """Codex reports a failed apply_patch in plain text, with no exit code (through a shell too); a later patch that
    applies counts."""
    patch = "*** Begin Patch\n*** Update File: app/layout.tsx\n@@\n-a\n+b\n*** End Patch"
    added = "*** Begin Patch\n*** Add File: lib/x.ts\n+x\n*** End Patch"
    assert touches(
        call("p", "apply_patch", {"input": patch}),
        result("p", "apply_patch verification failed: Failed to find expected lines in C:\\w\\app\\layout.tsx:\na"),
        call("q", "apply_patch", {"input": added}), result("q", "patch rejected: empty patch"),
        call("r", "apply_patch", {"input": added}), result("r", "aborted by user after 12.0s"),
    ) == []
    # run through a shell (Codex's ``["bash", "-lc", "apply_patch <<'PATCH' …"]``): the same plain-text failure
    shell = ["bash", "-lc", f"apply_patch <<'PATCH'\n{patch}\nPATCH"]
    assert touches(call("s", "shell", {"command": shell}),
                   result("s", "apply_patch verification failed: Failed to read file to update /w/app/layout.tsx")) == []
    assert touches(
        call("p", "apply_patch", {"input": patch}), result("p", "apply_patch verification failed: no hunks found"),
        call("q", "apply_patch", {"input": patch}),
        result("q", {"output": "Success. Updated the following files:\nM app/layout.tsx\n", "metadata": {"exit_code": 0}}),
    ) == [("app/layout.tsx", "modified")]


def test_apply_patch_text_in_the_result_body_or_only_a_path() -> None:
    # SpecStory exports carry the patch in the block body (the tool row), not in the arguments.
    body = "```diff\n*** Begin Patch\n*** Add File: /u/proj/DESIGN.md\n+# x\n*** Delete File: c:\\p\\tmp.yml\n*** End Patch\n```"
    assert touches(
        call("p", "apply_patch", {"summary": "Apply patch for undefined", "path": "/u/proj/DESIGN.md"}),
        result("p", body),
        call("q", "apply_patch", {"path": "c:\\p\\pom.xml", "explanation": "bump java"}),
        result("q", "**Input:**\n\n- explanation: `bump java`"),
    ) == [("/u/proj/DESIGN.md", "created"), ("c:/p/tmp.yml", "deleted"), ("c:/p/pom.xml", "modified")]


def test_shell_write_the_sandbox_refused_touches_nothing() -> None:
    out = ("Process exited with code 0\nOutput:\nzsh:11: operation not permitted: /home/ana/.superstack/t.jsonl\n")
    assert touches(
        call("1", "exec_command", {"cmd": "echo x >> ~/.superstack/t.jsonl 2>/dev/null || true; echo y > ok.txt"}),
        result("1", out),
    ) == [("ok.txt", "created")]


def test_a_best_effort_append_is_no_output() -> None:
    """``>> f 2>/dev/null || true``: the command says the line may not be written and that it does not matter
    (a skill's telemetry, a tool's log). Other appends and writes stay outputs."""
    assert touches(
        call("1", "Bash", {"command": "echo '{\"skill\":\"x\"}' >> ~/.skillkit/usage.jsonl 2>/dev/null || true\n"
                                      "echo y >> notes.md; echo z > out.txt 2>/dev/null || true; echo w >> run.log || :"}),
        result("1", "Exit code: 0"),
    ) == [("notes.md", "created"), ("out.txt", "created"), ("run.log", "created")]


def test_codex_shell_with_argv_and_workdir() -> None:
    got = derive_facts(session(
        call("x", "shell", {"command": ["bash", "-lc", "rm -f build.log && echo ok > status.txt"], "workdir": f"{CWD}/sub"}),
        result("x", "Exit code: 0\nWall time: 0.1 seconds\nOutput:\n"),
        call("y", "exec_command", {"cmd": "touch notes.md"}),
        result("y", "Exit code: 0\n"),
    ))
    assert [(t.path, t.action) for t in got.files] == [
        ("sub/build.log", "deleted"), ("sub/status.txt", "created"), ("notes.md", "created")
    ]
    assert got.commands == ("rm -f build.log && echo ok > status.txt", "touch notes.md")


# --------------------------------------------------------------------------- shell parsing


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("mv a.py b.py", [("a.py", "deleted"), ("b.py", "moved")]),
        ("mv a.py b.py lib/", [("a.py", "deleted"), ("lib/a.py", "moved"), ("b.py", "deleted"), ("lib/b.py", "moved")]),
        ("rm -rf build dist; rm *.pyc", [("build", "deleted"), ("dist", "deleted")]),
        ("cp config.example.yaml config.yaml", [("config.yaml", "created")]),
        ("echo hi > out.txt 2>&1 && cat x >> log.txt", [("out.txt", "created"), ("log.txt", "created")]),
        ("python run.py 2>/dev/null | tee -a run.log", [("run.log", "created")]),
        ("sed -i 's/a/b/' x.py y.py", [("x.py", "modified"), ("y.py", "modified")]),
        ("sed -i '' -e 's/a/b/' z.py", [("z.py", "modified")]),
        ("sed 's/a/b/' x.py > y.py", [("y.py", "created")]),
        ("mkdir -p foo && touch foo/__init__.py", [("foo/__init__.py", "created")]),
        ("cat > notes.md <<'EOF'\nit's an 'unbalanced body\nEOF\necho done >> notes.md", [("notes.md", "created"), ("notes.md", "created")]),
        ("git mv old.py new.py && git rm stale.py", [("old.py", "deleted"), ("new.py", "moved"), ("stale.py", "deleted")]),
        ("sudo bash -c 'cp a.txt backup/'", [("backup/a.txt", "created")]),
        ("git status && ls -la", []),
        ("echo 'unbalanced", []),
        # in-place editors other than sed
        ("perl -pi -e 's/a/b/' src/a.py src/b.py", [("src/a.py", "modified"), ("src/b.py", "modified")]),
        ("perl -i.bak -pe 's/a/b/' x.txt", [("x.txt", "modified")]),
        ("perl -Mstrict -ne 'print' a.txt", []),
        ("yq -i '.a = 1' cfg.yaml && yq e -i '.b = 2' ci.yml && yq '.a' x.yaml", [("cfg.yaml", "modified"), ("ci.yml", "modified")]),
        # a folder copied whole is not an output file; files copied with -r are
        ("cp -r templates/ out/ && cp -R assets public", []),
        ("cp -a src/main.py build/", [("build/main.py", "created")]),
        # a comment ends at its line: the commands after it still run
        ("# set up\ncd ~/p\necho x >> .gitignore # ignore\necho y > b.txt", [(".gitignore", "created"), ("b.txt", "created")]),
        ("echo 'a\n# quoted, not a comment' > c.txt", [("c.txt", "created")]),
        # code whose quoting broke: an arrow function and a comparison are not redirections
        ("osascript -e 'run \"x.filter(r => r.path.includes('a')) && n >= 2\"'", []),
    ],
)
def test_shell_file_ops(command: str, expected: list[tuple[str, str]]) -> None:
    assert [(p, a) for p, a, _base in shell_file_ops(command)] == expected


def test_cd_and_tilde_resolve_against_session_cwd() -> None:
    assert touches(
        call("1", "terminal", {"command": "cd ~/src/proj/pkg && mv a.py b.py && rm /tmp/scratch.txt"}),
        result("1", {"output": "", "exit_code": 0, "error": None}),
        call("2", "Bash", {"command": f"rm {CWD}/pkg/b.py > /dev/null"}),
        result("2", ""),
    ) == [("pkg/a.py", "deleted"), ("pkg/b.py", "deleted"), ("/tmp/scratch.txt", "deleted")]


def test_globs_and_variables_are_not_files() -> None:
    assert touches(call("1", "terminal", {"command": "rm *.pyc $OUT && touch ok.txt"}), result("1", "")) == [
        ("ok.txt", "created")
    ]


def test_a_dollar_in_a_file_tools_path_is_part_of_the_name() -> None:
    """Class seen on a held-out Claude Code session: route files named after their URL parameter
    ("routes/post/$postId.tsx", TanStack Router and Remix) were dropped as if "$postId" were a shell variable, so
    a session that only edited such files listed no output. A file tool's argument and a patch header reach no
    shell; there "$HOME/", "${DIR}" and "$(pwd)" still read as variables nobody expanded. In a command's words
    every "$" is the shell's."""
    assert touches(
        call("1", "Edit", {"file_path": f"{CWD}/app/routes/post/$postId.tsx", "old_string": "a", "new_string": "b"}),
        result("1", f"The file {CWD}/app/routes/post/$postId.tsx has been updated successfully."),
        call("2", "apply_patch", "*** Begin Patch\n*** Add File: app/routes/$lang/about.tsx\n+x\n*** End Patch"),
        result("2", "Success."),
        call("3", "Write", {"file_path": "$HOME/notes.md", "content": "x"}), result("3", "ok"),
        call("4", "Write", {"file_path": "${OUT_DIR}/report.md", "content": "x"}), result("4", "ok"),
        call("5", "Bash", {"command": "cp a.tsx app/routes/$slug.tsx"}), result("5", ""),
    ) == [("app/routes/post/$postId.tsx", "modified"), ("app/routes/$lang/about.tsx", "created")]


# --------------------------------------------------------------------------- errors and commands


TRACEBACK = (
    "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\n"
    "    from pkg.events import emit\n"
    "ImportError: cannot import name 'emit' from 'pkg.events' (/home/ana/src/proj/pkg/events.py)\n"
)


def test_errors_from_tracebacks_exit_codes_and_chinese() -> None:
    got = derive_facts(session(
        call("1", "terminal", {"command": "python app.py"}),
        result("1", {"output": TRACEBACK, "exit_code": 1, "error": None}),
        call("2", "terminal", {"command": "python app.py"}),
        result("2", {"output": TRACEBACK, "exit_code": 1, "error": None}),
        call("3", "terminal", {"command": "make deploy"}),
        result("3", {"output": "building...\nstep 3 of 4 stopped", "exit_code": 2, "error": None}),
        call("4", "terminal", {"command": "./tool.sh"}),
        result("4", {"output": "错误：找不到配置文件 config.yaml", "exit_code": 1}),
        call("5", "terminal", {"command": "grep -rn 'Error:' src"}),
        result("5", {"output": "src/a.py:3: raise Error: no", "exit_code": 0}),
        call("6", "Bash", {"command": "npm test"}),
        result("6", "FAILED tests/a.test.ts\nError: expected 1 to equal 2"),
    ))
    assert got.errors == (
        "ImportError: cannot import name 'emit' from 'pkg.events' (/home/ana/src/proj/pkg/events.py)",
        "step 3 of 4 stopped",
        "错误：找不到配置文件 config.yaml",
        "Error: expected 1 to equal 2",
        "FAILED tests/a.test.ts",
    )
    assert got.commands == ("python app.py", "make deploy", "./tool.sh", "grep -rn 'Error:' src", "npm test")


def test_a_failed_result_with_no_error_line_shows_a_line_that_says_something() -> None:
    """A failed tool call whose output has no line that reads as an error is shown by its last line, which was "```"
    (the closing fence of a SpecStory export's tool output) in a real note's Errors section. The last line that says
    something is shown, one naming the error first, without its markup tags."""
    out = ("Questions asked\n\n```text\n<tool_use_error>InputValidationError: [\n  {\n    \"maximum\": 4\n  }\n]"
           "</tool_use_error>\n```")
    got = derive_facts(session(call("1", "AskUserQuestion", {}), result("1", {"output": out, "exit_code": 1})))
    assert got.errors == ("InputValidationError: [",)
    got = derive_facts(session(call("1", "terminal", {"command": "make"}),
                               result("1", {"output": "built 3 of 4\nstopped\n```\n", "exit_code": 2})))
    assert got.errors == ("stopped",)


def test_a_search_that_found_nothing_is_no_error() -> None:
    """``rg``/``grep``/``git grep``/``diff`` exit 1 when nothing matches: an answer, not a failure (on a new Codex session
    two searches with no match were the note's only "errors", as the word "Output:"). Exit 2 is still an error."""
    got = derive_facts(session(
        call("1", "shell_command", {"command": 'rg -n "logout|signout" src'}),
        result("1", "Exit code: 1\nWall time: 1 seconds\nOutput:\n"),
        call("2", "terminal", {"command": "cd web && git grep -n useSession"}),
        result("2", {"output": "", "exit_code": 1}),
        call("3", "terminal", {"command": "grep -rn foo missing/"}),
        result("3", {"output": "grep: missing/: No such file or directory", "exit_code": 2}),
    ))
    assert got.errors == ("grep: missing/: No such file or directory",)
    from pipeline.facts.endstate import _tool_signal

    assert _tool_signal([call("1", "shell_command", {"command": "rg -n x src"}), result("1", {"output": "", "exit_code": 1})]) \
        == (True, False)
    assert _tool_signal([call("1", "shell_command", {"command": "pytest -q"}), result("1", {"output": "", "exit_code": 1})]) \
        == (True, True)


def test_error_lines_are_clipped_and_limited() -> None:
    long = "ValueError: " + "x" * 400
    (line,) = error_lines(long)
    assert len(line) == 200 and line.endswith("…")
    many = [result(str(i), {"output": f"KeyError: 'k{i}'", "exit_code": 1}) for i in range(30)]
    assert len(derive_facts(session(*many)).errors) == 20


def test_pasted_user_traceback_counts() -> None:
    got = derive_facts(session(Message(role="user", content=f"I get this:\n{TRACEBACK}")))
    assert got.errors == (
        "ImportError: cannot import name 'emit' from 'pkg.events' (/home/ana/src/proj/pkg/events.py)",
    )


def test_long_commands_are_trimmed() -> None:
    cmd = "echo " + "a" * 400
    (got,) = derive_facts(session(call("1", "terminal", {"command": cmd}), result("1", {"exit_code": 0}))).commands
    assert len(got) == 300 and got.startswith("echo aaa")


# --------------------------------------------------------------------------- edits shown only as prose


def edited(*messages: Message, source: str = "specstory") -> list[str]:
    s = Session(id="s1", source=source, messages=messages)
    return [t.path for t in derive_facts(s).files if t.action != "read"]


def u(text: str) -> Message:
    return Message(role="user", content=text)


def a(text: str) -> Message:
    return Message(role="assistant", content=text)


DIFF = "```diff\n  keep\n- old\n+ new\n```"


def test_path_tagged_fence_is_an_edit_but_a_line_citation_is_not() -> None:
    reply = ("现在修改`common/pom.xml`，移除插件：\n\n```xml:common/pom.xml\n<project/>\n```\n\n"
             "看这里：\n```12:20:src/app.py\nx = 1\n```\n\n```text:output\nok\n```\n\n```properties:admin/app.properties\nurl=jdbc:mysql://")
    assert edited(u("mvn fails"), a(reply)) == ["common/pom.xml", "admin/app.properties"]  # cut-off fence counts


def test_bare_diff_named_by_the_lead_in_and_resolved_against_reads() -> None:
    msgs = (
        u("login fails"),
        call("r1", "read_file", {"path": "portal/src/pages/login.vue"}), result("r1", ""),
        call("r2", "read_file", {"path": "portal/src/utils/request.ts"}), result("r2", ""),
        a(f"让我修改login.vue文件，使参数格式匹配：\n\n{DIFF}\n\n现在我还需要修改request.ts中的跨域配置：\n\n{DIFF}\n\n"
          f"最后，检查一下服务调用函数：\n\n{DIFF}\n\n我们将修改环境配置文件：\n\n{DIFF}"),
    )
    assert edited(*msgs) == ["portal/src/pages/login.vue", "portal/src/utils/request.ts"]


def test_advice_and_plain_code_are_not_edits() -> None:
    reply = (f"你可以这样修改 `a.ts`：\n\n{DIFF}\n\nYou could change `b.py` like this:\n\n{DIFF}\n\n"
             "Update `c.py`:\n\n```python\nprint(1)\n```")
    assert edited(u("how would I fix it?"), a(reply)) == []


def test_diff_after_a_diff_continues_the_file_and_header_names_it() -> None:
    reply = (f"我将编辑 `Layout.vue` 文件：\n\n{DIFF}\n\n{DIFF}\n\nNow the config:\n\n"
             "```diff\n--- a/conf/app.toml\n+++ b/conf/app.toml\n@@\n-a\n+b\n```")
    assert edited(u("theme"), a(reply)) == ["Layout.vue", "conf/app.toml"]


def test_diffs_named_by_the_claim_after_them() -> None:
    reply = f"{DIFF}\n\n{DIFF}\n\n已完成对 `Dispatcher.kt` 的 pushTask 方法重构。"
    assert edited(u("你直接帮我修改文件"), a(reply)) == ["Dispatcher.kt"]
    assert edited(u("x"), a(f"{DIFF}\n\nThis would touch `Dispatcher.kt`.")) == []  # no claim that it was done


def test_a_framework_or_a_mention_is_not_the_file_a_diff_edits() -> None:
    """A blind set's Cursor export: "在 Next.js 中配置：" before a diff listed a file "Next.js", and the user's mention
    "@instruction.md" a second copy of instruction.md. A library's name names no file; a mention names the file."""
    assert edited(u("配置 supabase"), a(f"我们在 Next.js 中修改配置：\n\n{DIFF}")) == []
    # nor does it stand beside the file named: one name, not two
    assert edited(u("x"), a(f"Updating the Node.js server entry `server.js`:\n\n{DIFF}")) == ["server.js"]
    assert edited(u("按 @instruction.md 做"), a(f"我将更新 @instruction.md：\n\n{DIFF}")) == ["instruction.md"]
    assert edited(u("x"), a(f"I'll edit `next.config.js`:\n\n{DIFF}")) == ["next.config.js"]


def test_unnamed_diffs_pair_with_files_read_this_turn_only_when_counts_agree() -> None:
    reads = [m for i, f in enumerate(("public/a.svg", "public/b.svg")) for m in
             (call(f"r{i}", "read_file", {"path": f}), result(f"r{i}", ""))]
    assert edited(u("fix the icons"), *reads, a(f"让我修改这些SVG文件：\n\n{DIFF}\n\n{DIFF}")) == [
        "public/a.svg", "public/b.svg"]
    assert edited(u("fix the icons"), *reads, a(f"让我修改这些SVG文件：\n\n{DIFF}")) == []
    # reads from an earlier turn do not count
    assert edited(u("look"), *reads, a("ok"), u("fix"), a(f"Fixing them:\n\n{DIFF}\n\n{DIFF}")) == []


def test_prose_edits_only_for_exports_without_edit_tool_calls() -> None:
    reply = a(f"Let me update `app.py`:\n\n{DIFF}")
    assert edited(u("x"), reply) == ["app.py"]
    assert edited(u("x"), reply, source="claude-code") == []
    assert edited(u("x"), reply, call("w", "Write", {"file_path": "b.py"}), result("w", "File created")) == ["b.py"]


def test_cursor_edit_blocks_with_elided_code_are_edits() -> None:
    """Cursor's edit_file renders the change as code with "// ... existing code ..." for what it kept; a v0/v1
    export shows that as a plain fence, named by the paragraph that announces it."""
    block = "```tsx\nimport { Sheet } from '@/components/ui/sheet'\n\n// ... existing code ...\n<Sheet />\n```"
    assert edited(u("x"), a(f"I'll update `src/components/settings-panel.tsx` to use a Sheet:\n\n{block}")) == [
        "src/components/settings-panel.tsx"]
    assert edited(u("x"), a(f"You can change `src/app.tsx` like this:\n\n{block}")) == []  # advice
    assert edited(u("x"), a("Update `src/app.tsx`:\n\n```tsx\n<Sheet />\n```")) == []  # a snippet, not an edit


def test_claims_of_a_finished_edit_name_the_file_in_an_export_without_edit_tools() -> None:
    """VS Code Copilot exports each edit as an empty fence: the reply's own past-tense claim is all that is left."""
    reply = ("I have created the plan-file `docs/plans/14.review.md`. I have successfully updated the "
             "`copilot-instructions.md` file as requested.I will now update `gui.md`. I have created the "
             "documentation for `filelib.js`. Should I update `text.md`? You could also edit `b.md`. 我已修改`a/pom.xml`文件。")
    assert edited(u("review the docs"), a(reply)) == ["docs/plans/14.review.md", "copilot-instructions.md", "a/pom.xml"]
    assert edited(u("x"), a("I've updated `a.md`."), source="claude-code") == []  # tool calls are the evidence there


def test_a_change_list_names_the_files_it_changed_in_an_export_without_edit_tools() -> None:
    """A reply's closing change list leaves out its subject: "- Added a guard in `throttle.py`". Its items open
    with a change verb; an item may list several files; a file the change only uses or is about (or that the changed
    code reads or writes when it runs), an item that reports a check, advice and a plan name no changed file. A bare name takes the path the session shows."""
    reply = ("**Update**\n- Added a guard in `throttle.py` so bot commands are dropped.\n"
             "- Extended `test_throttle.py` with a bot-command case.\n"
             "- **Broadened** annotations (`chat_meta.py`, `monitor.py`) to accept the adapter.\n"
             "- Switched the client to the shared factory from `clients.py`.\n"
             "- Verified `settings.py` still loads.\n"
             "- Updated docs for `parser.py` in `README.md`.\n"
             "- Created `CacheConfiguration` extending `JsonConfigFile` to load/save `missing_cache.json`.\n"
             "- Added a bot case to the `test_bots.py` suite.\n"
             "1. Added retries? Not sure yet in `retry.py`\n\n"
             "**Tests**\n- `.venv/bin/pytest tests/unit/test_throttle.py`\n\nNext: you could add a test in `e2e.py`.")
    assert edited(u("ignore other bots"), a(reply)) == [
        "throttle.py", "tests/unit/test_throttle.py", "chat_meta.py", "monitor.py", "README.md", "test_bots.py"]
    assert edited(u("x"), a("Plan:\n- Add a guard in `throttle.py`\n- Update `a.py`")) == []  # not done yet
    zh = "**修复内容：**\n- 将 `query(query_vector=...)` 改为 `query(data=...)`\n- 修复了 `flow.py` 和 `server.py` 中的相关代码\n" \
         "- 检查了 `config.py`"
    assert edited(u("修一下"), a(zh)) == ["flow.py", "server.py"]
    assert edited(u("x"), a(reply), source="claude-code") == []  # tool calls are the evidence there


def test_change_claims_in_russian_spanish_portuguese_and_the_passive() -> None:
    """Class seen on held-out exports whose edits are empty blocks (SpecStory of Cursor in Russian, Copilot in
    English): the reply's change list or claim is the only trace, and it was read only in English and Chinese, in
    the first person, and never in a numbered item ("1. **Расширено логирование в `api.ts`**" was cut at "1.").
    Now: Russian, Spanish and Portuguese participles and first-person past, a check mark before the verb, and
    the passive ("`t.js` has been created") for the files in its subject. Plans, questions, advice, a file
    the change is for or uses, and infinitives ("Изменить `a.ts`") name no changed file."""
    ru = ("## Резюме\n\n1. **Расширено логирование в `api.ts`**:\n2. ✅ Обновлена документация в `changelog.md` и "
          "`tasks.md`\n- Создана инструкция в `src/config/README.md`\n- Обновлен тип `StatusResponse`\n"
          "- Добавлены кнопки для `Footer.tsx`\nЯ исправил ошибки TypeScript в `LoginForm.tsx`.\n"
          "Нужно:\n1. Изменить `Home.tsx`\nВы можете обновить `b.ts`.")
    assert edited(u("почини вход"), a(ru)) == [
        "api.ts", "changelog.md", "tasks.md", "src/config/README.md", "LoginForm.tsx"]
    es = "- Actualizado `main.js` con el nuevo menú.\nHe corregido `game.css`.\n- Creado para `util.js`: nada"
    assert edited(u("arregla"), a(es)) == ["main.js", "game.css"]
    assert edited(u("corrija"), a("Atualizei `app.py`. Você pode alterar `b.py`.\n- Criado o arquivo `c.py`")) == [
        "app.py", "c.py"]
    en = ("A test script `tests/t.js` has been created. The docs in both `guide.md` and `README.md` have been "
          "updated to describe `cli.js`. The test script has been updated to check `x.js`. "
          "Should `y.md` have been updated? The logic in `conv.js` is now updated.")
    assert edited(u("add tests"), a(en)) == ["tests/t.js", "guide.md", "README.md", "conv.js"]
    assert edited(u("x"), a(ru), source="claude-code") == []  # tool calls are the evidence there


def test_a_bare_name_several_paths_end_with_is_dropped_once_one_of_them_is_listed() -> None:
    """"3. ✅ Added the command to git module index.ts", where src/git/index.ts is listed already and src/index.ts
    exists too: the bare name adds no file, and listed as it is it names a root index.ts nobody changed."""
    msgs = (u("add the command; the cli starts in src/index.ts"),
            a("I have updated `src/git/index.ts`.\n\n1. ✅ Added the command to git module index.ts"))
    assert edited(*msgs) == ["src/git/index.ts"]
    lone = (u("add the command"), a("1. ✅ Added the command to index.ts"))
    assert edited(*lone) == ["index.ts"]  # nothing to tell them apart, nothing listed: the claim stays


def test_a_file_the_reply_says_it_moved_is_listed_at_its_new_path_only() -> None:
    """Issue 15: a file moved during the session is an output at its final path, never at its old one. An export
    without tools says so in prose: "- Moved `a` → `b`", "**Moved test file** from `a` to `b`", "I renamed …".
    Moving code between files ("Moved the helper from `a.js` to `b.js`") moves no file; a plan moves nothing."""
    header = "### [{0}](file:///u/p/{1})\n\n```js\nx\n```\n"
    msgs = (u("tidy the undo code"),
            a(header.format("undo.js", "src/undo.js") + header.format("undo.test.js", "src/undo.test.js")),
            u("move them into src/undo"),
            a(header.format("undo.js", "src/undo/undo.js") + "\n- Moved `src/undo.js` → `src/undo/undo.js`\n"
              "1. **Moved test file** from `src/undo.test.js` to `test/undo.test.js`\n"
              "- Moved the helper from `keys.js` to `undo.js`\n"),
            a(header.format("keys.js", "src/keys.js") + "Next I will move `src/keys.js` to `lib/keys.js`."))
    s = Session(id="s", source="specstory", messages=msgs)
    got = derive_facts(s)
    assert got.output_files == ["/u/p/src/undo/undo.js", "test/undo.test.js", "/u/p/src/keys.js"]
    assert set(got.deleted_files) == {"/u/p/src/undo.js", "/u/p/src/undo.test.js"}


def test_an_empty_fence_is_a_copilot_edit_of_the_file_its_sentence_names() -> None:
    """Class seen on unseen VS Code Copilot exports: every applied edit is an empty fence. The sentence right
    before it names the file; one that names none goes on with the file edited last; a reply that opens with
    the edit names it in the sentence after; a library named in an earlier sentence is not the file."""
    mark = "\n```\n\n```\n"
    reply = (f"Now I'll modify `sketch.js` to import the new module, and remove the old functions. {mark}"
             f"Now let's add the initialization in the setup function: {mark}"
             f"Great! We have p5.js mocking. I need to add some mocks to the setup file: {mark}")
    assert edited(u("refactor it"), a(reply)) == ["sketch.js"]
    opening = f"{mark}All scaling logic in `sketch.js` now uses `layers.scaleFactor`. Want to test it?"
    assert edited(u("Proceed."), a(opening)) == ["sketch.js"]
    assert edited(u("x"), a(f"{mark}You could also change `a.js`.")) == []  # advice
    assert edited(u("x"), a("Here is an empty block:\n```\n\n```\nNothing else.")) == []
    # a name followed by what it is on the web is a site, not a C++ file (seen on an early Cursor export)
    assert edited(u("x"), a(f"Now the LearnWith.cc link: {mark}")) == []
    assert edited(u("x"), a(f"Now the `LearnWith.cc` website: {mark}")) == []


def test_the_work_tree_report_lists_outputs_once_the_session_has_edited() -> None:
    """``git status`` (long or porcelain) and ``--stat`` output, pasted or run, after the first edit; never a merge.
    The report lists every change since the last commit, so an entry counts when the session's own words or
    calls name the file, or when the tree was shown clean before the session changed anything."""
    porcelain = "`✗ git status --porcelain\nM  .github/instructions.md\nA  docs/plans/14.review.md\n" \
                "A  .specstory/history/2025-07-26_x.md\n?? notes.txt\nM  src/version.ts`"
    first = a("I have updated `docs/src/gui.md`. Next: `.github/instructions.md`, the plan 14.review.md, notes.txt.")
    assert edited(u("go"), first, u(f"commit these:\n    {porcelain}")) == [
        "docs/src/gui.md", ".github/instructions.md", "docs/plans/14.review.md", "notes.txt"]
    # version.ts and the others were changed before the session began: nothing the session did names them
    assert edited(u("go"), a("I have updated `docs/src/gui.md`."), u(porcelain)) == ["docs/src/gui.md"]
    assert edited(u("go"), a("I have updated `docs/src/gui.md`."), u(porcelain), a("About `myversion.ts`.")) == [
        "docs/src/gui.md"]  # not a mention of version.ts
    clean = call("c", "run_terminal_cmd", {"command": "git status"})
    assert edited(u("go"), clean, result("c", "On branch main\nnothing to commit, working tree clean\n"),
                  a("I have updated `docs/src/gui.md`."), u(porcelain)) == [
        "docs/src/gui.md", ".github/instructions.md", "docs/plans/14.review.md", "notes.txt", "src/version.ts"]
    assert edited(u(porcelain), a("ok")) == []  # the state before the session changed anything
    long_form = ("On branch main\nChanges not staged for commit:\n\tmodified:   src/a b.ts\n\tnew file:   app/[id]/(x)/b.ts\n"
                 "\trenamed:    old.ts -> src/c.ts\n\tdeleted:    src/gone.ts\n")
    run = call("g", "run_terminal_cmd", {"command": "git status"})
    first = a("I have updated `docs/src/gui.md`. Next: `a b.ts`, b.ts, c.ts and gone.ts, x.ts and README.md.")
    touched = [t for t in derive_facts(Session(id="s", source="specstory", messages=(
        u("x"), first, run, result("g", long_form)))).files]
    assert [(t.path, t.action) for t in touched] == [
        ("docs/src/gui.md", "modified"), ("src/a b.ts", "modified"), ("app/[id]/(x)/b.ts", "created"), ("src/c.ts", "modified"),
        ("src/gone.ts", "deleted")]
    stat = " src/x.ts   | 12 ++++--\n README.md  |  3 +\n 2 files changed, 13 insertions(+), 2 deletions(-)\n"
    assert edited(u("x"), first, call("g", "run_terminal_cmd", {"command": "git diff --stat"}), result("g", stat))[1:] == [
        "src/x.ts", "README.md"]
    merging = "All conflicts fixed but you are still merging.\n\tmodified:   theirs.ts\n"
    assert edited(u("x"), first, run, result("g", merging)) == ["docs/src/gui.md"]
    assert edited(u("x"), first, u("A  lone/line.md is what I meant")) == ["docs/src/gui.md"]  # one short line is prose
    code = "interface Changes {\n    deleted: string[];\n    modified:   Record<string, File>;\n    renamed: boolean\n}"
    assert edited(u("x"), first, run, result("g", code)) == ["docs/src/gui.md"]  # a type's fields, not a status


def test_a_status_entry_the_agent_called_by_its_name_in_capitals() -> None:
    """A new set's early Cursor export said "现在让我更新 CHANGELOG 记录版本变更：" before an empty edit section; the
    session's own `git status` then listed "modified:   CHANGELOG.md" among files changed before it. A name in
    capitals with no extension (CHANGELOG, README, VERSION) is how people call those files: the entry is the session's.
    Entries its words do not name stay out."""
    from pipeline.facts.derive import derive_facts

    status = ("On branch main\nChanges not staged for commit:\n\tmodified:   CHANGELOG.md\n\tmodified:   VERSION\n"
              "\tmodified:   app/settings.py\n")
    first = a("I have updated `app/config.py`. 现在让我更新 CHANGELOG 记录版本变更：")
    touched = [t.path for t in derive_facts(Session(id="s", source="specstory", messages=(
        u("x"), first, call("g", "run_terminal_cmd", {"command": "git status"}), result("g", status)))).files]
    assert touched == ["app/config.py", "CHANGELOG.md"]


def test_files_the_session_stages_and_commits_are_outputs_of_an_export_that_hides_its_edits() -> None:
    """Cursor through SpecStory (v1) may export no edit at all: "Read file: a.tsx", then the agent's own ``git add
    a.tsx b.tsx && git commit``. A file it staged by name counts when the session opened it or the assistant names
    it, and a commit at or after the add delivers it; a conflict marked resolved, a folder, a glob, ``.`` or a file
    the session never looked at stage no output of the session's."""
    def read(cid: str, path: str) -> tuple[Message, Message]:
        return call(cid, "read_file", {"target_file": path}), result(cid, "export function X() {}")

    def run(cid: str, command: str, output: str = "") -> tuple[Message, Message]:
        return call(cid, "run_terminal_cmd", {"command": command}), result(cid, output)

    commit = 'git add app/routes/_index.tsx app/Button.tsx other.ts src/ . && git commit -m "feat: palette"'
    msgs = (u("apply the new palette"), *read("r1", "app/routes/_index.tsx"),
            a("Now let me update the Button component colours in `Button.tsx` too."), *run("c", commit, "[main 1a2b3c] feat"))
    # other.ts: neither opened nor named (a change from before the session the user wants committed); "." and src/
    # stage whatever changed
    assert edited(*msgs) == ["app/routes/_index.tsx", "app/Button.tsx"]
    # staged, never committed: not delivered
    assert edited(*msgs[:-2], *run("c", "git add app/routes/_index.tsx app/Button.tsx")) == []
    assert edited(*msgs[:-2], *run("c", "git add app/Button.tsx"), *run("d", "git commit -m x")) == ["app/Button.tsx"]
    # a conflict marked resolved is a branch's version of the file
    theirs = "git checkout --theirs app/Button.tsx && git add app/Button.tsx && git commit --no-edit"
    assert edited(*msgs[:-2], *run("c", theirs)) == []
    # a tool that shows its edits: its own list stands, staging adds nothing to it
    assert edited(*msgs, source="claude-code") == []
    assert staged_files("cd web && git add -- a.tsx 'b c.css' *.ts lib $F && git commit", "/w") == [
        ("a.tsx", "/w/web"), ("b c.css", "/w/web")]
    missing = "fatal: pathspec 'app/Button.tsx' did not match any files"
    assert edited(*msgs[:-2], *run("c", "git add app/Button.tsx; git commit -m x", missing)) == []


def test_japanese_and_korean_announcements_place_an_edit_block_and_a_commit_deletes() -> None:
    """Cursor through SpecStory, in Japanese: "次に、`src/lib/supabase/client.ts` ファイルを作成し…" then a bare diff block
    creates that file, as "Let me create `…`" does; Korean "`App.tsx`를 수정합니다" likewise. The session's own commit
    printing "delete mode 100644 vercel.json" deletes a file the session wrote, however the deletion was made; a file
    it never wrote is not made one."""
    ja = a("次に、`src/lib/supabase/client.ts` ファイルを作成し、ブラウザ用のクライアントを作ります。\n\n" + DIFF)
    assert edited(u("Supabase のログインを作って"), ja) == ["src/lib/supabase/client.ts"]
    ko = a("이제 `src/App.tsx`를 수정합니다.\n\n" + DIFF)
    assert edited(u("버튼 색을 바꿔 줘"), ko) == ["src/App.tsx"]
    vercel = a("プロジェクトのルートに `vercel.json` を作成します。\n\n" + DIFF)
    commit = (call("c", "run_terminal_cmd", {"command": "git commit -a -m refactor"}),
              result("c", "[main 1a2b3c4] refactor\n 2 files changed\n delete mode 100644 vercel.json\n"
                          " delete mode 100644 old/notes.md\n"))
    s = Session(id="s1", source="specstory", messages=(u("cron を設定して"), vercel, *commit))
    assert [(t.path, t.action) for t in derive_facts(s).files] == [("vercel.json", "deleted")]


def test_a_bare_file_name_takes_the_one_path_the_session_shows_for_it() -> None:
    trace = "TypeError: x\n      at run (/home/u/proj/src/domain/tasks.ts:81:23)\n      at main (src/cli/tasks.tsx:3:1)"
    msgs = (u("fix it"), a(f"Let me update `tasks.ts`:\n\n{DIFF}\n\nLet me update `util.ts`:\n\n{DIFF}"),
            call("t", "run_terminal_cmd", {"command": "bun test"}), result("t", trace),
            u("see lib/util.ts and app/util.ts"))
    s = Session(id="s", source="specstory", cwd="/home/u/proj", messages=msgs)
    assert [t.path for t in derive_facts(s).files if t.action != "read"] == ["src/domain/tasks.ts", "util.ts"]


def test_a_pathless_block_is_the_module_the_session_imports_what_it_defines() -> None:
    """Cursor v0 exports an applied edit as a bare fence in a reply of its own. Its code names its file:
    ``export function LocalDebugButtons`` is what ``import { LocalDebugButtons } from '@/…'`` loads."""
    page = u("import { Panel } from '@/components/shop/panel'\nimport { Buttons } from '@/components/shop/buttons'\n"
             "import { Button } from '@/components/ui/button'\n"
             "TypeError: x\n    at Panel (./src/components/shop/panel.tsx:79:40)")
    buttons = "```\nimport { Button } from '@/components/ui/button'\n\nexport function Buttons() {\n  return <Button />\n}\n```"
    panel = "```\nexport function Panel({ items }: Props) {\n  return <div className=\"rounded-none\" />\n}\n```"
    # placed by the alias, with the extension its folder's files use (panel.tsx, shown in the trace)
    assert edited(page, a("我来修改按钮的布局。"), a(buttons)) == ["components/shop/buttons.tsx"]
    # placed by the one path the session shows for the module
    assert edited(page, a("Let me fix the corners:"), a(panel)) == ["src/components/shop/panel.tsx"]
    # not announced as an edit, or announced as advice: a code sample, not an edit
    assert edited(page, a("Here is how it looks now:"), a(buttons)) == []
    assert edited(page, a("You could change it like this:"), a(buttons)) == []
    # a block that only uses an imported name, or a package's name, places nothing
    uses = "```\nexport default function Page() {\n  return <Buttons />\n}\n```"
    assert edited(page, a("Let me update the page:"), a(uses)) == []
    react = "```\nexport function useState() {}\n```"
    assert edited(u("import { useState } from 'react'"), a("Let me update it:"), a(react)) == []


def test_an_unnamed_diff_is_placed_by_its_definitions_and_its_sibling_imports() -> None:
    index = ("```diff\n+ import { createListCommand } from './list';\n+ import { createStatusCommand } from './status';\n"
             "+ export function createTasksCommand() {}\n```")
    listing = "```diff\n+ import { Command } from 'commander';\n+ export function createListCommand() {}\n```"
    wrapper = ("```diff\n+ import { resolve as inner } from '../domain/repo';\n+ export function resolve() { return inner() }\n"
               "```")
    trace = ("Error: x\n    at /home/u/p/src/commands/tasks/status.ts:58:3\n    at /home/u/p/src/commands/session/list.ts:1:1\n"
             "    at /home/u/p/src/commands/tasks/list.ts:9:9\n")
    msgs = (u("build the tasks command"), a(f"Now the index:\n\n{index}\n\nThe list command:\n\n{listing}"),
            call("t", "run_terminal_cmd", {"command": "bun test"}), result("t", trace), u("import { resolve } from './repo'"),
            a(f"Fixing the wrapper:\n\n{wrapper}"))
    s = Session(id="s", source="specstory", cwd="/home/u/p", messages=msgs)
    # ./list is shown twice (tasks/, session/): its sibling ./status, shown once, says which folder
    assert [t.path for t in derive_facts(s).files if t.action != "read"] == ["src/commands/tasks/list.ts"]


def test_a_module_imported_by_an_alias_and_a_relative_path_is_one_module() -> None:
    """One file imports ``../services/cache/store`` and another ``@/services/cache/store``: one module, two
    spellings. The names it exports are still its own, so the block defining them is that file; a bare
    ``./store`` may be any folder's, and two different modules leave the block unplaced."""
    uses = u("```ts\nimport { store } from '../services/cache/store'\n```\n"
             "```ts\nimport { CacheEntry } from '@/services/cache/store'\n```")
    block = "```diff\n- \n+ export interface CacheEntry { at: number }\n+ export const store = new Map()\n```"
    assert edited(uses, a(f"缓存文件是空的，重新实现：\n\n{block}")) == ["services/cache/store.ts"]
    other = u("```ts\nimport { store } from './store'\nimport { CacheEntry } from '@/services/cache/store'\n```")
    assert edited(other, a(f"缓存文件是空的，重新实现：\n\n{block}")) == []
    two = u("```ts\nimport { store } from '@/services/db/store'\nimport { CacheEntry } from '@/services/cache/store'\n```")
    assert edited(two, a(f"缓存文件是空的，重新实现：\n\n{block}")) == []


def test_a_doubled_slash_in_a_path_is_no_second_rooted_file() -> None:
    """A plan that misspells ``src//config/sources.ts`` names src/config/sources.ts, not a rooted
    ``/config/sources.ts``: read as a second file, it left the block that defines the module two places to go."""
    plan = u("- **File**: `src//config/sources.ts`\n\nRead file: src/config/sources.ts\n\n"
             "```ts\nimport { sources } from '@/config/sources'\n```")
    block = "```diff\n- \n+ export const sources = []\n```"
    assert edited(plan, a(f"文件仍然是空的。让我重新创建它：\n\n{block}")) == ["src/config/sources.ts"]


def test_an_unnamed_diff_is_the_one_shown_file_named_after_what_it_exports() -> None:
    """Nothing imports a hook the views use (``useCart``), yet the plan shows ``src/hooks/useCart.ts``:
    the diff that exports ``useCart`` is that file. Two files of that name, or a Python def, place nothing."""
    block = "```diff\n- \n+ export interface CartState { n: number }\n+ export function useCart() {}\n```"
    plan = u("计划：\n1. 新建 src/hooks/useCart.ts\n2. 修改 src/views/Cart.vue")
    assert edited(plan, a(f"继续执行第1项：\n\n{block}")) == ["src/hooks/useCart.ts"]
    two = u("计划：\n1. 新建 src/hooks/useCart.ts\n2. 删除 legacy/useCart.js")
    assert edited(two, a(f"继续执行第1项：\n\n{block}")) == []
    doc = "```diff\n+ ## The hook\n+ \n+ ```ts\n+ export function useCart() {}\n+ ```\n```"
    assert edited(plan, a(f"继续执行第1项：\n\n{doc}")) == []  # a document quoting the hook is not the hook
    py = "```diff\n+ def main():\n+     pass\n```"
    assert edited(u("看 scripts/main.py"), a(f"继续执行第1项：\n\n{py}")) == []


def test_moving_code_into_a_named_file_is_an_edit_of_it() -> None:
    """"Move save_log into `game_function.py`" announces an edit of that file; "move on" announces none."""
    assert edited(u("改"), a(f"现在，我需要将 save_log 函式移到 game_function.py 中：\n\n{DIFF}")) == ["game_function.py"]
    assert edited(u("fix"), a(f"Now I'll move `save_log` into `game.py`:\n\n{DIFF}")) == ["game.py"]
    assert edited(u("fix"), a(f"Let me move on to `game.py`, which looks fine:\n\n{DIFF}")) == []


def test_unnamed_diffs_go_to_the_one_file_the_user_mentioned_for_a_change() -> None:
    """Cursor's user writes "@game_ui.py 修改遊戲畫面 UI": the reply's diffs that nothing else places are that
    file, unless the reply places another edit elsewhere or the user mentioned two files."""
    ask = u("@game_ui.py 修改遊戲畫面 UI\n1. 題目字變大")
    assert edited(ask, a(f"我將進一步修改遊戲畫面的 UI。\n\n{DIFF}\n\n{DIFF}")) == ["game_ui.py"]
    both = u("@log_ui.py 修改歷史介面 UI，參考 @main_ui.py 的按鈕")
    assert edited(both, a(f"我將修改歷史介面 UI。\n\n{DIFF}")) == []
    elsewhere = a(f"修改 `theme.py`：\n\n{DIFF}\n\n我將修改遊戲畫面的 UI。\n\n{DIFF}")
    assert edited(ask, elsewhere) == ["theme.py"]
    assert edited(u("@game_ui.py 这个文件是做什么的？"), a(f"它负责画面。\n\n{DIFF}")) == []
    two_routes = u("see api/chat/route.ts and api/emails/route.ts")
    assert edited(two_routes, u("@route.ts 修改接口"), a(f"我来修改接口。\n\n{DIFF}")) == []


def test_a_java_block_is_the_file_its_package_and_class_name() -> None:
    """Class seen on an unseen Cursor export (Chinese, 78 files): each diff creates a Java class under a
    numbered lead ("2. **创建Admin实体类**：", then SpecStory's "---"), no path anywhere near it. The code's own
    ``package`` line and public class name the file, under the source root the session shows."""
    entity = "```diff\n- \n+ package com.example.shop.entity;\n+ \n+ import lombok.Data;\n+ \n+ @Data\n+ public class Admin {\n+ }\n```"
    service = ("```diff\n+ package com.example.shop.service.impl;\n+ import com.example.shop.entity.Admin;\n"
               "+ class Helper {}\n+ public class AdminServiceImpl implements AdminService {\n+ }\n```")
    hunk = "```diff\n  import io.jsonwebtoken.Jwts;\n  import java.util.Date;\n  public class JwtUtil {\n-     int a;\n+     long a;\n```"
    shown = u("Read file: backend/src/main/java/com/example/shop/entity/User.java\n"
              "Read file: backend/src/main/java/com/example/shop/util/JwtUtil.java")
    reply = f"### 解决方案\n\n1. **创建Admin实体类**：\n\n---\n\n{entity}\n\n---\n\n2. **实现服务**：\n\n{service}\n\n{hunk}"
    assert edited(shown, a(reply)) == ["backend/src/main/java/com/example/shop/entity/Admin.java",
                                      "com/example/shop/service/impl/AdminServiceImpl.java",  # no root shown for it
                                      "backend/src/main/java/com/example/shop/util/JwtUtil.java"]
    kotlin = "```kotlin\npackage io.app.net\n\nclass Downloader(val url: String)\n```"
    assert edited(u("x"), a(f"Let me rewrite it:\n\n{kotlin}")) == []  # a plain block is no edit, package or not
    assert edited(u("x"), a("```diff\n+ package io.app.net\n+ \n+ class Downloader\n```")) == ["io/app/net/Downloader.kt"]


def test_a_lead_names_its_file_past_a_rule_and_by_its_module() -> None:
    """SpecStory puts "---" between the words that announce an edit and the block; a lead may name the file
    by its class (`AdminController`) when exactly one path the session touched has that stem."""
    read = (call("r", "read_file", {"path": "api/controller/AdminController.java"}), result("r", ""))
    reply = f"现在需要更新`AdminController`，使其使用泛型版本的`Result`：\n\n---\n\n{DIFF}"
    assert edited(u("改一下"), *read, a(reply)) == ["api/controller/AdminController.java"]
    assert edited(u("改一下"), a(f"1. **实现login.vue**：\n\n---\n\n{DIFF}")) == ["login.vue"]
    assert edited(u("改一下"), a(f"现在需要更新`Service`：\n\n---\n\n{DIFF}")) == []  # no file has that stem


def test_a_subagents_report_names_the_files_it_changed() -> None:
    """A subagent's edits are in its own transcript; the parent keeps its report. Its files section and
    Hermes's own "subagent modified files" note count; a section of files it only read does not. A bare name in
    the report is the one path the session touched that ends with it."""
    report = ("Done: the quote endpoint works.\n\n**Files modified:**\n- `api/src/routes/quotes.ts` (new handler)\n"
              "- api/src/libs/price.ts\n\n## Files created\n1. `api/tests/quotes.spec.ts`\n\n"
              "Key files reviewed:\n- api/src/store/models/price.ts\n")
    task = (u("add a quote endpoint"), call("t1", "Task", {"description": "quote endpoint", "prompt": "…"}),
            result("t1", report))
    assert touches(*task) == [("api/src/routes/quotes.ts", "modified"), ("api/src/libs/price.ts", "modified"),
                              ("api/tests/quotes.spec.ts", "created")]
    hermes = {"results": [{"task_index": 0, "status": "completed", "summary": (
        "- Fixed the parser\n- Files changed: `src/parser.py`, `tests/test_parser.py`\n\n[NOTE: subagent modified "
        "files the parent previously read — re-read before editing: docs/usage.md]")}]}
    assert touches(u("x"), call("d", "delegate_task", {"goal": "fix the parser"}), result("d", hermes)) == [
        ("docs/usage.md", "modified"), ("src/parser.py", "modified"), ("tests/test_parser.py", "modified")]
    explore = "## Key files\n- `api/src/store/models/invoice.ts`\n\nI read `price.ts` and found the tiers."
    assert touches(u("x"), call("e", "Task", {"subagent_type": "Explore"}), result("e", explore)) == []
    # a report's bare name is the one path the session touched that ends with it (not a second "file")
    edit = (call("w1", "Write", {"file_path": "app/components/TextTypeCard.tsx", "content": "x"}), result("w1", "ok"))
    bare = "**Critical changes:**\n- Modified `TextTypeCard.tsx` (defensive checks)\n- Modified `Other.tsx`\n"
    assert touches(u("x"), *edit, call("t2", "Task", {"prompt": "…"}), result("t2", bare)) == [
        ("app/components/TextTypeCard.tsx", "created"), ("Other.tsx", "modified")]


def test_hermes_execute_code_writes_are_read_from_the_script() -> None:
    """Hermes scripts write through the tools it exposes (write_file, patch, terminal) or plain Python;
    literal paths only, in source order; a script that failed or does not parse changed nothing."""
    code = ("from hermes_tools import write_file, patch, terminal\nfrom pathlib import Path\nimport shutil\n"
            "OUT = 'reports/summary.md'\n"
            "with open('data/out.csv', 'w') as f:\n    f.write('a,b')\n"
            "write_file(OUT, text)\npatch(path='src/a.py', old_string='a', new_string='b')\n"
            "terminal('mv notes.txt archive/notes.txt')\nPath('README.md').write_text('x')\n"
            "open('data/in.csv').read()\nopen(f'{name}.txt', 'w')\nshutil.copy('a.txt', 'backup/a.txt')\n"
            "prs.save('deck.pptx')\n")
    ran = (u("x"), call("c", "execute_code", {"code": code}), result("c", {"status": "success", "output": ""}))
    assert touches(*ran) == [("data/out.csv", "created"), ("reports/summary.md", "created"), ("src/a.py", "modified"),
                             ("notes.txt", "deleted"), ("archive/notes.txt", "moved"), ("README.md", "created"),
                             ("backup/a.txt", "created"), ("deck.pptx", "created")]
    assert touches(u("x"), call("c", "execute_code", {"code": "write_file('a.md', x"}), result("c", "ok")) == []
    # The stub's signature is patch(path, old_string, new_string, …): positional, the path is the first
    # argument and the strings after it are code, never files.
    positional = "from hermes_tools import patch\npatch('/u/p/src/m.tsx', 'a.b().c(q)', 'a.b().c(r)')\n"
    assert touches(u("x"), call("c", "execute_code", {"code": positional}), result("c", {"status": "success"})) == [
        ("/u/p/src/m.tsx", "modified")]
    failed = {"status": "error", "error": "Traceback (most recent call last):\nPermissionError: denied"}
    assert touches(u("x"), call("c", "execute_code", {"code": "write_file('a.md', 'x')"}), result("c", failed)) == []


def test_a_script_names_the_file_it_saves_through_a_path_it_builds_from_constants() -> None:
    """``OUT = os.path.join(OUT_DIR, "x.docx")`` then ``doc.save(OUT)`` inside a function is how generated scripts
    name their output; a path computed at run time still names nothing."""
    from pipeline.facts.pycode import code_file_ops

    code = ("import os\nfrom pathlib import Path\nOUT_DIR = '/u/Desktop/final'\n"
            "OUT = os.path.join(OUT_DIR, 'report.docx')\nCSV = Path(OUT_DIR) / 'data.csv'\n"
            "def main():\n    doc.save(OUT)\n    df.to_csv(CSV)\n    open(f'{OUT_DIR}/log.md', 'w')\n"
            "    open(OUT_DIR + '/b.txt', 'w')\n    for n in names:\n        open(f'{OUT_DIR}/{n}.md', 'w')\n"
            "    open(','.join(['a', 'b']), 'w')\n")
    assert [p for p, _a, _b in code_file_ops(code)] == [
        "/u/Desktop/final/report.docx", "/u/Desktop/final/data.csv", "/u/Desktop/final/log.md", "/u/Desktop/final/b.txt"]


def test_a_script_is_parsed_only_when_it_can_hold_a_call_that_writes() -> None:
    """The literal screen in front of ``ast.parse`` is a superset: every call the reader knows passes it, and
    a module that only computes is never parsed."""
    from pipeline.facts import pycode

    calls = ["write_file('a')", "patch(path='a')", "terminal('x')", "os.system('x')", "run('x', shell=True)",
             "open('a', 'w')", "p.write_text('x')", "p.write_bytes(b'')", "shutil.copy('a', 'b.txt')",
             "shutil.copyfile('a', 'b.txt')", "shutil.move('a', 'b.txt')",
             *(f"df.{m}('out.x')" for m in pycode._SAVE_METHODS)]
    assert all(pycode._MAY_WRITE.search(c) for c in calls)
    pure = "def area(r):\n    return 3.14159 * r * r\n\nprint(area(2))\n"
    assert not pycode._MAY_WRITE.search(pure) and pycode.code_file_ops(pure) == ()


def test_python_run_from_a_shell_command_is_read_for_its_writes() -> None:
    """``python3 - <<'PY' … PY`` and ``python -c`` are how Codex and Claude Code often script an edit."""
    heredoc = ("cd /home/u/p && python3 - <<'PY'\nfrom pathlib import Path\np = Path('src/app.ts')\n"
               "text = p.read_text()\np.write_text(text.replace('a', 'b'))\nPY")
    one_liner = "python -c 'import json; json.dump({}, open(\"cfg.json\", \"w\"))' && python3 scripts/gen.py"
    msgs = (u("x"), call("1", "exec_command", {"cmd": heredoc}), result("1", "Exit code: 0"),
            call("2", "exec_command", {"cmd": one_liner}), result("2", "Exit code: 0"),
            call("3", "exec_command", {"cmd": "python3 - <<'PY'\nopen('b.txt', 'w')\nPY"}), result("3", "Exit code: 1"))
    s = Session(id="s", source="codex", cwd="/home/u/p", messages=msgs)
    assert [(t.path, t.action) for t in derive_facts(s).files] == [("src/app.ts", "modified"), ("cfg.json", "created")]


def test_python_run_after_a_cd_writes_where_the_shell_went() -> None:
    """An unseen Claude Code session on Windows: ``cd "/c/Users/…/Temp/claude/…/tasks" && python -c "…open('ledger.txt',
    'w')…"`` listed ledger.txt as an output of the project (the cd was not followed), and the project's own files, patched
    after ``cd /c/Users/…/worktree``, came back as long Git Bash paths instead of paths in the project."""
    cwd = "C:\\Users\\m\\repos\\nomos"
    scratch = "cd \"/c/Users/m/AppData/Local/Temp/claude/tasks\" && python -c \"open('ledger.txt', 'w').write('x')\""
    patch = ("cd /c/Users/m/repos/nomos && python - <<'PY'\nfrom pathlib import Path\np = Path('src/keys.py')\n"
             "p.write_text(p.read_text().replace('a', 'b'))\nPY")
    unknown = "cd \"$SCRATCH\" && python -c \"open('nums.json', 'w').write('{}')\""
    wsl = "cd /mnt/c/Users/m/repos/nomos/docs && python3 -c \"open('notes.md', 'w')\""
    msgs = (u("x"), *(m for i, cmd in enumerate((scratch, patch, unknown, wsl))
                      for m in (call(str(i), "Bash", {"command": cmd}), result(str(i), "ok"))))
    s = Session(id="s", source="claude-code", cwd=cwd, messages=msgs)
    files = [(t.path, t.action) for t in derive_facts(s).files if not is_scratch(t.path)]
    assert files == [("src/keys.py", "modified"), ("docs/notes.md", "created")]


def test_an_export_without_a_cwd_takes_its_root_from_the_root_files_it_touched() -> None:
    """SpecStory records no cwd: the folder of a root file the tools wrote (package.json) that holds most of
    the paths becomes the base, so Windows and relative spellings of one file are one, and a folder removed
    with ``rm -rf`` takes the files written in it along (a folder is never listed as a deleted file)."""
    root = "E:\\work\\Forwarder System"
    msgs = (u("build it"),
            call("1", "write", {"file_path": f"{root}\\package.json"}), result("1", "ok"),
            call("2", "edit_file", {"target_file": f"{root}\\src\\app\\page.tsx"}), result("2", "ok"),
            call("3", "write", {"file_path": f"{root}\\.deploy\\deploy.sh"}), result("3", "ok"),
            call("4", "run_terminal_cmd", {"command": "sed -i 's/a/b/' src/app/page.tsx && rm -rf .deploy"}),
            result("4", "Exit code: 0"),
            call("5", "write", {"file_path": "C:\\Users\\me\\.npmrc"}), result("5", "ok"))
    facts = derive_facts(Session(id="s", source="specstory", messages=msgs))
    assert facts.output_files == ["package.json", "src/app/page.tsx", "c:/Users/me/.npmrc"]
    assert facts.deleted_files == [".deploy/deploy.sh"]
    from pipeline.chunk import chunk_session
    from pipeline.summarize.extractive import summarise_extractive

    session = Session(id="s", source="specstory", messages=msgs)
    assert summarise_extractive(session, chunk_session(session), facts).projects == ("Forwarder System",)
    # no root file touched: no guess, the paths stay as written (with "/")
    lone = derive_facts(Session(id="s", source="specstory", messages=msgs[:1] + msgs[3:5]))
    assert lone.output_files == ["e:/work/Forwarder System/src/app/page.tsx"]


def test_a_cmake_projects_root_is_the_folder_of_its_top_cmakelists() -> None:
    """A C/C++ project's root file is CMakeLists.txt (seen on a held-out Copilot export: every path stayed a long
    absolute Windows path, and a phase's clipped file list cut off the file it was about). Only a read of it is
    needed; a CMakeLists.txt in a subfolder holds fewer of the paths, so the top one wins."""
    root = "d:\\src\\vision"
    msgs = (u("add a depth plugin"),
            call("1", "read_file", {"filePath": f"{root}\\CMakeLists.txt"}), result("1", "…"),
            call("2", "read_file", {"filePath": f"{root}\\plugin\\CMakeLists.txt"}), result("2", "…"),
            call("3", "create_file", {"filePath": f"{root}\\plugin\\depth\\yolo.h"}), result("3", "ok"),
            call("4", "replace_string_in_file", {"filePath": f"{root}\\python\\depth.py"}), result("4", "ok"))
    facts = derive_facts(Session(id="s", source="specstory", messages=msgs))
    assert facts.output_files == ["plugin/depth/yolo.h", "python/depth.py"]


def test_real_specstory_exports() -> None:
    from pipeline.read.detect import read_sessions
    from tests.corpus import corpus_file

    def out(rel: str) -> list[str]:
        return derive_facts(next(read_sessions(corpus_file(rel)))).output_files

    assert out("specstory/skillz-combine-design-docs.md") == ["/Users/kevinlin/code/skillz/DESIGN-combined.md"]
    # Windows paths under the folder of the root files the tools touched (its pom.xml): relative, with "/"
    assert out("specstory/bing-wallpaper-copilot-java21-upgrade.md") == ["pom.xml"]
    assert out("specstory/health-backend-maven-missing-module-zh.md") == [
        "common/pom.xml", "admin/src/main/resources/application.properties"]
    # named bare in the claim, at its full path where the session shows it
    assert out("specstory/download-manager-analysis-doc-writing-zh.md") == [
        "download/src/main/java/com/pichs/download/dispatcher/DownloadQueueDispatcher.kt"]
    # v0 with bare fences only: the components whose code the session imports from '@/components/bookmark/…'
    assert out("specstory/shadcn-admin-feature-help-zh.md") == [
        "components/bookmark/local-debug-buttons.tsx", "components/bookmark/bookmark-sidebar-chrome.tsx"]


# --------------------------------------------------------------------------- usage and counts


def test_usage_fallbacks_counts_and_language() -> None:
    carrier = Message(role="user", content="[CONTEXT COMPACTION — REFERENCE ONLY] ...", is_carrier=True)
    s = session(
        Message(role="system", content="You are Hermes"),
        Message(role="user", content="帮我把测试修好", timestamp=100.0),
        carrier,
        Message(role="assistant", content="好的", timestamp=160.0),
        Message(role="user", content="谢谢", timestamp=200.5),
        model="gpt-5",
        usage=(
            ModelUsage(model="gpt-5", input_tokens=100, output_tokens=10, cost_usd=0.5),
            ModelUsage(model="claude-haiku", task="compression", input_tokens=50, output_tokens=5, cost_usd=0.25),
        ),
    )
    chunks = [Chunk(session_id="s1", generation=g, part=p, messages=()) for g, p in ((0, 0), (1, 0), (1, 1))]
    got = derive_facts(s, chunks)
    assert (got.input_tokens, got.output_tokens, got.cost_usd) == (150, 15, 0.75)
    assert got.models == ("gpt-5", "claude-haiku")
    assert (got.message_count, got.user_turns, got.generations) == (4, 2, 2)
    assert got.duration_s == 100.5
    assert got.language == "zh"
    assert derive_facts(s).generations == 1


def test_session_fields_win_over_usage_rows() -> None:
    s = session(
        input_tokens=10, output_tokens=2, cost_usd=0.01,
        started_at=datetime(2026, 1, 1, 10, 0, tzinfo=UTC), ended_at=datetime(2026, 1, 1, 10, 5, tzinfo=UTC),
        usage=(ModelUsage(model="m", input_tokens=999, cost_usd=9.0),),
    )
    got = derive_facts(s)
    assert (got.input_tokens, got.output_tokens, got.cost_usd, got.duration_s) == (10, 2, 0.01, 300.0)
    assert got.models == ("m",)


def test_file_touches_helper_on_a_slice() -> None:
    msgs = [call("1", "Write", {"file_path": "a.py"}), result("1", "File created successfully at: a.py")]
    assert file_touches(msgs) == [FileTouch(path="a.py", action="created", tool="Write")]


# --------------------------------------------------------------------------- the real v31 fixture


def load_real_session(session_id: str) -> Session:
    """Build a Session straight from state.db rows (independent of extract.py)."""
    if not REAL_DB.exists():
        pytest.skip(f"{REAL_DB} not present")
    db = sqlite3.connect(f"file:{REAL_DB}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    s = db.execute("select * from sessions where id = ?", (session_id,)).fetchone()
    msgs = []
    for r in db.execute("select * from messages where session_id = ? order by id", (session_id,)):
        calls = tuple(
            ToolCall(id=t["id"], name=t["function"]["name"], arguments=json.loads(t["function"]["arguments"]))
            for t in json.loads(r["tool_calls"] or "[]")
        )
        msgs.append(Message(
            row_id=r["id"], role=r["role"], content=r["content"] or "", tool_calls=calls,
            tool_call_id=r["tool_call_id"], tool_name=r["tool_name"], timestamp=r["timestamp"],
            is_carrier=bool(r["_compressed_summary"]),
        ))
    db.close()

    def ts(v: float | None) -> datetime | None:
        return datetime.fromtimestamp(v, UTC) if v else None

    return Session(
        id=s["id"], source=s["source"], title=s["title"], model=s["model"], cwd=s["cwd"],
        git_repo_root=s["git_repo_root"], git_branch=s["git_branch"], started_at=ts(s["started_at"]),
        ended_at=ts(s["ended_at"]), input_tokens=s["input_tokens"], output_tokens=s["output_tokens"],
        cost_usd=s["estimated_cost_usd"], messages=tuple(msgs),
    )


def test_real_hermes_session() -> None:
    got = derive_facts(load_real_session("20261120_080000_f2a74d"))
    assert got.files == (
        FileTouch(path="src/parsekit/parser.py", action="modified", tool="patch"),
        FileTouch(path="tests/test_parser_regressions.py", action="created", tool="write_file"),
    )
    assert got.commands == (
        "cd ~/src/parsekit && uv run pytest -q",
        "cd ~/src/parsekit && uv run pytest -q tests/test_parser_regressions.py && git add -A "
        "&& git commit -m 'parser: unescape string literals via lexer.unescape'",
    )
    assert got.errors == (
        "AssertionError: assert Node(kind='str', value='a\\\"b') == Node(kind='str', value='a\"b')",
        "FAILED tests/test_parser.py::test_parse_nested_quotes[case3] - AssertionError",
        "FAILED tests/test_parser.py::test_parse_empty_string - IndexError: string index out of range",
    )
    assert got.tools == {"terminal": 3, "read_file": 1, "search_files": 1, "patch": 2, "write_file": 1}
    assert got.models == ("anthropic/claude-sonnet-4.5",)
    assert (got.input_tokens, got.output_tokens, got.cost_usd) == (29726, 725, 0.107353)
    assert (got.message_count, got.user_turns, got.language) == (20, 3, "en")
    assert got.duration_s == pytest.approx(717.9, abs=0.01)


# --------------------------------------------------------------------------- outputs from every format


def test_outputs_leave_out_deletions_scratch_and_directories() -> None:
    s = session(call("c1", "terminal", {"command": "echo hi > /tmp/run.log && mv notes.txt docs/notes.md && "
                                                   "rm -rf node_modules/.cache && rm old.py && touch .next/trace"}),
                result("c1", {"output": "", "exit_code": 0}))
    f = derive_facts(s)
    assert f.output_files == ["docs/notes.md"]
    assert f.deleted_files == ["notes.txt", "old.py"]
    # a file named as scratch (a blind set's ".tmp_material_check.py" and its report); tmp.py is a name like any other
    s = session(call("c2", "terminal", {"command": "python .tmp_material_check.py > .tmp_material_report.txt && "
                                                   "echo x > tmp_probe.json && echo y > tmp.py"}),
                result("c2", {"output": "", "exit_code": 0}))
    assert derive_facts(s).output_files == ["tmp.py"]
    # "temp" is temperature too: a blind set's firmware wrote temp_fusion.c, and it vanished from the note as scratch
    s = session(call("c3", "terminal", {"command": "echo a > src/temp_fusion.c && echo b > temp_sensor.h && "
                                                   "echo c > temp-out.json && echo d > temp_output.txt"}),
                result("c3", {"output": "", "exit_code": 0}))
    assert derive_facts(s).output_files == ["src/temp_fusion.c", "temp_sensor.h"]


def test_a_scratch_folder_and_an_untracked_file_are_neither_outputs_nor_deletions() -> None:
    """Staging copies in a folder named as scratch (``.deploy-tmp/``, ``tmp/``) are not the session's work, and
    ``git rm --cached`` only stops tracking a file that stays on disk (the forwarder session untracks its key
    file and a workflow it keeps)."""
    s = session(
        call("w1", "write", {"file_path": ".deploy-tmp/deploy.sh"}), result("w1", "ok"),
        call("w2", "write", {"file_path": "build_tmp/x.json"}), result("w2", "ok"),
        call("w3", "write", {"file_path": "src/tmp.py"}), result("w3", "ok"),
        call("w4", "write", {"file_path": ".github/workflows/deploy.yml"}), result("w4", "ok"),
        call("w5", "write", {"file_path": "src/templates/a.html"}), result("w5", "ok"),
        call("c1", "terminal", {"command": "git rm --cached .github/workflows/deploy.yml && git rm -r --cached "
                                           ".deploy-tmp && git rm stale.py"}),
        result("c1", {"output": "", "exit_code": 0}))
    f = derive_facts(s)
    assert f.output_files == ["src/tmp.py", ".github/workflows/deploy.yml", "src/templates/a.html"]
    assert f.deleted_files == ["stale.py"]


def test_aider_and_unknown_edit_tools_count() -> None:
    msgs = [
        call("e1", "aider_apply_edit", {"path": "src/app.py"}), result("e1", "Applied edit to src/app.py"),
        call("m1", "mcp__filesystem__write_file", {"path": "README.md", "content": "x"}), result("m1", "ok"),
        call("m2", "replace_string_in_file", {"filePath": "src/b.ts"}), result("m2", "ok"),
        call("m3", "mcp__serena__find_symbol", {"path": "src/c.py"}), result("m3", "found"),
        call("m4", "update_todo_list", {"todos": []}), result("m4", "ok"),
    ]
    assert derive_facts(session(*msgs)).output_files == ["src/app.py", "README.md", "src/b.ts"]


def test_a_patch_inside_a_string_literal_is_read() -> None:
    code = 'const patch = "*** Begin Patch\\n*** Add File: Cargo.toml\\n+[workspace]\\n*** Update File: src/main.rs\\n@@\\n-a\\n+b\\n*** End Patch";'
    s = session(call("x1", "exec", code), result("x1", "Success"))
    assert derive_facts(s).output_files == ["Cargo.toml", "src/main.rs"]


def test_copilot_edit_headers_name_the_file() -> None:
    reply = "### [undo.js](file:///home/u/proj/src/undo.js)\n\nFix the buffer.\n\n```js\nlet x = 1\n```"
    assert edited(u("fix undo"), a(reply)) == ["/home/u/proj/src/undo.js"]


def test_a_french_user_pasting_english_terminal_output_writes_french() -> None:
    """Two asks that are a pasted `npm run dev` session (English, no log pattern knows them) and two typed in French:
    the pasted blocks say nothing of the user's language (a new French session was summarised in English)."""
    paste = ("user@MacBookPro SPEECHY % npm run dev\n\n> speechy@1.0.0 dev\n> concurrently \"npm run dev:renderer\" "
             "\"npm run dev:electron\"\n\n[1] > speechy@1.0.0 dev:electron\n[1] > wait-on http://localhost:5173 && "
             "electron .\n[0] VITE v5.4.0 ready in 312 ms\n[0] ➜ Local: http://localhost:5173/\n"
             "[1] Error occurred in handler for 'transcribe': the audio stream was closed before the request finished\n")
    got = derive_facts(session(
        Message(role="user", content=paste), Message(role="assistant", content="I see the stream closes early."),
        Message(role="user", content=paste + "\nEt voilà ce que ça donne quand je relance."),
        Message(role="user", content="Ok donc en fait j'ai plusieurs problèmes. Quand je fais une pause, ça se coupe."),
        Message(role="user", content="Alors, j'ai lancé l'application, c'est plutôt un beau travail."),
    ))
    assert got.language == "fr"


def test_a_subagents_report_with_an_entry_per_file_names_its_files() -> None:
    """A Task subagent's report lists each changed file as a bold entry ("**1. `a.kt`** (`/w/app/src/a.kt`)") with its
    changes as bullets under it: each entry is a file (its longest spelling), the bullets name none."""
    from pipeline.facts.derive import subagent_files

    report = ("Here is a summary of all changes made:\n\n## Summary of Changes\n\n### Files Modified\n\n"
              "**1. `RegisterViewModel.kt`** (`/w/app/src/viewmodel/RegisterViewModel.kt`)\n\n"
              "- Added `RegisterUiState` data class\n- Replaced `context as Activity` casts\n\n"
              "**2. `RegisterActivity.kt`** (`/w/app/src/view/RegisterActivity.kt`)\n\n- Collects the effects\n\n"
              "### Files Reviewed\n\n**1. `RegisterRepository.kt`** (`/w/app/src/RegisterRepository.kt`)\n")
    assert subagent_files(report) == [("/w/app/src/viewmodel/RegisterViewModel.kt", "modified"),
                                      ("/w/app/src/view/RegisterActivity.kt", "modified")]


def test_a_subagents_list_entry_that_says_what_it_did_to_its_file_names_it() -> None:
    """A TDD subagent reported "765 passed … Here are the relevant files:" then "- `…/evaluator.py` — new file with …",
    "- `…/models.py` — added 4 optional fields": no files heading, but each entry says what happened to its file. An
    entry that only describes its file, a bare name (any folder's) and a read-only section name none."""
    from pipeline.facts.derive import subagent_files

    report = ("765 passed — no regressions. Here are the relevant files:\n\n"
              "- `/w/src/core/evaluator.py` — new file with pure evaluation functions\n"
              "- `/w/src/core/models.py` — added 4 optional fields to `DiscoveryPacket`\n"
              "- `/w/src/core/runner.py` — runs the pipeline and handles retries\n"
              "2. **mock.test.ts** — Added a test case for the query string\n")
    assert subagent_files(report) == [("/w/src/core/evaluator.py", "created"), ("/w/src/core/models.py", "modified")]


def test_session_language_ignores_harness_text_in_the_user_role() -> None:
    """Task notifications and compaction summaries are English written by software, not the user's words."""
    from pipeline.facts.derive import derive_facts
    from pipeline.models import Message, Session

    notes = [Message(role="user", content="<task-notification>\n<task-id>b1</task-id>\n" + "The background task "
                     "finished with output and the status of the work is complete and ready for review. " * 8)
             for _ in range(5)]
    msgs = [Message(role="user", content="帮我把登录页面的样式改成深色，按钮放到右边"), *notes,
            Message(role="assistant", content="好的，已经修改完成。")]
    assert derive_facts(Session(id="s", source="cli", messages=msgs)).language == "zh"


def test_command_from_the_result_fence_when_the_export_kept_no_arguments() -> None:
    """SpecStory v1.5 renders a terminal call as "Tool use: **run_terminal_cmd**" and the command only as the
    first shell fence of its body: the command, and the files it touches, come from there."""
    from pipeline.facts.derive import derive_facts
    from pipeline.models import Message, Session, ToolCall

    msgs = [Message(role="user", content="remove the secrets file from git"),
            Message(role="assistant", content="", tool_calls=(ToolCall(id="t1", name="run_terminal_cmd", arguments={}),)),
            Message(role="tool", tool_call_id="t1", content="```bash\ngit mv a.txt b.txt\n```\n\n```\n\n```"),
            Message(role="assistant", content="", tool_calls=(ToolCall(id="t2", name="read_file", arguments={}),)),
            Message(role="tool", tool_call_id="t2", content="```bash\nrm -rf /\n```")]
    facts = derive_facts(Session(id="s", source="specstory", messages=msgs))
    assert facts.commands == ("git mv a.txt b.txt",)  # a read's body is no command
    assert facts.output_files == ["b.txt"]


def _touched(*calls: tuple[str, object, str], cwd: str = "/home/u/p") -> list[tuple[str, str]]:
    from pipeline.facts.derive import file_touches
    from pipeline.models import Message, ToolCall

    msgs: list[Message] = []
    for i, (name, args, result) in enumerate(calls):
        msgs += [Message(role="assistant", content="", tool_calls=(ToolCall(id=f"c{i}", name=name, arguments=args),)),
                 Message(role="tool", tool_call_id=f"c{i}", content=result)]
    return [(f.action, f.path) for f in file_touches(msgs, cwd)]


PATCH = "*** Begin Patch\n*** Add File: src/a.py\n+x\n*** Update File: b.py\n@@\n-a\n+b\n*** End Patch"


def test_a_framework_a_change_list_names_is_no_file() -> None:
    """A new set's Cursor export closed with a change list: "2. Updated Next.js to the latest version" (an npm
    install); "Next.js" became an output file. In a change list's item, as in a sentence, a framework spelled like a
    JavaScript file names the framework; a path to such a file still names the file."""
    from pipeline.facts.derive import _item_files

    assert _item_files("Updated Next.js to the latest version", []) == []
    assert _item_files("Updated `vendor/three.js` to r160", []) == ["vendor/three.js"]


def test_a_patch_known_only_by_codexs_list_of_what_it_changed() -> None:
    """A new blind set's Codex CLI session through SpecStory (Markdown v2.0) kept each apply_patch's result but not its
    input: "Output: ``` Success. Updated the following files: M app/src/…/WeeklyDisplayLogic.kt ```". That list names
    each file and what the patch did (A added, M modified, D deleted); the note listed no file at all. A failed patch,
    or one whose output lists nothing, changes nothing."""
    ok = "Output: ```\nSuccess. Updated the following files:\nM app/src/Logic.kt\nA app/src/test/LogicTest.kt\n```"
    gone = "Success. Updated the following files:\nD docs/old.md\n"
    assert _touched(("apply_patch", {}, ok), ("apply_patch", {}, gone)) == [
        ("modified", "app/src/Logic.kt"), ("created", "app/src/test/LogicTest.kt"), ("deleted", "docs/old.md")]
    assert _touched(("apply_patch", {}, "apply_patch verification failed: Failed to find expected lines in a.kt")) == []
    assert _touched(("apply_patch", {}, "Output: ```\nSuccess. Updated the following files:\n```")) == []


def test_codex_code_mode_runs_the_commands_its_javascript_names() -> None:
    """Codex's code mode calls ``exec`` with JavaScript: ``tools.exec_command({cmd:"…", "workdir":"/w"})``, several in a
    ``Promise.all``. Each command is run as if typed, in its workdir (a blind set's session was all of this)."""
    from pipeline.facts.shell import command_text

    code = ('const r = await tools.exec_command({cmd:"mkdir -p out && echo \\"ok\\" > out/report.txt","workdir":"/w/app",'
            'yield_time_ms:30000}); text(JSON.stringify(r))')
    assert _touched(("exec", {"input": code}, '{"output": "", "exit_code": 0}'), cwd="/w/app") == [
        ("created", "out/report.txt")]
    both = ('const rs = await Promise.all([tools.exec_command({cmd:"pytest -q"}), '
            'tools.exec_command({cmd:`rm old.log`, workdir:"/w/app"})]);')
    assert command_text({"input": both}) == "pytest -q\nrm old.log"
    assert command_text({"input": "const p = await tools.update_plan({plan: []});"}) is None


def test_a_patch_specstory_shows_as_an_unknown_tools_input() -> None:
    """SpecStory renders a tool it does not know (Codex's code-mode ``exec``) by its input alone, cut short: "Input
    (truncated): ```const patch = "*** Begin Patch\\n*** Update File: C:\\\\app\\\\a.py\\n@@…". The header names the file
    (a blind set's session had every edit this way). An input that only reads shows no patch."""
    shown = ('Input (truncated): ```\nconst patch = "*** Begin Patch\\n*** Update File: C:\\\\w\\\\app\\\\data.py\\n@@\\n'
             '-DATA = 1\\n+DATA = 2\n...\n```')
    added = shown.replace("Update File", "Add File").replace("data.py", "test_x.py")
    read = 'Input (truncated): ```\nconst r = await tools.exec_command({cmd:"Get-Content app\\\\data.py"})\n...\n```'
    got = _touched(("exec", {}, shown), ("exec", {}, added), ("exec", {}, read), ("unknown_tool", {}, read), cwd="C:/w")
    assert got == [("modified", "app/data.py"), ("created", "app/test_x.py")]


def test_apply_patch_run_through_a_shell_tool() -> None:
    want = [("created", "src/a.py"), ("modified", "b.py")]
    assert _touched(("exec_command", {"cmd": f"apply_patch <<'EOF'\n{PATCH}\nEOF"}, "Exit code: 0")) == want
    assert _touched(("shell", {"command": ["apply_patch", PATCH]}, "ok")) == want
    assert _touched(("shell", {"command": ["bash", "-lc", f"apply_patch <<'EOF'\n{PATCH}\nEOF"]}, "ok")) == want
    assert _touched(("exec_command", {"cmd": f"apply_patch <<'EOF'\n{PATCH}\nEOF"}, "Exit code: 1\npatch failed")) == []


def test_other_harnesses_file_tools_and_path_keys() -> None:
    assert _touched(("write_to_file", {"TargetFile": "/home/u/p/k.md", "CodeContent": "x"}, "ok"),
                    ("apply_diff", {"path": "s.md", "diff": "…"}, "ok"),
                    ("edit_notebook", {"target_notebook": "nb.ipynb"}, "ok"),
                    ("delete_file", {"target_file": "v.md"}, "ok")) == [
        ("created", "k.md"), ("modified", "s.md"), ("modified", "nb.ipynb"), ("deleted", "v.md")]


def test_a_tool_that_edits_several_files_in_one_call_touches_each() -> None:
    """VS Code Copilot's ``multi_replace_string_in_file`` takes ``replacements: [{filePath, oldString, newString}]``:
    each item names its own file (seen on a held-out session: three headers edited, none listed). A list of
    plain strings (``get_errors``' ``filePaths``) and a look tool's list name no change."""
    assert _touched(("multi_replace_string_in_file", {"explanation": "relabel", "replacements": [
        {"filePath": "/home/u/p/a.h", "oldString": "x", "newString": "y"},
        {"filePath": "/home/u/p/b.h", "oldString": "x", "newString": "y"},
        {"filePath": "/home/u/p/a.h", "oldString": "z", "newString": "w"}]}, "ok"),
        ("get_errors", {"filePaths": ["/home/u/p/c.h"]}, "none"),
        ("read_files", {"files": [{"path": "/home/u/p/d.h"}]}, "…")) == [("modified", "a.h"), ("modified", "b.h")]


def test_removing_a_directory_removes_what_was_written_in_it() -> None:
    got = _touched(("write_file", {"path": "/home/u/p/src/app/old/page.tsx", "content": "x"}, '{"success": true}'),
                   ("write_file", {"path": "/home/u/p/src/app/new/page.tsx", "content": "x"}, '{"success": true}'),
                   ("terminal", {"command": "rm -rf src/app/old"}, '{"output": "", "exit_code": 0}'))
    assert ("deleted", "src/app/old/page.tsx") in got and ("created", "src/app/new/page.tsx") in got


def test_output_options_name_the_file_a_command_writes() -> None:
    from pipeline.facts.shell import shell_file_ops

    def files(cmd: str) -> list[str]:
        return [p for p, _a, _b in shell_file_ops(cmd)]

    assert files("node scripts/generate.mjs --out /Users/m/Desktop/deck.pptx") == ["/Users/m/Desktop/deck.pptx"]
    assert files("pandoc README.md -o out/readme.pdf") == ["out/readme.pdf"]
    assert files("curl -sL -o data/x.zip https://example.com/x.zip") == ["data/x.zip"]
    assert files("python report.py --output=site/index.html") == ["site/index.html"]
    cert = ("openssl req -x509 -nodes -newkey rsa:2048 -keyout certs/localhost-key.pem -out certs/localhost-cert.pem "
            "-subj /CN=localhost")
    assert files(cert) == ["certs/localhost-key.pem", "certs/localhost-cert.pem"]
    assert files("openssl x509 -in certs/localhost-cert.pem -noout -text") == []  # reads only
    # -o is not an output everywhere, and a directory or a format is not a file
    assert files("unzip -o data/x.zip") == files("pytest -o addopts=-q tests/a.py") == []
    assert files("tsc --outDir dist") == files("tool --output json") == files("vite build --out dist") == []


def test_hermes_skill_manage_writes_the_skill_file_in_its_folder() -> None:
    view = '{"success": true, "name": "xs", "skill_dir": "/Users/m/.hermes/skills/dev/xs", "path": "dev/xs/SKILL.md"}'
    got = _touched(("skill_view", {"name": "xs"}, view),
                   ("skill_manage", {"action": "patch", "name": "xs", "old_string": "a", "new_string": "b"},
                    '{"success": true, "message": "Patched SKILL.md"}'),
                   ("skill_manage", {"action": "patch", "name": "other", "old_string": "a"}, '{"success": true}'),
                   ("skill_manage", {"action": "create", "name": "new", "category": "ops", "content": "x"},
                    '{"success": true}'),
                   ("skill_manage", {"action": "patch", "name": "xs", "old_string": "zz"}, '{"success": false}'),
                   cwd="/Users/m/proj")
    assert got == [("modified", "/Users/m/.hermes/skills/dev/xs/SKILL.md"),
                   ("created", "/Users/m/.hermes/skills/ops/new/SKILL.md")]


def test_a_home_relative_path_is_the_absolute_one_when_the_session_shows_its_home() -> None:
    """No cwd (a Hermes request dump): ``~/p/a.ts`` and ``/Users/u/p/a.ts`` are one output, not two; with no
    home in sight (or two) ``~`` stays as written."""
    msgs = (u("x"), call("1", "write_file", {"path": "~/p/a.ts", "content": "x"}), result("1", {"bytes_written": 1}),
            call("2", "patch", {"path": "/Users/u/p/a.ts", "old_string": "x", "new_string": "y"}),
            result("2", {"success": True}),
            call("3", "write_file", {"path": "~/p/b.ts", "content": "x"}), result("3", {"bytes_written": 1}))
    def no_cwd(*ms: Message) -> list[tuple[str, str]]:
        return [(t.path, t.action) for t in derive_facts(Session(id="s", source="hermes-dump", messages=ms)).files]

    assert no_cwd(*msgs) == [("/Users/u/p/a.ts", "created"), ("/Users/u/p/b.ts", "created")]
    assert no_cwd(*msgs[:3], *msgs[5:]) == [("~/p/a.ts", "created"), ("~/p/b.ts", "created")]


def test_words_cut_from_broken_quoting_and_app_bundles_are_not_files() -> None:
    """A shell word holding a quote or a brace is what broken quoting leaves (a ``sed`` expression with ``', '``
    inside, a script pasted into ``python3 -c '…'``); an app bundle copied into /Applications is a folder."""
    sed = "cd /u/p && sed -i '' 's/warn(f\"x: {.*}\")/raise E(f\"x: {', '.join(m)}\")/' app/config.py"
    script = ("from hermes_tools import terminal\nS = '''\nif a[i] > a[i-1] and b >= 2:\n    print(x)\n'''\n"
              "terminal(f\"python3 -c '{S}'\")\n")
    msgs = (u("x"), call("1", "terminal", {"command": sed}), result("1", {"output": "", "exit_code": 0}),
            call("2", "execute_code", {"code": script}), result("2", {"status": "success", "output": ""}),
            call("3", "terminal", {"command": 'cp -R "/Volumes/Google Chrome/Google Chrome.app" /Applications/'}),
            result("3", {"output": "", "exit_code": 0}))
    assert touches(*msgs) == [("/u/p/app/config.py", "modified")]


def test_a_run_that_says_where_it_saved_a_file_names_an_output() -> None:
    """A script that builds its output path at run time names the file only in what it prints ("Saved: …",
    "文档已保存: …"). Not counted: a failed run, a command run on another machine, a scaffolder's "Created X" list
    (relative to a folder it names elsewhere), counts and durations."""
    saved = "Saved: /u/out/report.docx\nWrote 3 rows to data/out.csv\n文档已保存: /u/桌面/要求文档.docx\nSaved 3 items in 0.3s"
    msgs = (u("x"), call("1", "terminal", {"command": "python3 /u/make.py"}), result("1", {"output": saved, "exit_code": 0}),
            call("2", "terminal", {"command": "python3 gen.py"}), result("2", {"output": "Saved: b.md\nboom", "exit_code": 1}),
            call("3", "terminal", {"command": 'ssh root@host "certbot --nginx"'}),
            result("3", {"output": "Certificate is saved at: /etc/le/fullchain.pem", "exit_code": 0}),
            call("4", "terminal", {"command": "python3 init_skill.py x"}),
            result("4", {"output": "✅ Created SKILL.md\n✅ Created scripts/example.py", "exit_code": 0}))
    assert touches(*msgs) == [("/u/out/report.docx", "created"), ("data/out.csv", "created"), ("/u/桌面/要求文档.docx", "created")]
    # a file named like the verb in a listing saves nothing ("SavedMessages.tsx" was "Saved: Messages.tsx"); a run
    # after "cd api" says where it saved from api/
    listing = (call("5", "Bash", {"command": "ls components"}), result("5", {"output": "SavedMessages.tsx\nWrittenBy.tsx", "exit_code": 0}))
    assert touches(*listing) == []
    moved = (call("6", "Bash", {"command": "mkdir -p api && cd api && npm init -y"}),
             result("6", {"output": "Wrote to package.json", "exit_code": 0}))
    assert touches(*moved) == [("api/package.json", "created")]


def test_a_scripts_progress_line_confirmed_done_names_the_file() -> None:
    """spec-kit's agent-context script prints the file it is about to update, then that it did (two blind sets' Codex
    sessions: AGENTS.md was changed by no edit tool). A progress line that no done line follows names nothing."""
    out = ("INFO: === Updating agent context files for feature 001-layout ===\n"
           "INFO: Updating Codex CLI context file: /w/app/AGENTS.md\nINFO: Updating existing agent context file...\n"
           "✓ Updated existing Codex CLI context file\n")
    run = (call("1", "shell", {"command": [".specify/scripts/bash/update-agent-context.sh", "codex"]}),
           result("1", {"output": out, "metadata": {"exit_code": 0}}))
    assert touches(u("plan"), *run) == [("/w/app/AGENTS.md", "created")]
    stalled = out.replace("✓ Updated existing Codex CLI context file\n", "ERROR: template missing\n")
    assert touches(u("plan"), run[0], result("1", {"output": stalled, "metadata": {"exit_code": 0}})) == []


def test_a_run_that_saves_a_batch_made_data_not_outputs() -> None:
    """A blind set's experiment script printed "Saved: 1_R_compare_final.png" fifteen times: its figures buried the seven
    source files the session wrote (precision 0.32). A run saving a few files names them; one saving a batch, none."""
    batch = "\n".join(f"Saved: {n}_R_compare_final.png" for n in (1, 22, 23, 55, 79, 111, 146))
    run_batch = (call("1", "Bash", {"command": "python3 src/compare_r_final.py"}), result("1", {"output": batch, "exit_code": 0}))
    assert touches(u("compare them"), *run_batch) == []
    few = "Saved: report.md\nSaved: summary.csv"
    run_few = (call("2", "Bash", {"command": "python3 src/report.py"}), result("2", {"output": few, "exit_code": 0}))
    assert touches(u("report"), *run_few) == [("report.md", "created"), ("summary.csv", "created")]


def test_a_mocks_patch_is_no_hermes_edit() -> None:
    """``patch(path, old, new)`` is how a Hermes script edits a file; in a test that imports ``patch`` from
    ``unittest.mock``, ``patch("httpx.Client")`` mocks a name (a blind set listed httpx.Client as an output)."""
    from pipeline.facts.pycode import code_file_ops

    mock = 'from unittest.mock import patch\nwith patch("httpx.Client") as c:\n    run()\n'
    assert code_file_ops(mock) == ()
    hermes = 'from hermes_tools import patch\npatch("src/a.py", "old", "new")\n'
    assert code_file_ops(hermes) == (("src/a.py", "modified", None),)


def test_moving_a_folder_moves_what_the_session_wrote_in_it() -> None:
    """``mv ~/Code/app ~/Code/work/app`` moves the project: the files written in it are outputs at their new place,
    not deleted, and neither folder is listed as a file. A removed folder stays removed."""
    got = _touched(("write_file", {"path": "/home/u/app/src/a.swift", "content": "x"}, '{"success": true}'),
                   ("write_file", {"path": "/home/u/app/README.md", "content": "x"}, '{"success": true}'),
                   ("terminal", {"command": "# move it\nmv /home/u/app /home/u/work/app"}, '{"output": "", "exit_code": 0}'),
                   ("write_file", {"path": "/home/u/old/b.py", "content": "x"}, '{"success": true}'),
                   ("terminal", {"command": "rm -rf /home/u/old && mv notes.txt done.txt"}, '{"output": "", "exit_code": 0}'),
                   cwd="/home/u/p")
    assert got == [("created", "/home/u/work/app/src/a.swift"), ("created", "/home/u/work/app/README.md"),
                   ("deleted", "/home/u/old/b.py"), ("deleted", "/home/u/old"), ("deleted", "notes.txt"),
                   ("moved", "done.txt")]


def test_powershell_file_cmdlets_and_a_folders_contents_moved() -> None:
    """PowerShell's own file cmdlets (Codex and Claude Code on Windows) write, move and remove files as ``mv``/``rm``
    do, with ``\\`` in their paths; ``Move-Item frontend\\* legacy\\`` (``mv src/* old/``) moves what the session wrote in
    the folder. A folder moved with nothing written in it is no file (found on a new Codex session on Windows)."""
    from pipeline.facts.shell import shell_file_ops

    assert shell_file_ops("Move-Item -Path src\\a.ts -Destination lib\\a.ts") == [
        ("src/a.ts", "deleted", None), ("lib/a.ts", "moved", None)]
    assert shell_file_ops("Remove-Item -Recurse -Force dist,tmp.txt") == [("dist", "deleted", None), ("tmp.txt", "deleted", None)]
    assert shell_file_ops("New-Item -ItemType File -Path docs\\notes.md; New-Item -ItemType Directory logs") == [
        ("docs/notes.md", "created", None)]
    assert shell_file_ops("New-Item docs -Name x.md -ItemType File") == [("docs/x.md", "created", None)]
    assert shell_file_ops('"hi" | Out-File -FilePath out.txt -Encoding utf8; Add-Content log.md "x"') == [
        ("out.txt", "created", None), ("log.md", "modified", None)]
    assert shell_file_ops("Set-Content -Path config.json -Value '{}'; Get-Content a.ts") == [("config.json", "created", None)]
    assert shell_file_ops("if [ -f a.txt ]; then mv a.txt b.txt; fi") == [("a.txt", "deleted", None), ("b.txt", "moved", None)]
    # shlex runs "))" together; an export that cut the chain short inside a quote still gives the commands before it
    cut = ('cd "d:\\Code Project\\Wave"; git init; if (-not (Test-Path .gitignore)) { Set-Content -Path .gitignore '
           '-Value "x" -Encoding utf8 }; git commit -m "init"; echo "exit: $LASTEXITCODE')
    assert shell_file_ops(cut) == [(".gitignore", "created", "d:/Code Project/Wave")]
    assert shell_file_ops('cd "d:\\w" && dir /s /b "app\\blog" 2>nul > NUL') == []  # Windows's null device
    # A quote that never closes runs to the end, as it would for the shell: the lines after it are its text (a
    # 'python -c "…' cut short), and "if idx > i: break" in them redirects nothing.
    assert shell_file_ops('echo hi > a.txt\npython -c "\nimport sys\nfor i in range(3):\n    if i > 1: break') == [
        ("a.txt", "created", None)]
    move = ("New-Item -ItemType Directory -Force legacy | Out-Null; "
            "if (Test-Path frontend\\*) { Move-Item -Force frontend\\* legacy\\ }")
    got = _touched(("apply_patch", {"input": "*** Begin Patch\n*** Update File: frontend/main.js\n@@\n-a\n+b\n*** End Patch"},
                    '{"output": "Success.", "exit_code": 0}'),
                   ("shell", {"command": ["pwsh", "-NoProfile", "-Command", move]}, '{"output": "", "exit_code": 0}'),
                   ("shell", {"command": "mv web/app/app/services web/app/services"}, '{"output": "", "exit_code": 0}'),
                   ("shell", {"command": "mv notes/* archive/"}, '{"output": "", "exit_code": 0}'),
                   cwd="/w/mail")
    assert got == [("modified", "legacy/main.js")]


def test_claude_codes_powershell_tool_and_the_folder_its_commands_enter() -> None:
    """Claude Code on Windows runs commands through a tool named ``PowerShell`` (a blind set's session wrote five
    files with ``Out-File`` and none was read). A command's ``Push-Location``/``Set-Location`` (a literal path, or a
    ``$p = "…"`` set before it) is the folder its relative paths are in until ``Pop-Location``; a folder only the
    script knows (``Join-Path $root $f``) names no file, rather than the wrong one."""
    from pipeline.facts.shell import shell_file_ops

    cwd = "C:/Users/ana/.claude"
    command = ('Push-Location "C:\\Users\\ana\\.claude\\itt_work"\n"*.png" | Out-File ".gitignore" -Encoding ascii\n'
               'git add .\nPop-Location\n"done" | Out-File "log.txt"')
    assert _touched(("PowerShell", {"command": command, "description": "first commit"}, "ok"), cwd=cwd) == [
        ("created", "itt_work/.gitignore"), ("created", "log.txt")]
    assert shell_file_ops('$p = "C:\\w\\plm"\nPush-Location $p\n"a" | Out-File ".gitignore"', cwd) == [
        (".gitignore", "created", "C:/w/plm")]
    assert shell_file_ops("Set-Location -Path sub; New-Item -ItemType File a.md", cwd) == [("a.md", "created", f"{cwd}/sub")]
    assert shell_file_ops("pushd web && echo x > a.txt && popd && echo y > b.txt", "/p") == [
        ("a.txt", "created", "/p/web"), ("b.txt", "created", "/p")]
    unknown = ('foreach ($f in $folders) { $p = Join-Path $root $f\n Push-Location $p\n'
               ' "t/" | Out-File ".gitignore"\n Out-File "C:\\w\\all.txt"\n Pop-Location }')
    assert shell_file_ops(unknown, cwd) == [("C:/w/all.txt", "created", None)]


def test_the_home_folder_by_its_variable_is_home() -> None:
    """``rm $HOME/.gitmodules`` deletes a file we can name (a blind set's dotfiles session); other variables name none."""
    from pipeline.facts.shell import shell_file_ops

    assert shell_file_ops("rm $HOME/.gitmodules && echo x > ${HOME}/.zprofile", "/home/d") == [
        ("~/.gitmodules", "deleted", "/home/d"), ("~/.zprofile", "created", "/home/d")]
    assert shell_file_ops("Remove-Item $env:USERPROFILE\\.gitconfig", "C:/w") == [("~/.gitconfig", "deleted", "C:/w")]
    assert shell_file_ops("rm $HOMEDIR/x.txt $APP/y.txt", "/home/d") == []


def test_a_session_without_a_cwd_works_at_its_monorepos_root() -> None:
    """A VS Code export records no cwd: the root is the folder of a root file the tools touched that holds most of the
    paths. A workspace file (``pnpm-workspace.yaml``) marks a monorepo's root above its packages' ``package.json``, so
    outputs keep their package folder (``packages/svelte/package.json``, not ``package.json``)."""
    from pipeline.facts.derive import infer_root

    root = "/Users/e/destyler"
    reads = [f"{root}/packages/svelte/package.json", f"{root}/packages/svelte/src/a.ts", f"{root}/packages/svelte/b.ts",
             f"{root}/document/package.json", f"{root}/document/src/Preview.astro", f"{root}/pnpm-workspace.yaml"]
    msgs = [call(str(i), "read_file", {"path": p}) for i, p in enumerate(reads)]
    assert infer_root(msgs) == root
    assert infer_root(msgs[:-1]) == f"{root}/packages/svelte"  # without the workspace file, the package holding most


def test_a_windows_shell_argv_is_the_command_it_runs() -> None:
    """Codex on Windows runs ``["pwsh.exe", "-NoLogo", "-NoProfile", "-Command", "<command>"]``: the command is the last
    part, as the transcript shows it (joined with shell quotes it is text the session never contains)."""
    from pipeline.facts.shell import command_text

    assert command_text({"command": ["pwsh.exe", "-NoLogo", "-NoProfile", "-Command", "Get-Content a.ts -Tail 20"]}) \
        == "Get-Content a.ts -Tail 20"
    assert command_text({"command": ["C:\\Windows\\System32\\cmd.exe", "/c", "dir /b"]}) == "dir /b"
    assert command_text({"command": ["pwsh", "-File", "build.ps1"]}) == "pwsh -File build.ps1"


def test_a_loop_over_written_out_words_names_its_files() -> None:
    """``for dir in a b c; do echo … > "$dir/.DO_NOT_DELETE.md"; done`` wrote three files a blind set's note missed. A
    loop over written-out words runs its body once per word; a loop over a glob or a variable names no file."""
    loop = ('for dir in /home/ana/runner /home/ana/runner-2; do\n  echo "# keep" > "$dir/.DO_NOT_DELETE.md"\n'
            'done && echo "done"')
    assert shell_file_ops(loop) == [("/home/ana/runner/.DO_NOT_DELETE.md", "created", None),
                                    ("/home/ana/runner-2/.DO_NOT_DELETE.md", "created", None)]
    assert shell_file_ops("for x in a b; do touch ${x}.txt; done; rm c.txt") == [
        ("a.txt", "created", None), ("b.txt", "created", None), ("c.txt", "deleted", None)]
    assert shell_file_ops("for f in *.py; do cp $f bak/; done") == []
    assert shell_file_ops("for f in $FILES; do echo x > $f.log; done") == []


def test_a_variable_set_to_a_written_out_path_names_the_file_it_is_used_for() -> None:
    """``cfg="$HOME/.codex/config.toml"`` on a line of its own, then ``cat >> "$cfg" <<'EOF'`` inside an ``if``: the
    append names the config file (a blind set's note missed it). A variable set from a command's output names none."""
    script = ('set -euo pipefail\ncfg="$HOME/.codex/config.toml"\nif ! rg -n "^\\[features\\]" "$cfg"; then\n'
              "  cat >> \"$cfg\" <<'EOF'\n[features]\nhooks = true\nEOF\nfi")
    assert shell_file_ops(script) == [("~/.codex/config.toml", "created", None)]
    assert shell_file_ops("OUT=build/report.txt; make > ${OUT}") == [("build/report.txt", "created", None)]
    assert shell_file_ops("OUT=$(mktemp); make > $OUT") == []
    assert shell_file_ops("LOG=a.log make > $LOG") == []  # set for one command's environment only


def test_files_a_formatter_rewrote_are_outputs() -> None:
    """``uv run ruff format`` rewrote six test files ("6 files reformatted") that no edit tool named: the CI log the
    session ran before listed them ("Would reformat: test/a.py"). As many files as the check listed: those; black names
    each file it rewrote. A check (``--check``), a failed run, or a count that disagrees names nothing."""
    log = ("[CI/test-1]   | Would reformat: test/test_a.py\n[CI/test-1]   | Would reformat: test/test_b.py\n"
           "[CI/test-1]   | 2 files would be reformatted, 10 files already formatted\nError: Job 'test' failed")
    ci = [call("c1", "Bash", {"command": "act -j test"}), result("c1", log)]
    fmt = [call("c2", "Bash", {"command": "uv run ruff format"}), result("c2", "2 files reformatted, 10 files left unchanged")]
    assert touches(*ci, *fmt) == [("test/test_a.py", "modified"), ("test/test_b.py", "modified")]
    assert touches(*ci, call("c2", "Bash", {"command": "uv run ruff format --check"}),
                   result("c2", "2 files reformatted")) == []
    assert touches(*ci, call("c2", "Bash", {"command": "uv run ruff format"}), result("c2", "3 files reformatted")) == []
    assert touches(*fmt) == []  # nothing says which files
    black = [call("c3", "Bash", {"command": "black src"}),
             result("c3", "reformatted src/app.py\nAll done! ✨ 🍰 ✨\n1 file reformatted, 4 files left unchanged.")]
    assert touches(*black) == [("src/app.py", "modified")]


@pytest.mark.parametrize(("command", "expected"), [
    ("npm install axios", [("package.json", CWD)]),
    ("cd web && npm i -D vitest @testing-library/react", [("package.json", f"{CWD}/web")]),
    ("pnpm add zod", [("package.json", CWD)]), ("yarn add react", [("package.json", CWD)]),
    ("bun add commander", [("package.json", CWD)]), ("npm uninstall left-pad", [("package.json", CWD)]),
    ("uv add httpx", [("pyproject.toml", CWD)]), ("poetry add fastapi", [("pyproject.toml", CWD)]),
    ("cargo add serde", [("Cargo.toml", CWD)]), ("go get github.com/x/y", [("go.mod", CWD)]),
    ("npm install", []), ("npm ci", []), ("npm install -g pnpm", []), ("npm install --prefix api lodash", []),
    ("yarn global add serve", []), ("pip install requests", []), ("npx create-vite app", []),
    ("npm install --registry https://registry.example", []),
])
def test_a_dependency_added_or_removed_changes_the_manifest(command: str, expected: list[tuple[str, str]]) -> None:
    """``npm install axios`` rewrites package.json (``uv add`` pyproject.toml, ``cargo add`` Cargo.toml): a change the
    session made that no edit tool names, which labellers list and notes left out. ``npm install`` alone, a global
    install or one aimed at another folder changes no manifest of the project."""
    from pipeline.facts.shell import manifest_changes

    assert manifest_changes(command, CWD) == expected


def test_a_failed_install_changes_no_manifest() -> None:
    ok = [call("c1", "Bash", {"command": "npm install axios"}), result("c1", "added 9 packages in 2s")]
    assert touches(*ok) == [("package.json", "modified")]
    failed = [call("c1", "terminal", {"command": "npm install axois"}),
              result("c1", {"output": "npm ERR! 404 Not Found - GET https://registry.npmjs.org/axois", "exit_code": 1})]
    assert touches(*failed) == []


def test_diffs_that_open_a_reply_straight_after_one_file_was_read_edit_that_file() -> None:
    """Cursor through SpecStory (v1) renders "Read file: src/Ctl.java", then the edit as bare diffs with no path, as
    the agent worked: a reply that opens on those diffs edits the one file read just before. Two files read in a row
    leave the diff unplaced (either could be the one), as does anything the agent wrote in between."""
    def read(cid: str, path: str, text: str = "") -> tuple[Message, Message]:
        return call(cid, "read_file", {"target_file": path}, text), result(cid, "")

    plan = "Now, let's add the cache field to the controller:"
    hunks = DIFF + "\n\n" + DIFF.replace("new", "newer")
    assert edited(u("cache the fixes"), *read("r1", "src/Ctl.java", plan), a(hunks)) == ["src/Ctl.java"]
    # two reads before the diffs: which one they edit is not said
    assert edited(u("cache the fixes"), *read("r1", "src/Ctl.java", plan), *read("r2", "src/View.java"), a(DIFF)) == []
    # the agent wrote something after the read: the diffs no longer follow it straight
    assert edited(u("x"), *read("r1", "src/Ctl.java", plan), a("Looks fine."), a(hunks)) == []


def test_a_build_log_pasted_part_by_part_does_not_outvote_the_users_own_language() -> None:
    """A blind set's German Codex session: the user pasted Angular's build log, which the harness sent as one message
    per part ("▲WARNING NG8113: …", "src/app/x.ts:9:19:", a code frame, "Warning occurs in the template of component
    X." once per component), and typed German around the rest. Output lines say nothing of the user's language, a
    message votes by the typed lines that frame its paste, and a machine line repeated with other identifiers votes
    once: German, not English."""
    parts = []
    for name in ("CookieConsent", "ScrollTop", "SiteFooter", "SiteHeader", "Kontakt", "Accordion", "Gallery", "Faq"):
        parts += [u(f"▲WARNING NG8103: The `*ngIf` directive was used in the template of {name}Component plugin "
                    "angular-compiler"),
                  u(f"src/app/components/{name.lower()}.component.html:1:21:\n      1 │ <div *ngIf=\"visible()\">\n"
                    "        ╵"),
                  u(f"Warning occurs in the template of component {name}Component.")]
    typed = [u("continue with developing this website. there is a documentation where you find more infos."),
             a("Sure."), u("can I run it now?"), a("Yes: npm start."), *parts,
             u("folgende fehler nach builden: C:\\app>npx ng serve --poll 2000\nApplication bundle generation failed.\n"
               "▲WARNING NG8113: NgIf is not used within the template of SiteFooterComponent plugin angular-compiler\n"
               "▲WARNING NG8113: NgFor is not used within the template of SiteHeaderComponent plugin angular-compiler"),
             u("kannst du das alles bitte machen"), u("glaube es gab ein error also es hat nicht geklappt."),
             u("jetzt sehr viele fehler aber immerhin sieht man etwas"), u("ja mach es bitte mit den bildern"),
             u("ich habe das bild jetzt hinzugefügt, passe den code an."), u("es gibt noch einen fehler mit dem header"),
             u("das ist nicht das, was ich wollte"), u("jo dann bis morgen")]
    assert derive_facts(session(*typed)).language == "de"


def test_a_new_script_shown_with_no_name_is_named_by_the_step_that_runs_it() -> None:
    """Class seen on early Cursor exports (Russian and English, three held-out sets): the agent shows a new file as a
    diff with no path ("Let's create a simple script to convert the icon:"), then runs it ("chmod +x make_icon.sh &&
    ./make_icon.sh"). The script that step runs is that file, when the session had not touched it and its kind
    fits the shebang; a step that runs a file the session already had (read in an earlier turn), or runs nothing, names nothing."""
    new_sh = "```diff\n- \n+ #!/bin/bash\n+ echo converting\n+ sips -s format icns a.png\n```"
    new_py = "```diff\n- \n+ import sys\n+ print(sys.argv)\n```"
    lead = "Let's create a simple script to convert the icon:\n\n"
    assert edited(u("add an icon"), call("c", "run_terminal_cmd", {"command": "chmod +x make_icon.sh && ./make_icon.sh"},
                                         lead + new_sh)) == ["make_icon.sh"]
    # the run as the next step, in a message of its own; then a second script and its run
    assert edited(u("go"), a(lead + new_sh), call("r", "run_terminal_cmd", {"command": "bash make_icon.sh"}),
                  a("And a checker:\n\n" + new_py), call("p", "run_terminal_cmd", {"command": "cd app && python check.py"})) == [
        "make_icon.sh", "check.py"]
    # a shebang of another kind, a script the session already edited, a command that runs no script
    assert edited(u("go"), call("c", "run_terminal_cmd", {"command": "python make_icon.py"}, lead + new_sh)) == []
    assert edited(u("go"), call("r", "read_file", {"path": "old.sh"}), result("r", "echo old"), u("again"),
                  call("c", "run_terminal_cmd", {"command": "./old.sh"}, lead + new_sh)) == []
    assert edited(u("go"), call("c", "run_terminal_cmd", {"command": "npm test"}, lead + new_sh)) == []
    # the user's next message ends the wait: a later run is of some other file
    assert edited(u("go"), a(lead + new_sh), u("now run the tests"),
                  call("r", "run_terminal_cmd", {"command": "./run_tests.sh"})) == []


def test_a_percent_encoded_uri_is_no_path_from_its_middle() -> None:
    """A search result lists "file:///Users/u/AAA%20Backup/app/check.sh": "20Backup/app/check.sh" is no path, so the
    bare "check.sh" the reply edits stays as written (seen on an early Cursor export)."""
    table = "| `file:///Users/u/AAA%20Backup/app/check.sh` | L27 | `if lsof` |"
    assert edited(u("fix the port"), call("g", "grep_search", {"query": "lsof"}), result("g", table),
                  a("I have updated `check.sh` to use port 8091.")) == ["check.sh"]


def test_a_command_the_shell_never_ran_writes_nothing() -> None:
    """A blind set's Persian Cursor session listed IRANSans.zip from three downloads that all failed: Cursor's shell
    wrapper could not parse the first ("(eval):3: parse error near `cursor_snap_ENV_VARS…'"), the second's program was
    not installed ("command not found: wget"), the third could not write. A command the shell never ran writes
    nothing; the wrapper's own noise ("command not found: dump_zsh_state") is no failure of the command."""
    noise = "zsh:1: command not found: dump_zsh_state\n"
    def ran(cid: str, command: str, output: str) -> list[Message]:
        return [call(cid, "run_terminal_cmd", {"command": command}), result(cid, output)]

    parse = ran("1", "cd /p && curl -L -o IRANSans.zip https://x/f.zip", "(eval):3: parse error near `cursor_snap'\n" + noise)
    missing = ran("2", "wget -O IRANSans.zip https://x/f.zip", "(eval):1: command not found: wget\n" + noise)
    windows = ran("3", "wget -O IRANSans.zip https://x/f.zip",
                  "'wget' is not recognized as an internal or external command,\noperable program or batch file.")
    ok = ran("4", "curl -L -o IRANSans.zip https://x/f.zip", "  % Total    % Received\n100  9 100  9\n" + noise)
    assert edited(u("add the font"), *parse, *missing, *windows) == []
    assert edited(u("add the font"), *ok) == ["IRANSans.zip"]


def test_cursors_shell_wrapper_noise_is_no_error() -> None:
    """A blind set's Cursor session on zsh listed "zsh:1: command not found: dump_zsh_state" (printed after every
    command by Cursor's shell-state wrapper) under Errors and fixes; the command's own failure stays."""
    out = "(eval):1: command not found: wget\nzsh:1: command not found: dump_zsh_state\n"
    assert error_lines(out) == ["(eval):1: command not found: wget"]
    assert error_lines("zsh:1: command not found: dump_zsh_state\n") == []


def test_the_tail_of_a_quoted_path_with_a_space_is_no_path() -> None:
    """An early Cursor export's AppleScript ran "bash '/Users/m/AAA Backup/QScreen/launch_app.sh'": the note listed
    the bare "launch_app.sh" the reply updated as "Backup/QScreen/launch_app.sh", the quoted path's tail after its
    space. A path after a closed quote ("cd '/Users/u/My Project' && python src/a.py") is still a path."""
    script = a("```applescript\ndo shell script \"bash '/Users/m/AAA Backup/QScreen/launch_app.sh'\"\n```")
    assert edited(u("fix the launcher"), script, a("I have updated `launch_app.sh` to free the port first.")) == [
        "launch_app.sh"]
    shown = a("Run it with: cd '/Users/u/My Project' && python src/tools/a.py")
    assert edited(u("x"), shown, a("I have updated `a.py`.")) == ["src/tools/a.py"]
