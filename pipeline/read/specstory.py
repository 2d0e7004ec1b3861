"""SpecStory Markdown exports (``.specstory/history/*.md``), all four generations.

There are no machine-readable tool calls, so they are recognised from the markup each
generation uses (see FORMATS.md §1): v2 ``<tool-use data-tool-name=…>`` blocks, v1.5
``Tool use: **name**`` lines, v1 ``Read file:`` lines and ``<details><summary>Edit file: …``
blocks, terminal runs as a command fence plus an output fence. v0 exports carry no tool calls
at all; their assistant prose is kept and nothing is invented. Every recognised call becomes
an assistant row with one ``ToolCall`` (key argument parsed from the summary: ``path``,
``command``, ``query``) and a ``tool`` row holding the block body. Lines inside code fences
are never taken as markup, so a pasted transcript cannot split a turn.
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from pipeline.models import Session, ToolCall
from pipeline.read._common import Draft, build_messages, parse_ts, read_text, stable_id, time_bounds

ORIGIN = "specstory-md"

# v2.1 marks a Claude Code sub-agent's turns "_**Agent - sidechain (model time)**_": the parent's prompt to it
# and its own work, both the agent's side of the session (its tool calls are the session's too).
_TURN = re.compile(r"^_\*\*(User|Assistant|Agent)( - sidechain)?(?:\s*\((.*)\))?\*\*_\s*$")
# v2.1 puts the model before the time: "(gpt-5.3-codex 2026-03-07 00:05:28Z)".
_MODEL_THEN_TIME = re.compile(r"^(\S+)\s+(\d{4}-\d{2}-\d{2}[ T][\d:.]+Z?)$")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_SESSION = re.compile(r"<!--\s*(.+?)\s+Session\s+([0-9a-fA-F-]{8,})\s*(?:\((.*?)\))?\s*-->")
_TITLE = re.compile(r"^#{1,2} (?!SpecStory\s*$)(.+?)(?:\s+\(([^()]*\d{4}[^()]*)\))?\s*$")
_THINK = re.compile(r"<think>.*?</think>", re.S)
#: Cursor's early exports (no session line, no tool blocks) show an applied edit as an empty section between two
#: rules, right after the words that announce it ("Now let's update `App.tsx`:"). It is kept as the empty fence
#: VS Code Copilot's exports show the same way, so facts read the file from those words.
EMPTY_EDIT = "```\n```"
# Copilot's exports of reasoning models glue the reasoning summary into the reply: its titles as bold runs with no space
# between them ("**Checking indentation issues****Fixing the method**"), each straight after the last sentence of its
# text ("…effectively.**Handling existing todo items**"), or one title run into the answer's first word ("**Describing
# TLOG error**The publish failed…"). Markdown written for a reader puts a space or a line break there.
_GLUED_TITLES = re.compile(r"^(?P<pre>.*?)(?P<titles>(?:\*\*[^*\n]{2,120}\*\*){2,})(?P<post>.*)$")
_TITLE_AFTER_SENTENCE = re.compile(r"^(?P<pre>.*[.!?。！？])(?P<titles>\*\*[^*\n\s][^*\n]{1,119}\*\*)(?P<post>.*)$")
_TITLE_INTO_WORD = re.compile(r"^(?P<pre>)(?P<titles>\*\*[^*\n]{2,120}[^*\n\s:：.]\*\*)(?P<post>[^\W\d_].*)$")
_TOOL_USE = re.compile(r"<tool-use\b([^>]*)>(.*?)</tool-use>", re.S)
_ATTR = re.compile(r'data-tool-(\w+)="([^"]*)"')
_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.S)
_V15 = re.compile(r"^Tool use: \*\*([\w.-]+)\*\*")
_PATCH_PATH = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)
_INPUT_BULLET = re.compile(r"^- (\w+): `?(.*?)`?\s*$", re.M)
_SHELL_FENCE = re.compile(r"^```(?:bash|sh|shell|powershell|pwsh|cmd|zsh)\s*$")
# (summary prefix, tool name for v1, argument key)
_SUMMARY_ARGS = (
    ("Edit file:", "edit_file", "path"), ("Read file:", "read_file", "path"), ("Run command:", "run_terminal_cmd", "command"),
    ("Apply patch for", "apply_patch", "path"), ("Listed directory", "list_dir", "path"),
    ("Listed current directory", "list_dir", "path"), ("Searched files", "file_search", "query"),
    ("Searched codebase", "codebase_search", "query"), ("Grep search for", "grep_search", "query"),
    ("Grep for", "grep", "query"), ("Searched web", "web_search", "query"), ("Search files", "file_search", "query"),
    # VS Code Copilot's textEditGroup: "Edit: **LoginController.cs**", the file's bare name in bold
    ("Edit:", "edit_file", "path"),
)


def _split_turns(text: str) -> tuple[list[str], list[tuple[str, str, list[str]]]]:
    """Header lines and ``(speaker, header_arg, lines)`` blocks; fence-aware."""
    header: list[str] = []
    blocks: list[tuple[str, str, list[str]]] = []
    fence: str | None = None
    prev = ""
    for line in text.split("\n"):
        m = _FENCE.match(line)
        t = _TURN.match(line)
        # A marker right after a "---" separator or a closed tool block is a real turn even inside an open
        # fence: exports cut assistant output mid-code-block and never close the fence.
        if t and (fence is None or prev == "---" or prev.endswith("</tool-use>")):
            blocks.append((t.group(1) + (t.group(2) or ""), (t.group(3) or "").strip(), []))
            fence, prev = None, line.strip()
            continue
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark
            elif line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
                fence = None
        if line.strip():
            prev = line.strip()
        (blocks[-1][2] if blocks else header).append(line)
    return header, blocks


def _segments(lines: list[str]) -> list[str]:
    """Split a block on ``---`` separator lines outside code fences and ``<tool-use>`` blocks; a segment left
    empty between two separators stays, as "" (``EMPTY_EDIT`` says why)."""
    out: list[list[str]] = [[]]
    fence: str | None = None
    depth = 0
    for line in lines:
        m = _FENCE.match(line)
        if m:
            fence = m.group(1) if fence is None else (None if line.strip().startswith(fence) and not line.strip().strip(fence[0]) else fence)
        if fence is None:
            depth += line.count("<tool-use") - line.count("</tool-use>")
        if fence is None and depth <= 0 and line.strip() == "---":
            out.append([])
        else:
            out[-1].append(line)
    segments = ["\n".join(seg).strip() for seg in out]
    while segments and not segments[-1]:
        segments.pop()
    return segments[next((i for i, seg in enumerate(segments) if seg), len(segments)):]


# A summary in the editor's own language links the file it works on: "正在读取 [](vscode-vfs://github/o/r/a.sh)",
# "Reading [](file:///c%3A/proj/a.py#1-1), lines 1 to 40". The link is the path whatever the words around it.
_SUMMARY_LINK = re.compile(r"\]\(((?:file|vscode-vfs|vscode-remote)://[^)\s#]+)(?:#[^)\s]*)?\)")


def _link_path(uri: str) -> str:
    """The file a link names: ``file:///c%3A/p/a.py`` → ``c:/p/a.py``; a GitHub repository opened in VS Code
    (``vscode-vfs://github/owner/repo/src/a.py``) → ``src/a.py``, relative to the repository's root."""
    scheme, _, rest = uri.partition("://")
    path = unquote(rest)
    if scheme == "vscode-vfs" and path.startswith("github/"):
        return "/".join(path.split("/")[3:])
    if scheme == "vscode-remote":
        path = "/" + path.split("/", 1)[1] if "/" in path else path  # "ssh-remote+host/home/u/a.py"
    return path[1:] if re.match(r"^/[A-Za-z]:/", path) else path


#: Where a call's arguments name its file, in the spellings the exports use.
_PATH_KEYS = ("path", "filePath", "file_path", "target_file")


def _basename(path: str) -> str:
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def _args_from_summary(summary: str) -> tuple[str | None, dict[str, Any]]:
    args: dict[str, Any] = {"summary": summary} if summary else {}
    for prefix, v1name, key in _SUMMARY_ARGS:
        if summary.startswith(prefix):
            value = summary[len(prefix):].split(" • ")[0].strip()
            if len(value) > 1 and value[0] == value[-1] == '"' and '"' not in value[1:-1]:
                value = value[1:-1]  # a quoted query or path; a command's own closing quote stays ('python -c "…"')
            value = "" if value.startswith(",") else value  # "Listed directory , 0 results"
            if prefix == "Edit:":
                value = value.strip("*` ")
            if value and value != "undefined":
                args[key] = value
            return v1name, args
    if (link := _SUMMARY_LINK.search(summary)) and (path := _link_path(link.group(1))):
        args["path"] = path
    return None, args


def _tool_from_inner(name: str, inner: str, kind: str = "") -> tuple[dict[str, Any], str]:
    """Arguments and body text of one tool block (``inner`` = markup inside the tool wrapper; ``kind`` = its
    ``data-tool-type``)."""
    sm = _SUMMARY.search(inner)
    summary = html.unescape(sm.group(1)).strip() if sm else ""
    summary = re.sub(r"^Tool use: \*\*[\w.-]+\*\*\s*(?:•\s*)?", "", summary).strip()
    _, args = _args_from_summary(summary)
    body = _SUMMARY.sub("", inner)
    body = html.unescape(re.sub(r"</?details>", "", body)).strip()
    if kind == "shell" and "command" not in args and (command := _shell_command(summary, body)):
        args["command"] = command
    # Claude Code's Write is rendered as its content in a fence (then its result): the content is its input.
    if name == "Write" and "content" not in args and (written := _FENCED.match(body)):
        args["content"] = written.group(2).removesuffix("\n")  # the newline before the closing fence is the export's
    if (patch := _rendered_patch(body)) is not None:
        args.setdefault("input", patch)
    paths = _PATCH_PATH.findall(body) or _PATCH_PATH.findall(str(args.get("input", "")))
    if paths:
        args.setdefault("path", paths[0].strip())
        if len(paths) > 1:
            args["paths"] = [p.strip() for p in paths]
    if (params := _PARAMETERS_JSON.search(body)) is not None:
        # v2.1 renders a tool it has no template for by its JSON arguments ("Parameters: ```json {"file_path": …}```",
        # VS Code Copilot's copilot_createFile): they are the call's arguments.
        try:
            given = json.loads(params.group(1))
        except ValueError:
            given = None
        if isinstance(given, dict):
            for key, value in given.items():
                args.setdefault(key, value)
            path = next((given[k] for k in ("filePath", "file_path", "path") if isinstance(given.get(k), str)), None)
            if path:
                args.setdefault("path", path)
    if name.startswith("copilot_") and "path" not in args and (code := _copilot_edit_code(body)) is not None:
        body = code  # as copilot_applyPatch shows it: the new code in one fence, the file left to facts to find
    if "**Input:**" in body:  # Copilot: "- key: `value`" bullets are the real arguments
        given = body.split("**Input:**", 1)[1]
        for key, value in _INPUT_BULLET.findall(given):
            args.setdefault(key, value)
            if key in ("filePath", "file_path", "path") and value:
                args.setdefault("path", value)
        if "map[" in given:
            for key, listed in _go_map_lists(given).items():
                if not args.get(key):
                    args[key] = listed
    return args, body


_PARAMETERS_JSON = re.compile(r"^Parameters:\s*\n+```json\n(\{.*?\})\n```", re.M | re.S)
_RESULT_JSON = re.compile(r"^Result:\s*\n+```json\n(\{.*?\})\n```", re.M | re.S)


def _copilot_edit_code(body: str) -> str | None:
    """The new code of a Copilot edit that names no file (``copilot_replaceString``): its result's JSON holds it as
    ``content``, one fenced block ("```tsx …```"); None for any other body."""
    m = _RESULT_JSON.search(body)
    if m is None:
        return None
    try:
        result = json.loads(m.group(1))
    except ValueError:
        return None
    code = result.get("content") if isinstance(result, dict) else None
    return code.strip() if isinstance(code, str) and code.lstrip().startswith("```") else None


# A list argument of objects is rendered the way Go prints it: a bullet with no value ("- replacements:"), then a
# fence holding "[map[filePath:… newString:… oldString:…] map[…]]" (keys sorted, values unquoted, newlines kept).
_GO_LIST = re.compile(r"^- (\w+):[ \t]*\n+```[^\n]*\n\[(map\[.*?)\]\n```", re.M | re.S)
# A path runs to the next key; a Windows path ("e:\\proj\\a.py") holds no " key:" and no newline.
_GO_PATH = re.compile(r"(?:^|\s|map\[)(filePath|file_path|path):(.+?)(?= [A-Za-z]\w*:|\]|\n|$)", re.M)


def _go_map_lists(given: str) -> dict[str, list[dict[str, str]]]:
    """The file of each object in a Go-rendered list argument (``_GO_LIST``), as the tool's own JSON would hold it:
    VS Code Copilot's ``multi_replace_string_in_file`` edits several files in one call, named only there."""
    out: dict[str, list[dict[str, str]]] = {}
    for m in _GO_LIST.finditer(given):
        items = []
        for part in m.group(2).split("] map["):
            if p := _GO_PATH.search(part):
                items.append({p.group(1): p.group(2).strip()})
        if items:
            out[m.group(1)] = items
    return out


# v2.1 shows a shell call's command as a code span: the summary's whole text (Codex CLI: "Tool use:
# **exec_command** `npm test`") or a line of its own under the call's description (Claude Code's Bash); a
# command of several lines is the ```bash fence the body opens with, before the output's fence.
_SPAN_LINE = re.compile(r"^`([^\n]+)`$")
_LEAD_FENCE = re.compile(r"\A(?:[^`\n][^\n]*\n+)?```(?:bash|sh|shell|zsh|powershell|pwsh|cmd)[ \t]*\n(.*?)\n```", re.S)


def _shell_command(summary: str, body: str) -> str | None:
    """The command of a v2.1 shell block whose summary holds no "Run command:" (see ``_SPAN_LINE``)."""
    if m := _SPAN_LINE.match(summary):
        return m.group(1).strip() or None
    head = body.split("```", 1)[0]
    for line in head.strip().split("\n"):
        if m := _SPAN_LINE.match(line.strip()):
            return m.group(1).strip() or None
    if m := _LEAD_FENCE.match(body):
        return m.group(1).strip() or None
    return None


# SpecStory's Codex CLI export renders an ``apply_patch`` input as one section per file: a bold header
# ("**Update: `src/a.js`**"; Add, Modify, Update, Delete) over a ```diff fence of that file's patch lines,
# a Delete header over nothing. A "*** Move to:" line stays inside the fence, as the patch had it.
_RENDERED_HEADER = re.compile(r"^\*\*(Add|Modify|Update|Delete): `([^`\n]+)`\*\*[ \t]*$", re.M)
# The fence SpecStory wraps content in is longer than any backtick run inside it.
_FENCED = re.compile(r"^(`{3,})[^\n`]*\n(.*?)^\1[ \t]*$", re.M | re.S)
_RENDERED_VERB = {"Add": "Add", "Modify": "Update", "Update": "Update", "Delete": "Delete"}


def _rendered_patch(body: str) -> str | None:
    """The ``*** Begin Patch`` text a rendered apply_patch block was made from (headers and patch
    lines), so the call carries its input as Codex's own rollout does; None for any other body."""
    headers = list(_RENDERED_HEADER.finditer(body))
    if not headers:
        return None
    lines = ["*** Begin Patch"]
    for i, h in enumerate(headers):
        verb, path = h.group(1), h.group(2).strip()
        lines.append(f"*** {_RENDERED_VERB[verb]} File: {path}")
        section = body[h.end():headers[i + 1].start() if i + 1 < len(headers) else len(body)]
        # the fence follows its header; a match anchored there costs one pass (a search could restart at every "```")
        if verb != "Delete" and (fence := _FENCED.match(section.lstrip())):
            lines.extend(fence.group(2).rstrip("\n").split("\n"))
    lines.append("*** End Patch")
    return "\n".join(lines)


#: A call in a session Codex imported from another agent (Cursor): the tool's name, then ``input: {json}`` or
#: ``key: value`` lines, and no result at all.
_EXTERNAL_CALL = re.compile(r"^\[external_agent_tool_call: ([\w.-]+)\]\n(.*?)^\[/external_agent_tool_call\]\s*$",
                            re.M | re.S)
_KEY_LINE = re.compile(r"^(\w+): ?(.*)$")


def _external_args(given: str) -> dict[str, Any]:
    """An imported call's arguments: its ``input:`` JSON object, else its ``key: value`` lines."""
    args: dict[str, Any] = {}
    for line in given.strip().split("\n"):
        m = _KEY_LINE.match(line)
        if m is None:
            if args:  # a value that runs over lines (a command with line breaks)
                last = next(reversed(args))
                args[last] = f"{args[last]}\n{line}" if isinstance(args[last], str) else args[last]
            continue
        key, value = m.groups()
        if key == "input" and value.startswith("{"):
            try:
                loaded = json.loads(value)
            except ValueError:
                loaded = None
            if isinstance(loaded, dict):
                args.update(loaded)
                continue
        args[key] = value
    return args


#: A tool call read from an export: its name, arguments and result text (None: the export recorded no result).
_Call = tuple[str, dict[str, Any], str | None]


def _split_calls(segment: str, pattern: re.Pattern[str], call: Callable[[re.Match[str]], _Call]) -> list[_Call | str]:
    """``segment`` cut at each match of ``pattern``: the prose between the calls (none empty) and each call, in order."""
    parts: list[_Call | str] = []
    pos = 0
    for m in pattern.finditer(segment):
        if segment[pos:m.start()].strip():
            parts.append(segment[pos:m.start()].strip())
        parts.append(call(m))
        pos = m.end()
    if segment[pos:].strip():
        parts.append(segment[pos:].strip())
    return parts


def _tool_use_call(m: re.Match[str]) -> _Call:
    attrs = dict(_ATTR.findall(m.group(1)))
    name = attrs.get("name") or "unknown"
    args, body = _tool_from_inner(name, m.group(2), attrs.get("type", ""))
    return name, args, body


def _classify(segment: str) -> list[_Call | str]:
    """A segment as a list of tool calls ``(name, args, body)`` and prose strings, in order."""
    if "[external_agent_tool_call:" in segment:
        return _split_calls(segment, _EXTERNAL_CALL, lambda m: (m.group(1), _external_args(m.group(2)), None))
    if "<tool-use" in segment:
        return _split_calls(segment, _TOOL_USE, _tool_use_call)
    first, _, rest = segment.partition("\n")
    first = first.strip()
    if m := _V15.match(first):
        name = m.group(1)
        args, body = _tool_from_inner(name, rest)
        if not args.get("path") and (rf := re.search(r"^Read file: (.+)$", rest, re.M)):
            args["path"] = rf.group(1).strip()
        return [(name, args, body)]
    if first.startswith("Read file:"):
        _, args = _args_from_summary(first)
        return [("read_file", args, rest.strip())]
    if first == "Cancelled":
        return []
    if first.startswith("<details") and (sm := _SUMMARY.search(segment)):
        name, _ = _args_from_summary(html.unescape(sm.group(1)).strip())
        args, body = _tool_from_inner(name or "details", segment)
        return [(name or "details", args, body)]
    if _SHELL_FENCE.match(first) and _is_only_fences(segment):
        command = segment.split("\n```", 1)[0].partition("\n")[2].strip()
        return [("run_terminal_cmd", {"command": command}, segment)]
    return [segment]


def _is_only_fences(segment: str) -> bool:
    outside, fence = [], None
    for line in segment.split("\n"):
        m = _FENCE.match(line)
        if m:
            fence = None if fence else m.group(1)
        elif fence is None and line.strip():
            outside.append(line)
    return not outside


#: How a reasoning summary talks: the model planning in the first person, present or future ("I need to be careful",
#: "I'm planning to", "I'll reference specific files"); an answer reports what was done.
_PLANNING = re.compile(r"\bI(?:['’]m| am| need| plan| will|['’]ll| should| want| think| could| must)\b|\bLet me\b")
_TITLE_LINE = re.compile(r"^\*\*[^*\n]{2,120}\*\*\s*$")
# A sentence run into the next with no space ("…to see what's wrong.I found the issue."): where reasoning ends.
_RUN_ON = re.compile(r"(?<=[a-z)`'][.!?:])(?=[A-Z*#`])")
# English planning run into the answer in another script: "…provide clear next steps in Chinese.已在源头修正 Svelte…".
_INTO_CJK = re.compile(r"^(?P<pre>[\x00-\u024f’“”—–…]*[.!?])(?P<titles>)(?P<post>[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af].*)$")


def _glued_reasoning(text: str, copilot: bool) -> tuple[str, str]:
    """(the reply, the reasoning summary glued into it) for a Copilot reply (``_GLUED_TITLES``): the titles and the
    text before them on their line are reasoning, the rest of the line is the reply. In a Copilot session
    (``copilot``), a reply that opens with a title on its own line is a reasoning summary while its paragraphs plan in
    the first person (``_PLANNING``), and English planning run into an answer in Chinese or Japanese is reasoning.
    Other text is returned as it is."""
    if "**" not in text and not copilot:
        return text, ""
    kept: list[str] = []
    thought: list[str] = []
    paragraphs = text.split("\n\n")
    if copilot and paragraphs[0].startswith("The user ") and len(paragraphs[0].split()) > 3:
        # "The user wants me to… Let me look at it.I found the issue.": the reasoning speaks of the user; the answer
        # starts where a sentence is run into the next with no space, else with the next paragraph.
        head, *rest = paragraphs[0].split("\n")
        glued = _RUN_ON.search(head)
        if glued is not None:
            thought.append(head[:glued.start()])
            paragraphs[0] = "\n".join([head[glued.start():], *rest])
        elif len(paragraphs) > 1:
            thought.append(paragraphs.pop(0))
    if copilot and _TITLE_LINE.match(paragraphs[0]) and len(paragraphs) > 1 and _PLANNING.search(paragraphs[1]):
        thought.append(paragraphs.pop(0).strip().strip("*"))
        while paragraphs and _PLANNING.search(paragraphs[0].split("\n")[0]):
            lines = paragraphs[0].split("\n")
            while lines and _PLANNING.search(lines[0]):
                m = _INTO_CJK.match(lines[0])  # the answer may start on the planning's last line
                if m is not None:
                    thought.append(m["pre"])
                    lines[0] = m["post"]
                    break
                thought.append(lines.pop(0))
            if lines:  # the answer starts inside the paragraph ("…in Chinese.已在源头修正", a list after the plan)
                paragraphs[0] = "\n".join(lines)
                break
            paragraphs.pop(0)
    for line in "\n\n".join(paragraphs).split("\n"):
        m = _GLUED_TITLES.match(line) or _TITLE_AFTER_SENTENCE.match(line) or _TITLE_INTO_WORD.match(line) or (
            _INTO_CJK.match(line) if copilot and _PLANNING.search(line) else None)
        if m is None:
            kept.append(line)
            continue
        thought += [x for x in (m["pre"].strip(), *re.findall(r"\*\*([^*\n]+)\*\*", m["titles"])) if x]
        if m["post"].strip():
            kept.append(m["post"])
    return "\n".join(kept).strip(), "\n".join(thought)


def read(path: Path) -> Iterator[Session]:
    text = read_text(path)
    header, blocks = _split_turns(text)
    head = "\n".join(header)
    sm = _SESSION.search(head)
    title, title_ts = None, None
    for line in header:
        if tm := _TITLE.match(line):
            title, title_ts = tm.group(1).strip(), parse_ts(tm.group(2)) if tm.group(2) else None
            break
    start = title_ts or (parse_ts(sm.group(3)) if sm and sm.group(3) else None)
    if title and parse_ts(title) is not None and re.fullmatch(r"[\d\-/: TZ]+", title):
        start, title = start or parse_ts(title), None  # v2 uses the timestamp as the title
    sid = sm.group(2) if sm else stable_id("specstory", title, start, path.name if not title else "")
    # VS Code Copilot ("vscode Session", "VS Code Copilot IDE Session"): reasoning summaries are glued into replies
    copilot = bool(sm and re.search(r"vs ?code|copilot", sm.group(1), re.I))
    early_cursor = sm is None and head.lstrip().startswith("<!-- Generated by SpecStory -->")
    problems: list[str] = []
    drafts: list[Draft] = []
    models: Counter[str] = Counter()
    serial = 0
    seen: dict[str, set[str]] = {}  # base name → the full paths the calls so far named with it
    for speaker, arg, lines in blocks:
        if mt := _MODEL_THEN_TIME.match(arg):
            model_arg, ts = mt.group(1), parse_ts(mt.group(2))
        else:
            model_arg, ts = ("" if arg[:1].isdigit() else arg), (parse_ts(arg) if arg[:1].isdigit() else None)
        if speaker == "User":
            body = "\n".join(lines).strip().strip("-").strip()
            if body:
                drafts.append(Draft(role="user", content=body, timestamp=ts))
            continue
        if model_arg and model_arg != "default" and not speaker.endswith("sidechain"):
            models[re.sub(r"^model\s+", "", model_arg.split(",")[0]).strip()] += 1
        cur: Draft | None = None
        last_tool: _Call | None = None
        for seg in _segments(lines):
            if not seg:
                if (early_cursor and cur is not None and cur.content and not cur.tool_calls
                        and not cur.content.endswith(EMPTY_EDIT)):
                    cur.content = f"{cur.content}\n\n{EMPTY_EDIT}"
                continue
            reasoning = "\n".join(t[len("<think>"):-len("</think>")] for t in _THINK.findall(seg))
            seg = _THINK.sub("", seg).strip()
            if not seg.startswith(("<tool-use", "```")):  # a tool's body is its output, not the reply
                seg, glued = _glued_reasoning(seg, copilot)
                reasoning = f"{reasoning}\n{glued}".strip()
            for part in _classify(seg) if seg else []:
                if isinstance(part, str):
                    if cur is None or cur.tool_calls:
                        cur = Draft(role="assistant", timestamp=ts)
                        drafts.append(cur)
                    cur.content = f"{cur.content}\n\n{part}".strip()
                    continue
                name, args, body = part
                # Cursor v2 writes an empty twin block after many tool uses; it is not a second call.
                if not body and set(args) <= {"summary"} and not args.get("summary") and last_tool and last_tool[0] == name:
                    continue
                last_tool = part
                path = next((v for k in _PATH_KEYS if isinstance(v := args.get(k), str) and v), None)
                if path is not None and ("/" in path or "\\" in path):
                    seen.setdefault(_basename(path), set()).add(path)
                elif (path is not None and str(args.get("summary", "")).startswith("Edit:")
                      and len(known := seen.get(path, set())) == 1):
                    # Copilot's edit group keeps only the file's name ("Edit: **LoginController.cs**"): the one file
                    # of that name the session named before. (A bare "Read file: pom.xml" is the root's pom.xml.)
                    args = {**args, "path": next(iter(known))}
                serial += 1
                call = ToolCall(id=f"{sid}-t{serial}", name=name, arguments=args)
                if cur is None or cur.tool_calls:
                    cur = Draft(role="assistant", timestamp=ts)
                    drafts.append(cur)
                cur.tool_calls.append(call)
                if body is not None:
                    drafts.append(Draft(role="tool", content=body, tool_call_id=call.id, tool_name=name, timestamp=ts))
            if reasoning and cur is not None:
                cur.reasoning = f"{cur.reasoning or ''}\n\n{reasoning}".strip()
    if not blocks:
        problems.append("no _**User**_ / _**Agent**_ turn markers found")
    if drafts and drafts[0].timestamp is None:
        drafts[0].timestamp = start
    messages = build_messages(drafts, mark_compacted=False)
    started, ended = time_bounds(messages)
    return_model = models.most_common(1)[0][0] if models else None
    yield Session(
        id=sid,
        source="specstory",
        origin=ORIGIN,
        title=title,
        title_source="specstory" if title else None,
        model=return_model,
        started_at=started,
        ended_at=ended,
        last_active_at=ended,
        messages=messages,
        problems=tuple(problems),
    )
