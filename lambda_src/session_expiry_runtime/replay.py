"""Replay batches the cleanup gave up on, from the on-failure destination, never losing one.

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
reshapes the records into the Lambda event form and runs them through :func:`process_batch` with
a :class:`SessionCleaner`. The stream keeps records for 24 hours: an older range
(``TrimmedDataAccessException``, or records missing from its start) is reported as
``aged-out`` and the message is kept, for an operator to decide (the old images are gone; the
archive bucket, if any, still has the sessions that were archived).

**S3 on-failure destination** objects carry the same metadata plus ``payload``, the whole
invocation event; :func:`replay_s3_object` re-runs that payload, with no 24 hour limit. The
payload must cover the range exactly: records of the stream named, the first at the start
sequence number, the last at the end, none outside.

**Only the configured table's streams.** Anyone who can write the queue or the bucket can
write a failure record. Before anything is read or cleaned, ``streamArn`` must be a stream of
the trusted table (:mod:`.replay_trust`: any label, so an earlier stream of the same table is
accepted) and every payload record a DynamoDB record of exactly that stream whose ``Keys``
match its ``OldImage`` (:mod:`.failure_records`), and each payload ``REMOVE`` must name an
item gone from the table (:mod:`.removed_items`: DynamoDB writes a REMOVE only once the item is
deleted, so a payload forged with this stream's own ARN for a live session is caught there);
otherwise the message is kept as ``foreign-stream``, ``still-in-table`` (or ``invalid``), never
deleted. A payload forged for a session that is really gone is still cleaned with the image it
gives, but only of what that session owned: connection, AgentCore session and grant ids are
acted on only when their ownership record names the record's ``Keys`` and incarnation
(:mod:`.claims`), and the scratch prefix derives from the ``Keys``. Write access to the
on-failure destination must still stay with Lambda.

**When a message is deleted.** Only when its whole range was read back (or its payload covers
it), it holds at least one ``REMOVE`` record, and every ``REMOVE`` record in it was cleaned.
Anything else keeps the message and reports why (:data:`STATUSES`). A ``REMOVE`` record with a
step that refused what its image names (a grant not provably the session's own, a scratch prefix
that is not its own: ``GrantsRefused``, ``ScratchPrefixesRefused``; an id whose ownership record
names another session or that has none: ``ResourcesRefused`` ``NotOwned``/``Unclaimed``) is not
cleaned: it is in ``not_cleaned`` as ``refused`` and in ``refused`` with each step and why, and
the message is kept. Ids refused for a reason of normal operation (``Superseded``: a later
session holds the id now; ``Legacy``: an item written before ownership records;
``ClaimExpired``) do not keep it: the record counts as cleaned. Records that are not ``REMOVE``
records are skipped (the cleanup skips them too) and do not keep a message.

**One message's error is that message's.** Malformed metadata (a shard id or sequence number
of a length the Streams API refuses, or anything else botocore refuses with
``ParamValidationError``), an AWS error, an endpoint or timeout error, or a bug are reported for
that message, which is kept; the run goes on with the next message.

**No cleanup target, no run.** Without any of :data:`CLEANUP_TARGET_SETTINGS` (WebSocket
endpoint, grant key, scratch bucket, AgentCore runtime, code interpreter, browser, custom steps)
every record would be skipped as ``MissingAttributes``; replay refuses to start
(:class:`NoCleanupTarget`) and touches no message.

The range of a failed batch covers every record of the batch: records that did succeed are
cleaned again (every step is idempotent), and records the event source mapping's filter had
dropped are cleaned too (the filter does not apply here; the cleanup skips non-REMOVE records).

CLI (same environment variables as the cleanup function; the credentials need
``sqs:ReceiveMessage``/``DeleteMessage``, ``dynamodb:DescribeStream``/``GetShardIterator``/
``GetRecords`` on the stream, ``lambda:ListEventSourceMappings`` or ``dynamodb:DescribeTable``
to find the trusted table, ``dynamodb:GetItem`` on it for S3 objects, and the cleanup's own
permissions)::

    python -m session_expiry_runtime.replay --queue-url URL [--dry-run] [--max-messages N]
    python -m session_expiry_runtime.replay --bucket NAME --key KEY [--dry-run] [--delete]
    python -m session_expiry_runtime.replay ... --env-from-function CLEANUP_FUNCTION_NAME
    python -m session_expiry_runtime.replay ... --stream-arn STREAM_ARN
    python -m session_expiry_runtime.replay ... --steps-path DIR
    python -m session_expiry_runtime.replay --kinesis-stream-arn ARN --stream-arn TABLE_ARN \
        --from T1 --to T2 [--dry-run]

``--kinesis-stream-arn`` (the Kinesis change source): clean again every session of the table
(``--stream-arn``, else ``SESSION_EXPIRY_TABLE_NAME``; required) removed between ``--from``
and ``--to`` (ISO 8601 with a zone), read back from the change stream with ``AT_TIMESTAMP``
(:mod:`.kinesis_replay`); one JSON line per shard that holds such a removal.

``--stream-arn`` must name the settings' table when the settings name one
(:mod:`.replay_trust`): another deployment's stream is refused before anything is read (exit
2). Custom steps (``SESSION_EXPIRY_CUSTOM_STEPS``) import as in the deployed function
(:mod:`.replay_steps`): ``--steps-path DIR``, by default from the app's directory.

Stdout: exactly one JSON object per line, one line per message or object, written as each is
done. Metrics (embedded metric format) and logs go to stderr. Exit status
(:data:`EXIT_ALL_REPLAYED`, :data:`EXIT_SOME_KEPT`, :data:`EXIT_COULD_NOT_RUN`): 0 every message
was replayed (with ``--dry-run``: could be) or the queue was empty; 1 at least one message was
kept (its line says why, e.g. ``foreign-stream``; a record that failed again is in
``failures`` with its cause); 2 the replay could not run (no cleanup target, no stream to
trust, a ``--stream-arn`` of another table than the settings', a custom step that does not
import, bad settings, an unknown function, the queue or object could not be read).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from .cleaner import (
    OUTCOME_CLEANED,
    OUTCOME_DRY_RUN,
    STEP_REFUSED,
    RecordResult,
    SessionCleaner,
    build_clients,
    process_batch,
)
from .config import (
    ACTION_RETIRE_GRANT,
    ENV_AGENT_RUNTIME_ARN,
    ENV_BROWSER_ID,
    ENV_CODE_INTERPRETER_ID,
    ENV_CUSTOM_STEPS,
    ENV_GRANT_KEY_ARN,
    ENV_SCRATCH_BUCKET,
    ENV_WEBSOCKET_ENDPOINT,
    RuntimeConfig,
    validate_cleanup_config,
)
from .decode import parse_record
from .failure_records import (
    BatchInfo,
    ForeignStream,
    ReplayError,
    check_stream,
    parse_failure_record,
    payload_records,
)
from .metrics import MetricsRecorder
from .removed_items import ItemStillInTable, check_removed
from .replay_steps import steps_path, use_steps_path
from .replay_trust import NoTrustedStream, TrustedStreams, resolve_trusted_streams
from .steps.grant import REFUSAL_FIELD as GRANT_REFUSAL_FIELD
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

#: Every REMOVE record of the range was cleaned; the message (object) is deleted.
STATUS_REPLAYED = "replayed"
#: A record failed again, or an AWS call, the endpoint or the replay itself failed: kept.
STATUS_FAILED = "failed"
#: The range is older than the stream's 24 hour retention: kept.
STATUS_AGED_OUT = "aged-out"
#: Not a DynamoDB stream on-failure record, malformed metadata, or a payload that does not
#: cover its range (empty, records of the wrong shape, another stream or range): kept.
STATUS_INVALID = "invalid"
#: The range holds no REMOVE record, or none of its REMOVE records was cleaned (all skipped,
#: e.g. no old image or nothing the configured targets can clean, or a step refused): kept.
STATUS_NOTHING_CLEANED = "nothing-cleaned"
#: Some REMOVE records were cleaned, others were skipped or had a step refused (see
#: ``not_cleaned`` and ``refused``): kept.
STATUS_PARTLY_CLEANED = "partly-cleaned"
#: ``--dry-run``: every REMOVE record would be cleaned (nothing was changed; kept).
STATUS_DRY_RUN = "dry-run"
#: ``DDBStreamBatchInfo.streamArn`` is not a stream of the configured table, or a payload record
#: is not a DynamoDB record of that very stream: kept, whatever ``--delete`` says.
STATUS_FOREIGN_STREAM = "foreign-stream"
#: An S3 payload's REMOVE record names an item the table still holds (forged, or its key was
#: used again since): kept.
STATUS_STILL_IN_TABLE = "still-in-table"
STATUSES = (
    STATUS_REPLAYED,
    STATUS_FAILED,
    STATUS_AGED_OUT,
    STATUS_INVALID,
    STATUS_FOREIGN_STREAM,
    STATUS_STILL_IN_TABLE,
    STATUS_NOTHING_CLEANED,
    STATUS_PARTLY_CLEANED,
    STATUS_DRY_RUN,
)

EXIT_ALL_REPLAYED = 0
EXIT_SOME_KEPT = 1
EXIT_COULD_NOT_RUN = 2

#: The settings that name a cleanup target; without any of them replay refuses to run.
CLEANUP_TARGET_SETTINGS = (
    ENV_WEBSOCKET_ENDPOINT,
    ENV_GRANT_KEY_ARN,
    ENV_SCRATCH_BUCKET,
    ENV_AGENT_RUNTIME_ARN,
    ENV_CODE_INTERPRETER_ID,
    ENV_BROWSER_ID,
    ENV_CUSTOM_STEPS,
)


class RangeAgedOut(ReplayError):
    """The batch's records are no longer in the stream (older than its 24 hour retention)."""


