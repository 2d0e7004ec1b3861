from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

import pytest

from pipeline.llm import local as localmodel
from pipeline.llm.local import LocalModelError, LocalServer, ensure_gguf


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


def test_server_command_is_loopback_only(tmp_path):
    s = LocalServer(tmp_path / "m.gguf", python="/usr/bin/python3", port=9999)
    cmd = s.command()
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and s.api_base == "http://127.0.0.1:9999/v1"
    with pytest.raises(LocalModelError, match="does not exist"):
        s.start()


def _llama_python() -> str | None:
    if importlib.util.find_spec("llama_cpp"):
        import sys

        return sys.executable
    return os.environ.get("DISTILL_LLAMA_PYTHON")


GGUF = Path(os.environ.get("DISTILL_TEST_GGUF", str(localmodel.cache_dir() / localmodel.GGUF_NAME)))


@pytest.mark.slow
@pytest.mark.skipif(
    _llama_python() is None or not GGUF.exists(),
    reason="needs llama_cpp (or DISTILL_LLAMA_PYTHON) and the assembled GGUF (DISTILL_TEST_GGUF)",
)
def test_local_server_lifecycle(tmp_path):
    import urllib.request

    server = LocalServer(GGUF, python=_llama_python(), n_ctx=512, log=tmp_path / "llama.log")
    with server:
        pid = server.proc.pid
        with urllib.request.urlopen(server.api_base + "/models", timeout=5) as r:
            assert r.status == 200
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.slow
@pytest.mark.skipif(
    _llama_python() is None or not GGUF.exists(),
    reason="needs llama_cpp (or DISTILL_LLAMA_PYTHON) and the assembled GGUF (DISTILL_TEST_GGUF)",
)
def test_ctrl_c_leaves_no_orphan(tmp_path):
    server = LocalServer(GGUF, python=_llama_python(), n_ctx=512, log=tmp_path / "llama.log")
    with pytest.raises(KeyboardInterrupt), server:
        pid = server.proc.pid
        raise KeyboardInterrupt
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
