"""The cleanup's ownership check: one `ClaimBatcher` per invocation, shared by its records.

Before a step acts on a connection, AgentCore session or grant id that an old image names, the
runner (`runner`) asks this module whether the id's ownership record (`ownership`)
names the REMOVE record's own ``Keys`` and the image's incarnation; after the step acted, it
releases the record. Three calls, each **coalesced across the records of the invocation**
(natural batching, as `steps.delete_objects` does for ``DeleteObjects``: the first request
goes out at once, the ones that arrive while it is answered go out together in the next call):

* **mark** (real run) — ``TransactWriteItems`` of at most 100 ``Update`` actions
  ``SET #state = :releasing, #stateSince = :t`` with the condition
  ``#owner = :K AND #incarnation = :I AND #state <> :released`` and
  ``ReturnValuesOnConditionCheckFailure = ALL_OLD``. Applied: the id is owned, act on it. Why a
  conditional write and not a read: the check and the act must not race a successor's claim. A
  read says who owned the id *when it was read*; between that read and the act, the claim may
  become free (released by an earlier run, or left ``releasing`` long enough) and a new session
  may take it, and the act would then close or stop the new owner's resource. The mark makes
  the claim ``releasing`` in the same atomic step as the check, and the store's claim condition
  refuses a ``releasing`` claim until `RELEASING_STALE_SECONDS` (longer than
  any cleanup run) have passed: no one can take the id between the check and the act.
* **release** (after the step acted, ``done`` or ``already-done``) — the same transaction shape,
  ``SET #state = :released`` with the condition ``#owner = :K AND #incarnation = :I``. A
  condition that fails means the record is no longer this incarnation's (taken over after it
  went stale, or deleted by its time to live): nothing of ours is left to release, not a
  failure.
* **read** (dry run, and a step's `ClaimBatcher.claims` look-up) — ``BatchGetItem`` of at
  most 100 keys, ``ConsistentRead``; read-only.

``TransactionCanceledException`` is read item by item from ``CancellationReasons`` (Amazon
DynamoDB API Reference, "TransactWriteItems": one reason per action, in request order, ``Code``
``None`` for an action that would have succeeded): ``ConditionalCheckFailed`` with ``Item`` is
classified (`classify`: released by this incarnation is ``released``, already
done); without ``Item`` there is no record (``classify(None)``); ``None`` (not applied because
another action failed) is sent again; ``TransactionConflict`` and throttling are sent again, at
most `MAX_ROUNDS` calls in all; ``ValidationError`` and the like answer a failure. A
transaction may not name one item twice (ValidationException): requests for the same record
with the same expected owner share one action and one answer, requests with another expected
owner wait for a later call. Whatever is still unsettled after the rounds, or a call that
botocore's retries did not cure, is a failure of exactly the requests it carried: their steps
fail with action ``Ownership`` and the record is retried.

No process-wide state: the runner builds a batcher for each invocation (a record cleaned on its
own gets its own), so nothing waits for or leaks into another invocation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from ..core.config import REFUSAL_UNCLAIMED
from ..core.invocation import submit_in_context
from ..core.ownership import (
    ATTR_HANDED_OVER_AT,
    ATTR_INCARNATION,
    ATTR_OWNER,
    ATTR_RESOURCE,
    ATTR_STATE,
    ATTR_STATE_SINCE,
    STATE_RELEASED,
    STATE_RELEASING,
    VERDICT_OWNED,
    Claim,
    Verdict,
    classify,
    resource_key,
)
from .outcomes import error_code, error_text

__all__ = [
    "MAX_ITEMS_PER_CALL",
    "MAX_ROUNDS",
    "ClaimBatcher",
    "ClaimFailure",
    "ClaimRef",
    "Claimant",
]

#: ``TransactWriteItems`` takes at most 100 actions, ``BatchGetItem`` at most 100 keys (Amazon
#: DynamoDB API Reference).
MAX_ITEMS_PER_CALL = 100
#: Calls per coalesced request at most (the first and the retries of what it left unsettled).
MAX_ROUNDS = 4
#: Pause before each retry round (seconds): long enough for a conflicting transaction to end.
RETRY_PAUSES = (0.02, 0.05, 0.1)
#: ``CancellationReasons`` codes that a later call may not meet again.
_RETRYABLE_REASONS = frozenset(
    {"None", "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
)
#: Error codes of a whole call worth another round (botocore's own retries came first).
_RETRYABLE_ERRORS = frozenset(
    {
        "TransactionConflictException",
        "TransactionInProgressException",
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "InternalServerError",
    }
)


@dataclass(frozen=True)
class ClaimRef:
    """One resource a step's plan would act on: its kind (``ownership.KIND_*``) and id.

    Raises:
        ValueError: an unknown ``kind`` or an empty ``resource_id``
            (`resource_key`).
    """

    kind: str
    resource_id: str

    def __post_init__(self) -> None:
        resource_key(self.kind, self.resource_id)

    @property
    def resource(self) -> str:
        """The ownership table's partition key value, ``<kind>#<id>``."""
        return resource_key(self.kind, self.resource_id)


