"""The cleanup step contract: **plan → ownership check → act**.

A **cleanup step** is one small unit that removes one kind of resource an expired session owned
(a WebSocket connection, a KMS grant, a scratch prefix, ...). It has:

* ``name`` — the metric's ``Action`` (``CleanupFailures`` dimension) and its key in the log
  line's ``steps``; one of ``config.ACTION_*`` for built-ins.
* ``attributes`` — the session attributes (old image) it reads.
* ``claims_ownership`` — ``True`` for a step whose plans name resources by ownership record
  (`ClaimRef`); the runner then needs the ownership table
  (``SESSION_EXPIRY_OWNERSHIP_TABLE_NAME``) and refuses to start without it.
* ``build(config, clients)`` — the step when its target is configured, else ``None`` (the step
  then never plans, runs or logs).
* ``plan(session)`` — **pure**: reads only the decoded old image (`Session`), makes no
  call, and returns a `Plan`:

  ========================  ===================================================================
  ``Plan.run(...)``          the step will run; ``payload`` carries what ``run`` needs, and
                             ``claims`` the resources (kind and id, `ClaimRef`) it would
                             act on, when they are ids an ownership record must vouch for.
  ``Plan.nothing()``         nothing to do for this session; not logged, not counted.
  ``Plan.refused(...)``      the image names something the step will never touch (e.g. a prefix
                             outside the scratch root): logged ``refused``, counted, never
                             retried; the Lambda path counts the record as cleaned (the
                             refusal metrics are alarmed), replay keeps its message.
  ``Plan.missing(...)``      the attributes it needs are absent (``missing``) or unusable
                             (``invalid``); when no step of a record runs, the record is skipped
                             with cause ``MissingAttributes``.
  ========================  ===================================================================

  Every plan may carry ``invalid`` attribute names and ``log`` fields (JSON-ready values).
* **The ownership check** is the runner's, once, for every step whose plan has ``claims``: a
  step never checks ownership itself. The runner asks the invocation's
  `ClaimBatcher` whether each id's ownership record names
  the REMOVE record's own ``Keys`` and the image's incarnation (``Session.incarnation``), marking
  the owned ones ``releasing`` in the same conditional write (a dry run only reads), and hands
  the step the plan with its verdicts: ``plan.owned`` are the ids to act on. Then:

  ========================  ===================================================================
  some ids owned             ``run`` acts on ``plan.owned`` only; after ``done``/``already-done``
                             the runner releases their records (``released``). A release that
                             fails fails the record (action ``Ownership``); the retry marks again
                             and acts again, idempotently.
  released already           an earlier run acted and released: no call (``already-done``).
  refused                    counted one per id as ``ResourcesRefused`` by ``Refusal`` (the
                             reason), logged as ``ownership: {step: {id: reason}}``, never
                             called. ``NotOwned``/``Unclaimed`` (a forged image, a writer that
                             bypassed ``SessionStore``) are alarmed: the step is a refused step
                             (the Lambda path counts the record cleaned, replay keeps its
                             message). ``Superseded``/``Legacy`` happen in
                             normal operation: a step whose ids are all refused that way
                             reports ``not-owned``, a success.
  unsettled                  the ownership table could not answer (after bounded retries): the
                             step fails with action ``Ownership``, nothing is acted on, the
                             record is retried.
  ========================  ===================================================================

  Steps without claims (the scratch prefix, derived from the record's ``Keys``; the archive;
  custom steps; the fan-out) are unchanged: ``plan.owned`` stays empty and unused.
* ``run(plan, ctx)`` — makes the change and returns ``"done"`` (the change was made) or
  ``"already-done"`` (the target was already gone: ``GoneException``, ``NotFoundException``, a
  missing key — success), or ``"refused"`` when only a read call can show that what the image
  names is not the session's own (the grant step's ``ListGrants`` for items written before
  ownership records): counted and logged like a refused plan, nothing changed. It must be
  **idempotent**: the event source mapping redelivers a failed record and a batch may hold a
  record twice, so a second run must end in the same state and report success. It must be
  **bounded in time**: botocore's ``standard`` retries and the client timeouts bound each call;
  a step that loops checks ``ctx.out_of_time()`` between iterations and raises
  ``StepFailed(ACTION_TIME_GUARD, ...)``.
* ``preview(plan, ctx)`` — the dry run: **read-only** calls at most (e.g. ``ListObjectsV2``),
  returns ``"dry-run"`` (or ``"refused"``, as ``run`` would), may add log fields with
  ``ctx.note``. The default makes no call. ``plan.owned`` comes from a read of the ownership
  records then.

**Exceptions.** ``run``/``preview`` raise `StepFailed`
for an expected failure (the error after botocore's retries, an ``Errors`` entry, the time
guard): the record fails, metered under ``StepFailed.action``. Anything else a step raises —
any ``BaseException``: a bug, ``SystemExit`` from a library's ``sys.exit()``,
``KeyboardInterrupt``, ``asyncio.CancelledError``, ``GeneratorExit`` — is **unexpected** and
is classified the same way under the step's own ``name``. Either way only that record fails (it
goes into the partial batch response by sequence number), the other steps of the session still
run, and the runner writes the error into the log line's ``errors``. The runner catches it, once
(`clean`): a step never catches an exception
only to turn it into a failure, and re-raises nothing.

**Per invocation.** A step object lives as long as the process (warm invocations reuse it): it
keeps only its configuration and clients. What it shares between the sessions of one invocation
(a batcher of calls) comes from `StepContext.shared`, which is dropped with the invocation
(`session_expiry_runtime.core.invocation`): a call abandoned at one invocation's hard stop never
delays the next.

Steps never count metrics or write log lines themselves: the runner
(`session_expiry_runtime.cleanup.runner`) owns order, the step pool, the ownership check, the dry
run, the time guard, error classification, metrics and the one log line per record. Steps of one
session run side by side, so they must not depend on each other's effects; ``ctx.note`` keys
must be distinct.

**Phases.** ``PHASE_GATE`` steps (the archive) run first, one after another; if one fails,
nothing else is done for the record. ``PHASE_SESSION`` steps run side by side on the bounded
step pool; a step whose ``after`` names another step acting on the session runs once that one
finished (and is failed, not run, when it failed). ``PHASE_AFTER_SUCCESS`` steps are
batch-level (`BatchStep`): they run once per batch on the records whose session steps all
succeeded (the fan-out), never in a dry run.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from ..core.clients import CleanupClients
from ..core.config import RuntimeConfig
from ..core.decode import StreamRecord
from ..core.invocation import InvocationScope
from ..core.metrics import MetricsRecorder
from ..core.ownership import VERDICT_OWNED, Claim, Verdict
from ..owners.claims import Claimant, ClaimBatcher, ClaimFailure, ClaimRef
from ..owners.outcomes import (
    STEP_ALREADY_DONE,
    STEP_DONE,
    STEP_DRY_RUN,
    RecordResult,
    StepFailed,
    error_code,
    error_text,
)

if TYPE_CHECKING:
    from ..core.step_pool import CallSlots

__all__ = [
    "PHASE_AFTER_SUCCESS",
    "PHASE_GATE",
    "PHASE_SESSION",
    "PLAN_MISSING",
    "PLAN_NOTHING",
    "PLAN_REFUSED",
    "PLAN_RUN",
    "BatchStep",
    "ClaimFailure",
    "ClaimRef",
    "CleanupStep",
    "Plan",
    "Session",
    "StepContext",
    "act_on_each",
    "call_aws",
    "id_union",
    "nonempty_str",
    "string_attribute",
]

T = TypeVar("T")

PLAN_RUN = "run"
PLAN_NOTHING = "nothing"
PLAN_REFUSED = "refused"
PLAN_MISSING = "missing"

PHASE_GATE = "gate"
PHASE_SESSION = "session"
PHASE_AFTER_SUCCESS = "after-success"


@dataclass(frozen=True)
class Session:
    """One removed session, as the steps see it.

    Attributes:
        image: the decoded old image (numbers ``Decimal``, sets ``set``, binary ``bytes``).
        keys: the decoded ``dynamodb.Keys``.
        reason: ``ttl``, ``deleted-after-expiry`` or ``explicit``.
        lag_seconds: TTL lag in seconds for TTL-classified removals, else ``None``.
        record: the stream record (sequence number, event id, removal time, wire old image).
        incarnation: the image's incarnation attribute (``incarnation``, a non-empty String);
            ``None`` for an item written before ownership records (*legacy*), whose ids are
            never acted on by claim.
    """

    image: Mapping[str, Any]
    keys: Mapping[str, Any]
    reason: str
    lag_seconds: Decimal | None
    record: StreamRecord
    incarnation: str | None = None


@dataclass(frozen=True)
class Plan:
    """A step's decision for one session (see the module docstring).

    Attributes:
        claims: the resources the step would act on that an ownership record must vouch for,
            in the order the step acts on them (set by ``plan``).
        ownership: each claim's verdict (set by the runner's ownership check, never by a step).
    """

    status: str
    payload: Any = None
    missing: tuple[str, ...] = ()
    invalid: tuple[str, ...] = ()
    log: Mapping[str, Any] = field(default_factory=dict)
    claims: tuple[ClaimRef, ...] = ()
    ownership: Mapping[ClaimRef, Verdict | ClaimFailure] = field(default_factory=dict)

    @classmethod
    def run(
        cls,
        payload: Any = None,
        *,
        log: Mapping[str, Any] | None = None,
        invalid: Sequence[str] = (),
        claims: Sequence[ClaimRef] = (),
    ) -> Plan:
        """The step will run; ``claims`` (de-duplicated, in order) are checked before it does."""
        return cls(
            PLAN_RUN,
            payload,
            invalid=tuple(invalid),
            log=dict(log or {}),
            claims=tuple(dict.fromkeys(claims)),
        )

    @property
    def owned(self) -> tuple[ClaimRef, ...]:
        """The claims the ownership check found owned and not yet released: act on these."""
        statuses = {ref: _status(self.ownership.get(ref)) for ref in self.claims}
        return tuple(ref for ref, status in statuses.items() if status == VERDICT_OWNED)

    def verdict(self, ref: ClaimRef) -> Verdict | None:
        """The ownership check's verdict for ``ref`` (``None``: unchecked or unsettled)."""
        verdict = self.ownership.get(ref)
        return verdict if isinstance(verdict, Verdict) else None

    @classmethod
    def nothing(cls) -> Plan:
        return cls(PLAN_NOTHING)

    @classmethod
    def refused(cls, refusal: str, *, log: Mapping[str, Any] | None = None) -> Plan:
        return cls(PLAN_REFUSED, log={**(log or {}), "refusal": refusal})

    @classmethod
    def missing_attributes(cls, missing: Sequence[str] = (), invalid: Sequence[str] = ()) -> Plan:
        return cls(PLAN_MISSING, missing=tuple(missing), invalid=tuple(invalid))


