"""A local stand-in for Lambda's DynamoDB Streams event source mapping (ESM) poller.

It reads a stream through the DynamoDB Streams API and invokes a handler the way the
mapping does, following the documented semantics (Lambda developer guide: "Using AWS Lambda
with Amazon DynamoDB", "Lambda parameters for Amazon DynamoDB event source mappings",
"Configuring partial batch response with DynamoDB and Lambda", "Retain discarded records for
a DynamoDB event source", "Control which events Lambda sends to your function"):

* **Reading**: every shard from its starting position (TRIM_HORIZON or LATEST), in order;
  a checkpoint per shard, so a later
  [`EventSourceMappingPoller.poll`][cdk_session_expiry.testing.EventSourceMappingPoller.poll]
  delivers only
  newer records.
* **Filtering**: each record (in its Lambda event shape) is matched against the mapping's
  FilterCriteria with moto's EventBridge pattern matcher; filters are OR-ed, and a record that
  matches none is dropped for good. No filters: every record is delivered.
* **Batching**: at most ``BatchSize`` records per invocation, in sequence-number order.
* **Partial batch response** (only with ``ReportBatchItemFailures``; ignored otherwise):
  ``{"batchItemFailures": [{"itemIdentifier": seq}, ...]}`` checkpoints before the lowest
  reported sequence number and re-delivers that record and everything after it. A ``None``
  response, ``{}``, or a missing/empty/``None`` ``batchItemFailures`` list is complete success.
  An empty or ``None`` ``itemIdentifier``, a wrong key name, or an identifier that is not a
  sequence number of the batch fails the whole batch.
* **Function errors** (the handler raises, or the response fails the whole batch): the batch
  is retried. With ``BisectBatchOnFunctionError`` a failing batch of more than one record is
  split into halves first (first half first), which does not consume retries.
* **Bounded retries**: ``MaximumRetryAttempts`` retries per batch (-1: until the records
  expire); ``MaximumRecordAgeInSeconds`` discards records older than that before an invocation.
* **Continuous mode**
  ([`EventSourceMappingPoller.start`][cdk_session_expiry.testing.EventSourceMappingPoller.start]):
  polls on its own thread every
  ``poll_interval`` seconds (Lambda polls a stream's shards about four times a second), so
  records are delivered while the application runs, without a call; `stop` ends it
  cleanly. Polls are serialised (a manual `poll` waits for the thread's), so each record
  is delivered once, apart from the documented retries of a failing batch.
* **On-failure destination**: a batch whose retries are exhausted, or records that are too
  old, are reported to the destination — SQS and SNS receive only metadata
  (``DDBStreamBatchInfo``: shard id, start/end sequence numbers, stream ARN, batch size;
  ``requestContext.condition``), an S3 destination the whole invocation record — and the
  poller moves on. Without a destination the records are discarded.

What differs from AWS is listed in the module ``cdk_session_expiry.testing`` docstring.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdk_session_expiry.testing._stream_records import sequence_number, to_lambda_record

Handler = Callable[[dict[str, Any], Any], Any]

CONDITION_RETRIES_EXHAUSTED = "RetryAttemptsExhausted"
CONDITION_RECORD_AGE_EXCEEDED = "RecordAgeExceeded"


class ShardBlocked(RuntimeError):
    """A batch keeps failing and the mapping would retry it until its records expire.

    With ``MaximumRetryAttempts=-1`` (AWS's default) Lambda retries a failing batch until its
    records reach ``MaximumRecordAgeInSeconds`` or leave the stream (24 hours), blocking the
    shard. The local poller stops after ``stall_after_attempts`` attempts instead of spinning.
    """


@dataclass(frozen=True)
class EventSourceMappingConfig:
    """The settings of one DynamoDB Streams event source mapping, as Lambda reports them.

    Build it from ``list_event_source_mappings`` with
    [`from_api`][cdk_session_expiry.testing.EventSourceMappingConfig.from_api]; tests build it
    directly. Defaults are AWS's defaults.
    """

    event_source_arn: str
    function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:local"
    uuid: str = "local"
    batch_size: int = 100
    filter_patterns: tuple[str, ...] = ()
    bisect_batch_on_function_error: bool = False
    maximum_retry_attempts: int = -1
    maximum_record_age_seconds: int = -1
    report_batch_item_failures: bool = False
    on_failure_destination: str | None = None
    starting_position: str = "TRIM_HORIZON"
    enabled: bool = True

    @classmethod
    def from_api(cls, mapping: Mapping[str, Any]) -> EventSourceMappingConfig:
        """From one element of ``lambda:ListEventSourceMappings()["EventSourceMappings"]``."""
        filters = (mapping.get("FilterCriteria") or {}).get("Filters") or []
        destination = ((mapping.get("DestinationConfig") or {}).get("OnFailure") or {}).get(
            "Destination"
        )
        state = mapping.get("State", "Enabled")
        return cls(
            event_source_arn=mapping["EventSourceArn"],
            function_arn=mapping["FunctionArn"],
            uuid=mapping.get("UUID", "local"),
            batch_size=int(mapping.get("BatchSize", 100)),
            filter_patterns=tuple(f.get("Pattern", "") for f in filters),
            bisect_batch_on_function_error=bool(mapping.get("BisectBatchOnFunctionError", False)),
            maximum_retry_attempts=int(mapping.get("MaximumRetryAttempts", -1)),
            maximum_record_age_seconds=int(mapping.get("MaximumRecordAgeInSeconds", -1)),
            report_batch_item_failures="ReportBatchItemFailures"
            in (mapping.get("FunctionResponseTypes") or []),
            on_failure_destination=destination or None,
            starting_position=mapping.get("StartingPosition", "TRIM_HORIZON"),
            enabled=state in ("Enabled", "Enabling", "Creating", "Updating"),
        )


@dataclass(frozen=True)
class Invocation:
    """One invocation of the handler: which records, and what came of it.

    ``outcome`` is ``"success"``, ``"partial"`` (a valid partial batch response),
    ``"function_error"`` (the handler raised) or ``"invalid_response"`` (the partial batch
    response failed the whole batch).
    """

    shard_id: str
    sequence_numbers: tuple[str, ...]
    outcome: str
    retry: int
    detail: str = ""


@dataclass
class PollReport:
    """What one or more
    [`EventSourceMappingPoller.poll`][cdk_session_expiry.testing.EventSourceMappingPoller.poll]
    calls did (cumulative).

    Attributes:
        records_read: stream records read (GetRecords), before filtering.
        records_filtered_out: records no filter pattern matched: dropped for good, as Lambda does.
        invocations: every handler invocation in order, as
            [`Invocation`][cdk_session_expiry.testing.Invocation] (``shard_id``,
            ``sequence_numbers``, ``outcome``, ``retry``, ``detail``);
            [`outcomes`][cdk_session_expiry.testing.PollReport.outcomes] counts
            them by outcome.
        bisections: failing batches split in two (``BisectBatchOnFunctionError``).
        retries: re-deliveries of a batch (or its remainder after a partial batch response).
        records_sent_to_on_failure: records given up on (retries exhausted or too old).
        on_failure_messages: the messages sent to the on-failure destination
            (``DDBStreamBatchInfo`` shape).
        checkpoints: shard id → sequence number of the last record processed in that shard.
        function_errors: invocations whose handler raised or answered an invalid partial batch
            response (property).
        partial_failures: invocations answered with a valid partial batch response (property).
    """

    records_read: int = 0
    records_filtered_out: int = 0
    invocations: list[Invocation] = field(default_factory=list)
    bisections: int = 0
    retries: int = 0
    records_sent_to_on_failure: int = 0
    on_failure_messages: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: dict[str, str] = field(default_factory=dict)

    @property
    def function_errors(self) -> int:
        """Invocations whose handler raised or answered an invalid partial batch response."""
        return sum(
            1 for i in self.invocations if i.outcome in ("function_error", "invalid_response")
        )

    @property
    def partial_failures(self) -> int:
        """Invocations answered with a valid partial batch response."""
        return sum(1 for i in self.invocations if i.outcome == "partial")

    def outcomes(self) -> dict[str, int]:
        """Invocations counted by outcome, e.g. ``{"success": 3, "partial": 1}``."""
        counts: dict[str, int] = {}
        for invocation in self.invocations:
            counts[invocation.outcome] = counts.get(invocation.outcome, 0) + 1
        return counts


class _LocalContext:
    """The parts of Lambda's context object handlers use."""

    def __init__(self, function_arn: str, timeout_ms: int) -> None:
        self.invoked_function_arn = function_arn
        self.function_name = function_arn.rsplit(":", 1)[-1]
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = "128"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + timeout_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def pattern_matcher(patterns: Iterable[str]) -> Callable[[Mapping[str, Any]], bool]:
    """A predicate that is true when a record matches any of ``patterns`` (OR).

    Uses moto's EventBridge pattern matcher (``moto.events.models.EventPattern``), the same
    pattern language Lambda event filtering uses. No patterns: everything matches.

    Raises:
        ValueError: a pattern is not valid JSON or not a valid pattern.
    """
    from moto.events.models import EventPattern

    loaded = []
    for raw in patterns:
        try:
            loaded.append(EventPattern.load(raw))
        except Exception as err:
            raise ValueError(f"invalid filter pattern {raw!r}: {err}") from err
    if not loaded:
        return lambda record: True

    def matches(record: Mapping[str, Any]) -> bool:
        return any(p.matches_event(dict(record)) for p in loaded)  # type: ignore[arg-type]

    return matches


class _BatchFailed(Exception):
    def __init__(self, outcome: str, detail: str) -> None:
        super().__init__(detail)
        self.outcome = outcome
        self.detail = detail


class EventSourceMappingPoller:
    """Deliver a DynamoDB stream to ``handler`` with an event source mapping's semantics.

    Args:
        config: the mapping, usually
            [`EventSourceMappingConfig.from_api`][cdk_session_expiry.testing.EventSourceMappingConfig.from_api]
            of the deployed one.
        handler: ``handler(event, context)``; raising is a function error.
        clients: a callable returning a boto3 client for a service name (``dynamodbstreams``,
            and ``sqs``/``sns``/``s3`` for the on-failure destination), e.g.
            [`LocalEmulator.client`][cdk_session_expiry.testing.LocalEmulator.client].
        clock: epoch seconds, for ``MaximumRecordAgeInSeconds``. Default: ``time.time``.
        function_timeout_ms: what ``context.get_remaining_time_in_millis()`` starts from.
            Default: 3,000 (Lambda's default timeout).
        stall_after_attempts: attempts on one batch after which
            [`ShardBlocked`][cdk_session_expiry.testing.ShardBlocked] is raised
            when retries are unbounded. Default: 50.
        on_invocation: called after each invocation (progress reporting).
    """

    def __init__(
        self,
        config: EventSourceMappingConfig,
        handler: Handler,
        *,
        clients: Callable[[str], Any],
        clock: Callable[[], float] = time.time,
        function_timeout_ms: int = 3_000,
        stall_after_attempts: int = 50,
        on_invocation: Callable[[Invocation], None] | None = None,
    ) -> None:
        if config.batch_size < 1:
            raise ValueError(f"BatchSize {config.batch_size}: expected 1..10,000")
        self.config = config
        self.handler = handler
        self._clients = clients
        self._clock = clock
        self._timeout_ms = function_timeout_ms
        self._stall_after = stall_after_attempts
        self._on_invocation = on_invocation
        self._matches = pattern_matcher(config.filter_patterns)
        self._positions: dict[str, str | None] = {}
        self._region = config.event_source_arn.split(":")[3]
        self.report = PollReport()
        #: Serialises polls (the continuous thread's and manual ones) and guards the report.
        self._poll_lock = threading.RLock()
        #: Notified after every poll of the continuous thread (see
        #: [`wait_until`][cdk_session_expiry.testing.EventSourceMappingPoller.wait_until]).
        self._polled = threading.Condition()
        self._polls = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        if config.starting_position == "LATEST":
            self._start_at_latest()

    # -- reading -----------------------------------------------------------------------------
    def _shards(self) -> list[dict[str, Any]]:
        streams = self._clients("dynamodbstreams")
        shards: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"StreamArn": self.config.event_source_arn}
        while True:
            desc = streams.describe_stream(**kwargs)["StreamDescription"]
            shards.extend(desc.get("Shards", []))
            last = desc.get("LastEvaluatedShardId")
            if not last:
                break
            kwargs["ExclusiveStartShardId"] = last
        # Parents before children: records of one item stay in order across a split.
        ids = {s["ShardId"] for s in shards}
        ordered: list[dict[str, Any]] = []
        placed: set[str] = set()
        while len(ordered) < len(shards):
            for shard in shards:
                parent = shard.get("ParentShardId")
                if shard["ShardId"] not in placed and (parent not in ids or parent in placed):
                    ordered.append(shard)
                    placed.add(shard["ShardId"])
        return ordered

    def _start_at_latest(self) -> None:
        streams = self._clients("dynamodbstreams")
        for shard in self._shards():
            iterator = streams.get_shard_iterator(
                StreamArn=self.config.event_source_arn,
                ShardId=shard["ShardId"],
                ShardIteratorType="LATEST",
            )["ShardIterator"]
            records = streams.get_records(ShardIterator=iterator, Limit=1).get("Records", [])
            # LATEST on an idle shard: remember "nothing read yet, start after what exists".
            self._positions[shard["ShardId"]] = self._last_sequence(shard) if not records else None

    def _last_sequence(self, shard: Mapping[str, Any]) -> str | None:
        streams = self._clients("dynamodbstreams")
        iterator = streams.get_shard_iterator(
            StreamArn=self.config.event_source_arn,
            ShardId=shard["ShardId"],
            ShardIteratorType="TRIM_HORIZON",
        )["ShardIterator"]
        last: str | None = None
        while True:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            records = page.get("Records", [])
            if not records:
                return last
            last = str(records[-1]["dynamodb"]["SequenceNumber"])
            iterator = page["NextShardIterator"]

    def _read_new(self, shard_id: str) -> list[dict[str, Any]]:
        streams = self._clients("dynamodbstreams")
        position = self._positions.get(shard_id)
        if position is None:
            iterator = streams.get_shard_iterator(
                StreamArn=self.config.event_source_arn,
                ShardId=shard_id,
                ShardIteratorType="TRIM_HORIZON",
            )["ShardIterator"]
        else:
            iterator = streams.get_shard_iterator(
                StreamArn=self.config.event_source_arn,
                ShardId=shard_id,
                ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                SequenceNumber=position,
            )["ShardIterator"]
        out: list[dict[str, Any]] = []
        last = int(position) if position is not None else -1
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            # Sequence numbers only grow within a shard; a page with nothing beyond what was
            # read (an emulator repeating a number) ends the read instead of looping on it.
            records = [r for r in page.get("Records", []) if int(sequence_number(r)) > last]
            if not records:
                break
            last = int(sequence_number(records[-1]))
            out.extend(
                to_lambda_record(r, stream_arn=self.config.event_source_arn, region=self._region)
                for r in records
            )
            iterator = page.get("NextShardIterator")
        return out

    # -- the loop ----------------------------------------------------------------------------
    def poll(self) -> PollReport:
        """Deliver every record written since the last poll; return the cumulative report.

        Returns when each shard's records have been delivered, filtered out, or handed to the
        on-failure destination.

        Raises:
            ShardBlocked: unbounded retries on a batch that keeps failing.
        """
        with self._poll_lock:
            if not self.config.enabled:
                return self.report
            self._poll_shards()
            return self.report

    def _poll_shards(self) -> None:
        for shard in self._shards():
            shard_id = shard["ShardId"]
            while True:
                records = self._read_new(shard_id)
                if not records:
                    break
                self.report.records_read += len(records)
                matching = [r for r in records if self._matches(r)]
                self.report.records_filtered_out += len(records) - len(matching)
                size = self.config.batch_size
                for start in range(0, len(matching), size):
                    self._deliver(shard_id, matching[start : start + size])
                # Filtered-out records are consumed too: the checkpoint passes them.
                self._checkpoint(shard_id, sequence_number(records[-1]))

    # -- continuous mode ---------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """True while the continuous polling thread runs."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def polls(self) -> int:
        """Polls the continuous thread has completed."""
        return self._polls

    def start(self, *, poll_interval: float = 0.25) -> EventSourceMappingPoller:
        """Poll on a background thread every ``poll_interval`` seconds until
        [`stop`][cdk_session_expiry.testing.EventSourceMappingPoller.stop].

        Like Lambda's poller, records reach the handler without a call, within about
        ``poll_interval`` plus the invocation. A disabled mapping is polled as usual (nothing
        is delivered; the position is kept).

        Raises:
            RuntimeError: already running. ValueError: ``poll_interval`` is not positive.
        """
        if poll_interval <= 0:
            raise ValueError(f"poll_interval={poll_interval!r}: expected seconds > 0")
        if self.running:
            raise RuntimeError("the poller is already running")
        self._stop.clear()
        self._error = None
        self._thread = threading.Thread(
            target=self._run, args=(poll_interval,), name="esm-poller", daemon=True
        )
        self._thread.start()
        return self

    def _run(self, poll_interval: float) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except BaseException as err:  # reported by stop(), like a stuck mapping's state
                self._error = err
                self._stop.set()
            with self._polled:
                self._polls += 1
                self._polled.notify_all()
            self._stop.wait(poll_interval)

    def stop(self, *, timeout: float = 30.0) -> PollReport:
        """Stop the thread after the poll in progress (its invocation finishes); return the
        cumulative report.

        Raises:
            TimeoutError: the thread did not stop within ``timeout`` seconds.
            ShardBlocked (or the error that stopped the thread): polling failed meanwhile.
        """
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                raise TimeoutError(f"the poller did not stop within {timeout} s")
        self._thread = None
        with self._polled:
            self._polled.notify_all()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self.report

    def wait_until(self, predicate: Callable[[PollReport], bool], *, timeout: float) -> bool:
        """Block until ``predicate(report)`` holds after a poll of the continuous thread, the
        thread stops, or ``timeout`` seconds pass. Returns whether the predicate held."""
        deadline = time.monotonic() + timeout
        with self._polled:
            while True:
                with self._poll_lock:
                    if predicate(self.report):
                        return True
                left = deadline - time.monotonic()
                if left <= 0 or not self.running:
                    return False
                self._polled.wait(left)

    def _checkpoint(self, shard_id: str, seq: str) -> None:
        self._positions[shard_id] = seq
        self.report.checkpoints[shard_id] = seq

    def _deliver(self, shard_id: str, batch: list[dict[str, Any]]) -> None:
        max_retries = self.config.maximum_retry_attempts
        pending: deque[tuple[list[dict[str, Any]], int, int]] = deque([(batch, 0, 0)])
        while pending:
            records, retries, invokes = pending.popleft()
            records = self._discard_too_old(shard_id, records, invokes)
            if not records:
                continue
            try:
                self._invoke(shard_id, records, retries)
            except _BatchFailed as failed:
                invokes += 1
                if failed.outcome == "partial":
                    index = int(failed.detail)
                    remaining = records[index:]
                    if index:
                        self._checkpoint(shard_id, sequence_number(records[index - 1]))
                    if 0 <= max_retries <= retries:
                        self._send_on_failure(
                            shard_id, remaining, CONDITION_RETRIES_EXHAUSTED, invokes
                        )
                    else:
                        self._count_retry(retries)
                        pending.appendleft((remaining, retries + 1, invokes))
                    continue
                if self.config.bisect_batch_on_function_error and len(records) > 1:
                    half = len(records) // 2
                    self.report.bisections += 1
                    pending.appendleft((records[half:], retries, invokes))
                    pending.appendleft((records[:half], retries, invokes))
                    continue
                if 0 <= max_retries <= retries:
                    self._send_on_failure(shard_id, records, CONDITION_RETRIES_EXHAUSTED, invokes)
                    continue
                if max_retries < 0 and invokes >= self._stall_after:
                    raise ShardBlocked(
                        f"batch {sequence_number(records[0])}..{sequence_number(records[-1])} on "
                        f"{shard_id} failed {invokes} times ({failed.detail}); with "
                        "MaximumRetryAttempts=-1 Lambda retries it until the records are "
                        f"{self.config.maximum_record_age_seconds}s old or leave the stream "
                        "(24 h), blocking the shard"
                    ) from failed
                self._count_retry(retries)
                pending.appendleft((records, retries + 1, invokes))
                continue
            self._checkpoint(shard_id, sequence_number(records[-1]))

    def _count_retry(self, retries: int) -> None:
        self.report.retries += 1

    def _discard_too_old(
        self, shard_id: str, records: list[dict[str, Any]], invokes: int
    ) -> list[dict[str, Any]]:
        max_age = self.config.maximum_record_age_seconds
        if max_age < 0:
            return records
        now = self._clock()
        keep_from = 0
        for index, record in enumerate(records):
            created = float(record["dynamodb"].get("ApproximateCreationDateTime", now))
            if now - created > max_age:
                keep_from = index + 1
        if keep_from:
            self._send_on_failure(
                shard_id, records[:keep_from], CONDITION_RECORD_AGE_EXCEEDED, invokes
            )
        return records[keep_from:]

    def _invoke(self, shard_id: str, records: list[dict[str, Any]], retry: int) -> None:
        seqs = tuple(sequence_number(r) for r in records)
        context = _LocalContext(self.config.function_arn, self._timeout_ms)
        event = {"Records": json.loads(json.dumps(records))}
        try:
            response = self.handler(event, context)
        except Exception as err:
            self._record(
                Invocation(shard_id, seqs, "function_error", retry, f"{type(err).__name__}: {err}")
            )
            raise _BatchFailed("function_error", f"{type(err).__name__}: {err}") from err
        if not self.config.report_batch_item_failures:
            self._record(Invocation(shard_id, seqs, "success", retry))
            return
        verdict = _interpret_partial_batch_response(response, seqs)
        if verdict is None:
            self._record(Invocation(shard_id, seqs, "success", retry))
            return
        if isinstance(verdict, int):
            self._record(Invocation(shard_id, seqs, "partial", retry, seqs[verdict]))
            raise _BatchFailed("partial", str(verdict))
        self._record(Invocation(shard_id, seqs, "invalid_response", retry, verdict))
        raise _BatchFailed("invalid_response", verdict)

    def _record(self, invocation: Invocation) -> None:
        self.report.invocations.append(invocation)
        if self._on_invocation is not None:
            self._on_invocation(invocation)

    # -- on-failure destination -------------------------------------------------------------
    def _send_on_failure(
        self, shard_id: str, records: Sequence[dict[str, Any]], condition: str, invokes: int
    ) -> None:
        if not records:
            return
        self._checkpoint(shard_id, sequence_number(records[-1]))
        self.report.records_sent_to_on_failure += len(records)
        message = _on_failure_record(
            records,
            shard_id=shard_id,
            stream_arn=self.config.event_source_arn,
            function_arn=self.config.function_arn,
            condition=condition,
            approximate_invoke_count=invokes,
        )
        self.report.on_failure_messages.append(message)
        destination = self.config.on_failure_destination
        if not destination:
            return
        service = destination.split(":")[2]
        if service == "sqs":
            account, name = destination.split(":")[4], destination.split(":")[5]
            sqs = self._clients("sqs")
            url = sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]
            sqs.send_message(QueueUrl=url, MessageBody=json.dumps(message))
        elif service == "sns":
            self._clients("sns").publish(TopicArn=destination, Message=json.dumps(message))
        elif service == "s3":
            bucket = destination.split(":::", 1)[1]
            stamp = dt.datetime.now(dt.timezone.utc)
            key = (
                f"aws/lambda/{self.config.uuid}/{shard_id}/{stamp:%Y/%m/%d}/"
                f"{stamp:%Y-%m-%dT%H.%M.%S}-{uuid.uuid4()}"
            )
            body = {**message, "payload": json.dumps({"Records": list(records)})}
            self._clients("s3").put_object(Bucket=bucket, Key=key, Body=json.dumps(body))
        else:
            raise ValueError(f"on-failure destination {destination!r}: expected SQS, SNS or S3")