@dataclass(frozen=True)
class Claimant:
    """Who asks: the REMOVE record's owner token (of its ``Keys``) and the image's incarnation.

    ``owner`` is ``None`` for ``Keys`` no owner token can be made of (then every id is
    ``Unclaimed``: no ownership record can name such an item); ``incarnation`` is ``None`` for an
    item written before ownership records (its ids are read, never marked: ``Legacy`` without a
    record, ``NotOwned`` when another key's record holds the id).
    """

    owner: str | None
    incarnation: str | None


@dataclass(frozen=True)
class ClaimFailure:
    """The ownership of an id could not be settled (the step fails, action ``Ownership``)."""

    detail: str


@dataclass(frozen=True)
class _Write:
    """One transaction action: the record and the owner and incarnation it must name."""

    resource: str
    owner: str
    incarnation: str


@dataclass(frozen=True)
class _Answer:
    """What a call said about one request: applied, or the record's item, or an error."""

    applied: bool = False
    item: Mapping[str, Any] | None = None
    error: str | None = None


_APPLIED = _Answer(applied=True)
T = TypeVar("T", bound=Hashable)


@dataclass(eq=False)
class _Ticket:
    waiting: int
    answers: dict[Any, _Answer] = field(default_factory=dict)
    failure: BaseException | None = None


class _Coalescer(Generic[T]):
    """Natural batching of the requests of many threads into calls of at most ``max_items``.

    ``send(requests)`` makes one call and answers each request; ``slot(request)`` names the item
    a request acts on: two different requests for one item never share a call.
    """

    def __init__(
        self,
        send: Callable[[list[T]], dict[T, _Answer]],
        slot: Callable[[T], Hashable],
        max_items: int = MAX_ITEMS_PER_CALL,
    ) -> None:
        self._send_call, self._slot, self.max_items = send, slot, max_items
        self._pending: list[tuple[T, _Ticket]] = []
        self._remainder_in_flight = False
        self._cond = threading.Condition()

    def submit(
        self, requests: Sequence[T], waiting: Callable[[], AbstractContextManager[None]]
    ) -> dict[Any, _Answer]:
        """Each request's answer; raises what a call carrying one of them raised."""
        unique = list(dict.fromkeys(requests))
        if not unique:
            return {}
        ticket = _Ticket(waiting=len(unique))
        with self._cond:
            self._pending.extend((request, ticket) for request in unique)
            self._cond.notify_all()
        while True:
            with waiting(), self._cond:
                self._cond.wait_for(lambda: ticket.waiting == 0 or self._can_send())
                if ticket.waiting == 0:
                    break
                chunk, remainder = self._take()
            self._send(chunk, remainder)
        if ticket.failure is not None:
            raise ticket.failure
        return ticket.answers

    def submit_all(
        self,
        requests: Sequence[T],
        waiting: Callable[[], AbstractContextManager[None]],
        at_once: int,
    ) -> dict[Any, _Answer]:
        """`submit` for more requests than one call takes, up to ``at_once`` of their calls
        in flight together, each ``max_items`` items submitted from a thread of their own (the
        calls are independent: no item is in two of them). The answers of all; raises what a
        call raised, once every call is answered."""
        chunks = _chunks(list(dict.fromkeys(requests)), self._slot, self.max_items)
        if len(chunks) <= 1 or at_once <= 1:
            return self.submit(requests, waiting)
        answers: dict[Any, _Answer] = {}
        failure: BaseException | None = None
        threads = min(len(chunks), at_once)
        with ThreadPoolExecutor(threads, thread_name_prefix="cleanup-claims") as pool:
            parts = [submit_in_context(pool, self.submit, c, waiting) for c in chunks]
            for part in parts:
                try:
                    answers.update(part.result())
                except BaseException as exc:
                    failure = failure or exc
        if failure is not None:
            raise failure
        return answers

    def _can_send(self) -> bool:
        return len(self._pending) >= self.max_items or (
            bool(self._pending) and not self._remainder_in_flight
        )

    def _take(self) -> tuple[list[tuple[T, _Ticket]], bool]:
        """Under the lock: the next call's entries (one request per item), and whether the call
        is a remainder (fewer than ``max_items`` were pending)."""
        remainder = len(self._pending) < self.max_items
        chunk: list[tuple[T, _Ticket]] = []
        slots: dict[Hashable, T] = {}
        rest: list[tuple[T, _Ticket]] = []
        for request, ticket in self._pending:
            slot = self._slot(request)
            if slots.get(slot, request) == request and (
                slot in slots or len(slots) < self.max_items
            ):
                slots[slot] = request
                chunk.append((request, ticket))
            else:
                rest.append((request, ticket))
        self._pending = rest
        if remainder:
            self._remainder_in_flight = True
        return chunk, remainder

    def _send(self, chunk: list[tuple[T, _Ticket]], remainder: bool) -> None:
        failure: BaseException | None = None
        answers: dict[T, _Answer] = {}
        try:
            answers = self._send_call(list(dict.fromkeys(request for request, _ in chunk)))
        except BaseException as exc:
            failure = exc
        with self._cond:
            for request, ticket in chunk:
                if failure is not None:
                    ticket.failure = ticket.failure or failure
                else:
                    ticket.answers[request] = answers.get(request, _Answer(error="no answer"))
                ticket.waiting -= 1
            if remainder:
                self._remainder_in_flight = False
            self._cond.notify_all()


