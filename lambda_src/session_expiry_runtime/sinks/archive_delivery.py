"""Archive at scale: the archived lines of one invocation's sessions, handed to Amazon Data
Firehose with ``PutRecordBatch`` instead of one ``PutObject`` each.

The archive step of each session (a gate: it runs on the record's own thread, before anything
else of the record) submits its line to the invocation's one `FirehoseBatcher`. Lines of
sessions archived side by side share calls of at most 500 records and 4 MiB (Amazon Data
Firehose API Reference, ``PutRecordBatch``: "Each PutRecordBatch request supports up to 500
records. Each record in the request can be as large as 1,000 KB (before base64 encoding), up to
a limit of 4 MB for the entire request"). Batches form without a timer, as for ``DeleteObjects``
(`steps.delete_objects`): the first line goes out at once, the lines that arrive while it
is answered go out together in the next call, so a lone session waits for nothing and a batch of
100 needs a handful of calls.

``PutRecordBatch`` answers HTTP 200 when some records fail: ``FailedPutCount`` counts them and
``RequestResponses[i]`` (in request order) carries ``ErrorCode``/``ErrorMessage`` for record
``i`` instead of its ``RecordId`` (API Reference; Firehose Developer Guide, "Troubleshooting":
"make sure your code checks the value of FailedPutCount in the response even when the API call
succeeds"). Each answer goes to the session whose line it names: only the failed records fail
(and are redelivered by the event source mapping), a call that raises fails every line it
carried, and a line no answer names counts as failed.

**What "durable" means here.** A record ``PutRecordBatch`` accepted (a ``RecordId``) is stored
by Firehose: for a Direct PUT stream "Firehose retains the records for 24 hours", and delivery
to S3 that fails is retried "for up to 24 hours" (Firehose Developer Guide, "Troubleshooting"
and "Handling data delivery failure"); it reaches S3 within the stream's buffering interval
(300 s by default). So the gate opens on acceptance, not on the object in S3: a bucket that
stays unwritable for more than 24 hours loses what Firehose held. The construct alarms on the
stream's ``DeliveryToS3.DataFreshness`` long before that
(``cdk_session_expiry.archiving.archive_delivery``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

#: ``PutRecordBatch`` limits (Amazon Data Firehose API Reference).
MAX_RECORDS_PER_CALL = 500
MAX_BYTES_PER_CALL = 4 * 1024 * 1024
#: The largest record Firehose takes ("as large as 1,000 KB"); a longer line is archived with
#: ``PutObject`` instead (`steps.archive`).
MAX_RECORD_BYTES = 1_000 * 1024


class DeliveryRefused(Exception):
    """Firehose did not accept a record: ``code`` is its ``ErrorCode`` (e.g.
    ``ServiceUnavailableException``), ``message`` its ``ErrorMessage``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message


@dataclass(eq=False)
class _Ticket:
    line: bytes
    done: bool = False
    failure: BaseException | None = None