def _interpret_partial_batch_response(
    response: Any, sequence_numbers: Sequence[str]
) -> int | str | None:
    """Read a partial batch response the way Lambda does for stream sources.

    Returns:
        ``None`` for complete success; the index in ``sequence_numbers`` of the lowest reported
        failure (re-deliver from there); or a string saying why the whole batch failed.
    """
    if response is None:
        return None
    if not isinstance(response, Mapping):
        return f"response {response!r} is not a partial batch response object"
    failures = response.get("batchItemFailures")
    if failures is None or (isinstance(failures, list) and not failures):
        return None
    if not isinstance(failures, list):
        return f"batchItemFailures {failures!r} is not a list"
    index_of = {seq: i for i, seq in enumerate(sequence_numbers)}
    lowest: int | None = None
    for failure in failures:
        if not isinstance(failure, Mapping) or "itemIdentifier" not in failure:
            return f"batch item failure {failure!r} has no itemIdentifier key"
        identifier = failure["itemIdentifier"]
        if identifier is None or identifier == "":
            return f"itemIdentifier {identifier!r} is empty"
        index = index_of.get(str(identifier))
        if index is None:
            return f"itemIdentifier {identifier!r} is not a sequence number of this batch"
        lowest = index if lowest is None else min(lowest, index)
    return lowest


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _on_failure_record(
    records: Sequence[Mapping[str, Any]],
    *,
    shard_id: str,
    stream_arn: str,
    function_arn: str,
    condition: str,
    approximate_invoke_count: int,
) -> dict[str, Any]:
    """The metadata Lambda sends to an SQS/SNS on-failure destination for a DynamoDB stream.

    Shape of the "Example invocation record" for DynamoDB Streams in the Lambda developer
    guide: ``requestContext`` (``condition``: ``RetryAttemptsExhausted`` or
    ``RecordAgeExceeded``), ``responseContext`` when the function ran, ``version``,
    ``timestamp``, and ``DDBStreamBatchInfo`` (shard id, start/end sequence numbers, arrival
    times of the first and last record, batch size, stream ARN). The records are not included.
    """
    first, last = records[0]["dynamodb"], records[-1]["dynamodb"]
    message: dict[str, Any] = {
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "functionArn": function_arn,
            "condition": condition,
            "approximateInvokeCount": approximate_invoke_count,
        },
        "version": "1.0",
        "timestamp": dt.datetime.now(dt.timezone.utc)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z"),
        "DDBStreamBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": str(first["SequenceNumber"]),
            "endSequenceNumber": str(last["SequenceNumber"]),
            "approximateArrivalOfFirstRecord": _iso(float(first["ApproximateCreationDateTime"])),
            "approximateArrivalOfLastRecord": _iso(float(last["ApproximateCreationDateTime"])),
            "batchSize": len(records),
            "streamArn": stream_arn,
        },
    }
    if approximate_invoke_count:
        message["responseContext"] = {
            "statusCode": 200,
            "executedVersion": "$LATEST",
            "functionError": "Unhandled",
        }
    return message
