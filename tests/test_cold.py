"""Cold storage, as a user runs it: the installed ``distill archive`` / ``distill pull`` in a subprocess
with a shell's environment, on copies of real Hermes databases, beside real Hermes processes.

The invariant every test comes back to: each archived session is, at every moment, in ``state.db``
with exactly its original rows, or in a sidecar that verifies and holds exactly those rows; and a
pull puts back every row and column of every table.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.cold import sidecar as sc
from pipeline.cold.notes import cold_of
from pipeline.cold.rows import connect, encode_row, read_rows, read_schema
from tests.corpus import corpus_file
from tests.shell import run_distill

ROOT = Path(__file__).resolve().parent.parent
ALL_SOURCES = ["--source", "cli", "--source", "telegram", "--source", "cron", "--source", "tool",
               "--source", "subagent"]
DBS = {
    "fixture-v22": ROOT / "fixtures/db/hermes-v22.db",
    "fixture-v31": ROOT / "fixtures/db/hermes-v31.db",
    "reference-v22": ROOT / "fixtures/hermes/state-v22.db",
    "reference-v31": ROOT / "fixtures/hermes/state-v31.db",
}
#: Derived (FTS index pages) or Hermes's own bookkeeping: compared through queries, not pages.
DERIVED = ("messages_fts", "sqlite_")


def hermes_python(version: str) -> str:
    env, venv = ("HERMES_IOT_PYTHON", ".venv-hermes-iot") if version == "v31" else ("HERMES_PYTHON", ".venv-hermes")
    for c in (os.environ.get(env, ""), str(ROOT / venv / "bin/python")):
        if c and Path(c).exists():
            return c
    if os.environ.get("DISTILL_REQUIRE_HERMES"):
        pytest.fail(f"{env} is required here")
    pytest.skip(f"no Hermes Python for {version}: set {env}")


def home_with(tmp_path: Path, name: str) -> Path:
    """A Hermes home holding a copy of the named database as its state.db."""
    home = tmp_path / "hermes"
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DBS[name], home / "state.db")
    return home


def distill(*args: str, home: Path, env: dict[str, str] | None = None, ok: bool = True
            ) -> subprocess.CompletedProcess[str]:
    full = {"HERMES_HOME": str(home), **(env or {})}
    proc = run_distill(*args, home=home.parent, env=full)
    if ok:
        assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc


def archive_json(*args: str, home: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = distill("archive", *args, "--summarizer", "extractive", "--json", home=home, env=env)
    return json.loads(proc.stdout)


def table_rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every non-derived table, as stored (TEXT as bytes), in a stable order."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.text_factory = bytes
    try:
        names = [r[0].decode() for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        out = {}
        for name in names:
            if name.startswith(DERIVED):
                continue
            out[name] = sorted(con.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr)
        return out
    finally:
        con.close()


def fts_consistent(db: Path) -> None:
    con = sqlite3.connect(db)
    try:
        for (name,) in con.execute("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%fts5%'"):
            con.execute(f"INSERT INTO {name}({name}) VALUES('integrity-check')")
    finally:
        con.close()


def hermes_reads(db: Path, ids: list[str], version: str, tmp: Path, queries: list[str]) -> dict[str, Any]:
    """What Hermes's own SessionDB reads (on a copy: opening one may migrate)."""
    copy = tmp / f"read-{time.monotonic_ns()}.db"
    shutil.copyfile(db, copy)
    home = tmp / f"home-{time.monotonic_ns()}"
    home.mkdir()
    args = [hermes_python(version), str(ROOT / "tests/hermes_reads.py"), "--db", str(copy), *ids]
    for q in queries:
        args += ["--query", q]
    proc = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "HERMES_HOME": str(home)},
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def unit_results(report: dict[str, Any], *status: str) -> list[dict[str, Any]]:
    return [r for r in report["results"] if r["status"] in status]


# --------------------------------------------------------------------------- round trip