class NoCleanupTarget(ValueError):
    """No cleanup target is configured: every record would be skipped, so replay refuses."""


class QueueReadError(ReplayError):
    """Receiving from the queue failed; ``outcomes`` holds the messages handled before."""

    def __init__(self, detail: str, outcomes: list[ReplayOutcome]) -> None:
        super().__init__(detail)
        self.outcomes = outcomes


@dataclass
class ReplayOutcome:
    """What happened to one failure message or object (one JSON line of the CLI).

    Attributes:
        source: ``sqs:<message id>`` or ``s3://<bucket>/<key>``.
        status: one of :data:`STATUSES`.
        records: records read back (or in the payload).
        removes: ``REMOVE`` records among them.
        cleaned: ``REMOVE`` records cleaned (with ``--dry-run``: that would be).
        failed_sequence_numbers: records that failed again.
        not_cleaned: sequence number -> skip cause (``config.CAUSE_*``) of each ``REMOVE``
            record that was skipped, or ``refused`` when a step refused what it names.
        refused: sequence number -> {step name (``config.ACTION_*``) -> why it refused} of each
            ``REMOVE`` record with a refused step (such a record is never counted as cleaned).
        failures: sequence number -> {failed action (``CleanupFailures``' ``Action``) -> the
            error} of each record that failed again: the cause its log line gives.
        error: why the message was kept, in one sentence; never ``None`` for a kept message
            (``dry-run`` aside): for ``failed`` it names each failed record and its cause.
        deleted: the message (object) was deleted.
    """

    source: str
    status: str
    records: int = 0
    removes: int = 0
    cleaned: int = 0
    failed_sequence_numbers: list[str] = field(default_factory=list)
    not_cleaned: dict[str, str] = field(default_factory=dict)
    refused: dict[str, dict[str, str]] = field(default_factory=dict)
    failures: dict[str, dict[str, str]] = field(default_factory=dict)
    error: str | None = None
    deleted: bool = False

    def as_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


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


