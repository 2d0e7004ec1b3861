"""Deterministic facts about a session: files touched, commands, errors, tools, usage.

``Facts`` is the grounding authority: the LLM summariser may only claim files and commands that
appear here, so every rule below prefers missing a fact to inventing one.

Files come from tool calls, read these ways (and, for one kind of export, from the reply itself):

* **File tools** (Hermes ``write_file``/``patch``/``read_file``, Claude Code ``Write``/``Edit``/
  ``MultiEdit``/``NotebookEdit``/``Read``, editor-style tools): the path argument, overridden by
  the tool *result* when it states ``{"path": ...}`` (ground truth: the tool resolved it); with no
  path argument at all (an export that kept only a Write's content), the file its plain-text result
  names ("File created successfully at: …"). A failed result (``success: false``, an ``error``,
  ``<tool_use_error>``) touched nothing.
* **Patches** (Codex ``apply_patch``, Hermes ``patch`` in V4A mode): ``*** Add/Update/Delete File:``
  and ``*** Move to:`` headers; nothing when Codex says it did not apply the patch.
* **Scripts the session wrote** (a write tool's Python content, read by ``pycode``): the files the
  script writes, once a later command runs it or a later reply states the file (``_Scripts``).
* **Shell commands** (``terminal``, ``Bash``, ``exec_command``, ...): ``mv``/``cp``/``rm``/
  ``touch``/``tee``/``sed -i`` and ``>``/``>>`` targets, parsed by ``pipeline.facts.shell`` (which
  explains what it unwraps and ignores). A leading ``cd`` is followed so relative paths resolve.
  A target the command's own output reports as refused ("operation not permitted: …") is dropped.
* **Patch tools without the patch** (SpecStory's ``apply_patch`` rows): the headers in the block
  body the reader stored as the result, else the ``path`` argument as modified.
* **Edit blocks in the reply** (``prose_edits``), only for exports that show edits no other way
  (SpecStory of Cursor without any edit tool call): ```` ```xml:common/pom.xml ```` fences, and
  ```` ```diff ```` fences whose file the reply names (see ``prose_edits`` for the rules); the
  reply's own past-tense claims and change lists ("- Added a guard in `x.py`"); and a ``git status``
  shown after the first edit, for the entries the session's own words name (the report also lists
  changes made before the session) or all of them when the tree was shown clean first; and the files
  its own ``git add`` names before a commit, when the session opened or named them (``_staged``).

Each path is recorded once, at its first touch; later touches refine the action (read → modified,
created + modified → created, anything + deleted → deleted). Paths under the session cwd become
cwd-relative; ``~`` is expanded with the home directory implied by the cwd (``/home/<user>``).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, TypeGuard

from pipeline.facts.lang import session_language
from pipeline.facts.modules import ModuleLocator
from pipeline.facts.pycode import code_file_ops
from pipeline.facts.shell import (
    UNKNOWN_DIR,
    command_text,
    final_dir,
    forward_slashes,
    home_of,
    is_absolute,
    js_exec_commands,
    manifest_changes,
    normalise_path,
    python_dir,
    python_scripts,
    shell_file_ops,
    staged_files,
)
from pipeline.facts.turns import output_line, split_paste, typed_by_user, user_words
from pipeline.models import Chunk, Facts, FileAction, FileTouch, Message, Session, ToolCall

COMMAND_TOOLS = frozenset({
    "terminal", "bash", "shell", "exec_command", "shell_command", "exec", "run_terminal_cmd",
    "run_terminal_command", "run_terminal_command_v2", "run_in_terminal", "execute_command",
    "local_shell", "run_shell_command", "execute_bash",
    "powershell",  # Claude Code's shell tool on Windows
})
_READ_TOOLS = frozenset({"read_file", "read", "read_file_v2", "view_file"})
_WRITE_TOOLS = frozenset({"write_file", "write", "create_file",
                          "aider_create_file"})  # aider's "Create new file? … y" (pipeline.read.aider)
_EDIT_TOOLS = frozenset({
    "patch", "edit", "str_replace", "multiedit", "notebookedit", "edit_file", "edit_file_v2",
    "search_replace", "replace", "insert",
    "aider_apply_edit",  # aider's "Applied edit to <path>" (pipeline.read.aider)
})
# Tools no list above names (MCP servers, other harnesses): the verb in the name says what a path
# argument means. "mcp__fs__write_file", "replace_string_in_file", "insertEditIntoFile" change it;
# "view", "list", "search" only look. Both need a path argument, so "update_todo_list" touches nothing.
_CHANGE_VERB = re.compile(r"(?:^|[_.\-]|(?<=[a-z]))(?:write|edit|create|patch|replace|insert|append|save|rename"
                          r"|modify|update|apply|delete|remove)(?=[_.\-]|[A-Z]|$)", re.I)
_LOOK_VERB = re.compile(r"(?:^|[_.\-]|(?<=[a-z]))(?:read|view|open|cat|get|list|search|find|grep|glob|stat|show)"
                        r"(?=[_.\-]|[A-Z]|$)", re.I)
_READ_VERB = re.compile(r"(?:^|[_.\-]|(?<=[a-z]))(?:read|view|open|cat)(?=[_.\-]|[A-Z]|$)", re.I)
_EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool"})
#: Patch tools whose patch text may be missing from the arguments: SpecStory exports put the
#: call's input (the ``*** Begin Patch`` text) in the block body, which the reader makes the result.
_PATCH_TOOLS = frozenset({"apply_patch", "applypatch"})
#: Tools that run a Python script (Hermes's ``execute_code``): its writes are read from the code (``pycode``).
_CODE_TOOLS = frozenset({"execute_code"})
_PATH_KEYS = ("path", "file_path", "target_file", "notebook_path", "filename", "file", "filePath", "targetFile",
              # other harnesses' spellings (Windsurf's TargetFile, Cursor's target_notebook, MCP filesystem servers)
              "TargetFile", "target_notebook", "notebookPath", "absolute_path", "AbsolutePath", "relative_path",
              "relativePath", "filepath", "file_name", "fileName",
              "relativeWorkspacePath")  # Cursor's apply_patch, as SpecStory v2.1 exports its Parameters

MAX_COMMAND = 300
MAX_ERROR = 200
MAX_ERRORS = 20

# How Codex reports a patch it did not apply (its context lines were not found, it could not parse it, the user
# stopped it while it waited for approval).
_PATCH_REJECTED = re.compile(r"\s*+(?:apply_patch verification failed|patch rejected|invalid patch|aborted by user)\b",
                             re.I)
_PATCH_HEADER = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.M)


# --------------------------------------------------------------------------- file touches


def _merge(old: FileAction, new: FileAction) -> FileAction:
    """Refine a path's action when it is touched again; see the module docstring."""
    if new == "read":
        return old
    if old == "read":
        return "modified" if new == "created" else new
    if old == "created":
        return "created" if new == "modified" else new
    if old == "deleted":
        return "deleted" if new == "deleted" else "modified"
    if old == "moved":
        return "deleted" if new == "deleted" else "moved"
    return "modified" if new == "created" else new


def _has_extension(path: str) -> bool:
    return bool(posixpath.splitext(posixpath.basename(path.rstrip("/")))[1])


class _Touches:
    """Ordered, deduplicated FileTouch collector."""

    def __init__(self, cwd: str | None) -> None:
        self.cwd = cwd
        self._by_path: dict[str, FileTouch] = {}
        # The folder the last add removed and what it held before: a "moved" right after it is ``mv dir dest``.
        self._removed: tuple[str, dict[str, FileTouch]] | None = None

    def add(self, path: str | None, action: FileAction, tool: str | None, base: str | None = None,
            literal: bool = False) -> None:
        norm = normalise_path(path, self.cwd, base, literal=literal) if path else None
        if not norm:
            return
        removed, self._removed = self._removed, None
        if action == "moved" and removed is not None and not removed[1]:
            # ``mv src/app/app/services src/app/services``: a folder the session wrote nothing in (no extension on
            # either side, never touched as a file) moves no file of the session's work.
            if not _has_extension(removed[0]) and not _has_extension(norm):
                self._by_path.pop(removed[0], None)  # nor was anything deleted: it is at its new place
                return
            removed = None
        if action == "moved" and removed is not None:
            # ``mv ~/Code/app ~/Code/work/app`` moves a folder: what the session wrote in it lives on at the new
            # place (neither deleted nor listed twice), and the folder itself is no file.
            folder, held = removed
            self._by_path.pop(folder, None)
            for under, touch in held.items():
                self._by_path.pop(under, None)
                moved_to = norm.rstrip("/") + under[len(folder.rstrip("/")):]
                self._by_path[moved_to] = touch.model_copy(update={"path": moved_to})
            return
        if action == "deleted":
            # ``rm -rf src/app/bazi`` also removes the page written there earlier.
            held = {}
            for under, touch in list(self._by_path.items()):
                if under.startswith(norm.rstrip("/") + "/") and touch.action != "read":
                    held[under] = touch
                    self._by_path[under] = FileTouch(path=under, action=_merge(touch.action, "deleted"), tool=tool)
            # remembered even when it held nothing: a "moved" right after it says whether it was a folder
            self._removed = (norm, held) if held or norm not in self._by_path else None
        old = self._by_path.get(norm)
        if old is None:
            self._by_path[norm] = FileTouch(path=norm, action=action, tool=tool)
        elif (merged := _merge(old.action, action)) != old.action:
            self._by_path[norm] = FileTouch(path=norm, action=merged, tool=tool)

    def result(self) -> list[FileTouch]:
        return list(self._by_path.values())



# --------------------------------------------------------------------------- tool results


def parse_result(message: Message | None) -> dict[str, Any] | None:
    """A tool result's JSON object, or None when it is plain text. Callers must not mutate it."""
    text = message.content if message else ""
    if not text.lstrip().startswith("{"):
        return None
    return _parse_object(text)


@lru_cache(maxsize=256)
def _parse_object(text: str) -> dict[str, Any] | None:
    # Cached: each result is asked about several times (failed? errors? which file?) per session.
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


# Claude Code and Codex's shell tool say "Exit code: 1"; Codex's exec_command "Process exited with code 1".
_EXIT_LINE = re.compile(r"^(?:Exit code:?|Process exited with code) (-?\d+)", re.M)


def _exit_code(result: dict[str, Any] | None, text: str) -> int | None:
    if result is not None:
        meta = result.get("metadata")
        code = result.get("exit_code", meta.get("exit_code") if isinstance(meta, dict) else None)
        if isinstance(code, int):
            return code
    if "xit code" not in text and "xited with code" not in text:
        return None
    m = _EXIT_LINE.search(text)  # Codex and Claude Code plain-text results
    return int(m.group(1)) if m else None


#: Commands whose exit status 1 says "nothing matched" or "they differ", not that they failed.
_FOUND_NOTHING = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "findstr", "select-string", "sls", "diff",
                            "cmp", "test", "["})


def found_nothing(command: str | None, message: Message | None) -> bool:
    """The command's last step is a search or a comparison (``rg -n logout src``, ``git grep``, ``Select-String``,
    ``diff``) that exited 1: it found no match, which is an answer, not a failure of the command."""
    if not command or message is None or _exit_code(parse_result(message), message.content) != 1:
        return False
    unquoted = re.sub(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"", "''", command)  # rg -n "a|b" src: the | is the pattern's
    last = re.split(r"\|\||&&|[|;\n]", unquoted)[-1].split()
    if not last:
        return False
    word = posixpath.basename(last[0]).lower()
    if word == "git" and len(last) > 1:
        word = last[1].lower()
    return word in _FOUND_NOTHING


# Claude Code's answer when the user turns a tool use down ("the new_string was NOT written to the file").
_REJECTED_USE = "The user doesn't want to proceed with this tool use."


def user_rejected(message: Message | None) -> bool:
    return message is not None and message.content.lstrip().startswith(_REJECTED_USE)


def result_failed(message: Message | None) -> bool:
    """Whether a tool result reports failure (error field, success false, non-zero exit)."""
    if message is None:
        return False
    result = parse_result(message)
    code = _exit_code(result, message.content)
    if code not in (None, 0):
        return True
    if result is not None:
        return result.get("success") is False or bool(result.get("error"))
    return "<tool_use_error>" in message.content or message.content.lstrip().startswith("Error:")


