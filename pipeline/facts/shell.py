"""Shell-command parsing: which files a command line creates, moves, deletes or edits.

The input is whatever an agent's command tool ran: often several commands joined with ``&&``,
``;`` or pipes, sometimes with heredocs, ``cd`` and wrappers. A real shell grammar is not worth
carrying for this; ``shlex`` in POSIX mode with ``punctuation_chars`` already handles quoting and
splits ``&&``, ``;``, ``|`` and redirection operators into their own tokens, which is all we need to
cut a line into simple commands and spot ``>``/``>>`` targets.

Before lexing, heredoc bodies are dropped (they are data, and a stray quote in them would make
``shlex`` fail) and newlines become separators. If quoting is still unbalanced, each line is lexed
on its own and the lines that fail are skipped: missing a file is better than inventing one.

Unwrapped: ``sudo``/``env``/``time``/``nohup``/``command``/``exec``/``builtin`` prefixes and
``VAR=value`` assignments (one standing alone with a written-out value is that value in later ``$VAR``s), a ``for``
loop over written-out words (its body once per word), ``git mv``/``git rm``, ``bash -c '...'`` (parsed recursively), and argv
lists from tools that take ``["bash", "-lc", "..."]``. A ``cd``/``pushd`` earlier in the same
command sets the base later relative paths resolve against.

Recognised: ``mv``, ``cp``, ``rm``/``unlink``, ``touch``, ``tee``, ``sed -i``, PowerShell's ``Move-Item``,
``Copy-Item``, ``Remove-Item``, ``New-Item``, ``Set-Content``/``Add-Content``/``Out-File`` (a command using one is
read with the backslash as the path separator, as PowerShell does), a folder's contents moved (``mv src/* old/``), output
redirections and output options (``--out``/``--output`` with a file name, ``curl -o``, ``wget -O``). Everything else is ignored, including input redirections, fd duplication (``2>&1``),
scripts and interpreters whose effects cannot be seen from the text, and anything that is not a
particular file (``/dev/null``, ``/proc``, globs, ``$VARS``, command substitution), and a best-effort
append (``>> log 2>/dev/null || true``).

``normalise_path`` lives here because it is that last filter; ``facts.py`` applies the same rule
(and the cwd-relative form) to paths from every other tool.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any

from pipeline.models import FileAction

_HEREDOC = re.compile(r"(?<!<)<<(?!<)-?\s*(['\"]?)([A-Za-z_]\w*)\1")
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", "|&", ";;"})
_OUT_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})
_IN_REDIRECTS = frozenset({"<", "<<", "<<<", ">&", "<&", "<<-"})
_WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "command", "exec", "builtin"})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_WINDOWS_SHELLS = frozenset({"pwsh", "powershell", "cmd"})
_NAME_CHAR = re.compile(r"\w")
_RUN_FLAGS = frozenset({"-command", "-c", "/c", "/k"})
_NOT_FILES = ("/dev/", "/proc/")
#: Windows's device names: no file, in whatever folder they are written ("2>nul", "> NUL", "> con").
_WINDOWS_DEVICES = frozenset({"nul", "nul:", "con", "con:", "prn", "aux"})
#: Folders that macOS shows as one item: copying or installing an app is not writing a file.
_BUNDLE = re.compile(r"\.(?:app|framework|bundle|kext|plugin|xcodeproj|xcworkspace|xcassets|lproj|dSYM)$")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_]\w*=")


# --------------------------------------------------------------------------- paths


def home_of(cwd: str | None) -> str | None:
    """The home directory a cwd implies, so ``~/x`` in a command can be resolved."""
    m = re.match(r"^(/home/[^/]+|/Users/[^/]+|/root)(?:/|$)", cwd or "")
    return m.group(1) if m else None


_WINDOWS_ABS = re.compile(r"^([A-Za-z]):[\\/]")


def forward_slashes(path: str) -> str:
    """A Windows path (``e:\\proj\\src\\a.ts``, ``src\\a.ts``) with ``/`` and a lower-case drive;
    any other path as it is (a POSIX name may contain a backslash, a Windows one never a ``/`` too)."""
    if _WINDOWS_ABS.match(path) or ("\\" in path and "/" not in path):
        path = path.replace("\\", "/")
        return path[0].lower() + path[1:] if _WINDOWS_ABS.match(path) else path
    return path


_POSIX_DRIVE = re.compile(r"^/(?:mnt/)?([A-Za-z])(?=/)")


def _drive_path(path: str) -> str:
    return _POSIX_DRIVE.sub(lambda m: m.group(1).lower() + ":", path, count=1)


def is_absolute(path: str) -> bool:
    return path.startswith("/") or bool(_WINDOWS_ABS.match(path))


# What a shell would expand in a path a tool was handed as it is: "$HOME/x", "${DIR}/x", "$(pwd)/x". A lower-case
# "$name" there is the file's own name (TanStack Router and Remix route files: "call/$consultationId.tsx").
_EXPANSION = re.compile(r"\$(?:[{(]|[A-Z_][A-Z0-9_]*(?![\w.-]))")


@lru_cache(maxsize=4096)  # the facts and then each phase's summary add the same paths of a session again
def normalise_path(path: str, cwd: str | None, base: str | None = None, *, literal: bool = False) -> str | None:
    """A path relative to ``cwd`` when it lies under it; None for non-files (/dev/null, globs, $VAR).
    Windows paths come back with ``/`` (``forward_slashes``), so both spellings of a file are one.

    ``literal``: the path is a file tool's argument or a patch header, which no shell expanded, so a ``$`` in
    it is part of the name unless it reads as a variable (``_EXPANSION``); in a command's words it never is."""
    path = forward_slashes(path.strip())
    # Globs and brace lists name no one file; a quote, a brace or a line break in a "name" is a shell word cut
    # from broken quoting (``sed -i 's/{x}/{', '.join(y)}/' f``), not a file anyone writes.
    if not path or path == "-" or any(c in path for c in "*?`\"{}\n") or path.startswith("&"):
        return None
    if "$" in path and (not literal or _EXPANSION.search(path)):
        return None
    if not _NAME_CHAR.search(posixpath.basename(path.rstrip("/")) or path):
        return None  # "+", "=", "->": an operator whose quotes shlex dropped (``'>' + $_`` in PowerShell), no name
    cwd = forward_slashes(cwd) if cwd else cwd
    base = forward_slashes(base) if base else base
    if cwd and _WINDOWS_ABS.match(cwd):
        # Git Bash and WSL on Windows spell C:\Users as /c/Users and /mnt/c/Users: one file, one name.
        path, base = _drive_path(path), _drive_path(base) if base else base
    home = home_of(cwd)
    if path.startswith("~/") and home:
        path = home + path[1:]
    if base and not path.startswith("~") and not is_absolute(path):
        path = posixpath.join(base, path)
        if path.startswith("~/") and home:
            path = home + path[1:]
    if path.startswith(_NOT_FILES) or path in ("/dev/null", "/dev/stdout", "/dev/stderr") or _BUNDLE.search(path.rstrip("/")):
        return None
    if posixpath.basename(path).lower() in _WINDOWS_DEVICES:
        return None  # cmd's "2>nul": Windows's /dev/null, in any folder
    path = posixpath.normpath(path)
    root = posixpath.normpath(cwd) if cwd else None
    if root and is_absolute(path) and path.startswith(root.rstrip("/") + "/"):
        return posixpath.relpath(path, root)
    return None if path == root else path


