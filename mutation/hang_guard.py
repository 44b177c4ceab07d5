"""pytest plugin of ``make mutation``: a test its mutant hangs ends the mutant's run in seconds.

mutmut's own limit is per mutant and generous: (the clean time of every test that reaches the
mutated function + 5 s) x 4 of wall clock. A mutant of the claims coalescer that deadlocks its
threads (a lock never released, a ticket never answered) reaches most of the module's tests, so
it waited minutes for that limit, and a run of the coalescer's 99 mutants did not finish in an
hour. A test of this suite takes milliseconds to a few seconds (no sleeps, no timed tests), so
one still running after `limit_seconds` is hung by its mutant: a timer thread then ends the
process with mutmut's exit code for a timeout (36), which counts as killed, as mutmut's own
timeout does. A hang that holds the interpreter's lock (a C call that never returns) stops the
timer too; mutmut's own limit still ends it.

`mutation/run.py` copies this file into each work directory as ``mutation_hang_guard.py``
(mutmut's ``also_copy``), and ``mutation/pyproject.toml`` loads it with ``-p``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

#: mutmut's exit code for a mutant whose tests timed out (``mutmut.stats.status_by_exit_code``).
TIMEOUT_EXIT_CODE = 36
#: No test is hung before this (seconds of wall clock): the machine may be shared and the run
#: niced, so a test of a few seconds can take many times that.
FLOOR_SECONDS = 30.0
#: Nor before this many times its own clean duration, as mutmut's stats run measured it.
FACTOR = 10.0
#: Where mutmut keeps that measurement, relative to the directory the tests run in (``mutants/``).
STATS_FILE = Path("mutmut-stats.json")


def clean_durations(stats_file: Path = STATS_FILE) -> dict[str, float]:
    """Each test's duration in mutmut's stats run (seconds), by test id; empty before that run."""
    try:
        data = json.loads(stats_file.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    durations = data.get("duration_by_test") if isinstance(data, dict) else None
    if not isinstance(durations, dict):
        return {}
    return {str(k): float(v) for k, v in durations.items() if isinstance(v, int | float)}


def limit_seconds(test_id: str, durations: dict[str, float]) -> float:
    """How long ``test_id`` may run before it counts as hung (seconds)."""
    return max(FLOOR_SECONDS, FACTOR * durations.get(test_id, 0.0))


def _hung(test_id: str, limit: float) -> None:
    message = f"mutation hang guard: {test_id} still running after {limit:.0f} s"
    print(message, file=sys.__stderr__, flush=True)
    os._exit(TIMEOUT_EXIT_CODE)


_durations: dict[str, float] | None = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Generator[None, None, None]:
    global _durations
    if _durations is None:
        _durations = clean_durations()
    limit = limit_seconds(item.nodeid, _durations)
    timer = threading.Timer(limit, _hung, args=(item.nodeid, limit))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
