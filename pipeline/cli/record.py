"""The unchanged re-run: answer from the last identical run when none of its inputs moved.

A nightly ``distill --all`` on a day Hermes was not used has nothing to do, yet the per-session
check (``run._Check``) still has to start Python, import pydantic and the CLI, open ``state.db``
and fingerprint every session: about a second for 2,000 sessions. This module answers that case
first, with the standard library only, the way ``make`` and ``rsync`` do: by the ``stat`` of
every file the run's output depends on.

After a clean run (nothing failed, no fallback, nothing reported per session) ``save`` records,
under a key made of the exact command line, working directory, environment and distill build:

* the ``(inode, size, mtime_ns)`` of ``state.db`` and its ``-wal`` *as they were before the run
  read them* (a write during the run makes the next run a full one);
* the same for the output directory and every folder holding a note (deleting, adding or
  renaming a note changes its folder's mtime), the note index and fingerprints;
* the config files a model is chosen from, the package's code, prompts and templates, the
  installed packages (``[local]`` installed later changes the summariser) and the model cache;
* the report the run's re-run would print: every note ``unchanged``.

``answer`` runs before anything else is imported: when every recorded ``stat`` still matches,
it prints that report and the process exits 0. Any difference, or a command this cannot vouch
for (time-relative selections, ``--force``, ``--dry-run``, transcript files, tool commands),
falls through to the full run, which is always correct; so a stale or missing record costs
time, never a wrong answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pipeline import __version__

#: Format of the record; bump to ignore every record an older build wrote.
RECORD_VERSION = 1
#: Records kept: one per distinct command; the oldest go first.
MAX_RECORDS = 100
#: Longer than the coarse clock file systems stamp mtimes with (see ``_settled_stamps``).
MTIME_TICK_NS = 30_000_000
#: Set to any value to always take the full run (tests compare both paths with it).
DISABLE_ENV = "DISTILL_NO_QUICK"
#: Options whose meaning changes with the clock or that ask for more than notes: never answered here.
UNVOUCHED = ("--since", "--idle", "--force", "--dry-run", "--promote-skill", "--propose-skills", "--from",
             "--debug", "--help", "-h")
TOOL_COMMANDS = ("hook", "import", "eval", "skills", "archive", "pull", "gbrain", "push", "mcp", "ls", "search",
                 "show", "load", "tag", "history", "diff", "revert", "index")
#: Shell bookkeeping that differs between two runs of one command and changes nothing distill does.
VOLATILE_ENV = frozenset({"_", "PWD", "OLDPWD", "SHLVL", "COLUMNS", "LINES", "PS1", "PROMPT_COMMAND",
                          "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "TERM_SESSION_ID", "WINDOWID",
                          "PYTEST_CURRENT_TEST"})
#: Variables distill sets in its own process (before importing litellm): never part of a key, whoever set them.
SELF_SET_ENV = frozenset({"LITELLM_LOCAL_MODEL_COST_MAP"})

Stamp = list[Any]  # [inode, size, mtime_ns], or None for a missing file


# --------------------------------------------------------------------------- output, shared with the CLI


def result_lines(result: Mapping[str, Any]) -> list[tuple[bool, str]]:
    """What the CLI prints for one session: ``(to stderr, text)`` pairs."""
    lines: list[tuple[bool, str]] = []
    status, sid = result["status"], result["session_id"]
    if status == "failed":
        lines.append((True, f"failed     {sid}: {result.get('error')}"))
    elif status in ("written", "would-write"):
        lines.append((False, f"{status:<10} {result.get('path')}"))
    lines.extend((True, f"warning    {sid}: {problem}") for problem in result.get("problems") or ())
    return lines


def summary_lines(report: Mapping[str, Any]) -> list[str]:
    """The closing lines the CLI prints to stderr: counts, the model's use and the time, then the notices.

    The embedded model is named as local: its litellm id (``openai/qwen...``) reads as if session
    text went to OpenAI, when it never left the machine.
    """
    verb = "would write" if report["dry_run"] else "written"
    model = str(report["summarizer"])
    if report.get("summarizer_local"):
        model = f"local model {model.split('/', 1)[-1]}"
    cached = f" + {report['cache_hits']} cached" if report.get("cache_hits") else ""
    cached += f", {report['llm_reasks']} re-asked" if report.get("llm_reasks") else ""
    cost = f"${report['cost_usd']:.4f}" if report.get("cost_usd") else "$0"
    return [
        f"{report['selected']} selected, {report['written']} {verb}, {report['unchanged']} unchanged, "
        f"{report['skipped']} skipped, {report['failed']} failed ({model}: {report['llm_calls']} model calls{cached}, "
        f"{report['input_tokens']:,} tokens in, {report['output_tokens']:,} out, {cost}; "
        f"{duration(report['elapsed_s'])}) → {report['out']}",
        *report["notices"],
    ]


def duration(seconds: float, *, coarse: bool = False) -> str:
    """0.29s, 42.0s, 16m02s, 3h05m: what a person reads at a glance (``coarse``: whole seconds)."""
    if seconds < 60:
        if coarse:
            return f"{max(1, round(seconds))}s"
        return f"{seconds:.2f}s" if seconds < 10 else f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def report_json(report: Mapping[str, Any]) -> str:
    """``RunReport.model_dump_json(indent=2)``, byte for byte (a test pins it), without pydantic."""
    return json.dumps(report, indent=2, ensure_ascii=False)


# --------------------------------------------------------------------------- the record


def vouchable(argv: list[str]) -> bool:
    """Whether an unchanged re-run of this command line can be answered from a record."""
    if not argv or argv[0] in TOOL_COMMANDS:
        return False
    return not any(arg.split("=", 1)[0] in UNVOUCHED for arg in argv)


def _key(argv: list[str], env: Mapping[str, str], cwd: str) -> str:
    environ = sorted((k, v) for k, v in env.items() if k not in VOLATILE_ENV and k not in SELF_SET_ENV)
    blob = json.dumps([RECORD_VERSION, __version__, sys.executable, argv, cwd, environ], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def records_dir(env: Mapping[str, str]) -> Path:
    """Beside the LLM cache (``$HERMES_HOME/distill/``), whatever profile the command names."""
    return Path(env.get("HERMES_HOME") or "~/.hermes").expanduser() / "distill" / "runs"


def stamp(path: str | os.PathLike[str]) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def wal_stamp(path: str | os.PathLike[str]) -> Stamp | None:
    """A write-ahead log's stamp; missing and empty are alike.

    Opening a WAL database creates an empty ``-wal`` when there was none, reader or not. An empty
    log holds no writes: a write either sits in it (size > 0) or was checkpointed into the main
    file, whose own stamp moves.
    """
    st = stamp(path)
    return st if st and st[1] else None


def db_stamps(db: Path) -> dict[str, dict[str, Stamp | None]]:
    """``state.db`` and its write-ahead log, taken *before* the run reads them."""
    return {"files": {str(db): stamp(db)}, "logs": {f"{db}-wal": wal_stamp(f"{db}-wal")}}


def _code_paths() -> Iterable[Path]:
    """This build's code, prompts and templates, the installed packages and the model cache."""
    import site

    from pipeline.resources import data_dir

    pkg = Path(__file__).resolve().parents[1]  # the whole package, not just cli/
    yield from pkg.rglob("*.py")
    for name in ("prompts", "templates"):
        yield from sorted(data_dir(name).iterdir())
    yield from (Path(p) for p in site.getsitepackages())
    yield Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hermes-distill" / "models"


