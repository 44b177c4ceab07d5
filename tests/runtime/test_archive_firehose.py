"""Archive at scale (issue 24): the Firehose mode writes what the per-object mode writes, under the
same partitions, readable by the same table; only the failed records fail the gate.

Against moto with real boto3 calls. moto's Firehose delivers each call at once and ignores
dynamic partitioning and compression; the emulator's
:mod:`cdk_session_expiry.testing.models._moto_firehose`
adds them (the partition query run by jq, as Firehose runs it). moto never fails a record of a
``PutRecordBatch`` (``FailedPutCount`` is always 0): the partial failure is stubbed, with the
exact wire answer Firehose gives.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runtime_faults import answer
from runtime_support import SESSION, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, process_batch
from session_expiry_runtime.sinks.archive_delivery import FirehoseBatcher, record_failures

from cdk_session_expiry.archiving import archive_delivery as construct_delivery
from cdk_session_expiry.archiving import archive_query as catalog
from cdk_session_expiry.testing import athena as local_athena
from cdk_session_expiry.testing.models import _moto_firehose

OBJECT_BUCKET = "archive-objects"
FIREHOSE_BUCKET = "archive-firehose"
STREAM = "session-archive"
PREFIX = "archive/"


@pytest.fixture
def firehose_partitions() -> Iterator[None]:
    _moto_firehose.install()
    yield
    _moto_firehose.uninstall()


def _create_stream(bucket: str) -> None:
    """The stream as the construct defines it: its prefix, error prefix, query, compression."""
    SESSION.client("firehose").create_delivery_stream(
        DeliveryStreamName=STREAM,
        DeliveryStreamType="DirectPut",
        ExtendedS3DestinationConfiguration={
            "RoleARN": "arn:aws:iam::123456789012:role/archive-delivery",
            "BucketARN": f"arn:aws:s3:::{bucket}",
            "Prefix": construct_delivery.delivery_prefix(PREFIX),
            "ErrorOutputPrefix": construct_delivery.error_prefix(PREFIX),
            "CompressionFormat": "GZIP",
            "DynamicPartitioningConfiguration": {"Enabled": True},
            "ProcessingConfiguration": {
                "Enabled": True,
                "Processors": [
                    {
                        "Type": "MetadataExtraction",
                        "Parameters": [
                            {
                                "ParameterName": "MetadataExtractionQuery",
                                "ParameterValue": construct_delivery.PARTITION_QUERY,
                            },
                            {"ParameterName": "JsonParsingEngine", "ParameterValue": "JQ-1.6"},
                        ],
                    }
                ],
            },
        },
    )


def _cleaner(sandbox: Sandbox, bucket: str, *, firehose: bool) -> SessionCleaner:
    config = dataclasses.replace(
        sandbox.config,
        archive_bucket=bucket,
        archive_delivery_stream=STREAM if firehose else None,
    )
    return sandbox.cleaner(config)


def _objects(sandbox: Sandbox, bucket: str) -> dict[str, bytes]:
    s3 = sandbox.s3
    return {
        o["Key"]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for o in page.get("Contents", [])
    }


def _lines(objects: dict[str, bytes]) -> dict[str, list[bytes]]:
    """Each object's lines (gunzipped where its name says so), by key."""
    return {
        key: (gzip.decompress(body) if key.endswith(".gz") else body).splitlines(keepends=True)
        for key, body in objects.items()
    }


def _sessions(sandbox: Sandbox, count: int) -> list[dict[str, Any]]:
    for i in range(count):
        sandbox.create_session(f"s-{i}", tenant=None if i % 3 == 0 else f"tenant-{i % 2}")
    sandbox.read_stream()
    for i in range(count):
        sandbox.delete(f"s-{i}")
    return sandbox.removes(ttl_deletes={f"s-{i}" for i in range(0, count, 2)})


