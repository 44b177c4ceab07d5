"""The cleanup runner: what every cleanup step has in common, in one place.

A batch goes through `batch.process_batch`; each record through `CleanupRunner.clean`:

1. **Record checks** — no sequence number, not a ``REMOVE``, no old image: skipped and counted
   (``RecordsSkipped`` by ``Cause``); an old image that does not decode: failed (``Decode``).
2. **Classification** — `classify_removal` gives the
   reason (``ttl``, ``deleted-after-expiry``, ``explicit``) and the TTL lag.
3. **Gate steps** (the archive), one after another: if one fails, nothing else is done for the
   record, which fails (the retry starts over).
4. **Session steps** — every step plans from the old image
   (`session_expiry_runtime.steps.base`); then the **ownership check**, once for all the
   record's claims (`session_expiry_runtime.owners.claims`, one batcher per invocation, shared by
   its records, which marks the whole batch's ids up front in as few calls as it allows:
   `premark`): each step gets only the ids
   this record's ``Keys`` and incarnation own, the
   refused ones are counted and logged; the steps that run do so **side by side** on the
   batch's bounded step pool (at most ``config.max_workers`` calls in flight), so a session
   costs the latency of its slowest step, and each releases what it acted on. In a **dry run**
   the ownership records are only read, and only each step's read-only ``preview`` runs.
5. **Error classification** — ``StepFailed`` is metered under its ``action``; anything else a
   step raises under the step's name. Either fails only the record (see *User code* below).
6. **After-success steps** (the fan-out), once per batch on the cleaned records; never in a
   dry run. Accounting waits for them, so each record is counted once.
7. **Accounting** — the metrics and **one structured log line per record** (logger
   ``session_expiry_runtime.cleanup``, field ``session``; ERROR for failed, WARNING for refused
   prefixes or grants, alarmed ownership refusals, unusable attributes and suspicious skips,
   INFO otherwise), written by the invocation's own thread once the record is done: a record
   thread abandoned at the hard stop never counts into a later invocation's metrics.

**User code** (a custom step, or any step's code): whatever it raises — any ``BaseException``,
``SystemExit`` from a library's ``sys.exit()``, ``KeyboardInterrupt``,
``asyncio.CancelledError`` and ``GeneratorExit`` included — fails only its record, caught once
here (`CleanupRunner._attempt`; a step pool future that holds an exception is that step's
failure; a record whose cleanup raised outside its steps fails under ``Unexpected``); nothing is
re-raised, and the metrics are always flushed (`batch.process_batch`). Never caught: what
reaches the invocation's own thread outside any step — the steps run on record and pool
threads, so a ``KeyboardInterrupt`` delivered by a signal (Ctrl-C in a local replay) lands
there and stops the run, after the metrics are flushed; and what is no exception at all
(``os._exit``, a crash of the interpreter, Lambda ending the invocation at its timeout). A step
that never returns is not waited for past the hard stop (below).

**Feature flags** (`feature_flags`; applied by `levers`): a runner copy per
invocation (`CleanupRunner.with_levers`) reports a step switched off ``disabled`` — after
its plan, before the ownership check, so nothing of it is called — and writes its deferred work
(`deferred`) before the record is done; a failed write fails the record (``Deferral``).
The drain runs deferred work with a copy limited to that step (``only_steps``: no fan-out, and
the session is not counted cleaned again).

**No state crosses an invocation boundary** except the clients and the steps' configuration:
the step pool, the ownership check's batcher and whatever a step shares between sessions (the
``DeleteObjects`` batcher) are made for each invocation (`invocation`).

The **time guard** (`batch.Deadline`): the invocation returns before its deadline in every
case.

* Once ``context.get_remaining_time_in_millis()`` falls below ``config.time_guard_ms`` (the
  margin), records not yet started are reported failed (``TimeGuard``) without starting, a step
  that loops (the scratch deletion) stops between pages, and the fan-out does not start (its
  records are reported failed: cleaned again, idempotently, when redelivered).
* Every SDK call ends within 90 % of the margin: the clients' connect and read timeouts and
  their single retry are sized to it (`session_expiry_runtime.core.clients.client_config`).
* A hard stop `batch.RETURN_RESERVE_MS` before the deadline: records still running then (a
  response trickling in slower than any read timeout, a call waiting for another) are reported
  failed (``TimeGuard``, "unfinished") and the function returns without waiting for their
  threads, whose late side effects are idempotent and whose results are dropped.
"""

from __future__ import annotations

