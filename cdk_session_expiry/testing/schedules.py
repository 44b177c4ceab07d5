"""EventBridge schedules, fired locally: moto creates the rules but never fires them.

[`Schedule`][cdk_session_expiry.testing.Schedule] is a rule read back from the emulator
([`LocalPipeline.schedule_of`][cdk_session_expiry.testing.LocalPipeline.schedule_of]);
[`ScheduleRunner`][cdk_session_expiry.testing.ScheduleRunner] fires one on the wall clock, one run
at a time, as the construct's
sweepers are run (reserved concurrency 1). ``LocalPipeline.start_expiry_sweeper`` and
``start_grant_sweeper`` start one for the construct's own sweepers; ``run_expiry_sweep`` and
``run_grant_sweep`` run one sweep now, without a schedule.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from cdk_session_expiry.testing.poller import Handler

_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86_400}


@dataclass(frozen=True)
class Schedule:
    """An EventBridge schedule rule as the emulator holds it (moto creates the rule but never
    fires it: call the target yourself, e.g. with
    [`scheduled_event`][cdk_session_expiry.testing.Schedule.scheduled_event])."""

    rule_arn: str
    expression: str
    enabled: bool = True

    @property
    def interval_seconds(self) -> int:
        """The period of a ``rate(...)`` expression in seconds.

        Raises:
            ValueError: a ``cron(...)`` or malformed expression.
        """
        found = _RATE.match(self.expression)
        if not found:
            raise ValueError(f"{self.expression!r}: expected rate(<n> <unit>)")
        return int(found.group(1)) * _UNIT_SECONDS[found.group(2).rstrip("s")]

    def scheduled_event(self, when: datetime | None = None) -> dict[str, Any]:
        """The event EventBridge sends a scheduled target (``detail-type`` ``Scheduled Event``)."""
        moment = when or datetime.now(timezone.utc)
        arn = self.rule_arn.split(":")
        return {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": arn[4],
            "time": moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": arn[3],
            "resources": [self.rule_arn],
            "detail": {},
        }


@dataclass
class ScheduledRun:
    """One run started by a [`ScheduleRunner`][cdk_session_expiry.testing.ScheduleRunner]: when
    (monotonic), how long, what."""

    started: float
    seconds: float
    response: Any = None
    error: str | None = None


class ScheduleRunner:
    """Fires an EventBridge schedule in real time (moto creates rules but never fires them).

    Every ``period_seconds`` (default the rule's ``rate()``) on its own thread, it calls
    ``handler(schedule.scheduled_event(), None)``, the first time at once. Runs never overlap:
    a run still going when the next is due delays it (the sweeper's reserved concurrency of 1
    throttles the second invocation, which the asynchronous queue retries). Errors are recorded
    per run, as Lambda records a failed asynchronous invocation, and the schedule goes on.

    Args:
        schedule: the rule
            ([`LocalPipeline.schedule_of`][cdk_session_expiry.testing.LocalPipeline.schedule_of]).
        handler: called as ``handler(event, None)``, e.g. a
            [`LocalLambda`][cdk_session_expiry.testing.LocalLambda].
        period_seconds: seconds between runs, > 0. Default: the rule's ``rate()``.
        max_runs: stop by itself after this many runs. Default: until
            [`stop`][cdk_session_expiry.testing.ScheduleRunner.stop].
        interrupt: called by [`stop`][cdk_session_expiry.testing.ScheduleRunner.stop] while a run
            is in progress, to end it early (e.g.
            the expiry sweeper's ``stop_after_pass`` in its worker, so a sub-minute run ends
            after its pass in progress instead of lasting its minute). Default: none, the run
            in progress is waited for.

    Raises:
        ValueError: ``period_seconds`` is not above 0.
    """

    def __init__(
        self,
        schedule: Schedule,
        handler: Handler,
        *,
        period_seconds: float | None = None,
        max_runs: int | None = None,
        interrupt: Callable[[], None] | None = None,
    ) -> None:
        self.schedule = schedule
        self.handler = handler
        self.period = float(period_seconds or schedule.interval_seconds)
        if self.period <= 0:
            raise ValueError(f"period_seconds={period_seconds!r}: expected seconds > 0")
        #: Stop by itself after this many runs (``None``: until
        #: [`stop`][cdk_session_expiry.testing.ScheduleRunner.stop]).
        self.max_runs = max_runs
        self.runs: list[ScheduledRun] = []
        self._interrupt = interrupt
        self._stop = threading.Event()
        self._state = threading.Lock()
        self._in_run = False
        self._started_a_run = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ScheduleRunner:
        """Start firing on a thread of its own; returns ``self``."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="schedule", daemon=True)
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        """Whether the schedule still fires (started, not stopped, below ``max_runs``)."""
        return self._thread is not None and self._thread.is_alive()

    def _loop(self) -> None:
        due = time.monotonic()
        while True:
            with self._state:
                if self._stop.is_set():
                    return
                self._in_run = True
                self._started_a_run.set()
            started = time.monotonic()
            run = ScheduledRun(started=started, seconds=0.0)
            try:
                run.response = self.handler(self.schedule.scheduled_event(), None)
            except Exception as err:
                run.error = f"{type(err).__name__}: {err}"
            finally:
                with self._state:
                    self._in_run = False
            run.seconds = time.monotonic() - started
            self.runs.append(run)
            if self.max_runs is not None and len(self.runs) >= self.max_runs:
                return
            due += self.period
            self._stop.wait(max(0.0, due - time.monotonic()))

    def wait_for_run(self, timeout: float) -> bool:
        """Wait until the first run has started (no sleep: an event); ``False`` after
        ``timeout`` seconds without one."""
        return self._started_a_run.wait(timeout)

    def join(self, timeout: float | None = None) -> list[ScheduledRun]:
        """Wait for the thread to end by itself (``max_runs``); the runs so far."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.runs

    def stop(self, *, timeout: float = 120.0) -> list[ScheduledRun]:
        """Stop firing: no run starts after this call; a run in progress is ended early by
        ``interrupt`` (when given) or waited for. Returns the runs so far. Idempotent.

        Raises:
            TimeoutError: the run in progress did not end within ``timeout`` seconds.
        """
        with self._state:
            self._stop.set()
            in_run = self._in_run
        if in_run and self._interrupt is not None:
            self._interrupt()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"the scheduled run did not end within {timeout} s")
            self._thread = None
        return self.runs
