"""Several invocations in one process (issue 39, Lambda Managed Instances and the threaded
Python runtime), for the expiry sweeper, the grant sweep, the drain of deferred work and the
cleanup's metrics and pacing: what one invocation records is written by that invocation only,
and a paced call waits until the time guard of the invocation it works for.

Real handlers, real boto3 calls against moto. The interleaving is forced, not raced for: the
invocation on the worker thread is held (a wrapper around one of the runtime's own functions,
or a stubbed answer) after it has recorded its counts and before it writes them, while the
other invocation runs from start to end; the held one then finishes. Each invocation's EMF
lines are told apart by the thread that wrote them.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from flags_support import DRAIN, Flags
from ownership_support import emf_totals
from runtime_faults import answer, rest_json_error
from runtime_support import ENDPOINT, SESSION, FakeContext, Sandbox, event
from session_expiry_runtime import handler as handler_module
from session_expiry_runtime.cleanup import levers
from session_expiry_runtime.core.config import (
    DEFAULT_SWEEP_SHARD_ATTRIBUTE,
    ENV_SWEEP_SHARD_ATTRIBUTE,
    ENV_SWEEP_SHARDS,
)
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.core.pacing import ClientPacer, PacingTimeout
from session_expiry_runtime.store import SessionStore
from session_expiry_runtime.sweeps import grant_sweeper
from session_expiry_runtime.sweeps import sweeper as sweeper_module
from test_grant_sweeper import Grants
from test_sweeper import add_sweep_index

from cdk_session_expiry.testing.models import _moto_appconfig

JOIN_BOUND_S = 60
HELD = "held-invocation"


class StdoutByThread:
    """``sys.stdout`` for the test: each line goes to the list of the thread that wrote it."""

    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self.lines.setdefault(threading.current_thread().name, []).append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def emf(self, thread: str) -> dict[str, float]:
        return emf_totals("".join(self.lines.get(thread, [])))


def by_thread(monkeypatch: pytest.MonkeyPatch) -> StdoutByThread:
    """Route ``sys.stdout`` by thread for the rest of the test (called in the test's body:
    pytest sets its own capture again when the test starts)."""
    captured = StdoutByThread()
    monkeypatch.setattr(sys, "stdout", captured)
    return captured


def held_until(
    monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, released: threading.Event
) -> threading.Event:
    """Wrap ``owner.name``: on the held invocation's thread, once it has returned, wait for
    ``released``. Returns the event set when the held thread reached that point."""
    original: Callable[..., Any] = getattr(owner, name)
    reached = threading.Event()

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if threading.current_thread().name == HELD and not reached.is_set():
            reached.set()
            assert released.wait(JOIN_BOUND_S)
        return result

    monkeypatch.setattr(owner, name, wrapper)
    return reached


def run_held_then_other(
    held: Callable[[], Any],
    other: Callable[[], Any],
    reached: threading.Event,
    released: threading.Event,
) -> tuple[Any, Any]:
    """Start ``held`` on its thread, run ``other`` here once ``held`` is held, release it."""
    results: dict[str, Any] = {}

    def run() -> None:
        results["held"] = held()

    thread = threading.Thread(target=run, name=HELD)
    thread.start()
    assert reached.wait(JOIN_BOUND_S)
    results["other"] = other()
    released.set()
    thread.join(JOIN_BOUND_S)
    return results["held"], results["other"]


# --- the expiry sweeper -----------------------------------------------------------------------


@pytest.fixture
def due_store(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Iterator[SessionStore]:
    """The sweeper handler's environment, and a store whose one-hour sessions are already due
    (its clock two hours behind)."""
    add_sweep_index(sandbox, "expiresAt")
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(ENV_SWEEP_SHARD_ATTRIBUTE, DEFAULT_SWEEP_SHARD_ATTRIBUTE)
    monkeypatch.setenv(ENV_SWEEP_SHARDS, str(sandbox.config.sweep_shards))
    monkeypatch.setattr(sweeper_module, "_sweeper", None)
    config = dataclasses.replace(
        sandbox.config, sweep_shard_attribute=DEFAULT_SWEEP_SHARD_ATTRIBUTE
    )
    behind = datetime.now(timezone.utc) - timedelta(hours=2)
    yield SessionStore(dynamodb_client=sandbox.ddb, clock=lambda: behind, config=config)
    sweeper_module._sweeper = None


def test_two_sweeper_invocations_write_only_their_own_metrics(
    due_store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The held run sweeps every due session and has counted them when it is held, before it
    # writes its metrics; the other run then finds nothing due and writes its metrics. Before,
    # both ran one process-wide recorder: the other run wrote the held run's SessionsSwept
    # (and the held run, flushing an emptied recorder, wrote none).
    for n in range(4):
        due_store.create(f"due-{n}", ttl=timedelta(hours=1))
    stdout = by_thread(monkeypatch)
    released = threading.Event()
    reached = held_until(monkeypatch, sweeper_module, "sweep_run", released)

    held, other = run_held_then_other(
        lambda: sweeper_module.handler({}, FakeContext()),
        lambda: sweeper_module.handler({}, FakeContext()),
        reached,
        released,
    )

    assert (held["swept"], other["swept"]) == (4, 0)
    assert stdout.emf(HELD)["SessionsSwept"] == 4
    assert len(stdout.emf(HELD)) > 0 and stdout.emf(HELD).get("SweepLagSeconds") == 4
    main = threading.current_thread().name
    assert stdout.emf(main).get("SessionsSwept", 0) == 0
    assert "SweepLagSeconds" not in stdout.emf(main)


def test_two_grant_sweep_invocations_write_only_their_own_metrics(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The held run retires both orphans and has counted them when it is held, before it
    # writes its metrics; the other run finds none left. Before, one process-wide recorder.
    grants = Grants(sandbox)
    orphans = [grants.grant(f"s-gone-{n}", "inc1") for n in range(2)]
    monkeypatch.setattr(grant_sweeper, "_sweeper", grants.sweeper())
    stdout = by_thread(monkeypatch)
    released = threading.Event()
    reached = held_until(monkeypatch, grant_sweeper.GrantSweeper, "sweep", released)

    held, other = run_held_then_other(
        lambda: grant_sweeper.handler({}, None),
        lambda: grant_sweeper.handler({}, None),
        reached,
        released,
    )

    assert (held["orphans_retired"], other["orphans_retired"]) == (2, 0)
    assert not set(orphans) & set(grants.alive())
    assert stdout.emf(HELD)["OrphanGrantsRetired"] == 2
    assert stdout.emf(threading.current_thread().name).get("OrphanGrantsRetired", 0) == 0


# --- the drain of deferred work ---------------------------------------------------------------


@pytest.fixture
def flags(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, fresh_handler: None
) -> Iterator[Flags]:
    _moto_appconfig.install()
    try:
        served = Flags()
        served.deploy()
        for name, value in {**sandbox.env(), **served.env_vars()}.items():
            monkeypatch.setenv(name, value)
        yield served
    finally:
        _moto_appconfig.uninstall()


def test_two_drain_invocations_write_only_their_own_metrics(
    flags: Flags, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two sessions' scratch deletes deferred (DeleteScratch off), the flag back on. The held
    # drain takes both, does them and counts DeferredWorkDone, then is held before it writes
    # its metrics; the other drain finds nothing left and writes its own.
    flags.deploy(DeleteScratch=False)
    sessions = [sandbox.create_session(s) for s in ("s-1", "s-2")]
    sandbox.read_stream()
    for s in sessions:
        sandbox.delete(s.session_id)
    assert handler_module.handler(event(*sandbox.removes()), FakeContext()) == {
        "batchItemFailures": []
    }
    flags.deploy()
    stdout = by_thread(monkeypatch)
    released = threading.Event()
    reached = held_until(monkeypatch, levers, "_drain_step", released)

    held, other = run_held_then_other(
        lambda: handler_module.handler(DRAIN, FakeContext()),
        lambda: handler_module.handler(DRAIN, FakeContext()),
        reached,
        released,
    )

    assert held["done"] == {"DeleteScratch": 2} and other["done"] == {}
    assert all(sandbox.is_clean(s) for s in sessions)
    assert stdout.emf(HELD)["DeferredWorkDone|Action=DeleteScratch"] == 2
    main = threading.current_thread().name
    assert "DeferredWorkDone|Action=DeleteScratch" not in stdout.emf(main)
    # Each drain writes the age of the oldest item left, once.
    assert stdout.emf(HELD)["DeferredWorkAgeSeconds"] == 1
    assert stdout.emf(main)["DeferredWorkAgeSeconds"] == 1


# --- the cleanup's metrics ----------------------------------------------------------------------


def test_two_cleanup_invocations_write_only_their_own_metrics(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, fresh_handler: None
) -> None:
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    held_sessions = [sandbox.create_session(s) for s in ("h-1", "h-2", "h-3")]
    sandbox.read_stream()
    for s in held_sessions:
        sandbox.delete(s.session_id)
    held_records = sandbox.removes()
    other_session = sandbox.create_session("o-1")
    sandbox.read_stream()
    sandbox.delete(other_session.session_id)
    other_records = sandbox.removes()
    # Held once its records are accounted, before process_batch writes the metrics.
    stdout = by_thread(monkeypatch)
    released = threading.Event()
    from session_expiry_runtime.cleanup import batch

    reached = held_until(monkeypatch, batch, "_clean_batch", released)

    held, other = run_held_then_other(
        lambda: handler_module.handler(event(*held_records), FakeContext()),
        lambda: handler_module.handler(event(*other_records), FakeContext()),
        reached,
        released,
    )

    assert held == other == {"batchItemFailures": []}
    main = threading.current_thread().name
    assert stdout.emf(HELD)["SessionsCleaned|Reason=explicit"] == 3
    assert stdout.emf(main)["SessionsCleaned|Reason=explicit"] == 1


# --- pacing -----------------------------------------------------------------------------------


class Clock:
    """Simulated monotonic seconds, advanced by the pacer's waits (no real sleep)."""

    def __init__(self) -> None:
        self.t = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self.t

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.t += max(0.0, seconds)