@pytest.mark.slow
@pytest.mark.parametrize("name", list(DBS))
def test_archive_prune_pull_gives_back_every_row(tmp_path: Path, name: str) -> None:
    version = name[-3:]
    home = home_with(tmp_path, name)
    db = home / "state.db"
    original = tmp_path / "original.db"
    shutil.copyfile(db, original)
    before = table_rows(original)

    report = archive_json("--all", *ALL_SOURCES, "--prune", "--via", "sqlite", home=home)
    pruned = unit_results(report, "pruned")
    refused = {r["root"]: r["reason"] for r in unit_results(report, "refused")}
    assert pruned, report
    assert all("not ended" in why or "no note" in why or "pinned" in why for why in refused.values()), refused
    gone = [sid for r in pruned for sid in r["sessions"]]
    # The lineages went as units: a compression chain, a branch and a sub-agent with their parent.
    assert any(len(r["sessions"]) >= 3 for r in pruned)
    left = table_rows(db)
    assert not {r[0].decode() for r in left["sessions"]} & set(gone)
    assert len(left["messages"]) < len(before["messages"])
    fts_consistent(db)

    for r in pruned:  # by id of the lineage's last member: any member finds its unit
        distill("pull", r["sessions"][-1], home=home)
    assert table_rows(db) == before
    fts_consistent(db)
    queries = ["pytest", "deploy", "importer"]
    assert hermes_reads(db, gone, version, tmp_path, queries) == hermes_reads(original, gone, version, tmp_path, queries)

    # Into a new file: the same rows for the restored sessions, a database Hermes opens and searches.
    fresh = tmp_path / "fresh.db"
    for r in pruned:
        distill("pull", r["root"], "--into-db", str(fresh), home=home)
    con = connect(fresh, write=False)
    try:
        schema = read_schema(con, fresh)
        got = read_rows(con, schema, gone)
    finally:
        con.close()
    con = connect(original, write=False)
    try:
        want = read_rows(con, read_schema(con, original), gone)
    finally:
        con.close()
    assert {t: [encode_row(t, r) for r in rows] for t, rows in got.items()} == \
        {t: [encode_row(t, r) for r in rows] for t, rows in want.items()}
    fts_consistent(fresh)
    new_reads = hermes_reads(fresh, gone, version, tmp_path, queries)
    old_reads = hermes_reads(original, gone, version, tmp_path, queries)
    assert new_reads["sessions"] == old_reads["sessions"]
    for q in queries:
        assert set(new_reads["search"][q]) == set(old_reads["search"][q]) & set(gone)


def test_a_lineage_is_one_unit_and_reset_children_are_not(tmp_path: Path) -> None:
    ids = json.loads((ROOT / "fixtures/db/sessions.json").read_text())
    home = home_with(tmp_path, "fixture-v31")
    report = archive_json(ids["chain_mid"], ids["subagent"], ids["reset_child"], "--dry-run", *ALL_SOURCES,
                          home=home)
    units = {r["root"]: r["sessions"] for r in report["results"]}
    assert units[ids["chain_root"]] == [ids["chain_root"], ids["chain_mid"], ids["chain_tip"]]
    assert units[ids["cli_tools"]] == [ids["cli_tools"], ids["subagent"], ids["branch"]]
    assert units[ids["reset_child"]] == [ids["reset_child"]]
    assert not (home.parent / "hermes" / "distilled").exists()  # a dry run writes nothing


def test_without_prune_the_database_is_never_written(tmp_path: Path) -> None:
    home = home_with(tmp_path, "fixture-v31")
    db = home / "state.db"
    stamp = (db.stat().st_mtime_ns, db.read_bytes())
    report = archive_json("--all", home=home)
    assert unit_results(report, "archived")
    assert (db.stat().st_mtime_ns, db.read_bytes()) == stamp
    again = archive_json("--all", home=home)  # unchanged rows: sidecars are not rewritten
    assert not unit_results(again, "archived") and unit_results(again, "unchanged")


# --------------------------------------------------------------------------- through Hermes itself


