"""Fixture databases: the committed real-Hermes builds cannot drift, and the hand-made ones load.

The rebuild tests need the Hermes Pythons that wrote them: ``HERMES_PYTHON`` (hermes-agent 0.19.0, as in
.ci/run) or ``.venv-hermes/bin/python`` for v22; ``HERMES_IOT_PYTHON`` or
``.venv-hermes-iot/bin/python`` for v31. Without them those tests skip.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from fixtures.handmade import ROLES, write_handmade_db, write_legacy_db

ROOT = Path(__file__).resolve().parent.parent
DB_DIR = ROOT / "fixtures" / "db"
IGNORED_COLUMNS = {"message_uid", "absorbed_message_uids", "tool_call_uids", "tool_call_uid"}
PYTHONS = {
    "hermes-v22.db": ("HERMES_PYTHON", ROOT / ".venv-hermes/bin/python"),
    "hermes-v31.db": ("HERMES_IOT_PYTHON", ROOT / ".venv-hermes-iot/bin/python"),
}


def _dump(db: Path) -> dict[str, list[tuple[object, ...]]]:
    con = sqlite3.connect(f"file:{db}?immutable=1", uri=True)  # never leave -wal/-shm in fixtures/db
    try:
        out = {}
        for table in ("sessions", "messages", "session_model_usage"):
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})") if r[1] not in IGNORED_COLUMNS]
            out[table] = con.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY 1, 2").fetchall()
        return out
    finally:
        con.close()


@pytest.mark.hermes
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PYTHONS))
def test_fixture_db_matches_its_builder(name: str, tmp_path: Path, hermes_home: Path) -> None:
    var, default = PYTHONS[name]
    python = Path(os.environ[var]) if os.environ.get(var) else default
    if not python.exists():
        pytest.skip(f"no Hermes Python for {name} (set {var})")
    fresh = tmp_path / name
    env = {**os.environ, "HERMES_HOME": str(hermes_home)}
    subprocess.run(
        [str(python), str(ROOT / "fixtures" / "build.py"), "--out", str(fresh)],
        check=True,
        env=env,
        capture_output=True,
    )
    assert _dump(fresh) == _dump(DB_DIR / name), f"{name} drifted; rebuild it (see fixtures/db/MANIFEST.md)"


def test_manifest_names_every_session() -> None:
    names = json.loads((DB_DIR / "sessions.json").read_text(encoding="utf-8"))
    for db in ("hermes-v31.db", "hermes-v22.db"):
        con = sqlite3.connect(f"file:{DB_DIR / db}?immutable=1", uri=True)
        ids = {r[0] for r in con.execute("SELECT id FROM sessions")}
        con.close()
        assert set(names.values()) == ids, db


def test_handmade_db_rows_behave_as_documented(tmp_path: Path) -> None:
    ids = write_handmade_db(tmp_path / "state.db", big_tool_output=False)
    assert set(ids) == set(ROLES)
    con = sqlite3.connect(tmp_path / "state.db")
    # Invalid UTF-8 breaks the default str decoding for that row; a replacing text_factory survives it.
    with pytest.raises(sqlite3.OperationalError, match="Could not decode to UTF-8"):
        con.execute("SELECT content FROM messages WHERE session_id = ?", (ids["corrupt"],)).fetchall()
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    contents = [
        r[0] for r in con.execute("SELECT content FROM messages WHERE session_id = ?", (ids["corrupt"],))
    ]
    assert any("\x00" in c for c in contents)  # Python keeps NUL bytes that SQL length() stops at
    assert any("\ufffd" in c for c in contents)
    assert (
        con.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (ids["empty"],)).fetchone()[0] == 0
    )
    con.close()


def test_legacy_db_has_no_v30_columns(tmp_path: Path) -> None:
    ids = write_legacy_db(tmp_path / "legacy.db")
    con = sqlite3.connect(tmp_path / "legacy.db")
    cols = {r[1] for r in con.execute("PRAGMA table_info(messages)")}
    con.close()
    assert not cols & {"_compressed_summary", "display_order", "message_uid"}
    assert {"plain", "compacted", "legacy_summary", "chain_root", "chain_tip"} == set(ids)