class FirehoseBatcher:
    """Puts lines to one delivery stream for many sessions at once; thread safe.

    Args:
        firehose: a boto3 ``firehose`` client (thread safe).
        stream_name: the delivery stream (``DeliveryStreamName``).
        max_records: records per call, 1..500. Default: 500.
        max_bytes: bytes per call, at least `MAX_RECORD_BYTES`. Default: 4 MiB.

    Raises:
        ValueError: a limit out of range.
    """

    def __init__(
        self,
        firehose: Any,
        stream_name: str,
        *,
        max_records: int = MAX_RECORDS_PER_CALL,
        max_bytes: int = MAX_BYTES_PER_CALL,
    ) -> None:
        if not 1 <= max_records <= MAX_RECORDS_PER_CALL:
            raise ValueError(f"max_records={max_records}: expected 1..{MAX_RECORDS_PER_CALL}")
        if not MAX_RECORD_BYTES <= max_bytes <= MAX_BYTES_PER_CALL:
            raise ValueError(
                f"max_bytes={max_bytes}: expected {MAX_RECORD_BYTES}..{MAX_BYTES_PER_CALL}"
            )
        self.firehose = firehose
        self.stream_name = stream_name
        self.max_records = max_records
        self.max_bytes = max_bytes
        self._pending: list[_Ticket] = []
        #: A call of less than a full batch is in flight: new lines wait for it (they join the
        #: next call); full calls go out whenever they are complete.
        self._remainder_in_flight = False
        self._cond = threading.Condition()
        #: ``PutRecordBatch`` calls made (the bench reads it).
        self.calls = 0

    def put(
        self,
        line: bytes,
        waiting: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> None:
        """Hand ``line`` (at most `MAX_RECORD_BYTES`) to Firehose, sharing a call with
        other sessions; returns once Firehose accepted it.

        ``waiting()`` wraps each wait for another session's call (the step's call slot serves
        other calls meanwhile); the call this thread sends itself is made outside it.

        Raises:
            DeliveryRefused: Firehose answered an ``ErrorCode`` for this record.
            botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError: the call that
                carried it failed (after botocore's retries).
            ValueError: ``line`` is longer than `MAX_RECORD_BYTES`.
        """
        if len(line) > MAX_RECORD_BYTES:
            raise ValueError(
                f"a {len(line)}-byte record: Firehose takes {MAX_RECORD_BYTES} at most"
            )
        ticket = _Ticket(line)
        with self._cond:
            self._pending.append(ticket)
            self._cond.notify_all()
        while True:
            with waiting(), self._cond:
                self._cond.wait_for(lambda: ticket.done or self._can_send())
                if ticket.done:
                    break
                chunk, remainder = self._take()
            self._send(chunk, remainder)
        if ticket.failure is not None:
            raise ticket.failure

    def _can_send(self) -> bool:
        return bool(self._pending) and (not self._remainder_in_flight or self._full())

    def _full(self) -> bool:
        size = sum(len(t.line) for t in self._pending)
        return len(self._pending) >= self.max_records or size >= self.max_bytes

    def _take(self) -> tuple[list[_Ticket], bool]:
        """Under the lock: the next call's tickets, in order, within both limits, and whether
        it is a remainder (less than a full call)."""
        remainder = not self._full()
        chunk: list[_Ticket] = []
        size = 0
        for ticket in self._pending:
            if len(chunk) == self.max_records or size + len(ticket.line) > self.max_bytes:
                break
            chunk.append(ticket)
            size += len(ticket.line)
        self._pending = self._pending[len(chunk) :]
        if remainder:
            self._remainder_in_flight = True
        return chunk, remainder

    def _send(self, chunk: Sequence[_Ticket], remainder: bool) -> None:
        """One ``PutRecordBatch`` for ``chunk``; each record's answer to its ticket."""
        failures: list[BaseException | None]
        try:
            self.calls += 1
            answer = self.firehose.put_record_batch(
                DeliveryStreamName=self.stream_name, Records=[{"Data": t.line} for t in chunk]
            )
            failures = record_failures(answer, len(chunk))
        except BaseException as exc:
            failures = [exc] * len(chunk)
        with self._cond:
            for ticket, failure in zip(chunk, failures, strict=True):
                ticket.failure = failure
                ticket.done = True
            if remainder:
                self._remainder_in_flight = False
            self._cond.notify_all()


def record_failures(answer: Any, count: int) -> list[BaseException | None]:
    """Per record of a ``PutRecordBatch`` answer (request order): ``None`` when accepted (it
    has a ``RecordId`` and no ``ErrorCode``), else a `DeliveryRefused`. A record the
    answer does not name, or an answer whose ``FailedPutCount`` disagrees with its
    ``RequestResponses``, is not trusted: every record without a ``RecordId`` fails then."""
    responses = list((answer or {}).get("RequestResponses") or [])
    found: list[BaseException | None] = []
    for index in range(count):
        response = responses[index] if index < len(responses) else None
        if response is None:
            found.append(DeliveryRefused("NoResponse", "PutRecordBatch named no record here"))
        elif response.get("ErrorCode") or not response.get("RecordId"):
            code = str(response.get("ErrorCode") or "NoRecordId")
            found.append(DeliveryRefused(code, str(response.get("ErrorMessage") or "")))
        else:
            found.append(None)
    failed = sum(1 for f in found if f is not None)
    reported = (answer or {}).get("FailedPutCount")
    if isinstance(reported, int) and reported > failed:
        # FailedPutCount says more failed than the responses show: trust no record.
        return [
            f or DeliveryRefused("FailedPutCount", f"{reported} failed, {failed} named")
            for f in found
        ]
    return found
