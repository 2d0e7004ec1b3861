from __future__ import annotations

import pytest
from sqlite_utils import Database

from pipeline.summarize.cache import HASH_PREFIX, SummaryCache, cache_key, migrate


def test_migrations_on_blank_db_are_recorded_once():
    db = Database(memory=True)
    migrate(db)
    migrate(db)
    assert [r["name"] for r in db["_migrations"].rows] == ["m001_summaries"]
    assert db["summaries"].columns_dict == {
        "key": str,
        "stage": str,
        "model": str,
        "prompt": str,
        "value": str,
        "created_at": float,
    }


def test_key_is_canonical_and_sensitive():
    a = cache_key(stage="chunk", user="x", model="m", prompt="p@v1", schema="s")
    assert a.startswith(HASH_PREFIX)
    assert a == cache_key(schema="s", prompt="p@v1", model="m", user="x", stage="chunk")
    for change in ({"model": "m2"}, {"prompt": "p@v2"}, {"schema": "s2"}, {"user": "y"}):
        assert (
            cache_key(
                **{"stage": "chunk", "user": "x", "model": "m", "prompt": "p@v1", "schema": "s", **change}
            )
            != a
        )


def test_get_put_and_counts(tmp_path):
    c = SummaryCache(tmp_path / "distill" / "cache.db")
    assert c.get("k") is None and c.misses == 1
    c.put("k", '{"a":1}', stage="chunk", model="m", prompt="p")
    c.put("k", '{"a":2}', stage="chunk", model="m", prompt="p")
    assert c.get("k") == '{"a":2}' and c.hits == 1 and len(c) == 1


def test_refuses_state_db(tmp_path):
    with pytest.raises(ValueError, match=r"state\.db"):
        SummaryCache(tmp_path / "state.db")