# --------------------------------------------------------------------------- commands


_PYTHON = re.compile(r"^\s*(?:\S*/)?python(?:3(?:\.\d+)?)?\b")
_PYTHON_C = re.compile(r"(?:^|[;&|]\s*|\s)(?:\S*/)?python(?:3(?:\.\d+)?)?\s+-c\s+")


def python_scripts(command: str) -> list[str]:
    """The Python a command runs from its own text: a heredoc fed to ``python``/``python3``
    (``python3 - <<'PY' … PY``, the way Codex and Claude Code script an edit) and ``python -c '…'``."""
    if "python" not in command:
        return []
    scripts: list[str] = []
    lines = command.replace("\\\n", " ").split("\n")
    for i, line in enumerate(lines):
        tags = [m.group(2) for m in _HEREDOC.finditer(line)]
        if tags and _PYTHON.search(line.split("<<")[0].split("&&")[-1].split(";")[-1]):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == tags[0]), len(lines))
            scripts.append("\n".join(lines[i + 1:end]))
    for m in _PYTHON_C.finditer(command):
        try:
            words = shlex.split(command[m.end():], posix=True)
        except ValueError:
            continue
        if words:
            scripts.append(words[0])
    return scripts


def _tokens(command: str) -> list[str]:
    """shlex tokens with operators split out; heredoc bodies removed, newlines made separators."""
    lines, out, i = command.replace("\\\n", " ").split("\n"), [], 0
    while i < len(lines):
        out.append(lines[i])
        tags = [m.group(2) for m in _HEREDOC.finditer(lines[i])]
        i += 1
        for tag in tags:  # skip the body: it is data, and its quotes would break shlex
            while i < len(lines) and lines[i].strip() != tag:
                i += 1
            i += 1
    def lex(text: str) -> list[str]:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        return [*lexer, ";"]

    try:  # newlines are separators, except inside quotes, where ";" is harmless to us
        return lex("\n;".join(out))  # a comment ends at its line, so the separator after it survives
    except ValueError:  # unbalanced quotes somewhere: keep the lines that do parse
        tokens: list[str] = []
        for line in out:
            try:
                tokens.extend(lex(line))
            except ValueError:
                # A one-line chain cut short ("…; git commit -m x; echo \"exit: $LASTEXITCODE"): its commands up to
                # the cut still parse one by one; a piece whose quotes do not close is left out.
                for piece in line.split(";"):
                    try:
                        tokens.extend(lex(piece))
                    except ValueError:
                        tokens.append(";")
                # The quote this line opened is still open on the lines after it, as it would be for the shell: they
                # are its text (a 'python -c "…' whose closing quote was cut off: "if idx > i: break" redirects nothing).
                break
    return tokens


