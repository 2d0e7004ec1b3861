"""Load the summariser prompts from ``prompts/*.j2``.

Each template starts with ``{# version: N #}`` and defines two macros, ``system()`` and
``user()``, rendered with the same variables. We render them ourselves in a sandboxed
environment with ``StrictUndefined`` and never pass ``context=`` to instructor: instructor would
render every message as Jinja a second time and silently rewrite ``{{ }}`` in a transcript.
Session text is always a template *variable*, never template source.

``Prompt.key`` (name, version and a hash of the file's bytes) goes into every cache key, so
editing a prompt is a clean cache miss even if someone forgets to bump the version.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

from pipeline.resources import data_dir

_VERSION = re.compile(r"\A\s*\{#\s*version:\s*(\d+)\s*#\}")


class PromptError(ValueError):
    """A prompt file is missing, has no version line or lacks a macro."""


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    source: str = field(repr=False)
    sha256: str

    @property
    def key(self) -> str:
        return f"{self.name}@v{self.version}:{self.sha256[:16]}"

    def render(self, **variables: Any) -> tuple[str, str]:
        """Return ``(system, user)`` message texts."""
        module = _environment().from_string(self.source).make_module(variables)
        try:
            system, user = module.system, module.user  # type: ignore[attr-defined]
        except AttributeError as e:
            raise PromptError(f"prompts/{self.name}.j2 must define macros system() and user()") from e
        return _tidy(str(system())), _tidy(str(user()))


@lru_cache(maxsize=1)
def _environment():  # type: ignore[no-untyped-def]
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=False)


@cache
def load_prompt(name: str) -> Prompt:
    """Load ``prompts/<name>.j2``; the first line must be ``{# version: N #}``."""
    path = data_dir("prompts") / f"{name}.j2"
    try:
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise PromptError(f"prompt {name!r} not found at {path}") from e
    m = _VERSION.match(source)
    if not m:
        raise PromptError(f"{path} must start with '{{# version: N #}}'")
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    return Prompt(name=name, version=int(m.group(1)), source=source, sha256=digest)


def _tidy(text: str) -> str:
    # Template control lines leave runs of blank lines; they only cost tokens.
    return re.sub(r"\n{3,}", "\n\n", text).strip()
