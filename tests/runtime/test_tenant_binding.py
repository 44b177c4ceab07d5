"""The scratch step's tenant segment: from the record's ``Keys`` when the tenant attribute is a
key attribute; the old image's word otherwise (what that trusts is in ``steps/scratch.py``).

Real records from a moto table keyed by ``tenantId`` (partition) and ``sessionId`` (sort),
real ``ListObjectsV2``/``DeleteObjects`` against moto's S3 (and, for the grant named for that
composite key, ``ListGrants``/``RetireGrant`` against moto's KMS). DynamoDB's own records
always carry the key attributes' values in the old image too; a record whose image names
another tenant is one that was altered after DynamoDB wrote it (e.g. an edited
failure-destination payload replayed by hand), so that record is built here by editing a real
one.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from datetime import timedelta
from typing import Any

import pytest
from ownership_support import OWNERSHIP_TABLE, create_ownership_table
from runtime_support import (
    APP_ROLE,
    BUCKET,
    CLEANUP_ROLE,
    SESSION,
    FakeContext,
    event,
    to_lambda_record,
)
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, build_clients, process_batch
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.store import SessionStore

TABLE = "tenant-sessions"
CONFIG = RuntimeConfig(
    table_name=TABLE,
    partition_key="tenantId",
    sort_key="sessionId",
    tenant_attribute="tenantId",
    tenant_scoped_scratch=True,
    scratch_bucket=BUCKET,
)
OWN = "sessions/t1/s-1/inc1/"
OTHER_TENANT = "sessions/t2/s-1/inc2/"  # a live session with the same id in tenant t2


class TenantTable:
    def __init__(self) -> None:
        self.ddb = SESSION.client("dynamodb")
        self.s3 = SESSION.client("s3")
        self.stream_arn = self.ddb.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "tenantId", "KeyType": "HASH"},
                {"AttributeName": "sessionId", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "tenantId", "AttributeType": "S"},
                {"AttributeName": "sessionId", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )["TableDescription"]["LatestStreamArn"]
        self.s3.create_bucket(Bucket=BUCKET)
        for prefix in (OWN, OTHER_TENANT):
            self.s3.put_object(Bucket=BUCKET, Key=f"{prefix}notes.txt", Body=b"x")

    def ended_session_record(self) -> dict[str, Any]:
        key = {"tenantId": {"S": "t1"}, "sessionId": {"S": "s-1"}}
        item = {**key, "expiresAt": {"N": "1"}, "scratchPrefix": {"S": OWN}}
        self.ddb.put_item(TableName=TABLE, Item=item)
        self.ddb.delete_item(TableName=TABLE, Key=key)
        (remove,) = self.removes()
        return remove

    def removes(self) -> list[dict[str, Any]]:
        streams = SESSION.client("dynamodbstreams")
        (shard,) = streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]["Shards"]
        iterator = streams.get_shard_iterator(
            StreamArn=self.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records = streams.get_records(ShardIterator=iterator)["Records"]
        return [to_lambda_record(r, self.stream_arn) for r in records if r["eventName"] == "REMOVE"]

    def keys_under(self, prefix: str) -> list[str]:
        answer = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
        return [o["Key"] for o in answer.get("Contents", [])]


@pytest.fixture
def table(aws: None) -> TenantTable:
    return TenantTable()


def _cleaner() -> SessionCleaner:
    return SessionCleaner(CONFIG, build_clients(CONFIG, SESSION), MetricsRecorder("SessionExpiry"))


def test_the_tenant_comes_from_the_record_keys(table: TenantTable) -> None:
    record = table.ended_session_record()

    assert process_batch(event(record), FakeContext(), _cleaner()) == {"batchItemFailures": []}

    assert table.keys_under(OWN) == []
    assert table.keys_under(OTHER_TENANT) == [f"{OTHER_TENANT}notes.txt"]


def test_fails_a_record_whose_image_tenant_is_not_its_key_tenant(
    table: TenantTable, session_logs: pytest.LogCaptureFixture
) -> None:
    forged = copy.deepcopy(table.ended_session_record())
    image = forged["dynamodb"]["OldImage"]
    image["tenantId"] = {"S": "t2"}  # the image now claims tenant t2 and t2's live prefix
    image["scratchPrefix"] = {"S": OTHER_TENANT}

    assert process_batch(event(forged), FakeContext(), _cleaner()) == {"batchItemFailures": []}

    assert table.keys_under(OTHER_TENANT) == [f"{OTHER_TENANT}notes.txt"]  # never deleted
    assert table.keys_under(OWN) == [f"{OWN}notes.txt"]  # refused as a whole, not guessed
    (line,) = [r.session for r in session_logs.records if hasattr(r, "session")]
    assert line["steps"] == {"DeleteScratch": "refused"}
    assert "'t2' in the old image is not the tenant 't1'" in line["refusal"]
    assert line["tenant"] == "t1"


def test_the_store_keeps_the_tenant_in_the_partition_and_the_cleanup_follows_the_keys(
    table: TenantTable,
) -> None:
    # The schema that binds the tenant: partition = tenant, sort key = session id. The same
    # session id lives in two tenants; ending one deletes only its own objects.
    store = SessionStore(dynamodb_client=table.ddb, config=CONFIG)
    mine = store.create("s-9", partition="t1", ttl=timedelta(hours=1))
    theirs = store.create("s-9", partition="t2", tenant_id="t2", ttl=timedelta(hours=1))
    assert (mine.tenant_id, theirs.tenant_id) == ("t1", "t2")
    assert mine.scratch_prefix is not None and mine.scratch_prefix.startswith("sessions/t1/s-9/")
    assert theirs.scratch_prefix is not None
    for prefix in (mine.scratch_prefix, theirs.scratch_prefix):
        table.s3.put_object(Bucket=BUCKET, Key=f"{prefix}a.txt", Body=b"x")

    assert store.end("s-9", partition="t1")
    assert process_batch(event(*table.removes()), FakeContext(), _cleaner()) == {
        "batchItemFailures": []
    }

    assert table.keys_under(mine.scratch_prefix) == []
    assert table.keys_under(theirs.scratch_prefix) == [f"{theirs.scratch_prefix}a.txt"]


def test_fails_a_tenant_id_that_is_not_the_partition(table: TenantTable) -> None:
    store = SessionStore(dynamodb_client=table.ddb, config=CONFIG)
    with pytest.raises(ValueError, match="the tenant is the partition 't1'"):
        store.create("s-1", partition="t1", tenant_id="t2", ttl=timedelta(hours=1))


@pytest.mark.parametrize("partition", [None, ""])
def test_fails_a_call_without_the_partition_naming_the_argument(
    table: TenantTable, partition: str | None
) -> None:
    # A newcomer's first call on a table with a sort key forgets partition=: the message names
    # the argument, the key attribute it is the value of, and a call that works.
    store = SessionStore(dynamodb_client=table.ddb, config=CONFIG)
    with pytest.raises(ValueError) as raised:
        store.create("s-1", partition=partition, ttl=timedelta(hours=1))
    assert str(raised.value) == (
        f"partition {partition!r}: the table has sort key 'sessionId'; expected a non-empty "
        "value of its partition key 'tenantId' (e.g. a user or tenant id) as partition=, e.g. "
        "store.create(session_id, partition='tenant-1')"
    )


def test_a_grant_named_for_a_composite_key_is_retired_with_it(table: TenantTable) -> None:
    # The grant name holds both key attributes; the record's Keys must match both.
    kms = SESSION.client("kms")
    key_arn = kms.create_key(Description="grants")["KeyMetadata"]["Arn"]
    create_ownership_table(table.ddb)
    config = dataclasses.replace(
        CONFIG,
        grant_key_arn=key_arn,
        retiring_principal=CLEANUP_ROLE,
        ownership_table_name=OWNERSHIP_TABLE,
    )
    store = SessionStore(dynamodb_client=table.ddb, kms_client=kms, config=config)
    store.create("s-9", partition="t1", ttl=timedelta(hours=1))
    store.create("s-9", partition="t2", ttl=timedelta(hours=1))
    mine = store.create_grant(
        "s-9", partition="t1", grantee_principal=APP_ROLE, operations=["Decrypt"]
    )
    theirs = store.create_grant(
        "s-9", partition="t2", grantee_principal=APP_ROLE, operations=["Decrypt"]
    )
    assert store.end("s-9", partition="t1")
    cleaner = SessionCleaner(
        config, build_clients(config, SESSION), MetricsRecorder("SessionExpiry")
    )

    assert process_batch(event(*table.removes()), FakeContext(), cleaner) == {
        "batchItemFailures": []
    }

    left = {g["GrantId"] for g in kms.list_grants(KeyId=key_arn)["Grants"]}
    assert left == {theirs.grant_id} and mine.grant_id not in left


def test_route_7_the_archive_files_a_record_under_its_key_tenant_never_the_image_one(
    table: TenantTable,
) -> None:
    """Issue 35, route 7: with the tenant as the partition key, the archive's ``tenant=``
    partition (and its ``tenant`` column) comes from the record's ``Keys``; a record whose image
    names tenant t2 (altered after DynamoDB wrote it: a Kinesis writer, an edited failure) is
    filed under t1, its own, never in t2's partition."""
    forged = copy.deepcopy(table.ended_session_record())
    forged["dynamodb"]["OldImage"]["tenantId"] = {"S": "t2"}
    forged["dynamodb"]["OldImage"].pop("scratchPrefix")
    config = dataclasses.replace(CONFIG, archive_bucket=BUCKET, scratch_bucket=None)
    cleaner = SessionCleaner(config, build_clients(config, SESSION), MetricsRecorder("S"))

    assert process_batch(event(forged), FakeContext(), cleaner) == {"batchItemFailures": []}

    (key,) = table.keys_under("archive/")
    assert "/tenant=t1/" in key
    body = json.loads(table.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    assert (body["tenant"], body["partition_tenant"]) == ("t1", "t1")
