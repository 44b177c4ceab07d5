"""Clean again every session removed between two times, read back from the Kinesis change stream.

With the Kinesis change source, the change stream keeps every change for its retention (7 days
by default). ``python -m session_expiry_runtime.replay --kinesis-stream-arn ARN --from T1
--to T2`` reads it back and runs every ``REMOVE`` whose ``ApproximateCreationDateTime`` (when
DynamoDB removed the item) is in ``[T1, T2]`` through the cleanup, one shard at a time:

* ``T2`` must not be in the future (`check_end`); one less than `ARRIVAL_SLACK`
  ago is read, and the run says until when a late removal may still arrive
  (`late_arrivals`);
* each shard is read from ``AT_TIMESTAMP`` ``T1`` (a change arrives in the stream after it is
  made, so nothing removed at ``T1`` or later arrived earlier) until a record arrives more than
  `ARRIVAL_SLACK` after ``T2`` or the shard has nothing newer (``MillisBehindLatest`` 0);
  Kinesis streams accept ``AT_TIMESTAMP`` (Kinesis Data Streams API Reference,
  GetShardIterator). A shard still behind after `MAX_EMPTY_PAGES` empty pages in a row
  is reported ``failed`` (what was read of it is still cleaned): the run never answers
  "replayed" for a range it did not read whole;
* only ``REMOVE`` records of the configured table (``tableName``) in the range are run, through
  `kinesis_records.to_stream_event` (so in-shard duplicates are skipped) and the same
  `replay.replay_records` the on-failure replay uses: the ownership records make a
  session already cleaned cost no repeated call, and every outcome is one JSON line
  (``source`` ``kinesis:<shard id>``).

Only the stream the table's changes go to is read: the table (``--stream-arn`` or
``SESSION_EXPIRY_TABLE_NAME``) must have ``--kinesis-stream-arn`` among its Kinesis streaming
destinations (`check_destination`), and, when ``--env-from-function`` names the cleanup
function, its event source mapping must read that stream (`check_trusted`). Otherwise a
run over another stream, or for another table, finds none of the table's removals and would
exit 0 having replayed nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from ..cleanup.cleaner import SessionCleaner
from ..records.kinesis_records import KINESIS_EVENT_SOURCE, to_stream_event
from .replay_outcomes import STATUS_FAILED, ReplayOutcome, replay_records

#: Records arriving this long after ``--to`` are still read: a change made before ``--to`` may
#: reach the stream later (the destination's delivery lag).
ARRIVAL_SLACK = timedelta(minutes=15)
#: Records per ``GetRecords`` call (the API's maximum is 10,000).
PAGE_LIMIT = 1_000
#: Empty pages in a row after which a shard that still reports records behind is given up on.
MAX_EMPTY_PAGES = 50


class KinesisReplayError(ValueError):
    """The stream cannot be replayed: not trusted, or a time range that is not one."""


def parse_time(text: str) -> datetime:
    """An ISO 8601 time (``2026-01-01T12:00:00Z``) as an aware UTC datetime.

    A trailing ``Z`` (or ``z``) is written as ``+00:00`` before ``datetime.fromisoformat``:
    Python 3.10's accepts only what ``isoformat()`` writes, never ``Z`` (3.11+ does).

    Raises:
        KinesisReplayError: not ISO 8601, or no time zone.
    """
    iso = text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text
    try:
        value = datetime.fromisoformat(iso)
    except ValueError:
        raise KinesisReplayError(
            f"{text!r}: expected an ISO 8601 time with a zone, e.g. 2026-01-01T12:00:00Z"
        ) from None
    if value.tzinfo is None:
        raise KinesisReplayError(f"{text!r}: expected a time zone (Z or +00:00)")
    return value.astimezone(timezone.utc)


_STREAM_ARN = re.compile(r"arn:[a-z-]+:kinesis:[a-z0-9-]+:\d{12}:stream/[A-Za-z0-9_.-]{1,128}")


def check_stream_arn(arn: str) -> None:
    """Raises:
    KinesisReplayError: ``arn`` is not a Kinesis data stream's ARN (named with the form
    expected, before any call)."""
    if not _STREAM_ARN.fullmatch(arn):
        raise KinesisReplayError(
            f"--kinesis-stream-arn {arn!r}: expected "
            "arn:<partition>:kinesis:<region>:<account>:stream/<name>"
        )


def check_range(start: datetime, end: datetime) -> None:
    """Raises:
    KinesisReplayError: ``end`` is before ``start``."""
    if end < start:
        raise KinesisReplayError(
            f"--from {start.isoformat()} is after --to {end.isoformat()}: expected from <= to"
        )


def check_end(end: datetime, now: datetime) -> None:
    """``end`` must not be in the future: what is removed after ``now`` has not happened yet,
    and a run that answered "replayed" for it would claim removals it never read.

    Raises:
        KinesisReplayError: ``end`` is after ``now``.
    """
    if end > now:
        raise KinesisReplayError(
            f"--to {end.isoformat()} is in the future (now {now.isoformat()}): expected a time "
            "at or before now (replay a later range once it has passed)"
        )


def late_arrivals(end: datetime, now: datetime) -> str | None:
    """What a run should say when ``end`` is so recent that a removal made before it may still
    reach the stream (within `ARRIVAL_SLACK` of ``now``); ``None`` otherwise."""
    until = end + ARRIVAL_SLACK
    if until <= now:
        return None
    minutes = int(ARRIVAL_SLACK.total_seconds() // 60)
    return (
        f"--to {end.isoformat()} is less than {minutes} minutes ago: a removal made before it "
        f"may still reach the stream until {until.isoformat()} (delivery lag); run the same "
        "range again after then for any that arrive late (a session already cleaned costs no "
        "call)"
    )


def check_start(kinesis: Any, stream_arn: str, start: datetime, now: datetime) -> None:
    """``start`` must be a time whose removals the stream still holds: not in the future, and
    not before the oldest record it keeps (``now`` minus its ``RetentionPeriodHours``, read
    with ``DescribeStreamSummary``). A range reaching further back cannot be replayed whole,
    and a run over it would answer "replayed" for removals it never read.

    Raises:
        KinesisReplayError: ``start`` is in the future or before the stream's retention.
        botocore.exceptions.ClientError: ``DescribeStreamSummary`` failed.
    """
    if start > now:
        raise KinesisReplayError(
            f"--from {start.isoformat()} is in the future (now {now.isoformat()}): expected a "
            "time at or before now"
        )
    summary = kinesis.describe_stream_summary(StreamARN=stream_arn)["StreamDescriptionSummary"]
    hours = int(summary["RetentionPeriodHours"])
    oldest = now - timedelta(hours=hours)
    if start < oldest:
        raise KinesisReplayError(
            f"--from {start.isoformat()} is before the oldest record {stream_arn} keeps "
            f"({hours} hours: {oldest.isoformat()}); the removals before that are gone from "
            f"the stream: expected --from at or after {oldest.isoformat()}"
        )


def _shards(kinesis: Any, stream_arn: str) -> Iterator[str]:
    token: str | None = None
    while True:
        page = (
            kinesis.list_shards(NextToken=token)
            if token
            else kinesis.list_shards(StreamARN=stream_arn)
        )
        for shard in page.get("Shards") or []:
            yield str(shard["ShardId"])
        token = page.get("NextToken")
        if not token:
            return


def _lambda_record(stream_arn: str, shard_id: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """A ``GetRecords`` record as the Kinesis event source mapping delivers it."""
    import base64

    return {
        "eventSource": KINESIS_EVENT_SOURCE,
        "eventName": "aws:kinesis:record",
        "eventID": f"{shard_id}:{record['SequenceNumber']}",
        "eventSourceARN": stream_arn,
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": record.get("PartitionKey"),
            "sequenceNumber": record["SequenceNumber"],
            "data": base64.b64encode(bytes(record["Data"])).decode("ascii"),
        },
    }


@dataclass
class ShardRead:
    """What `read_shard` read of one shard.

    Attributes:
        records: the records, as Lambda Kinesis records, in shard order.
        incomplete: why the shard was not read to the end of the range (``None`` when it was):
            the reading gave up on empty pages while the shard was still behind its tip.
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    incomplete: str | None = None


