"""The eval set: one hand-written gold file per session in ``evals/gold/*.yaml``.

A gold file says where the session comes from (a transcript file read by
``pipeline.read.detect.read_sessions``, or a Hermes state.db read by ``pipeline.read.hermes.HermesDB``)
and what a careful human reader found in it: the goal, the key decisions, the files it produced,
how it ended and its language. Gold is written by reading the transcript, never by looking at
a summariser's output, so the metrics measure the summariser against the session, not against
itself.

The set has two parts. **dev** is what rules may be tuned on; **test** is blind: its gold was
written from the transcript before any distill output for it was read, and no rule is tuned on it.
Gates and the README's figures come from the test part.

Inputs are Hermes databases built by this repository (``fixtures/``, relative to the repository
root) or third-party transcripts read in place from the shared corpus (``agent-transcripts/...``,
relative to ``../shared/`` beside the checkout, or ``$DISTILL_SHARED``); those are never copied
into the repository.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipeline.models import Session

ROOT = Path(__file__).resolve().parent.parent
GOLD_DIR = Path(__file__).resolve().parent / "gold"

GoldEndState = Literal["resolved", "partial", "unresolved", "failed"]
Split = Literal["dev", "test"]


def shared_dir() -> Path:
    """``../shared/`` beside the checkout (where CI lays it), or ``$DISTILL_SHARED``."""
    return Path(os.environ.get("DISTILL_SHARED") or ROOT.parent / "shared")


class GoldDecision(BaseModel):
    """A decision the session made that a good summary must state."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(description="The decision in one sentence, as a reader would put it.")
    keywords: tuple[str, ...] = Field(
        description="Keyword groups for the deterministic fallback judge. The decision counts as "
        "stated when every group matches; a group is 'a|b|c' (any alternative, case-insensitive)."
    )

    @field_validator("keywords")
    @classmethod
    def _non_empty(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v or any(not g.strip() for g in v):
            raise ValueError("each decision needs at least one non-empty keyword group")
        return v


class GoldPhase(BaseModel):
    """A stretch of work a summary of a long session must cover (a topic, not a turn)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(description="What was worked on, in one sentence.")
    keywords: tuple[str, ...] = Field(description="Keyword groups, as for decisions: every group must match.")
    end_state: GoldEndState | None = Field(None, description="How this phase ended, when the transcript shows it.")


class Gold(BaseModel):
    """What a human reader found in one session (``extra="forbid"``: typos in gold fail loudly)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    split: Split = Field(description="dev (rules may be tuned on it) or test (blind: never tuned on).")
    blind: bool = Field(False, description="Gold written from the transcript before any distill output for it was read.")
    input: str = Field(description="A state.db under fixtures/ (repository-relative), a transcript in the "
                       "shared corpus as agent-transcripts/<format>/<file>, or (a gold set of your own, "
                       "``--gold-dir``) an absolute path.")
    format: str | None = Field(None, description="Source format; 'hermes-state' for a state.db.")
    session: str | None = Field(
        None, description="Session id (state.db) or id prefix (a file holding several sessions)."
    )
    origin: str = Field(description="Where the input came from (corpus file, repo, commit) or how it was built.")
    why: str = Field(description="Why this session is in the set.")
    language: str
    end_state: GoldEndState
    goal: str
    decisions: tuple[GoldDecision, ...] = ()
    output_files: tuple[str, ...] = Field((), description="Files the session created or changed.")
    optional_output_files: tuple[str, ...] = Field(
        (), description="Files that were probably changed but the transcript does not show the edit; "
        "naming them is not a false positive, missing them is not a miss."
    )
    secrets: tuple[str, ...] = Field((), description="Literal secret values present in the transcript.")
    long: bool = Field(False, description="A long multi-generation (compacted) session.")
    phases: tuple[GoldPhase, ...] = Field((), description="The topics a summary must cover (long sessions).")
    end_evidence: str = Field("", description="The transcript's words that decide the end state.")
    notes: str = ""

    @field_validator("blind")
    @classmethod
    def _test_is_blind(cls, v: bool, info: object) -> bool:
        data = getattr(info, "data", {})
        if data.get("split") == "test" and not v:
            raise ValueError("a test-part gold file must be written blind (blind: true)")
        return v

    @property
    def shared(self) -> bool:
        return self.input.startswith("agent-transcripts/")

    @property
    def path(self) -> Path:
        if Path(self.input).is_absolute():
            return Path(self.input)
        return shared_dir() / self.input if self.shared else ROOT / self.input


def load_gold(directory: Path = GOLD_DIR) -> list[Gold]:
    """Every gold file, sorted by id; duplicate ids are an error."""
    golds: list[Gold] = []
    for path in sorted(directory.glob("*.yaml")):
        with path.open(encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
        try:
            golds.append(Gold.model_validate(data))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from exc
    ids = [g.id for g in golds]
    if len(ids) != len(set(ids)):
        raise ValueError(f"duplicate gold ids in {directory}")
    return sorted(golds, key=lambda g: g.id)


def load_session(gold: Gold) -> Session:
    """The one session a gold file describes, read by the pipeline's own readers."""
    if not gold.path.exists():
        raise FileNotFoundError(f"{gold.id}: input {gold.input} is missing")
    if gold.format == "hermes-state":
        from pipeline.read.hermes import HermesDB

        if not gold.session:
            raise ValueError(f"{gold.id}: a state.db input needs 'session'")
        with HermesDB(gold.path) as db:
            return db.read_session(db.resolve(gold.session))
    from pipeline.read.detect import read_sessions

    found = [s for s in read_sessions(gold.path, gold.format)
             if gold.session is None or s.id.startswith(gold.session)]
    if len(found) != 1:
        raise ValueError(f"{gold.id}: {gold.input} holds {len(found)} matching sessions; set 'session' to an id prefix")
    return found[0]