def configured_targets(config: RuntimeConfig) -> list[str]:
    """The settings of ``config`` that name a cleanup target (:data:`CLEANUP_TARGET_SETTINGS`)."""
    values = {
        ENV_WEBSOCKET_ENDPOINT: config.websocket_endpoint,
        ENV_GRANT_KEY_ARN: config.grant_key_arn,
        ENV_SCRATCH_BUCKET: config.scratch_bucket,
        ENV_AGENT_RUNTIME_ARN: config.agent_runtime_arn,
        ENV_CODE_INTERPRETER_ID: config.code_interpreter_id,
        ENV_BROWSER_ID: config.browser_id,
        ENV_CUSTOM_STEPS: config.custom_steps,
    }
    return [name for name, value in values.items() if value]


def require_cleanup_target(config: RuntimeConfig) -> None:
    """Refuse to replay with a configuration that can clean nothing.

    Raises:
        NoCleanupTarget: none of :data:`CLEANUP_TARGET_SETTINGS` is set.
    """
    if not configured_targets(config):
        raise NoCleanupTarget(
            f"no cleanup target is configured ({', '.join(CLEANUP_TARGET_SETTINGS)} are all "
            "unset): every record would be skipped and its failure lost. Run with the cleanup "
            "function's environment, or pass --env-from-function CLEANUP_FUNCTION_NAME"
        )


