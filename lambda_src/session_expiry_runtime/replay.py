"""Replay batches the cleanup gave up on, from the on-failure destination.

**SQS (the default on-failure queue)** receives only metadata of a failed batch, never the
records (AWS Lambda Developer Guide, "Retain discarded records for a DynamoDB event source in
Lambda")::

    {"requestContext": {"requestId": ..., "functionArn": ..., "condition": "RetryAttemptsExhausted",
                        "approximateInvokeCount": 4},
     "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": ...},
     "version": "1.0", "timestamp": "2019-11-14T00:13:49.717Z",
     "DDBStreamBatchInfo": {"shardId": "shardId-00000001573689847184-864758bb",
                            "startSequenceNumber": "800000000003126276362",
                            "endSequenceNumber": "800000000003126276362",
                            "approximateArrivalOfFirstRecord": "2019-11-14T00:13:19Z",
                            "approximateArrivalOfLastRecord": "2019-11-14T00:13:19Z",
                            "batchSize": 1,
                            "streamArn": "arn:aws:dynamodb:...:table/mytable/stream/..."}}

:func:`replay_queue` reads each message, reads that sequence range back from the stream
(``GetShardIterator`` ``AT_SEQUENCE_NUMBER`` at the start, ``GetRecords`` until past the end),
reshapes the records into the Lambda event form, runs them through :func:`process_batch` with
a :class:`SessionCleaner`, and deletes the message only when no record failed. The stream keeps
records for 24 hours: an older range (``TrimmedDataAccessException``, or records missing from
its start) is reported as :class:`RangeAgedOut` and the message is kept, for an operator to
decide (the old images are gone; the archive bucket, if any, still has the sessions that were
archived).

**S3 on-failure destination** objects carry the same metadata plus ``payload``, the whole
invocation event; :func:`replay_s3_object` re-runs that payload, with no 24 hour limit.

The range of a failed batch covers every record of the batch: records that did succeed are
cleaned again (every step is idempotent), and records the event source mapping's filter had
dropped are cleaned too (the filter does not apply here; the cleanup skips non-REMOVE records).

CLI (same environment variables as the cleanup function; the credentials need
``sqs:ReceiveMessage``/``DeleteMessage``, ``dynamodb:DescribeStream``/``GetShardIterator``/
``GetRecords`` on the stream, and the cleanup's own permissions)::

    python -m session_expiry_runtime.replay --queue-url URL [--dry-run] [--max-messages N]
    python -m session_expiry_runtime.replay --bucket NAME --key KEY [--dry-run]
    python -m session_expiry_runtime.replay ... --env-from-function CLEANUP_FUNCTION_NAME

Exit status 0 when everything was replayed (or, with ``--dry-run``, could be), 1 otherwise;
one JSON line per message on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from .cleaner import SessionCleaner, build_clients, process_batch
from .config import RuntimeConfig, validate_cleanup_config
from .metrics import MetricsRecorder
from .stream_records import to_lambda_record

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

STATUS_REPLAYED = "replayed"
STATUS_FAILED = "failed"
STATUS_AGED_OUT = "aged-out"
STATUS_INVALID = "invalid"
STATUS_DRY_RUN = "dry-run"


class ReplayError(Exception):
    """A failure message cannot be replayed; the message names why."""


class RangeAgedOut(ReplayError):
    """The batch's records are no longer in the stream (older than its 24 hour retention)."""


@dataclass(frozen=True)
class BatchInfo:
    """``DDBStreamBatchInfo`` of an on-failure destination record."""

    shard_id: str
    start_sequence_number: str
    end_sequence_number: str
    stream_arn: str
    batch_size: int | None = None
    approximate_arrival_of_first_record: datetime | None = None