_EXC_LINE = re.compile(r"^(?:E\s+)?((?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception|Interrupt|Exit)\b(?::.*)?)$")
_FAIL_LINE = re.compile(r"^(FAILED \S.*|ERROR \S+::.*)$")
_OTHER_LINE = re.compile(
    r"(^(?:error|fatal|panic)(?:\[\w+\])?:|^Error:|npm ERR!|command not found|No such file or directory"
    r"|Permission denied|Segmentation fault|错误|^Traceback \(most recent call last\))", re.I,
)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# Cursor runs each command through a shell wrapper that snapshots the shell's state; where its helpers are missing it
# prints "zsh:1: command not found: dump_zsh_state" after every command: the harness's noise, no error of the command.
_WRAPPER_NOISE = re.compile(r"command not found: (?:dump_(?:zsh|bash)_state|cursor_snap_\w+)\s*$")


def error_lines(text: str, limit: int = 3) -> list[str]:
    """The most informative error lines in ``text``: exception lines, then test failures, then others."""
    ranked: list[tuple[int, int, str]] = []
    for n, raw in enumerate(text.splitlines()):
        line = raw.strip()
        if "command not found" in line and _WRAPPER_NOISE.search(line):
            continue
        if m := _EXC_LINE.match(line):
            ranked.append((0, n, m.group(1)))
        elif _FAIL_LINE.match(line):
            ranked.append((1, n, line))
        elif _OTHER_LINE.search(line) and not line.startswith("Traceback"):
            ranked.append((2, n, line))
    seen: dict[str, None] = {}
    for _rank, _n, line in sorted(ranked):
        seen.setdefault(_clip(line, MAX_ERROR), None)
    return list(seen)[:limit]


def result_errors(message: Message, tool_name: str | None = None, command: str | None = None) -> list[str]:
    """Error lines from one tool result. File contents (reads, searches) are never scanned, nor is a search that
    found nothing (``found_nothing``)."""
    if found_nothing(command, message):
        return []
    result = parse_result(message)
    text = message.content
    failed = result_failed(message)
    name = (tool_name or message.tool_name or "").lower()
    if result is not None:
        error = result.get("error")
        text = "\n".join(str(v) for v in (result.get("output"), result.get("stderr"), error) if v)
    if not failed and (name not in COMMAND_TOOLS or _exit_code(result, message.content) == 0):
        return []
    lines = error_lines(text)
    if lines or not failed:
        return lines
    if result is not None and isinstance(result.get("error"), str) and result["error"].strip():
        return [_clip(result["error"], MAX_ERROR)]
    # No line reads as an error: the last line that says something, one naming the error first. A fence's closing
    # marks, a closing bracket or tag ("```", "]</tool_use_error>") say nothing and were shown as the session's error.
    tail = [said for ln in text.splitlines() if (said := _MARKUP_TAG.sub("", ln).strip()) and _SAYS.search(said)
            and not said.startswith(("```", "~~~"))]
    named = [ln for ln in tail if _ERROR_WORD.search(ln)]
    return [_clip((named or tail)[-1], MAX_ERROR)] if tail else [f"exit code {_exit_code(result, message.content)}"]


_MARKUP_TAG = re.compile(r"</?[A-Za-z][\w-]*>")
_SAYS = re.compile(r"[^\W_]")
_ERROR_WORD = re.compile(r"error|exception|fail", re.I)


# --------------------------------------------------------------------------- per-call extraction


def _unescaped(text: str) -> str:
    """A patch held in a string literal (Codex's ``exec`` tool runs ``const patch = "*** Begin Patch\\n..."``)
    has its newlines escaped; the headers are only found once they are real newlines again."""
    return text.replace("\\r\\n", "\n").replace("\\n", "\n") if "\\n*** " in text else text


def _patch_ops(patch: str) -> list[tuple[str, FileAction]]:
    ops: list[tuple[str, FileAction]] = []
    last_update: str | None = None
    for m in _PATCH_HEADER.finditer(_unescaped(patch)):
        verb, path, moved_to = m.groups()
        if moved_to:  # ``*** Move to:`` renames the file named by the preceding Update header
            if last_update:
                ops.append((last_update, "deleted"))
            ops.append((moved_to, "moved"))
        else:
            ops.append((path, {"Add": "created", "Update": "modified", "Delete": "deleted"}[verb]))
            last_update = path if verb == "Update" else None
    return ops


# The shell names a file it would not write (a sandbox, a read-only mount): that write touched nothing.
_REFUSED = re.compile(r"permission denied|operation not permitted|read-only file system|cannot create", re.I)


# The shell never ran the command: the harness's wrapper could not parse it (Cursor's "(eval):3: parse error near
# `cursor_snap_ENV_VARS…'"), or its program is not installed ("command not found: wget", "'wget' is not recognized").
_NEVER_RAN = re.compile(r"^\(eval\):\d+: parse error\b|command not found: ([\w.+-]+)|^(?:\S+: )?(?:line \d+: )?([\w.+-]+):"
                        r" command not found|'([\w.+-]+)' is not recognized as an internal or external command"
                        r"|The term '([\w.+-]+)' is not recognized", re.M)


def _never_ran(command: str, output: str) -> bool:
    """The output says the shell never ran ``command``'s first program (``_NEVER_RAN``); its writes did not happen."""
    if "parse error" not in output and "not found" not in output and "not recognized" not in output:
        return False  # the literal every pattern of ``_NEVER_RAN`` needs: most outputs skip the scan
    first = re.split(r"\s*(?:&&|\|\||;|\|)\s*", command.strip(), maxsplit=1)[0].split()
    program = first[0].rsplit("/", 1)[-1] if first else ""
    for m in _NEVER_RAN.finditer(output):
        missing = next((g for g in m.groups() if g), None)
        if missing is None or missing == program:
            return True
    return False


def _refused(path: str, output: str) -> bool:
    tail = "/".join(path.rstrip("/").split("/")[-2:])  # "~/.x/t.jsonl" is reported as "/Users/u/.x/t.jsonl"
    return bool(tail) and any(tail in line and _REFUSED.search(line) for line in output.splitlines())


# An export that keeps no arguments for a terminal call (SpecStory v1.5's "Tool use: **run_terminal_cmd**"
# line) shows the command as the first shell fence of the result, the output in the fence after it.
_RESULT_COMMAND = re.compile(r"\A\s*```(?:bash|sh|shell|zsh|powershell|pwsh|cmd)[ \t]*\n(.*?)\n```", re.S)


def call_command(args: dict[str, Any] | str, result: Message | None) -> str | None:
    """The command a command-tool call ran: its arguments, else the shell fence its result opens with."""
    cmd = command_text(args)
    if cmd or result is None or (isinstance(args, dict) and args.get("command", args.get("cmd"))):
        return cmd
    m = _RESULT_COMMAND.match(result.content)
    return (m.group(1).strip() or None) if m else None


_SHOWN_INPUT = re.compile(r"\AInput(?: \(truncated\))?:\s*```")


def _has_patch(text: object) -> TypeGuard[str]:
    return isinstance(text, str) and "*** " in text and bool(_PATCH_HEADER.search(_unescaped(text)))


