"""Records skipped for good raise the metrics the construct's skipped-records alarm watches.

The alarm (``cdk_session_expiry.monitoring.alarms.skipped_records_alarm``) sums ``RecordsSkipped``
for the
causes in ``LOST_CLEANUP_CAUSES`` and ``ScratchPrefixesRefused``. Here real records go through
the real cleanup and the embedded metric documents it writes are read back.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from runtime_support import SESSION, FakeContext, Sandbox, event, to_lambda_record
from session_expiry_runtime.cleanup.cleaner import process_batch

from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.monitoring.alarms import LOST_CLEANUP_CAUSES


def emitted(out: str) -> dict[tuple[str, str | None], float]:
    """``{(metric, Cause or None): value}`` of the EMF documents in ``out``."""
    values: dict[tuple[str, str | None], float] = {}
    for line in out.splitlines():
        doc = json.loads(line)
        (directive,) = doc["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == contract.DEFAULT_METRICS_NAMESPACE
        for metric in directive["Metrics"]:
            values[(metric["Name"], doc.get(contract.DIMENSION_CAUSE))] = doc[metric["Name"]]
    return values


def keys_only_remove() -> dict[str, Any]:
    """A REMOVE record of a table whose stream view type is KEYS_ONLY (an imported table's
    stream the construct cannot see): no OldImage."""
    ddb = SESSION.client("dynamodb")
    streams = SESSION.client("dynamodbstreams")
    arn = ddb.create_table(
        TableName="keys-only",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
    )["TableDescription"]["LatestStreamArn"]
    ddb.put_item(TableName="keys-only", Item={"pk": {"S": "s-1"}, "connectionId": {"S": "c"}})
    ddb.delete_item(TableName="keys-only", Key={"pk": {"S": "s-1"}})
    (shard,) = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    (remove,) = [
        r
        for r in streams.get_records(ShardIterator=iterator)["Records"]
        if r["eventName"] == "REMOVE"
    ]
    assert "OldImage" not in remove["dynamodb"]
    return to_lambda_record(remove, arn)


def test_a_keys_only_remove_raises_the_watched_metric(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    response = process_batch(event(keys_only_remove()), FakeContext(), sandbox.cleaner())

    assert response == {"batchItemFailures": []}  # skipped, never retried: only the alarm tells
    metrics = emitted(capsys.readouterr().out)
    assert metrics[(contract.METRIC_RECORDS_SKIPPED, contract.CAUSE_NO_OLD_IMAGE)] == 1
    assert contract.CAUSE_NO_OLD_IMAGE in LOST_CLEANUP_CAUSES


def test_a_remove_naming_nothing_to_clean_raises_the_watched_metric(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    sandbox.ddb.put_item(TableName="sessions", Item={"pk": {"S": "bare"}, "x": {"N": "1"}})
    sandbox.delete("bare")

    process_batch(event(*sandbox.removes()), FakeContext(), sandbox.cleaner())

    metrics = emitted(capsys.readouterr().out)
    assert metrics[(contract.METRIC_RECORDS_SKIPPED, contract.CAUSE_MISSING_ATTRIBUTES)] == 1
    assert contract.CAUSE_MISSING_ATTRIBUTES in LOST_CLEANUP_CAUSES


def test_a_refused_prefix_raises_the_watched_metric(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    session = sandbox.create_session("s-1", prefix="elsewhere/s-1/")
    sandbox.delete(session.session_id)

    process_batch(event(*sandbox.removes()), FakeContext(), sandbox.cleaner())

    metrics = emitted(capsys.readouterr().out)
    assert metrics[(contract.METRIC_PREFIXES_REFUSED, None)] == 1
    assert sandbox.keys_under("elsewhere/s-1/") == session.keys  # never deleted