@pytest.mark.slow
def test_prune_through_the_hermes_command(tmp_path: Path) -> None:
    hermes = Path(hermes_python("v22")).with_name("hermes")
    home = home_with(tmp_path, "fixture-v22")
    original = tmp_path / "original.db"
    shutil.copyfile(home / "state.db", original)
    ids = json.loads((ROOT / "fixtures/db/sessions.json").read_text())
    env = {"PATH": f"{hermes.parent}:{os.environ['PATH']}"}
    report = archive_json(ids["cli_tools"], ids["chinese"], "--prune", home=home, env=env)
    assert report["via"] == "hermes"
    assert len(unit_results(report, "pruned")) == 2, report
    left = {r[0].decode() for r in table_rows(home / "state.db")["sessions"]}
    assert not left & {ids["cli_tools"], ids["subagent"], ids["branch"], ids["chinese"]}
    fts_consistent(home / "state.db")
    listed = subprocess.run([str(hermes), "sessions", "list", "--limit", "100"], capture_output=True, text=True,
                            env={**os.environ, "HERMES_HOME": str(home), "COLUMNS": "200"}, timeout=120, check=True)
    assert ids["cli_tools"] not in listed.stdout and ids["chinese"] not in listed.stdout
    distill("pull", ids["branch"], home=home, env=env)
    distill("pull", ids["chinese"], home=home, env=env)
    assert table_rows(home / "state.db") == table_rows(original)
    # Hermes's own listing sees them again (run on a copy: a Hermes CLI may migrate its database).
    copy = tmp_path / "list" / "state.db"
    copy.parent.mkdir()
    shutil.copyfile(home / "state.db", copy)
    listed = subprocess.run([str(hermes), "sessions", "list", "--limit", "100"], capture_output=True, text=True,
                            env={**os.environ, "HERMES_HOME": str(copy.parent), "COLUMNS": "200"}, timeout=120,
                            check=True)
    assert ids["cli_tools"] in listed.stdout and ids["chinese"] in listed.stdout


# --------------------------------------------------------------------------- guards and concurrency


def _lock(db: Path, sid: str, tmp: Path, hold: bool = True) -> None:
    """Take (or release) Hermes's compression lock on ``sid`` through the real SessionDB."""
    code = (
        "import sys, pathlib; from hermes_state import SessionDB; "
        f"db = SessionDB(db_path=pathlib.Path({str(db)!r})); "
        + (f"assert db.try_acquire_compression_lock({sid!r}, 'pid=999999 compressor', ttl_seconds=600); "
           if hold else f"db.release_compression_lock({sid!r}, 'pid=999999 compressor'); ")
        + "db.close()"
    )
    home = tmp / "lock-home"
    home.mkdir(exist_ok=True)
    subprocess.run([hermes_python("v22"), "-c", code], check=True, env={**os.environ, "HERMES_HOME": str(home)},
                   timeout=60)


@pytest.mark.slow
def test_prune_refuses_pinned_live_and_compacting_sessions(tmp_path: Path) -> None:
    ids = json.loads((ROOT / "fixtures/db/sessions.json").read_text())
    home = home_with(tmp_path, "fixture-v22")
    db = home / "state.db"
    _lock(db, ids["chinese"], tmp_path)
    report = archive_json("--all", *ALL_SOURCES, "--prune", "--via", "sqlite", home=home)
    refused = {r["root"]: r["reason"] for r in unit_results(report, "refused")}
    assert "being compacted" in refused[ids["chinese"]]
    assert "compression_locks" in refused[ids["chinese"]]
    assert "not ended" in refused[ids["open"]]
    assert ids["chinese"] in {r[0].decode() for r in table_rows(db)["sessions"]}
    _lock(db, ids["chinese"], tmp_path, hold=False)
    again = archive_json(ids["chinese"], "--prune", "--via", "sqlite", home=home)
    assert unit_results(again, "pruned")

    ref = home_with(tmp_path / "ref", "reference-v31")  # S11 of the reference db is pinned
    con = sqlite3.connect(ref / "state.db")
    pinned = con.execute("SELECT id FROM sessions WHERE pinned = 1").fetchone()[0]
    con.close()
    report = archive_json(pinned, "--prune", "--via", "sqlite", *ALL_SOURCES, home=ref)
    assert "pinned" in unit_results(report, "refused")[0]["reason"]
    recent = archive_json("--all", "--prune", "--idle", "400d", "--via", "sqlite", home=ref)
    assert not unit_results(recent, "pruned")
    assert all("within the --idle" in r["reason"] or "not ended" in r["reason"]
               for r in unit_results(recent, "refused"))


