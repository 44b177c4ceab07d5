"""Where the cleanup's remaining CPU goes: the same calls over threads and over an event loop.

``python -m bench.transport_probe`` (not part of ``make bench``; about a minute after its venv is
built) measures one thing the throughput table cannot separate: what running calls side by side
on threads costs in CPU, against running them on one asyncio event loop. Each "session" makes
three ``ListObjectsV2`` calls (an empty listing, 200) against the bench endpoint
(:mod:`bench.endpoint`) with 20 ms injected per call, three ways:

* ``sequential``: boto3, one thread, one call after another (the naive baseline's shape);
* ``threads``: boto3, 32 record threads, each session's three calls side by side on a step pool
  of 64 threads (the handler's shape, :mod:`session_expiry_runtime.cleanup.batch`);
* ``event loop``: aiobotocore (botocore's serialisation, signing and parsing over aiohttp), one
  thread, 32 sessions at a time, each session's three calls side by side.

Each round runs the three in turn (interleaved, so a change of the machine's load weighs on all
alike), each in a fresh process; user and kernel CPU and context switches come from
``getrusage`` of that process around the measured sessions (connections already open).
aiobotocore pins botocore to a narrow range of its own, so the probe runs in a throwaway venv,
``bench/.venv-aio`` (created here, like ``bench/.venv-powertools``), with the boto3 that range
admits: the three rows use the same botocore. It also reports what importing aiobotocore and
aiohttp adds on top of boto3 (a cold start cost; BENCHMARKS.md's cold start goal is 1.1x).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

AIOBOTOCORE_VERSION = "3.10.0"
AIO_VENV = Path(__file__).resolve().parent / ".venv-aio"
MODES = ("sequential", "threads", "event loop")
#: Sessions measured per run: the sequential one waits 60 ms a session, the others overlap.
SESSIONS = {"sequential": 100, "threads": 500, "event loop": 500}
WORKERS, STEP_THREADS, LATENCY_MS, ROUNDS = 32, 64, 20, 3


def aio_python(log: Any = sys.stderr) -> Path:
    """The throwaway venv's python, with aiobotocore and the boto3 its botocore pin admits."""
    py = AIO_VENV / "bin" / "python"
    stamp = AIO_VENV / f".installed-{AIOBOTOCORE_VERSION}"
    if not stamp.exists():
        print(f"creating {AIO_VENV} (aiobotocore=={AIOBOTOCORE_VERSION})", file=log)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(AIO_VENV)], check=True)  # noqa: S603
        subprocess.run(  # noqa: S603 - fixed arguments, pinned version
            [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             f"aiobotocore=={AIOBOTOCORE_VERSION}", "boto3"],
            check=True,
        )  # fmt: skip
        stamp.touch()
    return py


# --- the child: one mode, one process ------------------------------------------------------


def _usage() -> tuple[float, float, int]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime, r.ru_nvcsw + r.ru_nivcsw


def _per_session(before: tuple[float, float, int], t0: float, sessions: int) -> dict[str, float]:
    """CPU and context switches per session since ``before`` (``_usage()``) and ``t0``."""
    after, wall = _usage(), time.perf_counter() - t0
    return {
        "wall_s": wall,
        "user_ms": 1000 * (after[0] - before[0]) / sessions,
        "kernel_ms": 1000 * (after[1] - before[1]) / sessions,
        "switches": (after[2] - before[2]) / sessions,
    }


def _measured(run: Callable[[int], None], sessions: int) -> dict[str, float]:
    before, t0 = _usage(), time.perf_counter()
    run(sessions)
    return _per_session(before, t0, sessions)


def _prefix(session: int, step: int) -> str:
    return f"sessions/s-{session}/{step}/"


def _settings(pool: int) -> dict[str, Any]:
    return {
        "max_pool_connections": pool,
        "retries": {"mode": "standard"},
        "s3": {"addressing_style": "path"},
        "parameter_validation": False,
    }


def _boto3_runner(mode: str, endpoint: str) -> Callable[[int], None]:
    from concurrent.futures import ThreadPoolExecutor, wait

    import boto3
    from botocore.config import Config

    s3 = boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", config=Config(**_settings(128))
    )

    def call(session: int, step: int) -> None:
        s3.list_objects_v2(Bucket="bench", Prefix=_prefix(session, step))

    def one_after_another(n: int) -> None:
        for session in range(n):
            for step in range(3):
                call(session, step)

    if mode == "sequential":
        call(0, 0)  # the connection opened
        return one_after_another
    steps, records = ThreadPoolExecutor(STEP_THREADS), ThreadPoolExecutor(WORKERS)

    def one(session: int) -> None:
        side = [steps.submit(call, session, k) for k in (1, 2)]
        call(session, 0)
        wait(side)

    def side_by_side(n: int) -> None:
        list(records.map(one, range(n)))

    side_by_side(2 * WORKERS)  # every connection opened
    return side_by_side


