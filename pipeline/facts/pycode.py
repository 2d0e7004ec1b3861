"""Which files a Python script writes, from its syntax tree: Hermes's ``execute_code`` tool.

Hermes runs scripts that do their work two ways, and both leave the file in the code itself:

* through the tools it exposes to the script (``from hermes_tools import write_file, patch, terminal``):
  ``write_file("docs/plan.md", text)``, ``patch("src/a.py", old, new)``, ``terminal("mv a b")``;
* through plain Python: ``open("out.csv", "w")``, ``Path("a.md").write_text(…)``,
  ``shutil.copy(src, "b.txt")``, ``df.to_csv("t.csv")``, ``prs.save("deck.pptx")``, ``os.system("…")``.

Only paths the code always builds the same way count: literals, names bound once at the top of the script
(``OUT_DIR = "/u/out"``, ``OUT = os.path.join(OUT_DIR, "report.docx")``) and f-strings, joins and ``/`` of
those; a path computed at run time (a loop variable, a call's result) names no particular file. Code that does
not parse names nothing. Shell strings go through ``shell_file_ops``, like any command.
"""

from __future__ import annotations

import ast
import functools
import posixpath
import re
from collections.abc import Callable

from pipeline.facts.shell import shell_file_ops
from pipeline.models import FileAction

#: Methods whose first argument is the file an object writes itself to (pandas, matplotlib,
#: python-pptx/docx/openpyxl, PIL, plotly).
_SAVE_METHODS = frozenset({"save", "savefig", "to_csv", "to_excel", "to_json", "to_parquet", "to_html", "to_markdown",
                           "to_pickle", "write_image", "write_html", "to_file"})
_WRITE_MODES = re.compile(r"[wax+]")
#: Every call ``code_file_ops`` reads has one of these in its name (``run``/``call``/``Popen`` count only with
#: ``shell=``): a script with none of them writes nothing this module can see.
_MAY_WRITE = re.compile(r"write_|patch|terminal|system|shell|open|copy|move|save|to_")
_HAS_EXT = re.compile(r"[^/]\.[A-Za-z0-9]{1,8}$")


@functools.lru_cache(maxsize=256)
def code_file_ops(code: str) -> tuple[tuple[str, FileAction, str | None], ...]:
    """File effects of a Python script: (path as written, action, base dir or None).

    Cached: the summary asks ``file_touches`` of each phase and topic again, and a script the session wrote
    would be parsed once per asking (``ast.parse`` was a sixth of a cold run's extractive summary)."""
    if not _MAY_WRITE.search(code):
        return ()  # no call below can be in it: parsing a module that only computes costs ~50 µs for nothing
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return ()
    names = _literal_names(tree)
    ops: list[tuple[str, FileAction, str | None]] = []
    read: set[str] = set()  # a file the script reads and then writes is edited, not created
    # A test's ``from unittest.mock import patch`` makes ``patch("httpx.Client")`` a mock of a name, not Hermes's edit.
    mocks = any(isinstance(n, ast.ImportFrom) and n.module in ("unittest.mock", "mock")
                and any(a.name == "patch" for a in n.names) for n in ast.walk(tree))

    def lit(node: ast.AST | None) -> str | None:
        return _const_path(node, names)

    def text(node: ast.AST | None) -> str | None:
        # A shell command only as written out: one assembled from parts (``f"python3 -c '{script}'"``) breaks
        # the quoting it is pasted into, and its words would be read as redirections and files.
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        return names.get(node.id) if isinstance(node, ast.Name) and node.id in names.plain else None

    def arg(call: ast.Call, pos: int, kw: str, reader: Callable[[ast.AST | None], str | None] = lit) -> str | None:
        if len(call.args) > pos:
            return reader(call.args[pos])
        return next((reader(k.value) for k in call.keywords if k.arg == kw), None)

    def command_arg(call: ast.Call, pos: int, kw: str) -> str | None:
        return arg(call, pos, kw, text)

    # ast.walk goes breadth first; source order keeps "first touch" and a write-then-move right.
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
    for node in calls:
        fn = node.func
        name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
        if name == "write_file" and (p := arg(node, 0, "path")):
            ops.append((p, "created", None))
        elif name == "patch" and isinstance(fn, ast.Name) and not mocks and (p := arg(node, 0, "path")):
            # hermes_tools.patch(path=None, old_string=None, new_string=None, …): the path comes first.
            ops.append((p, "modified", None))
        elif cmd := _shell_command(node, name, command_arg):
            ops += shell_file_ops(cmd)
        elif name == "open" and (p := arg(node, 0, "file")):
            mode = arg(node, 1, "mode") or "r"
            if _WRITE_MODES.search(mode):
                ops.append((p, "created", None))
            else:
                read.add(p)
        elif name in ("read_text", "read_bytes") and isinstance(fn, ast.Attribute) and (p := _path_of(fn.value, lit)):
            read.add(p)
        elif name in ("write_text", "write_bytes") and isinstance(fn, ast.Attribute) and (p := _path_of(fn.value, lit)):
            ops.append((p, "created", None))
        elif name in ("copy", "copy2", "copyfile", "move") and isinstance(fn, ast.Attribute) \
                and (dst := arg(node, 1, "dst")) and _HAS_EXT.search(dst):
            ops.append((dst, "moved" if name == "move" else "created", None))
            if name == "move" and (src := arg(node, 0, "src")):
                ops.append((src, "deleted", None))
        elif name in _SAVE_METHODS and isinstance(fn, ast.Attribute) and (p := arg(node, 0, "path")) \
                and _HAS_EXT.search(p):
            ops.append((p, "created", None))
    return tuple((p, "modified" if a == "created" and p in read else a, b) for p, a, b in ops)