@pytest.mark.slow
def test_prune_beside_a_live_hermes_writer_that_compacts(tmp_path: Path) -> None:
    """A real SessionDB appends and compacts one session while archive --prune deletes the others."""
    home = home_with(tmp_path, "fixture-v22")
    db = home / "state.db"
    original = tmp_path / "original.db"
    shutil.copyfile(db, original)
    live = "20261203_120000_live01"
    writer_home = tmp_path / "writer-home"
    writer_home.mkdir()
    writer = subprocess.Popen(
        [hermes_python("v22"), str(ROOT / "tests/hermes_writer.py"), "--db", str(db), "--session", live,
         "--seconds", "6", "--pause", "0.005", "--compact-at", "0.3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HERMES_HOME": str(writer_home)})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
                if con.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (live,)).fetchone()[0] > 8:
                    break
            time.sleep(0.05)
        report = archive_json("--all", *ALL_SOURCES, "--prune", "--via", "sqlite", home=home)
        running = writer.poll() is None
        stdout, stderr = writer.communicate(timeout=120)
    finally:
        if writer.poll() is None:
            writer.kill()
    assert writer.returncode == 0, stderr
    assert running, "the writer finished before the prune did: nothing ran concurrently"
    written = json.loads(stdout.splitlines()[-1])
    assert written["compactions"] == 1
    refused = {r["root"]: r["reason"] for r in unit_results(report, "refused")}
    assert "not ended" in refused[live] or "within the --idle" in refused[live]
    pruned = [sid for r in unit_results(report, "pruned") for sid in r["sessions"]]
    assert len(pruned) >= 10
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = con.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (live,)).fetchone()[0]
    con.close()
    # 0.19.0's compaction inserts head copy + carrier + one turn's tail copies (6 rows).
    assert rows == written["appended"] + 6
    for r in unit_results(report, "pruned"):
        distill("pull", r["root"], home=home)
    now = table_rows(db)
    then = table_rows(original)
    for table, got in now.items():
        if table in ("sessions", "messages", "sqlite_sequence", "session_model_usage"):
            continue
        assert got == then[table], table
    assert [r for r in now["sessions"] if r[0].decode() != live] == then["sessions"]
    assert [r for r in now["messages"] if r[1].decode() != live] == then["messages"]
    fts_consistent(db)


# --------------------------------------------------------------------------- crashes


def _invariant(original: Path, db: Path, notes: Path, units: list[list[str]], *, swept: bool = True) -> None:
    """Every session is in the db with its original rows, or in a verifying sidecar with them.

    ``swept=False`` right after a SIGKILL: a write it interrupted leaves its temp file, by necessity;
    the next run removes it, which the check after that run (``swept=True``) proves."""
    con = connect(original, write=False)
    schema = read_schema(con, original)
    ocon = connect(db, write=False)
    dschema = read_schema(ocon, db)
    try:
        for unit in units:
            want = read_rows(con, schema, unit)
            got = read_rows(ocon, dschema, unit)
            here = {r[0].decode() for r in got["sessions"]}
            if here == set(unit):
                for t in want:
                    assert [encode_row(t, r) for r in got[t]] == [encode_row(t, r) for r in want[t]], (unit, t)
                continue
            sidecars = [p for p in notes.rglob("*.hermes.jsonl.zst")
                        if sc.load(p).sessions == unit]
            assert sidecars, f"{unit}: in neither the database nor a sidecar"
            note = sidecars[0].with_name(sidecars[0].name.removesuffix(".hermes.jsonl.zst") + ".md")
            side = sc.load(sidecars[0], cold_of(note))
            for t in want:
                assert side.lines.get(t, []) == [encode_row(t, r) for r in want[t]], (unit, t)
            # what is still in the db of a partly pruned unit is whole sessions, unchanged
            for t, rows in got.items():
                assert {encode_row(t, r) for r in rows} <= {encode_row(t, r) for r in want[t]}
    finally:
        con.close()
        ocon.close()
    if swept:
        assert not list(notes.rglob("*.tmp")), "a temp file was left behind"


KILL_STEPS = ["sidecar-written", "note-updated", "verified", "deleted", "committed"]


