"""Deterministic facts about a session: files touched, commands, errors, tools, usage.

``Facts`` is the grounding authority: the LLM summariser may only claim files and commands that
appear here, so every rule below prefers missing a fact to inventing one.

Files come from tool calls, read three ways:

* **File tools** (Hermes ``write_file``/``patch``/``read_file``, Claude Code ``Write``/``Edit``/
  ``MultiEdit``/``NotebookEdit``/``Read``, editor-style tools): the path argument, overridden by
  the tool *result* when it states ``{"path": ...}`` (ground truth: the tool resolved it).
  A failed result (``success: false``, an ``error``, ``<tool_use_error>``) touched nothing.
* **Patches** (Codex ``apply_patch``, Hermes ``patch`` in V4A mode): ``*** Add/Update/Delete File:``
  and ``*** Move to:`` headers.
* **Shell commands** (``terminal``, ``Bash``, ``exec_command``, ...): ``mv``/``cp``/``rm``/
  ``touch``/``tee``/``sed -i`` and ``>``/``>>`` targets, parsed by ``pipeline.shell`` (which
  explains what it unwraps and ignores). A leading ``cd`` is followed so relative paths resolve.

Each path is recorded once, at its first touch; later touches refine the action (read → modified,
created + modified → created, anything + deleted → deleted). Paths under the session cwd become
cwd-relative; ``~`` is expanded with the home directory implied by the cwd (``/home/<user>``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pipeline.lang import detect_language, guess_language
from pipeline.models import Chunk, Facts, FileAction, FileTouch, Message, Session
from pipeline.shell import command_text, normalise_path, shell_file_ops

COMMAND_TOOLS = frozenset({
    "terminal", "bash", "shell", "exec_command", "shell_command", "exec", "run_terminal_cmd",
    "run_terminal_command", "run_terminal_command_v2", "run_in_terminal", "execute_command",
    "local_shell", "run_shell_command", "execute_bash",
})
_READ_TOOLS = frozenset({"read_file", "read", "read_file_v2", "view_file"})
_WRITE_TOOLS = frozenset({"write_file", "write", "create_file"})
_EDIT_TOOLS = frozenset({
    "patch", "edit", "str_replace", "multiedit", "notebookedit", "edit_file", "edit_file_v2",
    "search_replace", "replace", "insert",
})
_EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool"})
_PATH_KEYS = ("path", "file_path", "target_file", "notebook_path", "filename", "file")

MAX_COMMAND = 300
MAX_ERROR = 200
MAX_ERRORS = 20

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


class _Touches:
    """Ordered, deduplicated FileTouch collector."""

    def __init__(self, cwd: str | None) -> None:
        self.cwd = cwd
        self._by_path: dict[str, FileTouch] = {}

    def add(self, path: str | None, action: FileAction, tool: str | None, base: str | None = None) -> None:
        norm = normalise_path(path, self.cwd, base) if path else None
        if not norm:
            return
        old = self._by_path.get(norm)
        if old is None:
            self._by_path[norm] = FileTouch(path=norm, action=action, tool=tool)
        elif (merged := _merge(old.action, action)) != old.action:
            self._by_path[norm] = FileTouch(path=norm, action=merged, tool=tool)

    def result(self) -> list[FileTouch]:
        return list(self._by_path.values())



# --------------------------------------------------------------------------- tool results


def parse_result(message: Message | None) -> dict[str, Any] | None:
    """A tool result's JSON object, or None when it is plain text."""
    text = (message.content if message else "").strip()
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _exit_code(result: dict[str, Any] | None, text: str) -> int | None:
    if result is not None:
        meta = result.get("metadata")
        code = result.get("exit_code", meta.get("exit_code") if isinstance(meta, dict) else None)
        if isinstance(code, int):
            return code
    m = re.search(r"^Exit code:? (-?\d+)", text, re.M)  # Codex and Claude Code plain-text results
    return int(m.group(1)) if m else None


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


def error_lines(text: str, limit: int = 3) -> list[str]:
    """The most informative error lines in ``text``: exception lines, then test failures, then others."""
    ranked: list[tuple[int, int, str]] = []
    for n, raw in enumerate(text.splitlines()):
        line = raw.strip()
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


def result_errors(message: Message, tool_name: str | None = None) -> list[str]:
    """Error lines from one tool result. File contents (reads, searches) are never scanned."""
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
    tail = [ln for ln in text.splitlines() if ln.strip()]
    return [_clip(tail[-1], MAX_ERROR)] if tail else [f"exit code {_exit_code(result, message.content)}"]