def _shell_command(node: ast.Call, name: str, arg: Callable[[ast.Call, int, str], str | None]) -> str | None:
    """The command line a call hands to a shell: Hermes's ``terminal("…")``, ``os.system("…")``,
    ``subprocess.run("…", shell=True)`` (an argv list names no shell syntax to read)."""
    if name in ("terminal", "system"):
        return arg(node, 0, "command")
    if name in ("run", "call", "check_call", "check_output", "Popen") and any(k.arg == "shell" for k in node.keywords):
        return arg(node, 0, "args")
    return None


class _Names(dict[str, str]):
    """Names bound to a path, and which of them to a plain literal (``plain``)."""

    def __init__(self) -> None:
        super().__init__()
        self.plain: set[str] = set()


def _literal_names(tree: ast.Module) -> _Names:
    """Top-level names bound exactly once, to a path ``_const_path`` can read (``p = Path("src/a.py");
    p.write_text(…)`` is how scripts edit a file in place; ``OUT = os.path.join(DIR, "a.docx")`` how they name
    what they save)."""
    seen: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            seen.setdefault(node.id, []).append(node)
    out = _Names()
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and len(seen.get(stmt.targets[0].id, ())) == 1):
            continue
        if (value := _const_path(stmt.value, out)) is not None:
            out[stmt.targets[0].id] = value
            if isinstance(stmt.value, ast.Constant):
                out.plain.add(stmt.targets[0].id)
    return out


_JOINS = frozenset({"join", "Path", "PurePath", "PosixPath"})


def _const_path(node: ast.AST | None, names: dict[str, str]) -> str | None:
    """The string an expression always evaluates to, built only from literals and names bound to one:
    ``"a.md"``, ``OUT``, ``os.path.join(OUT_DIR, "a.docx")``, ``Path(ROOT) / "a.md"``, ``ROOT + "/a.md"``,
    ``f"{ROOT}/a.md"``, ``str(p)``. Anything computed at run time (a loop variable, a call's result) is None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div | ast.Add):
        left, right = _const_path(node.left, names), _const_path(node.right, names)
        if left is None or right is None:
            return None
        return posixpath.join(left, right) if isinstance(node.op, ast.Div) else left + right
    if isinstance(node, ast.JoinedStr):
        parts = [_const_path(v.value, names) if isinstance(v, ast.FormattedValue) and v.format_spec is None
                 and v.conversion == -1 else _const_path(v, names) for v in node.values]
        return "".join(p for p in parts if p is not None) if all(p is not None for p in parts) else None
    if isinstance(node, ast.Call) and not node.keywords and node.args:
        fn = node.func
        name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
        if name == "str" and len(node.args) == 1:
            return _const_path(node.args[0], names)
        if name in _JOINS and not (isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Constant)):  # not ",".join
            parts = [_const_path(a, names) for a in node.args]
            return posixpath.join(*(p for p in parts if p is not None)) if all(p is not None for p in parts) else None
    return None


def _path_of(node: ast.AST, lit: Callable[[ast.AST | None], str | None]) -> str | None:
    """The file a ``Path`` object names: ``Path("a.md")``, ``pathlib.Path(OUT)``, ``Path(ROOT) / "a.md"``, a name
    bound to one."""
    return lit(node)