@pytest.mark.slow
@pytest.mark.parametrize("step", KILL_STEPS)
def test_sigkill_at_each_step_leaves_every_session_somewhere(tmp_path: Path, step: str) -> None:
    home = home_with(tmp_path, "fixture-v31")
    db, notes = home / "state.db", home / "distilled"
    original = tmp_path / "original.db"
    shutil.copyfile(db, original)
    plan = archive_json("--all", *ALL_SOURCES, "--prune", "--dry-run", home=home)
    units = [r["sessions"] for r in unit_results(plan, "would-prune", "would-archive")]
    proc = distill("archive", "--all", *ALL_SOURCES, "--prune", "--via", "sqlite", "--summarizer", "extractive",
                   home=home, env={"DISTILL_TEST_KILL_AT": step}, ok=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    _invariant(original, db, notes, units)
    # The next run finishes the job, and every lineage comes back whole.
    report = archive_json("--all", *ALL_SOURCES, "--prune", "--via", "sqlite", home=home)
    assert not [r for r in unit_results(report, "refused") if "sidecar" in r["reason"]], report
    _invariant(original, db, notes, units)
    for unit in units:
        distill("pull", unit[0], home=home)
    assert table_rows(db) == table_rows(original)


@pytest.mark.slow
@pytest.mark.parametrize("step", ["pull-inserted", "pull-committed"])
def test_sigkill_during_pull(tmp_path: Path, step: str) -> None:
    home = home_with(tmp_path, "fixture-v22")
    db = home / "state.db"
    original = tmp_path / "original.db"
    shutil.copyfile(db, original)
    report = archive_json("--all", "--prune", "--via", "sqlite", home=home)
    unit = unit_results(report, "pruned")[0]["sessions"]
    proc = distill("pull", unit[0], home=home, env={"DISTILL_TEST_KILL_AT": step}, ok=False)
    assert proc.returncode == -signal.SIGKILL
    here = {r[0].decode() for r in table_rows(db)["sessions"]}
    assert here >= set(unit) if step == "pull-committed" else not here & set(unit)
    distill("pull", unit[0], home=home)  # finishes, or finds it already there
    fresh = tmp_path / "new.db"
    proc = distill("pull", unit[0], "--into-db", str(fresh), home=home, env={"DISTILL_TEST_KILL_AT": "pull-inserted"},
                   ok=False)
    assert proc.returncode == -signal.SIGKILL
    assert not fresh.exists()  # a new file appears whole or not at all
    distill("pull", unit[0], "--into-db", str(fresh), home=home)
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.slow
def test_sigkill_from_outside_when_sidecars_appear(tmp_path: Path) -> None:
    """No hook: kill the process as soon as the filesystem shows it has started writing sidecars."""
    home = home_with(tmp_path, "reference-v31")
    db, notes = home / "state.db", home / "distilled"
    original = tmp_path / "original.db"
    shutil.copyfile(db, original)
    distill("--all", "--db", str(db), "--summarizer", "extractive", *ALL_SOURCES, home=home)  # notes first
    plan = archive_json("--all", *ALL_SOURCES, "--prune", "--dry-run", home=home)
    units = [r["sessions"] for r in unit_results(plan, "would-prune", "would-archive")]
    from tests.shell import DISTILL, user_env

    for wait_for in (1, 4):
        proc = subprocess.Popen([str(DISTILL), "archive", "--all", *ALL_SOURCES, "--prune", "--via", "sqlite"],
                                env=user_env(home.parent, HERMES_HOME=str(home)), cwd=home.parent,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if len(list(notes.rglob("*.hermes.jsonl.zst"))) >= wait_for:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.001)
        proc.wait(timeout=60)
        _invariant(original, db, notes, units, swept=False)
    archive_json("--all", *ALL_SOURCES, "--prune", "--via", "sqlite", home=home)
    _invariant(original, db, notes, units)


# --------------------------------------------------------------------------- damaged sidecars


@pytest.mark.slow
def test_damaged_sidecars_refuse_prune_and_pull_says_what_is_wrong(tmp_path: Path) -> None:
    ids = json.loads((ROOT / "fixtures/db/sessions.json").read_text())
    home = home_with(tmp_path, "fixture-v31")
    report = archive_json("--all", home=home)
    side = {r["root"]: Path(r["sidecar"]) for r in unit_results(report, "archived")}
    truncated, flipped, missing = side[ids["cli_tools"]], side[ids["compacted"]], side[ids["chinese"]]
    truncated.write_bytes(truncated.read_bytes()[:-40])
    blob = bytearray(flipped.read_bytes())
    blob[len(blob) // 2] ^= 0x01
    flipped.write_bytes(bytes(blob))
    missing.unlink()
    picked = [ids["cli_tools"], ids["compacted"], ids["chinese"], ids["harness"]]
    report = archive_json(*picked, "--prune", "--via", "sqlite", home=home)
    refused = {r["root"]: r["reason"] for r in unit_results(report, "refused")}
    assert "truncated" in refused[ids["cli_tools"]]
    assert "sha256" in refused[ids["compacted"]]
    assert "sidecar missing" in refused[ids["chinese"]]
    assert [r["root"] for r in unit_results(report, "pruned")] == [ids["harness"]]
    here = {r[0].decode() for r in table_rows(home / "state.db")["sessions"]}
    assert {ids["cli_tools"], ids["compacted"], ids["chinese"]} <= here

    # An archive without --prune rewrites them from the database; then they prune.
    report = archive_json(*picked[:3], home=home)
    assert len(unit_results(report, "archived")) == 3
    report = archive_json(*picked[:3], "--prune", "--via", "sqlite", home=home)
    assert len(unit_results(report, "pruned")) == 3

    # Pull of a pruned lineage whose sidecar was damaged says exactly what is wrong, and restores nothing.
    path = side[ids["cli_tools"]]
    good = path.read_bytes()
    before = table_rows(home / "state.db")
    for damage, said in ((lambda b: b[:-40], "truncated"),
                         (lambda b: b[:20] + bytes([b[20] ^ 1]) + b[21:], "sha256"),
                         (None, "sidecar missing")):
        if damage is None:
            path.unlink()
        else:
            path.write_bytes(damage(good))
        proc = distill("pull", ids["subagent"], home=home, ok=False)
        assert proc.returncode == 2
        assert proc.stderr.startswith("Error: ") and said in proc.stderr, proc.stderr
        assert str(path) in proc.stderr and "Traceback" not in proc.stderr
        assert table_rows(home / "state.db") == before
        path.write_bytes(good)
    distill("pull", ids["subagent"], home=home)


def test_sidecar_checks_name_the_problem(tmp_path: Path) -> None:
    home = home_with(tmp_path, "fixture-v31")
    report = archive_json("--all", home=home)
    good = Path(unit_results(report, "archived")[0]["sidecar"])
    raw = good.read_bytes()
    import zstandard

    text = zstandard.ZstdDecompressor().decompress(raw)
    cases = {
        "truncated": raw[: len(raw) // 2],
        "corrupt": raw[:30] + bytes([raw[30] ^ 0xFF]) + raw[31:],
        "format": b"not a sidecar",
    }
    for reason, blob in cases.items():
        path = tmp_path / f"{reason}.hermes.jsonl.zst"
        path.write_bytes(blob)
        with pytest.raises(sc.SidecarError) as err:
            sc.load(path)
        assert err.value.reason in (reason, "corrupt", "truncated"), (reason, err.value)
    # a whole, valid zstd frame whose content lost its last lines: the trailer catches it
    cut = tmp_path / "cut.hermes.jsonl.zst"
    cut.write_bytes(zstandard.ZstdCompressor().compress(text[: text.rfind(b"\n", 0, -1) + 1]))
    with pytest.raises(sc.SidecarError) as err:
        sc.load(cut)
    assert err.value.reason == "truncated"
    edited = tmp_path / "edited.hermes.jsonl.zst"
    edited.write_bytes(zstandard.ZstdCompressor().compress(text.replace(b'"user"', b'"User"', 1)))
    with pytest.raises(sc.SidecarError) as err:
        sc.load(edited)
    assert err.value.reason == "corrupt"


# --------------------------------------------------------------------------- pull into other databases


@pytest.mark.slow
def test_pull_remaps_taken_ids_consistently(tmp_path: Path) -> None:
    ids = json.loads((ROOT / "fixtures/db/sessions.json").read_text())
    home = home_with(tmp_path, "fixture-v31")
    db = home / "state.db"
    report = archive_json(ids["cli_tools"], home=home)
    assert unit_results(report, "archived")
    # Pulling into the database that still holds identical rows changes nothing.
    before = table_rows(db)
    out = distill("pull", ids["cli_tools"], home=home).stdout
    assert "already there, identical" in out and table_rows(db) == before
    # Someone else's database where those ids hold other rows: everything is remapped together.
    other = tmp_path / "other.db"
    shutil.copyfile(db, other)
    con = sqlite3.connect(other)
    con.execute("UPDATE messages SET content = 'changed' WHERE session_id = ? AND role = 'user'", (ids["branch"],))
    con.commit()
    con.close()
    out = distill("pull", ids["cli_tools"], "--into-db", str(other), home=home).stdout
    assert f"remapped {ids['branch']} → {ids['branch']}-restored" in out, out
    con = sqlite3.connect(other)
    parent, config = con.execute("SELECT parent_session_id, model_config FROM sessions WHERE id = ?",
                                 (f"{ids['branch']}-restored",)).fetchone()
    title = con.execute("SELECT title FROM sessions WHERE id = ?", (f"{ids['branch']}-restored",)).fetchone()[0]
    n = con.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (f"{ids['branch']}-restored",)).fetchone()[0]
    con.close()
    assert parent == ids["cli_tools"] and ids["cli_tools"] in config  # its parent was identical: kept
    assert title.endswith("(restored)") and n == 4
    reads = hermes_reads(other, [f"{ids['branch']}-restored"], "v31", tmp_path, [])
    assert len(reads["sessions"][f"{ids['branch']}-restored"]["messages"]) == 4


def test_pull_a_note_without_a_sidecar_restores_its_summary(tmp_path: Path) -> None:
    home = home_with(tmp_path, "fixture-v31")
    ids = json.loads((ROOT / "fixtures/db/sessions.json").read_text())
    distill(ids["chinese"], "--summarizer", "extractive", home=home)
    note = next((home / "distilled").rglob("*2c4e10.md"))
    fresh = tmp_path / "from-note.db"
    proc = distill("pull", str(note), "--into-db", str(fresh), home=home)
    assert "from the note's summary only" in proc.stdout
    con = sqlite3.connect(fresh)
    sid, title = con.execute("SELECT id, title FROM sessions").fetchone()
    content = con.execute("SELECT content FROM messages WHERE session_id = ?", (sid,)).fetchone()[0]
    con.close()
    assert content.startswith("[RESTORED FROM A DISTILL NOTE — REFERENCE ONLY]")
    assert "SQLite" in content and title.endswith("(from note)")
    reads = hermes_reads(fresh, [sid], "v31", tmp_path, [])
    assert reads["sessions"][sid]["conversation"][0]["role"] == "user"


def test_pull_a_note_from_another_agents_transcript(tmp_path: Path) -> None:
    home = tmp_path / "hermes"
    home.mkdir()
    transcript = corpus_file("claude-code-jsonl/agentic-wallet-grant-skill-short.jsonl")
    distill(str(transcript), "--summarizer", "extractive", "--out", str(tmp_path / "notes"), home=home)
    note = next(p for p in (tmp_path / "notes").rglob("*.md") if p.relative_to(tmp_path / "notes").parts[0] != "projects")
    proc = distill("pull", str(note), "--into-db", str(tmp_path / "x.db"), "--out", str(tmp_path / "notes"),
                   home=home)
    assert "summary only" in proc.stdout


def test_errors_are_one_line(tmp_path: Path) -> None:
    home = home_with(tmp_path, "fixture-v31")
    for args, said in (
        (["pull", "20990101_000000_nope00"], "no note or archive for this session"),
        (["archive"], "say which sessions"),
        (["archive", "--all", "--via", "carrier-pigeon", "--prune"], "--via carrier-pigeon"),
        (["archive", "--older-than", "soon"], "not an age"),
        (["archive", "--all", "--db", str(tmp_path / "none.db")], "no such file"),
    ):
        proc = distill(*args, home=home, ok=False)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith("Error: ") and said in proc.stderr, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_help_has_examples(tmp_path: Path) -> None:
    for command in ("archive", "pull"):
        proc = distill(command, "--help", home=tmp_path)
        assert "Example" in proc.stdout and f"distill {command}" in proc.stdout
    assert sys.executable  # the console script is the one beside this interpreter
