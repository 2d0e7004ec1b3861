"""Mask secrets before any text reaches a model, a cache row, a note, a file name or a log.

Design: an ordered table of precompiled rules. Each rule has a KIND, a pattern whose group
``v`` (or the whole match) is the secret, and a *prefilter*: a simpler RE2 pattern that matches
wherever the rule could. All prefilters are compiled into one ``re2.Set`` (a lazy DFA), so a
text is scanned **once** to learn which rules can fire at all; most texts match none and cost
that single pass. Only the flagged rules then run their full Python pattern, with a judge that
looks at the match (placeholders, entropy, masks already there). Measured on 18.9 MB of real
transcripts (``evals/bench_redact.py``): the previous design screened each text with one
``in`` test per trigger literal (40 of them, 0.6 s of its 1.2 s); a screen of 116 literals that
way costs 1.45 s, with ``pyahocorasick`` 0.33 s, ``hyperscan`` 0.07 s and ``re2.Set`` 0.10 s.
hyperscan is x86-only, so ``re2.Set`` it is; without the google-re2 wheel every rule runs
(correct, only slower).

Order matters. Provider-specific token shapes run first (so the report says
``[REDACTED:GITHUB_TOKEN]`` rather than a generic kind); the context rules that follow
(``password=``, ``Authorization:``, ``.env`` lines, ``token=`` params, ``密码：``) skip values
that are already masked. Replacements are ``[REDACTED:<KIND>]`` and never contain text a later
rule would mask, so redaction is idempotent: ``redact(redact(x)) == redact(x)``.

The rules cover the detectors of gitleaks, detect-secrets and trufflehog for the services an
agent session is likely to hold (``tests/secrets_corpus.py`` has one realistic case per format),
plus entropy for labelled values: a strong label (``password``) masks any value, a weak one
(``key``, ``token``) only a random-looking one. A value that is itself a label
(``credential: token: f16f…``) is not the secret: the search goes on from the next label.

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
        (?:none|null|nil|true|false|undefined|changeme|str|string|bytes|int|bool|optional|secretstr|any|dummy)
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


def _random_token(v: str) -> bool:
    """A value that reads as a generated credential: one token of key characters, long and varied."""
    return (
        len(v) >= 16
        and re.fullmatch(r"[A-Za-z0-9+/=_\-]+", v) is not None
        and any(ch.isdigit() for ch in v)
        and any(ch.isalpha() for ch in v)
        and _entropy(v) >= 3.5
    )


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
    #: RE2 syntax, matched case-insensitively: wherever ``pattern`` can match, this matches too.
    prefilter: str
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
    prefilter: str,
    judge: Judge | None = None,
    *,
    bad_prev: frozenset[str] = frozenset(),
    lower: bool = False,
    flags: int = 0,
) -> Rule:
    twin = re.compile(src, flags | re.IGNORECASE) if lower else None
    return Rule(kind, re.compile(src, flags), prefilter, judge, bad_prev, lower, twin)


def _token(kind: str, src: str, prefilter: str, *, glued: frozenset[str] = _TOKEN_CHARS) -> Rule:
    """A provider token with a fixed prefix: masked whole, unless glued to a longer token."""
    return _rule(kind, src, prefilter, bad_prev=glued)


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
    r"(?:\\?\"(?P<v1>[^\"\\\n]*)\\?\"|'(?P<v2>[^'\n]*)'|`(?P<v4>[^`\n]*)`|(?P<v3>"
    + _BARE
    + r"+(?:&(?![A-Za-z0-9_.\-]+=)"
    + _BARE
    + r"*)*))"
)
_VALUE_GROUPS = ("v1", "v2", "v4", "v3")  # v4: a value quoted as code, "secret: `…`"


class _Relabel(Exception):
    """The value is itself a label (``credential: token: f16f…``): search again from inside it."""


def _is_label(v: str) -> bool:
    # "token:", "password=" or a bare secret name: the next label on the line holds the value.
    # ("abc=" is a value: base64 ends in "=". Only a secret *name* before the colon is a label.)
    name = v.rstrip(":=")
    return name != v and 0 < len(name) <= 40 and bool(SECRET_NAME.fullmatch(name))


def _judge_named(m: re.Match[str], text: str) -> str | None:
    value = _group(m, text, *_VALUE_GROUPS) or ""
    if _is_label(value.strip()):
        raise _Relabel
    return _value_kind(_group(m, text, "name") or "", value)


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


def _judge_bearer(m: re.Match[str], text: str) -> str | None:
    """"Bearer <credential>", not "Bearer collision" or "Bearer authentication": a word of letters only, shorter than
    any issued token, is prose about the scheme."""
    v = _group(m, text, "v") or ""
    if v.startswith(_ALREADY) or (v.isalpha() and len(v) < 20):
        return None
    return "BEARER_TOKEN"


def _judge_random(kind: str) -> Judge:
    """Mask the value only if it looks random (a weak label such as ``key`` or ``--token``)."""

    def judge(m: re.Match[str], text: str) -> str | None:
        v = (_group(m, text, "v", *_VALUE_GROUPS) or "").strip()
        if _is_label(v):
            raise _Relabel
        if v.startswith(_ALREADY) or _is_placeholder(v) or not _random_token(v):
            return None
        return kind

    return judge


def _judge_flag(m: re.Match[str], text: str) -> str | None:
    """``--token X``, ``--api-key X``, ``--client-secret X``: as strict as the flag's name."""
    v = _group(m, text, "v") or ""
    if v.endswith(":") or v.startswith("-"):  # "--api-key format: ...", "--token --verbose": prose, flags
        return None
    return _value_kind(_group(m, text, "name") or "", v.split("=", 1)[-1])


