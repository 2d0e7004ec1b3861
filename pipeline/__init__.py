"""hermes-distill: turn Hermes Agent sessions into durable Markdown knowledge."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from pipeline.errors import DistillError
    from pipeline.models import Chunk, Message, Note, RunReport, Session, SessionSummary

#: Exported names and their modules. Resolved on first use (PEP 562): ``import pipeline`` alone must
#: not import pydantic, so an unchanged re-run (``pipeline.cli.record``) can answer before loading it.
_LAZY = {
    "DistillError": "pipeline.errors",
    **dict.fromkeys(("Chunk", "Message", "Note", "RunReport", "Session", "SessionSummary"), "pipeline.models"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")


def register(ctx: object) -> None:
    """Hermes plugin entry for ``hermes plugins doctor <package dir>``; the real one is lazy."""
    from pipeline.hermes.plugin import register as _register

    _register(ctx)


__all__ = [
    "Chunk", "DistillError", "Message", "Note", "RunReport", "Session", "SessionSummary", "__version__", "register",
]