_PARENS = re.compile(r"[();]{2,}")
_LOOP_VAR = re.compile(r"[A-Za-z_]\w*")


def _set_vars(token: str, values: dict[str, str]) -> str:
    if "$" not in token:
        return token
    return _VAR_USE.sub(lambda m: values.get(m.group(1) or m.group(2), m.group(0)), token)


_VAR_USE = re.compile(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)")
#: ``cfg="$HOME/.codex/config.toml"`` on its own: a name for a written-out path (no command output, glob or variable).
_ASSIGNED = re.compile(r"([A-Za-z_]\w*)=([^\s$`*?(]+)")


def _expand(tokens: list[str]) -> list[str]:
    """``for d in a b c; do echo x > "$d/NOTE.md"; done`` as the three commands it runs, each with ``$d`` (or ``${d}``)
    replaced by its value: a loop over written-out words names its files. A loop over anything else (a glob, a
    variable, a command's output) or a nested one is left as it is, and its ``$d`` paths name no file. A variable set
    to a written-out value in a command of its own (``cfg=~/.codex/config.toml``) is that value where later used."""
    out: list[str] = []
    values: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        tok = _set_vars(tokens[i], values)
        if ((m := _ASSIGNED.fullmatch(tok)) and (not out or out[-1] in _SEPARATORS)
                and (i + 1 == len(tokens) or tokens[i + 1] in _SEPARATORS)):
            values[m.group(1)] = m.group(2)
        if (tok == "for" and (not out or out[-1] in _SEPARATORS) and i + 2 < len(tokens)
                and _LOOP_VAR.fullmatch(tokens[i + 1]) and tokens[i + 2] == "in"):
            var, j = tokens[i + 1], i + 3
            words = []
            while j < len(tokens) and tokens[j] not in _SEPARATORS:
                words.append(tokens[j])
                j += 1
            while j < len(tokens) and tokens[j] == ";":
                j += 1
            end = tokens.index("done", j) if "done" in tokens[j:] else -1
            body = tokens[j + 1:end] if end > j and tokens[j] == "do" else None
            if body is not None and words and "for" not in body \
                    and not any(ch in v for v in words for ch in "*?[$`("):
                for word in words:
                    out += [_set_vars(t, {**values, var: word}) for t in body] + [";"]
                i = end + 1
                continue
        out.append(tok)
        i += 1
    return out