def _judge_cjk(m: re.Match[str], text: str) -> str | None:
    # "密码：hunter2" / "口令是 Tr0ub4dor": the value is ASCII (a sentence after the label is not).
    v = _group(m, text, "v") or ""
    if v.startswith(_ALREADY) or _is_placeholder(v) or len(v) < 4 or re.search(r"\w\(", v):
        return None  # (a call such as "密钥 = SHA256(id:…)" is how the key is made, not the key)
    if re.match(r"(?:[A-Za-z]:\\|~?/|\.{1,2}/)", v):
        return None  # "SSH 私钥: E:\keys\id.pem": where the key is, not the key
    return "PASSWORD"


def _judge_cjk_glued(m: re.Match[str], text: str) -> str | None:
    # "私钥 id_ed25519.pem" names the key's file, not the key
    return None if re.search(r"\.[A-Za-z]{2,5}$", _group(m, text, "v") or "") else _judge_cjk(m, text)


def _judge_b64_pem(m: re.Match[str], text: str) -> str | None:
    """base64 of a PEM block (kubeconfig ``client-key-data``): masked when it is a private key."""
    import base64
    import binascii

    head = (_group(m, text, "v") or "")[:64]
    try:
        decoded = base64.b64decode(head[: len(head) // 4 * 4], validate=False)
    except (binascii.Error, ValueError):
        return None
    return "PRIVATE_KEY" if b"PRIVATE KEY" in decoded else None


_PEM = r"-----BEGIN (?P<label>(?:[A-Z0-9]+ )*)PRIVATE KEY(?: BLOCK)?-----"
_KV_NAMES = (
    r"(?P<name>api[_-]?key|apikey|secret(?:[_-]?key)?|private[_-]?key|access[_-]?key(?:[_-]?id)?|credentials?|"
    r"passw(?:or)?d|passphrase|pwd|token|auth|signature|sig)"
)
_KV_PRE = r"(?:api.?key|apikey|secret|private.?key|access.?key|credential|passw|passphrase|pwd|token|auth|sig)"
#: Labels for a password in Chinese, Japanese and Korean (a colon may be full-width).
_CJK_LABELS = r"(?:密码|口令|密钥|秘钥|私钥|令牌|凭证|凭据|授权码|パスワード|暗証番号|비밀번호)"
_FLAG_NAMES = (
    r"(?P<name>api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret|secret(?:[_-]?key)?|token|"
    r"passw(?:or)?d|pass)"
)

RULES: tuple[Rule, ...] = (
    # A PEM/OpenSSH/PGP private key block, or an unterminated one (truncated output) to the end.
    _rule(
        "PRIVATE_KEY",
        r"(?P<v>" + _PEM + r"(?:.*?-----END (?P=label)PRIVATE KEY(?: BLOCK)?-----|.*\Z))",
        r"-----begin [a-z0-9 ]*private key",
        flags=re.DOTALL,
    ),
    # PuTTY .ppk: the Private-Lines are the key.
    _rule("PRIVATE_KEY", r"Private-Lines: \d+\r?\n(?P<v>(?:[A-Za-z0-9+/=]+\r?\n?)+)", r"private-lines: \d",
          _judge_plain("PRIVATE_KEY")),
    _rule("PRIVATE_KEY", r"(?P<v>LS0tLS1CRUdJTi[A-Za-z0-9+/=]{20,})", r"ls0tls1crudjti", _judge_b64_pem),
    _token("ANTHROPIC_KEY", r"sk-ant-[A-Za-z0-9_\-]{20,}", r"sk-ant-[a-z0-9_-]{20}"),
    _token("OPENROUTER_KEY", r"sk-or-(?:v\d-)?[A-Za-z0-9]{20,}", r"sk-or-"),
    _token("STRIPE_KEY", r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}", r"[sr]k_(?:live|test)_"),
    _token("STRIPE_KEY", r"whsec_[A-Za-z0-9]{20,}", r"whsec_"),
    # sk-, sk-proj-, sk-svcacct-: a digit is required so names like "sk-learn-helpers" survive.
    _token("OPENAI_KEY", r"sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{20,}", r"sk-[a-z0-9_-]{20}"),
    _token("GITHUB_TOKEN", r"gh[pousr]_[A-Za-z0-9]{30,}", r"gh[pousr]_[a-z0-9]{30}"),
    _token("GITHUB_TOKEN", r"github_pat_[A-Za-z0-9_]{40,}", r"github_pat_"),
    _token("GITLAB_TOKEN", r"gl(?:pat|dt|rt|ptt|soat|cbt|ft|imt|oas|agent|ffct)-[A-Za-z0-9_\-]{20,}",
           r"gl(?:pat|dt|rt|ptt|soat|cbt|ft|imt|oas|agent|ffct)-"),
    _token("GITLAB_TOKEN", r"GR1348941[A-Za-z0-9_\-]{20,}", r"gr1348941"),
    _token("SLACK_TOKEN", r"xox[abposre]-[A-Za-z0-9\-]{10,}", r"xox[abposre]-"),
    _token("SLACK_TOKEN", r"xapp-\d-[A-Za-z0-9\-]{10,}", r"xapp-\d-"),
    _rule("SLACK_WEBHOOK", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]{20,}",
          r"hooks\.slack\.com/"),
    _rule("DISCORD_WEBHOOK", r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]{30,}",
          r"discord(?:app)?\.com/api/webhooks/"),
    _rule("WEBHOOK", r"https://[A-Za-z0-9.\-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/_\-]{20,}",
          r"\.webhook\.office\.com/"),
    _rule(
        "AWS_ACCESS_KEY",
        r"A(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA|IPA)[A-Z0-9]{16}(?![A-Z0-9])",
        r"a(?:kia|sia|gpa|ida|roa|npa|nva|ipa)[a-z0-9]{16}",
        bad_prev=_ALNUM,
    ),
    _rule(
        "AWS_SECRET_KEY",
        r"aws_?secret_?(?:access_?)?key\\?[\"']?\s*[:=]\s*\\?[\"']?(?P<v>[a-z0-9/+=]{40})(?![a-z0-9/+=])",
        r"aws_?secret_?(?:access_?)?key",
        _judge_plain("AWS_SECRET_KEY"),
        lower=True,
    ),
    _rule("GOOGLE_API_KEY", r"AIza[0-9A-Za-z_\-]{35}(?![A-Za-z0-9_\-])", r"aiza[0-9a-z_-]{35}"),
    _token("GOOGLE_OAUTH", r"GOCSPX-[A-Za-z0-9_\-]{28}", r"gocspx-"),
    _token("GOOGLE_OAUTH", r"1//0[A-Za-z0-9_\-]{40,}", r"1//0[a-z0-9_-]{40}"),
    _token("HF_TOKEN", r"hf_[A-Za-z0-9]{30,}", r"hf_[a-z0-9]{30}"),
    _token("HF_TOKEN", r"api_org_[A-Za-z0-9]{30,}", r"api_org_"),
    _token("NPM_TOKEN", r"npm_[A-Za-z0-9]{36}", r"npm_[a-z0-9]{36}"),
    _token("PYPI_TOKEN", r"pypi-Ag[EI][A-Za-z0-9_\-]{50,}", r"pypi-ag[ei]"),
    _token("RUBYGEMS_TOKEN", r"rubygems_[a-f0-9]{48}", r"rubygems_"),
    _token("DOCKER_TOKEN", r"dckr_pat_[A-Za-z0-9_\-]{20,}", r"dckr_pat_"),
    _token("DISCORD_TOKEN", r"[MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,38}(?![A-Za-z0-9_\-])",
           r"[mno][a-z0-9_-]{23}[a-z0-9_-]?[a-z0-9_-]?\.[a-z0-9_-]{6}\."),
    _token("DISCORD_TOKEN", r"mfa\.[A-Za-z0-9_\-]{60,}", r"mfa\.[a-z0-9_-]{60}"),
    _token("SENDGRID_KEY", r"SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{40,50}", r"sg\.[a-z0-9_-]{16}"),
    _token("TWILIO_KEY", r"SK[0-9a-fA-F]{32}(?![A-Za-z0-9])", r"sk[0-9a-f]{32}"),
    _token("MAILGUN_KEY", r"key-[a-f0-9]{32}(?![A-Za-z0-9])", r"key-[0-9a-f]{32}"),
    _token("MAILCHIMP_KEY", r"[a-f0-9]{32}-us\d{1,2}(?![A-Za-z0-9])", r"[0-9a-f]{32}-us\d"),
    _token("SHOPIFY_TOKEN", r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}", r"shp(?:at|ss|ca|pa)_"),
    _token("SQUARE_TOKEN", r"sq0(?:atp|csp)-[A-Za-z0-9_\-]{22,}", r"sq0(?:atp|csp)-"),
    _token("SQUARE_TOKEN", r"EAAA[A-Za-z0-9_\-]{60,}", r"eaaa[a-z0-9_-]{60}"),
    _token("META_TOKEN", r"EAA[BCDGIMU][A-Za-z0-9]{90,}", r"eaa[bcdgimu][a-z0-9]{90}"),
    _token("DIGITALOCEAN_TOKEN", r"do[opr]_v1_[a-f0-9]{64}", r"do[opr]_v1_"),
    _token("HEROKU_KEY", r"HRKU-[A-Za-z0-9_\-]{30,}", r"hrku-"),
    _token("ATLASSIAN_TOKEN", r"ATATT3[A-Za-z0-9_\-=]{40,}", r"atatt3"),
    _token("LINEAR_KEY", r"lin_(?:api|oauth)_[A-Za-z0-9]{40}", r"lin_(?:api|oauth)_"),
    _token("NOTION_TOKEN", r"ntn_[0-9]{11}[A-Za-z0-9]{35}", r"ntn_\d{11}"),
    _token("NOTION_TOKEN", r"secret_[A-Za-z0-9]{43}(?![A-Za-z0-9])", r"secret_[a-z0-9]{43}"),
    _token("DATABRICKS_TOKEN", r"dapi[a-f0-9]{32}(?:-\d)?(?![A-Za-z0-9])", r"dapi[0-9a-f]{32}"),
    _token("DOPPLER_TOKEN", r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,}", r"dp\.(?:pt|st|ct|sa|scim|audit)\."),
    _token("DROPBOX_TOKEN", r"sl\.[A-Za-z0-9_\-=]{100,}", r"sl\.[a-z0-9_=-]{100}"),
    _token("FIGMA_TOKEN", r"figd_[A-Za-z0-9_\-]{40}", r"figd_"),
    _token("GRAFANA_TOKEN", r"glc_[A-Za-z0-9+/]{32,}={0,2}", r"glc_[a-z0-9+/]{32}"),
    _token("GRAFANA_TOKEN", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", r"glsa_"),
    _token("VAULT_TOKEN", r"hv[sb]\.[A-Za-z0-9_\-]{24,}", r"hv[sb]\.[a-z0-9_-]{24}"),
    _token("TERRAFORM_TOKEN", r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{60,}", r"\.atlasv1\."),
    _token("POSTMAN_KEY", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", r"pmak-"),
    _token("PULUMI_TOKEN", r"pul-[a-f0-9]{40}", r"pul-[0-9a-f]{40}"),
    _token("SENTRY_TOKEN", r"sntry[su]_[A-Za-z0-9+/=_]{40,}", r"sntry[su]_"),
    _token("AGE_KEY", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", r"age-secret-key-1"),
    _token("GROQ_KEY", r"gsk_[A-Za-z0-9]{48,}", r"gsk_[a-z0-9]{48}"),
    _token("XAI_KEY", r"xai-[A-Za-z0-9]{70,}", r"xai-[a-z0-9]{70}"),
    _token("PERPLEXITY_KEY", r"pplx-[A-Za-z0-9]{40,}", r"pplx-[a-z0-9]{40}"),
    _token("REPLICATE_TOKEN", r"r8_[A-Za-z0-9]{37}(?![A-Za-z0-9])", r"r8_[a-z0-9]{37}"),
    _token("NEWRELIC_KEY", r"NR(?:AK|II|JS|RA)-[A-Za-z0-9]{27,}", r"nr(?:ak|ii|js|ra)-"),
    _token("PLANETSCALE_TOKEN", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_\-.=]{32,}", r"pscale_(?:tkn|pw|oauth)_"),
    _token("SUPABASE_TOKEN", r"sbp_[a-f0-9]{40}", r"sbp_[0-9a-f]{40}"),
    _token("SHIPPO_TOKEN", r"shippo_(?:live|test)_[a-f0-9]{40}", r"shippo_(?:live|test)_"),
    _token("JFROG_TOKEN", r"AKCp[A-Za-z0-9]{60,}", r"akcp[a-z0-9]{60}"),
    _token("ALIBABA_KEY", r"LTAI[A-Za-z0-9]{12,20}(?![A-Za-z0-9])", r"ltai[a-z0-9]{12}"),
    _token("TENCENT_KEY", r"AKID[A-Za-z0-9]{13,40}(?![A-Za-z0-9])", r"akid[a-z0-9]{13}"),
    # Azure AD application secrets: three characters, a digit, "Q~", then 31-34 more.
    _token("AZURE_SECRET", r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}", r"\dq~[a-z0-9_~.-]{31}",
           glued=_ALNUM),
    # Azure storage / Service Bus / Event Hubs connection strings: the key after AccountKey= etc.
    _rule("AZURE_KEY", r"(?:accountkey|sharedaccesskey|sharedsecretvalue)\s*=\s*(?P<v>[a-z0-9+/=]{20,})",
          r"(?:accountkey|sharedaccesskey|sharedsecretvalue)\s*=", _judge_plain("AZURE_KEY"), lower=True),
    # JDBC/ODBC "Password=...;" style connection strings are caught by the SECRET rule below.
    _rule(
        "JWT",
        r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        r"eyj[a-z0-9_-]{8}[a-z0-9_-]*\.[a-z0-9_-]{8}",
        bad_prev=_TOKEN_CHARS,
    ),
    # <bot id>:<35 chars>. The ':' leads so the scan is fast; the digits are a lookbehind.
    _rule(
        "TELEGRAM_TOKEN",
        r"(?<=[0-9]{8})(?P<v>:[A-Za-z0-9_\-]{35})(?![A-Za-z0-9_\-])",
        r"[0-9]{8}:[a-z0-9_-]{35}",
        lambda m, text: _telegram(m, text),
    ),
    # scheme://user:password@host -> only the password goes; the host stays readable.
    _rule(
        "CONNECTION_STRING",
        r"://[^\s/@\"':\[\]]*:(?P<v>[^\s\"'/]+)@(?=[^\s@/\"']+)",
        r"://[^\s/@\"':\[\]]*:[^\s\"'/]+@",
        _judge_plain("CONNECTION_STRING"),
    ),
    _rule("PRIVATE_KEY", r"-----begin[a-z ]*private key-----", r"-----begin[a-z ]*private key-----", lower=True),
    # Authorization / X-Api-Key / Private-Token headers: scheme and credential both go.
    _rule(
        "AUTH_HEADER",
        r"(?:authorization|x-api-key|api-key|x-auth-token|private-token|x-vault-token)\\?[\"']?\s*[:=]\s*\\?[\"']?"
        r"(?!(?:bearer|basic|token|digest|bot)\s+\[redacted)"
        r"(?P<v>(?:(?:bearer|basic|token|digest|bot)\s+)?[^\s\"',;\\]+)",
        r"(?:authorization|api-key|auth-token|private-token|vault-token)\\?[\"']?\s*[:=]",
        _judge_auth,
        lower=True,
    ),
    _rule(
        "BEARER_TOKEN",
        r"bearer\s+(?P<v>[a-z0-9._~+/=\-]{8,})",
        r"bearer\s+[a-z0-9._~+/=-]{8}",
        _judge_bearer,
        bad_prev=_ALNUM,
        lower=True,
    ),
    # After BEARER_TOKEN, which names "Bearer ya29…" as such; a bare Google access token still goes.
    _token("GOOGLE_OAUTH", r"ya29\.[A-Za-z0-9_\-]{30,}", r"ya29\.[a-z0-9_-]{30}"),
    _rule(
        "COOKIE",
        r"cookie\\?[\"']?\s*:\s*(?P<v>[^\r\n\"'\\=]*=[^\r\n\"'\\]*)",
        r"cookie\\?[\"']?\s*:",
        _judge_plain("COOKIE"),
        lower=True,
    ),
    _rule("PASSWORD", r"--password[= ](?P<v>[^\s\"']+)", r"--password[= ]", _judge_plain("PASSWORD")),
    # Command lines: mysql -pSECRET, sshpass -p SECRET, curl -u user:SECRET, --token X, --api-key X.
    _rule("PASSWORD", r"\b(?:mysql|mysqldump|mariadb|mysqladmin)\b[^\n|;&]*?\s-p(?P<v>[^\s\"'-][^\s\"']{2,})",
          r"(?:mysql|mysqldump|mariadb|mysqladmin)[^\n|;&]*\s-p[^\s\"'-]", _judge_plain("PASSWORD")),
    _rule("PASSWORD", r"\bsshpass\s+-p\s*(?P<v>[^\s\"']+)", r"sshpass\s+-p", _judge_plain("PASSWORD")),
    _rule("PASSWORD", r"\bcurl\b[^\n|;&]*?\s(?:-u|--user)[ =]\\?[\"']?[^\s:\"'@/]+:(?P<v>[^\s\"'@]+)",
          r"curl[^\n|;&]*\s(?:-u|--user)[ =]",
          lambda m, text: None if (_group(m, text, "v") or "").isdigit() else _judge_plain("PASSWORD")(m, text)),
    _rule("SECRET", r"--" + _FLAG_NAMES + r"[= ]\\?[\"']?(?P<v>[^\s\"'\\]+)", r"--[a-z_-]*(?:key|token|secret|pass)",
          _judge_flag, lower=True),
    # .env / shell: UPPER_CASE names ending in a secret word, anywhere on a line, so
    # `OPENAI_API_KEY=... python run.py` is caught too. The judge rejects MONKEY=.
    _rule(
        "ENV_SECRET",
        r"(?P<name>API_KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|PAT|CREDENTIALS|AUTH|DSN|DATABASE_URL)"
        r"(?![A-Za-z0-9_])[ \t]*=[ \t]*" + _VALUE,
        r"(?:key|token|secret|pass|pwd|pat|credentials|auth|dsn|database_url)[ \t]*=",
        _judge_env,
    ),
    # Generic key/value in code, JSON, YAML, URLs: password=..., "api_key": "...", ?token=...
    _rule(
        "SECRET",
        # (also "the password is `…`": a value a reply quotes as code after "is")
        _KV_NAMES + r"(?![a-z0-9_])\\?[\"']?[ \t]*(?::|=>|=|(?<=[ \t])(?:is|was)(?=[ \t]*`))[ \t]*" + _VALUE,
        _KV_PRE + r"[a-z0-9_]*\\?[\"']?[ \t]*(?:[:=]|(?:is|was)[ \t]*`)",
        _judge_named,
        lower=True,
    ),
    # Firmware and C code name the Wi-Fi or MQTT password in a macro or a string variable: `#define WIFI_PASS "…"`,
    # `const char* mqtt_password = "…";`. A name ending in a secret word (pass, pwd, secret, token, key) holds one.
    _rule(
        "SECRET",
        r"#[ \t]*define[ \t]+(?P<name>[a-z_][a-z0-9_]*?(?:pass(?:w(?:or)?d)?|passphrase|pwd|secret|token|api_?key))"
        r"[ \t]+\\?\"(?P<v1>[^\"\\\n]*)\\?\"",
        r"#[ \t]*define[ \t]+[a-z0-9_]*(?:pass|pwd|secret|token|key)[a-z]*[ \t]+",
        _judge_named,
        lower=True,
    ),
    _rule(
        "SECRET",
        r"(?<![a-z0-9_])(?P<name>[a-z_][a-z0-9_]*_(?:pass|pwd))[ \t]*=[ \t]*\\?\"(?P<v1>[^\"\\\n]*)\\?\"",
        r"_(?:pass|pwd)[ \t]*=[ \t]*\\?\"",
        _judge_named,
        lower=True,
    ),
    # A bare "key" label with a random-looking value ("key": "8f14e45f…", ?key=…): entropy decides.
    _rule(
        "SECRET",
        r"(?<![a-z0-9_.\-])key\\?[\"']?[ \t]*(?::|=>|=)[ \t]*" + _VALUE,
        r"key\\?[\"']?[ \t]*[:=]",
        _judge_random("SECRET"),
        lower=True,
    ),
    # 密码：hunter2, 口令是 Tr0ub4dor, パスワード: ..., 비밀번호=...
    _rule(
        "PASSWORD",
        _CJK_LABELS + r"[ \t]*(?:是|为|為|は|:|：|=)[ \t]*[\"'`“「]?(?P<v>[\x21-\x7e]+?)[\"'`”」]?(?=[^\x21-\x7e]|[;,]|$)",
        _CJK_LABELS,
        _judge_cjk,
    ),
    # "密码Forwarder2026+", "口令 hunter2x9": Chinese needs no space or colon between a label and its value, so
    # a value glued on is masked when it mixes letters and digits (a word or a name after the label is not).
    _rule(
        "PASSWORD",
        _CJK_LABELS + r"[ \t]?(?P<v>(?=[\x21-\x7e]*[A-Za-z])(?=[\x21-\x7e]*\d)[\x21-\x7e]{6,})(?=[^\x21-\x7e]|$)",
        _CJK_LABELS,
        _judge_cjk_glued,
    ),
)


def _telegram(m: re.Match[str], text: str) -> str | None:
    # The bot id is 8-10 digits not glued to a longer number; mask "id:secret" as one token.
    i = m.start()
    j = i
    while j > 0 and text[j - 1].isdigit():
        j -= 1
    return "TELEGRAM_TOKEN" if 8 <= i - j <= 10 else None


# --------------------------------------------------------------------------- the one-pass screen


def _compile_screen() -> Any:
    """Every rule's prefilter in one ``re2.Set``; ``None`` without google-re2 (then all rules run)."""
    try:
        import re2
    except ImportError:
        return None
    options = re2.Options()
    options.case_sensitive = False
    options.max_mem = 64 << 20  # the lazy DFA's budget; the prefilters need a fraction of it
    screen = re2.Set.SearchSet(options)
    for i, rule in enumerate(RULES):
        if screen.Add(rule.prefilter) != i:
            raise AssertionError(f"prefilter {i} of {rule.kind} took another index")
    screen.Compile()
    return screen


_SCREEN = _compile_screen()
_ALL = tuple(range(len(RULES)))


def flagged(text: str) -> tuple[int, ...]:
    """Indexes of the rules that can match ``text`` (one pass over it), in rule order."""
    if _SCREEN is None:
        return _ALL
    hits = _SCREEN.Match(text)
    return tuple(sorted(hits)) if hits else ()


# --------------------------------------------------------------------------- text


def _apply(rule: Rule, text: str, lowered: str, found: dict[str, str] | None = None) -> str:
    if rule.lower and len(lowered) != len(text):
        pattern, haystack = rule.pattern_ci, text
    else:
        pattern, haystack = rule.pattern, (lowered if rule.lower else text)
    assert pattern is not None
    out: list[str] = []
    last = 0
    pos = 0
    while (m := pattern.search(haystack, pos)) is not None:
        pos = m.end() if m.end() > m.start() else m.start() + 1
        if rule.bad_prev and m.start() > 0 and text[m.start() - 1] in rule.bad_prev:
            continue
        if rule.judge is None:
            s, e, kind = m.start(), m.end(), rule.kind
        else:
            try:
                judged = rule.judge(m, text)
            except _Relabel:
                # "credential: token: f16f…": the value is the next label; look again from there.
                pos = next((m.start(g) for g in _VALUE_GROUPS if g in m.re.groupindex and m.start(g) >= 0),
                           m.start() + 1)
                continue
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
        if found is not None:
            found.setdefault(text[s:e], kind)
        out.append(text[last:s])
        out.append(_mark(kind))
        last = e
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def redact(text: str, found: dict[str, str] | None = None) -> str:
    """Return ``text`` with every secret replaced by ``[REDACTED:<KIND>]``; each masked value goes into
    ``found`` (value → kind) when it is given."""
    if not text:
        return text
    hits = flagged(text)
    if not hits:
        return text
    lowered: str | None = None
    for i in hits:
        rule = RULES[i]
        if rule.lower and lowered is None:
            lowered = text.lower()
        new = _apply(rule, text, lowered if lowered is not None else text, found)
        if new is not text:
            # Masks only replace values, and later rules skip masks: no new screen is needed.
            text, lowered = new, None
    return text


def redact_full(text: str) -> str:
    """``redact`` with every rule run, screen or not: the reference the screen must agree with."""
    if not text:
        return text
    for rule in RULES:
        new = _apply(rule, text, text.lower())
        if new is not text:
            text = new
    return text


def _redact_value(value: Any, key: str | None = None, found: dict[str, str] | None = None,
                  text: Callable[[str], str] | None = None) -> Any:
    """Redact a JSON-like value; a dict key that names a secret masks its scalar value whole.
    ``text`` replaces ``redact`` for the strings (the session's echo pass)."""
    if isinstance(value, str):
        if key is not None and SECRET_NAME.search(key):
            kind = _value_kind(key, value)
            if kind is not None:
                if found is not None:
                    found.setdefault(value.strip(), kind)
                return _mark(kind)
        return text(value) if text is not None else redact(value, found)
    if isinstance(value, dict):
        return {k: _redact_value(v, str(k), found, text) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_redact_value(v, key, found, text) for v in value)
    return value


# --------------------------------------------------------------------------- echoes
# A secret is often labelled once and repeated bare: the user pastes a password alone ("z?8yDzGU…!
# 转译字符", please URL-encode it), the reply then says "密码 `z?8yDzGU…!`" and builds a connection string
# from its URL-encoded form. Each text is redacted on its own, so the bare copy would survive. Whatever a
# rule masked anywhere in a session is therefore masked everywhere in it, in its URL-encoded and decoded
# spellings too. Only values no prose or code would hold by chance are echoed: a password "postgres" must
# not take every mention of PostgreSQL with it, a key assigned from `OPENAI_API_KEY` not every mention of
# that variable, a value that is a path not the file it names, a call a weak label caught
# (`token: getSessionToken(request)`) not every line of code that makes it.
_PLAIN_NAME = re.compile(r"[A-Za-z_.\-]+")
_CALL = re.compile(r"[A-Za-z_]\w*\(")


def _echoable(value: str, kind: str | None = None) -> bool:
    v = value.strip()
    if len(v) < 8 or _ALREADY in v or _is_placeholder(v) or any(ch.isspace() or ch in "/\\" for ch in v):
        return False
    if kind == "PASSWORD" and len(v) >= PLAIN_PASSWORD_ECHO and v.isalpha():
        # A password of letters only ("Romacapitale", set as WIFI_PASS and typed into the chat as "MGTS_145 /
        # Romacapitale") reads like a name, but a long one labelled a password is masked wherever it recurs.
        return True
    return any(ch.isalpha() for ch in v) and not _PLAIN_NAME.fullmatch(v) and not _CALL.search(v)


#: A letters-only password this long is masked where it recurs unlabelled; shorter ones ("postgres", "password") are
#: too often the word itself elsewhere in the session.
PLAIN_PASSWORD_ECHO = 10


def _echo_pattern(found: dict[str, str]) -> tuple[re.Pattern[str], dict[str, str]] | None:
    """One alternation of every echoable value and its URL spellings, longest first, and each
    spelling's kind; None when there is nothing to echo."""
    from urllib.parse import quote, unquote

    kinds: dict[str, str] = {}
    for value, kind in found.items():
        v = value.strip().strip("`'\"")  # a span a rule masked may keep the value's quotes
        if _echoable(v, kind):
            for spelling in (v, quote(v, safe=""), unquote(v)):
                if _echoable(spelling, kind):
                    kinds.setdefault(spelling, kind)
    if not kinds:
        return None
    return re.compile("|".join(re.escape(v) for v in sorted(kinds, key=len, reverse=True))), kinds


def _echo_masker(found: dict[str, str]) -> Callable[[str], str] | None:
    compiled = _echo_pattern(found)
    if compiled is None:
        return None
    pattern, kinds = compiled
    return lambda text: pattern.sub(lambda m: _mark(kinds[m.group()]), text) if text else text


# --------------------------------------------------------------------------- models


def redact_message(m: Message, found: dict[str, str] | None = None,
                   text: Callable[[str], str] | None = None) -> Message:
    """Redact content, tool-call arguments, reasoning and carrier summary. Unchanged → same object.
    Masked values go into ``found``; ``text`` replaces ``redact`` (the session's echo pass)."""
    clean: Callable[[str], str] = text if text is not None else (lambda t: redact(t, found))
    update: dict[str, Any] = {}
    content = clean(m.content)
    if content != m.content:
        update["content"] = content
    for field in ("reasoning", "carrier_summary"):
        old = getattr(m, field)
        if old:
            new = clean(old)
            if new != old:
                update[field] = new
    if m.tool_calls:
        calls = tuple(_redact_call(c, found, text) for c in m.tool_calls)
        if any(a is not b for a, b in zip(calls, m.tool_calls, strict=True)):
            update["tool_calls"] = calls
    return m.model_copy(update=update) if update else m


def _redact_call(c: ToolCall, found: dict[str, str] | None = None,
                 text: Callable[[str], str] | None = None) -> ToolCall:
    new = _redact_value(c.arguments, None, found, text)
    return c if new == c.arguments else c.model_copy(update={"arguments": new})


def _redacted_update(messages: tuple[Message, ...], fields: dict[str, str | None],
                     found: dict[str, str] | None = None, text: Callable[[str], str] | None = None) -> dict[str, Any]:
    """What changes once ``messages`` and the text ``fields`` are redacted; empty when nothing does.

    Unchanged objects are kept as they are, so redacting clean data allocates nothing new.
    """
    clean: Callable[[str], str] = text if text is not None else (lambda t: redact(t, found))
    update: dict[str, Any] = {}
    redacted = tuple(redact_message(m, found, text) for m in messages)
    if any(a is not b for a, b in zip(redacted, messages, strict=True)):
        update["messages"] = redacted
    for name, value in fields.items():
        if value and (new := clean(value)) != value:
            update[name] = new
    return update


def _redact_all(messages: tuple[Message, ...], fields: dict[str, str | None],
                found: dict[str, str]) -> dict[str, Any]:
    """Redact, then mask every echo of what was masked (``found`` gains the session's values)."""
    update = _redacted_update(messages, fields, found)
    echo = _echo_masker(found)
    if echo is None:
        return update
    again = _redacted_update(update.get("messages", messages), {k: update.get(k, v) for k, v in fields.items()},
                             text=echo)
    return {**update, **again}


def redact_session(s: Session, found: dict[str, str] | None = None) -> Session:
    """Redact every message, the title and the transcript's file name (a name can hold a token), and
    every echo of a masked value elsewhere in the session. ``cwd`` and other paths are left as they are.
    ``found`` (value → kind) receives what was masked, for the session's chunks (``redact_chunk``)."""
    update = _redact_all(s.messages, {"title": s.title, "transcript": s.transcript},
                         found if found is not None else {})
    return s.model_copy(update=update) if update else s


def redact_chunk(c: Chunk, known: dict[str, str] | None = None) -> Chunk:
    """Redact a chunk's messages and its Hermes checkpoint text, echoes of ``known`` values included
    (what ``redact_session`` found in the whole session: a chunk may hold only the bare copy)."""
    update = _redact_all(c.messages, {"checkpoint": c.checkpoint}, dict(known or {}))
    return c.model_copy(update=update) if update else c
