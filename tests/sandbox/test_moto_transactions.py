"""Item-level backups of moto's TransactWriteItems
(cdk_session_expiry.testing.models._moto_transactions):
the same state as moto's whole-table backup, items and stream records, without copying tables."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb import models as dynamodb_models

from cdk_session_expiry.testing.models import _moto_transactions


@pytest.fixture
def ddb() -> Iterator[Any]:
    _moto_transactions.install()
    try:
        with mock_aws():
            client = boto3.client("dynamodb", region_name="us-east-1")
            client.create_table(
                TableName="t",
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                BillingMode="PAY_PER_REQUEST",
                StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
            )
            yield client
    finally:
        _moto_transactions.uninstall()


def _stream_records(client: Any) -> list[str]:
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    arn = client.describe_table(TableName="t")["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")[
        "ShardIterator"
    ]
    return [r["eventName"] for r in streams.get_records(ShardIterator=it)["Records"]]


def _put(pk: str, condition: str | None = None) -> dict[str, Any]:
    action: dict[str, Any] = {"TableName": "t", "Item": {"pk": {"S": pk}, "v": {"S": "new"}}}
    if condition:
        action["ConditionExpression"] = condition
    return {"Put": action}


def test_a_cancelled_transaction_leaves_items_and_stream_records_as_they_were(ddb: Any) -> None:
    ddb.put_item(TableName="t", Item={"pk": {"S": "a"}, "v": {"S": "old"}})
    before = _stream_records(ddb)
    with pytest.raises(ClientError) as raised:
        ddb.transact_write_items(
            TransactItems=[_put("a"), _put("b"), _put("c", "attribute_exists(pk)")]
        )
    reasons = [r["Code"] for r in raised.value.response["CancellationReasons"]]
    assert reasons == ["None", "None", "ConditionalCheckFailed"]
    assert ddb.get_item(TableName="t", Key={"pk": {"S": "a"}})["Item"]["v"] == {"S": "old"}
    assert "Item" not in ddb.get_item(TableName="t", Key={"pk": {"S": "b"}})
    assert _stream_records(ddb) == before == ["INSERT"]
    # moto's own copy module is back after the call.
    assert dynamodb_models.copy.deepcopy.__module__ == "copy"


def test_an_applied_transaction_writes_items_and_stream_records(ddb: Any) -> None:
    ddb.transact_write_items(TransactItems=[_put("a"), _put("b", "attribute_not_exists(pk)")])
    assert ddb.get_item(TableName="t", Key={"pk": {"S": "b"}})["Item"]["v"] == {"S": "new"}
    assert _stream_records(ddb) == ["INSERT", "INSERT"]


def test_no_table_is_deep_copied(ddb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.dynamodb.models.table import Table

    copied: list[str] = []
    original = Table.__deepcopy__ if hasattr(Table, "__deepcopy__") else None

    def spy(self: Table, memo: Any) -> Table:
        copied.append(self.name)
        return self

    monkeypatch.setattr(Table, "__deepcopy__", spy, raising=False)
    ddb.transact_write_items(TransactItems=[_put("a"), _put("b")])
    assert copied == []
    assert original is None or Table.__deepcopy__ is spy


def test_moto_still_has_the_shape_the_backups_rely_on() -> None:
    _moto_transactions.check()
