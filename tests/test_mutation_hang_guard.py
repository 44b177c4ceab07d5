"""The hang guard of ``make mutation`` (``mutation/hang_guard.py``): a test its mutant hangs ends
the mutant's run with mutmut's timeout exit code, after a limit no clean test comes near."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from mutation import hang_guard
from mutation.hang_guard import (
    FACTOR,
    FLOOR_SECONDS,
    TIMEOUT_EXIT_CODE,
    clean_durations,
    limit_seconds,
)


def test_a_test_may_run_the_floor_or_ten_times_its_clean_duration() -> None:
    durations = {"t.py::fast": 0.01, "t.py::slow": 12.0}

    assert limit_seconds("t.py::fast", durations) == FLOOR_SECONDS == 30.0
    assert limit_seconds("t.py::slow", durations) == FACTOR * 12.0 == 120.0
    assert limit_seconds("t.py::unmeasured", durations) == FLOOR_SECONDS


def test_clean_durations_are_mutmuts_stats(tmp_path: Path) -> None:
    stats = tmp_path / "mutmut-stats.json"
    stats.write_text(json.dumps({"duration_by_test": {"t.py::a": 1.5, "t.py::b": "?"}}))

    assert clean_durations(stats) == {"t.py::a": 1.5}
    assert clean_durations(tmp_path / "absent.json") == {}


def test_a_hung_test_ends_the_run_as_mutmuts_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    exits: list[int] = []
    ended = threading.Event()

    def _exit(code: int) -> None:  # stands in for os._exit, which would end this test run
        exits.append(code)
        ended.set()

    monkeypatch.setattr(hang_guard.os, "_exit", _exit)
    monkeypatch.setattr(hang_guard, "FLOOR_SECONDS", 0.05)
    monkeypatch.setattr(hang_guard, "_durations", {})
    hung = SimpleNamespace(nodeid="tests/test_x.py::test_deadlocked")

    guard = hang_guard.pytest_runtest_protocol(hung, None)
    next(guard)  # the test runs, and never returns

    assert ended.wait(timeout=30)
    assert exits == [TIMEOUT_EXIT_CODE] == [36]
    guard.close()


def test_a_test_that_returns_in_time_ends_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    exits: list[int] = []
    monkeypatch.setattr(hang_guard.os, "_exit", exits.append)
    monkeypatch.setattr(hang_guard, "_durations", {})
    guard = hang_guard.pytest_runtest_protocol(SimpleNamespace(nodeid="t.py::quick"), None)
    next(guard)
    guard.close()  # the test returned: its timer is cancelled

    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
    for timer in timers:
        timer.join(timeout=30)
    assert [t for t in timers if t.is_alive()] == []
    assert exits == []
