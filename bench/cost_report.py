"""The cost tables: this run's calls and CPU per session times the prices of ``cdk_session_expiry.cost``.

Two tables: what each measured call costs per million sessions (the storm's real calls, priced
by :data:`cdk_session_expiry.cost.CALL_PRICES`, so a call the bench makes without a price shows
up as unpriced), and the monthly bill per million sessions for each option added in turn (the
model is additive: any combination is the sum of its rows' increments; ``python -m
cdk_session_expiry.cost`` prints the exact bill for a synthesized template), beside the
EventBridge Scheduler and Step Functions alternatives.
"""

# Markdown prose: typographic signs are meant, table rows are long.
# ruff: noqa: RUF001, E501

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from cdk_session_expiry import cost

#: Sessions a month the table is priced at.
SESSIONS = 1_000_000
#: Heartbeats per session (each moves the sweep index's entry when the sweeper is on).
HEARTBEATS = 10


def cpu_ms(data: dict[str, Any]) -> dict[int, float]:
    """This run's handler CPU per session (ms, median of its rounds) by scratch objects; the
    model's measured defaults where the run has none (``--storm`` alone)."""
    found = dict(cost.MEASURED_CPU_MS)
    for run in data.get("throughput", []):
        if run["impl"] == "handler" and run.get("target", "bench endpoint") == "bench endpoint":
            rounds = run["case"].get("rounds") or [run["case"]]
            per = [1000 * r["cpu_s"] / run["scenario"]["sessions"] for r in rounds]
            found[int(run["scenario"]["objects"])] = statistics.median(per)
    storm_cpu = (data.get("storm") or {}).get("cleanup_cpu_s")
    if storm_cpu and not data.get("throughput"):
        found[0] = 1000 * statistics.median(storm_cpu)
    return found


def _options(data: dict[str, Any]) -> cost.Options:
    return cost.Options(sessions=SESSIONS, heartbeats=HEARTBEATS, cpu_ms=cpu_ms(data)[0], alarms=0)


#: Each option added in turn: (label, the fields it sets).
STEPS: list[tuple[str, dict[str, Any]]] = [
    ("Time to live only: a connection and an empty scratch prefix per session", {}),
    ("+ a KMS grant per session (`grant_key`)", {"grant": True}),
    ("+ the expiry sweeper every 5 min (`expiry_sweep_interval`)", {"sweep_interval_s": 300}),
    ("… every 1 min instead", {"sweep_interval_s": 60}),
    ("… every 5 s instead", {"sweep_interval_s": 5}),
    ("+ archive (`archive_bucket`)", {"archive": True}),
    ("+ events (`event_bus`)", {"event_bus": True}),
    ("+ AgentCore stops, 3 kinds", {"agentcore_stops": 3}),
    ("+ grant sweep (hourly, 10,000 live grants)", {"grant_sweep": True}),
    ("+ the 12 alarms of the sample app", {"alarms": 12}),
]


def combinations(data: dict[str, Any]) -> list[tuple[str, cost.Options]]:
    """The options of each row: each step adds to the ones above it."""
    rows, o = [], _options(data)
    for label, fields in STEPS:
        o = replace(o, **fields)
        rows.append((label, o))
    return rows


def everything_on(data: dict[str, Any]) -> cost.Options:
    return combinations(data)[-1][1]


def options_table(data: dict[str, Any]) -> str:
    rows = []
    previous = 0.0
    for label, o in combinations(data):
        bill = cost.monthly_cost(o)
        variable = sum(bill["per_service"].values())
        fixed = sum(bill["fixed"].values())
        rows.append(
            f"| {label} | ${variable:,.2f} | ${fixed:,.2f} | **${bill['total']:,.2f}** "
            f"| {'+' if bill['total'] >= previous else '−'}${abs(bill['total'] - previous):,.2f} |"
        )
        previous = bill["total"]
    alt = cost.alternatives(everything_on(data))
    alt_rows = [f"| {name} | ${usd:,.2f} |" for name, usd in alt.items()]
    ms = cpu_ms(data)
    return "\n".join(
        [
            f"{SESSIONS:,} sessions a month, {HEARTBEATS} heartbeats each, one session per cleanup "
            f"invocation (a steady trickle; a storm batches up to 100 and costs less), "
            f"{cost.ROUND_TRIPS} round trips of 20 ms and this run's CPU per session "
            f"({ms[0]:.1f} ms at 0 objects) at 1,769 MiB.",
            "",
            "| options | grows with sessions: $ per million | fixed: $ a month | total: $ a month at 1 million | change |",
            "|---|---|---|---|---|",
            *rows,
            "",
            "Everything on (the last row), cleaned instead by:",
            "",
            "| the same sessions, the same cleanup calls, triggered by | $ a month |",
            "|---|---|",
            *alt_rows,
            "",
            _PRICES_NOTE,
        ]
    )


