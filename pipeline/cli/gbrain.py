"""``distill gbrain push|pull`` (and ``distill push --to gbrain``): a thin mirror of
``pipeline.integrations.gbrain_sync``. Library errors become one ``Error: ...`` line (exit 2 for
bad input or an unusable gbrain); a run where some notes failed or conflicted exits 1.

``pull_from_gbrain`` is re-exported here so ``distill pull --from gbrain`` (cold storage's
command) can hand over to it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from pipeline.errors import DistillError, InputError
from pipeline.integrations.gbrain_page import DEFAULT_PREFIX
from pipeline.integrations.gbrain_sync import (
    PullItem,
    PullReport,
    PushItem,
    PushReport,
    pull_from_gbrain,
    push_to_gbrain,
)

__all__ = ["gbrain_app", "pull_from_gbrain", "push_alias_app", "push_to_gbrain"]

gbrain_app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                         help="Push notes to gbrain as pages, and pull pages (with a person's edits) back.")

OutOpt = Annotated[Path | None, typer.Option("--out", help="Distill output directory (default $HERMES_HOME/distilled).")]
ProfileOpt = Annotated[str | None, typer.Option(help="Hermes profile: $HERMES_HOME/profiles/NAME.")]
PrefixOpt = Annotated[str, typer.Option("--prefix", help="Slug prefix of the pages in gbrain.")]
TransportOpt = Annotated[
    str, typer.Option("--transport", help="cli: `gbrain call` per operation (put_page extracts links); mcp: one "
                                            "`gbrain serve` for the run, links added with add_link.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors and the summary.")]


def _out(out: Path | None, profile: str | None) -> Path:
    from pipeline.config import build_settings

    return build_settings(out=out, profile=profile).out


def _transport(value: str) -> Any:
    if value not in ("cli", "mcp"):
        raise InputError(f"--transport {value!r}: use cli or mcp")
    return value


def _guard(fn: Callable[[], int]) -> None:
    try:
        code = fn()
    except DistillError as exc:
        typer.echo(f"Error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("Interrupted: pages pushed so far are recorded; run the same command again to go on.", err=True)
        raise typer.Exit(130) from None
    raise typer.Exit(code)


def _push_line(item: PushItem) -> str:
    extra = []
    if item.tags_removed:
        extra.append(" ".join(f"-tag {t}" for t in item.tags_removed))
    if item.links_added:
        extra.append(f"+{item.links_added} link(s)")
    if item.version and item.action in ("created", "updated"):
        extra.append(f"version {item.version}")
    if item.error:
        extra.append(item.error)
    tail = f"  ({'; '.join(extra)})" if extra else ""
    return f"{item.action:<12} {item.slug or item.note}{tail}"


def _push_summary(r: PushReport) -> str:
    n = len(r.items)
    if r.dry_run:
        return (f"{n} notes: {r.count('would-create')} would be created, {r.count('would-update')} updated, "
                f"{r.count('unchanged')} unchanged, {r.count('failed')} unreadable (dry run: nothing sent)")
    projects = f", {len(r.projects_created)} project page(s) created" if r.projects_created else ""
    return (f"{n} notes: {r.count('created')} created, {r.count('updated')} updated, {r.count('unchanged')} "
            f"unchanged, {r.count('failed')} failed; {r.links_added} link(s) added{projects} → gbrain "
            f"({r.transport}, {r.brain}) in {r.seconds:.1f}s")


def _pull_line(item: PullItem) -> str:
    where = f"{item.note} ← {item.slug}" if item.note else item.slug
    return f"{item.action:<12} {where}" + (f"  ({item.detail})" if item.detail else "")


def _pull_summary(r: PullReport) -> str:
    return (f"{len(r.items)} pages: {r.count('created', 'would-create')} created, "
            f"{r.count('updated', 'would-update')} updated, {r.count('unchanged')} unchanged, "
            f"{r.count('conflict')} conflicts, {r.count('failed')} failed ← gbrain ({r.transport}, {r.brain}) "
            f"in {r.seconds:.1f}s" + (" (dry run: nothing written)" if r.dry_run else ""))


def run_push(refs: list[str], *, since: str | None, all_: bool, out: Path | None, profile: str | None, prefix: str,
             transport: str, dry_run: bool, force: bool, json_: bool, quiet: bool) -> int:
    from pipeline.cli.when import parse_when

    report = push_to_gbrain(
        _out(out, profile), refs=refs, since=parse_when(since) if since else None, all_=all_, prefix=prefix,
        transport=_transport(transport), dry_run=dry_run, force=force,
        on_item=None if (json_ or quiet) else (lambda item: typer.echo(_push_line(item))),
    )
    if json_:
        typer.echo(report.model_dump_json(indent=2))
    else:
        if quiet:
            for item in report.items:
                if item.action == "failed":
                    typer.echo(_push_line(item))
        typer.echo(_push_summary(report), err=True)
    return 1 if report.count("failed") else 0


@gbrain_app.command(help=(
    "Push notes to gbrain, one page per note, through `gbrain call put_page` (or one `gbrain serve` with "
    "--transport mcp). An unchanged note sends nothing and makes no new gbrain version; a changed note makes "
    "exactly one; a tag removed from the note is removed in gbrain. What was pushed is kept in "
    "<out>/.distill/gbrain.db, so a push that stopped goes on where it stopped.\n\n"
    "Examples:\n\n"
    "  distill gbrain push --all\n\n"
    "  distill gbrain push --since yesterday --dry-run\n\n"
    "  distill gbrain push 20261130_101500_abc123 --transport mcp"))
def push(
    refs: Annotated[list[str] | None, typer.Argument(help="Session ids, note paths or page slugs.",
                                                     show_default=False)] = None,
    since: Annotated[str | None, typer.Option(help="Notes of sessions active (or notes changed) since: yesterday, "
                                                   "6h, 2026-11-30.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every note.")] = False,
    out: OutOpt = None, profile: ProfileOpt = None, prefix: PrefixOpt = DEFAULT_PREFIX,
    transport: TransportOpt = "cli",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change; send nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Send every selected page again (gbrain still skips "
                                                        "identical ones).")] = False,
    json_: JsonOpt = False, quiet: QuietOpt = False,
) -> None:
    _guard(lambda: run_push(refs or [], since=since, all_=all_, out=out, profile=profile, prefix=prefix,
                            transport=transport, dry_run=dry_run, force=force, json_=json_, quiet=quiet))


@gbrain_app.command(help=(
    "Pull gbrain pages back into the archive as notes. A page distill pushed and a person edited in gbrain "
    "becomes the note's new version, their additions kept under Notes; a note changed here as well is never "
    "overwritten: the conflict is reported and gbrain's version saved beside it for comparison.\n\n"
    "Examples:\n\n"
    "  distill gbrain pull conversations/distill/2026-11-30-fix-flaky-sqlite-reader-abc123\n\n"
    "  distill gbrain pull --query \"sqlite reader\" --limit 5\n\n"
    "  distill gbrain pull conversations/distill/2026-11-30-fix-flaky-sqlite-reader-abc123 --theirs"))
def pull(
    slugs: Annotated[list[str] | None, typer.Argument(help="Page slugs.", show_default=False)] = None,
    query: Annotated[str | None, typer.Option("--query", help="Pull the pages a gbrain search finds.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many search hits.")] = 10,
    out: OutOpt = None, profile: ProfileOpt = None, prefix: PrefixOpt = DEFAULT_PREFIX,
    transport: TransportOpt = "cli",
    theirs: Annotated[bool, typer.Option("--theirs", help="On a conflict take gbrain's version (yours is saved "
                                                          "under .distill/gbrain/conflicts/).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change; write nothing.")] = False,
    json_: JsonOpt = False,
) -> None:
    def go() -> int:
        report = pull_from_gbrain(
            _out(out, profile), slugs=slugs or [], query=query, limit=limit, prefix=prefix,
            transport=_transport(transport), theirs=theirs, dry_run=dry_run,
            on_item=None if json_ else (lambda item: typer.echo(_pull_line(item))))
        if json_:
            typer.echo(report.model_dump_json(indent=2))
        else:
            if query and not report.items:
                typer.echo(f"no gbrain page matches {query!r}", err=True)
            typer.echo(_pull_summary(report), err=True)
        return 1 if report.count("conflict", "failed") else 0

    _guard(go)


push_alias_app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)


@push_alias_app.command(help=(
    "Push notes to a knowledge base: `distill push --to gbrain ...` is `distill gbrain push ...`.\n\n"
    "Example: distill push --to gbrain --since yesterday"))
def push_to(
    to: Annotated[str, typer.Option("--to", help="Where to push: gbrain.")],
    refs: Annotated[list[str] | None, typer.Argument(help="Session ids, note paths or page slugs.",
                                                     show_default=False)] = None,
    since: Annotated[str | None, typer.Option(help="Notes of sessions active since: yesterday, 6h, 2026-11-30.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every note.")] = False,
    out: OutOpt = None, profile: ProfileOpt = None, prefix: PrefixOpt = DEFAULT_PREFIX,
    transport: TransportOpt = "cli",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change; send nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Send every selected page again.")] = False,
    json_: JsonOpt = False, quiet: QuietOpt = False,
) -> None:
    def go() -> int:
        if to != "gbrain":
            raise InputError(f"--to {to!r}: distill pushes to gbrain only (`distill push --to gbrain`)")
        return run_push(refs or [], since=since, all_=all_, out=out, profile=profile, prefix=prefix,
                        transport=transport, dry_run=dry_run, force=force, json_=json_, quiet=quiet)

    _guard(go)

