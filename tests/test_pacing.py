"""Pacing (``session_expiry_runtime.core.pacing``): under a target's quota the cleanup slows down.

The target is the bench endpoint in process (``bench/transport.py``): KMS ``RetireGrant`` is
answered through a token bucket of ``QUOTA`` requests a second and ``ThrottlingException`` above
it, as KMS answers above its request quota. The real handler path cleans a batch of sessions
(ownership marks and releases, the grant step), its clients paced as the handler paces them.

Time is simulated, not slept: one clock drives the target's bucket, the pacer's limiter and its
waits, and every request advances it by ``LATENCY`` (a call's round trip), so the run is fast,
deterministic in outcome, and independent of the machine's speed. Which second a request lands in
depends on how the step pool's threads interleave on that one clock, so the tests assert what
holds for every interleaving (records, grants retired, requests refused), not each second's count.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.retries import standard
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, build_clients, process_batch
from session_expiry_runtime.core.config import METRIC_CALLS_PACED, RuntimeConfig
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.core.pacing import ClientPacer, PacingTimeout, budget_seconds, install
from session_expiry_runtime.core.shared_pace import SharedBudget

from bench import endpoint, harness, transport

QUOTA = 20.0  # RetireGrant requests a second
LATENCY = 0.01  # seconds a request takes (simulated)
SESSIONS = 120


class SimulatedClock:
    """Seconds since the start; advanced by waits and by each request's round trip."""

    def __init__(self) -> None:
        self.t = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self.t

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.t += max(0.0, seconds)


@pytest.fixture
def clock() -> Iterator[SimulatedClock]:
    clock = SimulatedClock()
    endpoint.STATE.reset()
    endpoint.STATE.clock = clock.now
    try:
        yield clock
    finally:
        endpoint.STATE.reset()
        endpoint.STATE.clock = __import__("time").monotonic


def _clients(
    clock: SimulatedClock, fx: harness.Fixture, calls: Counter[str] | None = None
) -> tuple[RuntimeConfig, Any]:
    """The cleanup's clients, answered in process; every request costs :data:`LATENCY` (and
    is counted by operation in ``calls``)."""
    counted = Counter[str]() if calls is None else calls

    def answered(op: str, status: int) -> None:
        counted[op] += 1
        clock.sleep(LATENCY)

    config = RuntimeConfig(
        grant_key_arn=fx.key_arn, ownership_table_name=fx.ownership_table, max_workers=8
    )
    session = boto3.session.Session(region_name="us-east-1")
    transport.install(session, transport.InProcessTransport(on_call=answered))
    os.environ["AWS_ENDPOINT_URL"] = transport.ENDPOINT_URL
    try:
        return config, build_clients(config, session=session)
    finally:
        os.environ.pop("AWS_ENDPOINT_URL")


def _cleaner(clock: SimulatedClock, fx: harness.Fixture) -> tuple[SessionCleaner, ClientPacer]:
    """A cleaner paced as the handler paces it (``pacing.install``), on the simulated clock."""
    config, clients = _clients(clock, fx)
    metrics = MetricsRecorder("Test")
    pacer = install(clients, metrics, config.time_guard_ms, clock=clock.now, sleep=clock.sleep)
    # As the handler does with Lambda's context: an invocation of 300 s (the default timeout).
    pacer.start_invocation(300_000, config.time_guard_ms)
    return SessionCleaner(config, clients, metrics), pacer


def _seed(fx: harness.Fixture) -> None:
    sessions = fx.expired + fx.controls
    endpoint.STATE.seed(
        {
            "grants": [{"id": s.grant_id, "token": s.grant_token} for s in sessions],
            "tables": {fx.ownership_table: {"hash": "resource", "items": fx.ownership_items}},
        }
    )
    endpoint.STATE.limits = {"RetireGrant": endpoint.RateLimit(QUOTA, endpoint.STATE.clock)}


