"""Lexical features of ``Evidence``: command and error signatures, words, TF-IDF, and names from them.

The language-blind half of skill detection (``pipeline/skills/promote.py`` has the design): the
identifiers that repeat in agent work (paths, ``mkdocs gh-deploy``, ``ModuleNotFoundError``)
match whatever language the user wrote in. Pure Python, no scikit-learn. ``shared_terms`` and
``skill_name`` turn the features a group shares into the vocabulary and the name of a skill;
synthesis (``pipeline/skills/synthesis.py``) uses the same signatures to check a step's support.
"""

from __future__ import annotations

import itertools
import math
import re
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

from pipeline.skills.evidence import Evidence

_STOP = frozenset(
    ["the", "a", "an", "and", "or", "to", "of", "in", "on", "for", "with", "from", "by", "is", "are", "be", "it", "this", "that", "as", "at", "into", "our", "my", "we", "you", "i", "me", "please", "can", "could", "would", "should", "let", "lets", "let's", "make", "sure", "also", "just", "now", "then", "so", "do", "does", "did", "done", "help", "want", "need", "use", "using", "get", "set", "up", "out", "about", "again", "after", "before", "new", "all", "any", "some", "via"]
)
_WORD = re.compile(r"[a-z][a-z0-9_+.-]{2,}")
#: Runs of Chinese, Japanese or Korean characters: scripts that put no spaces between words.
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]+")
_SEGMENT_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\||\n)\s*")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "command", "exec", "npx", "uvx", "pnpx", "bunx"})
_NOISE_PROGRAMS = frozenset({"cd", "echo", "cat", "ls", "pwd", "true", "sleep", "clear", "printf", "export"})
_EXC = re.compile(r"\b([A-Z][A-Za-z]+(?:Error|Exception|Failure))\b")
_VOLATILE = re.compile(r"(?:/[^\s'\"]+|\b0x[0-9a-f]+\b|\b[0-9a-f]{7,}\b|\d+(?:\.\d+)*|'[^']*'|\"[^\"]*\")", re.I)

#: Tool names across agents → one vocabulary, so Claude's ``Bash`` and Hermes's ``terminal`` agree.
_TOOL_CANON = {
    "bash": "shell", "terminal": "shell", "exec_command": "shell", "shell": "shell", "run_terminal_cmd": "shell",
    "run_terminal_command": "shell", "run_terminal_command_v2": "shell", "run_in_terminal": "shell",
    "execute_command": "shell", "local_shell": "shell", "shell_command": "shell",
    "read": "read", "read_file": "read", "read_file_v2": "read", "view_file": "read",
    "write": "write", "write_file": "write", "create_file": "write",
    "edit": "edit", "multiedit": "edit", "patch": "edit", "apply_patch": "edit", "str_replace": "edit",
    "search_replace": "edit", "edit_file": "edit", "str_replace_editor": "edit",
    "grep": "search", "glob": "search", "search_files": "search", "codebase_search": "search",
    "grep_search": "search", "list_dir": "search",
    "webfetch": "web", "web_search": "web", "websearch": "web", "browser_navigate": "web",
}


def canonical_tool(name: str) -> str:
    low = name.lower()
    return _TOOL_CANON.get(low, low)


def command_signatures(command: str) -> list[str]:
    """``cd docs && npm run build | tee log`` → ``["npm run", "tee"]``: program + first sub-word."""
    return list(_command_signatures(command))


@lru_cache(maxsize=4096)
def _command_signatures(command: str) -> tuple[str, ...]:
    # Cached: agents run the same commands across sessions (``pytest -q``, ``git status``), and each
    # costs a shlex pass per segment; the index computes them for every note a run writes.
    sigs: list[str] = []
    for seg in _SEGMENT_SPLIT.split(command.strip()):
        try:
            toks = shlex.split(seg, comments=True)
        except ValueError:
            toks = seg.split()
        while toks and (toks[0] in _WRAPPERS or _ENV_ASSIGN.match(toks[0]) or toks[0].startswith("-")):
            toks = toks[1:]
        if not toks:
            continue
        prog = toks[0].rsplit("/", 1)[-1].lower()
        if prog in _NOISE_PROGRAMS or not re.match(r"^[a-z0-9][\w.+-]*$", prog):
            continue
        if prog.startswith("python") and len(toks) > 2 and toks[1] == "-m":
            prog, toks = toks[2].lower(), toks[2:]
        sub = next((t.lower() for t in toks[1:4] if re.fullmatch(r"[a-z][a-z0-9_-]{1,24}", t, re.I)), None)
        sigs.append(f"{prog} {sub}" if sub else prog)
    return tuple(sigs)


