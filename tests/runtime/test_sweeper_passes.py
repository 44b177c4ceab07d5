"""Sub-minute sweeper (issue 15) and the sweeper's time guard (issue 12, item 5).

Passes within one run on an injected clock (moto, real boto3 calls): a pass every interval,
stopping before the run's deadline; a heartbeat between passes wins; a pass whose Query fails on
one shard still sweeps the others. The time guard against a real, slow local endpoint (a TCP
server that reads each request and never answers in time): the run returns before its deadline.
"""

from __future__ import annotations

import dataclasses
import json
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

import boto3
import pytest
from runtime_faults import answer, json_error
from runtime_support import SESSION, TABLE, Sandbox
from session_expiry_runtime.cleanup import cleaner as cleaner_module
from session_expiry_runtime.core.config import (
    DEFAULT_SWEEP_SHARD_ATTRIBUTE,
    ENV_SWEEP_INTERVAL_SECONDS,
    ENV_SWEEP_SHARD_ATTRIBUTE,
    ENV_TIME_GUARD_MS,
    RuntimeConfig,
)
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.store import SessionStore
from session_expiry_runtime.sweeps import sweeper as sweeper_module
from session_expiry_runtime.sweeps.sweeper import (
    Deadline,
    ExpirySweeper,
    RunClock,
    SweepIncompleteError,
    run_passes,
    shard_of,
    sweep_run,
    sweeper_client_config,
    worst_call_seconds,
)
from test_sweeper import add_sweep_index

SHARD = DEFAULT_SWEEP_SHARD_ATTRIBUTE
#: The construct's settings for a sub-minute sweeper (cdk_session_expiry.sweeper).
TIMEOUT_S = 59
MARGIN_MS = 3_500


class FakeTime:
    """One clock for the sweeper (``now``), its run (``monotonic``/``sleep``) and the Lambda
    context. Sleeping advances it, running the actions scheduled on the way."""

    def __init__(self, start: float) -> None:
        self.t = start
        self._actions: list[tuple[float, Callable[[], None]]] = []
        self.slept: list[float] = []

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.t, timezone.utc)

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        target = self.t + seconds
        for at, action in sorted(a for a in self._actions if a[0] <= target):
            self.t = at
            action()
        self._actions = [a for a in self._actions if a[0] > target]
        self.t = target

    def at(self, when: float, action: Callable[[], None]) -> None:
        self._actions.append((when, action))

    def run_clock(self) -> RunClock:
        return RunClock(monotonic=self.monotonic, sleep=self.sleep)


class Context:
    """A Lambda context whose deadline is ``timeout_s`` after its creation on ``clock``."""

    def __init__(self, timeout_s: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self.deadline = monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - self._monotonic()) * 1000))


@pytest.fixture
def fake() -> FakeTime:
    return FakeTime(float(int(time.time())))


@pytest.fixture
def config(sandbox: Sandbox) -> RuntimeConfig:
    add_sweep_index(sandbox, "expiresAt")
    return dataclasses.replace(
        sandbox.config,
        sweep_shard_attribute=SHARD,
        sweep_interval_seconds=5,
        time_guard_ms=MARGIN_MS,
    )


@pytest.fixture
def store(sandbox: Sandbox, config: RuntimeConfig, fake: FakeTime) -> SessionStore:
    return SessionStore(
        dynamodb_client=sandbox.ddb, kms_client=sandbox.kms, clock=fake.now, config=config
    )


@pytest.fixture
def sweeper(config: RuntimeConfig, fake: FakeTime) -> ExpirySweeper:
    client = SESSION.client("dynamodb")
    return ExpirySweeper(config, client, MetricsRecorder(config.metrics_namespace), clock=fake.now)


def exists(sandbox: Sandbox, session_id: str) -> bool:
    got = sandbox.ddb.get_item(TableName=TABLE, Key={"pk": {"S": session_id}}, ConsistentRead=True)
    return "Item" in got


def swept_in_pass(run: Any) -> list[int]:
    return [p.swept for p in run.passes]


# --- passes at the interval, within the run's deadline ------------------------------------
def test_passes_run_at_the_interval_for_the_minute(
    sandbox: Sandbox, store: SessionStore, sweeper: ExpirySweeper, fake: FakeTime
) -> None:
    t0 = int(fake.t)
    for session_id, offset in (("a", 3), ("b", 12), ("c", 31), ("d", 55), ("late", 70)):
        store.create(session_id, expires_at=t0 + offset)

    run = run_passes(
        sweeper,
        interval_seconds=5,
        deadline=Deadline.of(Context(TIMEOUT_S, fake.monotonic), MARGIN_MS),
        clock=fake.run_clock(),
    )

    assert run.pass_offsets == [float(5 * k) for k in range(12)]  # 0, 5, ..., 55
    # Each session goes in the first pass at or after its TTL: 5 s, 15 s, 35 s, 55 s.
    assert swept_in_pass(run) == [0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]
    lags = sorted(float(lag) for p in run.passes for lag in p.lags)
    assert lags == [0.0, 2.0, 3.0, 4.0]  # never more than the interval
    assert exists(sandbox, "late")
    assert fake.t - t0 == 55  # the run ends with its last pass, before the next minute


