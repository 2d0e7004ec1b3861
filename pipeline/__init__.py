"""hermes-distill: turn Hermes Agent sessions into durable Markdown knowledge."""

from pipeline.errors import DistillError
from pipeline.models import Chunk, Message, Note, RunReport, Session, SessionSummary

__version__ = "0.1.0"

__all__ = ["Chunk", "DistillError", "Message", "Note", "RunReport", "Session", "SessionSummary", "__version__"]
