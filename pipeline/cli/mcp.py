"""``distill mcp``: serve the archive to an agent over MCP stdio (``pipeline.cli.mcp_server``).

This module is imported with every tool command (``pipeline.cli.app._tool_apps``), so it holds only
the typer command; the SDK and the server load when ``distill mcp`` runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pipeline.cli.archive import OutOpt, ProfileOpt, _app, _guard

mcp_app = _app("Serve the archive to an agent over MCP (stdio).")


@mcp_app.command(help=(
    "Serve the archive over MCP on stdin/stdout, for Hermes, Claude Code or any MCP client: search_sessions, "
    "list_sessions, get_session, load_session, list_skills, get_skill (read-only, results bounded in size). "
    "The client starts it; it stops when the client closes its stdin.\n\n"
    "Examples:\n\n  distill mcp --out ~/.hermes/distilled\n\n"
    "  claude mcp add distill -- distill mcp --out ~/.hermes/distilled\n\n"
    "  Hermes config.yaml:  mcp_servers: {distill: {command: distill, args: [mcp]}}"))
def mcp(
    out: OutOpt = None, profile: ProfileOpt = None,
    check: Annotated[bool, typer.Option("--check", help="Print the tools it would serve and exit.")] = False,
) -> None:
    def go() -> None:
        from pipeline.config import build_settings

        settings = build_settings(out=out, profile=profile)
        # Absolute: a host starts the server in a working folder of its own choosing.
        folder = Path(settings.out).expanduser().absolute()
        if not folder.is_dir():
            # Not fatal: the host starts the server with the agent, maybe before the first run wrote
            # a note; each tool call says how to make the archive until it exists.
            typer.echo(f"notice: no archive at {folder} yet: run `distill --all`, or pass --out", err=True)
        from pipeline.cli.mcp_server import build_server

        server = build_server(folder, Path(settings.home))
        if check:  # the tools as a client lists them, schemas built: a config can be tried without a host
            import asyncio

            names = [tool.name for tool in asyncio.run(server.list_tools())]
            typer.echo(f"distill mcp over {folder}: {', '.join(names)}")
            return
        server.run("stdio")

    _guard(go)
