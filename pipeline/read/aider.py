"""aider chat history (``.aider.chat.history.md``): many sessions appended to one file.

A session starts at ``# aider chat started at <local time>``. ``#### `` lines are the user,
``> `` lines are aider's own output (banner, confirmations, results), everything else is the
model. aider has no tool calls, so its observable actions are turned into synthetic ones on
the assistant row they follow: ``> Applied edit to <path>`` becomes ``aider_apply_edit`` with
``{"path"}`` (the most reliable "files produced" signal) and ``> Commit <sha> <msg>`` becomes
``aider_commit``; the ``>`` block text is the tool row. Other ``>`` output (errors, token
costs) becomes a ``system`` row. There are no per-message times: rows get the session start.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from pipeline.models import Session, ToolCall
from pipeline.read._common import Draft, build_messages, parse_ts, read_text, stable_id, to_datetime

ORIGIN = "aider-md"

_START = re.compile(r"^# aider chat started at (.+?)\s*$")
_MODEL = re.compile(r"^(?:Main model|Model): (\S+)")
_EDIT = re.compile(r"^Applied edit to (.+?)\s*$")
_COMMIT = re.compile(r"^Commit ([0-9a-f]{6,40}) (.*)$")
# aider logs the user's answer to its own confirmation prompt as a user line ("#### Add file to the chat?
# (Y)es/(N)o/(A)ll/(S)kip all/(D)on't ask again [Yes]: all"): a keypress, not a request.
_PROMPT_ANSWER = re.compile(r"\(Y\)es/\(N\)o\b.*\]:\s*\S*\s*$")
# Reasoning models' thinking, which aider writes into the reply between tags named by a hash.
_THINKING = re.compile(r"<(thinking-content-[0-9a-f]+)>.*?(?:</\1>|\Z)", re.S)
# The end of a diff-format edit block is the model's own text, though it starts with ">" as aider's output does:
# read as aider's, it cut the reply into rows at every edit, each opening on the block's closing fence.
_REPLACE_END = re.compile(r"^>{7} REPLACE\s*$")
_BANNER = re.compile(r"^(Aider v|Main model:|Model:|Weak model:|Editor model:|Git repo:|Repo-map:|Added .* to the chat|Use /help|Cost estimates|https://aider\.chat/HISTORY)")


def _strip(line: str, prefix: str) -> str:
    # aider ends every markdown line with two spaces (a hard line break).
    return line[len(prefix):].rstrip()


def read(path: Path) -> Iterator[Session]:
    text = read_text(path)
    sessions: list[tuple[str, list[str]]] = []
    for line in text.split("\n"):
        if m := _START.match(line):
            sessions.append((m.group(1), []))
        elif sessions:
            sessions[-1][1].append(line)
        elif line.strip():
            sessions.append(("", [line]))  # history without a start header (truncated at the top)
    for n, (started, lines) in enumerate(sessions, 1):
        yield _session(path, n, started, lines)


def _session(path: Path, n: int, started: str, lines: list[str]) -> Session:
    ts = parse_ts(started) if started else None
    sid = stable_id("aider", path.resolve().parent.name, path.name, started or n)
    groups: list[tuple[str, list[str]]] = []
    for line in lines:
        kind = ("user" if line.startswith("####") else "aider" if line.startswith(">") and not _REPLACE_END.match(line)
                else "assistant")
        body = _strip(line, "#### " if kind == "user" else "> " if kind == "aider" else "")
        if kind == "aider" and body == ">":
            body = ""
        if groups and groups[-1][0] == kind:
            groups[-1][1].append(body)
        elif kind != "assistant" or body.strip():
            groups.append((kind, [body]))
    drafts: list[Draft] = []
    model = None
    problems: list[str] = []
    serial = 0
    for kind, body_lines in groups:
        body = "\n".join(body_lines).strip()
        if not body:
            continue
        if kind == "user":
            if _PROMPT_ANSWER.search(body):
                drafts.append(Draft(role="system", content=body))
            else:
                drafts.append(Draft(role="user", content=body))
        elif kind == "assistant":
            thinking = "\n".join(m.group(0) for m in _THINKING.finditer(body))
            reply = _THINKING.sub("", body).strip()
            if reply or thinking:
                drafts.append(Draft(role="assistant", content=reply, reasoning=thinking or None))
        else:
            calls: list[ToolCall] = []
            for line in body_lines:
                model = model or (m.group(1) if (m := _MODEL.match(line)) else None)
                if e := _EDIT.match(line):
                    serial += 1
                    calls.append(ToolCall(id=f"{sid}-e{serial}", name="aider_apply_edit", arguments={"path": e.group(1)}))
                elif c := _COMMIT.match(line):
                    serial += 1
                    calls.append(ToolCall(id=f"{sid}-c{serial}", name="aider_commit", arguments={"sha": c.group(1), "message": c.group(2)}))
            if calls:
                if not drafts or drafts[-1].role != "assistant" or drafts[-1].tool_calls:
                    drafts.append(Draft(role="assistant"))
                drafts[-1].tool_calls.extend(calls)
                for i, call in enumerate(calls):
                    # The first result row carries the whole block; the rest name their own target.
                    content = body if i == 0 else f"Applied edit to {call.arguments.get('path', '')}" if isinstance(call.arguments, dict) and "path" in call.arguments else ""
                    drafts.append(Draft(role="tool", content=content, tool_call_id=call.id, tool_name=call.name))
            elif not all(_BANNER.match(x) or not x.strip() for x in body_lines):
                drafts.append(Draft(role="system", content=body))
    if drafts:
        drafts[0].timestamp = ts
    if not started:
        problems.append("history does not start with '# aider chat started at'; start time unknown")
    msgs = build_messages(drafts, mark_compacted=False)
    return Session(
        id=sid,
        source="aider",
        origin=ORIGIN,
        title=None,
        model=model,
        started_at=to_datetime(ts),
        ended_at=None,
        messages=msgs,
        problems=tuple(problems),
    )