def _segments(tokens: list[str]) -> Iterable[tuple[list[str], list[tuple[str, str]]]]:
    """Split tokens into simple commands: (words, [(redirect op, target), ...]).

    A best-effort append, ``echo x >> log 2>/dev/null || true``, is left out: the command itself says the write
    may not happen and does not matter (a skill's telemetry line, a tool's own log), so it is no output."""
    words: list[str] = []
    redirects: list[tuple[str, str]] = []
    quiet = False  # this simple command sends its errors to /dev/null
    it = iter(range(len(tokens)))
    for i in it:
        tok = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if tok in _SEPARATORS or _PARENS.fullmatch(tok):  # shlex runs punctuation together: "))", ");"
            if quiet and tok == "||" and tokens[i + 1:i + 2] in (["true"], [":"]):
                redirects = [(op, target) for op, target in redirects if op != ">>"]
            if words or redirects:
                yield words, redirects
            words, redirects, quiet = [], [], False
        elif tok.isdigit() and nxt in _OUT_REDIRECTS | _IN_REDIRECTS:
            quiet = quiet or (tok == "2" and nxt == ">" and tokens[i + 2:i + 3] == ["/dev/null"])
            continue  # the fd number of ``2>file`` / ``2>&1``
        elif tok in _OUT_REDIRECTS or tok in _IN_REDIRECTS:
            # ``=>`` and ``>=`` are code (an arrow function, a comparison) whose quoting broke, not a redirect.
            code = tok == ">" and ((i and tokens[i - 1].endswith("=")) or nxt.startswith("="))
            if tok in _OUT_REDIRECTS and nxt and nxt not in _SEPARATORS and not code:
                redirects.append((tok, nxt))
            next(it, None)
        else:
            words.append(tok)
    if words or redirects:
        yield words, redirects


def _positional(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith("-")]


def _into(dest: str, src: str, many: bool) -> str:
    return posixpath.join(dest, posixpath.basename(src.rstrip("/"))) if many or dest.endswith("/") else dest


def _sed_files(args: list[str]) -> list[str]:
    if not any(a.startswith("-i") or a == "--in-place" for a in args):
        return []
    return _script_then_files(args, ("-e", "-f", "--expression", "--file"))


# ``perl -pi -e``, ``perl -i.bak -pe``, ``perl -0777 -pi``: edits its files in place, as ``sed -i`` does.
_PERL_IN_PLACE = re.compile(r"^-[0-9aclnpswTtuUWX]*i")


def _script_then_files(args: list[str], script_options: tuple[str, ...] = ("-e", "-E", "--expression")) -> list[str]:
    """The files after an in-place editor's script (``sed``, ``perl``, ``yq``): the script is the value of
    one of ``script_options`` or else the first word."""
    files: list[str] = []
    script_given = False
    skip = False
    for j, a in enumerate(args):
        if skip:
            skip = False
        elif a in script_options:
            script_given, skip = True, True
        elif a == "" and j and args[j - 1] == "-i":
            continue  # BSD ``sed -i ''``: empty backup suffix
        elif a.startswith("-"):
            continue
        elif not script_given:
            script_given = True
        else:
            files.append(a)
    return files


def _recursive(args: list[str]) -> bool:
    return any(a in ("--recursive", "--archive") or re.match(r"^-[A-Za-z]*[rRa]", a) for a in args)


def _names_a_file(path: str) -> bool:
    """A ``cp -r`` source that is a file: an extension, and no trailing slash."""
    return not path.endswith("/") and bool(posixpath.splitext(posixpath.basename(path))[1])


#: PowerShell's file cmdlets (case-insensitive, as PowerShell reads them).
_CMDLETS = r"(?i:\b(?:Move|Copy|Remove|New)-Item\b|\b(?:Set|Add)-Content\b|\bOut-File\b)"
_CMDLET = re.compile(_CMDLETS)
#: Their parameters that take a value (the rest are switches: ``-Force``, ``-Recurse``).
_PS_VALUED = frozenset({"-path", "-literalpath", "-destination", "-filepath", "-itemtype", "-type", "-name", "-value",
                        "-filter", "-include", "-exclude", "-encoding", "-credential"})
#: A command can change a file only through a redirect, one of these words (also inside ``sh -c``) or an
#: output option.
_MAYBE_FILE_OP = re.compile(r">|\b(?:mv|cp|rm|unlink|touch|tee|sed|perl|yq|openssl)\b|--out|\s-[oO]\s|" + _CMDLETS)
#: Options that name the file a command writes (``node gen.mjs --out deck.pptx``, ``pandoc -o a.pdf``).
_OUT_OPTIONS = frozenset({"--out", "--output", "--outfile", "--out-file", "--output-file"})
#: Commands whose short ``-o`` (``wget``: ``-O``) is their output file; elsewhere ``-o`` means anything
#: (``unzip -o`` overwrites, ``pytest -o`` sets an ini option).
_SHORT_OUT = {"curl": "-o", "gcc": "-o", "g++": "-o", "cc": "-o", "clang": "-o", "clang++": "-o", "pandoc": "-o",
              "sort": "-o", "wget": "-O", "rustc": "-o", "nvcc": "-o"}
