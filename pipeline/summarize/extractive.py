"""The extractive summariser: a ``SessionSummary`` built from the transcript alone, no model.

It is the fallback when no model is configured or a model call fails, and its helpers
(``user_asks``, ``decision_candidates``, ``open_items``) are, with ``judge_end_state``
(``pipeline/facts/endstate.py``), what the LLM summariser uses to ground and check a model's output. So
everything here *quotes*: asks, decisions and "done" sentences are the session's own words,
trimmed, never paraphrased; identifiers in backticks survive untouched. Only connective labels are
generated (in Chinese for zh sessions); user text is never translated.

Design choices, all deterministic:

* Which user messages are asks and which are acknowledgements ("continue" hands the turn back,
  "thanks, that's all" closes the work) is decided in ``pipeline/facts/turns.py``, shared with the end
  state.
* Phases follow compaction generations; inside one, a new ask that arrives after the previous
  ask was answered (a completion claim, or any answer to a question) starts a new phase.
* Phase outcomes weigh tool failures after the last success, whether the last ask got a reply, and
  completion/failure language in the final reply, with the same wording tables as the session's
  end state (``pipeline/facts/endstate.py``, whose docstring gives the rules). When the signals
  disagree the answer is "partial"/"unknown", never "done".

Every helper makes a few linear passes over the messages, never one per earlier message: ``_kind``
is cheap, but it runs for every message of every summary.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise

from pipeline.facts.derive import (
    COMMAND_TOOLS,
    call_command,
    changed_names,
    file_touches,
    result_failed,
    work_root,
)
from pipeline.facts.endstate import (
    _DONE,
    _FAILED,
    _MAY_HAVE_FAILED,
    _claims_done,
    _mentions_done,
    _tool_signal,
    judge_end_state,
    last_phase_outcome,
)
from pipeline.facts.lang import typed_prose
from pipeline.facts.shell import forward_slashes
from pipeline.facts.turns import (
    _has_prose,
    _kind,
    _live,
    _prose,
    _replies,
    _sentences,
    _until_closer,
    split_paste,
    user_words,
)
from pipeline.models import (
    NOTE_ERRORS_MAX,
    Chunk,
    Facts,
    Message,
    Phase,
    PhaseOutcome,
    Problem,
    Session,
    SessionSummary,
    is_scratch,
)
from pipeline.screen import Screen
from pipeline.summarize.decisions import decision_candidates as decision_candidates  # the LLM path's hints
from pipeline.summarize.decisions import key_decisions
from pipeline.summarize.text import _LIST_MARK, _MARKUP, _NEXT_ITEM, _UNITS, _clip, unmark

MAX_ASK = 300
MAX_PHASE_SPLITS = 6
#: A long generation gets about one phase per this many asks, up to ``MAX_PHASES``.
ASKS_PER_PHASE = 3
MAX_PHASES = 16

_ACK_PREFIX = re.compile(r"^(?:(?:ok(?:ay)?|nice|great|thanks|thank you|cool|perfect|good|好的|好|谢谢)[\s,.!。，！]+)+",
                         re.I)
_QUESTION = re.compile(r"[?？]\s*$|^(?:what|why|how|where|when|which|who|is|are|does|do|can|could|should)\b"
                       r"|吗[？?]?$|什么|为什么|怎么|如何", re.I)
_ACTION = re.compile(
    r"\b(?:I|I've|I have|we|we've)\b[^.]*\b(?:replaced|added|created|updated|fixed|changed|removed|renamed|"
    r"moved|wrote|implemented|refactored|committed|deleted|installed|configured)\b|我(?:已|已经)?(?:修改|添加|创建|"
    r"修复|删除|更新|提交|实现|重构)", re.I)
# Not a report: a plan, an offer or a question ("I'll add…", "Should I remove…?", "You can switch…").
_ADVICE_OR_PLAN = re.compile(r"\b(?:I'll|I will|let me|let's|we'll|we will|should I|shall I|do you want|would you like"
                             r"|you (?:can|could|should|need|might)|if you)\b|[?？]\s*$|我(?:将|会|来)|让我|是否|要不要|你可以",
                             re.I)
_EMPTY_CODE = re.compile(r"(?<!`)``(?!`)")
#: One RE2 pass says no for most sentences before ``_ACTION`` and ``_DONE`` scan them (``_done_text`` asks them of
#: every sentence of every phase's last reply); a maybe still goes through both, so no answer changes.
_MAY_ACT = Screen([_ACTION, _DONE])
#: Action sentences kept from a phase's replies before its last one (``_done_text``).
EARLIER_ACTIONS = 6
# A sentence reporting a change, with or without a subject ("Removed the SQS interruptionQueue",
# "Switched to the lookup table", "已将农历改为查表法", "改用 tooltip").
_CHANGE_REPORT = re.compile(
    r"(?:^(?:[\w ]{1,20}[:：]\s*)?|\b(?:I|I've|I have|we|we've)\b[^.]*?)\b(?:replaced|added|created|updated|fixed|changed|removed|renamed|moved"
    r"|wrote|implemented|refactored|deleted|installed|configured|switched|dropped|disabled|enabled|extended|set"
    r"|reverted|migrated|split|merged|kept|used|converted)\b"
    r"|已(?:经)?将|已(?:经)?(?:修改|添加|创建|修复|删除|更新|实现|重构|替换|改为|改用|移除|调整)|改为|改用|改成|换成|删除了|移除了|新增了|添加了",
    re.I)
# A step narrated while under way ("I'm installing Chromium's dependency set now so I can…", Codex's commentary) is no
# report of a change: its verb is still going on.
_UNDER_WAY = re.compile(r"^(?:(?:now|next|ok(?:ay)?|so|then|first)[,\s]+)*(?:I[’']m|I am|we[’']re|we are)\s+(?:now\s+|also\s+)?"
                        r"\w+ing\b", re.I)
_TODO_HEAD = re.compile(r"(?:next steps?|todo|to-do|remaining|follow[- ]ups?|open questions?|待办|下一步|后续|遗留)",
                        re.I)
_TODO_LINE = re.compile(r"^\s*(?:[-*]\s*\[ \]|TODO\b|FIXME\b|Next step|待办|下一步|还需要|尚未)", re.I)


_LABELS = {
    "en": {"files": "Files changed: ", "continued": "Continued work", "none": "(no request recorded)",
           "pasted": "Pasted output: ", "ran": "Ran: "},
    "zh": {"files": "改动文件：", "continued": "继续之前的工作", "none": "（未记录到用户请求）", "pasted": "粘贴的输出：",
           "ran": "执行：", },
    "ja": {"files": "変更したファイル：", "continued": "前回の作業の続き", "none": "（依頼の記録なし）",
           "pasted": "貼り付けられた出力：", "ran": "実行：", },
    "ko": {"files": "변경한 파일: ", "continued": "이전 작업 계속", "none": "(기록된 요청 없음)", "pasted": "붙여넣은 출력: ",
           "ran": "실행: "},
    "es": {"files": "Archivos modificados: ", "continued": "Continuación del trabajo anterior",
           "none": "(no se registró ningún pedido)", "pasted": "Salida pegada: ", "ran": "Ejecutado: "},
    "pt": {"files": "Arquivos alterados: ", "continued": "Continuação do trabalho anterior",
           "none": "(nenhum pedido registrado)", "pasted": "Saída colada: ", "ran": "Executado: "},
    "fr": {"files": "Fichiers modifiés : ", "continued": "Suite du travail précédent", "none": "(aucune demande enregistrée)",
           "pasted": "Sortie collée : ", "ran": "Exécuté : "},
    "de": {"files": "Geänderte Dateien: ", "continued": "Fortsetzung der vorherigen Arbeit",
           "none": "(keine Anfrage aufgezeichnet)", "pasted": "Eingefügte Ausgabe: ", "ran": "Ausgeführt: "},
    "it": {"files": "File modificati: ", "continued": "Continuazione del lavoro precedente",
           "none": "(nessuna richiesta registrata)", "pasted": "Output incollato: ", "ran": "Eseguito: "},
    "ru": {"files": "Изменённые файлы: ", "continued": "Продолжение предыдущей работы", "none": "(запрос не записан)",
           "pasted": "Вставленный вывод: ", "ran": "Выполнено: "},
    "uk": {"files": "Змінені файли: ", "continued": "Продовження попередньої роботи", "none": "(запит не записано)",
           "pasted": "Вставлений вивід: ", "ran": "Виконано: "},
    "vi": {"files": "Tệp đã thay đổi: ", "continued": "Tiếp tục công việc trước", "none": "(không ghi nhận yêu cầu nào)",
           "pasted": "Đầu ra được dán: ", "ran": "Đã chạy: "},
    "tr": {"files": "Değiştirilen dosyalar: ", "continued": "Önceki çalışmanın devamı", "none": "(kayıtlı istek yok)",
           "pasted": "Yapıştırılan çıktı: ", "ran": "Çalıştırıldı: "},
    "nl": {"files": "Gewijzigde bestanden: ", "continued": "Vervolg van eerder werk", "none": "(geen verzoek vastgelegd)",
           "pasted": "Geplakte uitvoer: ", "ran": "Uitgevoerd: "},
    "pl": {"files": "Zmienione pliki: ", "continued": "Kontynuacja wcześniejszej pracy", "none": "(nie zapisano prośby)",
           "pasted": "Wklejone wyjście: ", "ran": "Uruchomiono: "},
    "cs": {"files": "Změněné soubory: ", "continued": "Pokračování dřívější práce", "none": "(žádný požadavek nezaznamenán)",
           "pasted": "Vložený výstup: ", "ran": "Spuštěno: "},
    "sv": {"files": "Ändrade filer: ", "continued": "Fortsättning på tidigare arbete", "none": "(ingen begäran registrerad)",
           "pasted": "Inklistrad utdata: ", "ran": "Körde: "},
    "ro": {"files": "Fișiere modificate: ", "continued": "Continuarea lucrului anterior", "none": "(nicio cerere înregistrată)",
           "pasted": "Ieșire lipită: ", "ran": "Rulat: "},
    "hu": {"files": "Módosított fájlok: ", "continued": "A korábbi munka folytatása", "none": "(nincs rögzített kérés)",
           "pasted": "Beillesztett kimenet: ", "ran": "Futtatva: "},
    "id": {"files": "Berkas yang diubah: ", "continued": "Lanjutan pekerjaan sebelumnya",
           "none": "(tidak ada permintaan tercatat)", "pasted": "Keluaran yang ditempel: ", "ran": "Dijalankan: "},
    "ar": {"files": "الملفات المعدّلة: ", "continued": "متابعة العمل السابق", "none": "(لم يُسجَّل أي طلب)",
           "pasted": "مخرجات ملصقة: ", "ran": "نُفِّذ: "},
    "fa": {"files": "فایل‌های تغییرکرده: ", "continued": "ادامهٔ کار قبلی", "none": "(درخواستی ثبت نشد)",
           "pasted": "خروجی چسبانده‌شده: ", "ran": "اجرا شد: "},
    "ur": {"files": "تبدیل شدہ فائلیں: ", "continued": "پچھلے کام کا تسلسل", "none": "(کوئی درخواست درج نہیں)",
           "pasted": "چسپاں آؤٹ پٹ: ", "ran": "چلایا: "},
}
#: Commands that only look (list, read, search, report status): what a phase *did* is in the others.
_LOOK_ONLY = re.compile(
    r"^(?:cd|ls|ll|dir|pwd|cat|type|head|tail|less|more|wc|file|stat|find|fd|grep|rg|ag|ack|tree|echo|printf|which"
    r"|whereis|env|printenv|date|whoami|id|uname|ps|top|df|du|free|sleep|true|clear|history|jq|sed -n|awk"
    r"|curl -[sSI]*I|nl|sort|uniq|cut|diff|cmp|Get-ChildItem|Get-Content|Select-String|Test-Path"
    r"|git (?:status|log|diff|show|branch(?! -[dDmM])|remote -v|rev-parse|ls-files|blame|config --get|fetch --dry-run)"
    r"|(?:npm|pnpm|yarn) (?:ls|list|view|info|why|outdated)|pip (?:show|list|freeze)|python3? -c|node -e|docker ps)\b",
    re.I)
_EXT_LANG = {"py": "python", "ts": "typescript", "tsx": "typescript", "js": "javascript", "jsx": "javascript",
             "mjs": "javascript", "rs": "rust", "go": "go", "java": "java", "kt": "kotlin", "rb": "ruby",
             "php": "php", "cs": "csharp", "cpp": "cpp", "cc": "cpp", "hpp": "cpp", "c": "c", "h": "c",
             "swift": "swift", "sh": "shell", "bash": "shell", "sql": "sql", "html": "html", "css": "css",
             "vue": "vue", "svelte": "svelte", "dart": "dart", "scala": "scala", "lua": "lua", "ex": "elixir"}
_CMD_TAGS = ("git", "docker", "pytest", "npm", "pnpm", "yarn", "cargo", "uv", "pip", "make", "kubectl",
             "terraform", "gh", "poetry", "helm", "ansible")
_PROJECT_DIRS = ("src", "code", "projects", "repos", "git", "dev", "work", "workspace")


# --------------------------------------------------------------------------- asks


@lru_cache(maxsize=4096)  # the same asks are trimmed for the goal, each phase, topic splits and open items
def _trim_ask(text: str, limit: int = MAX_ASK, lang: str | None = None) -> str:
    text = _HARNESS_TAG.sub(" ", user_words(text))
    if (lang is not None and not re.search(r"[^\W\d_]{2,}", typed_prose(text)) and len(text.strip()) > 12
            and len(text.split()) > 1):
        # (a short answer, "A", "3", "y", is quoted as typed, and so is one URL or path given as the answer)
        return _pasted(text, lang)
    if lang is not None and (split := split_paste(text)) is not None:
        typed, paste = split
        label = _pasted(paste, lang)
        said = _trim_ask(typed, max(limit - len(label) - 1, limit // 2)) if typed else ""
        return f"{said} {label}".strip()
    lines = _prose(text).splitlines()
    prose = " ".join(" ".join(lines).split())
    if len(prose) <= limit:
        return prose
    if lines and _HEADING.match(lines[0]):  # a pasted document ("# PolyDot — Build Specification"): its title
        return _clip(unmark(lines[0]), limit)
    out = ""
    sentences = [part for x in _sentences(prose) for part in re.split(r"(?<=…)\s+", x) if part]
    # "Let me give you the full context…" announces the task and states none of it: the sentences after it do
    sentences = [x for x in sentences if not _ANNOUNCES.match(x)] or sentences
    for s in sentences[:2]:  # one or two sentences, when they fit
        if len(out) + len(s) + 1 > limit:
            break
        out = f"{out} {s}".strip()
    return out or _clip(prose, limit)



#: What the harness adds to a user's message (Claude Code's note of the file open in the IDE, a system reminder): not
#: the user's words, and no title for what was asked.
_HARNESS_TAG = re.compile(r"<(ide_opened_file|ide_selection|ide_diagnostics|system-reminder)>.*?(?:</\1>|\Z)", re.S)
#: An ask that sets no task: a greeting, "what model are you", a command typed into the chat ("setx OLLAMA_API_BASE:").
#: The goal is the first ask that is none of these, and a greeting before a request is no part of it.
_SMALL_TALK = re.compile(
    r"^(?:hi|hey|hello|hola|olá|ola|oi|bonjour|hallo|привет|merhaba|selam|你好|您好|嗨|哈喽|哈咯|哈啰|哈罗|在吗|在不在"
    r"|안녕(?:하세요)?|こんにちは|こんばんは|おはよう(?:ございます)?|もしもし|xin chào|chào)(?:\s+\w+)?[\s!！,，.。~]*$"
    r"|^(?:你是(?:什么|哪个)模型|你是谁|what model are you|who are you)[\s?？!！]*$", re.I)
_COMMAND_ASK = re.compile(r"^(?:setx|export|set|cd|ls|dir|npm|npx|pnpm|yarn|pip3?|python3?|node|git|docker|curl|wget|sudo"
                          r"|apt(?:-get)?|brew|make|cargo|mvn|gradle)(?:\s+\S+){1,2}$")
_ANNOUNCES = re.compile(r"^(?:(?:so |ok(?:ay)?,? )?(?:let me|I'll|I will|I want to|I'd like to) (?:give|share|provide|explain"
                        r"|describe|paste)|here(?:'s| is| are)|below (?:is|are))\b[^.!?\n]{0,60}\b(?:context|background|details"
                        r"|overview|situation|setup|everything)\b[^.!?\n]{0,40}$", re.I)
_GREETING_LEAD = re.compile(r"^(?:hi|hey|hello|hola|olá|oi|bonjour|你好|您好)\b[^.!?。！？\n]{0,40}[.!?。！？,，]\s*", re.I)


def _sets_no_task(ask: str) -> bool:
    # (a menu pick, "CH", "A", "2", answers a question: it sets no task of its own; "部署" does)
    return not ask or bool(_MENU_PICK.fullmatch(ask) or _SMALL_TALK.match(ask) or _COMMAND_ASK.match(ask))


_MENU_PICK = re.compile(r"[A-Za-z0-9]{1,3}[.)]?")


def _goal(asks: Sequence[str]) -> str | None:
    """The first ask that sets a task (else the first ask), without a greeting before it."""
    if not asks:
        return None
    ask = next((a for a in asks if not _sets_no_task(a)), asks[0])
    return _GREETING_LEAD.sub("", ask) or ask


# A shell prompt and the command typed after it ("C:\\proj>mvn clean install", "$ npm test"); "cd" is not the ask.
_PROMPT = re.compile(r"(?:^[$>%] |[\\/\w.~-]>|[\w~/-]\$ )((?!cd\b)[a-z][\w.-]*(?: [^\s\[\]<>|]+){0,6})\s*$")
_PASTED_ERROR = re.compile(r"\[(?:ERROR|FATAL)\]|\bCaused by:|\b\w*(?:Exception|Error)\b:|\bBUILD FAILURE\b|^error[:\[]", re.I)


def _pasted(text: str, lang: str) -> str:
    """An ask with no word the user typed (a pasted log or terminal output), as a label and excerpts.

    Quoting 300 characters of a Maven log is no summary of what was asked, and in a Chinese
    session it reads as English; the label is in the session's language, and the excerpts (the
    command typed at a prompt and the first error line, else the first line) stay verbatim as code.
    """
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    command = next((m.group(1) for ln in lines if (m := _PROMPT.search(ln))), None)
    error = next((ln for ln in lines if _PASTED_ERROR.search(ln)), None)
    picked = [x for x in (command, error) if x] or lines[:1]
    label = _LABELS.get(lang, _LABELS["en"])["pasted"]
    # Each piece verbatim in its own code span (a cut goes outside it), so the note quotes, never edits.
    spans = [f"`{x[:100]}`" + ("…" if len(x) > 100 else "") for x in picked if "`" not in x]
    return label + " … ".join(spans) if spans else label.rstrip(" :：")


def user_asks(messages: Sequence[Message], lang: str | None = None) -> list[str]:
    """What the user asked, in order: verbatim prose, trimmed to one or two sentences (≤ 300 chars).

    With ``lang``, an ask that is only pasted output becomes a labelled one-line excerpt (``_pasted``). An ask that
    is only what the harness added (the file open in the IDE) says nothing and is left out.
    """
    return [ask for m in _live(messages) if _kind(m) == "ask" and (ask := _trim_ask(m.content, lang=lang))]


# --------------------------------------------------------------------------- open items


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
    """Cut before an ask that follows an answered ask (see module docstring), then merge the
    smallest neighbours until the count fits ``_phase_budget``: a long session keeps phases across
    its whole length instead of one last phase that swallows every later topic.

    The completion words that mark an answered ask are English and Chinese (and a few others); a session
    held in Turkish or Spanish, or one whose replies end on a question each time, has none, and its asks
    all fell into one phase. So a phase holding more than ``ASKS_PER_PHASE`` asks, while the generation
    has fewer phases than one per ``ASKS_PER_PHASE`` asks, is cut again before an ask whose predecessor got
    any answer (a reply or tool work), where the words of the asks around it change most (``_weak_cut``).
    """
    # One unit per ask: the ask and what follows it (what precedes the first ask rides with it).
    units: list[list[Message]] = [[]]
    has_ask = False
    for m in msgs:
        if _kind(m) == "ask":
            if has_ask:
                units.append([])
            has_ask = True
        units[-1].append(m)
    strong: list[bool] = [False]  # strong[k]: cut before unit k on a completion word or an answered question
    answered: list[bool] = [False]  # answered[k]: unit k-1 got some answer
    for prev in units[:-1]:
        ask = next((x for x in prev if _kind(x) == "ask"), None)
        tail = prev[prev.index(ask) + 1:] if ask is not None else prev
        reply = next((x for x in reversed(tail) if x.role == "assistant" and x.content.strip()), None)
        strong.append(reply is not None and ask is not None and (
            _mentions_done(reply.content) or bool(_QUESTION.search(_trim_ask(ask.content)))))
        answered.append(any(x.role == "assistant" and (x.tool_calls or _has_prose(x.content)) for x in tail))
    bounds = [k for k in range(1, len(units)) if strong[k]]
    n_asks = sum(1 for u in units if any(_kind(x) == "ask" for x in u))
    target = min(_phase_budget(n_asks), -(-n_asks // ASKS_PER_PHASE))
    words: list[set[str]] | None = None
    while len(bounds) + 1 < target:
        edges = [0, *bounds, len(units)]
        lo, hi = max(pairwise(edges), key=lambda e: e[1] - e[0])
        if hi - lo <= ASKS_PER_PHASE:
            break
        words = words if words is not None else [_topic_words(u) for u in units]
        cut = _weak_cut(range(lo + 1, hi), lo, hi, answered, words)
        if cut is None:
            break
        bounds = sorted([*bounds, cut])
    edges = [0, *bounds, len(units)]
    segments = [[m for u in units[a:b] for m in u] for a, b in pairwise(edges)]
    segments = [s for s in segments if s]
    asks = [sum(_kind(m) == "ask" for m in s) for s in segments]
    budget = _phase_budget(sum(asks))
    while len(segments) > budget:
        # merge the adjacent pair with the fewest asks between them (ties: the later pair)
        i = min(range(len(segments) - 1), key=lambda j: (asks[j] + asks[j + 1], -j))
        segments[i:i + 2] = [segments[i] + segments[i + 1]]
        asks[i:i + 2] = [asks[i] + asks[i + 1]]
    return segments


#: A word of a topic: four letters or more in any script, or two CJK characters in a row.
_TOPIC_WORD = re.compile(r"[^\W\d_]{4,}")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]{2,}")


def _topic_words(unit: list[Message]) -> set[str]:
    """What an ask is about: its words, and the names of the files the work after it touched."""
    ask = next((m for m in unit if _kind(m) == "ask"), None)
    text = _prose(ask.content).lower() if ask is not None else ""
    found = {w for w in _TOPIC_WORD.findall(text) if not _CJK_RUN.fullmatch(w)}
    for run in _CJK_RUN.findall(text):
        found.update(run[i:i + 2] for i in range(len(run) - 1))
    found.update(changed_names(unit))
    return found


def _weak_cut(candidates: range, lo: int, hi: int, answered: list[bool], words: list[set[str]]) -> int | None:
    """The unit in ``candidates`` before which the topic changes most: the fewest words shared by the two
    asks before it and the two from it on, with a lean to the middle (a cut that leaves one ask on one
    side and the rest on the other hides as much as no cut)."""
    best: tuple[float, int] | None = None
    for k in candidates:
        if not answered[k]:
            continue
        before = set().union(*words[max(lo, k - 2):k])
        after = set().union(*words[k:min(hi, k + 2)])
        shared = len(before & after) / len(before | after) if before | after else 0.0
        score = shared + 0.5 * abs((k - lo) - (hi - k)) / (hi - lo)
        if best is None or score < best[0]:
            best = (score, k)
    return best[1] if best else None


def _phase_budget(n_asks: int) -> int:
    """How many phases a generation may have: a handful for a short session, more for a long one."""
    return max(MAX_PHASE_SPLITS, min(MAX_PHASES, -(-n_asks // ASKS_PER_PHASE)))


def _phase_outcome(msgs: list[Message]) -> PhaseOutcome:
    asks = [i for i, m in enumerate(msgs) if _kind(m) == "ask"]
    tail, _closed = _until_closer(msgs[asks[-1] + 1:] if asks else msgs)
    replies = _replies(tail)
    final = replies[-1].content if replies else ""
    ran, unfixed = _tool_signal(tail)
    if not replies:
        return ("failed" if unfixed else "partial") if ran else "abandoned"
    if (_MAY_HAVE_FAILED.may_match(final) and _FAILED.search(final)) or (unfixed and not _claims_done(final)):
        return "failed"
    if _claims_done(final):
        return "partial" if unfixed else "done"
    if asks and _QUESTION.search(_trim_ask(msgs[asks[-1]].content)):
        return "done"
    return "partial" if ran else "unknown"


def _title(text: str, limit: int = 80) -> str:
    text = text.strip()
    if _LIST_MARK.match(text):
        # A numbered list: its first item is the title ("1. **Update the model**" must not be titled "1").
        text = _NEXT_ITEM.split(_LIST_MARK.sub("", text), maxsplit=1)[0]
    text = _ACK_PREFIX.sub("", " ".join(text.split()))
    text = unmark(text) or " ".join(text.split())
    sentences = _sentences(text) or [text]
    # A stub before the first full stop ("e.g.", "v2.") is no title on its own.
    stub = sentences[0].endswith(".") and " " not in sentences[0]
    first = (" ".join(sentences[:2]) if stub else sentences[0]).rstrip(".。")
    if len(first) > limit:
        cut = first[: limit - 1]
        first = (cut.rsplit(" ", 1)[0] if " " in cut[limit // 2:] else cut) + "…"
    word = first.split(" ", 1)[0]
    # Capitalise plain words only ("what's" and "no," are): "parser.py" or "`npm`" at the start stay as typed.
    plain = word.rstrip(",;:!?").replace("'", "").replace("’", "")
    return first[:1].upper() + first[1:] if plain.isalpha() and plain.islower() else first


def _done_text(msgs: list[Message], cwd: str | None, lang: str, known: frozenset[str] | None = None) -> str:
    asks = [i for i, m in enumerate(msgs) if _kind(m) == "ask"]
    # The last reply that says something: a phase often ends on an empty turn or a tool timeout notice.
    replies = [r for r in _replies(_until_closer(msgs[asks[-1] + 1:] if asks else msgs)[0]) if _has_prose(r.content)]
    said: list[str] = []
    if replies:
        # A reply's Markdown headings and bold marks would read as escaped noise in the note ("\\## **Done**").
        sentences = [(s.startswith("#"), unmark(s))
                     for s in _sentences(replies[-1].content)]
        # A bare lead-in ("Here's the deal on randomness:") introduces the report and reports nothing itself.
        said = [s for heading, s in sentences
                if not heading and len(s) >= 12 and not _PRESENTS.match(s)
                and _MAY_ACT.may_match(s) and (_ACTION.search(s) or _DONE.search(s))][:2]
        said = (said or [s for heading, s in sentences if not heading and s and not _PRESENTS.match(s)][:1]
                or [s for _, s in sentences if s][:1])
        # What the agent said it changed ("I removed the interruptionQueue setting", "改用 AuthService.userLogin()"):
        # a long phase's last reply often says only "done", while the substance was reported earlier, and
        # a reply that does report its changes lists them after a lead-in sentence.
        earlier = [unmark(s) for r in _replies(msgs)
                   for s in _sentences(r.content)
                   if not s.startswith("#") and 16 <= len(s) <= 240 and s.count("`") % 2 == 0
                   and _CHANGE_REPORT.search(s) and not _ADVICE_OR_PLAN.search(s) and not _UNDER_WAY.match(s)]
        said = [*list(dict.fromkeys(e for e in earlier if e not in said))[-EARLIER_ACTIONS:], *said]
    changed = [t.path for t in file_touches(msgs, cwd) if t.action not in ("read", "deleted") and not is_scratch(t.path)]
    # A path the phase composed (a cd'd folder and a bare name) is shown while the session's facts still know it: a
    # folder moved later ("mv cute-sticky cutesticky") leaves the old path written nowhere, in the session or the note.
    changed = [p for p in changed if (not p.startswith(("/", "~")) and (known is None or p in known)) or _quoted(p, msgs)]
    sep, stop = ("、", "。") if lang in ("zh", "ja") else (", ", ".")
    if changed:
        # Each list ends like a sentence: the phase text joins its parts with spaces.
        said.append(_LABELS.get(lang, _LABELS["en"])["files"] + sep.join(changed[:8]) + stop)
    ran = _notable_commands(msgs)
    if ran:
        # A clipped command keeps its ellipsis outside the code span: the span is quoted as run.
        said.append(_LABELS.get(lang, _LABELS["en"])["ran"] + "; ".join(
            f"`{c}`" if len(c) <= 100 else f"`{c[:99].rstrip()}`…" for c in ran) + stop)
    # An empty code span ("in ``.", a link the export dropped) would pair the wrong backticks.
    return _clip(_EMPTY_CODE.sub("", " ".join(said)), 600)


_PRESENTS = re.compile(r"^(?:here(?:'s| is| are)|below (?:is|are)|以下是|如下)\b[^.!?。！？\n]*[:：]\W*$", re.I)


def done_text(msgs: list[Message], cwd: str | None, lang: str) -> str:
    """What the session shows was done in ``msgs``: the last reply's report, the files changed and the
    commands run (also what the LLM path says instead of a model's unsupported success claim)."""
    return _done_text(msgs, cwd, lang)


def _quoted(path: str, msgs: list[Message]) -> bool:
    """Whether the session wrote ``path`` out. An absolute path facts composed (a Hermes skill's folder from
    ``skill_view`` plus ``SKILL.md``) is listed under the note's output files; the phase's prose quotes
    only what the session said."""
    return any(path in m.content or any(path in str(c.arguments) for c in m.tool_calls) for m in msgs)


def _notable_commands(msgs: list[Message], limit: int = 4) -> list[str]:
    """The last few commands of a phase that changed something and did not fail, as run (clipped).

    They are the session's own record of what was done (``git rm --cached .env``, ``mvn -pl common
    install``), where the replies often only say "done". Reading, listing and status commands are left out.
    """
    results = {m.tool_call_id: m for m in msgs if m.role == "tool" and m.tool_call_id}
    found: dict[str, None] = {}
    for m in msgs:
        for call in m.tool_calls if m.role == "assistant" else ():
            if call.name.lower() not in COMMAND_TOOLS or result_failed(results.get(call.id or "")):
                continue
            raw = (call_command(call.arguments, results.get(call.id or "")) or "").strip()
            # Scripts (heredocs, several lines, comments, code for an ``exec`` tool) are not one command.
            if not raw or "\n" in raw or "`" in raw or raw.startswith(("#", "const ", "await ", "import ")):
                continue
            cmd = " ".join(raw.split())
            if _LOOK_ONLY.match(cmd):
                continue
            found.pop(cmd, None)
            found[cmd] = None
    return list(found)[-limit:]


#: Words that point at a screenshot or at what was just said and name nothing ("这样了，看下", "是这样吗",
#: "like this?"): an ask made only of them says what the phase was about no more than "ok" does.
_POINTING = re.compile(r"这样|那样|这个|那个|这里|那里|看下|看看|看一下|现在|可以|是|的|吧|吗|呢|了|对|好|行|嗯|啊|呀"
                       r"|\b(?:like|this|that|these|here|there|is|it|ok|okay|now|so|right|correct|yes|see|look)\b", re.I)
_HEADING = re.compile(r"^#{1,6}\s+(.+)$", re.M)


def _names_nothing(ask: str) -> bool:
    return not _UNITS.search(_POINTING.sub(" ", ask))


def _phase_title(asks: Sequence[str], segment: Sequence[Message]) -> str:
    """The first ask that names something; when every ask only points ("这样了", "是这样吗": a user sending
    screenshots), the first heading of the replies, which says what the step was; else the first ask."""
    named = next((a for a in asks if not _names_nothing(a) and not _sets_no_task(a)), None)
    if named is None:
        heading = next((h for r in _replies(list(segment)) for h in _HEADING.findall(r.content)
                        if not _names_nothing(_MARKUP.sub("", h))), None)
        named = heading or asks[0]
    return _title(named)


def _phases(session: Session, chunks: Sequence[Chunk], lang: str, root: str | None,
            known: frozenset[str] | None = None) -> list[Phase]:
    labels = _LABELS.get(lang, _LABELS["en"])
    phases: list[Phase] = []
    for generation, msgs in _generations(session, chunks):
        for segment in _split_topics(msgs):
            asks = list(dict.fromkeys(user_asks(segment, lang)))  # a repeated ask is listed once
            if not asks and not _replies(segment) and not any(m.tool_calls for m in segment):
                continue
            title = _phase_title(asks, segment) if asks else labels["continued"]
            phases.append(Phase(title=title, asks=tuple(asks[:5]), done=_done_text(segment, root, lang, known),
                                outcome=_phase_outcome(segment), generation=generation))
    return phases


# --------------------------------------------------------------------------- tags, projects, goal


def _tag(text: str) -> str | None:
    tag = re.sub(r"[^a-z0-9_/-]+", "-", text.lower()).strip("-/")
    return tag if tag and not tag.replace("-", "").replace("_", "").isdigit() else None


def derived_tags(session: Session, facts: Facts) -> list[str]:
    """Tags any summariser can stand behind: the source, the languages of the files, known tools run."""
    tags = [session.source]
    paths = facts.output_files or [f.path for f in facts.files]
    langs = Counter(_EXT_LANG[ext] for p in paths if (ext := posixpath.splitext(p)[1][1:].lower()) in _EXT_LANG)
    tags += [name for name, _n in langs.most_common(2)]
    words = {w for cmd in facts.commands for w in re.findall(r"[\w.-]+", cmd)}
    tags += [t for t in _CMD_TAGS if t in words]
    return list(dict.fromkeys(t for raw in tags if (t := _tag(raw))))[:8]


def _projects(session: Session, facts: Facts, work: str | None) -> list[str]:
    out: list[str] = []
    root = forward_slashes(session.git_repo_root or work or "").rstrip("/")
    home = re.match(r"^(?:/home/[^/]+|/Users/[^/]+|/root|[a-z]:/Users/[^/]+|[a-z]:)$", root)
    if root and not home and root not in ("~", "/"):
        out.append(posixpath.basename(root))
    for f in facts.files:  # absolute paths left after normalising are outside the cwd
        m = re.match(r"^(?:/home/[^/]+|/Users/[^/]+|~)/(?:" + "|".join(_PROJECT_DIRS) + r")/([^/]+)/", f.path)
        if m and m.group(1) not in out:
            out.append(m.group(1))
    return out


#: Claude Code's own commands: they set up the tool (``/model``, ``/clear``), they ask for no work.
_BUILTIN_COMMANDS = frozenset({
    "add-dir", "agents", "bug", "clear", "compact", "config", "context", "cost", "doctor", "exit", "export", "help",
    "hooks", "ide", "login", "logout", "mcp", "memory", "model", "permissions", "plugin", "quit", "release-notes",
    "resume", "status", "statusline", "terminal-setup", "upgrade", "usage", "vim", "rewind", "output-style"})
_COMMAND_NAME = re.compile(r"<command-name>\s*/?([\w:.-]+)\s*</command-name>")
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)


