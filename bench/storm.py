"""Expiry storms: N sessions due at once, every call made by the real sweeper and cleanup code.

``python -m bench --storm`` (a section of ``make bench``). For each storm size:

1. **Every call, for real** (:func:`real_run`): N sessions written in the store's format
   (:mod:`bench.sessions`: item with its sweep shard, incarnation, connection, grant, ownership
   records) into the bench endpoint held in process (:mod:`bench.transport`), all due at the same
   second. The real ``ExpirySweeper``, fanned out as the construct deploys it by default (one
   sweeper and client per worker over its own shards, the workers at once on threads), Queries
   the sweep index and deletes every one of them (``DeleteItem`` with its condition); the
   endpoint keeps each delete's REMOVE record; the records go to stream shards by key, in
   order, and the real cleanup handler
   (``session_expiry_runtime.handler.handler``, pacing included) is invoked on each batch of
   ``batch_size`` as the event source mapping would invoke it. Then every session is verified
   clean (connection closed, grant retired, ownership records released, item gone). The calls
   are counted by operation: calls per session feed the clock below.
2. **The clock, simulated** (:mod:`bench.storm_model`): when each session is cleaned under the
   published quotas and the construct's settings, from the calls counted in 1., the cleanup's CPU
   per session and the sweeper's CPU per ``DeleteItem`` measured over HTTP on this machine,
   each in a process of its own (:func:`calibrate_cleanup`, :func:`calibrate_sweeper`). Time
   to drain, expiry-to-clean p50/p99, calls per second per API against its quota, and the
   first limit reached; then the same storms with the settings that move that limit.
3. **Backpressure, in real time** (:func:`pacing_demo`): the real handler in its own process
   against the HTTP bench endpoint answering ``ThrottlingException`` above a ``RetireGrant``
   quota scaled to the bench (a batch far above it): botocore's ``standard`` mode alone,
   ``adaptive`` mode, and the project's pacing — records failed, throttled attempts, the
   highest number of attempts in one second.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import secrets
import sys
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.ownership import ATTR_RESOURCE, ATTR_STATE, STATE_RELEASED
from session_expiry_runtime.core.shared_pace import PACE_KIND
from session_expiry_runtime.records import stream_records

from . import endpoint, harness, sessions, storm_model, transport

TABLE = "storm-sessions"
OWNERSHIP = "storm-ownership"
KEY_ARN = f"arn:aws:kms:{harness.REGION}:{harness.ACCOUNT_ID}:key/storm"
STREAM_ARN = (
    f"arn:aws:dynamodb:{harness.REGION}:{harness.ACCOUNT_ID}:table/{TABLE}/stream/2026-12-01T00"
)
SWEEP_INDEX = "expirySweep"
#: The in-process answer's wait (seconds); the simulated clock uses the model's latencies.
LATENCY_S = 0.003
SWEEP_SHARD_ATTRIBUTE = "expiryShard"


def _config() -> RuntimeConfig:
    return RuntimeConfig(
        table_name=TABLE,
        ownership_table_name=OWNERSHIP,
        sweep_shard_attribute=SWEEP_SHARD_ATTRIBUTE,
        sweep_shards=4,
        sweep_index_name=SWEEP_INDEX,
        grant_key_arn=KEY_ARN,
        websocket_endpoint=f"{transport.ENDPOINT_URL}/{harness.STAGE}",
        scratch_bucket="storm-scratch",
    )


def _env(config: RuntimeConfig) -> dict[str, str]:
    """The cleanup function's environment (the construct's names) for the storm's targets."""
    return {
        **harness.AWS_ENV,
        "AWS_ENDPOINT_URL": transport.ENDPOINT_URL,
        "SESSION_EXPIRY_TABLE_NAME": TABLE,
        "SESSION_EXPIRY_OWNERSHIP_TABLE_NAME": OWNERSHIP,
        "SESSION_EXPIRY_GRANT_KEY_ARN": KEY_ARN,
        "SESSION_EXPIRY_WEBSOCKET_ENDPOINT": str(config.websocket_endpoint),
        "SESSION_EXPIRY_SCRATCH_BUCKET": str(config.scratch_bucket),
        "SESSION_EXPIRY_SCRATCH_ROOT": config.scratch_root,
        "SESSION_EXPIRY_SWEEP_SHARD_ATTRIBUTE": SWEEP_SHARD_ATTRIBUTE,
        "SESSION_EXPIRY_SWEEP_SHARDS": "4",
        "SESSION_EXPIRY_SWEEP_INDEX_NAME": SWEEP_INDEX,
        **harness.UNPACED_ENV,  # the clock applies the budget: storm_model.Settings
    }