def _status(verdict: Verdict | ClaimFailure | None) -> str | None:
    return verdict.status if isinstance(verdict, Verdict) else None


@dataclass
class StepContext:
    """What a running step may use besides its plan: the session, the time guard, the log.

    Attributes:
        session: the session being cleaned.
        out_of_time: ``True`` once the invocation's remaining time is below the time guard.
    """

    session: Session
    out_of_time: Callable[[], bool] = lambda: False
    log: dict[str, Any] = field(default_factory=dict)
    #: The invocation's call slots (`step_pool`); ``None`` outside the step pool.
    slots: CallSlots | None = None
    #: The invocation's ownership check (`claims`); ``None`` without an ownership table.
    claim_batcher: ClaimBatcher | None = None
    #: Who the ownership records must name: the record's ``Keys`` and the image's incarnation.
    claimant: Claimant | None = None
    #: What the records of the invocation share (`invocation`); a record cleaned on its
    #: own has its own.
    scope: InvocationScope = field(default_factory=InvocationScope)
    objects_deleted: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def holding(self) -> AbstractContextManager[None]:
        """A call slot for the block (the runner runs every step attempt in one)."""
        return self.slots.held() if self.slots is not None else nullcontext()

    def waiting(self) -> AbstractContextManager[None]:
        """Wrap a wait that makes no call of its own (for another step's shared call), so the
        step's call slot serves other calls meanwhile."""
        return self.slots.lent() if self.slots is not None else nullcontext()

    def shared(self, key: Hashable, factory: Callable[[], T]) -> T:
        """The invocation's one helper under ``key`` (e.g. the step object), made by
        ``factory()`` on first use (`shared`)."""
        return self.scope.shared(key, factory)

    def claim(self, ref: ClaimRef) -> Claim | None:
        """``ref``'s ownership record as it is now (e.g. its ``claimed_at``), read through the
        invocation's batcher (``BatchGetItem``, shared); ``None`` when there is none.

        Raises:
            RuntimeError: no ownership table, or the read failed after its retries.
        """
        if self.claim_batcher is None:
            raise RuntimeError(f"{ref.resource}: no ownership table to read it from")
        return self.claim_batcher.claims([ref], self.waiting)[ref]

    def note(self, name: str, value: Any) -> None:
        """Add a (JSON-ready) field to the record's log line."""
        with self._lock:
            self.log[name] = value

    def note_in(self, group: str, name: str, value: Any) -> None:
        """Add ``value`` as ``log[group][name]`` (e.g. ``previews.<step>``)."""
        with self._lock:
            self.log.setdefault(group, {})[name] = value

    def count_objects_deleted(self, count: int) -> None:
        """Add to the record's ``ScratchObjectsDeleted`` (also counted when the step fails)."""
        with self._lock:
            self.objects_deleted += count