def read_shard(
    kinesis: Any, stream_arn: str, shard_id: str, start: datetime, end: datetime
) -> ShardRead:
    """Every record of one shard that arrived from ``start`` until ``end`` +
    `ARRIVAL_SLACK`, as Lambda Kinesis records, in shard order; ``incomplete`` says so
    when `MAX_EMPTY_PAGES` empty pages in a row came while the shard was still behind
    (``MillisBehindLatest`` above 0): the rest of the range was not read."""
    iterator = kinesis.get_shard_iterator(
        StreamARN=stream_arn,
        ShardId=shard_id,
        ShardIteratorType="AT_TIMESTAMP",
        Timestamp=start,
    ).get("ShardIterator")
    stop = end + ARRIVAL_SLACK
    read = ShardRead()
    empty, behind = 0, 0
    while iterator:
        if empty >= MAX_EMPTY_PAGES:
            read.incomplete = (
                f"gave up on shard {shard_id} after {empty} empty pages still {behind} ms "
                "behind its newest record: the rest of the range was not read; run again"
            )
            return read
        page = kinesis.get_records(ShardIterator=iterator, Limit=PAGE_LIMIT, StreamARN=stream_arn)
        records = page.get("Records") or []
        for record in records:
            arrived = record.get("ApproximateArrivalTimestamp")
            if isinstance(arrived, datetime) and arrived.astimezone(timezone.utc) > stop:
                return read
            read.records.append(_lambda_record(stream_arn, shard_id, record))
        empty = 0 if records else empty + 1
        behind = int(page.get("MillisBehindLatest", 0) or 0)
        if not records and behind == 0:
            return read
        iterator = page.get("NextShardIterator")
    return read