def arg_strings(value: object) -> list[str]:
    """Every string inside a tool's arguments (argv lists and nested objects included)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in arg_strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in arg_strings(v)]
    return []


def _arg_path(args: dict[str, Any]) -> str | None:
    return next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str) and args[k]), None)


def _listed_paths(args: dict[str, Any]) -> list[str]:
    """The files of a tool that edits several in one call, each item of a list argument naming its own
    (VS Code Copilot's ``multi_replace_string_in_file``: ``replacements: [{filePath, oldString, newString}]``)."""
    return [p for v in args.values() if isinstance(v, list)
            for item in v if isinstance(item, dict) and (p := _arg_path(item))]


def _call_touches(name: str, args: dict[str, Any] | str, result_msg: Message | None, out: _Touches | _Recorder) -> None:
    lname = name.lower()
    failed = result_failed(result_msg)
    if (failed and lname not in COMMAND_TOOLS) or user_rejected(result_msg):
        return  # a failed write or edit changed nothing, nor did one the user turned down
    result = parse_result(result_msg)
    if lname in _SUBAGENT_TOOLS:
        # The subagent's own edits are in its own transcript; the parent keeps only its report.
        for path, action in subagent_files(result_msg.content if result_msg else "", result):
            out.add(path, action, name)
        return
    if lname in _PATCH_TOOLS and result_msg is not None and _PATCH_REJECTED.match(result_msg.content):
        return  # Codex says so in plain text, no exit code: nothing of the patch was applied
    patch = args if isinstance(args, str) else args.get("patch") or args.get("input")
    if not _has_patch(patch) and result_msg is not None and (
            lname in _PATCH_TOOLS or (_SHOWN_INPUT.match(result_msg.content) and _has_patch(result_msg.content))):
        # SpecStory shows a tool it does not know by its input alone ("Input (truncated): ```const patch = "*** Begin
        # Patch\n*** Update File: …"`, Codex's code-mode exec): a patch there is the call's own.
        patch = result_msg.content
    if not _has_patch(patch) and not isinstance(args, str):
        # apply_patch run through a shell tool: ``["apply_patch", "*** Begin Patch…"]``, ``apply_patch <<'EOF'``,
        # ``bash -lc "apply_patch <<…"`` or a script's ``const patch = "…"``: the patch is one of the strings.
        patch = next((v for v in arg_strings(args) if _has_patch(v)), patch)
    if _has_patch(patch):
        if failed or (result_msg is not None and _PATCH_REJECTED.match(result_msg.content)):
            return  # the patch did not apply (through a shell too: "apply_patch verification failed", no exit code)

        for path, action in _patch_ops(patch):
            out.add(path, action, name, None, True)  # a header is the file's name as written, no shell
        return
    if lname in _PATCH_TOOLS and result_msg is not None and (applied := _applied_list(result_msg.content)):
        # An export that kept a patch's result, not its input (SpecStory of Codex CLI: "Success. Updated the following
        # files:\nM app/src/a.kt"): the list Codex prints names each file and what the patch did to it.
        for path, action in applied:
            out.add(path, action, name, None, True)
        return
    if lname in _CODE_TOOLS and isinstance(args, dict) and isinstance(code := args.get("code"), str):
        for path, action, op_base in code_file_ops(code):
            out.add(path, action, name, op_base)
        if not failed:
            for path in saved_files(result_msg):
                out.add(path, "created", name)
        return
    if lname in COMMAND_TOOLS:
        cmd = call_command(args, result_msg)
        workdir = args.get("workdir") if isinstance(args, dict) else None
        if workdir is None and isinstance(args, dict) and isinstance(code := args.get("input"), str):
            workdir = next((w for _cmd, w in js_exec_commands(code) if w), None)  # Codex's code mode
        base = workdir if isinstance(workdir, str) else None
        said = result_msg.content if result_msg else ""
        for path, action, op_base in () if _never_ran(cmd or "", said) else shell_file_ops(cmd or "", base):
            if not _refused(path, said):
                out.add(path, action, name, op_base)
        if not failed:
            for path, op_base in manifest_changes(cmd or "", base):
                out.add(path, "modified", name, op_base)
        scripts = python_scripts(cmd or "")
        script_dir = python_dir(cmd or "", base) if scripts else base
        for script in scripts:
            if not failed:
                for path, action, op_base in code_file_ops(script):
                    if script_dir != UNKNOWN_DIR:
                        out.add(path, action, name, op_base or script_dir)
                    elif op_base or is_absolute(path):
                        out.add(path, action, name, op_base)
        if not failed and not _REMOTE.match(cmd or ""):
            ran_in = final_dir(cmd or "", base) if result_msg is not None and _SAVED_NEEDS.search(said) else base
            for path in saved_files(result_msg):
                out.add(path, "created", name, ran_in)
        return
    if isinstance(args, str):
        return
    stated = result.get("path") if result else None
    path = stated if isinstance(stated, str) and stated else _arg_path(args)
    if path is None and result_msg is not None and lname in _CHANGE_TOOLS:
        path = _result_path(result_msg.content)
    more = _listed_paths(args)
    path = path or (more[0] if more else None)
    action: FileAction | None = None
    if lname in _EDITOR_TOOLS:
        action = {"create": "created", "view": "read"}.get(str(args.get("command")), "modified")
    elif lname in _READ_TOOLS or (_READ_VERB.search(name) and _arg_path(args)):  # its own argument, not a result's
        action = "read"
    elif lname in _WRITE_TOOLS:
        text = result_msg.content if result_msg else ""
        # Claude Code's Write says which it did; otherwise "created" and _merge downgrades a rewrite.
        action = "modified" if "has been updated" in text else "created"
    elif lname in _EDIT_TOOLS or lname in _PATCH_TOOLS:
        action = "modified"
    elif path and not _LOOK_VERB.search(name):
        words = name.split("__")[-1]  # MCP tools are "mcp__<server>__<tool>"
        action = ("deleted" if re.search(r"delete|remove", words, re.I) else
                  "created" if re.search(r"create|write|save", words, re.I) else "modified") \
            if _CHANGE_VERB.search(words) else None
    if action:
        for each in dict.fromkeys([path, *more]):
            out.add(each, action, name, None, True)  # the tool's own argument: a "$" in it is part of the name


# A script the agent ran says what it saved, on a line of its own: "Saved: /u/out/report.docx", "Wrote 3 rows to
# data.csv", "文档已保存: /u/报告.docx". Where the script builds the path at run time (a loop, a timestamp), that
# line is the only place the file is named. Only a path with an extension counts (never "Saved 3 items").
# "Created X" is left out: scaffolders list what they made relative to a folder they name elsewhere.
_SAVED_EN = r"(?:[A-Za-z]+ ){0,3}?(?:saved|written|wrote|exported)(?: (?!to\b|at\b|as\b|in\b|into\b)\w+){0,3}?(?: (?:to|at|as|in|into))?"
_SAVED_ZH = r"(?:文档|文件|报告|结果|输出)?已?(?:保存|导出|写入)(?:报告|文档|文件)?(?:到|至|为|在)?(?:文件)?"
_SAVED = re.compile(
    # (a blank or a colon after an English verb: "SavedMessages.tsx" in a file listing saves nothing)
    rf"^\W{{0,3}}(?:{_SAVED_EN}(?:\s*[:：]\s*|\s+)|{_SAVED_ZH}\s*[:：]?\s*)[`'\"]?"
    r"((?:[~/.]|[A-Za-z]:[\\/]|[\w.-]+/)?[^\s`'\":：]*[^\s`'\"/:：]\.[A-Za-z0-9]{1,8})[`'\"]?"
    r"\s*(?:\([^)]*\))?\s*$", re.I | re.M)
_SAVED_NEEDS = re.compile(r"sav|writ|wrote|export|保存|导出|写入", re.I)
# A command run on another machine saves its files there: ``ssh host "certbot …"`` ("Certificate is saved at: …").
_REMOTE = re.compile(r"^\s*(?:sudo\s+)?(?:ssh|docker (?:exec|run)|kubectl exec|gcloud compute ssh)\b")


def saved_files(result: Message | None) -> list[str]:
    """The files a successful run's output says it saved (``_SAVED``)."""
    if result is None:
        return []
    parsed = parse_result(result)
    text = parsed.get("output") if parsed is not None else result.content
    if not isinstance(text, str):
        return []
    found = [m.group(1) for m in _SAVED.finditer(text)] if _SAVED_NEEDS.search(text) else []
    if "file: " in text:
        # A script's progress line, then its word that the step is done (spec-kit's agent-context script: "INFO:
        # Updating Codex CLI context file: /w/app/AGENTS.md" … "✓ Updated existing Codex CLI context file").
        found += [m.group(1) for m in _ANNOUNCED.finditer(text) if _STEP_DONE.search(text, m.end())]
    # "Created 2 files in 0.3s": a name needs a letter before its extension
    named = list(dict.fromkeys(p for p in found if _LETTER_IN_NAME.search(posixpath.basename(p).rsplit(".", 1)[0])))
    # A run that saves a batch ("Saved: 1_R_compare.png", "Saved: 22_R_compare.png", … fifteen figures of one
    # experiment) made data, not the session's work product: it would bury the files the session wrote.
    return named if len(named) <= MAX_SAVED_PER_RUN else []


#: More files than this saved by one run are a batch of generated data (``saved_files``).
MAX_SAVED_PER_RUN = 4


_ANNOUNCED = re.compile(r"^(?:INFO:\s*)?(?:Updating|Creating|Writing) (?:[\w-]+ ){0,5}?file: ((?:[~/]|[A-Za-z]:[\\/])[^\s`'\"]*"
                        r"\.[A-Za-z0-9]{1,8})\s*$", re.M)
_STEP_DONE = re.compile(r"^\W{0,3}(?:Updated|Created|Wrote)\b", re.M)


_LETTER_IN_NAME = re.compile(r"[^\W\d]")


# What Claude Code's Write and Edit say they did, naming the file: an export that drops the call's
# arguments (SpecStory renders a Write as its content alone) keeps this line, the tool's own word.
_RESULT_PATH = re.compile(r"^(?:File created successfully at: ([^\n]*)|The file ([^\n]+?) has been (?:updated|created|written)\b)",
                          re.M)


_APPLIED_HEAD = "Updated the following files:"
_APPLIED_LINE = re.compile(r"^\s*([AMD])\s+(\S.*?)\s*$")
_APPLIED_ACTIONS: dict[str, FileAction] = {"A": "created", "M": "modified", "D": "deleted"}


def _applied_list(text: str) -> list[tuple[str, FileAction]]:
    """The files Codex's apply_patch says it changed ("Success. Updated the following files:" then "A/M/D path" lines)."""
    at = text.find(_APPLIED_HEAD)
    if at < 0:
        return []
    found: list[tuple[str, FileAction]] = []
    for line in text[at + len(_APPLIED_HEAD):].split("\n")[1:]:  # the lines after the heading's own
        if not (m := _APPLIED_LINE.match(line)):
            if line.strip():
                break
            continue
        found.append((m.group(2).strip("`"), _APPLIED_ACTIONS[m.group(1)]))
    return found


def _result_path(text: str) -> str | None:
    """The file a write or edit tool's plain-text result names (its last such line: an export puts the
    result after the content it wrote), else None."""
    if "File created successfully at: " not in text and "The file " not in text:
        return None
    found = [m.group(2) or m.group(1).split(" (file state")[0] for m in _RESULT_PATH.finditer(text)]
    found = [f.strip() for f in found if f.strip()]
    return found[-1] if found else None


#: What ``_call_touches`` adds for one call: ``(path, action, tool, base, literal)`` each.
_Op = tuple[str | None, FileAction, str | None, str | None, bool]


class _Recorder:
    """Collects a ``_call_touches`` pass's ``add`` calls, to replay them into any ``_Touches``."""

    def __init__(self) -> None:
        self.ops: list[_Op] = []

    def add(self, path: str | None, action: FileAction, tool: str | None, base: str | None = None,
            literal: bool = False) -> None:
        self.ops.append((path, action, tool, base, literal))


#: (id(call), id(result)) → (call, result, ops). The summariser asks for the file touches of each phase
#: after the facts asked for the session's, so every call was parsed (shell words, patches, JSON
#: results) twice. The entry holds the objects it is keyed by, so an id cannot be reused while it is
#: here and a hit is checked by identity; the table is emptied when full (memory stays flat).
_CALL_OPS: dict[tuple[int, int], tuple[object, object, tuple[_Op, ...]]] = {}
_CALL_OPS_MAX = 1024


def _call_ops(call: ToolCall, result_msg: Message | None) -> tuple[_Op, ...]:
    key = (id(call), id(result_msg))
    hit = _CALL_OPS.get(key)
    if hit is not None and hit[0] is call and hit[1] is result_msg:
        return hit[2]
    recorder = _Recorder()
    _call_touches(call.name, call.arguments, result_msg, recorder)
    ops = tuple(recorder.ops)
    if len(_CALL_OPS) >= _CALL_OPS_MAX:
        _CALL_OPS.clear()
    _CALL_OPS[key] = (call, result_msg, ops)
    return ops


def changed_names(messages: Sequence[Message]) -> set[str]:
    """Base names of the files the tool calls in ``messages`` write, edit, move or delete: what a stretch of
    work was about, read from each call's cached effects (``_call_ops``) without the session-level passes of
    ``file_touches`` (prose edit blocks, work-tree reports, scripts run later), which a topic does not need."""
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    return {posixpath.basename(forward_slashes(path).rstrip("/"))
            for m in messages if m.role == "assistant"
            for call in m.tool_calls
            for path, action, _tool, _base, _literal in _call_ops(call, results.get(call.id) if call.id else None)
            if path and action != "read"}


def file_touches(messages: Sequence[Message], cwd: str | None = None, *, source: str | None = None) -> list[FileTouch]:
    """Files touched by the tool calls in ``messages``, in first-touch order, one entry per path.

    With a ``source`` in ``_PROSE_EDIT_SOURCES`` and no file-changing tool call at all, the edit
    blocks in assistant replies count too (``prose_edits``): such an export shows edits no other way.
    Both are read in message order, so a file edited and then moved (``mv``) ends at its new path.
    """
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    out = _Touches(cwd)
    prose = source in _PROSE_EDIT_SOURCES and not any(
        c.name.lower() in _CHANGE_TOOLS for m in messages for c in m.tool_calls)
    edits = _ProseEdits(_locator(messages, cwd)) if prose else None
    work = _work_words(messages) if prose else ""
    said = "\n".join(m.content for m in messages if m.role == "assistant") if prose else ""
    # the last message whose command commits: what the session staged before it is what it delivered
    committed = max((i for i, m in enumerate(messages) if prose and m.role == "assistant" and any(
        "git commit" in (command_text(c.arguments) or "") for c in m.tool_calls)), default=-1)
    clean = False  # the work tree was shown clean before the session changed anything
    skill_dirs: dict[str, str] = {}
    scripts = _Scripts()
    unformatted: list[str] = []  # what the last formatter check said it would reformat
    for at, m in enumerate(messages):
        if m.role in ("tool", "user") and "ould reformat" in m.content:
            unformatted = list(dict.fromkeys(_WOULD_REFORMAT.findall(m.content))) or unformatted
        if m.role == "assistant" and scripts.pending:
            for op in scripts.named_in(m.content):
                out.add(*op)
        if edits is not None:
            for path in edits.feed(m, [t.path for t in out.result()]):
                out.add(path, "modified", "edit_block")
            if m.role == "assistant" and _MOVE_WORD.search(m.content):
                for path, action in _claimed_moves(m.content, [t.path for t in out.result()]):
                    out.add(path, action, "claim")
            clean = clean or (not out.result() and m.role in ("user", "tool") and bool(_CLEAN_TREE.search(m.content)))
            # The work tree's own report of what changed, once the session has changed something. It lists every
            # change since the last commit, the ones made before the session too: an entry counts when the tree
            # was clean before the session's first change, or when the session's own work names that file.
            if out.result() and m.role in ("user", "tool"):
                for path, action in worktree_report(m.content):
                    if clean or _names(work, path) or _names_by_stem(work, path):
                        out.add(path, action, "git_status")
        if m.role == "tool" and " delete mode " in m.content:
            # The session's own commit says it deleted a file the session wrote ("delete mode 100644 vercel.json"):
            # however the deletion was made (a tool no rule reads, an edit the export hides), the file is gone.
            written = {t.path for t in out.result() if t.action != "read"}
            for path in _COMMIT_DELETED.findall(m.content):
                if normalise_path(path, out.cwd) in written:
                    out.add(path, "deleted", "git_commit")
        for call in m.tool_calls if m.role == "assistant" else ():
            result = results.get(call.id) if call.id else None
            # Only a result that names a skill folder is parsed here: the rest is parsed once, in _call_ops.
            if (result is not None and "skill_dir" in result.content and (stated := parse_result(result))
                    and isinstance(stated.get("skill_dir"), str) and stated.get("name")):
                skill_dirs[str(stated["name"])] = stated["skill_dir"]
            if call.name.lower() == "skill_manage":
                # Depends on the skill folders seen so far in the session: not replayed from the cache.
                _skill_touch(call.arguments, result, skill_dirs, out)
            else:
                ops = _call_ops(call, result)
                for op in ops:
                    out.add(*op)
                if not ops and (shown := _unnamed_write(call, result, out, messages, at)):
                    out.add(shown, "modified", call.name)
                for op in scripts.follow(call, result):
                    out.add(*op)
                for path in _reformatted(call, result, unformatted):
                    out.add(path, "modified", call.name)
                if edits is not None and at <= committed:
                    for path, base in _staged(call, result, out, said):
                        out.add(path, "modified", "git_add", base)
    if edits is None:
        touches = out.result()
        if any("/" not in t.path and (t.tool or "").lower() in _SUBAGENT_TOOLS for t in touches):
            # A subagent's bare "TextTypeCard.tsx" is the one path the session touched that ends with it.
            touches = _resolve_bare_names(touches, [t.path for t in touches])
        return _at_home(touches)
    # The locator already holds every path the session shows: the same set names the bare ones.
    return _at_home(_resolve_bare_names(out.result(), edits.locator.shown))


#: A formatter's check naming a file it would rewrite (ruff: "Would reformat: test/a.py"; black: "would reformat
#: /p/a.py"), in its own output or in a CI log the session ran (``act``) or the user pasted.
_WOULD_REFORMAT = re.compile(r"\b[Ww]ould reformat:?[ \t]+(\S+)")
#: A formatter run that rewrites (not ``--check``/``--diff``), and what it says it rewrote: "6 files reformatted" (ruff,
#: black), "reformatted /p/a.py" (black, a line per file).
_FORMAT_RUN = re.compile(r"\b(?:ruff\s+format|black)\b(?![^\n;&|]*--(?:check|diff)\b)")
_REFORMATTED_COUNT = re.compile(r"\b(\d+) files? reformatted\b")
_REFORMATTED_FILE = re.compile(r"^reformatted[ \t]+(\S[^\n]*?)\s*$", re.M)


def _reformatted(call: ToolCall, result: Message | None, unformatted: Sequence[str]) -> list[str]:
    """The files a formatter run rewrote (``uv run ruff format``: "6 files reformatted"): the ones it names, else the
    ones the last check said it would reformat, when there are as many as it says it rewrote. A change the session made
    as surely as an edit, though no edit tool names the files."""
    if result is None or call.name.lower() not in COMMAND_TOOLS or result_failed(result):
        return []
    command = call_command(call.arguments, result)
    if not command or not _FORMAT_RUN.search(command) or not (said := _REFORMATTED_COUNT.search(result.content)):
        return []
    named = _REFORMATTED_FILE.findall(result.content)
    if named:
        return named
    return list(unformatted) if len(unformatted) == int(said.group(1)) else []


#: A line ``git commit`` prints for a file the commit deleted.
_COMMIT_DELETED = re.compile(r"^ delete mode \d{6} (\S[^\n]*?)\s*$", re.M)


def _staged(call: ToolCall, result: Message | None, out: _Touches, said: str) -> list[tuple[str, str | None]]:
    """Files the session's own ``git add a.tsx b.tsx`` stages, in an export that shows no edit (Cursor through
    SpecStory): the agent stages what it changed, and a commit at or after it says the work is delivered. The export
    also hides edits made before the session, and a user may ask to commit those, so a staged file counts only when
    the session opened it first or the assistant's own words name it; a failed add stages nothing."""
    if call.name.lower() not in COMMAND_TOOLS or result_failed(result):
        return []
    command = call_command(call.arguments, result)
    if not command:
        return []
    seen = {t.path for t in out.result()}
    return [(path, base) for path, base in staged_files(command, out.cwd)
            if (normalise_path(path, out.cwd, base) in seen or _names(said, path))
            and not (result and f"pathspec '{path}' did not match" in result.content)]


def _at_home(touches: list[FileTouch]) -> list[FileTouch]:
    """``~/p/a.ts`` and ``/Users/u/p/a.ts`` are one file when the session's absolute paths show one home.

    A session with no cwd (a Hermes request dump, a trajectory) cannot resolve ``~`` when it is touched, and
    agents write the same file both ways; listed twice, the note names one output as two. With two homes (or
    none) in sight, ``~`` stays as written."""
    if not any(t.path.startswith("~/") for t in touches):
        return touches
    homes = {h for t in touches if (h := home_of(t.path))}
    if len(homes) != 1:
        return touches
    home = homes.pop()
    merged: dict[str, FileTouch] = {}
    for t in touches:
        path = home + t.path[1:] if t.path.startswith("~/") else t.path
        old = merged.get(path)
        merged[path] = t.model_copy(update={"path": path}) if old is None else \
            old.model_copy(update={"action": _merge(old.action, t.action)})
    return list(merged.values())


#: A fence's language → the extensions of the files it can be (VS Code's language ids included).
_FENCE_EXTS: dict[str, tuple[str, ...]] = {
    "yaml": ("yml", "yaml"), "yml": ("yml", "yaml"), "shellscript": ("sh", "bash"), "bash": ("sh", "bash"),
    "sh": ("sh",), "shell": ("sh",), "zsh": ("zsh", "sh"), "python": ("py",), "py": ("py",),
    "typescript": ("ts", "tsx"), "ts": ("ts",), "typescriptreact": ("tsx",), "tsx": ("tsx",),
    "javascript": ("js", "mjs", "cjs", "jsx"), "js": ("js", "mjs", "cjs"), "javascriptreact": ("jsx",), "jsx": ("jsx",),
    "json": ("json",), "jsonc": ("json", "jsonc"), "markdown": ("md",), "md": ("md",), "html": ("html", "htm"),
    "css": ("css",), "scss": ("scss",), "vue": ("vue",), "java": ("java",), "kotlin": ("kt", "kts"), "go": ("go",),
    "rust": ("rs",), "toml": ("toml",), "xml": ("xml",), "sql": ("sql",), "csharp": ("cs",), "ruby": ("rb",),
    "php": ("php",), "c": ("c", "h"), "cpp": ("cpp", "cc", "hpp", "h"), "swift": ("swift",), "dart": ("dart",),
    "powershell": ("ps1",), "ini": ("ini", "cfg", "conf"), "astro": ("astro",), "svelte": ("svelte",),
    "less": ("less",), "sass": ("sass", "scss"), "graphql": ("graphql", "gql"), "lua": ("lua",), "scala": ("scala",),
    "elixir": ("ex", "exs"), "objective-c": ("m", "h"), "shell-session": ("sh",),
}


def _unnamed_write(call: ToolCall, result: Message | None, touched: _Touches, messages: Sequence[Message],
                   at: int) -> str | None:
    """The file of a change tool's call that names none, whose result is the new code in one fence: how a VS Code
    Copilot export (SpecStory) shows ``copilot_applyPatch``. The file is one the session read before, of the fence's
    language: the only one, else the only one of them the next words after the edit name (the agent's report, or the
    user's next message when the agent said nothing). Otherwise None: an edit with
    no file is left out rather than pinned on a guess."""
    if result is None or not _CHANGE_VERB.search(call.name) or not (block := _LONE_BLOCK.match(result.content)):
        return None
    exts = _FENCE_EXTS.get(block.group(1).strip().lower())
    if not exts:
        return None
    # the touches so far are listed only here, past the cheap checks: most calls that change nothing stop above
    reads = list(dict.fromkeys(t.path for t in touched.result() if t.path.rsplit(".", 1)[-1].lower() in exts))
    if len(reads) > 1:
        after = next((n.content for n in messages[at + 1:] if n.role in ("assistant", "user") and n.content.strip()), "")
        reads = [r for r in reads if _says_name(after, posixpath.basename(r))]
        if len(reads) > 1:  # "1. 在 `Settings.sh` 中新增逻辑 … 2. 校验了 `Packages.sh`": the line that says it changed
            reads = [r for r in reads if any(_CHANGED_LINE.search(line) and not _CHECKED_LINE.search(line)
                                             for line in after.splitlines()
                                             if _says_name(line, posixpath.basename(r)))]
    return reads[0] if len(reads) == 1 else None


_CHANGED_LINE = re.compile(r"\b(?:add|chang|updat|modif|fix|rewr|replac|edit|insert|patch)\w*|新增|修改|添加|更新|改为|改成|修复"
                           r"|替换|重写|调整", re.I)
_CHECKED_LINE = re.compile(r"\b(?:check|verif|read|review|inspect)\w*|校验|检查|查看|核对|阅读|确认", re.I)


_CLEAN_TREE = re.compile(r"nothing to commit,? \(?working (?:tree|directory) clean")


def _work_words(messages: Sequence[Message]) -> str:
    """What the assistant wrote and its tool calls' arguments, joined: where the session's own work names files
    (not tool output, where a status report or a listing names every file, nor the user's pastes)."""
    texts = [s for m in messages for c in m.tool_calls for s in arg_strings(c.arguments)]
    texts += [m.content for m in messages if m.role == "assistant"]
    return "\n".join(texts)


def _names(words: str, path: str) -> bool:
    """``words`` mention ``path``'s file name as a word of its own (``a.py`` is not in ``data.py``)."""
    return _says_name(words, posixpath.basename(path.rstrip("/")))


def _names_by_stem(words: str, path: str) -> bool:
    """``words`` call ``path``'s file by its name in capitals with no extension ("让我更新 CHANGELOG", "bump VERSION"), as
    people name CHANGELOG.md, README.md, VERSION: a name a sentence would not use for anything but the file."""
    stem = _stem(path) or posixpath.basename(path)
    return len(stem) >= 4 and stem.isupper() and _says_name(words, stem)


def _says_name(text: str, name: str) -> bool:
    """``text`` holds the file name ``name`` as a word of its own, not inside a longer name."""
    return bool(name) and name in text and _name_pattern(name).search(text) is not None


@lru_cache(maxsize=1024)  # asked for each pending script and each reply: compile each name once
def _name_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w-])")


