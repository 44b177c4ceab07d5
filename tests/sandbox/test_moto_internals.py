"""The moto internals the local pipeline patches or reads are still there (moto is pinned).

If one of these fails after a moto upgrade, update
cdk_session_expiry/testing/models/_moto_internals.py
for the new release (or keep moto inside the pinned range).
"""

from __future__ import annotations

import io
import zipfile

import moto
import pytest
from moto.awslambda.models import LambdaBackend

from cdk_session_expiry.testing import LocalEmulator, MotoInternalsChanged, check_moto_internals
from cdk_session_expiry.testing.models import _moto_internals


def test_moto_is_inside_the_pinned_range() -> None:
    major, minor, patch = (int(p) for p in moto.__version__.split(".")[:3])
    assert (5, 2, 5) <= (major, minor, patch) < (5, 3, 0), moto.__version__


def test_every_patched_or_read_internal_exists() -> None:
    check_moto_internals()


def test_fails_loudly_when_send_dynamodb_items_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(LambdaBackend, "send_dynamodb_items")
    with pytest.raises(MotoInternalsChanged, match=r"LambdaBackend\.send_dynamodb_items"):
        _moto_internals.disable_stream_delivery()
    with pytest.raises(MotoInternalsChanged):
        LocalEmulator().start()


def test_fails_loudly_when_send_dynamodb_items_changes_signature(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(LambdaBackend, "send_dynamodb_items", lambda self, records: None)
    with pytest.raises(MotoInternalsChanged, match="parameters"):
        check_moto_internals()


def test_delivery_is_off_only_while_an_emulator_runs() -> None:
    original = LambdaBackend.send_dynamodb_items
    with LocalEmulator():
        assert _moto_internals.stream_delivery_disabled()
    assert LambdaBackend.send_dynamodb_items is original


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("index.py", "def handler(event, context):\n    return None\n")
    return buf.getvalue()


def test_stream_records_stay_readable_when_the_table_has_a_mapping(emulator: LocalEmulator) -> None:
    ddb, lam, iam = emulator.client("dynamodb"), emulator.client("lambda"), emulator.client("iam")
    stream_arn = ddb.create_table(
        TableName="with-mapping",
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]["LatestStreamArn"]
    role = iam.create_role(RoleName="r-with-mapping", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    lam.create_function(
        FunctionName="f-with-mapping",
        Runtime="python3.12",
        Role=role,
        Handler="index.handler",
        Code={"ZipFile": _zip()},
    )
    lam.create_event_source_mapping(
        EventSourceArn=stream_arn, FunctionName="f-with-mapping", StartingPosition="TRIM_HORIZON"
    )
    ddb.put_item(TableName="with-mapping", Item={"pk": {"S": "a"}})
    ddb.delete_item(TableName="with-mapping", Key={"pk": {"S": "a"}})
    streams = emulator.client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(
        StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    assert [r["eventName"] for r in records] == ["INSERT", "REMOVE"]


def test_ttl_identity_reaches_get_records(emulator: LocalEmulator) -> None:
    ddb = emulator.client("dynamodb")
    stream_arn = ddb.create_table(
        TableName="ttl-identity",
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]["LatestStreamArn"]
    ddb.put_item(TableName="ttl-identity", Item={"pk": {"S": "a"}, "ttl": {"N": "1"}})
    assert emulator.ttl_delete("ttl-identity", {"pk": {"S": "a"}}, ttl_attribute="ttl")
    streams = emulator.client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(
        StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    remove = streams.get_records(ShardIterator=iterator)["Records"][-1]
    assert remove["eventName"] == "REMOVE"
    assert remove["userIdentity"] == {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}


def test_open_connections_are_read_without_creating_them(emulator: LocalEmulator) -> None:
    emulator.open_connection("conn-1")
    assert "conn-1" in emulator.open_connection_ids()
    emulator.client("apigatewaymanagementapi").delete_connection(ConnectionId="conn-1")
    assert "conn-1" not in emulator.open_connection_ids()
    assert "never-opened" not in emulator.open_connection_ids()


def test_one_emulator_per_process_each_starting_empty(emulator: LocalEmulator) -> None:
    emulator.client("s3").create_bucket(Bucket="left-behind")
    with pytest.raises(RuntimeError, match="one emulator per process"):
        LocalEmulator().start()
    emulator.stop()
    try:
        with LocalEmulator() as fresh:
            assert fresh.client("s3").list_buckets()["Buckets"] == []
    finally:
        emulator.start()  # the module's fixture stops it again