def _chunks(requests: list[T], slot: Callable[[T], Hashable], size: int) -> list[list[T]]:
    """``requests`` in parts of at most ``size`` items, the requests for one item in one part."""
    groups: dict[Hashable, list[T]] = {}
    for request in requests:
        groups.setdefault(slot(request), []).append(request)
    items = list(groups.values())
    return [
        [request for group in items[at : at + size] for request in group]
        for at in range(0, len(items), size)
    ]


class ClaimBatcher:
    """The ownership check of one invocation: marks, releases and reads coalesced across its
    records (module docstring); thread safe.

    Args:
        dynamodb: a boto3 DynamoDB client (the cleanup's, `clients`).
        table_name: the ownership table (``SESSION_EXPIRY_OWNERSHIP_TABLE_NAME``).
        dry_run: read only (``BatchGetItem``); never mark or release.
        clock: epoch seconds now; default `time.time`.
        sleep: the pause before a retry round; default `time.sleep`.
        max_items: actions or keys per call, 1..100. Default: 100.
        calls_at_once: how many of `premark`'s or `release_all`'s calls may be in flight
            together (the construct's ``max_workers``). Default: 32.

    Raises:
        ValueError: ``max_items`` outside 1..100.
    """

    def __init__(
        self,
        dynamodb: Any,
        table_name: str,
        *,
        dry_run: bool = False,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        max_items: int = MAX_ITEMS_PER_CALL,
        calls_at_once: int = 32,
    ) -> None:
        if not 1 <= max_items <= MAX_ITEMS_PER_CALL:
            raise ValueError(f"max_items={max_items}: expected 1..{MAX_ITEMS_PER_CALL}")
        self.dynamodb, self.table_name, self.dry_run = dynamodb, table_name, dry_run
        self._clock, self._sleep = clock, sleep
        self._at_once = calls_at_once
        by_item: Callable[[_Write], Hashable] = lambda write: write.resource  # noqa: E731
        self.marks = _Coalescer(self._mark, by_item, max_items)
        #: What `premark`'s calls answered, for `check` (settled answers only).
        self._premarked: dict[_Write, _Answer] = {}
        self._premarked_lock = threading.Lock()
        self.releases = _Coalescer(self._release, by_item, max_items)
        self.reads: _Coalescer[str] = _Coalescer(self._read, lambda key: key, max_items)

    # --- what the runner and the steps call ----------------------------------------------
    def premark(self, requests: Sequence[tuple[Claimant, Sequence[ClaimRef]]]) -> int:
        """Mark the ids of many claimants at once, before their records ask: one
        ``TransactWriteItems`` per 100 actions for the whole invocation instead of the calls
        natural batching makes as records arrive one after another, all sent at once
        (`_Coalescer.submit_all`: one round trip, not one per 100 ids). A later `check` of
        one of these ids answers from what these calls said; what they left unsettled (an
        error) is asked again by that check. A dry run, and claimants without an owner or an
        incarnation, mark nothing here.

        Marking is not acting: an id marked here and never acted on (its record's archive gate
        failed, or the time guard kept it from starting) stays ``releasing`` for this
        incarnation, as after any failed step, and the record's retry marks it again.

        Returns:
            int: the number of ids marked or settled (for tests and logs). Never raises: a call
            that failed leaves its ids to `check`.
        """
        if self.dry_run:
            return 0
        writes = [
            _Write(ref.resource, claimant.owner, claimant.incarnation)
            for claimant, refs in requests
            if claimant.owner is not None and claimant.incarnation is not None
            for ref in refs
        ]
        if not writes:
            return 0
        try:
            answers = self.marks.submit_all(writes, nullcontext, self._at_once)
        except Exception:
            return 0
        settled = {w: a for w, a in answers.items() if a.error is None}
        with self._premarked_lock:
            self._premarked.update(settled)
        return len(settled)

    def check(
        self,
        claimant: Claimant,
        refs: Sequence[ClaimRef],
        waiting: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> dict[ClaimRef, Verdict | ClaimFailure]:
        """Each id's verdict for ``claimant``: a real run marks the owned ones ``releasing``
        (`VERDICT_OWNED`: act on it), a dry run only reads. Never raises: a
        request the calls could not settle answers `ClaimFailure`.

        ``waiting()`` wraps each wait for a call another thread makes (the step context's
        `waiting`, so its call slot serves others meanwhile).
        """
        if claimant.owner is None:
            return {ref: Verdict(REFUSAL_UNCLAIMED) for ref in refs}
        if self.dry_run or claimant.incarnation is None:
            return self._classify_read(claimant, refs, waiting)
        writes = {ref: _Write(ref.resource, claimant.owner, claimant.incarnation) for ref in refs}
        with self._premarked_lock:
            answers = {w: self._premarked[w] for w in writes.values() if w in self._premarked}
        todo = [w for w in writes.values() if w not in answers]
        try:
            answers.update(self.marks.submit(todo, waiting) if todo else {})
        except Exception as exc:
            return dict.fromkeys(refs, ClaimFailure(f"marking the ownership records: {exc}"))
        verdicts: dict[ClaimRef, Verdict | ClaimFailure] = {}
        for ref, write in writes.items():
            answer = answers[write]
            if answer.applied:
                verdicts[ref] = Verdict(VERDICT_OWNED)
            elif answer.error is not None:
                verdicts[ref] = ClaimFailure(f"{ref.resource}: {answer.error}")
            else:
                verdicts[ref] = self._verdict(claimant, answer.item)
        return verdicts

    def release(
        self,
        claimant: Claimant,
        refs: Sequence[ClaimRef],
        waiting: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> list[str]:
        """Mark the ids' records ``released`` (after the act); the failures' texts (empty when
        every one is released or no longer this claimant's)."""
        return self.release_all([(claimant, refs)], waiting)[0]

    def release_all(
        self,
        requests: Sequence[tuple[Claimant, Sequence[ClaimRef]]],
        waiting: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> list[list[str]]:
        """`release` for many claimants in as few calls as they allow (one
        ``TransactWriteItems`` per 100 ids, sent at once): each request's failure texts, in
        request order.
        Never raises."""
        per_request = [
            [_Write(ref.resource, claimant.owner, claimant.incarnation) for ref in refs]
            if not self.dry_run and claimant.owner is not None and claimant.incarnation is not None
            else []
            for claimant, refs in requests
        ]
        writes = [write for request in per_request for write in request]
        if not writes:
            return [[] for _ in per_request]
        try:
            answers = self.releases.submit_all(writes, waiting, self._at_once)
        except Exception as exc:
            text = f"releasing the ownership records: {exc}"
            return [[text] if request else [] for request in per_request]
        return [
            [f"{w.resource}: {answers[w].error}" for w in request if answers[w].error]
            for request in per_request
        ]

    def hand_over(self, claimant: Claimant, ref: ClaimRef) -> bool:
        """Leave ``ref``'s record to the grant sweep: ``SET handedOverAt = :now`` on the record
        while it names ``claimant`` and is ``releasing`` (the mark of this run), one
        ``UpdateItem`` (`ownership.ATTR_HANDED_OVER_AT`). ``False`` when the record is no longer
        ``claimant``'s (taken over, released, deleted: nothing of ours to hand over), and in a
        dry run (nothing written).

        Raises:
            ClientError, BotoCoreError: the UpdateItem failed (after botocore's retries).
        """
        if self.dry_run or claimant.owner is None or claimant.incarnation is None:
            return False
        try:
            self.dynamodb.update_item(
                TableName=self.table_name,
                Key={ATTR_RESOURCE: {"S": ref.resource}},
                UpdateExpression="SET #handedOver = :now",
                ConditionExpression=(
                    "#owner = :owner AND #incarnation = :incarnation AND #state = :releasing"
                ),
                ExpressionAttributeNames={
                    "#handedOver": ATTR_HANDED_OVER_AT,
                    "#owner": ATTR_OWNER,
                    "#incarnation": ATTR_INCARNATION,
                    "#state": ATTR_STATE,
                },
                ExpressionAttributeValues={
                    ":now": {"N": str(int(self._clock()))},
                    ":owner": {"S": claimant.owner},
                    ":incarnation": {"S": claimant.incarnation},
                    ":releasing": {"S": STATE_RELEASING},
                },
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def claims(
        self,
        refs: Sequence[ClaimRef],
        waiting: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> dict[ClaimRef, Claim | None]:
        """The ids' ownership records as read now (``None``: none); read-only.

        Raises:
            RuntimeError: a read failed (after the retries); the text says which record.
        """
        answers = self.reads.submit([ref.resource for ref in refs], waiting)
        out: dict[ClaimRef, Claim | None] = {}
        for ref in refs:
            answer = answers[ref.resource]
            if answer.error is not None:
                raise RuntimeError(f"reading {ref.resource}: {answer.error}")
            out[ref] = Claim.from_item(answer.item)
        return out

    def _classify_read(
        self,
        claimant: Claimant,
        refs: Sequence[ClaimRef],
        waiting: Callable[[], AbstractContextManager[None]],
    ) -> dict[ClaimRef, Verdict | ClaimFailure]:
        try:
            claims = self.claims(refs, waiting)
        except Exception as exc:
            return dict.fromkeys(refs, ClaimFailure(str(exc)))
        return {ref: self._verdict(claimant, claim) for ref, claim in claims.items()}

    @staticmethod
    def _verdict(claimant: Claimant, record: Claim | Mapping[str, Any] | None) -> Verdict:
        claim = record if isinstance(record, Claim) else Claim.from_item(record)
        return classify(claim, owner=str(claimant.owner), incarnation=claimant.incarnation)

    # --- the calls ----------------------------------------------------------------------
    def _mark(self, writes: list[_Write]) -> dict[_Write, _Answer]:
        return self._transact(writes, lambda w, t: self._update(w, t, STATE_RELEASING, True))

    def _release(self, writes: list[_Write]) -> dict[_Write, _Answer]:
        answers = self._transact(writes, lambda w, t: self._update(w, t, STATE_RELEASED, False))
        # A record no longer naming this incarnation has nothing of ours left to release.
        return {w: _APPLIED if a.error is None else a for w, a in answers.items()}

    def _update(self, write: _Write, now: int, state: str, mark: bool) -> dict[str, Any]:
        condition = "#owner = :owner AND #incarnation = :incarnation"
        values = {
            ":owner": {"S": write.owner},
            ":incarnation": {"S": write.incarnation},
            ":state": {"S": state},
            ":now": {"N": str(now)},
        }
        update: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": {ATTR_RESOURCE: {"S": write.resource}},
            "UpdateExpression": "SET #state = :state, #stateSince = :now",
            "ExpressionAttributeNames": {
                "#owner": ATTR_OWNER,
                "#incarnation": ATTR_INCARNATION,
                "#state": ATTR_STATE,
                "#stateSince": ATTR_STATE_SINCE,
            },
        }
        if mark:
            condition += " AND #state <> :released"
            values[":released"] = {"S": STATE_RELEASED}
            update["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        update["ConditionExpression"] = condition
        update["ExpressionAttributeValues"] = values
        return {"Update": update}

    def _transact(
        self, writes: list[_Write], action: Callable[[_Write, int], dict[str, Any]]
    ) -> dict[_Write, _Answer]:
        """One ``TransactWriteItems`` and the retries of what it left unsettled."""
        answers: dict[_Write, _Answer] = {}
        todo, last = list(writes), "not sent"
        for round_number in range(MAX_ROUNDS):
            self._pause(round_number)
            now = int(self._clock())
            try:
                self.dynamodb.transact_write_items(TransactItems=[action(w, now) for w in todo])
            except ClientError as exc:
                last = error_text(exc)
                if error_code(exc) == "TransactionCanceledException":
                    todo = self._cancelled(todo, exc, answers)
                elif error_code(exc) not in _RETRYABLE_ERRORS:
                    break
            except BotoCoreError as exc:
                last = error_text(exc)
                break
            else:
                answers.update(dict.fromkeys(todo, _APPLIED))
                todo = []
            if not todo:
                return answers
        answers.update(dict.fromkeys(todo, _Answer(error=f"unsettled after retries: {last}")))
        return answers

    def _cancelled(
        self, todo: list[_Write], exc: ClientError, answers: dict[_Write, _Answer]
    ) -> list[_Write]:
        """Settle what ``CancellationReasons`` settles; the writes to send again."""
        reasons = exc.response.get("CancellationReasons")
        if not isinstance(reasons, list) or len(reasons) != len(todo):
            return todo  # no reason per action (an older SDK): all again
        again: list[_Write] = []
        for write, reason in zip(todo, reasons, strict=True):
            code = str(reason.get("Code") or "None")
            if code == "ConditionalCheckFailed":
                answers[write] = _Answer(item=reason.get("Item"))
            elif code in _RETRYABLE_REASONS:
                again.append(write)
            else:
                answers[write] = _Answer(error=f"{code}: {reason.get('Message', '')}".rstrip(": "))
        return again

    def _read(self, keys: list[str]) -> dict[str, _Answer]:
        """``BatchGetItem`` (``ConsistentRead``) and the retries of its ``UnprocessedKeys``."""
        answers: dict[str, _Answer] = {}
        todo, last = list(keys), "not sent"
        for round_number in range(MAX_ROUNDS):
            self._pause(round_number)
            request = {"Keys": [{ATTR_RESOURCE: {"S": k}} for k in todo], "ConsistentRead": True}
            try:
                page = self.dynamodb.batch_get_item(RequestItems={self.table_name: request})
            except ClientError as exc:
                last = error_text(exc)
                if error_code(exc) not in _RETRYABLE_ERRORS:
                    break
                continue
            except BotoCoreError as exc:
                last = error_text(exc)
                break
            for item in (page.get("Responses") or {}).get(self.table_name) or []:
                answers[str(item.get(ATTR_RESOURCE, {}).get("S"))] = _Answer(item=item)
            unprocessed = (page.get("UnprocessedKeys") or {}).get(self.table_name) or {}
            left = {str(k.get(ATTR_RESOURCE, {}).get("S")) for k in unprocessed.get("Keys") or []}
            answers.update({k: _Answer() for k in todo if k not in left and k not in answers})
            todo, last = [k for k in todo if k in left], "UnprocessedKeys"
            if not todo:
                return answers
        answers.update(dict.fromkeys(todo, _Answer(error=f"unsettled after retries: {last}")))
        return answers

    def _pause(self, round_number: int) -> None:
        """Before each retry round, a short pause (`RETRY_PAUSES`); none before the first."""
        if round_number:
            self._sleep(RETRY_PAUSES[min(round_number, len(RETRY_PAUSES)) - 1])
