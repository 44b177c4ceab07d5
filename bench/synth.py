"""Synth: the construct's deployed defaults, and synthesis time for 1, 10 and 50 constructs.

``python -m bench.synth OUT.json`` (a process of its own: jsii starts a node child process).

1. *Defaults*: one ``SessionExpiry`` with every cleanup target (WebSocket stage, grant key,
   scratch bucket) and no other prop; the cleanup function's ``MemorySize``, ``Timeout`` and
   environment and the event source mapping's properties are read from the synthesized
   template. The throughput runs use these values. This stack also warms up jsii.
2. *Scaling*: for n in 1, 10, 50, a new ``App`` holding n ``SessionExpiry`` constructs (no
   optional prop: each with its own table, function, queue, layer and alarms), at most
   :data:`CONSTRUCTS_PER_STACK` to a stack (CloudFormation's 500-resource limit: 50 default
   constructs are 650 resources, which ``app.synth()`` rejects in one stack);
   the time to build the constructs and the time of ``app.synth()`` are taken separately, best
   of ``repeats``. A least-squares line ``t = a + b*n`` gives the cost per construct ``b``; R²
   and the marginal costs between the points show whether growth is linear.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_DEPRECATED", "quiet")
os.environ.setdefault("NODE_NO_WARNINGS", "1")

ENV = {"account": "123456789012", "region": "us-east-1"}


def _defaults(outdir: str) -> dict[str, Any]:
    from aws_cdk import App, Stack
    from aws_cdk import aws_apigatewayv2 as apigwv2
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_s3 as s3

    from cdk_session_expiry import SessionExpiry
    from cdk_session_expiry._runtime_contract import CLEANUP_HANDLER

    app = App(outdir=outdir)
    stack = Stack(app, "BenchDefaults", env=ENV)
    api = apigwv2.WebSocketApi(stack, "Api")
    stage = apigwv2.WebSocketStage(stack, "Stage", web_socket_api=api, stage_name="prod")
    SessionExpiry(
        stack,
        "Sessions",
        websocket_stage=stage,
        grant_key=kms.Key(stack, "GrantKey"),
        scratch_bucket=s3.Bucket(stack, "Scratch"),
    )
    template = app.synth().get_stack_by_name("BenchDefaults").template
    resources = template["Resources"].values()
    fn = next(
        r["Properties"]
        for r in resources
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"].get("Handler") == CLEANUP_HANDLER
    )
    esm = next(r["Properties"] for r in resources if r["Type"] == "AWS::Lambda::EventSourceMapping")
    env = fn.get("Environment", {}).get("Variables", {})
    return {
        "memory_mb": fn.get("MemorySize", 128),
        "timeout_s": fn.get("Timeout", 3),
        "runtime": fn.get("Runtime"),
        "architectures": fn.get("Architectures", ["x86_64"]),
        "environment": {k: v for k, v in env.items() if isinstance(v, str)},
        "event_source_mapping": {
            k: esm.get(k)
            for k in (
                "BatchSize",
                "MaximumBatchingWindowInSeconds",
                "ParallelizationFactor",
                "MaximumRetryAttempts",
                "MaximumRecordAgeInSeconds",
                "BisectBatchOnFunctionError",
                "StartingPosition",
                "FunctionResponseTypes",
            )
        },
    }


#: CloudFormation allows 500 resources a stack and a default ``SessionExpiry`` has 23 (since the
#: pause watch and its alarms), so one stack holds at most 21; the scaling runs put at most this
#: many in each stack.
CONSTRUCTS_PER_STACK = 20


def _scaled(n: int, outdir: str) -> tuple[float, float, int, int]:
    from aws_cdk import App, Stack

    from cdk_session_expiry import SessionExpiry

    t0 = time.perf_counter()
    app = App(outdir=outdir)
    stacks: list[Any] = []
    for i in range(n):
        if i % CONSTRUCTS_PER_STACK == 0:
            stacks.append(Stack(app, f"BenchScale{len(stacks)}", env=ENV))
        SessionExpiry(stacks[-1], f"Sessions{i}")
    t1 = time.perf_counter()
    assembly = app.synth()
    t2 = time.perf_counter()
    resources = sum(
        len(assembly.get_stack_by_name(s.stack_name).template["Resources"]) for s in stacks
    )
    return t1 - t0, t2 - t1, resources, len(stacks)


def fit(points: list[tuple[float, float]]) -> dict[str, float]:
    """Least squares ``t = a + b*n`` over ``points``; R² of the fit."""
    ns = [p[0] for p in points]
    ts = [p[1] for p in points]
    mn, mt = sum(ns) / len(ns), sum(ts) / len(ts)
    sxx = sum((n - mn) ** 2 for n in ns)
    b = sum((n - mn) * (t - mt) for n, t in points) / sxx
    a = mt - b * mn
    ss_res = sum((t - (a + b * n)) ** 2 for n, t in points)
    ss_tot = sum((t - mt) ** 2 for t in ts) or 1e-12
    return {"intercept_s": a, "per_construct_s": b, "r2": 1 - ss_res / ss_tot}


def run(sizes: tuple[int, ...] = (1, 10, 50), repeats: int = 2) -> dict[str, Any]:
    t0 = time.perf_counter()
    import aws_cdk  # noqa: F401

    import cdk_session_expiry  # noqa: F401

    t_import = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="bench-synth-") as tmp:
        t1 = time.perf_counter()
        defaults = _defaults(str(Path(tmp) / "defaults"))
        t_first = time.perf_counter() - t1
        rows = []
        for n in sizes:
            best: tuple[float, float, int, int] | None = None
            for r in range(repeats):
                sample = _scaled(n, str(Path(tmp) / f"scale-{n}-{r}"))
                if best is None or sample[0] + sample[1] < best[0] + best[1]:
                    best = sample
            assert best is not None
            build, synth, resources, stacks = best
            rows.append(
                {
                    "constructs": n,
                    "stacks": stacks,
                    "build_s": build,
                    "synth_s": synth,
                    "total_s": build + synth,
                    "resources": resources,
                }
            )
    line = fit([(r["constructs"], r["total_s"]) for r in rows])
    marginal = [
        {
            "from": a["constructs"],
            "to": b["constructs"],
            "per_construct_s": (b["total_s"] - a["total_s"]) / (b["constructs"] - a["constructs"]),
        }
        for a, b in itertools.pairwise(rows)
    ]
    return {
        "import_s": t_import,
        "first_synth_s": t_first,
        "defaults": defaults,
        "rows": rows,
        "fit": line,
        "marginal": marginal,
        "repeats": repeats,
        "constructs_per_stack": CONSTRUCTS_PER_STACK,
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.synth OUT.json``: the synth measurement alone, written to OUT.json."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.synth",
        description="Synth time of stacks with 1, 10 and 50 SessionExpiry constructs "
        "(BENCH_SYNTH_SIZES, BENCH_SYNTH_REPEATS), written as JSON.",
    )
    parser.add_argument("out", type=Path, help="the JSON file to write")
    out = parser.parse_args(argv).out
    sizes = tuple(int(x) for x in os.environ.get("BENCH_SYNTH_SIZES", "1,10,50").split(","))
    repeats = int(os.environ.get("BENCH_SYNTH_REPEATS", "2"))
    out.write_text(json.dumps(run(sizes, repeats), indent=2))


if __name__ == "__main__":
    main()
