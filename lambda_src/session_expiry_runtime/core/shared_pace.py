"""A request quota's budget shared by every invocation that spends it at once.

KMS's ``RetireGrant`` quota (50 requests a second by default, per account and Region, every caller
sharing it: AWS KMS Developer Guide, "Request quotas", the ``RetireGrant`` row of the "Request
quotas for each AWS KMS API operation" table; earlier revisions listed 15, then 30) is spent by
every cleanup invocation that runs at once — a storm runs one per stream shard times the
parallelization factor — and by the grant sweep. The adaptive pacing of `pacing` is per execution
environment: each invocation learns the rate from its own throttles, so N of them together ask for
about N times the quota before they settle (the bench's storm tables measured 29 to 32
``RetireGrant`` a second against 15). No record fails, but the application's own grant calls, which
share the quota, are throttled.

`SharedBudget` makes the budget one: a **fixed-window counter in DynamoDB**, one item per quota
and wall-clock second in the ownership table (which only the cleanup and the claim registrar
may write; the cleanup role may already ``UpdateItem`` it):

``{"resource": "pace#<operation>#<epoch second>", "used": <requests taken in that second>,
"expiresAt": <the second + 1 hour, time to live>}``

Before each attempt of a paced operation (a retry is a request too), the invocation takes one
request of the current second with a conditional ``UpdateItem`` (``used`` at most the budget
less what it asks for, then add it); when the second is spent it waits for the next one and asks
again, until the call's deadline — the same deadline the adaptive pacing keeps (`pacing`), after
which the call fails with `pacing.PacingTimeout` and its record is retried. A batch asks once
for all its grants: before its records start, beside its ownership marks, it **reserves** the
requests of the grants it will retire (`SharedBudget.reserve`, one ``UpdateItem`` of ``k``, or
of what the second has left: ``ReturnValuesOnConditionCheckFailure`` returns the item a refusal
saw), and each ``RetireGrant`` of that second spends a held request with no call. A request is
spent within its own second or not at all (one whose write was answered after its second ended
is not spent either: the call asks again); the ones a second ended with are asked for together
in the next (one write), but never more than half the budget, so one invocation's large batch
cannot take the fleet's second from the others (not even one that spent a whole second: what
it spent is what it was given, not what the others could spare). One thread at a time
asks; the calls that waited for a write that failed go out at once (failing open, below). What an
invocation reserved for the current second and did not spend when it ends (grants it did not
retire: their claims already released, as in a redelivered batch) is given back to the fleet
in one more write (`SharedBudget.give_back`; sent once, never retried, and not once the
invocation's time guard has tripped). So
every invocation together sends at most ``per_second`` requests in
any wall-clock second (Lambda's hosts keep their clocks by the Amazon Time Sync Service; a
second's boundary can still let two seconds' budgets meet within a second's span, which is why
the default budget stays well below KMS's 50 (two seconds meeting make 20) and leaves the rest
to the application and the grant sweep's 5: ``SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET``,
default 10), and a batch of grants costs a few writes a second it runs (each for up to half
the budget), not one a grant.

A budget item that cannot be written (a throttle, a missing permission) does not stop the
call: it goes out paced by the adaptive limiter alone, counted (``SharedPaceUnavailable``, one
a call, in its own invocation's metrics; the other calls of that second go out without writing
again, each counted too; a batch's reservation that could not be written counts one) and
logged — the budget is an economy, not a safety rule. Unless
the call's deadline passed meanwhile: then, as for a spent second, the call fails with
`pacing.PacingTimeout`. The paced ownership client retries a throttled budget write for at
most `RESERVE_WAIT_SECONDS` (`writing`), not until the call's deadline as its other writes, so
a budget item that stays throttled holds each second's calls a moment, not the invocation.

Cost: one write request unit per ``UpdateItem`` of an item under 1 KB — a few per batch and
second for a batch's reserved grants, one per request otherwise — at most about $0.625 per
million ``RetireGrant`` calls beside KMS's $30 per million requests.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .clients import CleanupClients
from .config import METRIC_SHARED_PACE_UNAVAILABLE, RuntimeConfig
from .metrics import MetricsRecorder
from .ownership import ATTR_EXPIRES_AT, ATTR_RESOURCE

__all__ = [
    "PACE_KIND",
    "RESERVE_WAIT_SECONDS",
    "Demand",
    "SharedBudget",
    "invocation_demand",
    "retire_grant_budget",
    "writing",
]

#: The ``resource`` prefix of budget items (not an ownership record kind).
PACE_KIND = "pace"
ATTR_USED = "used"
#: How long a budget item is kept after its second (time to live).
KEEP_SECONDS = 3600
#: How long a budget write may hold anything (seconds): a batch waits at most this long for its
#: reservation before its records start, and the paced ownership client retries a throttled
#: budget write at most this long (`writing`), not until the call's deadline.
RESERVE_WAIT_SECONDS = 1.0
#: `SharedBudget._fetch`'s answer when the second ended while it was asked for: ask again.
_AGAIN = object()
#: The ``unique_id`` of `_give_back_once` on a client (registered once however many budgets).
_GIVE_BACK_ONCE = "session_expiry_shared_pace_give_back_once"

logger = logging.getLogger(__name__)


@dataclass
class Demand:
    """The requests one invocation still expects to take: what it reserved (`SharedBudget.reserve`)
    less what its calls have taken since. When a second ends before they are spent, its next
    call asks for them in one write — no more than half the budget."""

    left: int = 0
    #: the budget it reserved from (`SharedBudget.reserve`): what is left unspent when the
    #: invocation ends is given back to it (`SharedBudget.give_back`)
    budget: SharedBudget | None = None

    def took(self) -> None:
        """Count one request spent."""
        self.left = max(0, self.left - 1)


#: ``True`` on the thread sending a budget write (`writing`).
_WRITING: ContextVar[bool] = ContextVar("session_expiry_shared_pace_writing", default=False)


def writing() -> bool:
    """``True`` while the calling thread sends a budget write: `pacing` then retries a throttle
    for at most `RESERVE_WAIT_SECONDS`, after which the write fails and the call it was for
    goes out without the budget (counted) — the budget is an economy; the ownership client
    retries its other writes until the call's deadline."""
    return _WRITING.get()


