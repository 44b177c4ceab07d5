"""Expiry-to-clean in real time with a sub-minute sweeper (issue 15).

Nothing is simulated here: the application, the sweeper and the event source mapping's poller
run at the same time, on the wall clock.

1. The deployed sweeper function is given the settings the construct synthesizes for
   ``expiry_sweep_interval=Duration.seconds(5)`` (``cdk_session_expiry.sweeper``: the interval
   and the time guard in its environment, a 59 s timeout, reserved concurrency 1, the rule at
   ``rate(1 minute)``) with ``UpdateFunctionConfiguration``/``PutFunctionConcurrency``/
   ``PutRule``; the sample app itself deploys a 5-minute sweeper (its snapshot is unchanged).
2. Sessions are created through ``SessionStore`` (connection, KMS grant, scratch objects), then
   given TTLs spread over :data:`SPREAD_SECONDS` from the start of the schedule; a few get a
   heartbeat two seconds before their TTL and must survive.
3. The deployed mapping's poller delivers on its own thread (every 0.25 s, as Lambda polls)
   to the deployed cleanup function; the schedule starts the sweeper (its own code asset, in
   its own process) at once and every minute, one run at a time, for :data:`RUNS` runs.
4. Per swept session, expiry-to-clean = the wall time at which the cleanup invocation that
   handled its REMOVE record returned (grant retired, connection closed, scratch gone: checked
   afterwards against the emulator by the scenario's verification) minus its TTL; split into
   the wait for the pass that swept it and the processing after that pass started.

What differs from AWS: no index propagation delay (moto's index is written with the table);
EventBridge's own delivery jitter and Lambda's asynchronous queue are not modelled (the
schedule fires on time); the functions run as local processes on a loaded 2-core machine.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from .scenario import APP_FUNCTION

#: The interval measured, and the goal for it (issue 15).
INTERVAL_SECONDS = 5
GOAL_P99_SECONDS = 10.0
#: TTLs are spread over this many seconds from the schedule's start: inside two per-minute runs.
SPREAD_SECONDS = 110
#: Per-minute sweeper runs (the schedule's first run starts at once).
RUNS = 2
#: A heartbeat this long before the TTL extends a racing session by an hour.
HEARTBEAT_LEAD_SECONDS = 2.0


@dataclass
class RealtimeMeasurement:
    """Per-session expiry-to-clean seconds and what they are made of."""

    interval_seconds: int
    sessions: int = 0
    racing: int = 0
    expiry_to_clean: dict[str, float] = field(default_factory=dict)
    #: TTL to the start of the pass that swept the session.
    waits: dict[str, float] = field(default_factory=dict)
    #: Start of that pass to the end of the cleanup invocation.
    processing: dict[str, float] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    racing_survived: int = 0
    #: Racing sessions whose heartbeat came after their TTL (a stalled machine): expected swept.
    late_heartbeats: list[str] = field(default_factory=list)
    heartbeat_lead_seconds: float = HEARTBEAT_LEAD_SECONDS
    settings: dict[str, Any] = field(default_factory=dict)
    wall_seconds: float = 0.0
    mismatches: list[str] = field(default_factory=list)

    def stat(self, values: Sequence[float], q: float) -> float:
        """Nearest-rank percentile ``q`` (0..100) of ``values``; 0 without values."""
        ordered = sorted(values)
        if not ordered:
            return 0.0
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]

    @property
    def p50(self) -> float:
        return self.stat(list(self.expiry_to_clean.values()), 50)

    @property
    def p99(self) -> float:
        return self.stat(list(self.expiry_to_clean.values()), 99)

    @property
    def max(self) -> float:
        return max(self.expiry_to_clean.values(), default=0.0)

    @property
    def goal_met(self) -> bool:
        return bool(self.expiry_to_clean) and self.p99 <= GOAL_P99_SECONDS

    @property
    def max_processing(self) -> float:
        return max(self.processing.values(), default=0.0)

    @property
    def within_bound(self) -> bool:
        """Every session cleaned within the interval plus the longest processing measured."""
        return self.max <= self.interval_seconds + self.max_processing + 1e-6

    def as_dict(self) -> dict[str, Any]:
        waits, processing = list(self.waits.values()), list(self.processing.values())
        return {
            "interval_seconds": self.interval_seconds,
            "sessions_swept": self.sessions,
            "sessions_measured": len(self.expiry_to_clean),
            "heartbeat_race": self.racing,
            "heartbeat_race_survived": self.racing_survived,
            "heartbeats_late": len(self.late_heartbeats),
            "heartbeat_lead_seconds": round(self.heartbeat_lead_seconds, 2),
            "expiry_to_clean_p50_seconds": round(self.p50, 2),
            "expiry_to_clean_p99_seconds": round(self.p99, 2),
            "expiry_to_clean_max_seconds": round(self.max, 2),
            "wait_for_pass_max_seconds": round(max(waits, default=0.0), 2),
            "processing_p50_seconds": round(self.stat(processing, 50), 2),
            "processing_max_seconds": round(self.max_processing, 2),
            "within_bound": self.within_bound,
            "goal_p99_seconds": GOAL_P99_SECONDS,
            "goal_met": self.goal_met,
            "runs": self.runs,
            "settings": self.settings,
            "wall_seconds": round(self.wall_seconds, 1),
        }

    def summary_line(self) -> str:
        """The figure ``make sandbox`` and ``make bench`` print."""
        verdict = "met" if self.goal_met else "NOT met"
        return (
            f"expiry-to-clean at a {self.interval_seconds} s interval, real time, "
            f"{len(self.expiry_to_clean)} sessions: p50 {self.p50:.2f} s, p99 {self.p99:.2f} s, "
            f"max {self.max:.2f} s (bound: interval {self.interval_seconds} s + processing max "
            f"{self.max_processing:.2f} s, {'held' if self.within_bound else 'EXCEEDED'}); "
            f"goal p99 <= {GOAL_P99_SECONDS:g} s: {verdict}; heartbeats "
            f"{self.heartbeat_lead_seconds:.1f} s before the TTL"
            + (
                f", {len(self.late_heartbeats)} late (machine load: those sessions expired and "
                "were swept, as they must)"
                if self.late_heartbeats
                else ""
            )
        )


def configure_sub_minute_sweeper(pipeline: Any, interval_seconds: int) -> dict[str, Any]:
    """Give the deployed sweeper what the construct synthesizes for ``interval_seconds``.

    Returns the settings read back from the emulator.
    """
    from cdk_session_expiry import _runtime_contract as contract
    from cdk_session_expiry import sweeper as infra

    emulator = pipeline.emulator
    lam, events = emulator.client("lambda"), emulator.client("events")
    function = pipeline.function_with_handler(contract.SWEEPER_HANDLER)
    timeout = int(infra.SUB_MINUTE_TIMEOUT.to_seconds())
    variables = {
        **function.environment,
        contract.ENV_SWEEP_INTERVAL_SECONDS: str(interval_seconds),
        contract.ENV_TIME_GUARD_MS: str(infra.SUB_MINUTE_TIME_GUARD_MS),
    }
    lam.update_function_configuration(
        FunctionName=function.name, Timeout=timeout, Environment={"Variables": variables}
    )
    lam.put_function_concurrency(
        FunctionName=function.name,
        ReservedConcurrentExecutions=infra.DEFAULT_SWEEP_WORKERS,
    )
    schedule = pipeline.schedule_of(function)
    rule_name = schedule.rule_arn.rsplit("/", 1)[-1]
    events.put_rule(Name=rule_name, ScheduleExpression="rate(1 minute)", State="ENABLED")
    pipeline.restart_function(contract.SWEEPER_HANDLER)
    config = lam.get_function_configuration(FunctionName=function.name)
    concurrency = lam.get_function_concurrency(FunctionName=function.name)
    return {
        "function": function.name,
        "timeout_seconds": config["Timeout"],
        "interval_seconds": config["Environment"]["Variables"][contract.ENV_SWEEP_INTERVAL_SECONDS],
        "time_guard_ms": config["Environment"]["Variables"][contract.ENV_TIME_GUARD_MS],
        "reserved_concurrency": concurrency.get("ReservedConcurrentExecutions"),
        "schedule": pipeline.schedule_of(function).expression,
    }


class CleanupClock:
    """Wall time at which the last invocation handling each sequence number returned."""

    def __init__(self, chain: Callable[[Any], None] | None = None) -> None:
        self.finished: dict[str, float] = {}
        self._chain = chain
        self._lock = threading.Lock()

    def __call__(self, invocation: Any) -> None:
        now = time.time()
        with self._lock:
            for seq in invocation.sequence_numbers:
                self.finished[seq] = now
        if self._chain is not None:
            self._chain(invocation)


class SweeperRuns:
    """The sweeper's handler as the schedule's target, recording each run's wall start."""

    def __init__(self, local: Callable[[dict[str, Any], Any], Any]) -> None:
        self._local = local
        self.runs: list[tuple[float, dict[str, Any]]] = []

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        started = time.time()
        try:
            response = self._local(event, context)
        except Exception as err:
            self.runs.append((started, {"error": f"{type(err).__name__}: {err}"}))
            raise
        self.runs.append((started, dict(response)))
        return response

    def pass_starts(self) -> list[float]:
        """Wall time of every pass, from each run's start and its passes' offsets."""
        return sorted(
            start + offset
            for start, summary in self.runs
            for offset in summary.get("passOffsetsSeconds") or []
        )