def error_signature(error: str) -> str:
    """Volatile parts (paths, numbers, hashes, quoted values) removed; the first eight words kept."""
    words = _VOLATILE.sub(" ", error.lower()).split()
    return " ".join(words[:8])


def text_terms(text: str) -> list[str]:
    """Lowercase words (no stopwords) plus CJK character bigrams, so Chinese goals get terms too."""
    low = text.lower()
    terms = [w.strip(".-") for w in _WORD.findall(low) if w.strip(".-") not in _STOP]
    for run in CJK.findall(low):
        terms += [run[i: i + 2] for i in range(max(1, len(run) - 1))]
    return [t for t in terms if t]


#: Feature groups and their weights. Identifiers that repeat across agent work (paths, commands,
#: errors) weigh most; tools are weak (everyone uses the shell) and words only break ties.
GROUP_WEIGHTS = {"c": 1.0, "p": 0.8, "f": 1.0, "b": 0.6, "e": 1.0, "x": 0.8, "t": 0.3, "s": 0.4, "w": 0.6}


def lexical_terms(ev: Evidence, *, words: bool = True) -> Counter[str]:
    """Identifier terms (commands, paths, errors, then tools) and, with ``words``, goal/decision words.

    Tools only count alongside a command, path or error: a session whose only signal is "used
    the web tool" would otherwise be identical to every other such session (cosine 1.0).
    """
    terms: Counter[str] = Counter()
    for cmd in ev.commands:
        for sig in command_signatures(cmd):
            terms["c:" + sig] += 1
            terms["p:" + sig.split(" ", 1)[0]] += 1
    for path in ev.files:
        norm = path.strip().strip("`").removeprefix("./").lower()
        terms["f:" + norm] += 1
        terms["b:" + norm.rsplit("/", 1)[-1]] += 1
    for err in ev.errors:
        if sig := error_signature(err):
            terms["e:" + sig] += 1
        for exc in _EXC.findall(err):
            terms["x:" + exc.lower()] += 1
    if terms:
        canon = list(dict.fromkeys(canonical_tool(t) for t in ev.tools))
        terms.update("t:" + t for t in canon)
        terms.update(f"s:{a}>{b}" for a, b in itertools.pairwise(canon))
    if words:
        terms.update(word_terms(ev))
    return terms


def word_terms(ev: Evidence) -> Counter[str]:
    """The ``w:`` (goal, title and decision words) part of ``lexical_terms``, alone."""
    return Counter("w:" + w for w in text_terms(" ".join([ev.goal, ev.title, *ev.decisions[:6]])))


def tfidf_vectors(docs: Sequence[Counter[str]]) -> list[dict[str, float]]:
    """Sublinear TF × smoothed IDF × group weight, L2-normalised. Pure Python: no scikit-learn."""
    n = len(docs)
    df: Counter[str] = Counter(t for d in docs for t in d)
    return [tfidf_vector(d, df, n) for d in docs]


def tfidf_vector(doc: Counter[str], df: Mapping[str, int], n: int) -> dict[str, float]:
    """One document's ``tfidf_vectors`` entry, given the document frequencies of the ``n`` documents."""
    vec = {t: (1 + math.log(c)) * (math.log((1 + n) / (1 + df[t])) + 1) * GROUP_WEIGHTS.get(t[0], 1.0)
           for t, c in doc.items()}
    norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
    return {t: v / norm for t, v in vec.items()}


def cosine_sparse(a: dict[str, float], b: dict[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(v * b.get(t, 0.0) for t, v in a.items())


def shared_terms(members: Sequence[Evidence], limit: int = 6, groups: str = "cpwb") -> list[str]:
    """Terms present in most members (in ``groups``, that order): the procedure's vocabulary."""
    counts: Counter[str] = Counter()
    for ev in members:
        counts.update(set(lexical_terms(ev)))
    need = max(2, math.ceil(len(members) * 0.6)) if len(members) > 1 else 1
    ranked = [t for t, c in counts.most_common() if c >= need and t[0] in groups]
    ranked.sort(key=lambda t: (groups.index(t[0]), -counts[t], t))
    return [t.split(":", 1)[1] for t in ranked[:limit]]


_NAME_BAD = re.compile(r"[^a-z0-9]+")
_RESERVED_NAME_WORDS = ("claude", "anthropic")


def skill_name(words: Iterable[str], fallback: str) -> str:
    """``^[a-z0-9]+(-[a-z0-9]+)*$``, ≤ 64 chars, ASCII (the spec's rule; Hermes is laxer)."""
    parts: list[str] = []
    for w in words:
        for p in _NAME_BAD.sub("-", w.lower()).split("-"):
            if p and p not in parts and p not in _RESERVED_NAME_WORDS and not p.isdigit():
                parts.append(p)
    name = "-".join(parts[:5])[:64].strip("-")
    return name or fallback