def seed(
    n: int, due: int, config: RuntimeConfig, part: tuple[int, int] = (0, 1)
) -> list[sessions.SessionSpec]:
    """``n`` sessions due at ``due`` (epoch seconds) in the endpoint, in the store's format
    (only those of ``part`` = ``(k, parts)``: the sessions ``i`` with ``i % parts == k``)."""
    created = due - 3_600
    specs = [
        sessions.SessionSpec(
            f"st-{i}",
            secrets.token_hex(16),
            created_at=created,
            expires_at=due,
            connection_id=f"sc-{i}=",
            grant_id=f"{i:064x}",
            grant_token=f"token-{i}",
        )
        for i in range(part[0], n, part[1])
    ]
    state = endpoint.STATE
    state.reset()
    state.tables.create(
        TABLE, "pk", stream=True, indexes={SWEEP_INDEX: (SWEEP_SHARD_ATTRIBUTE, "expiresAt")}
    )
    state.tables.create(OWNERSHIP, ATTR_RESOURCE)
    state.tables.seed(TABLE, [sessions.session_item(config, s) for s in specs])
    state.tables.seed(OWNERSHIP, [c for s in specs for c in sessions.claim_items(config, s)])
    state.seed(
        {
            "connections": [s.connection_id for s in specs],
            "grants": [{"id": s.grant_id, "token": s.grant_token} for s in specs],
        }
    )
    return specs


@contextlib.contextmanager
def _in_process(env: dict[str, str]) -> Iterator[transport.InProcessTransport]:
    """Every botocore client created inside answers from the endpoint in process; the
    environment is the function's; the runtime's logs and metrics are discarded."""
    import botocore.session

    # A few milliseconds a call: the cleanup's threads then overlap their waits as they do on a
    # network, and its ownership records' marks and releases coalesce as they would.
    tr = transport.InProcessTransport(latency_s=LATENCY_S)
    original = botocore.session.Session.create_client

    def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = original(self, *args, **kwargs)
        client.meta.events.register_last("before-send", tr)
        return client

    saved = dict(os.environ)
    os.environ.update(env)
    botocore.session.Session.create_client = create_client
    quiet = logging.getLogger("session_expiry_runtime")
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield tr
    finally:
        botocore.session.Session.create_client = original
        quiet.setLevel(level)
        os.environ.clear()
        os.environ.update(saved)


