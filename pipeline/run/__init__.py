"""Compose the stages for many sessions: ``Settings`` → ``RunReport``.

``steps.py`` holds the per-session steps (prepare → summarise → finish → commit); the execution
strategies sit above it (``pool.py``: worker processes for the extractive summariser,
``window.py``: a window of concurrent LLM sessions) and ``runner.py`` picks one and fills the
report. Lower layers never import this package.
"""