class CleanupStep(ABC):
    """One per-session cleanup step (see the module docstring for the contract)."""

    #: The metric's ``Action`` and the key in the log line's ``steps``.
    name: str
    phase: ClassVar[str] = PHASE_SESSION
    #: Session attributes (old image) this step reads.
    attributes: tuple[str, ...] = ()
    #: Its plans name resources by ownership record (``Plan.claims``): needs the ownership table.
    claims_ownership: ClassVar[bool] = False
    #: Names of steps that must finish for the session before this one starts (a runtime
    #: session stopped before its workspace is deleted): when one of them acts on the session,
    #: this step runs after it, and not at all when it failed (the record is retried).
    after: tuple[str, ...] = ()

    @classmethod
    @abstractmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> CleanupStep | None:
        """The step, or ``None`` when its target is not configured."""

    @abstractmethod
    def plan(self, session: Session) -> Plan:
        """Decide from the old image alone; no call, never raises for bad attribute values."""

    @abstractmethod
    def run(self, plan: Plan, ctx: StepContext) -> str:
        """Make the change; ``"done"`` or ``"already-done"``; raise ``StepFailed`` on failure."""

    def preview(self, plan: Plan, ctx: StepContext) -> str:
        """Dry run: read-only calls at most; the default makes none."""
        return STEP_DRY_RUN


