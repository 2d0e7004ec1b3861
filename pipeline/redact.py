"""Mask secrets before any text reaches a model, a cache row or a note.

Design: an ordered table of precompiled rules. Each rule has a KIND, a pattern whose group
``v`` (or the whole match) is the secret, and lowercase *triggers*: literal substrings that
must occur in the text for the rule to run at all. Most texts contain none of them, so a
10 MB tool result costs one ``str.lower()`` plus a handful of ``in`` checks, and only the
rules that can match scan it.

Order matters. Provider-specific token shapes run first (so the report says
``[REDACTED:GITHUB_TOKEN]`` rather than a generic kind); the context rules that follow
(``password=``, ``Authorization:``, ``.env`` lines, ``token=`` params) skip values that are
already masked. Replacements are ``[REDACTED:<KIND>]`` and never contain text a later rule
would match, so redaction is idempotent: ``redact(redact(x)) == redact(x)``.

False positives are preferred to leaks, but ordinary developer text must survive: git SHAs,
UUIDs, file paths, ``max_tokens=4000``, and prose such as "password reset flow" stay as they
are (see ``tests/secrets_corpus.py``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipeline.models import Chunk, Message, Session, ToolCall

MARK = "[REDACTED:{}]"
_ALREADY = "[REDACTED"


def _mark(kind: str) -> str:
    return MARK.format(kind)


# --------------------------------------------------------------------------- value heuristics

# Values that name a secret rather than contain one: env references, templates, placeholders.
_PLACEHOLDER = re.compile(
    r"""^(?:
        \$|\{\{|\{%|<|%\(|\[REDACTED|\*{3,}|x{3,}|\.{3}|…|""|''|your[_-]|
        (?:os\.environ|os\.getenv|getenv|process\.env|env\(|secrets\.|settings\.|config\.)|
        (?:none|null|nil|true|false|undefined|changeme|str|string|bytes|int|bool|optional|secretstr|any)
        (?![A-Za-z0-9_\-])
    )""",
    re.IGNORECASE | re.VERBOSE,
)


def _entropy(s: str) -> float:
    counts = Counter(s)
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _high_entropy(v: str) -> bool:
    """A random-looking token: long, letters and digits mixed, or plainly high entropy."""
    if len(v) < 12:
        return False
    has_digit = any(ch.isdigit() for ch in v)
    has_alpha = any(ch.isalpha() for ch in v)
    if has_digit and has_alpha:
        return True
    return len(v) >= 20 and _entropy(v) >= 3.5


def _is_placeholder(v: str) -> bool:
    return not v or bool(_PLACEHOLDER.match(v))


# Names whose value is a secret, grouped by how strict the value check is.
_PASSWORD_NAME = re.compile(r"(?:passw(?:or)?d|passphrase|pwd|pass)$", re.IGNORECASE)
_TOKENISH_NAME = re.compile(r"(?:token|auth|sig|signature|session[_-]?id|sid)$", re.IGNORECASE)


def _value_kind(name: str, value: str) -> str | None:
    """The KIND to mask ``value`` under, given the key it was assigned to; None to keep it."""
    v = value.strip()
    if _is_placeholder(v) or v.startswith(_ALREADY):
        return None
    if _PASSWORD_NAME.search(name):
        return "PASSWORD"
    if _TOKENISH_NAME.search(name):
        return "TOKEN" if _high_entropy(v) else None
    # api_key, secret, client_secret, private_key, credentials, access_key ...
    if re.fullmatch(r"\d{1,5}", v):
        return None
    return "SECRET" if len(v) >= 6 else None


#: A key name that holds a secret (used for dict keys in tool arguments, and by the text rules).
SECRET_NAME = re.compile(
    r"""(?:^|[_.\-])?(?:
        api[_-]?key|apikey|secret(?:[_-]?key)?|client[_-]?secret|private[_-]?key|access[_-]?key(?:[_-]?id)?|
        credentials?|passw(?:or)?d|passphrase|pwd|
        (?:access|auth|refresh|id|api|bot|session|bearer|csrf|xsrf)?[_-]?token|auth|signature|sig
    )$""",
    re.IGNORECASE | re.VERBOSE,
)


# --------------------------------------------------------------------------- rules

# Speed: CPython's ``re`` scans fast only when a pattern starts with a literal. So patterns start
# with their literal (``sk-ant-``, ``://``, ``password``) and the "not glued to a longer token"
# check runs afterwards on the character before the match (``bad_prev``). Case-insensitive rules
# are written in lower case and run case-sensitively over ``text.lower()``: an IGNORECASE
# alternation is ~10x slower. Values are always read back from the original text.

_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")

Judge = Callable[[re.Match[str], str], "str | None"]


@dataclass(frozen=True)
class Rule:
    kind: str
    pattern: re.Pattern[str]
    #: Lower-case literals; the rule runs only if one occurs in the lowered text.
    triggers: tuple[str, ...]
    #: Decides per match whether (and under which KIND) to mask the value group.
    judge: Judge | None = None
    #: Skip a match whose preceding character is one of these (it is part of a longer token).
    bad_prev: frozenset[str] = frozenset()
    #: Run over the lowered text (the pattern is written in lower case).
    lower: bool = False
    #: The IGNORECASE twin, for the rare text whose lower() changes length.
    pattern_ci: re.Pattern[str] | None = None


def _rule(
    kind: str,
    src: str,
    triggers: tuple[str, ...],
    judge: Judge | None = None,
    *,
    bad_prev: frozenset[str] = frozenset(),
    lower: bool = False,
    flags: int = 0,
) -> Rule:
    twin = re.compile(src, flags | re.IGNORECASE) if lower else None
    return Rule(kind, re.compile(src, flags), triggers, judge, bad_prev, lower, twin)


def _group(m: re.Match[str], text: str, *names: str) -> str | None:
    """The first participating group among ``names``, read from the original ``text``."""
    for n in names:
        if n in m.re.groupindex and m.start(n) >= 0:
            return text[m.start(n) : m.end(n)]
    return None


# Quoted or bare value after ``=``/``:``. Escaped quotes (\") cover JSON inside a JSON string, as
# tool results often are. A bare value may contain ``&`` unless it starts the next ``name=`` param.
_BARE = r"[^\s\"'`,;&)}\]<>\\]"
_VALUE = (
    r"(?:\\?\"(?P<v1>[^\"\\\n]*)\\?\"|'(?P<v2>[^'\n]*)'|(?P<v3>"
    + _BARE
    + r"+(?:&(?![A-Za-z0-9_.\-]+=)"
    + _BARE
    + r"*)*))"
)
_VALUE_GROUPS = ("v1", "v2", "v3")


def _judge_named(m: re.Match[str], text: str) -> str | None:
    return _value_kind(_group(m, text, "name") or "", _group(m, text, *_VALUE_GROUPS) or "")


def _judge_env(m: re.Match[str], text: str) -> str | None:
    if m.start() > 0 and text[m.start() - 1] in _ALNUM:  # MONKEY=..., not a *_KEY name
        return None
    v = (_group(m, text, *_VALUE_GROUPS) or "").strip()
    if _is_placeholder(v) or v.startswith(_ALREADY) or re.fullmatch(r"\d{1,5}", v):
        return None
    return "PASSWORD" if _PASSWORD_NAME.search(_group(m, text, "name") or "") else "ENV_SECRET"


def _judge_auth(m: re.Match[str], text: str) -> str | None:
    v = _group(m, text, "v") or ""
    return None if v.startswith(_ALREADY) or _is_placeholder(v) else "AUTH_HEADER"


def _judge_plain(kind: str) -> Judge:
    def judge(m: re.Match[str], text: str) -> str | None:
        return None if (_group(m, text, "v") or "").startswith(_ALREADY) else kind

    return judge


_PEM = r"-----BEGIN (?P<label>(?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----"
_KV_NAMES = (
    r"(?P<name>api[_-]?key|apikey|secret(?:[_-]?key)?|private[_-]?key|access[_-]?key(?:[_-]?id)?|credentials?|"
    r"passw(?:or)?d|passphrase|pwd|token|auth|signature|sig)"
)

RULES: tuple[Rule, ...] = (
    # A PEM/OpenSSH/PGP private key block, or an unterminated one (truncated output) to the end.
    _rule(
        "PRIVATE_KEY",
        r"(?P<v>" + _PEM + r"(?:.*?-----END (?P=label)PRIVATE KEY(?: BLOCK)?-----|.*\Z))",
        ("private key",),
        flags=re.DOTALL,
    ),
    _rule("ANTHROPIC_KEY", r"sk-ant-[A-Za-z0-9_\-]{20,}", ("sk-ant-",), bad_prev=_TOKEN_CHARS),
    _rule("OPENROUTER_KEY", r"sk-or-(?:v\d-)?[A-Za-z0-9]{20,}", ("sk-or-",), bad_prev=_TOKEN_CHARS),
    _rule("STRIPE_KEY", r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}", ("_live_", "_test_"), bad_prev=_TOKEN_CHARS),
    _rule("STRIPE_KEY", r"whsec_[A-Za-z0-9]{20,}", ("whsec_",), bad_prev=_TOKEN_CHARS),
    # sk-, sk-proj-, sk-svcacct-: a digit is required so names like "sk-learn-helpers" survive.
    _rule(
        "OPENAI_KEY",
        r"sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{20,}",
        ("sk-",),
        bad_prev=_TOKEN_CHARS,
    ),
    _rule("GITHUB_TOKEN", r"gh[pousr]_[A-Za-z0-9]{30,}", ("gh",), bad_prev=_TOKEN_CHARS),
    _rule("GITHUB_TOKEN", r"github_pat_[A-Za-z0-9_]{40,}", ("github_pat_",), bad_prev=_TOKEN_CHARS),
    _rule("GITLAB_TOKEN", r"glpat-[A-Za-z0-9_\-]{20,}", ("glpat-",), bad_prev=_TOKEN_CHARS),
    _rule("SLACK_TOKEN", r"xox[abposre]-[A-Za-z0-9\-]{10,}", ("xox",), bad_prev=_TOKEN_CHARS),
    _rule("SLACK_WEBHOOK", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]{20,}", ("hooks.slack.com",)),
    _rule(
        "AWS_ACCESS_KEY",
        r"A(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA|IPA)[A-Z0-9]{16}(?![A-Z0-9])",
        ("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"),
        bad_prev=_ALNUM,
    ),
    _rule(
        "AWS_SECRET_KEY",
        r"aws_?secret_?(?:access_?)?key\\?[\"']?\s*[:=]\s*\\?[\"']?(?P<v>[a-z0-9/+=]{40})(?![a-z0-9/+=])",
        ("aws",),
        _judge_plain("AWS_SECRET_KEY"),
        lower=True,
    ),
    _rule("GOOGLE_API_KEY", r"AIza[0-9A-Za-z_\-]{35}(?![A-Za-z0-9_\-])", ("aiza",)),
    _rule("HF_TOKEN", r"hf_[A-Za-z0-9]{30,}", ("hf_",), bad_prev=_TOKEN_CHARS),
    _rule("NPM_TOKEN", r"npm_[A-Za-z0-9]{36}", ("npm_",), bad_prev=_TOKEN_CHARS),
    _rule(
        "JWT",
        r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        ("eyj",),
        bad_prev=_TOKEN_CHARS,
    ),
    # <bot id>:<35 chars>. The ':' leads so the scan is fast; the digits are a lookbehind.
    _rule(
        "TELEGRAM_TOKEN",
        r"(?<=[0-9]{8})(?P<v>:[A-Za-z0-9_\-]{35})(?![A-Za-z0-9_\-])",
        (":",),
        lambda m, text: _telegram(m, text),
    ),
    # scheme://user:password@host -> only the password goes; the host stays readable.
    _rule(
        "CONNECTION_STRING",
        r"://[^\s/@\"':\[\]]*:(?P<v>[^\s\"'/]+)@(?=[^\s@/\"']+)",
        ("://",),
        _judge_plain("CONNECTION_STRING"),
    ),
    _rule("PRIVATE_KEY", r"-----begin[a-z ]*private key-----", ("private key",), lower=True),
    # Authorization / X-Api-Key headers: scheme and credential both go.
    _rule(
        "AUTH_HEADER",
        r"(?:authorization|x-api-key|api-key|x-auth-token)\\?[\"']?\s*[:=]\s*\\?[\"']?"
        r"(?!(?:bearer|basic|token|digest|bot)\s+\[redacted)"
        r"(?P<v>(?:(?:bearer|basic|token|digest|bot)\s+)?[^\s\"',;\\]+)",
        ("authorization", "api-key", "auth-token"),
        _judge_auth,
        lower=True,
    ),
    _rule(
        "BEARER_TOKEN",
        r"bearer\s+(?P<v>[a-z0-9._~+/=\-]{8,})",
        ("bearer",),
        _judge_plain("BEARER_TOKEN"),
        bad_prev=_ALNUM,
        lower=True,
    ),
    _rule(
        "COOKIE",
        r"cookie\\?[\"']?\s*:\s*(?P<v>[^\r\n\"'\\=]*=[^\r\n\"'\\]*)",
        ("cookie",),
        _judge_plain("COOKIE"),
        lower=True,
    ),
    _rule("PASSWORD", r"--password[= ](?P<v>[^\s\"']+)", ("--password",), _judge_plain("PASSWORD")),
    # .env / shell: UPPER_CASE names ending in a secret word, anywhere on a line, so
    # `OPENAI_API_KEY=... python run.py` is caught too. The judge rejects MONKEY=.
    _rule(
        "ENV_SECRET",
        r"(?P<name>API_KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|PAT|CREDENTIALS|AUTH|DSN|DATABASE_URL)"
        r"(?![A-Za-z0-9_])[ \t]*=[ \t]*" + _VALUE,
        ("key", "token", "secret", "pass", "pwd", "pat", "credentials", "auth", "dsn", "database_url"),
        _judge_env,
    ),
    # Generic key/value in code, JSON, YAML, URLs: password=..., "api_key": "...", ?token=...
    _rule(
        "SECRET",
        _KV_NAMES + r"(?![a-z0-9_])\\?[\"']?[ \t]*(?::|=>|=)[ \t]*" + _VALUE,
        ("key", "secret", "credential", "passw", "passphrase", "pwd", "token", "auth", "sig"),
        _judge_named,
        lower=True,
    ),
)


def _telegram(m: re.Match[str], text: str) -> str | None:
    # The bot id is 8-10 digits not glued to a longer number; mask "id:secret" as one token.
    i = m.start()
    j = i
    while j > 0 and text[j - 1].isdigit():
        j -= 1
    return "TELEGRAM_TOKEN" if 8 <= i - j <= 10 else None


# --------------------------------------------------------------------------- text


def _apply(rule: Rule, text: str, lowered: str) -> str:
    if rule.lower and len(lowered) != len(text):
        pattern, haystack = rule.pattern_ci, text
    else:
        pattern, haystack = rule.pattern, (lowered if rule.lower else text)
    assert pattern is not None
    out: list[str] = []
    last = 0
    for m in pattern.finditer(haystack):
        if rule.bad_prev and m.start() > 0 and text[m.start() - 1] in rule.bad_prev:
            continue
        if rule.judge is None:
            s, e, kind = m.start(), m.end(), rule.kind
        else:
            judged = rule.judge(m, text)
            if judged is None:
                continue
            kind = judged
            # Mask the value group only; the key, quotes and scheme stay so the text reads.
            g = next((g for g in ("v", *_VALUE_GROUPS) if g in m.re.groupindex and m.start(g) >= 0), None)
            s, e = (m.start(g), m.end(g)) if g else (m.start(), m.end())
            if rule.kind == "TELEGRAM_TOKEN":  # include the bot id before the ':'
                while s > 0 and text[s - 1].isdigit():
                    s -= 1
        if s < last:
            continue
        out.append(text[last:s])
        out.append(_mark(kind))
        last = e
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


#: Every trigger once. Rules share triggers ("key", "token", "pass" ...), so screening each
#: distinct literal once per text, rather than each rule's list, halves the ``in`` scans; and
#: a text holding none of them (most prose) returns after that single screen.
_TRIGGERS: tuple[str, ...] = tuple(dict.fromkeys(t for rule in RULES for t in rule.triggers))


def _present(lowered: str) -> frozenset[str]:
    return frozenset([t for t in _TRIGGERS if t in lowered])


def redact(text: str) -> str:
    """Return ``text`` with every secret replaced by ``[REDACTED:<KIND>]``."""
    if not text:
        return text
    lowered = text.lower()
    present = _present(lowered)
    if not present:
        return text
    for rule in RULES:
        if not present.isdisjoint(rule.triggers):
            new = _apply(rule, text, lowered)
            if new is not text:
                # A mask adds text ("[redacted:aws_secret_key]"), so later rules re-screen it.
                text, lowered = new, new.lower()
                present = _present(lowered)
    return text


def _redact_value(value: Any, key: str | None = None) -> Any:
    """Redact a JSON-like value; a dict key that names a secret masks its scalar value whole."""
    if isinstance(value, str):
        if key is not None and SECRET_NAME.search(key):
            kind = _value_kind(key, value)
            if kind is not None:
                return _mark(kind)
        return redact(value)
    if isinstance(value, dict):
        return {k: _redact_value(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_redact_value(v, key) for v in value)
    return value


# --------------------------------------------------------------------------- models


def redact_message(m: Message) -> Message:
    """Redact content, tool-call arguments, reasoning and carrier summary. Unchanged → same object."""
    update: dict[str, Any] = {}
    content = redact(m.content)
    if content != m.content:
        update["content"] = content
    for field in ("reasoning", "carrier_summary"):
        old = getattr(m, field)
        if old:
            new = redact(old)
            if new != old:
                update[field] = new
    if m.tool_calls:
        calls = tuple(_redact_call(c) for c in m.tool_calls)
        if any(a is not b for a, b in zip(calls, m.tool_calls, strict=True)):
            update["tool_calls"] = calls
    return m.model_copy(update=update) if update else m


def _redact_call(c: ToolCall) -> ToolCall:
    new = _redact_value(c.arguments)
    return c if new == c.arguments else c.model_copy(update={"arguments": new})


def _redacted_update(messages: tuple[Message, ...], field: str, text: str | None) -> dict[str, Any]:
    """What changes once ``messages`` and one text field are redacted; empty when nothing does.

    Unchanged objects are kept as they are, so redacting clean data allocates nothing new.
    """
    update: dict[str, Any] = {}
    redacted = tuple(redact_message(m) for m in messages)
    if any(a is not b for a, b in zip(redacted, messages, strict=True)):
        update["messages"] = redacted
    if text:
        clean = redact(text)
        if clean != text:
            update[field] = clean
    return update


def redact_session(s: Session) -> Session:
    """Redact every message and the title. ``cwd`` and other paths are left as they are."""
    update = _redacted_update(s.messages, "title", s.title)
    return s.model_copy(update=update) if update else s


def redact_chunk(c: Chunk) -> Chunk:
    """Redact a chunk's messages and its Hermes checkpoint text."""
    update = _redacted_update(c.messages, "checkpoint", c.checkpoint)
    return c.model_copy(update=update) if update else c
