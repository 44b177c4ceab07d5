"""The calls-per-session goal's minimum (``bench/throughput.py``) and its row in BENCHMARKS.md
(``bench/report.py``): the shared ``RetireGrant`` budget's writes counted beside it (issue 38)."""

from __future__ import annotations

from typing import Any

import pytest

from bench import report
from bench.throughput import minimum_calls


def test_the_minimum_holds_one_budget_write_per_second_in_which_grants_are_retired() -> None:
    # A request of the per-second budget is spent in its own second (shared_pace): a batch of
    # 100 whose RetireGrant calls span two wall-clock seconds writes the budget at least twice.
    assert minimum_calls(0, 100)["UpdateItem"] == pytest.approx(0.01)
    assert minimum_calls(0, 100, grant_seconds=2)["UpdateItem"] == pytest.approx(0.02)
    assert minimum_calls(0, 1)["UpdateItem"] == 1  # one session alone: one write


def _run(calls: dict[str, int], grant_seconds: int) -> dict[str, Any]:
    return {
        "impl": "handler",
        "scenario": {"name": "0 objects", "objects": 0, "sessions": 100},
        "case": {
            "calls": calls,
            "attempts": calls,
            "retire_grant_seconds": grant_seconds,
        },
    }


CALLS = {"DeleteConnection": 100, "RetireGrant": 100, "ListObjectsV2": 100, "TransactWriteItems": 4}


@pytest.mark.parametrize(
    ("budget_writes", "met"),
    [(2, "**met**"), (3, "**not met**"), (100, "**not met**")],
)
def test_calls_table_meets_the_minimum_only_with_a_write_a_second_not_one_a_grant(
    budget_writes: int, met: str
) -> None:
    run = _run({**CALLS, "UpdateItem": budget_writes}, grant_seconds=2)

    (row,) = [
        line
        for line in report.calls_table({"throughput": [run]}).splitlines()
        if "DynamoDB" in line
    ]

    assert row.split(" | ")[4] == "1 + 1 + 1 + 0 + 0.04 + 0 + 0.02"  # the minimum, in order
    assert row.rstrip(" |").endswith(met)