class BatchStep(ABC):
    """A batch-level step that runs after the session steps succeeded (``PHASE_AFTER_SUCCESS``).

    ``after_success`` gets every ``cleaned`` result of the batch, may turn some into ``failed``
    ones (outcome, ``failed_actions`` and ``log["errors"]``), and counts its own success metric.
    It is skipped in a dry run.
    """

    name: ClassVar[str]
    phase: ClassVar[str] = PHASE_AFTER_SUCCESS

    @classmethod
    @abstractmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> BatchStep | None:
        """The step, or ``None`` when its target is not configured."""

    @abstractmethod
    def after_success(self, results: Sequence[RecordResult], metrics: MetricsRecorder) -> None:
        """Act on the batch's cleaned results; never raises."""


def nonempty_str(value: object) -> str | None:
    """``value`` when it is a non-empty string, else ``None`` (an unusable attribute value)."""
    return value if isinstance(value, str) and value else None


def string_attribute(session: Session, name: str) -> tuple[str | None, Plan | None]:
    """Read a string attribute: ``(value, None)`` or ``(None, missing/invalid plan)``."""
    if name not in session.image:
        return None, Plan.missing_attributes(missing=(name,))
    value = nonempty_str(session.image[name])
    if value is None:
        return None, Plan.missing_attributes(invalid=(name,))
    return value, None


