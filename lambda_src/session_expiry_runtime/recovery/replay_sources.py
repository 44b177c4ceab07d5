"""Where replay reads failed ranges from, and what it deletes: one on-failure record
(`replay_message`: SQS metadata whose range is read back from the stream with
`read_range`, or an S3 object's ``payload``), every message of the on-failure queue
(`replay_queue`), one object of the S3 on-failure destination (`replay_s3_object`).

Every record is checked against the trusted streams (`replay_trust`,
`failure_records`, `removed_items`) before anything is read or cleaned; the records
are judged by `replay_outcomes.replay_records`; a message (object) is deleted only when
it was ``replayed``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from ..cleanup.cleaner import SessionCleaner
from ..records.stream_records import to_lambda_record
from .failure_records import (
    BatchInfo,
    ForeignStream,
    ReplayError,
    check_stream,
    parse_failure_record,
    payload_records,
)
from .removed_items import ItemStillInTable, check_removed
from .replay_outcomes import (
    STATUS_AGED_OUT,
    STATUS_FAILED,
    STATUS_FOREIGN_STREAM,
    STATUS_INVALID,
    STATUS_REPLAYED,
    STATUS_STILL_IN_TABLE,
    ReplayOutcome,
    replay_records,
)
from .replay_targets import require_cleanup_target
from .replay_trust import TrustedStreams

#: DynamoDB Streams keeps records for 24 hours (DynamoDB Developer Guide, "Change data capture
#: for DynamoDB Streams").
STREAM_RETENTION = timedelta(hours=24)
#: GetRecords returns at most 1,000 records a call.
GET_RECORDS_LIMIT = 1000
#: An open shard answers empty pages (with a next iterator) past its newest record, and may
#: answer empty pages before reaching records: stop after this many in a row.
MAX_EMPTY_PAGES = 5
#: How long a received message stays invisible while it is replayed.
VISIBILITY_TIMEOUT_SECONDS = 300


class RangeAgedOut(ReplayError):
    """The batch's records are no longer in the stream (older than its 24 hour retention)."""


class QueueReadError(ReplayError):
    """Receiving from the queue failed; ``outcomes`` holds the messages handled before."""

    def __init__(self, detail: str, outcomes: list[ReplayOutcome]) -> None:
        super().__init__(detail)
        self.outcomes = outcomes


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def read_range(
    streams: Any, info: BatchInfo, *, now: Callable[[], datetime] | None = None
) -> list[dict[str, Any]]:
    """Read the records ``start..end`` of ``info`` back from the stream, in Lambda's shape.

    Raises:
        RangeAgedOut: the first record arrived more than 24 hours ago, the stream answered
            ``TrimmedDataAccessException``, or the range's first record is no longer there.
        ReplayError: the stream or shard does not exist (any more), or the end of the range was
            not reached.
    """
    clock = now or (lambda: datetime.now(timezone.utc))
    first = info.approximate_arrival_of_first_record
    if first is not None and clock() - first > STREAM_RETENTION:
        raise RangeAgedOut(
            f"records {info.start_sequence_number}..{info.end_sequence_number} of "
            f"{info.shard_id} arrived at {first.isoformat()}, more than 24 hours ago: the "
            "stream no longer holds them"
        )
    start, end = int(info.start_sequence_number), int(info.end_sequence_number)
    try:
        iterator = streams.get_shard_iterator(
            StreamArn=info.stream_arn,
            ShardId=info.shard_id,
            ShardIteratorType="AT_SEQUENCE_NUMBER",
            SequenceNumber=info.start_sequence_number,
        )["ShardIterator"]
        records: list[dict[str, Any]] = []
        empty = 0
        reached_end = False
        while iterator and not reached_end and empty < MAX_EMPTY_PAGES:
            page = streams.get_records(ShardIterator=iterator, Limit=GET_RECORDS_LIMIT)
            batch = page.get("Records") or []
            empty = 0 if batch else empty + 1
            for record in batch:
                number = int(record["dynamodb"]["SequenceNumber"])
                if number > end:
                    reached_end = True
                    break
                if number >= start:
                    records.append(to_lambda_record(record, stream_arn=info.stream_arn))
                if number == end:
                    reached_end = True
                    break
            iterator = page.get("NextShardIterator")
    except ClientError as exc:
        code = _error_code(exc)
        if code == "TrimmedDataAccessException":
            raise RangeAgedOut(
                f"records from {info.start_sequence_number} of {info.shard_id} were trimmed "
                "from the stream (older than its 24 hour retention)"
            ) from exc
        if code == "ResourceNotFoundException":
            raise ReplayError(
                f"stream {info.stream_arn} or shard {info.shard_id} not found: the stream was "
                "disabled or replaced (its records are gone)"
            ) from exc
        raise
    if not records or int(records[0]["dynamodb"]["SequenceNumber"]) != start:
        raise RangeAgedOut(
            f"record {info.start_sequence_number} is no longer in {info.shard_id}: the range "
            "has aged out of the stream (24 hour retention)"
        )
    if not reached_end:
        raise ReplayError(
            f"did not reach record {info.end_sequence_number} of {info.shard_id} "
            f"(read {len(records)} record(s)); try again"
        )
    return records


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return f"{_error_code(exc)}: {exc}"
    return f"{type(exc).__name__}: {exc}"


