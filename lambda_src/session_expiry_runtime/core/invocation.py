"""What the records of one invocation share, and nothing that outlives the invocation.

A warm execution environment runs many invocations with the same process: the cleanup's boto3
clients, its configuration and its step objects live as long as the process, and they hold
nothing that one invocation leaves behind for the next (clients are thread safe and keep only
their connection pools; a step object keeps only its configuration and its client). Everything
that *coordinates* the calls of one invocation's records is made by the runner
(`session_expiry_runtime.cleanup.batch.process_batch`) for each invocation and dropped when it
returns:

* the step pool and its call slots (`step_pool`);
* the ownership check's batcher (`claims`);
* an `InvocationScope`: any helper a step shares between the sessions of the
  invocation, through `InvocationScope.shared` (``StepContext.shared``) — the scratch
  step's ``DeleteObjects`` batcher (`steps.delete_objects`) and the archive's Firehose
  batcher (`steps.archive`) are two.

Why it matters: at the hard stop the runner returns without waiting for the calls still in
flight (`runner`); such an abandoned call may never answer. A batcher that outlived the
invocation would still count it as in flight, and the next invocation's records would wait
behind it until their own time guard failed them (issue 21). With a scope per invocation, the
abandoned call holds only the scope it was made in, which nothing reads again; the next
invocation's records share a new one.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar, cast

__all__ = ["InvocationScope", "submit_in_context"]

T = TypeVar("T")


def submit_in_context(executor: Executor, fn: Callable[..., T], *args: Any) -> Future[T]:
    """``executor.submit(fn, *args)``, run in a copy of the calling thread's context
    (`contextvars`): a pool thread then sees what the invocation set there — the pacing
    deadline and metrics of the invocation it works for (`pacing`), not those of whichever
    invocation of the process started last. A copy per call: one context may not be entered by
    two threads at once."""
    return executor.submit(contextvars.copy_context().run, fn, *args)


class InvocationScope:
    """Helpers shared by the records of one invocation; thread safe.

    One scope per invocation (a record cleaned on its own gets a scope of its own); never
    stored anywhere that outlives the invocation.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shared: dict[Hashable, object] = {}

    def shared(self, key: Hashable, factory: Callable[[], T]) -> T:
        """The one object of this invocation under ``key``, made by ``factory()`` on first use.

        Args:
            key: what identifies the helper, e.g. the step object that uses it.
            factory: builds the helper; called at most once per key and scope, under the lock
                (it must not call back into this scope).
        """
        with self._lock:
            if key not in self._shared:
                self._shared[key] = factory()
            return cast(T, self._shared[key])
