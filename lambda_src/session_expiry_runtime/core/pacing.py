"""Pacing: calls under a target's request quota slow down instead of failing. One home for both
kinds the project uses:

* `Pacer` — a **fixed pace** for a scheduled job that owns its rate: at most
  ``per_second`` calls a second (the grant sweep's KMS requests,
  ``SESSION_EXPIRY_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND``).
  A quota is shared by every caller of the account and Region: a sweep that calls as fast as it
  can takes the quota from the application and the cleanup. The starts of consecutive calls are
  at least ``1 / per_second`` seconds apart (no burst), whatever the calls' latency. Written here
  rather than taken from a library: the deployed functions need nothing beyond the Lambda Python
  runtime (boto3 and the standard library), and the rule is a few lines.
* `ClientPacer` — an **adaptive pace** for the cleanup's clients, which do not know their
  share of a quota (`install`; below).

**The cleanup's clients.** A storm of expiring sessions can ask a target for more than its quota:
KMS's ``RetireGrant`` request rate (50 a second per account and Region by default, shared by every
principal of the account: AWS KMS Developer Guide, "Request quotas", row "RetireGrant request
rate"), API Gateway's account
throttle that the ``@connections`` API shares with every API of the account (10,000 requests a
second, burst 5,000: API Gateway Developer Guide, "Amazon API Gateway quotas"), a DynamoDB
partition's 1,000 write units a second (DynamoDB Developer Guide, "Understanding DynamoDB warm
throughput"). botocore's ``standard`` retry mode answers a throttle with a jittered backoff and one
retry (`MAX_ATTEMPTS`); above the quota for long, calls run out of attempts,
records fail, the event source mapping retries and bisects them — adding load — and after its
retries sends them to the on-failure destination. Retries with jitter are not pacing.

What `install` adds to each cleanup client:

* **botocore's adaptive rate limiter** — exactly what ``retries={"mode": "adaptive"}`` adds to a
  client (``botocore.retries.adaptive.register_retry_handler``): a token bucket whose rate
  follows the CUBIC congestion algorithm, off until the target first throttles, then cut to 0.7
  times the measured sending rate at each throttle and grown back while calls succeed. One
  limiter per client, shared by every thread of the execution environment; each client serves
  one target, so each target has its own rate. botocore's limiter waits for a token without a
  bound; here the wait is bounded by the call's budget (below), and a call still without a token
  then fails (`PacingTimeout`) instead of running past the time guard.
* **throttled calls retried while the budget lasts**: a call the target throttled is sent again
  (after its token) for as long as the call's budget allows, beyond ``standard`` mode's two
  attempts; every other error is left to ``standard`` mode. A throttled request was refused, not
  executed, so sending it again is safe (and every cleanup call is idempotent anyway).
* **the metric**: ``CallsPaced`` (Count) by ``Action`` — the API operation — counts the calls
  that waited for their target's rate at least once: the evidence that a quota bound and the
  cleanup slowed down instead of failing.

**How long a call may wait.** Within an invocation (the handler calls
`ClientPacer.start_invocation` with Lambda's context), a paced call may wait for its token and
start new attempts until the **time guard** trips — until fewer than ``time_guard_ms`` remain
before the deadline — like any call the runner starts; an attempt started then ends within 90 %
of the margin (`call_timeouts`), so the invocation still returns before its
deadline. The deadline is the one of the invocation the call **started** in, fixed
at its start: a call still running after its invocation's hard stop (its record thread
abandoned, `batch`) starts no new attempt and waits for no token once that time guard has
passed, even when the next invocation of the execution environment has begun — it neither takes
the next invocation's rate nor lands minutes later, after a redelivery of its record released
the id. A wait that reaches the time guard fails its call (`PacingTimeout`): its record
is reported failed and retried by the event source mapping, as the time guard does for records
it keeps from starting. Without an invocation (a replay, a test), a call may wait at most
`budget_seconds` from its first attempt: 90 % of the margin less one attempt's connect and
read timeouts (5 s at the default 10 s margin).

The result under a binding quota: the calls of one execution environment go out at about the
quota (measured in ``make bench``'s pacing table against a target answering throttles above a
rate), records succeed, and the invocation lasts longer — the stream's iterator age, not the
failure queue, absorbs the storm. Several concurrent invocations (shards, the parallelization
factor) each adapt on their own to the throttles they see: together they ask for several times
the quota before they settle. For KMS ``RetireGrant``, whose quota the application's own grant
calls share, every attempt also takes a request of a **budget all invocations share**
(`shared_pace`, a counter per second in the ownership table; `ClientPacer.share`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import Any

from botocore.exceptions import BotoCoreError, CapacityNotAvailableError
from botocore.retries import adaptive, bucket, standard, throttling

from .clients import SDK_SHARE_OF_MARGIN, CleanupClients, call_timeouts
from .config import DIMENSION_ACTION, METRIC_CALLS_PACED
from .metrics import MetricsRecorder
from .shared_pace import RESERVE_WAIT_SECONDS, SharedBudget, writing

__all__ = [
    "ClientPacer",
    "Pacer",
    "PacingTimeout",
    "budget_seconds",
    "install",
    "start_invocation",
]

#: The longest single wait for a token before the bucket is asked again (seconds).
MAX_WAIT_SECONDS = 0.25
_STARTED = "session_expiry_pacing_started"
_DEADLINE = "session_expiry_pacing_deadline"
_PACED = "session_expiry_pacing_paced"
_METRICS = "session_expiry_pacing_metrics"


@dataclass(frozen=True)
class _Invocation:
    """What one invocation's paced calls take: its time guard (monotonic seconds; ``None``: no
    deadline) and where ``CallsPaced`` is counted."""

    until: float | None
    metrics: MetricsRecorder


#: The invocation the calling thread works for: set by `ClientPacer.start_invocation` on the
#: invocation's thread and carried to its pool threads (`invocation.submit_in_context`), so
#: that invocations running at the same time in one process keep their own deadlines and
#: counts.
_CURRENT: ContextVar[_Invocation | None] = ContextVar("session_expiry_pacing", default=None)


class PacingTimeout(BotoCoreError):  # type: ignore[misc]  # botocore is untyped
    """A call waited for its target's rate past its budget (it failed; its record is retried)."""

    fmt = (
        "{operation}: no request slot under the target's quota before the time guard (paced); "
        "the record is retried"
    )