def real_run(
    n: int,
    *,
    shards: int = 4,
    batch_size: int = 100,
    part: tuple[int, int] = (0, 1),
    log: Any = sys.stderr,
) -> dict[str, Any]:
    """Sweep and clean ``n`` due sessions with the real code, every call made (see module);
    with ``part`` only that share of them (:func:`run_calls`)."""
    from session_expiry_runtime import handler as handler_module
    from session_expiry_runtime.sweeps.sweeper import sweeper_client_config

    config = _config()
    due = int(time.time()) - 5
    started = time.perf_counter()
    specs = seed(n, due, config, part)
    with _in_process(_env(config)) as tr:
        import boto3

        def ddb() -> Any:  # one client per worker: each is its own invocation
            return boto3.client(
                "dynamodb",
                endpoint_url=transport.ENDPOINT_URL,
                config=sweeper_client_config(config.time_guard_ms, config.max_workers),
            )

        passes = _fanned_out_sweep(config, ddb, Decimal(due + 1))
        sweep_calls = Counter(tr.calls)
        tr.calls.clear()
        removes = endpoint.STATE.tables.take_removes()
        handler_module._cleaner = None  # a fresh execution environment with this environment
        invocations = _invoke(handler_module, removes, shards, batch_size)
        cleanup_calls = Counter(tr.calls)
    verified = verify(specs)
    elapsed = time.perf_counter() - started
    print(
        f"  storm {n:>7,}: {sum(p['swept'] for p in passes):,} swept in {len(passes)} passes, "
        f"{len(invocations)} invocations, {sum(cleanup_calls.values()):,} cleanup calls, "
        f"{sum(sweep_calls.values()):,} sweeper calls, {elapsed:.0f} s; {verified['summary']}",
        file=log,
        flush=True,
    )
    return {
        "sessions": n,
        "passes": passes,
        "sweeper_calls": dict(sweep_calls),
        "cleanup_calls": dict(cleanup_calls),
        "invocations": len(invocations),
        "failed_records": sum(i["failed"] for i in invocations),
        "verification": verified,
        "elapsed_s": elapsed,
    }


def _fanned_out_sweep(config: RuntimeConfig, new_client: Any, now: Decimal) -> list[dict[str, Any]]:
    """The construct's default fan-out with the real sweeper: one ``ExpirySweeper`` (own
    client) per worker over its shards (``sweeper.shard_groups``), the workers at once on
    threads, passes until none swept anything; every worker pass's summary."""
    from concurrent.futures import ThreadPoolExecutor

    from session_expiry_runtime.core.metrics import MetricsRecorder
    from session_expiry_runtime.sweeps.sweeper import ExpirySweeper

    from cdk_session_expiry.sweeper import shard_groups

    settings = storm_model.Settings()
    groups = shard_groups(config.sweep_shards, settings.sweep_workers)
    workers = [ExpirySweeper(config, new_client(), MetricsRecorder("Storm")) for _ in groups]
    passes: list[dict[str, Any]] = []
    with ThreadPoolExecutor(len(groups), thread_name_prefix="worker") as pool:
        while True:  # a pass stops at nothing due; one is enough
            reports = list(pool.map(lambda w, g: w.sweep(now=now, shards=g), workers, groups))
            passes += [r.as_dict() for r in reports]
            if not any(r.swept for r in reports):
                return passes


def _invoke(
    handler_module: Any, removes: list[dict[str, Any]], shards: int, batch: int
) -> list[dict[str, Any]]:
    """Invoke the handler on every batch, shard by shard, as the event source mapping does."""
    from .case import FakeContext

    lanes: list[list[dict[str, Any]]] = [[] for _ in range(shards)]
    for record in removes:  # a sweeper's delete carries no userIdentity
        key = record["dynamodb"]["Keys"]["pk"]["S"]
        lanes[zlib.crc32(key.encode()) % shards].append(
            stream_records.to_lambda_record(record, stream_arn=STREAM_ARN, region=harness.REGION)
        )
    out = []
    for lane in lanes:
        for i in range(0, len(lane), batch):
            event = {"Records": lane[i : i + batch]}
            response = handler_module.handler(event, FakeContext(300, 1769))
            out.append(
                {"records": len(event["Records"]), "failed": len(response["batchItemFailures"])}
            )
    return out


