"""``python -m llama_cpp.server`` for tests: the stub model (``evals/stub_llm_server.py``) on the port
distill chose, so the embedded-model path runs for real (``LocalServer`` starts this process, waits
for ``/v1/models``, calls it, stops it) without llama.cpp or a GGUF.

Each start prints one line to stdout, which ``LocalServer`` appends to its log: a test counts
starts there and finds the pid to check nothing outlives the run. ``FAKE_LLAMA_DELAY`` (seconds)
delays every answer, for a run slow enough to interrupt.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the repository, for evals/

from evals.stub_llm_server import StubServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", required=True)
    args, _ = parser.parse_known_args()
    with StubServer(float(os.environ.get("FAKE_LLAMA_DELAY") or 0), port=args.port):
        print(f"fake llama.cpp server started: pid {os.getpid()} port {args.port} model {args.model}", flush=True)
        threading.Event().wait()  # until LocalServer.stop sends SIGTERM


if __name__ == "__main__":
    main()