#: openssl writes its output and a new key where ``-out`` and ``-keyout`` say (``openssl req -x509 -newkey rsa:2048
#: -keyout certs/key.pem -out certs/cert.pem``).
_OPENSSL_OUT = frozenset({"-out", "-keyout"})
# An output file has a name with an extension: "--out dist" is a directory, "--output json" a format.
_FILE_NAME = re.compile(r"^[^=\s]*[^/=\s]\.[A-Za-z0-9]{1,8}$")


def _out_files(cmd: str, args: list[str]) -> list[str]:
    """Files named by an output option of ``cmd`` (see ``_OUT_OPTIONS``, ``_SHORT_OUT``)."""
    found: list[str] = []
    for j, a in enumerate(args):
        flag, eq, value = a.partition("=")
        if eq and flag in _OUT_OPTIONS:
            found.append(value)
        elif (a in _OUT_OPTIONS or a == _SHORT_OUT.get(cmd) or (cmd == "openssl" and a in _OPENSSL_OUT)) \
                and j + 1 < len(args):
            found.append(args[j + 1])
    return [f for f in found if _FILE_NAME.match(f)]


def shell_file_ops(command: str, workdir: str | None = None) -> list[tuple[str, FileAction, str | None]]:
    """File effects of a shell command: (path as written, action, base dir it is relative to)."""
    if not _MAYBE_FILE_OP.search(command):
        return []  # most commands (tests, builds, greps) touch no file: skip tokenising them
    if _CMDLET.search(command):  # PowerShell: "\" separates a path's parts (its escape is the backtick)
        command = command.replace("\\", "/")
    if "HOME" in command or "USERPROFILE" in command:  # the home folder by its variable is a folder we know: ~
        command = _HOME_VAR.sub("~", command)
    return list(_shell_file_ops(command, workdir))


def staged_files(command: str, workdir: str | None = None) -> list[tuple[str, str | None]]:
    """Files a ``git add`` in ``command`` names one by one: (path as written, base dir it is relative to).

    Only a named file with an extension counts: ``.``, ``-A``, a folder or a glob stages whatever changed, which
    says nothing about what this session changed. A ``cd`` earlier in the command moves the base, as in
    ``shell_file_ops``. Not an effect of its own: ``pipeline.facts.derive`` reads it only for exports that show
    no edit any other way. Staging during a merge or rebase marks a conflict resolved (``git checkout --theirs a.ts
    && git add a.ts``): the file is a branch's version, not the session's change, so such a command stages none."""
    if "add" not in command or "git" not in command or _RESOLVING.search(command):
        return []
    staged: list[tuple[str, str | None]] = []
    for words, base in _in_folders(command, workdir):
        if len(words) >= 3 and posixpath.basename(words[0]) == "git" and words[1] == "add":
            staged += [(p, base) for p in _positional(words[2:])
                       if _names_a_file(p) and not any(ch in p for ch in "*?[$")]
    return staged


def _in_folders(command: str, workdir: str | None) -> Iterator[tuple[list[str], str | None]]:
    """Each simple command of ``command`` (wrappers and ``VAR=x`` dropped) with the folder it runs in: ``workdir``
    moved by every ``cd`` before it. A ``cd`` is yielded too, with the folder it moves to."""
    base = workdir
    for words, _redirects in _segments(_tokens(command)):
        while words and (words[0] in _WRAPPERS or _ENV_ASSIGN.match(words[0])):
            words = words[1:]
        if len(words) >= 2 and words[0] == "cd":
            target = words[1]
            base = target if _absolute(target) or base is None else posixpath.join(base, target)
        yield words, base


_RESOLVING = re.compile(r"--(?:theirs|ours)\b|\bgit\s+(?:merge|rebase|cherry-pick|am)\b")

#: (package manager, subcommand) → the manifest it rewrites when it adds or removes a named dependency. The lock file
#: changes too; the manifest is what a reader of the note looks for.
_MANIFESTS: dict[tuple[str, str], str] = {
    **{(tool, sub): "package.json" for tool in ("npm", "pnpm", "yarn", "bun")
       for sub in ("install", "i", "add", "uninstall", "un", "remove", "rm")},
    **{(tool, sub): "pyproject.toml" for tool in ("uv", "poetry", "pdm", "rye") for sub in ("add", "remove")},
    ("cargo", "add"): "Cargo.toml", ("cargo", "remove"): "Cargo.toml", ("go", "get"): "go.mod",
    ("composer", "require"): "composer.json", ("composer", "remove"): "composer.json",
    ("bundle", "add"): "Gemfile", ("bundle", "remove"): "Gemfile",
}
#: Options that put the change somewhere else (a global install, another folder) or take the next word as a value.
_ELSEWHERE = frozenset({"-g", "--global", "--prefix", "-C", "--dir", "--cwd", "--directory", "--manifest-path",
                        "--project", "-w", "--workspace", "--filter", "--location=global"})