def replay_message(
    body: str | bytes | Mapping[str, Any],
    *,
    streams: Any,
    cleaner: SessionCleaner,
    trusted: TrustedStreams,
    tables: Any = None,
    dry_run: bool = False,
    source: str = "message",
    now: Callable[[], datetime] | None = None,
) -> ReplayOutcome:
    """Replay one on-failure record (SQS metadata, or an S3 object with ``payload``).

    Nothing is read from the stream and nothing is cleaned unless ``streamArn`` is one of the
    ``trusted`` streams and every payload record is a DynamoDB record of that stream
    (`failure_records`) whose ``REMOVE`` names an item gone from the table (``tables``,
    a DynamoDB client, `removed_items`; a payload without ``tables`` is kept as
    ``invalid``).

    Never raises: every error of this message becomes its outcome (``foreign-stream`` for
    another stream's message or record, ``still-in-table``, ``invalid`` for input the stream or
    the checks refuse, ``aged-out``, else ``failed`` with the error).
    """
    try:
        info, payload = parse_failure_record(body)
        check_stream(info, trusted)
        if payload is not None:
            records = payload_records(payload, info)
            if tables is None:  # replay_queue: Lambda sends a queue only the batch's metadata
                raise ReplayError(
                    "the record holds a payload, which only an S3 on-failure object carries, "
                    "and no table client (tables=) was given to check its items are gone"
                )
            check_removed(records, info, tables)
        else:
            records = read_range(streams, info, now=now)
        return replay_records(records, cleaner, dry_run=dry_run, source=source)
    except RangeAgedOut as exc:
        return ReplayOutcome(source, STATUS_AGED_OUT, error=str(exc))
    except ForeignStream as exc:
        return ReplayOutcome(source, STATUS_FOREIGN_STREAM, error=str(exc))
    except ItemStillInTable as exc:
        return ReplayOutcome(source, STATUS_STILL_IN_TABLE, error=str(exc))
    except ReplayError as exc:
        return ReplayOutcome(source, STATUS_INVALID, error=str(exc))
    except ParamValidationError as exc:
        # botocore refused the metadata before sending it (e.g. a shard id shorter than 28).
        return ReplayOutcome(source, STATUS_INVALID, error=_error_text(exc))
    except Exception as exc:  # ClientError, endpoint/timeout errors, a bug: this message only
        return ReplayOutcome(source, STATUS_FAILED, error=_error_text(exc))


def _receive(
    sqs: Any, queue_url: str, want: int, wait_seconds: int, outcomes: list[ReplayOutcome]
) -> list[dict[str, Any]]:
    try:
        answer = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=want,
            WaitTimeSeconds=wait_seconds,
            VisibilityTimeout=VISIBILITY_TIMEOUT_SECONDS,
        )
    except (ClientError, BotoCoreError) as exc:
        raise QueueReadError(
            f"ReceiveMessage from {queue_url} failed: {_error_text(exc)}", outcomes
        ) from exc
    return list(answer.get("Messages") or [])


def _delete(outcome: ReplayOutcome, what: str, call: Callable[[], Any]) -> None:
    try:
        call()
    except (ClientError, BotoCoreError) as exc:
        outcome.status = STATUS_FAILED
        outcome.error = (
            f"replayed, but {what} failed ({_error_text(exc)}): kept; replaying it again "
            "cleans the same range again (every step is idempotent)"
        )
        return
    outcome.deleted = True