def test_passes_stop_before_the_deadline(
    store: SessionStore, sweeper: ExpirySweeper, fake: FakeTime
) -> None:
    """A 20 s timeout with a 3.5 s margin: passes at 0..15 s; the slot at 20 s lies past the
    guard, so the last pass is made just before the guard trips (16.25 s) and the run returns
    with the margin still free."""
    context = Context(20, fake.monotonic)

    run = run_passes(
        sweeper,
        interval_seconds=5,
        deadline=Deadline.of(context, MARGIN_MS),
        clock=fake.run_clock(),
    )

    assert run.pass_offsets == [0.0, 5.0, 10.0, 15.0, 16.25]
    assert context.get_remaining_time_in_millis() >= MARGIN_MS
    assert all(p.complete for p in run.passes)


def test_a_late_start_keeps_the_minutes_last_pass(sweeper: ExpirySweeper, fake: FakeTime) -> None:
    """The first invocation builds its client inside the 59 s timeout (0.8 s here): the 55 s
    slot would start past the guard; it is moved forward instead of skipped (skipping it left a
    10 s gap before the next run's first pass, seen in the sandbox)."""
    context = Context(TIMEOUT_S, fake.monotonic)
    fake.t += 0.8

    run = run_passes(
        sweeper,
        interval_seconds=5,
        deadline=Deadline.of(context, MARGIN_MS),
        clock=fake.run_clock(),
    )

    assert run.pass_offsets[:11] == [float(5 * k) for k in range(11)]
    assert run.pass_offsets[11] == pytest.approx(59 - 0.8 - 3.5 - 0.25)
    assert len(run.passes) == 12
    assert context.get_remaining_time_in_millis() >= MARGIN_MS


