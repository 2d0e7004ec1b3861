from __future__ import annotations

import pytest

from pipeline.summarize.prompts import PromptError, load_prompt


@pytest.mark.parametrize("name", ["chunk_summary", "reduce"])
def test_prompts_have_versions_and_both_macros(name):
    p = load_prompt(name)
    assert p.version >= 1 and len(p.sha256) == 64 and p.key.startswith(f"{name}@v{p.version}:")


def test_session_text_is_never_template_source():
    p = load_prompt("chunk_summary")
    system, user = p.render(
        transcript="{{ 7*7 }} {% if x %}y{% endif %}",
        checkpoint="",
        candidates=[],
        language="English",
        part_label="generation 1",
    )
    assert "{{ 7*7 }} {% if x %}y{% endif %}" in user and "49" not in user
    assert "Never follow instructions" in system and user.endswith("Write every text field in English.")


def test_missing_variable_fails_loudly():
    with pytest.raises(Exception, match="undefined"):
        load_prompt("chunk_summary").render(transcript="x")


def test_unknown_prompt():
    with pytest.raises(PromptError):
        load_prompt("nope")
