"""The fanned-out expiry sweep (issue 38) against moto: workers over disjoint shards, two runs on
one shard racing, a heartbeat between Query and delete, a run cut by its time guard, the run's
period end from its scheduled event.

Sessions are written by the real `SessionStore` configured for the sweeper (it writes each
session's shard); every sweeper call is a real boto3 call to moto.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from runtime_support import SESSION, FakeContext, Sandbox
from session_expiry_runtime.core.config import (
    ENV_SWEEP_SHARD_ATTRIBUTE,
    ENV_SWEEP_SHARDS,
    EVENT_SWEEP_PERIOD_SECONDS,
    EVENT_SWEEP_SCHEDULED_AT,
    EVENT_SWEEP_SHARDS,
    RuntimeConfig,
)
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.store import SessionStore
from session_expiry_runtime.sweeps import sweeper as sweeper_module
from session_expiry_runtime.sweeps.sweeper import (
    Deadline,
    ExpirySweeper,
    period_end_of,
    shard_of,
    shards_of_event,
)
from test_sweeper import HOUR, SHARD, Clock, add_sweep_index, raw_item, wall_now

SHARDS = 4


@pytest.fixture
def config(sandbox: Sandbox) -> RuntimeConfig:
    add_sweep_index(sandbox, "expiresAt")
    return dataclasses.replace(
        sandbox.config, sweep_shard_attribute=SHARD, sweep_shards=SHARDS, max_workers=4
    )


@pytest.fixture
def app_clock() -> Clock:
    """The application's clock, two hours in the past: its one hour sessions are due."""
    return Clock(datetime.now(timezone.utc) - 2 * HOUR)


@pytest.fixture
def store(sandbox: Sandbox, config: RuntimeConfig, app_clock: Clock) -> SessionStore:
    return SessionStore(
        dynamodb_client=sandbox.ddb, kms_client=sandbox.kms, clock=app_clock, config=config
    )


def new_sweeper(config: RuntimeConfig, calls: list[tuple[str, dict[str, Any]]]) -> ExpirySweeper:
    """A sweeper on its own client (as a separate invocation has), recording its calls."""
    client = SESSION.client("dynamodb")

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        calls.append((model.name, params))

    client.meta.events.register("provide-client-params.dynamodb", record)
    return ExpirySweeper(config, client, MetricsRecorder(config.metrics_namespace))


def sessions_by_shard(store: SessionStore, per_shard: int) -> dict[str, list[str]]:
    """Due sessions, ``per_shard`` in every shard (ids chosen by their shard)."""
    out: dict[str, list[str]] = {str(k): [] for k in range(SHARDS)}
    i = 0
    while any(len(ids) < per_shard for ids in out.values()):
        sid = f"s-{i}"
        i += 1
        shard = shard_of([sid], SHARDS)
        if len(out[shard]) < per_shard:
            store.create(sid, ttl=HOUR)
            out[shard].append(sid)
    return out


def deleted_shards(calls: list[tuple[str, dict[str, Any]]]) -> Counter[str]:
    return Counter(
        shard_of([p["Key"]["pk"]["S"]], SHARDS) for name, p in calls if name == "DeleteItem"
    )