#: ``True`` on the thread sending a give-back (`SharedBudget.give_back`): sent once, not retried.
_GIVING_BACK: ContextVar[bool] = ContextVar("session_expiry_shared_pace_giving_back", default=False)


class _NotSentAgain(RuntimeError):
    """A give-back's retry, not sent: its first attempt may have been applied."""


def _give_back_once(request: Any = None, **_: Any) -> None:
    """``before-send`` of ``UpdateItem``: a give-back is sent once. A write whose answer was
    lost (a read timeout, a 500) may have been applied (Amazon DynamoDB Developer Guide,
    "Error handling"); taking again only counts more, but giving back again would free
    requests another environment then spends, over the budget."""
    if not _GIVING_BACK.get():
        return
    retries = (getattr(request, "context", None) or {}).get("retries") or {}
    if retries.get("attempt", 1) > 1:
        raise _NotSentAgain("a give-back is sent once: its first attempt may have been applied")


#: The demand of the invocation a call works for (`contextvars`: copied into its threads).
_DEMAND: ContextVar[Demand | None] = ContextVar("session_expiry_shared_pace", default=None)


@contextmanager
def invocation_demand(out_of_time: Callable[[], bool] = lambda: False) -> Iterator[Demand]:
    """The block is one invocation's: `SharedBudget.reserve` records its demand here, and the
    calls of threads started in the block (their context copied from it) take from it. Gone
    with the block, so nothing an invocation left unspent outlives it: what it reserved for
    the current second and did not spend (grants it did not retire — their claims already
    released, as in a redelivered batch) is given back to the fleet (`SharedBudget.give_back`,
    one ``UpdateItem``; none when everything was spent or the second is over, nor once
    ``out_of_time()``, the invocation's time guard, is ``True``: no new call starts within its
    margin; default never)."""
    demand = Demand()
    token = _DEMAND.set(demand)
    try:
        yield demand
    finally:
        _DEMAND.reset(token)
        if demand.budget is not None and demand.left > 0 and not out_of_time():
            demand.budget.give_back(demand.left)


