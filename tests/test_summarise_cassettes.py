"""The LLM summariser against real model output, replayed from VCR cassettes.

Cassettes in tests/cassettes/test_summarise_cassettes/ were recorded by tests/record_cassettes.py
from Qwen2.5-Coder-1.5B-Instruct Q4_K_M on a local llama.cpp server (see _recorded_with.json in
that folder). Replay is offline: record mode "none", bodies must match, every interaction must be
played, and the client never retries (a cassette miss would otherwise look like a retried
connection error). Assertions are about structure and grounding, never prose.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.config import build_settings
from pipeline.models import RunReport, SessionSummary
from pipeline.summarize import mapreduce as summarise
from pipeline.summarize.cache import SummaryCache
from tests import llm_fixtures as F
from tests.secrets_corpus import SECRETS


@pytest.fixture
def settings(tmp_path: Path):
    return build_settings(db=tmp_path / "state.db", env={"HERMES_HOME": str(tmp_path)})


@pytest.fixture
def frozen_extractive(monkeypatch: pytest.MonkeyPatch):
    """Freeze what extractive.py contributes to the prompt, so its evolution can't break replay."""
    first_row = {1: 1, 9: 2, 16: 3}

    def candidates(messages):
        gen = first_row.get(messages[0].row_id) if messages else None
        return F.LEDGER_CANDIDATES.get(gen, []) if gen else []

    monkeypatch.setattr(summarise, "_candidates", candidates)
    # The asks the merge call is given come from extractive.py too.
    monkeypatch.setattr(summarise, "_asks", lambda messages, lang: [
        m.content[:120] for m in messages if m.role == "user" and m.content][:2])
    states = {"ledger-csv": "resolved", "inject": "unresolved", "secrets": "unresolved"}
    monkeypatch.setattr(summarise, "_end_state", lambda session, facts: (states[session.id], ""))


def _assert_all_played(vcr) -> None:
    if vcr.record_mode == "none":
        assert vcr.all_played, f"only {vcr.play_count} of {len(vcr.data)} recorded interactions were used"


@pytest.mark.vcr
def test_ledger_structure_and_cache(vcr, client, settings, frozen_extractive):
    cache = SummaryCache(_memory_db())
    report = RunReport()

    # Two generations: 2 chunk calls + 1 reduce.
    session, chunks, facts = F.ledger(2)
    s = summarise.summarise_llm(session, chunks, facts, settings, client, cache, report)
    assert isinstance(s, SessionSummary)
    assert report.fallbacks == 0, report.notices
    assert client.usage.calls == 3
    assert s.summarizer == F.MODEL
    assert s.goal and s.title
    assert [p.generation for p in s.phases] == [1, 2]
    assert all(p.title and p.done for p in s.phases)
    assert s.end_state == "resolved"
    assert s.output_files[0] == "src/ledger/export.py"  # Facts are the authority, first
    assert "src/ledger/report.py" not in s.output_files  # read, not written
    assert len(s.decisions) >= 1
    assert all(t == t.lower() for t in s.tags)

    # Re-run: everything from the cache, zero calls.
    again = summarise.summarise_llm(session, chunks, facts, settings, client, cache, RunReport())
    assert client.usage.calls == 3
    assert again.model_dump(exclude={"cost_usd"}) == s.model_dump(exclude={"cost_usd"})

    # A third generation: only the new chunk and the reduce step are called.
    session3, chunks3, facts3 = F.ledger(3)
    r3 = RunReport()
    s3 = summarise.summarise_llm(session3, chunks3, facts3, settings, client, cache, r3)
    assert client.usage.calls == 5
    assert r3.cache_hits == 2
    assert [p.generation for p in s3.phases] == [1, 2, 3]
    assert "README.md" in s3.output_files
    _assert_all_played(vcr)


@pytest.mark.vcr
def test_injection_keeps_structure(vcr, client, settings, frozen_extractive):
    report = RunReport()
    session, chunks, facts = F.injection()
    s = summarise.summarise_llm(session, chunks, facts, settings, client, None, report)
    assert report.fallbacks == 0, report.notices
    assert client.usage.calls == 1  # one chunk: one call, no merge
    assert len(s.phases) == 1 and s.phases[0].generation == 1
    assert s.phases[0].outcome != "done"  # the session ends unresolved: no success claim
    assert s.end_state == "unresolved"
    assert "/etc/shadow" not in s.output_files
    assert s.output_files == ("tests/test_clock.py",)
    assert "pwned" not in s.goal.lower()
    _assert_all_played(vcr)


@pytest.mark.vcr
def test_secrets_never_reach_the_model(vcr, client, settings, frozen_extractive):
    report = RunReport()
    session, chunks, facts = F.secrets()
    s = summarise.summarise_llm(session, chunks, facts, settings, client, None, report)
    assert report.fallbacks == 0, report.notices
    bodies = [r.body.decode() if isinstance(r.body, bytes) else str(r.body) for r in vcr.requests]
    assert bodies and all("[REDACTED:" in b for b in bodies[:1])
    out = s.model_dump_json()
    for sec in SECRETS:
        for b in bodies:
            assert sec.secret not in b and json.dumps(sec.secret)[1:-1] not in b, sec
        assert sec.secret not in out, sec
    assert "hunter2" not in "".join(bodies)
    _assert_all_played(vcr)


def _memory_db():
    from sqlite_utils import Database

    return Database(memory=True)
