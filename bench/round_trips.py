# ruff: noqa: RUF001, RUF002
"""The serial round trips of one batch (issue 38): ``python -m bench.round_trips``.

The real handler (`session_expiry_runtime.handler`, in a process of its own: `bench.case`)
cleans one batch of 100 ``REMOVE`` records, each session holding a WebSocket connection, a KMS
grant and an empty scratch prefix (0 objects), built in moto by the real ``SessionStore``
(`harness.build_fixture`). Every AWS call the handler makes is timed (botocore's
``before-call``/``after-call``; an ownership ``TransactWriteItems`` is labelled ``mark`` or
``release`` from its ``:state``). From that timeline:

* **sequential waves** — the longest chain of calls in which each starts after the one before
  it ended (`critical_path`): the round trips the batch waits for one after another; at a
  fixed latency a call, the wall time is about waves × latency plus the CPU no call overlaps;
* **phases** — the calls before the first step call (the ownership marks), the steps, and the
  calls after the last step call (the releases): how many calls, how many at once.

Run against moto (the correctness reference, its own work under one lock) and against the bench
endpoint (`bench.endpoint`, CPU-cheap and concurrent), both with `LATENCY_MS` injected per
call, ``--rounds`` times each; the ranges are printed.

What may overlap (docs/ownership.md): a mark must precede the step it guards and a release must
follow the step's success; marks of different ids are independent of each other, and so are
releases. So the floor is one wave of marks (all batch chunks at once), the steps'
``ceil(step calls ÷ max_workers)`` waves, and one wave of releases (`floor_waves`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import harness, report, throughput

LATENCY_MS = 20.0
SESSIONS = 100
MAX_WORKERS = 32
#: The ownership table's calls; every other call of the cleanup is a step's.
OWNERSHIP_CALLS = frozenset({"TransactWriteItems", "BatchGetItem"})
#: The shared ``RetireGrant`` budget's write (``shared_pace``): the batch's reservation goes
#: beside the marks (a mark-phase call); one after the steps began is the grant step's own.
BUDGET_CALL = "UpdateItem"

Call = tuple[str, str, float, float]  # operation, label, start s, end s


def critical_path(timeline: Sequence[Call]) -> list[Call]:
    """The longest chain of calls each starting at or after the end of the one before it."""
    calls = sorted(timeline, key=lambda c: c[2])
    length = [1] * len(calls)
    before: list[int | None] = [None] * len(calls)
    for i, (_, _, start, _) in enumerate(calls):
        for j in range(i):
            if calls[j][3] <= start and length[j] + 1 > length[i]:
                length[i], before[i] = length[j] + 1, j
    if not calls:
        return []
    at: int | None = max(range(len(calls)), key=lambda i: length[i])
    path: list[Call] = []
    while at is not None:
        path.append(calls[at])
        at = before[at]
    return path[::-1]


def _name(call: Call) -> str:
    return f"{call[0]} ({call[1]})" if call[1] else call[0]


def path_text(path: Sequence[Call]) -> str:
    """``A → B ×3 → C``: the chain's calls, repeats run together."""
    parts: list[list[Any]] = []
    for call in path:
        name = _name(call)
        if parts and parts[-1][0] == name:
            parts[-1][1] += 1
        else:
            parts.append([name, 1])
    return " → ".join(n if k == 1 else f"{n} ×{k}" for n, k in parts)


def phases(timeline: Sequence[Call]) -> dict[str, dict[str, Any]]:
    """The ownership calls before the first step call (marks, and the shared budget's
    reservation beside them), the step calls (a budget write among them is a grant step's), and
    the ownership calls after the last step call (releases): calls by name, and the most in
    flight."""
    own = OWNERSHIP_CALLS | {BUDGET_CALL}
    first = min((c[2] for c in timeline if c[0] not in own), default=math.inf)
    steps = [c for c in timeline if c[0] not in own or (c[0] == BUDGET_CALL and c[2] >= first)]
    last = max((c[3] for c in steps), default=-math.inf)
    groups = {
        "marks": [c for c in timeline if c[0] in own and c[2] < first],
        "steps": steps,
        "releases": [c for c in timeline if c[0] in OWNERSHIP_CALLS and c[2] >= first],
    }
    out: dict[str, dict[str, Any]] = {}
    for name, calls in groups.items():
        out[name] = {
            "calls": dict(Counter(_name(c) for c in calls)),
            "max_in_flight": _max_in_flight(calls),
            "from_s": min((c[2] for c in calls), default=None),
            "to_s": max((c[3] for c in calls), default=None),
        }
    out["releases"]["after_last_step_s"] = (
        None if not groups["releases"] else min(c[2] for c in groups["releases"]) - last
    )
    return out