def _run(cleaner: SessionCleaner, records: list[dict[str, Any]]) -> list[str]:
    response = process_batch(event(*records), FakeContext(), cleaner)
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def test_firehose_mode_writes_the_per_object_modes_lines_under_the_same_partitions(
    sandbox: Sandbox, firehose_partitions: None, tmp_path: Path
) -> None:
    for bucket in (OBJECT_BUCKET, FIREHOSE_BUCKET):
        sandbox.s3.create_bucket(Bucket=bucket)
    _create_stream(FIREHOSE_BUCKET)
    records = _sessions(sandbox, 9)
    calls: list[str] = []
    firehose_cleaner = _cleaner(sandbox, FIREHOSE_BUCKET, firehose=True)
    firehose_cleaner.clients.firehose.meta.events.register(
        "before-call.firehose", lambda model, **_: calls.append(model.name)
    )

    assert _run(_cleaner(sandbox, OBJECT_BUCKET, firehose=False), records) == []
    assert _run(firehose_cleaner, records) == []

    per_object = _lines(_objects(sandbox, OBJECT_BUCKET))
    delivered = _lines(_objects(sandbox, FIREHOSE_BUCKET))
    # The same bytes, record for record: one line per cleaned session.
    assert sorted(x for ls in delivered.values() for x in ls) == sorted(
        x for ls in per_object.values() for x in ls
    )
    assert len(per_object) == 9 and all(len(ls) == 1 for ls in per_object.values())
    # Under the same two partition levels as the per-object key of each record.
    partition_of = {
        json.loads(ls[0])["sequence_number"]: "/".join(key.split("/")[:3]) + "/"
        for key, ls in per_object.items()
    }
    for key, ls in delivered.items():
        assert key.endswith(".gz")
        for line in ls:
            assert key.startswith(partition_of[json.loads(line)["sequence_number"]])
    assert calls and set(calls) == {"PutRecordBatch"} and len(calls) <= len(records)

    # Both archives answer the named queries alike (DuckDB over the same keys and format).
    answers = []
    for bucket in (OBJECT_BUCKET, FIREHOSE_BUCKET):
        root = tmp_path / bucket
        local_athena.download(sandbox.s3, bucket, PREFIX, root)
        con = local_athena.connect(root, PREFIX, tenant_partition=False)
        sql = {
            q.name: q.sql
            for q in catalog.named_queries(local_athena.QUOTED_TABLE, tenant_partition=False)
        }
        answers.append(
            local_athena.run(
                con, sql[catalog.QUERY_SESSIONS_PER_TENANT_PER_DAY], ["2000-01-01", "2999-12-31"]
            )
        )
    assert answers[0] == answers[1]
    assert sum(row[3] for row in answers[0]) == 9
    expected: dict[tuple[str | None, str], int] = {}
    for i in range(9):
        tenant = None if i % 3 == 0 else f"tenant-{i % 2}"
        reason = "ttl" if i % 2 == 0 else "explicit"
        expected[(tenant, reason)] = expected.get((tenant, reason), 0) + 1
    assert {(row[1], row[2]): row[3] for row in answers[0]} == expected


def _failing(data_marker: str) -> Any:
    """A PutRecordBatch answer failing exactly the records whose line contains ``data_marker``."""

    def responder(request: Any) -> tuple[int, dict[str, str], bytes]:
        body = json.loads(request.body)
        responses = []
        for record in body["Records"]:
            line = base64.b64decode(record["Data"]).decode()
            if data_marker in line:
                responses.append(
                    {"ErrorCode": "ServiceUnavailableException", "ErrorMessage": "Slow down."}
                )
            else:
                responses.append({"RecordId": "accepted-" + str(len(responses))})
        failed = sum(1 for r in responses if "ErrorCode" in r)
        answer_body = {"FailedPutCount": failed, "Encrypted": False, "RequestResponses": responses}
        return 200, {"content-type": "application/x-amz-json-1.1"}, json.dumps(answer_body).encode()

    return responder


def test_only_the_records_firehose_refused_fail_and_nothing_else_runs_for_them(
    sandbox: Sandbox, firehose_partitions: None, session_logs: pytest.LogCaptureFixture
) -> None:
    sandbox.s3.create_bucket(Bucket=FIREHOSE_BUCKET)
    _create_stream(FIREHOSE_BUCKET)
    victim = sandbox.create_session("s-refused")
    others = [sandbox.create_session(f"s-ok-{i}") for i in range(3)]
    sandbox.read_stream()
    for session_id in ("s-refused", "s-ok-0", "s-ok-1", "s-ok-2"):
        sandbox.delete(session_id)
    records = sandbox.removes()
    cleaner = _cleaner(sandbox, FIREHOSE_BUCKET, firehose=True)
    # Stub: moto never fails a record of a PutRecordBatch; Firehose does (FailedPutCount).
    answer(cleaner.clients.firehose, "PutRecordBatch", _failing('"session_id":"s-refused"'))

    failed = _run(cleaner, records)

    (victim_record,) = [r for r in records if r["dynamodb"]["Keys"]["pk"]["S"] == "s-refused"]
    assert failed == [victim_record["dynamodb"]["SequenceNumber"]]
    assert sandbox.is_intact(victim)  # the gate held: no other step ran for it
    assert all(sandbox.is_clean(s) for s in others)
    (line,) = [
        r.session
        for r in session_logs.records
        if hasattr(r, "session") and r.session.get("outcome") == "failed"
    ]
    assert line["failedActions"] == ["Archive"]
    assert "ServiceUnavailableException" in line["errors"]["Archive"]


