"""The ownership releases of one invocation, sent together once its records are done.

After a step acted on an id its record owned, the id's ownership record is released
(:mod:`.claims`: ``released``). Sent as each step ends, the releases of a batch of 100 records
take a call per few records (natural batching); collected here and sent once every record of
the invocation is done, they take one ``TransactWriteItems`` per 100 ids (``python -m bench``,
calls per session). The runner (:func:`session_expiry_runtime.runner.process_batch`) makes one
:class:`DeferredReleases` per invocation; a record cleaned on its own releases at once.

What it changes for a record: its releases are sent after every record of its invocation is
done and before it is accounted. A release that fails fails the record (action ``Ownership``,
the steps that acted ``failed``), as a release sent at once did; the record's retry marks, acts
(already done) and releases again. Once the time guard's margin is reached nothing more is
sent (the releases are new calls, :mod:`session_expiry_runtime.runner`, "time guard"): a record
that acted and was not released fails (action ``TimeGuard``). Its ownership records stay
``releasing`` for its incarnation, which no other session can take before they are stale
(:data:`session_expiry_runtime.ownership.RELEASING_STALE_SECONDS`), and its retry releases them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from .claims import Claimant, ClaimBatcher, ClaimRef
from .config import ACTION_OWNERSHIP, ACTION_TIME_GUARD
from .outcomes import OUTCOME_FAILED, STEP_FAILED, RecordResult

__all__ = ["DeferredReleases", "PendingRelease", "settle"]

#: Why a record that acted was not released (action ``TimeGuard``).
NOT_SENT = (
    "acted, but the time guard's margin was reached before its ownership records were released"
)


@dataclass(frozen=True)
class PendingRelease:
    """One record's ids to release: its sequence number, its claimant, the ids and the names
    of the steps that acted on them."""

    sequence_number: str | None
    claimant: Claimant
    refs: tuple[ClaimRef, ...]
    steps: tuple[str, ...]


class DeferredReleases:
    """The releases the records of one invocation left to send; thread safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[PendingRelease] = []

    def add(self, release: PendingRelease) -> None:
        """Keep ``release`` for :func:`settle` (called by a record thread)."""
        with self._lock:
            self._pending.append(release)

    def take(self) -> list[PendingRelease]:
        """Everything kept so far, in the order it came; the collection is empty afterwards."""
        with self._lock:
            taken, self._pending = self._pending, []
        return taken


def settle(
    releases: DeferredReleases,
    results: Sequence[RecordResult],
    claims: ClaimBatcher,
    *,
    may_send: bool,
) -> None:
    """Send the releases of the records in ``results`` (not yet accounted) in as few calls as
    they allow, and fail each record whose release failed; with ``may_send`` false (the time
    guard's margin is reached), send nothing and fail every record that had something to release.

    A release kept for a record that is not in ``results`` (still running at the hard stop: it
    fails as unfinished) is not sent. Never raises (:meth:`ClaimBatcher.release_all`).
    """
    by_sequence = {r.sequence_number: r for r in results}
    pending = [p for p in releases.take() if p.sequence_number in by_sequence]
    if not pending:
        return
    if may_send:
        answers = claims.release_all([(p.claimant, p.refs) for p in pending])
        failures = [(ACTION_OWNERSHIP, texts) for texts in answers]
    else:
        failures = [(ACTION_TIME_GUARD, [NOT_SENT])] * len(pending)
    for release, (action, texts) in zip(pending, failures, strict=True):
        if texts:
            _fail(by_sequence[release.sequence_number], release.steps, action, "; ".join(texts))


def _fail(result: RecordResult, steps: tuple[str, ...], action: str, text: str) -> None:
    result.outcome = OUTCOME_FAILED
    if action not in result.failed_actions:
        result.failed_actions = (*result.failed_actions, action)
    errors = result.log.setdefault("errors", {})
    errors[action] = f"{errors[action]}; {text}" if action in errors else text
    result.log.setdefault("steps", {}).update(dict.fromkeys(steps, STEP_FAILED))