class _RecordingCleaner(SessionCleaner):
    """The caller's cleaner (same clients, metrics and logger), keeping every record's result:
    :func:`process_batch` answers only the failed ones, and replay must know which REMOVE
    records were cleaned and which were skipped."""

    def __init__(self, base: SessionCleaner, *, dry_run: bool) -> None:
        config = replace(base.config, dry_run=True) if dry_run else base.config
        super().__init__(config, base.clients, base.metrics, logger=base.logger)
        self.results: dict[str, RecordResult] = {}
        self._lock = threading.Lock()

    def clean(self, raw: object, **kwargs: Any) -> RecordResult:
        return self._keep(super().clean(raw, **kwargs))

    def not_started(self, raw: object, *, account: bool = True) -> RecordResult:
        return self._keep(super().not_started(raw, account=account))

    def unfinished(self, raw: object) -> RecordResult:
        return self._keep(super().unfinished(raw))

    def unexpected(self, raw: object, exc: BaseException, *, account: bool = True) -> RecordResult:
        return self._keep(super().unexpected(raw, exc, account=account))

    def _keep(self, result: RecordResult) -> RecordResult:
        if result.sequence_number is not None:
            with self._lock:
                self.results[result.sequence_number] = result
        return result


def replay_records(
    records: Sequence[Mapping[str, Any]],
    cleaner: SessionCleaner,
    *,
    dry_run: bool = False,
    source: str = "records",
) -> ReplayOutcome:
    """Run ``records`` (one whole failed range) through the cleanup and judge the outcome.

    ``replayed`` (``dry-run``) only when there is at least one ``REMOVE`` record and every one
    was cleaned (would be); ``failed`` when a record failed again; ``nothing-cleaned`` /
    ``partly-cleaned`` when ``REMOVE`` records were skipped or had a step refused (a refused
    grant or scratch prefix is left in place: the record is not cleaned, see ``refused``). With
    ``dry_run`` (or a dry-run ``cleaner``) the records are classified and previewed, and
    nothing is changed.
    """
    dry_run = dry_run or cleaner.config.dry_run
    recording = _RecordingCleaner(cleaner, dry_run=dry_run)
    response = process_batch({"Records": list(records)}, None, recording)
    failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
    removes = list(
        dict.fromkeys(
            p.sequence_number
            for p in map(parse_record, records)
            if p.event_name == "REMOVE" and p.sequence_number is not None
        )
    )
    done = OUTCOME_DRY_RUN if dry_run else OUTCOME_CLEANED
    results = recording.results
    refused = {s: why for s in removes if s in results and (why := _refusals(results[s]))}
    cleaned = {s for s in removes if s not in refused and _outcome(results.get(s)) == done}
    not_cleaned = {
        s: (STEP_REFUSED if s in refused else _cause(results.get(s)))
        for s in removes
        if s not in cleaned and s not in failed
    }
    outcome = ReplayOutcome(
        source,
        STATUS_FAILED,
        records=len(records),
        removes=len(removes),
        cleaned=len(cleaned),
        failed_sequence_numbers=failed,
        not_cleaned=not_cleaned,
        refused=refused,
        failures={s: _failure(results.get(s)) for s in failed},
    )
    if failed:
        outcome.error = _failed_again(outcome.failures)
    else:
        _judge(outcome, dry_run=dry_run)
    return outcome


def _failure(result: RecordResult | None) -> dict[str, str]:
    """A failed record's cause: each failed action and its error, from its log line."""
    if result is None:
        return {"Unknown": "no result was recorded for this record"}
    errors = result.log.get("errors")
    found = {str(k): str(v) for k, v in errors.items()} if isinstance(errors, Mapping) else {}
    for action in result.failed_actions:
        found.setdefault(action, "failed (no detail)")
    return found or {"Unknown": f"outcome {result.outcome} without an error"}


