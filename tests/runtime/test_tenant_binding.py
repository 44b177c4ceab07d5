"""The scratch step's tenant segment: from the record's ``Keys`` when the tenant attribute is a
key attribute; the old image's word otherwise (what that trusts is in ``steps/scratch.py``).

Real records from a moto table keyed by ``tenantId`` (partition) and ``sessionId`` (sort),
real ``ListObjectsV2``/``DeleteObjects`` against moto's S3. DynamoDB's own records always carry
the key attributes' values in the old image too; a record whose image names another tenant is
one that was altered after DynamoDB wrote it (e.g. an edited failure-destination payload
replayed by hand), so that record is built here by editing a real one.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from runtime_support import BUCKET, SESSION, FakeContext, event, to_lambda_record
from session_expiry_runtime.cleaner import SessionCleaner, build_clients, process_batch
from session_expiry_runtime.config import RuntimeConfig
from session_expiry_runtime.metrics import MetricsRecorder

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
        streams = SESSION.client("dynamodbstreams")
        (shard,) = streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]["Shards"]
        iterator = streams.get_shard_iterator(
            StreamArn=self.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records = streams.get_records(ShardIterator=iterator)["Records"]
        (remove,) = [r for r in records if r["eventName"] == "REMOVE"]
        return to_lambda_record(remove, self.stream_arn)

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
