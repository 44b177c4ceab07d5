"""The feature flags applied to one invocation, and the drain of deferred work.

The handler (:mod:`.handler`) reads the flags (:mod:`.feature_flags`) at the start of every
invocation and:

* ``enabled`` off — :func:`defer_batch`: every record a REMOVE of a session this Region owns is
  written as deferred work (:mod:`.deferred`, step ``*``) and reported ``deferred``
  (``SessionsDeferred``); **no cleanup call at all** (records that would be skipped anyway are
  skipped and counted as usual). A failed write fails its record (action ``Deferral``);
* otherwise — the batch is cleaned by the runner with the levers
  (:meth:`~.runner.CleanupRunner.with_levers`): ``dryRun`` the dry run, each step switched off
  reported ``disabled`` and deferred (``StepsDisabled`` by ``Action``);
* the drain event (``{"sessionExpiryDrain": true}``, every 5 minutes) — :func:`drain`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from .batch import _split_duplicates, batch_response, process_batch
from .config import ACTION_DEFERRAL, DIMENSION_ACTION
from .decode import parse_record
from .deferred import (
    METRIC_DEFERRED_WORK_AGE,
    METRIC_DEFERRED_WORK_DONE,
    METRIC_SESSIONS_DEFERRED,
    WHOLE_RECORD,
    DeferredStore,
    new_drain_id,
)
from .feature_flags import Flags
from .outcomes import OUTCOME_DEFERRED, OUTCOME_FAILED, RecordResult
from .runner import CleanupRunner, raised_text

LOGGER = logging.getLogger("session_expiry_runtime.cleanup")
#: Items a drain run takes per step (the next run takes the next ones).
DRAIN_BATCH = 100


def run_batch(event: Any, context: object, cleaner: CleanupRunner, flags: Flags) -> dict[str, Any]:
    """Clean ``event`` under ``flags`` (see the module docstring); the partial batch response."""
    if not flags.enabled:
        return defer_batch(event, cleaner)
    runner = cleaner.with_levers(dry_run=flags.dry_run, disabled_steps=flags.disabled_steps)
    return process_batch(event, context, runner)


def defer_batch(event: Any, cleaner: CleanupRunner) -> dict[str, Any]:
    """Keep every cleanable record of ``event`` as deferred work, calling no target."""
    records = event.get("Records") if isinstance(event, Mapping) else None
    if not isinstance(records, list):
        return batch_response(())
    try:
        unique, results = _split_duplicates(records, cleaner)
        results.extend(_defer_one(raw, cleaner) for raw in unique)
    finally:
        cleaner.metrics.flush()
    return batch_response(r.sequence_number for r in results if r.outcome == OUTCOME_FAILED)


def _defer_one(raw: object, cleaner: CleanupRunner) -> RecordResult:
    record = parse_record(raw)
    session = cleaner.session_of(record)
    if isinstance(session, RecordResult):  # skipped (or undecodable) as without the flag
        cleaner.account(session)
        return session
    result = RecordResult(record.sequence_number, OUTCOME_DEFERRED, reason=session.reason)
    result.log.update(sequenceNumber=record.sequence_number, reason=session.reason)
    try:
        if cleaner.deferrals is None or not isinstance(raw, Mapping):
            raise RuntimeError("no ownership table: deferred work has nowhere to go")
        cleaner.deferrals.defer(
            raw, [WHOLE_RECORD], keys=session.keys, incarnation=session.incarnation
        )
        cleaner.metrics.for_tenant(session.image.get(cleaner.config.tenant_attribute)).count(
            METRIC_SESSIONS_DEFERRED
        )
    except Exception as exc:
        result.outcome = OUTCOME_FAILED
        result.failed_actions = (ACTION_DEFERRAL,)
        result.log["errors"] = {ACTION_DEFERRAL: raised_text(exc)}
        cleaner.metrics.cleanup_failed(ACTION_DEFERRAL)
    LOGGER.log(
        logging.ERROR if result.outcome == OUTCOME_FAILED else logging.INFO,
        "session cleanup %s (flag enabled is off) sequenceNumber=%s",
        result.outcome,
        result.sequence_number,
        extra={"session": {"outcome": result.outcome, **result.log}},
    )
    return result


def drain(
    cleaner: CleanupRunner, flags: Flags, context: object, *, limit: int = DRAIN_BATCH
) -> dict[str, Any]:
    """Run the deferred work whose flags are on again; each item once (see :mod:`.deferred`).

    Nothing is drained while ``enabled`` is off or in a dry run. Writes
    ``DeferredWorkAgeSeconds`` (the oldest item left, 0 when none) and ``DeferredWorkDone``
    (by ``Action``). Returns ``{"done": {step: n}, "failed": {step: n}}``.

    Raises:
        RuntimeError: no ownership table (``SESSION_EXPIRY_OWNERSHIP_TABLE_NAME``).
    """
    store = cleaner.deferrals
    if store is None:
        raise RuntimeError("no ownership table: there is no deferred work to drain")
    report: dict[str, Any] = {"done": {}, "failed": {}}
    now = time.time()
    oldest = now
    try:
        for step in [WHOLE_RECORD, *cleaner.step_names()]:
            items = store.pending(step, limit)
            draining = flags.enabled and not flags.dry_run and step not in flags.disabled_steps
            if items and draining:
                done, failed = _drain_step(cleaner, flags, store, step, items, context)
                report["done"][step], report["failed"][step] = done, failed
                items = store.pending(step, 1)
            if items:
                oldest = min(oldest, float(items[0]["deferredAt"]["N"]))
        cleaner.metrics.value(METRIC_DEFERRED_WORK_AGE, max(0.0, now - oldest))
    finally:
        cleaner.metrics.flush()
    return report


def _drain_step(
    cleaner: CleanupRunner,
    flags: Flags,
    store: DeferredStore,
    step: str,
    items: list[dict[str, Any]],
    context: object,
) -> tuple[int, int]:
    """Take, run and settle the items of one step; (done, failed)."""
    drain_id = new_drain_id()
    taken = [i for i in items if store.take(i, drain_id, time.time())]
    if not taken:
        return 0, 0
    records = [json.loads(i["record"]["S"]) for i in taken]
    only = None if step == WHOLE_RECORD else frozenset({step})
    runner = cleaner.with_levers(disabled_steps=flags.disabled_steps, only_steps=only)
    response = process_batch({"Records": records}, context, runner)
    failed_ids = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    done = failed = 0
    for item, record in zip(taken, records, strict=True):
        if record["dynamodb"]["SequenceNumber"] in failed_ids:
            store.give_back(item, drain_id)
            failed += 1
        elif store.done(item, drain_id):
            done += 1
    if done:
        cleaner.metrics.count(METRIC_DEFERRED_WORK_DONE, done, dimension=(DIMENSION_ACTION, step))
    return done, failed
