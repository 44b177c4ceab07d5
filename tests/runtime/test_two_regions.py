"""Global tables across two emulated Regions (issue 23): every session cleaned once, in its owner.

moto serves both Regions in one process (``region_name=``) but does not replicate a global
table: each Region has its own session table, and the test replicates every write and delete
into the other Region's table, as DynamoDB global tables do ("typically within a second"). The
replica's stream then carries the replicated change, as in AWS. moto never expires items by
TTL: a TTL delete is a DeleteItem whose REMOVE gets the documented ``userIdentity`` **only in
the Region that performed it**; its replica in the other Region has none (DynamoDB Developer
Guide, "DynamoDB Streams and Time to Live").

Each Region runs the real ``SessionStore`` (owner Region stamped), the real cleanup runner (the
Region's own ownership table and WebSocket endpoint), the real expiry sweeper, and its
records pass through the event source mapping's filter as synthesized for that Region
(``tests/infra/test_multi_region.py`` pins the same pattern) with moto's pattern matcher.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

import boto3
import pytest
from moto import mock_aws
from moto.apigatewaymanagementapi.models import apigatewaymanagementapi_backends
from moto.core import DEFAULT_ACCOUNT_ID
from ownership_support import create_ownership_table
from runtime_support import FakeContext
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, build_clients, process_batch
from session_expiry_runtime.core.config import (
    CAUSE_OTHER_REGION,
    REASON_DELETED_AFTER_EXPIRY,
    REASON_EXPLICIT,
    REASON_TTL,
    RuntimeConfig,
)
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.records import stream_records
from session_expiry_runtime.store import SessionStore
from session_expiry_runtime.sweeps.sweeper import ExpirySweeper

from cdk_session_expiry.testing.poller import pattern_matcher

A, B = "us-east-1", "eu-west-1"
TABLE, OWNERSHIP = "sessions", "session-ownership"
HOUR = timedelta(hours=1)


def endpoint(region: str) -> str:
    return f"https://api{region.replace('-', '')}.execute-api.{region}.amazonaws.com/prod"


def owner_filter(region: str) -> str:
    """The pattern ``SessionExpiry(global_table=True)`` synthesizes in ``region``."""
    return json.dumps(
        {"eventName": ["REMOVE"], "dynamodb": {"OldImage": {"ownerRegion": {"S": [region]}}}}
    )


class Region:
    """One Region's replica, ownership table, WebSocket API, store, cleanup and sweeper."""

    def __init__(self, name: str, clock: Any) -> None:
        self.name = name
        self.session = boto3.session.Session(region_name=name)
        self.calls: list[str] = []
        self.session.events.register("before-call", self._record_call)
        self.ddb = self.session.client("dynamodb")
        self.streams = self.session.client("dynamodbstreams")
        self.stream_arn = self.ddb.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "expiryShard", "AttributeType": "S"},
                {"AttributeName": "expiresAt", "AttributeType": "N"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "expirySweep",
                    "KeySchema": [
                        {"AttributeName": "expiryShard", "KeyType": "HASH"},
                        {"AttributeName": "expiresAt", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )["TableDescription"]["LatestStreamArn"]
        create_ownership_table(self.ddb)
        self.config = RuntimeConfig(
            table_name=TABLE,
            ownership_table_name=OWNERSHIP,
            websocket_endpoint=endpoint(name),
            sweep_shard_attribute="expiryShard",
            owner_region_attribute="ownerRegion",
            region=name,
            max_workers=4,
        )
        self.store = SessionStore(dynamodb_client=self.ddb, clock=clock, config=self.config)
        self.cleaner = SessionCleaner(
            self.config, build_clients(self.config, self.session), MetricsRecorder("Test")
        )
        self.sweeper = ExpirySweeper(self.config, self.ddb, MetricsRecorder("Test"), clock=clock)
        self.apigw = self.session.client("apigatewaymanagementapi", endpoint_url=endpoint(name))

    def _record_call(self, model: Any, **_: Any) -> None:
        self.calls.append(model.name)

    def open_connection(self, connection_id: str) -> None:
        self.apigw.post_to_connection(ConnectionId=connection_id, Data=b"hi")

    def connection_exists(self, connection_id: str) -> bool:
        backend = apigatewaymanagementapi_backends[DEFAULT_ACCOUNT_ID][self.name]
        return quote(connection_id, safe="-_.~") in backend.connections

    def lambda_records(self, ttl_deleted: set[str]) -> list[dict[str, Any]]:
        """Every record of the Region's stream as Lambda delivers it; the REMOVEs of
        ``ttl_deleted`` keys (TTL deletes performed in this Region) carry the TTL identity."""
        out: list[dict[str, Any]] = []
        for shard in self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"][
            "Shards"
        ]:
            iterator = self.streams.get_shard_iterator(
                StreamArn=self.stream_arn,
                ShardId=shard["ShardId"],
                ShardIteratorType="TRIM_HORIZON",
            )["ShardIterator"]
            for record in self.streams.get_records(ShardIterator=iterator)["Records"]:
                pk = record["dynamodb"]["Keys"]["pk"]["S"]
                ttl = record["eventName"] == "REMOVE" and pk in ttl_deleted
                shaped = stream_records.to_lambda_record(
                    record,
                    stream_arn=self.stream_arn,
                    user_identity=stream_records.TTL_USER_IDENTITY if ttl else None,
                )
                out.append(json.loads(json.dumps(shaped)))
        return out


class GlobalTable:
    """Two Regions whose tables replicate each other's writes and deletes."""

    def __init__(self, clock: Any) -> None:
        self.regions = {name: Region(name, clock) for name in (A, B)}
        self.ttl_deleted: dict[str, set[str]] = {A: set(), B: set()}

    def other(self, name: str) -> Region:
        return self.regions[B if name == A else A]

    def create(self, owner: str, session_id: str) -> str:
        region = self.regions[owner]
        connection_id = f"{session_id}-conn="
        region.open_connection(connection_id)
        region.store.create(session_id, ttl=HOUR, connection_id=connection_id)
        self.replicate_put(owner, session_id)
        return connection_id

    def replicate_put(self, source: str, session_id: str) -> None:
        item = self.regions[source].ddb.get_item(TableName=TABLE, Key={"pk": {"S": session_id}})
        self.other(source).ddb.put_item(TableName=TABLE, Item=item["Item"])

    def delete(self, where: str, session_id: str, *, ttl: bool = False) -> None:
        """A delete performed in ``where`` (by TTL with ``ttl``) and its replica elsewhere."""
        for region in (self.regions[where], self.other(where)):
            region.ddb.delete_item(TableName=TABLE, Key={"pk": {"S": session_id}})
        if ttl:
            self.ttl_deleted[where].add(session_id)

    def clean_everything(
        self, caplog: pytest.LogCaptureFixture, *, filtered: bool = True
    ) -> dict[str, list[dict[str, Any]]]:
        """Feed each Region's stream to its cleanup (through its filter, unless not
        ``filtered``) with the real ``process_batch``; each Region's log lines."""
        lines: dict[str, list[dict[str, Any]]] = {}
        caplog.set_level(logging.INFO, logger="session_expiry_runtime")
        for name, region in self.regions.items():
            matches = pattern_matcher([owner_filter(name)] if filtered else [])
            records = [r for r in region.lambda_records(self.ttl_deleted[name]) if matches(r)]
            region.calls.clear()
            caplog.clear()
            response = process_batch({"Records": records}, FakeContext(), region.cleaner)
            assert response == {"batchItemFailures": []}
            lines[name] = [r.session for r in caplog.records if hasattr(r, "session")]
        return lines


@pytest.fixture
def world() -> Any:
    with mock_aws():
        start = datetime.now(timezone.utc) - 2 * HOUR  # expired by the time moto stamps REMOVEs
        clock = _Clock(start)
        yield GlobalTable(clock), clock


class _Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def cleaned(lines: list[dict[str, Any]]) -> dict[str, str]:
    """session id -> reason of the records a Region cleaned."""
    return {line["keys"]["pk"]: line["reason"] for line in lines if line["outcome"] == "cleaned"}


def test_the_store_stamps_the_owner_region_and_a_foreign_touch_keeps_it(world: Any) -> None:
    table, clock = world
    clock.now = datetime.now(timezone.utc)
    table.create(A, "s-1")
    touched = table.regions[B].store.touch("s-1", ttl=HOUR)  # a heartbeat after a failover
    assert touched.owner_region == A
    item = table.regions[B].ddb.get_item(TableName=TABLE, Key={"pk": {"S": "s-1"}})["Item"]
    assert item["ownerRegion"] == {"S": A}
    assert item["expiryShard"]["S"].startswith(f"{A}#")


def test_every_session_is_cleaned_once_in_its_owner_region(
    world: Any, caplog: pytest.LogCaptureFixture
) -> None:
    table, _ = world
    connections = {
        "a-ttl-here": table.create(A, "a-ttl-here"),  # TTL delete performed in A (its owner)
        "a-ttl-there": table.create(A, "a-ttl-there"),  # TTL delete performed in B
        "a-end-here": table.create(A, "a-end-here"),
        "a-end-there": table.create(A, "a-end-there"),  # ended through B after a failover
        "b-ttl-here": table.create(B, "b-ttl-here"),
        "b-end-there": table.create(B, "b-end-there"),
    }
    table.delete(A, "a-ttl-here", ttl=True)
    table.delete(B, "a-ttl-there", ttl=True)
    table.delete(A, "a-end-here")
    table.delete(B, "a-end-there")
    table.delete(B, "b-ttl-here", ttl=True)
    table.delete(A, "b-end-there")

    lines = table.clean_everything(caplog)

    assert cleaned(lines[A]) == {
        "a-ttl-here": REASON_TTL,
        # replicated TTL delete: no identity, TTL before the removal -> an expiry, never explicit
        "a-ttl-there": REASON_DELETED_AFTER_EXPIRY,
        "a-end-here": REASON_DELETED_AFTER_EXPIRY,  # ended after its TTL had passed
        "a-end-there": REASON_DELETED_AFTER_EXPIRY,
    }
    assert cleaned(lines[B]) == {
        "b-ttl-here": REASON_TTL,
        "b-end-there": REASON_DELETED_AFTER_EXPIRY,
    }
    # The filter kept the other Region's records (and every INSERT) from the function.
    assert all(line["outcome"] == "cleaned" for name in (A, B) for line in lines[name])
    for session_id, connection_id in connections.items():
        owner = table.regions[A if session_id.startswith("a-") else B]
        assert not owner.connection_exists(connection_id)
    assert table.regions[A].calls.count("DeleteConnection") == 4
    assert table.regions[B].calls.count("DeleteConnection") == 2


def test_without_the_filter_the_runtime_skips_other_regions_sessions_without_a_call(
    world: Any, caplog: pytest.LogCaptureFixture
) -> None:
    table, _ = world
    table.create(A, "a-1")
    table.create(B, "b-1")
    table.delete(A, "a-1", ttl=True)
    table.delete(A, "b-1")

    lines = table.clean_everything(caplog, filtered=False)

    for name in (A, B):  # each Region got the other's REMOVE and skipped it
        removes = [line for line in lines[name] if line.get("eventName") == "REMOVE"]
        skipped = [line for line in removes if line["outcome"] == "skipped"]
        assert [line["cause"] for line in skipped] == [CAUSE_OTHER_REGION]
    assert cleaned(lines[A]) == {"a-1": REASON_TTL}
    assert cleaned(lines[B]) == {"b-1": REASON_DELETED_AFTER_EXPIRY}
    # B's cleanup read B's ownership table for b-1 only; it never acted on A's connection.
    assert table.regions[B].calls.count("DeleteConnection") == 1


def test_sweepers_of_both_regions_at_once_sweep_each_session_once(world: Any) -> None:
    table, clock = world
    owned = {A: [f"a-{i}" for i in range(6)], B: [f"b-{i}" for i in range(6)]}
    for owner, ids in owned.items():
        for session_id in ids:
            table.create(owner, session_id)
    clock.now = datetime.now(timezone.utc)  # every session is due
    reports: dict[str, Any] = {}

    def sweep(name: str) -> None:
        reports[name] = table.regions[name].sweeper.sweep()

    threads = [threading.Thread(target=sweep, args=(name,)) for name in (A, B)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert (reports[A].swept, reports[A].skipped) == (6, 0)
    assert (reports[B].swept, reports[B].skipped) == (6, 0)
    # Each swept only its own: the other Region's sessions are still in its table.
    for name, region in table.regions.items():
        left = {i["pk"]["S"] for i in region.ddb.scan(TableName=TABLE)["Items"]}
        assert left == set(owned[B if name == A else A])


def test_explicit_end_of_a_live_session_is_explicit_in_its_owner_region(
    world: Any, caplog: pytest.LogCaptureFixture
) -> None:
    table, clock = world
    clock.now = datetime.now(timezone.utc)  # created now: live for an hour
    table.create(A, "a-live")
    table.delete(B, "a-live")  # ended through B's replica
    lines = table.clean_everything(caplog)
    assert cleaned(lines[A]) == {"a-live": REASON_EXPLICIT}
    assert cleaned(lines[B]) == {}
