"""What makes a drafted skill reusable: a task name, placeholders for varying values, whole sentences.

Issue 17: a session promoted by hand was staged as ``gh-run-been-days`` (name and tags were the
most frequent goal words, which were stopwords), its step hard-coded ``gh run view 9900`` although
the run id changed on every call, and its pitfall was an error *signature* (volatile parts cut out,
"error - config value : the plugin is") instead of what the evidence said. Three structural rules
replace those word counts:

* **Name = verb + object.** The verb is the goal's imperative verb (a closed list of task verbs, in
  English or Chinese), else the action word of a shared command (``mkdocs gh-deploy`` → deploy);
  the object is the noun run that follows the verb in the goal (``fix the docs deploy workflow``),
  else the goal's first noun run (``the docs deploy workflow … fix it``), else the command's
  program. Across a cluster the members vote; a verb that the commands also show wins ties.
* **Placeholders.** Commands are aligned (same signature, same number of tokens) across and within
  the evidence sessions; a token that differs between aligned commands becomes a named
  placeholder (``<run-id>``, ``<file>``, ``<url>``). A value seen once still becomes one when it
  looks like an identifier (a positional number of three or more digits, a commit hash, a UUID).
* **Whole sentences.** A pitfall quotes the evidence: the complete sentences of an error line, never
  a clipped one and never a signature.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from pipeline.skills.evidence import Evidence
from pipeline.skills.lexical import CJK, command_signatures

# --------------------------------------------------------------------------- task names


def _wordset(text: str) -> frozenset[str]:
    """Whitespace-separated words: long word lists stay readable in the source."""
    return frozenset(text.split())


#: Verbs that name a task. A closed list on purpose: an open "first word of the goal" is how
#: "been" and "days" became a name. Words that are also common nouns in goals ("test", "release",
#: "review") are included because imperative goals use them as verbs ("review the diff").
TASK_VERBS = _wordset("""
add analyse analyze apply archive audit automate backup benchmark bootstrap bump build check clean clone collect
compare compile configure connect convert create debug delete deploy design diagnose document download enable
explain export extract find fix format generate implement import improve initialise initialize inspect install
integrate investigate lint load merge migrate monitor move optimise optimize package patch pin port prepare
profile provision publish push rebase rebuild refactor release remove rename repair replace reproduce rerun
research reset resolve restore review rewrite rollback rotate scaffold schedule ship split summarise summarize
sync tag test trace translate triage troubleshoot tune uninstall update upgrade upload validate verify view
watch write
""")

#: Chinese task verbs → the English verb used in the (ASCII-only) name.
ZH_VERBS = {
    "修复": "fix", "修正": "fix", "部署": "deploy", "发布": "publish", "添加": "add", "新增": "add",
    "翻译": "translate", "更新": "update", "升级": "upgrade", "重构": "refactor", "测试": "test",
    "实现": "implement", "迁移": "migrate", "安装": "install", "配置": "configure", "调试": "debug",
    "排查": "debug", "审查": "review", "检查": "check", "优化": "optimize", "生成": "generate",
    "创建": "create", "分析": "analyze", "设计": "design", "恢复": "restore", "备份": "backup",
    "编写": "write", "解决": "resolve", "调研": "research", "总结": "summarize", "删除": "remove",
    "追踪": "trace", "制作": "create", "整理": "document", "审核": "review", "构建": "build",
}

#: Goals that ask why something fails name no verb; the task they describe is debugging.
_FAILURE = re.compile(r"\b(?:why|failing|fails|failed|broken|error|errors|crash\w*|not working|red)\b", re.I)
_PHRASAL = {("set", "up"): "setup", ("clean", "up"): "clean", ("look", "into"): "investigate"}

#: Words that never start or extend an object: function words, auxiliaries, pronouns, time words.
_FUNCTION = _wordset("""
a an the this that these those it its it's they them their there here i me my we our us you your he she his her
and or but nor so then than as at by for from in into of off on onto out over to up via with within without
about after again against before below between during through under until upon
is are was were be been being am do does did done has have had having will would shall should can could may
might must not no yes ok okay please pls just also now still already only very really quite too
all any each every some more most many much few other another such same new old
what which who whom whose when where why how
day days week weeks month months year years hour hours minute minutes today yesterday tomorrow time times
thing things stuff way ways lot bit one two three first second last next
help want need let lets make sure get got try trying keep again
""")

_WORD_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9_+.-]*|[,.;:!?()\[\]{}\"“”'`]|[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]+")
_BOUNDARY = frozenset(",.;:!?()[]{}\"“”'`")


def _clean_word(word: str) -> str:
    return word.strip(".-_+").lower()


def _object_run(tokens: Sequence[str], start: int) -> list[str]:
    """Content words from ``start`` on, after leading function words, until a boundary or a function word."""
    i = start
    while i < len(tokens) and _clean_word(tokens[i]) in _FUNCTION:
        i += 1
    run: list[str] = []
    for k in range(i, len(tokens)):
        tok = tokens[k]
        w = _clean_word(tok)
        if tok in _BOUNDARY or not w or w in _FUNCTION or not re.fullmatch(r"[a-z][a-z0-9_+.-]*", w):
            break
        # A participle after a noun ends the phrase: "parser tests started failing" → "parser tests",
        # "workflow failing on pve2" → "workflow"; "engineering grant" is a noun phrase and stays.
        nxt = _clean_word(tokens[k + 1]) if k + 1 < len(tokens) else ""
        if run and (re.fullmatch(r"[a-z]{3,}ed", w) or (re.fullmatch(r"[a-z]{3,}ing", w) and (
                not nxt or nxt in _FUNCTION or tokens[k + 1] in _BOUNDARY))):
            break
        run.append(w)
    return run[:3] if len(run) <= 3 else run[-3:]


def _noun_runs(tokens: Sequence[str]) -> list[list[str]]:
    runs: list[list[str]] = []
    i = 0
    while i < len(tokens):
        w = _clean_word(tokens[i])
        if tokens[i] in _BOUNDARY or w in _FUNCTION or not re.fullmatch(r"[a-z][a-z0-9_+.-]*", w):
            i += 1
            continue
        run = _object_run(tokens, i)
        if run:
            runs.append(run)
            i += len(run)
        else:
            i += 1
    return runs


#: Words after which a verb starts a request: "please fix", "can you fix", "help me fix", "want to fix".
_LEAD_INS = _wordset("please pls to you me us user and then lets let's just now also first help kindly use")


def _imperative(tokens: Sequence[str], i: int) -> bool:
    """A verb in request position: at a clause start or after a lead-in ("docs deploy workflow" is a noun)."""
    return i == 0 or tokens[i - 1] in _BOUNDARY or _clean_word(tokens[i - 1]) in _LEAD_INS


def goal_task(goal: str) -> tuple[str | None, list[str]]:
    """(verb, object words) of a goal; either may be missing. ASCII words only in the object."""
    tokens = _WORD_TOKEN.findall(goal)
    verb: str | None = None
    obj: list[str] = []
    for i, tok in enumerate(tokens):
        w = _clean_word(tok)
        nxt = _clean_word(tokens[i + 1]) if i + 1 < len(tokens) else ""
        if (w, nxt) in _PHRASAL:
            verb, obj = _PHRASAL[(w, nxt)], _object_run(tokens, i + 2)
            break
        if w in TASK_VERBS and _imperative(tokens, i):
            verb, obj = w, _object_run(tokens, i + 1)
            break
        if CJK.fullmatch(tok):
            hit = min(((tok.find(zh), en) for zh, en in ZH_VERBS.items() if zh in tok), default=None)
            if hit is not None:
                verb = hit[1]
                ascii_after = _noun_runs(tokens[i + 1:])
                obj = ascii_after[0] if ascii_after else []
                break
    if verb is None and _FAILURE.search(goal):
        verb = "debug"
    if not obj:
        # "the docs deploy workflow has been red for 3 days, fix it": the object came before the verb.
        runs = [r for r in _noun_runs(tokens) if not (len(r) == 1 and r[0] == verb)]
        obj = runs[0] if runs else []
    return verb, [w for w in obj if w != verb]


#: Second-level sub-commands of CLIs that group them (``gh run view``, ``docker compose up``,
#: ``kubectl get pods``): words that are actions, never values a user typed.
_SUB_ACTIONS = _wordset("""
list ls get describe show view status logs log create new delete rm remove edit set run rerun cancel watch
download upload cp mv sync up down start stop restart exec apply diff merge checkout close reopen comment
""")


def _chain(command: str, prog: str) -> list[str]:
    """The sub-command words right after ``prog`` in its segment, up to the first flag or value."""
    chain: list[str] = []
    for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", command.strip()):
        toks = part.split()
        names = [t.rsplit("/", 1)[-1].lower() for t in toks]
        if prog not in names:
            continue
        # "journalctl -u restic-backup" has none: a flag's value is not an action.
        for t in toks[names.index(prog) + 1:]:
            if not re.fullmatch(r"[a-z][a-z0-9_-]{1,24}", t, re.I):
                break
            chain.append(t.lower())
        break
    return chain


def step_signature(command: str) -> str | None:
    """What makes two commands the same step: program + sub-command, plus a second-level action
    (``gh run view`` and ``gh run rerun`` are two steps; ``command_signatures`` has both as ``gh run``)."""
    sigs = command_signatures(command)
    if not sigs:
        return None
    chain = _chain(command, sigs[0].split(" ", 1)[0])
    if " " in sigs[0] and len(chain) > 1 and chain[0] == sigs[0].split(" ", 1)[1] and chain[1] in _SUB_ACTIONS:
        return f"{sigs[0]} {chain[1]}"
    return sigs[0]


def command_action(command: str) -> tuple[str | None, list[str]]:
    """(verb, object words) of a command's first segment: ``mkdocs gh-deploy`` → (deploy, [mkdocs]),
    ``gh run view 9900`` → (view, [gh, run]). The program is always part of the object."""
    sigs = command_signatures(command)
    if not sigs:
        return None, []
    prog = sigs[0].split(" ", 1)[0]
    chain = _chain(command, prog)
    for k, w in enumerate(chain[:3]):
        for part in w.split("-"):
            if part in TASK_VERBS:
                return part, [prog, *[x for x in chain[:k] if x != part]]
    return None, [prog, *chain[:1]]


#: Command-line tools that serve every kind of task: naming a skill after them says nothing.
_GENERIC_PROGRAMS = _wordset("""
gh glab git hub docker podman kubectl helm npm pnpm yarn npx pip pip3 uv poetry python python3 node bun deno cargo
go make cmake bash sh zsh curl wget ssh scp rsync sudo systemctl journalctl brew apt apt-get dnf aws az gcloud
""")


def _ascii(words: Iterable[str]) -> list[str]:
    return [w for w in words if re.fullmatch(r"[a-z][a-z0-9_+.-]*", w)]


def task_words(members: Sequence[Evidence], commands: Sequence[str] = ()) -> tuple[str | None, list[str]]:
    """The verb and object words that name what ``members`` did, by vote (see the module docstring).

    ``commands`` are the procedure's commands in order (the shared ones); without them each
    member's own commands are used.
    """
    cmds = list(commands) or [c for e in members for c in e.commands]
    actions = [command_action(c) for c in cmds]
    cmd_verbs = {v for v, _ in actions if v}
    votes: Counter[str] = Counter()
    objects: dict[str, list[list[str]]] = {}
    for e in members:
        verb, obj = goal_task(e.goal or e.title)
        if verb is None and e.title:
            verb, obj = goal_task(e.title)
        if verb:
            votes[verb] += 1
            objects.setdefault(verb, []).append(_ascii(obj))
    verb: str | None = None
    obj: list[str] = []
    if votes:
        order = {v: i for i, v in enumerate(votes)}
        verb = max(votes, key=lambda v: (v in cmd_verbs, votes[v], -order[v]))
        # The object most members agree on; the first member's on a tie.
        cands = [tuple(o) for o in objects[verb] if o]
        if cands:
            counted = Counter(cands)
            obj = list(max(counted, key=lambda o: (counted[o], -cands.index(o))))
        prog = next((o[0] for v, o in actions if v == verb and o), None)
        if prog is not None and (prog not in _GENERIC_PROGRAMS or not obj):
            # The goal's verb is also a command's action: that program is the tool of the task
            # ("deploy the docs site" + "mkdocs gh-deploy" → deploy mkdocs site). A general-purpose
            # CLI is not ("rerun the failed CI jobs" + "gh run rerun" stays rerun failed ci jobs).
            obj = [prog, obj[-1]] if obj and obj[-1] != prog else [prog]
    if not obj:
        act = next(((v, o) for v, o in actions if v), None) or next(((v, o) for v, o in actions if o), None)
        if act is not None:
            verb = verb or act[0] or "run"
            obj = [w for w in act[1] if w != verb]
    return verb, obj


def task_name(members: Sequence[Evidence], commands: Sequence[str] = (), *, fallback: str) -> str:
    """``<verb>-<object>``, at most five words; ``fallback`` when the evidence names no task."""
    from pipeline.skills.lexical import skill_name

    verb, obj = task_words(members, commands)
    if not verb or not obj:
        return fallback
    return skill_name([verb, *obj], fallback=fallback)


# --------------------------------------------------------------------------- placeholders

_TOKEN = re.compile(r"""(?:[^\s'"]+|'[^']*'|"[^"]*")+""")
_SEP = frozenset({"|", "||", "&&", ";", "&"})
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://\S+$", re.I)
_HEX = re.compile(r"^(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}$")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
_INT = re.compile(r"^#?\d+$")
_PATH = re.compile(r"/|^[\w.-]+\.[A-Za-z][\w]{0,5}$")
_PLACEHOLDER = re.compile(r"<[a-z][a-z0-9-]*>")
#: One user's home directory in a path: the reader's is another, ``~`` is everyone's.
_HOME = re.compile(r"(^|=|['\"])(?:/Users|/home)/[^/\s'\"]+(?=/|$|['\"])")
#: Flags whose value is named after them; single letters that are conventional everywhere.
_FLAG_NAMES = {"m": "message", "b": "branch", "t": "tag", "n": "count", "p": "port", "u": "user", "f": "file",
               "o": "output", "c": "config", "r": "requirements", "C": "dir", "e": "env", "i": "input"}
#: Flags whose numeric value is a size, count or duration the procedure wants, not an identifier.
_SIZE_FLAG = re.compile(r"^(?:[a-zA-Z]|limit|depth|count|max.*|min.*|timeout|port|size|lines|width|height|retries"
                        r"|jobs|workers|threads|tail|head|since|until|days|hours|minutes|seconds|interval|level"
                        r"|verbosity|batch.*|page.*|per-page|top|first|last)$", re.I)
#: Programs whose numeric arguments are not identifiers (modes, durations, ranges).
_NUMERIC_ARGS = frozenset({"chmod", "umask", "sleep", "seq", "timeout", "head", "tail", "nice", "ulimit", "exit"})


def tokens(command: str) -> list[str]:
    """Shell words, quotes kept with their word: ``git commit -m "a b"`` → 4 tokens."""
    return _TOKEN.findall(command)


def _context(toks: Sequence[str], i: int) -> tuple[str | None, str | None, str | None]:
    """(program of the segment, the flag this token is the value of, the nearest noun before it)."""
    start = max((k + 1 for k in range(i) if toks[k] in _SEP), default=0)
    seg = toks[start: i]
    prog = None
    for t in seg:
        if "=" in t and not t.startswith("-"):
            continue
        if t in ("sudo", "env", "time", "nohup", "npx", "uvx", "exec", "command"):
            continue
        prog = t.rsplit("/", 1)[-1].lower()
        break
    flag = seg[-1] if seg and seg[-1].startswith("-") and "=" not in seg[-1] and len(seg) > 1 else None
    noun = None
    for n, t in enumerate(reversed(seg[1:])):
        w = t.lower()
        # The word right before the value is its action ("tasks get 009"), not what it identifies;
        # further back a sub-action word is the noun ("gh run view 9900" → run).
        if (t.startswith("-") or not re.fullmatch(r"[a-z][a-z0-9_-]{1,24}", w) or w in TASK_VERBS
                or (n == 0 and w in _SUB_ACTIONS) or w == prog):
            continue
        # "minsky tasks get 009" → <task-id>: the id of one of them.
        noun = w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
        break
    return prog, flag, noun


def _kind(value: str) -> str:
    bare = value.strip("'\"")
    if _URL.match(bare):
        return "url"
    if _UUID.match(bare) or _INT.match(bare):
        return "id"
    if _HEX.match(bare.lower()):
        return "commit"
    if value[:1] in "'\"":
        return "text"
    if _PATH.search(bare):
        return "file" if re.search(r"\.[A-Za-z]\w{0,5}$", bare) else "path"
    return "value"


def _looks_like_id(toks: Sequence[str], i: int) -> bool:
    """A value seen once that is still an identifier: a positional number of ≥ 3 digits, a hash, a UUID."""
    value = toks[i].strip("'\"")
    prog, flag, _ = _context(toks, i)
    if prog in _NUMERIC_ARGS or i == 0 or prog is None or toks[i] == prog:
        return False
    if _UUID.match(value) or _HEX.match(value.lower()):
        return True
    if _INT.match(value) and len(value.lstrip("#")) >= 3:
        # After a flag, a number is an id (--task 009, --run 9900) unless the flag sizes something.
        return flag is None or not _SIZE_FLAG.search(flag.lstrip("-"))
    return False


def _placeholder(toks: Sequence[str], i: int, used: set[str]) -> str:
    value = toks[i]
    kind = _kind(value)
    _, flag, noun = _context(toks, i)
    if flag is not None and kind not in ("url", "file", "path"):
        key = flag.lstrip("-")
        # "-m" → message; a short flag with a count in it ("grep -A1") names nothing: the value's kind does.
        name = (_FLAG_NAMES.get(key, key.lower()) if len(key) == 1 else
                kind if re.fullmatch(r"[A-Za-z]\d+", key) else key.lower())
        name = f"{name}-id" if kind == "id" and not name.endswith("id") else name
    elif kind == "id":
        name = f"{noun}-id" if noun else "id"
    elif kind == "value":
        name = "name"
    else:
        name = kind
    name = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "value"
    base, n = name, 2
    while name in used:
        name, n = f"{base}-{n}", n + 1
    used.add(name)
    return f"<{name}>"


def _shape(command: str) -> tuple[tuple[str, ...], int]:
    # The step's own signature first: "gh run view 1" and "gh run rerun 1" must not align.
    return (step_signature(command) or "", *command_signatures(command)[1:]), len(tokens(command))


def generalise_commands(commands: Iterable[str]) -> dict[str, str]:
    """Every command → its general form: tokens that differ between aligned commands, and tokens
    that look like identifiers, replaced by named placeholders.

    Aligned = same command signatures and the same number of tokens. Flags never become
    placeholders (``--force`` vs ``--clean`` are different steps, not one step with a value).
    """
    distinct = list(dict.fromkeys(c.strip() for c in commands if c and c.strip()))
    groups: dict[tuple[tuple[str, ...], int], list[list[str]]] = {}
    for cmd in distinct:
        groups.setdefault(_shape(cmd), []).append(tokens(cmd))
    varying: dict[tuple[tuple[str, ...], int], set[int]] = {}
    for key, rows in groups.items():
        if len(rows) < 2 or not key[0][0]:
            continue
        varying[key] = {i for i in range(key[1]) if len({r[i] for r in rows}) > 1
                        and not any(r[i].startswith("-") or r[i] in _SEP for r in rows) and i > 0}
    out: dict[str, str] = {}
    for cmd in distinct:
        toks = tokens(cmd)
        vary = varying.get(_shape(cmd), set())
        used = set(_PLACEHOLDER.findall(cmd))
        new = [(_placeholder(toks, i, used) if i in vary or _looks_like_id(toks, i) else _HOME.sub(r"\1~", t))
               for i, t in enumerate(toks)]
        # Unchanged commands keep their exact text (spacing included): the gate compares verbatim.
        out[cmd] = " ".join(new) if new != toks else cmd
    return out


def placeholders(command: str) -> list[str]:
    return _PLACEHOLDER.findall(command)


# --------------------------------------------------------------------------- whole sentences

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])")


def whole_sentences(text: str, limit: int = 240) -> str | None:
    """The leading complete sentences of ``text`` (an error line from the evidence), within ``limit``.

    A clipped text (ending in "…") loses its last, partial sentence; a sentence of fewer than three
    words says nothing a reader could act on. None when nothing whole is left.
    """
    text = " ".join(text.split())
    parts = [p for p in _SENTENCE_END.split(text) if p]
    if text.endswith("…"):
        parts = parts[:-1]
    kept: list[str] = []
    for p in parts:
        if sum(len(x) for x in kept) + len(p) + len(kept) > limit:
            break
        kept.append(p)
    quote = " ".join(kept).strip()
    cjk_chars = sum(len(run) for run in CJK.findall(quote))
    if not quote or (len(quote.split()) < 3 and cjk_chars < 6):
        return None
    return quote
