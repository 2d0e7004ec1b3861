"""Which file a code block with no path is, from what the block defines and what the session imports.

Cursor v0/v1 exports (SpecStory) render an applied edit as a bare fence: the new code, and no path.
The code still says what it is. ``export function LocalDebugButtons(`` is the module the session
imports with ``import { LocalDebugButtons } from '@/components/bookmark/local-debug-buttons'``, and
``class TaskService`` is what ``from app.tasks import TaskService`` loads. So the block's file is
found through the session's own import lines, never guessed from a name alone:

* the block must *define* the name (``export … function|class|const …``, a top-level Python
  ``def``/``class``); a block that only uses it says nothing;
* the session must import that name from exactly one module;
* the module becomes a path: the one path the session shows elsewhere (a stack trace, test
  output, a read) that ends with it; else, for an alias import (``@/x``, ``~/x``) or a Python
  module, the module path with the extension its sibling files use (or the block's language);
  a relative import (``./list``) with no path shown for it stays unplaced, since its base is the
  importing file, which the export does not name either.

Packages (``react``, ``@radix-ui/react-select``, ``os``) are never project files.

Java and Kotlin say it outright: ``package com.example.tourism.entity;`` and ``public class Admin``
are ``com/example/tourism/entity/Admin.java``, under the one source root the session shows for that
package (``backend/src/main/java/``), or bare when it shows none.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Iterable

# import { A, B as C } from 'x'; import D, { E } from "x"; import type { F } from 'x'; import * as G from 'x'.
# A diff's "+"/"-" marker may lead: a removed import still says where a name lives.
# The clause ends on a non-space and the spaces after "import" are taken whole (possessive), so a line
# splits one way only: a clause free to end in spaces made a hostile "import" + 2,000 spaces cost 5 s.
_JS_IMPORT = re.compile(
    r"^[+-]?[ \t]*+import[ \t]++(?:type[ \t]++)?([\w$\s{},*]{0,400}?[\w$}*])\s+from\s*['\"]([^'\"\n]+)['\"]", re.M)
_PY_IMPORT = re.compile(r"^[+-]?[ \t]*from\s+(\.*[\w.]*)\s+import\s+\(?([\w\s,]+?)\)?\s*$", re.M)
_JS_DEFINES = re.compile(
    r"^ ?export\s+(?:default\s+)?(?:declare\s+)?(?:async\s+)?(?:function\*?|class|const|let|var|interface|type|enum)"
    r"\s+([A-Za-z_$][\w$]*)|^ ?export\s+default\s+([A-Z][\w$]*)[ \t]*+;?[ \t]*+$", re.M)
# " ?": a diff shown as "+ export function …" keeps one space once its marker is stripped.
_PY_DEFINES = re.compile(r"^ ?(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.M)
_ALIAS = ("@/", "~/", "#/")
_JVM_PACKAGE = re.compile(r"^ ?package[ \t]++([a-z_]\w*+(?:\.[a-z_]\w*+)*+)[ \t]*+(;?)[ \t]*+$", re.M)
_JVM_TYPE = re.compile(
    r"^ ?((?:(?:public|internal|private|protected|final|abstract|sealed|open|data|static)[ \t]++)*+)"
    r"(?:class|interface|enum|record|object|@interface)[ \t]++([A-Z]\w*)", re.M)
_JVM_IMPORT = re.compile(r"^ ?import[ \t]++(?:static[ \t]++)?[a-z_]\w*+(?:\.\w++)++(?:\.\*)?;?[ \t]*+$", re.M)
_JVM_EXTS = {"java": "java", "kotlin": "kt", "kt": "kt", "scala": "scala"}
_JS_EXTS = ("tsx", "ts", "jsx", "js", "mjs", "cjs", "vue", "svelte")
_CODE_EXTS = (*_JS_EXTS, "py")
_JSX = re.compile(r"</[A-Za-z]|/>|\bclassName=")
_TS = re.compile(r"^\s*(?:export\s+)?(?:interface|type)\s+\w+|:\s*(?:string|number|boolean|React\.\w+)\b", re.M)


def imported_names(texts: Iterable[str]) -> dict[str, str]:
    """Name → the one module the texts import it from (names imported from two modules are dropped)."""
    return _scan(texts)[0]


def _scan(texts: Iterable[str]) -> tuple[dict[str, str], dict[str, set[str]]]:
    """One pass over the texts' import lines: ``imported_names``, and each relative module's siblings:
    the other modules one file imports with the same prefix ("./list" → {"./get", "./status"}), one
    folder, so a sibling placed for sure places an ambiguous one too."""
    seen: dict[str, set[str]] = {}
    siblings: dict[str, set[str]] = {}
    for text in texts:
        if "import" not in text:
            continue
        by_prefix: dict[str, set[str]] = {}
        for m in _JS_IMPORT.finditer(text):
            spec = m.group(2)
            for name in _js_clause_names(m.group(1)):
                seen.setdefault(name, set()).add(spec)
            if spec.startswith("."):
                by_prefix.setdefault(spec.rsplit("/", 1)[0], set()).add(spec)
        for specs in by_prefix.values():
            for spec in specs:
                siblings.setdefault(spec, set()).update(specs - {spec})
        for m in _PY_IMPORT.finditer(text):
            spec = m.group(1)
            for part in m.group(2).split(","):
                if name := part.split(" as ")[0].strip():
                    seen.setdefault(name, set()).add("py:" + spec)
    return {name: one for name, specs in seen.items() if (one := one_module(specs))}, siblings


def one_module(specs: Iterable[str]) -> str | None:
    """The one module ``specs`` name, or None when they name two.

    One file imports ``../types/storage`` and another ``@/types/storage``: two spellings of one module,
    the alias one placeable from the project root. Spellings count as one only when their paths are
    equal, or a relative one with a folder ("../cache/manager") ends the other: a bare "./utils" may be
    any folder's utils.
    """
    specs = set(specs)
    if len(specs) <= 1:
        return next(iter(specs), None)
    tails = {spec: found for spec in specs if (found := _tail(spec))}
    if len(tails) != len(specs):
        return None  # a package among them
    best = max(specs, key=lambda spec: (tails[spec][1], len(tails[spec][0]), spec))
    top = tails[best][0]
    for spec in specs:
        tail, placeable = tails[spec]
        if tail != top and (placeable or "/" not in tail or not top.endswith("/" + tail)):
            return None
    return best


def _js_clause_names(clause: str) -> list[str]:
    """The names an import clause brings in, as the exporting module spells them."""
    names = []
    braced = re.search(r"\{([^}]*)\}", clause)
    if braced:
        names += [p.split(" as ")[0].strip() for p in braced.group(1).split(",")]
    default = re.sub(r"\{[^}]*\}", "", clause).strip(" ,")
    if default and not default.startswith("*") and re.fullmatch(r"[A-Za-z_$][\w$]*", default):
        names.append(default)
    return [n.removeprefix("type ").strip() for n in names if n.strip()]


def defined_names(code: str) -> list[str]:
    """Names a block defines at its top level (JS/TS exports, Python defs and classes)."""
    names = [a or b for a, b in _JS_DEFINES.findall(code)]
    return list(dict.fromkeys([*names, *_PY_DEFINES.findall(code)]))


def _strip_ext(path: str) -> str:
    root, ext = posixpath.splitext(path)
    return root if ext.lstrip(".").lower() in _CODE_EXTS else path


def _tail(spec: str) -> tuple[str, bool] | None:
    """(the module's path without extension, whether it may be placed without a shown path)."""
    if spec.startswith("py:"):
        dotted = spec[3:]
        rel = dotted.startswith(".")
        parts = [p for p in dotted.lstrip(".").split(".") if p]
        return ("/".join(parts), not rel and len(parts) > 1) if parts else None
    for alias in _ALIAS:
        if spec.startswith(alias):
            return spec[len(alias):].strip("/"), True
    if spec.startswith((".", "/")):
        tail = re.sub(r"^(?:\.{1,2}/)+", "", spec).strip("/")
        return (tail, False) if tail and tail not in (".", "..") else None
    return None  # a package


def _same_module(a: str, b: str) -> bool:
    """Two import tails that may name one module ("domain/repo-utils" and "repo-utils")."""
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _guess_ext(code: str, tag: str, tail: str, shown: Iterable[str], spec: str) -> str:
    if spec.startswith("py:"):
        return "py"
    folder = posixpath.dirname(tail)
    siblings = Counter(posixpath.splitext(p)[1].lstrip(".") for p in shown
                       if posixpath.dirname(p).endswith(folder) and posixpath.splitext(p)[1].lstrip(".") in _CODE_EXTS)
    if folder and siblings:
        return siblings.most_common(1)[0][0]
    if tag.lower() in _CODE_EXTS:
        return tag.lower()
    typed = bool(_TS.search(code))
    if _JSX.search(code):
        return "tsx" if typed else "jsx"
    return "ts" if typed else "js"


class ModuleLocator:
    """Finds a pathless block's file in one session (see the module docstring)."""

    def __init__(self, texts: Iterable[str], shown: Iterable[str]) -> None:
        """``texts``: everything the session says (messages and tool arguments); ``shown``: the paths it shows."""
        self.imports, self.siblings = _scan(texts)
        self.shown = sorted(set(shown))

    def locate(self, code: str, tag: str = "") -> str | None:
        if jvm := self.jvm_file(code, tag):
            return jvm
        own = imported_names([code])  # a wrapper defines what it imports; no file imports itself
        spec = one_module({self.imports[n] for n in defined_names(code) if n in self.imports and n not in own})
        if spec is None:
            return None  # defines nothing imported, or the names of two modules
        found = _tail(spec)
        if found is None or any((t := _tail(o)) and _same_module(t[0], found[0]) for o in own.values()):
            return None
        tail, placeable = found
        hits = self._shown_as(tail)
        if len(hits) > 1:
            # "./list" is commands/tasks/list.ts or commands/session/list.ts: the folder of a sibling
            # import ("./status", shown once, at commands/tasks/status.ts) decides.
            folders = {posixpath.dirname(h) for sib in self.siblings.get(spec, ())
                       if (t := _tail(sib)) and len(sib_hits := self._shown_as(t[0])) == 1 for h in sib_hits}
            hits = {h for h in hits if posixpath.dirname(h) in folders} if len(folders) == 1 else hits
        if len(hits) == 1:
            return hits.pop()
        if hits or not placeable:
            return None
        return f"{tail}.{_guess_ext(code, tag, tail, self.shown, spec)}"

    def named_after(self, code: str) -> str | None:
        """The one file the session shows whose name is what the block exports: ``export function useCart`` is
        ``src/hooks/useCart.ts``, ``export class CacheManager`` is ``cacheManager.ts`` (a JS/TS convention; a
        Python module is rarely named after its defs). Two such files, or two exports naming two files: None.
        A block that holds a fence is a document quoting code (a rules file's example component), not the module."""
        if "```" in code:
            return None
        exported = {(a or b).casefold() for a, b in _JS_DEFINES.findall(code)}
        hits = {p for p in self.shown
                if posixpath.splitext(p)[1].lstrip(".").lower() in _JS_EXTS
                and _strip_ext(posixpath.basename(p)).casefold() in exported}
        hits = {p for p in hits if not any(q != p and p.endswith("/" + q) for q in hits)}
        return hits.pop() if len(hits) == 1 else None

    def jvm_file(self, code: str, tag: str = "") -> str | None:
        """A Java/Kotlin block's file from its ``package`` line and its first public (else first) type."""
        pkg = _JVM_PACKAGE.search(code) if "package" in code else None
        types = [(m.group(1), m.group(2)) for m in _JVM_TYPE.finditer(code)]
        if not types:
            return None
        name = next((n for mods, n in types if "public" in mods), types[0][1])
        if pkg is None:
            # A hunk that starts below the package line: the one file of that name the session shows.
            if not any("public" in mods for mods, _n in types) or not _JVM_IMPORT.search(code):
                return None
            hits = {p for p in self.shown if p.endswith((f"/{name}.java", f"/{name}.kt"))}
            hits = {p for p in hits if not any(q != p and p.endswith("/" + q) for q in hits)}
            return hits.pop() if len(hits) == 1 else None
        ext = _JVM_EXTS.get(tag.lower()) or ("java" if pkg.group(2) else "kt")
        rel = f"{pkg.group(1).replace('.', '/')}/{name}.{ext}"
        folder = "/" + posixpath.dirname(rel) + "/"
        roots = {("/" + p)[:("/" + p).index(folder)].lstrip("/") for p in self.shown if folder in "/" + p}
        # "/home/u/p/src/main/java" and "src/main/java" are one root: keep the shortest spelling.
        roots = {r for r in roots if not any(q != r and r.endswith("/" + q) for q in roots if q)}
        return f"{roots.pop()}/{rel}".lstrip("/") if len(roots) == 1 else rel

    def _shown_as(self, tail: str) -> set[str]:
        """The paths the session shows for a module tail, one spelling per file."""
        hits = {p for p in self.shown
                if (stem := _strip_ext(p)) == tail or stem.endswith("/" + tail) or stem.endswith("/" + tail + "/index")}
        # "/home/u/p/src/a.ts" and "src/a.ts" are one file: keep the shortest spelling.
        return {p for p in hits if not any(q != p and p.endswith("/" + q) for q in hits)}
