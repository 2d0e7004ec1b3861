"""Locate the files that live outside the package: ``prompts/``, ``templates/`` and the demo db.

In a wheel they are copied to ``pipeline/_data/`` (see ``pyproject.toml``); in a source checkout
or an editable install they sit at the repository root. One helper hides the difference.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the directory ``name`` (``prompts``, ``templates`` or ``demo``)."""
    bundled = _PKG / "_data" / name
    if bundled.is_dir():
        return bundled
    source = _PKG.parent / ("fixtures/demo" if name == "demo" else name)
    if source.is_dir():
        return source
    raise FileNotFoundError(f"distill data directory {name!r} is missing; reinstall hermes-distill")


def demo_db() -> Path:
    return data_dir("demo") / "state.db"
