"""Notes: ``SessionSummary`` → ``Note`` (``render.py``, jinja2 + frontmatter) → a file on disk
(``store.py``: atomic writes, per-session locks, the index of notes)."""
