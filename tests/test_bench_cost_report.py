"""The bench's cost tables (``bench/cost_report.py``): the storm's measured calls priced by the
cost model, a call without a price entry shown as such, and the options table's rows adding up."""

from __future__ import annotations

from typing import Any

import pytest

from bench import cost_report
from cdk_session_expiry import cost


def _data(calls: dict[str, int], n: int = 1000) -> dict[str, Any]:
    return {"storm": {"calls": {str(n): {"cleanup_calls": calls}}, "cleanup_cpu_s": [0.006]}}


def test_calls_table_prices_each_measured_call() -> None:
    # 1 RetireGrant a session: $0.03 per 10,000 -> $3.00 per million; 1 ListObjectsV2: $5.00;
    # TransactWriteItems: 2 records marked and released, 4 items x 2 units x $0.625/M = $5.00;
    # DeleteConnection free. All: $13.00.
    table = cost_report.calls_table(
        _data(
            {
                "RetireGrant": 1000,
                "ListObjectsV2": 1000,
                "TransactWriteItems": 40,
                "DeleteConnection": 1000,
            }
        )
    )
    assert "| RetireGrant | 1 | 1 kms_request per call | $3.00 |" in table
    assert "| ListObjectsV2 | 1 |" in table and "$5.00 |" in table
    assert "| TransactWriteItems | 0.04 | 4 items \u00d7 2 dynamodb_write_unit" in table
    assert "**$13.00**" in table


def test_calls_table_names_a_call_without_a_price() -> None:
    table = cost_report.calls_table(_data({"FrobnicateWidget": 1000}))
    assert "| FrobnicateWidget | 1 | **no price entry** | — |" in table


def test_options_table_rows_are_the_model_and_the_cpu_measured() -> None:
    data = _data({"RetireGrant": 1000})
    assert cost_report.cpu_ms(data)[0] == pytest.approx(6.0)  # the storm's 0.006 s per session
    rows = cost_report.combinations(data)
    last = rows[-1][1]
    assert (last.grant, last.archive, last.event_bus, last.grant_sweep) == (True,) * 4
    assert last.sweep_interval_s == 5 and last.agentcore_stops == 3 and last.cpu_ms == 6.0
    table = cost_report.options_table(data)
    assert f"**${cost.monthly_cost(last)['total']:,.2f}**" in table
    assert "EventBridge Scheduler" in table and "Step Functions (Standard)" in table
    (goal,) = cost_report.goals_rows(data)
    assert goal[1].startswith(f"${cost.monthly_cost(last)['total']:,.2f} a month")
