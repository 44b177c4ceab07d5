"""One invocation's batch: the records of one event, cleaned side by side and answered once.

`process_batch` is the cleanup's entry for a batch (a DynamoDB stream batch, or the
Kinesis change source's reshaped one): it drops duplicate records (the same sequence number
twice), reads ahead what the whole batch needs (`_read_ahead`: the Kinesis ``REMOVE``
records' items, the ownership marks), runs each record on a record thread of its own — its
steps on the invocation's step pool (`step_pool`), each record through
`runner.CleanupRunner.clean` — accounts every result on the invocation's own thread, sends
the kept ownership releases (`deferred_releases`), runs the after-success steps (the
events fan-out) and answers the partial batch response (`batch_response`). Everything an
invocation makes (the step pool, the ownership batcher, the steps' shared helpers) is its own
and dropped with it (`invocation`).

The **time guard** (`Deadline`, the module docstring of `runner` says what it
promises): no new call starts within the margin of the deadline, and at the hard stop,
`RETURN_RESERVE_MS` before the deadline, the records still running are reported failed
and the function returns without waiting for their threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from ..core.config import ACTION_TIME_GUARD
from ..core.decode import parse_record
from ..core.invocation import InvocationScope, submit_in_context
from ..core.shared_pace import RESERVE_WAIT_SECONDS, invocation_demand
from ..core.step_pool import StepPool
from ..owners.claims import ClaimBatcher
from ..owners.deferred_releases import DeferredReleases
from ..owners.outcomes import OUTCOME_CLEANED, OUTCOME_FAILED, RecordResult
from ..records.kinesis_removals import RemovalCheck
from ..steps.base import BatchStep
from .runner import LOGGER, CleanupRunner, _never, raised_text


def batch_response(
    failed_sequence_numbers: Iterable[str | None],
) -> dict[str, list[dict[str, str]]]:
    """Build the partial batch response (``ReportBatchItemFailures``).

    Returns:
        ``{"batchItemFailures": [{"itemIdentifier": "<dynamodb.SequenceNumber>"}, ...]}``, each
        identifier once, in order; empty or ``None`` identifiers are dropped because Lambda
        fails the whole batch on them. An empty list means every record succeeded.
    """
    unique = dict.fromkeys(s for s in failed_sequence_numbers if isinstance(s, str) and s)
    return {"batchItemFailures": [{"itemIdentifier": s} for s in unique]}


#: Kept free after the hard stop for the partial batch response and the metrics (ms).
RETURN_RESERVE_MS = 1_000


#: How often the runner looks at the hard stop while it waits for its records (seconds).
HARD_STOP_POLL_SECONDS = 0.1


class Deadline:
    """The invocation's deadline as Lambda's context tells it (no context: no deadline).

    Only the record threads read the context (each before it starts a record or a page), and
    the read-ahead thread once, before it marks the batch's ownership records; the hard stop is
    extrapolated from the latest reading with a monotonic clock, so watching it
    costs no reading of its own (Lambda's remaining time falls with the wall clock).

    Args:
        context: the Lambda context (``get_remaining_time_in_millis``).
        margin_ms: the time guard's margin (``config.time_guard_ms``).
    """

    def __init__(self, context: object, margin_ms: int) -> None:
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        self._remaining = remaining if callable(remaining) else None
        self.margin_ms = margin_ms
        self._lock = threading.Lock()
        self._seen: tuple[float, float] | None = None

    def remaining_ms(self) -> float | None:
        """Milliseconds left before the deadline, or ``None`` when unknown."""
        if self._remaining is None:
            return None
        try:
            left = float(self._remaining())
        except Exception:
            return None
        with self._lock:
            self._seen = (time.monotonic(), left)
        return left

    def out_of_time(self) -> bool:
        """``True`` once the remaining time is below the margin: nothing new may start."""
        left = self.remaining_ms()
        return left is not None and left < self.margin_ms

    def seconds_to_hard_stop(self) -> float | None:
        """Seconds until `RETURN_RESERVE_MS` before the deadline, from the latest reading
        (``None`` before any reading, or without a context)."""
        with self._lock:
            seen = self._seen
        if seen is None:
            return None
        at, left = seen
        return (left - RETURN_RESERVE_MS) / 1000 - (time.monotonic() - at)


def out_of_time_check(context: object, margin_ms: int) -> Callable[[], bool]:
    """``True`` once ``context.get_remaining_time_in_millis()`` is below ``margin_ms``."""
    deadline = Deadline(context, margin_ms)
    return deadline.out_of_time if deadline.remaining_ms() is not None else _never


def _split_duplicates(
    records: list[object], cleaner: CleanupRunner
) -> tuple[list[object], list[RecordResult]]:
    """The records to clean (first of each sequence number) and the duplicates' results."""
    seen: set[str] = set()
    unique: list[object] = []
    duplicates: list[RecordResult] = []
    for raw in records:
        sequence_number = parse_record(raw).sequence_number
        if sequence_number is not None and sequence_number in seen:
            duplicates.append(cleaner.duplicate(raw))
            continue
        if sequence_number is not None:
            seen.add(sequence_number)
        unique.append(raw)
    return unique, duplicates


@dataclass
class _Invocation:
    """What the records of one invocation share, made for it and dropped with it
    (`invocation`): the step pool, the ownership check, the steps' shared helpers."""

    deadline: Deadline
    step_pool: StepPool
    claims: ClaimBatcher | None
    scope: InvocationScope = field(default_factory=InvocationScope)
    releases: DeferredReleases = field(default_factory=DeferredReleases)


def _clean_records(
    records: list[object],
    cleaner: CleanupRunner,
    deadline: Deadline,
    deferred: list[RecordResult] | None,
) -> list[RecordResult]:
    """Clean ``records`` concurrently: record threads, plus one bounded pool for their steps.

    Results are accounted here, on the invocation's own thread, never by a record thread. With
    ``deferred``, cleaned records are not accounted but collected there (for the after-success
    steps); the others — failed, skipped, not started, still running at the hard stop — are
    accounted at once.
    """
    if not records:
        return []
    max_workers = cleaner.config.max_workers
    # Record threads mostly wait on their steps; the step pool bounds the calls in flight. It,
    # the ownership check and the steps' shared helpers are this invocation's and no other's.
    invocation = _Invocation(deadline, StepPool(max_workers), cleaner.claim_batcher())
    if not _read_ahead_in_time(records, cleaner, invocation):
        return [cleaner.unfinished(raw) for raw in records]
    pool = ThreadPoolExecutor(
        max_workers=max(1, min(max_workers, len(records))), thread_name_prefix="cleanup"
    )
    pending: set[Future[RecordResult]] = set()
    try:
        futures = [
            submit_in_context(pool, _record_work, raw, cleaner, invocation) for raw in records
        ]
        pending = set(futures)  # until they are waited for: an interrupt waits for none
        pending = _wait_until_done_or_hard_stop(futures, deadline, invocation)
        return _collect(records, futures, pending, cleaner, deferred, invocation)
    finally:
        # Never wait past the hard stop (or an interrupt) for threads still running: their
        # results are dropped, and nothing they still hold is read by a later invocation.
        for executor in (pool, invocation.step_pool):
            executor.shutdown(wait=not pending, cancel_futures=True)


def _read_ahead_in_time(
    records: list[object], cleaner: CleanupRunner, invocation: _Invocation
) -> bool:
    """`_read_ahead` on a thread of its own, waited for until the hard stop (an answer
    that trickles in must not hold the invocation past it); ``False`` when it was still running
    then (every record then fails, unfinished). One that raised (it should not) is logged: the
    records then ask for themselves, as without it."""
    ahead = ThreadPoolExecutor(1, thread_name_prefix="cleanup-ahead")
    try:
        future = submit_in_context(ahead, _read_ahead, records, cleaner, invocation)
        if _wait_until_done_or_hard_stop([future], invocation.deadline):
            return False
        raised = future.exception()
        if raised is not None:
            LOGGER.warning(
                "the batch's read-ahead raised; each record asks for itself: %s",
                raised_text(raised),
            )
        return True
    finally:
        ahead.shutdown(wait=False, cancel_futures=True)


def _read_ahead(records: list[object], cleaner: CleanupRunner, invocation: _Invocation) -> None:
    """Before any record starts, on the invocation's own thread and while the time guard lets a
    call start: the items of the batch's Kinesis ``REMOVE`` records read back
    (`kinesis_removals`), then the batch's ownership marks (``ClaimBatcher.premark``; a
    record whose item is still held is not marked) with, beside them, the batch's requests of
    the shared ``RetireGrant`` budget (``CleanupRunner.reserve_retire_grants``), each in as few
    calls as the batch allows."""
    parsed = [parse_record(raw) for raw in records]
    kinesis = any(record.through_kinesis for record in parsed)
    premark = invocation.claims is not None and len(records) > 1
    if not (kinesis or premark) or invocation.deadline.out_of_time():
        return
    removals = None
    if kinesis:
        removals = invocation.scope.shared(RemovalCheck, cleaner.removal_check)
        removals.prefetch(parsed)
    if invocation.claims is not None and premark:
        planned = [
            claims
            for claims in (cleaner.planned_claims(raw, removals) for raw in records)
            if claims is not None
        ]
        # The grants' requests of the shared RetireGrant budget, side by side with the marks:
        # one round trip for both, not one more before each grant (issue 38).
        reserving = invocation.step_pool.submit(cleaner.reserve_retire_grants, planned)
        invocation.claims.premark(planned)
        wait([reserving], timeout=RESERVE_WAIT_SECONDS)  # a slow budget write holds no record


def _record_work(raw: object, cleaner: CleanupRunner, invocation: _Invocation) -> RecordResult:
    """One record thread: the record's result, not yet accounted."""
    try:
        if invocation.deadline.out_of_time():
            return cleaner.not_started(raw, account=False)
        return cleaner.clean(
            raw,
            out_of_time=invocation.deadline.out_of_time,
            account=False,
            step_pool=invocation.step_pool,
            claims=invocation.claims,
            scope=invocation.scope,
            releases=invocation.releases,
        )
    except BaseException as exc:  # a record thread's failure is its record's, whatever it is
        return cleaner.unexpected(raw, exc, account=False)


def _wait_until_done_or_hard_stop(
    futures: Sequence[Future[Any]], deadline: Deadline, invocation: _Invocation | None = None
) -> set[Future[Any]]:
    """Wait for every record thread, or until the hard stop; the futures still running. While
    records still run, the releases of those done go out when due (`deferred_releases`)."""
    pending = set(futures)
    while pending:
        left = deadline.seconds_to_hard_stop()
        if left is not None and left <= 0:
            break
        timeout = HARD_STOP_POLL_SECONDS if left is None else min(left, HARD_STOP_POLL_SECONDS)
        _, pending = wait(pending, timeout=timeout)
        if pending and invocation is not None:
            _send_due_releases(deadline, invocation)
    return pending


def _send_due_releases(deadline: Deadline, invocation: _Invocation) -> None:
    """Hand the kept releases to their sender if they are due (judged from the latest reading
    of the remaining time: no reading of its own)."""
    if invocation.claims is None:
        return
    to_hard_stop = deadline.seconds_to_hard_stop()
    left = None if to_hard_stop is None else to_hard_stop + RETURN_RESERVE_MS / 1000
    if invocation.releases.due(left, deadline.margin_ms / 1000):
        invocation.releases.send_soon(invocation.claims)


def _collect(
    records: Sequence[object],
    futures: Sequence[Future[RecordResult]],
    pending: set[Future[RecordResult]],
    cleaner: CleanupRunner,
    deferred: list[RecordResult] | None,
    invocation: _Invocation,
) -> list[RecordResult]:
    """The results in record order, their ownership releases sent (`deferred_releases`),
    accounted (or, cleaned with ``deferred``, collected there); a record still running at the
    hard stop is unfinished."""
    done: dict[int, RecordResult] = {}
    for index, (raw, future) in enumerate(zip(records, futures, strict=True)):
        if future not in pending:
            exc = future.exception()
            done[index] = (
                future.result() if exc is None else cleaner.unexpected(raw, exc, account=False)
            )
    if invocation.claims is not None:  # what is left, waited for until the hard stop
        invocation.releases.finish(invocation.claims, invocation.deadline.seconds_to_hard_stop())
        invocation.releases.apply(list(done.values()))
    results: list[RecordResult] = []
    for index, raw in enumerate(records):
        result = done.get(index)
        if result is None:
            results.append(cleaner.unfinished(raw))
            continue
        if deferred is not None and result.outcome == OUTCOME_CLEANED:
            deferred.append(result)
        else:
            cleaner.account(result)
        results.append(result)
    return results


def _fail_unpublished(results: Sequence[RecordResult]) -> None:
    """The fan-out did not start (time guard): its cleaned records fail, to be redelivered."""
    for result in results:
        if result.outcome != OUTCOME_CLEANED:
            continue
        result.outcome = OUTCOME_FAILED
        result.failed_actions = (*result.failed_actions, ACTION_TIME_GUARD)
        result.log.setdefault("errors", {})[ACTION_TIME_GUARD] = (
            "cleaned, but the fan-out did not start: remaining time below the guard"
        )


def process_batch(event: object, context: object, cleaner: CleanupRunner) -> dict[str, Any]:
    """Clean a whole Lambda DynamoDB stream batch and return the partial batch response.

    * Records are cleaned concurrently, sharing ``cleaner``'s clients; each record's errors stay
      with that record. The steps of all records run on one pool of ``config.max_workers``
      threads, so at most that many cleanup calls are in flight, and one session's steps overlap.
    * Time guard: see the module docstring.
    * A sequence number seen twice in one batch is cleaned once.
    * After-success steps (the fan-out) run once on the cleaned records, then every record is
      accounted; a dry run skips them. One that raises fails the records it was given.
    * Whatever a step raises fails only its record (module docstring, *User code*).
    * Metrics are flushed (EMF on stdout) before returning, in every case: also when something
      raises on this thread (a signal's ``KeyboardInterrupt``), which then propagates.
    """
    records = event.get("Records") if isinstance(event, Mapping) else None
    if not isinstance(records, list):
        LOGGER.warning("event without a Records list; nothing to clean")
        return batch_response(())
    try:
        # the batch's own share of the RetireGrant budget, given back only within the guard
        # (the context read then, only when there is something to give back)
        with invocation_demand(Deadline(context, cleaner.config.time_guard_ms).out_of_time):
            results = _clean_batch(records, context, cleaner)
    finally:
        try:
            cleaner.metrics.flush()
        except Exception:
            LOGGER.exception("could not write the metrics")
    return batch_response(r.sequence_number for r in results if r.outcome == OUTCOME_FAILED)


def _clean_batch(
    records: list[object], context: object, cleaner: CleanupRunner
) -> list[RecordResult]:
    """Every record's result, each accounted once (`process_batch`)."""
    deadline = Deadline(context, cleaner.config.time_guard_ms)
    # A dry run publishes nothing: subscribers would act on sessions that were not cleaned.
    # Neither does the drain of one deferred step: the record's fan-out already ran.
    after = (
        []
        if cleaner.config.dry_run or cleaner.only_steps is not None
        else cleaner.after_success_steps
    )
    unique, results = _split_duplicates(records, cleaner)
    deferred: list[RecordResult] | None = [] if after else None
    results.extend(_clean_records(unique, cleaner, deadline, deferred))
    if deferred is not None:
        # Accounting waits for the after-success outcome, so each record is counted once.
        if deferred and deadline.out_of_time():
            _fail_unpublished(deferred)
        else:
            for step in after:
                _after_success(step, deferred, cleaner)
        for result in deferred:
            cleaner.account(result)
    return results


def _after_success(step: BatchStep, deferred: list[RecordResult], cleaner: CleanupRunner) -> None:
    """Run one after-success step; if it raises (it should not), the records it was given and
    that are still cleaned fail under its name, to be redelivered. Runs on the invocation's
    own thread, so only ``Exception`` is caught: a signal's ``KeyboardInterrupt`` stops the run."""
    try:
        step.after_success(deferred, cleaner.metrics)
    except Exception as exc:
        LOGGER.exception("after-success step %s raised", step.name)
        for result in deferred:
            if result.outcome != OUTCOME_CLEANED:
                continue
            result.outcome = OUTCOME_FAILED
            result.failed_actions = (*result.failed_actions, step.name)
            result.log.setdefault("errors", {})[step.name] = raised_text(exc)
