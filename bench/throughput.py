"""Cleanup throughput and calls per session: the project's handler against the naive baseline.

For each scenario and each implementation: build a fresh fixture (own table, bucket and KMS
key; latency 0 while building), set the injected latency, run the implementation once over the
whole batch in a fresh process (:mod:`bench.case`), read the moto server's CPU time around the
run, then verify every session clean and every control session intact (latency 0 again).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import harness

#: name -> (module whose ``handler`` runs, environment overrides)
IMPLS: dict[str, tuple[str, dict[str, str]]] = {
    "naive": ("bench.naive", {}),
    "handler": ("session_expiry_runtime.handler", {}),
}


@dataclass
class RunResult:
    scenario: harness.Scenario
    impl: str
    case: dict[str, Any]
    verification: harness.Verification
    server_cpu_s: float
    latency_ms: float

    @property
    def sessions_per_s(self) -> float:
        return self.scenario.sessions / self.case["wall_s"]

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": asdict(self.scenario),
            "impl": self.impl,
            "case": self.case,
            "verification": {**asdict(self.verification), "clean": self.verification.clean},
            "server_cpu_s": self.server_cpu_s,
            "latency_ms": self.latency_ms,
            "sessions_per_s": self.sessions_per_s,
        }


def minimum_calls(objects: int) -> dict[str, int]:
    """The fewest calls that can clean one session with ``objects`` scratch objects."""
    pages = max(1, math.ceil(objects / 1000))
    return {
        "DeleteConnection": 1,
        "RetireGrant": 1,
        "ListObjectsV2": pages,
        "DeleteObjects": math.ceil(objects / 1000),
    }


def server_cpu_s(pid: int) -> float:
    """utime + stime of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return float(int(fields[11]) + int(fields[12])) / ticks


def run_case(
    server: harness.MotoServer,
    scenario: harness.Scenario,
    impl: str,
    *,
    module: str,
    env_overrides: dict[str, str],
    latency_ms: float,
    defaults: dict[str, Any],
    workdir: Path,
) -> RunResult:
    fx = harness.build_fixture(server, scenario, impl)
    event_path = workdir / f"{fx.run_id}.event.json"
    event_path.write_text(json.dumps(fx.event))
    warmup_path = workdir / f"{fx.run_id}.warmup.json"
    warmup_path.write_text(json.dumps(fx.warmup_event))
    env = {
        **harness.AWS_ENV,
        # The construct's own environment for the function (attribute names, max workers, ...),
        # then the bench's targets in place of the tokens it holds.
        **defaults.get("environment", {}),
        "AWS_ENDPOINT_URL": server.endpoint,
        "SESSION_EXPIRY_WEBSOCKET_ENDPOINT": f"{server.endpoint}/{harness.STAGE}",
        "SESSION_EXPIRY_GRANT_KEY_ARN": fx.key_arn,
        "SESSION_EXPIRY_SCRATCH_BUCKET": fx.bucket,
        "SESSION_EXPIRY_SCRATCH_ROOT": harness.SCRATCH_ROOT,
        "SESSION_EXPIRY_TABLE_NAME": fx.table,
        **env_overrides,
    }
    spec = {
        "impl": impl,
        "module": module,
        "event_path": str(event_path),
        "warmup_path": str(warmup_path),
        "env": env,
        "timeout_s": defaults.get("timeout_s", 300),
        "memory_mb": defaults.get("memory_mb", 256),
        "repo": str(harness.REPO),
        "lambda_src": str(harness.REPO / "lambda_src"),
    }
    spec_path = workdir / f"{fx.run_id}.spec.json"
    result_path = workdir / f"{fx.run_id}.result.json"
    spec_path.write_text(json.dumps(spec))
    server.set_latency_ms(latency_ms)
    cpu0 = server_cpu_s(server.proc.pid)
    with open(workdir / f"{fx.run_id}.log", "w") as log:
        subprocess.run(  # noqa: S603 - our own module
            [sys.executable, "-m", "bench.case", str(spec_path), str(result_path)],
            cwd=harness.REPO,
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
        )
    cpu = server_cpu_s(server.proc.pid) - cpu0
    case = json.loads(result_path.read_text())
    verification = harness.verify(server, fx)
    return RunResult(scenario, impl, case, verification, cpu, latency_ms)


def run_all(
    scenarios: list[harness.Scenario],
    *,
    latency_ms: float,
    defaults: dict[str, Any],
    log: Any = sys.stderr,
    impls: dict[str, tuple[str, dict[str, str]]] | None = None,
    extra: Sequence[tuple[harness.Scenario, str, str, dict[str, str]]] = (),
) -> list[RunResult]:
    """Run every scenario with every implementation, then the ``extra`` runs
    ``(scenario, name, module, env overrides)``; print one line per run to ``log``."""
    plan = [
        (scenario, name, module, env)
        for scenario in scenarios
        for name, (module, env) in (impls or IMPLS).items()
    ] + list(extra)
    harness.aws_env()
    results: list[RunResult] = []
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        workdir = Path(tmp)
        server = harness.MotoServer(workdir / "moto_server.log")
        try:
            for scenario, impl, module, env in plan:
                r = run_case(
                    server,
                    scenario,
                    impl,
                    module=module,
                    env_overrides=env,
                    latency_ms=latency_ms,
                    defaults=defaults,
                    workdir=workdir,
                )
                print(
                    f"  {scenario.name:>10} {impl:>16}: {r.case['wall_s']:7.2f} s, "
                    f"{r.sessions_per_s:8.1f} sessions/s, server CPU {r.server_cpu_s:5.2f} s, "
                    f"{r.verification.summary()}",
                    file=log,
                    flush=True,
                )
                results.append(r)
        finally:
            server.stop()
            results_dir = harness.REPO / "bench" / "results"
            results_dir.mkdir(exist_ok=True)
            shutil.copy(workdir / "moto_server.log", results_dir / "moto_server.log")
    return results