def _failed_again(failures: Mapping[str, Mapping[str, str]]) -> str:
    """``error`` of a ``failed`` outcome: each failed record and its cause, in one line."""
    causes = "; ".join(
        f"{sequence_number}: " + ", ".join(f"{action}: {text}" for action, text in why.items())
        for sequence_number, why in failures.items()
    )
    return f"{len(failures)} record(s) failed again (see failures): {causes}"


def _outcome(result: RecordResult | None) -> str | None:
    return result.outcome if result else None


def _cause(result: RecordResult | None) -> str:
    return (result.cause or result.outcome) if result else "not-run"


def _refusals(result: RecordResult) -> dict[str, str]:
    """Each step that refused what ``result``'s image names -> why (its log field: the grant
    step's ``grantRefusal``, :meth:`.steps.base.Plan.refused`'s ``refusal``; for the ownership
    check's alarmed refusals, ``ownership: <id> <Refusal>, ...``). The ownership check's
    refusals of normal operation (``Superseded``, ``Legacy``, ``ClaimExpired``) are not."""
    fields = {ACTION_RETIRE_GRANT: GRANT_REFUSAL_FIELD}
    why = {
        step: str(result.log.get(fields.get(step, "refusal"), STEP_REFUSED))
        for step in result.refused_steps
    }
    for step, ids in result.alarmed_refusals().items():
        refused = ", ".join(f"{rid} {reason}" for rid, reason in sorted(ids.items()))
        why[step] = f"{why[step]}; ownership: {refused}" if step in why else f"ownership: {refused}"
    return why


