"""The ``distill`` command: flags → ``Settings`` → ``run`` → report and exit code.

``distill [SESSION ...] [options]`` distils sessions; ``distill hook|import|...`` are tool
commands. Typer cannot mix a positional session list with subcommands in one group, so
``main`` dispatches on the first argument: a known tool name goes to that tool's app, anything
else is the main command. Errors from the library are ``DistillError``s; only this module turns
them into one ``Error: ...`` line and an exit code (2 bad usage/input, 1 some sessions failed).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pipeline.cli.when import parse_age, parse_when
from pipeline.config import DEFAULT_EXCLUDED_SOURCES, build_settings
from pipeline.errors import DistillError, InputError
from pipeline.models import RunReport

if TYPE_CHECKING:
    from pipeline.cli.progress import RunWatch

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)

# The --since/--idle parsers live in cli.when, where the command groups can import them too.


def _print_version(value: bool) -> None:
    if value:
        from pipeline import __version__

        typer.echo(f"distill {__version__}")
        raise typer.Exit(EXIT_OK)


def _command_hint(sessions: list[str], exc: DistillError) -> str:
    """`distill skils pending` reads `skils` as a session id: when it fails, say which command was meant."""
    import difflib

    if not sessions or not isinstance(exc, InputError):
        return ""
    close = difflib.get_close_matches(sessions[0], TOOL_NAMES, n=1, cutoff=0.7)
    return f"; did you mean `distill {' '.join([close[0], *sessions[1:]])}`?" if close else ""


@app.command(
    help=(
        "Distill Hermes sessions from state.db into Markdown notes.\n\n"
        "Examples:\n\n"
        "  distill --since yesterday\n\n"
        "  distill 20261130_101500_abc123\n\n"
        "  distill --all --source cli --out ~/notes/hermes\n\n"
        "  distill --demo\n\n"
        "Tool commands (each with --help): distill hook, distill skills, distill import, distill archive, "
        "distill pull, distill gbrain, distill push, distill mcp; the archive: distill ls, search, show, load, tag, history, diff, "
        "revert, index"
    )
)
def distill(
    sessions: Annotated[
        list[str] | None,
        typer.Argument(help="Session ids or exact titles, or transcript files/directories.", show_default=False),
    ] = None,
    from_: Annotated[
        str | None,
        typer.Option("--from", help="Format of transcript files (auto-detected): claude-code, codex, specstory, "
                     "aider, hermes-export, hermes-dump, sharegpt."),
    ] = None,
    db: Annotated[Path | None, typer.Option(help="state.db to read (default $HERMES_HOME/state.db).")] = None,
    profile: Annotated[str | None, typer.Option(help="Hermes profile: $HERMES_HOME/profiles/NAME.")] = None,
    out: Annotated[Path | None, typer.Option(help="Output directory (default $HERMES_HOME/distilled).")] = None,
    demo: Annotated[bool, typer.Option("--demo", help="Distill the bundled demo state.db into ./distill-demo.")] = False,
    all_: Annotated[bool, typer.Option("--all", help="Every session the source filters allow.")] = False,
    since: Annotated[str | None, typer.Option(help="Sessions active since: yesterday, today, 6h, 2026-11-30.")] = None,
    idle: Annotated[str | None, typer.Option(help="Sessions idle at least this long (e.g. 2h) that changed.")] = None,
    source: Annotated[list[str] | None, typer.Option("--source", help="Only these sources (repeatable).")] = None,
    exclude_source: Annotated[
        list[str] | None,
        typer.Option("--exclude-source", help=f"Skip these sources (default: {', '.join(DEFAULT_EXCLUDED_SOURCES)})."),
    ] = None,
    summarizer: Annotated[str, typer.Option(help="auto, extractive or llm.")] = "auto",
    model: Annotated[
        str | None, typer.Option(help="Any litellm model, e.g. openrouter/google/gemini-2.5-flash (else DISTILL_MODEL, "
                                      "distill.yaml, your Hermes config, the embedded model).")
    ] = None,
    api_base: Annotated[str | None, typer.Option(help="Base URL of an OpenAI-compatible server.")] = None,
    local_model: Annotated[Path | None, typer.Option(help="A GGUF to serve with llama.cpp instead.")] = None,
    lang: Annotated[str | None, typer.Option(help="Write summaries in this language (default: the session's).")] = None,
    max_cost: Annotated[float | None, typer.Option(help="Stop calling the model before this many USD.")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Stop calling the model before this many tokens.")] = None,
    promote_skill: Annotated[
        bool, typer.Option("--promote-skill", help="Also draft a SKILL.md from the named session(s) for review.")
    ] = False,
    propose_skills: Annotated[
        bool,
        typer.Option("--propose-skills", help="After distilling, stage skills for procedures that recur across "
                     "sessions (review with `distill skills pending`); for the nightly run."),
    ] = False,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", min=1, show_default=False,
                     help="Sessions in parallel: worker processes for extractive (default min(CPUs, 4)), "
                          "concurrent model calls for LLM summaries; e.g. --jobs 8."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Only the N most recently active of the selected sessions.")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be written; write nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Re-render even when nothing changed.")] = False,
    no_git: Annotated[
        bool, typer.Option("--no-git", help="Keep no versions: no git repository or commit in the output folder.")
    ] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print the run report as JSON.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
    version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_print_version, help="Print distill's version and exit.")
    ] = False,
) -> None:
    from pipeline.cli.progress import RunWatch

    watch = RunWatch(quiet=quiet or json_)
    try:
        report = _run(
            sessions=sessions or [], from_=from_, db=db, profile=profile, out=out, demo=demo, all_=all_, since=since,
            idle=idle, source=source or [], exclude_source=exclude_source, summarizer=summarizer,
            jobs=jobs, dry_run=dry_run, force=force, git=not no_git, quiet=quiet or json_, promote_skill=promote_skill,
            propose_skills=propose_skills, watch=watch,
            model_opts={"model": model, "api_base": api_base, "local_model": local_model, "lang": lang,
                        "max_cost": max_cost, "max_tokens": max_tokens, "limit": limit},
        )
    except DistillError as exc:
        if debug:
            raise
        typer.echo(f"Error: {exc}{_command_hint(sessions or [], exc)}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        # Here, not in ``main``: typer turns a KeyboardInterrupt that leaves the command into a bare exit 130.
        # Writes are atomic, the index is saved and a local model server is stopped on the way out.
        typer.echo(watch.interrupted(), err=True)
        raise typer.Exit(130) from None
    finally:
        watch.close()
    if json_:
        typer.echo(report.model_dump_json(indent=2))
    elif not quiet:
        _print_summary(report)
    raise typer.Exit(EXIT_FAILED if report.failed else EXIT_OK)


def _run(
    *, sessions: list[str], from_: str | None, db: Path | None, profile: str | None, out: Path | None, demo: bool, all_: bool,
    since: str | None, idle: str | None, source: list[str], exclude_source: list[str] | None, summarizer: str,
    jobs: int | None, dry_run: bool, force: bool, git: bool, quiet: bool, promote_skill: bool, propose_skills: bool,
    model_opts: dict[str, Any], watch: RunWatch,
) -> RunReport:
    from pipeline.run.runner import run

    if summarizer not in ("auto", "extractive", "llm"):
        raise InputError(f"--summarizer {summarizer!r}: use auto, extractive or llm")
    if demo:
        from pipeline.resources import demo_db

        db, out, all_ = demo_db(), out or Path("distill-demo"), True
        # The demo touches nothing of the user's Hermes home: its summary cache (and the model's
        # rate) live beside its notes, and it leaves no run record (see below).
        model_opts = {**model_opts, "cache_path": Path(out).expanduser() / ".distill" / "cache.db"}
    # A positional argument that names an existing path is a transcript to read, not a session id.
    inputs = [Path(a).expanduser() for a in sessions if Path(a).expanduser().exists()]
    if from_ and not inputs:
        raise InputError(f"--from {from_}: name the transcript files or directories to read")
    if from_:
        from pipeline.read.detect import normalise_format

        from_ = normalise_format(from_)
    settings = build_settings(
        db=db, profile=profile, out=out, sessions=[a for a in sessions if Path(a).expanduser() not in inputs],
        inputs=inputs, input_format=from_, select_all=all_,
        since=parse_when(since) if since else None, idle=parse_age(idle, "--idle") if idle else None,
        include_sources=source,
        exclude_sources=list(DEFAULT_EXCLUDED_SOURCES if exclude_source is None else exclude_source),
        dry_run=dry_run, force=force, git=git, summarizer=summarizer, jobs=jobs or 0, **model_opts,
    )
    if profile and db is None and not settings.home.is_dir():
        root = settings.home.parent
        found = sorted(p.name for p in root.iterdir() if (p / "state.db").is_file()) if root.is_dir() else []
        hint = f"profiles with a state.db: {', '.join(found)}" if found else f"none exist under {root}"
        raise InputError(f"--profile {profile}: no such Hermes profile ({settings.home} does not exist); {hint}")
    if promote_skill and not settings.sessions:
        raise InputError("--promote-skill: name the session(s) to promote, e.g. distill ID --promote-skill")
    if settings.out.exists() and not settings.out.is_dir():
        raise InputError(f"--out {settings.out}: exists and is not a directory")
    progress = None if quiet else _progress
    if not quiet:
        _echo_progress_lines()
    from pipeline.cli import record as quick

    # Taken before the run reads the database: a write during the run makes the next run a full one.
    before = {} if settings.inputs else quick.db_stamps(settings.db)
    report = run(settings, progress=progress, on_result=watch.result, on_plan=watch.plan)
    if settings.dry_run:
        return report
    if _invocation is not None and not settings.inputs and not promote_skill and not propose_skills and not demo:
        quick.save(_invocation, before=before, out=settings.out, home=settings.home, env=_invocation_env,
                   report=report.model_dump(mode="json"), setup_notices=report.setup_notices,
                   info_notices=report.info_notices)
    if promote_skill:
        from pipeline.skills.promote import promote_session

        for ref in settings.sessions:
            path = promote_session(ref, settings, notices=report.notices)
            report.notices.append(f"skill drafted for review: {path} (distill skills pending / approve)")
    if propose_skills:
        from pipeline.skills.promote import propose

        for staged in propose(settings, notices=report.notices):
            if staged.status in ("staged", "update"):
                report.notices.append(f"skill {staged.name} {staged.status} for review: {staged.path} "
                                      "(distill skills pending / diff / approve)")
    return report


def _progress(total: int) -> Iterable[int]:
    """A rich progress bar on long interactive runs; plain iteration otherwise."""
    if total < 20 or not sys.stderr.isatty():
        yield from range(total)
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("distilling", total=total)
        for i in range(total):
            yield i
            bar.advance(task)


def _echo_progress_lines() -> None:
    """The library's progress lines on stderr: the embedded model loading, each session, each call."""
    import logging

    class Echo(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            typer.echo(record.getMessage(), err=True)

    logger = logging.getLogger("pipeline")
    if not any(type(h).__name__ == "Echo" for h in logger.handlers):
        logger.addHandler(Echo())
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _print_summary(report: RunReport) -> None:
    from pipeline.cli.record import summary_lines

    typer.echo("\n".join(summary_lines(report.model_dump(mode="json"))), err=True)


import_app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)