import copy
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ..core.clients import CleanupClients
from ..core.config import (
    ACTION_ARCHIVE,
    ACTION_DECODE,
    ACTION_DEFERRAL,
    ACTION_OWNERSHIP,
    ACTION_TIME_GUARD,
    ACTION_UNEXPECTED,
    CAUSE_DUPLICATE,
    CAUSE_ITEM_STILL_IN_TABLE,
    CAUSE_MISSING_ATTRIBUTES,
    CAUSE_NO_OLD_IMAGE,
    CAUSE_NO_SEQUENCE_NUMBER,
    CAUSE_NOT_REMOVE,
    CAUSE_OTHER_REGION,
    DIMENSION_ACTION,
    DIMENSION_REASON,
    ENV_DEFERRED_WORK_TABLE_NAME,
    ENV_OWNERSHIP_TABLE_NAME,
    METRIC_SESSIONS_ARCHIVED,
    METRIC_SESSIONS_WOULD_BE_CLEANED,
    RuntimeConfig,
)
from ..core.decode import DecodeError, StreamRecord, decode_image, parse_record, to_json_value
from ..core.invocation import InvocationScope
from ..core.metrics import MetricsRecorder
from ..core.ownership import (
    ALARMED_REFUSALS,
    KIND_GRANT,
    VERDICT_RELEASED,
    Verdict,
    names_incarnation,
    owner_token,
)
from ..core.regions import owned_here
from ..core.shared_pace import SharedBudget
from ..core.step_pool import StepPool
from ..owners.claims import Claimant, ClaimBatcher, ClaimFailure, ClaimRef
from ..owners.deferred_releases import DeferredReleases, PendingRelease
from ..owners.outcomes import (
    OUTCOME_CLEANED,
    OUTCOME_DRY_RUN,
    OUTCOME_FAILED,
    OUTCOME_SKIPPED,
    STEP_ALREADY_DONE,
    STEP_DISABLED,
    STEP_DONE,
    STEP_FAILED,
    STEP_NOT_OWNED,
    STEP_REFUSED,
    RecordResult,
    StepFailed,
    error_text,
)
from ..records.classify import classify_removal
from ..records.kinesis_removals import GONE, HELD, UNPROVEN, ReadBackFailed, RemovalCheck
from ..steps import build_steps
from ..steps.base import (
    PHASE_AFTER_SUCCESS,
    PHASE_GATE,
    PLAN_REFUSED,
    PLAN_RUN,
    BatchStep,
    CleanupStep,
    Plan,
    Session,
    StepContext,
)
from ..switches.deferred import METRIC_STEPS_DISABLED, DeferredStore

LOGGER = logging.getLogger("session_expiry_runtime.cleanup")
#: A runner class or subclass (`CleanupRunner.for_invocation` keeps it).
_Runner = TypeVar("_Runner", bound="CleanupRunner")

#: (step name, step outcome, (failed action, error text) or None)
Attempt = tuple[str, str, "tuple[str, str] | None"]


def _never() -> bool:
    return False


@dataclass
class _Tally:
    """What the steps of one record produced, merged by the runner (one thread)."""

    steps: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    #: step name -> {id -> Refusal} of the ids the ownership check refused
    ownership: dict[str, dict[str, str]] = field(default_factory=dict)
    ran_any: bool = False
    #: steps whose feature flag is off: reported ``disabled``, their work deferred
    deferred: list[str] = field(default_factory=list)

    def add_disabled(self, step: CleanupStep) -> None:
        self.steps[step.name] = STEP_DISABLED
        self.deferred.append(step.name)
        self.ran_any = True

    def add_error(self, action: str, text: str) -> None:
        self.errors[action] = f"{self.errors[action]}; {text}" if action in self.errors else text

    def add_plan(self, step: CleanupStep, plan: Plan, ctx: StepContext) -> None:
        self.missing.extend(plan.missing)
        self.invalid.extend(plan.invalid)
        ctx.log.update(plan.log)
        if plan.status == PLAN_REFUSED:
            self.ran_any = True
            self.refused.append(step.name)
            self.steps[step.name] = STEP_REFUSED
        elif plan.status == PLAN_RUN:
            self.ran_any = True

    def add_attempt(self, attempt: Attempt) -> None:
        name, status, error = attempt
        self.steps[name] = status
        if status == STEP_REFUSED:  # refused by run/preview, after a read call (the grant)
            self.refused.append(name)
        if error is not None:
            self.add_error(*error)

    def add_ownership(self, step: CleanupStep, plan: Plan) -> bool:
        """Record the ownership check's verdicts for ``step``; whether it acts (some id owned).

        A step that does not act gets its status here: ``failed`` (unsettled, action
        ``Ownership``), ``refused`` (an alarmed refusal), ``already-done`` (released by an
        earlier run) or ``not-owned`` (every id refused for a reason of normal operation).
        """
        verdicts = plan.ownership
        failures = [v.detail for v in verdicts.values() if isinstance(v, ClaimFailure)]
        if failures:
            self.steps[step.name] = STEP_FAILED
            self.add_error(ACTION_OWNERSHIP, "; ".join(failures))
            return False
        refused = {
            ref.resource_id: v.status
            for ref, v in verdicts.items()
            if isinstance(v, Verdict) and not v.owned
        }
        if refused:
            self.ownership[step.name] = refused
        if plan.owned:
            return True
        if ALARMED_REFUSALS & set(refused.values()):
            self.steps[step.name] = STEP_REFUSED
        elif any(_status(v) == VERDICT_RELEASED for v in verdicts.values()):
            self.steps[step.name] = STEP_ALREADY_DONE
        else:
            self.steps[step.name] = STEP_NOT_OWNED
        return False