def _replay_received(
    sqs: Any, queue_url: str, message: Mapping[str, Any], **replay_args: Any
) -> ReplayOutcome:
    """Replay one received message; delete it only when it was ``replayed``."""
    outcome = replay_message(
        message.get("Body") or "", source=f"sqs:{message.get('MessageId')}", **replay_args
    )
    if outcome.status == STATUS_REPLAYED:
        delete = functools.partial(
            sqs.delete_message, QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"]
        )
        _delete(outcome, "DeleteMessage", delete)
    return outcome


def _make_visible(sqs: Any, queue_url: str, handles: list[str]) -> None:
    for handle in handles:
        try:
            sqs.change_message_visibility(
                QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0
            )
        except (ClientError, BotoCoreError):
            pass  # visible again after the visibility timeout anyway


def replay_queue(
    sqs: Any,
    queue_url: str,
    *,
    streams: Any,
    cleaner: SessionCleaner,
    trusted: TrustedStreams,
    dry_run: bool = False,
    max_messages: int | None = None,
    wait_seconds: int = 1,
    now: Callable[[], datetime] | None = None,
    on_outcome: Callable[[ReplayOutcome], Any] | None = None,
) -> list[ReplayOutcome]:
    """Replay every message of the on-failure queue (up to ``max_messages``).

    Only messages of the ``trusted`` streams are acted on (`replay_message`). A message
    is deleted only when its status is ``replayed`` (never in a dry run); any other
    message is made visible again when the run ends (a rerun sees it at once, and so does the
    failure queue's alarm) and stays in the queue (its retention, 14 days for the construct's
    queue, still applies). One message's error is reported in its outcome and the run goes on.
    ``on_outcome`` is called with each outcome as soon as it is known.

    Raises:
        NoCleanupTarget: ``cleaner`` has no cleanup target (no message is received).
        QueueReadError: ReceiveMessage failed (``outcomes`` holds what was done before).
    """
    require_cleanup_target(cleaner.config)
    replay_args = {
        "streams": streams,
        "cleaner": cleaner,
        "trusted": trusted,
        "dry_run": dry_run,
        "now": now,
    }
    outcomes: list[ReplayOutcome] = []
    seen: set[str] = set()
    release: list[str] = []
    try:
        while max_messages is None or len(outcomes) < max_messages:
            want = 10 if max_messages is None else min(10, max_messages - len(outcomes))
            received = _receive(sqs, queue_url, want, wait_seconds, outcomes)
            messages = [m for m in received if m.get("MessageId") not in seen]
            if not messages:
                break
            for message in messages:
                seen.add(message.get("MessageId", ""))
                outcome = _replay_received(sqs, queue_url, message, **replay_args)
                if not outcome.deleted:
                    release.append(message["ReceiptHandle"])
                outcomes.append(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)
    finally:
        # Every kept message visible again at once (not inside the loop, or the same messages
        # would be received over and over): a rerun right after must see them, not an empty
        # queue (exit 0), and the failure queue's alarm must not clear meanwhile.
        _make_visible(sqs, queue_url, release)
    return outcomes


def replay_s3_object(
    s3: Any,
    bucket: str,
    key: str,
    *,
    streams: Any,
    cleaner: SessionCleaner,
    trusted: TrustedStreams,
    tables: Any,
    dry_run: bool = False,
    delete: bool = False,
) -> ReplayOutcome:
    """Replay one object of the S3 on-failure destination (its ``payload`` holds the records).

    Only an object of the ``trusted`` streams whose ``REMOVE`` records name items gone from
    the table (``tables``: a DynamoDB client) is acted on (`replay_message`). With
    ``delete``, the object is deleted only when its status is ``replayed``: a foreign or invalid
    object is never deleted.

    Raises:
        NoCleanupTarget: ``cleaner`` has no cleanup target (the object is not read).
        botocore.exceptions.ClientError: the object could not be read.
    """
    require_cleanup_target(cleaner.config)
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    outcome = replay_message(
        body,
        streams=streams,
        cleaner=cleaner,
        trusted=trusted,
        tables=tables,
        dry_run=dry_run,
        source=f"s3://{bucket}/{key}",
    )
    if delete and outcome.status == STATUS_REPLAYED:
        _delete(outcome, "DeleteObject", lambda: s3.delete_object(Bucket=bucket, Key=key))
    return outcome