@dataclass
class ReplayOutcome:
    """What happened to one failure message or object."""

    source: str
    status: str
    records: int = 0
    failed_sequence_numbers: list[str] = field(default_factory=list)
    error: str | None = None
    deleted: bool = False

    def as_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def parse_failure_record(body: str | bytes | Mapping[str, Any]) -> tuple[BatchInfo, Any]:
    """Parse an on-failure destination record (SQS message body or S3 object).

    Returns:
        ``(batch info, payload)``; ``payload`` is the invocation event (``{"Records": [...]}``)
        of an S3 destination object, ``None`` for SQS/SNS metadata.

    Raises:
        ReplayError: not JSON, or no ``DDBStreamBatchInfo`` with shard, sequence range (decimal
            digit strings) and stream ARN.
    """
    try:
        document = json.loads(body) if isinstance(body, (str, bytes)) else body
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than json parses
        raise ReplayError(f"not a JSON on-failure record: {exc}") from None
    info = document.get("DDBStreamBatchInfo") if isinstance(document, Mapping) else None
    if not isinstance(info, Mapping):
        raise ReplayError("no DDBStreamBatchInfo: not a DynamoDB stream on-failure record")
    required = ("shardId", "startSequenceNumber", "endSequenceNumber", "streamArn")
    missing = [name for name in required if not isinstance(info.get(name), str) or not info[name]]
    if missing:
        raise ReplayError(f"DDBStreamBatchInfo lacks {', '.join(missing)}")
    # read_range compares sequence numbers as integers: DynamoDB's are decimal digit strings.
    for name in ("startSequenceNumber", "endSequenceNumber"):
        if not (info[name].isascii() and info[name].isdigit()):
            raise ReplayError(
                f"DDBStreamBatchInfo {name} {info[name]!r}: expected a decimal sequence number"
            )
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


def replay_records(
    records: Sequence[Mapping[str, Any]], cleaner: SessionCleaner, *, dry_run: bool = False
) -> list[str]:
    """Run ``records`` through the cleanup; return the sequence numbers that failed again."""
    if dry_run:
        return []
    response = process_batch({"Records": list(records)}, None, cleaner)
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def replay_message(
    body: str | bytes | Mapping[str, Any],
    *,
    streams: Any,
    cleaner: SessionCleaner,
    dry_run: bool = False,
    source: str = "message",
    now: Callable[[], datetime] | None = None,
) -> ReplayOutcome:
    """Replay one on-failure record (SQS metadata, or an S3 object with ``payload``)."""
    try:
        info, payload = parse_failure_record(body)
        if isinstance(payload, Mapping) and isinstance(payload.get("Records"), list):
            records = list(payload["Records"])
        else:
            records = read_range(streams, info, now=now)
    except RangeAgedOut as exc:
        return ReplayOutcome(source, STATUS_AGED_OUT, error=str(exc))
    except ReplayError as exc:
        return ReplayOutcome(source, STATUS_INVALID, error=str(exc))
    except ClientError as exc:
        return ReplayOutcome(source, STATUS_FAILED, error=f"{_error_code(exc)}: {exc}")
    failed = replay_records(records, cleaner, dry_run=dry_run)
    status = STATUS_DRY_RUN if dry_run else (STATUS_FAILED if failed else STATUS_REPLAYED)
    return ReplayOutcome(source, status, records=len(records), failed_sequence_numbers=failed)


def replay_queue(
    sqs: Any,
    queue_url: str,
    *,
    streams: Any,
    cleaner: SessionCleaner,
    dry_run: bool = False,
    max_messages: int | None = None,
    wait_seconds: int = 1,
    now: Callable[[], datetime] | None = None,
) -> list[ReplayOutcome]:
    """Replay every message of the on-failure queue (up to ``max_messages``).

    A message is deleted only when all its records were cleaned (never in a dry run); any other
    message becomes visible again after :data:`VISIBILITY_TIMEOUT_SECONDS` and stays in the
    queue (its retention, 14 days for the construct's queue, still applies).
    """
    outcomes: list[ReplayOutcome] = []
    seen: set[str] = set()
    release: list[str] = []
    while max_messages is None or len(outcomes) < max_messages:
        want = 10 if max_messages is None else min(10, max_messages - len(outcomes))
        answer = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=want,
            WaitTimeSeconds=wait_seconds,
            VisibilityTimeout=VISIBILITY_TIMEOUT_SECONDS,
        )
        messages = [m for m in answer.get("Messages") or [] if m["MessageId"] not in seen]
        if not messages:
            break
        for message in messages:
            seen.add(message["MessageId"])
            outcome = replay_message(
                message["Body"],
                streams=streams,
                cleaner=cleaner,
                dry_run=dry_run,
                source=f"sqs:{message['MessageId']}",
                now=now,
            )
            if outcome.status == STATUS_REPLAYED:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
                outcome.deleted = True
            elif dry_run:
                release.append(message["ReceiptHandle"])
            outcomes.append(outcome)
    # A dry run leaves the queue as it found it: every message visible again at once (not
    # inside the loop, or the same messages would be received over and over).
    for handle in release:
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0)
    return outcomes


