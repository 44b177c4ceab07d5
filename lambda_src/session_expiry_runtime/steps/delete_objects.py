"""``DeleteObjects`` across the sessions of one invocation: one call carries the keys of several.

The scratch step of each session lists its own prefix and hands each page's keys to the one
`BatchingDeleter` of the invocation (one bucket: the scratch bucket; a new batcher per
invocation, `session_expiry_runtime.core.invocation`, because a call abandoned at the hard stop
stays "in flight" in its batcher for as long as it hangs, and keys waiting behind it would wait
as long). Keys of sessions
cleaned side by side share calls of at most 1,000 keys (Amazon S3 API Reference,
DeleteObjects), so a batch of 100 sessions of 50 objects needs a handful of DeleteObjects
instead of 100; every ``Errors`` entry of an answer goes back to the session whose key it names,
so a partial failure fails exactly the records that own the failed keys and no other.

Batches form without a timer ("natural batching"): a full call's worth (1,000 keys) is sent at
once by whichever step completes it; a smaller remainder is sent by a waiting step only while no
other remainder is in flight. So the first page goes out at once, and the keys that arrive while
it is answered go out together in the next call: no added latency when a session is alone, and
fewer calls the more sessions run side by side. A step waits only until the call that carries
its keys has been answered, and lends its call slot meanwhile (`step_pool`): waiting for
another step's call is not a call in flight.

Each step waits on its own condition (on the batcher's one lock), woken only when the call that
carries its keys is answered, or when it is the step that should send next (the oldest keys
waiting are its own): a call's answer wakes the steps it answered and one sender, not every step
waiting — with dozens of sessions side by side, waking them all on every change cost more CPU
than the calls (``make bench``, 50 objects). A step that submits keys checks for itself whether
it can send, so a submission wakes no one.

A call that raises (after botocore's retries) fails every session whose keys it carried: none of
those keys is known to be deleted. A key submitted twice (a batch may hold a record twice) is
sent once and its answer goes to both. Keys that XML 1.0 cannot carry are not this module's: the
scratch step deletes them one by one with ``DeleteObject``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

#: ``DeleteObjects`` takes at most 1,000 keys (Amazon S3 API Reference, DeleteObjects).
DELETE_OBJECTS_MAX_KEYS = 1000


@dataclass(eq=False)
class _Ticket:
    """The keys one step submitted: how many are unanswered, and the answers so far; ``wake``
    (on the batcher's lock) is what the step waits on."""

    waiting: int
    wake: threading.Condition
    #: waiting on ``wake`` and not yet notified (under the batcher's lock)
    asleep: bool = False
    errors: list[dict[str, Any]] = field(default_factory=list)
    failure: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.waiting == 0


class BatchingDeleter:
    """Deletes keys of one bucket for many sessions at once; thread safe.

    Args:
        s3: a boto3 S3 client (thread safe).
        bucket: the bucket every key belongs to.
        max_keys: keys per ``DeleteObjects`` call, 1..1,000. Default: 1,000.
    """

    def __init__(self, s3: Any, bucket: str | None, max_keys: int = DELETE_OBJECTS_MAX_KEYS):
        if not 1 <= max_keys <= DELETE_OBJECTS_MAX_KEYS:
            raise ValueError(f"max_keys={max_keys}: expected 1..{DELETE_OBJECTS_MAX_KEYS}")
        self.s3 = s3
        self.bucket = bucket
        self.max_keys = max_keys
        self._pending: list[tuple[str, _Ticket]] = []
        self._remainder_in_flight = False
        self._lock = threading.RLock()  # reentrant: pending_keys may be read holding it
        #: notified on every change of the queue, for observers (tests); no step waits on it
        self._cond = threading.Condition(self._lock)

    def delete(
        self,
        keys: Sequence[str],
        waiting: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> list[dict[str, Any]]:
        """Delete ``keys`` (XML-safe keys of `bucket`), sharing calls with other sessions.

        ``waiting()`` wraps each wait for another step's call (the step's
        `waiting`: its call slot serves other calls meanwhile); the
        call this thread sends itself is made outside it. Default: no wrapping.

        Returns:
            The ``Errors`` entries (``Key``, ``Code``, ``Message``) that name one of ``keys``;
            every other key is deleted (a missing key counts as deleted, as S3 reports it).

        Raises:
            botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError: a call that
                carried some of ``keys`` failed (after botocore's retries).
        """
        if not keys:
            return []
        ticket = _Ticket(waiting=len(keys), wake=threading.Condition(self._lock))
        with self._lock:
            self._pending.extend((key, ticket) for key in keys)
            self._cond.notify_all()

        def ready() -> bool:
            ticket.asleep = not (ticket.done or self._can_send())
            return not ticket.asleep

        while True:
            with waiting(), self._lock:
                ticket.wake.wait_for(ready)
                if ticket.done:
                    break
                chunk, remainder = self._take()
                self._wake_next_sender()
            self._send(chunk, remainder)
        if ticket.failure is not None:
            raise ticket.failure
        return ticket.errors

    @property
    def pending_keys(self) -> int:
        """Keys submitted and not yet sent."""
        with self._lock:
            return len(self._pending)

    def _wake_next_sender(self) -> None:
        """Under the lock: if a call can go out now, wake the asleep step whose keys waited
        longest (it sends them, with whatever else fits, the older keys first). A step with
        pending keys that is not asleep (sending a call of its own, or on its way to wait)
        checks for itself before it waits: waking it could leave the keys waiting for as long
        as its own call takes, while a step that waits for nothing else could send them."""
        if not self._can_send():
            return
        for _, ticket in self._pending:
            if ticket.asleep:
                ticket.asleep = False
                ticket.wake.notify()
                return

    def _can_send(self) -> bool:
        return len(self._pending) >= self.max_keys or (
            bool(self._pending) and not self._remainder_in_flight
        )

    def _take(self) -> tuple[list[tuple[str, _Ticket]], bool]:
        """Under the lock: the next call's entries, and whether it is a remainder (< max)."""
        remainder = len(self._pending) < self.max_keys
        chunk: list[tuple[str, _Ticket]] = []
        keys: set[str] = set()
        rest: list[tuple[str, _Ticket]] = []
        for entry in self._pending:
            if entry[0] in keys or len(keys) < self.max_keys:
                keys.add(entry[0])
                chunk.append(entry)
            else:
                rest.append(entry)
        self._pending = rest
        if remainder:
            self._remainder_in_flight = True
        return chunk, remainder

    def _send(self, chunk: list[tuple[str, _Ticket]], remainder: bool) -> None:
        """One ``DeleteObjects`` for ``chunk``; its answer (or its exception) to every owner."""
        unique = list(dict.fromkeys(key for key, _ in chunk))
        errors: dict[str, list[dict[str, Any]]] = {}
        failure: BaseException | None = None
        try:
            answer = self.s3.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": k} for k in unique], "Quiet": True},
            )
            for error in answer.get("Errors") or []:
                errors.setdefault(str(error.get("Key")), []).append(error)
        except BaseException as exc:
            failure = exc
        with self._lock:
            for key, ticket in chunk:
                if failure is not None:
                    ticket.failure = ticket.failure or failure
                elif key in errors:
                    ticket.errors.extend(errors[key])
                ticket.waiting -= 1
                if ticket.done:
                    ticket.wake.notify()
            if remainder:
                self._remainder_in_flight = False
            self._wake_next_sender()
            self._cond.notify_all()
