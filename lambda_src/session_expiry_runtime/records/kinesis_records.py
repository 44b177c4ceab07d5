"""Kinesis Data Streams for DynamoDB as the change source: Kinesis records reshaped for the runner.

With the Kinesis change source (the construct's ``change_source=ChangeSource.kinesis()``), the
table's changes reach the cleanup through its Kinesis streaming destination and a Kinesis event
source mapping. Each Lambda Kinesis record carries one DynamoDB change under ``kinesis.data``:
base64 of a JSON document (AWS Lambda Developer Guide, "Using AWS Lambda with Amazon Kinesis";
DynamoDB Developer Guide, "Using Kinesis Data Streams to capture changes to DynamoDB")::

    {"awsRegion": "...", "eventID": "...", "eventName": "REMOVE", "eventSource": "aws:dynamodb",
     "recordFormat": "application/json", "tableName": "sessions",
     "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
     "dynamodb": {"ApproximateCreationDateTime": 1767225600123, "Keys": {...},
                  "OldImage": {...}, "NewImage": {...}, "SizeBytes": 123}}

`to_stream_record` turns it into the Lambda DynamoDB stream record the runner reads:

* ``dynamodb.SequenceNumber`` is the **Kinesis** ``sequenceNumber``: the partial batch response
  of a Kinesis mapping names Kinesis sequence numbers (AWS Lambda Developer Guide, "Reporting
  batch item failures for Kinesis");
* ``ApproximateCreationDateTime`` is in milliseconds or microseconds (the destination's
  ``ApproximateCreationDateTimePrecision``; the construct sets milliseconds): converted to epoch
  seconds, which the classification compares with the TTL;
* ``eventSourceARN`` is the Kinesis stream's.

A record whose ``data`` is not such a document keeps its sequence number and gets no old image:
the runner skips it and counts it (``RecordsSkipped``, cause ``NoOldImage``, alarmed) instead of
failing the batch on every retry.

Records "might appear in a different order than when the item changes occurred" and "might also
appear more than once" (same guide). A duplicate within one batch is skipped
(`to_stream_event`); across batches the ownership records make a second REMOVE of one
incarnation find its ids released (no call is repeated), and a REMOVE of an old incarnation never
acts on what a newer incarnation of the key claimed, whatever the order (``docs/ownership.md``).

Pure functions only: no AWS calls.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

#: ``eventSource`` of a Lambda Kinesis record.
KINESIS_EVENT_SOURCE = "aws:kinesis"
#: Where `to_stream_record` keeps the Kinesis record's ``approximateArrivalTimestamp``.
ARRIVAL_TIME_KEY = "kinesisArrivalTime"
#: At or above: microseconds (year 2001 onwards at 10**15); at or above 10**11: milliseconds.
_MICROSECONDS_FROM = Decimal(10) ** 14
_MILLISECONDS_FROM = Decimal(10) ** 11


def is_kinesis_record(record: object) -> bool:
    """True for a Lambda Kinesis record (``eventSource`` ``aws:kinesis``)."""
    return isinstance(record, Mapping) and record.get("eventSource") == KINESIS_EVENT_SOURCE


def epoch_seconds(value: object) -> Decimal | None:
    """``ApproximateCreationDateTime`` of a Kinesis change record in epoch seconds: a number in
    microseconds or milliseconds (told apart by magnitude) or already seconds; ``None`` if it is
    not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal, str)):
        return None
    try:
        number = Decimal(str(value))
    except ArithmeticError:
        return None
    if not number.is_finite():
        return None
    if number >= _MICROSECONDS_FROM:
        return number / Decimal(1_000_000)
    if number >= _MILLISECONDS_FROM:
        return number / Decimal(1_000)
    return number


def _change(kinesis: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The DynamoDB change document in ``kinesis.data``; ``None`` if it is not one."""
    try:
        data = base64.b64decode(str(kinesis.get("data", "")).encode("ascii"), validate=True)
        change = json.loads(data, parse_float=Decimal)
    except (binascii.Error, UnicodeError, ValueError):
        return None
    if not isinstance(change, Mapping) or not isinstance(change.get("dynamodb"), Mapping):
        return None
    return change


def to_stream_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """One Lambda Kinesis record as the Lambda DynamoDB stream record the runner reads (see the
    module docstring); never raises."""
    kinesis = record.get("kinesis")
    kinesis = kinesis if isinstance(kinesis, Mapping) else {}
    sequence_number = kinesis.get("sequenceNumber")
    change = _change(kinesis)
    if change is None:  # no old image: skipped and counted, never retried forever
        return {
            "eventID": record.get("eventID"),
            "eventName": "REMOVE",
            "eventSourceARN": record.get("eventSourceARN"),
            "dynamodb": {"SequenceNumber": sequence_number},
        }
    body = dict(change["dynamodb"])
    created = epoch_seconds(body.get("ApproximateCreationDateTime"))
    body["ApproximateCreationDateTime"] = created
    body["SequenceNumber"] = sequence_number
    out: dict[str, Any] = {
        "eventID": change.get("eventID"),
        "eventName": change.get("eventName"),
        # Set by Kinesis when the record arrived, not by its writer (decode.StreamRecord).
        ARRIVAL_TIME_KEY: epoch_seconds(kinesis.get("approximateArrivalTimestamp")),
        "eventSource": change.get("eventSource", "aws:dynamodb"),
        "awsRegion": change.get("awsRegion"),
        "tableName": change.get("tableName"),
        "eventSourceARN": record.get("eventSourceARN"),
        "dynamodb": body,
    }
    if change.get("userIdentity"):
        out["userIdentity"] = change["userIdentity"]
    return out


def to_stream_event(event: object) -> object:
    """``event`` with every Kinesis record reshaped by `to_stream_record`; any other event
    (a DynamoDB stream batch) is returned as it is.

    Duplicates in one batch: a record carrying the same DynamoDB change as an earlier record of
    the batch (the same ``eventID`` *and* the same ``data``: a Kinesis duplicate repeats the
    change byte for byte, and a record that only reuses another's ``eventID`` is another change,
    never allowed to hide it) gets that record's sequence number, so the runner skips it as
    ``DuplicateInBatch`` instead of acting twice at the same moment. It is never reported
    failed on its own: if the first fails, Lambda re-delivers from the first's (lower) sequence
    number, the duplicate included (Lambda checkpoints at the lowest reported number).
    """
    if not isinstance(event, Mapping):
        return event
    records = event.get("Records")
    if not isinstance(records, list) or not any(is_kinesis_record(r) for r in records):
        return event
    first_of: dict[tuple[str, str], Any] = {}
    shaped: list[object] = []
    for raw in records:
        if not is_kinesis_record(raw):
            shaped.append(raw)
            continue
        record = to_stream_record(raw)
        event_id = record.get("eventID")
        if isinstance(event_id, str) and event_id and record["dynamodb"].get("Keys") is not None:
            data = str((raw.get("kinesis") or {}).get("data"))
            first = first_of.setdefault((event_id, data), record["dynamodb"]["SequenceNumber"])
            record["dynamodb"]["SequenceNumber"] = first
        shaped.append(record)
    return {**event, "Records": shaped}


def to_kinesis_data(change: Mapping[str, Any]) -> str:
    """The base64 ``data`` of a Kinesis record carrying ``change`` (a DynamoDB change document
    in the Kinesis Data Streams for DynamoDB format); for emulators, tests and benchmarks."""
    return base64.b64encode(json.dumps(change, default=str).encode("utf-8")).decode("ascii")
