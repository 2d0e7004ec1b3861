"""Fingerprint everything a cold run wrote, so two runs (a change and its base) can be shown equal.

    .venv/bin/python evals/hash_run.py OUT_A OUT_B      # prints one line per part, exit 1 on a difference
    .venv/bin/python evals/hash_run.py OUT               # prints the digests of one folder

A performance change must not alter what distill writes. Two runs made at different moments differ
only in ``distilled_at:`` (and the commit's dates and the index's stat columns), so each part is
hashed with those taken out:

- every ``.md`` under the folder (notes and project notes), without its ``distilled_at:`` line;
- every ``.distill/evidence/*.json`` and ``.distill/index.json`` / ``fingerprints.json``, as bytes;
- the archive index: every ``notes`` row but ``mtime_ns`` and ``ino`` (the file's stat, a property of
  the moment), the ``vectors`` rows, and the vocabulary of both FTS5 tables (term, documents,
  occurrences, via ``fts5vocab``): what a search can find, independent of how segments were merged;
- the git history: per commit its message, author and the tree's paths with each blob's hash after
  the same ``distilled_at:`` normalisation.

Stdlib only (``git`` on the PATH).
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

_STAMP = re.compile(rb"^distilled_at: .*\n", re.MULTILINE)


def _norm(data: bytes) -> bytes:
    return _STAMP.sub(b"", data)


def _digest(items: list[tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    for name, data in sorted(items):
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return f"{len(items)} items, {h.hexdigest()[:16]}"


def parts(out: Path) -> dict[str, str]:
    result: dict[str, str] = {}
    notes = [p for p in out.rglob("*.md") if ".git" not in p.parts]
    result["notes (.md, distilled_at dropped)"] = _digest(
        [(str(p.relative_to(out)), _norm(p.read_bytes())) for p in notes]
    )
    evidence = sorted((out / ".distill" / "evidence").glob("*.json"))
    result["evidence (.distill/evidence/*.json)"] = _digest([(p.name, p.read_bytes()) for p in evidence])
    for name in ("index.json", "fingerprints.json"):
        p = out / ".distill" / name
        result[f".distill/{name}"] = _digest([(name, p.read_bytes())] if p.exists() else [])
    result.update(_index(out / ".distill" / "archive" / "index.db"))
    result.update(_git(out))
    return result


def _index(db: Path) -> dict[str, str]:
    if not db.exists():
        return {"archive index": "absent"}
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        cols = [r[1] for r in con.execute("PRAGMA table_info(notes)") if r[1] not in ("mtime_ns", "ino")]
        rows = con.execute(f"SELECT {', '.join(cols)} FROM notes ORDER BY path").fetchall()
        out = {"index: notes rows (stat columns dropped)": _digest([(str(r[1]), repr(r).encode()) for r in rows])}
        vectors = con.execute("SELECT key, model, vector FROM vectors ORDER BY key").fetchall()
        out["index: vectors"] = _digest([(str(r[0]), repr(r).encode()) for r in vectors])
        for table in ("notes_fts", "notes_fts_trigram"):
            con.execute(f"CREATE VIRTUAL TABLE temp.v_{table} USING fts5vocab(main, {table}, 'row')")
            vocab = con.execute(f"SELECT term, doc, cnt FROM temp.v_{table} ORDER BY term").fetchall()
            out[f"index: {table} vocabulary"] = _digest([(str(r[0]), repr(r).encode()) for r in vocab])
        return out
    finally:
        con.close()


def _git(out: Path) -> dict[str, str]:
    if not (out / ".git").exists():
        return {"git": "no repository"}

    def git(*args: str) -> bytes:
        return subprocess.run(["git", "-C", str(out), *args], check=True, capture_output=True).stdout

    commits = git("rev-list", "--reverse", "HEAD").split()
    listed = [(c, git("ls-tree", "-r", c.decode()).splitlines()) for c in commits]
    shas = sorted({line.split(b"\t", 1)[0].split()[2] for _, lines in listed for line in lines})
    # One ``cat-file --batch`` for every blob: a process per blob would dominate the check.
    batch = subprocess.run(["git", "-C", str(out), "cat-file", "--batch"], input=b"\n".join(shas) + b"\n",
                           check=True, capture_output=True).stdout
    blobs: dict[bytes, bytes] = {}
    pos = 0
    for sha in shas:
        header_end = batch.index(b"\n", pos)
        size = int(batch[pos:header_end].split()[2])
        blobs[sha] = batch[header_end + 1:header_end + 1 + size]
        pos = header_end + 1 + size + 1
    items: list[tuple[str, bytes]] = []
    for i, (c, lines) in enumerate(listed):
        meta = git("show", "-s", "--format=%an <%ae>%n%B", c.decode())
        tree = []
        for line in lines:
            mode_type_sha, path = line.split(b"\t", 1)
            tree.append(path + b" " + hashlib.sha256(_norm(blobs[mode_type_sha.split()[2]])).digest())
        items.append((f"{i:04d}", meta + b"\n".join(sorted(tree))))
    return {"git: commits (message, author, normalised tree)": _digest(items)}


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 2
    found = [parts(Path(a)) for a in argv]
    same = True
    for key in found[0]:
        values = [f.get(key, "missing") for f in found]
        flag = "" if len(set(values)) == 1 else "  DIFFERENT"
        same &= not flag
        print(f"{key}: {' | '.join(values) if flag else values[0]}{flag}")
    if len(found) == 2:
        print("equal" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