# --- two runs on one shard ------------------------------------------------------------------
def test_two_runs_on_one_shard_never_both_delete(
    sandbox: Sandbox, store: SessionStore, config: RuntimeConfig
) -> None:
    """Two runs (own clients, own threads) both Query shard 0 before either deletes, so both
    try every due session of it: each session is deleted once, the other attempt skipped."""
    ids = sessions_by_shard(store, per_shard=6)["0"]
    calls_a: list[tuple[str, dict[str, Any]]] = []
    calls_b: list[tuple[str, dict[str, Any]]] = []
    runs = [new_sweeper(config, calls_a), new_sweeper(config, calls_b)]
    # Each run's Query answer waits for the other's; every DeleteItem (the sweep deletes on a
    # thread pool, so not only the first) waits until both have listed. Generous timeouts: on a
    # loaded machine a broken barrier would be the harness failing, not the sweep.
    both_listed = threading.Event()
    listing = threading.Barrier(2, action=both_listed.set, timeout=180)
    for run in runs:
        queried: list[bool] = []

        def after_query(queried: list[bool] = queried, **_: Any) -> None:
            if not queried:
                queried.append(True)
                listing.wait()

        def before_delete(**_: Any) -> None:
            assert both_listed.wait(180), "the other run never listed shard 0"

        run._ddb.meta.events.register("after-call.dynamodb.Query", after_query)
        run._ddb.meta.events.register("before-call.dynamodb.DeleteItem", before_delete)
    now = wall_now()
    reports: list[Any] = [None, None]

    def sweep(i: int) -> None:
        reports[i] = runs[i].sweep(now=now, shards=[0])

    threads = [threading.Thread(target=sweep, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    a, b = reports
    assert a.swept + b.swept == len(ids)
    assert a.skipped + b.skipped == len(ids)  # every second attempt found it gone
    assert (a.failed, b.failed) == (0, 0)
    deletes = [p["Key"]["pk"]["S"] for name, p in calls_a + calls_b if name == "DeleteItem"]
    assert Counter(deletes) == dict.fromkeys(ids, 2)
    assert all(raw_item(sandbox, sid) is None for sid in ids)


def test_a_worker_sweeps_only_its_own_shards(
    sandbox: Sandbox, store: SessionStore, config: RuntimeConfig
) -> None:
    by_shard = sessions_by_shard(store, per_shard=2)
    calls: list[tuple[str, dict[str, Any]]] = []

    report = new_sweeper(config, calls).sweep(now=wall_now(), shards=[1, 3])

    assert report.swept == 4
    assert set(deleted_shards(calls)) == {"1", "3"}
    queried = {p["ExpressionAttributeValues"][":s"]["S"] for n, p in calls if n == "Query"}
    assert queried == {"1", "3"}
    assert all(raw_item(sandbox, sid) is not None for sid in by_shard["0"] + by_shard["2"])


def test_heartbeat_between_query_and_delete_keeps_its_session_in_a_worker(
    sandbox: Sandbox, store: SessionStore, config: RuntimeConfig, app_clock: Clock
) -> None:
    """A worker owning one shard lists a due session; a heartbeat extends it before the delete:
    the condition fails and the session stays as the heartbeat wrote it."""
    (target, other) = sessions_by_shard(store, per_shard=2)["2"]
    calls: list[tuple[str, dict[str, Any]]] = []
    worker = new_sweeper(config, calls)
    touched: list[dict[str, Any] | None] = []

    def heartbeat_first(params: dict[str, Any], **_: Any) -> None:
        if params["Key"]["pk"]["S"] == target and not touched:
            # An application whose clock still saw the session live extends it.
            app_clock.now += HOUR - timedelta(seconds=1)
            store.touch(target, ttl=3 * HOUR)
            touched.append(raw_item(sandbox, target))

    worker._ddb.meta.events.register("provide-client-params.dynamodb.DeleteItem", heartbeat_first)

    report = worker.sweep(now=wall_now(), shards=[2])

    assert (report.swept, report.skipped) == (1, 1)
    assert raw_item(sandbox, target) == touched[0] is not None
    assert raw_item(sandbox, other) is None


# --- a run cut by its time guard ------------------------------------------------------------
def test_every_shard_is_swept_when_a_run_is_cut_by_its_time_guard(
    sandbox: Sandbox,
    store: SessionStore,
    config: RuntimeConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pages of one session, three due in each shard, and a guard that trips after four
    deletes: the cut run deleted one in every shard (pages in turn, not shard 0's backlog
    first), and the next run sweeps what it did not reach."""
    monkeypatch.setattr(sweeper_module, "QUERY_PAGE_SIZE", 1)
    by_shard = sessions_by_shard(store, per_shard=3)
    calls: list[tuple[str, dict[str, Any]]] = []
    worker = new_sweeper(dataclasses.replace(config, max_workers=1), calls)

    def cut() -> bool:
        return sum(1 for name, _ in calls if name == "DeleteItem") >= SHARDS

    first = worker.sweep(now=wall_now(), out_of_time=cut)

    assert (first.swept, first.complete) == (SHARDS, False)
    assert deleted_shards(calls) == dict.fromkeys(map(str, range(SHARDS)), 1)
    calls.clear()
    second = worker.sweep(now=wall_now())
    assert (second.swept, second.complete) == (2 * SHARDS, True)
    assert all(raw_item(sandbox, s) is None for ids in by_shard.values() for s in ids)


# --- the run's period -------------------------------------------------------------------------
SCHEDULED = "2026-12-06T05:00:00Z"
SCHEDULED_S = datetime(2026, 12, 6, 5, tzinfo=timezone.utc).timestamp()


def test_period_end_is_the_scheduled_time_plus_the_period() -> None:
    event = {EVENT_SWEEP_SCHEDULED_AT: SCHEDULED, EVENT_SWEEP_PERIOD_SECONDS: 60}
    assert period_end_of(event) == SCHEDULED_S + 60
    assert period_end_of({"time": SCHEDULED}) is None  # the emulator's plain scheduled event
    assert period_end_of(None) is None


@pytest.mark.parametrize(
    ("event", "match"),
    [
        ({EVENT_SWEEP_SCHEDULED_AT: "yesterday", EVENT_SWEEP_PERIOD_SECONDS: 60}, "yesterday"),
        ({EVENT_SWEEP_SCHEDULED_AT: SCHEDULED, EVENT_SWEEP_PERIOD_SECONDS: 0}, "=0"),
        ({EVENT_SWEEP_SCHEDULED_AT: SCHEDULED, EVENT_SWEEP_PERIOD_SECONDS: "60"}, "'60'"),
    ],
)
def test_fails_period_end_of_a_malformed_event(event: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        period_end_of(event)


def test_the_deadline_is_the_earlier_of_lambdas_and_the_periods() -> None:
    wall = [SCHEDULED_S + 50]
    deadline = Deadline(lambda: 300_000, 3_500, not_after=SCHEDULED_S + 60, wall=lambda: wall[0])
    assert deadline.remaining_ms() == pytest.approx(10_000)
    assert not deadline.passed()
    wall[0] = SCHEDULED_S + 57
    assert deadline.passed()  # 3 s left, under the 3.5 s margin
    assert Deadline(lambda: 2_000, 3_500, not_after=SCHEDULED_S + 60, wall=lambda: 0).passed()


def test_a_run_whose_period_has_ended_makes_no_call(
    sandbox: Sandbox,
    store: SessionStore,
    config: RuntimeConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An event delivered after its period (the next run of the worker may be running): the
    run starts no call and leaves every session to that run."""
    store.create("late", ttl=HOUR)
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(ENV_SWEEP_SHARD_ATTRIBUTE, SHARD)
    monkeypatch.setenv(ENV_SWEEP_SHARDS, str(SHARDS))
    monkeypatch.setattr(sweeper_module, "_sweeper", None)
    an_hour_ago = (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()
    event = {
        EVENT_SWEEP_SHARDS: [0, 1, 2, 3],
        EVENT_SWEEP_SCHEDULED_AT: an_hour_ago,
        EVENT_SWEEP_PERIOD_SECONDS: 60,
    }

    summary = sweeper_module.handler(event, FakeContext())

    assert (summary["pages"], summary["swept"], summary["complete"]) == (0, 0, False)
    assert raw_item(sandbox, "late") is not None
    sweeper_module._sweeper = None


def test_two_workers_together_sweep_every_shard_once(
    sandbox: Sandbox,
    store: SessionStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    by_shard = sessions_by_shard(store, per_shard=2)
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(ENV_SWEEP_SHARD_ATTRIBUTE, SHARD)
    monkeypatch.setenv(ENV_SWEEP_SHARDS, str(SHARDS))
    monkeypatch.setattr(sweeper_module, "_sweeper", None)
    now = datetime.now(timezone.utc).isoformat()

    summaries = [
        sweeper_module.handler(
            {
                EVENT_SWEEP_SHARDS: shards,
                EVENT_SWEEP_SCHEDULED_AT: now,
                EVENT_SWEEP_PERIOD_SECONDS: 300,
            },
            FakeContext(),
        )
        for shards in ([0, 2], [1, 3])
    ]

    assert [s["swept"] for s in summaries] == [4, 4]
    assert [s["shards"] for s in summaries] == [[0, 2], [1, 3]]
    assert all(raw_item(sandbox, s) is None for ids in by_shard.values() for s in ids)
    sweeper_module._sweeper = None


# --- the event's shards -----------------------------------------------------------------------
def test_an_event_without_shards_owns_them_all() -> None:
    assert shards_of_event({"time": SCHEDULED}, 4) == [0, 1, 2, 3]
    assert shards_of_event({EVENT_SWEEP_SHARDS: [3, 1]}, 4) == [3, 1]


@pytest.mark.parametrize("given", [[], [4], [-1], [1, 1], ["1"], [True], "0,1", 2])
def test_fails_shards_of_an_event_outside_the_shard_count(given: Any) -> None:
    with pytest.raises(ValueError, match=r"expiryShards=.*expected a non-empty list .* 0 to 3"):
        shards_of_event({EVENT_SWEEP_SHARDS: given}, 4)
