"""A stand-in for xllamacpp, put on ``PYTHONPATH`` by tests (ahead of the real one, if installed).

``pipeline.llm.serve`` runs it exactly as it runs the real runtime, so everything around the model
is the real code: the child process, its event lines, the memfd the chunk files are read into, the
front that rewrites forced tool calls, the stop by stdin EOF and the death signal. Only the model
is missing. It answers like the stub (``evals/stub_llm_server.py``) with one difference that matters:
like llama.cpp's server it answers an object-form ``tool_choice`` in prose (so a request that did
not pass through the front fails as it would for real), and ``response_format`` json_schema with
JSON that the schema accepts.

It "loads" the model by reading the whole file at ``params.model.path`` (which must start with
``GGUF``) and logs one line per start on stderr, which ``LocalServer`` keeps in its log: the pid,
the port, the path, and the size and sha256 of what it read. ``FAKE_LLAMA_LOAD_DELAY`` (seconds)
makes the load slow enough to kill the parent during it; ``FAKE_LLAMA_DELAY`` delays every answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository, for evals/

from evals.stub_llm_server import completion, minimal

__version__ = "0.0-fake"


class _Model:
    __slots__ = ("path",)

    def __init__(self) -> None:
        self.path = ""


class _Cpu:
    __slots__ = ("n_threads",)

    def __init__(self) -> None:
        self.n_threads = 1


class CommonParams:
    """The fields ``serve.py`` sets; ``__slots__`` so a misspelt one fails as on the real class."""

    __slots__ = ("cache_ram_mib", "cpuparams", "cpuparams_batch", "endpoint_slots", "hostnames", "model",
                 "model_alias", "n_ctx", "offline", "port", "ui")

    def __init__(self) -> None:
        self.model, self.cpuparams, self.cpuparams_batch = _Model(), _Cpu(), _Cpu()
        self.model_alias: set[str] = set()
        self.n_ctx, self.port, self.cache_ram_mib = 4096, 8080, -1
        self.hostnames = ["127.0.0.1"]
        self.offline = self.ui = self.endpoint_slots = False


def _handler(alias: str, delay: float) -> type[BaseHTTPRequestHandler]:
    calls = [0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self._send({"object": "list", "data": [{"id": alias, "object": "model"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            calls[0] += 1
            time.sleep(delay)
            if isinstance(body.get("tool_choice"), dict):  # llama.cpp drops it to "auto": prose
                body = {**body, "tools": []}
            fmt = body.get("response_format") or {}
            if fmt.get("type") == "json_schema":  # llama.cpp's grammar: JSON the schema accepts
                schema = fmt["json_schema"]["schema"]
                answer = completion({**body, "tools": []}, calls[0])
                answer["choices"][0]["message"]["content"] = json.dumps(minimal(schema, schema.get("$defs", {})))
                self._send(answer)
                return
            self._send(completion(body, calls[0]))

        def _send(self, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


class Server:
    def __init__(self, params: CommonParams) -> None:
        h, size = hashlib.sha256(), 0
        with open(params.model.path, "rb") as f:
            head = f.read(4)
            f.seek(0)
            while block := f.read(1 << 20):
                h.update(block)
                size += len(block)
        time.sleep(float(os.environ.get("FAKE_LLAMA_LOAD_DELAY") or 0))
        if head != b"GGUF":
            print("llama_model_load: error loading model: not a GGUF file", file=sys.stderr, flush=True)
            raise RuntimeError("failed to load model")
        alias = next(iter(params.model_alias), "model")
        self._http = ThreadingHTTPServer(("127.0.0.1", params.port),
                                         _handler(alias, float(os.environ.get("FAKE_LLAMA_DELAY") or 0)))
        self._http.daemon_threads = True
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        port = self._http.server_address[1]
        self.listening_address = f"http://127.0.0.1:{port}"
        print(f"fake llama.cpp server started: pid {os.getpid()} port {port} model {params.model.path} "
              f"bytes {size} sha256 {h.hexdigest()} threads {params.cpuparams.n_threads}", file=sys.stderr, flush=True)

    def __del__(self) -> None:
        if getattr(self, "_http", None) is not None:
            self._http.shutdown()
