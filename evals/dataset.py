"""The eval set: one hand-written gold file per session in ``evals/gold/*.yaml``.

A gold file says where the session comes from (a transcript file read by
``pipeline.read.detect.read_sessions``, or a Hermes state.db read by ``pipeline.read.hermes.HermesDB``)
and what a careful human reader found in it: the goal, the key decisions, the files it produced,
how it ended and its language. Gold is written by reading the transcript, never by looking at
a summariser's output, so the metrics measure the summariser against the session, not against
itself.

Paths in gold files are relative to the repository root, so the set works from any checkout.
Inputs are either existing test fixtures (``fixtures/``) or whole files copied into
``evals/sessions/`` with their origin in ``evals/sessions/ORIGIN.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipeline.models import Session

ROOT = Path(__file__).resolve().parent.parent
GOLD_DIR = Path(__file__).resolve().parent / "gold"

GoldEndState = Literal["resolved", "unresolved", "failed"]


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


class Gold(BaseModel):
    """What a human reader found in one session (``extra="forbid"``: typos in gold fail loudly)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    input: str = Field(description="Repository-relative path of the transcript file or state.db.")
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
    notes: str = ""

    @property
    def path(self) -> Path:
        return ROOT / self.input


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