class _Scripts:
    """What a Python script the session wrote itself writes (``pycode`` reads the write tool's content), once the
    session shows the script ran: a later command that names the script and did not fail, or a later reply that
    names the file it wrote ("Artifacts: `by_position.csv`"), where the export hides the command that ran it."""

    _CONTENT_KEYS = ("content", "file_text", "contents")

    def __init__(self) -> None:
        #: script file name → the (path, action, base) its code writes and the session has not yet shown
        self.pending: dict[str, list[tuple[str, FileAction, str | None]]] = {}

    def follow(self, call: ToolCall, result: Message | None) -> list[_Op]:
        """Note a script ``call`` writes; the ops of the scripts ``call`` runs."""
        name, args = call.name.lower(), call.arguments
        if not isinstance(args, dict) or result_failed(result):
            return []
        if name in _WRITE_TOOLS:
            path = _arg_path(args) or (_result_path(result.content) if result is not None else None)
            code = next((args[k] for k in self._CONTENT_KEYS if isinstance(args.get(k), str)), None)
            if path and code and forward_slashes(path).lower().endswith(".py"):
                script = posixpath.basename(forward_slashes(path))
                ops = [op for op in code_file_ops(code) if posixpath.basename(forward_slashes(op[0])) != script]
                if ops:
                    self.pending[script] = ops
            return []
        if name not in COMMAND_TOOLS or not (cmd := call_command(args, result)):
            return []
        workdir = args.get("workdir") if isinstance(args.get("workdir"), str) else None
        ran = [s for s in self.pending if _says_name(cmd, s)]
        found: list[_Op] = []
        for script in ran:
            found += [(p, a, call.name, b or workdir, False) for p, a, b in self.pending.pop(script)]
        return found

    def named_in(self, text: str) -> list[_Op]:
        """The pending files a reply names as a fact (not in a plan, a question or advice): those were written."""
        said = "\n".join(x for x in _SENTENCE_END.split(_BLOCK.sub(" ", text))
                         if "?" not in x and not _FUTURE.search(x) and not _ADVICE.search(x))
        found: list[_Op] = []
        for script, ops in self.pending.items():
            keep = []
            for op in ops:
                base = posixpath.basename(forward_slashes(op[0]))
                if _says_name(said, base):
                    found.append((op[0], op[1], "script", op[2], False))
                else:
                    keep.append(op)
            self.pending[script] = keep
        self.pending = {s: ops for s, ops in self.pending.items() if ops}
        return found


#: Hermes ``skill_manage`` actions that write a skill's files (``view``/``list``/``delete`` do not produce one).
_SKILL_WRITES = frozenset({"create", "edit", "patch", "write_file", "update"})


def _skill_touch(args: dict[str, Any] | str, result: Message | None, skill_dirs: dict[str, str], out: _Touches) -> None:
    """Hermes ``skill_manage``: a skill is a folder ``<skills>/<category>/<name>/`` around ``SKILL.md``. Its folder
    is known from a ``skill_view`` result (``skill_dir``) or, on create, from the category; otherwise the file
    is not listed (``~/.hermes/skills/<name>`` without the category would name a path that does not exist)."""
    if not isinstance(args, dict) or result_failed(result) or str(args.get("action")) not in _SKILL_WRITES:
        return
    name = str(args.get("name") or "")
    folder = skill_dirs.get(name)
    if folder is None and name and isinstance(args.get("category"), str) and args["category"]:
        folder = f"~/.hermes/skills/{args['category']}/{name}"
    if folder:
        rel = args.get("file_path") if isinstance(args.get("file_path"), str) and args["file_path"] else "SKILL.md"
        out.add(f"{folder.rstrip('/')}/{rel}", "created" if args.get("action") == "create" else "modified",
                "skill_manage")