def replay_s3_object(
    s3: Any,
    bucket: str,
    key: str,
    *,
    streams: Any,
    cleaner: SessionCleaner,
    dry_run: bool = False,
    delete: bool = False,
) -> ReplayOutcome:
    """Replay one object of the S3 on-failure destination (its ``payload`` holds the records).

    With ``delete``, the object is deleted once every record was cleaned.
    """
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    outcome = replay_message(
        body, streams=streams, cleaner=cleaner, dry_run=dry_run, source=f"s3://{bucket}/{key}"
    )
    if delete and outcome.status == STATUS_REPLAYED:
        s3.delete_object(Bucket=bucket, Key=key)
        outcome.deleted = True
    return outcome


def environment_of_function(lambda_client: Any, function_name: str) -> dict[str, str]:
    """The environment variables of the deployed cleanup function (``GetFunctionConfiguration``)."""
    answer = lambda_client.get_function_configuration(FunctionName=function_name)
    return dict((answer.get("Environment") or {}).get("Variables") or {})


def main(argv: Iterable[str] | None = None, session: boto3.session.Session | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m session_expiry_runtime.replay",
        description="Replay failed cleanup batches from the on-failure destination.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--queue-url", help="SQS on-failure queue (metadata; 24 h stream limit)")
    source.add_argument("--bucket", help="S3 on-failure destination bucket (with --key)")
    parser.add_argument("--key", help="object key in --bucket")
    parser.add_argument("--delete", action="store_true", help="delete a replayed S3 object")
    parser.add_argument("--dry-run", action="store_true", help="read and report; change nothing")
    parser.add_argument(
        "--max-messages",
        type=int,
        default=None,
        metavar="N",
        help="stop after N queue messages (default: until the queue answers none)",
    )
    parser.add_argument(
        "--env-from-function",
        metavar="NAME",
        help="read the SESSION_EXPIRY_* settings from this deployed cleanup function",
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.bucket and not args.key:
        parser.error("--bucket needs --key")
    try:
        return _replay(args, session or boto3.session.Session())
    except (ClientError, BotoCoreError, ValueError) as exc:
        # An operator runs this by hand: one line saying what failed, not a traceback.
        print(f"replay: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


def _replay(args: argparse.Namespace, session: boto3.session.Session) -> int:
    env = (
        environment_of_function(session.client("lambda"), args.env_from_function)
        if args.env_from_function
        else None
    )
    config = validate_cleanup_config(RuntimeConfig.from_env(env))
    cleaner = SessionCleaner(
        config, build_clients(config, session), MetricsRecorder(config.metrics_namespace)
    )
    streams = session.client("dynamodbstreams")
    if args.queue_url:
        outcomes = replay_queue(
            session.client("sqs"),
            args.queue_url,
            streams=streams,
            cleaner=cleaner,
            dry_run=args.dry_run,
            max_messages=args.max_messages,
        )
    else:
        outcomes = [
            replay_s3_object(
                session.client("s3"),
                args.bucket,
                args.key,
                streams=streams,
                cleaner=cleaner,
                dry_run=args.dry_run,
                delete=args.delete,
            )
        ]
    for outcome in outcomes:
        print(outcome.as_json())
    ok = {STATUS_DRY_RUN} if args.dry_run else {STATUS_REPLAYED}
    return 0 if all(o.status in ok for o in outcomes) else 1


if __name__ == "__main__":  # pragma: no cover - exercised through main() in tests
    sys.exit(main())
