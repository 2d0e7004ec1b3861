"""``distill eval``: run the eval harness in ``evals/`` from the repository checkout.

The harness (gold files, cassettes, reports) lives beside the package, not in the wheel, so this
command imports ``evals`` from the checkout: the current directory or ``DISTILL_EVALS_ROOT``.
Without a checkout it says so and exits 2.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

eval_app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)


def _checkout() -> Path | None:
    for base in (os.environ.get("DISTILL_EVALS_ROOT"), str(Path.cwd()), str(Path(__file__).resolve().parent.parent)):
        if base and (Path(base) / "evals" / "gold").is_dir():
            return Path(base)
    return None


@eval_app.command(
    name="eval",
    help=(
        "Score summarisers on the eval set (evals/) and write reports to evals/reports/.\n\n"
        "Replays recorded cassettes by default: no model, no network.\n\n"
        "Examples:\n\n"
        "  distill eval\n\n"
        "  distill eval --summarizer extractive\n\n"
        "  distill eval --model openai/qwen2.5-coder-1.5b-instruct --api-base http://127.0.0.1:8766/v1 --record"
    )
)
def eval_(
    summarizer: Annotated[str, typer.Option(help="extractive, llm or all.")] = "all",
    model: Annotated[str | None, typer.Option(help="litellm model string (replayed if recorded).")] = None,
    api_base: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint for --model.")] = None,
    record: Annotated[bool, typer.Option(help="Re-record --model's cassettes (and the judge's).")] = False,
    case: Annotated[list[str] | None, typer.Option(help="Only this case id (repeatable).")] = None,
    no_plot: Annotated[bool, typer.Option(help="Skip the PNG.")] = False,
) -> None:
    root = _checkout()
    if root is None:
        typer.echo("Error: evals/ not found; run `distill eval` from a hermes-distill checkout "
                   "or set DISTILL_EVALS_ROOT", err=True)
        raise typer.Exit(2)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from evals.__main__ import main as evals_main

    argv = ["--summarizer", summarizer]
    argv += ["--model", model] if model else []
    argv += ["--api-base", api_base] if api_base else []
    argv += ["--record"] if record else []
    argv += ["--no-plot"] if no_plot else []
    for c in case or []:
        argv += ["--case", c]
    raise typer.Exit(evals_main(argv))