def verify(specs: list[sessions.SessionSpec]) -> dict[str, Any]:
    """Every storm session's item gone, connection closed, grant retired, records released."""
    state = endpoint.STATE
    items_left = len(state.tables.table(TABLE).items)
    connections = sum(1 for s in specs if s.connection_id in state.connections)
    grants = sum(1 for s in specs if s.grant_id in state.grant_ids)
    claims = [
        c
        for c in state.tables.table(OWNERSHIP).items.values()
        if not c[ATTR_RESOURCE]["S"].startswith(f"{PACE_KIND}#")  # the shared budget's counters
    ]
    held = sum(1 for c in claims if c[ATTR_STATE]["S"] != STATE_RELEASED)
    clean = not (items_left or connections or grants or held)
    return {
        "clean": clean,
        "items_left": items_left,
        "connections_left": connections,
        "grants_left": grants,
        "claims_not_released": held,
        "summary": "every session clean (ownership records released)"
        if clean
        else f"LEFT: {items_left} items, {connections} connections, {grants} grants, "
        f"{held} ownership records not released",
    }


# --- every call, in parallel parts ------------------------------------------------------------
def _real_part(args: tuple[int, int, int, int, int]) -> dict[str, Any]:
    """One forked process's share of a storm: the sessions ``i`` with ``i % parts == part``."""
    n, part, parts, shards, batch = args
    harness.aws_env()
    return real_run(n, shards=shards, batch_size=batch, part=(part, parts), log=io.StringIO())


def run_calls(n: int, *, parts: int = 2, shards: int = 4, batch: int = 100) -> dict[str, Any]:
    """:func:`real_run` of ``n`` sessions split over ``parts`` processes (each sweeps and
    cleans its own share against its own endpoint state), the counts added up."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    with context.Pool(parts) as pool:
        results = pool.map(_real_part, [(n, k, parts, shards, batch) for k in range(parts)])
    calls: Counter[str] = Counter()
    sweeps: Counter[str] = Counter()
    for r in results:
        calls.update(r["cleanup_calls"])
        sweeps.update(r["sweeper_calls"])
    return {
        "sessions": n,
        "parts": parts,
        "cleanup_calls": dict(calls),
        "sweeper_calls": dict(sweeps),
        "invocations": sum(r["invocations"] for r in results),
        "failed_records": sum(r["failed_records"] for r in results),
        "swept": sum(p["swept"] for r in results for p in r["passes"]),
        "clean": all(r["verification"]["clean"] for r in results),
        "verification": [r["verification"]["summary"] for r in results],
        "elapsed_s": max(r["elapsed_s"] for r in results),
    }


# --- what the clock needs, measured over HTTP on this machine -----------------------------------
#: Due sessions a sweeper calibration round deletes.
CALIBRATION_SESSIONS = 1_500


def calibrate_sweeper(
    rounds: int, workdir: Any, log: Any = sys.stderr, per_round: int = CALIBRATION_SESSIONS
) -> list[float]:
    """CPU seconds per ``DeleteItem`` of the real sweeper, one value per round, measured in a
    fresh process of its own (`measure_sweeper_cpu` in a spawned interpreter), as the sweeper
    runs in its own execution environment and as `calibrate_cleanup` measures the cleanup:
    ``time.process_time`` counts every thread of a process, and the bench's own process has run
    every earlier section of ``make bench`` by then, so nothing it holds may count.
    """
    out: list[float] = harness.in_fresh_process(
        measure_sweeper_cpu, rounds, str(workdir), per_round
    )
    print(
        f"  sweeper CPU per DeleteItem (HTTP, its own process, {rounds} rounds): "
        + ", ".join(f"{1000 * v:.2f} ms" for v in out),
        file=log,
        flush=True,
    )
    return out


def measure_sweeper_cpu(
    rounds: int, workdir: str, per_round: int = CALIBRATION_SESSIONS
) -> list[float]:
    """`calibrate_sweeper`'s measurement in this process: ``per_round`` due sessions a round
    swept by one ``ExpirySweeper`` against the HTTP bench endpoint (10 ms a call), the process's
    CPU across ``sweep()`` ÷ sessions swept; a first round of 100 warms the client up."""
    from pathlib import Path

    import boto3
    from session_expiry_runtime.core.metrics import MetricsRecorder
    from session_expiry_runtime.sweeps.sweeper import ExpirySweeper, sweeper_client_config

    harness.aws_env()
    config = _config()
    ep = harness.BenchEndpoint(Path(workdir) / "storm_calibration_endpoint.log")
    out: list[float] = []
    try:
        client = boto3.client(
            "dynamodb",
            endpoint_url=ep.endpoint,
            region_name=harness.REGION,
            config=sweeper_client_config(config.time_guard_ms, config.max_workers),
        )
        sweeper = ExpirySweeper(config, client, MetricsRecorder("Storm"))
        for round_number in range(rounds + 1):
            due = int(time.time()) - 5
            _seed_calibration(ep, config, due, 100 if round_number == 0 else per_round)
            ep.set_latency_ms(storm_model.Latency().dynamodb * 1000)
            cpu = time.process_time()
            report = sweeper.sweep(now=Decimal(due + 1))
            cpu = time.process_time() - cpu
            ep.set_latency_ms(0)
            if round_number and report.swept:
                out.append(cpu / report.swept)
    finally:
        ep.stop()
    return out


def _seed_calibration(ep: harness.BenchEndpoint, config: RuntimeConfig, due: int, n: int) -> None:
    """The endpoint's session table, holding ``n`` sessions due at ``due`` and nothing else."""
    specs = [
        sessions.SessionSpec(f"cal-{i}", secrets.token_hex(16), due - 3_600, due) for i in range(n)
    ]
    ep._call("POST", "/_bench/reset")
    ep._call(
        "POST",
        "/_bench/seed",
        {
            "tables": {
                TABLE: {
                    "hash": "pk",
                    "indexes": {SWEEP_INDEX: [SWEEP_SHARD_ATTRIBUTE, "expiresAt"]},
                    "items": [sessions.session_item(config, s) for s in specs],
                }
            }
        },
    )