# --------------------------------------------------------------------------- edits shown only as prose

#: Sources whose exports may show an edit only inside the assistant's reply: SpecStory renders a
#: Cursor v0/v1 ``edit_file`` call as a ```diff block (path left out) or a ```lang:path block.
_PROSE_EDIT_SOURCES = frozenset({"specstory"})
_CHANGE_TOOLS = _WRITE_TOOLS | _EDIT_TOOLS | _EDITOR_TOOLS | _PATCH_TOOLS
_BLOCK = re.compile(r"^```([^\n`]*)\n(.*?)(?:^```[ \t]*$|\Z)", re.M | re.S)
# ```xml:common/pom.xml names its file; ```12:30:src/a.py (a letter-less tag) is a citation, not an edit,
# and ```text:output names no file (no "." or "/").
_TAGGED = re.compile(r"^[A-Za-z][\w+#.-]*:(\S*[./]\S*)$")
_DIFF_HEADER = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.M)
_FILE_EXTS = (
    "py|pyi|ipynb|js|jsx|mjs|cjs|ts|tsx|vue|svelte|astro|kt|kts|java|scala|groovy|gradle|go|rs|rb|php|cs|"
    "swift|dart|lua|ex|exs|c|h|cc|cpp|hpp|m|mm|sh|bash|zsh|ps1|bat|sql|md|mdx|rst|txt|json|jsonc|yaml|yml|"
    "toml|ini|cfg|conf|env|properties|xml|html|htm|css|scss|sass|less|svg|lock|tf"
)
# A file named in prose: ``login.vue``, ``src/services/index.ts``; ASCII classes so Chinese text glued
# to the name ("修改login.vue文件") does not become part of it.
_PROSE_PATH = re.compile(rf"(?<![\w./\\%-])((?:[\w.@-]+/)*[\w@-][\w.@-]*\.(?:{_FILE_EXTS}))(?![\w/-])", re.I | re.A)
# A path with at least one directory, absolute ("/home/u/p/src/a.ts:81" in a stack trace) or not. A doubled
# slash ("src//config/a.ts", a typo) does not start a rooted "/config/a.ts": that file is src/config/a.ts, and a
# second spelling of it leaves the module locator two candidates, so it places none.
_SHOWN_PATH = re.compile(rf"(?<![\w.\\%-])(?<!\w/)(?<!\w//)((?:/|~/)?(?:[\w.@#-]+/)+[\w@-][\w.@-]*\.(?:{_FILE_EXTS}))(?![\w/-])", re.I | re.A)
_EDIT_INTENT = re.compile(
    r"\b(?:edit|updat|modif|chang|fix|add|replac|remov|rewrit|writ|creat|apply|patch|refactor|insert|delet|implement)\w*"
    # moving code into a file edits it ("move save_log to `game.py`", "将函数移到 game.py 中"); "move on" does not
    r"|\bmov(?:e|es|ed|ing)\b(?!\s+on\b)"
    r"|修改|编辑|更新|添加|替换|删除|移除|修复|改为|改成|创建|写入|重构|调整|更改|实现|移到|移至|移动到|搬到"
    # Japanese and Korean: "`src/lib/client.ts` ファイルを作成し", "`App.tsx`를 수정합니다"
    r"|作成|追加|修正|変更|削除|編集|実装|書き換え|置き換え|생성|추가|수정|변경|삭제|편집|구현", re.I)
# Telling the user what *they* could do is advice, not an edit (also in Russian, Spanish and Portuguese, whose
# change claims below count too).
_ADVICE = re.compile(r"\byou (?:can|could|should|need|might|may)\b|\bfor example\b|\be\.g\.|你可以|您可以|你需要|您需要|"
                     r"例如|比如|建议|\b(?:вы|ты) (?:можете|можешь|должны|должен)\b|\bнапример\b|\bрекомендую\b|"
                     r"\b(?:puedes|puede usted|podrías|deberías|debes|você pode|você deve|recomiendo|recomendo)\b|"
                     r"\bpor ejemplo\b|\bpor exemplo\b", re.I)
_APPLIED = re.compile(
    r"\b(?:I|we)(?:'ve| have)?\s+(?:\w+\s+){0,2}?(?:updated|edited|modified|changed|applied|added|fixed|replaced|"
    r"rewrote|refactored|removed)\b|已(?:经)?(?:完成|修改|更新|替换|添加|删除|移除|修复|重构|改)|(?:修改|更新|替换|重构)(?:了|完成)",
    re.I)


def _named_file(text: str, known: Sequence[str]) -> str | None:
    """The one file ``text`` names, resolved against paths the session touched; None if none or several.

    A file may be named by its module alone ("更新`AdminController`"), when exactly one path the
    session touched has that stem.
    """
    # "@instruction.md" is Cursor's mention of the file instruction.md; "Next.js" is a framework, not a file.
    names = list(dict.fromkeys(name for m in _PROSE_PATH.finditer(text)
                               if (name := m.group(1).lstrip("@") if "/" not in m.group(1) else m.group(1)).lower()
                               not in _FRAMEWORKS and not _SITE_AFTER.match(text, m.end())))
    if not names:
        stems = {m.group(1) for m in _CODE_IDENT.finditer(text)}
        hits = {k for k in known if _stem(k) in stems}
        return hits.pop() if len(hits) == 1 else None
    if len(names) != 1:
        return None
    name = names[0]
    hits = [k for k in known if k == name or k.endswith("/" + name)]
    return hits[0] if len(set(hits)) == 1 else name


#: Libraries whose names are spelled as JavaScript files: in prose they name the library.
_FRAMEWORKS = frozenset(f"{n}.js" for n in (
    "next", "node", "vue", "nuxt", "three", "express", "d3", "chart", "ember", "backbone", "angular", "react", "p5",
    "pixi", "babylon", "alpine", "solid", "nest", "socket", "moment", "day", "anime", "leaflet", "phaser", "deno",
    "hono", "fastify", "koa", "meteor", "gatsby", "remix", "tone", "paper", "fabric", "matter", "cannon", "ml5",
    "tensorflow", "brain", "video", "highlight", "marked", "mermaid", "plotly", "electron"))

# A name followed by what it is on the web is a site ("the LearnWith.cc link", "the example.io website").
_SITE_AFTER = re.compile(r"`?\s+(?:link|links|site|website|domain|url|homepage)\b", re.I)

# A module named in a code span: `AdminController`, `useAuth` (not a call, not a dotted member).
_CODE_IDENT = re.compile(r"`([A-Za-z_][A-Za-z0-9_-]{2,})`")


def _stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.split(".", 1)[0] if "." in name else ""


def _last_paragraph(text: str) -> str:
    # SpecStory puts a "---" rule between the words that announce an edit and the edit's block.
    parts = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip() and not _RULE.match(p)]
    return parts[-1] if parts else ""


_RULE = re.compile(r"^\s*(?:-{3,}|\*{3,}|_{3,})\s*$")


def _reply_edits(text: str, known: Sequence[str], reads: Sequence[str], locator: ModuleLocator,
                 asked: str | None = None, just_read: str | None = None) -> tuple[list[str], list[str]]:
    """Files one assistant reply edits through its code blocks (see ``prose_edits``), and the code of each new
    file it shows that nothing named; ``asked`` is the one file the user's message put before the agent to
    change (``_asked_file``); ``just_read`` the file the agent's last step before this reply read."""
    blocks = list(_BLOCK.finditer(text))
    paths: list[str | None] = []
    for i, b in enumerate(blocks):
        tag, body = b.group(1).strip(), b.group(2)
        lead = text[blocks[i - 1].end() if i else 0:b.start()]
        if m := _TAGGED.match(tag):
            paths.append(m.group(1))
        elif not tag and not body.strip():
            paths.append(_marked_edit(text, blocks, i, paths, known))
        elif not _is_edit(b):
            paths.append(None)
        elif h := _DIFF_HEADER.search(body):
            paths.append(None if h.group(1) == "/dev/null" else h.group(1))
        elif jvm := locator.jvm_file(_new_side(b), tag):
            paths.append(jvm)  # the code's own package and class outrank the words around it
        elif not lead.strip() and i and paths[-1] is not None and _is_edit(blocks[i - 1]):
            paths.append(paths[-1])  # a diff straight after a diff continues the same file
        else:
            lead = _last_paragraph(lead)
            ok = _EDIT_INTENT.search(lead) and not _ADVICE.search(lead)
            paths.append(_named_file(lead, known) if ok else None)
    # A reply that opens on a run of diffs, straight after a step that read one file, edits that file: Cursor's
    # export renders "Read file: src/a.java", then the edit as bare diffs (no path), as the agent worked.
    if just_read and blocks and not text[:blocks[0].start()].strip():
        j = 0
        while j < len(blocks) and _is_diff(blocks[j]) and paths[j] is None and (
                not j or not text[blocks[j - 1].end():blocks[j].start()].strip()):
            paths[j] = just_read
            j += 1
    # Diffs still unnamed: the claim right after a run of them ("已完成对 `X.kt` 的重构"), else the files
    # read in this turn, one per diff in order, when the counts agree exactly.
    open_ = [i for i, b in enumerate(blocks) if paths[i] is None and _is_edit(b)]
    for i in open_:
        j = i
        while j + 1 < len(blocks) and _is_edit(blocks[j + 1]) and not text[blocks[j].end():blocks[j + 1].start()].strip():
            j += 1
        after = text[blocks[j].end():blocks[j + 1].start() if j + 1 < len(blocks) else len(text)].strip()
        after = re.split(r"\n\s*\n", after, maxsplit=1)[0]
        if _APPLIED.search(after) and not _ADVICE.search(after) and (name := _named_file(after, known)):
            for k in range(i, j + 1):
                paths[k] = paths[k] or name
    left = [i for i in open_ if paths[i] is None]
    done = {p for p in paths if p}
    unread = [r for r in dict.fromkeys(reads) if r not in done]
    if left and len(left) == len(unread):
        for i, r in zip(left, unread, strict=True):
            paths[i] = r
    # Still unnamed: the module the diff's own code defines, when the session imports it (``modules``), else
    # the one file the session shows that is named after what the diff exports.
    for i in open_:
        if paths[i] is None:
            code = _new_side(blocks[i])
            paths[i] = locator.locate(code, blocks[i].group(1).strip()) or locator.named_after(code)
    # Still unnamed, in a reply whose other edits (if any) are all to the file the user asked to change: that file.
    if asked and all(p is None or p == asked for p in paths):
        for i in open_:
            paths[i] = paths[i] or asked
    unnamed = [_new_side(blocks[i]) for i in open_ if paths[i] is None and _NEW_FILE_DIFF.match(blocks[i].group(2))]
    return [p for p in paths if p], unnamed


# A diff whose old side is empty shows a new file (Cursor's export: "- " then every line added).
_NEW_FILE_DIFF = re.compile(r"\A(?:-[ \t]*\n)?(?:\+[^\n]*(?:\n|\Z))+\s*\Z")
# A step that runs (or makes runnable) a script by its name: "chmod +x make_icon.sh && ./make_icon.sh".
_RUNS_SCRIPT = re.compile(
    r"^\s*(?:cd\s+\S+\s*&&\s*)?(?:chmod\s+\+x\s+|(?:bash|sh|zsh|python3?|node|tsx|ts-node|osascript|ruby|perl)\s+|\./)"
    r"((?:[\w.-]+/)*[\w-][\w.-]*\.(?:sh|command|py|js|mjs|cjs|ts|applescript|scpt|rb|pl))(?![\w/-])")
_SHEBANG = re.compile(r"\A#!(?:\S*/)?(?:env\s+)?(\w+)")
_SCRIPT_EXTS = {"bash": ("sh", "command"), "sh": ("sh", "command"), "zsh": ("sh", "command"), "python": ("py",),
                "python3": ("py",), "node": ("js", "mjs", "cjs"), "ruby": ("rb",), "perl": ("pl",),
                "osascript": ("applescript", "scpt")}


