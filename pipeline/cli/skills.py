"""``distill skills …``: list candidates, review pending skills, approve, reject, diff, promote.

A thin mirror of ``pipeline.skills.promote`` and ``pipeline.skills.store``; library errors become one
``Error: …`` line and exit code (2 for usage, as in cli.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from pipeline.config import build_settings
from pipeline.errors import DistillError

skills_app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                         help="Turn procedures that recur across sessions into reviewed SKILL.md files.")

OutOpt = Annotated[Path | None, typer.Option("--out", help="Distill output directory (default $HERMES_HOME/distilled).")]
ProfileOpt = Annotated[str | None, typer.Option(help="Hermes profile: $HERMES_HOME/profiles/NAME.")]


def _settings(out: Path | None, profile: str | None, **fields: Any) -> Any:
    return build_settings(out=out, profile=profile, **fields)


def _guard(fn: Callable[[], None]) -> None:
    try:
        fn()
    except DistillError as exc:
        typer.echo(f"Error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None


def _store(out: Path | None, profile: str | None) -> Any:
    from pipeline.skills.store import SkillStore

    s = _settings(out, profile)
    return SkillStore(s.out, s.home)


@skills_app.command(help="List recurring procedures with their evidence sessions and a score.\n\n"
                         "Example: distill skills candidates --min-sessions 3")
def candidates(
    out: OutOpt = None, profile: ProfileOpt = None,
    min_sessions: Annotated[int, typer.Option(help="Successful sessions a cluster needs.")] = 3,
    lexical_only: Annotated[bool, typer.Option("--lexical-only", help="Skip the embedding model.")] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    from pipeline.skills.promote import Thresholds, find_candidates

    def go() -> None:
        found = find_candidates(_settings(out, profile), thresholds=Thresholds(min_sessions=min_sessions),
                                embedder=not lexical_only)
        if json_:
            pair = found.closest()
            typer.echo(json.dumps({
                "embedder": found.embedder, "candidates": [c.model_dump(mode="json") for c in found.candidates],
                "sessions": len(found.sessions), "successful": found.successful, "threshold": found.threshold,
                "min_sessions": found.min_sessions, "largest_group_successful": found.largest,
                "closest_pair": {"sessions": list(pair[:2]), "similarity": round(pair[2], 4)} if pair else None,
                "declined": found.declined}, indent=2))
            return
        if not found.candidates:
            typer.echo(found.explain(), err=True)
        for c in found.candidates:
            typer.echo(f"{c.score:.3f}  {c.name}  ({len(c.sessions)} sessions, cohesion {c.cohesion:.2f})")
            for sid in c.sessions:
                typer.echo(f"         {sid}")

    _guard(go)


@skills_app.command(help="Stage a skill for every candidate (what the nightly run does).\n\n"
                         "Example: distill skills propose --summarizer extractive")
def propose(
    out: OutOpt = None, profile: ProfileOpt = None,
    summarizer: Annotated[str, typer.Option(help="auto, extractive or llm.")] = "auto",
    min_sessions: Annotated[int, typer.Option(help="Successful sessions a cluster needs.")] = 3,
) -> None:
    from pipeline.skills.promote import Thresholds
    from pipeline.skills.promote import propose as propose_all

    def go() -> None:
        notices: list[str] = []
        results = propose_all(_settings(out, profile, summarizer=summarizer),
                              thresholds=Thresholds(min_sessions=min_sessions), notices=notices)
        for r in results:
            typer.echo(f"{r.status:<9} {r.name}  {r.path or ''}" + (f"  ({r.note})" if r.note else ""))
        for n in notices:
            typer.echo(n, err=True)

    _guard(go)


@skills_app.command(help="Stage a skill from one session, chosen by hand.\n\n"
                         "Example: distill skills promote 20261130_101500_abc123")
def promote(
    session_id: Annotated[str, typer.Argument(help="Session id or exact title.")],
    out: OutOpt = None, profile: ProfileOpt = None,
    db: Annotated[Path | None, typer.Option(help="state.db, when the session is not distilled yet.")] = None,
    summarizer: Annotated[str, typer.Option(help="auto, extractive or llm.")] = "auto",
) -> None:
    from pipeline.skills.promote import promote_session

    def go() -> None:
        notices: list[str] = []
        path = promote_session(session_id, _settings(out, profile, db=db, summarizer=summarizer), notices=notices)
        for n in notices:
            typer.echo(n, err=True)
        typer.echo(str(path))
        typer.echo(f"review it, then: distill skills approve {path.parent.name}", err=True)

    _guard(go)


@skills_app.command(help="List skills waiting for review.\n\nExample: distill skills pending")
def pending(out: OutOpt = None, profile: ProfileOpt = None) -> None:
    def go() -> None:
        items = _store(out, profile).pending()
        if not items:
            typer.echo("no pending skills", err=True)
        for p in items:
            what = f"update of {p.replaces}" if p.replaces else "new"
            typer.echo(f"{p.name}  v{p.version}  {what}  ({len(p.evidence)} sessions)  {p.path}")
            if p.description:
                typer.echo(f"    {p.description[:100]}")

    _guard(go)


@skills_app.command(help="Show what approving would change, as a unified diff.\n\nExample: distill skills diff NAME")
def diff(name: str, out: OutOpt = None, profile: ProfileOpt = None) -> None:
    from pipeline.skills.store import check_name

    _guard(lambda: typer.echo(_store(out, profile).diff(check_name(name)), nl=False))


@skills_app.command(help="Publish a pending skill. Never overwrites a skill someone edited.\n\n"
                         "Example: distill skills approve deploy-docs --into-hermes")
def approve(
    name: str, out: OutOpt = None, profile: ProfileOpt = None,
    into_hermes: Annotated[bool, typer.Option("--into-hermes", help="Write under $HERMES_HOME/skills/distill/.")] = False,
) -> None:
    from pipeline.skills.store import check_name

    def go() -> None:
        result = _store(out, profile).approve(check_name(name), into_hermes=into_hermes)
        typer.echo(f"published {result.name} v{result.version} → {result.path}")
        if result.external_dirs_line:
            typer.echo("Add this to Hermes's config.yaml (once) so Hermes loads it:\n" + result.external_dirs_line)

    _guard(go)


@skills_app.command(help="Decline a pending skill; the same candidate is not proposed again.\n\n"
                         "Example: distill skills reject NAME")
def reject(name: str, out: OutOpt = None, profile: ProfileOpt = None) -> None:
    from pipeline.skills.store import check_name

    def go() -> None:
        _store(out, profile).reject(check_name(name))
        typer.echo(f"rejected {name}; it will not be proposed again")

    _guard(go)
