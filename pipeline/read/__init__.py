"""Layer 1, read: a Hermes ``state.db`` or another agent's transcript → ``Session``.

``hermes.py`` reads ``state.db`` (read-only, beside live writers) and ``decode.py`` turns its
stored columns into messages; one module per foreign format (``claude_code``, ``codex``,
``specstory``, ``aider``, ``hermes_export``, ``hermes_dump``, ``sharegpt``) yields the same
``Session``, and ``detect.py`` picks the reader for a path. Nothing here knows of facts,
summaries, LLMs or notes.
"""
