"""``distill archive`` and ``distill pull``: the commands over ``pipeline.cold``.

``archive`` composes two layers: it asks ``pipeline.run`` for the notes that are missing, then
``pipeline.cold`` for the sidecars (and the prune). ``pull`` of a note with no sidecar composes
``pipeline.cold`` (the note as a session) with ``pipeline.hermes.importdb`` (writing it).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.when import parse_age
from pipeline.config import DEFAULT_EXCLUDED_SOURCES, build_settings
from pipeline.errors import DistillError, InputError

archive_app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)
pull_app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)




def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


def _rows(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {t}" for t, n in counts.items() if n) or "no rows"


def _fail(exc: DistillError) -> typer.Exit:
    typer.echo(f"Error: {exc}", err=True)
    return typer.Exit(exc.exit_code)


def _db_fail(db: Path, exc: sqlite3.Error) -> typer.Exit:
    # A database error we did not foresee: one line naming the file, never a traceback; nothing was
    # committed (every write is one transaction).
    typer.echo(f"Error: {db}: {exc}; nothing was changed there, retry or report it", err=True)
    return typer.Exit(2)


@archive_app.command(
    help=(
        "Move ended Hermes sessions to cold storage: write each one's lossless, compressed transcript "
        "sidecar (every row of every table, as stored) beside its note, distilling the note first if "
        "needed. A session goes with its whole lineage: compression chain, branches and sub-agents.\n\n"
        "Without --prune the database is only read. With --prune the sessions are then DELETED from "
        "state.db (through `hermes sessions delete` when it is installed, else in one transaction the "
        "way Hermes does), each only after its sidecar was read back and matched the database row for "
        "row; live, recently active, pinned and compacting sessions are refused. `distill pull` brings "
        "them back.\n\n"
        "Examples:\n\n"
        "  distill archive --older-than 30d\n\n"
        "  distill archive --older-than 90d --prune --dry-run\n\n"
        "  distill archive 20261120_080000_f2a74d --prune --vacuum-into ~/state-compact.db"
    )
)
def archive(
    sessions: Annotated[list[str] | None, typer.Argument(help="Session ids (any member of a lineage).",
                                                         show_default=False)] = None,
    older_than: Annotated[str | None, typer.Option("--older-than", help="Lineages idle at least this long: 30d, 12w.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every lineage the source filters allow.")] = False,
    source: Annotated[list[str] | None, typer.Option("--source", help="Only lineages started from these sources "
                                                     f"(repeatable; default all but {', '.join(DEFAULT_EXCLUDED_SOURCES)}).")] = None,
    idle: Annotated[str, typer.Option(help="Refuse lineages active within this window (e.g. 2h, 1d).")] = "1d",
    prune: Annotated[bool, typer.Option("--prune", help="Then delete the verified sessions from state.db.")] = False,
    via: Annotated[str, typer.Option(help="How --prune deletes: auto (hermes when installed), hermes, sqlite.")] = "auto",
    vacuum_into: Annotated[Path | None, typer.Option("--vacuum-into", help="After pruning, write a compacted copy "
                                                     "of state.db here (VACUUM INTO); the original is untouched.")] = None,
    compression: Annotated[str, typer.Option(help="zstd (default) or gzip.")] = "zstd",
    db: Annotated[Path | None, typer.Option(help="state.db to archive from (default $HERMES_HOME/state.db).")] = None,
    profile: Annotated[str | None, typer.Option(help="Hermes profile: $HERMES_HOME/profiles/NAME.")] = None,
    out: Annotated[Path | None, typer.Option(help="Notes directory (default $HERMES_HOME/distilled).")] = None,
    summarizer: Annotated[str, typer.Option(help="For notes written first: auto, extractive or llm.")] = "auto",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would be archived, pruned and refused; "
                                          "write nothing.")] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
) -> None:
    from pipeline.cold import Selection
    from pipeline.cold import archive as run_archive

    try:
        if compression not in ("zstd", "gzip"):
            raise InputError(f"--compression {compression}: use zstd or gzip")
        if summarizer not in ("auto", "extractive", "llm"):
            raise InputError(f"--summarizer {summarizer!r}: use auto, extractive or llm")
        settings = build_settings(db=db, profile=profile, out=out)
        selection = Selection(refs=list(sessions or []), select_all=all_,
                              older_than=parse_age(older_than, "--older-than") if older_than else None,
                              sources=list(source or []), exclude_sources=list(DEFAULT_EXCLUDED_SOURCES))

        def ensure_notes(roots: list[str]) -> dict[str, str]:
            """Distil the lineages that have no note yet; why each one still has none."""
            from pipeline.run.runner import run

            report = run(build_settings(db=settings.db, profile=profile, out=settings.out, sessions=roots,
                                        exclude_sources=[], summarizer=summarizer))
            return {r.session_id: r.error or "; ".join(r.problems) or r.status
                    for r in report.results if r.status not in ("written", "unchanged")}

        def echo(result: object) -> None:
            if not (quiet or json_):
                typer.echo(_line(result))

        report = run_archive(settings.db, settings.out, selection, home=settings.home, ensure_notes=ensure_notes,
                             vacuum_into=vacuum_into, prune=prune, dry_run=dry_run, idle=parse_age(idle, "--idle"), via=via,
                             compression=compression, on_result=echo)
    except DistillError as exc:
        raise _fail(exc) from None
    except sqlite3.Error as exc:
        raise _db_fail(settings.db, exc) from None
    if json_:
        typer.echo(json.dumps(asdict(report), indent=2, default=str))
    elif not quiet:
        for line in _summary(report):
            typer.echo(line, err=True)
    raise typer.Exit(0)


def _line(r: object) -> str:
    from pipeline.cold import UnitResult

    assert isinstance(r, UnitResult)
    more = f" (+{len(r.sessions) - 1} in its lineage)" if len(r.sessions) > 1 else ""
    if r.status == "refused":
        return f"refused       {r.root}{more}: {r.reason}"
    if r.status in ("pruned", "would-prune"):
        return f"{r.status:<13} {r.root}{more}: {_rows(r.deleted or r.rows)}"
    size = f"{_size(r.data_bytes)} of rows → {_size(r.sidecar_bytes)}" if r.sidecar_bytes else _size(r.data_bytes)
    return f"{r.status:<13} {r.root}{more}: {_rows(r.rows)}, {size} {r.sidecar or r.note or ''}".rstrip()


def _summary(report: object) -> list[str]:
    from pipeline.cold import ArchiveReport

    assert isinstance(report, ArchiveReport)
    c = report.count
    verb = "would be " if report.dry_run else ""
    lines = [f"{len(report.results)} lineages: {c('archived', 'would-archive')} {verb}archived, "
             f"{c('unchanged')} already archived, {c('pruned', 'would-prune')} {verb}pruned, "
             f"{c('refused')} refused ({report.elapsed_s:.2f}s){'; dry run: nothing written' if report.dry_run else ''}"]
    pruned = [r for r in report.results if r.status in ("pruned", "would-prune")]
    if pruned:
        freed: dict[str, int] = {}
        for r in pruned:
            for t, n in (r.deleted or r.rows).items():
                freed[t] = freed.get(t, 0) + n
        data = sum(r.data_bytes for r in pruned)
        lines.append(f"{'would free' if report.dry_run else 'freed'}: {_rows(freed)} ({_size(data)} of row data) via {report.via}")
    b, a = report.before, report.after
    if b and a and not report.dry_run:
        lines.append(f"state.db: {_size(b.used_bytes)} in use before, {_size(a.used_bytes)} after "
                     f"(file {_size(b.file_bytes)} → {_size(a.file_bytes)}; free pages are reused by Hermes, "
                     "`hermes sessions optimize` or --vacuum-into returns them)")
    sidecars = [r for r in report.results if r.sidecar_bytes]
    if sidecars:
        raw = sum(r.data_bytes for r in sidecars)
        side = sum(r.sidecar_bytes for r in sidecars)
        lines.append(f"sidecars: {_size(side)} for {_size(raw)} of row data ({side / max(raw, 1):.2f})")
    if report.vacuum_into:
        lines.append(f"compacted copy: {report.vacuum_into} ({_size(report.vacuum_bytes)}); swap it in while "
                     "Hermes is stopped")
    lines.extend(f"note: {n}" for n in report.notices)
    return lines


@pull_app.command(
    help=(
        "Restore an archived session (and its lineage) from its sidecar into a Hermes state.db: the "
        "rows byte for byte, ids kept where free and remapped where taken, so `hermes sessions list`, "
        "`hermes --resume` and session_search see it again. This WRITES to the database (the user's "
        "state.db unless --into-db names another, created if missing). A note with no sidecar (or from "
        "another agent's transcript) becomes a new session whose first message is the note's summary, "
        "as reference context.\n\n"
        "Examples:\n\n"
        "  distill pull 20261120_080000_f2a74d\n\n"
        "  distill pull 20261120_080000_f2a74d 20261121_101748_56947a\n\n"
        "  distill pull ~/.hermes/distilled/2026/11/2026-11-20-fix-parser-f2a74d.md --into-db /tmp/restored.db\n\n"
        "  distill pull --from gbrain --query \"sqlite reader\"   (pages back into the notes)"
    )
)
def pull(
    refs: Annotated[list[str] | None, typer.Argument(help="Session ids, notes (.md) or sidecar files; with "
                                                     "--from gbrain, page slugs.", show_default=False)] = None,
    into_db: Annotated[Path | None, typer.Option("--into-db", help="state.db to restore into "
                                                 "(default: --db, else $HERMES_HOME/state.db).")] = None,
    from_: Annotated[str, typer.Option("--from", help="Where archives are found: notes (the notes directory), "
                                       "or gbrain (pages back into the notes: `distill gbrain pull`).")] = "notes",
    query: Annotated[str | None, typer.Option("--query", help="With --from gbrain: pull the pages a gbrain "
                                              "search finds.")] = None,
    theirs: Annotated[bool, typer.Option("--theirs", help="With --from gbrain: on a conflict take gbrain's "
                                         "version.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="With --from gbrain: show what would change.")] = False,
    summary_only: Annotated[bool, typer.Option("--summary-only", help="Restore the note's summary as a new "
                                               "session, even when its sidecar exists.")] = False,
    db: Annotated[Path | None, typer.Option(help="The Hermes state.db (default $HERMES_HOME/state.db).")] = None,
    profile: Annotated[str | None, typer.Option(help="Hermes profile: $HERMES_HOME/profiles/NAME.")] = None,
    out: Annotated[Path | None, typer.Option(help="Notes directory (default $HERMES_HOME/distilled).")] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    if from_ == "gbrain":
        # Pages come back as notes, not rows: the same command as `distill gbrain pull`.
        from pipeline.cli import gbrain

        gbrain.pull(slugs=refs, query=query, out=out, profile=profile, theirs=theirs, dry_run=dry_run, json_=json_)
        return
    if not refs:
        raise _fail(InputError("distill pull: name at least one session id, note or sidecar "
                               "(or --from gbrain SLUG | --query Q)"))
    if query or theirs or dry_run:
        raise _fail(InputError("--query, --theirs and --dry-run apply to `distill pull --from gbrain` only"))
    from pipeline.cold.pull import NoteOnly, session_from_note
    from pipeline.cold.pull import pull as run_pull

    settings = build_settings(db=db, profile=profile, out=out)
    target = Path(into_db).expanduser() if into_db else settings.db
    from pipeline.cold.rows import connect

    done: list[dict[str, object]] = []
    conn: sqlite3.Connection | None = None
    # One lineage at a time, each in its own transaction: an error stops at that reference, and
    # everything pulled before it stays pulled (the message says which one failed).
    for ref in refs:
        try:
            if conn is None and len(refs) > 1 and target.is_file():
                conn = connect(target, write=True)
            result = run_pull(ref, out=settings.out, into=target, source=from_, summary_only=summary_only,
                              conn=conn)
            if isinstance(result, NoteOnly):
                from pipeline.hermes.importdb import import_sessions

                session = session_from_note(result)
                import_sessions([session], target, allow_existing=True)
                done.append({"db": str(target), "note": str(result.note), "session": session.id, "from_note": True})
                if not json_:
                    typer.echo(f"restored {session.id} into {target} from the note's summary only: {result.note} "
                               "has no sidecar, so the original messages are not restored; its first message "
                               "holds the summary as reference context")
                continue
        except DistillError as exc:
            raise _fail(exc) from None
        except sqlite3.Error as exc:
            raise _db_fail(target, exc) from None
        done.append(asdict(result))
        if not json_:
            _echo_pull(result)
    if conn is not None:
        conn.close()
    if json_:
        typer.echo(json.dumps(done if len(done) > 1 else done[0], indent=2, default=str))
    raise typer.Exit(0)


def _echo_pull(result: object) -> None:
    from pipeline.cold import PullResult

    assert isinstance(result, PullResult)
    restored = ", ".join(result.restored) or "nothing"
    typer.echo(f"restored {restored} into {result.db}{' (new file)' if result.created else ''}: {_rows(result.rows)}")
    if result.already:
        typer.echo(f"already there, identical: {', '.join(result.already)}")
    for old, new in result.remapped.items():
        typer.echo(f"remapped {old} → {new} (that id holds other rows here)")
    for notice in result.notices:
        typer.echo(f"note: {notice}")
