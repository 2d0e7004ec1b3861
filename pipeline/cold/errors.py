"""Typed errors of cold storage. The CLI turns each into one ``Error: ...`` line (exit 2)."""

from __future__ import annotations

from pipeline.errors import InputError


class ColdError(InputError):
    """Archive, prune or pull cannot go on; nothing was written for the input named."""


class SidecarError(ColdError):
    """A sidecar is missing, truncated, corrupted or does not match its note.

    ``reason`` is a short machine-readable word (``missing``, ``checksum``, ``truncated``,
    ``corrupt``, ``counts``, ``format``) so prune can report *why* it refused a session.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class SchemaMismatch(ColdError):
    """The target database cannot hold the archived rows without losing columns or tables."""