def calibrate_cleanup(rounds: int, workdir: Any, log: Any = sys.stderr) -> list[float]:
    """CPU seconds per session of the cleanup handler in its own process against the HTTP
    bench endpoint (20 ms a call), sessions as the storm's (connection, grant, scratch prefix
    without objects): the throughput bench's ``0 objects`` case, one value per round."""
    from . import throughput

    ep = harness.BenchEndpoint(workdir / "storm_cleanup_endpoint.log")
    out: list[float] = []
    try:
        fx = harness.synthetic_fixture(harness.Scenario("storm calibration", 200, 0))
        for _ in range(rounds):
            r = throughput.run_case(
                ep,
                fx,
                "handler",
                module="session_expiry_runtime.handler",
                env_overrides={},
                latency_ms=20,
                defaults=DEFAULTS,
                workdir=workdir,
            )
            if r.verification.clean:
                out.append(r.case["cpu_s"] / fx.scenario.sessions)
        print(
            f"  cleanup CPU per session (HTTP, {rounds} rounds): "
            + ", ".join(f"{1000 * v:.2f} ms" for v in out),
            file=log,
            flush=True,
        )
    finally:
        ep.stop()
    return out


#: The construct's defaults the standalone storm runs the handler with (``make bench`` passes
#: the synthesized ones).
DEFAULTS: dict[str, Any] = {
    "environment": {"SESSION_EXPIRY_MAX_WORKERS": "32"},
    "timeout_s": 300,
    "memory_mb": 1769,
}


# --- backpressure in real time ------------------------------------------------------------------
#: ``RetireGrant``'s quota in the pacing table, shared by the concurrent invocations as by every
#: principal of an account: 20 a second, so that it binds just at what the shared budget's
#: default of 10 a second can send within one second's span (two wall-clock seconds' budgets can
#: meet in it: ``shared_pace``), as it does in an account whose own grant calls take most of
#: KMS's 50 (``storm_model.KMS_RETIRE_GRANT_QUOTA``). Under a smaller quota the budget is set to
#: at most half of it (docs/operating.md); 15, an earlier revision's figure, saw 4 of 304
#: attempts throttled with the default budget (BENCHMARKS.md at 973e4c5).
PACING_QUOTA = 20.0
#: Concurrent invocations (as many stream shards' batches at once) and sessions each.
PACING_INVOCATIONS = 4
PACING_SESSIONS = 75
PACING_MODES = (
    ("standard retries (botocore standard mode, 2 attempts)", "bench.retry_modes:standard_handler"),
    ("botocore adaptive mode (its rate limiter)", "bench.retry_modes:adaptive_handler"),
    ("pacing (session_expiry_runtime.core.pacing)", "bench.retry_modes:paced_handler"),
)


