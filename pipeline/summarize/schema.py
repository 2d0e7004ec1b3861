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


def _clean_list(v: Any, limit: int, *, clip: int | None = None) -> Any:
    """Drop empty/placeholder strings and cut to ``limit`` before validation (no re-ask for that); with
    ``clip``, each string is clipped to that many characters too (``_cut``)."""
    if not isinstance(v, list):
        return v
    out = [x for x in v if not (isinstance(x, str) and x.strip().lower().strip(" .") in _PLACEHOLDERS)]
    return [_cut(x, clip) for x in out[:limit]] if clip else out[:limit]


def _cut(v: Any, limit: int) -> Any:
    """Clip an over-long string before validation, at a word boundary and marked with "…" (a cut
    inside "9.6.0" would read as a different version): a re-ask for a long sentence costs a call
    and fixes nothing."""
    if not isinstance(v, str) or len(v) <= limit:
        return v
    head = v[:limit]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip(" ,;:") + "…"


# Field limits, in characters, applied by clipping (``_cut``). They stay out of the JSON schema on purpose:
# a ``maxLength`` becomes a rule as deep as the limit in llama.cpp's grammar (measured: the grammar
# explodes). Lists are bounded in the schema (``maxItems``), which the grammar handles well, and the
# prompt asks for brevity; ``max_tokens`` is the backstop.
TITLE_MAX, SENTENCE_MAX, ITEM_MAX, WORD_MAX = 80, 300, 160, 40


class DecisionOut(BaseModel):
    """A choice made in the session."""

    choice: str = Field(description="What was decided; copy file names, commands and identifiers verbatim.")
    rationale: str = Field("", description="Why, as the session states it; empty if it does not.")
    rejected: list[str] = Field(default_factory=list, max_length=3, description="Alternatives not taken.")

    @field_validator("choice", "rationale", mode="before")
    @classmethod
    def _clip(cls, v: Any) -> Any:
        return _cut(v, SENTENCE_MAX)

    @field_validator("choice")
    @classmethod
    def _choice(cls, v: str) -> str:
        return _text(v, "decision.choice")

    @field_validator("rejected", mode="before")
    @classmethod
    def _rejected(cls, v: Any) -> Any:
        return _clean_list(v, 3, clip=ITEM_MAX)


class ErrorFix(BaseModel):
    error: str = Field(description="The error as reported (short).")
    fix: str = Field("", description="How it was fixed; empty if it was not.")

    @field_validator("error", "fix", mode="before")
    @classmethod
    def _clip(cls, v: Any) -> Any:
        return _cut(v, ITEM_MAX)


Outcome = Literal["done", "partial", "failed", "abandoned"]


# No ``asked`` and no ``files``: what the user asked and which files changed are read from the session
# without a model (``extractive.user_asks``, ``Facts``), so the model never spends tokens echoing them.
class ChunkSummary(BaseModel):
    """What happened in one part of a coding-agent session."""

    phase_title: str = Field(description="A short title for this part, under 10 words.")
    done: str = Field(description="One or two sentences: what was actually done.")
    decisions: list[DecisionOut] = Field(default_factory=list, max_length=4)
    errors: list[ErrorFix] = Field(default_factory=list, max_length=3)
    outcome: Outcome
    open_items: list[str] = Field(default_factory=list, max_length=3, description="Unfinished work or follow-ups.")

    @field_validator("phase_title", mode="before")
    @classmethod
    def _clip_title(cls, v: Any) -> Any:
        return _cut(v, TITLE_MAX)

    @field_validator("done", mode="before")
    @classmethod
    def _clip_done(cls, v: Any) -> Any:
        return _cut(v, SENTENCE_MAX)

    @field_validator("phase_title")
    @classmethod
    def _title(cls, v: str) -> str:
        return _text(v, "phase_title")

    @field_validator("done")
    @classmethod
    def _done(cls, v: str) -> str:
        return _text(v, "done")

    @field_validator("open_items", mode="before")
    @classmethod
    def _open(cls, v: Any) -> Any:
        return _clean_list(v, 3, clip=ITEM_MAX)

    @field_validator("decisions", mode="before")
    @classmethod
    def _decisions(cls, v: Any) -> Any:
        return _clean_list(v, 4)

    @field_validator("errors", mode="before")
    @classmethod
    def _errors(cls, v: Any) -> Any:
        return _clean_list(v, 3)


class ReduceSummary(BaseModel):
    """An overview of a whole coding-agent session."""

    title: str = Field(description="A short title for the session, under 10 words.")
    goal: str = Field(description="One sentence: what the user wanted from the session.")
    decisions: list[DecisionOut] = Field(default_factory=list, max_length=6, description="The key decisions.")
    open_items: list[str] = Field(default_factory=list, max_length=4, description="What is still unfinished.")
    tags: list[str] = Field(default_factory=list, max_length=5, description="Lowercase topic keywords.")
    projects: list[str] = Field(default_factory=list, max_length=3, description="Project or repository names.")

    @field_validator("title", mode="before")
    @classmethod
    def _clip_title(cls, v: Any) -> Any:
        return _cut(v, TITLE_MAX)

    @field_validator("goal", mode="before")
    @classmethod
    def _clip_goal(cls, v: Any) -> Any:
        return _cut(v, SENTENCE_MAX)

    @field_validator("title")
    @classmethod
    def _title(cls, v: str) -> str:
        return _text(v, "title")

    @field_validator("goal")
    @classmethod
    def _goal(cls, v: str) -> str:
        return _text(v, "goal")

    @field_validator("decisions", mode="before")
    @classmethod
    def _decisions(cls, v: Any) -> Any:
        return _clean_list(v, 6)

    @field_validator("open_items", mode="before")
    @classmethod
    def _open(cls, v: Any) -> Any:
        return _clean_list(v, 4, clip=ITEM_MAX)

    @field_validator("tags", "projects", mode="before")
    @classmethod
    def _words(cls, v: Any) -> Any:
        return _clean_list(v, 5, clip=WORD_MAX)


# A session whose transcript fits one chunk is summarised by one call with this schema instead of a
# chunk call and a reduce call: on the embedded model each call costs a minute or more.
class SessionBrief(ReduceSummary):
    """A whole short coding-agent session."""

    done: str = Field(description="One or two sentences: what was actually done.")
    outcome: Outcome
    errors: list[ErrorFix] = Field(default_factory=list, max_length=3)

    @field_validator("done", mode="before")
    @classmethod
    def _clip_done(cls, v: Any) -> Any:
        return _cut(v, SENTENCE_MAX)

    @field_validator("done")
    @classmethod
    def _done(cls, v: str) -> str:
        return _text(v, "done")

    @field_validator("errors", mode="before")
    @classmethod
    def _errors(cls, v: Any) -> Any:
        return _clean_list(v, 3)


#: Part of the cache key: bump it when answers cached under the same schema must not be reused.
SCHEMA_VERSION = 2

__all__ = ["SCHEMA_VERSION", "ChunkSummary", "DecisionOut", "ErrorFix", "ReduceSummary", "SessionBrief"]