def _max_in_flight(calls: Sequence[Call]) -> int:
    events = sorted([(c[2], 1) for c in calls] + [(c[3], -1) for c in calls])
    level = peak = 0
    for _, delta in events:
        level += delta
        peak = max(peak, level)
    return peak


def floor_waves(timeline: Sequence[Call], max_workers: int = MAX_WORKERS) -> int:
    """The fewest sequential waves the ownership rules allow for this batch's calls: one of
    marks, the steps at ``max_workers`` in flight, one of releases (module docstring)."""
    p = phases(timeline)
    steps = sum(p["steps"]["calls"].values())
    return (
        int(bool(p["marks"]["calls"]))
        + math.ceil(steps / max_workers)
        + int(bool(p["releases"]["calls"]))
    )


def summarize(case: dict[str, Any]) -> dict[str, Any]:
    timeline = [tuple(c) for c in case["timeline"] or []]
    path = critical_path(timeline)  # type: ignore[arg-type]
    return {
        "wall_s": case["wall_s"],
        "cpu_s": case["cpu_s"],
        "calls": case["calls"],
        "waves": len(path),
        "path": path_text(path),  # type: ignore[arg-type]
        "floor": floor_waves(timeline),  # type: ignore[arg-type]
        "phases": phases(timeline),  # type: ignore[arg-type]
    }


#: ``SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET`` for the structure runs: far above what one batch
#: spends, so the fleet-wide ``RetireGrant`` budget (`session_expiry_runtime.core.shared_pace`,
#: default 10 a second) does not pace them; `run` with ``budget=None`` keeps the default.
LIFTED_BUDGET = 100_000
#: moto only: a time guard of 30 s (12 s a read instead of 3 s; the warm-up invocation has 60 s).
MOTO_TIME_GUARD = {"SESSION_EXPIRY_TIME_GUARD_MS": "30000"}


def run(
    rounds: int = 3, log: Any = sys.stderr, budget: int | None = LIFTED_BUDGET
) -> dict[str, Any]:
    """``rounds`` runs of the handler on one batch against moto and against the bench
    endpoint; each run's summary (`summarize`) and the load average around them. ``budget``:
    the shared ``RetireGrant`` budget a second (``None``: the runtime's default)."""
    env = {} if budget is None else {"SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET": str(budget)}
    harness.aws_env()
    defaults = {
        "environment": {"SESSION_EXPIRY_MAX_WORKERS": str(MAX_WORKERS)},
        "timeout_s": 300,
        "memory_mb": 1769,
    }
    out: dict[str, Any] = {
        "moto": [],
        "bench endpoint": [],
        "load_before": os.getloadavg(),
        "budget": budget,
    }
    with tempfile.TemporaryDirectory(prefix="bench-round-trips-") as tmp:
        workdir = Path(tmp)
        moto = harness.MotoServer(workdir / "moto.log")
        endpoint = harness.BenchEndpoint(workdir / "endpoint.log")
        try:
            for round_number in range(rounds):
                for target in (endpoint, moto):
                    # moto's fixture serves one run: a new one each round
                    scenario = harness.Scenario("round trips", SESSIONS, 0)
                    fx = harness.build_fixture(moto, scenario, f"{target.name}-{round_number}")
                    r = throughput.run_case(
                        target,
                        fx,
                        "handler",
                        module="session_expiry_runtime.handler",
                        # moto answers one request at a time: a 100-action call queued
                        # behind another can outlast the default 3 s read timeout under load
                        env_overrides={**env, **(MOTO_TIME_GUARD if target is moto else {})},
                        latency_ms=LATENCY_MS,
                        defaults=defaults,
                        workdir=workdir,
                        timeline=True,
                    )
                    s = summarize(r.case)
                    s["clean"] = r.verification.clean and not r.case["failures"]
                    out[target.name].append(s)
                    print(
                        f"  {target.name} round {round_number + 1}: {s['waves']} waves "
                        f"(floor {s['floor']}), wall {s['wall_s']:.2f} s, "
                        f"{'clean' if s['clean'] else 'NOT CLEAN'}",
                        file=log,
                        flush=True,
                    )
        finally:
            moto.stop()
            endpoint.stop()
    out["load_after"] = os.getloadavg()
    return out


