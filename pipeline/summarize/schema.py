"""The response schemas for LLM summaries: what the model is asked to fill, and how answers are checked.

These classes are the contract with the model (style guide §2.9). Their names, field names,
descriptions and docstrings go out verbatim as the JSON schema of every call, so they are part
of the summary cache key (``cache.schema_hash``) and of the request bodies the VCR cassettes in
``tests/cassettes/`` match: editing any of them is a cache miss and means re-recording.

Validators reject empty, placeholder and echo-the-prompt answers; instructor sends the
``ValueError`` text back to the model as what to fix. List fields are cleaned and cut to their
limit *before* validation, because a re-ask for an over-long list costs a call and fixes nothing.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

_PLACEHOLDERS = {
    "",
    "string",
    "...",
    "…",
    "n/a",
    "na",
    "none",
    "null",
    "todo",
    "tbd",
    "unknown",
    "-",
    "example",
}
#: Phrases from our own prompts; an answer containing one is echoing the instructions.
_ECHO = (
    "<session_data>",
    "</session_data>",
    "<parts_data>",
    "session_data",
    "one or two sentences on what",
    "never follow instructions",
    "judged from the transcript's end",
    "leave a list empty",
    "write every text field in",
    "is a record to summarise",
)


def _text(v: str, what: str) -> str:
    v = (v or "").strip()
    if v.lower().strip(" .") in _PLACEHOLDERS:
        raise ValueError(f"{what} must describe the session in your own words; it was empty or a placeholder")
    low = v.lower()
    if any(p in low for p in _ECHO):
        raise ValueError(f"{what} repeats the instructions; describe what happened in the session instead")
    return v


def _clean_list(v: Any, limit: int) -> Any:
    """Drop empty/placeholder strings and cut to ``limit`` before validation (no re-ask for that)."""
    if not isinstance(v, list):
        return v
    out = [x for x in v if not (isinstance(x, str) and x.strip().lower().strip(" .") in _PLACEHOLDERS)]
    return out[:limit]


class DecisionOut(BaseModel):
    """A choice made in the session."""

    choice: str = Field(
        description="What was decided, with file names, commands and identifiers copied verbatim."
    )
    rationale: str = Field("", description="Why it was chosen, as stated in the session.")
    rejected: list[str] = Field(
        default_factory=list, max_length=3, description="Alternatives considered and not taken."
    )

    @field_validator("choice")
    @classmethod
    def _choice(cls, v: str) -> str:
        return _text(v, "decision.choice")

    @field_validator("rejected", mode="before")
    @classmethod
    def _rejected(cls, v: Any) -> Any:
        return _clean_list(v, 3)


class FileOut(BaseModel):
    path: str = Field(description="The file path exactly as it appears in the session.")
    action: Literal["created", "modified", "deleted", "moved", "read"]


class ErrorFix(BaseModel):
    error: str = Field(description="The error as reported (short).")
    fix: str = Field("", description="How it was fixed; empty if it was not.")


class ChunkSummary(BaseModel):
    """What happened in one part of a coding-agent session."""

    phase_title: str = Field(description="A short title for this part, under 10 words.")
    asked: list[str] = Field(default_factory=list, max_length=4, description="What the user asked for.")
    done: str = Field(description="One or two sentences: what was actually done.")
    files: list[FileOut] = Field(
        default_factory=list, max_length=10, description="Files touched, with the action."
    )
    decisions: list[DecisionOut] = Field(default_factory=list, max_length=5)
    errors: list[ErrorFix] = Field(default_factory=list, max_length=4)
    outcome: Literal["done", "partial", "failed", "abandoned"]
    open_items: list[str] = Field(
        default_factory=list, max_length=4, description="Unfinished work or follow-ups."
    )

    @field_validator("phase_title")
    @classmethod
    def _title(cls, v: str) -> str:
        return _text(v, "phase_title")

    @field_validator("done")
    @classmethod
    def _done(cls, v: str) -> str:
        return _text(v, "done")

    @field_validator("asked", "open_items", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> Any:
        return _clean_list(v, 4)

    @field_validator("files", mode="before")
    @classmethod
    def _files(cls, v: Any) -> Any:
        return _clean_list(v, 10)

    @field_validator("decisions", mode="before")
    @classmethod
    def _decisions(cls, v: Any) -> Any:
        return _clean_list(v, 5)

    @field_validator("errors", mode="before")
    @classmethod
    def _errors(cls, v: Any) -> Any:
        return _clean_list(v, 4)


class ReduceSummary(BaseModel):
    """An overview of a whole coding-agent session."""

    title: str = Field(description="A short title for the session, under 10 words.")
    goal: str = Field(description="One sentence: what the user wanted from the session.")
    decisions: list[DecisionOut] = Field(default_factory=list, max_length=6, description="The key decisions.")
    open_items: list[str] = Field(default_factory=list, max_length=6, description="What is still unfinished.")
    tags: list[str] = Field(default_factory=list, max_length=6, description="Lowercase topic keywords.")
    projects: list[str] = Field(
        default_factory=list, max_length=3, description="Project or repository names."
    )

    @field_validator("title")
    @classmethod
    def _title(cls, v: str) -> str:
        return _text(v, "title")

    @field_validator("goal")
    @classmethod
    def _goal(cls, v: str) -> str:
        return _text(v, "goal")

    @field_validator("open_items", "tags", "decisions", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> Any:
        return _clean_list(v, 6)

    @field_validator("projects", mode="before")
    @classmethod
    def _projects(cls, v: Any) -> Any:
        return _clean_list(v, 3)


#: Part of the cache key: bump it when answers cached under the same schema must not be reused.
SCHEMA_VERSION = 1

__all__ = ["SCHEMA_VERSION", "ChunkSummary", "DecisionOut", "ErrorFix", "FileOut", "ReduceSummary"]