def removes_in_range(
    records: list[dict[str, Any]], *, table_name: str, start: datetime, end: datetime
) -> list[dict[str, Any]]:
    """The reshaped ``REMOVE`` records of ``table_name`` (their ``tableName``: a Kinesis stream
    may carry several tables' changes) removed in ``[start, end]``."""
    event = to_stream_event({"Records": records})
    assert isinstance(event, Mapping)
    low, high = Decimal(str(start.timestamp())), Decimal(str(end.timestamp()))
    kept: list[dict[str, Any]] = []
    for record in event["Records"]:
        body = record.get("dynamodb") or {}
        removed_at = body.get("ApproximateCreationDateTime")
        if record.get("eventName") != "REMOVE" or not isinstance(removed_at, Decimal):
            continue
        if record.get("tableName") != table_name:
            continue
        if low <= removed_at <= high:
            kept.append(record)
    return kept


def replay_time_range(
    kinesis: Any,
    stream_arn: str,
    *,
    start: datetime,
    end: datetime,
    cleaner: SessionCleaner,
    dry_run: bool = False,
) -> list[ReplayOutcome]:
    """Clean again every session removed in ``[start, end]`` (see the module docstring): one
    outcome per shard that holds such a ``REMOVE``, and a ``failed`` one for each shard not
    read to the end of the range (`ShardRead.incomplete`).

    Raises:
        KinesisReplayError: ``end`` is before ``start``; the settings name no table.
        botocore.exceptions.ClientError: a Kinesis call failed.
    """
    check_range(start, end)
    table_name = cleaner.config.table_name
    if not table_name:
        raise KinesisReplayError(
            "the settings name no session table (SESSION_EXPIRY_TABLE_NAME, which the construct "
            "gives the cleanup function with the Kinesis change source): a Kinesis stream may "
            "carry other tables' changes; expected --env-from-function of a cleanup deployed "
            "with it, or SESSION_EXPIRY_TABLE_NAME set"
        )
    outcomes: list[ReplayOutcome] = []
    for shard_id in _shards(kinesis, stream_arn):
        read = read_shard(kinesis, stream_arn, shard_id, start, end)
        removes = removes_in_range(read.records, table_name=table_name, start=start, end=end)
        source = f"kinesis:{shard_id}"
        outcome = (
            replay_records(removes, cleaner, dry_run=dry_run, source=source) if removes else None
        )
        if read.incomplete is not None:  # never "replayed" for a range not read whole
            outcome = outcome or ReplayOutcome(source, STATUS_FAILED, records=len(read.records))
            outcome.status = STATUS_FAILED
            outcome.error = "; ".join(e for e in (outcome.error, read.incomplete) if e)
        if outcome is not None:
            outcomes.append(outcome)
    return outcomes


def check_destination(dynamodb: Any, table_name: str, stream_arn: str) -> None:
    """The table's changes must go to ``stream_arn``: it is one of the table's Kinesis
    streaming destinations (``DescribeKinesisStreamingDestination``), whatever its status (a
    destination disabled since still left its changes in the stream, for its retention).

    Raises:
        KinesisReplayError: the table streams elsewhere, or nowhere, or does not exist (the
            message names the stream, the table and its destinations).
        botocore.exceptions.ClientError: ``DescribeKinesisStreamingDestination`` failed
            otherwise (no permission).
    """
    try:
        answer = dynamodb.describe_kinesis_streaming_destination(TableName=table_name)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise
        raise KinesisReplayError(
            f"--kinesis-stream-arn {stream_arn}: there is no table {table_name!r} "
            "(DescribeKinesisStreamingDestination: ResourceNotFoundException): expected the "
            "session table whose changes go to that stream"
        ) from None
    found = [d.get("StreamArn") for d in answer.get("KinesisDataStreamDestinations") or []]
    if stream_arn not in found:
        raise KinesisReplayError(
            f"--kinesis-stream-arn {stream_arn} is not a Kinesis streaming destination of table "
            f"{table_name!r} (its destinations: {', '.join(map(str, found)) or 'none'}): "
            "expected the stream that table's changes go to, or the table (--stream-arn) whose "
            "changes go to that stream"
        )


def check_trusted(lambda_client: Any, function_name: str, stream_arn: str) -> None:
    """The cleanup function's event source mapping must read ``stream_arn``.

    Raises:
        KinesisReplayError: it reads another source (the message names both).
    """
    mappings = lambda_client.list_event_source_mappings(FunctionName=function_name)
    sources = {m.get("EventSourceArn") for m in mappings.get("EventSourceMappings") or []}
    if stream_arn not in sources:
        raise KinesisReplayError(
            f"--kinesis-stream-arn {stream_arn} is not what {function_name}'s event source "
            f"mapping reads ({', '.join(sorted(map(str, sources))) or 'none'}): expected its "
            "Kinesis change stream"
        )
