"""Guards at synth (issue 12): prop combinations that would silently lose a cleanup.

* Every delete the library itself makes — the expiry sweeper's, ``SessionStore.create``'s delete
  of an expired item before reusing its id, ``SessionStore.end`` — must pass the event source
  mapping's filter. Their real REMOVE records (moto) are run through the synthesized filter with
  the matcher the local pipeline uses (moto's EventBridge pattern matcher): ``ALL_REMOVES``
  passes each, ``TTL_DELETES_ONLY`` drops each, so the combinations that rely on them with
  ``TTL_DELETES_ONLY`` are rejected.
* Two constructs may not claim overlapping prefixes of one bucket.
* A key attribute type the runtime does not write (Number, Binary) is rejected.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from moto import mock_aws
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.records import stream_records
from session_expiry_runtime.store import SessionStore
from session_expiry_runtime.sweeps.sweeper import ExpirySweeper

from cdk_session_expiry import CleanupEventFilter, SessionExpiry
from cdk_session_expiry.testing.poller import pattern_matcher

REGION = "us-east-1"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def deployed_patterns(event_filter: CleanupEventFilter) -> list[str]:
    """The FilterCriteria patterns of the synthesized event source mapping."""
    stack = Stack(App(), "Filters")
    SessionExpiry(stack, "Sessions", event_filter=event_filter)
    (mapping,) = (
        Template.from_stack(stack).find_resources("AWS::Lambda::EventSourceMapping").values()
    )
    return [f["Pattern"] for f in mapping["Properties"]["FilterCriteria"]["Filters"]]


@pytest.fixture(scope="module")
def patterns() -> dict[CleanupEventFilter, list[str]]:
    return {f: deployed_patterns(f) for f in CleanupEventFilter}


class Table:
    """A moto session table with its stream; the library's own code writes and deletes."""

    def __init__(self) -> None:
        self.ddb = boto3.client("dynamodb", region_name=REGION)
        self.streams = boto3.client("dynamodbstreams", region_name=REGION)
        self.stream_arn = self.ddb.create_table(
            TableName="sessions",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )["TableDescription"]["LatestStreamArn"]
        self.now = T0
        self.config = RuntimeConfig(table_name="sessions", sweep_shard_attribute="expiryShard")
        self.store = SessionStore(
            config=self.config, dynamodb_client=self.ddb, clock=lambda: self.now
        )

    def removes(self, *, ttl_delete: bool = False) -> list[dict[str, Any]]:
        """The REMOVE records on the stream, in Lambda's shape (JSON round trip)."""
        (shard,) = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"][
            "Shards"
        ]
        iterator = self.streams.get_shard_iterator(
            StreamArn=self.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records = self.streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
        identity = stream_records.TTL_USER_IDENTITY if ttl_delete else None
        return [
            json.loads(
                json.dumps(
                    stream_records.to_lambda_record(
                        r, stream_arn=self.stream_arn, user_identity=identity
                    )
                )
            )
            for r in records
            if r["eventName"] == "REMOVE"
        ]


@pytest.fixture
def table() -> Iterator[Table]:
    with mock_aws():
        yield Table()


def _sweeper_delete(table: Table) -> None:
    table.store.create("s-1", ttl=timedelta(minutes=5))
    table.now += timedelta(minutes=10)
    sweeper = ExpirySweeper(
        table.config, table.ddb, MetricsRecorder("Test"), clock=lambda: table.now
    )
    key = {"pk": {"S": "s-1"}}
    assert sweeper.delete_if_due(key, now=table.store._now()) == "swept"


def _store_reuse_delete(table: Table) -> None:
    table.store.create("s-1", ttl=timedelta(minutes=5))
    table.now += timedelta(minutes=10)
    table.store.create("s-1", ttl=timedelta(minutes=5))  # deletes the expired item first


def _store_end(table: Table) -> None:
    table.store.create("s-1", ttl=timedelta(minutes=5))
    assert table.store.end("s-1")


LIBRARY_DELETES = {
    "sweeper": _sweeper_delete,
    "store-create-reuse": _store_reuse_delete,
    "store-end": _store_end,
}


@pytest.mark.parametrize("delete", LIBRARY_DELETES.values(), ids=LIBRARY_DELETES.keys())
def test_each_library_delete_passes_all_removes_and_is_dropped_by_ttl_deletes_only(
    table: Table, patterns: dict[CleanupEventFilter, list[str]], delete: Any
) -> None:
    delete(table)
    (record,) = table.removes()
    assert "userIdentity" not in record  # an explicit DeleteItem: no TTL identity

    assert pattern_matcher(patterns[CleanupEventFilter.ALL_REMOVES])(record)
    assert not pattern_matcher(patterns[CleanupEventFilter.TTL_DELETES_ONLY])(record)


def test_a_ttl_delete_passes_both_filters(
    table: Table, patterns: dict[CleanupEventFilter, list[str]]
) -> None:
    # The control: the filter of TTL_DELETES_ONLY does pass what DynamoDB's TTL deletes.
    table.store.create("s-1", ttl=timedelta(minutes=5))
    table.ddb.delete_item(TableName="sessions", Key={"pk": {"S": "s-1"}})
    (record,) = table.removes(ttl_delete=True)

    for event_filter in CleanupEventFilter:
        assert pattern_matcher(patterns[event_filter])(record)


# --- the rejected combinations ----------------------------------------------------------------


@pytest.fixture
def stack() -> Stack:
    return Stack(App(), "Guards")


def test_fails_expiry_sweep_interval_with_ttl_deletes_only(stack: Stack) -> None:
    with pytest.raises(ValueError) as raised:
        SessionExpiry(
            stack,
            "Sessions",
            expiry_sweep_interval=Duration.minutes(5),
            event_filter=CleanupEventFilter.TTL_DELETES_ONLY,
        )

    message = str(raised.value)
    assert message.startswith("expiry_sweep_interval=5 minutes with event_filter=")
    assert "TTL_DELETES_ONLY" in message and "carry no userIdentity" in message
    assert "expected event_filter=CleanupEventFilter.ALL_REMOVES" in message


def _function(stack: Stack) -> lambda_.Function:
    return lambda_.Function(
        stack,
        "App",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(e, c): pass"),
    )


def test_fails_grant_session_access_with_ttl_deletes_only(stack: Stack) -> None:
    sessions = SessionExpiry(stack, "Sessions", event_filter=CleanupEventFilter.TTL_DELETES_ONLY)

    with pytest.raises(ValueError, match=r"grant_session_access\(Guards/App\) with event_filter"):
        sessions.grant_session_access(_function(stack))
    with pytest.raises(ValueError, match=r"SessionStore deletes with DeleteItem \(end\(\)"):
        sessions.session_environment()


def test_the_default_filter_allows_the_sweeper_and_the_session_store(stack: Stack) -> None:
    sessions = SessionExpiry(stack, "Sessions", expiry_sweep_interval=Duration.minutes(5))

    sessions.grant_session_access(_function(stack))

    assert sessions.event_filter is CleanupEventFilter.ALL_REMOVES


# --- overlapping prefixes across constructs ---------------------------------------------------


def _two(stack: Stack, first: dict[str, Any], second: dict[str, Any]) -> None:
    SessionExpiry(stack, "First", **first)
    SessionExpiry(stack, "Second", **second)


@pytest.mark.parametrize(
    ("first", "second", "match"),
    [
        ({}, {}, "scratch_root='sessions/' overlaps scratch_root='sessions/' of Guards/First"),
        ({}, {"scratch_root": "sessions/a/"}, "scratch_root='sessions/a/' overlaps"),
        ({"scratch_root": "app/sessions/"}, {"scratch_root": "app/"}, "scratch_root='app/'"),
        (
            {},
            {"scratch_root": "other/", "archive_prefix": "sessions/archive/"},
            "archive_prefix='sessions/archive/' overlaps scratch_root='sessions/'",
        ),
        (
            {"scratch_root": "other/", "archive_prefix": "archive/"},
            {"scratch_root": "archive/live/"},
            "scratch_root='archive/live/' overlaps archive_prefix='archive/'",
        ),
    ],
    ids=["same", "nested", "nesting", "archive-in-scratch", "scratch-in-archive"],
)
def test_fails_overlapping_prefixes_of_two_constructs_on_one_bucket(
    stack: Stack, first: dict[str, Any], second: dict[str, Any], match: str
) -> None:
    bucket = s3.Bucket(stack, "Bucket")

    def props(extra: dict[str, Any]) -> dict[str, Any]:
        archive = {"archive_bucket": bucket} if "archive_prefix" in extra else {}
        return {"scratch_bucket": bucket, **archive, **extra}

    with pytest.raises(ValueError, match=match.replace("(", r"\(").replace(")", r"\)")) as raised:
        _two(stack, props(first), props(second))
    assert "two lifecycle rules would act on one prefix" in str(raised.value)


def test_fails_overlap_on_a_bucket_imported_twice_by_name(stack: Stack) -> None:
    one = s3.Bucket.from_bucket_name(stack, "One", "scratch")
    two = s3.Bucket.from_bucket_name(stack, "Two", "scratch")

    with pytest.raises(ValueError, match="in bucket 'scratch'"):
        _two(stack, {"scratch_bucket": one}, {"scratch_bucket": two})


def test_disjoint_prefixes_or_other_buckets_pass(stack: Stack) -> None:
    bucket = s3.Bucket(stack, "Bucket")
    other = s3.Bucket(stack, "Other")
    SessionExpiry(stack, "A", scratch_bucket=bucket, scratch_root="a/")
    SessionExpiry(stack, "B", scratch_bucket=bucket, scratch_root="ab/")  # "ab/" is not in "a/"
    SessionExpiry(stack, "C", scratch_bucket=other, scratch_root="a/")


# --- key attribute types ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "match"),
    [
        (
            {"partition_key": dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.NUMBER)},
            "partition key 'pk' is a Number",
        ),
        (
            {"partition_key": dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.BINARY)},
            "partition key 'pk' is a Binary",
        ),
        (
            {
                "partition_key": dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
                "sort_key": dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.NUMBER),
            },
            "sort key 'sk' is a Number",
        ),
    ],
    ids=["number-partition-key", "binary-partition-key", "number-sort-key"],
)
def test_fails_a_key_attribute_type_the_runtime_does_not_write(
    stack: Stack, keys: dict[str, Any], match: str
) -> None:
    table = dynamodb.Table(
        stack,
        "Own",
        time_to_live_attribute="expiresAt",
        stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        **keys,
    )

    with pytest.raises(ValueError, match=match) as raised:
        SessionExpiry(stack, "Sessions", table=table)
    assert "expected dynamodb.AttributeType.STRING" in str(raised.value)


def test_fails_a_number_partition_key_of_a_table_v2(stack: Stack) -> None:
    table = dynamodb.TableV2(
        stack,
        "Own",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.NUMBER),
        time_to_live_attribute="expiresAt",
        dynamo_stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
    )

    with pytest.raises(ValueError, match="partition key 'pk' is a Number"):
        SessionExpiry(stack, "Sessions", table=table)