def _make_plans(count: int, racing: int) -> list[Any]:
    """``count`` sessions to sweep and ``racing`` ones (a heartbeat just before the TTL),
    spread evenly among them."""
    from .scenario import SessionPlan

    total = count + racing
    race_at = {round((k + 0.5) * total / racing) for k in range(racing)} if racing else set()
    return [
        SessionPlan(
            session_id=f"rt-{i:03d}",
            fate="race" if i in race_at else "sweep",
            connection_id=f"rt-conn-{i:03d}",
            object_names=["a.txt", "b/with space.txt"],
        )
        for i in range(total)
    ]


def measure(
    pipeline: Any,
    *,
    say: Callable[[str], None],
    sessions: int = 110,
    racing: int = 6,
    workers: int = 6,
    on_invocation: Callable[[Any], None] | None = None,
) -> tuple[RealtimeMeasurement, list[Any]]:
    """Run the real-time phase; return the measurement and the session plans (fates ``sweep``
    and ``race``) for the scenario's verification of every session's resources."""
    from session_expiry_runtime.store import SessionStore

    from cdk_session_expiry import _runtime_contract as contract

    started_wall = time.time()
    result = RealtimeMeasurement(interval_seconds=INTERVAL_SECONDS)
    result.settings = configure_sub_minute_sweeper(pipeline, INTERVAL_SECONDS)
    say(
        f"real time: sweeper reconfigured as the construct synthesizes a {INTERVAL_SECONDS} s "
        f"interval (read back: {result.settings})"
    )
    emulator = pipeline.emulator
    ddb, kms, s3 = emulator.client("dynamodb"), emulator.client("kms"), emulator.client("s3")
    env = pipeline.session_environment(APP_FUNCTION)
    bucket = env[contract.ENV_SCRATCH_BUCKET]
    grantee = env.get("SESSION_GRANTEE_ROLE_ARN") or pipeline.function.role_arn
    store = SessionStore.from_env(
        pipeline.application_env(APP_FUNCTION),
        dynamodb_client=ddb,
        kms_client=kms,
        lambda_client=emulator.client("lambda"),  # the claim registrar's Invoke
        clock=lambda: datetime.now(timezone.utc),
    )
    plans = _make_plans(sessions, racing)

    def create(plan: Any) -> None:
        store.create(plan.session_id, ttl=timedelta(hours=1), connection_id=plan.connection_id)
        emulator.open_connection(plan.connection_id)
        session = store.create_grant(
            plan.session_id, grantee_principal=grantee, operations=["Decrypt"]
        )
        plan.prefix, plan.grant_id = session.scratch_prefix or "", session.grant_id or ""
        plan.keys = [plan.prefix + name for name in plan.object_names]
        for key in plan.keys:
            s3.put_object(Bucket=bucket, Key=key, Body=b"scratch")

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(create, plans))
    say(f"  {len(plans)} sessions created (connection, grant, scratch objects)")

    sweeper = SweeperRuns(pipeline.local_function(contract.SWEEPER_HANDLER))  # started now
    base, ttl, lead = _set_ttls(store, plans)
    result.heartbeat_lead_seconds = lead
    while time.time() < base:
        time.sleep(0.05)

    clock = CleanupClock(on_invocation)
    pipeline.start_cleanup(poll_interval=0.25, on_invocation=clock)
    function = pipeline.function_with_handler(contract.SWEEPER_HANDLER)
    runner = pipeline.start_schedule(pipeline.schedule_of(function), sweeper, max_runs=RUNS)
    stop_heartbeats = threading.Event()
    late: list[str] = []
    heartbeats = threading.Thread(
        target=_heartbeats,
        args=(store, [p for p in plans if p.fate == "race"], ttl, lead, stop_heartbeats, late, say),
        daemon=True,
    )
    heartbeats.start()
    say(
        f"  TTLs spread over {SPREAD_SECONDS} s; the poller delivers every 0.25 s; the sweeper "
        f"runs at once and every minute ({RUNS} runs, a pass every {INTERVAL_SECONDS} s) ..."
    )
    runner.join(RUNS * 60 + 30)
    stop_heartbeats.set()
    heartbeats.join(10)
    runner.stop()
    pipeline.stop_cleanup()
    pipeline.run_cleanup()  # anything the thread had not reached yet
    result.wall_seconds = time.time() - started_wall
    for plan in plans:  # a heartbeat that came too late: the session expired, as it should
        if plan.session_id in late:
            plan.fate = "sweep"
    result.late_heartbeats = sorted(late)
    _account(result, plans, ttl, clock, sweeper, emulator, pipeline)
    return result, plans