class CleanupRunner:
    """Cleans up after one removed session per call; safe to share between threads.

    Feature flags (`feature_flags`) act through `with_levers`: a copy of the runner
    for one invocation whose disabled steps are reported ``disabled`` and deferred
    (`deferred`, written to `deferrals`), or that runs only the given steps (the
    drain of deferred work).

    Args:
        config: the runtime configuration (attribute names, targets, scratch layout).
        clients: boto3 clients of the configured targets (see
            `build_clients`).
        metrics: where counts go; flushed by `batch.process_batch`.
        logger: where the one structured line per record goes.
        steps: the steps to run; default: the built-ins whose targets are configured
            (`build_steps`).
        retire_grant_budget: the ``RetireGrant`` budget every invocation shares
            (`shared_pace`), from which a batch reserves its grants' requests at once
            (`reserve_retire_grants`); default none (each call takes its own, as paced).
    """

    def __init__(
        self,
        config: RuntimeConfig,
        clients: CleanupClients,
        metrics: MetricsRecorder,
        *,
        logger: logging.Logger = LOGGER,
        steps: Sequence[CleanupStep | BatchStep] | None = None,
        retire_grant_budget: SharedBudget | None = None,
    ) -> None:
        self.config = config
        self.retire_grant_budget = retire_grant_budget
        self.clients = clients
        self.metrics = metrics
        self.logger = logger
        built = build_steps(config, clients) if steps is None else list(steps)
        claimed = [s.name for s in built if isinstance(s, CleanupStep) and s.claims_ownership]
        if claimed and (config.ownership_table_name is None or clients.ownership is None):
            raise ValueError(
                f"{ENV_OWNERSHIP_TABLE_NAME} is not set: the steps {claimed} act only on ids "
                "whose ownership record names the removed session; set it to the ownership "
                "table (the construct does whenever a WebSocket, grant or AgentCore target is "
                "configured)"
            )
        self.gate_steps = [s for s in built if isinstance(s, CleanupStep) and s.phase == PHASE_GATE]
        self.session_steps = [
            s for s in built if isinstance(s, CleanupStep) and s.phase != PHASE_GATE
        ]
        self.after_success_steps = [
            s for s in built if isinstance(s, BatchStep) and s.phase == PHASE_AFTER_SUCCESS
        ]
        #: Step names whose feature flag is off (`with_levers`).
        self.disabled_steps: frozenset[str] = frozenset()
        #: Only these steps run (the drain of deferred work); ``None``: every step.
        self.only_steps: frozenset[str] | None = None
        #: Where deferred work is written (the deferred-work table); ``None`` without one.
        self.deferrals: DeferredStore | None = (
            None
            if clients.deferred is None or config.deferred_work_table_name is None
            else DeferredStore(clients.deferred, config.deferred_work_table_name)
        )

    def step_names(self) -> list[str]:
        """The metric ``Action`` names of the gate and session steps, in order: the steps a
        feature flag can switch off."""
        return [s.name for s in (*self.gate_steps, *self.session_steps)]

    def for_invocation(self: _Runner) -> _Runner:
        """This runner for one invocation: a shallow copy (clients, steps and configuration
        shared) with a metrics recorder of its own, so that invocations running at the same
        time in one process (threads of one execution environment) never flush each other's
        counts."""
        runner = copy.copy(self)
        runner.metrics = self.metrics.fresh()
        return runner

    def with_levers(
        self,
        *,
        dry_run: bool = False,
        disabled_steps: frozenset[str] = frozenset(),
        only_steps: frozenset[str] | None = None,
    ) -> CleanupRunner:
        """This runner for one invocation with the feature flags' levers: a dry run (on top of
        the configured one), steps switched off, or only some steps (the drain); ``self`` when
        nothing differs. A shallow copy: clients, steps and metrics are shared."""
        dry = self.config.dry_run or dry_run
        if (dry, disabled_steps, only_steps) == (self.config.dry_run, self.disabled_steps, None):
            return self
        runner = copy.copy(self)
        runner.config = replace(self.config, dry_run=dry)
        runner.disabled_steps = frozenset(disabled_steps)
        runner.only_steps = only_steps
        return runner

    def _active(self, steps: Sequence[CleanupStep]) -> list[CleanupStep]:
        if self.only_steps is None:
            return list(steps)
        return [s for s in steps if s.name in self.only_steps]

    def claim_batcher(self) -> ClaimBatcher | None:
        """A new ownership check (`claims`) for one invocation; ``None`` without an
        ownership table."""
        if self.clients.ownership is None or self.config.ownership_table_name is None:
            return None
        return ClaimBatcher(
            self.clients.ownership,
            self.config.ownership_table_name,
            dry_run=self.config.dry_run,
            calls_at_once=self.config.max_workers,
        )

    def reserve_retire_grants(self, planned: Sequence[tuple[Claimant, Sequence[ClaimRef]]]) -> int:
        """Reserve, in one write, the shared budget's requests (`shared_pace`) for the grants
        of ``planned`` (`planned_claims` of a batch) that will be retired: one ``UpdateItem``
        for the batch instead of one before each ``RetireGrant``. Returns how many were
        reserved; none in a dry run, without the budget, or when the grant step is off. Never
        raises (`SharedBudget.reserve`)."""
        budget = self.retire_grant_budget
        if budget is None or self.config.dry_run:
            return 0
        grants = sum(1 for _, refs in planned for ref in refs if ref.kind == KIND_GRANT)
        return budget.reserve(grants, self.metrics)

    def removal_check(self) -> RemovalCheck:
        """A new read-back of Kinesis ``REMOVE`` records (`kinesis_removals`) for one
        invocation."""
        config = self.config
        keys = [config.partition_key] + ([config.sort_key] if config.sort_key else [])
        return RemovalCheck(
            self.clients.table,
            config.table_name,
            keys,
            config.incarnation_attribute,
            not_after_attribute=config.not_after_attribute,
            max_lifetime_seconds=config.max_session_lifetime_seconds,
        )

    def planned_claims(
        self, raw: object, removals: RemovalCheck | None = None
    ) -> tuple[Claimant, list[ClaimRef]] | None:
        """What the record's ownership check will ask, computed as `clean` does before
        any call: the claimant and the ids of the runnable plans of the steps that claim
        ownership (built-in steps: no user code runs here). ``None`` when there is nothing to
        ask or anything in the way (the record then asks for itself, and fails or skips there
        as it would have). For `ClaimBatcher.premark`, on the invocation's own thread. A
        ``REMOVE`` that came through Kinesis is planned only once ``removals`` (the invocation's
        read-back) says its item is gone: a forged one's ids are never marked."""
        try:
            session = self._session(parse_record(raw))
            if isinstance(session, RecordResult):
                return None
            if session.record.through_kinesis and (
                removals is None or removals.removal(session.record, session.incarnation) != GONE
            ):
                return None  # an unproven one marks its ids in its own check, once proven
            refs = [
                ref
                for step in self._active(self.session_steps)
                if step.claims_ownership and step.name not in self.disabled_steps
                for plan in (step.plan(session),)
                if plan.status == PLAN_RUN
                for ref in plan.claims
            ]
            return (self._claimant(session), refs) if refs else None
        except Exception:
            return None

    # --- one record ----------------------------------------------------------------------
    def clean(
        self,
        raw: object,
        *,
        out_of_time: Callable[[], bool] = _never,
        account: bool = True,
        step_pool: StepPool | None = None,
        claims: ClaimBatcher | None = None,
        scope: InvocationScope | None = None,
        releases: DeferredReleases | None = None,
    ) -> RecordResult:
        """Handle one Lambda DynamoDB stream record; never raises (errors become ``failed``).

        ``account=False`` leaves metrics and the log line to the caller (`account`), which
        `batch.process_batch` does on its own thread. With ``step_pool``, the record's
        session steps run side by side on it; without, one after another. ``claims`` is the
        invocation's ownership check and ``scope`` what its records share
        (`invocation`); default: the record's own. With ``releases`` the ownership
        releases are left there for the invocation to send (`deferred_releases`);
        without, the record sends them itself, in one request.

        Whatever is raised — any ``BaseException`` — fails only this record (module docstring,
        *User code*).
        """
        record = parse_record(raw)
        try:
            claims = claims if claims is not None else self.claim_batcher()
            result = self._clean(record, out_of_time, step_pool, claims, scope, releases, raw)
        except BaseException as exc:  # per-record isolation: a bug must cost a retry, not the batch
            result = self.unexpected(raw, exc, account=False)
        if account:
            self.account(result)
        return result

    def unexpected(self, raw: object, exc: BaseException, *, account: bool = True) -> RecordResult:
        """Report a record whose cleanup raised ``exc`` outside its steps (``failed``, action
        ``Unexpected``, the error in the log line)."""
        result = self._result(
            parse_record(raw), OUTCOME_FAILED, failed_actions=(ACTION_UNEXPECTED,)
        )
        result.log["errors"] = {ACTION_UNEXPECTED: raised_text(exc)}
        if account:
            self.account(result)
        return result

    def not_started(self, raw: object, *, account: bool = True) -> RecordResult:
        """Report a record the time guard kept from starting (``failed``, action ``TimeGuard``);
        ``account=False`` leaves its accounting to the caller."""
        result = self._result(
            parse_record(raw), OUTCOME_FAILED, failed_actions=(ACTION_TIME_GUARD,)
        )
        result.log["errors"] = {ACTION_TIME_GUARD: "not started: remaining time below the guard"}
        if account:
            self.account(result)
        return result

    def unfinished(self, raw: object) -> RecordResult:
        """Report a record still running at the hard stop (``failed``, action ``TimeGuard``)."""
        result = self._result(
            parse_record(raw), OUTCOME_FAILED, failed_actions=(ACTION_TIME_GUARD,)
        )
        result.log["errors"] = {
            ACTION_TIME_GUARD: "unfinished: still running when the invocation had to return"
        }
        self.account(result)
        return result

    def duplicate(self, raw: object) -> RecordResult:
        """Account for a record whose sequence number already appeared in this batch."""
        result = self._result(parse_record(raw), OUTCOME_SKIPPED, cause=CAUSE_DUPLICATE)
        self.account(result)
        return result

    def _result(self, record: StreamRecord, outcome: str, **kwargs: Any) -> RecordResult:
        result = RecordResult(record.sequence_number, outcome, **kwargs)
        result.log.update(
            sequenceNumber=record.sequence_number,
            eventId=record.event_id,
            eventName=record.event_name,
        )
        return result

    def _clean(
        self,
        record: StreamRecord,
        out_of_time: Callable[[], bool],
        step_pool: StepPool | None,
        claims: ClaimBatcher | None,
        scope: InvocationScope | None,
        releases: DeferredReleases | None = None,
        raw: object = None,
    ) -> RecordResult:
        session = self._session(record)
        if isinstance(session, RecordResult):
            return session
        scope = scope if scope is not None else InvocationScope()
        not_removed = self._still_in_table(session, scope, claims)
        if not_removed is not None:
            return not_removed
        ctx = StepContext(
            session,
            out_of_time,
            log=self._session_log(session),
            slots=step_pool.slots if step_pool is not None else None,
            claim_batcher=claims,
            claimant=self._claimant(session),
            scope=scope,
        )
        tally = _Tally()
        if self._run_gates(ctx, tally):
            plans = [(step, step.plan(session)) for step in self._active(self.session_steps)]
            for step, plan in plans:
                tally.add_plan(step, plan, ctx)
            runnable = []
            for step, plan in plans:
                if plan.status == PLAN_RUN and step.name in self.disabled_steps:
                    tally.add_disabled(step)
                elif plan.status == PLAN_RUN:
                    runnable.append((step, plan))
            acting = self._check_ownership(runnable, ctx, tally)
            attempts = self._run_in_order(acting, ctx, step_pool)
            for attempt in attempts:
                tally.add_attempt(attempt)
            self._release_owned(acting, attempts, ctx, tally, releases)
        if tally.deferred:
            self._defer(raw, session, tally)
        return self._finish(record, ctx, tally)

    def _defer(self, raw: object, session: Session, tally: _Tally) -> None:
        """Write the deferred work of the record's disabled steps (not in a dry run, which
        changes nothing); a failed write fails the record (action ``Deferral``): retried."""
        if self.config.dry_run:
            return
        try:
            if self.deferrals is None or not isinstance(raw, Mapping):
                raise RuntimeError(
                    f"{ENV_DEFERRED_WORK_TABLE_NAME} is not set: deferred work has nowhere to go"
                )
            self.deferrals.defer(
                raw, tally.deferred, keys=session.keys, incarnation=session.incarnation
            )
        except Exception as exc:
            tally.add_error(ACTION_DEFERRAL, raised_text(exc))

    def _still_in_table(
        self, session: Session, scope: InvocationScope, claims: ClaimBatcher | None
    ) -> RecordResult | None:
        """For a ``REMOVE`` that came through Kinesis, the result of a record whose removal
        `removal_refusal` refuses (skipped, ``ItemStillInTable``) or that could not be read
        back (failed, ``Ownership``); ``None`` to go on (`kinesis_removals`)."""
        record = session.record
        if not record.through_kinesis:
            return None
        check = scope.shared(RemovalCheck, self.removal_check)
        try:
            refusal = self.removal_refusal(session, check, claims)
        except RuntimeError as exc:
            result = self._result(record, OUTCOME_FAILED, failed_actions=(ACTION_OWNERSHIP,))
            result.log["errors"] = {ACTION_OWNERSHIP: f"reading the item back: {exc}"}
            return result
        if refusal is None:
            return None
        result = self._result(record, OUTCOME_SKIPPED, cause=CAUSE_ITEM_STILL_IN_TABLE)
        result.log["keys"] = to_json_value(session.keys)
        result.log["readBack"] = refusal
        return result

    def removal_refusal(
        self, session: Session, check: RemovalCheck, claims: ClaimBatcher | None
    ) -> str | None:
        """Whether the removal ``session``'s record reports happened, from the read-back
        ``check`` and, when that leaves it `UNPROVEN`, the ownership records of the ids the
        record's steps would act on (``claims``, read only: a claim naming the record's
        ``Keys`` and incarnation proves it, `ownership.names_incarnation`). ``None``: it
        happened, the work may run; else `HELD` or `UNPROVEN`: refuse it
        (`kinesis_removals`).

        Raises:
            ReadBackFailed: the table or the ownership records could not be read (ask again
                later).
            RuntimeError: the record cannot be read back; the text says why.
        """
        verdict = check.removal(session.record, session.incarnation)
        if verdict == GONE or (verdict == UNPROVEN and self._claims_name(session, claims)):
            return None
        return HELD if verdict == HELD else UNPROVEN

    def _claims_name(self, session: Session, claims: ClaimBatcher | None) -> bool:
        """Whether an ownership record of an id any claiming step's plan names (switched off
        or not: reading changes nothing) names the record's ``Keys`` and incarnation.

        Raises:
            ReadBackFailed: the records could not be read.
        """
        claimant = self._claimant(session)
        if claims is None or claimant.owner is None or claimant.incarnation is None:
            return False
        refs = list(
            dict.fromkeys(
                ref
                for step in self.session_steps
                if step.claims_ownership
                for plan in (step.plan(session),)
                if plan.status == PLAN_RUN
                for ref in plan.claims
            )
        )
        if not refs:
            return False
        try:
            read = claims.claims(refs)
        except Exception as exc:
            raise ReadBackFailed(f"reading the ownership records: {error_text(exc)}") from None
        return any(
            names_incarnation(claim, owner=claimant.owner, incarnation=claimant.incarnation)
            for claim in read.values()
        )

    def _claimant(self, session: Session) -> Claimant:
        """Who the ownership records must name: the record's ``Keys`` (never the image's) and
        the image's incarnation. Nothing else of the image or the record weighs in the verdict
        (`classify`)."""
        try:
            owner: str | None = owner_token(session.keys)
        except ValueError:
            owner = None  # Keys no claim can name (e.g. Number keys): every id is Unclaimed
        return Claimant(owner, session.incarnation)

    def _check_ownership(
        self, runnable: Sequence[tuple[CleanupStep, Plan]], ctx: StepContext, tally: _Tally
    ) -> list[tuple[CleanupStep, Plan]]:
        """The ownership check, once for every claim of the record's runnable plans: the steps
        that act, each with its verdicts; the others get their status in ``tally``."""
        refs = list(dict.fromkeys(ref for _, plan in runnable for ref in plan.claims))
        if not refs:
            return list(runnable)
        verdicts = self._verdicts(ctx, refs)
        acting: list[tuple[CleanupStep, Plan]] = []
        for step, plan in runnable:
            if plan.claims:
                plan = replace(plan, ownership={ref: verdicts[ref] for ref in plan.claims})
                if not tally.add_ownership(step, plan):
                    continue
            acting.append((step, plan))
        return acting

    def _verdicts(
        self, ctx: StepContext, refs: Sequence[ClaimRef]
    ) -> dict[ClaimRef, Verdict | ClaimFailure]:
        if ctx.claim_batcher is None or ctx.claimant is None:
            return dict.fromkeys(refs, ClaimFailure(f"{ENV_OWNERSHIP_TABLE_NAME} is not set"))
        with ctx.holding():
            return ctx.claim_batcher.check(ctx.claimant, refs, ctx.waiting)

    def session_of(self, record: StreamRecord) -> Session | RecordResult:
        """The decoded, classified session of ``record``; or the result (skipped, failed) of a
        record that has none. No call is made (the feature flag ``enabled`` off defers what
        this gives: `levers`)."""
        return self._session(record)

    def _session(self, record: StreamRecord) -> Session | RecordResult:
        """The decoded, classified session; or the result of a record that has none."""
        if record.sequence_number is None:
            return self._result(record, OUTCOME_SKIPPED, cause=CAUSE_NO_SEQUENCE_NUMBER)
        if record.event_name != "REMOVE":
            return self._result(record, OUTCOME_SKIPPED, cause=CAUSE_NOT_REMOVE)
        if record.old_image is None:
            return self._result(record, OUTCOME_SKIPPED, cause=CAUSE_NO_OLD_IMAGE)
        if not owned_here(record.old_image, self.config):  # global table: another Region's
            return self._result(record, OUTCOME_SKIPPED, cause=CAUSE_OTHER_REGION)
        try:
            image = decode_image(record.old_image, "OldImage")
            keys = decode_image(record.keys, "Keys") if record.keys is not None else {}
        except DecodeError as exc:
            result = self._result(record, OUTCOME_FAILED, failed_actions=(ACTION_DECODE,))
            result.log["errors"] = {ACTION_DECODE: str(exc)}
            return result
        verdict = classify_removal(
            user_identity=record.user_identity,
            ttl_value=image.get(self.config.ttl_attribute),
            approximate_creation_time=record.approximate_creation_time,
        )
        incarnation = image.get(self.config.incarnation_attribute)
        return Session(
            image,
            keys,
            verdict.reason,
            verdict.lag_seconds,
            record,
            incarnation if isinstance(incarnation, str) and incarnation else None,
        )

    def _session_log(self, session: Session) -> dict[str, Any]:
        log: dict[str, Any] = {
            "keys": to_json_value(session.keys),
            "reason": session.reason,
            "ttl": to_json_value(session.image.get(self.config.ttl_attribute)),
            "approximateCreationDateTime": to_json_value(session.record.approximate_creation_time),
        }
        if session.lag_seconds is not None:
            log["ttlLagSeconds"] = to_json_value(session.lag_seconds)
        return log

    # --- steps ---------------------------------------------------------------------------
    def _attempt(self, step: CleanupStep, plan: Plan, ctx: StepContext) -> Attempt:
        """Run (or, in a dry run, preview) one step, release the ownership records of what it
        acted on, and classify what it raised. The attempt holds a call slot, on a pool thread
        or the record's own (gates, a record's single step): record and pool threads together
        never exceed ``max_workers`` calls in flight.

        The one place a step's exception is caught: ``StepFailed`` under its action, anything
        else — any ``BaseException`` (module docstring, *User code*) — under the step's name.
        """
        # The one gate of every change-making call: in a dry run only ``preview`` runs.
        call = step.preview if self.config.dry_run else step.run
        try:
            with ctx.holding():
                return step.name, call(plan, ctx), None
        except StepFailed as exc:
            return step.name, STEP_FAILED, (exc.action, exc.detail)
        except BaseException as exc:  # user code: nothing it raises may leave its record
            return step.name, STEP_FAILED, (step.name, raised_text(exc))

    def _release_owned(
        self,
        acting: Sequence[tuple[CleanupStep, Plan]],
        attempts: Sequence[Attempt],
        ctx: StepContext,
        tally: _Tally,
        releases: DeferredReleases | None,
    ) -> None:
        """Release the ownership records of the ids the record's steps acted on (``done`` or
        ``already-done``): left in ``releases`` for the invocation (`deferred_releases`),
        or sent now in one request. A release that fails fails the steps that acted (action
        ``Ownership``): the record is retried."""
        done = [
            (step.name, plan.owned)
            for (step, plan), (_, status, _) in zip(acting, attempts, strict=True)
            if plan.owned and status in (STEP_DONE, STEP_ALREADY_DONE)
        ]
        if not done or self.config.dry_run or ctx.claim_batcher is None or ctx.claimant is None:
            return
        refs = tuple(dict.fromkeys(ref for _, owned in done for ref in owned))
        steps = tuple(name for name, _ in done)
        if releases is not None:
            sequence_number = ctx.session.record.sequence_number
            releases.add(PendingRelease(sequence_number, ctx.claimant, refs, steps))
            return
        with ctx.holding():
            failures = ctx.claim_batcher.release(ctx.claimant, refs, ctx.waiting)
        if failures:
            tally.steps.update(dict.fromkeys(steps, STEP_FAILED))
            tally.add_error(ACTION_OWNERSHIP, "; ".join(failures))

    def _run_gates(self, ctx: StepContext, tally: _Tally) -> bool:
        """Run the gate steps in order, on the record's thread; ``False`` (stop) as soon as one
        fails."""
        for step in self._active(self.gate_steps):
            plan = step.plan(ctx.session)
            if plan.status != PLAN_RUN:
                tally.add_plan(step, plan, ctx)
                continue
            if step.name in self.disabled_steps:
                tally.add_disabled(step)
                continue
            ctx.log.update(plan.log)
            attempt = self._attempt(step, plan, ctx)
            tally.add_attempt(attempt)
            if attempt[2] is not None:
                return False
            # A gate counts as cleanup work once it made its change; a dry run's preview does
            # not (a session naming nothing else is skipped in a dry run, as before the steps).
            if attempt[1] in (STEP_DONE, STEP_ALREADY_DONE):
                tally.ran_any = True
        return True

    def _run_in_order(
        self,
        acting: Sequence[tuple[CleanupStep, Plan]],
        ctx: StepContext,
        step_pool: StepPool | None,
    ) -> list[Attempt]:
        """The attempts of ``acting``, in its order: side by side, except that a step whose
        ``after`` names another acting step runs once the first ones finished, and is failed
        unstarted (under its own name: the record is retried) when one it waits for failed."""
        names = {step.name for step, _ in acting}
        waits = [bool(set(step.after) & names) for step, _ in acting]
        first = [pair for pair, wait in zip(acting, waits, strict=True) if not wait]
        done = iter(self._run_side_by_side(first, ctx, step_pool))
        attempts: list[Attempt | None] = [None if wait else next(done) for wait in waits]
        failed = {a[0] for a in attempts if a is not None and a[1] == STEP_FAILED}
        later = [
            (i, step, plan)
            for i, ((step, plan), wait) in enumerate(zip(acting, waits, strict=True))
            if wait
        ]
        runnable = [(step, plan) for _, step, plan in later if not set(step.after) & failed]
        ran = iter(self._run_side_by_side(runnable, ctx, step_pool))
        for i, step, _ in later:
            blocked = sorted(set(step.after) & failed)
            attempts[i] = (
                (step.name, STEP_FAILED, (step.name, f"not started: {', '.join(blocked)} failed"))
                if blocked
                else next(ran)
            )
        return [a for a in attempts if a is not None]

    def _run_side_by_side(
        self,
        runnable: Sequence[tuple[CleanupStep, Plan]],
        ctx: StepContext,
        step_pool: StepPool | None,
    ) -> list[Attempt]:
        # The steps are independent (each acts only on what the old image names), so they run
        # at the same time when a step pool is given: the first on the record's own thread
        # (which would otherwise only wait), the others on the pool.
        if step_pool is not None and len(runnable) > 1:
            (first, first_plan), rest = runnable[0], runnable[1:]
            futures = [step_pool.submit(self._attempt, step, plan, ctx) for step, plan in rest]
            attempt = self._attempt(first, first_plan, ctx)
            others = [
                _attempt_of(step, future) for (step, _), future in zip(rest, futures, strict=True)
            ]
            return [attempt, *others]
        return [self._attempt(step, plan, ctx) for step, plan in runnable]

    def _finish(self, record: StreamRecord, ctx: StepContext, tally: _Tally) -> RecordResult:
        log = ctx.log
        if tally.missing:
            log["missingAttributes"] = tally.missing
        if tally.invalid:
            log["invalidAttributes"] = tally.invalid
        if tally.steps:
            log["steps"] = tally.steps
        if tally.ownership:
            log["ownership"] = tally.ownership
        failed = tuple(tally.errors)
        if failed:
            outcome, cause = OUTCOME_FAILED, None
            log["errors"] = tally.errors
        elif tally.ran_any:
            outcome, cause = (OUTCOME_DRY_RUN if self.config.dry_run else OUTCOME_CLEANED), None
        else:
            outcome, cause = OUTCOME_SKIPPED, CAUSE_MISSING_ATTRIBUTES
        session = ctx.session
        result = self._result(
            record,
            outcome,
            reason=session.reason,
            cause=cause,
            failed_actions=failed,
            objects_deleted=ctx.objects_deleted,
            refused_steps=tuple(tally.refused),
            lag_seconds=session.lag_seconds,
            tenant=session.image.get(self.config.tenant_attribute),
            archived=tally.steps.get(ACTION_ARCHIVE) == STEP_DONE,
            ownership_refusals=tally.ownership,
            deferred_steps=tuple(tally.deferred) if not self.config.dry_run else (),
        )
        result.log.update(log)
        return result

    # --- accounting ----------------------------------------------------------------------
    def account(self, result: RecordResult) -> None:
        """Count the record's metrics and write its one log line."""
        self._count(result)
        fields = {"outcome": result.outcome, **result.log}
        if result.cause is not None:
            fields["cause"] = result.cause
        if result.failed_actions:
            fields["failedActions"] = list(result.failed_actions)
        what = (
            result.reason
            if result.outcome in (OUTCOME_CLEANED, OUTCOME_DRY_RUN)
            else (result.cause or ",".join(result.failed_actions))
        )
        self.logger.log(
            _level(result, fields),
            "session cleanup %s (%s) sequenceNumber=%s",
            result.outcome,
            what,
            result.sequence_number,
            extra={"session": to_json_value(fields)},
        )

    def _count(self, result: RecordResult) -> None:
        # The tenant rides in the session's EMF documents (a property; opt-in a dimension).
        m = self.metrics.for_tenant(result.tenant)
        m.objects_deleted(result.objects_deleted)
        for step in result.refused_steps:
            m.step_refused(step)
        for step in result.deferred_steps if result.outcome != OUTCOME_FAILED else ():
            m.count(METRIC_STEPS_DISABLED, dimension=(DIMENSION_ACTION, step))
        refusals = Counter(r for ids in result.ownership_refusals.values() for r in ids.values())
        for refusal, count in sorted(refusals.items()):
            m.resource_refused(refusal, count)
        if result.outcome == OUTCOME_FAILED:
            for action in result.failed_actions:
                m.cleanup_failed(action)
            return
        if self.only_steps is not None:
            return  # the drain of deferred work: the session was counted when it was removed
        # Only final outcomes: a failed record comes back, and would be counted twice.
        if result.lag_seconds is not None:
            m.ttl_lag(result.lag_seconds)
        if result.outcome == OUTCOME_CLEANED and result.reason is not None:
            m.session_cleaned(result.reason)
        if result.outcome == OUTCOME_DRY_RUN and result.reason is not None:
            m.count(METRIC_SESSIONS_WOULD_BE_CLEANED, dimension=(DIMENSION_REASON, result.reason))
        if result.outcome == OUTCOME_CLEANED and result.archived:
            m.count(METRIC_SESSIONS_ARCHIVED)
        elif result.cause is not None:
            m.record_skipped(result.cause)


