"""The pool the steps of one invocation run on: at most ``max_workers`` calls in flight.

A step thread waits for one of two things: the answer to its own AWS call (a call in flight), or
another step's shared ``DeleteObjects`` call to carry its keys (`steps.delete_objects`).
Only the first counts against ``max_workers``. A step therefore runs holding one of
``max_workers`` *call slots*, and lends its slot while it waits for a shared call, so a thread
that waits costs a thread, not a call: the other sessions' calls go on. The pool has twice as
many threads as slots, so up to ``max_workers`` steps may wait that way while as many others
make calls.

Steps that a record thread runs itself (a record with one step to run, the gate steps) hold a
slot too: the runner takes one around every step attempt
(`holding`), so record threads and pool threads together never
have more than ``max_workers`` calls in flight.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from .invocation import submit_in_context

__all__ = ["CallSlots", "StepPool"]

T = TypeVar("T")


class CallSlots:
    """At most ``limit`` holders at once; a holder may lend its slot while it waits.

    Args:
        limit: how many slots (calls in flight), at least 1.

    Raises:
        ValueError: ``limit`` below 1.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit={limit}: expected at least 1 call slot")
        self.limit = limit
        self._free = threading.BoundedSemaphore(limit)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._holders = 0
        #: the most holders seen at once (what the tests check against ``limit``)
        self.peak_holders = 0

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold a slot for the block (waits for one to be free); a thread that already holds
        one keeps it and takes no second."""
        if getattr(self._local, "holding", False):
            yield
            return
        self._acquire()
        try:
            yield
        finally:
            self._release()

    @contextmanager
    def lent(self) -> Iterator[None]:
        """Give this thread's slot back for the block, and take one again after it (waits
        for one to be free). A thread that holds no slot lends nothing."""
        if not getattr(self._local, "holding", False):
            yield
            return
        self._release()
        try:
            yield
        finally:
            self._acquire()

    def _acquire(self) -> None:
        self._free.acquire()
        self._local.holding = True
        with self._lock:
            self._holders += 1
            self.peak_holders = max(self.peak_holders, self._holders)

    def _release(self) -> None:
        with self._lock:
            self._holders -= 1
        self._local.holding = False
        self._free.release()


class StepPool:
    """Threads for the steps of one invocation's records, ``2 * max_calls`` of them, each
    step holding one of ``max_calls`` `CallSlots` while it runs.

    Args:
        max_calls: calls in flight at most (the construct's ``max_workers``), at least 1.
    """

    def __init__(self, max_calls: int) -> None:
        self.slots = CallSlots(max_calls)
        self._executor = ThreadPoolExecutor(
            max_workers=2 * max_calls, thread_name_prefix="cleanup-step"
        )

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Run ``fn(*args)`` on a pool thread, holding a call slot."""
        return submit_in_context(self._executor, self._holding, fn, *args)

    def _holding(self, fn: Callable[..., T], *args: Any) -> T:
        with self.slots.held():
            return fn(*args)

    def shutdown(self, *, wait: bool, cancel_futures: bool) -> None:
        """As `concurrent.futures.Executor.shutdown`."""
        self._executor.shutdown(wait=wait, cancel_futures=cancel_futures)