def pacing_demo(
    workdir: Any,
    log: Any = sys.stderr,
    invocations: int = PACING_INVOCATIONS,
    per_invocation: int = PACING_SESSIONS,
) -> list[dict[str, Any]]:
    """The real handler, three ways, in ``invocations`` processes at once (as many shards'
    batches), against the HTTP bench endpoint answering ``ThrottlingException`` above
    :data:`PACING_QUOTA` ``RetireGrant`` requests a second in all."""
    ep = harness.BenchEndpoint(workdir / "storm_pacing_endpoint.log")
    ep.limits = {"RetireGrant": PACING_QUOTA}
    rows = []
    try:
        total = invocations * per_invocation
        fx = harness.synthetic_fixture(harness.Scenario("pacing", total, 0))
        records = fx.event["Records"]
        for name, module in PACING_MODES:
            ep.prepare(fx)
            ep.set_latency_ms(20)
            results = _concurrent(
                ep,
                fx,
                module,
                [records[i::invocations] for i in range(invocations)],
                workdir / _slug(name),
            )
            ep.set_latency_ms(0)
            arrivals = ep.arrivals().get("RetireGrant", [])
            per_second = _per_second(arrivals)
            verification = ep.verify(fx)
            failed = sum(r["failures"] for r in results)
            rows.append(
                {
                    "mode": name,
                    "sessions": total,
                    "invocations": invocations,
                    "quota": PACING_QUOTA,
                    "failed": failed,
                    "wall_s": max(r["wall_s"] for r in results),
                    "attempts": len(arrivals),
                    "throttled": ep.throttled().get("RetireGrant", 0),
                    "first_second": per_second[0] if per_second else 0,
                    "peak_per_s": max(per_second[1:] or per_second or [0]),
                    "mean_per_s": len(arrivals) / max(1e-9, max(arrivals) - min(arrivals))
                    if len(arrivals) > 1
                    else 0.0,
                    "calls_paced": sum(
                        _calls_paced(p) for p in (workdir / _slug(name)).glob("*.log")
                    ),
                    # the fixture's warm-up session stays: its record is in no batch
                    "clean": verification.grants_left <= 1
                    and verification.connections_left <= 1
                    and verification.claims_not_released <= 2
                    and not verification.objects_left
                    and not verification.controls_damaged,
                }
            )
            r = rows[-1]
            print(
                f"  pacing, {name}: {failed} records failed, {r['throttled']} of {r['attempts']} "
                f"attempts throttled, {r['first_second']} in the first second then at most "
                f"{r['peak_per_s']}/s, {r['calls_paced']} calls paced, {r['wall_s']:.1f} s",
                file=log,
                flush=True,
            )
    finally:
        ep.stop()
    return rows


