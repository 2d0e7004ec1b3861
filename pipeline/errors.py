"""Typed errors. The library raises these; only the CLI turns them into one line and an exit code.

Each message names the input and the next thing to do, e.g. "pass --db PATH or set HERMES_HOME".
"""

from __future__ import annotations


class DistillError(Exception):
    """Base class. ``exit_code`` is what the CLI returns for it."""

    exit_code = 2


class InputError(DistillError):
    """Bad usage or unreadable input: nothing is written (exit 2)."""


class NotAHermesDatabase(InputError):
    """The file is not SQLite, or has no Hermes ``sessions``/``messages`` tables."""


class SessionNotFound(InputError):
    """No session has that id or exact title."""


class OutputError(DistillError):
    """The output directory cannot be written."""


class SessionError(DistillError):
    """One session failed; the run reports it and goes on (exit 1 at the end)."""

    exit_code = 1

    def __init__(self, session_id: str, message: str) -> None:
        super().__init__(f"session {session_id}: {message}")
        self.session_id = session_id


class SummariserError(SessionError):
    """The summariser could not produce a valid summary for a session."""