_VALUED = frozenset({"--registry", "--cache", "--tag", "--save-prefix", "--index-url", "--index", "--group", "-G"})
_MAY_ADD_DEPENDENCY = re.compile(r"\b(?:install|i|add|uninstall|un|remove|rm|get|require)\b")


def python_dir(command: str, workdir: str | None = None) -> str | None:
    """Where the Python a command runs from its own text (``python_scripts``) runs: ``cd "$TMP/tasks" && python -c
    "open('ledger.txt', 'w')"`` writes its bare names there, not in ``workdir``."""
    if "cd" not in command:
        return workdir
    folder = next((folder for words, folder in _in_folders(command, workdir)
                   if words and _PYTHON.match(posixpath.basename(words[0]))), workdir)
    # A folder only the shell knows (``cd "$SCRATCH"``): what the script writes there has no path we can name.
    return UNKNOWN_DIR if folder and ("$" in folder or "(" in folder) else folder


def final_dir(command: str, workdir: str | None = None) -> str | None:
    """Where ``command`` ends up running: ``workdir`` moved by each ``cd`` in it ("mkdir -p api && cd api && npm init
    -y" says "Wrote to package.json" from api/)."""
    if "cd" not in command:
        return workdir
    base = workdir
    for _words, folder in _in_folders(command, workdir):
        base = folder
    return base


def manifest_changes(command: str, workdir: str | None = None) -> list[tuple[str, str | None]]:
    """The manifests a package manager in ``command`` rewrites by adding or removing a named dependency (``npm install
    axios``: package.json; ``uv add httpx``: pyproject.toml): (path as written, base dir). ``npm install`` alone
    installs what the manifest already lists and changes none; a global install or one aimed at another folder
    (``-g``, ``--prefix``) is left out. A ``cd`` earlier in the command moves the base, as in ``shell_file_ops``."""
    if not _MAY_ADD_DEPENDENCY.search(command):
        return []
    found: list[tuple[str, str | None]] = []
    for words, base in _in_folders(command, workdir):
        if len(words) < 3 or (manifest := _MANIFESTS.get((posixpath.basename(words[0]), words[1]))) is None:
            continue
        args = words[2:]
        if any(a in _ELSEWHERE or a.split("=", 1)[0] in _ELSEWHERE for a in args):
            continue
        named = [a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] not in _VALUED)]
        if named:
            found.append((manifest, base))
    return found
_HOME_VAR = re.compile(r"(?<![\w$])(?:\$\{HOME\}|\$HOME|\$env:(?:HOME|USERPROFILE)|%USERPROFILE%)(?=[/\\]|[\s\"';)]|$)", re.I)


def _ps_args(args: list[str]) -> tuple[dict[str, str], list[str]]:
    """A cmdlet's named values (``-Destination x`` → ``{"-destination": "x"}``) and its positional arguments, each
    comma list split (``Remove-Item a.txt,b.txt``)."""
    named: dict[str, str] = {}
    pos: list[str] = []
    it = iter(args)
    for a in it:
        name, colon, value = a.partition(":")
        if a.startswith("-") and name.lower() in _PS_VALUED:
            named[name.lower()] = value if colon else next(it, "")
        elif not a.startswith("-"):
            pos += [x for x in a.split(",") if x]
    return named, pos


def _cmdlet_ops(cmd: str, args: list[str], base: str | None) -> list[tuple[str, FileAction, str | None]]:
    named, pos = _ps_args(args)
    paths = [x for x in named.get("-path", named.get("-literalpath", named.get("-filepath", ""))).split(",") if x]
    if cmd in ("move-item", "copy-item"):
        srcs = paths or pos[:1]
        rest = pos if paths else pos[1:]  # "Move-Item a b", "Move-Item -Path a b": the next positional is the target
        dest = named.get("-destination") or (rest[0] if rest else None)
        return _move_ops("mv" if cmd == "move-item" else "cp", srcs, dest, "-recurse" in (a.lower() for a in args),
                         base) if dest else []
    if cmd == "remove-item":
        return [(p, "deleted", base) for p in paths or pos]
    if cmd == "new-item":
        if named.get("-itemtype", named.get("-type", "file")).lower() != "file":
            return []  # a directory, a link: no file of the work
        where = (paths or pos or [""])[0]
        name = named.get("-name")
        return [(posixpath.join(where, name) if name else where, "created", base)] if (where or name) else []
    action: FileAction = "modified" if cmd == "add-content" else "created"
    return [(p, action, base) for p in (paths or pos[:1])]


