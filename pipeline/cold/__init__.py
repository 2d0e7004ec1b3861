"""Cold storage for Hermes sessions: hot rows in ``state.db`` → a lossless, compressed sidecar
beside each session's note (``archive``, optionally ``prune``) → back again (``pull``).

``rows`` encodes rows exactly as stored and groups sessions into units (a chain with its branches
and sub-agents); ``sidecar`` writes and checks the file; ``verify`` and ``delete`` decide and
perform a prune; ``restore`` puts rows back; ``notes`` finds archives through note frontmatter.
"""

from pipeline.cold.archive import ArchiveReport, Selection, UnitResult, archive
from pipeline.cold.errors import ColdError, SchemaMismatch, SidecarError
from pipeline.cold.restore import PullResult, restore

__all__ = ["ArchiveReport", "ColdError", "PullResult", "SchemaMismatch", "Selection", "SidecarError", "UnitResult",
           "archive", "restore"]
