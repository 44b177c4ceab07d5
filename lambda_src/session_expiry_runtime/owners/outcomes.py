"""Cleanup results: record and step outcomes, `StepFailed`, `RecordResult`.

A low module on purpose: the runner, every step and the fan-out (`events`) import these
names from here, so none of them imports another to learn an outcome (the former ``cleaner`` ↔
``events`` import cycle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from ..core.ownership import ALARMED_REFUSALS

OUTCOME_CLEANED = "cleaned"
OUTCOME_SKIPPED = "skipped"
OUTCOME_FAILED = "failed"
#: Dry run (``SESSION_EXPIRY_DRY_RUN``): the record would have been cleaned; nothing was changed.
OUTCOME_DRY_RUN = "dry-run"
#: Feature flag ``enabled`` off: the whole record was kept as deferred work (`deferred`)
#: before any cleanup call; the drain cleans it once the flag is on again.
OUTCOME_DEFERRED = "deferred"

#: A step made its change.
STEP_DONE = "done"
#: The step's target was already gone (e.g. ``GoneException``, ``NotFoundException``): success.
STEP_ALREADY_DONE = "already-done"
#: The step refused what the old image named (e.g. a scratch prefix outside the root, a grant of
#: another session): skipped, counted and logged, never retried. ``plan`` may refuse
#: (``Plan.refused``) or, when only a read call can tell, ``run``/``preview`` may return it.
STEP_REFUSED = "refused"
STEP_FAILED = "failed"
#: Every id the step's plan named is refused by the ownership check for a reason that happens in
#: normal operation (``Superseded``, ``Legacy``): nothing to do, a success.
STEP_NOT_OWNED = "not-owned"
#: Dry run: the step would have run (its change-making call was not made).
STEP_DRY_RUN = "dry-run"
#: The step's feature flag is off: not run; its work was kept as deferred work (`deferred`)
#: and is done by the drain once the flag is on again.
STEP_DISABLED = "disabled"


class StepFailed(Exception):
    """A cleanup step did not complete; ``action`` is a ``config.ACTION_*`` value.

    Raised by a step's ``run`` or ``preview`` for an expected failure (an AWS error that
    botocore's retries did not cure, an ``Errors`` entry, the time guard). ``action`` is the
    metric's ``Action`` and usually the step's own name; the scratch step uses
    ``TimeGuard`` when the time guard stops it between pages.
    """

    def __init__(self, action: str, detail: str) -> None:
        super().__init__(f"{action}: {detail}")
        self.action = action
        self.detail = detail


@dataclass
class RecordResult:
    """What happened to one record.

    Attributes:
        sequence_number: ``dynamodb.SequenceNumber`` (``None`` only for a record without one).
        outcome: ``"cleaned"``, ``"skipped"``, ``"failed"`` or ``"dry-run"``; only ``failed``
            records go into the partial batch response.
        reason: classification reason of a REMOVE record with a decodable old image.
        cause: ``config.CAUSE_*`` of a skipped record.
        failed_actions: ``config.ACTION_*`` of every failed step of a failed record.
        objects_deleted: scratch objects deleted while handling it (also on failure).
        refused_steps: the steps that refused what the old image named (the scratch step a
            prefix that is not the session's own, the grant step a grant that is not provably
            the session's own), each counted under its refusal metric.
        lag_seconds: TTL lag of a TTL-classified record.
        log: the structured log fields (already JSON-serialisable).
        ownership_refusals: step name -> {resource id -> ``Refusal``} of every id the ownership
            check refused (`steps.base`), each counted as ``ResourcesRefused``.
    """

    sequence_number: str | None
    outcome: str
    reason: str | None = None
    cause: str | None = None
    failed_actions: tuple[str, ...] = ()
    objects_deleted: int = 0
    refused_steps: tuple[str, ...] = ()
    lag_seconds: Decimal | None = None
    log: dict[str, Any] = field(default_factory=dict)
    #: The old image's tenant attribute (decoded), for the fan-out event.
    tenant: Any = None
    #: The old image was written to the archive bucket.
    archived: bool = False
    ownership_refusals: dict[str, dict[str, str]] = field(default_factory=dict)
    #: The steps whose feature flag was off: reported ``disabled``, their work deferred.
    deferred_steps: tuple[str, ...] = ()

    def alarmed_refusals(self) -> dict[str, dict[str, str]]:
        """The ownership refusals that only a forged image or a writer bypassing
        ``SessionStore`` produces (``NotOwned``, ``Unclaimed``), by step."""
        alarmed = {
            step: {rid: why for rid, why in ids.items() if why in ALARMED_REFUSALS}
            for step, ids in self.ownership_refusals.items()
        }
        return {step: ids for step, ids in alarmed.items() if ids}


def error_text(exc: BaseException) -> str:
    """``"Code: Message"`` of a botocore ``ClientError``, else ``"ExceptionType: message"``."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'Unknown')}: {error.get('Message', '')}".rstrip(": ")
    return f"{type(exc).__name__}: {exc}"


def error_code(exc: BaseException) -> str | None:
    """The ``Error.Code`` of a botocore ``ClientError``; ``None`` for anything else."""
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code")
        return code if isinstance(code, str) else None
    return None