def _event_loop(endpoint: str, sessions: int) -> dict[str, float]:
    import asyncio

    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    async def main() -> dict[str, float]:
        config = AioConfig(**_settings(128))
        async with get_session().create_client(
            "s3", endpoint_url=endpoint, region_name="us-east-1", config=config
        ) as s3:
            gate = asyncio.Semaphore(WORKERS)

            async def one(session: int) -> None:
                async with gate:
                    calls = (
                        s3.list_objects_v2(Bucket="bench", Prefix=_prefix(session, k))
                        for k in range(3)
                    )
                    await asyncio.gather(*calls)

            async def run(n: int) -> None:
                await asyncio.gather(*(one(i) for i in range(n)))

            await run(2 * WORKERS)  # every connection opened
            before, t0 = _usage(), time.perf_counter()
            await run(sessions)
            return _per_session(before, t0, sessions)

    return asyncio.run(main())


def _imports() -> dict[str, float]:
    t0 = time.perf_counter()
    import boto3  # noqa: F401

    t1 = time.perf_counter()
    import aiobotocore.session  # noqa: F401
    import aiohttp  # noqa: F401

    return {"boto3_ms": 1000 * (t1 - t0), "aio_ms": 1000 * (time.perf_counter() - t1)}


def child(mode: str, endpoint: str) -> dict[str, float]:
    """One measurement in this process (run in :data:`AIO_VENV`)."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    if mode == "imports":
        return _imports()
    if mode == "event loop":
        return _event_loop(endpoint, SESSIONS[mode])
    return _measured(_boto3_runner(mode, endpoint), SESSIONS[mode])


# --- the parent: rounds and the table -----------------------------------------------------


def _run_child(py: Path, mode: str, endpoint: str) -> dict[str, float]:
    out = subprocess.run(  # noqa: S603 - our own module, fixed arguments
        [str(py), "-m", "bench.transport_probe", "--child", mode, endpoint],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:  # say why: the child's stderr is captured, not shown
        tail = "\n".join(out.stderr.strip().splitlines()[-5:])
        raise SystemExit(f"transport_probe: the {mode} run failed ({out.returncode}):\n{tail}")
    return dict(json.loads(out.stdout.splitlines()[-1]))


def _span(values: list[float], digits: int = 2) -> str:
    return f"{min(values):.{digits}f}\u2013{max(values):.{digits}f}"


def table(runs: dict[str, list[dict[str, float]]], imports: list[dict[str, float]]) -> str:
    """The probe's markdown table: per mode the ranges over rounds, and CPU ÷ sequential's."""
    cpu = {m: [r["user_ms"] + r["kernel_ms"] for r in runs[m]] for m in MODES}
    rows = [
        "| Transport | Rounds | User CPU ms per session | Kernel CPU ms per session | "
        "CPU ms per session | ÷ sequential's (same round) | Context switches per session |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in MODES:
        ratio = [c / s for c, s in zip(cpu[m], cpu["sequential"], strict=True)]
        rows.append(
            f"| {m} | {len(runs[m])} | {_span([r['user_ms'] for r in runs[m]])} | "
            f"{_span([r['kernel_ms'] for r in runs[m]])} | {_span(cpu[m])} | {_span(ratio)} | "
            f"{_span([r['switches'] for r in runs[m]], 1)} |"
        )
    boto3_ms = statistics.median(i["boto3_ms"] for i in imports)
    aio_ms = statistics.median(i["aio_ms"] for i in imports)
    rows.append("")
    rows.append(
        f"Import: boto3 {boto3_ms:.0f} ms; aiobotocore and aiohttp on top of it {aio_ms:.0f} ms "
        f"(medians of {len(imports)} fresh processes)."
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.transport_probe",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keep the docstring's list
    )
    parser.add_argument("--child", nargs=2, metavar=("MODE", "ENDPOINT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    from . import harness, report

    py = aio_python()
    endpoint = harness.BenchEndpoint(Path(tempfile.mkdtemp()) / "endpoint.log")
    load_before = os.getloadavg()
    try:
        endpoint.set_latency_ms(LATENCY_MS)
        runs: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
        imports = []
        for _ in range(ROUNDS):
            for m in MODES:
                runs[m].append(_run_child(py, m, endpoint.endpoint))
            imports.append(_run_child(py, "imports", endpoint.endpoint))
    finally:
        endpoint.stop()
    data = {"machine": report.machine(), "loads": {"probe": {"before": load_before}}}
    data["loads"]["probe"]["after"] = os.getloadavg()
    print(report.machine_line(data, "probe"))
    print(f"\n3 ListObjectsV2 a session, {LATENCY_MS} ms injected per call.\n")
    print(table(runs, imports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
