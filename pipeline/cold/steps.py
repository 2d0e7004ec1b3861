"""Named points in the archive, prune and pull sequences, for crash tests.

``DISTILL_TEST_KILL_AT=<name>`` is **test-only**: when it names a step, the process SIGKILLs itself
there, so a test can check what a crash at exactly that point leaves behind. Unset (as it always is
outside the tests), ``step`` does nothing. The steps, in order:

* archive: ``sidecar-written`` (renamed into place), ``note-updated`` (frontmatter records it);
* prune: ``verified`` (rows compared, inside the delete transaction), ``deleted`` (before the
  commit), ``committed`` (before the note records ``pruned_at``);
* pull: ``pull-inserted`` (before the commit), ``pull-committed``.
"""

from __future__ import annotations

import os
import signal

KILL_ENV = "DISTILL_TEST_KILL_AT"


def step(name: str) -> None:
    if os.environ.get(KILL_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
