"""The Kinesis change source in the bench: the same REMOVE records, delivered as Kinesis records.

``python -m bench`` runs the handler a second time per scenario on the Kinesis path
(:data:`KINESIS_IMPL`): its environment overrides carry ``BENCH_CHANGE_SOURCE=kinesis``, and
:mod:`bench.throughput` writes its event file as Kinesis records (:func:`shape`), so the timed
invocation pays what it pays in Lambda — decoding each record's ``data`` — and nothing else.
Each DynamoDB record becomes the change document Kinesis Data Streams for DynamoDB writes
(``ApproximateCreationDateTime`` in milliseconds, ``tableName``, no ``SequenceNumber``), base64
in ``kinesis.data``, numbered by a Kinesis sequence number.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from session_expiry_runtime.records.kinesis_records import to_kinesis_data

#: The run's name in the tables.
KINESIS_IMPL = "handler (Kinesis source)"
#: The environment variable :mod:`bench.case` reads.
ENV_CHANGE_SOURCE = "BENCH_CHANGE_SOURCE"
#: The environment override of a Kinesis run.
KINESIS_ENV = {ENV_CHANGE_SOURCE: "kinesis"}
STREAM_ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/session-changes"


def _change(record: dict[str, Any], table_name: str) -> dict[str, Any]:
    body = {k: v for k, v in record["dynamodb"].items() if k not in ("SequenceNumber",)}
    body.pop("StreamViewType", None)
    seconds = body.get("ApproximateCreationDateTime")
    if seconds is not None:
        body["ApproximateCreationDateTime"] = int(Decimal(str(seconds)) * 1000)
    change = {
        "awsRegion": record.get("awsRegion"),
        "eventID": record.get("eventID"),
        "eventName": record.get("eventName"),
        "eventSource": "aws:dynamodb",
        "recordFormat": "application/json",
        "tableName": table_name,
        "dynamodb": body,
    }
    if record.get("userIdentity"):
        change["userIdentity"] = record["userIdentity"]
    return change


def to_kinesis_event(event: dict[str, Any], table_name: str = "sessions") -> dict[str, Any]:
    """``event`` (Lambda DynamoDB stream records) as a Lambda Kinesis batch of the same changes;
    each record's Kinesis sequence number is its DynamoDB one (unique in the batch)."""
    records = []
    for i, record in enumerate(event["Records"]):
        sequence = str(record["dynamodb"].get("SequenceNumber") or i)
        records.append(
            {
                "eventSource": "aws:kinesis",
                "eventName": "aws:kinesis:record",
                "eventID": f"shardId-000000000000:{sequence}",
                "eventSourceARN": STREAM_ARN,
                "awsRegion": record.get("awsRegion"),
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": str(record["dynamodb"].get("Keys")),
                    "sequenceNumber": sequence,
                    "data": to_kinesis_data(_change(record, table_name)),
                },
            }
        )
    return {"Records": records}


def shape(event: dict[str, Any], env: Mapping[str, str], table_name: str) -> dict[str, Any]:
    """``event`` as the run's change source delivers it: Kinesis records when the run's
    environment overrides ``env`` say ``BENCH_CHANGE_SOURCE=kinesis``."""
    if env.get(ENV_CHANGE_SOURCE) == "kinesis":
        return to_kinesis_event(event, table_name)
    return event
