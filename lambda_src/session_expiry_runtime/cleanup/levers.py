"""The feature flags applied to one invocation, and the drain of deferred work.

The handler (`handler`) reads the flags (`feature_flags`) at the start of every
invocation and:

* ``enabled`` off — `defer_batch`: every record a REMOVE of a session this Region owns is
  written as deferred work (`deferred`, step ``*``) and reported ``deferred``
  (``SessionsDeferred``); **no cleanup call at all** (records that would be skipped anyway are
  skipped and counted as usual). A failed write fails its record (action ``Deferral``);
* otherwise — the batch is cleaned by the runner with the levers
  (`with_levers`): ``dryRun`` the dry run, each step switched off
  reported ``disabled`` and deferred (``StepsDisabled`` by ``Action``);
* the drain event (``{"sessionExpiryDrain": true}``, every 5 minutes) — `drain`.

**The drain verifies before it acts.** A deferred record is a ``REMOVE``; before its work runs,
the drain reads its ``Keys`` back from the session table (``BatchGetItem``, strongly consistent,
the run's items together: `RemovalCheck`, as for a ``REMOVE`` that came
through Kinesis):

* no item, or an item of another incarnation (a later session under the same key): the removal
  happened; the work runs, and the ownership checks keep the later session's resources. A record
  that came through Kinesis is judged by the Kinesis path's rule (`kinesis_removals`: another
  incarnation created within the arrival slack before the record arrived must be proven by the
  held item or a claim naming the record's incarnation; unproven, it is refused as below);
* an item of the record's incarnation (or, for a record without one, any item), or a record that
  cannot be read back at all (no stream record, no session, Keys of another table): **refused**.
  Nothing is called; ``DeferredWorkRefused`` counts it (alarmed), a WARNING line names the item,
  the key and the reason, and the item is kept for an operator, out of the drain's way
  (`refuse`);
* the read failed: the item is given back for the next drain (no refusal, no alarm).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from ..core.config import ACTION_DEFERRAL, DIMENSION_ACTION, METRIC_DEFERRED_WORK_REFUSED
from ..core.decode import parse_record, to_json_value
from ..owners.claims import ClaimBatcher
from ..owners.outcomes import OUTCOME_DEFERRED, OUTCOME_FAILED, RecordResult
from ..records.kinesis_removals import UNPROVEN, ReadBackFailed, RemovalCheck
from ..switches.deferred import (
    METRIC_DEFERRED_WORK_AGE,
    METRIC_DEFERRED_WORK_DONE,
    METRIC_SESSIONS_DEFERRED,
    WHOLE_RECORD,
    DeferredStore,
    new_drain_id,
)
from ..switches.feature_flags import Flags
from .batch import _split_duplicates, batch_response, process_batch
from .runner import CleanupRunner, raised_text

LOGGER = logging.getLogger("session_expiry_runtime.cleanup")
#: Items a drain run takes per step (the next run takes the next ones).
DRAIN_BATCH = 100
#: Why the drain refused a deferred record (the item's ``refusal``, the log line's ``refusal``):
#: the session table still holds the record's item in its incarnation ...
REFUSED_STILL_IN_TABLE = "ItemStillInTable"
#: ... or the record cannot be read back at all.
REFUSED_UNVERIFIABLE = "Unverifiable"


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
    """Run the deferred work whose flags are on again; each item once (see `deferred`),
    each record verified first (module docstring).

    Nothing is drained while ``enabled`` is off or in a dry run. Writes
    ``DeferredWorkAgeSeconds`` (the oldest item left, 0 when none), ``DeferredWorkDone`` (by
    ``Action``) and ``DeferredWorkRefused``. Returns ``{"done": {step: n}, "failed": {step: n},
    "refused": {step: n}}``.

    Raises:
        RuntimeError: no deferred-work table (``SESSION_EXPIRY_DEFERRED_WORK_TABLE_NAME``).
    """
    store = cleaner.deferrals
    if store is None:
        raise RuntimeError("no deferred-work table: there is no deferred work to drain")
    report: dict[str, Any] = {"done": {}, "failed": {}, "refused": {}}
    now = time.time()
    oldest = now
    try:
        for step in [WHOLE_RECORD, *cleaner.step_names()]:
            items = store.pending(step, limit)
            draining = flags.enabled and not flags.dry_run and step not in flags.disabled_steps
            if items and draining:
                counts = _drain_step(cleaner, flags, store, step, items, context)
                for name, count in zip(("done", "failed", "refused"), counts, strict=True):
                    report[name][step] = count
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
) -> tuple[int, int, int]:
    """Take, verify, run and settle the items of one step; (done, failed, refused)."""
    drain_id = new_drain_id()
    taken = [i for i in items if store.take(i, drain_id, time.time())]
    if not taken:
        return 0, 0, 0
    runnable, failed, refused = _sort_out(cleaner, store, drain_id, taken)
    if not runnable:
        return 0, failed, refused
    only = None if step == WHOLE_RECORD else frozenset({step})
    runner = cleaner.with_levers(disabled_steps=flags.disabled_steps, only_steps=only)
    response = process_batch({"Records": [raw for _, raw in runnable]}, context, runner)
    failed_ids = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    done = 0
    for item, raw in runnable:
        if raw["dynamodb"]["SequenceNumber"] in failed_ids:
            store.give_back(item, drain_id)
            failed += 1
        elif store.done(item, drain_id):
            done += 1
    if done:
        cleaner.metrics.count(METRIC_DEFERRED_WORK_DONE, done, dimension=(DIMENSION_ACTION, step))
    return done, failed, refused


def _sort_out(
    cleaner: CleanupRunner, store: DeferredStore, drain_id: str, taken: list[dict[str, Any]]
) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], int, int]:
    """Verify the run's items (their records read back together); give back those whose read
    failed, refuse those that fail verification. The (item, record) pairs that may run, the
    number given back and the number refused."""
    raws = [_stored_record(i) for i in taken]
    check = cleaner.removal_check()
    check.prefetch([parse_record(r) for r in raws if r is not None], every_source=True)
    claims = cleaner.claim_batcher()
    runnable: list[tuple[dict[str, Any], dict[str, Any]]] = []
    failed = refused = 0
    for item, raw in zip(taken, raws, strict=True):
        verdict = _verify(cleaner, check, claims, raw)
        if verdict is None and raw is not None:
            runnable.append((item, raw))
        elif isinstance(verdict, ReadBackFailed):
            _log_unverified(item, raw, str(verdict), refused=False)
            store.give_back(item, drain_id)
            failed += 1
        else:
            _log_unverified(item, raw, str(verdict), refused=True)
            store.refuse(item, drain_id, str(verdict), time.time())
            refused += 1
    if refused:
        cleaner.metrics.count(METRIC_DEFERRED_WORK_REFUSED, refused)
    return runnable, failed, refused


def _stored_record(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """The stream record an item holds; ``None`` when it holds none (refused as unverifiable)."""
    try:
        raw = json.loads(item["record"]["S"])
    except (KeyError, TypeError, ValueError):
        return None
    return raw if isinstance(raw, dict) else None


def _verify(
    cleaner: CleanupRunner,
    check: RemovalCheck,
    claims: ClaimBatcher | None,
    raw: dict[str, Any] | None,
) -> Exception | None:
    """``None`` when the record's removal happened (its work may run:
    `CleanupRunner.removal_refusal`, the Kinesis path's rule); else why not: a
    `ReadBackFailed` (ask again next drain) or a ``ValueError`` whose text is the
    refusal (``<reason>: <detail>``)."""
    if raw is None:
        return ValueError(f"{REFUSED_UNVERIFIABLE}: the item holds no stream record")
    session = cleaner.session_of(parse_record(raw))
    if isinstance(session, RecordResult):
        why = session.cause or ", ".join(session.failed_actions) or session.outcome
        return ValueError(f"{REFUSED_UNVERIFIABLE}: the record names no session ({why})")
    try:
        refusal = cleaner.removal_refusal(session, check, claims)
    except ReadBackFailed as exc:
        return exc
    except RuntimeError as exc:
        return ValueError(f"{REFUSED_UNVERIFIABLE}: {exc}")
    incarnation = session.incarnation or "(none)"
    if refusal == UNPROVEN:
        return ValueError(
            f"{REFUSED_STILL_IN_TABLE}: the key holds another incarnation, created just before "
            f"the record arrived in Kinesis, and neither it nor an ownership record names "
            f"incarnation {incarnation}: the removal is unproven"
        )
    if refusal is not None:
        return ValueError(
            f"{REFUSED_STILL_IN_TABLE}: the session table still holds the item in incarnation "
            f"{incarnation}: the removal did not happen"
        )
    return None


def _log_unverified(
    item: Mapping[str, Any], raw: Mapping[str, Any] | None, why: str, *, refused: bool
) -> None:
    """One WARNING line naming the item, the record's ``Keys`` and incarnation, and why."""
    body = raw.get("dynamodb") if isinstance(raw, Mapping) else None
    fields = {
        "outcome": "refused" if refused else "kept",
        "deferredItem": item["resource"]["S"],
        "step": item.get("deferredStep", {}).get("S"),
        "keys": to_json_value(body.get("Keys")) if isinstance(body, Mapping) else None,
        "incarnation": item.get("incarnation", {}).get("S"),
        "refusal" if refused else "error": why,
    }
    LOGGER.warning(
        "deferred work %s %s: %s",
        "refused" if refused else "kept for the next drain (the read back failed)",
        fields["deferredItem"],
        why,
        extra={"session": fields},
    )
