"""The extractive summariser: a ``SessionSummary`` built from the transcript alone, no model.

It is the fallback when no model is configured or a model call fails, and its helpers
(``user_asks``, ``decision_candidates``, ``infer_end_state``, ``open_items``) are what the LLM
summariser uses to ground and check a model's output. So everything here *quotes*: asks,
decisions and "done" sentences are the session's own words, trimmed, never paraphrased;
identifiers in backticks survive untouched. Only connective labels are generated (in Chinese for
zh sessions); user text is never translated.

Design choices, all deterministic:

* A user message is an *ask* unless it is a carrier, harness scaffolding, a slash command, a
  pure paste (logs/tracebacks/code with no prose line), or a short acknowledgement. Acks come in
  two kinds: "thanks, that's all"/"looks good" *close* the work; "continue"/"yes"/"继续" hand the
  turn back to the agent (*go*), so what follows them is still the answer to a request. A bare
  "ok"/"好的" is *go* after an assistant question and *close* otherwise.
* Phases follow compaction generations; inside one, a new ask that arrives after the previous
  ask was answered (a completion claim, or any answer to a question) starts a new phase.
* Outcomes and the end state weigh these signals: tool failures after the last success, whether
  the last request got an assistant reply, whether the agent stopped mid-work (the transcript ends
  on a tool call, inside a code block, or on "let me …"), completion/failure language in the final
  reply, and, for a question or a request for information, the answer itself. When the signals
  disagree the answer is "unknown"/"unresolved", never "resolved".

Every message is classified a few times per summary, so ``_kind`` is kept cheap (one compiled
pattern for acks, a prose scan that stops at the first prose line) and no helper rescans the
messages before an index (no quadratic loops): a 500-session run spent ~11 s here before.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

from pipeline.facts import file_touches, result_failed
from pipeline.models import (
    Chunk,
    Decision,
    EndState,
    Facts,
    Message,
    Phase,
    PhaseOutcome,
    Session,
    SessionSummary,
)

MAX_ASK = 300
MAX_PHASE_SPLITS = 6

_HARNESS = (
    "Review the conversation above", "Continue from the compressed conversation context above",
    "[CONTEXT COMPACTION", "[CONTEXT SUMMARY]", "[PRIOR CONTEXT", "[Note: Some earlier conversation",
    "<command-name>", "<command-message>", "<local-command", "<system-reminder>", "<environment_context>",
    "<user_instructions>", "<task-notification>", "<bash-input>", "<bash-stdout>", "# AGENTS.md instructions",
    "Caveat: The messages below", "This session is being continued from a previous conversation",
)
_SLASH = re.compile(r"^/[A-Za-z][\w-]*(?:\s|$)")  # "/model gpt-5", but not "/home/ana/x.py is broken"
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_LOGLINE = re.compile(
    r"^(?:\s{4,}|\t|\s*(?:Traceback|File \"|at [\w.$<]|E\s{2,}|\[?\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|\$ |>>> |\|"
    r"|(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE|FAILED|PASSED)\b|[\w.]*(?:Error|Exception)\b|[-=_*#~]{4,}))"
)
_CLOSERS = ("no thanks", "thank you", "thanks", "thx", "that's all", "thats all", "that is all", "bye",
            "谢谢", "多谢", "不用了", "就这样", "辛苦了")
_CONTINUE = ("continue", "proceed", "go on", "keep going", "go ahead", "do it", "please do", "继续")
_YES = ("yes", "yep", "yeah", "sure", "是的")
_PLEASED = ("looks good", "lgtm", "perfect", "great", "nice", "cool", "awesome", "all good", "good", "done",
            "完美", "没问题", "很好", "太好了")
# Whether these approve or accept depends on what the agent said last (see _ack_role).
_OK = ("for now", "okay", "ok", "no", "好的", "可以", "好", "行", "嗯")
_ACKS = _CONTINUE + _YES + _PLEASED + _OK
_ACK_WORDS = re.compile("|".join(re.escape(w) for w in sorted(_CLOSERS + _ACKS, key=len, reverse=True)))
_ACK_PREFIX = re.compile(r"^(?:(?:ok(?:ay)?|nice|great|thanks|thank you|cool|perfect|good|好的|好|谢谢)[\s,.!。，！]+)+",
                         re.I)
_QUESTION = re.compile(r"[?？]\s*$|^(?:what|why|how|where|when|which|who|is|are|does|do|can|could|should)\b"
                       r"|吗[？?]?$|什么|为什么|怎么|如何", re.I)
_DONE = re.compile(
    r"\b(?:done|fixed|resolved|completed?|implemented|added|created|updated|committed|pushed|merged|"
    r"(?:all )?(?:\d+ )?tests? (?:now )?pass(?:es|ed|ing)?|works now|now works|finished)\b"
    r"|已完成|完成了|已修复|修复了|搞定|已提交|已创建|已添加|已更新|测试通过|全部通过"
    r"|(?:我|我们)(?:已经|已)[^。！？\n]{0,40}?(?:修改|替换|更新|添加|删除|移除|改|实现|完成|修复|创建|调整|重构)"
    # pt/es/fr/de: the session's own language, since replies follow the user
    r"|\b(?:conclu[íi]d[oa]s?|resolvid[oa]s?|corrigid[oa]s?|com sucesso|resuelt[oa]s?|corregid[oa]s?|con éxito"
    r"|terminé|corrigée?s?|résolue?s?|erledigt|behoben|gelöst)\b", re.I)
_FAILED = re.compile(
    r"\b(?:still (?:fail\w*|broken|errors?|crash\w*)|couldn'?t|could not|can'?t|cannot|unable to|failed to|"
    r"not able to|doesn'?t work|blocked)\b|无法|失败|仍然报错|还是报错|没能"
    r"|\b(?:não (?:consegui|foi possível)|falhou|no (?:pude|fue posible)|falló|n'ai pas pu|échoué|konnte nicht"
    r"|fehlgeschlagen)\b", re.I)
_USER_UNHAPPY = re.compile(
    r"\b(?:still (?:broken|failing|fails|not|doesn'?t|the same)|doesn'?t work|not working|didn'?t work|same error|"
    r"try again|wrong|no (?:change|effect)|nothing changed)\b|还是不行|不行|没用|报错|还是错|还是这样|没有(?:改变|变化|效果|生效)"
    r"|没效果|没生效", re.I)
# The agent announces work it then never does: the export stopped mid-turn.
_NEXT_STEP = re.compile(
    r"^(?:(?:alright|all right|ok(?:ay)?|now|next|so|then|first)[,\s]+)*(?:let me(?! know)|let[’']s|i[’']m going to|"
    r"i am going to|(?:i|we)(?:[’']ll| will) (?:now|next|start|begin|proceed|go ahead|run|check|look|update|fix|add|"
    r"create|write|read|apply|edit|modify|implement|commit|push|test|try|investigate|search|open|install|remove|"
    r"delete|continue))\b|^(?:现在|接下来|下面|然后|首先)?[，,]?(?:让我|我来|我将|我们来|让我们)", re.I)
# A request for an answer rather than for work: its deliverable is the reply itself.
_INFO_ASK = re.compile(
    r"\b(?:explain|summari[sz]e|describe|tell me|show me|list|output|print|direct me|point me|what|why|how|which"
    r"|where|when|who)\b|解释|說明|说明|总结|總結|介绍|介紹|分析|输出|輸出|列出|告诉我|告訴我|是什么|是什麼|为什么|為什麼"
    r"|怎么|怎麼|如何|吗|嗎|是否|有没有|呢[？?]?$|[?？]\s*$", re.I)
# Work asked for politely as a question ("can you add tests?", "高度可以调整小一些吗").
_WORK_REQUEST = re.compile(r"\b(?:can|could|would|will) you\b(?!\s+(?:explain|tell|show|describe|summari[sz]e|list))"
                           r"|^please\b|请你|请帮|帮我|帮忙|麻烦|可以|能否|能不能|可不可以|要不要", re.I)
# A problem report phrased as a question ("why does the build fail?") is answered only by a fix.
_PROBLEM = re.compile(
    r"\b(?:fail\w*|error\w*|broken|crash\w*|bug|exception|issues?|problems?|not working|doesn'?t work|won'?t)\b"
    r"|失败|报错|错误|异常|不行|无法|没有生效|不工作|崩溃", re.I)
_UNDO = re.compile(r"^/(?:undo|rewind|revert)\b", re.I)
_ACTION = re.compile(
    r"\b(?:I|I've|I have|we|we've)\b[^.]*\b(?:replaced|added|created|updated|fixed|changed|removed|renamed|"
    r"moved|wrote|implemented|refactored|committed|deleted|installed|configured)\b|我(?:已|已经)?(?:修改|添加|创建|"
    r"修复|删除|更新|提交|实现|重构)", re.I)
_TODO_HEAD = re.compile(r"(?:next steps?|todo|to-do|remaining|follow[- ]ups?|open questions?|待办|下一步|后续|遗留)",
                        re.I)
_TODO_LINE = re.compile(r"^\s*(?:[-*]\s*\[ \]|TODO\b|FIXME\b|Next step|待办|下一步|还需要|尚未)", re.I)

_DECISION = re.compile(
    r"\b(?:decided to|decide to|we'?ll use|we will use|let'?s (?:use|go with|stick with|switch)|going with|"
    r"went with|chose|choose|chosen|picked|opted for|opting for|instead\b|rather than|switch(?:ed|ing)? to|"
    r"prefer(?:red|s)?\b|(?:don'?t|do not)\b[^.;]*,\s*use\b)"
    r"|决定|改用|选择|采用|而不是|不用|换成|还是用|不要", re.I)
_CORRECTION = re.compile(r"^(?:no,\s|actually,?\s)", re.I)
_REJECTED = (
    re.compile(r"\binstead of\s+(?:using\s+)?([^,.;:!?()]+)", re.I),
    re.compile(r"\brather than\s+(?:using\s+)?([^,.;:!?()]+)", re.I),
    re.compile(r"\b(?:chose|choose|chosen|picked|prefer\w*|going with|went with)\b[^.;]*?\bover\s+([^,.;:!?()]+)",
               re.I),
    re.compile(r"\b(?:don'?t|do not) use\s+([^,.;:!?()]+)", re.I),
    re.compile(r"\bswitch(?:ed|ing)? from\s+([^,.;:!?()]+?)\s+to\b", re.I),
    re.compile(r"而不是(?:用|使用)?([^，。；,.;！？]+)"),
    re.compile(r"(?:不用|不要)(?:再)?(?:用|使用)?([^，。；,.;！？]+)"),
    re.compile(r"把([^，。；,.;！？]+?)(?:换成|改成)"),
)
_OPTION_END = re.compile(r"\s+(?:because|since|so|for|as|which|when|if)\b|因为|由于", re.I)
_RATIONALE = re.compile(r"\b(?:because|since|so that|as it)\b\s*(.+)$|(?:因为|由于)(.+)$", re.I)

_LABELS = {
    "en": {"files": "Files changed: ", "continued": "Continued work", "none": "(no request recorded)"},
    "zh": {"files": "改动文件：", "continued": "继续之前的工作", "none": "（未记录到用户请求）"},
}
_EXT_LANG = {"py": "python", "ts": "typescript", "tsx": "typescript", "js": "javascript", "jsx": "javascript",
             "mjs": "javascript", "rs": "rust", "go": "go", "java": "java", "kt": "kotlin", "rb": "ruby",
             "php": "php", "cs": "csharp", "cpp": "cpp", "cc": "cpp", "hpp": "cpp", "c": "c", "h": "c",
             "swift": "swift", "sh": "shell", "bash": "shell", "sql": "sql", "html": "html", "css": "css",
             "vue": "vue", "svelte": "svelte", "dart": "dart", "scala": "scala", "lua": "lua", "ex": "elixir"}
_CMD_TAGS = ("git", "docker", "pytest", "npm", "pnpm", "yarn", "cargo", "uv", "pip", "make", "kubectl",
             "terraform", "gh", "poetry", "helm", "ansible")
_PROJECT_DIRS = ("src", "code", "projects", "repos", "git", "dev", "work", "workspace")


# --------------------------------------------------------------------------- message classes


def _live(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if not m.is_carrier and not m.content.lstrip().startswith(_HARNESS)]


def _prose(text: str) -> str:
    """The typed part of a message: fences, log/trace/code lines and blank lines dropped."""
    lines = [ln.strip() for ln in _FENCE.sub("\n", text).splitlines()]
    return "\n".join(ln for ln in lines if ln and not _LOGLINE.match(ln) and re.search(r"[^\W\d_]", ln))


def _has_prose(text: str) -> bool:
    """``bool(_prose(text))`` without building it: stops at the first prose line."""
    return any(ln and not _LOGLINE.match(ln) and re.search(r"[^\W\d_]", ln)
               for ln in (raw.strip() for raw in _FENCE.sub("\n", text).splitlines()))


def _is_ack(text: str) -> bool:
    return len(text) <= 60 and not re.sub(r"[\W_]+", "", _ACK_WORDS.sub(" ", text.lower()))


def _kind(msg: Message) -> str | None:
    """'ask', 'ack' (acknowledgement/approval) or None (not something the user typed as a turn)."""
    if msg.role != "user" or msg.is_carrier:
        return None
    return _text_kind(msg.content.strip())


@lru_cache(maxsize=512)
def _text_kind(text: str) -> str | None:
    # Cached: the same user text is classified by every helper; small, since turns repeat within a session.
    if not text or text.startswith(_HARNESS) or _SLASH.match(text):
        return None
    if _is_ack(text):
        return "ack"
    return "ask" if _has_prose(text) else None


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+", _FENCE.sub("\n", text))
    return [p.strip().lstrip("-*• ").strip() for p in parts if p and p.strip().lstrip("-*• ").strip()]


def _trim_ask(text: str, limit: int = MAX_ASK) -> str:
    prose = " ".join(_prose(text).split())
    if len(prose) <= limit:
        return prose
    out = ""
    for s in _sentences(prose)[:2]:  # one or two sentences, when they fit
        if len(out) + len(s) + 1 > limit:
            break
        out = f"{out} {s}".strip()
    return out or _clip(prose, limit)


def user_asks(messages: Sequence[Message]) -> list[str]:
    """What the user asked, in order: verbatim prose, trimmed to one or two sentences (≤ 300 chars)."""
    return [_trim_ask(m.content) for m in _live(messages) if _kind(m) == "ask"]


def _replies(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role == "assistant" and m.content.strip()]


def _has(text: str, phrases: Sequence[str]) -> bool:
    return any(re.search(rf"(?<![^\W\d_]){re.escape(p)}(?![^\W\d_])" if p.isascii() else re.escape(p), text)
               for p in phrases)


def _ack_role(msgs: Sequence[Message], i: int) -> str:
    """'go' (hands the turn back: "continue", "yes", "ok" after a question) or 'close' ("thanks", "lgtm")."""
    text = msgs[i].content.strip().lower()
    if _has(text, _CONTINUE):
        return "go"
    if _has(text, _CLOSERS) or text.startswith(("no", "不")):
        return "close"
    if _has(text, _YES):
        return "go"
    if _has(text, _PLEASED):
        return "close"
    prev = next((msgs[j] for j in range(i - 1, -1, -1) if msgs[j].role == "assistant" and msgs[j].content.strip()),
                None)
    return "go" if prev is not None and prev.content.rstrip().endswith(("?", "？")) else "close"


def _until_closer(msgs: Sequence[Message]) -> tuple[list[Message], bool]:
    """Messages before the first closing ack ("thanks, that's all"); whether there was one.

    The reply to a closer ("👍") says nothing about the work, so outcomes are judged before it.
    """
    for i, m in enumerate(msgs):
        if _kind(m) == "ack" and _ack_role(msgs, i) == "close":
            return list(msgs[:i]), True
    return list(msgs), False


# --------------------------------------------------------------------------- decisions


def decision_candidates(messages: Sequence[Message]) -> list[Decision]:
    """Sentences with explicit choice language (English and Chinese), with rejected options and evidence."""
    out: dict[str, Decision] = {}
    for m in _live(messages):
        if m.role not in ("user", "assistant") or (m.role == "user" and _kind(m) != "ask"):
            continue
        for sentence in _sentences(_prose(m.content) if m.role == "user" else m.content):
            correction = m.role == "user" and _CORRECTION.match(sentence)
            if sentence.endswith(("?", "？")) or not (correction or _DECISION.search(sentence)):
                continue
            rejected: list[str] = []
            for pattern in _REJECTED:
                for hit in pattern.finditer(sentence):
                    # "instead of X because ..." / "over X for the cache": the option ends at the reason
                    option = _OPTION_END.split(hit.group(1), maxsplit=1)[0]
                    option = _clip(option.strip(" `'\"的"), 80)
                    if option and option not in rejected:
                        rejected.append(option)
            why = _RATIONALE.search(sentence)
            choice = _clip(sentence, 240)
            out.setdefault(choice, Decision(
                choice=choice,
                rationale=_clip((why.group(1) or why.group(2)).strip(), 200) if why else "",
                rejected=tuple(rejected),
                evidence=f"msg {m.row_id}" if m.row_id is not None else None,
            ))
    return list(out.values())


# --------------------------------------------------------------------------- outcomes


def _tool_signal(messages: Sequence[Message]) -> tuple[bool, bool]:
    """(any tool ran, the last failure comes after the last success)."""
    last_ok = last_err = -1
    for i, m in enumerate(messages):
        if m.role == "tool":
            if result_failed(m):
                last_err = i
            else:
                last_ok = i
    return last_ok >= 0 or last_err >= 0, last_err > last_ok


def _claims_done(text: str) -> bool:
    return bool(_DONE.search(text)) and not _FAILED.search(text)


def _cut_off(tail: Sequence[Message], final: str) -> bool:
    """The agent stopped mid-work: the tail ends on a tool call or result (unless the last reply had
    already reported the work done), inside a code block, or on an announcement of the next step
    ("Let me check the logs:", "让我修改 `a.py`：")."""
    last = next((m for m in reversed(tail) if m.role != "system"), None)
    if last is None or last.role == "tool" or (last.role == "assistant" and last.tool_calls):
        return last is not None and not _claims_done(final)
    text = last.content.strip()
    if sum(1 for ln in text.splitlines() if ln.lstrip().startswith("```")) % 2:
        return True  # the export ends inside a fence
    sentences = _sentences(_prose(text))
    return text.endswith((":", "：")) or bool(sentences and _NEXT_STEP.search(sentences[-1]))


def _answered(ask: str, tail: Sequence[Message]) -> bool:
    """A question or a request for information (not a problem report, not a request for work),
    answered without the agent setting out to change anything."""
    prose = " ".join(_prose(ask).split())
    if not (prose and _INFO_ASK.search(prose)) or _WORK_REQUEST.search(prose) or _PROBLEM.search(prose):
        return False
    if any(t.action != "read" for t in file_touches(tail)):
        return False
    return not any(_NEXT_STEP.search(x) for m in _replies(tail) for x in _sentences(_prose(m.content)))


def infer_end_state(session: Session, facts: Facts | None = None) -> EndState:
    """How the session ended: failed / unresolved / resolved, or unknown when the signals are unclear."""
    msgs = _live(session.messages)
    last_turn = last_ask = None
    for i, m in enumerate(msgs):  # the last ask, or an ack that hands the turn back ("continue", "yes")
        kind = _kind(m)
        if kind == "ask":
            last_turn = last_ask = i
        elif kind == "ack" and _ack_role(msgs, i) == "go":
            last_turn = i
    if last_turn is None:
        return "unknown"
    ask = msgs[last_ask].content if last_ask is not None else ""
    if any(m.role == "user" and _UNDO.match(m.content.strip()) for m in msgs[last_turn + 1:]):
        return "unresolved"  # the user rolled the work back
    tail, closed = _until_closer(msgs[last_turn + 1:])
    replies = _replies(tail)
    final = replies[-1].content if replies else ""
    _ran, unfixed = _tool_signal(tail)
    if unfixed and not _claims_done(final):
        return "failed"
    if not replies or (not closed and _cut_off(tail, final)):
        return "unresolved"
    if _FAILED.search(final):
        return "failed" if unfixed else "unresolved"
    if _USER_UNHAPPY.search(ask) and not _claims_done(final):
        return "unresolved"
    if _claims_done(final):
        return "unknown" if unfixed else "resolved"
    if final.rstrip().endswith(("?", "？")) and not closed:
        return "unresolved"
    return "resolved" if closed or (last_turn == last_ask and _answered(ask, tail)) else "unknown"


def open_items(session: Session) -> list[str]:
    """Unanswered last ask(s), plus TODO / next-step lines of the final assistant reply."""
    msgs = _live(session.messages)
    last_reply = next((i for i in range(len(msgs) - 1, -1, -1)
                       if msgs[i].role == "assistant" and msgs[i].content.strip()), -1)
    items = [_trim_ask(m.content) for m in msgs[last_reply + 1:] if _kind(m) == "ask"]
    if last_reply >= 0:
        in_list = False
        for line in msgs[last_reply].content.splitlines():
            text = line.strip()
            if not text:
                in_list = False
            elif _TODO_HEAD.search(text) and len(text) < 60 and text.rstrip("*#: ：").strip():
                in_list = text.endswith((":", "：")) or text.startswith("#")
                if not in_list and _TODO_LINE.match(text):
                    items.append(_clip(text, 200))
            elif (in_list and re.match(r"^(?:[-*•]|\d+[.)])\s+", text)) or _TODO_LINE.match(text):
                items.append(_clip(re.sub(r"^(?:[-*•]\s*(?:\[ \]\s*)?|\d+[.)]\s+)", "", text), 200))
    return list(dict.fromkeys(items))[:8]


# --------------------------------------------------------------------------- phases


def _generations(session: Session, chunks: Sequence[Chunk]) -> list[tuple[int, list[Message]]]:
    if not chunks:
        return [(0, _live(session.messages))]
    groups: dict[int, list[Message]] = {}
    for c in sorted(chunks, key=lambda c: (c.generation, c.part)):
        groups.setdefault(c.generation, []).extend(_live(c.messages))
    return list(groups.items())


def _split_topics(msgs: list[Message]) -> list[list[Message]]:
    """Cut before an ask that follows an answered ask (see module docstring)."""
    segments: list[list[Message]] = [[]]
    last_ask: int | None = None  # index of the current segment's last ask
    for m in msgs:
        is_ask = _kind(m) == "ask"
        current = segments[-1]
        if is_ask and last_ask is not None and len(segments) < MAX_PHASE_SPLITS:
            reply = next((x for x in reversed(current[last_ask + 1:]) if x.role == "assistant" and x.content.strip()),
                         None)
            if reply is not None and (_claims_done(reply.content)
                                      or _QUESTION.search(_trim_ask(current[last_ask].content))):
                segments.append([])
        segments[-1].append(m)
        if is_ask:
            last_ask = len(segments[-1]) - 1
    return [s for s in segments if s]


def _phase_outcome(msgs: list[Message]) -> PhaseOutcome:
    asks = [i for i, m in enumerate(msgs) if _kind(m) == "ask"]
    tail, _closed = _until_closer(msgs[asks[-1] + 1:] if asks else msgs)
    replies = _replies(tail)
    final = replies[-1].content if replies else ""
    ran, unfixed = _tool_signal(tail)
    if not replies:
        return ("failed" if unfixed else "partial") if ran else "abandoned"
    if _FAILED.search(final) or (unfixed and not _claims_done(final)):
        return "failed"
    if _claims_done(final):
        return "partial" if unfixed else "done"
    if asks and _QUESTION.search(_trim_ask(msgs[asks[-1]].content)):
        return "done"
    return "partial" if ran else "unknown"


def _title(text: str, limit: int = 80) -> str:
    text = _ACK_PREFIX.sub("", " ".join(text.split()))
    first = (_sentences(text) or [text])[0].rstrip(".。")
    if len(first) > limit:
        cut = first[: limit - 1]
        first = (cut.rsplit(" ", 1)[0] if " " in cut[limit // 2:] else cut) + "…"
    word = first.split(" ", 1)[0]
    # Capitalise plain words only: "parser.py" or "npm" at the start must stay as typed.
    return first[:1].upper() + first[1:] if word.isalpha() and word.islower() else first


def _done_text(msgs: list[Message], cwd: str | None, lang: str) -> str:
    asks = [i for i, m in enumerate(msgs) if _kind(m) == "ask"]
    replies = _replies(_until_closer(msgs[asks[-1] + 1:] if asks else msgs)[0])
    said: list[str] = []
    if replies:
        sentences = _sentences(replies[-1].content)
        said = [s for s in sentences if len(s) >= 12 and (_ACTION.search(s) or _DONE.search(s))][:2]
        said = said or sentences[:1]
    changed = [t.path for t in file_touches(msgs, cwd) if t.action != "read"]
    if changed:
        sep = "、" if lang == "zh" else ", "
        said.append(_LABELS.get(lang, _LABELS["en"])["files"] + sep.join(changed[:8]))
    return _clip(" ".join(said), 400)


def _phases(session: Session, chunks: Sequence[Chunk], lang: str) -> list[Phase]:
    labels = _LABELS.get(lang, _LABELS["en"])
    phases: list[Phase] = []
    for generation, msgs in _generations(session, chunks):
        for segment in _split_topics(msgs):
            asks = user_asks(segment)
            if not asks and not _replies(segment) and not any(m.tool_calls for m in segment):
                continue
            title = _title(asks[0]) if asks else labels["continued"]
            phases.append(Phase(title=title, asks=tuple(asks[:5]), done=_done_text(segment, session.cwd, lang),
                                outcome=_phase_outcome(segment), generation=generation))
    return phases


# --------------------------------------------------------------------------- tags, projects, goal


def _tag(text: str) -> str | None:
    tag = re.sub(r"[^a-z0-9_/-]+", "-", text.lower()).strip("-/")
    return tag if tag and not tag.replace("-", "").replace("_", "").isdigit() else None


def _tags(session: Session, facts: Facts) -> list[str]:
    tags = [session.source]
    paths = facts.output_files or [f.path for f in facts.files]
    langs = Counter(_EXT_LANG[ext] for p in paths if (ext := posixpath.splitext(p)[1][1:].lower()) in _EXT_LANG)
    tags += [name for name, _n in langs.most_common(2)]
    words = {w for cmd in facts.commands for w in re.findall(r"[\w.-]+", cmd)}
    tags += [t for t in _CMD_TAGS if t in words]
    return list(dict.fromkeys(t for raw in tags if (t := _tag(raw))))[:8]


def _projects(session: Session, facts: Facts) -> list[str]:
    out: list[str] = []
    root = (session.git_repo_root or session.cwd or "").rstrip("/")
    home = re.match(r"^(?:/home/[^/]+|/Users/[^/]+|/root)$", root)
    if root and not home and root not in ("~", "/"):
        out.append(posixpath.basename(root))
    for f in facts.files:  # absolute paths left after normalising are outside the cwd
        m = re.match(r"^(?:/home/[^/]+|/Users/[^/]+|~)/(?:" + "|".join(_PROJECT_DIRS) + r")/([^/]+)/", f.path)
        if m and m.group(1) not in out:
            out.append(m.group(1))
    return out


def _checkpoint_goal(session: Session, chunks: Sequence[Chunk]) -> str | None:
    texts = [c.checkpoint for c in chunks if c.checkpoint]
    texts += [m.carrier_summary or "" for m in session.messages if m.is_carrier]
    for text in texts:
        if m := re.search(r"^#+\s*Goal\s*\n+(.+?)(?:\n\s*\n|\n#|\Z)", text or "", re.M | re.S):
            return _trim_ask(m.group(1))
    return None


def summarise_extractive(
    session: Session, chunks: Sequence[Chunk], facts: Facts, *, lang: str | None = None
) -> SessionSummary:
    """Fill the ``SessionSummary`` structure from the transcript alone."""
    lang = lang or facts.language
    asks = user_asks(session.messages)
    goal = asks[0] if asks else _checkpoint_goal(session, chunks) or session.title
    goal = goal or _LABELS.get(lang, _LABELS["en"])["none"]
    return SessionSummary(
        title=_clip(session.title, 80) if session.title else _title(goal),
        goal=goal,
        phases=tuple(_phases(session, chunks, lang)),
        decisions=tuple(decision_candidates(session.messages)[:12]),
        output_files=tuple(facts.output_files),
        open_items=tuple(open_items(session)),
        end_state=infer_end_state(session, facts),
        language=lang,
        tags=tuple(_tags(session, facts)),
        projects=tuple(_projects(session, facts)),
        summarizer="extractive",
        cost_usd=0.0,
    )
