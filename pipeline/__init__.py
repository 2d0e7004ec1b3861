"""hermes-distill: turn Hermes Agent sessions into durable Markdown knowledge."""

from pipeline.errors import DistillError
from pipeline.models import Chunk, Message, Note, RunReport, Session, SessionSummary

__version__ = "0.1.0"



def register(ctx: object) -> None:
    """Hermes plugin entry for ``hermes plugins doctor <package dir>``; the real one is lazy."""
    from pipeline.hermes_plugin import register as _register

    _register(ctx)


__all__ = [
    "Chunk", "DistillError", "Message", "Note", "RunReport", "Session", "SessionSummary", "__version__", "register",
]
