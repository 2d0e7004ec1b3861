"""Where tests find third-party transcripts: the shared corpus beside the checkout, never a copy.

``../shared/agent-transcripts/`` (CI lays ``shared/`` beside the clone) or ``$DISTILL_SHARED``.
Transcripts from public repositories stay out of this repository; a test that needs them skips with
the reason when the corpus is absent, and fails under CI (``CI=true``), where it must be present.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("DISTILL_SHARED") or ROOT.parent / "shared")
CORPUS = SHARED / "agent-transcripts"
#: Hermes's own ``sessions export`` sample, from the project's shared folder.
HERMES_EXPORT = SHARED / "hermes" / "exports" / "all.jsonl"


def require_corpus() -> None:
    """Skip (fail under CI) when the shared corpus is not beside the checkout."""
    if (CORPUS / "MANIFEST.tsv").is_file() and HERMES_EXPORT.is_file():
        return
    why = f"the shared transcript corpus is not at {CORPUS} (set DISTILL_SHARED to the folder holding it)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture
def corpus() -> Path:
    require_corpus()
    return CORPUS


#: The transcripts the reader tests were written against, as ``(folder/name, corpus path)``: the
#: layout a user's export folder would have, mixing every format.
TREE = {
    "aider/ai-text-detector-gh-pages-debug.md": "aider-md/ai-text-detector-gh-pages-debug.md",
    "aider/mozgoslav-rag-hotkey-ru.md": "aider-md/mozgoslav-rag-hotkey-ru.md",
    "claude-code/agentic-wallet-grant-skill-short.jsonl": "claude-code-jsonl/agentic-wallet-grant-skill-short.jsonl",
    "claude-code/cloak-squads-grant-setup.jsonl": "claude-code-jsonl/cloak-squads-grant-setup.jsonl",
    "claude-code/session-logs-auto-worklog-skill-zh.jsonl": "claude-code-jsonl/session-logs-auto-worklog-skill-zh.jsonl",
    "claude-code/subagent-claude-model-switch-webfetch.jsonl": "claude-code-jsonl/subagent-claude-model-switch-webfetch.jsonl",
    "codex/fundwise-grant-skill.jsonl": "codex-rollout/fundwise-grant-skill.jsonl",
    "codex/privacy-x402-init-agents-md.jsonl": "codex-rollout/privacy-x402-init-agents-md.jsonl",
    "hermes-dump/hermes-image-gen-ui-research-zh.json": "hermes-request-dump/hermes-image-gen-ui-research-zh.json",
    "specstory/agente-bsc-rag-resolve-pt.md": "specstory/agente-bsc-rag-resolve-pt.md",
    "specstory/bing-wallpaper-copilot-java21-upgrade.md": "specstory/bing-wallpaper-copilot-java21-upgrade.md",
    "specstory/download-manager-analysis-doc-writing-zh.md": "specstory/download-manager-analysis-doc-writing-zh.md",
    "specstory/forwarder-system-freight-planning-zh.md": "specstory/forwarder-system-freight-planning-zh.md",
    "specstory/health-backend-maven-missing-module-zh.md": "specstory/health-backend-maven-missing-module-zh.md",
    "specstory/shadcn-admin-feature-help-zh.md": "specstory/shadcn-admin-feature-help-zh.md",
    "specstory/skillz-combine-design-docs.md": "specstory/skillz-combine-design-docs.md",
}


def corpus_file(rel: str) -> Path:
    """A transcript by its ``TREE`` name (``claude-code/x.jsonl``) or corpus path; skips when absent."""
    require_corpus()
    if rel == "hermes-export/all.jsonl":
        return HERMES_EXPORT
    return CORPUS / TREE.get(rel, rel)


def build_tree(root: Path) -> Path:
    """``root`` laid out as ``TREE`` (plus Hermes's export and a README), as symlinks into the corpus."""
    require_corpus()
    for rel, src in {**TREE, "hermes-export/all.jsonl": None}.items():
        link = root / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(HERMES_EXPORT if src is None else CORPUS / src)
    (root / "README.md").write_text("# transcripts\n\nNot a session: the directory walk skips it.\n")
    return root
