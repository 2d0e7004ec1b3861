"""A client for gbrain (garrytan/gbrain) through its own interfaces, never its database.

gbrain defines each operation once and serves it two ways (peers-and-formats.md B.5):

* **CLI** ``gbrain call <op> '<json>'``: a trusted local caller. ``put_page`` extracts links and
  timeline from the page and honours provenance. Each call starts Bun and PGLite (~2 s), so this
  is the faithful path for writes and a slow one for many reads.
* **MCP** ``gbrain serve`` (stdio JSON-RPC): one process for the whole session (``get_page`` 0.1 s,
  ``put_page`` 1.2 s), but the caller counts as remote: ``put_page`` extracts no links
  (``"auto_links": {"skipped": "remote"}``), so a caller on MCP adds its links with ``add_link``.
  PGLite has one writer and a running server holds it, so the two are never mixed in one session.

Both transports answer ``call(op, params)`` with the operation's JSON result and raise
``GbrainOpError`` (with gbrain's error code, e.g. ``page_not_found``) when the operation fails,
``GbrainUnavailable`` when gbrain itself cannot run (not installed, no brain, crashed).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import selectors
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Literal, Protocol

from pipeline.errors import DistillError

Transport = Literal["cli", "mcp"]
INSTALL_HINT = ("install it with `bun install -g github:garrytan/gbrain` (it is on neither npm nor PyPI) "
                "or set GBRAIN_BIN=/path/to/gbrain")
#: Seconds one operation may take: PGLite starts in ~2 s, a cold brain's first write can take 15.
CALL_TIMEOUT = 180.0
#: Linux refuses a single argument over 128 KiB (MAX_ARG_STRLEN): bigger pages go through stdin.
MAX_ARG = 100_000
_ERROR = re.compile(r"Error \[(?P<code>[\w.-]+)\]:?\s*(?P<message>.*)")
_PROTOCOL = "2025-06-18"


class GbrainError(DistillError):
    """gbrain could not be used; the message says what to do."""


class GbrainUnavailable(GbrainError):
    """gbrain is not installed, has no brain, or stopped answering."""


class GbrainOpError(GbrainError):
    """One operation failed inside gbrain (``code`` is gbrain's, e.g. ``page_not_found``)."""

    exit_code = 1

    def __init__(self, op: str, code: str, message: str, suggestion: str | None = None) -> None:
        hint = f" ({suggestion})" if suggestion else ""
        super().__init__(f"gbrain {op}: {message}{hint}")
        self.op, self.code, self.detail, self.suggestion = op, code, message, suggestion


class PageNotFound(GbrainOpError):
    """``get_page`` and friends: no live page has that slug (it may be soft-deleted)."""


def _op_error(op: str, code: str, message: str, suggestion: str | None = None) -> GbrainOpError:
    cls = PageNotFound if code == "page_not_found" else GbrainOpError
    return cls(op, code, message, suggestion)


def gbrain_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment gbrain runs in: the caller's, with gbrain's per-call update check off.

    Every CLI call otherwise spawns a detached check that resolves a GitHub host (B.10); a push of
    2,000 pages would make 2,000 of them. A value the user set wins.
    """
    full = dict(os.environ if env is None else env)
    full.setdefault("GBRAIN_SELF_UPGRADE_MODE", "off")
    return full


def find_gbrain(env: Mapping[str, str] | None = None) -> Path:
    """``GBRAIN_BIN``, else ``gbrain`` on ``PATH``, else Bun's global bin; ``GbrainUnavailable`` if none runs."""
    env = os.environ if env is None else env
    named = env.get("GBRAIN_BIN")
    if named:
        path = Path(named).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise GbrainUnavailable(f"GBRAIN_BIN={named} is not an executable file; {INSTALL_HINT}")
        return path
    found = shutil.which("gbrain", path=env.get("PATH"))
    if found:
        return Path(found)
    bun = Path(env.get("HOME", "~")).expanduser() / ".bun" / "bin" / "gbrain"
    if bun.is_file():
        return bun
    raise GbrainUnavailable(f"gbrain not found (GBRAIN_BIN unset, no gbrain on PATH); {INSTALL_HINT}")


def brain_home(env: Mapping[str, str] | None = None) -> str:
    """Which brain gbrain opens: ``$GBRAIN_HOME/.gbrain`` (``$HOME`` when unset); push state is kept per brain."""
    env = os.environ if env is None else env
    root = env.get("GBRAIN_HOME") or env.get("HOME") or "~"
    return str((Path(root).expanduser() / ".gbrain").resolve())


def parse_json_output(out: str) -> Any:
    """The JSON document gbrain printed, skipping notice lines it may print before it."""
    text = out.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    for m in re.finditer(r"^[\[{]", text, re.M):
        with contextlib.suppress(json.JSONDecodeError):
            return json.loads(text[m.start():])
    raise json.JSONDecodeError("gbrain printed no JSON", text[:200], 0)


class Client(Protocol):
    transport: Transport

    def call(self, op: str, params: dict[str, Any]) -> Any: ...


class CliClient:
    """``gbrain call <op> '<json>'``, one process per operation."""

    transport: Transport = "cli"

    def __init__(self, binary: Path, env: Mapping[str, str] | None = None, timeout: float = CALL_TIMEOUT) -> None:
        self.binary, self.env, self.timeout = binary, gbrain_env(env), timeout

    def call(self, op: str, params: dict[str, Any]) -> Any:
        payload = json.dumps(params, ensure_ascii=False)
        stdin = None
        if op == "put_page" and len(payload.encode()) > MAX_ARG and set(params) <= {"slug", "content"}:
            # `gbrain put <slug>` is the same trusted put_page with the content on stdin.
            args, stdin = ["put", str(params["slug"])], str(params["content"])
        else:
            args = ["call", op, payload]
        try:
            proc = subprocess.run([str(self.binary), *args], input=stdin, env=self.env, capture_output=True,
                                  text=True, encoding="utf-8", errors="replace", timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            raise GbrainUnavailable(f"gbrain {op} did not answer within {self.timeout:.0f}s; "
                                    "is another gbrain (e.g. `gbrain serve`) holding the brain?") from None
        except OSError as exc:
            raise GbrainUnavailable(f"cannot run {self.binary}: {exc.strerror or exc}; {INSTALL_HINT}") from exc
        if proc.returncode != 0:
            raise self._failure(op, proc)
        try:
            return parse_json_output(proc.stdout)
        except json.JSONDecodeError:
            raise GbrainUnavailable(f"gbrain {op} printed no JSON: {proc.stdout.strip()[:200]!r}") from None

    def _failure(self, op: str, proc: subprocess.CompletedProcess[str]) -> GbrainError:
        text = f"{proc.stderr}\n{proc.stdout}"
        if "No brain configured" in text:
            return GbrainUnavailable(f"gbrain has no brain at {brain_home(self.env)}; create one with "
                                     "`gbrain init --pglite` (or set GBRAIN_HOME to the folder holding yours)")
        m = _ERROR.search(text)
        if m:
            fix = re.search(r"^Fix:\s*(.+)$", text, re.M)
            return _op_error(op, m.group("code"), m.group("message").strip(), fix.group(1).strip() if fix else None)
        last = next((line for line in reversed(text.strip().splitlines()) if line.strip()), "")
        return _op_error(op, "failed", f"exit {proc.returncode}: {last[:300]}")


class McpClient:
    """One ``gbrain serve`` for a session: JSON-RPC 2.0 over its stdin/stdout, a message per line."""

    transport: Transport = "mcp"

    def __init__(self, binary: Path, env: Mapping[str, str] | None = None, timeout: float = CALL_TIMEOUT) -> None:
        self.timeout = timeout
        self._ids = itertools.count(1)
        self._buffer = b""
        # stderr goes to a file: a server that logs a lot must never block on a full pipe.
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        try:
            self._proc = subprocess.Popen([str(binary), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=self._stderr, env=gbrain_env(env))
        except OSError as exc:
            raise GbrainUnavailable(f"cannot run {binary} serve: {exc.strerror or exc}; {INSTALL_HINT}") from exc
        self._selector = selectors.DefaultSelector()
        assert self._proc.stdout is not None
        self._selector.register(self._proc.stdout, selectors.EVENT_READ)
        try:
            info = self._request("initialize", {"protocolVersion": _PROTOCOL, "capabilities": {},
                                                "clientInfo": {"name": "distill", "version": "1"}})
            self.server = info.get("serverInfo", {})
            self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        except GbrainUnavailable as exc:
            tail = self._stderr_tail()
            self.close()
            if "No brain configured" in tail:
                raise GbrainUnavailable(f"gbrain has no brain at {brain_home(env)}; create one with "
                                        "`gbrain init --pglite` (or set GBRAIN_HOME to the folder holding yours)") from None
            raise exc
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> McpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, op: str, params: dict[str, Any]) -> Any:
        result = self._request("tools/call", {"name": op, "arguments": params})
        text = "".join(part.get("text", "") for part in result.get("content", []) if isinstance(part, dict))
        if result.get("isError"):
            try:
                envelope = json.loads(text)
            except json.JSONDecodeError:
                envelope = {"message": text}
            if not isinstance(envelope, dict):
                envelope = {"message": text}
            raise _op_error(op, str(envelope.get("error") or "failed"), str(envelope.get("message") or text)[:500],
                            envelope.get("suggestion"))
        try:
            return json.loads(text) if text.strip() else None
        except json.JSONDecodeError:
            return text

    def close(self) -> None:
        proc = getattr(self, "_proc", None)
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin:
                proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
        self._selector.close()
        self._stderr.close()
        self._proc = None  # type: ignore[assignment]

    # ------------------------------------------------------------------ JSON-RPC

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write((json.dumps(message, ensure_ascii=False) + "\n").encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise GbrainUnavailable(f"gbrain serve stopped: {self._stderr_tail()}") from None

    def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = next(self._ids)
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + self.timeout
        while True:
            line = self._readline(deadline, method)
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue  # not protocol: a stray log line
            if not isinstance(msg, dict) or msg.get("id") != rid:
                continue  # a notification or a server-side request we do not serve
            if "error" in msg:
                err = msg["error"] or {}
                raise GbrainUnavailable(f"gbrain serve refused {method}: {err.get('message') or err}")
            return msg.get("result") or {}

    def _readline(self, deadline: float, method: str) -> bytes:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not self._selector.select(timeout=left):
                raise GbrainUnavailable(f"gbrain serve did not answer {method} within {self.timeout:.0f}s")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise GbrainUnavailable(f"gbrain serve exited: {self._stderr_tail()}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _stderr_tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0)
            lines = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
            return lines[-1][:300] if lines else "no output"
        return "no output"


@contextlib.contextmanager
def open_client(transport: Transport = "cli", env: Mapping[str, str] | None = None) -> Iterator[Client]:
    """A client on ``transport``; the MCP server is stopped on the way out."""
    binary = find_gbrain(env)
    if transport == "cli":
        yield CliClient(binary, env)
        return
    with McpClient(binary, env) as client:
        yield client