def _run_script(command: str, code: str, known: Sequence[str]) -> str | None:
    """The script ``command`` runs, when it can be the new file ``code`` (shown with no name) just before it: a
    file the session has not touched, of the kind its shebang says."""
    if not (m := _RUNS_SCRIPT.match(command)) or any(k == m.group(1) or k.endswith("/" + m.group(1)) for k in known):
        return None
    kind = _SHEBANG.match(code.lstrip())
    if kind and m.group(1).rsplit(".", 1)[-1] not in _SCRIPT_EXTS.get(kind.group(1), ()):
        return None
    return m.group(1)


# Cursor's mention of a file in the user's message ("@game_ui.py 修改遊戲畫面 UI").
_MENTION = re.compile(rf"(?<![\w@])@((?:[\w.-]+/)*[\w-][\w.-]*\.(?:{_FILE_EXTS}))(?![\w/-])", re.I | re.A)


def _asked_file(text: str, known: Sequence[str]) -> str | None:
    """The file a user's message asks to change: it @-mentions exactly one file and asks for a change. Two
    mentions ("@log_ui.py …, like the button in @main_ui.py") leave it open which one is meant."""
    names = {m.group(1) for m in _MENTION.finditer(text)}
    if len(names) != 1 or not _EDIT_INTENT.search(text):
        return None
    name = names.pop()
    hits = {k for k in known if k == name or k.endswith("/" + name)}
    # "/home/u/p/src/a.ts" and "src/a.ts" are one file; "@route.ts" with two route.ts in sight names neither.
    hits = {k for k in hits if not any(q != k and k.endswith("/" + q) for q in hits)}
    return hits.pop() if len(hits) == 1 else None if hits else name


def _marked_edit(text: str, blocks: Sequence[re.Match[str]], i: int, paths: Sequence[str | None],
                 known: Sequence[str]) -> str | None:
    """The file of an empty fence: how a VS Code Copilot export shows an applied edit (its code is not
    exported). The sentence just before it names the file ("Now I'll modify `sketch.js` to import…"); words
    that name none go on with the file the reply edited last ("Now let's add the initialization in the
    setup function:"); a reply that opens with the edit names it in the sentence after ("All scaling
    logic in `sketch.js` now uses…")."""
    # The sentence that announces the edit: a lead is often a run of a turn's words ("Let me check the
    # test setup… Great! We have p5.js mocking… I need to add some mocks to the setup file:").
    sentences = [x for x in _SENTENCE_END.split(_last_paragraph(text[blocks[i - 1].end() if i else 0:blocks[i].start()]))
                 if x.strip()]
    lead = sentences[-1] if sentences else ""
    if lead.strip():
        if name := _named_file(lead, known) or _stem_named(lead, known):
            return name
        previous = next((p for p in reversed(paths) if p), None)
        if previous and not _PROSE_PATH.search(lead):
            return previous
        return None
    after = text[blocks[i].end():blocks[i + 1].start() if i + 1 < len(blocks) else len(text)].strip()
    first = _SENTENCE_END.split(re.split(r"\n\s*\n", after, maxsplit=1)[0], maxsplit=1)[0]
    return _named_file(first, known) if not _ADVICE.search(first) and "?" not in first else None


#: A bare name a sentence may call a file by: capitalised or camelCase, as code names are ("AuthPage", "Tasktracker").
_BARE_NAME = re.compile(r"(?<![\w./@-])([A-Z][A-Za-z0-9_]{3,}|[a-z]+[A-Z][A-Za-z0-9_]*)(?![\w/@-]|\.\w)")


def _stem_named(sentence: str, known: Sequence[str]) -> str | None:
    """The one file the session touched or read whose name without its extension is a bare word of ``sentence``
    ("Давайте начнем с изменения AuthPage:" after "Read file: src/pages/AuthPage.tsx"); None if none or several."""
    words = set(_BARE_NAME.findall(sentence))
    hits = {k for k in known if _stem(k) in words} if words else set()
    return hits.pop() if len(hits) == 1 else None


def _new_side(block: re.Match[str]) -> str:
    """A block's code as it is after the edit: a diff's context and added lines, unmarked."""
    if not _is_diff(block):
        return block.group(2)
    return "\n".join(line[1:] if line[:1] in "+ " else line for line in block.group(2).splitlines()
                     if not line.startswith("-"))


def _is_diff(block: re.Match[str]) -> bool:
    return block.group(1).strip().lower() in ("diff", "patch") and bool(
        re.search(r"^[+-](?![+-]{2})", block.group(2), re.M))


# Cursor's edit_file shows the change as the file's code with the untouched parts elided by this marker
# ("// ... existing code ...", "# ...existing code..."); SpecStory v0/v1 export that block as a plain fence.
_EXISTING_CODE = re.compile(r"^\s*(?://|#|--|/\*|<!--|;)\s*\.\.\.\s*existing code\s*\.\.\.", re.M | re.I)


def shows_edit(messages: Sequence[Message]) -> bool:
    """Whether an assistant reply in ``messages`` shows an edit as a code block (a diff with changed lines, or a
    Cursor edit with elided code), whether or not its file can be named: the session changed code there."""
    return any(m.role == "assistant" and "```" in m.content and any(_is_edit(b) for b in _BLOCK.finditer(m.content))
               for m in messages)


def _is_edit(block: re.Match[str]) -> bool:
    """A block that shows an applied edit: a diff with changed lines, or a Cursor edit with elided code."""
    return _is_diff(block) or bool(_EXISTING_CODE.search(block.group(2)))


_EDIT_HEADER = re.compile(r"^#{2,4} \[[^\]\n]+\]\((file://[^)\s]+)\)\s*$", re.M)


def _file_uri_path(uri: str) -> str:
    from urllib.parse import unquote, urlparse

    path = unquote(urlparse(uri).path)
    return path[1:] if re.match(r"^/[A-Za-z]:/", path) else path  # file:///c:/x → c:/x


def prose_edits(messages: Sequence[Message], known: Sequence[str]) -> list[str]:
    """Files edited through code blocks in assistant replies, for exports with no edit tool calls.

    The block is the evidence (SpecStory of Cursor renders each applied edit that way), so only its
    file is inferred, conservatively:

    * ```` ```lang:path ```` names it.
    * A ```` ```diff ```` with ``+``/``-`` lines: its ``+++ b/path`` header; else the paragraph just
      before it when that announces an edit (not advice to the user) and names exactly one file;
      a diff right after a diff continues that file; else the paragraph right after a run of diffs
      when it reports the edit done and names one file; else, when the number of still-unnamed
      diffs equals the number of files read since the user's message, those files in order.
    * Still unnamed: the module its code defines, when the session imports it, else the one file the
      session shows that is named after what it exports (``export function useCart`` → ``useCart.ts``).
    * Still unnamed, in a reply that places no edit elsewhere: the one file the user's message
      @-mentions when it asks for a change ("@game_ui.py 修改遊戲畫面 UI").
    * Bare names resolve to the one path in ``known`` (paths the session's tools touched) that
      ends with them; otherwise they stay as written.
    * VS Code Copilot's edit headers, ``### [undo.js](file:///home/u/proj/src/undo.js)`` before the
      changed code, name the file by its URI.
    """
    edits = _ProseEdits(_locator(messages, None))
    out: list[str] = []
    for m in messages:
        out += edits.feed(m, [*known, *out])
    return list(dict.fromkeys(out))


# A sentence ends at ".!?" before a space, a capital or the end (so "sketch.md" stays whole, and
# "`sketch.js`.I've updated" is two sentences), or at a CJK full stop.
# A list number ("1. **Updated** `a.py`") ends no sentence: split there, the item lost the verb that opens it.
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!^\d\.)(?<!^\d\d\.)(?<!^ \d\.)(?<!^  \d\.)(?<!^   \d\.)(?=\s|[A-Z]|$)"
                           r"|(?<=[。！？；])|\n", re.M)
_FIRST_PERSON_PAST = re.compile(
    r"\b(?:I|we)(?:'ve| have)?\s+(?:\w+\s+){0,2}?(?:updated|edited|modified|changed|created|added|fixed|rewrote|"
    r"refactored|written|wrote)\b|(?:我|我们)?已(?:经)?(?:修改|更新|替换|添加|创建|修复|重构|改)|(?:修改|更新|创建|重构)(?:了|完成)"
    # Russian "я исправил(а)", "мы обновили"; Spanish "he actualizado", "corregí"; Portuguese "atualizei", "criei"
    r"|\b(?:я|мы)\s+(?:\w+\s+){0,2}?(?:исправил|обновил|добавил|создал|изменил|переписал|расширил|улучшил|заменил|"
    r"реализовал|отредактировал|доработал|переработал)(?:а|и)?\b"
    r"|\b(?:he|hemos)\s+(?:actualizado|modificado|creado|añadido|agregado|corregido|implementado|reescrito|editado)\b"
    r"|\b(?:actualicé|modifiqué|creé|añadí|agregué|corregí|implementé|reescribí|edité)(?!\w)"
    r"|\b(?:atualizei|modifiquei|criei|adicionei|corrigi|implementei|alterei|reescrevi|editei)\b", re.I)
# A claim in the passive that names what was done to the files before it: "A test script `t.js` has been created",
# "Docs in `a.md` and `README.md` have been updated", "The logic in `x.js` is now updated".
_PASSIVE_DONE = re.compile(
    r"\b(?:has|have) been (?:updated|edited|modified|changed|created|added|fixed|rewritten|refactored|written|extended|"
    r"adjusted|implemented|corrected)\b|\b(?:is|are) now (?:updated|fixed|modified|changed)\b", re.I)
_FUTURE = re.compile(r"\b(?:will|going to|let me|let's|need to|should|now I)\b|'ll\b|将|接下来|下一步", re.I)
# "the documentation for `filelib.js`": the file is what the new text is about, not what was written.
_ABOUT = re.compile(r"\b(?:for|of|about|from|on|against|with|describing|covering)\s+(?:the\s+)?[`'\"]?$", re.I)


def _claimed_edits(text: str, known: Sequence[str]) -> list[str]:
    """Files a reply says, in a sentence of its own, that the assistant has already changed.

    "I have successfully updated the `copilot-instructions.md` file." An export with no edit tool
    call (VS Code Copilot renders each edit as an empty fence) leaves the claim as the only trace.
    One file per sentence, first person, past tense, not advice and not a plan.
    """
    prose = _BLOCK.sub(" ", text)
    found = []
    for sentence in _SENTENCE_END.split(prose):
        if (_FIRST_PERSON_PAST.search(sentence) and not _FUTURE.search(sentence) and not _ADVICE.search(sentence)
                and "?" not in sentence and (name := _named_file(sentence, known))):
            at = _PROSE_PATH.search(sentence)
            if at is None or not _ABOUT.search(sentence[:at.start()]):
                found.append(name)
        elif (item := _CHANGE_ITEM.match(sentence)) and "?" not in sentence and not _ADVICE.search(sentence):
            found += _item_files(item.group(1), known)
        elif ((done := _PASSIVE_DONE.search(sentence)) and "?" not in sentence and not _FUTURE.search(sentence)
              and not _ADVICE.search(sentence)):
            found += _item_files(sentence[:done.start()], known)  # the subject: what "to check …" follows is not
    return found


# A change list's item: a past-tense change verb opens it, its subject the assistant left out ("- Added a
# guard in `throttle.py`", "- **Updated** `a.py` and `b.py`"). Verbs that only look ("Verified", "Ran",
# "Checked") are not in the list: an item that reports a check changed nothing.
_CHANGE_ITEM = re.compile(
    r"^\s*+(?:[-*+•]|\d+[.)])\s++(?:[✅✔☑]\ufe0f?\s*)?(?:\*\*)?((?:Added|Updated|Edited|Modified|Changed|Extended|Fixed|"
    r"Patched|Created|Rewrote|Rewritten|Refactored|Replaced|Implemented|Introduced|Tightened|Broadened|Adjusted|"
    r"Reworked|Wired|Converted|Expanded|Hardened|Simplified|Wrote|Inserted|Appended|Switched|Made)\b.*"
    r"|(?:已)?(?:修改|修复|更新|添加|新增|创建|新建|重构|实现|替换|调整|完善|改写|重写)了.*"
    # Russian short participles, any gender or number ("Обновлена документация в `changelog.md`", "Создан `a.ts`")
    r"|(?:Добавлен|Обновл[её]н|Измен[её]н|Исправлен|Создан|Расширен|Улучшен|Замен[её]н|Переписан|Реализован|"
    r"Оптимизирован|Переработан|Доработан|Отредактирован|Упрощ[её]н)(?:а|о|ы)?(?!\w).*"
    # Spanish and Portuguese participles ("Actualizado `a.js`", "Criado o arquivo `b.ts`")
    r"|(?:Actualizad|Modificad|Cread|Añadid|Agregad|Corregid|Implementad|Reemplazad|Refactorizad|"
    r"Atualizad|Adicionad|Criad|Corrigid|Alterad|Substituíd|Refatorad)(?:o|a|os|as)(?!\w).*)$")