def _move_ops(cmd: str, srcs: list[str], dest: str, recursive: bool,
              base: str | None) -> list[tuple[str, FileAction, str | None]]:
    """``mv``/``cp`` of ``srcs`` to ``dest``. ``mv app/* old/`` moves what the folder holds: read as the folder moved
    onto ``old`` (facts then move the files written under ``app/`` to ``old/``)."""
    ops: list[tuple[str, FileAction, str | None]] = []
    if cmd == "cp" and recursive:
        srcs = [src for src in srcs if _names_a_file(src)]  # a copied folder is not an output file
    for src in srcs:
        if cmd == "mv" and src.endswith("/*") and len(src) > 2:
            ops += [(src[:-2], "deleted", base), (dest.rstrip("/") or dest, "moved", base)]
            continue
        if cmd == "mv":
            ops.append((src, "deleted", base))
        ops.append((_into(dest, src, len(srcs) > 1), "moved" if cmd == "mv" else "created", base))
    return ops


@lru_cache(maxsize=1024)
def _shell_file_ops(command: str, workdir: str | None) -> tuple[tuple[str, FileAction, str | None], ...]:
    # Cached: facts and the extractive phases both walk a session's commands.
    return tuple(_file_ops(command, workdir))


def _file_ops(command: str, workdir: str | None) -> list[tuple[str, FileAction, str | None]]:
    ops: list[tuple[str, FileAction, str | None]] = []
    base = workdir
    pushed: list[str | None] = []  # pushd / Push-Location, for popd / Pop-Location
    values: dict[str, str] = {}  # PowerShell's ``$p = "C:/app/sub"``: a folder a later Push-Location $p enters
    for words, redirects in _segments(_expand(_tokens(command))):
        ops.extend((target, "created", base) for _op, target in redirects)
        if len(words) == 3 and words[0].startswith("$") and words[1] == "=":
            values[words[0].lower()] = words[2]
            continue
        while words and (words[0] in _WRAPPERS or _ENV_ASSIGN.match(words[0])):
            words = words[1:]
        if words and words[0] in ("{", "then", "do", "else"):  # a block's body ("if …; then mv …", "{ Move-Item … }")
            words = [w for w in words[1:] if w != "}"]
        if not words:
            continue
        cmd, args = posixpath.basename(words[0]), words[1:]
        if cmd == "git" and args[:1] == ["rm"] and "--cached" in args:
            continue  # untracks: the file stays on disk, so it is neither deleted nor an output
        if cmd == "git" and args[:1] in (["mv"], ["rm"]):
            cmd, args = args[0], args[1:]
        if cmd in _SHELLS and args and args[0] in ("-c", "-lc", "-ec") and len(args) > 1:
            ops.extend(_file_ops(args[1], base))
        elif cmd in ("cd", "pushd", "chdir") or cmd.lower() in _PS_LOCATION:
            if cmd == "pushd" or cmd.lower() == "push-location":
                pushed.append(base)
            named, pos = _ps_args(args) if cmd.lower() in _PS_LOCATION else ({}, _positional(args))
            target = named.get("-path") or named.get("-literalpath") or (pos[0] if pos else "~")
            target = values.get(target.lower(), target)
            # A folder only a script knows ("Push-Location (Join-Path $root $f)"): what is written there has no path
            # we can name, so it is left out rather than put in the folder before.
            base = (UNKNOWN_DIR if "$" in target or "(" in target or (base == UNKNOWN_DIR and not _absolute(target))
                    else target if _absolute(target) or base is None else posixpath.join(base, target))
        elif cmd == "popd" or cmd.lower() == "pop-location":
            base = pushed.pop() if pushed else base
        elif cmd in ("mv", "cp") and len(pos := _positional(args)) >= 2:
            ops.extend(_move_ops(cmd, pos[:-1], pos[-1], _recursive(args), base))
        elif _CMDLET.fullmatch(cmd):
            ops.extend(_cmdlet_ops(cmd.lower(), args, base))
        elif cmd in ("rm", "unlink"):
            ops.extend((p, "deleted", base) for p in _positional(args))
        elif cmd in ("touch", "tee"):
            ops.extend((p, "created", base) for p in _positional(args))
        elif cmd == "sed":
            ops.extend((p, "modified", base) for p in _sed_files(args))
        elif cmd == "perl" and any(_PERL_IN_PLACE.match(a) for a in args):
            ops.extend((p, "modified", base) for p in _script_then_files(args))
        elif cmd == "yq" and any(a in ("-i", "--inplace") for a in args):
            ops.extend((p, "modified", base) for p in _script_then_files([a for a in args if a not in ("e", "eval")]))
        else:
            ops.extend((p, "created", base) for p in _out_files(cmd, args))
    # /dev/null, globs and $VARS name no particular file, nor does a relative path in a folder we cannot name
    ops = [(path, action, None if where == UNKNOWN_DIR else where) for path, action, where in ops
           if where != UNKNOWN_DIR or _absolute(path)]
    return [op for op in ops if normalise_path(op[0], None, op[2])]


