"""A tiny OpenAI-compatible chat server on 127.0.0.1 that answers every call after a fixed delay.

It stands in for a model when what is measured is the pipeline around the model: how many calls
it makes, what text it sends, and how many of those calls it keeps in flight at once. Each answer
is a tool call that instructor's TOOLS mode accepts: the function named in the request's ``tools``
with arguments built from that function's JSON schema, using minimal valid values (a short
non-placeholder string per text field, empty lists, ``"partial"`` when an enum offers it). So the
same stub answers ``ChunkSummary`` and ``ReduceSummary`` without knowing either.

Every request is recorded (its JSON body, arrival and answer times) and the peak number of
requests in flight is kept: that peak is the concurrency the client really achieved, whatever
the flags said. Stdlib only; threads, so a delay never blocks other requests.

    python evals/stub_llm_server.py --delay 0.5 --port 8765    # then --api-base http://127.0.0.1:8765/v1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Enum values picked first when a schema offers them (a phase outcome that claims nothing).
PREFERRED = ("partial",)


@dataclass
class Call:
    """One request as the stub saw it."""

    body: dict[str, Any]
    started: float
    ended: float = 0.0
    answer: dict[str, Any] = field(default_factory=dict)

    @property
    def function(self) -> str:
        tools = self.body.get("tools") or []
        return str(tools[0]["function"]["name"]) if tools else ""


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _resolve(defs[ref.removeprefix("#/$defs/")], defs)
    return schema


def minimal(schema: dict[str, Any], defs: dict[str, Any], name: str = "value") -> Any:
    """The smallest value the schema accepts that a content validator will not reject as empty."""
    schema = _resolve(schema, defs)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return minimal(schema[key][0], defs, name)
    if "enum" in schema:
        values = list(schema["enum"])
        return next((v for v in PREFERRED if v in values), values[0])
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type", "object")
    if kind == "string":
        return f"stub {name.replace('_', ' ')}"
    if kind == "array":
        return [minimal(schema.get("items", {}), defs, name) for _ in range(int(schema.get("minItems", 0)))]
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    props = schema.get("properties", {})
    return {k: minimal(props[k], defs, k) for k in schema.get("required", list(props))}


def tool_arguments(tool: dict[str, Any]) -> dict[str, Any]:
    """Arguments for one OpenAI ``tools`` entry, built from its ``parameters`` schema."""
    params = tool["function"].get("parameters", {})
    return minimal(params, params.get("$defs", {}))


def completion(body: dict[str, Any], n: int) -> dict[str, Any]:
    """A ``chat.completion`` answering ``body`` with a call to its first tool."""
    tools = body.get("tools") or []
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if tools:
        args = json.dumps(tool_arguments(tools[0]))
        message["tool_calls"] = [
            {"id": f"call_{n}", "type": "function", "function": {"name": tools[0]["function"]["name"], "arguments": args}}
        ]
    else:
        message["content"] = "stub"
    prompt_chars = sum(len(str(m.get("content") or "")) for m in body.get("messages", []))
    return {
        "id": f"chatcmpl-stub-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model", "stub")),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tools else "stop"}],
        "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": 20, "total_tokens": prompt_chars // 4 + 20},
    }


def forward(upstream: str, raw: bytes, timeout: float = 900.0) -> tuple[int, dict[str, Any]]:
    """Pass a request body on to a real server (``upstream`` = its ``/v1`` base): (status, answer)."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(
        upstream.rstrip("/") + "/chat/completions", data=raw, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, {"error": {"message": f"upstream {e.code}: {e.read()[:300]!r}"}}


class StubServer:
    """``with StubServer(delay=0.5) as stub: ... stub.api_base ... stub.calls, stub.peak``.

    With ``upstream`` (a real server's ``/v1`` base) it answers nothing itself: it forwards each
    request there and only records it, which times every call a real model serves.
    """

    def __init__(
        self, delay: float = 0.5, host: str = "127.0.0.1", port: int = 0, *, upstream: str | None = None
    ) -> None:
        self.delay = delay
        self.upstream = upstream
        self.calls: list[Call] = []
        self.peak = 0
        self._inflight = 0
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the OpenAI SDK expects

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": "stub", "object": "model"}]})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                call = Call(body=json.loads(raw or b"{}"), started=time.monotonic())
                with stub._lock:
                    stub.calls.append(call)
                    n = len(stub.calls)
                    stub._inflight += 1
                    stub.peak = max(stub.peak, stub._inflight)
                status = 200
                try:
                    if stub.upstream:
                        status, answer = forward(stub.upstream, raw)
                    else:
                        time.sleep(stub.delay)
                        answer = completion(call.body, n)
                finally:
                    with stub._lock:
                        stub._inflight -= 1
                        call.ended = time.monotonic()
                call.answer = answer
                self._send(status, answer)

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            # The default listen backlog (5) refuses bursts: --jobs 8 can open dozens of connections at once.
            request_queue_size = 256

        self._server = Server((host, port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="stub-llm", daemon=True)

    @property
    def api_base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.peak = 0

    def busy_span(self) -> float:
        """Seconds from the first request's arrival to the last answer (the model-bound part of a run)."""
        with self._lock:
            done = [c for c in self.calls if c.ended]
        return max(c.ended for c in done) - min(c.started for c in done) if done else 0.0

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.5, help="seconds before each answer")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    with StubServer(args.delay, port=args.port) as stub:
        print(f"stub model at {stub.api_base} (delay {args.delay}s); Ctrl-C to stop", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
