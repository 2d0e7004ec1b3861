"""chunk: display dedupe and compaction generations, on real Hermes data and on small cases."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pipeline.chunk import assign_generations, chunk_session, logical_transcript, split_by_budget
from pipeline.models import Message, Session
from pipeline.read.hermes import HermesDB

HERMES = Path(__file__).resolve().parent.parent / "fixtures" / "hermes"
REFACTOR, DEPLOY = "20261120_131945_b12aa1", "20261121_101748_56947a"
FIRST_ASK = "let's split cli.py into a commands/ package"


def _read(db: str, sid: str) -> Session:
    with HermesDB(HERMES / db) as h:
        return h.read_session(sid)


def test_in_place_compaction_v31() -> None:
    s = _read("state-v31.db", REFACTOR)
    chunks = chunk_session(s)
    assert [c.generation for c in chunks] == [0, 1, 2]
    # Hermes's own display history of this session has 85 rows: 83 turns + 2 carriers, and
    # carrier 120 also holds a live user turn, so 84 turns reach the summariser.
    assert sum(len(c.messages) for c in chunks) == 84
    texts = [m.content for c in chunks for m in c.messages]
    assert sum(t.startswith(FIRST_ASK) for t in texts) == 1  # protected head copies summarised once
    assert chunks[0].messages[0].content.startswith(FIRST_ASK)
    assert chunks[0].checkpoint and chunks[1].checkpoint and chunks[2].checkpoint is None
    assert "Historical Task Snapshot" in chunks[0].checkpoint
    assert chunks[2].messages[0].content == "what about tokens"
    assert all(not m.is_carrier for c in chunks for m in c.messages)


def test_in_place_compaction_v22_matches_v31() -> None:
    v22 = chunk_session(_read("state-v22.db", REFACTOR))
    assert [c.generation for c in v22] == [0, 1, 2]
    assert sum(len(c.messages) for c in v22) == 84
    texts = [m.content for c in v22 for m in c.messages]
    assert sum(t.startswith(FIRST_ASK) for t in texts) == 1


def test_rewound_rows_are_excluded() -> None:
    s = _read("state-v31.db", REFACTOR)
    texts = [m.content for m in logical_transcript(s.messages)]
    assert "actually also bump the version to 2.0" not in texts  # rows 132/133 were undone (0/0)
    assert "no, leave the version alone. we're done for today" in texts


def test_legacy_chain_segments_are_generations() -> None:
    for db in ("state-v31.db", "state-v22.db"):
        chunks = chunk_session(_read(db, DEPLOY))
        assert sorted({c.generation for c in chunks}) == [0, 1, 2], db
        assert chunks[0].messages[0].content.startswith("the docs deploy workflow has been red")
        counts = Counter(m.content for c in chunks for m in c.messages if m.role == "user")
        assert counts["the docs deploy workflow has been red for 3 days, fix it"] == 1, db


def test_content_hash_is_stable_and_content_addressed() -> None:
    a = chunk_session(_read("state-v31.db", REFACTOR))
    b = chunk_session(_read("state-v31.db", REFACTOR))
    assert [c.content_hash for c in a] == [c.content_hash for c in b]
    assert len({c.content_hash for c in a}) == 3


def _m(i: int, role: str, text: str, **kw: object) -> Message:
    return Message(row_id=i, role=role, content=text, **kw)  # type: ignore[arg-type]


def test_dedupe_prefers_live_copy_and_first_position() -> None:
    msgs = [
        _m(1, "user", "hi", identity="u1", active=False, compacted=True),
        _m(2, "assistant", "old", identity="u2", active=False, compacted=True),
        _m(3, "user", "hi", identity="u1"),
        _m(4, "assistant", "", is_carrier=True, carrier_summary="S", identity="c"),
        _m(5, "user", "next", identity="u3"),
    ]
    out = logical_transcript(msgs)
    assert [(m.row_id, m.content, m.active) for m in out] == [
        (1, "hi", True), (2, "old", False), (4, "", True), (5, "next", True)
    ]
    paired, checkpoints = assign_generations(out)
    assert [(g, m.content) for g, m in paired] == [(0, "hi"), (0, "old"), (1, "next")]
    assert checkpoints == {0: "S"}


def test_budget_split_happens_at_user_turns() -> None:
    msgs = [_m(i, "user" if i % 2 == 0 else "assistant", "x" * 400) for i in range(10)]
    parts = split_by_budget(msgs, budget=250)
    assert len(parts) > 1
    assert all(p[0].role == "user" for p in parts)
    assert sum(len(p) for p in parts) == 10


def test_empty_session_has_no_chunks() -> None:
    assert chunk_session(Session(id="x", source="cli")) == []


def test_estimate_tokens_counts_cjk_and_hangul() -> None:
    from pipeline.chunk import estimate_tokens

    def by_hand(text: str) -> int:
        cjk = sum(1 for ch in text if "\u3000" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af")
        return cjk + (len(text) - cjk) // 4 + 1

    for text in ("", "abcd" * 10, "修复读取器", "한국어 텍스트", "mixed 中文 and 한글 é ü 🚀", "\u2fff\u3000\u9fff\ua000\uabff\uac00\ud7af\ud7b0"):
        assert estimate_tokens(text) == by_hand(text), text
    assert estimate_tokens("x" * 4_000_000) == 1_000_001


def test_the_model_is_not_sent_empty_fences() -> None:
    """An empty fence is how SpecStory shows an applied edit whose code it did not export: facts read it, the
    model gets nothing from it, so it neither reaches the prompt nor counts toward a chunk's budget (one pushed
    a session over the chunk size). One block's closing line and the next block's opening are no empty fence."""
    from pipeline.chunk import message_tokens, model_text

    assert model_text("Let me update `a.ts`:\n\n```\n```\n\nDone.") == "Let me update `a.ts`:\n\nDone."
    assert model_text("x:\n```tsx\n\n```") == "x:"
    two = "```py\nx = 1\n```\n\n```\ny = 2\n```"
    assert model_text(two) == two
    assert model_text("```\nnever closed") == "```\nnever closed"
    plain = Message(role="assistant", content="Let me update `a.ts`:\n\nDone.")
    fenced = Message(role="assistant", content="Let me update `a.ts`:\n\n```\n```\n\nDone.")
    assert message_tokens(fenced) == message_tokens(plain)
