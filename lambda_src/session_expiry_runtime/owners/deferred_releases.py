"""The ownership releases of one invocation, sent together once its records are done.

After a step acted on an id its record owned, the id's ownership record is released
(`claims`: ``released``). Sent as each step ends, the releases of a batch of 100 records
take a call per few records (natural batching); collected here and sent once every record of
the invocation is done, they take one ``TransactWriteItems`` per 100 ids (``python -m bench``,
calls per session). The runner (`session_expiry_runtime.cleanup.batch.process_batch`) makes one
`DeferredReleases` per invocation; a record cleaned on its own releases at once.

When they are sent: once every record of the invocation is done; or, while some record is still
running (a slow or hung call), once the first waiting release has waited
`LINGER_SECONDS`, or when the time left comes within `FLUSH_HEADROOM_SECONDS` of the
time guard's margin — so a record that hangs delays the others' releases by a bounded time and
never makes them fail. They are sent by a thread of their own, as a record's calls are: an
answer that trickles in never holds the invocation past its hard stop.

What it changes for a record: its releases are sent after its steps and before it is
accounted. A release that fails fails the record (action ``Ownership``, the steps that acted
``failed``), as a release sent at once did; the record's retry marks, acts (already done) and
releases again. A release not answered by the hard stop (or not sent because the hard stop had
passed) was not released: its record fails (action ``TimeGuard``). Its ownership records stay
``releasing`` for its incarnation, which no other session can take before they are stale
(`session_expiry_runtime.core.ownership.RELEASING_STALE_SECONDS`), and its retry releases them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from ..core.config import ACTION_OWNERSHIP, ACTION_TIME_GUARD
from ..core.invocation import submit_in_context
from .claims import Claimant, ClaimBatcher, ClaimRef
from .outcomes import OUTCOME_FAILED, STEP_FAILED, RecordResult

__all__ = ["FLUSH_HEADROOM_SECONDS", "LINGER_SECONDS", "DeferredReleases", "PendingRelease"]

#: While other records still run, releases wait at most this long (seconds) for more to join
#: them. Longer than a batch of 100 sessions takes with calls of tens of milliseconds, so a
#: normal batch sends its releases once, at the end.
LINGER_SECONDS = 2.0
#: ... and are sent, whatever they waited, once the time left is within this many seconds of
#: the time guard's margin (after it, no record starts).
FLUSH_HEADROOM_SECONDS = 1.0

#: Why a record that acted was not released (action ``TimeGuard``).
NOT_SENT = "acted, but its ownership records were not released before the invocation's hard stop"


@dataclass(frozen=True)
class PendingRelease:
    """One record's ids to release: its sequence number, its claimant, the ids and the names
    of the steps that acted on them."""

    sequence_number: str | None
    claimant: Claimant
    refs: tuple[ClaimRef, ...]
    steps: tuple[str, ...]


class DeferredReleases:
    """The releases the records of one invocation left to send, their sender thread, and what
    sending them said; thread safe.

    Sends run on one thread of their own (`send_soon`), never on the invocation's: an
    answer that trickles in can hold that thread, not the invocation past its hard stop
    (`finish` waits for them only until then).

    Args:
        clock: monotonic seconds; default `time.monotonic`.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._pending: list[PendingRelease] = []
        self._since: float | None = None
        self._in_flight: set[PendingRelease] = set()
        self._jobs: list[Future[None]] = []
        self._sender: ThreadPoolExecutor | None = None
        #: sequence number -> (action, failure text, steps) of a release that failed or was
        #: not sent
        self._failures: dict[str | None, tuple[str, str, tuple[str, ...]]] = {}

    def add(self, release: PendingRelease) -> None:
        """Keep ``release`` until it is sent (called by a record thread)."""
        with self._lock:
            if not self._pending:
                self._since = self._clock()
            self._pending.append(release)

    def due(self, seconds_left: float | None, margin_seconds: float) -> bool:
        """Whether releases wait that should go out before the other records are done: the
        first has waited `LINGER_SECONDS`, or ``seconds_left`` (before the deadline;
        ``None``: unknown) is within `FLUSH_HEADROOM_SECONDS` of the margin."""
        with self._lock:
            if self._since is None:
                return False
            waited = self._clock() - self._since
        near_margin = (
            seconds_left is not None and seconds_left < margin_seconds + FLUSH_HEADROOM_SECONDS
        )
        return waited >= LINGER_SECONDS or near_margin

    def send_soon(self, claims: ClaimBatcher) -> None:
        """Hand everything kept so far to the sender thread, to go out in as few calls as it
        allows; returns at once."""
        with self._lock:
            batch, self._pending, self._since = self._pending, [], None
            if not batch:
                return
            self._in_flight.update(batch)
            if self._sender is None:
                self._sender = ThreadPoolExecutor(1, thread_name_prefix="cleanup-release")
            self._jobs.append(submit_in_context(self._sender, self._send, claims, batch))

    def finish(self, claims: ClaimBatcher, seconds_left: float | None) -> None:
        """Send what is left and wait for every send for at most ``seconds_left`` (``None``: as
        long as they take; zero or less: send nothing more). A release not answered by then
        was not released: its record fails (``TimeGuard``, `apply`)."""
        if seconds_left is None or seconds_left > 0:
            self.send_soon(claims)
            wait(list(self._jobs), timeout=seconds_left)
        with self._lock:
            for release in [*self._in_flight, *self._pending]:
                self._failures[release.sequence_number] = (
                    ACTION_TIME_GUARD,
                    NOT_SENT,
                    release.steps,
                )
            self._in_flight, self._pending = set(), []
            if self._sender is not None:
                self._sender.shutdown(wait=False, cancel_futures=True)

    def apply(self, results: Sequence[RecordResult]) -> None:
        """Fail each record of ``results`` (not yet accounted) whose release failed or was not
        sent (the steps that acted ``failed``, action ``Ownership`` or ``TimeGuard``)."""
        with self._lock:
            failures = dict(self._failures)
        for result in results:
            failure = failures.get(result.sequence_number)
            if failure is not None:
                action, text, steps = failure
                _fail(result, steps, action, text)

    def _send(self, claims: ClaimBatcher, batch: list[PendingRelease]) -> None:
        """On the sender thread: one batch's release calls, and what they said."""
        answers = claims.release_all([(p.claimant, p.refs) for p in batch])
        with self._lock:
            for release, texts in zip(batch, answers, strict=True):
                if release not in self._in_flight:
                    continue  # finish() gave up on it: its record already failed
                self._in_flight.discard(release)
                if texts:
                    self._failures[release.sequence_number] = (
                        ACTION_OWNERSHIP,
                        "; ".join(texts),
                        release.steps,
                    )


def _fail(result: RecordResult, steps: tuple[str, ...], action: str, text: str) -> None:
    result.outcome = OUTCOME_FAILED
    if action not in result.failed_actions:
        result.failed_actions = (*result.failed_actions, action)
    errors = result.log.setdefault("errors", {})
    errors[action] = f"{errors[action]}; {text}" if action in errors else text
    result.log.setdefault("steps", {}).update(dict.fromkeys(steps, STEP_FAILED))
