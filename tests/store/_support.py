"""Helpers for the session store tests: moto tables, a settable clock, stream reading."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
T0_EPOCH = 1_767_225_600  # T0 in epoch seconds
TABLE = "sessions"
OWNERSHIP_TABLE = "session-ownership"
RETIRING_ROLE = "arn:aws:iam::123456789012:role/session-cleanup"
GRANTEE_ROLE = "arn:aws:iam::123456789012:role/app"
WEBSOCKET_ENDPOINT = "https://abc123.execute-api.us-east-1.amazonaws.com/live"


@dataclass
class FakeClock:
    """A clock the tests move by hand; returns an aware datetime, as the store expects."""

    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now

    def set_epoch(self, seconds: int) -> None:
        self.now = datetime.fromtimestamp(seconds, tz=timezone.utc)

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def create_table(ddb: Any, *, partition_key: str = "pk", sort_key: str | None = None) -> str:
    """Create the session table with a NEW_AND_OLD_IMAGES stream; return the stream ARN."""
    attrs = [{"AttributeName": partition_key, "AttributeType": "S"}]
    schema = [{"AttributeName": partition_key, "KeyType": "HASH"}]
    if sort_key:
        attrs.append({"AttributeName": sort_key, "AttributeType": "S"})
        schema.append({"AttributeName": sort_key, "KeyType": "RANGE"})
    resp = ddb.create_table(
        TableName=TABLE,
        AttributeDefinitions=attrs,
        KeySchema=schema,
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    return str(resp["TableDescription"]["LatestStreamArn"])


def create_ownership_table(ddb: Any) -> None:
    """The ownership table as the construct creates it: partition key ``resource``, no stream."""
    ddb.create_table(
        TableName=OWNERSHIP_TABLE,
        AttributeDefinitions=[{"AttributeName": "resource", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "resource", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )


def claim_of(ddb: Any, resource: str) -> dict[str, Any] | None:
    """The ownership record of ``resource`` (``<kind>#<id>``) exactly as stored."""
    item = ddb.get_item(
        TableName=OWNERSHIP_TABLE, Key={"resource": {"S": resource}}, ConsistentRead=True
    ).get("Item")
    return dict(item) if item is not None else None


def raw_item(ddb: Any, key: dict[str, Any]) -> dict[str, Any] | None:
    """The item exactly as stored (strongly consistent)."""
    item = ddb.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item")
    return dict(item) if item is not None else None


def stream_records(stream_arn: str) -> list[dict[str, Any]]:
    """Every record on the table's stream so far, read through moto's DynamoDB Streams."""
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records.extend(streams.get_records(ShardIterator=iterator)["Records"])
    return records