def _judge(outcome: ReplayOutcome, *, dry_run: bool) -> None:
    """Set the status (and why it is kept) of an outcome whose records did not fail again."""
    see = "see not_cleaned for each cause" + (", refused for each step" if outcome.refused else "")
    if not outcome.removes:
        outcome.status = STATUS_NOTHING_CLEANED
        outcome.error = "the range holds no REMOVE record: nothing to clean"
    elif not outcome.cleaned:
        outcome.status = STATUS_NOTHING_CLEANED
        outcome.error = f"no REMOVE record was cleaned ({see})"
    elif outcome.cleaned < outcome.removes:
        outcome.status = STATUS_PARTLY_CLEANED
        outcome.error = f"some REMOVE records were skipped or refused ({see})"
    else:
        outcome.status = STATUS_DRY_RUN if dry_run else STATUS_REPLAYED


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
    (:mod:`.failure_records`) whose ``REMOVE`` names an item gone from the table (``tables``,
    a DynamoDB client, :mod:`.removed_items`; a payload without ``tables`` is kept as
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

    Only messages of the ``trusted`` streams are acted on (:func:`replay_message`). A message
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
    the table (``tables``: a DynamoDB client) is acted on (:func:`replay_message`). With
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


def environment_of_function(lambda_client: Any, function_name: str) -> dict[str, str]:
    """The environment variables of the deployed cleanup function (``GetFunctionConfiguration``)."""
    answer = lambda_client.get_function_configuration(FunctionName=function_name)
    return dict((answer.get("Environment") or {}).get("Variables") or {})


def _to_stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


class StderrMetricsRecorder(MetricsRecorder):
    """The replay CLI's metrics: the same EMF documents, on stderr, so that stdout holds only
    the one JSON line per message."""

    def flush(self, write: Callable[[str], Any] | None = None) -> list[dict[str, Any]]:
        return super().flush(write if write is not None else _to_stderr)


EPILOG = """\
stdout: one JSON object per line, one line per message (object), written as each is done:
  source, status, records, removes, cleaned, failed_sequence_numbers, not_cleaned, refused,
  failures (sequence number -> failed action -> error, for each record that failed again),
  error (why the message was kept; set for every kept message but dry-run), deleted.
  status: replayed (every REMOVE record cleaned; the message is deleted) | dry-run |
  failed | aged-out | invalid | foreign-stream | still-in-table | nothing-cleaned |
  partly-cleaned (all kept). A REMOVE record whose grant or scratch prefix a step refused, or
  with an id whose ownership record names another session or is missing (NotOwned,
  Unclaimed), is not cleaned: not_cleaned says "refused", refused names each step and why;
  kept, even with --delete.
stderr: metrics (embedded metric format), logs, the table whose streams are trusted, and why
  a run could not start.

exit status:
  0  every message was replayed (with --dry-run: could be), or the queue was empty
  1  at least one message was kept: its line says why
  2  could not run: no cleanup target configured, no stream to trust, a --stream-arn of
     another table than the settings' table, a custom step that does not import, bad
     settings, unknown function, the queue or the object could not be read (no message was
     read or changed)

Only failures of the configured table's streams are replayed. Before anything is read or
cleaned: --stream-arn, when given, must be a stream of the settings' table (refused with exit
2 otherwise, naming both tables); DDBStreamBatchInfo.streamArn must be
arn:<partition>:dynamodb:<region>:<account>:table/<table>/stream/<any label> of that table
(an earlier stream of the same table is accepted); in an S3 object, every payload record must
have eventSource aws:dynamodb, eventSourceARN equal to that streamArn, Keys equal to its
OldImage's key attributes, and a sequence number inside the range (the first and last at its
ends), and the item each REMOVE record names must be gone from the table (GetItem, consistent
read). Otherwise the message is kept (foreign-stream, still-in-table or invalid), even with
--delete. The settings' table comes from the DynamoDB event source mappings of the cleanup
function (--env-from-function, else AWS_LAMBDA_FUNCTION_NAME), else SESSION_EXPIRY_TABLE_NAME
(DescribeTable); --stream-arn narrows the trust to its table, which must be that one (it is the
only source when the settings name no table); without any, replay refuses to start. A payload
forged with this stream's ARN for a session that is really gone is still cleaned with the image
it gives: only Lambda should be able to write the on-failure queue or bucket.

Settings: the cleanup function's SESSION_EXPIRY_* environment variables, or
--env-from-function. Without any cleanup target (WebSocket endpoint, grant key, scratch bucket,
AgentCore runtime, code interpreter, browser or custom steps) replay refuses to start.

Custom steps import as in the deployed function, whose code root holds each step's code
directory's contents: --steps-path DIR (repeatable), else, for each step's package, the current
directory, then sys.path, then the cleanup function's code staged in ./cdk.out by the latest
synth. Run replay from the app's directory (where cdk.json is), after cdk synth or deploy.
"""


def _positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r}: expected a positive integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{raw!r}: expected a positive integer")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m session_expiry_runtime.replay",
        description="Replay failed cleanup batches from the on-failure destination; a message "
        "is deleted only when every REMOVE record of its range was cleaned.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--queue-url", help="SQS on-failure queue (metadata; 24 h stream limit)")
    source.add_argument("--bucket", help="S3 on-failure destination bucket (with --key)")
    source.add_argument(
        "--kinesis-stream-arn",
        metavar="ARN",
        help="the Kinesis change stream (change_source=ChangeSource.kinesis()): clean again "
        "every session removed between --from and --to",
    )
    parser.add_argument("--from", dest="start", metavar="TIME", help="ISO 8601, with a zone")
    parser.add_argument("--to", dest="end", metavar="TIME", help="ISO 8601, with a zone")
    parser.add_argument("--key", help="object key in --bucket")
    parser.add_argument(
        "--delete", action="store_true", help="delete the S3 object once it is replayed"
    )
    parser.add_argument("--dry-run", action="store_true", help="read and report; change nothing")
    parser.add_argument(
        "--max-messages",
        type=_positive_int,
        default=None,
        metavar="N",
        help="stop after N queue messages (default: until the queue answers none)",
    )
    parser.add_argument(
        "--env-from-function",
        metavar="NAME",
        help="read the SESSION_EXPIRY_* settings from this deployed cleanup function, and "
        "trust the streams of the table its event source mapping reads",
    )
    parser.add_argument(
        "--stream-arn",
        metavar="ARN",
        help="trust the streams of this stream's table (any label) and no other; it must be "
        "the settings' table (the cleanup function's event source mapping, else "
        "SESSION_EXPIRY_TABLE_NAME) when they name one; default: that table. With "
        "--kinesis-stream-arn: the table whose REMOVE records are cleaned (needed when the "
        "settings name no table, as the deployed cleanup function's do not)",
    )
    parser.add_argument(
        "--steps-path",
        metavar="DIR",
        action="append",
        default=[],
        help="a directory holding the custom steps' packages, as a CustomCleanupStep's code "
        "names it (repeatable; put first on sys.path). Default: each step's package from the "
        "current directory, else where Python finds it, else the cleanup function's code "
        "staged in ./cdk.out by the latest synth: run replay from the app's directory",
    )
    return parser