def test_a_call_that_fails_fails_every_record_it_carried(
    sandbox: Sandbox, firehose_partitions: None
) -> None:
    sandbox.s3.create_bucket(Bucket=FIREHOSE_BUCKET)  # no stream: ResourceNotFoundException
    sessions = [sandbox.create_session(f"s-{i}") for i in range(3)]
    sandbox.read_stream()
    for i in range(3):
        sandbox.delete(f"s-{i}")
    records = sandbox.removes()

    failed = _run(_cleaner(sandbox, FIREHOSE_BUCKET, firehose=True), records)

    assert sorted(failed) == sorted(r["dynamodb"]["SequenceNumber"] for r in records)
    assert all(sandbox.is_intact(s) for s in sessions)
    assert _objects(sandbox, FIREHOSE_BUCKET) == {}


# --- the batcher: natural batching within PutRecordBatch's limits -------------------------------
class _HeldFirehose:
    """A stand-in client whose first call waits until ``pending`` lines queue behind it, so the
    batches formed are deterministic (the batcher's logic, not AWS, is under test)."""

    def __init__(self, batcher_of: list[FirehoseBatcher], pending: int) -> None:
        self.batches: list[list[bytes]] = []
        self._first_done = False
        self._batcher_of = batcher_of
        self._pending = pending

    def put_record_batch(self, DeliveryStreamName: str, Records: list[dict[str, bytes]]) -> Any:
        if not self._first_done:
            self._first_done = True
            batcher = self._batcher_of[0]
            # Until every other line queued (full calls' worth go out meanwhile).
            while len(batcher._pending) + sum(map(len, self.batches)) < self._pending:
                threading.Event().wait(0.001)
            self.batches.insert(0, [r["Data"] for r in Records])
            return _accepted(len(Records))
        self.batches.append([r["Data"] for r in Records])
        return _accepted(len(Records))


def _accepted(count: int) -> dict[str, Any]:
    return {"FailedPutCount": 0, "RequestResponses": [{"RecordId": str(i)} for i in range(count)]}


@pytest.mark.parametrize(("lines", "max_records"), [(12, 500), (1201, 500), (40, 7)])
def test_lines_queued_during_a_call_share_the_next_calls_within_the_limits(
    lines: int, max_records: int
) -> None:
    holder: list[FirehoseBatcher] = []
    client = _HeldFirehose(holder, pending=lines - 1)
    batcher = FirehoseBatcher(client, STREAM, max_records=max_records)
    holder.append(batcher)
    threads = [
        threading.Thread(target=batcher.put, args=(f"line {i}\n".encode(),)) for i in range(lines)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(x for b in client.batches for x in b) == sorted(
        f"line {i}\n".encode() for i in range(lines)
    )
    assert len(client.batches[0]) == 1  # the first line went out at once
    assert all(len(b) <= max_records for b in client.batches)
    rest = lines - 1
    # Then calls as full as the limit allows: at most one short call besides the first.
    assert len(client.batches) <= 2 + rest // max_records


def test_a_call_stays_under_four_mebibytes() -> None:
    holder: list[FirehoseBatcher] = []
    client = _HeldFirehose(holder, pending=9)
    batcher = FirehoseBatcher(client, STREAM)
    holder.append(batcher)
    big = b"x" * (900 * 1024) + b"\n"
    threads = [threading.Thread(target=batcher.put, args=(big,)) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(sum(map(len, b)) <= 4 * 1024 * 1024 for b in client.batches)
    assert sum(map(len, client.batches)) == 10


def test_fails_on_a_record_longer_than_firehose_takes() -> None:
    batcher = FirehoseBatcher(object(), STREAM)
    with pytest.raises(ValueError, match="1024000"):
        batcher.put(b"x" * (1_000 * 1024 + 1))


def test_an_answer_is_read_record_by_record() -> None:
    answer_ok_bad = {
        "FailedPutCount": 1,
        "RequestResponses": [
            {"RecordId": "a"},
            {"ErrorCode": "InternalFailure", "ErrorMessage": "x"},
        ],
    }
    ok, bad = record_failures(answer_ok_bad, 2)
    assert ok is None and bad is not None and "InternalFailure" in str(bad)
    # An answer naming fewer records than were sent: the unnamed ones fail.
    assert [f is None for f in record_failures({"RequestResponses": [{"RecordId": "a"}]}, 2)] == [
        True,
        False,
    ]
    # FailedPutCount above what the responses show: no record is trusted.
    assert all(
        f is not None
        for f in record_failures(
            {"FailedPutCount": 2, "RequestResponses": [{"RecordId": "a"}, {"RecordId": "b"}]}, 2
        )
    )