def test_a_paced_call_waits_until_its_own_invocations_guard_and_counts_in_its_metrics(
    aws: None, no_backoff: None
) -> None:
    # Invocation A (300 s left) starts, then invocation B (12 s left: its guard trips 2 s on)
    # starts on another thread. A's next call is throttled until 5 s have passed: it must wait
    # for its target's rate under A's guard and succeed, counted in A's metrics. Before, the
    # pacer kept one deadline per process, the latest invocation's: A's call gave up at B's
    # guard (PacingTimeout) and its CallsPaced went to the process's recorder.
    clock = Clock()
    process_metrics = MetricsRecorder("Test")
    pacer = ClientPacer(process_metrics, budget=5.0, clock=clock.now, sleep=clock.sleep)
    client = SESSION.client("apigatewaymanagementapi", endpoint_url=ENDPOINT)
    pacer.install(client)
    answer(
        client,
        "DeleteConnection",
        lambda _: rest_json_error(429, "TooManyRequestsException") if clock.now() < 5 else None,
    )
    metrics = {"a": MetricsRecorder("Test"), "b": MetricsRecorder("Test")}
    a_started, b_started = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def invocation_a() -> None:
        pacer.start_invocation(300_000, 10_000, metrics["a"])
        a_started.set()
        assert b_started.wait(JOIN_BOUND_S)
        try:
            outcome["a"] = client.delete_connection(ConnectionId="conn-a")
        except PacingTimeout as exc:
            outcome["a"] = exc

    def invocation_b() -> None:
        assert a_started.wait(JOIN_BOUND_S)
        pacer.start_invocation(12_000, 10_000, metrics["b"])
        b_started.set()

    threads = [threading.Thread(target=invocation_a), threading.Thread(target=invocation_b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_BOUND_S)

    assert not isinstance(outcome["a"], Exception), outcome["a"]
    assert clock.now() >= 5
    assert metrics["a"].snapshot() == {"CallsPaced|Action=DeleteConnection": 1}
    assert metrics["b"].snapshot() == {}
    assert process_metrics.snapshot() == {}