def _status(verdict: Verdict | ClaimFailure) -> str | None:
    return verdict.status if isinstance(verdict, Verdict) else None


def raised_text(exc: BaseException) -> str:
    """What the log line's ``errors`` say of ``exc``: ``"Type: message"`` (a botocore error's
    ``"Code: Message"``), or the type alone when it has no message (``KeyboardInterrupt``).
    Never raises: an exception whose own ``__str__`` raises (user code too) is
    ``"Type: <message not printable: Type2>"``."""
    try:
        return error_text(exc) if str(exc) else type(exc).__name__
    except BaseException as failed:  # formatting user code's exception runs user code
        return f"{type(exc).__name__}: <message not printable: {type(failed).__name__}>"


def _attempt_of(step: CleanupStep, future: Future[Attempt]) -> Attempt:
    """The attempt a step pool future holds; an exception it holds (raised on the pool thread
    outside `CleanupRunner._attempt`, e.g. by its call slots) is that step's failure.
    Waiting is not guarded: a signal's ``KeyboardInterrupt`` raised in this thread while it
    waits propagates."""
    try:
        exc = future.exception()
    except CancelledError:  # the pool was shut down at the hard stop before the step started
        return step.name, STEP_FAILED, (ACTION_TIME_GUARD, "cancelled at the hard stop")
    if exc is not None:
        return step.name, STEP_FAILED, (step.name, raised_text(exc))
    return future.result()


_WARNING_CAUSES = (
    CAUSE_NO_OLD_IMAGE,
    CAUSE_MISSING_ATTRIBUTES,
    CAUSE_NO_SEQUENCE_NUMBER,
    CAUSE_ITEM_STILL_IN_TABLE,
)


def _level(result: RecordResult, fields: Mapping[str, Any]) -> int:
    if result.outcome == OUTCOME_FAILED:
        return logging.ERROR
    if (
        result.refused_steps
        or result.alarmed_refusals()
        or "invalidAttributes" in fields
        or result.cause in _WARNING_CAUSES
    ):
        return logging.WARNING
    return logging.INFO