def main(argv: Iterable[str] | None = None, session: boto3.session.Session | None = None) -> int:
    """The CLI; returns the exit status (:data:`EXIT_ALL_REPLAYED`, :data:`EXIT_SOME_KEPT`,
    :data:`EXIT_COULD_NOT_RUN`)."""
    parser = _parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.bucket and not args.key:
        parser.error("--bucket needs --key")
    if args.kinesis_stream_arn and not (args.start and args.end):
        parser.error("--kinesis-stream-arn needs --from and --to")
    _refuse_options_of_another_source(parser, args)
    try:
        return _replay(args, session or boto3.session.Session())
    except QueueReadError as exc:
        _to_stderr(f"replay: {exc}\n")
        return EXIT_SOME_KEPT if exc.outcomes else EXIT_COULD_NOT_RUN
    except (ClientError, BotoCoreError, ValueError) as exc:
        # An operator runs this by hand: one line saying what failed, not a traceback.
        _to_stderr(f"replay: {type(exc).__name__}: {exc}\n")
        return EXIT_COULD_NOT_RUN


#: option (its argparse dest) -> the source it belongs to, for its refusal message
_SOURCE_OPTIONS = {
    "start": ("--from", "kinesis_stream_arn", "--kinesis-stream-arn ARN"),
    "end": ("--to", "kinesis_stream_arn", "--kinesis-stream-arn ARN"),
    "key": ("--key", "bucket", "--bucket B"),
    "delete": ("--delete", "bucket", "--bucket B"),
}


