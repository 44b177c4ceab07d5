"""A request pace for calls against an AWS request quota: at most ``per_second`` calls a second.

AWS services throttle a caller that exceeds a per-second request quota (``ThrottlingException``),
and a quota is shared by every caller of the account and Region: a scheduled sweep that calls as
fast as it can takes the quota from the application and the cleanup. :class:`Pacer` spaces the
starts of consecutive calls at least ``1 / per_second`` seconds apart (no burst), which keeps
the sweep at or under that rate whatever the calls' latency.

Written here rather than taken from a library: the deployed functions need nothing beyond the
Lambda Python runtime (boto3 and the standard library), and the rule is a few lines.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Pacer"]


class Pacer:
    """At most ``per_second`` calls a second: :meth:`wait` before each call.

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