class SharedBudget:
    """At most ``per_second`` requests of ``operation`` in any wall-clock second, across every
    invocation that uses the same table (see the module docstring).

    Args:
        dynamodb: a boto3 DynamoDB client (the cleanup's ownership client).
        table_name: the ownership table.
        operation: the quota's operation, e.g. ``"RetireGrant"``.
        per_second: requests a second for every invocation together, 1 or more.
        metrics: where ``SharedPaceUnavailable`` is counted.
        wall_clock: epoch seconds now; default `time.time` (the window's second).
        sleep: how to wait; default `time.sleep`.

    Raises:
        ValueError: ``per_second`` below 1.
    """

    def __init__(
        self,
        dynamodb: Any,
        table_name: str,
        operation: str,
        per_second: int,
        metrics: MetricsRecorder,
        *,
        wall_clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if per_second < 1:
            raise ValueError(f"per_second={per_second}: expected at least 1 request a second")
        self._ddb, self.table_name, self.operation = dynamodb, table_name, operation
        self.per_second, self.metrics = per_second, metrics
        self.now, self.sleep = wall_clock, sleep
        self._lock = threading.Lock()
        #: the second this environment last found spent (no call for it again)
        self._spent: int | None = None
        #: requests taken for ``_held_second`` and not yet spent (`reserve`)
        self._held_second: int | None = None
        self._held = 0
        #: one thread at a time asks for the requests of the calls waiting (`_fetch`)
        self._asking = threading.Lock()
        self._waiting = 0
        #: the second whose write failed last (its waiting calls fail open at once)
        self._failed_second: int | None = None
        events = getattr(getattr(dynamodb, "meta", None), "events", None)
        if events is not None:
            events.register(
                "before-send.dynamodb.UpdateItem", _give_back_once, unique_id=_GIVE_BACK_ONCE
            )

    def take(
        self,
        deadline: Callable[[], float],
        on_wait: Callable[[], None] = lambda: None,
        metrics: MetricsRecorder | None = None,
    ) -> bool:
        """Wait for one request of the budget; ``True`` once taken, ``False`` when
        ``deadline()`` (seconds left) runs out first (at once when it already has: no request,
        not even a held one); ``on_wait`` is called before each wait.
        A request this environment holds for the current second (`reserve`) is spent first,
        with no call. A budget that cannot be read or written answers ``True`` at once
        (each such call counted in ``metrics``, the calling invocation's, default the
        budget's own; logged) — ``False`` if ``deadline()`` ran out meanwhile (a throttled
        write retried until after it), as when a write that took the request was answered
        after it.
        """
        demand = _DEMAND.get()
        if deadline() < 0:  # an attempt past its deadline gets none, not even a held one
            return False
        while True:
            second = math.floor(self.now())
            if self._spend_held(second, demand):
                return True
            if self._spent != second:
                taken = self._fetch(second, demand, deadline)
                if taken is _AGAIN:  # the second ended while it was asked for
                    if deadline() <= 0:
                        return False
                    continue
                if taken:
                    return True
                if taken is None:  # fail open (counted), but never past the call's deadline
                    (metrics or self.metrics).count(METRIC_SHARED_PACE_UNAVAILABLE)
                    return deadline() > 0
            left = deadline()
            if left <= 0:
                return False
            on_wait()
            # The next second may have begun already (a slow write, a busy host): no negative
            # sleep (``time.sleep`` raises ValueError), just ask again.
            self.sleep(max(0.0, min(left, second + 1 - self.now())) + 1e-3)

    def _fetch(
        self,
        second: int,
        demand: Demand | None,
        deadline: Callable[[], float],
    ) -> object:
        """One request of ``second`` for the calling `take`, asked for by one thread at a time:
        ``True`` taken (with what else the asking wanted, held), ``False`` spent or no time
        left to wait for the thread asking, ``None`` unknown (the write failed: this one and
        the calls that waited for it go out unpaced by the budget), `_AGAIN` when ``second``
        ended meanwhile (a request is spent within its own second or not at all); ``False``
        also when the write was answered after ``deadline()`` (its request is held for the
        next call of the second: an attempt never starts past its deadline). The write
        takes the calls waiting, or the invocation's demand left up to half of `per_second`
        (`_want`)."""
        with self._lock:
            self._waiting += 1
        try:
            if not self._asking.acquire(timeout=max(0.0, deadline())):
                return False
        finally:
            with self._lock:
                self._waiting -= 1
                waiting = self._waiting
        try:
            if self._failed_second == second:  # it could not be written a moment ago
                return None
            if math.floor(self.now()) != second:
                return _AGAIN
            if self._spend_held(second, demand):  # the thread asking before took this one's
                return True
            if self._spent == second:
                return False
            want = self._want(demand, waiting)
            fetched = self._fetched(second, self._take(second, want))
            if fetched is True and deadline() < 0:  # answered after the call's deadline
                self._hold(second, 1)  # for this environment's next call of the second
                return False
            if fetched is True:
                _took(demand, self._lock)
            return fetched
        finally:
            self._asking.release()

    def _fetched(self, second: int, taken: int | None) -> object:
        """What `_fetch` answers for ``taken`` requests of ``second``."""
        with self._lock:
            if taken is None:
                self._failed_second = second
            elif taken == 0:
                self._spent = second
        if not taken:
            return taken if taken is None else False
        if math.floor(self.now()) != second:
            return _AGAIN  # a slow write: its requests' second is over
        self._hold(second, taken - 1)
        return True

    def _want(self, demand: Demand | None, waiting: int) -> int:
        """How many requests one write asks for: the calls waiting and this
        one, or the invocation's demand left when larger — but never more than half of
        `per_second` for the demand (the rest of the fleet's second stays for the others);
        at most `per_second`."""
        planned = 0
        if demand is not None:
            with self._lock:
                planned = min(demand.left, self.per_second // 2)
        return max(1, min(max(waiting + 1, planned), self.per_second))

    def reserve(self, requests: int, metrics: MetricsRecorder | None = None) -> int:
        """Take up to ``requests`` requests of the current second in one ``UpdateItem`` and
        hold them for this environment's next `take` calls of that second: a batch that will
        retire ``requests`` grants asks once, not once a grant. Fewer when the second has
        fewer left (none when it is spent: the calls then wait in `take`); never more than
        `per_second`. Within `invocation_demand`, ``requests`` becomes the invocation's demand:
        when a second ends before they are spent, its next `take` asks for what is left in
        one write, up to half of `per_second`. Returns how many were taken. Never raises and
        never waits for a spent second (its one write may be retried by the client for at
        most `RESERVE_WAIT_SECONDS`, as every budget write is, and the batch waits for it at
        most as long): a budget that cannot be written
        takes none (counted in ``metrics``, default the budget's own)."""
        if requests < 1:
            return 0
        demand = _DEMAND.get()
        if demand is not None:
            with self._lock:
                demand.left, demand.budget = requests, self
        second = math.floor(self.now())
        if self._spent == second:
            return 0
        taken = self._take(second, min(requests, self.per_second))
        if taken is None:
            (metrics or self.metrics).count(METRIC_SHARED_PACE_UNAVAILABLE)
        if taken == 0:
            with self._lock:
                self._spent = second
        self._hold(second, taken or 0)
        return taken or 0

    def give_back(self, requests: int) -> int:
        """Give back to the current second up to ``requests`` of the requests this environment
        holds for it, which no call will then spend, in one ``UpdateItem`` (``used`` less them,
        on the condition that it holds at least as many): another environment may take them
        within the second — one that has not found it spent yet: one refused in it asks no
        more until the next second (no write a call while it waits). Returns how many were
        given back: none when nothing is held for the current second (a request is spent
        within its own second or not at all). Sent once, never retried (`_give_back_once`: a
        write whose answer was lost may have been applied, and a decrement sent twice would
        let the fleet spend over the budget). Never raises: a write that fails is logged, and
        the requests are lost to the fleet for the rest of the second, as they were before."""
        second = math.floor(self.now())
        with self._lock:
            given = min(self._held, requests) if self._held_second == second else 0
            self._held -= max(0, given)
        if given < 1:
            return 0
        writing, once = _WRITING.set(True), _GIVING_BACK.set(True)
        try:
            self._ddb.update_item(
                TableName=self.table_name,
                Key={ATTR_RESOURCE: {"S": f"{PACE_KIND}#{self.operation}#{second}"}},
                UpdateExpression="SET #used = #used - :given",
                ConditionExpression="#used >= :given",
                ExpressionAttributeNames={"#used": ATTR_USED},
                ExpressionAttributeValues={":given": {"N": str(given)}},
            )
        except Exception as exc:  # an economy, at an invocation's end: nothing may fail it
            logger.warning("could not give back %d %s requests: %s", given, self.operation, exc)
            return 0
        finally:
            _GIVING_BACK.reset(once)
            _WRITING.reset(writing)
        return given

    def _spend_held(self, second: int, demand: Demand | None = None) -> bool:
        """Spend a request held for ``second``; the call then goes with no write."""
        with self._lock:
            if self._held_second != second or self._held < 1:
                return False
            self._held -= 1
        _took(demand, self._lock)
        return True

    def _hold(self, second: int, requests: int) -> None:
        """Hold ``requests`` more of ``second``; what was held for an earlier second is
        dropped (a request is spent within its own second or not at all)."""
        with self._lock:
            if self._held_second is not None and second < self._held_second:
                return  # a slow write for a second that is over: nothing to hold
            if self._held_second != second:
                self._held_second, self._held = second, 0
            self._held += requests

    def _take(self, second: int, want: int) -> int | None:
        """Take ``want`` requests of ``second``, or what is left of it when that is fewer:
        how many were taken (0: spent), ``None`` unknown (the write failed)."""
        while want > 0:
            answer = self._try(second, want)
            if answer is None:
                return None
            taken, left = answer
            if taken:
                return want
            want = min(want - 1, left)  # what the second had left when it refused
        return 0

    def _try(self, second: int, want: int) -> tuple[bool, int] | None:
        """Take ``want`` requests of ``second``: ``(True, want)`` taken; ``(False, left)``
        refused, with the requests the second still had; ``None`` unknown (the write
        failed: logged; the callers count it, one per call sent without the budget)."""
        writing = _WRITING.set(True)
        try:
            self._ddb.update_item(
                TableName=self.table_name,
                Key={ATTR_RESOURCE: {"S": f"{PACE_KIND}#{self.operation}#{second}"}},
                UpdateExpression="SET #used = if_not_exists(#used, :zero) + :want, #ttl = :ttl",
                ConditionExpression="attribute_not_exists(#used) OR #used <= :limit",
                ExpressionAttributeNames={"#used": ATTR_USED, "#ttl": ATTR_EXPIRES_AT},
                ExpressionAttributeValues={
                    ":zero": {"N": "0"},
                    ":want": {"N": str(want)},
                    ":limit": {"N": str(self.per_second - want)},
                    ":ttl": {"N": str(second + KEEP_SECONDS)},
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return True, want
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False, self._left(exc)
            self._unavailable(exc)
        except BotoCoreError as exc:
            self._unavailable(exc)
        finally:
            _WRITING.reset(writing)
        return None

    def _left(self, refused: ClientError) -> int:
        """The requests a refused second still had, from the item its refusal returned
        (``ReturnValuesOnConditionCheckFailure``); 0 when it returned none."""
        used = refused.response.get("Item", {}).get(ATTR_USED, {}).get("N")
        return max(0, self.per_second - int(used)) if used is not None else 0

    def _unavailable(self, exc: BaseException) -> None:
        logger.warning("shared %s budget unavailable, pacing alone: %s", self.operation, exc)


def _took(demand: Demand | None, lock: threading.Lock) -> None:
    if demand is not None:
        with lock:
            demand.took()


def retire_grant_budget(
    config: RuntimeConfig, clients: CleanupClients, metrics: MetricsRecorder
) -> SharedBudget | None:
    """The cleanup's shared ``RetireGrant`` budget (``kms_retire_grant_budget`` a second), or
    ``None`` without grants or without the ownership table that holds it."""
    if clients.kms is None or clients.ownership is None or not config.ownership_table_name:
        return None
    return SharedBudget(
        clients.ownership,
        config.ownership_table_name,
        "RetireGrant",
        config.kms_retire_grant_budget,
        metrics,
    )
