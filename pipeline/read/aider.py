"""aider chat history (``.aider.chat.history.md``): many sessions appended to one file.

A session starts at ``# aider chat started at <local time>``. ``#### `` lines are the user,
``> `` lines are aider's own output (banner, confirmations, results), everything else is the
model. aider has no tool calls, so its observable actions are turned into synthetic ones on
the assistant row they follow: ``> Applied edit to <path>`` becomes ``aider_apply_edit`` with
``{"path"}`` (the most reliable "files produced" signal), a file name followed by ``> Create new
file? (Y)es/(N)o [Yes]: y`` becomes ``aider_create_file`` (unless aider then reports it could not write
it), and ``> Commit <sha> <msg>`` becomes ``aider_commit``; the ``>`` block text is the tool row. Other ``>`` output (errors, token
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
# aider asks before it writes a file the model named that does not exist yet: the name on the line
# above, then "Create new file? (Y)es/(N)o [Yes]: y". A yes is a file created even when no "Applied edit
# to" line follows it (an edit batch that ended in an error still wrote the files it had created).
_CREATE = re.compile(r"^Create new file\? \(Y\)es/\(N\)o\b[^\n]*\]:\s*(\S*)\s*$")
_WRITE_FAILED = re.compile(r"^(?:Unable to write file|Skipping edits to) (.+)$")
_FAILURE_TAIL = re.compile(r" after \d+ attempts\b.*$|: \[Errno \d+\].*$")
# aider logs the user's answer to its own confirmation prompt as a user line ("#### Add file to the chat?
# (Y)es/(N)o/(A)ll/(S)kip all/(D)on't ask again [Yes]: all"): a keypress, not a request.
_PROMPT_ANSWER = re.compile(r"\(Y\)es/\(N\)o\b.*\]:\s*\S*\s*$")
# Reasoning models' thinking, which aider writes into the reply between tags named by a hash.
_THINKING = re.compile(r"<(thinking-content-[0-9a-f]+)>.*?(?:</\1>|\Z)", re.S)
# The end of a diff-format edit block is the model's own text, though it starts with ">" as aider's output does:
# read as aider's, it cut the reply into rows at every edit, each opening on the block's closing fence.
_REPLACE_END = re.compile(r"^>{7} REPLACE\s*$")
_ARCHITECT = re.compile(r"\bwith architect edit format\b|^>\s*\S*aider\S*\s.*--architect\b")
_LAUNCH = re.compile(r"^>\s*(?:\S*[/\\])?aider(?:\.exe)?(?:\s|$)")
_BANNER = re.compile(r"^(Aider v|Main model:|Model:|Weak model:|Editor model:|Git repo:|Repo-map:|Added .* to the chat|Use /help|Cost estimates|https://aider\.chat/HISTORY)")


def _slashes(path: str) -> str:
    return path.strip().strip("'\"").replace("\\", "/")


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
    launch = False  # inside the command line that started aider
    for at, line in enumerate(lines):
        kind = ("user" if line.startswith("####") else "aider" if line.startswith(">") and not _REPLACE_END.match(line)
                else "assistant")
        # "> aider --yes-always --message" then the message's own lines, unprefixed: they are the command's (aider
        # logs the message again as the user's "####" lines), not a reply the model wrote before anyone asked.
        launch = (kind == "aider" and _LAUNCH.match(line) is not None and not any(x.strip() for x in lines[:at])) or (
            launch and kind == "assistant")
        if launch:
            kind = "aider"
            line = line if line.startswith(">") else f"> {line}"
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
            refused = [_slashes(_FAILURE_TAIL.sub("", f.group(1))) for line in body_lines if (f := _WRITE_FAILED.match(line))]
            for i, line in enumerate(body_lines):
                model = model or (m.group(1) if (m := _MODEL.match(line)) else None)
                if ((c := _CREATE.match(line)) and c.group(1).lower() in ("y", "yes") and i
                        and (target := body_lines[i - 1].strip()) and not _CREATE.match(target)
                        and not any(r == _slashes(target) or r.endswith("/" + _slashes(target)) for r in refused)):
                    serial += 1
                    calls.append(ToolCall(id=f"{sid}-n{serial}", name="aider_create_file", arguments={"path": target}))
                elif e := _EDIT.match(line):
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
                    target = call.arguments.get("path") if isinstance(call.arguments, dict) else None
                    content = body if i == 0 else "" if target is None else \
                        f"Created {target}" if call.name == "aider_create_file" else f"Applied edit to {target}"
                    drafts.append(Draft(role="tool", content=content, tool_call_id=call.id, tool_name=call.name))
            elif not all(_BANNER.match(x) or not x.strip() for x in body_lines):
                drafts.append(Draft(role="system", content=body))
    # In architect mode aider hands the architect's reply to the editor model as a user message, logged as "####"
    # lines: the harness talking to its second model, not the user asking for anything.
    if any(_ARCHITECT.search(line) for line in lines[:40]):
        said = ""
        for d in drafts:
            if d.role == "assistant" and d.content:
                said = " ".join(d.content.split())
            elif d.role == "user" and said and " ".join(d.content.split()) == said:
                d.role = "system"
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
