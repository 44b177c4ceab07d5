"""The Kinesis change source through the real handler (issue 23).

Records are real: the session table's changes (moto, real writes and deletes) read from its
DynamoDB stream, written as Kinesis Data Streams for DynamoDB change documents into a real moto
Kinesis stream (``PutRecord``) and read back (``GetRecords``), so every record has a real Kinesis
sequence number. moto 5.2.5 does not implement the table's Kinesis streaming destination
(``EnableKinesisStreamingDestination`` is unknown to it), so the test forwards the changes as
the destination would (``stream_records.to_kinesis_change``), with ``ApproximateCreationDateTime``
in milliseconds, the precision the construct sets.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from runtime_support import SESSION, TABLE, FakeContext, Sandbox
from session_expiry_runtime import handler as handler_module
from session_expiry_runtime.core.decode import DecodeError
from session_expiry_runtime.records import kinesis_records, stream_records

REGION = "us-east-1"
STREAM = "session-changes"
HOUR_MS = 3_600_000


class KinesisSource:
    """A moto Kinesis stream fed with the table's changes, read back as Lambda delivers it."""

    def __init__(self) -> None:
        self.kinesis = SESSION.client("kinesis")
        self.kinesis.create_stream(StreamName=STREAM, StreamModeDetails={"StreamMode": "ON_DEMAND"})
        description = self.kinesis.describe_stream(StreamName=STREAM)["StreamDescription"]
        self.arn = description["StreamARN"]

    def put(self, change: dict[str, Any], partition_key: str | None = None) -> None:
        self.kinesis.put_record(
            StreamName=STREAM,
            Data=json.dumps(change).encode("utf-8"),
            PartitionKey=partition_key or json.dumps(change["dynamodb"]["Keys"], sort_keys=True),
        )

    def batches(self) -> list[list[dict[str, Any]]]:
        """Every record of the stream as the Kinesis event source mapping delivers it: one
        batch per shard (a batch never mixes shards; moto numbers each shard's records from 1)."""
        batches: list[list[dict[str, Any]]] = []
        shards = self.kinesis.list_shards(StreamName=STREAM)["Shards"]
        for shard in shards:
            out: list[dict[str, Any]] = []
            batches.append(out)
            iterator = self.kinesis.get_shard_iterator(
                StreamName=STREAM, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            for record in self.kinesis.get_records(ShardIterator=iterator)["Records"]:
                out.append(
                    {
                        "eventSource": "aws:kinesis",
                        "eventName": "aws:kinesis:record",
                        "eventID": f"{shard['ShardId']}:{record['SequenceNumber']}",
                        "eventSourceARN": self.arn,
                        "awsRegion": REGION,
                        "kinesis": {
                            "kinesisSchemaVersion": "1.0",
                            "partitionKey": record["PartitionKey"],
                            "sequenceNumber": record["SequenceNumber"],
                            "data": base64.b64encode(record["Data"]).decode("ascii"),
                            "approximateArrivalTimestamp": record[
                                "ApproximateArrivalTimestamp"
                            ].timestamp(),
                        },
                    }
                )
        return [batch for batch in batches if batch]


def change(api_record: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return stream_records.to_kinesis_change(api_record, table_name=TABLE, region=REGION, **kwargs)


@pytest.fixture
def sandbox(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    box = Sandbox()
    for name, value in box.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(handler_module, "_cleaner", None)  # re-read the environment
    yield box


@pytest.fixture
def source(aws: None) -> KinesisSource:
    return KinesisSource()


def run(
    batches: list[list[dict[str, Any]]], caplog: pytest.LogCaptureFixture
) -> tuple[list[Any], list[Any]]:
    """Invoke the real handler once per batch; the responses and every log line."""
    caplog.set_level(logging.INFO, logger="session_expiry_runtime")
    caplog.clear()
    responses = [handler_module.handler({"Records": batch}, FakeContext()) for batch in batches]
    return responses, [r.session for r in caplog.records if hasattr(r, "session")]


def test_duplicated_and_reordered_records_clean_each_incarnation_once(
    sandbox: Sandbox, source: KinesisSource, caplog: pytest.LogCaptureFixture
) -> None:
    old = sandbox.create_session("s-1", expires_at=1)
    insert_old = sandbox.read_stream()
    sandbox.delete("s-1")
    (remove_old,) = sandbox.read_stream()
    new = sandbox.create_session("s-1")  # the same key's next incarnation
    insert_new = sandbox.read_stream()
    other = sandbox.create_session("s-2", expires_at=1)
    sandbox.delete("s-2")
    other_changes = sandbox.read_stream()
    # Kinesis order: the new incarnation's INSERT before the old one's REMOVE, the REMOVE twice,
    # s-2's changes duplicated and out of order.
    for record in [*insert_old, *insert_new, remove_old, remove_old]:
        source.put(change(record))
    for record in [*reversed(other_changes), *other_changes]:
        source.put(change(record))

    responses, lines = run(source.batches(), caplog)

    assert responses == [{"batchItemFailures": []}] * 2  # one batch per session's shard
    assert sandbox.is_clean(old) and sandbox.is_clean(other)
    assert sandbox.is_intact(new)  # nothing of the newer incarnation touched
    removes = [line for line in lines if line.get("eventName") == "REMOVE"]
    cleaned = [line for line in removes if line["outcome"] == "cleaned"]
    assert len(cleaned) == 2  # one REMOVE of each incarnation acted
    assert all(set(line["steps"].values()) == {"done"} for line in cleaned)
    assert [line["cause"] for line in removes if line["outcome"] == "skipped"] == [
        "DuplicateInBatch",
        "DuplicateInBatch",
    ]


def test_a_duplicate_in_a_later_batch_finds_the_session_already_cleaned(
    sandbox: Sandbox, source: KinesisSource, caplog: pytest.LogCaptureFixture
) -> None:
    session = sandbox.create_session("s-1", expires_at=1)
    sandbox.delete("s-1")
    (remove,) = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    source.put(change(remove))
    (batch,) = source.batches()
    first, _ = run([batch], caplog)
    assert sandbox.is_clean(session)

    responses, lines = run([batch], caplog)  # re-delivered (a retry, or a Kinesis duplicate)

    assert responses == first == [{"batchItemFailures": []}]
    (line,) = lines
    assert line["steps"]["DeleteConnection"] == "already-done"
    assert line["steps"]["RetireGrant"] == "already-done"


def test_partial_batch_response_names_kinesis_sequence_numbers(
    sandbox: Sandbox, source: KinesisSource, caplog: pytest.LogCaptureFixture
) -> None:
    good = sandbox.create_session("s-good", expires_at=1)
    sandbox.delete("s-good")
    sandbox.create_session("s-bad", expires_at=1, extra={"n": {"N": "1"}})
    sandbox.delete("s-bad")
    records = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    good_change, bad_change = (change(r) for r in records)
    bad_change["dynamodb"]["OldImage"]["n"] = {"N": "not a number"}  # fails to decode
    with pytest.raises(DecodeError):
        from session_expiry_runtime.core.decode import decode_image

        decode_image(bad_change["dynamodb"]["OldImage"])
    source.put(good_change, partition_key="one-shard")
    source.put(bad_change, partition_key="one-shard")
    (delivered,) = source.batches()

    (response,) = run([delivered], caplog)[0]

    bad_sequence = delivered[1]["kinesis"]["sequenceNumber"]
    assert response == {"batchItemFailures": [{"itemIdentifier": bad_sequence}]}
    assert sandbox.is_clean(good)


def test_a_record_older_than_a_dynamodb_streams_retention_is_still_cleaned(
    sandbox: Sandbox, source: KinesisSource, caplog: pytest.LogCaptureFixture
) -> None:
    """The cleanup was paused for 30 hours: a DynamoDB stream (24 hours) would have lost the
    REMOVE; the Kinesis stream (7 days by default) still delivers it, and it is cleaned."""
    session = sandbox.create_session("s-late", expires_at=1)
    sandbox.delete("s-late")
    (remove,) = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    removed_ms = int(remove["dynamodb"]["ApproximateCreationDateTime"].timestamp() * 1000)
    source.put(change(remove, created_at_ms=removed_ms - 30 * HOUR_MS))

    responses, lines = run(source.batches(), caplog)

    assert responses == [{"batchItemFailures": []}]
    assert sandbox.is_clean(session)
    (line,) = lines
    assert line["outcome"] == "cleaned"
    assert float(line["approximateCreationDateTime"]) == (removed_ms - 30 * HOUR_MS) / 1000


def test_undecodable_data_is_skipped_and_counted_not_retried_forever() -> None:
    record = {
        "eventSource": "aws:kinesis",
        "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/s",
        "kinesis": {"sequenceNumber": "4959", "data": base64.b64encode(b"not json").decode()},
    }
    shaped = kinesis_records.to_stream_record(record)
    assert shaped["dynamodb"] == {"SequenceNumber": "4959"}
    assert shaped["eventName"] == "REMOVE"  # skipped as NoOldImage (alarmed), not NotRemove


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (1_767_225_600_123, "1767225600.123"),  # milliseconds
        (1_767_225_600_123_456, "1767225600.123456"),  # microseconds
        (1_767_225_600, "1767225600"),  # seconds
    ],
)
def test_approximate_creation_date_time_precision(value: int, seconds: str) -> None:
    from decimal import Decimal

    assert kinesis_records.epoch_seconds(value) == Decimal(seconds)


def test_a_dynamodb_stream_event_is_left_as_it_is() -> None:
    event = {"Records": [{"eventSource": "aws:dynamodb", "dynamodb": {}}]}
    assert kinesis_records.to_stream_event(event) is event


def test_the_kill_switch_gives_the_kinesis_streams_retention_deadline(
    source: KinesisSource,
) -> None:
    from datetime import datetime, timezone

    from session_expiry_runtime.ops import kill_switch

    source.kinesis.increase_stream_retention_period(StreamName=STREAM, RetentionPeriodHours=168)
    since = datetime(2026, 1, 1, tzinfo=timezone.utc)
    mapping = {"State": "Disabled", "LastModified": since, "EventSourceArn": source.arn}

    retention = kill_switch.source_retention(SESSION, mapping)
    state = kill_switch.summary(mapping, retention)

    assert state["streamRetentionDeadline"] == "2026-01-08T00:00:00+00:00"
    assert "168-hour retention" in str(kill_switch.deadline_note(state))
    dynamodb = {**mapping, "EventSourceArn": "arn:aws:dynamodb:us-east-1:1:table/t/stream/x"}
    assert (
        kill_switch.summary(dynamodb, kill_switch.source_retention(SESSION, dynamodb))[
            "streamRetentionDeadline"
        ]
        == "2026-01-02T00:00:00+00:00"
    )
