"""The ``distill`` console script: an unchanged re-run answered from its record, anything else by the app.

Only the standard library is imported before ``record.answer`` has had its say; pydantic, typer
and the pipeline load only when there is work to do.
"""

from __future__ import annotations

import os
import sys

from pipeline.cli.record import answer


def entry() -> None:
    """The ``distill`` command: an unchanged re-run answered here, anything else by ``pipeline.cli.app``."""
    # The user's environment, before any import can add to it: both the lookup here and the record
    # the full run saves are keyed by this one copy.
    env = dict(os.environ)
    code = answer(sys.argv[1:], env)
    if code is not None:
        sys.stdout.flush()
        raise SystemExit(code)
    from pipeline.cli.app import entry as full_run

    full_run(env)