def _command_goal(session: Session) -> str | None:
    """A session the user started with a command of a plugin or a project (``/coderabbit:review``,
    ``/speckit.plan``) and no words of their own asks for what the command does: its name (and arguments)."""
    for m in session.messages:
        if m.role != "user" or not (found := _COMMAND_NAME.search(m.content)):
            continue
        if found.group(1) in _BUILTIN_COMMANDS:
            continue
        args = _COMMAND_ARGS.search(m.content)
        return _clip(" ".join(f"/{found.group(1)} {args.group(1) if args else ''}".split()), MAX_ASK)
    return None


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
    asks = user_asks(session.messages, lang)
    goal = _goal(asks) or _checkpoint_goal(session, chunks) or session.title or _command_goal(session)
    goal = goal or _LABELS.get(lang, _LABELS["en"])["none"]
    end = judge_end_state(session, facts)
    root = work_root(session)  # the cwd, else the root the session's files imply (read once)
    phases = _phases(session, chunks, lang, root, frozenset(t.path for t in facts.files))
    if phases:
        last = phases[-1]
        outcome = last_phase_outcome(last.outcome, end.state)
        phases[-1] = last if outcome == last.outcome else last.model_copy(update={"outcome": outcome})
    return SessionSummary(
        title=_clip(session.title, 80) if session.title else _title(goal),
        goal=goal,
        phases=tuple(phases),
        decisions=tuple(key_decisions(session.messages)),
        output_files=tuple(facts.output_files),
        open_items=tuple(open_items(session)),
        errors=tuple(Problem(error=e) for e in facts.errors[:NOTE_ERRORS_MAX]),
        end_state=end.state,
        end_evidence=end.evidence,
        language=lang,
        tags=tuple(derived_tags(session, facts)),
        projects=tuple(_projects(session, facts, root)),
        summarizer="extractive",
        cost_usd=0.0,
    )
