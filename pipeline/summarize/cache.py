"""Content-addressed cache of validated summaries, in its own SQLite file (never state.db).

A key is ``sha256:`` + the SHA-256 of a canonical JSON document (sorted keys, compact) holding
everything the answer depends on: the stage, the normalised (redacted, truncated) input, the
prompt key (name, version, file hash), the model string and the response schema. Any change to
one of them is a clean miss; identical input is a hit, so re-running costs zero calls and a
session that gained a generation re-summarises only that chunk plus the reduce step.

Only validated objects are stored. The prefix names the algorithm so a later change of hash
cannot collide with old rows.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HASH_PREFIX = "sha256:"


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def cache_key(**parts: Any) -> str:
    return HASH_PREFIX + hashlib.sha256(canonical_json(parts).encode("utf-8")).hexdigest()


def schema_hash(model: type) -> str:
    """A short hash of a pydantic model's JSON schema (what the model is asked to fill)."""
    schema = model.model_json_schema()  # type: ignore[attr-defined]
    return hashlib.sha256(canonical_json(schema).encode("utf-8")).hexdigest()[:16]


# --------------------------------------------------------------------------- migrations


def m001_summaries(db: Any) -> None:
    db["summaries"].create(
        {"key": str, "stage": str, "model": str, "prompt": str, "value": str, "created_at": float},
        pk="key",
    )
    db["summaries"].create_index(["model"])


MIGRATIONS: list[tuple[str, Callable[[Any], None]]] = [("m001_summaries", m001_summaries)]


def migrate(db: Any) -> None:
    """Apply each named migration once, in a transaction, recording it in ``_migrations``."""
    if "_migrations" not in db.table_names():
        db["_migrations"].create({"name": str, "applied_at": float}, pk="name")
    done = {r["name"] for r in db["_migrations"].rows}
    for name, fn in MIGRATIONS:
        if name in done:
            continue
        with db.conn:
            fn(db)
            db["_migrations"].insert({"name": name, "applied_at": time.time()})


class SummaryCache:
    """``get``/``put`` JSON by key. Pass a path, or an open ``sqlite_utils.Database`` (tests)."""

    def __init__(self, path_or_db: Path | str | Any) -> None:
        from sqlite_utils import Database

        if isinstance(path_or_db, str | Path):
            path = Path(path_or_db)
            if path.name == "state.db":
                raise ValueError("the summary cache must not live in Hermes's state.db")
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = Database(path)
            self.db.execute("PRAGMA journal_mode=WAL")
        else:
            self.db = path_or_db
        migrate(self.db)
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> str | None:
        row = self.db.execute("select value from summaries where key = ?", [key]).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return str(row[0])

    def put(self, key: str, value: str, *, stage: str, model: str, prompt: str) -> None:
        with self.db.conn:
            self.db["summaries"].upsert(
                {
                    "key": key,
                    "stage": stage,
                    "model": model,
                    "prompt": prompt,
                    "value": value,
                    "created_at": time.time(),
                },
                pk="key",
            )

    def __len__(self) -> int:
        return self.db["summaries"].count


def default_cache_path(home: Path) -> Path:
    return home / "distill" / "cache.db"


def open_cache(settings: Any) -> SummaryCache:
    """The cache for a run: ``Settings.cache_path`` or ``$HERMES_HOME/distill/cache.db``."""
    return SummaryCache(settings.cache_path or default_cache_path(settings.home))