# A file after these words is what the change uses or is about, not where it was made ("switched to `x.ts`").
_NOT_CHANGED_AT = re.compile(
    r"\b(?:for|of|about|from|on|against|describing|covering|use|uses|using|via|like|than|instead of|matching|"
    r"import|imports|importing|calls|calling|для|из|используя|вместо|через|para|usando|desde|en lugar de|em vez de"
    # what the changed code does when it runs: "Created `Config` to load/save `cache.json`"
    r"|to\s+(?!(?:the|a|an|both|each|all|every|its|their|this|that|these|those|our|your|my)\b)[a-z]+(?:/[a-z]+)?)"
    r"\s+(?:the\s+)?[`'\"(]?$", re.I)


# A file moved or renamed, in a change-list item or a first-person claim: "- Moved `src/a.js` → `src/x/a.js`",
# "**Moved test file** from `a.test.js` to `test/a.test.js`", "I renamed `old.ts` to `new.ts`". Only the file
# itself moves: "Moved the helper from `a.js` to `b.js`" moved code, and both files stay.
_MOVE_WORD = re.compile(r"\b(?:[Mm]oved|[Rr]enamed|[Rr]elocated)\b|移动了|重命名了|移到了")
_MOVE_CLAIM = re.compile(
    r"^\s*+(?:(?:[-*+•]|\d+[.)])\s++(?:\*\*)?|.*?\b(?:I|we)(?:'ve| have)?\s+)(?:[Mm]oved|[Rr]enamed|[Rr]elocated)\b"
    r"(?P<what>(?:\s*+(?:(?:the|test|source|config|script|module|component|file|files)\b|\*\*))*+)\s*+(?:from\s++)?"
    r"(?P<rest>[`'\"]?[^\s`'\"]+.*)$")
_MOVED_TO = re.compile(r"\s*+[`'\"]?\s*+(?:→|->|=>|\bto\b|\binto\b)\s*+[`'\"]?")


def _claimed_moves(text: str, known: Sequence[str]) -> list[tuple[str, FileAction]]:
    """Files a reply says it moved or renamed: the old path is gone (``deleted``), the new one is ``moved``."""
    found: list[tuple[str, FileAction]] = []
    for line in _BLOCK.sub(" ", text).split("\n"):
        if len(line) > 500 or not (m := _MOVE_CLAIM.match(line)) or _FUTURE.search(line) or "?" in line:
            continue
        rest = m.group("rest")
        src = _PROSE_PATH.match(rest.lstrip("`'\""))
        if src is None:
            continue
        after = rest.lstrip("`'\"")[src.end():]
        if not (to := _MOVED_TO.match(after)):
            continue
        dest = after[to.end():]
        dst = _PROSE_PATH.match(dest)
        old = _item_files(src.group(1), known)[0]
        found.append((old, "deleted"))
        if dst is not None:
            found.append((_item_files(dst.group(1), known)[0], "moved"))
    return found


def _item_files(item: str, known: Sequence[str]) -> list[str]:
    """The files one change-list item names as changed (an item may list several: "annotations (`a.py`, `b.py`)")."""
    out = []
    for m in _PROSE_PATH.finditer(item):
        if _NOT_CHANGED_AT.search(item[max(0, m.start() - 40):m.start()]):
            continue
        name = m.group(1)
        if name.lower() in _FRAMEWORKS and "/" not in name:
            continue  # "Updated Next.js to the latest version": the framework, not a file
        hits = {k for k in known if k == name or k.endswith("/" + name)}
        out.append(hits.pop() if len(hits) == 1 else name)
    return out


# ``git status`` (long form), ``git status --porcelain`` and ``--stat`` lines, in output or pasted by the user.
_STATUS_LONG = re.compile(r"^\s+(modified|new file|deleted|renamed|copied|typechange):\s+(.+?)\s*$")
_STATUS_SHORT = re.compile(r"^\s?([MADRCUT?]{1,2})\s+(\S.*?)`?\s*$")
_DIFF_STAT = re.compile(r"^\s(\S.*?)\s+\|\s+(?:\d+\s*[+-]*|Bin\b.*)$")
# A merge brings in other people's changes: its status lists files this session did not write.
# What git's long form prints is a path, spaces and commas unquoted; a type's field ("deleted: string[];",
# "modified: boolean") is not: no ";{}<>", and a directory, an extension or a capitalised name (Makefile).
_REPORTED_PATH = re.compile(r'^(?=[^;{}<>]+$)(?:.*[/.].*|[A-Z][\w-]*)$')
_MERGING = re.compile(r"unmerged paths|still merging|Merge made by|CONFLICT \(|fix conflicts", re.I)
_SHORT_ACTIONS: dict[str, FileAction] = {"A": "created", "?": "created", "D": "deleted"}
_LONG_ACTIONS: dict[str, FileAction] = {"new file": "created", "deleted": "deleted"}


def worktree_report(text: str) -> list[tuple[str, FileAction]]:
    """Files a ``git status`` or ``git diff --stat`` shown in ``text`` lists as changed.

    A short-form line counts only in a run of two or more (a lone "A path" line is too easily
    prose); a stat line only before the "N files changed" line that closes it. Nothing is taken
    from a report made during a merge.
    """
    if ("|" not in text and ":" not in text and "\n" not in text.strip()) or _MERGING.search(text):
        return []
    out: list[tuple[str, FileAction]] = []
    run: list[tuple[str, FileAction]] = []
    stat: list[str] = []
    for line in [*text.splitlines(), ""]:
        if (m := _STATUS_LONG.match(line)) and _REPORTED_PATH.match(path := m.group(2).split(" -> ")[-1]):
            out.append((path, _LONG_ACTIONS.get(m.group(1), "modified")))
        if (m := _STATUS_SHORT.match(line)) and ("/" in m.group(2) or "." in m.group(2)):
            code = m.group(1).strip()
            run.append((m.group(2).split(" -> ")[-1], _SHORT_ACTIONS.get(code[0], "modified")))
        else:
            out += run if len(run) >= 2 else []
            run = []
        if m := _DIFF_STAT.match(line):
            stat.append(m.group(1).split(" => ")[-1])
        elif re.match(r"^\s\d+ files? changed", line):
            out += [(p, "modified") for p in stat]
            stat = []
        else:
            stat = []
    return [(p.strip().strip("`\"'"), a) for p, a in out
            if not p.startswith("...") and not _EXPORTER_FILE.search(p)]


# SpecStory writes its own history and rules files into the project; they are the export, not the work.
_EXPORTER_FILE = re.compile(r"(?:^|/)\.specstory/|(?:^|/)derived-cursor-rules\.mdc$")


def _resolve_bare_names(touches: list[FileTouch], seen: Sequence[str]) -> list[FileTouch]:
    """Give a file inferred from prose by its bare name ("tasks.ts") the one path the session shows
    for it elsewhere (a stack trace's ``src/domain/tasks.ts:81``, a test run, a later read); a name
    two different paths end with stays bare, or goes when one of them is listed as changed already."""
    # A subagent's report names files as it likes ("- Modified `TextTypeCard.tsx`"): by bare name too.
    bare = [t for t in touches if "/" not in t.path and (t.tool in ("edit_block", "claim")
                                                        or (t.tool or "").lower() in _SUBAGENT_TOOLS)]
    if not bare:
        return touches
    renamed: dict[str, str] = {}
    dropped: set[str] = set()
    changed = {t.path for t in touches if t.action != "read"}
    for t in bare:
        cands = {p for p in seen if p.endswith("/" + t.path)}
        # "/home/u/proj/src/a.ts" and "src/a.ts" are one file: keep the shortest spelling.
        cands = {p for p in cands if not any(q != p and p.endswith("/" + q) for q in cands)}
        if len(cands) == 1:
            renamed[t.path] = cands.pop()
        elif cands & changed:
            # "Added the command to index.ts" where several index.ts exist and one is listed already: the bare
            # name adds no file, and listed as it is it names the root's index.ts, which nobody changed.
            dropped.add(t.path)
    out: dict[str, FileTouch] = {}
    for t in touches:
        if t.path in dropped:
            continue
        path = renamed.get(t.path, t.path)
        if path in out:  # already listed at its full path: keep the first touch, refine its action
            out[path] = out[path].model_copy(update={"action": _merge(out[path].action, t.action)})
        else:
            out[path] = t.model_copy(update={"path": path}) if path != t.path else t
    return list(out.values())


def _texts(m: Message) -> list[str]:
    return [m.content, *(s for c in m.tool_calls for s in arg_strings(c.arguments))]


def _shown_paths(messages: Sequence[Message], cwd: str | None) -> set[str]:
    """Every path with a directory the session shows anywhere (stack traces, test output, reads)."""
    seen: set[str] = set()
    for m in messages:
        for text in _texts(m):
            for x in _SHOWN_PATH.finditer(text):
                if _in_quoted_path(text, x.start()):
                    continue
                if (norm := normalise_path(x.group(1), cwd)) and not norm.startswith(".."):
                    seen.add(norm)
    return seen


# An absolute path opened by a quote and not closed before this point of its line.
_QUOTED_PATH_OPEN = re.compile(r"""['"](?:/|~/|[A-Za-z]:[\\/])[^'"\n]*$""")


def _in_quoted_path(text: str, start: int) -> bool:
    """The match at ``start`` is the tail of a quoted path with a space in it: "bash '/Users/u/AAA Backup/app/run.sh'"
    shows no path "Backup/app/run.sh" (it resolved a bare "run.sh" there)."""
    if not start or text[start - 1] != " ":
        return False
    return bool(_QUOTED_PATH_OPEN.search(text, text.rfind("\n", 0, start) + 1, start))


def _locator(messages: Sequence[Message], cwd: str | None) -> ModuleLocator:
    return ModuleLocator((t for m in messages for t in _texts(m)), _shown_paths(messages, cwd))


_LONE_BLOCK = re.compile(r"\A\s*```([^\n`]*)\n(.*?)^```\s*\Z", re.M | re.S)


class _ProseEdits:
    """``prose_edits`` one message at a time, so the caller can interleave them with tool calls."""

    def __init__(self, locator: ModuleLocator) -> None:
        self.reads: list[str] = []
        self.locator = locator
        self.lead = ""  # the assistant's last words in this turn before the current message
        self.asked: str | None = None  # the file the user's message asks to change (``_asked_file``)
        self.read_run: list[str] = []  # the files read since the agent last wrote anything or ran any other tool
        # New files shown with no name this turn, oldest first: a script is named by the step that runs it next.
        self.unnamed: list[str] = []

    def feed(self, m: Message, known: Sequence[str]) -> list[str]:
        if m.role == "user":
            self.reads, self.lead, self.read_run, self.unnamed = [], "", [], []
            self.asked = _asked_file(m.content, [*known, *self.locator.shown])
            return []
        if m.role != "assistant":
            return []
        found = [_file_uri_path(u) for u in _EDIT_HEADER.findall(m.content)]
        just_read = self.read_run[0] if len(set(self.read_run)) == 1 else None
        # A message's tool calls are steps taken after its words: the files read since the agent last wrote or did
        # anything else are what the next message's opening diffs can edit, when they are one file.
        run = [] if m.content.strip() else self.read_run
        for c in m.tool_calls:
            p = _arg_path(c.arguments) if isinstance(c.arguments, dict) else None
            if c.name.lower() in _READ_TOOLS and p:
                self.reads.append(p)
                run = [*run, p]
            else:
                run = []
        self.read_run = run
        if "```" in m.content:
            named, unnamed = _reply_edits(m.content, [*known, *found], self.reads, self.locator, self.asked, just_read)
            found += named
            if unnamed or named:
                self.unnamed = unnamed  # a later edit ends the wait for a run of the earlier ones
            if not found and (lone := self._lone_edit(m.content)):
                found.append(lone)
        for c in m.tool_calls if self.unnamed else ():
            if (command := command_text(c.arguments)) and (
                    script := _run_script(command, self.unnamed[0], [*known, *found])):
                found.append(script)
                self.unnamed.pop(0)
                if not self.unnamed:
                    break
        if not _LONE_BLOCK.match(m.content):
            self.lead = _last_paragraph(m.content) or self.lead
        return found + [p for p in _claimed_edits(m.content, [*known, *found]) if p not in found]

    def _lone_edit(self, text: str) -> str | None:
        """A reply that is one bare fence, announced by the reply before it as an edit, is how Cursor's
        edit tool is exported (the new code, no path): its file, when its code says which (``modules``)."""
        if not (block := _LONE_BLOCK.match(text)):
            return None
        if not _EDIT_INTENT.search(self.lead) or _ADVICE.search(self.lead):
            return None
        return self.locator.locate(block.group(2), block.group(1).strip())