def test_a_slow_pass_delays_the_next_and_skips_missed_slots(
    sweeper: ExpirySweeper, fake: FakeTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = sweeper.sweep
    calls: list[int] = []

    def slow_first(**kwargs: Any) -> Any:
        report = original(**kwargs)
        calls.append(1)
        if len(calls) == 1:
            fake.t += 12.5  # the first pass takes 12.5 s: the slots at 5 and 10 s are missed
        return report

    monkeypatch.setattr(sweeper, "sweep", slow_first)
    start = fake.t

    run = run_passes(
        sweeper,
        interval_seconds=5,
        deadline=Deadline(None, MARGIN_MS),
        clock=fake.run_clock(),
        run_seconds=30,
    )

    # At once after the overrun, then on the slots again.
    assert run.pass_offsets == [0.0, 12.5, 15.0, 20.0, 25.0]
    assert fake.t - start == 25.0


def test_heartbeat_between_passes_survives(
    sandbox: Sandbox, store: SessionStore, sweeper: ExpirySweeper, fake: FakeTime
) -> None:
    t0 = int(fake.t)
    store.create("beating", expires_at=t0 + 7)
    store.create("silent", expires_at=t0 + 7)
    # Between the passes at 5 s and 10 s, the application extends one session.
    fake.at(t0 + 6, lambda: store.touch("beating", expires_at=t0 + 600))

    run = run_passes(
        sweeper,
        interval_seconds=5,
        deadline=Deadline.of(Context(TIMEOUT_S, fake.monotonic), MARGIN_MS),
        clock=fake.run_clock(),
    )

    assert exists(sandbox, "beating")
    assert not exists(sandbox, "silent")
    assert swept_in_pass(run)[:3] == [0, 0, 1]  # "silent" went in the pass at 10 s
    assert run.total("skipped") == 0  # the index no longer lists "beating" as due


def test_a_pass_failing_on_one_shard_still_sweeps_the_others(
    sandbox: Sandbox, store: SessionStore, sweeper: ExpirySweeper, fake: FakeTime
) -> None:
    t0 = int(fake.t)
    ids = [f"s-{i}" for i in range(40)]
    for session_id in ids:
        store.create(session_id, expires_at=t0 + 1)
    fake.t += 2
    broken = shard_of(["s-0"], sweeper.config.sweep_shards)

    def refuse_one_shard(request: Any) -> Any:
        body = json.loads(request.body)
        if body["ExpressionAttributeValues"][":s"]["S"] == broken:
            return json_error(400, "AccessDeniedException", "injected: Query refused")
        return None

    answer(sweeper._ddb, "Query", refuse_one_shard)

    report = sweeper.sweep(out_of_time=lambda: False)

    in_broken = [s for s in ids if shard_of([s], sweeper.config.sweep_shards) == broken]
    assert report.query_failures == 1
    assert report.swept == len(ids) - len(in_broken) > 0
    assert all(exists(sandbox, s) for s in in_broken)
    assert not any(exists(sandbox, s) for s in ids if s not in in_broken)
    assert any("AccessDeniedException" in e for e in report.errors)


# --- the handler -------------------------------------------------------------------------------
@pytest.fixture
def handler_env(
    sandbox: Sandbox, config: RuntimeConfig, fake: FakeTime, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(ENV_SWEEP_SHARD_ATTRIBUTE, SHARD)
    monkeypatch.setenv(ENV_SWEEP_INTERVAL_SECONDS, "5")
    monkeypatch.setenv(ENV_TIME_GUARD_MS, str(MARGIN_MS))
    monkeypatch.setattr(sweeper_module, "_sweeper", None)
    monkeypatch.setattr(sweeper_module, "_run_clock", fake.run_clock())
    yield
    sweeper_module._sweeper = None


def test_handler_runs_the_minute_of_passes_and_writes_metrics_once(
    handler_env: None,
    store: SessionStore,
    fake: FakeTime,
    capsys: pytest.CaptureFixture[str],
) -> None:
    t0 = int(fake.t)
    store.create("a", expires_at=t0 + 8)
    store.create("b", expires_at=t0 + 41)
    sweeper_module.get_sweeper()._clock = fake.now
    capsys.readouterr()

    summary = sweeper_module.handler({}, Context(TIMEOUT_S, fake.monotonic))

    assert (summary["passes"], summary["swept"], summary["complete"]) == (12, 2, True)
    assert summary["intervalSeconds"] == 5
    assert summary["msLeftBeforeDeadline"] == (TIMEOUT_S - 55) * 1000
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    (doc,) = [d for d in docs if "SessionsSwept" in d]
    assert doc["SessionsSwept"] == 2


def test_stop_after_pass_before_a_run_makes_it_one_pass(
    handler_env: None, store: SessionStore, fake: FakeTime
) -> None:
    """What the local emulator does for "run one sweep now" on a sub-minute sweeper."""
    t0 = int(fake.t)
    store.create("a", expires_at=t0 + 1)
    store.create("b", expires_at=t0 + 10)  # due at the second pass, which does not start
    fake.t = t0 + 2.0
    sweeper_module.get_sweeper()._clock = fake.now

    sweeper_module.stop_after_pass()
    summary = sweeper_module.handler({}, Context(TIMEOUT_S, fake.monotonic))

    assert (summary["passes"], summary["swept"]) == (1, 1)
    assert fake.slept == []
    assert not sweeper_module._stop_passes.pending()  # the next run is a whole minute again
    assert sweeper_module.handler({}, Context(TIMEOUT_S, fake.monotonic))["passes"] == 12


def test_stop_after_pass_during_a_run_ends_it_after_the_pass_in_progress(
    handler_env: None, store: SessionStore, fake: FakeTime
) -> None:
    """Requested while the run waits for its third pass (as the local schedule runner does when
    a test stops it): the wait ends at once and no pass starts after it."""
    t0 = int(fake.t)
    store.create("a", expires_at=t0 + 3)
    store.create("b", expires_at=t0 + 30)
    sweeper_module.get_sweeper()._clock = fake.now
    fake.at(t0 + 7, sweeper_module.stop_after_pass)

    summary = sweeper_module.handler({}, Context(TIMEOUT_S, fake.monotonic))

    assert (summary["passes"], summary["swept"]) == (2, 1)
    assert summary["passOffsetsSeconds"] == [0.0, 5.0]


def test_run_passes_stops_only_after_the_first_pass(
    sweeper: ExpirySweeper, store: SessionStore, fake: FakeTime
) -> None:
    store.create("a", expires_at=int(fake.t) + 1)
    fake.t += 2.0
    run = run_passes(
        sweeper,
        interval_seconds=5,
        deadline=Deadline(None, MARGIN_MS),
        clock=fake.run_clock(),
        stop_requested=lambda: True,
    )
    assert swept_in_pass(run) == [1]


def test_handler_without_an_interval_makes_one_pass(
    handler_env: None, fake: FakeTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_SWEEP_INTERVAL_SECONDS)

    summary = sweeper_module.handler({}, Context(60, fake.monotonic))

    assert (summary["passes"], summary["intervalSeconds"]) == (1, None)
    assert fake.slept == []


def test_fails_run_passes_with_a_bad_interval(sweeper: ExpirySweeper) -> None:
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match=rf"interval_seconds={bad!r}: expected a positive"):
            run_passes(sweeper, interval_seconds=bad, deadline=Deadline(None, 1))  # type: ignore[arg-type]


# --- the time guard's SDK settings ------------------------------------------------------------
@pytest.mark.parametrize("margin_ms", [2_000, MARGIN_MS, 10_000])
def test_one_call_with_its_retry_fits_in_the_margin(margin_ms: int) -> None:
    settings = sweeper_client_config(margin_ms, 16)
    assert worst_call_seconds(settings) <= 0.9 * margin_ms / 1000 + 1e-9
    assert settings.retries == {"mode": "standard", "total_max_attempts": 2}


def test_the_cleanup_client_settings_fit_the_default_margin_too() -> None:
    """Issue 12 item 5: the cleanup's client (it was 4 attempts, 5 s connect, 10 s read: a minute
    per call) is now sized to its margin as well (tests/runtime/test_time_guard.py)."""
    assert worst_call_seconds(cleaner_module.client_config(16)) <= 9


def test_fails_client_config_with_a_margin_too_short() -> None:
    with pytest.raises(ValueError, match="time guard 1999 ms: expected at least 2000 ms"):
        sweeper_client_config(1_999, 16)


# --- the time guard against a slow endpoint (real time, a few seconds) -----------------------
class SlowEndpoint:
    """A localhost HTTP endpoint that reads each request and answers nothing until closed."""

    def __init__(self) -> None:
        stop = self.stop = threading.Event()

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.recv(65_536)
                stop.wait(30)

        self.server = socketserver.ThreadingTCPServer(("localhost", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://localhost:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("interval", [None, 5])
def test_time_guard_returns_before_the_deadline_against_a_slow_endpoint(
    interval: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run has 3 s and a 2 s margin; the endpoint never answers. Each Query times out
    (0.2 s read timeout, one retry); the guard then stops the run. Without the sized client a
    single call would block 60 s (the cleanup's settings) and Lambda would kill the run."""
    monkeypatch.setattr(sweeper_module, "_run_clock", RunClock())
    slow = SlowEndpoint()
    try:
        margin_ms = 2_000
        config = RuntimeConfig(
            table_name=TABLE,
            sweep_shard_attribute=SHARD,
            sweep_interval_seconds=interval,
            time_guard_ms=margin_ms,
        )
        client = boto3.client(
            "dynamodb",
            region_name="us-east-1",
            endpoint_url=slow.url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=sweeper_client_config(margin_ms, 4),
        )
        sweeper = ExpirySweeper(config, client, MetricsRecorder("x"))
        context = Context(3.0)

        run = sweep_run(sweeper, context)

        left_ms = context.get_remaining_time_in_millis()
    finally:
        slow.close()
    assert left_ms > 0, "returned after the deadline"
    assert run.total("query_failures") >= 1 and not run.complete
    assert len(run.passes) == 1
    # The margin actually kept: the guard trips at 2 s left, a call started then ends within
    # 1.8 s, so at least ~0.2 s is always left; usually far more.
    assert left_ms >= 150


def test_handler_raises_before_the_deadline_against_a_slow_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deployed path: the client built from the environment (2 s margin) by the handler."""
    slow = SlowEndpoint()
    try:
        for name, value in {
            "SESSION_EXPIRY_TABLE_NAME": TABLE,
            ENV_SWEEP_SHARD_ATTRIBUTE: SHARD,
            ENV_TIME_GUARD_MS: "2000",
            "AWS_ENDPOINT_URL_DYNAMODB": slow.url,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(sweeper_module, "_sweeper", None)
        context = Context(3.0)
        with pytest.raises(SweepIncompleteError, match="shard"):
            sweeper_module.handler({}, context)
        left_ms = context.get_remaining_time_in_millis()
    finally:
        sweeper_module._sweeper = None
        slow.close()
    assert left_ms > 0


def test_one_runs_end_keeps_a_stop_meant_for_another_run_of_the_process() -> None:
    """Two runs in one process (threads of one execution environment): a stop reaches both,
    and the first run's end does not take it back from the second (it once cleared one
    process-wide flag)."""
    stops = sweeper_module._StopRequests()
    first_run, second_run = stops.run(), stops.run()
    first, second = first_run.__enter__(), second_run.__enter__()

    stops.request()
    first_run.__exit__(None, None, None)

    assert first.is_set() and second.is_set()
    second_run.__exit__(None, None, None)
    assert not stops.pending()  # taken by the runs in progress: the next run is whole


def test_a_stop_with_no_run_in_progress_waits_for_the_next_run_only() -> None:
    stops = sweeper_module._StopRequests()
    stops.request()
    assert stops.pending()
    with stops.run() as taken:
        assert taken.is_set()
    with stops.run() as whole:
        assert not whole.is_set()