def _range(values: Sequence[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return format(lo, fmt) if format(lo, fmt) == format(hi, fmt) else f"{lo:{fmt}}–{hi:{fmt}}"


def table(data: dict[str, Any]) -> str:
    """The critical path of one batch, per target: waves, their floor, the path, the phases."""
    rows = [
        "| Target (20 ms injected a call) | Runs | Sequential waves (min–max) | Floor the "
        "ownership rules allow | Wall s | Marks before the first step: calls, most at once | "
        "Step calls, most at once | Releases: calls, most at once, start after the last step "
        "| Critical path (median run) | Verified |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for target in ("moto", "bench endpoint"):
        runs = data.get(target) or []
        if not runs:
            continue
        median = sorted(runs, key=lambda r: r["waves"])[len(runs) // 2]
        p = median["phases"]

        def calls(phase: dict[str, Any]) -> str:
            return " + ".join(f"{n} {k}" for k, n in sorted(phase["calls"].items())) or "none"

        after = p["releases"].get("after_last_step_s")
        rows.append(
            f"| {target} | {len(runs)} | **{_range([r['waves'] for r in runs], 'd')}** | "
            f"{_range([r['floor'] for r in runs], 'd')} | "
            f"{_range([r['wall_s'] for r in runs], '.2f')} | "
            f"{calls(p['marks'])}; {p['marks']['max_in_flight']} at once | "
            f"{sum(p['steps']['calls'].values())}; {p['steps']['max_in_flight']} at once | "
            f"{calls(p['releases'])}; {p['releases']['max_in_flight']} at once"
            + ("" if after is None else f"; {after * 1000:.0f} ms after")
            + f" | {median['path']} | "
            f"{'clean' if all(r['clean'] for r in runs) else '**not clean**'} |"
        )
    return "\n".join(rows)


def throughput_zero(repeats: int, budget: int | None, log: Any = sys.stderr) -> dict[str, Any]:
    """The throughput bench's 0-object scenario alone (`throughput.run_all`: 100 sessions,
    handler and naive interleaved, ``repeats`` rounds, 20 ms a call, the bench endpoint):
    the handler's ratio to naive per round, and its wall times. ``budget`` as in `run`."""
    env = {"SESSION_EXPIRY_MAX_WORKERS": str(MAX_WORKERS)}
    if budget is not None:
        env["SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET"] = str(budget)
    runs = throughput.run_all(
        [harness.Scenario("0 objects", SESSIONS, 0)],
        latency_ms=LATENCY_MS,
        defaults={"environment": env, "timeout_s": 300, "memory_mb": 1769},
        log=log,
        reference=False,
        repeats=repeats,
    )
    by = {r.impl: r for r in runs}
    handler, naive = by["handler"].case["rounds"], by["naive"].case["rounds"]
    return {
        "budget": budget,
        "ratios": [n["wall_s"] / h["wall_s"] for h, n in zip(handler, naive, strict=True)],
        "handler_wall_s": [h["wall_s"] for h in handler],
        "handler_cpu_ms": [h["cpu_s"] * 1000 / SESSIONS for h in handler],
        "clean": all(r.verification.clean for r in runs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.round_trips", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--default-budget",
        action="store_true",
        help="keep the shared RetireGrant budget at the runtime's default (10 a second)",
    )
    parser.add_argument(
        "--throughput",
        action="store_true",
        help="instead: the throughput bench's 0-object scenario alone, handler vs naive",
    )
    args = parser.parse_args(argv)
    machine = report.machine()
    if args.throughput:
        result = throughput_zero(args.rounds, None if args.default_budget else LIFTED_BUDGET)
        print(json.dumps(result))
        return 0 if result["clean"] else 1
    data = run(args.rounds, budget=None if args.default_budget else LIFTED_BUDGET)
    print(
        f"*{machine['cpu']}, {os.cpu_count()} cores; load average (1, 5, 15 min) "
        f"before: {', '.join(f'{x:.2f}' for x in data['load_before'])}; after: "
        f"{', '.join(f'{x:.2f}' for x in data['load_after'])}.*\n"
    )
    print(table(data))
    ok = all(r["clean"] for t in ("moto", "bench endpoint") for r in data[t])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
