"""Crash safety as a repeatable run: SIGKILLs at random points of every command that writes.

The full run is ``python -m evals.crash_run`` (50 kills, prints the table); this test runs ten of
them (the process group and the main process alone, over every scenario) so CI stays in budget.
Each kill must leave no orphan process, no torn file, no stale lock (the rerun finishes), no stray
temp file after the rerun, and files equal to an uninterrupted run's apart from timestamps.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find orphans")
def test_ten_random_sigkills_leave_nothing_wrong(tmp_path: Path) -> None:
    from evals.crash_run import crash_run, table

    lines: list[str] = []
    results = crash_run(10, seed=16, copies=3, root=tmp_path, report=lines.append)
    assert {k.mode for k in results} == {"group", "main"}
    assert len({k.scenario for k in results}) == 8
    bad = [k for k in results if not k.ok]
    assert not bad, "\n".join(lines) + "\n" + table(results)


class _Killed(BaseException):
    """What a SIGKILL looks like from inside: nothing after this line of the run happens."""


def test_a_kill_between_the_sidecar_and_the_note_leaves_the_note_stale(tmp_path: Path) -> None:
    """The note's content hash is what lets the next run skip a session, so the note is the last
    thing a session's commit writes: killed just before it, the re-run redoes the session and the
    evidence sidecar can never be left older than its note (what a random kill once found)."""
    from datetime import UTC, datetime

    from pipeline.config import Settings
    from pipeline.notes.store import NoteStore
    from pipeline.read.hermes import HermesDB
    from pipeline.run.steps import commit, draft_note, extractive
    from pipeline.skills.evidence import Evidence, load_sidecar

    db = Path(__file__).resolve().parent.parent / "fixtures" / "hermes" / "state-v31.db"
    out = tmp_path / "out"
    with HermesDB(db) as h:
        session = h.read_session("20261121_101748_56947a")
    settings = Settings(home=tmp_path, db=db, out=out)

    class KilledOnWrite(NoteStore):
        def write(self, note, **kw):  # type: ignore[no-untyped-def, override]
            raise _Killed

    def draft(store: NoteStore):  # type: ignore[no-untyped-def]
        return draft_note(session, chunk_tokens=settings.chunk_tokens, summarise=extractive(),
                          summariser_id="extractive", distilled_at=datetime.now(UTC), link_for=store.link_for,
                          is_current=lambda digest: store.unchanged(session.id, digest))

    killed = KilledOnWrite(out)
    with pytest.raises(_Killed):
        commit(draft(killed), settings=settings, store=killed)
    assert load_sidecar(out, session.id) is not None  # the sidecar landed, the note did not
    with NoteStore(out) as store:
        again = draft(store)
        assert again.status == "note"  # so the re-run does the session again, sidecar included
        assert commit(again, settings=settings, store=store).status == "written"
    assert again.sidecar is not None and load_sidecar(out, session.id) == Evidence.model_validate_json(again.sidecar)