_PRICES_NOTE = (
    f"Prices checked {cost.PRICES_CHECKED}, US East (N. Virginia), on-demand, first tier, free "
    "tiers not deducted: Lambda arm64 $0.0000133334 per GB-second and $0.20 per million "
    "requests (aws.amazon.com/lambda/pricing); DynamoDB on-demand $0.625 per million write and "
    "$0.125 per million read request units, stream reads by a Lambda trigger free "
    "(aws.amazon.com/dynamodb/pricing/on-demand); KMS $0.03 per 10,000 requests "
    "(aws.amazon.com/kms/pricing); S3 $0.005 per 1,000 PUT/LIST, DELETE free "
    "(aws.amazon.com/s3/pricing); EventBridge $1.00 per million custom events and per million "
    "Scheduler invocations (aws.amazon.com/eventbridge/pricing); Step Functions Standard $0.025 "
    "per 1,000 state transitions (aws.amazon.com/step-functions/pricing); CloudWatch $0.30 per "
    "metric-month, $0.10 per alarm-month, $0.50 per GB of logs (aws.amazon.com/cloudwatch/pricing). "
    "API Gateway's `DeleteConnection` and AgentCore's stops have no request price. The model, its "
    "assumptions and every price's page: `cdk_session_expiry/cost.py`; your own bill: "
    "`python -m cdk_session_expiry.cost --template cdk.out/<stack>.template.json`."
)


#: Ownership records per storm session (its connection and its grant), each marked and released
#: in a transaction: the write units a session's ``TransactWriteItems`` items consume.
RECORDS_PER_SESSION = 2


def _priced(op: str, per_session: float) -> tuple[str, float] | None:
    """How ``op`` is priced (text) and its USD per session; ``None``: no price entry."""
    key = next((k for k in cost.CALL_PRICES if k.endswith(f":{op}")), None)
    if key is None:
        return None
    price, units, what = cost.CALL_PRICES[key]
    if op == "TransactWriteItems":  # billed per item, not per call: 2 records x mark + release
        items = 2 * RECORDS_PER_SESSION
        return f"{items} items × {units:g} {price} ({what})", items * units * cost.PRICES[price].usd
    return f"{units:g} {price} per {what}", per_session * units * cost.PRICES[price].usd


def calls_table(data: dict[str, Any]) -> str:
    """The storm's measured calls per session (its largest size), each priced: what the
    cleanup's own calls cost per million sessions; a call without a price entry says so."""
    storm = data.get("storm") or {}
    if not storm.get("calls"):
        return ""
    n = max(storm["calls"], key=int)
    rows, total = [], 0.0
    for op, count in sorted(storm["calls"][n]["cleanup_calls"].items()):
        per = count / int(n)
        priced = _priced(op, per)
        if priced is None:
            rows.append(f"| {op} | {per:.3g} | **no price entry** | — |")
            continue
        total += priced[1]
        rows.append(f"| {op} | {per:.3g} | {priced[0]} | ${priced[1] * 1e6:,.2f} |")
    return "\n".join(
        [
            f"The {int(n):,}-session storm's real calls (connection + grant + scratch), each priced "
            "by `cdk_session_expiry.cost.CALL_PRICES`:",
            "",
            "| call | per session (measured) | priced as | $ per million sessions |",
            "|---|---|---|---|",
            *rows,
            f"| **all calls** | | | **${total * 1e6:,.2f}** |",
        ]
    )


def goals_rows(data: dict[str, Any]) -> list[list[str]]:
    """The cost goal: the bill per million sessions with every option on, stated."""
    on = everything_on(data)
    bill = cost.monthly_cost(on)
    alt = cost.alternatives(on)
    return [
        [
            "Cost per million sessions with every option on (5 s sweeper, grants, archive, "
            "events, AgentCore stops, grant sweep, 12 alarms; one session per invocation)",
            f"${bill['total']:,.2f} a month at 1 million sessions "
            f"(Scheduler ${alt['EventBridge Scheduler']:,.2f}, Step Functions "
            f"${alt['Step Functions (Standard)']:,.2f})",
            "stated",
            "met",
        ]
    ]
