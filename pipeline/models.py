"""The contracts between pipeline stages.

Every stage takes and returns these models and nothing else, so each stage can be called,
tested and replaced alone (extract -> chunk -> facts -> summarise -> render -> write).
Models are frozen: a stage that wants to change something builds a new object with
``model_copy(update=...)``, which keeps data flow one-directional and easy to follow.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

Role = Literal["user", "assistant", "tool", "system"]
PhaseOutcome = Literal["done", "partial", "failed", "abandoned", "unknown"]
EndState = Literal["resolved", "unresolved", "failed", "unknown"]
FileAction = Literal["created", "modified", "deleted", "moved", "read"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------- layer 1: transcripts


class ToolCall(_Frozen):
    """One tool invocation requested by an assistant turn."""

    id: str | None = None
    name: str
    arguments: dict[str, Any] | str = Field(
        default_factory=dict,
        description="Parsed JSON arguments; the raw string when they are not valid JSON.",
    )


class Message(_Frozen):
    """One logical message, decoded from whatever the source stored.

    ``row_id`` and the identity fields exist so ``chunk`` can dedupe Hermes's display history
    (protected copies across compaction generations); other sources leave them at defaults.
    """

    row_id: int | None = Field(None, description="Source row id (state.db messages.id) or ordinal.")
    role: Role
    content: str = Field("", description="Plain text; images replaced by a marker, reasoning excluded.")
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    timestamp: float | None = Field(None, description="Epoch seconds.")
    reasoning: str | None = None
    images: int = Field(0, description="How many image parts the message carried.")
    # Compaction bookkeeping (Hermes); defaults mean "live, not a carrier".
    active: bool = True
    compacted: bool = False
    is_carrier: bool = Field(False, description="A compaction summary carrier (Hermes checkpoint).")
    carrier_summary: str | None = Field(
        None, description="For a carrier: the checkpoint text, markers stripped."
    )
    identity: str | None = Field(
        None, description="Cross-generation identity (message_uid / display_order) when the source has one."
    )
    segment: str | None = Field(
        None, description="For a legacy compression chain: the session id this row was stored under."
    )


class Lineage(_Frozen):
    """How a session relates to others. Continuations are merged; everything else is a link."""

    parent: str | None = None
    segments: tuple[str, ...] = Field(
        (), description="Session ids of a legacy compression chain, root first (includes this id)."
    )
    children: tuple[str, ...] = Field((), description="Non-continuation children (e.g. /new resets).")
    branches: tuple[str, ...] = ()
    subagents: tuple[str, ...] = ()
    branched_from: str | None = None
    delegated_from: str | None = None
    reset_from: str | None = None


class ModelUsage(_Frozen):
    model: str
    provider: str | None = None
    task: str = ""
    api_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


class Session(_Frozen):
    """A whole logical session: the Hermes session (or chain) plus its decoded messages."""

    id: str
    source: str = Field(description="Where it ran: cli, telegram, ... or claude-code, codex for imports.")
    origin: str = Field("hermes-state", description="Which reader produced it (hermes-state, hermes-jsonl, ...).")
    title: str | None = None
    title_source: str | None = None
    model: str | None = None
    provider: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    last_active_at: datetime | None = None
    end_reason: str | None = None
    cwd: str | None = None
    git_branch: str | None = None
    git_repo_root: str | None = None
    profile: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    usage: tuple[ModelUsage, ...] = ()
    lineage: Lineage = Lineage()
    messages: tuple[Message, ...] = ()
    problems: tuple[str, ...] = Field((), description="Corrupt or odd data found while reading.")
    transcript: str | None = Field(None, description="The transcript file it was read from (None for a state.db).")


class Chunk(_Frozen):
    """One unit of summarisation: a compaction generation, or a budget-sized part of one."""

    session_id: str
    generation: int
    part: int = 0
    messages: tuple[Message, ...]
    checkpoint: str | None = Field(
        None, description="Hermes's own compaction summary for the turns of this generation, if any."
    )
    token_estimate: int = 0
    content_hash: str = ""


# --------------------------------------------------------------------------- facts (no LLM)


class FileTouch(_Frozen):
    path: str
    action: FileAction
    tool: str | None = None


class Facts(_Frozen):
    """What can be known about a session without a model. The authority for grounding."""

    files: tuple[FileTouch, ...] = ()
    commands: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    tools: dict[str, int] = Field(default_factory=dict)
    models: tuple[str, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    duration_s: float | None = None
    message_count: int = 0
    user_turns: int = 0
    generations: int = 1
    language: str = "en"

    @property
    def output_files(self) -> list[str]:
        """Files the session created, changed or moved (at the final path), in first-touch order.

        Not outputs: files only read, files deleted (``deleted_files``; a moved file's old path is
        one), directories, and scratch: temp folders and tool caches (``is_scratch``).
        """
        return [f.path for f in self.files if f.action not in ("read", "deleted") and not is_scratch(f.path)]

    @property
    def deleted_files(self) -> list[str]:
        """Files the session removed and did not write again (scratch left out). A removed folder
        (``rm -rf .deploy``) is not a file: the files the session had touched in it are listed."""
        folders: set[str] = set()
        for f in self.files:
            d = posixpath.dirname(f.path)
            while d and d not in folders and d != "/":
                folders.add(d)
                d = posixpath.dirname(d)
        return [f.path for f in self.files
                if f.action == "deleted" and not is_scratch(f.path) and f.path.rstrip("/") not in folders]


#: Paths no reader wants listed as a session's output: temp folders, tool caches and build scratch.
_SCRATCH = re.compile(
    r"^(?:/tmp/|/var/tmp/|/private/tmp/|/private/var/folders/|/dev/shm/|[A-Za-z]:[\\/](?:Windows[\\/])?Temp[\\/])"
    r"|(?:^|[\\/])(?:node_modules|__pycache__|\.pytest_cache|\.mypy_cache|\.ruff_cache|\.cache|\.next|\.nuxt"
    r"|\.turbo|\.parcel-cache|\.venv|\.gradle|\.idea|\.DS_Store)(?:[\\/]|$)"
    # a placeholder that only keeps an empty folder in git
    r"|(?:^|[\\/])\.(?:gitkeep|keep)$"
    # a folder named as scratch: tmp/, .tmp/, temp/, .deploy-tmp/, build_tmp/ (a file named tmp.py is no folder)
    r"|(?:^|[\\/])(?:[\w.-]*[-_.])?(?:tmp|temp)[\\/]"
    # a file named as scratch: .tmp_check.py, tmp_report.txt, temp-out.json (tmp.py itself is a name like any other;
    # "temp" is also temperature: a firmware's temp_fusion.c or temp_sensor.h is source, so after "temp" only the
    # words a scratch file is named by)
    r"|(?:^|[\\/])(?:\.(?:tmp|temp)[._-]|tmp[_-]|temp[_-](?:out|output|file|check|test|data|result|report|script|fix"
    r"|debug|log|copy|backup|patch|run|\d))[^\\/]*$"
    r"|[\\/]$", re.I)


@lru_cache(maxsize=4096)
def is_scratch(path: str) -> bool:
    """A temp file, a cache or build-scratch path, or a directory (a trailing slash)."""
    # Cached: facts, phases and the note each ask it of the same few paths of a session.
    return bool(_SCRATCH.search(path))


# --------------------------------------------------------------------------- layer 2: summaries


class Decision(_Frozen):
    choice: str = Field(description="What was decided, with the session's own identifiers verbatim.")
    rationale: str = ""
    rejected: tuple[str, ...] = Field((), description="Options considered and not taken.")
    evidence: str | None = Field(None, description="Where it came from, e.g. a message row id.")


class Phase(_Frozen):
    title: str
    asks: tuple[str, ...] = Field((), description="What the user asked in this phase.")
    done: str = Field("", description="What was actually done.")
    outcome: PhaseOutcome = "unknown"
    generation: int = 0


#: Errors a note lists, whichever summariser wrote it (``Facts`` keep more, for search).
NOTE_ERRORS_MAX = 6


class Problem(_Frozen):
    """An error the session hit, and how it was fixed (empty when it was not, or nobody said)."""

    error: str
    fix: str = ""


class SessionSummary(_Frozen):
    """The fixed structure every summariser fills (extractive or LLM)."""

    title: str | None = None
    goal: str
    phases: tuple[Phase, ...] = ()
    decisions: tuple[Decision, ...] = ()
    output_files: tuple[str, ...] = ()
    open_items: tuple[str, ...] = ()
    errors: tuple[Problem, ...] = Field((), description="Errors hit and their fixes.")
    end_state: EndState = "unknown"
    end_evidence: str = Field("", description="Why the end state: the rule and the message that decided it.")
    language: str = "en"
    tags: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()
    summarizer: str = Field("extractive", description="extractive, or the litellm model string.")
    cost_usd: float = 0.0


# --------------------------------------------------------------------------- output


class Note(_Frozen):
    """A rendered Markdown file, not yet written."""

    session_id: str
    relpath: str = Field(description="Path under the output dir, '/'-separated.")
    frontmatter: dict[str, Any]
    body: str
    content_hash: str


class SessionResult(_Frozen):
    session_id: str
    status: Literal["written", "unchanged", "would-write", "failed", "skipped"]
    path: str | None = None
    error: str | None = None
    problems: tuple[str, ...] = ()


class RunReport(BaseModel):
    """What one run did; printed as a table or as JSON (``--json``). Mutable: the runner fills it."""

    model_config = ConfigDict(extra="forbid")

    db: str | None = None
    out: str | None = None
    summarizer: str = "extractive"
    #: the summariser's model is the embedded one, served on this machine: nothing left it
    summarizer_local: bool = False
    selected: int = 0
    written: int = 0
    unchanged: int = 0
    skipped: int = 0
    failed: int = 0
    dry_run: bool = False
    results: list[SessionResult] = Field(default_factory=list)
    llm_calls: int = 0
    #: calls that re-asked after an answer failed validation (with a grammar-constrained model: none)
    llm_reasks: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    hallucinations_dropped: int = 0
    fallbacks: int = 0
    elapsed_s: float = 0.0
    notices: list[str] = Field(default_factory=list)
    #: how many ``notices`` were said before any session was read (selection, model choice): the
    #: ones an unchanged re-run says again (``pipeline.cli.record``); not part of the printed report
    _setup_notices: int = PrivateAttr(default=0)
    #: how many ``notices`` only inform about this run's work (``inform``): an unchanged re-run would not say
    #: them, and they ask nothing of it, so they do not keep the run from being recorded as clean
    _info_notices: int = PrivateAttr(default=0)

    @property
    def setup_notices(self) -> int:
        return self._setup_notices

    @property
    def info_notices(self) -> int:
        return self._info_notices

    def inform(self, notices: Iterable[str]) -> None:
        for notice in notices:
            self.notices.append(notice)
            self._info_notices += 1

    def mark_setup_done(self) -> None:
        self._setup_notices = len(self.notices)

    def add(self, result: SessionResult) -> None:
        self.results.append(result)
        if result.status in ("written", "would-write"):
            self.written += 1
        elif result.status == "unchanged":
            self.unchanged += 1
        elif result.status == "failed":
            self.failed += 1
        elif result.status == "skipped":
            self.skipped += 1
