"""Values as stored survive the sidecar's encoding: every storage class, odd bytes included."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from pipeline.cold.rows import connect, decode_value, encode_row


def _stored(db: Path) -> list[tuple[object, ...]]:
    con = sqlite3.connect(db)
    con.text_factory = bytes
    try:
        return con.execute("SELECT typeof(v), CAST(v AS BLOB), v FROM t ORDER BY rowid").fetchall()
    finally:
        con.close()


def test_every_storage_class_round_trips_byte_for_byte(tmp_path: Path) -> None:
    src, dst = tmp_path / "src.db", tmp_path / "dst.db"
    for path in (src, dst):
        con = sqlite3.connect(path)
        # No declared type (no affinity): every value keeps the storage class it was stored with, as
        # any Hermes column can hold any class (SQLite does not enforce declared types).
        con.execute("CREATE TABLE t (v)")
        con.commit()
        con.close()
    con = sqlite3.connect(src)
    con.execute("INSERT INTO t VALUES (NULL)")
    con.execute("INSERT INTO t VALUES (?)", ("plain ü 漢字 \x00json:[{}]",))
    con.execute("INSERT INTO t VALUES (CAST(? AS TEXT))", (b"bad \xff\xfe utf-8",))  # invalid UTF-8 as TEXT
    con.execute("INSERT INTO t VALUES (?)", (b"\x00\x01blob",))
    con.execute("INSERT INTO t VALUES (?)", (2**62,))
    con.execute("INSERT INTO t VALUES (?)", (float("inf"),))
    con.execute("INSERT INTO t VALUES (?)", (-0.0,))
    con.execute("INSERT INTO t VALUES (?)", (0.1 + 0.2,))
    con.commit()
    con.close()

    reader = connect(src, write=False)
    lines = [encode_row("t", r) for r in reader.execute("SELECT v FROM t ORDER BY rowid")]
    reader.close()
    assert any('"tx"' in line for line in lines) and any('"b"' in line for line in lines)
    writer = sqlite3.connect(dst)
    for line in lines:
        value, mark = decode_value(json.loads(line)[1])
        writer.execute(f"INSERT INTO t VALUES ({mark})", (value,))
    writer.commit()
    writer.close()
    assert _stored(dst) == _stored(src)


def test_set_key_keeps_every_other_byte_and_matches_edit_frontmatter() -> None:
    from pipeline.notes.frontmatter import edit_frontmatter, read_key, set_key

    notes = [
        "---\ntitle: 'x'\n# a comment the user wrote\ntags:\n- a\n---\n\nbody\n",
        "---\r\ntitle: x\r\ncold:\r\n  sidecar: old.zst\r\nzz: 1\r\n---\r\nbody\r\n",
        "---\nbase: &b {k: 1}\nother: *b\n---\n",  # anchors: the whole-block path decides
    ]
    value = {"sidecar": "n.hermes.jsonl.zst", "rows": {"messages": 3}, "sessions": ["a", "b"]}
    for note in notes:
        new = set_key(note, "cold", value)
        assert new == edit_frontmatter(note, {"cold": value})
        assert read_key(new, "cold") == value
        assert _without_cold(new) == _without_cold(note)  # every byte outside the key is as it was


def _without_cold(text: str) -> str:
    out, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith("cold:"):
            skipping = True
            continue
        if skipping and line.startswith(" "):
            continue
        skipping = False
        out.append(line)
    return "".join(out)