def _concurrent(
    ep: harness.BenchEndpoint,
    fx: harness.Fixture,
    module: str,
    events: list[list[dict[str, Any]]],
    workdir: Any,
) -> list[dict[str, Any]]:
    """Run ``events`` at once, each in its own ``bench.case`` process (a fresh execution
    environment); their results."""
    import subprocess

    workdir.mkdir(parents=True, exist_ok=True)
    env = {
        **harness.AWS_ENV,
        **DEFAULTS["environment"],
        "AWS_ENDPOINT_URL": ep.endpoint,
        "SESSION_EXPIRY_WEBSOCKET_ENDPOINT": f"{ep.endpoint}/{harness.STAGE}",
        "SESSION_EXPIRY_SCRATCH_BUCKET": fx.bucket,
        "SESSION_EXPIRY_SCRATCH_ROOT": harness.SCRATCH_ROOT,
        "SESSION_EXPIRY_GRANT_KEY_ARN": fx.key_arn,
        "SESSION_EXPIRY_OWNERSHIP_TABLE_NAME": fx.ownership_table,
        "SESSION_EXPIRY_TABLE_NAME": fx.table,
    }
    warm = workdir / "warmup.json"
    warm.write_text(json.dumps({"Records": []}))
    procs = []
    for i, records in enumerate(events):
        event = workdir / f"event-{i}.json"
        event.write_text(json.dumps({"Records": records}))
        spec = {
            "impl": module,
            "module": module,
            "event_path": str(event),
            "warmup_path": str(warm),
            "env": env,
            "timeout_s": DEFAULTS["timeout_s"],
            "memory_mb": DEFAULTS["memory_mb"],
            "repo": str(harness.REPO),
            "lambda_src": str(harness.REPO / "lambda_src"),
        }
        (workdir / f"spec-{i}.json").write_text(json.dumps(spec))
        log = open(workdir / f"case-{i}.log", "w")  # closed below
        procs.append(
            (
                subprocess.Popen(  # noqa: S603 - our own module
                    [
                        sys.executable,
                        "-m",
                        "bench.case",
                        str(workdir / f"spec-{i}.json"),
                        str(workdir / f"result-{i}.json"),
                    ],
                    cwd=harness.REPO,
                    env={**os.environ, **env},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                ),
                log,
            )
        )
    for proc, log in procs:
        proc.wait()
        log.close()
    return [json.loads((workdir / f"result-{i}.json").read_text()) for i in range(len(events))]


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _per_second(times: list[float]) -> list[int]:
    if not times:
        return []
    start = min(times)
    counts: Counter[int] = Counter(int(t - start) for t in times)
    return [counts.get(s, 0) for s in range(max(counts) + 1)]


def _calls_paced(log_path: Any) -> int:
    """``CallsPaced`` summed from the EMF lines a run wrote."""
    total = 0
    for line in log_path.read_text().splitlines():
        if '"CallsPaced"' in line:
            with contextlib.suppress(ValueError):
                total += int(json.loads(line).get("CallsPaced", 0))
    return total


# --- the section ----------------------------------------------------------------------------------
SIZES = (1_000, 10_000, 100_000)


def run(
    sizes: tuple[int, ...] = SIZES,
    *,
    rounds: int = 3,
    cleanup_cpu: list[float] | None = None,
    log: Any = sys.stderr,
) -> dict[str, Any]:
    """The storm section: calibration, every call for each size, the simulated clock, pacing.

    ``cleanup_cpu``: CPU seconds per session of the cleanup already measured in this run (the
    throughput bench's ``0 objects`` rounds); measured here when not given.
    """
    import tempfile
    from pathlib import Path

    harness.aws_env()
    with tempfile.TemporaryDirectory(prefix="bench-storm-") as tmp:
        workdir = Path(tmp)
        sweeper_cpu = calibrate_sweeper(rounds, workdir, log)
        cleanup_cpu = cleanup_cpu or calibrate_cleanup(rounds, workdir, log)
        calls = {}
        for n in sizes:
            calls[n] = run_calls(n)
            print(
                f"  storm {n:>7,}: every call made in {calls[n]['elapsed_s']:.0f} s "
                f"({calls[n]['parts']} processes): {calls[n]['invocations']} invocations, "
                f"{calls[n]['failed_records']} records failed, "
                + ("every session clean" if calls[n]["clean"] else "NOT CLEAN"),
                file=log,
                flush=True,
            )
        pacing = pacing_demo(workdir, log)
    return {
        "sizes": list(sizes),
        "sweeper_cpu_per_delete_s": sweeper_cpu,
        "cleanup_cpu_s": cleanup_cpu,
        "calls": {str(n): c for n, c in calls.items()},
        "pacing": pacing,
    }