def budget_seconds(time_guard_ms: int) -> float:
    """How long one paced call may take from its first attempt: 90 % of the time guard's
    margin less one attempt's connect and read timeouts (5 s at the default 10 s margin).

    Raises:
        ValueError: a margin too small for any call (`call_timeouts`).
    """
    connect, read = call_timeouts(time_guard_ms)
    return max(0.0, SDK_SHARE_OF_MARGIN * time_guard_ms / 1000 - connect - read)


class _Clock:
    """The clock botocore's limiter parts take (``current_time``, ``sleep``)."""

    def __init__(self, now: Callable[[], float], sleep: Callable[[float], None]) -> None:
        self.current_time, self.sleep = now, sleep


class _BoundedRateLimiter(adaptive.ClientRateLimiter):  # type: ignore[misc]  # untyped
    """botocore's adaptive limiter whose wait for a token ends at the call's deadline."""

    def __init__(self, pacer: ClientPacer, clock: _Clock) -> None:
        super().__init__(
            rate_adjustor=throttling.CubicCalculator(
                starting_max_rate=0, start_time=clock.current_time()
            ),
            rate_clocker=adaptive.RateClocker(clock),
            token_bucket=bucket.TokenBucket(max_rate=1, clock=clock),
            throttling_detector=pacer.detector,
            clock=clock,
        )
        self.pacer = pacer

    def on_sending_request(self, request: Any, **kwargs: Any) -> None:
        if not self._enabled:
            return
        context = getattr(request, "context", None) or {}
        deadline = self.pacer.deadline(context)
        while True:
            try:
                self._token_bucket.acquire(block=False)
                return
            except CapacityNotAvailableError:
                pass
            self.pacer.paced(context, kwargs.get("event_name", ""))
            left = deadline - self.pacer.now()
            if left <= 0:
                raise PacingTimeout(operation=_operation(kwargs.get("event_name", "")))
            rate = max(float(self._token_bucket.max_rate or 1), 1e-3)
            self.pacer.sleep(min(left, 1 / rate, MAX_WAIT_SECONDS))


