"""The ``distill`` command: ``main.py`` (the console script: an unchanged re-run answered from its
record in ``record.py``, anything else by ``app.py``) and one module per command group.

Nothing heavy is imported here: the fast path must answer without loading pydantic.
"""
