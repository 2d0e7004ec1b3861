"""``distill hook install|uninstall|status|run``: the commands over ``pipeline.hermes.hook``.

``install``/``uninstall`` print a unified diff and change nothing without ``--apply``; ``run`` is
the shell-hook entry point Hermes calls at session end.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import typer

from pipeline.config import hermes_home
from pipeline.errors import DistillError
from pipeline.hermes import plugin as hp
from pipeline.hermes.hook import (
    Step,
    apply_change,
    entry_point_installed,
    is_distill_command,
    plan,
    plugin_steps,
    profile_dir,
    shell_steps,
    status_data,
)

hook_app = typer.Typer(
    name="hook",
    help="Run distill when Hermes ends a session (plugin or shell hook). Example: distill hook install --apply",
    no_args_is_help=True,
)

ProfileOpt = typer.Option(
    None, "--profile", "-p", help="Hermes profile (default: $HERMES_HOME or ~/.hermes)."
)
ApplyOpt = typer.Option(
    False, "--apply", help="Write the changes (after a .bak backup). Without it, only show the diff."
)



def _fail(exc: DistillError) -> typer.Exit:
    typer.echo(f"Error: {exc}", err=True)
    return typer.Exit(exc.exit_code)


def _execute(home: Path, steps: list[Step], apply: bool) -> None:
    try:
        changes = [c for c in plan(home, steps) if c.changed]
    except DistillError as exc:
        raise _fail(exc) from exc
    if not changes:
        typer.echo("Nothing to change: already in that state.")
        return
    for c in changes:
        if c.note:
            typer.echo(f"note: {c.note}")
        typer.echo(c.diff(), nl=False)
    if not apply:
        typer.echo("Dry run: nothing changed. Re-run with --apply to write these edits.")
        return
    for c in changes:
        backup = apply_change(c)
        typer.echo(f"wrote {c.path}" + (f" (backup: {backup})" if backup else ""))


@hook_app.command()
def install(
    profile: str | None = ProfileOpt,
    shell: bool = typer.Option(False, "--shell", help="Use a config.yaml shell hook instead of the plugin."),
    apply: bool = ApplyOpt,
    command: str | None = typer.Option(
        None, "--command", help="Shell-hook command to install (default: this distill)."
    ),
) -> None:
    """Show (or with --apply make) the edits that run distill at session end. Example: distill hook install --shell --apply"""
    home = profile_dir(profile)
    if command is not None and not is_distill_command(command):
        typer.echo(f"warning: `uninstall` will not recognise {command!r} as distill's hook", err=True)
    _execute(home, shell_steps(True, command) if shell else plugin_steps(True), apply)
    if not shell:
        flag = f"-p {shlex.quote(profile)} " if profile and profile != "default" else ""
        typer.echo(f"Equivalent Hermes command: hermes {flag}plugins enable {hp.PLUGIN_NAME}")
        if not entry_point_installed():
            typer.echo(
                "warning: the hermes_agent.plugins entry point 'distill' is not installed in this Python; "
                "Hermes only finds the plugin if hermes-distill is installed in Hermes's own environment. "
                "Otherwise use: distill hook install --shell --apply",
                err=True,
            )
    typer.echo("Hermes reads config.yaml at startup: restart running gateways to pick this up.")


@hook_app.command()
def uninstall(profile: str | None = ProfileOpt, apply: bool = ApplyOpt) -> None:
    """Show (or with --apply make) the edits that remove the plugin and shell hook. Example: distill hook uninstall --apply"""
    _execute(profile_dir(profile), plugin_steps(False) + shell_steps(False), apply)


@hook_app.command()
def status(
    profile: str | None = ProfileOpt, as_json: bool = typer.Option(False, "--json", help="Print JSON.")
) -> None:
    """Say what is installed and when the hook last ran. Example: distill hook status --json"""
    info = status_data(profile_dir(profile))
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    p, shells = info["plugin"], info["shell_hooks"]
    typer.echo(f"profile home: {info['home']}")
    typer.echo(
        f"plugin: {'enabled' if p['enabled'] else 'disabled in config' if p['disabled'] else 'not enabled'}"
        f" (entry point {'installed' if p['entry_point_installed'] else 'not installed'} in this Python)"
    )
    for s in shells:
        typer.echo(
            f"shell hook: {s['command']} ({'allowlisted' if s['allowlisted'] else 'NOT allowlisted: gateway/cron runs skip it'})"
        )
    if not shells:
        typer.echo("shell hook: not installed")
    if p["enabled"] and shells:
        typer.echo(
            "note: both plugin and shell hook are on; each session end starts two workers (the lock makes the second a no-op)",
            err=True,
        )
    last = info.get("last_run")
    if last:
        typer.echo(
            f"last run: session {last.get('session_id')} via {last.get('trigger')}, "
            f"exit {last.get('exit_code')}, finished {last.get('finished_at')}"
        )
    else:
        typer.echo("last run: never")
    typer.echo(f"log: {info['log']}")
    for err in info["errors"]:
        typer.echo(f"Error: {err}", err=True)


@hook_app.command()
def run() -> None:
    """Shell-hook entry point: read Hermes's JSON payload on stdin, detach distill, print {}.

    Example: echo '{"session_id": "20261202_101010_ab12cd"}' | distill hook run
    """
    try:
        raw = sys.stdin.read()
        payload = json.loads(raw) if raw.strip() else {}
        if not isinstance(payload, dict):
            raise ValueError("payload is not a JSON object")
        extra = payload.get("extra") if isinstance(payload.get("extra"), dict) else {}
        event = payload.get("hook_event_name")
        if event and event != hp.HOOK_EVENT:
            typer.echo(f"distill hook run: ignoring event {event!r}", err=True)
        elif not hp.skip_reason(payload.get("session_id"), extra.get("platform")):
            profile = payload.get("profile") if isinstance(payload.get("profile"), str) else None
            hp.spawn_distill(
                payload["session_id"], hermes_home=hermes_home(), profile=profile, trigger="shell"
            )
    except Exception as exc:  # a hook must answer Hermes whatever happens
        typer.echo(f"distill hook run: {exc}", err=True)
    typer.echo("{}")

