"""Skills as files: ``SkillDraft`` → SKILL.md text, validation, and the staging store.

**Format.** Agent Skills spec + Hermes limits (peers-and-formats.md §C, hermes-state.md §6): only
the spec's top-level keys; ``name`` = directory name, ``^[a-z0-9]+(-[a-z0-9]+)*$``, ≤ 64 chars;
``description`` ≤ 1024 chars, its first 60 useful alone (Hermes's index cuts there); everything
distill knows (evidence ids, version, needs-review) under ``metadata`` as strings, plus
``metadata.hermes.tags`` in the nested shape Hermes reads. The frontmatter is block-style YAML
because ``skills-ref`` parses it with strictyaml, which rejects flow lists.

**Store.** ``<out>/skills/pending/<name>/SKILL.md`` holds proposals; ``approve`` moves one to the
published directory (``$HERMES_HOME/skills-distilled`` for ``skills.external_dirs``, or
``$HERMES_HOME/skills/distill`` with ``into_hermes``). ``<out>/.distill/skills.json`` is the
registry: per skill its version, evidence, where it was published and the SHA-256 of the text
written there. A published file whose hash differs was edited by a person and is never
rewritten; a name that exists but is not in the registry is not ours and is never rewritten
either. In both cases the new version stays pending and ``diff`` shows what changed. ``reject``
remembers the name and its evidence so the same candidate is not proposed again.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import re
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

import pipeline
from pipeline.atomic import atomic_write_text, remove_tree
from pipeline.errors import DistillError, InputError

NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
NAME_MAX = 64
DESCRIPTION_MAX = 1024
DESCRIPTION_INDEX = 60  # Hermes shows desc[:57] + "..." in its system-prompt index
BODY_MAX_LINES = 300  # the spec says < 500; "well under" leaves room for hand additions
CONTENT_MAX_CHARS = 100_000  # Hermes MAX_SKILL_CONTENT_CHARS
SPEC_KEYS = frozenset({"name", "description", "license", "compatibility", "metadata", "allowed-tools"})
SECTIONS = ("When to Use", "Procedure", "Pitfalls", "Verification")
TEMPLATE = "SKILL.md.j2"


class SkillError(DistillError):
    """A skill cannot be staged, approved or rejected as asked."""


# --------------------------------------------------------------------------- the draft


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Step(_Frozen):
    text: str = Field(description="One imperative instruction.")
    command: str | None = Field(None, description="The command to run, verbatim, if the step is one.")
    support: tuple[str, ...] = Field((), description="Evidence session ids that did this step.")


class Pitfall(_Frozen):
    rule: str = Field(description="A general rule.")
    why: str = Field("", description="One clause of why.")
    support: tuple[str, ...] = ()


class SkillDraft(_Frozen):
    """A skill before it is a file. Session ids live only in ``evidence`` (→ metadata), never the body."""

    name: str
    description: str
    title: str
    when_to_use: tuple[str, ...] = Field(min_length=1)
    procedure: tuple[Step, ...] = Field(min_length=1)
    pitfalls: tuple[Pitfall, ...] = ()
    verification: tuple[Step, ...] = Field(min_length=1)
    evidence: tuple[str, ...] = Field(min_length=1)
    tags: tuple[str, ...] = ()
    source: Literal["llm", "extractive"] = "extractive"
    needs_review: bool = False
    candidate: str | None = Field(None, description="The candidate key it came from, for the registry.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v) or len(v) > NAME_MAX:
            raise ValueError(f"name {v!r} must match {NAME_RE.pattern} and be at most {NAME_MAX} characters")
        return v

    @field_validator("description")
    @classmethod
    def _description(cls, v: str) -> str:
        v = " ".join(v.split())
        if not v or len(v) > DESCRIPTION_MAX:
            raise ValueError(f"description must be 1-{DESCRIPTION_MAX} characters")
        return v


# --------------------------------------------------------------------------- rendering


@lru_cache(maxsize=1)
def _env() -> Any:
    from jinja2 import FileSystemLoader, StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    from pipeline.notes.render import md_code, md_inline
    from pipeline.resources import data_dir

    env = SandboxedEnvironment(loader=FileSystemLoader(str(data_dir("templates"))), undefined=StrictUndefined,
                               autoescape=False, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(inline=md_inline, code=md_code)
    return env


def skill_frontmatter(draft: SkillDraft, *, version: int = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "distill-version": pipeline.__version__,
        "distill-skill-version": str(version),
        "distill-source": draft.source,
        "distill-evidence-sessions": ", ".join(draft.evidence),
        "distill-needs-review": "true" if draft.needs_review else "false",
    }
    if draft.candidate:
        meta["distill-candidate"] = draft.candidate
    if draft.tags:
        meta["hermes"] = {"tags": list(draft.tags)}
    return {"name": draft.name, "description": draft.description, "metadata": meta}


def _dump_yaml(data: dict[str, Any]) -> str:
    # Block style only (strictyaml, used by skills-ref, rejects flow collections); no empty lists.
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1_000_000)


def render_skill(draft: SkillDraft, *, version: int = 1) -> str:
    """The SKILL.md text for ``draft``."""
    body = _env().get_template(TEMPLATE).render(
        title=draft.title, needs_review=draft.needs_review, when_to_use=list(draft.when_to_use),
        procedure=list(draft.procedure), pitfalls=list(draft.pitfalls), verification=list(draft.verification))
    body = re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"
    return f"---\n{_dump_yaml(skill_frontmatter(draft, version=version))}---\n\n{body}"


def split_skill(text: str) -> tuple[dict[str, Any], str]:
    """(frontmatter, body); raises ``ValueError`` when the text has no YAML frontmatter mapping."""
    m = re.match(r"\A\ufeff?---\s*\n(.*?)\n---\s*(?:\n|\Z)", text, re.S)
    if not m:
        raise ValueError("SKILL.md must start with a '---' YAML frontmatter block")
    from pipeline.notes.frontmatter import FrontmatterError, parse_yaml

    try:
        meta = parse_yaml(m.group(1))  # bounded: a SKILL.md a person edited may hold an alias bomb
    except FrontmatterError as exc:
        raise ValueError(f"SKILL.md frontmatter: {exc}") from exc
    if not isinstance(meta, dict):
        raise ValueError("SKILL.md frontmatter must be a YAML mapping")
    return meta, text[m.end():]


def validate_skill(text: str, dir_name: str | None = None) -> list[str]:
    """Problems with ``text`` under the Agent Skills spec and Hermes's limits; empty when valid."""
    try:
        meta, body = split_skill(text)
    except (ValueError, yaml.YAMLError) as exc:
        return [str(exc)]
    problems: list[str] = []
    if extra := sorted(set(meta) - SPEC_KEYS):
        problems.append(f"top-level keys outside the spec: {', '.join(extra)} (put them under metadata)")
    name = meta.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name) or len(name) > NAME_MAX:
        problems.append(f"name {name!r} must match {NAME_RE.pattern}, at most {NAME_MAX} characters")
    elif dir_name is not None and name != dir_name:
        problems.append(f"name {name!r} must equal its directory name {dir_name!r}")
    elif any(w in name for w in ("claude", "anthropic")):
        problems.append(f"name {name!r} contains a reserved word")
    desc = meta.get("description")
    if not isinstance(desc, str) or not desc.strip() or len(desc) > DESCRIPTION_MAX:
        problems.append(f"description must be a string of 1-{DESCRIPTION_MAX} characters")
    elif re.search(r"<[A-Za-z/][^>]*>", desc):
        problems.append("description must not contain XML tags")
    md = meta.get("metadata", {})
    if not isinstance(md, dict):
        problems.append("metadata must be a mapping")
    else:
        for k, v in md.items():
            if k == "hermes":
                if not isinstance(v, dict):
                    problems.append("metadata.hermes must be a mapping")
            elif not isinstance(v, str):
                problems.append(f"metadata.{k} must be a string")
    if not body.strip():
        problems.append("the body is empty")
    heads = {h.strip().casefold() for h in re.findall(r"^##\s+(.+)$", body, re.M)}
    problems += [f"missing section '## {s}'" for s in ("When to Use", "Procedure", "Verification")
                 if s.casefold() not in heads]
    if (lines := body.count("\n")) > BODY_MAX_LINES:
        problems.append(f"body has {lines} lines; keep it under {BODY_MAX_LINES}")
    if len(text) > CONTENT_MAX_CHARS:
        problems.append(f"SKILL.md has {len(text)} characters; Hermes accepts at most {CONTENT_MAX_CHARS}")
    return problems