_PS_LOCATION = frozenset({"push-location", "set-location", "sl"})
#: The folder a command moved to by a name only the shell knows (``cd "$SCRATCH"``, ``Push-Location (Join-Path …)``).
UNKNOWN_DIR = "\0unknown folder"


def _absolute(path: str) -> bool:
    """Rooted (``is_absolute``) or home-relative: a folder that does not depend on the one before it."""
    return path.startswith("~") or is_absolute(path)


_JS_EXEC = re.compile(r"exec_command\(\s*\{")
_JS_FIELD = re.compile(r"""(?<![\w$])["']?(cmd|workdir)["']?\s*:\s*("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`)""")


def _js_string(literal: str) -> str:
    """A JavaScript string literal's text: its escapes undone (a template's ``${…}`` left as written)."""
    body = literal[1:-1]
    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(
        m.group(1), chr(int(m.group(1)[1:], 16)) if m.group(1).startswith("u") else m.group(1)), body)


def js_exec_commands(code: str) -> list[tuple[str, str | None]]:
    """(command, workdir) of each ``exec_command({cmd: …, workdir: …})`` a code-mode JavaScript call makes."""
    out: list[tuple[str, str | None]] = []
    starts = [m.end() for m in _JS_EXEC.finditer(code)]
    for i, start in enumerate(starts):
        chunk = code[start:starts[i + 1] if i + 1 < len(starts) else len(code)]
        fields: dict[str, str] = {}
        for m in _JS_FIELD.finditer(chunk):
            fields.setdefault(m.group(1), _js_string(m.group(2)))
        if fields.get("cmd", "").strip():
            out.append((fields["cmd"].strip(), fields.get("workdir")))
    return out


def command_text(args: dict[str, Any] | str) -> str | None:
    """The shell command a command tool ran (``command``/``cmd``; argv lists unwrapped)."""
    if isinstance(args, str):
        return args.strip() or None
    cmd = args.get("command", args.get("cmd"))
    if cmd is None and isinstance(code := args.get("input"), str) and "exec_command" in code:
        # Codex's code mode: the call is JavaScript that runs commands (``tools.exec_command({cmd:"…"})``, several
        # at once in a ``Promise.all``); each runs as if typed, one line each.
        ran = [c for c, _workdir in js_exec_commands(code)]
        return "\n".join(ran) or None
    if isinstance(cmd, list):
        parts = [str(p) for p in cmd]
        if len(parts) >= 3 and posixpath.basename(parts[0]) in _SHELLS and parts[1].startswith("-"):
            return parts[2]
        # Codex on Windows: ["pwsh.exe", "-NoLogo", "-NoProfile", "-Command", "Get-Content a.ts"] runs the last part;
        # joined with quotes it is no command anyone typed.
        exe = posixpath.basename(forward_slashes(parts[0])).lower().removesuffix(".exe")
        if exe in _WINDOWS_SHELLS:
            flag = next((i for i, p in enumerate(parts[1:-1], 1) if p.lower() in _RUN_FLAGS), None)
            if flag is not None and flag == len(parts) - 2:
                return parts[-1]
        return shlex.join(parts)
    return cmd.strip() if isinstance(cmd, str) and cmd.strip() else None