# --------------------------------------------------------------------------- per-call extraction


def _patch_ops(patch: str) -> list[tuple[str, FileAction]]:
    ops: list[tuple[str, FileAction]] = []
    last_update: str | None = None
    for m in _PATCH_HEADER.finditer(patch):
        verb, path, moved_to = m.groups()
        if moved_to:  # ``*** Move to:`` renames the file named by the preceding Update header
            if last_update:
                ops.append((last_update, "deleted"))
            ops.append((moved_to, "moved"))
        else:
            ops.append((path, {"Add": "created", "Update": "modified", "Delete": "deleted"}[verb]))
            last_update = path if verb == "Update" else None
    return ops


def _arg_path(args: dict[str, Any]) -> str | None:
    return next((args[k] for k in _PATH_KEYS if isinstance(args.get(k), str) and args[k]), None)


def _call_touches(name: str, args: dict[str, Any] | str, result_msg: Message | None, out: _Touches) -> None:
    lname = name.lower()
    if result_failed(result_msg) and lname not in COMMAND_TOOLS:
        return  # a failed write or edit changed nothing
    result = parse_result(result_msg)
    patch = args if isinstance(args, str) else args.get("patch") or args.get("input")
    if isinstance(patch, str) and "*** " in patch and _PATCH_HEADER.search(patch):
        for path, action in _patch_ops(patch):
            out.add(path, action, name)
        return
    if lname in COMMAND_TOOLS:
        cmd = command_text(args)
        workdir = args.get("workdir") if isinstance(args, dict) else None
        for path, action, base in shell_file_ops(cmd or "", workdir if isinstance(workdir, str) else None):
            out.add(path, action, name, base)
        return
    if isinstance(args, str):
        return
    stated = result.get("path") if result else None
    path = stated if isinstance(stated, str) and stated else _arg_path(args)
    action: FileAction | None = None
    if lname in _EDITOR_TOOLS:
        action = {"create": "created", "view": "read"}.get(str(args.get("command")), "modified")
    elif lname in _READ_TOOLS:
        action = "read"
    elif lname in _WRITE_TOOLS:
        text = result_msg.content if result_msg else ""
        # Claude Code's Write says which it did; otherwise "created" and _merge downgrades a rewrite.
        action = "modified" if "has been updated" in text else "created"
    elif lname in _EDIT_TOOLS:
        action = "modified"
    if action:
        out.add(path, action, name)


def file_touches(messages: Sequence[Message], cwd: str | None = None) -> list[FileTouch]:
    """Files touched by the tool calls in ``messages``, in first-touch order, one entry per path."""
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    out = _Touches(cwd)
    for m in messages:
        for call in m.tool_calls if m.role == "assistant" else ():
            _call_touches(call.name, call.arguments, results.get(call.id) if call.id else None, out)
    return out.result()


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
    names = {c.id: c.name for m in messages for c in m.tool_calls if c.id}
    tools: Counter[str] = Counter()
    commands: dict[str, None] = {}
    for m in messages:
        for call in m.tool_calls if m.role == "assistant" else ():
            tools[call.name] += 1
            if call.name.lower() in COMMAND_TOOLS and (cmd := command_text(call.arguments)):
                commands.setdefault(_clip(cmd, MAX_COMMAND) if len(cmd) > MAX_COMMAND else cmd, None)

    errors: dict[str, None] = {}
    for m in messages:
        if m.role == "tool":
            found = result_errors(m, names.get(m.tool_call_id or "") or m.tool_name)
        elif m.role == "user" and "Traceback (most recent call last)" in m.content:
            found = [e for e in error_lines(m.content) if _EXC_LINE.match(e)]  # a pasted traceback
        else:
            continue
        for e in found:
            errors.setdefault(e, None)

    models = [session.model] if session.model else []
    models += [u.model for u in session.usage if u.model not in models]
    costs = [u.cost_usd for u in session.usage if u.cost_usd is not None]
    user_texts = [m.content for m in messages if m.role == "user" and m.content.strip()]
    language = guess_language(user_texts) or detect_language(
        m.content for m in messages if m.role in ("user", "assistant")
    )
    return Facts(
        files=tuple(file_touches(messages, session.cwd or session.git_repo_root)),
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
