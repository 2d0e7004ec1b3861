"""SIGKILL distill at random points and check what a crash leaves, then that a rerun converges.

    .venv/bin/python -m evals.crash_run                 # 50 kills over every scenario, prints the table
    .venv/bin/python -m evals.crash_run --kills 10 --seed 3

Each kill: copy a scenario's starting state, start the command (``distill`` as a user's shell runs
it, in its own process group), wait a random fraction of the time an uninterrupted run of it takes,
and SIGKILL either the whole process group or the main process alone (what the OOM killer does).
Then check:

* **orphans**: no process of the killed group is still alive (workers must notice their parent
  died; a bounded wait of 20 s);
* **torn files**: every note, SKILL.md, JSON and YAML file distill writes parses whole;
* **rerun**: the same command, uninterrupted, finishes without a traceback and within its lock
  timeout (a stale lock would hang it);
* **stray temps**: after the rerun, no temp file (``.<name>.<pid>.<rand>.tmp``), and no private
  copy or scratch directory of a dead distill in the temp directory;
* **convergence**: the files equal those of an uninterrupted run from the same starting state,
  byte for byte once ISO timestamps are masked (databases compared by their rows).

Scenarios cover every command that writes: a cold run with worker processes, an update of grown
sessions (serial), ``--force`` over notes a person edited, ``--promote-skill``, ``skills approve``,
``skills reject``, ``hook install --apply`` and ``import --into-db``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.shell import DISTILL, user_env  # noqa: E402

TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[+-]\d{2}:\d{2}|Z)?")
TEMP = re.compile(r"^\..+\.\d+\.[A-Za-z0-9_]{8}\.tmp$")
#: Files that are caches or logs of a run, not its output: not compared (they are still checked for tears).
#: Not compared with the reference run: locks and records, caches, and the archive's derived state (its
#: index is rebuilt from the notes; git objects carry commit times, so a re-run's hashes always differ).
VOLATILE = re.compile(r"(^|/)(locks/|runs/|cache\.db|embeddings\.db|hook\.log|hook\.json|[^/]*\.lock$|\.git/|archive/)")


@dataclass
class Scenario:
    name: str
    argv: Callable[[Path], list[str]]
    setup: Callable[[Path], None] = lambda work: None
    once: bool = False  # a second run of it refuses (approve, reject, import into a new file)
    duration: float = 0.0  # of an uninterrupted run, measured
    reference: dict[str, str] = field(default_factory=dict)
    ref_code: int = 0


# --------------------------------------------------------------------------- running


def env_for(work: Path) -> dict[str, str]:
    return user_env(work, HERMES_HOME=str(work / "hermes"), DISTILL_NO_QUICK="1")


def run(work: Path, argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(DISTILL), *argv], env=env_for(work), cwd=work, capture_output=True, text=True,
                          timeout=timeout, check=False)


def group_alive(pgid: int) -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                rest = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if rest[0] != "Z" and int(rest[2]) == pgid:
            pids.append(int(entry.name))
    return pids


# --------------------------------------------------------------------------- state


def build_template(root: Path, copies: int) -> Path:
    """``root/base``: a state.db with enough sessions that a run takes a few seconds, an empty out."""
    from tests.hostile_cases import _session_rich_db

    base = root / "base"
    base.mkdir(parents=True)
    src = _session_rich_db(root, copies)
    shutil.move(src, base / "state.db")
    (base / "hermes").mkdir()
    (base / "hermes" / "config.yaml").write_text("model:\n  default: anthropic/claude-sonnet-4.5\nplugins:\n  enabled: []\n")
    return base


def distill_args(work: Path, *extra: str) -> list[str]:
    return ["--db", str(work / "state.db"), "--all", "--out", str(work / "out"), "--summarizer", "extractive",
            "-q", *extra]


def _grow(work: Path) -> None:
    con = sqlite3.connect(work / "state.db")
    ids = [r[0] for r in con.execute("SELECT id FROM sessions")]
    for sid in ids:
        con.execute("INSERT INTO messages(session_id, role, content, timestamp, active) VALUES (?, 'user', "
                    "'one more thing: also update the changelog', 1795500000.0, 1)", (sid,))
    con.commit()
    con.close()


def setup_grown(work: Path) -> None:
    assert run(work, distill_args(work, "--jobs", "2")).returncode == 0
    _grow(work)


def setup_edited(work: Path) -> None:
    setup_grown(work)
    for note in sorted((work / "out").rglob("*.md")):
        if ".distill" in note.parts:
            continue
        text = note.read_text("utf-8").replace("\ntags:\n", "\ntags:\n- mine\n", 1)
        note.write_text(text.rstrip("\n") + "\n\nmy own remark, kept across re-renders\n", "utf-8")


def _pending(work: Path) -> str:
    """The skill the scenario approves or rejects (noted at setup: a finished run removes it)."""
    return (work / "pending-name").read_text().strip()


def setup_promoted(work: Path) -> None:
    assert run(work, distill_args(work, "--jobs", "2")).returncode == 0


def setup_pending(work: Path) -> None:
    setup_promoted(work)
    p = run(work, ["20261123_143852_0e5e92", "--db", str(work / "state.db"), "--out", str(work / "out"),
                   "--summarizer", "extractive", "--promote-skill", "-q"])
    assert p.returncode == 0, p.stderr
    names = sorted(q.name for q in (work / "out" / "skills" / "pending").iterdir())
    assert names, "no pending skill was staged"
    (work / "pending-name").write_text(names[0])


def scenarios() -> list[Scenario]:
    transcripts = ROOT / "fixtures" / "transcripts"
    return [
        Scenario("distill cold, --jobs 2", lambda w: distill_args(w, "--jobs", "2")),
        Scenario("distill grown sessions, serial", lambda w: distill_args(w, "--jobs", "1"), setup_grown),
        Scenario("distill --force over edited notes", lambda w: distill_args(w, "--force", "--jobs", "2"), setup_edited),
        Scenario("--promote-skill", lambda w: ["20261123_143852_0e5e92", "--db", str(w / "state.db"), "--out",
                                               str(w / "out"), "--summarizer", "extractive", "--promote-skill", "-q"],
                 setup_promoted),
        Scenario("skills approve", lambda w: ["skills", "approve", _pending(w), "--out", str(w / "out")], setup_pending,
                 once=True),
        Scenario("skills reject", lambda w: ["skills", "reject", _pending(w), "--out", str(w / "out")], setup_pending,
                 once=True),
        Scenario("hook install --apply", lambda w: ["hook", "install", "--apply"]),
        Scenario("import --into-db", lambda w: ["import", "--into-db", str(w / "imported.db"), str(transcripts)],
                 once=True),
    ]


def snapshot(work: Path) -> dict[str, str]:
    """Every output file, normalised: ISO timestamps and the work folder's own path masked, databases
    as their rows."""
    out: dict[str, str] = {}
    here = str(work)
    for path in sorted(work.rglob("*")):
        rel = path.relative_to(work).as_posix()
        if not path.is_file() or rel == "state.db" or VOLATILE.search(rel):
            continue
        name = TIMESTAMP.sub("<ts>", re.sub(r"\.\d{8}-\d{6}(-\d+)?\.bak$", ".<stamp>.bak", rel))
        if path.suffix == ".db":
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                rows = [list(r) for t in ("sessions", "messages") for r in con.execute(f"SELECT * FROM {t} ORDER BY 1")]
            finally:
                con.close()
            out[name] = TIMESTAMP.sub("<ts>", json.dumps(rows, default=str)).replace(here, "<work>")
        elif path.name.endswith(("-wal", "-shm", "-journal")):
            continue
        else:
            out[name] = TIMESTAMP.sub("<ts>", path.read_text("utf-8", "replace")).replace(here, "<work>")
    return out


def torn(work: Path) -> list[str]:
    """Files distill writes that do not parse whole."""
    import yaml

    from pipeline.notes.frontmatter import FrontmatterError, load_frontmatter

    bad = []
    for path in work.rglob("*"):
        rel = path.relative_to(work).as_posix()
        if not path.is_file() or TEMP.match(path.name) or "/locks/" in f"/{rel}":
            continue
        try:
            text = path.read_text("utf-8") if path.suffix in (".md", ".json", ".yaml", ".bak") else None
            if text is None:
                continue
            if path.suffix == ".json":
                json.loads(text)
            elif path.suffix in (".yaml", ".bak"):
                yaml.safe_load(text)
            elif path.suffix == ".md":
                meta, _body = load_frontmatter(text)
                assert meta, "no frontmatter"
                assert text.endswith("\n"), "no final newline"
                if meta.get("type") == "project":  # the archive's project index note: no session id
                    assert meta.get("title") and meta.get("content_hash"), "a project note without title/content_hash"
                elif path.name != "SKILL.md":
                    assert meta.get("id") and meta.get("content_hash"), "a note without id/content_hash"
        except (ValueError, AssertionError, FrontmatterError, yaml.YAMLError, UnicodeDecodeError) as exc:
            bad.append(f"{rel}: {exc}")
    return bad


def stray(work: Path, pids: set[int]) -> list[str]:
    found = [p.relative_to(work).as_posix() for p in work.rglob("*") if TEMP.match(p.name)]
    tmp = Path(tempfile.gettempdir())
    for prefix in ("distill-db-", "distill-hook-"):
        found += [p.name for p in tmp.glob(f"{prefix}*") if any(p.name.startswith(f"{prefix}{pid}-") for pid in pids)]
    return found


# --------------------------------------------------------------------------- the run


@dataclass
class Kill:
    scenario: str
    mode: str
    at: float
    landed: bool = True
    orphans: int = 0
    torn: list[str] = field(default_factory=list)
    rerun: str = ""
    stray: list[str] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.orphans or self.torn or self.rerun or self.stray or self.diff)


def prepare(root: Path, copies: int) -> list[Scenario]:
    template = build_template(root, copies)
    found = []
    for n, sc in enumerate(scenarios()):
        base = root / f"start-{n}"
        shutil.copytree(template, base, symlinks=True)
        sc.setup(base)
        ref = root / f"ref-{n}"
        shutil.copytree(base, ref, symlinks=True)
        t0 = time.monotonic()
        p = run(ref, sc.argv(ref))
        sc.duration = time.monotonic() - t0
        assert "Traceback" not in p.stderr, p.stderr
        sc.ref_code, sc.reference = p.returncode, snapshot(ref)
        found.append(sc)
    return found


def kill_once(root: Path, n: int, sc: Scenario, mode: str, rnd: random.Random) -> Kill:
    start = root / f"start-{[s.name for s in scenarios()].index(sc.name)}"
    work = root / f"kill-{n}"
    shutil.copytree(start, work, symlinks=True)
    argv = sc.argv(work)
    # Start-up (interpreter, imports) is a third or more of a short run and writes nothing: most kills
    # land in the part that writes, some before it and some after the work was done.
    at = rnd.uniform(0.2, 1.05) * max(0.05, sc.duration)
    result = Kill(sc.name, mode, at)
    proc = subprocess.Popen([str(DISTILL), *argv], env=env_for(work), cwd=work, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    pids = {proc.pid}
    deadline = time.monotonic() + at
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.005)
        pids.update(group_alive(proc.pid))
    pids.update(group_alive(proc.pid))
    try:
        if mode == "group":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            os.kill(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # it had finished already: the kill came too late, which is a case too
    proc.wait()
    result.landed = proc.returncode == -signal.SIGKILL
    until = time.monotonic() + 20
    while (left := group_alive(proc.pid)) and time.monotonic() < until:
        time.sleep(0.1)
    result.orphans = len(left)
    for pid in left:  # never leave them running, whatever the verdict
        os.kill(pid, signal.SIGKILL)
    result.torn = torn(work)
    t0 = time.monotonic()
    try:
        p = run(work, sc.argv(work), timeout=max(120.0, sc.duration * 20))
        if "Traceback" in p.stderr:
            result.rerun = "traceback: " + p.stderr.strip().splitlines()[-1][:120]
        elif p.returncode != sc.ref_code and not (p.returncode == 2 and sc.once and p.stderr.startswith("Error: ")):
            # A one-shot command (approve, reject, import into a new file) that the kill caught after
            # its work was done answers its rerun with one Error line ("already exists"); the files
            # still have to be those of an uninterrupted run.
            result.rerun = f"exit {p.returncode}: {p.stderr.strip()[-160:]}"
    except subprocess.TimeoutExpired:
        result.rerun = f"hung for {time.monotonic() - t0:.0f}s (a stale lock?)"
    result.stray = stray(work, pids)
    got = snapshot(work)
    for name in sorted(set(got) | set(sc.reference)):
        if got.get(name) != sc.reference.get(name):
            result.diff.append(name if name in got and name in sc.reference else
                               f"{name} ({'missing' if name not in got else 'extra'})")
    shutil.rmtree(work, ignore_errors=True)
    return result


def crash_run(kills: int, seed: int, copies: int = 8, root: Path | None = None,
              report: Callable[[str], None] = print) -> list[Kill]:
    rnd = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="crash-run-") as tmp:
        base = Path(root or tmp)
        found = prepare(base, copies)
        for sc in found:
            report(f"scenario {sc.name!r}: uninterrupted {sc.duration:.2f}s, exit {sc.ref_code}, {len(sc.reference)} files")
        results = []
        for n in range(kills):
            sc = found[n % len(found)]
            mode = "group" if (n // len(found)) % 2 == 0 else "main"
            k = kill_once(base, n, sc, mode, rnd)
            results.append(k)
            report(f"{n + 1:3d} {'ok  ' if k.ok else 'FAIL'} {k.scenario:36s} {k.mode:5s} at {k.at:5.2f}s"
                   f"{'' if k.landed else ' (had finished)'}"
                   + ("" if k.ok else f"  orphans={k.orphans} torn={k.torn[:2]} rerun={k.rerun!r} "
                                        f"stray={k.stray[:3]} diff={k.diff[:3]}"))
    return results


def table(results: list[Kill]) -> str:
    rows = ["| scenario | kills (group / main) | landed mid-run | orphans | torn files | rerun failed | stray temps "
            "| not converged |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name in dict.fromkeys(k.scenario for k in results):
        ks = [k for k in results if k.scenario == name]
        rows.append(f"| {name} | {len(ks)} ({sum(k.mode == 'group' for k in ks)} / {sum(k.mode == 'main' for k in ks)}) | "
                    f"{sum(k.landed for k in ks)} | {sum(k.orphans for k in ks)} | {sum(bool(k.torn) for k in ks)} | {sum(bool(k.rerun) for k in ks)} | "
                    f"{sum(bool(k.stray) for k in ks)} | {sum(bool(k.diff) for k in ks)} |")
    ok = sum(k.ok for k in results)
    rows.append(f"| **all** | {len(results)} | {sum(k.landed for k in results)} | {sum(k.orphans for k in results)} | "
                f"{sum(bool(k.torn) for k in results)} | {sum(bool(k.rerun) for k in results)} | "
                f"{sum(bool(k.stray) for k in results)} | {sum(bool(k.diff) for k in results)} |")
    return "\n".join(rows) + f"\n\n{ok}/{len(results)} kills left nothing wrong."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--copies", type=int, default=8, help="clones of the fixture's cli sessions (run length)")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    results = crash_run(args.kills, args.seed, args.copies)
    print()
    print(table(results))
    print(f"\n{time.monotonic() - t0:.0f}s in all, seed {args.seed}")
    return 0 if all(k.ok for k in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
