"""Cold start: import the handler module and create its clients in a fresh interpreter.

Each sample is a new ``python`` process running :func:`probe`, which times (``perf_counter``
from its first line) the import of the handler module, plus the creation of its boto3 clients
when the module creates them lazily. The process's whole wall time (interpreter start included)
is timed by the parent as well. One unmeasured run first writes the ``.pyc`` files, as the
Lambda runtime's own boto3 has them.

Implementations: ``handler`` (this project), ``naive`` (:mod:`bench.naive`, boto3 only) and
``powertools`` (:mod:`bench.powertools_ref`, run in ``bench/.venv-powertools``, created here
with pinned versions when missing).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import harness

POWERTOOLS_VERSION = "3.37.0"
POWERTOOLS_VENV = harness.REPO / "bench" / ".venv-powertools"
MODULES = {
    "handler": "session_expiry_runtime.handler",
    "naive": "bench.naive",
    "powertools": "bench.powertools_ref",
}


def powertools_python(log: Any = sys.stderr) -> Path:
    """The throwaway venv's python with ``aws-lambda-powertools`` and this venv's boto3."""
    import boto3

    py = POWERTOOLS_VENV / "bin" / "python"
    stamp = POWERTOOLS_VENV / f".installed-{POWERTOOLS_VERSION}-boto3-{boto3.__version__}"
    if not stamp.exists():
        print(f"creating {POWERTOOLS_VENV} (aws-lambda-powertools=={POWERTOOLS_VERSION})", file=log)
        subprocess.run(  # noqa: S603 - fixed arguments
            [sys.executable, "-m", "venv", "--clear", str(POWERTOOLS_VENV)], check=True
        )
        pip = subprocess.run(  # noqa: S603 - fixed arguments, pinned versions
            [
                str(py),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                f"aws-lambda-powertools=={POWERTOOLS_VERSION}",
                f"boto3=={boto3.__version__}",
            ],
            capture_output=True,
            text=True,
        )
        if pip.returncode:
            print(pip.stdout, pip.stderr, file=log)
            pip.check_returncode()
        stamp.touch()
    return py


def probe(impl: str) -> dict[str, float]:
    t0 = time.perf_counter()
    import importlib

    module = importlib.import_module(MODULES[impl])
    t_import = time.perf_counter() - t0
    factory = getattr(module, "BENCH_CLIENT_FACTORY", None)
    if impl == "handler":
        _create_handler_clients(module)
    elif factory:
        factory()
    return {"import_s": t_import, "total_s": time.perf_counter() - t0}


def _create_handler_clients(module: Any) -> None:
    """Create the project handler's clients if importing it did not (lazy creation)."""
    for name in ("get_cleaner", "_get_cleaner", "cleaner", "_cleaner", "get_clients", "_clients"):
        fn = getattr(module, name, None)
        if callable(fn):
            fn()
            return


def _env(endpoint: str) -> dict[str, str]:
    return {
        **os.environ,
        **harness.AWS_ENV,
        "AWS_ENDPOINT_URL": endpoint,
        "SESSION_EXPIRY_WEBSOCKET_ENDPOINT": f"{endpoint}/{harness.STAGE}",
        "SESSION_EXPIRY_GRANT_KEY_ARN": "arn:aws:kms:us-east-1:123456789012:key/bench",
        "SESSION_EXPIRY_SCRATCH_BUCKET": "bench-bucket",
        "SESSION_EXPIRY_SCRATCH_ROOT": harness.SCRATCH_ROOT,
        "SESSION_EXPIRY_OWNERSHIP_TABLE_NAME": "bench-ownership",
        "PYTHONPATH": os.pathsep.join([str(harness.REPO), str(harness.REPO / "lambda_src")]),
        "PYTHONDONTWRITEBYTECODE": "",
    }


def _command(impl: str, python: Path | None) -> list[str]:
    py = str(python or sys.executable)
    return [py, "-c", f"import json, bench.coldstart as c; print(json.dumps(c.probe({impl!r})))"]


def _sample(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """One fresh process: (import + clients seconds, whole process seconds)."""
    t0 = time.perf_counter()
    out = subprocess.run(  # noqa: S603 - our own module, fixed arguments
        cmd, env=env, cwd=harness.REPO, check=True, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    return float(json.loads(out.stdout.strip().splitlines()[-1])["total_s"]), wall


def measure_interleaved(impls: dict[str, Path | None], runs: int) -> list[dict[str, Any]]:
    """``runs`` samples of each implementation, taken in turn (A, B, C, A, B, C, ...), so a
    change in the machine's load during the measurement weighs on all of them alike."""
    env = _env("http://127.0.0.1:9")  # clients are created, never used: nothing listens
    cmds = {impl: _command(impl, py) for impl, py in impls.items()}
    for cmd in cmds.values():  # an unmeasured first run writes the .pyc files
        subprocess.run(cmd, env=env, cwd=harness.REPO, check=True, capture_output=True)  # noqa: S603
    samples: dict[str, list[tuple[float, float]]] = {impl: [] for impl in impls}
    for _ in range(runs):
        for impl, cmd in cmds.items():
            samples[impl].append(_sample(cmd, env))
    base = [p[0] for p in samples.get("naive", [])]
    results = []
    for impl, pairs in samples.items():
        inner = [p[0] for p in pairs]
        result = {
            "impl": impl,
            "runs": runs,
            "median_ms": statistics.median(inner) * 1000,
            "min_ms": min(inner) * 1000,
            "max_ms": max(inner) * 1000,
            "process_median_ms": statistics.median(p[1] for p in pairs) * 1000,
        }
        if base:
            # Each round's ratio to the baseline sample taken next to it, then the median: a
            # change of the machine's speed between rounds cancels out within a round.
            result["paired_ratio_median"] = statistics.median(
                x / b for x, b in zip(inner, base, strict=True)
            )
        results.append(result)
    return results


def run_all(runs: int = 15, log: Any = sys.stderr) -> list[dict[str, Any]]:
    impls: dict[str, Path | None] = {"handler": None, "naive": None}
    try:
        impls["powertools"] = powertools_python(log)
    except subprocess.CalledProcessError as exc:
        print(f"powertools reference skipped: {exc}", file=log)
    return measure_interleaved(impls, runs)