def _refuse_options_of_another_source(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> None:
    """An option of another source (``--from`` with ``--queue-url``) is refused, not ignored:
    the operator meant something this run would not do. Exits 2 (``parser.error``)."""
    for dest, (option, source, expected) in _SOURCE_OPTIONS.items():
        value = getattr(args, dest)
        if value not in (None, False) and not getattr(args, source):
            parser.error(
                f"{option} {'' if value is True else repr(value) + ' '}does not apply to this "
                f"source: expected it only with {expected}"
            )


def _emit(outcome: ReplayOutcome) -> None:
    sys.stdout.write(outcome.as_json() + "\n")
    sys.stdout.flush()


def _trusted_streams(
    args: argparse.Namespace, config: RuntimeConfig, session: boto3.session.Session
) -> TrustedStreams:
    """The streams this run may act on (:func:`.replay_trust.resolve_trusted_streams`); the
    function is ``--env-from-function``, else Lambda's ``AWS_LAMBDA_FUNCTION_NAME`` when replay
    runs with the cleanup function's own environment."""
    function = args.env_from_function or os.environ.get("AWS_LAMBDA_FUNCTION_NAME")
    trusted = resolve_trusted_streams(
        session,
        stream_arn=args.stream_arn,
        function_names=[function] if function else [],
        table_name=config.table_name,
    )
    _to_stderr(
        f"replay: trusting the streams of {', '.join(trusted.table_arns)} "
        f"(from {trusted.source}) and no other\n"
    )
    return trusted


def _cleaner(
    args: argparse.Namespace, config: RuntimeConfig, session: boto3.session.Session
) -> SessionCleaner:
    """The cleanup, its custom steps imported from where the deployed function imports them
    (:mod:`.replay_steps`).

    Raises:
        ValueError: a custom step does not import (the message says where replay looked).
    """
    directories = steps_path(config.custom_steps, args.steps_path)
    use_steps_path(directories)
    try:
        return SessionCleaner(
            config, build_clients(config, session), StderrMetricsRecorder(config.metrics_namespace)
        )
    except ValueError as exc:
        if not config.custom_steps:
            raise
        looked = ", ".join(str(d) for d in directories) or "nowhere beyond sys.path"
        raise ValueError(
            f"{exc}. Replay imports custom steps as the deployed function does: from "
            "--steps-path DIR (the directory your CustomCleanupStep's code names), else from the "
            "current directory, sys.path or the cleanup function's code staged in ./cdk.out by "
            f"the latest synth (run replay from the app's directory); it added: {looked}"
        ) from exc


def _replay(args: argparse.Namespace, session: boto3.session.Session) -> int:
    env = (
        environment_of_function(session.client("lambda"), args.env_from_function)
        if args.env_from_function
        else None
    )
    config = validate_cleanup_config(RuntimeConfig.from_env(env))
    require_cleanup_target(config)
    if args.kinesis_stream_arn:
        return _replay_kinesis(args, config, session)
    trusted = _trusted_streams(args, config, session)
    cleaner = _cleaner(args, config, session)
    streams = session.client("dynamodbstreams")
    dry_run = bool(args.dry_run or config.dry_run)
    if args.queue_url:
        outcomes = replay_queue(
            session.client("sqs"),
            args.queue_url,
            streams=streams,
            cleaner=cleaner,
            trusted=trusted,
            dry_run=dry_run,
            max_messages=args.max_messages,
            on_outcome=_emit,
        )
    else:
        outcome = replay_s3_object(
            session.client("s3"),
            args.bucket,
            args.key,
            streams=streams,
            cleaner=cleaner,
            trusted=trusted,
            tables=session.client("dynamodb"),
            dry_run=dry_run,
            delete=args.delete,
        )
        _emit(outcome)
        outcomes = [outcome]
    ok = {STATUS_DRY_RUN} if dry_run else {STATUS_REPLAYED}
    return EXIT_ALL_REPLAYED if all(o.status in ok for o in outcomes) else EXIT_SOME_KEPT


def _kinesis_table(
    args: argparse.Namespace, config: RuntimeConfig, session: boto3.session.Session
) -> str:
    """The one table whose ``REMOVE`` records a Kinesis time-range replay cleans: a Kinesis
    change stream may carry several tables' changes. ``--stream-arn`` (this deployment's table
    or stream ARN), else ``SESSION_EXPIRY_TABLE_NAME`` (the construct sets it on the cleanup
    function of a Kinesis change source); both must agree
    (:func:`.replay_trust.resolve_trusted_streams`).

    Raises:
        NoTrustedStream: neither names a table.
        StreamArnNotOfSettingsTable, ValueError: see :func:`.replay_trust.resolve_trusted_streams`.
    """
    if not args.stream_arn and not config.table_name:
        raise NoTrustedStream(
            f"--kinesis-stream-arn {args.kinesis_stream_arn}: the settings name no table (a "
            "cleanup function deployed before the construct set it has none) and a Kinesis "
            "change stream may carry "
            "several tables' changes: expected --stream-arn TABLE_ARN (this deployment's "
            "table) or SESSION_EXPIRY_TABLE_NAME"
        )
    trusted = resolve_trusted_streams(
        session, stream_arn=args.stream_arn, table_name=config.table_name
    )
    _to_stderr(
        f"replay: cleaning the REMOVE records of {trusted.table_arns[0]} (from "
        f"{trusted.source}) and no other table's\n"
    )
    return trusted.table_arns[0].split(":table/", 1)[1]


def _replay_kinesis(
    args: argparse.Namespace, config: RuntimeConfig, session: boto3.session.Session
) -> int:
    """``--kinesis-stream-arn`` with ``--from``/``--to`` (:mod:`.kinesis_replay`)."""
    from . import kinesis_replay  # imports this module: loaded only when asked for

    kinesis_replay.check_stream_arn(args.kinesis_stream_arn)
    start, end = kinesis_replay.parse_time(args.start), kinesis_replay.parse_time(args.end)
    kinesis_replay.check_range(start, end)
    if args.env_from_function:
        kinesis_replay.check_trusted(
            session.client("lambda"), args.env_from_function, args.kinesis_stream_arn
        )
    config = replace(config, table_name=_kinesis_table(args, config, session))
    kinesis = session.client("kinesis")
    kinesis_replay.check_start(kinesis, args.kinesis_stream_arn, start, datetime.now(timezone.utc))
    dry_run = bool(args.dry_run or config.dry_run)
    outcomes = kinesis_replay.replay_time_range(
        kinesis,
        args.kinesis_stream_arn,
        start=start,
        end=end,
        cleaner=_cleaner(args, config, session),
        dry_run=dry_run,
    )
    for outcome in outcomes:
        _emit(outcome)
    ok = {STATUS_DRY_RUN} if dry_run else {STATUS_REPLAYED}
    return EXIT_ALL_REPLAYED if all(o.status in ok for o in outcomes) else EXIT_SOME_KEPT


if __name__ == "__main__":  # pragma: no cover - exercised through main() in tests
    sys.exit(main())
