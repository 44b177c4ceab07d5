"""On-failure destination records, and the checks replay makes before it acts on one.

A record of the on-failure destination of a DynamoDB event source mapping (AWS Lambda
Developer Guide, "Retain discarded records for a DynamoDB event source in Lambda") names the
failed batch in ``DDBStreamBatchInfo``: ``shardId``, ``startSequenceNumber``,
``endSequenceNumber``, ``streamArn``. An S3 destination object also holds ``payload``, the
whole invocation event (``{"Records": [...]}``, each record with ``eventSource``
``aws:dynamodb`` and ``eventSourceARN``).

Anyone who can write the failure queue or bucket can write such a record. Replay therefore acts
only on records of a stream it trusts (`replay_trust`):

* `check_stream`: ``streamArn`` must be a stream of the trusted table, else
  `ForeignStream`;
* `payload_records`: every payload record must have ``eventSource`` ``aws:dynamodb`` and
  ``eventSourceARN`` equal to ``streamArn`` (else `ForeignStream`), a sequence number
  inside the range, the first and last at its ends, and ``Keys`` equal to the key attributes
  of its ``OldImage`` (else `ReplayError`).

A payload record carries no shard id: the shard of a payload cannot be checked. A queue
message's records are read from the shard it names, of the stream it names (``read_range``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from .replay_trust import TrustedStreams

#: ``eventSource`` of every DynamoDB stream record Lambda delivers.
DYNAMODB_EVENT_SOURCE = "aws:dynamodb"
#: Lengths the DynamoDB Streams API accepts (API Reference, ``GetShardIterator``): a message
#: outside them is malformed (``invalid``), whichever stream it names.
_SHARD_ID_LENGTH = (28, 65)
_SEQUENCE_LENGTH = (21, 40)


class ReplayError(Exception):
    """A failure message cannot be replayed; the message names why."""


class ForeignStream(ReplayError):
    """The message, or a record of its payload, is not of a trusted stream; the error names
    the value found and the value expected."""


@dataclass(frozen=True)
class BatchInfo:
    """``DDBStreamBatchInfo`` of an on-failure destination record."""

    shard_id: str
    start_sequence_number: str
    end_sequence_number: str
    stream_arn: str
    batch_size: int | None = None
    approximate_arrival_of_first_record: datetime | None = None


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _batch_info(document: object) -> Mapping[str, Any]:
    info = document.get("DDBStreamBatchInfo") if isinstance(document, Mapping) else None
    if not isinstance(info, Mapping):
        raise ReplayError("no DDBStreamBatchInfo: not a DynamoDB stream on-failure record")
    required = ("shardId", "startSequenceNumber", "endSequenceNumber", "streamArn")
    missing = [name for name in required if not isinstance(info.get(name), str) or not info[name]]
    if missing:
        raise ReplayError(f"DDBStreamBatchInfo lacks {', '.join(missing)}")
    # read_range compares sequence numbers as integers: DynamoDB's are decimal digit strings.
    low, high = _SEQUENCE_LENGTH
    for name in ("startSequenceNumber", "endSequenceNumber"):
        value = info[name]
        if not (value.isascii() and value.isdigit() and low <= len(value) <= high):
            raise ReplayError(
                f"DDBStreamBatchInfo {name} {value!r}: expected a decimal sequence number "
                f"({low} to {high} digits)"
            )
    if not _SHARD_ID_LENGTH[0] <= len(info["shardId"]) <= _SHARD_ID_LENGTH[1]:
        raise ReplayError(
            f"DDBStreamBatchInfo shardId {info['shardId']!r}: expected a shard id of "
            f"{_SHARD_ID_LENGTH[0]} to {_SHARD_ID_LENGTH[1]} characters"
        )
    return info


def parse_failure_record(body: str | bytes | Mapping[str, Any]) -> tuple[BatchInfo, Any]:
    """Parse an on-failure destination record (SQS message body or S3 object).

    Returns:
        ``(batch info, payload)``; ``payload`` is the invocation event (``{"Records": [...]}``)
        of an S3 destination object, ``None`` for SQS/SNS metadata.

    Raises:
        ReplayError: not JSON, or no ``DDBStreamBatchInfo`` with a shard id (28 to 65
            characters), a sequence range (decimal, 21 to 40 digits) and a stream ARN. Checked
            before the stream (`check_stream`): a malformed message is ``invalid``
            whichever stream it names.
    """
    try:
        document = json.loads(body) if isinstance(body, (str, bytes)) else body
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than json parses
        raise ReplayError(f"not a JSON on-failure record: {exc}") from None
    info = _batch_info(document)
    batch_size = info.get("batchSize")
    payload = document.get("payload")
    if isinstance(payload, (str, bytes)):
        try:
            payload = json.loads(payload)
        except (ValueError, RecursionError) as exc:
            raise ReplayError(f"payload is not the JSON invocation event: {exc}") from None
    return (
        BatchInfo(
            shard_id=info["shardId"],
            start_sequence_number=info["startSequenceNumber"],
            end_sequence_number=info["endSequenceNumber"],
            stream_arn=info["streamArn"],
            batch_size=batch_size if isinstance(batch_size, int) else None,
            approximate_arrival_of_first_record=_timestamp(
                info.get("approximateArrivalOfFirstRecord")
            ),
        ),
        payload,
    )


def check_stream(info: BatchInfo, trusted: TrustedStreams) -> None:
    """Refuse a message whose ``DDBStreamBatchInfo.streamArn`` is not a trusted stream.

    Raises:
        ForeignStream: ``streamArn`` names another table, account, Region or partition, or is
            not a DynamoDB stream ARN at all.
    """
    if not trusted.owns(info.stream_arn):
        raise ForeignStream(
            f"DDBStreamBatchInfo.streamArn {info.stream_arn!r} is not a stream of the "
            f"configured table: expected {trusted.expected()} (from {trusted.source})"
        )


def _check_source(record: Mapping[str, Any], index: int, info: BatchInfo) -> None:
    source = record.get("eventSource")
    if source != DYNAMODB_EVENT_SOURCE:
        raise ForeignStream(
            f"payload record {index} has eventSource {source!r}: expected {DYNAMODB_EVENT_SOURCE!r}"
        )
    arn = record.get("eventSourceARN")
    if arn != info.stream_arn:
        raise ForeignStream(
            f"payload record {index} has eventSourceARN {arn!r}: expected the failed batch's "
            f"stream {info.stream_arn!r}"
        )


def _check_keys(body: Mapping[str, Any], index: int) -> None:
    """A record DynamoDB wrote has ``Keys`` equal to its ``OldImage``'s key attributes; the
    cleanup binds the scratch prefix to ``Keys`` and reads the rest from ``OldImage``."""
    keys, image = body.get("Keys"), body.get("OldImage")
    if not isinstance(keys, Mapping) or not isinstance(image, Mapping):
        return  # no OldImage: the cleanup skips the record (decode); no Keys: it fails it
    for name, value in keys.items():
        if image.get(name) != value:
            raise ReplayError(
                f"payload record {index} has Keys {name}={value!r} but OldImage "
                f"{name}={image.get(name)!r}: expected the same key (not a record DynamoDB wrote)"
            )


def _payload_sequence_number(record: object, index: int, info: BatchInfo) -> int:
    if not isinstance(record, Mapping):
        raise ReplayError(f"payload record {index} is not a DynamoDB stream record")
    body = record.get("dynamodb")
    body = body if isinstance(body, Mapping) else {}
    number = body.get("SequenceNumber")
    if not (isinstance(number, str) and number.isascii() and number.isdigit()):
        raise ReplayError(
            f"payload record {index} is not a DynamoDB stream record (no decimal "
            "dynamodb.SequenceNumber)"
        )
    _check_source(record, index, info)
    _check_keys(body, index)
    return int(number)


def payload_records(payload: object, info: BatchInfo) -> list[dict[str, Any]]:
    """The records of an S3 on-failure object's ``payload``, checked to be the batch ``info``
    names. Check ``info`` itself with `check_stream` first.

    Raises:
        ForeignStream: a record's ``eventSource`` is not ``aws:dynamodb`` or its
            ``eventSourceARN`` is missing or not ``info.stream_arn``.
        ReplayError: the payload is not an invocation event with a non-empty ``Records`` list,
            a record is not a DynamoDB stream record, its ``Keys`` differ from its
            ``OldImage``'s key attributes, a sequence number lies outside ``start..end``, or the
            first/last record is not at the range's start/end (the payload does not hold the
            whole batch).
    """
    records = payload.get("Records") if isinstance(payload, Mapping) else None
    if not isinstance(records, list) or not records:
        raise ReplayError("payload holds no Records: not the invocation event of the failed batch")
    numbers = [_payload_sequence_number(r, i, info) for i, r in enumerate(records)]
    start, end = int(info.start_sequence_number), int(info.end_sequence_number)
    outside = [n for n in numbers if not start <= n <= end]
    if outside:
        raise ReplayError(
            f"payload record {outside[0]} lies outside the failed range {start}..{end}"
        )
    if numbers[0] != start or numbers[-1] != end:
        raise ReplayError(
            f"payload covers {numbers[0]}..{numbers[-1]}, not the whole failed range {start}..{end}"
        )
    return [dict(r) for r in records]
