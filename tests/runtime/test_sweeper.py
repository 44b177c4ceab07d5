"""Expiry sweeper (issue 6) against moto: Query on the sparse index, never a Scan; conditional
deletes; the heartbeat race; pages; ``ttl`` as the attribute name; the swept session's REMOVE
record through the real cleanup.

Sessions are written by the real :class:`SessionStore` (configured for the sweeper, so it writes
the shard attribute); the index is added to moto's table with UpdateTable, as the construct adds
it to a new table.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from ownership_support import adopt
from runtime_faults import answer, json_error, times
from runtime_support import SESSION, TABLE, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import process_batch
from session_expiry_runtime.core.config import (
    DEFAULT_SWEEP_INDEX_NAME,
    DEFAULT_SWEEP_SHARD_ATTRIBUTE,
    ENV_DRY_RUN,
    ENV_SWEEP_SHARD_ATTRIBUTE,
    ENV_SWEEP_SHARDS,
    ENV_TTL_ATTRIBUTE,
    RuntimeConfig,
)
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.store import SessionStore
from session_expiry_runtime.sweeps import sweeper as sweeper_module
from session_expiry_runtime.sweeps.sweeper import (
    ExpirySweeper,
    SweepIncompleteError,
    shard_of,
)

from cdk_session_expiry import _runtime_contract as contract

HOUR = timedelta(hours=1)
SHARD = DEFAULT_SWEEP_SHARD_ATTRIBUTE


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def add_sweep_index(sandbox: Sandbox, ttl_attribute: str) -> None:
    """The index the construct adds: shard (S) partition key, TTL (N) sort key, KEYS_ONLY."""
    sandbox.ddb.update_table(
        TableName=TABLE,
        AttributeDefinitions=[
            {"AttributeName": SHARD, "AttributeType": "S"},
            {"AttributeName": ttl_attribute, "AttributeType": "N"},
        ],
        GlobalSecondaryIndexUpdates=[
            {
                "Create": {
                    "IndexName": DEFAULT_SWEEP_INDEX_NAME,
                    "KeySchema": [
                        {"AttributeName": SHARD, "KeyType": "HASH"},
                        {"AttributeName": ttl_attribute, "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            }
        ],
    )


@pytest.fixture(params=["expiresAt", "ttl"])
def ttl_attr(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def config(sandbox: Sandbox, ttl_attr: str) -> RuntimeConfig:
    add_sweep_index(sandbox, ttl_attr)
    return dataclasses.replace(sandbox.config, ttl_attribute=ttl_attr, sweep_shard_attribute=SHARD)


@pytest.fixture
def app_clock() -> Clock:
    """The application's clock, two hours in the (real) past: sessions it creates with a one
    hour lifetime expired an hour ago by the wall clock, which moto stamps stream records with."""
    return Clock(datetime.now(timezone.utc) - 2 * HOUR)


@pytest.fixture
def store(sandbox: Sandbox, config: RuntimeConfig, app_clock: Clock) -> SessionStore:
    return SessionStore(
        dynamodb_client=sandbox.ddb, kms_client=sandbox.kms, clock=app_clock, config=config
    )


@pytest.fixture
def calls() -> list[str]:
    return []


@pytest.fixture
def sweeper(config: RuntimeConfig, calls: list[str]) -> ExpirySweeper:
    """A sweeper on its own client, recording every DynamoDB operation it calls."""
    client = SESSION.client("dynamodb")

    def record(model: Any, **_: Any) -> None:
        calls.append(model.name)

    client.meta.events.register("before-call.dynamodb", record)
    return ExpirySweeper(config, client, MetricsRecorder(config.metrics_namespace))


def wall_now() -> Decimal:
    return Decimal(int(time.time()))


def raw_item(sandbox: Sandbox, session_id: str) -> dict[str, Any] | None:
    item = sandbox.ddb.get_item(
        TableName=TABLE, Key={"pk": {"S": session_id}}, ConsistentRead=True
    ).get("Item")
    return dict(item) if item is not None else None


# --- pure -------------------------------------------------------------------------------------
def test_shard_of_is_stable_and_in_range() -> None:
    assert shard_of(["s-1"], 4) == shard_of(["s-1"], 4)
    assert {shard_of([f"s-{i}"], 4) for i in range(200)} == {"0", "1", "2", "3"}
    assert shard_of(["tenant", "s-1"], 4) in {"0", "1", "2", "3"}
    assert shard_of(["s-1"], 1) == "0"


@pytest.mark.parametrize("shards", [0, -1, True, 2.0])
def test_fails_shard_of_with_a_bad_shard_count(shards: Any) -> None:
    with pytest.raises(ValueError, match=rf"shards={shards!r}: expected a positive integer"):
        shard_of(["s-1"], shards)


def test_fails_without_a_shard_attribute(sandbox: Sandbox) -> None:
    with pytest.raises(ValueError, match="shard attribute None: the sweeper needs"):
        ExpirySweeper(sandbox.config, sandbox.ddb, MetricsRecorder("x"))


def test_sweeper_handler_exists_in_the_runtime_package() -> None:
    module, function = contract.SWEEPER_HANDLER.rsplit(".", 1)
    path = contract.runtime_package_dir().parent.joinpath(*module.split(".")).with_suffix(".py")
    tree = ast.parse(path.read_text())
    assert function in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


# --- the session runtime writes the sparse index's attribute -------------------------------
def test_store_writes_the_shard_only_when_the_sweeper_is_configured(
    sandbox: Sandbox, store: SessionStore, config: RuntimeConfig, app_clock: Clock
) -> None:
    store.create("s-1", ttl=HOUR)
    assert raw_item(sandbox, "s-1")[SHARD] == {"S": shard_of(["s-1"], config.sweep_shards)}  # type: ignore[index]

    plain = SessionStore(
        dynamodb_client=sandbox.ddb,
        clock=app_clock,
        config=dataclasses.replace(config, sweep_shard_attribute=None),
    )
    plain.create("s-2", ttl=HOUR)
    assert SHARD not in raw_item(sandbox, "s-2")  # type: ignore[operator]
    # A session written before the sweeper was turned on joins the index at its next touch.
    store.touch("s-2", ttl=HOUR)
    assert raw_item(sandbox, "s-2")[SHARD] == {"S": shard_of(["s-2"], config.sweep_shards)}  # type: ignore[index]


def test_fails_store_with_the_shard_attribute_reused(sandbox: Sandbox) -> None:
    with pytest.raises(ValueError, match="'tenantId' is used as both"):
        SessionStore(
            dynamodb_client=sandbox.ddb,
            config=dataclasses.replace(sandbox.config, sweep_shard_attribute="tenantId"),
        )


# --- finding and deleting due sessions -------------------------------------------------------
def test_sweep_queries_the_index_and_never_scans(
    sandbox: Sandbox,
    store: SessionStore,
    sweeper: ExpirySweeper,
    calls: list[str],
    app_clock: Clock,
    ttl_attr: str,
) -> None:
    due = [f"due-{i}" for i in range(6)]
    for session_id in due:
        store.create(session_id, ttl=HOUR)
    store.create("live", ttl=4 * HOUR)  # expires two hours from the wall clock
    # Written by other code, without the shard attribute: not in the sparse index, left to TTL.
    sandbox.ddb.put_item(
        TableName=TABLE, Item={"pk": {"S": "foreign"}, ttl_attr: {"N": str(int(time.time()) - 60)}}
    )

    report = sweeper.sweep(now=wall_now())

    assert (report.swept, report.skipped, report.failed, report.complete) == (6, 0, 0, True)
    assert "Scan" not in calls
    assert calls.count("Query") == sweeper.config.sweep_shards
    assert calls.count("DeleteItem") == 6
    assert all(raw_item(sandbox, s) is None for s in due)
    assert raw_item(sandbox, "live") is not None
    assert raw_item(sandbox, "foreign") is not None
    # now - TTL: the sessions expired an hour ago.
    assert all(3590 <= lag <= 3700 for lag in report.lags)


def test_sweep_reads_every_page(
    sandbox: Sandbox,
    store: SessionStore,
    sweeper: ExpirySweeper,
    calls: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sweeper_module, "QUERY_PAGE_SIZE", 2)
    sweeper.config = dataclasses.replace(sweeper.config, sweep_shards=1)
    store._config = dataclasses.replace(store.config, sweep_shards=1)
    for i in range(7):
        store.create(f"due-{i}", ttl=HOUR)

    report = sweeper.sweep(now=wall_now())

    assert report.swept == 7
    assert report.pages == 4  # 2 + 2 + 2 + 1
    assert calls.count("Query") == 4
    assert "Scan" not in calls


def test_heartbeat_between_query_and_delete_wins(
    sandbox: Sandbox, store: SessionStore, sweeper: ExpirySweeper, app_clock: Clock
) -> None:
    """The sweeper has listed the session; before its DeleteItem lands, a heartbeat (written by
    an application whose clock still saw the session live) extends it. The conditional delete
    fails, the skip is counted, and the item is exactly what the heartbeat wrote."""
    created = store.create("s-race", ttl=HOUR)
    store.create("s-other", ttl=HOUR)
    touched: list[dict[str, Any]] = []

    def heartbeat_first(params: dict[str, Any], **_: Any) -> None:
        if params["Key"]["pk"]["S"] == "s-race" and not touched:
            app_clock.now = created.expires_at_datetime - timedelta(seconds=1)
            store.touch("s-race", ttl=3 * HOUR)
            touched.append(raw_item(sandbox, "s-race"))  # type: ignore[arg-type]

    sweeper._ddb.meta.events.register("provide-client-params.dynamodb.DeleteItem", heartbeat_first)

    report = sweeper.sweep(now=wall_now())

    assert (report.swept, report.skipped, report.failed) == (1, 1, 0)
    assert raw_item(sandbox, "s-race") == touched[0]
    assert raw_item(sandbox, "s-other") is None
    assert sweeper.metrics.snapshot()["SweepSkipped"] == 1


def test_delete_condition_refuses_a_live_session(
    sandbox: Sandbox, store: SessionStore, sweeper: ExpirySweeper
) -> None:
    store.create("live", ttl=4 * HOUR)
    before = raw_item(sandbox, "live")
    assert sweeper.delete_if_due({"pk": {"S": "live"}}, wall_now()) == "skipped"
    assert raw_item(sandbox, "live") == before
    assert sweeper.delete_if_due({"pk": {"S": "missing"}}, wall_now()) == "skipped"


def test_time_guard_stops_between_pages(
    store: SessionStore,
    sweeper: ExpirySweeper,
    calls: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sweeper_module, "QUERY_PAGE_SIZE", 1)
    sweeper.config = dataclasses.replace(sweeper.config, sweep_shards=1)
    store._config = dataclasses.replace(store.config, sweep_shards=1)
    for i in range(3):
        store.create(f"due-{i}", ttl=HOUR)

    # The guard trips once the first delete was sent: no further page is read.
    report = sweeper.sweep(now=wall_now(), out_of_time=lambda: "DeleteItem" in calls)

    assert (report.swept, report.pages, report.complete) == (1, 1, False)
    assert calls == ["Query", "DeleteItem"]


def test_time_guard_already_tripped_makes_no_call(
    store: SessionStore, sweeper: ExpirySweeper, calls: list[str]
) -> None:
    store.create("due-0", ttl=HOUR)

    report = sweeper.sweep(now=wall_now(), out_of_time=lambda: True)

    assert (report.pages, report.swept, report.complete) == (0, 0, False)
    assert calls == []


def test_dry_run_sweep_deletes_nothing(
    sandbox: Sandbox, store: SessionStore, config: RuntimeConfig, calls: list[str]
) -> None:
    for i in range(3):
        store.create(f"due-{i}", ttl=HOUR)
    client = SESSION.client("dynamodb")
    client.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    dry = ExpirySweeper(dataclasses.replace(config, dry_run=True), client, MetricsRecorder("x"))

    report = dry.sweep(now=wall_now())

    assert (report.would_sweep, report.swept, report.dry_run) == (3, 0, True)
    assert "DeleteItem" not in calls
    assert all(raw_item(sandbox, f"due-{i}") is not None for i in range(3))
    assert dry.metrics.snapshot() == {"SessionsWouldBeSwept": 3}


# --- the swept session is cleaned by the same cleanup ----------------------------------------
def test_swept_session_is_cleaned_by_the_cleanup_handler(
    sandbox: Sandbox,
    store: SessionStore,
    sweeper: ExpirySweeper,
    config: RuntimeConfig,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="session_expiry_runtime")
    sandbox.open_connection("conn-1=")
    store.create("s-1", ttl=HOUR, connection_id="conn-1=")
    # The app's clock is two hours behind, so the grant goes through attach_grant directly.
    # Named as create_grant names it: the cleanup retires only a grant named for its session.
    created = store.get("s-1", consistent=True)
    assert created is not None and created.scratch_prefix is not None
    grant = sandbox.create_grant({"pk": "s-1"}, created.scratch_prefix.rstrip("/").split("/")[-1])
    s = store.attach_grant("s-1", grant_id=grant["GrantId"], grant_token=grant["GrantToken"])
    assert s.scratch_prefix is not None
    sandbox.put_objects([s.scratch_prefix + "a.txt"])
    adopt(sandbox.ddb, TABLE, {"pk": {"S": "s-1"}})  # the store's ownership records
    sandbox.read_stream()  # consume INSERT/MODIFY

    assert sweeper.sweep(now=wall_now()).swept == 1
    (record,) = sandbox.removes()
    assert "userIdentity" not in record  # an explicit delete of an expired item

    cleaner = sandbox.cleaner(config)
    assert process_batch(event(record), FakeContext(), cleaner) == {"batchItemFailures": []}

    assert not sandbox.connection_exists("conn-1=")
    assert grant["GrantId"] not in sandbox.grant_ids()
    assert sandbox.keys_under(s.scratch_prefix) == []
    (line,) = [r.session for r in caplog.records if hasattr(r, "session")]
    # The current classifier: no userIdentity, TTL at or before the record's time.
    assert (line["outcome"], line["reason"]) == ("cleaned", "deleted-after-expiry")


# --- the Lambda entry point ------------------------------------------------------------------
@pytest.fixture
def handler_env(
    sandbox: Sandbox, config: RuntimeConfig, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(ENV_TTL_ATTRIBUTE, config.ttl_attribute)
    monkeypatch.setenv(ENV_SWEEP_SHARD_ATTRIBUTE, SHARD)
    monkeypatch.setenv(ENV_SWEEP_SHARDS, str(config.sweep_shards))
    monkeypatch.setattr(sweeper_module, "_sweeper", None)
    yield
    sweeper_module._sweeper = None


def test_handler_sweeps_and_writes_metrics(
    handler_env: None, store: SessionStore, capsys: pytest.CaptureFixture[str]
) -> None:
    store.create("s-1", ttl=HOUR)
    store.create("s-2", ttl=HOUR)
    capsys.readouterr()

    summary = sweeper_module.handler({}, FakeContext())

    assert (summary["swept"], summary["failed"], summary["complete"]) == (2, 0, True)
    assert summary["maxSweepLagSeconds"] >= 3590
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    (doc,) = [d for d in docs if "SessionsSwept" in d]
    assert doc["SessionsSwept"] == 2
    assert len(doc["SweepLagSeconds"]) == 2
    assert doc["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "SessionExpiry"


def test_handler_in_dry_run_counts_only(
    handler_env: None,
    sandbox: Sandbox,
    store: SessionStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV_DRY_RUN, "true")
    store.create("s-1", ttl=HOUR)

    summary = sweeper_module.handler({}, FakeContext())

    assert (summary["wouldSweep"], summary["swept"], summary["dryRun"]) == (1, 0, True)
    assert raw_item(sandbox, "s-1") is not None


def test_handler_raises_after_a_failed_delete(
    handler_env: None,
    sandbox: Sandbox,
    store: SessionStore,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store.create("s-1", ttl=HOUR)
    store.create("s-2", ttl=HOUR)
    sweeper = sweeper_module.get_sweeper()
    # AccessDenied is not retried by botocore: one answer fails one delete for good.
    answer(sweeper._ddb, "DeleteItem", times(1, json_error(400, "AccessDeniedException")))
    capsys.readouterr()

    with pytest.raises(SweepIncompleteError, match="1 due session"):
        sweeper_module.handler({}, FakeContext())

    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    (doc,) = [d for d in docs if "SweepFailures" in d]
    assert (doc["SweepFailures"], doc["SessionsSwept"]) == (1, 1)


def test_handler_raises_when_the_index_is_missing(
    handler_env: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The index the construct could not check (an imported table) does not exist: every Query
    fails, the run reports it and raises after writing the metrics (errors alarm)."""
    monkeypatch.setenv("SESSION_EXPIRY_SWEEP_INDEX_NAME", "no-such-index")
    capsys.readouterr()

    with pytest.raises(SweepIncompleteError, match=r"0 due session\(s\) .* and 4 shard\(s\)"):
        sweeper_module.handler({}, FakeContext())

    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    (doc,) = [d for d in docs if "SweepFailures" in d]
    assert doc["SweepFailures"] == 4
