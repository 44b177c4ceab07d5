"""The transport probe's table (``bench/transport_probe.py``): ranges over rounds, and each
transport's CPU divided by the sequential run's of the same round (not of another round)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench import transport_probe


def _run(user: float, kernel: float, switches: float = 1.0) -> dict[str, float]:
    return {"wall_s": 1.0, "user_ms": user, "kernel_ms": kernel, "switches": switches}


def test_table_divides_by_the_same_rounds_sequential_cpu() -> None:
    runs = {
        "sequential": [_run(4.0, 1.0, 6), _run(8.0, 2.0, 6)],  # 5 and 10 ms
        "threads": [_run(3.0, 1.0, 58), _run(3.0, 1.0, 60)],  # 4 and 4 ms
        "event loop": [_run(2.0, 0.5, 0.2), _run(2.0, 0.5, 0.2)],  # 2.5 and 2.5 ms
    }
    imports = [{"boto3_ms": 100.0, "aio_ms": 110.0}, {"boto3_ms": 120.0, "aio_ms": 130.0}]

    rows = {
        line.split(" | ")[0].lstrip("| "): line
        for line in transport_probe.table(runs, imports).splitlines()
    }

    # threads: 4 / 5 = 0.80 and 4 / 10 = 0.40 (not 4 / 10 and 4 / 5 crossed, nor one mean)
    assert "| 4.00\u20134.00 | 0.40\u20130.80 | 58.0\u201360.0 |" in rows["threads"]
    assert "| 2.50\u20132.50 | 0.25\u20130.50 | 0.2\u20130.2 |" in rows["event loop"]
    assert "| 1.00\u20131.00 |" in rows["sequential"]
    text = transport_probe.table(runs, imports)
    assert "boto3 110 ms; aiobotocore and aiohttp on top of it 120 ms" in text


def test_help_keeps_the_list_of_the_three_ways(capsys: pytest.CaptureFixture[str]) -> None:
    """Review 34: ``--help`` reflowed the docstring, running its three-item list into one
    paragraph ("three ways: * ``sequential``: ...; * ``threads``: ...")."""
    with pytest.raises(SystemExit):
        transport_probe.main(["--help"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("* ")] == [
        "* ``sequential``",
        "* ``threads``",
        "* ``event loop``",
    ]


def test_a_failed_run_says_why() -> None:
    """Review 34: a child that failed gave only ``CalledProcessError ... exit status 1``: its
    stderr was captured and dropped. (A real child, an endpoint nothing listens on.)"""
    with pytest.raises(SystemExit, match=r"the threads run failed \(1\):[\s\S]*Error"):
        transport_probe._run_child(Path(sys.executable), "threads", "http://127.0.0.1:9")
