"""The storm's sweeper calibration (``bench/storm.py``) runs in a process of its own
(``bench.harness.in_fresh_process``): ``time.process_time`` counts every thread of a process,
and the bench's own process has run every earlier section of ``make bench`` by then."""

from __future__ import annotations

import gc
import io
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from bench import harness, storm


def test_a_fresh_process_is_a_new_interpreter_not_a_fork() -> None:
    stop = threading.Event()
    extra = threading.Thread(target=stop.wait, daemon=True)
    extra.start()
    gc.disable()
    try:
        assert threading.active_count() >= 2
        assert harness.in_fresh_process(os.getpid) != os.getpid()
        # This process's threads do not come along (a fork would not bring them either) ...
        assert harness.in_fresh_process(threading.active_count) == 1
        # ... nor its state (a fork would: its collector would be disabled too).
        assert harness.in_fresh_process(gc.isenabled) is True
    finally:
        gc.enable()
        stop.set()
        extra.join()


def test_fails_in_a_fresh_process_raise_here() -> None:
    with pytest.raises(ValueError, match="invalid literal for int"):
        harness.in_fresh_process(int, "not a number")


def test_the_sweeper_is_calibrated_in_a_process_of_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ran: list[tuple[Any, ...]] = []

    def fresh(fn: Any, *args: Any) -> list[float]:
        ran.append((fn, *args))
        return [0.0009, 0.001]

    monkeypatch.setattr(harness, "in_fresh_process", fresh)
    log = io.StringIO()
    assert storm.calibrate_sweeper(2, tmp_path, log, per_round=50) == [0.0009, 0.001]
    assert ran == [(storm.measure_sweeper_cpu, 2, str(tmp_path), 50)]
    assert "its own process, 2 rounds): 0.90 ms, 1.00 ms" in log.getvalue()