def _set_ttls(store: Any, plans: list[Any]) -> tuple[int, dict[str, int], float]:
    """Give every session its TTL: from a few seconds after the schedule starts, spread over
    :data:`SPREAD_SECONDS`, whole epoch seconds. Returns the schedule's start, the TTLs and the
    heartbeat lead.

    Margins come from the machine: the start is set far enough ahead for the touches measured
    so far (a loaded machine's touches are slower), a TTL that would no longer be that far ahead
    when its touch is sent moves later, and the heartbeat lead is the larger of
    :data:`HEARTBEAT_LEAD_SECONDS` and ten times the slowest touch measured here.
    """
    slowest = 0.0
    base = int(time.time()) + 2
    ttl: dict[str, int] = {}
    for i, plan in enumerate(plans):
        planned = base + 3 + round(SPREAD_SECONDS * i / max(1, len(plans) - 1))
        ttl[plan.session_id] = max(planned, math.ceil(time.time() + 2 + 10 * slowest))
        started = time.monotonic()
        store.touch(plan.session_id, expires_at=ttl[plan.session_id])
        slowest = max(slowest, time.monotonic() - started)
    return base, ttl, max(HEARTBEAT_LEAD_SECONDS, 10 * slowest)


def _heartbeats(
    store: Any,
    racing: list[Any],
    ttl: dict[str, int],
    lead: float,
    stop: threading.Event,
    late: list[str],
    say: Callable[[str], None],
) -> None:
    """Each racing session's heartbeat ``lead`` seconds before its TTL, side by side (one slow
    call never delays another's). A heartbeat that finds its session gone came after the TTL (the
    machine stalled for longer than the lead): the session is reported and expected swept."""

    def beat(plan: Any) -> None:
        if stop.wait(max(0.0, ttl[plan.session_id] - lead - time.time())):
            return
        try:
            store.touch(plan.session_id, ttl=timedelta(hours=1))
        except Exception as err:
            late.append(plan.session_id)
            say(f"  heartbeat of {plan.session_id} late (machine load): {type(err).__name__}")

    with ThreadPoolExecutor(max_workers=max(1, len(racing))) as pool:
        list(pool.map(beat, racing))


