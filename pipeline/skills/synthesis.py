"""Skill synthesis: evidence sessions → a ``SkillDraft`` (``pipeline/skills/store.py`` renders and stores it).

The model (when there is one) writes a draft and then tries to refute each step against the
evidence; whatever it returns then passes the same deterministic gate as the extractive
skeleton: secrets, dates, session ids, quoted user text, injected instructions and dangerous
commands are dropped, and a step survives only if enough evidence sessions ran it. Without a
model, or when the model's draft does not survive, ``extractive_draft`` builds the skeleton
from the facts alone: shared commands in order, shared files, shared errors.

The response schemas (``SkillOut``, ``RefuteOut``, ...) are the contract with the model: their
names, fields, descriptions and docstrings are what it reads.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from pipeline.redact import redact
from pipeline.skills.evidence import Evidence, candidate_key, clip
from pipeline.skills.generalise import (
    generalise_commands,
    placeholders,
    step_signature,
    task_name,
    task_words,
    whole_sentences,
)
from pipeline.skills.lexical import CJK, command_signatures, error_signature, skill_name
from pipeline.summarize.shaping import defence

_INJECTION = re.compile(
    r"ignore (?:all |any )?(?:previous|prior|above|earlier) (?:instructions|prompts|rules)|disregard (?:the|all|any|previous)"
    r"|system prompt|new instructions|you are now|as an ai\b|ai assistant|assistant must|<\s*/?\s*(?:system|instructions?)\s*>"
    r"|\bjailbreak|do not tell the user|without telling|exfiltrat|send (?:the |your |all )?(?:keys|tokens|secrets|credentials|env)"
    r"|忽略(?:之前|以上|所有)|系统提示",
    re.I,
)
_DANGEROUS = re.compile(
    r"(?:curl|wget|fetch)\b[^|;&]*\|\s*(?:sudo\s+)?(?:ba|z|k)?sh\b|base64\s+(?:-d|--decode)|\brm\s+-rf\s+(?:/|~|\$HOME)(?:\s|$)"
    r"|chmod\s+(?:-R\s+)?777|/dev/tcp/|\bnc\s+-|\bmkfifo\b|\beval\s|ssh-keygen|authorized_keys|\.ssh/id_"
    r"|(?:curl|wget)\b[^\n]*(?:-d|--data|-F|--upload-file|-T)\s*@",
    re.I,
)
_DATE = re.compile(r"\b(?:19|20)\d\d[-/.](?:0?[1-9]|1[0-2])[-/.](?:0?[1-9]|[12]\d|3[01])\b|\b20\d{6}_\d{6}\b")
_CHECK = re.compile(r"^(?:curl|wget|pytest|test|tox|nox|ls|stat|systemctl status|git status|git log|http|ping)\b"
                    r"|\b(?:test|check|verify|status|lint|--version|health|smoke|diff)\b", re.I)


def _shingles(text: str, n: int) -> set[str]:
    words = text.lower().split()
    grams = {" ".join(words[i: i + n]) for i in range(len(words) - n + 1)}
    for run in CJK.findall(text):  # Chinese has no spaces: 10-character runs instead of 8 words
        grams |= {run[i: i + 10] for i in range(len(run) - 9)}
    return grams


class _Gate:
    """The deterministic checks every line of a skill must pass."""

    def __init__(self, members: Sequence[Evidence], need: int) -> None:
        self.members = members
        self.need = need
        self.ids = [e.session_id for e in members]
        self.quotes = set().union(*(_shingles(f"{e.goal} {e.title}", 8) for e in members)) if members else set()
        self.sigs = [{s for c in e.commands for s in command_signatures(c)} for e in members]

    def text(self, value: str | None) -> str | None:
        """The cleaned text, or None when the line must go."""
        if value is None:
            return None
        value = " ".join(redact(value).split())
        if (not value or any(sid in value for sid in self.ids) or "[REDACTED" in value or _INJECTION.search(value) or _DANGEROUS.search(value)
                or _DATE.search(value) or _shingles(value, 8) & self.quotes):
            return None
        return value

    def support(self, command: str | None) -> tuple[str, ...]:
        """Evidence sessions that ran a command with the same signature (program + sub-command)."""
        want = set(command_signatures(command or ""))
        if not want:
            return ()
        return tuple(sid for sid, sigs in zip(self.ids, self.sigs, strict=True) if want <= sigs)


def _clean_steps(steps: Sequence[Any], gate: _Gate, *, grounded: bool) -> list[Any]:
    from pipeline.skills.store import Step

    out: list[Step] = []
    for st in steps:
        text = gate.text(st.text)
        command = gate.text(st.command) if st.command else None
        if text is None or (st.command and command is None):
            continue
        support = st.support
        if command:
            support = gate.support(command)  # the facts decide, not the model's citation
            if grounded and len(support) < gate.need:
                continue
        elif grounded and len(support) < gate.need:
            continue
        # The template adds ": `command`"; a step the model wrote as "Check the status:" would read "::".
        text = text.rstrip(" :：") if command else text
        out.append(Step(text=text, command=command, support=tuple(support)))
    return out


def _order_commands(members: Sequence[Evidence],
                    general: dict[str, str]) -> list[tuple[str, str, float, tuple[str, ...]]]:
    """(signature, representative command, mean relative position, supporting ids), in order.

    The representative is the most common *general* form (``general``: see ``generalise_commands``),
    so ``gh run view 9900`` and ``gh run view 9901`` count as one step, ``gh run view <run-id>``.
    """
    seen: dict[str, dict[str, Any]] = {}
    for ev in members:
        firsts: dict[str, tuple[int, str]] = {}
        for i, cmd in enumerate(ev.commands):
            if sig := step_signature(cmd):  # the first segment's: a pipe's tail is a filter, not a step
                firsts.setdefault(sig, (i, general.get(cmd.strip(), cmd.strip())))
        total = max(1, len(ev.commands) - 1)
        for sig, (i, cmd) in firsts.items():
            entry = seen.setdefault(sig, {"pos": [], "cmds": Counter(), "ids": []})
            entry["pos"].append(i / total)
            entry["cmds"][cmd] += 1
            entry["ids"].append(ev.session_id)
    rows = []
    for sig, e in seen.items():
        cmd = min(e["cmds"], key=lambda c: (-e["cmds"][c], len(c), c))
        rows.append((sig, cmd, sum(e["pos"]) / len(e["pos"]), tuple(e["ids"])))
    return sorted(rows, key=lambda r: (r[2], r[0]))


def _error_pitfalls(members: Sequence[Evidence], gate: _Gate, need: int) -> list[Any]:
    """Errors that stopped at least ``need`` sessions, each quoted as whole sentences from the evidence.

    Sessions are matched on the error's signature (volatile parts removed), but the pitfall
    quotes the error itself: a signature ("error - config value : the plugin is") is no sentence.
    """
    from pipeline.skills.store import Pitfall

    # Signatures of fewer than three words ("exit code:") say nothing a reader could act on.
    texts: dict[str, list[str]] = {}
    counts: Counter[str] = Counter()
    for ev in members:
        mine: dict[str, str] = {}
        for err in ev.errors:
            if len((sig := error_signature(err)).split()) >= 3:
                mine.setdefault(sig, err)
        for sig, err in mine.items():
            counts[sig] += 1
            texts.setdefault(sig, []).append(err)
    pitfalls = []
    for sig, c in counts.most_common():
        if c < need or len(pitfalls) >= 4:
            continue
        # The shortest whole quote: the same error without the longest context any one run printed.
        quotes = sorted({q for t in texts[sig] if (q := whole_sentences(t)) and gate.text(q)}, key=lambda q: (len(q), q))
        if quotes:
            pitfalls.append(Pitfall(rule=f"If the output says “{quotes[0]}”, fix that before going on",
                                    why=f"it stopped {c} of {len(members)} runs of this procedure"))
    return pitfalls


def extractive_draft(members: Sequence[Evidence], *, single: bool = False, name: str | None = None,
                     candidate: str | None = None) -> Any:
    """A skeleton from the deterministic facts: shared commands in order, shared files, shared errors."""
    from pipeline.skills.store import SkillDraft, Step

    need = 1 if single else 2
    gate = _Gate(members, need)
    general = generalise_commands(c for e in members for c in e.commands)
    steps: list[Step] = []
    checks: list[Step] = []
    for sig, cmd, _pos, ids in _order_commands(members, general):
        # A clipped or very long command (heredocs, scripts) is not a step a reader can run.
        if len(ids) < need or len(cmd) > 200 or cmd.endswith("…") or gate.text(cmd) is None:
            continue
        target = checks if _CHECK.search(cmd) and steps else steps
        verb = "Check with" if target is checks else "Run"
        values = placeholders(cmd)
        # In backticks: a bare <run-id> is an HTML tag to a Markdown renderer and would vanish.
        fill = f", with {' and '.join(f'`{v}`' for v in values)} filled in for this task" if values else ""
        target.append(Step(text=f"{verb} {sig}{fill}", command=cmd, support=ids))
    files = Counter(f for ev in members for f in dict.fromkeys(ev.files))
    shared = [f for f, c in files.most_common() if c >= need and gate.text(f)][:6]
    if shared:
        at = max(0, len(steps) // 2)
        steps.insert(at, Step(text="Update the files this procedure usually changes: " + ", ".join(shared)))
    pitfalls = _error_pitfalls(members, gate, need)
    if not steps:
        steps = [Step(text="Repeat the approach of the evidence sessions; no shared commands were recorded")]
    if not checks:
        checks = [Step(text="Re-run the last step and confirm it exits with status 0 and reports no errors")]
    sigs = [s.text.split(" ", 1)[1].split(",", 1)[0] for s in steps if s.command][:3]
    commands = [s.command for s in [*steps, *checks] if s.command]
    # The name says the task: a verb and its object from the goals and commands (generalise.py),
    # never the most frequent words (which were stopwords: "gh-run-been-days").
    verb, obj = task_words(members, commands)
    # The phrase reaches the description and title: the same gate as every other line.
    task = (gate.text(" ".join([verb, *obj])) or "") if verb and obj else ""
    fallback = skill_name(sigs[-1:], fallback=f"procedure-{candidate_key(gate.ids)[2:8]}")
    name = name or task_name(members, commands, fallback=fallback)
    # Tags are the nouns of the task and the programs it runs, no function words.
    progs = [c.split(" ", 1)[0] for c in sigs]
    tags = tuple(dict.fromkeys(t for t in (skill_name([w], "") for w in [*obj, *progs]) if t))[:6]
    what = ", ".join(sigs) if sigs else "the shared steps"
    n = len(members)
    use = f"Use to {task} when" if task else "Use when"
    description = (f"Run {what} in order, as done successfully in {n} session{'s' * (n > 1)}. "
                   f"{use} a task repeats this procedure.")
    return SkillDraft(
        name=name, description=clip(description, 1000),
        title=task[:1].upper() + task[1:] if task else (" → ".join(sigs) or name.replace("-", " ")),
        when_to_use=(f"To {task}: a task that needs {what}." if task else f"A task that needs {what}.",),
        procedure=tuple(steps[:15]), pitfalls=tuple(pitfalls), verification=tuple(checks[:4]),
        evidence=tuple(gate.ids), tags=tags,
        source="extractive", needs_review=True, candidate=candidate)


# --------------------------------------------------------------------------- the model's part


class StepOut(BaseModel):
    """One step of the procedure."""

    text: str = Field(description="One imperative instruction, general (no dates, ids or quotes).")
    command: str | None = Field(None, description="The command, copied verbatim from the evidence, if any.")
    sessions: list[str] = Field(default_factory=list, description="Labels (S1, S2, ...) of sessions that did it.")


class PitfallOut(BaseModel):
    rule: str = Field(description="A general rule an engineer should follow.")
    why: str = Field(description="One clause: why the rule matters.")
    sessions: list[str] = Field(default_factory=list)


class SkillOut(BaseModel):
    """A reusable skill, written from several sessions that solved the same kind of task."""

    name: str = Field(description="lowercase-hyphenated, at most 5 words, says what the skill does.")
    description: str = Field(description="Under 200 characters; the first 60 say what it does; then when to use it.")
    title: str = Field(description="A short title.")
    when_to_use: list[str] = Field(min_length=1, max_length=4)
    procedure: list[StepOut] = Field(min_length=1, max_length=12)
    pitfalls: list[PitfallOut] = Field(default_factory=list, max_length=6)
    verification: list[StepOut] = Field(min_length=1, max_length=4)
    tags: list[str] = Field(default_factory=list, max_length=6)


class Verdict(BaseModel):
    kind: Literal["procedure", "pitfall", "verification"]
    index: int = Field(description="0-based position in that list.")
    supported_by: list[str] = Field(default_factory=list, description="Session labels whose record shows it.")
    keep: bool


class RefuteOut(BaseModel):
    """For every item of the draft: which sessions support it, and whether to keep it."""

    verdicts: list[Verdict] = Field(default_factory=list, max_length=40)


def _evidence_for_prompt(members: Sequence[Evidence]) -> list[dict[str, Any]]:
    # defence keeps session text from closing our data fences.
    return [{"label": f"S{i + 1}", "goal": defence(e.goal), "decisions": [defence(d) for d in e.decisions[:6]],
             "phases": [defence(p) for p in e.phases[:6]], "commands": [defence(c) for c in e.commands[:30]],
             "files": list(e.files[:15]), "errors": [defence(x) for x in e.errors[:6]], "outcome": e.end_state}
            for i, e in enumerate(members)]


def llm_draft(members: Sequence[Evidence], client: Any, *, single: bool = False, candidate: str | None = None) -> Any:
    """Write with the model, refute with the model, then pass the deterministic gate."""
    from pipeline.skills.store import Pitfall, SkillDraft, Step
    from pipeline.summarize.prompts import load_prompt

    labels = {f"S{i + 1}": e.session_id for i, e in enumerate(members)}
    evidence = _evidence_for_prompt(members)
    write, refute = load_prompt("skill_synthesis"), load_prompt("skill_refute")
    system, user = write.render(sessions=evidence, single=single, min_support=1 if single else 2)
    out: SkillOut = client.run(client.structured(SkillOut, system, user, max_tokens=1500))
    system, user = refute.render(sessions=evidence, draft=out.model_dump(), single=single)
    verdicts: RefuteOut = client.run(client.structured(RefuteOut, system, user, max_tokens=800))
    need = 1 if single else 2
    # The refuter can only strike items. How many sessions support a step is the gate's call
    # (commands are looked up in the evidence's facts), not the model's citation: recorded,
    # Qwen answered "keep" with no sessions cited for steps every session ran.
    drop = {(v.kind, v.index) for v in verdicts.verdicts if not v.keep}

    def ids(xs: Sequence[str]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(labels[x] for x in xs if x in labels))

    gate = _Gate(members, need)
    proc = _clean_steps([Step(text=s.text, command=s.command, support=ids(s.sessions))
                         for i, s in enumerate(out.procedure) if ("procedure", i) not in drop], gate, grounded=True)
    checks = _clean_steps([Step(text=s.text, command=s.command, support=ids(s.sessions))
                           for i, s in enumerate(out.verification) if ("verification", i) not in drop],
                          gate, grounded=False)
    # The model copies commands verbatim; values that vary between (or within) the sessions
    # become placeholders exactly as in the skeleton, so a run id is never hard-coded.
    general = generalise_commands([*(c for e in members for c in e.commands),
                                   *(st.command for st in [*proc, *checks] if st.command)])
    proc = [st.model_copy(update={"command": general.get(st.command.strip(), st.command)}) if st.command else st
            for st in proc]
    checks = [st.model_copy(update={"command": general.get(st.command.strip(), st.command)}) if st.command else st
              for st in checks]
    # Re-running the procedure verifies nothing: a check must be a step of its own.
    ran = {s.command for s in proc if s.command} | {s.text.casefold() for s in proc}
    said = " ".join(s.text for s in proc)
    checks = [c for c in checks if c.text.casefold() not in ran
              and not (c.command and (c.command in ran or f"`{c.command}`" in said))]
    pitfalls = []
    for i, p in enumerate(out.pitfalls):
        rule, why = gate.text(p.rule), gate.text(p.why)
        if ("pitfall", i) not in drop and rule and why is not None and len(ids(p.sessions)) >= need:
            pitfalls.append(Pitfall(rule=rule, why=why, support=ids(p.sessions)))
    when = [t for w in out.when_to_use if (t := gate.text(w))]
    desc = gate.text(out.description)
    if not proc or not when or not desc:
        raise ValueError("the model's draft did not survive the evidence checks")
    fallback = extractive_draft(members, single=single, candidate=candidate)
    from pipeline.skills.store import NAME_MAX, NAME_RE

    name = skill_name([out.name], fallback=fallback.name)
    name = name if NAME_RE.match(name) and len(name) <= NAME_MAX else fallback.name
    return SkillDraft(
        name=name, description=clip(desc, 1000), title=gate.text(out.title) or name.replace("-", " "),
        when_to_use=tuple(when), procedure=tuple(proc), pitfalls=tuple(pitfalls),
        verification=tuple(checks) or fallback.verification, evidence=tuple(labels.values()),
        tags=tuple(t for t in (skill_name([x], "") for x in out.tags) if t)[:6] or fallback.tags,
        source="llm", needs_review=False, candidate=candidate)


def synthesize(members: Sequence[Evidence], *, client: Any = None, single: bool = False,
               candidate: str | None = None, notices: list[str] | None = None, name: str | None = None) -> Any:
    """The skill for ``members``: the model's when it survives the checks, else the skeleton.

    ``name`` (the candidate's) names the skeleton, so the staged skill is the candidate listed.
    """
    if client is not None:
        try:
            return llm_draft(members, client, single=single, candidate=candidate)
        except Exception as exc:  # any model, transport or validation failure: the skeleton, reported
            if notices is not None:
                notices.append(f"skill synthesis fell back to the extractive skeleton ({type(exc).__name__}: "
                               f"{str(exc)[:200]})")
    return extractive_draft(members, single=single, candidate=candidate, name=name)