def text_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- the store


class StageResult(_Frozen):
    name: str
    status: Literal["staged", "update", "unchanged", "declined"]
    path: Path | None = None
    diff: str = ""
    note: str = ""


class ApproveResult(_Frozen):
    name: str
    path: Path
    version: int
    external_dirs_line: str | None = None


class PendingSkill(_Frozen):
    name: str
    path: Path
    version: int
    evidence: tuple[str, ...]
    replaces: Path | None = None
    description: str = ""


def default_publish_dir(home: Path) -> Path:
    return Path(home) / "skills-distilled"


def hermes_skills_dir(home: Path) -> Path:
    return Path(home) / "skills" / "distill"


class SkillStore:
    """Pending proposals, the published directories and the registry that ties them together."""

    def __init__(self, out: Path, home: Path, publish_dir: Path | None = None) -> None:
        self.out = Path(out)
        self.home = Path(home)
        self.pending_dir = self.out / "skills" / "pending"
        self.publish_dir = Path(publish_dir) if publish_dir else default_publish_dir(self.home)
        self.registry_path = self.out / ".distill" / "skills.json"

    # ------------------------------------------------------------------ registry

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.registry_path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        # Hand-edited or damaged: keep only entries of the shapes this store writes.
        for key in ("skills", "pending"):
            value = data.get(key)
            data[key] = {k: v for k, v in value.items() if isinstance(v, dict)} if isinstance(value, dict) else {}
        declined = data.get("declined")
        data["declined"] = [d for d in declined if isinstance(d, dict)] if isinstance(declined, list) else []
        data.setdefault("skills", {})
        data.setdefault("pending", {})
        data.setdefault("declined", [])
        return data

    def _save(self, data: dict[str, Any]) -> None:
        atomic_write_text(self.registry_path, json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n")

    def is_declined(self, name: str, session_ids: Any) -> bool:
        """Declined before: the same name, or mostly the same evidence (Jaccard ≥ 0.5)."""
        ids = set(session_ids)
        for d in self._load()["declined"]:
            old = set(d.get("sessions", []))
            if d.get("name") == name or (ids and old and len(ids & old) / len(ids | old) >= 0.5):
                return True
        return False

    def published(self) -> dict[str, dict[str, Any]]:
        return dict(self._load()["skills"])

    def skills_for_session(self, session_id: str) -> list[str]:
        """Published skills whose evidence includes ``session_id`` (for the note's ``skills:``)."""
        return sorted(n for n, s in self._load()["skills"].items() if session_id in s.get("evidence", []))

    # ------------------------------------------------------------------ locating

    def _existing(self, name: str) -> Path | None:
        """A published SKILL.md of that name, wherever distill could have put it."""
        for root in (self.publish_dir, hermes_skills_dir(self.home)):
            if (root / name / "SKILL.md").is_file():
                return root / name / "SKILL.md"
        return None

    # ------------------------------------------------------------------ operations

    def stage(self, draft: SkillDraft, *, allow_declined: bool = False) -> StageResult:
        """Write ``draft`` as a pending proposal. Never touches a published skill."""
        data = self._load()
        if not allow_declined and self.is_declined(draft.name, draft.evidence):
            return StageResult(name=draft.name, status="declined",
                               note="declined before; pass allow_declined to propose it again")
        published = data["skills"].get(draft.name)
        existing = self._existing(draft.name)
        version = (int(published["version"]) + 1) if published else 1
        text = render_skill(draft, version=version)
        if problems := validate_skill(text, draft.name):
            raise SkillError(f"skill {draft.name}: generated SKILL.md is invalid: {'; '.join(problems)}")
        target = self.pending_dir / draft.name / "SKILL.md"
        if existing is not None and _body(existing.read_text("utf-8")) == _body(text):
            return StageResult(name=draft.name, status="unchanged", path=existing)
        if target.is_file() and target.read_text("utf-8") == text:
            return StageResult(name=draft.name, status="unchanged", path=target)
        atomic_write_text(target, text)
        data["pending"][draft.name] = {"version": version, "evidence": list(draft.evidence),
                                       "candidate": draft.candidate, "source": draft.source}
        self._save(data)
        if existing is None:
            return StageResult(name=draft.name, status="staged", path=target)
        note = "" if published and self._untouched(existing, published) else (
            "the published skill was edited by hand or not made by distill: approve will not overwrite it")
        return StageResult(name=draft.name, status="update", path=target, diff=self.diff(draft.name), note=note)

    def pending(self) -> list[PendingSkill]:
        data = self._load()
        out: list[PendingSkill] = []
        for path in sorted(self.pending_dir.glob("*/SKILL.md")) if self.pending_dir.is_dir() else ():
            name = path.parent.name
            entry = data["pending"].get(name, {})
            try:
                desc = str(split_skill(path.read_text("utf-8"))[0].get("description", ""))
            except (ValueError, yaml.YAMLError):
                desc = ""
            out.append(PendingSkill(name=name, path=path, version=int(entry.get("version", 1)),
                                    evidence=tuple(entry.get("evidence", [])), replaces=self._existing(name),
                                    description=desc))
        return out

    def diff(self, name: str) -> str:
        """Unified diff from the published skill (or nothing) to the pending proposal."""
        new_path = self.pending_dir / name / "SKILL.md"
        if not new_path.is_file():
            raise SkillError(f"no pending skill named {name!r}; see `distill skills pending`")
        old_path = self._existing(name)
        old = old_path.read_text("utf-8") if old_path else ""
        return "".join(difflib.unified_diff(
            old.splitlines(keepends=True), new_path.read_text("utf-8").splitlines(keepends=True),
            fromfile=str(old_path) if old_path else "/dev/null", tofile=str(new_path)))

    def approve(self, name: str, *, into_hermes: bool = False) -> ApproveResult:
        """Publish the pending ``name``. Refuses to overwrite a skill a person edited or wrote.

        Each step can be cut short by a crash, and running ``approve`` again finishes the job: the
        published file is written first, then the registry, then the evidence notes are linked,
        and the pending proposal goes last, in one rename. A published file byte-identical to the
        proposal is the crashed run's own write; a registry entry with the proposal's hash means
        only the linking and the clean-up were left.
        """
        src = self.pending_dir / name / "SKILL.md"
        if not src.is_file():
            raise SkillError(f"no pending skill named {name!r}; see `distill skills pending`")
        data = self._load()
        root = hermes_skills_dir(self.home) if into_hermes else self.publish_dir
        target = root / name / "SKILL.md"
        published = data["skills"].get(name)
        text = src.read_text("utf-8")
        for existing in filter(None, (self._existing(name), target if target.is_file() else None)):
            if not (published and self._untouched(existing, published)) and not _same_text(existing, text):
                raise SkillError(
                    f"{existing} was edited by hand or was not written by distill; it is never overwritten. "
                    f"Review `distill skills diff {name}` and merge by hand, then `distill skills reject {name}`")
        if problems := validate_skill(text, name):
            raise SkillError(f"pending skill {name} is invalid ({'; '.join(problems)}); reject it and re-stage")
        atomic_write_text(target, text)
        entry = data["pending"].get(name)
        done = entry is None and published is not None and published.get("content_hash") == text_hash(text)
        if done:
            version, evidence = int(published.get("version", 1)), published.get("evidence", [])
        else:
            entry = data["pending"].pop(name, None) or {}
            version, evidence = int(entry.get("version", 1)), entry.get("evidence", [])
            data["skills"][name] = {
                "version": version, "content_hash": text_hash(text), "path": str(target),
                "evidence": evidence, "candidate": entry.get("candidate"),
                "published_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "history": [*(published or {}).get("history", []),
                            {"version": version, "content_hash": text_hash(text)}],
            }
            self._save(data)
        self.link_notes(name, evidence)
        remove_tree(src.parent)
        line = None if into_hermes else f"skills:\n  external_dirs:\n    - {root}"
        return ApproveResult(name=name, path=target, version=version, external_dirs_line=line)

    def reject(self, name: str) -> Path | None:
        """Drop the pending ``name`` and remember the decline (name + evidence)."""
        data = self._load()
        src = self.pending_dir / name
        entry = data["pending"].pop(name, None)
        if entry is None and not src.is_dir():
            raise SkillError(f"no pending skill named {name!r}; see `distill skills pending`")
        data["declined"].append({"name": name, "sessions": (entry or {}).get("evidence", []),
                                 "candidate": (entry or {}).get("candidate"),
                                 "at": datetime.now(UTC).isoformat(timespec="seconds")})
        self._save(data)
        if src.is_dir():
            remove_tree(src)
        return src

    # ------------------------------------------------------------------ notes

    def link_notes(self, name: str, session_ids: Any) -> list[Path]:
        """Add ``name`` to the ``skills:`` property of each evidence session's note.

        ``skills`` is a generated key (render.GENERATED_KEYS): the next re-render replaces it, so
        ``run`` must pass ``skills_for_session`` to ``render_note`` for the link to persist.
        """
        from pipeline.notes.frontmatter import FrontmatterError, load_frontmatter
        from pipeline.notes.render import dump_note

        ids = set(session_ids)
        index = _read_json(self.out / ".distill" / "index.json")
        changed: list[Path] = []
        for sid in ids:
            rel = (index.get(sid) or {}).get("path")
            path = self.out / rel if rel else None
            if path is None or not path.is_file():
                continue
            # A note whose frontmatter is broken or hostile is left as it is (bounded reading).
            with contextlib.suppress(OSError, UnicodeDecodeError, FrontmatterError):
                meta, content = load_frontmatter(path.read_text("utf-8"))
                old = meta.get("skills")
                skills = [str(s) for s in old] if isinstance(old, list) else []
                if name in skills:
                    continue
                tags = meta.pop("tags", None)
                meta["skills"] = [*skills, name]
                if tags is not None:
                    meta["tags"] = tags
                atomic_write_text(path, dump_note(meta, content.strip()))
                changed.append(path)
        return changed

    @staticmethod
    def _untouched(path: Path, entry: dict[str, Any]) -> bool:
        try:
            return text_hash(path.read_text("utf-8")) == entry.get("content_hash")
        except OSError:
            return False


def _same_text(path: Path, text: str) -> bool:
    try:
        return path.read_text("utf-8") == text
    except (OSError, UnicodeDecodeError):
        return False


def _body(text: str) -> str:
    try:
        return split_skill(text)[1].strip()
    except (ValueError, yaml.YAMLError):
        return text


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def check_name(name: str) -> str:
    if not NAME_RE.match(name) or len(name) > NAME_MAX:
        raise InputError(f"{name!r} is not a skill name; see `distill skills pending`")
    return name
