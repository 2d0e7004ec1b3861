"""The package map is the architecture: a layer imports only layers below it, and nothing imports
``evals/`` (it is not in the wheel). Every ``import`` in ``pipeline/`` is read with ``ast``, lazy
imports inside functions included, so a circle or an upward import fails here, not in review.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "pipeline"

#: Lowest first. A module may import its own layer and any layer with a smaller rank; the layers
#: that share a rank are peers that must not import each other (read knows nothing of facts, and
#: neither knows of LLMs).
LAYERS: dict[str, int] = {
    "contracts": 0,  # models, errors, config, atomic, resources, the package root
    "read": 1, "redact": 1, "chunk": 1, "facts": 1, "llm": 1,
    "summarize": 2,
    "notes": 3,
    "skills": 4,
    "hermes": 5, "archive": 5, "integrations": 5, "cold": 5,
    "run": 6,
    "cli": 7,
}
CONTRACTS = {"models", "errors", "config", "atomic", "resources", "screen", "__init__", "__main__"}
#: Entry points that must sit at the package root and hand straight over, lazily, to the layer that
#: does the work: Hermes loads a directory plugin by calling ``pipeline.register``.
ENTRY_SHIMS = {("pipeline", "pipeline.hermes.plugin")}


def layer_of(module: str) -> str:
    """``pipeline.summarize.cache`` → ``summarize``; top-level contract modules → ``contracts``."""
    parts = module.split(".")
    if len(parts) == 1:
        return "contracts"
    head = parts[1]
    if head in CONTRACTS:
        return "cli" if head == "__main__" else "contracts"
    if head not in LAYERS:
        raise AssertionError(f"{module}: pipeline/{head} is in no layer; add it to LAYERS and docs/architecture.md")
    return head


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import in ``path``, resolving relative ones."""
    tree = ast.parse(path.read_text("utf-8"))
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            found.append((node.lineno, base))
            # ``from pipeline.summarize import cache`` imports the module pipeline.summarize.cache
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names
                         if (PKG.parent / f"{base}.{alias.name}".replace(".", "/")).with_suffix(".py").exists())
    return found


def edges() -> list[tuple[str, int, str]]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        for line, target in imports(path):
            if target == "pipeline" or target.startswith(("pipeline.", "evals")):
                out.append((module_name(path), line, target))
    return out


def test_every_module_is_in_a_layer() -> None:
    for path in PKG.rglob("*.py"):
        layer_of(module_name(path))


def violations(found: list[tuple[str, int, str]]) -> list[str]:
    bad = []
    for source, line, target in found:
        if target.startswith("evals"):
            bad.append(f"{source}:{line} imports {target}: evals/ is not part of the package")
            continue
        if target == "pipeline" or (source, target) in ENTRY_SHIMS:
            continue  # ``from pipeline import __version__``: the root is a contract
        src, dst = layer_of(source), layer_of(target)
        if src != dst and LAYERS[dst] >= LAYERS[src]:
            bad.append(f"{source}:{line} ({src}) imports {target} ({dst})")
    return bad


def test_no_layer_imports_upward_or_a_peer() -> None:
    bad = violations(edges())
    assert not bad, "\n".join(bad)


def test_no_import_cycles_between_modules() -> None:
    graph: dict[str, set[str]] = {}
    for source, _, target in edges():
        if target != "pipeline" and not target.startswith("evals"):
            graph.setdefault(source, set()).add(target)
    for start in graph:
        stack, seen = [(start, (start,))], set()
        while stack:
            node, trail = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    pytest.fail("import cycle: " + " -> ".join((*trail, nxt)))
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, (*trail, nxt)))


def test_the_checker_catches_upward_peer_and_evals_imports() -> None:
    """The rules above are not vacuous: each kind of bad edge is reported, good ones are not."""
    found = [
        ("pipeline.summarize.mapreduce", 1, "pipeline.cli.app"),  # upward
        ("pipeline.read.hermes", 2, "pipeline.facts.derive"),  # peer
        ("pipeline.skills.promote", 3, "evals.run"),  # the harness
        ("pipeline.run.runner", 4, "pipeline.summarize.extractive"),  # downward: fine
        ("pipeline.facts.endstate", 5, "pipeline.facts.turns"),  # same layer: fine
    ]
    assert [v.split(":")[1].split(" ")[0] for v in violations(found)] == ["1", "2", "3"]


def test_lazy_imports_inside_functions_are_seen() -> None:
    found = {(s, t) for s, _, t in edges()}
    assert ("pipeline.run.runner", "pipeline.run.window") in found  # imported inside ``run``


def test_lower_layers_know_nothing_of_llms_or_the_cli() -> None:
    """read, facts, redact and chunk never import a model client or the command-line toolkit."""
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        if layer_of(module_name(path)) not in ("contracts", "read", "facts", "redact", "chunk"):
            continue
        for line, target in imports(path):
            if target.split(".")[0] in ("litellm", "instructor", "openai", "typer", "rich"):
                bad.append(f"{module_name(path)}:{line} imports {target}")
    assert not bad, "\n".join(bad)