def _windows(times: list[float]) -> list[int]:
    """Requests in each whole second of the run."""
    counts: dict[int, int] = {}
    for t in times:
        counts[int(t)] = counts.get(int(t), 0) + 1
    return [counts.get(s, 0) for s in range(max(counts) + 1)] if counts else []


def test_a_throttling_target_is_called_at_its_rate_and_no_record_fails(
    clock: SimulatedClock, capsys: pytest.CaptureFixture[str]
) -> None:
    fx = harness.synthetic_fixture(harness.Scenario("paced", SESSIONS, 0))
    _seed(fx)
    cleaner, pacer = _cleaner(clock, fx)

    response = process_batch(fx.event, None, cleaner)

    assert response == {"batchItemFailures": []}
    left = {s.grant_id for s in fx.controls + fx.expired if s.session_id in ("w-1",)}
    assert endpoint.STATE.grant_ids == left | {s.grant_id for s in fx.controls}  # all retired
    arrivals = endpoint.STATE.arrivals["RetireGrant"]
    per_second = _windows(arrivals)
    # Before its first throttle the limiter is off: the first second sees the burst. From then
    # on the target is asked at about its rate, not hammered with retries: it refuses few of the
    # requests (without pacing, more than one for each session: the next test). Not a bound on
    # each second's requests: the target's bucket banks a second, so a second after a quiet one
    # accepts up to 2 x QUOTA, and the limiter's cubic rate, grown in the quiet, takes them all
    # (which seconds are quiet depends on how the step threads interleave on the one clock).
    throttled = endpoint.STATE.throttled["RetireGrant"]
    assert throttled <= SESSIONS // 10, (throttled, per_second)
    assert pacer.counts["RetireGrant"] > 0
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    paced = [d for d in emf if METRIC_CALLS_PACED in d]  # CallsPaced by Action, flushed
    assert [(d["Action"], d[METRIC_CALLS_PACED]) for d in paced] == [
        ("RetireGrant", pacer.counts["RetireGrant"])
    ]


def test_without_pacing_the_same_target_fails_records(clock: SimulatedClock) -> None:
    """What the pacing prevents: botocore's standard mode alone (two attempts, jittered
    backoff) runs out of attempts against the same quota and fails records."""
    fx = harness.synthetic_fixture(harness.Scenario("unpaced", SESSIONS, 0))
    _seed(fx)
    config, clients = _clients(clock, fx)
    cleaner = SessionCleaner(config, clients, MetricsRecorder("Test"))

    response = process_batch(fx.event, None, cleaner)

    assert len(response["batchItemFailures"]) > 0
    per_second = _windows(endpoint.STATE.arrivals["RetireGrant"])
    assert max(per_second[1:]) > 2 * QUOTA, per_second  # and the target was hammered


def test_a_call_that_cannot_get_a_slot_within_its_budget_fails_with_pacing_timeout(
    clock: SimulatedClock,
) -> None:
    fx = harness.synthetic_fixture(harness.Scenario("starved", 1, 0))
    _seed(fx)
    endpoint.STATE.limits = {"RetireGrant": endpoint.RateLimit(0.001, endpoint.STATE.clock)}
    endpoint.STATE.limits["RetireGrant"].tokens = 0
    cleaner, pacer = _cleaner(clock, fx)
    pacer.start_invocation(None, cleaner.config.time_guard_ms)  # no invocation: the budget
    kms = cleaner.clients.kms

    with pytest.raises((PacingTimeout, kms.exceptions.ClientError)):
        for s in fx.expired:
            kms.retire_grant(KeyId=fx.key_arn, GrantId=s.grant_id)
    assert clock.now() <= budget_seconds(cleaner.config.time_guard_ms) + 1.0


def test_budget_leaves_the_time_guard_room_for_one_more_attempt() -> None:
    assert budget_seconds(10_000) == pytest.approx(5.0)
    with pytest.raises(ValueError, match="time guard"):
        budget_seconds(1_000)