class ClientPacer:
    """Pacing for the clients of one execution environment (`install` builds it).

    Args:
        metrics: where ``CallsPaced`` is counted (the cleanup's recorder, flushed per
            invocation).
        budget: seconds one call may take from its first attempt (`budget_seconds`).
        clock: seconds now (monotonic); default `time.monotonic`.
        sleep: how to wait; default `time.sleep`.
    """

    def __init__(
        self,
        metrics: MetricsRecorder,
        *,
        budget: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.metrics, self.budget, self.now, self.sleep = metrics, budget, clock, sleep
        self.detector = standard.ThrottlingErrorDetector(
            retry_event_adapter=standard.RetryEventAdapter()
        )
        self._lock = threading.Lock()
        #: calls paced so far, by operation (what the metric counted; tests and the bench read it)
        self.counts: dict[str, int] = {}
        self._until: float | None = None

    def start_invocation(
        self,
        remaining_ms: float | None,
        time_guard_ms: int,
        metrics: MetricsRecorder | None = None,
    ) -> None:
        """Let the calls this invocation starts from now on wait until its time guard trips:
        ``remaining_ms`` (Lambda's ``get_remaining_time_in_millis()``) less ``time_guard_ms``
        from now; ``None``: no invocation deadline (each call gets `budget` from its
        first attempt). ``CallsPaced`` of those calls goes to ``metrics`` (default: the
        pacer's recorder). A call already running keeps the deadline it started with.

        The invocation is the calling thread's (its `contextvars` context, which the runtime's
        pools carry): another invocation started meanwhile on another thread of the process
        changes neither. A thread outside any invocation's context (none started on it) gets
        the latest invocation's deadline, as before threads shared a process."""
        until = None if remaining_ms is None else self.now() + (remaining_ms - time_guard_ms) / 1000
        self._until = until
        _CURRENT.set(_Invocation(until, self.metrics if metrics is None else metrics))

    def deadline(self, context: dict[str, Any]) -> float:
        """When the call of ``context`` may start no further attempt (monotonic seconds): the
        time guard of the invocation the call started in, or `budget` from its start
        without one. Fixed when the call starts: a call still running after its invocation's
        hard stop (its record thread abandoned) never takes a later invocation's deadline."""
        fixed = context.get(_DEADLINE)
        if fixed is not None:
            return float(fixed)
        if self._until is not None:
            return self._until
        return float(context.get(_STARTED, self.now())) + self.budget

    def install(self, client: Any) -> _BoundedRateLimiter:
        """Add the limiter, the throttle retries and the metric to ``client``'s events."""
        limiter = _BoundedRateLimiter(self, _Clock(self.now, self.sleep))
        events = client.meta.events
        events.register_first("before-call", self._start)
        events.register("before-send", limiter.on_sending_request)
        events.register_first("needs-retry", self._retry_throttled)
        events.register("needs-retry", limiter.on_receiving_response)
        return limiter

    def share(self, client: Any, operation: str, budget: SharedBudget) -> None:
        """Make every attempt of ``operation`` on ``client`` take a request of ``budget`` (the
        quota's budget every invocation shares, `shared_pace`) first, waiting until the
        call's deadline; past it the attempt fails with `PacingTimeout`."""
        service = client.meta.service_model.service_name.lower()
        handler = partial(self._take_shared, budget)
        client.meta.events.register(f"before-send.{service}.{operation}", handler)

    def _take_shared(
        self, budget: SharedBudget, request: Any = None, event_name: str = "", **_: Any
    ) -> None:
        context = getattr(request, "context", None) or {}
        deadline = self.deadline(context)
        taken = budget.take(
            lambda: deadline - self.now(),
            on_wait=lambda: self.paced(context, event_name),
            metrics=context.get(_METRICS, self.metrics),
        )
        if not taken:
            raise PacingTimeout(operation=_operation(event_name))

    def _start(self, context: dict[str, Any] | None = None, **_: Any) -> None:
        """``before-call`` (once per call, before its first attempt): the call's deadline is
        fixed now, from the invocation it starts in, for all its attempts and waits — a
        shared budget's write (`shared_pace.writing`) at most `RESERVE_WAIT_SECONDS` away."""
        if context is not None:
            now = self.now()
            current = _CURRENT.get()
            until = self._until if current is None else current.until
            deadline = until if until is not None else now + self.budget
            if writing():  # a shared budget write: an economy, retried a moment at most
                deadline = min(deadline, now + RESERVE_WAIT_SECONDS)
            context[_STARTED] = now
            context[_DEADLINE] = deadline
            context[_METRICS] = self.metrics if current is None else current.metrics

    def paced(self, context: dict[str, Any], event_name: str) -> None:
        """Count a call that waits for its target's rate (once per call), in the metrics of
        the invocation the call started in."""
        if context.get(_PACED):
            return
        context[_PACED] = True
        operation = _operation(event_name)
        with self._lock:
            self.counts[operation] = self.counts.get(operation, 0) + 1
        metrics = context.get(_METRICS, self.metrics)
        metrics.count(METRIC_CALLS_PACED, dimension=(DIMENSION_ACTION, operation))

    def _retry_throttled(self, request_dict: Any = None, **kwargs: Any) -> float | None:
        """``needs-retry`` (first): a throttled call is sent again at once — its token paces it
        — while its budget allows one more attempt; anything else is ``standard`` mode's."""
        if not self.detector.is_throttling_error(request_dict=request_dict, **kwargs):
            return None
        context = (request_dict or {}).get("context") or {}
        if _STARTED not in context or self.now() >= self.deadline(context):
            return None
        return 0.0


def _operation(event_name: str) -> str:
    """``RetireGrant`` from ``before-send.kms.RetireGrant``."""
    return event_name.rsplit(".", 1)[-1] or "Unknown"


def start_invocation(
    pacer: ClientPacer | None,
    context: object,
    time_guard_ms: int,
    metrics: MetricsRecorder | None = None,
) -> None:
    """`ClientPacer.start_invocation` from a Lambda context (none: no invocation deadline),
    counting in ``metrics`` (the invocation's recorder; default the pacer's)."""
    if pacer is None:
        return
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    try:
        left = float(remaining()) if callable(remaining) else None
    except Exception:
        left = None
    pacer.start_invocation(left, time_guard_ms, metrics)


def install(
    clients: CleanupClients,
    metrics: MetricsRecorder,
    time_guard_ms: int,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    retire_grant_budget: SharedBudget | None = None,
) -> ClientPacer:
    """Pace every configured client of ``clients`` (see the module docstring); with
    ``retire_grant_budget``, KMS ``RetireGrant`` also takes each request from the budget every
    invocation shares (`shared_pace`).

    Raises:
        ValueError: a time guard too small for any call.
    """
    pacer = ClientPacer(metrics, budget=budget_seconds(time_guard_ms), clock=clock, sleep=sleep)
    if retire_grant_budget is not None and clients.kms is not None:
        pacer.share(clients.kms, "RetireGrant", retire_grant_budget)
    for name in (
        "apigateway",
        "kms",
        "s3",
        "archive",
        "events",
        "agentcore",
        "ownership",
    ):
        client = getattr(clients, name, None)
        if client is not None:
            pacer.install(client)
    return pacer


class Pacer:
    """At most ``per_second`` calls a second: `wait` before each call.

    Args:
        per_second: calls a second at most, at least 1.
        clock: a monotonic clock in seconds. Default: ``time.monotonic``.
        sleep: waits the given seconds. Default: ``time.sleep``.

    Raises:
        ValueError: ``per_second`` below 1.
    """

    def __init__(
        self,
        per_second: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        if per_second < 1:
            raise ValueError(f"per_second={per_second}: expected at least 1 call a second")
        self.per_second = per_second
        self._interval = 1.0 / per_second
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._next: float | None = None

    def wait(self) -> None:
        """Return when the next call may start (at once for the first call); at most
        ``1 / per_second`` seconds later."""
        with self._lock:
            now = self._clock()
            if self._next is not None and self._next > now:
                self._sleep(self._next - now)
                now = self._next
            self._next = now + self._interval