@import_app.command(
    help=(
        "Write transcripts (Claude Code, Codex, SpecStory, aider, Hermes exports) into a Hermes-shaped "
        "state.db, so Hermes can browse and resume them.\n\n"
        "Example: distill import --into-db ~/imported.db ~/.claude/projects"
    )
)
def import_(
    files: Annotated[list[Path], typer.Argument(help="Transcript files or directories.")],
    into_db: Annotated[Path, typer.Option("--into-db", help="The state.db to write (created if missing).")],
    from_: Annotated[str | None, typer.Option("--from", help="Input format (auto-detected).")] = None,
    existing: Annotated[
        bool, typer.Option("--into-existing", help="Consent to add rows to a database that already exists.")
    ] = False,
) -> None:
    from pipeline.hermes.importdb import import_sessions
    from pipeline.read.detect import normalise_format, read_sessions

    try:
        fmt = normalise_format(from_) if from_ else None
        sessions = (s for path in files for s in read_sessions(path, fmt))
        added = import_sessions(sessions, into_db, allow_existing=existing)
    except DistillError as exc:
        typer.echo(f"Error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    typer.echo(f"{added} sessions written to {into_db}", err=True)


def _tool_apps() -> dict[str, typer.Typer]:
    """Tool commands, imported only when asked for so ``distill --help`` stays fast."""
    apps: dict[str, typer.Typer] = {"import": import_app}
    from pipeline.cli.cold import archive_app, pull_app
    from pipeline.cli.gbrain import gbrain_app, push_alias_app
    from pipeline.cli.hook import hook_app
    from pipeline.cli.skills import skills_app

    apps["hook"] = hook_app
    apps["skills"] = skills_app
    apps["archive"] = archive_app
    apps["pull"] = pull_app
    apps["gbrain"] = gbrain_app
    apps["push"] = push_alias_app  # distill push --to gbrain
    from pipeline.cli.mcp import mcp_app

    apps["mcp"] = mcp_app  # the archive over MCP stdio; the SDK loads only when it runs
    from pipeline.cli.archive import ARCHIVE_APPS

    apps.update(ARCHIVE_APPS)
    return apps


#: The archive's commands (pipeline/cli/archive.py).
ARCHIVE_NAMES = ("ls", "search", "show", "load", "tag", "history", "diff", "revert", "index")
TOOL_NAMES = ("hook", "import", "skills", "archive", "pull", "gbrain", "push", "mcp", *ARCHIVE_NAMES)
#: The command line of this process's main command, for ``pipeline.cli.record``'s record of a clean run.
_invocation: list[str] | None = None
#: The environment the user started us with. The run record is keyed by it, never by ``os.environ``
#: after the run: the program sets variables itself (litellm's cost-map switch), and a key built
#: from those never matched the next run's lookup, so no unchanged re-run was ever answered.
_invocation_env: dict[str, str] | None = None


def main(argv: list[str] | None = None, env: dict[str, str] | None = None) -> None:
    global _invocation, _invocation_env
    args = list(sys.argv[1:] if argv is None else argv)
    _invocation, _invocation_env = args, dict(os.environ if env is None else env)
    try:
        if args[:1] == ["eval"]:
            # The harness (gold files, cassettes) lives in the repository, not in the wheel.
            typer.echo("Error: the eval harness is not installed with distill; from a hermes-distill "
                       "checkout run: python -m evals --help", err=True)
            raise SystemExit(EXIT_USAGE)
        if args and args[0] in TOOL_NAMES:
            tools = _tool_apps()
            if args[0] not in tools:
                typer.echo(f"Error: `distill {args[0]}` is not available in this build", err=True)
                raise SystemExit(EXIT_USAGE)
            tools[args[0]](args[1:], prog_name=f"distill {args[0]}")
            return
        app(args, prog_name="distill")
    except KeyboardInterrupt:
        # Writes are atomic and a local model server is stopped on the way out, so this is safe.
        typer.echo("Interrupted: notes already written are complete; run again to continue.", err=True)
        raise SystemExit(130) from None
    finally:
        _invocation = _invocation_env = None


def entry(env: dict[str, str] | None = None) -> None:
    """The ``distill`` command: ``main``, then, if litellm was loaded, an exit without teardown.

    Finalising the interpreter after ``import litellm`` (freeing a few thousand modules) took
    2.1-2.4 s on a 2-core machine, more than many runs' real work and paid by every post-session
    hook. By then every note, index and cache write is closed and the model server is stopped;
    exit handlers still run and output is flushed, only the teardown is skipped.
    """
    try:
        main(env=env)
        code: int | str | None = 0
    except SystemExit as exc:
        code = exc.code
    if "litellm" in sys.modules:
        import atexit

        atexit._run_exitfuncs()
        if isinstance(code, str):  # what SystemExit would have printed
            sys.stderr.write(code + "\n")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else (0 if code is None else EXIT_FAILED))
    raise SystemExit(code)


if __name__ == "__main__":
    entry()
