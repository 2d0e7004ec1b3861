"""Settings, resolved once with visible precedence: flag > environment > config file > default.

``HERMES_HOME`` follows Hermes's own rule (env var, else ``~/.hermes``); a profile lives at
``$HERMES_HOME/profiles/<name>/``. Nothing here reads the environment at import time.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pipeline.errors import InputError

#: Sources Hermes itself hides from pickers or search, and that distill skips unless asked.
DEFAULT_EXCLUDED_SOURCES: tuple[str, ...] = ("tool", "subagent", "cron", "kanban", "oneshot")

#: Tokens per chunk before a generation is split further at a turn boundary.
DEFAULT_CHUNK_TOKENS = 6000


def hermes_home(env: dict[str, str] | None = None) -> Path:
    """``$HERMES_HOME`` or ``~/.hermes``, as Hermes resolves it."""
    env = os.environ if env is None else env
    raw = env.get("HERMES_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".hermes"


def profile_home(profile: str | None, env: dict[str, str] | None = None) -> Path:
    root = hermes_home(env)
    return root / "profiles" / profile if profile else root


class Settings(BaseModel):
    """Everything a run needs. Built by the CLI (or a caller) and passed to ``run``."""

    model_config = ConfigDict(extra="forbid")

    home: Path = Field(description="HERMES_HOME (or the profile's directory).")
    db: Path = Field(description="The state.db to read.")
    out: Path = Field(description="Where notes are written (default $HERMES_HOME/distilled).")
    sessions: list[str] = Field(default_factory=list, description="Session ids or exact titles.")
    inputs: list[Path] = Field(
        default_factory=list, description="Transcript files or directories to read instead of state.db."
    )
    input_format: str | None = Field(None, description="Format of ``inputs`` (auto-detected when None).")
    select_all: bool = False
    since: datetime | None = Field(None, description="Sessions active at or after this time.")
    idle: float | None = Field(None, description="Only sessions idle for at least this many seconds.")
    limit: int | None = Field(None, ge=1, description="Only the N most recently active of the selected sessions.")
    include_sources: list[str] = Field(default_factory=list)
    exclude_sources: list[str] = Field(default_factory=lambda: list(DEFAULT_EXCLUDED_SOURCES))
    dry_run: bool = False
    force: bool = False
    summarizer: Literal["auto", "extractive", "llm"] = "auto"
    model: str | None = None
    api_base: str | None = None
    local_model: Path | None = None
    lang: str | None = None
    jobs: int = Field(
        0,
        description="Parallelism: worker processes for the extractive summariser, concurrent model calls for "
        "the LLM one. 0 = auto: min(CPUs, 4) processes for extractive, 1 call for the LLM.",
    )
    max_cost: float | None = None
    max_tokens: int | None = None
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS
    cache_path: Path | None = None
    llm_timeout: float = Field(600.0, description="Seconds one model call may take (DISTILL_LLM_TIMEOUT).")
    llm_retries: int = Field(3, description="Retries of a call that failed transiently (DISTILL_LLM_RETRIES).")
    git: bool = Field(True, description="Link the notes a run wrote and commit them to the archive's git "
                      "repository (created on the first run); False for --no-git.")


def build_settings(
    *,
    db: Path | None = None,
    profile: str | None = None,
    out: Path | None = None,
    env: dict[str, str] | None = None,
    **fields: object,
) -> Settings:
    """Resolve paths the way a Hermes user expects and return ``Settings``."""
    env = dict(os.environ if env is None else env)
    home = profile_home(profile, env)
    resolved_db = Path(db).expanduser() if db else home / "state.db"
    resolved_out = Path(out).expanduser() if out else home / "distilled"
    # A hung or rate-limited model server: how long to wait, how often to retry (flag-less knobs).
    for name, key, kind in (("DISTILL_LLM_TIMEOUT", "llm_timeout", float), ("DISTILL_LLM_RETRIES", "llm_retries", int)):
        if env.get(name) and key not in fields:
            try:
                fields[key] = kind(env[name])
            except ValueError:
                raise InputError(f"{name}={env[name]!r}: not a number") from None
    return Settings(home=home, db=resolved_db, out=resolved_out, **fields)  # type: ignore[arg-type]
