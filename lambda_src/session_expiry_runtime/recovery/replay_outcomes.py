"""What became of one replayed failure range: `ReplayOutcome`, its `STATUSES`,
and `replay_records`, which runs a whole range's records through the cleanup and judges
them.

The judgement: ``replayed`` (``dry-run``) only when the range holds at least one ``REMOVE``
record and every one was cleaned (would be); ``failed`` when a record failed again, with each
record's cause; ``held-back`` when a feature flag held a step of a ``REMOVE`` record back
(`replay_levers`: ``held_back``); ``nothing-cleaned`` / ``partly-cleaned`` when
``REMOVE`` records were skipped or had a step refuse what their image names (``refused``).
Where the records come from (a queue message's range read back from the stream, an S3
object's payload, a Kinesis time range) is `replay_sources` and `kinesis_replay`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..cleanup.cleaner import (
    OUTCOME_CLEANED,
    OUTCOME_DRY_RUN,
    STEP_REFUSED,
    RecordResult,
    SessionCleaner,
    process_batch,
)
from ..core.config import ACTION_RETIRE_GRANT
from ..core.decode import parse_record
from ..owners.outcomes import STEP_DISABLED
from ..steps.grant import REFUSAL_FIELD as GRANT_REFUSAL_FIELD
from .replay_levers import held_back_why

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
#: A feature flag held a step of a REMOVE record back (``held_back``; the other steps ran, the
#: held step's work is deferred for the drain): kept, for a replay once the flag is on.
STATUS_HELD_BACK = "held-back"
#: ``not_cleaned``'s cause of a REMOVE record with a step held back by its feature flag.
HELD_BACK = "held-back"
STATUSES = (
    STATUS_REPLAYED,
    STATUS_FAILED,
    STATUS_AGED_OUT,
    STATUS_INVALID,
    STATUS_FOREIGN_STREAM,
    STATUS_STILL_IN_TABLE,
    STATUS_NOTHING_CLEANED,
    STATUS_PARTLY_CLEANED,
    STATUS_HELD_BACK,
    STATUS_DRY_RUN,
)


@dataclass
class ReplayOutcome:
    """What happened to one failure message or object (one JSON line of the CLI).

    Attributes:
        source: ``sqs:<message id>`` or ``s3://<bucket>/<key>``.
        status: one of `STATUSES`.
        records: records read back (or in the payload).
        removes: ``REMOVE`` records among them.
        cleaned: ``REMOVE`` records cleaned (with ``--dry-run``: that would be).
        failed_sequence_numbers: records that failed again.
        not_cleaned: sequence number -> skip cause (``config.CAUSE_*``) of each ``REMOVE``
            record that was skipped, ``refused`` when a step refused what it names, or
            ``held-back`` when a feature flag held a step back.
        refused: sequence number -> {step name (``config.ACTION_*``) -> why it refused} of each
            ``REMOVE`` record with a refused step (such a record is never counted as cleaned).
        held_back: sequence number -> {step name -> why} of each ``REMOVE`` record with a step
            its feature flag switched off (`replay_levers`; never counted as cleaned).
        failures: sequence number -> {failed action (``CleanupFailures``' ``Action``) -> the
            error} of each record that failed again: the cause its log line gives.
        error: why the message was kept, in one sentence; never ``None`` for a kept message
            (``dry-run`` aside; the CLI gives a dry run it was not asked for its cause): for
            ``failed`` it names each failed record and its cause.
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
    held_back: dict[str, dict[str, str]] = field(default_factory=dict)
    failures: dict[str, dict[str, str]] = field(default_factory=dict)
    error: str | None = None
    deleted: bool = False

    def as_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


class _RecordingCleaner(SessionCleaner):
    """The caller's cleaner (same clients, metrics and logger), keeping every record's result:
    `process_batch` answers only the failed ones, and replay must know which REMOVE
    records were cleaned and which were skipped."""

    def __init__(self, base: SessionCleaner, *, dry_run: bool) -> None:
        config = replace(base.config, dry_run=True) if dry_run else base.config
        super().__init__(config, base.clients, base.metrics, logger=base.logger)
        self.disabled_steps = base.disabled_steps  # the feature flags' steps held back
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
    grant or scratch prefix is left in place: the record is not cleaned, see ``refused``);
    ``held-back`` when the ``cleaner``'s ``disabled_steps`` (the feature flags) held a step of a
    ``REMOVE`` record back (see ``held_back``). With
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
    held_back = {s: why for s in removes if s in results and (why := _held_back(results[s]))}
    cleaned = {
        s
        for s in removes
        if s not in refused and s not in held_back and _outcome(results.get(s)) == done
    }
    not_cleaned = {
        s: (
            STEP_REFUSED
            if s in refused
            else HELD_BACK
            if s in held_back
            else _cause(results.get(s))
        )
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
        held_back=held_back,
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
    step's ``grantRefusal``, `steps.base.Plan.refused`'s ``refusal``; for the ownership
    check's alarmed refusals, ``ownership: <id> <Refusal>, ...``). The ownership check's
    refusals of normal operation (``Superseded``, ``Legacy``) are not."""
    fields = {ACTION_RETIRE_GRANT: GRANT_REFUSAL_FIELD}
    why = {
        step: str(result.log.get(fields.get(step, "refusal"), STEP_REFUSED))
        for step in result.refused_steps
    }
    for step, ids in result.alarmed_refusals().items():
        refused = ", ".join(f"{rid} {reason}" for rid, reason in sorted(ids.items()))
        why[step] = f"{why[step]}; ownership: {refused}" if step in why else f"ownership: {refused}"
    return why


def _held_back(result: RecordResult) -> dict[str, str]:
    """Each step of ``result`` its feature flag held back (reported ``disabled``, also in a dry
    run) -> why."""
    steps = result.log.get("steps")
    if not isinstance(steps, Mapping):
        return {}
    return {str(s): held_back_why(str(s)) for s, status in steps.items() if status == STEP_DISABLED}


def _judge(outcome: ReplayOutcome, *, dry_run: bool) -> None:
    """Set the status (and why it is kept) of an outcome whose records did not fail again."""
    see = "see not_cleaned for each cause" + (", refused for each step" if outcome.refused else "")
    if not outcome.removes:
        outcome.status = STATUS_NOTHING_CLEANED
        outcome.error = "the range holds no REMOVE record: nothing to clean"
    elif outcome.held_back:
        steps = sorted({step for why in outcome.held_back.values() for step in why})
        outcome.status = STATUS_HELD_BACK
        outcome.error = (
            f"{len(outcome.held_back)} REMOVE record(s) had {', '.join(steps)} held back by "
            "a feature flag (see held_back): replay the message again once the flag is on"
            + (f"; {see}" if len(outcome.not_cleaned) > len(outcome.held_back) else "")
        )
    elif not outcome.cleaned:
        outcome.status = STATUS_NOTHING_CLEANED
        outcome.error = f"no REMOVE record was cleaned ({see})"
    elif outcome.cleaned < outcome.removes:
        outcome.status = STATUS_PARTLY_CLEANED
        outcome.error = f"some REMOVE records were skipped or refused ({see})"
    else:
        outcome.status = STATUS_DRY_RUN if dry_run else STATUS_REPLAYED
