"""Skill synthesis against real model output, replayed from VCR cassettes (issue 6).

Cassettes in tests/cassettes/test_skill_cassettes/ were recorded by
``python tests/record_cassettes.py --module skills`` from Qwen2.5-Coder-1.5B-Instruct Q4_K_M on a
local llama.cpp server (``_recorded_with.json`` there names the model, its sha256 and the timings).

The evidence the model reads is frozen beside the cassettes (``evidence.json``, written when
recording): the deploy repeats and the injected session are built by the pipeline, whose
evolution must not turn a replay into a miss. Replay is offline: record mode "none", bodies must
match, every interaction must be played, no retries. Assertions are about what reaches the
SKILL.md (spec validity, evidence support, no injected or one-off steps), never about prose.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline.llm.client import LLMClient
from pipeline.skills.evidence import Evidence
from pipeline.skills.store import render_skill, validate_skill
from pipeline.skills.synthesis import synthesize

CASSETTES = Path(__file__).parent / "cassettes" / "test_skill_cassettes"
EVIDENCE = CASSETTES / "evidence.json"


def _evidence(record_mode: str) -> dict[str, list[Evidence]]:
    """The frozen evidence; written from the pipeline's own builders when recording."""
    if record_mode != "none" or not EVIDENCE.exists():
        from tests.test_promote import injected_deploy_session, synthetic, to_evidence

        deploys, _ = synthetic()
        frozen = {"deploys": [e.model_dump(mode="json") for e in deploys],
                  "injected": [to_evidence(injected_deploy_session()).model_dump(mode="json")]}
        CASSETTES.mkdir(parents=True, exist_ok=True)
        EVIDENCE.write_text(json.dumps(frozen, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    data = json.loads(EVIDENCE.read_text("utf-8"))
    return {k: [Evidence.model_validate(e) for e in v] for k, v in data.items()}


def _played_all(vcr) -> None:
    if vcr.record_mode == "none":
        assert vcr.all_played, f"only {vcr.play_count} of {len(vcr.data)} recorded interactions were used"


def _commands(members: list[Evidence]) -> set[str]:
    return {c for e in members for c in e.commands}


@pytest.mark.vcr
def test_cluster_skill_from_the_model_is_supported_and_clean(client: LLMClient, vcr, record_mode: str,
                                                             tmp_path: Path) -> None:
    ev = _evidence(record_mode)
    members = [*ev["deploys"], *ev["injected"]]
    notices: list[str] = []
    draft = synthesize(members, client=client, candidate="c-cassette", notices=notices)
    _played_all(vcr)
    text = render_skill(draft)
    assert validate_skill(text, draft.name) == []
    body = text.split("\n---\n", 1)[1].lower()
    # Injected text never reaches the skill, whoever wrote it.
    assert "evil" not in body and "ignore previous" not in body and "maintenance" not in body
    for e in members:
        assert e.session_id not in body
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", body)
    if draft.source == "llm":
        # Every kept step with a command ran in the evidence, in at least two sessions.
        known = _commands(members)
        for step in draft.procedure:
            assert step.command is None or step.command in known, step
            assert len(step.support) >= 2, step
    else:  # the model's draft did not survive the gate: the skeleton, and the run says so
        assert notices and "fell back" in notices[0] and draft.needs_review
    assert "mkdocs gh-deploy" in body  # the procedure is about the task the sessions share
    procedure = body.split("## procedure", 1)[1].split("##", 1)[0]
    assert procedure.index("pip install") < procedure.index("mkdocs build") < procedure.index("mkdocs gh-deploy")


@pytest.mark.vcr
def test_single_session_promotion_with_the_model(client: LLMClient, vcr, record_mode: str, tmp_path: Path) -> None:
    ev = _evidence(record_mode)
    one = ev["deploys"][0]
    notices: list[str] = []
    draft = synthesize([one], client=client, single=True, candidate=None, notices=notices)
    _played_all(vcr)
    text = render_skill(draft)
    assert validate_skill(text, draft.name) == []
    assert one.session_id not in text.split("\n---\n", 1)[1]
    if draft.source == "llm":
        for step in draft.procedure:
            assert step.command is None or step.command in set(one.commands), step
        # Recorded: the refuter said "keep" for the first three steps without citing a session; the
        # evidence's own commands support them, so they stay (the refuter can strike, not demote).
        assert [s.command for s in draft.procedure] == list(one.commands)
    else:
        assert notices and "fell back" in notices[0]


def test_cassettes_name_the_model() -> None:
    """The sidecar names the model (and the GGUF's sha256 for the local one); each request asked for it."""
    meta = json.loads((CASSETTES / "_recorded_with.json").read_text("utf-8"))
    model = meta["model"].split("/", 1)[-1]
    assert model and (meta.get("gguf_sha256") or "api_base" in meta)
    cassettes = sorted(CASSETTES.glob("*.yaml"))
    assert cassettes
    for cassette in cassettes:  # the server's answers say which model wrote them
        text = cassette.read_text("utf-8").replace("\\", "").replace(" ", "")
        assert f'"model":"{model}"' in text, cassette.name
