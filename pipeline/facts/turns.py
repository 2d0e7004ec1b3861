"""What kind of turn a message is: an ask, an acknowledgement, or nothing the user typed.

Shared by the extractive summariser (``pipeline/summarize/extractive.py``) and the end-state inference
(``pipeline/facts/endstate.py``), so both read a transcript the same way. It imports neither, so the
chain stays one-way: extractive → endstate → turns.

* A user message is an *ask* unless it is a carrier, harness scaffolding, a slash command, a
  pure paste (logs/tracebacks/code with no prose line), or a short acknowledgement.
* Acks come in two kinds: "thanks, that's all"/"looks good" *close* the work; "continue"/"yes"/"继续"
  hand the turn back to the agent (*go*), so what follows them is still the answer to a request. A
  bare "ok"/"好的" is *go* after an assistant question and *close* otherwise; "ok"/"done" after a
  step handed to the user ("restart the server and try again") is *go*: it says the user did it,
  not that it worked.
* Whatever comes after a closer ("👍") says nothing about the work, so outcomes are judged on the
  messages before it (``_until_closer``).

Every message is classified a few times per summary, so ``_kind`` is kept cheap (one compiled
pattern for acks, a prose scan that stops at the first prose line, a small cache on the text) and
no helper rescans the messages before an index (no quadratic loops): a 500-session run spent ~11 s
here before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from pipeline.models import Message

_HARNESS = (
    "Review the conversation above", "Continue from the compressed conversation context above",
    "[CONTEXT COMPACTION", "[CONTEXT SUMMARY]", "[PRIOR CONTEXT", "[Note: Some earlier conversation",
    "<command-name>", "<command-message>", "<local-command", "<system-reminder>", "<environment_context>",
    "<user_instructions>", "<task-notification>", "<bash-input>", "<bash-stdout>", "# AGENTS.md instructions",
    "Caveat: The messages below", "This session is being continued from a previous conversation",
    "<skill>\n<name>",  # Codex inlining a skill's SKILL.md the user invoked ("$rhwp-edit …")
    # Claude Code's answer to a slash command it does not know, posted in the user's role after its local-command caveat
    "Unknown skill: ", "Unknown command: ", "Unknown slash command: ",
)
# A notice the harness posts in the user's role about a tool the agent started: VS Code Copilot's "[Terminal 3ad7…
# notification: command completed with exit code 1. …] Terminal output: …", Hermes's "[IMPORTANT: Background process
# proc_4c26… completed (exit code -15). Command: … Output: …]" and "[ASYNC DELEGATION BATCH COMPLETE …". It is a
# tool result, not a turn: it stays in the live transcript (its output is evidence) but it is no ask, and it is
# not what the user typed.
_NOTICE = re.compile(r"\[(?:Terminal [0-9a-f][0-9a-f-]{7,} notification:|IMPORTANT: (?:Background process|\d+ background "
                     r"processes)\b|ASYNC DELEGATION\b)", re.I)
# What an agent's harness writes into the transcript when the run is cut short: usage and rate limits,
# API and connection errors, a user interrupt. Short lines, never a reply or an ask (see ``harness_error``).
_HARNESS_ERROR = re.compile(
    r"you[’']?ve hit your (?:[\w-]+ ){0,2}limit|you[’']?re out of (?:extra )?usage|usage limit (?:reached|exceeded)"
    r"|usage_limit_exceeded|credit balance is too low|does not have access to claude|please run /login"
    r"|prompt is too long|^api ?error\b|api(?:connection|timeout|status)?error|rate[ _-]?limit(?:ed| exceeded| reached)?"
    r"|too many requests|model_not_found|overloaded_error|connection error|request timed out|network error"
    r"|\[request interrupted by user|interrupted by user|^\^c\b|keyboardinterrupt"
    # Codex: "<turn_aborted> The user interrupted the previous turn on purpose. …"
    r"|^<turn_aborted>|the user interrupted the previous turn"
    r"|\b(?:error code|status(?:_code)?)[: ]+(?:4\d\d|5\d\d)\b", re.I)
#: A literal every branch of ``_HARNESS_ERROR`` needs, lowercased. ``harness_error`` runs on nearly every
#: message, and Python's ``re`` tries each of the pattern's ~20 branches at each position (60 µs a line,
#: ~9 % of a cold run). For ASCII text ``re.I`` folds exactly as ``str.lower`` does, so a text holding
#: none of these cannot match; other text takes the full pattern (its case folding is Unicode's).
_HARNESS_ERROR_NEEDS = ("limit", "out of extra usage", "out of usage", "access to claude", "/login",
                        "credit balance", "too long", "api", "too many", "model_not_found",
                        "overloaded_error", "connection error", "timed out", "network error",
                        "interrupted by user", "^c", "keyboardinterrupt", "error code", "status", "<turn_aborted>",
                        "interrupted the previous turn")
_SLASH = re.compile(r"^/[A-Za-z][\w-]*(?:\s|$)")  # "/model gpt-5", but not "/home/ana/x.py is broken"
_MODE_ASK = re.compile(r"^/(?:ask|code|architect|context)[ \t]+(?=\S)")
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_LOGLINE = re.compile(
    r"^(?:\s{4,}|\t|\s*(?:Traceback|File \"|at [\w.$<]|E\s{2,}|\[?\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|\$ |>>> |\|"
    r"|(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE|FAILED|PASSED)\b|[\w.]*(?:Error|Exception)\b|[-=_*#~]{4,}"
    r"|npm (?:error|ERR!|warn|WARN)\b"
    # a compiler's diagnostic: "▲WARNING NG8113: …", "X ERROR TS2307: …", "✘ [ERROR] …", "src/app/app.ts:15:2:",
    # "src/a.ts(3,5): error TS2322"
    r"|[▲✘×⚠X!]\s*\[?(?:WARNING|ERROR)\b|[\w./\\-]+\.\w+:\d+:\d+:?$|[\w./\\-]+\.\w+\(\d+,\d+\): (?:error|warning)\b))"
)
_CLOSERS = ("no thanks", "thank you", "thanks", "thx", "that's all", "thats all", "that is all", "bye",
            "谢谢", "谢谢你", "谢谢您", "多谢", "感谢", "不用了", "就这样", "辛苦了",
            # thanks in the other languages sessions are written in
            "ありがとう", "ありがとうございます", "ありがとうございました", "gracias", "obrigado", "obrigada", "merci",
            "danke", "спасибо", "감사합니다", "grazie", "grazie mille", "수고", "수고했어", "수고했어요", "수고하셨습니다",
            "고마워", "고마워요", "고맙습니다", "valeu", "dzięki", "dziękuję", "teşekkürler", "teşekkür ederim", "sağol",
            "cảm ơn", "bedankt", "дякую", "ممنون", "مرسی", "متشکرم", "سپاس", "شكرا", "شكراً")
_CONTINUE = ("continue", "proceed", "go on", "keep going", "go ahead", "do it", "please do", "next one", "next",
             "继续", "下一个")
_YES = ("yes", "yep", "yeah", "sure", "是的")
_PLEASED = ("looks good", "lgtm", "perfect", "great", "nice", "cool", "awesome", "all good", "good", "done",
            "it worked", "that worked", "worked", "it works", "works now", "working now", "that did it",
            "完美", "没问题", "很好", "太好了", "可以了", "成功了", "解决了", "عالی", "عالیه", "عالی شد", "خیلی خوب",
            "отлично", "супер", "prima", "super", "parfait", "génial", "perfecto", "genial", "ótimo", "perfeito")
# Whether these approve or accept depends on what the agent said last (see _ack_role).
_OK = ("for now", "okay", "ok", "no", "好的", "可以", "好", "行", "嗯")
_ACKS = _CONTINUE + _YES + _PLEASED + _OK
_ACK_WORDS = re.compile("|".join(re.escape(w) for w in sorted(_CLOSERS + _ACKS, key=len, reverse=True)))


#: A word's worth of text: a CJK character, or a word of two or more letters in any other script.
UNITS = re.compile(r"[\u3400-\u9fff]|[^\W\d_\u3400-\u9fff]{2,}")

#: A list item's mark ("- ", "2. ", "• "): what follows it may still be a typed sentence.
_ITEM_MARK = re.compile(r"^(?:[-*•›]|\d{1,2}[.)、])\s+")
#: A compiler's code frame: "  9 │   imports: NgFor, NgIf", "╵".
_CODE_FRAME = "[│┃╵╷]"
_CODE_FRAME_RE = re.compile(_CODE_FRAME)
#: A line no one types as a sentence: a comment or heading mark, a redirect or curl's "> "/"< "/"*   ", a bracket, a
#: ``KEY=value`` line, a container log prefix ("backend  | …"), a shell prompt ("PS C:\\app>", "C:\\app>",
#: "ana@box:~/app$ "), a column of a table, a code frame.
_MACHINE_LINE = re.compile(r"^(?:[#<>+|$\[{}()\\/~=@%&^`'\"]|\*\s{2,}|[\w.-]+=\S|[\w.-]+\s+\|\s"
                           r"|PS [A-Za-z]:|[A-Za-z]:\\\S*>|[\w.-]+@[\w.-]+:\S*[$#]\s"
                           # a shell's own error line: "install.sh: line 5: Pay: command not found"
                           r"|[\w./~-]+: line \d+: )|\s\|\s.*\s\|\s|: command not found$"
                           r"|" + _CODE_FRAME)


def output_line(line: str) -> bool:
    """A line of a program's output: a log or diagnostic line (``_LOGLINE``) or a compiler's code frame."""
    return bool(_LOGLINE.match(line) or _CODE_FRAME_RE.search(line))


def typed_line(line: str) -> bool:
    """A line someone typed as a sentence: not a log, a diagnostic or a machine line, and three words or more."""
    body = _ITEM_MARK.sub("", line)
    return not _LOGLINE.match(line) and not _MACHINE_LINE.search(body) and len(UNITS.findall(body)) >= 3


def split_paste(text: str) -> tuple[str, str] | None:
    """(what the user typed, what they pasted) when an ask wraps a pasted block in a sentence or two: "the result
    follows:" then a terminal session, an ``.env`` file, a container log. The block is three or more lines not typed as
    sentences (``typed_line``), at least half of those from its first to its last; the typed lines before and after
    it are the ask. None when there is no such block (a typed list of requests is all sentences)."""
    lines = [ln.strip() for ln in _FENCE.sub("\n", text).splitlines() if ln.strip()]
    typed = [typed_line(ln) for ln in lines]
    machine = [i for i, t in enumerate(typed) if not t]
    if len(machine) < 3:  # "with finally { Shutdown(); }": a snippet typed into the ask is part of it
        return None
    first, last = machine[0], machine[-1]
    if 2 * len(machine) < last - first + 1:
        return None
    said = [ln for i, ln in enumerate(lines) if typed[i] and not first <= i <= last]
    return "\n".join(said), "\n".join(lines[first:last + 1])


def _live(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if not m.is_carrier and not (
        m.content.lstrip().startswith(_HARNESS) and not (m.role == "user" and _command_asks(m.content.lstrip())))]


def echoes(messages: Sequence[Message]) -> set[int]:
    """Indexes of user messages that only repeat an earlier reply word for word: pasted back into the chat (a confused
    aider user pasting the agent's own question "¿Hay algo específico…?", then read as the last ask), or aider's
    architect handing its plan to the editor model. Neither is the user asking for something."""
    said: set[str] = set()
    out: set[int] = set()
    for i, m in enumerate(messages):
        if m.role == "assistant" and len(m.content) >= 20:
            said.add(" ".join(m.content.split()))
        elif m.role == "user" and said and len(m.content) >= 20 and " ".join(m.content.split()) in said:
            out.add(i)
    return out


#: A letter (of any script). Compiled once: ``_prose`` asks it of every line of every message.
_LETTER = re.compile(r"[^\W\d_]")


def _prose(text: str) -> str:
    """The typed part of a message: fences, log/trace/code lines and blank lines dropped."""
    lines = [ln.strip() for ln in _FENCE.sub("\n", text).splitlines()]
    return "\n".join(ln for ln in lines if ln and not _LOGLINE.match(ln) and _LETTER.search(ln))


def _has_prose(text: str) -> bool:
    """``bool(_prose(text))`` without building it: stops at the first prose line."""
    return any(ln and not _LOGLINE.match(ln) and _LETTER.search(ln)
               for ln in (raw.strip() for raw in _FENCE.sub("\n", text).splitlines()))


#: Words that turn a thank-you into a report of trouble or a new request ("still 404, thanks").
_NOT_CLOSED = re.compile(
    r"(?<![^\W\d_])(?:still|but|not|no longer|doesn'?t|didn'?t|isn'?t|won'?t|can'?t|cannot|fail\w*|error\w*|broke\w*|"
    r"wrong|again|also|please|could|can you|would|instead|later|tomorrow|try|check|test|i'?ll|i will|let me|will see)"
    r"(?![^\W\d_])|还是|不行|出错|报错|失败|但是|不过|再|请|能不能|可以帮|稍后|明天|试试|看看|回头",
    re.I)


def _is_ack(text: str) -> bool:
    return len(text) <= 60 and not re.sub(r"[\W_]+", "", _ACK_WORDS.sub(" ", text.lower()))


def _is_thanks(text: str) -> bool:
    """A short line that ends on thanks and asks for nothing more ("it finished fine, thanks!")."""
    low = text.lower().rstrip(" !.。！~:)🙂👍🙏")
    return (len(text) <= 80 and "?" not in text and "？" not in text and low.endswith(_CLOSERS)
            and not _NOT_CLOSED.search(low))


def harness_error(msg: Message) -> bool:
    """A line the harness wrote when the run was cut short ("You've hit your limit", "API Error: 529",
    "[Request interrupted by user]"): neither the agent's reply nor the user's ask.

    Only short messages count: a reply that explains a 429 at length is still a reply.
    """
    if msg.role == "tool" or msg.tool_calls:
        return False
    return _harness_text(msg.content)


@lru_cache(maxsize=1024)
def _harness_text(content: str) -> bool:
    # Cached like ``_text_kind``: every helper asks again about the same messages (~4 times each).
    text = content.strip()
    if not 0 < len(text) <= 300:
        return False
    if text.isascii() and not any(map(text.lower().__contains__, _HARNESS_ERROR_NEEDS)):
        return False
    return bool(_HARNESS_ERROR.search(text))


# Hermes wraps what the user typed when a skill runs (``/skill-name do X``, a cron job's skills): a notice that the
# skill was invoked, the whole SKILL.md, then "The user has provided the following instruction alongside the skill
# invocation: <what they typed>". A cron job's prompt opens with "[IMPORTANT: You are running as a scheduled cron
# job. …]" (agent/skill_commands.py, cron/scheduler.py in hermes-agent 0.19).
_SKILL_INSTRUCTION = "The user has provided the following instruction alongside the skill invocation: "
_SKILL_INVOKED = re.compile(r'\[IMPORTANT: The user (?:has invoked|launched this CLI session with) the "([^"]+)" '
                            r"(?:skill|stacked skill bundle|skill bundle)\b")


# GitHub spec-kit's slash commands (/speckit.specify, /speckit.plan …, in Codex and Claude Code) send the command's
# whole prompt with what the user typed in a fence under "## User Input": the English template is not their words.
_SPECKIT_INPUT = re.compile(r"^\s*## User Input\s*\n+```(?:text)?\n(.*?)\n```", re.S)


# spec-kit's first templates (September 2025) open "The user input to you can be provided directly by the agent or as a
# command argument - you **MUST** consider it …", then "User input:" and the input, then the template's own English.
_SPECKIT_PREAMBLE = "The user input to you can be provided directly by the agent or as a command argument"
_SPECKIT_INPUT_V0 = re.compile(r"^User input:[ \t]*\n+(.*?)(?:\n[ \t]*\n|\Z)", re.S | re.M)


_FRONTMATTER = re.compile(r"---\n(?:[^\n]*\n){0,20}?---\n(.*)\Z", re.S)


def _speckit_typed(text: str) -> str | None:
    """What the user typed with a spec-kit command ("" for none), or None when ``text`` is no spec-kit prompt. The
    prompt comes as expanded (``## User Input`` first) or as its file, frontmatter and an unsubstituted ``$ARGUMENTS``."""
    body = text.lstrip()
    if body.startswith("---\n") and (front := _FRONTMATTER.match(body)):
        body = front.group(1).lstrip()
    if body.startswith(_SPECKIT_PREAMBLE) and (m := _SPECKIT_INPUT_V0.search(body, 0, 600)):
        typed = m.group(1).strip()  # the first templates: "User input:", then the input (or its placeholder)
    elif body.startswith("## User Input") and (m := _SPECKIT_INPUT.match(body)):
        typed = m.group(1).strip()
    else:
        return None
    return "" if typed == "$ARGUMENTS" else typed


# A custom prompt (a Codex ``/prompts:…`` file, a Claude Code command) sent as its file with its ``$ARGUMENTS``
# placeholder left in, and what the user typed with it appended after the template: "…## User's Request\n```text\n
# $ARGUMENTS\n```\nRompendo la retro-compatibilità … rimuovi questi comandi". The words after the placeholder's line
# (or its fence) are the user's; the template before it is the tool's.
_PLACEHOLDER_LINE = re.compile(r"^[^\n]*\$ARGUMENTS\b[^\n]*\n(?:```[ \t]*\n)?", re.M)


def _after_placeholder(text: str) -> str | None:
    """What follows a template's unsubstituted ``$ARGUMENTS`` (see ``_PLACEHOLDER_LINE``), or None when there is no
    such placeholder or nothing typed after it."""
    if "$ARGUMENTS" not in text:
        return None
    placeholders = list(_PLACEHOLDER_LINE.finditer(text))
    typed = text[placeholders[-1].end():].strip() if placeholders else ""
    return typed or None


# An app-builder platform (Lilo) wraps each request in its own instructions, in its own language, and quotes what the
# user typed: '🔴 LIVE PREVIEW MODE - Der User sieht … User-Anfrage: "make the UI look like apple iOS" ⚡ WICHTIG: …'.
_QUOTED_REQUEST = re.compile(r'^[^\S\n]*User[- ](?:Anfrage|[Rr]equest)[^\S\n]*:[^\S\n]*"([^"]+)"', re.M)


# BMAD-METHOD's agent commands send the agent's whole persona file ("You must fully embody this agent's persona and
# follow all activation instructions…"): the tool's text, no ask and no evidence of the user's language.
_PERSONA_LOAD = "You must fully embody this agent's persona"
#: Codex's scheduled automations open each run's prompt with their own header; the automation's name is the user's
#: (they named the job), the ID, memory path and last-run stamp are the harness's.
_AUTOMATION = re.compile(r"\A\s*Automation: ([^\n]*)\nAutomation ID: [^\n]*\n(?:Automation memory: [^\n]*\n)?"
                         r"(?:Last run: [^\n]*\n)?")


def _mode_asks(text: str) -> str | None:
    """The requests aider's chat-mode commands carry ("/ask what does delta represent here?", "/code add a jump"),
    among the commands typed with them ("/drop …", "/model …"; the history may log a request again on the next
    line); None when a line is something else, or no line is such a request."""
    asked: list[str] = []
    for line in text.split("\n"):
        if m := _MODE_ASK.match(line):
            asked.append(line[m.end():].strip())
        elif line.strip() and not line.startswith("/") and not (asked and line.strip() == asked[-1]):
            return None
    return "\n".join(dict.fromkeys(asked)) if asked else None


def user_words(text: str) -> str:
    """What the user typed in a user-role message, without the scaffolding Hermes puts around it: a skill's
    text and its invocation notice, and the bracketed ``[IMPORTANT: …]`` notices before it. A skill run with no
    instruction asks for what the skill does (``_skill_ask``). A spec-kit command's prompt is the input typed with
    it (``_SPECKIT_INPUT``): nothing when none was (the template is the tool's, and names no task of its own)."""
    if text.startswith("/") and (asked := _mode_asks(text)) is not None:
        return asked
    if text.startswith("<command-") and (asked := _command_asks(text)) is not None:
        return asked
    if (typed := _speckit_typed(text)) is not None:
        if typed or not (front := _FRONTMATTER.match(text.lstrip())):
            return typed
        # Run with no input, sent as its prompt file: the run asks for what the command does (its description), as
        # a skill run with no instruction does; none of the template is the user's (``typed_by_user``).
        return _skill_ask("speckit", text.lstrip()[:front.start(1)])
    if text.lstrip().startswith(_PERSONA_LOAD):
        return ""
    if text.lstrip().startswith("Automation: ") and (run := _AUTOMATION.match(text)):
        return f"{run.group(1).strip()}\n\n{user_words(text[run.end():]).strip()}".strip()
    if (typed := _after_placeholder(text)) is not None:
        return typed
    if "User" in text and (quoted := _QUOTED_REQUEST.search(text)):
        return quoted.group(1).strip()
    if text.lstrip().startswith(_SKILL_LOADED):
        # Claude Code loading a skill sends its SKILL.md in the user's role: the run asks for what the skill does (as a
        # Hermes skill run with no instruction), and none of its English is the user's (``typed_by_user``).
        head, _, body = text.lstrip()[len(_SKILL_LOADED):].partition("\n")
        return _skill_ask(head.strip().rstrip("/").rsplit("/", 1)[-1] or "skill", body)
    if text.lstrip().startswith(_PLAN_HANDOFF):
        # Claude Code leaving plan mode sends the approved plan wrapped in its own English lines: the plan (written
        # in the conversation's language) is the ask, the wrapper no word of the user's.
        return _PLAN_TRAILER.sub("", text.lstrip()[len(_PLAN_HANDOFF):]).strip()
    if "[IMPORTANT: " not in text and _SKILL_INSTRUCTION not in text:
        return text
    invoked = _SKILL_INVOKED.search(text)
    if (i := text.rfind(_SKILL_INSTRUCTION)) >= 0:
        text = text[i + len(_SKILL_INSTRUCTION):]
    elif invoked:
        return _skill_ask(invoked.group(1), text[invoked.end():])
    rest = text.lstrip()
    while rest.startswith("[IMPORTANT: ") and (end := _bracket_end(rest)) > 0:
        rest = rest[end:].lstrip()
    return rest or (_skill_ask(invoked.group(1), text[invoked.end():]) if invoked else text)


# Claude Code records a slash command the user ran as "<command-name>/flow-work-story</command-name>" and its
# "<command-args>". Its own commands (/clear, /model, /compact…) steer the harness; a project's command run with
# arguments ("/flow-work-story docs/prd.json US-009") is the user's ask, and may be the only one an unattended run has.
_COMMAND_NAME = re.compile(r"<command-name>/?([^<\s]+)</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)
_HARNESS_COMMANDS = frozenset({
    "add-dir", "agents", "bashes", "bug", "clear", "compact", "config", "context", "cost", "doctor", "effort", "exit",
    "export", "fast", "help", "hooks", "ide", "install-github-app", "login", "logout", "mcp", "memory",
    "migrate-installer", "model", "output-style", "permissions", "plugin", "privacy-settings", "release-notes",
    "resume", "rewind", "status", "statusline", "terminal-setup", "theme", "todos", "upgrade", "usage", "vim"})


def _command_asks(text: str) -> str | None:
    """What a project's slash command run with arguments asks ("flow-work-story: docs/prd.json US-009"); None for the
    harness's own commands and for a command run with none (its prompt, if any, follows as a message of its own)."""
    name, args = _COMMAND_NAME.search(text), _COMMAND_ARGS.search(text)
    if name is None or args is None or not args.group(1).strip() or name.group(1).lower() in _HARNESS_COMMANDS:
        return None
    return f"{name.group(1)}: {args.group(1).strip()}"


_SKILL_LOADED = "Base directory for this skill:"
_PLAN_HANDOFF = "Implement the following plan:"
_PLAN_TRAILER = re.compile(r"\n\s*If you need specific details from before exiting plan mode\b.*\Z", re.S)
_DESCRIPTION = re.compile(r"^description:\s*['\"]?(.+?)['\"]?\s*$", re.M)


def _skill_ask(name: str, skill_text: str) -> str:
    """A skill run with no instruction asks for what the skill does: its name and its SKILL.md description."""
    m = _DESCRIPTION.search(skill_text[:3000])
    return f"{name}: {m.group(1)}" if m else name


def _bracket_end(text: str) -> int:
    """Where the bracket ``text`` opens with closes (nested ones, like a notice's ``"[SILENT]"``, included); 0 if never."""
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch == "[") - (ch == "]")
        if depth == 0:
            return i + 1
    return 0


# An ask the editor wrote for the user: Cursor's Bugbot "Fix in Chat" sends its English finding as the user's
# message, and Cursor's plan mode its English "Implement the plan as specified…" when the user clicks Build. It is an
# ask (the user clicked it), but its words say nothing of the user's language.
_EDITOR_ASK = ("Verify this issue exists and fix it:", "Implement the plan as specified, it is attached for your reference.")


def typed_by_user(msg: Message) -> bool:
    """A user-role message the person typed: not a carrier, harness scaffolding (compaction summaries,
    task notifications, command echoes, injected instructions), an IDE's tool notice, an ask the editor wrote
    (``_EDITOR_ASK``), a spec-kit command's template run with no input, or a harness error line."""
    text = msg.content.lstrip()
    return (msg.role == "user" and not msg.is_carrier and not harness_error(msg)
            and not text.startswith((*_HARNESS, _SKILL_LOADED)) and not text.startswith(_EDITOR_ASK)
            and not _NOTICE.match(text)
            and _speckit_typed(text) != "" and not (text.startswith(_PERSONA_LOAD) and not user_words(text)))


def _kind(msg: Message) -> str | None:
    """'ask', 'ack' (acknowledgement/approval) or None (not something the user typed as a turn)."""
    if msg.role != "user" or msg.is_carrier:
        return None
    return _user_kind(msg.content, bool(msg.tool_calls))


@lru_cache(maxsize=4096)
def _user_kind(content: str, has_calls: bool) -> str | None:
    # ``_kind`` of a user message, from the two things it reads (``harness_error`` looks at the tool calls): the
    # summariser asks it of every message once per helper and phase (~450 times a session), and ``user_words``
    # is not cheap. Sized for a long session's user turns, so one session never evicts its own.
    if not has_calls and _harness_text(content):
        return None
    return _text_kind(user_words(content).strip())


@lru_cache(maxsize=512)
def _text_kind(text: str) -> str | None:
    # Cached: the same user text is classified by every helper; small, since turns repeat within a session.
    if not text or text.startswith(_HARNESS) or _SLASH.match(text) or _NOTICE.match(text):
        return None
    if _is_ack(text) or _is_thanks(text):
        return "ack"
    return "ask" if _has_prose(text) else None


_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")


def _re2_breaks() -> Any:
    """``_SENTENCE_BREAK`` for RE2, where a lookbehind cannot be said: the break's first character is matched
    instead (``_split_sentences`` keeps it with the sentence it ends). Every text is cut into sentences several
    times, and Python's ``re`` tries the three alternatives at every position: RE2 scans in one pass, about three
    times faster. The blank class is spelled as Python reads ``\\s`` (RE2's is ASCII). None without the
    google-re2 wheel."""
    try:
        import re2
    except ImportError:
        return None
    return re2.compile(r"[.!?][\s\p{Z}\x{85}\x{0b}\x{1c}-\x{1f}]+|[。！？；]|\n+")


_RE2_BREAK = _re2_breaks()


def _split_sentences(text: str) -> list[str]:
    """``_SENTENCE_BREAK.split(text)``, the same parts, through RE2 when it is there."""
    if _RE2_BREAK is None:
        return _SENTENCE_BREAK.split(text)
    parts, start = [], 0
    for m in _RE2_BREAK.finditer(text):
        cut, end = m.span()
        first = text[cut]
        if first in ".!?":
            cut += 1  # the full stop ends the sentence; the blank after it goes
        elif first != "\n":
            cut = end  # "。": the sentence ends after it, nothing goes
        parts.append(text[start:cut])
        start = end
    parts.append(text[start:])
    return parts


def _sentences(text: str) -> list[str]:
    text = _FENCE.sub("\n", text)
    if "`" not in text:
        parts = _split_sentences(text)
    else:
        # No sentence ends inside an inline code span ("`assistant / done` が `こんにちは。` だけになります", "`v1.2. x`"):
        # cut there, the span's closing backtick starts the next "sentence" and pairs with the wrong one after it.
        parts, start = [], 0
        for m in _SENTENCE_BREAK.finditer(text):
            if "\n" not in m.group() and text.count("`", start, m.start()) % 2:
                continue
            parts.append(text[start:m.start()])
            start = m.end()
        parts.append(text[start:])
    return [p.strip().lstrip("-*• ").strip() for p in parts if p and p.strip().lstrip("-*• ").strip()]


def _replies(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role == "assistant" and m.content.strip() and not harness_error(m)]


def _has(text: str, phrases: Sequence[str]) -> bool:
    return any(_phrase(p).search(text) for p in phrases)


@lru_cache(maxsize=256)
def _phrase(p: str) -> re.Pattern[str]:
    """An ASCII phrase as a whole word ("ok" is not in "token"); other scripts have no word gaps to check."""
    return re.compile(rf"(?<![^\W\d_]){re.escape(p)}(?![^\W\d_])" if p.isascii() else re.escape(p))


def _ack_role(msgs: Sequence[Message], i: int) -> str:
    """'go' (hands the turn back: "continue", "yes", "ok" after a question) or 'close' ("thanks", "lgtm")."""
    text = msgs[i].content.strip().lower()
    if _has(text, _CONTINUE):
        return "go"
    if _has(text, _CLOSERS) or text.startswith(("no", "不")):
        return "close"
    if _has(text, _YES):
        return "go"
    prev = next((msgs[j] for j in range(i - 1, -1, -1) if msgs[j].role == "assistant" and msgs[j].content.strip()),
                None)
    # "done" / "ok" after "Run `make migrate` and tell me when it's done" or "Restart the server and try again": the
    # user did (or will do) the step, which says nothing of its result. A confirmation ("it works", "perfect") closes.
    if prev is not None and _has(text, _DID_IT) and not _has(text, _CONFIRMS) and _asks_user_to_act(prev.content):
        return "go"
    if _has(text, _PLEASED):
        return "close"
    return "go" if prev is not None and prev.content.rstrip().endswith(("?", "？")) else "close"


#: Acks that only say the user did (or will do) something, and the ones that say it worked.
_DID_IT = ("done", "ok", "okay", "好的", "好", "行", "嗯", "可以")
_CONFIRMS = tuple(w for w in _PLEASED if w != "done")
#: The last sentence of a reply that hands the user a step to do: "restart the server and try again", "run `x` and
#: tell me", "请刷新页面", "试试看". Only its last two lines are read: linear however long the reply.
_USER_STEP = re.compile(
    r"\b(?:try (?:it |this |again|now)|restart|refresh|reload|re-?run|run\b|rebuild|reinstall|clear (?:the |your )?cache"
    r"|let me know|tell me|report back|check (?:whether|if|that)|please (?:run|try|restart|refresh|test|check|open|paste"
    r"|send|share|confirm))|请(?:您|你)?(?:刷新|重启|运行|执行|再试|试|测试|检查|确认|告诉我)|试试|刷新(?:页面|一下)|重启(?:一下|服务)",
    re.I)


def _asks_user_to_act(reply: str) -> bool:
    tail = [ln.strip() for ln in _FENCE.sub("\n", reply).splitlines() if ln.strip()][-2:]
    return any(_USER_STEP.search(ln) for ln in tail)


def _until_closer(msgs: Sequence[Message]) -> tuple[list[Message], bool]:
    """Messages before the first closing ack ("thanks, that's all"); whether there was one.

    The reply to a closer ("👍") says nothing about the work, so outcomes are judged before it.
    """
    for i, m in enumerate(msgs):
        if _kind(m) == "ack" and _ack_role(msgs, i) == "close":
            return list(msgs[:i]), True
    return list(msgs), False
