"""The scratch prefix is derived from the whole key (issue 20): on a table with a sort key the
prefix holds the partition as well as the session id, the scratch step deletes only the prefix
it derives from the record's ``Keys`` and the image's incarnation, and a legacy item's prefix in
the old layout (no partition) is left to the lifecycle rule and counted, never deleted.

Real records from a moto table keyed by ``pk`` (partition: a user) and ``sk`` (sort: the session
id), written by ``SessionStore``; real ``ListObjectsV2``/``DeleteObjects`` against moto's S3. A
forged record is a real one whose old image was edited after DynamoDB wrote it (as a writer of
the table could make the image say anything).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from datetime import timedelta
from typing import Any

import pytest
from runtime_support import BUCKET, SESSION, FakeContext, event, to_lambda_record
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, build_clients, process_batch
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.store import Session, SessionStore

TABLE = "user-sessions"
HOUR = timedelta(hours=1)
CONFIG = RuntimeConfig(
    table_name=TABLE, partition_key="pk", sort_key="sk", scratch_bucket=BUCKET, max_workers=2
)


class SortKeyTable:
    def __init__(self, config: RuntimeConfig = CONFIG) -> None:
        self.config = config
        self.ddb = SESSION.client("dynamodb")
        self.s3 = SESSION.client("s3")
        self.stream_arn = self.ddb.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )["TableDescription"]["LatestStreamArn"]
        self.s3.create_bucket(Bucket=BUCKET)
        self.store = SessionStore(dynamodb_client=self.ddb, config=config)

    def session_with_objects(self, user: str, session_id: str) -> Session:
        s = self.store.create(session_id, partition=user, ttl=HOUR)
        assert s.scratch_prefix is not None
        self.s3.put_object(Bucket=BUCKET, Key=f"{s.scratch_prefix}notes.txt", Body=b"x")
        return s

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

    def clean(self, *records: dict[str, Any]) -> dict[str, Any]:
        cleaner = SessionCleaner(
            self.config, build_clients(self.config, SESSION), MetricsRecorder("SessionExpiry")
        )
        return process_batch(event(*records), FakeContext(), cleaner)


@pytest.fixture
def table(aws: None) -> SortKeyTable:
    return SortKeyTable()


def _lines(logs: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.session for r in logs.records if hasattr(r, "session")]


def _metrics(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    totals: dict[str, Any] = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("{"):
            document = json.loads(line)
            document.pop("_aws", None)
            totals.update(document)
    return totals


def test_the_prefix_names_the_partition_and_the_session(table: SortKeyTable) -> None:
    s = table.store.create("s-1", partition="u-1", ttl=HOUR)
    assert s.incarnation is not None
    assert s.scratch_prefix == f"sessions/u-1/s-1/{s.incarnation}/"


def test_tenant_scoped_scratch_puts_the_tenant_before_the_whole_key(aws: None) -> None:
    config = dataclasses.replace(CONFIG, tenant_scoped_scratch=True)
    s = SortKeyTable(config).store.create("s-1", partition="u-1", tenant_id="t-1", ttl=HOUR)
    assert s.scratch_prefix == f"sessions/t-1/u-1/s-1/{s.incarnation}/"


def test_fails_a_partition_that_cannot_be_a_prefix_segment(table: SortKeyTable) -> None:
    with pytest.raises(ValueError, match=r"partition 'user 7': expected 1-255 characters"):
        table.store.create("s-1", partition="user 7", ttl=HOUR)
    assert table.ddb.scan(TableName=TABLE)["Items"] == []


def test_ending_a_session_deletes_its_own_prefix_and_not_the_same_id_in_another_partition(
    table: SortKeyTable,
) -> None:
    mine = table.session_with_objects("u-1", "s-1")
    theirs = table.session_with_objects("u-2", "s-1")
    assert table.store.end("s-1", partition="u-1")

    assert table.clean(*table.removes()) == {"batchItemFailures": []}

    assert mine.scratch_prefix and table.keys_under(mine.scratch_prefix) == []
    assert theirs.scratch_prefix
    assert table.keys_under(theirs.scratch_prefix) == [f"{theirs.scratch_prefix}notes.txt"]


@pytest.mark.parametrize("keep_own_incarnation", [False, True], ids=["theirs", "own"])
def test_fails_an_image_naming_another_partitions_prefix(
    table: SortKeyTable,
    session_logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    keep_own_incarnation: bool,
) -> None:
    # u-1's image rewritten to name u-2's live prefix (and, or not, u-2's incarnation).
    mine = table.session_with_objects("u-1", "s-1")
    theirs = table.session_with_objects("u-2", "s-1")
    assert table.store.end("s-1", partition="u-1")
    (record,) = table.removes()
    forged = copy.deepcopy(record)
    image = forged["dynamodb"]["OldImage"]
    image["scratchPrefix"] = {"S": theirs.scratch_prefix}
    if not keep_own_incarnation:
        image["incarnation"] = {"S": theirs.incarnation}

    assert table.clean(forged) == {"batchItemFailures": []}

    assert theirs.scratch_prefix
    assert table.keys_under(theirs.scratch_prefix) == [f"{theirs.scratch_prefix}notes.txt"]
    assert mine.scratch_prefix  # refused as a whole: nothing guessed or deleted
    assert table.keys_under(mine.scratch_prefix) == [f"{mine.scratch_prefix}notes.txt"]
    (line,) = _lines(session_logs)
    assert line["steps"] == {"DeleteScratch": "refused"}
    assert "not the session's own prefix" in line["refusal"]
    expected = (
        f"sessions/u-1/s-1/{theirs.incarnation if not keep_own_incarnation else mine.incarnation}/"
    )
    assert repr(expected) in line["refusal"]
    assert _metrics(capsys)["ScratchPrefixesRefused"] == 1  # alarmed


def test_a_legacy_items_old_layout_prefix_is_left_to_the_lifecycle_rule_and_counted(
    table: SortKeyTable,
    session_logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Written before the prefix named the partition (and before items had an incarnation).
    legacy = "sessions/s-1/0f3a9c/"
    key = {"pk": {"S": "u-1"}, "sk": {"S": "s-1"}}
    table.ddb.put_item(
        TableName=TABLE, Item={**key, "expiresAt": {"N": "1"}, "scratchPrefix": {"S": legacy}}
    )
    table.s3.put_object(Bucket=BUCKET, Key=f"{legacy}notes.txt", Body=b"x")
    table.ddb.delete_item(TableName=TABLE, Key=key)

    assert table.clean(*table.removes()) == {"batchItemFailures": []}

    assert table.keys_under(legacy) == [f"{legacy}notes.txt"]  # never deleted by the cleanup
    (line,) = _lines(session_logs)
    assert line["outcome"] == "cleaned"
    assert line["steps"] == {"DeleteScratch": "legacy-layout"}
    assert line["scratchRefusal"] == "Legacy"
    assert "ScratchPrefixesRefused" not in _metrics(capsys)  # counted in the log, not alarmed


def test_fails_a_legacy_image_naming_a_prefix_that_is_not_its_old_layout(
    table: SortKeyTable, session_logs: pytest.LogCaptureFixture
) -> None:
    key = {"pk": {"S": "u-1"}, "sk": {"S": "s-1"}}
    table.ddb.put_item(
        TableName=TABLE,
        Item={**key, "expiresAt": {"N": "1"}, "scratchPrefix": {"S": "sessions/s-2/0f3a9c/"}},
    )
    table.ddb.delete_item(TableName=TABLE, Key=key)
    assert table.clean(*table.removes()) == {"batchItemFailures": []}
    (line,) = _lines(session_logs)
    assert line["steps"] == {"DeleteScratch": "refused"}


def test_fails_an_image_whose_incarnation_is_not_its_prefixs(
    table: SortKeyTable, session_logs: pytest.LogCaptureFixture
) -> None:
    mine = table.session_with_objects("u-1", "s-1")
    assert table.store.end("s-1", partition="u-1")
    (record,) = table.removes()
    forged = copy.deepcopy(record)
    forged["dynamodb"]["OldImage"]["incarnation"] = {"S": "another0incarnation"}

    assert table.clean(forged) == {"batchItemFailures": []}

    assert mine.scratch_prefix
    assert table.keys_under(mine.scratch_prefix) == [f"{mine.scratch_prefix}notes.txt"]
    (line,) = _lines(session_logs)
    assert line["steps"] == {"DeleteScratch": "refused"}