def _output_paths(out: Path) -> Iterable[Path]:
    meta = out / ".distill"
    yield from (out, meta, meta / "index.json", meta / "fingerprints.json")
    try:
        index = json.loads((meta / "index.json").read_text("utf-8"))
    except (OSError, ValueError):
        return
    folders = {(out / entry["path"]).parent for entry in index.values() if isinstance(entry, dict) and "path" in entry}
    for folder in sorted(folders):
        # The year folder too: removing a whole month folder changes only its parent.
        yield from (folder.parent, folder)


def _config_paths(home: Path, env: Mapping[str, str]) -> Iterable[Path]:
    yield from (home / "config.yaml", home / ".env", home / "distill.yaml")
    if env.get("DISTILL_CONFIG"):
        yield Path(env["DISTILL_CONFIG"]).expanduser()


def replay_report(report: Mapping[str, Any], setup_notices: int) -> dict[str, Any]:
    """What re-running the same command on the same inputs reports: each note ``unchanged``."""
    results = []
    for r in report["results"]:
        if r["status"] in ("written", "unchanged"):
            results.append({"session_id": r["session_id"], "status": "unchanged", "path": r["path"],
                            "error": None, "problems": []})
        else:  # skipped: read again on every run, and reported again with the same problems
            results.append(dict(r))
    return {
        **report,
        "written": 0,
        "unchanged": sum(1 for r in results if r["status"] == "unchanged"),
        "skipped": sum(1 for r in results if r["status"] == "skipped"),
        "failed": 0,
        "results": results,
        **dict.fromkeys(("llm_calls", "llm_reasks", "cache_hits", "input_tokens", "output_tokens", "hallucinations_dropped",
                         "fallbacks"), 0),
        "cost_usd": 0.0,
        "elapsed_s": 0.0,
        "notices": list(report["notices"][:setup_notices]),
    }