#: Tools that hand work to a subagent: Claude Code's ``Task`` (later ``Agent``), Hermes's ``delegate_task``.
_SUBAGENT_TOOLS = frozenset({"task", "agent", "delegate_task"})
# Hermes appends this itself when a child wrote files the parent had read: the runtime's list, not prose.
_STALE_NOTE = re.compile(r"\[NOTE: subagent modified files the parent previously read[^:\]]*+:\s*+([^\]]+)\]")
_CHANGED_FILES = re.compile(
    r"\b(?:files?|paths?)\b[^\n]{0,30}?\b(?:creat|modif|chang|updat|writ|edit|add|touch)\w*"
    r"|\b(?:creat|modif|chang|updat|writ|edit|add|touch)\w*\s+(?:\w+\s+){0,2}?files?\b"
    r"|(?:新建|创建|新增|修改|更新|变更|改动|写入)(?:的|了)?(?:文件|档案)|(?:文件|档案)(?:变更|改动|修改|清单|列表)", re.I)
_CREATED = re.compile(r"\bcreat|\bnew\b|\badded\b|新建|创建|新增", re.I)
_READ_ONLY = re.compile(r"\b(?:read|reviewed|inspected|explored|examined|analy[sz]ed|looked)\b|查看|阅读|分析", re.I)
_HEADING = re.compile(r"^\s*(?:#{1,6}\s+|\*\*|__)?(.+?)(?:\*\*|__)?\s*(?:[:：]\s*(.*))?$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+(.+)$")
#: A list entry naming one file, then what was done to it: "`a.py` — new file with …", "`b.py`: updated to …".
_ITEM_CHANGE = re.compile(r"^(`[^`\n]+`|\*\*[^*\n]+\*\*|\S+)\s*(?:—|–|-|:)\s*(new file|created|added|modified|updated|changed|rewr(?:ote|itten)"
                          r"|extended|edited|新建|新增|创建|修改|更新)\b", re.I)
#: A file's own entry in a report's files section: a bold line or a small heading, maybe numbered ("**1. `a.kt`**").
_ENTRY = re.compile(r"^\s*(?:\*\*|#{3,6}\s+)(?:\d{1,2}[.)]\s*)?(.{3,300})$")


def _first_path(text: str) -> str | None:
    """The path a list item names: its first backticked path, else its first path-like word."""
    for span in re.findall(r"`([^`\n]+)`", text):
        if m := (_SHOWN_PATH.fullmatch(span.strip()) or _PROSE_PATH.fullmatch(span.strip())):
            return m.group(1)
    m = _SHOWN_PATH.search(text) or _PROSE_PATH.search(text)
    return m.group(1) if m else None


def _longest_path(text: str) -> str | None:
    """The longest of the paths a line names before and inside its parentheses ("`a.kt` (`/w/app/src/a.kt`)")."""
    return max(filter(None, (_first_path(part) for part in text.split("(", 1))), key=len, default=None)


def subagent_files(text: str, parsed: dict[str, Any] | None = None) -> list[tuple[str, FileAction]]:
    """Files a subagent's report says it created or changed.

    Only two shapes count, both lists: the section a report gives them ("**Files modified:**",
    "## 修改的文件", "Files created: `a.py`, `b.py`", followed by list items, one path each) and the
    note Hermes itself appends when a child wrote files the parent had read. Claims in sentences
    count as for exports without edit tools (``_claimed_edits``). Read-only sections ("Files
    reviewed") never count.
    """
    if parsed and isinstance(parsed.get("results"), list):  # Hermes: {"results": [{"summary": …}, …]}
        text = "\n\n".join(r["summary"] for r in parsed["results"] if isinstance(r, dict) and isinstance(r.get("summary"), str))
    found: list[tuple[str, FileAction]] = []
    for note in _STALE_NOTE.findall(text):
        found += [(p.strip(), "modified") for p in re.sub(r"\(\+\d+ more\)", "", note).split(",") if p.strip()]
    action: FileAction | None = None
    for line in text.splitlines():
        item = _LIST_ITEM.match(line)
        if item and action:
            if path := _first_path(item.group(1)):
                found.append((path, action))
            continue
        # "- `src/core/evaluator.py` — new file with …", "- `src/core/models.py` — added 4 fields": an entry that
        # says what happened to its file counts under any heading ("Here are the relevant files:").
        # A bare name ("**mock.test.ts** — Added a test") may be any folder's: only a path counts here.
        if item and (said := _ITEM_CHANGE.match(item.group(1))) and (path := _first_path(said.group(1))) and "/" in path:
            found.append((path, "created" if said.group(2).lower() in ("new file", "created", "新建", "新增", "创建")
                          else "modified"))
            continue
        if not line.strip():
            continue
        # "**1. `RegisterViewModel.kt`** (`/Users/…/viewmodel/RegisterViewModel.kt`)", its changes as bullets under it:
        # the entry names the file (the longest spelling of it), the bullets name none.
        if action and (entry := _ENTRY.match(line)) and (path := _longest_path(entry.group(1))):
            found.append((path, action))
            continue
        action = None
        # A heading is short; a long line is prose (and the heading pattern backtracks on it).
        head = _HEADING.match(line.strip()) if len(line) <= 200 else None
        title = head.group(1) if head else ""
        if head and len(title) <= 60 and _CHANGED_FILES.search(title) and not _READ_ONLY.search(title):
            action = "created" if _CREATED.search(title) and not re.search(r"modif|updat|chang|修改|更新", title, re.I) \
                else "modified"
            for span in re.split(r",|，|、|\band\b", head.group(2) or ""):
                if path := _first_path(span):
                    found.append((path, action))
    claimed = [(p, "modified") for p in _claimed_edits(text, ()) if p not in {f for f, _ in found}]
    return [*found, *claimed]


# --------------------------------------------------------------------------- the session's root

#: Files that sit at a project's root: the folder holding one is where the session worked.
_ROOT_MARKERS = frozenset({
    "package.json", "pyproject.toml", "setup.py", "Cargo.toml", "go.mod", "pom.xml", "build.gradle",
    "build.gradle.kts", "settings.gradle", "composer.json", "Gemfile", "requirements.txt", "tsconfig.json",
    "deno.json", ".gitignore", "README.md", "AGENTS.md", "CLAUDE.md", "Makefile", "Dockerfile", "CMakeLists.txt",
    "meson.build", "WORKSPACE", "MODULE.bazel",
    # a workspace's or a lock file's folder: a monorepo's root, above its packages' own package.json
    "pnpm-workspace.yaml", "pnpm-lock.yaml", "yarn.lock", "package-lock.json", "lerna.json", "nx.json", "turbo.json",
    "go.work", "Cargo.lock", "uv.lock", "poetry.lock", "Pipfile", "setup.cfg", "mix.exs", "pubspec.yaml",
    "Package.swift", "deno.jsonc", "LICENSE",
})


def infer_root(messages: Sequence[Message]) -> str | None:
    """The project folder of a session whose export records no cwd (SpecStory, some VS Code exports).

    The folder of a root file the session's tools touched (``…/Forwarder System/package.json``)
    that holds at least half of the absolute paths they touched; with two such, the one holding
    more (a monorepo's root over a package's). Without that evidence, None: paths stay as written.
    """
    paths: list[str] = []
    for m in messages:
        for c in m.tool_calls:
            if (isinstance(c.arguments, dict) and isinstance(p := _arg_path(c.arguments), str)
                    and is_absolute(p := forward_slashes(p.strip()))):
                paths.append(posixpath.normpath(p))
        paths += [posixpath.normpath(p) for u in _EDIT_HEADER.findall(m.content)
                  if is_absolute(p := forward_slashes(_file_uri_path(u)))]
    best: tuple[int, str] | None = None
    for root in {posixpath.dirname(p) for p in paths if posixpath.basename(p) in _ROOT_MARKERS}:
        held = sum(p.startswith(root.rstrip("/") + "/") for p in paths)
        if held * 2 >= len(paths) and (best is None or (held, -len(root)) > (best[0], -len(best[1]))):
            best = (held, root)
    return best[1] if best and best[1] not in ("/", "") else None


def _typed_words(text: str) -> str:
    split = split_paste(text)
    if split is not None:
        return split[0]
    # A message that is all output (a harness sends each pasted part of a build log as its own message: "▲WARNING
    # NG8113: …", "src/app/app.ts:15:2:") says nothing of the user's own language.
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return "" if lines and all(output_line(ln) for ln in lines) else text


def work_root(session: Session) -> str | None:
    """Where the session's relative paths start: its cwd, its git root, else ``infer_root``."""
    return session.cwd or session.git_repo_root or infer_root([m for m in session.messages if not m.is_carrier])


# --------------------------------------------------------------------------- the stage


def _duration(session: Session, messages: Sequence[Message]) -> float | None:
    stamps = [m.timestamp for m in messages if m.timestamp is not None]
    start = session.started_at.timestamp() if session.started_at else (min(stamps) if stamps else None)
    end_dt = session.ended_at or session.last_active_at
    end = end_dt.timestamp() if end_dt else (max(stamps) if stamps else None)
    return round(end - start, 3) if start is not None and end is not None and end >= start else None


def derive_facts(session: Session, chunks: Sequence[Chunk] | None = None) -> Facts:
    """Everything knowable about ``session`` without a model."""
    messages = [m for m in session.messages if not m.is_carrier]
    calls = {c.id: c for m in messages for c in m.tool_calls if c.id}
    names = {i: c.name for i, c in calls.items()}
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    tools: Counter[str] = Counter()
    commands: dict[str, None] = {}
    for m in messages:
        for call in m.tool_calls if m.role == "assistant" else ():
            tools[call.name] += 1
            if call.name.lower() in COMMAND_TOOLS and (cmd := call_command(call.arguments, results.get(call.id or ""))):
                commands.setdefault(_clip(cmd, MAX_COMMAND) if len(cmd) > MAX_COMMAND else cmd, None)

    errors: dict[str, None] = {}
    for m in messages:
        if m.role == "tool":
            call = calls.get(m.tool_call_id or "")
            command = call_command(call.arguments, m) if call is not None and call.name.lower() in COMMAND_TOOLS else None
            found = result_errors(m, names.get(m.tool_call_id or "") or m.tool_name, command)
        elif m.role == "user" and "Traceback (most recent call last)" in m.content:
            found = [e for e in error_lines(m.content) if _EXC_LINE.match(e)]  # a pasted traceback
        else:
            continue
        for e in found:
            errors.setdefault(e, None)

    models = [session.model] if session.model else []
    models += [u.model for u in session.usage if u.model not in models]
    costs = [u.cost_usd for u in session.usage if u.cost_usd is not None]
    # Only what the user typed: a compaction summary or a stream of task notifications in the user role
    # is English written by software, and can outweigh a Chinese user's own asks; so can the terminal output a
    # French user pastes (``split_paste``: the block goes, the sentences around it stay).
    language = session_language((_typed_words(user_words(m.content)) for m in messages if typed_by_user(m)),
                                (m.content for m in messages if m.role == "assistant"))
    return Facts(
        files=tuple(file_touches(messages, work_root(session), source=session.source)),
        commands=tuple(commands),
        errors=tuple(list(errors)[:MAX_ERRORS]),
        tools=dict(tools),
        models=tuple(dict.fromkeys(models)),
        input_tokens=session.input_tokens or sum(u.input_tokens for u in session.usage),
        output_tokens=session.output_tokens or sum(u.output_tokens for u in session.usage),
        cost_usd=session.cost_usd if session.cost_usd is not None else (round(sum(costs), 6) if costs else None),
        duration_s=_duration(session, messages),
        message_count=len(messages),
        user_turns=sum(1 for m in messages if m.role == "user" and m.content.strip()),
        generations=len({c.generation for c in chunks}) if chunks else 1,
        language=language,
    )