def _account(
    result: RealtimeMeasurement,
    plans: list[Any],
    ttl: dict[str, int],
    clock: CleanupClock,
    sweeper: SweeperRuns,
    emulator: Any,
    pipeline: Any,
) -> None:
    from cdk_session_expiry import _runtime_contract as contract

    from .beyond_ttl import list_archive

    env = pipeline.function.environment
    archive_bucket = env.get(contract.ENV_ARCHIVE_BUCKET)
    prefix = env.get(contract.ENV_ARCHIVE_PREFIX, "archive/")
    sequence_of: dict[str, str] = {}
    if archive_bucket:
        for obj in list_archive(emulator.client("s3"), archive_bucket, prefix):
            if obj.session_id.startswith("rt-"):
                sequence_of[obj.session_id] = obj.sequence_number
    passes = sweeper.pass_starts()
    swept = [p for p in plans if p.fate == "sweep"]
    result.sessions = len(swept)
    result.racing = len(plans) - len(swept)
    for plan in swept:
        finished = clock.finished.get(sequence_of.get(plan.session_id, ""))
        if finished is None:
            result.mismatches.append(f"REALTIME {plan.session_id}: no cleanup invocation found")
            continue
        expiry = float(ttl[plan.session_id])
        result.expiry_to_clean[plan.session_id] = finished - expiry
        sweep_pass = next((p for p in passes if p >= expiry), None)
        if sweep_pass is not None and sweep_pass <= finished:
            result.waits[plan.session_id] = sweep_pass - expiry
            result.processing[plan.session_id] = finished - sweep_pass
    open_ids = emulator.open_connection_ids()
    result.racing_survived = sum(
        1 for p in plans if p.fate == "race" and p.connection_id in open_ids
    )
    for _started, summary in sweeper.runs:
        result.runs.append(
            {
                "passes": summary.get("passes"),
                "swept": summary.get("swept"),
                "skipped": summary.get("skipped"),
                "failed": summary.get("failed"),
                "complete": summary.get("complete"),
                "maxSweepLagSeconds": summary.get("maxSweepLagSeconds"),
                "durationSeconds": summary.get("durationSeconds"),
                "msLeftBeforeDeadline": summary.get("msLeftBeforeDeadline"),
                "error": summary.get("error"),
            }
        )