def save(
    argv: list[str], *, before: Mapping[str, Mapping[str, Stamp | None]], out: Path, home: Path, report: Mapping[str, Any],
    setup_notices: int, info_notices: int = 0, env: Mapping[str, str] | None = None, cwd: str | None = None,
) -> Path | None:
    """Record a clean run so the same command can be answered next time; None when it cannot vouch.

    Clean: nothing failed or fell back, and no notice but the setup ones (said again by the replay) and
    ``info_notices`` (``RunReport.inform``: about this run's work only, not said by a re-run).
    """
    env = os.environ if env is None else env
    clean = (not report["failed"] and not report["fallbacks"] and not report["dry_run"]
             and len(report["notices"]) == setup_notices + info_notices)
    if DISABLE_ENV in env or not clean or not vouchable(argv):
        return None
    # A bare argument is a session id here (the caller saves no run that read transcript files); the
    # same word naming a file later would make it a transcript, so its absence is watched too.
    bare = [Path(os.path.expanduser(a)) for a in argv if not a.startswith("-")]
    paths = [*bare, *_output_paths(out), *_config_paths(home, env), *_code_paths()]
    watched = _settled_stamps(paths)
    watched.update(before.get("files", {}))
    replay = replay_report(report, setup_notices)
    # A note deleted between the run's last write and the stamps above would be vouched for.
    if not all(os.path.exists(r["path"]) for r in replay["results"] if r["status"] == "unchanged"):
        return None
    record = {"version": RECORD_VERSION, "watched": watched, "logs": dict(before.get("logs", {})), "report": replay}
    folder = records_dir(env)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{_key(argv, env, cwd or os.getcwd())}.json"
        from pipeline.atomic import atomic_write_text

        # Named so a killed run's temp is swept; a torn record would only cost a full run.
        atomic_write_text(path, json.dumps(record, ensure_ascii=False), durable=False)
        _prune(folder)
    except OSError:
        return None  # an unwritable cache only costs the next run its shortcut
    return path


def _settled_stamps(paths: Iterable[Path]) -> dict[str, Stamp | None]:
    """Stamps no later change can repeat: taken once the clock has left the newest one's tick.

    File systems take mtimes from a coarse clock (a few ms on Linux): a note deleted in the same
    tick as the run's last write into its folder would leave the folder's mtime as recorded.
    """
    paths = list(paths)
    stamps = {str(p): stamp(p) for p in paths}
    newest = max((st[2] for st in stamps.values() if st), default=0)
    if time.time_ns() - newest < MTIME_TICK_NS:
        time.sleep(MTIME_TICK_NS / 1e9)
        stamps = {str(p): stamp(p) for p in paths}
    return stamps


def _prune(folder: Path) -> None:
    records = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    for old in records[:-MAX_RECORDS]:
        old.unlink(missing_ok=True)


def answer(argv: list[str], env: Mapping[str, str] | None = None, cwd: str | None = None) -> int | None:
    """Print the recorded report and return the exit code, or None to run for real."""
    env = os.environ if env is None else env
    if DISABLE_ENV in env or not vouchable(argv):
        return None
    started = time.perf_counter()
    path = records_dir(env) / f"{_key(argv, env, cwd or os.getcwd())}.json"
    try:
        record = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if record.get("version") != RECORD_VERSION:
        return None
    if any(stamp(p) != recorded for p, recorded in record["watched"].items()) or any(
        wal_stamp(p) != recorded for p, recorded in record["logs"].items()
    ):
        return None
    report = {**record["report"], "elapsed_s": round(time.perf_counter() - started, 3)}
    if "--json" in argv:
        sys.stdout.write(report_json(report) + "\n")
    elif not ({"--quiet", "-q"} & set(argv)):
        for result in report["results"]:
            for to_err, line in result_lines(result):
                (sys.stderr if to_err else sys.stdout).write(line + "\n")
        sys.stderr.write("\n".join(summary_lines(report)) + "\n")
    return 0