def id_union(
    session: Session, single: str, many: str, usable: Callable[[object], bool]
) -> tuple[list[str], Plan | None, list[str]]:
    """The ids of one kind a session names: its latest in ``single`` (a String) and all of them in
    ``many`` (a String Set), together; items written before the set existed hold only the former.

    Returns:
        ``(sorted ids, None, invalid attribute names)``, or ``([], missing/invalid plan, ...)``
        when neither attribute is present or no usable id is left. An attribute is invalid
        when it is not of its type or holds a value ``usable`` rejects (the usable ones of a
        set still count).
    """
    if single not in session.image and many not in session.image:
        return [], Plan.missing_attributes(missing=(single, many)), []
    ids: set[str] = set()
    invalid: list[str] = []
    if single in session.image:
        value = session.image[single]
        if isinstance(value, str) and usable(value):
            ids.add(value)
        else:
            invalid.append(single)
    if many in session.image:
        recorded = session.image[many]
        # A String Set decodes to a frozenset; anything else is an unusable value.
        members = set(recorded) if isinstance(recorded, (set, frozenset)) else set()
        good = {v for v in members if isinstance(v, str) and usable(v)}
        if not good or good != members:
            invalid.append(many)
        ids |= good
    if not ids:
        return [], Plan.missing_attributes(invalid=invalid), invalid
    return sorted(ids), None, invalid


def act_on_each(action: str, ids: Sequence[str], act: Callable[[str], str]) -> str:
    """``act`` on every id, even after one failed: ``"done"`` when one made the change, else
    ``"already-done"``; ``StepFailed(action, ...)`` naming each id that failed.

    ``act`` returns ``"done"``/``"already-done"`` or raises ``StepFailed`` (e.g. through
    `call_aws`).
    """
    outcomes: list[str] = []
    failures: list[str] = []
    for resource_id in ids:
        try:
            outcomes.append(act(resource_id))
        except StepFailed as exc:
            failures.append(f"{resource_id}: {exc.detail}")
    if failures:
        raise StepFailed(action, "; ".join(failures))
    return STEP_DONE if STEP_DONE in outcomes else STEP_ALREADY_DONE


def call_aws(
    action: str,
    call: Callable[..., Any],
    *,
    already_done: Sequence[str],
    goes_on: Sequence[str] = (),
    **params: Any,
) -> str:
    """One change-making AWS call: ``"done"``; ``"already-done"`` when it answers an error code
    in ``already_done`` (the target is gone); ``"done"`` as well for a code in ``goes_on`` (the
    caller carries on, e.g. to a delete after an end that found the resource ended);
    ``StepFailed(action, ...)`` for any other botocore error (after botocore's retries)."""
    try:
        call(**params)
    except ClientError as exc:
        if error_code(exc) in already_done:
            return STEP_ALREADY_DONE
        if error_code(exc) in goes_on:
            return STEP_DONE
        raise StepFailed(action, error_text(exc)) from exc
    except BotoCoreError as exc:
        raise StepFailed(action, error_text(exc)) from exc
    return STEP_DONE