def test_a_call_abandoned_at_the_hard_stop_keeps_its_own_invocations_deadline(
    clock: SimulatedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record thread abandoned at an invocation's hard stop may still be in a paced call
    when the next invocation starts on the same execution environment. That call may start
    no new attempt and wait for no token past its own invocation's time guard: the next
    invocation's deadline is not its. Before, the deadline was the pacer's latest: a call
    the target kept throttling went on through the whole next invocation (until its time
    guard, ~290 s later), taking that invocation's rate, and could land after a redelivery
    of its record had released the id to a new owner."""
    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, context: 0)
    fx = harness.synthetic_fixture(harness.Scenario("abandoned", 1, 0))
    _seed(fx)
    endpoint.STATE.limits = {"RetireGrant": endpoint.RateLimit(0.001, endpoint.STATE.clock)}
    endpoint.STATE.limits["RetireGrant"].tokens = 0  # the target throttles every attempt
    config, clients = _clients(clock, fx)
    pacer = install(
        clients, MetricsRecorder("Test"), config.time_guard_ms, clock=clock.now, sleep=clock.sleep
    )
    pacer.start_invocation(20_000, config.time_guard_ms)  # invocation N: its guard at 10 s
    next_started: list[float] = []

    def slow_first_attempt(**_: Any) -> None:
        # The first attempt's answer trickles in past N's hard stop (19 s); meanwhile N has
        # returned and the handler started invocation N+1 (300 s left) on this environment.
        if not next_started:
            clock.sleep(25.0)
            next_started.append(clock.now())
            pacer.start_invocation(300_000, config.time_guard_ms)

    clients.kms.meta.events.register("response-received.kms.RetireGrant", slow_first_attempt)
    kms = clients.kms

    with pytest.raises((PacingTimeout, kms.exceptions.ClientError)):
        kms.retire_grant(KeyId=fx.key_arn, GrantId=fx.expired[0].grant_id)

    (started,) = next_started
    during_next = [t for t in endpoint.STATE.arrivals["RetireGrant"] if t >= started]
    # At most standard mode's own second attempt, no throttle retries under N+1's deadline...
    assert len(during_next) <= 1, during_next
    # ...and the call is over within a second of N+1's start, not at N+1's time guard.
    assert clock.now() - started < 1.0


# --- the budget every invocation shares (shared_pace, issue 38) --------------------------------
# A quota below KMS's default RetireGrant request rate (50 a second: AWS KMS Developer Guide,
# "Request quotas"), as when the application's own grant calls spend the rest of it.
FLEET_QUOTA = 15.0
FLEET_BUDGET = 10  # SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET's default
INVOCATIONS = 4


def _fleet(
    clock: SimulatedClock,
    shared: bool,
    *,
    invocations: int = INVOCATIONS,
    per_second: int = FLEET_BUDGET,
    reserve: bool = True,
    calls: Counter[str] | None = None,
    quota: float = FLEET_QUOTA,
) -> tuple[list[dict[str, Any]], harness.Fixture]:
    """``invocations`` concurrent invocations (threads, each its own execution environment:
    clients, pacer, metrics) cleaning a share of a storm each against one KMS quota; with
    ``shared``, their ``RetireGrant`` attempts take from one budget of ``per_second`` in the
    ownership table, and with ``reserve`` each batch reserves its grants' requests at once
    (``CleanupRunner.reserve_retire_grants``) as the handler's cleaner does."""
    fx = harness.synthetic_fixture(harness.Scenario("fleet", SESSIONS, 0))
    _seed(fx)
    endpoint.STATE.limits = {"RetireGrant": endpoint.RateLimit(quota, endpoint.STATE.clock)}
    records = fx.event["Records"]
    responses: list[dict[str, Any]] = [{} for _ in range(invocations)]
    # os.environ is set while the clients are built: one thread at a time
    environments = [_clients(clock, fx, calls) for _ in range(invocations)]

    def invocation(i: int) -> None:
        config, clients = environments[i]
        metrics = MetricsRecorder("Test")
        budget = (
            SharedBudget(
                clients.ownership,
                fx.ownership_table,
                "RetireGrant",
                per_second,
                metrics,
                wall_clock=clock.now,
                sleep=clock.sleep,
            )
            if shared
            else None
        )
        pacer = install(
            clients,
            metrics,
            config.time_guard_ms,
            clock=clock.now,
            sleep=clock.sleep,
            retire_grant_budget=budget,
        )
        pacer.start_invocation(300_000, config.time_guard_ms)
        event = {"Records": records[i::invocations]}
        cleaner = SessionCleaner(
            config, clients, metrics, retire_grant_budget=budget if reserve else None
        )
        responses[i] = process_batch(event, None, cleaner)

    threads = [threading.Thread(target=invocation, args=(i,)) for i in range(invocations)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return responses, fx


def test_concurrent_invocations_together_stay_under_the_quota_and_no_record_fails(
    clock: SimulatedClock,
) -> None:
    responses, fx = _fleet(clock, shared=True)

    assert responses == [{"batchItemFailures": []}] * INVOCATIONS
    left = {s.grant_id for s in fx.controls + fx.expired if s.session_id in ("w-1",)}
    assert endpoint.STATE.grant_ids == left | {s.grant_id for s in fx.controls}  # all retired
    per_second = _windows(endpoint.STATE.arrivals["RetireGrant"])
    # Every second, the first included: the budget, not each invocation's own guess, bounds
    # the fleet (a request taken at a second's end may arrive in the next: a few over 10).
    assert max(per_second) <= FLEET_QUOTA, per_second
    assert endpoint.STATE.throttled["RetireGrant"] == 0, per_second
    used = [
        int(item["used"]["N"])
        for item in endpoint.STATE.tables.table(fx.ownership_table).items.values()
        if item["resource"]["S"].startswith("pace#RetireGrant#")
    ]
    # A batch's reserved requests are spent within their second or dropped: never more sent
    # than taken, never more taken in a second than the budget.
    assert sum(used) >= sum(per_second) and max(used) <= FLEET_BUDGET


@pytest.mark.parametrize("reserve", [True, False])
def test_a_batch_reserves_its_grants_requests_in_a_few_writes_not_one_a_grant(
    clock: SimulatedClock, reserve: bool
) -> None:
    """Issue 38's throughput: the shared budget's ``UpdateItem`` came before every
    ``RetireGrant`` (one more call and round trip a session). A batch now reserves its grants'
    requests beside its ownership marks, and a second that ends before they are spent hands
    what is left to the next in one write: a few writes for the batch, none failed (here 2
    writes for 120 grants; 31 without the reservation)."""
    calls: Counter[str] = Counter()
    responses, _ = _fleet(
        clock,
        shared=True,
        invocations=1,
        per_second=1_000,
        reserve=reserve,
        calls=calls,
        quota=100_000,  # no throttle: one RetireGrant a grant
    )

    assert responses == [{"batchItemFailures": []}]
    retired = calls["RetireGrant"]
    assert retired == SESSIONS and endpoint.STATE.throttled["RetireGrant"] == 0
    if reserve:
        assert 1 <= calls["UpdateItem"] <= retired / 10, calls  # one a second of the run
    else:
        # Without it the calls waiting while one asks are asked for together, still about
        # one write per wave of grant steps.
        assert calls["UpdateItem"] > retired / 10, calls


def test_without_the_shared_budget_the_same_invocations_overrun_the_quota(
    clock: SimulatedClock,
) -> None:
    """What the budget fixes: each invocation's adaptive pacing learns the rate alone, so
    together they ask for more than the quota and are throttled (no record fails either way)."""
    responses, _ = _fleet(clock, shared=False)

    assert responses == [{"batchItemFailures": []}] * INVOCATIONS
    per_second = _windows(endpoint.STATE.arrivals["RetireGrant"])
    assert max(per_second) > FLEET_QUOTA, per_second
    assert endpoint.STATE.throttled["RetireGrant"] > 0
