"""The tables (stdout and BENCHMARKS.md) and the rest of BENCHMARKS.md, from the raw results."""

# This module is mostly Markdown prose: typographic signs (times, dashes, minus) are meant,
# and table rows are long lines by nature.
# ruff: noqa: RUF001, RUF002, E501

from __future__ import annotations

import datetime as dt
import math
import os
import platform
import re
import subprocess
from importlib import metadata
from typing import Any

from session_expiry_runtime.core.gc_settings import YOUNG_GENERATION_THRESHOLD

from . import coldstart, harness
from .kinesis_source import KINESIS_IMPL
from .throughput import DEFAULT_GC, minimum_calls

ENDPOINT = "bench endpoint"
#: Issue 13's goals: throughput vs naive (same run) and CPU ms per session, by objects a session.
GOAL_RATIO = {0: 10.0, 50: 10.0, 2500: 3.5}
GOAL_CPU_MS = {50: 9.0, 2500: 150.0}
#: Issue 25's host-independent goals: the handler's CPU per session ÷ the naive handler's, in the
#: same round (both processes on the same cores at the same moment).
GOAL_CPU_RATIO = {2500: 0.35}
#: Issue 38 retired the CPU-ratio goals at 0 and 50 objects (threads stay: what is left is
#: botocore's own per-call work); their figures are still reported, as "reported".
REPORTED_CPU_RATIO = (0, 50)
GOAL_COLDSTART = 1.1
OPERATIONS = (
    "DeleteConnection",
    "RetireGrant",
    "ListObjectsV2",
    "DeleteObjects",
    "TransactWriteItems",
    "BatchGetItem",
    "UpdateItem",
)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = 0.0
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem_gib = int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607
            cwd=harness.REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "memory_gib": round(mem_gib, 1),
        "cpu": cpu,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "boto3": _version("boto3"),
        "botocore": _version("botocore"),
        "moto": _version("moto"),
        "aws-cdk-lib": _version("aws-cdk-lib"),
        "werkzeug": _version("werkzeug"),
        "load_before": os.getloadavg(),
        "commit": commit,
    }


def _md(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)


def _cpu_ms(run: dict[str, Any]) -> float:
    """CPU ms per session of one run (the measured process, every thread)."""
    return 1000.0 * run["case"]["cpu_s"] / run["scenario"]["sessions"]


def rounds(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The interleaved rounds of a result (one round for a run made once)."""
    return list(
        run["case"].get("rounds")
        or [
            {
                "sessions_per_s": run["sessions_per_s"],
                "cpu_ms_per_session": _cpu_ms(run),
                "wall_s": run["case"]["wall_s"],
            }
        ]
    )


def paired(a: dict[str, Any], b: dict[str, Any], key: str) -> list[float]:
    """``a``'s ``key`` ÷ ``b``'s, round by round (the same round: the same moment's machine)."""
    return [x[key] / y[key] for x, y in zip(rounds(a), rounds(b), strict=False) if y[key]]


def span(values: list[float], fmt: str = "{:.1f}", unit: str = "") -> str:
    """``min–max`` of ``values`` (one value alone when they agree to the format)."""
    if not values:
        return "n/a"
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return f"{lo}{unit}" if lo == hi else f"{lo}–{hi}{unit}"


def machine_line(data: dict[str, Any], section: str) -> str:
    """The machine and its load around ``section``: printed with every table."""
    m = data["machine"]
    load = (data.get("loads") or {}).get(section)
    text = f"*Machine: {m['cpu']}, {m['nproc']} cores"
    if load:
        before = ", ".join(f"{x:.2f}" for x in load["before"])
        after = ", ".join(f"{x:.2f}" for x in load["after"])
        text += f"; load average (1, 5, 15 min) before: {before}; after: {after}"
    return text + ".*"


def _by_scenario(data: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """The throughput runs (against the bench endpoint) by scenario name, then implementation."""
    grouped: dict[str, dict[str, dict[str, Any]]] = {}
    for run in data["throughput"]:
        if run.get("target", ENDPOINT) == ENDPOINT:
            grouped.setdefault(run["scenario"]["name"], {})[run["impl"]] = run
    return grouped


def _reference_runs(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in data["throughput"] if r.get("target") == "moto"]


def vcpu(memory_mb: float) -> float:
    """vCPU share of a function at ``memory_mb`` (1,769 MB = 1 vCPU, in proportion below;
    Lambda developer guide, "Configuring Lambda function memory"), capped at one: the handler
    is one Python process whose Python code runs one thread at a time (the GIL), so a second
    vCPU above 1,769 MB only helps the little work that releases the GIL."""
    return min(1.0, memory_mb / MB_PER_VCPU)


def _workers(run: dict[str, Any], data: dict[str, Any]) -> int:
    """Calls the implementation keeps in flight at most: 1 for the sequential baseline."""
    if run["impl"] == "naive":
        return 1
    wide = re.search(r"max_workers=(\d+)", run["impl"])
    env = data["synth"]["defaults"]["environment"]
    return int(wide.group(1)) if wide else int(env["SESSION_EXPIRY_MAX_WORKERS"])


def ceilings(run: dict[str, Any], data: dict[str, Any], memory_mb: float) -> dict[str, float]:
    """Sessions/s one function can reach at ``memory_mb``: CPU-bound (vCPU share ÷ CPU per
    session) and latency-bound (calls in flight ÷ latency ÷ calls per session), and the lower."""
    sessions = run["scenario"]["sessions"]
    cpu_s = run["case"]["cpu_s"] / sessions
    calls = sum(run["case"]["calls"].values()) / sessions
    latency_s = data["latency_ms"] / 1000
    cpu_bound = vcpu(memory_mb) / cpu_s if cpu_s else math.inf
    latency_bound = _workers(run, data) / (latency_s * calls) if calls else math.inf
    return {
        "cpu": cpu_bound,
        "latency": latency_bound,
        "reached": min(cpu_bound, latency_bound),
        "binds": "CPU" if cpu_bound < latency_bound else "latency",
    }  # type: ignore[dict-item]


def _mean_call_ms(run: dict[str, Any]) -> float:
    """Mean time from a call's start to its answer (in-flight time ÷ calls)."""
    case = run["case"]
    calls = sum(case["calls"].values())
    return 1000 * case["mean_in_flight"] * case["wall_s"] / calls if calls else 0.0


def throughput_table(data: dict[str, Any]) -> str:
    memory = data["synth"]["defaults"]["memory_mb"]
    rows = []
    for name, runs in _by_scenario(data).items():
        base = runs.get("naive")
        for impl, run in runs.items():
            case, sc, ver = run["case"], run["scenario"], run["verification"]
            baseline = impl == "naive" or base is None
            ratio = (
                "1.0× (baseline)"
                if baseline
                else f"**{span(paired(run, base, 'sessions_per_s'), unit='×')}**"
            )
            cpu_ratio = (
                "1 (baseline)"
                if baseline
                else span(paired(run, base, "cpu_ms_per_session"), "{:.2f}")
            )
            c = ceilings(run, data, memory)
            rows.append(
                [
                    name,
                    f"{sc['sessions']} × {sc['objects']:,}",
                    impl,
                    str(len(rounds(run))),
                    span([r["wall_s"] for r in rounds(run)], "{:.2f}"),
                    span([r["sessions_per_s"] for r in rounds(run)]),
                    ratio,
                    f"**{span([r['cpu_ms_per_session'] for r in rounds(run)])}**",
                    cpu_ratio,
                    f"{case['cpu_s'] / case['wall_s']:.0%}",
                    f"{c['cpu']:.0f}",
                    f"{c['latency']:.0f}",
                    str(c["binds"]),
                    f"{case['mean_in_flight']:.1f} / {case['max_in_flight']:.0f}",
                    f"{_mean_call_ms(run):.0f}",
                    f"{run['server_cpu_s']:.2f} ({run['server_cpu_s'] / case['wall_s']:.0%})",
                    f"{case['rss_peak_mb']:.0f} of {memory}",
                    "clean"
                    if ver["clean"]
                    and not case["failures"]
                    and all(r.get("clean", True) for r in rounds(run))
                    else f"NOT CLEAN ({case['failures']} reported failed)",
                ]
            )
    return _md(
        [
            "Scenario",
            "Sessions × objects",
            "Implementation",
            "Rounds",
            "Wall s (min–max)",
            "Sessions/s (min–max)",
            "vs naive, same round (min–max)",
            "CPU ms per session, handler process (min–max)",
            "CPU per session ÷ naive's, same round",
            "Handler process CPU (of wall, one core = 100%; median round)",
            f"CPU-bound ceiling at {memory} MiB ({vcpu(memory):.2f} vCPU), sessions/s",
            "Latency-bound ceiling (in flight ÷ latency ÷ calls), sessions/s",
            f"Binds at {memory} MiB",
            "Calls in flight (mean / max)",
            f"Mean call ms ({data['latency_ms']:g} injected)",
            "Endpoint CPU s (of wall)",
            "Peak RSS MiB (of function memory)",
            "Verified (every round)",
        ],
        rows,
    )


def reference_table(data: dict[str, Any]) -> str:
    rows = []
    for run in _reference_runs(data):
        case, sc, ver = run["case"], run["scenario"], run["verification"]
        rows.append(
            [
                run["scenario"]["name"],
                f"{sc['sessions']} × {sc['objects']:,}",
                run["impl"],
                f"{case['wall_s']:.2f}",
                f"{run['sessions_per_s']:.1f}",
                f"{1000 * case['cpu_s'] / sc['sessions']:.1f}",
                f"{run['server_cpu_s']:.2f} ({run['server_cpu_s'] / case['wall_s']:.0%})",
                f"{sum(case['calls'].values()) / sc['sessions']:g}",
                "clean, controls intact"
                if ver["clean"] and not case["failures"]
                else f"NOT CLEAN ({case['failures']} reported failed)",
            ]
        )
    return _md(
        [
            "Scenario",
            "Sessions × objects",
            "Implementation",
            "Wall s",
            "Sessions/s",
            "CPU ms per session",
            "moto server CPU s (of wall)",
            "Calls per session",
            "Verified in moto",
        ],
        rows,
    )


def _fmt_calls(value: float) -> str:
    return f"{value:.3g}"


def calls_table(data: dict[str, Any]) -> str:
    rows = []
    for runs in _by_scenario(data).values():
        # The DynamoDB stream path and, beside it, the Kinesis change source's.
        for source, run in _change_source_runs(runs):
            rows.append(_calls_row(source, run, runs.get("naive")))
    return _md(
        [
            "Change source",
            "Objects per session",
            "Measured per session (" + " + ".join(OPERATIONS) + ")",
            "Total",
            "Minimum (same order)",
            "Min. total",
            "HTTP attempts per session",
            "Naive baseline per session (no ownership call: it trusts the record)",
            "Goal: at most the minimum, operation by operation",
        ],
        rows,
    ) + (
        "\n\nThe minimum per session: one DeleteConnection, one RetireGrant, one ListObjectsV2 "
        "per 1,000 objects (at least one), one DeleteObjects per 1,000 objects (fewer when one "
        "DeleteObjects carries several sessions' keys), and the ownership records' marks and "
        "releases: `TransactWriteItems` of up to 100 records each, coalesced across the "
        "invocation's records, so 2 × ceil(2 × sessions ÷ 100) calls for a batch whose every "
        "session has a connection and a grant (0.04 a session in a batch of 100); with the "
        "Kinesis change source one `BatchGetItem` per 100 sessions reads the removed items back "
        "(a record anyone with `kinesis:PutRecord` could have written); and one `UpdateItem` "
        "of the `RetireGrant` budget every invocation shares per wall-clock second in which the "
        "batch retires grants (a counter per second, each request spent in its own second: "
        "`session_expiry_runtime/core/shared_pace.py`; a batch reserves its grants' requests "
        "at once beside its marks, issue 38). The "
        "per-session `ListGrants` of earlier versions is gone: the grant's ownership record "
        "replaces it (only items written before ownership records still get one). The naive "
        "baseline makes no ownership call: it trusts what the record names, which is what the "
        "ownership records exist to stop (docs/ownership.md)."
    )


def _change_source_runs(runs: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    named = (("DynamoDB stream", "handler"), ("Kinesis", KINESIS_IMPL))
    return [(source, runs[impl]) for source, impl in named if impl in runs]


def _calls_row(source: str, run: dict[str, Any], naive: dict[str, Any] | None) -> list[str]:
    n, sessions = run["scenario"]["objects"], run["scenario"]["sessions"]
    minimum = minimum_calls(
        n,
        sessions,
        kinesis=source == "Kinesis",
        grant_seconds=run["case"].get("retire_grant_seconds", 1),
    )
    calls = run["case"]["calls"]
    attempts = run["case"]["attempts"]
    measured = {op: calls.get(op, 0) / sessions for op in OPERATIONS}
    others = {op: c for op, c in calls.items() if op not in OPERATIONS}
    total = sum(calls.values()) / sessions
    naive_total = sum(naive["case"]["calls"].values()) / sessions if naive else float("nan")
    # DeleteObjects shared by several sessions make fewer calls than the minimum for
    # one session alone: at most the minimum, operation by operation, is the goal.
    met = all(measured[op] <= minimum[op] + 1e-9 for op in OPERATIONS) and not others
    return [
        source,
        f"{n:,} ({sessions} sessions)",
        " + ".join(_fmt_calls(measured[op]) for op in OPERATIONS)
        + (f" + others {others}" if others else ""),
        _fmt_calls(total),
        " + ".join(_fmt_calls(minimum[op]) for op in OPERATIONS),
        _fmt_calls(sum(minimum.values())),
        f"{sum(attempts.values()) / sessions:.3g}",
        _fmt_calls(naive_total),
        "**met**" if met else "**not met**",
    ]


def coldstart_table(data: dict[str, Any]) -> str:
    labels = {
        "handler": "this project (`session_expiry_runtime.handler` + `get_cleaner()`)",
        "naive": "naive baseline (`bench/naive.py`, boto3 only)",
        "powertools": f"Powertools reference (`bench/powertools_ref.py`, "
        f"aws-lambda-powertools {coldstart.POWERTOOLS_VERSION})",
    }
    rows = [
        [
            labels[c["impl"]],
            str(c["runs"]),
            f"**{c['median_ms']:.0f}**",
            f"{c['min_ms']:.0f}–{c['max_ms']:.0f}",
            f"{c['process_median_ms']:.0f}",
        ]
        for c in data["coldstart"]
    ]
    return _md(
        [
            "Handler",
            "Runs",
            "Import + clients, median ms",
            "min–max ms",
            "Whole process (interpreter start included), median ms",
        ],
        rows,
    )


def synth_table(data: dict[str, Any]) -> str:
    s = data["synth"]
    rows = [
        [
            str(r["constructs"]),
            str(r.get("stacks", 1)),
            str(r["resources"]),
            f"{r['build_s']:.2f}",
            f"{r['synth_s']:.2f}",
            f"{r['total_s']:.2f}",
            f"{r['total_s'] / r['constructs']:.3f}",
        ]
        for r in s["rows"]
    ]
    fit = s["fit"]
    marginal = ", ".join(
        f"{m['from']}→{m['to']}: {m['per_construct_s']:.3f} s" for m in s["marginal"]
    )
    last = s["marginal"][-1]["per_construct_s"]
    slope = fit["per_construct_s"]
    linear = fit["r2"] >= 0.95 and last <= 1.5 * slope
    verdict = (
        f"**Linear**: the line explains the points (R² ≥ 0.95) and the cost of the last "
        f"constructs added ({last:.3f} s each) is within 1.5× the fitted slope, so synth time is "
        "a fixed per-app cost plus a constant cost per construct; three sizes on a shared "
        "machine cannot resolve anything finer."
        if linear
        else "**Not shown linear**: "
        + "; ".join(
            reason
            for reason, failed in (
                (
                    f"the line explains the points poorly (R² = {fit['r2']:.2f} < 0.95)",
                    fit["r2"] < 0.95,
                ),
                (
                    f"the last constructs added cost {last:.3f} s each, more than 1.5× the "
                    f"fitted {slope:.3f} s",
                    last > 1.5 * slope,
                ),
            )
            if failed
        )
        + ". Synth timings on a shared 2-core machine are noisy: run `make bench` again."
    )
    return (
        _md(
            [
                "Constructs",
                "Stacks",
                "Resources",
                "Build s",
                "app.synth() s",
                "Total s",
                "Total ÷ constructs s",
            ],
            rows,
        )
        + f"\n\nLeast-squares fit: total ≈ {fit['intercept_s']:.2f} s + "
        f"**{fit['per_construct_s']:.3f} s per construct**, R² = {fit['r2']:.4f}; marginal cost "
        f"per added construct {marginal}. First synth in the process (jsii start, asset "
        f"bundling): {s['first_synth_s']:.2f} s; importing aws_cdk: {s['import_s']:.2f} s. "
        + verdict
    )


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def goals_table(data: dict[str, Any]) -> str:
    """Issue 13's goals, each with measured / goal / met (a quick run says it judges nothing)."""
    table = _goals_rows(data)
    if data.get("quick"):
        return (
            "**Quick run (`--quick`): sizes too small to judge the goals (fewer sessions than "
            "calls in flight); the statuses below only show the bench works. Run `make bench`.**"
            "\n\n" + table
        )
    return table


def _goals_rows(data: dict[str, Any]) -> str:
    memory = data["synth"]["defaults"]["memory_mb"]
    rows = []
    by = _by_scenario(data)
    for runs in by.values():
        base, run = runs.get("naive"), runs.get("handler")
        n = (run or base or {"scenario": {"objects": -1}})["scenario"]["objects"]
        if base and run and n in GOAL_RATIO:
            ratios = paired(run, base, "sessions_per_s")
            goal = GOAL_RATIO[n]
            rows.append(
                [
                    f"Throughput vs naive, {n:,} objects ({data['latency_ms']:g} ms a call, "
                    f"each of {len(ratios)} rounds)",
                    span(ratios, unit="×"),
                    f"≥ {goal:g}×",
                    _met(bool(ratios) and min(ratios) >= goal),
                ]
            )
    for runs in by.values():
        base, run = runs.get("naive"), runs.get("handler")
        n = (run or base or {"scenario": {"objects": -1}})["scenario"]["objects"]
        if base and run and (n in GOAL_CPU_RATIO or n in REPORTED_CPU_RATIO):
            ratios = paired(run, base, "cpu_ms_per_session")
            goal = GOAL_CPU_RATIO.get(n)
            rows.append(
                [
                    f"CPU per session ÷ naive's, {n:,} objects (host-independent; each of "
                    f"{len(ratios)} rounds)",
                    span(ratios, "{:.2f}"),
                    "reported (goal retired, issue 38)" if goal is None else f"≤ {goal:g}",
                    "reported" if goal is None else _met(bool(ratios) and max(ratios) <= goal),
                ]
            )
    for runs in by.values():
        run = runs.get("handler")
        if run and run["scenario"]["objects"] in GOAL_CPU_MS:
            n = run["scenario"]["objects"]
            cpu = [r["cpu_ms_per_session"] for r in rounds(run)]
            rows.append(
                [
                    f"CPU per session, {n:,} objects (handler process, this machine)",
                    span(cpu, unit=" ms"),
                    f"≤ {GOAL_CPU_MS[n]:g} ms",
                    _met(max(cpu) <= GOAL_CPU_MS[n]),
                ]
            )
    for runs in by.values():
        run = runs.get("handler")
        if run:
            n, sessions = run["scenario"]["objects"], run["scenario"]["sessions"]
            calls = run["case"]["calls"]
            total = sum(calls.values()) / sessions
            minimum = minimum_calls(
                n, sessions, grant_seconds=run["case"].get("retire_grant_seconds", 1)
            )
            fewer = all(calls.get(op, 0) <= v * sessions + 1e-9 for op, v in minimum.items())
            others = set(calls) - set(minimum)
            rows.append(
                [
                    f"Calls per session, {n:,} objects ({sessions} sessions)",
                    f"{total:.3g}" + (f" (also {sorted(others)})" if others else ""),
                    f"≤ {sum(minimum.values()):.3g} (the minimum)",
                    _met(fewer and not others),
                ]
            )
    cold = {c["impl"]: c for c in data["coldstart"]}
    if "handler" in cold and "naive" in cold:
        ratio = cold["handler"].get(
            "paired_ratio_median", cold["handler"]["median_ms"] / cold["naive"]["median_ms"]
        )
        rows.append(
            [
                "Cold start vs importing boto3 and building the same clients",
                f"{ratio:.2f}×",
                f"≤ {GOAL_COLDSTART:g}×",
                _met(ratio <= GOAL_COLDSTART),
            ]
        )
    peak = max(
        (r["case"]["rss_peak_mb"] for r in data["throughput"] if r["impl"] == "handler"),
        default=0.0,
    )
    rows.append(
        [
            "Peak memory within the function's memory",
            f"{peak:.0f} MiB (process RSS)",
            f"≤ {memory} MiB",
            _met(peak <= memory),
        ]
    )
    clean = all(
        r["verification"]["clean"] and not r["case"]["failures"] for r in data["throughput"]
    )
    rows.append(
        [
            "Every session verified clean, controls intact (bench endpoint and moto)",
            "all runs" if clean else "see tables",
            "all runs",
            _met(clean),
        ]
    )
    if data.get("storm"):
        from . import cost_report, storm_report

        rows += storm_report.goals_rows(data["storm"]) + cost_report.goals_rows(data)
    if data.get("ownership_cost"):
        from . import ownership_cost

        rows += ownership_cost.goal_rows(data["ownership_cost"])
    return _md(["Goal (issues 13, 20, 25, 35, 38)", "Measured", "Goal", "Status"], rows)


#: Lambda gives a function one vCPU's worth of CPU at 1,769 MB, in proportion below that
#: (Lambda developer guide, "Configuring Lambda function memory").
MB_PER_VCPU = 1769
#: Memory sizes priced (MiB).
PRICED_MEMORY_MB = (512, 1024, 1769, 3008)
#: Lambda on arm64, US East (N. Virginia), first tier (7.5 billion GB-s a month): USD per
#: GB-second of duration, and per request. aws.amazon.com/lambda/pricing/ renders its rates
#: client-side; the figures were read on 2026-12-01 from pages quoting it (cloudchipr.com,
#: "AWS Lambda Pricing Breakdown", 2024; a Lambda cost guide dated 2026-05-11): $0.0000133334
#: per GB-s and $0.20 per million requests. Check the AWS page before relying on them.
ARM64_GB_SECOND_USD = 0.0000133334
REQUEST_USD = 0.20 / 1_000_000
PRICE_SOURCE = (
    "arm64, US East (N. Virginia), first tier: $0.0000133334 per GB-second, $0.20 per million "
    "requests — aws.amazon.com/lambda/pricing/ as quoted by cloudchipr.com (2024) and a Lambda "
    "cost guide dated 2026-05-11, read 2026-12-01; the AWS page itself renders its rates "
    "client-side and could not be read here, so treat the figures as an assumption to check"
)


def cost_per_million(run: dict[str, Any], data: dict[str, Any], memory_mb: float) -> float:
    """USD per million sessions cleaned at ``memory_mb``: duration (one function reaches
    :func:`ceilings`' sessions/s, billed for memory times time) plus requests (one per batch of the
    construct's default batch size)."""
    batch = data["synth"]["defaults"]["event_source_mapping"]["BatchSize"]
    per_s = ceilings(run, data, memory_mb)["reached"]
    duration_usd = (memory_mb / 1024) * ARM64_GB_SECOND_USD / per_s
    return 1_000_000 * (duration_usd + REQUEST_USD / batch)


def recommended_memory(data: dict[str, Any]) -> int:
    """The memory the pricing table supports: among the priced sizes whose cost per session is
    within 10 % of the cheapest in every scenario, the one whose function cleans the most
    sessions a second (at 50 objects; ties: the smaller)."""
    handler_runs = [runs["handler"] for runs in _by_scenario(data).values() if "handler" in runs]
    if not handler_runs:
        return int(data["synth"]["defaults"]["memory_mb"])
    ok = [
        m
        for m in PRICED_MEMORY_MB
        if all(
            cost_per_million(r, data, m)
            <= 1.1 * min(cost_per_million(r, data, x) for x in PRICED_MEMORY_MB)
            for r in handler_runs
        )
    ] or list(PRICED_MEMORY_MB)
    typical = next((r for r in handler_runs if r["scenario"]["objects"] == 50), handler_runs[0])
    return max(ok, key=lambda m: (round(ceilings(typical, data, m)["reached"], 1), -m))


def pricing_table(data: dict[str, Any]) -> str:
    rows = []
    for name, runs in _by_scenario(data).items():
        run = runs.get("handler")
        if not run:
            continue
        cpu_ms = 1000 * run["case"]["cpu_s"] / run["scenario"]["sessions"]
        calls = sum(run["case"]["calls"].values()) / run["scenario"]["sessions"]
        row = [name, f"{cpu_ms:.1f}", f"{calls:.3g}"]
        for m in PRICED_MEMORY_MB:
            c = ceilings(run, data, m)
            row.append(
                f"${cost_per_million(run, data, m):.2f} · {c['reached']:.0f}/s ({c['binds']})"
            )
        rows.append(row)
    rec = recommended_memory(data)
    default = data["synth"]["defaults"]["memory_mb"]
    table = _md(
        ["Scenario", "CPU ms per session", "Calls per session"]
        + [
            f"{m:,} MiB ({vcpu(m):.2f} vCPU): $ per million sessions · sessions/s (binds)"
            for m in PRICED_MEMORY_MB
        ],
        rows,
    )
    agree = (
        f"The construct's default `cleanup_memory_size` is **{default:,} MiB**, the size this table supports."
        if rec == default
        else f"**This run supports {rec:,} MiB; the construct's default is {default:,} MiB**: change "
        "`DEFAULT_CLEANUP_MEMORY_SIZE` or look at why this run differs."
    )
    return f"""{table}

Prices: {PRICE_SOURCE}. Duration cost = memory (GB) × the time one function needs per session
(1 ÷ the sessions/s shown, the lower of the CPU-bound and latency-bound ceilings at that memory,
from this run's CPU per session and calls per session at {data["latency_ms"]:g} ms a call); plus
one request per batch of {data["synth"]["defaults"]["event_source_mapping"]["BatchSize"]} records.
AWS's own calls (S3, KMS, API Gateway) are not included. While CPU binds, cost per session is
the same at every memory size below 1,769 MiB and more memory only makes the function faster;
above 1,769 MiB the second vCPU does little for one Python process (the GIL), so the cost rises
with memory for no speed. Graviton cores are not this machine's cores: treat the CPU column, and
so every figure here, as an estimate.

Chosen: the size within 10 % of the cheapest in every scenario that cleans the most sessions a
second at 50 objects — **{rec:,} MiB**. {agree}"""


def scale_table(data: dict[str, Any]) -> str:
    d = data["synth"]["defaults"]
    memory, timeout = d["memory_mb"], d["timeout_s"]
    rows = []
    for run in data.get("scale", []):
        case, sc, ver = run["case"], run["scenario"], run["verification"]
        c = ceilings(run, data, memory)
        projected = sc["sessions"] / c["reached"]
        rows.append(
            [
                f"{sc['sessions']:,} × {sc['objects']:,}",
                f"{sc['sessions'] * sc['objects']:,}",
                f"{case['wall_s']:.1f}",
                f"{case['cpu_s']:.1f}",
                f"{projected:.1f} ({c['binds']})",
                f"{timeout:g}",
                f"{timeout / projected:.1f}×",
                f"{case['rss_peak_mb']:.0f} of {memory} ({case['rss_peak_mb'] / memory:.0%})",
                "clean, controls intact"
                if ver["clean"] and not case["failures"]
                else f"NOT CLEAN ({case['failures']} reported failed)",
            ]
        )
    return _md(
        [
            "Sessions × objects (one invocation)",
            "Objects deleted",
            "Wall s (this machine)",
            "Handler CPU s",
            f"Projected duration at {memory:,} MiB, s (binds)",
            "Timeout s",
            "Margin (timeout ÷ projected)",
            "Peak RSS MiB (of function memory)",
            "Verified",
        ],
        rows,
    ) + _scale_note(data)


#: The construct's largest ``batch_size`` (the event source mapping's maximum for a stream).
MAX_BATCH_SIZE = 10_000


def _scale_note(data: dict[str, Any]) -> str:
    """What the largest batch the construct accepts would take, from the scale runs."""
    d = data["synth"]["defaults"]
    memory, timeout = d["memory_mb"], d["timeout_s"]
    notes = []
    for run in data.get("scale", []):
        sc = run["scenario"]
        per_session = 1 / ceilings(run, data, memory)["reached"]
        full = MAX_BATCH_SIZE * per_session
        notes.append(
            f"{MAX_BATCH_SIZE:,} sessions of {sc['objects']:,} objects ≈ {full:.0f} s"
            + (
                f" (**beyond the {timeout:g} s timeout**: the time guard then reports the records "
                "not yet started failed, and the event source mapping retries them, bisecting)"
                if full > timeout
                else f" ({timeout / full:.1f}× margin)"
            )
        )
    if not notes:
        return ""
    return (
        f"\n\nThe construct accepts `batch_size` up to {MAX_BATCH_SIZE:,}; Lambda's 6 MB "
        "invocation payload caps a batch of ~1 KB records below that. Scaled linearly from the "
        f"rows above, at {memory:,} MiB: " + "; ".join(notes) + ". Memory holds at most one "
        "1,000-key page per session being cleaned (the calls in flight bound those), not a "
        "session's whole listing, so it does not grow with the objects of a session."
    )


#: CPU ms per session of the handler before issue 13 (against a CPU-cheap endpoint, this machine,
#: as measured for the issue), by objects a session: the starting point of the table below.
ISSUE_13_BASELINE_CPU_MS = {0: 6.1, 50: 13.7, 2500: 426.0}


def cpu_work_table(data: dict[str, Any]) -> str:
    """What brought CPU per session down, each change with its own measurement."""
    p = data.get("parsing")
    rows = []
    if p:
        rows.append(
            [
                "Response timestamps through `datetime.fromisoformat` (botocore's "
                "timestamp-parser setting on the cleanup's session; `session_expiry_runtime/core/timestamps.py`)",
                "botocore's parse of one 1,000-key ListObjectsV2 page (`bench/parsing.py`, same body)",
                f"{p['botocore_default_ms']:.1f} ms",
                f"{p['fromisoformat_ms']:.1f} ms",
            ]
        )
    if p and "keys_only_ms" in p:
        rows.append(
            [
                "Listed objects parsed for their keys only (botocore's own parser, the S3 "
                "model's `Object` shape reduced to `Key` through the session's data loader; "
                "`session_expiry_runtime/core/listing_model.py`)",
                "botocore's parse of one 1,000-key ListObjectsV2 page (`bench/parsing.py`, same "
                "body, both with the timestamp setting)",
                f"{p['fromisoformat_ms']:.1f} ms",
                f"{p['keys_only_ms']:.1f} ms",
            ]
        )
    if p and "keys_parser_ms" in p:
        rows.append(
            [
                "A listed object read from its one `Key` element (botocore's `rest-xml` parser "
                "with that shortcut for the reduced `Object` shape, made by the session's "
                "`response_parser_factory`; property-tested equal; "
                "`session_expiry_runtime/core/listing_model.py`)",
                "botocore's parse of one 1,000-key ListObjectsV2 page (`bench/parsing.py`, same "
                "body, both with the reduced model and the timestamp setting)",
                f"{p['keys_only_ms']:.1f} ms",
                f"{p['keys_parser_ms']:.1f} ms",
            ]
        )
    if p and "delete_objects_validate_ms" in p:
        rows.append(
            [
                "No client-side parameter validation on the scratch step's S3 client (botocore's "
                "`parameter_validation=False`; its parameters are built by the step itself)",
                "botocore's validation of one 1,000-key DeleteObjects request (`bench/parsing.py`; "
                f"serialising it costs {p['delete_objects_serialize_ms']:.1f} ms either way)",
                f"{p['delete_objects_validate_ms']:.1f} ms",
                "0 ms",
            ]
        )
    if p and "empty_listing_page_loop_ms" in p:
        rows.append(
            [
                "The scratch prefix listed by the step's own page loop, not botocore's paginator "
                "(`ScratchStep._pages`: `ContinuationToken` from each page's "
                "`NextContinuationToken`; no paginator class per call, no JMESPath per page)",
                "client-side CPU of listing one empty prefix (`bench/parsing.py`; botocore's "
                "`Stubber` answers, so the paginator's own work is the difference)",
                f"{p['empty_listing_paginator_ms']:.3f} ms",
                f"{p['empty_listing_page_loop_ms']:.3f} ms",
            ]
        )
    for runs in _by_scenario(data).values():
        run = runs.get("handler")
        if run and run["scenario"]["objects"] in (50, 2500):
            n, sessions = run["scenario"]["objects"], run["scenario"]["sessions"]
            rows.append(
                [
                    "DeleteObjects shared by the sessions cleaned side by side "
                    "(`steps/delete_objects.py`)",
                    f"DeleteObjects calls per session, {n:,} objects ({sessions} sessions)",
                    f"{minimum_calls(n)['DeleteObjects']:g} (one session alone)",
                    f"{run['case']['calls'].get('DeleteObjects', 0) / sessions:.2f}",
                ]
            )
    for runs in _by_scenario(data).values():
        run = runs.get("handler")
        if run and run["scenario"]["objects"] == 0:
            sessions = run["scenario"]["sessions"]
            rows.append(
                [
                    "Ownership marks of the whole batch up front, releases together once every "
                    "record is done (`claims.py` premark, `deferred_releases.py`); no client-side "
                    "parameter validation on the ownership table's client",
                    f"TransactWriteItems per session, 0 objects ({sessions} sessions)",
                    "0.3–0.6 (coalesced as records arrived; BENCHMARKS.md of 2026-12-02)",
                    f"{run['case']['calls'].get('TransactWriteItems', 0) / sessions:.2f}",
                ]
            )
    for runs in _by_scenario(data).values():
        run, untuned = runs.get("handler"), runs.get(DEFAULT_GC[0])
        if run and untuned:
            rows.append(
                [
                    "Garbage collector tuned once per process: `gc.freeze()` after the clients "
                    "are built, young-generation threshold 700 → "
                    f"{YOUNG_GENERATION_THRESHOLD:,} (`session_expiry_runtime/core/gc_settings.py`)",
                    f"handler CPU per session, {run['scenario']['objects']:,} objects, this run "
                    f"(`{DEFAULT_GC[0]}` is the same handler with CPython's defaults)",
                    f"{_cpu_ms(untuned):.1f} ms",
                    f"{_cpu_ms(run):.1f} ms",
                ]
            )
    for runs in _by_scenario(data).values():
        run = runs.get("handler")
        n = run["scenario"]["objects"] if run else None
        if run and n in ISSUE_13_BASELINE_CPU_MS:
            rows.append(
                [
                    "Everything on main at this commit",
                    f"handler CPU per session, {n:,} objects",
                    f"{ISSUE_13_BASELINE_CPU_MS[n]:g} ms (issue 13)",
                    f"{1000 * run['case']['cpu_s'] / run['scenario']['sessions']:.1f} ms",
                ]
            )
    return _md(["Change", "Measured on", "Before", "After"], rows) + (
        "\n\nProfiled with `python -m bench --profile` (cProfile on the handler process, every "
        "thread, each thread's CPU clock; statistics in `bench/results/*.prof`). After the "
        "timestamp parser, the handler's own code (decode, classify, prefixes, logging, metrics) "
        "is under a tenth of its CPU; the rest is botocore's per-call work — request "
        "serialisation and parameter validation, SigV4 signing, endpoint rules, urllib3 and "
        "`http.client` header handling, XML parsing of the answer — which mostly only fewer "
        'calls reduce, as DeleteObjects shared across sessions do. The "before" CPU per '
        "session is the issue's measurement on this machine, not this run's. Not taken: the log "
        "level (one INFO line per record, well under 1 % of the CPU in the profile)."
    )


def limits(data: dict[str, Any]) -> str:
    """What bounds the measured numbers, from this run's data."""
    memory = data["synth"]["defaults"]["memory_mb"]
    handler = [r for runs in _by_scenario(data).values() for r in runs.values()]
    ep_share = max((r["server_cpu_s"] / r["case"]["wall_s"] for r in handler), default=0.0)
    own = [
        f"{r['scenario']['name']} {r['case']['cpu_s'] / r['case']['wall_s']:.0%}"
        for runs in _by_scenario(data).values()
        for r in runs.values()
        if r["impl"] == "handler"
    ]
    refs = [
        f"{r['scenario']['name']}: {r['sessions_per_s']:.1f} sessions/s with the moto server at "
        f"{r['server_cpu_s'] / r['case']['wall_s']:.0%} of a core"
        for r in _reference_runs(data)
    ]
    failed = {}
    for run in data["throughput"] + data.get("scale", []):
        for what, count in run["case"].get("failed_attempts", {}).items():
            failed[
                f"{run['impl']} on {run.get('target', ENDPOINT)}, {run['scenario']['name']}: {what}"
            ] = count
    retries = (
        "Failed HTTP attempts in this run (retried by botocore's standard retry mode): "
        + "; ".join(f"{k} ×{v}" for k, v in failed.items())
        + " (logs: `bench/results/`)."
        if failed
        else "No HTTP attempt failed in this run."
    )
    nproc = data["machine"]["nproc"] or 1
    load = max(data["machine"]["load_before"][0], data["load_after"][0])
    calls_ms = ", ".join(
        f"{r['scenario']['name']} {_mean_call_ms(r):.0f} ms"
        for runs in _by_scenario(data).values()
        for r in runs.values()
        if r["impl"] == "handler"
    )
    loaded = (
        f"""* **This run shared the machine** (load average up to {load:.1f} on {nproc} cores):
  the handler's calls took {calls_ms} on average from start to answer, against
  {data["latency_ms"]:g} ms injected: the handler's own work inside a call (signing, parsing a
  1,000-key listing) stretched by waiting for a core, in its threads and the endpoint's. That caps the handler at calls in flight ÷ that time, lowers its ratio to the
  baseline (whose one call at a time suffers less), and leaves its CPU share of the wall well
  under 100 %. CPU per session (`process_time`) is what load changes least.
"""
        if load > nproc
        else ""
    )
    return f"""{loaded}* **The endpoint is not the bottleneck.** The bench endpoint used at most
  {ep_share:.0%} of one core in any throughput run (column "Endpoint CPU s"), on a machine with
  {data["machine"]["nproc"]} cores: the measured numbers are the handler's, not an emulator's.
  Its sockets set `TCP_NODELAY`: before they did, each answer's body waited for the client's
  delayed acknowledgement of its headers (Nagle's algorithm), and a call made with 15 others in
  flight took ~46 ms instead of 20 — the whole of the gap issue 13 first measured at 0 and 50
  objects (7.4× and 8.6×), an artifact of the bench, not of the handler.
* **The handler process is CPU-bound on this machine when its own CPU nears 100 % of the wall
  time** (one Python process runs Python one thread at a time): handler runs {", ".join(own)}.
  There, more calls in flight cannot help; only less CPU per session can.
* **In Lambda, the lower of two ceilings binds** (columns "CPU-bound" and "Latency-bound"):
  the vCPU share at {memory:,} MiB ({vcpu(memory):.2f} vCPU) ÷ CPU per session, and calls in
  flight ÷ latency ÷ calls per session. The CPU column comes from this machine's cores, not
  Graviton's: an estimate.
* **moto, the correctness reference**, is slower because it builds each answer in pure Python
  under one lock (its backends are not thread safe): {"; ".join(refs) or "not run"}. Its numbers
  are not throughput figures; every session it served was verified clean.
* {retries}"""


def tables(data: dict[str, Any]) -> str:
    """Every table under its heading, each with the machine and its load around it."""
    sections: list[tuple[str, str, str]] = [
        ("Goals", "throughput", goals_table(data)),
        (
            f"Cleanup throughput against the bench endpoint ({data['latency_ms']:g} ms injected "
            "per AWS call)",
            "throughput",
            throughput_table(data),
        ),
        (
            "Correctness reference: the handler against moto (same records)",
            "throughput",
            reference_table(data),
        ),
        ("AWS calls per cleaned session (handler)", "throughput", calls_table(data)),
        ("What brought CPU per session down", "throughput", cpu_work_table(data)),
        (
            "Cost per million sessions cleaned, and sessions/s one function reaches",
            "throughput",
            pricing_table(data),
        ),
    ]
    if data.get("scale"):
        sections.append(
            ("Scale: the largest batches in one invocation", "scale", scale_table(data))
        )
    if data.get("ownership_cost"):
        from . import ownership_cost

        sections.append(
            (
                "Recording and checking ownership: cost per session beside its minimum (issue 35)",
                "ownership",
                ownership_cost.tables(data["ownership_cost"]),
            )
        )
    for extra in _extra_sections(data):
        sections.append(extra)
    sections += [
        ("Cold start (fresh interpreter)", "coldstart", coldstart_table(data)),
        (
            "Synth scaling (`SessionExpiry` with no optional props, at most "
            f"{data['synth'].get('constructs_per_stack', 25)} to a stack)",
            "synth",
            synth_table(data),
        ),
    ]
    if data.get("expiry_latency"):
        from . import expiry_latency

        sections.append(
            (
                "Expiry-to-clean in real time, 5 s sweeper (issue 15)",
                "expiry",
                expiry_latency.table(data["expiry_latency"]),
            )
        )
    if data.get("consumer"):
        from . import consumer

        sections.append(
            (
                "A consumer project's tests with the pytest plugin (issue 22)",
                "consumer",
                consumer.table(data["consumer"]),
            )
        )
    if data.get("archive_modes"):
        from . import archive

        sections.append(
            (
                "Archive per object vs Firehose, per 1,000 sessions (issue 24)",
                "archive",
                archive.table(data["archive_modes"]),
            )
        )
    return "\n\n".join(
        f"### {title}\n\n{machine_line(data, section)}\n\n{body}"
        for title, section, body in sections
    )


def _extra_sections(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The storm, pacing and cost sections, when the run made them (:mod:`bench.storm`)."""
    from . import storm_report as sr

    st = data.get("storm")
    if not st:
        return []
    big = max(st["sizes"])
    return [
        (
            "Expiry storms: sessions due at once, every call made by the real code, time on a "
            "simulated clock (issue 25)",
            "storm",
            sr.storm_table(st),
        ),
        (
            f"What binds: each stage's capacity ({big:,} sessions due at once, the defaults)",
            "storm",
            sr.capacity_table(st),
        ),
        ("The storms' real calls", "storm", sr.calls_table(st)),
        (
            f"What moves the first limit ({big:,} sessions due at once)",
            "storm",
            sr.settings_table(st),
        ),
        ("Storm size → settings (expiry-to-clean p99 ≤ 60 s)", "storm", sr.sizing_table(st)),
        (
            "Backpressure: a quota that binds (RetireGrant at "
            f"{st['pacing'][0].get('quota', 15) if st.get('pacing') else 15:g} requests/s, shared by "
            f"{st['pacing'][0]['invocations'] if st.get('pacing') else 'several'} invocations at once)",
            "storm",
            sr.pacing_table(st) + sr.PACING_NOTE,
        ),
        *_cost_sections(data),
    ]


def _cost_sections(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The bill per million sessions by option, and the storm's calls priced (issue 25)."""
    from . import cost_report as cr

    title = "Cost per million sessions, each option added in turn, and the alternatives"
    return [
        (title, "storm", cr.options_table(data)),
        ("The cleanup's calls, priced", "storm", cr.calls_table(data)),
    ]


def storm_tables(data: dict[str, Any]) -> str:
    """The storm section alone (``python -m bench --storm``), with its goals."""
    from . import cost_report
    from . import storm_report as sr

    rows = sr.goals_rows(data["storm"]) + cost_report.goals_rows(data)
    goals = _md(["Goal (issues 25, 38)", "Measured", "Goal", "Status"], rows)
    return "\n\n".join(
        [f"### Goals\n\n{machine_line(data, 'storm')}\n\n{goals}"]
        + [
            f"### {title}\n\n{machine_line(data, section)}\n\n{body}"
            for title, section, body in _extra_sections(data)
        ]
    )


def document(data: dict[str, Any], tables_md: str) -> str:
    m = data["machine"]
    d = data["synth"]["defaults"]
    esm = d["event_source_mapping"]
    load_b = ", ".join(f"{x:.2f}" for x in m["load_before"])
    load_a = ", ".join(f"{x:.2f}" for x in data["load_after"])
    by = _by_scenario(data)
    h0 = by.get("0 objects", {}).get("handler")
    h50 = by.get("50 objects", {}).get("handler")
    batch_s = max((r["case"]["wall_s"] for r in (h0, h50) if r), default=float("nan"))
    window = esm.get("MaximumBatchingWindowInSeconds") or 0
    limits_md = limits(data)
    return f"""# Benchmarks

Written by `make bench` (`bench/`), {m["date_utc"]}, at commit `{m["commit"]}`; took
{data["elapsed_s"]:.0f} s. Do not edit by hand: run `make bench` again. Every number below
comes from that one run. Issues 7, 13 and 25 define the measurements and goals.

## Machine

{m["nproc"]} CPUs ({m["cpu"]}), {m["memory_gib"]} GiB memory, {m["os"]}; Python {m["python"]},
boto3 {m["boto3"]} / botocore {m["botocore"]}, moto {m["moto"]} (server mode, werkzeug
{m["werkzeug"]}), aws-cdk-lib {m["aws-cdk-lib"]}. Load average (1, 5, 15 min) before the run:
{load_b}; after: {load_a}. **Other engineers' test runs share this machine's {m["nproc"]} cores**;
a load above the CPU count means the timings below are inflated by CPU contention — all
implementations alike, but not to the same degree: the concurrent handler needs the CPU at the
same moments as its many threads and the endpoint's, while the one-call-at-a-time baseline
mostly waits (see "What bounds each number").

## Commands

```
make bench                      # = make setup, then .venv/bin/python -m bench
.venv/bin/python -m bench --quick   # smaller sizes, prints the tables, leaves this file alone
.venv/bin/python -m bench.synth out.json   # synth part alone
.venv/bin/python -m bench --consumer-only  # the consumer project's test suite alone
.venv/bin/python -m bench --storm          # the storms, pacing and cost alone (~6 min)
.venv/bin/python -m bench.ownership_cost   # recording and checking ownership alone (~2 min)
.venv/bin/python -m bench.round_trips      # one batch's critical path of round trips (~4 min)
```

`make bench` needs nothing beyond `make setup` and PyPI: the Powertools reference for the cold
start is installed by the bench itself into `bench/.venv-powertools` (git-ignored).

## Results

{tables_md}

## What bounds each number

{limits_md}

## How it was measured

**Deployed defaults.** The construct is synthesized first (one `SessionExpiry` with a WebSocket
stage, a grant key and a scratch bucket, no other prop). From its template: cleanup function
{d["runtime"]} on {", ".join(d["architectures"])}, **{d["memory_mb"]} MiB**, timeout
{d["timeout_s"]} s; event source mapping batch size {esm["BatchSize"]}, batching window
{window} s, parallelization factor {esm["ParallelizationFactor"]}, retry attempts
{esm["MaximumRetryAttempts"]}, maximum record age {esm["MaximumRecordAgeInSeconds"]} s, bisect
{esm["BisectBatchOnFunctionError"]}. The function's environment from the template (attribute
names, `SESSION_EXPIRY_MAX_WORKERS={d["environment"].get("SESSION_EXPIRY_MAX_WORKERS", "unset")}`)
is the environment of the throughput runs; only the targets (endpoint, key ARN, bucket) are
replaced by the moto ones.

**Targets.** Throughput is measured against **the bench endpoint** (`bench/endpoint.py`), a
separate process: a threaded HTTP server that answers exactly the cleanup's calls
(DeleteConnection, RetireGrant, ListObjectsV2 with `EncodingType=url`, DeleteObjects,
DeleteObject, PutObject, PutEvents) in AWS's wire format — S3's XML with `LastModified`, `ETag`,
`Size`, `StorageClass` and checksum fields on every listed object, KMS's JSON 1.1, API Gateway's
410 `GoneException` — keeps state (connections, grants, keys), and sleeps
{data["latency_ms"]:g} ms in the request's own thread before answering: concurrent calls wait
concurrently, and waiting costs no CPU. Its CPU (utime + stime from `/proc`) is printed with
every run. It is seeded before each run with the fixture's connections, grants and objects and
read back afterwards for the verification. **moto** (`bench/server.py`: moto's WSGI
application under werkzeug's threaded server, its request handling under one lock because its
backends are not thread safe, the stage segment of `/{{stage}}/@connections/{{id}}` dropped as
API Gateway does) builds every fixture — the table, its stream and the REMOVE records — and
runs the handler once per scenario on the same records as the **correctness reference**,
verified in moto, with 4 calls in flight (`SESSION_EXPIRY_MAX_WORKERS=4`): moto answers one
request at a time, and with 16 in flight on a loaded machine a call waited longer than the
client's 10 s read timeout behind the others' 1,000-key listings; and with a 30 s time guard
(`SESSION_EXPIRY_TIME_GUARD_MS=30000`, reads time out after 12 s instead of 3 s), since a
batch's two 100-action ownership calls, sent at once, are answered one after the other. Setup and verification run with the latency at 0.

**Records.** Each scenario gets its own table (stream `NEW_AND_OLD_IMAGES`), bucket and KMS key in moto.
Sessions are written with `PutItem` and removed with `DeleteItem`; the REMOVE records are read
back from moto's stream (`GetShardIterator` TRIM_HORIZON + `GetRecords`) and converted to the
shape Lambda delivers (`eventSourceARN` added, `ApproximateCreationDateTime` as epoch seconds,
`B` as base64). moto never expires items, so the `userIdentity` DynamoDB puts on TTL deletes
(`{{"type": "Service", "principalId": "dynamodb.amazonaws.com"}}`) is added: the handler sees the
records of a TTL expiry, TTL value one hour before the REMOVE. Every session has a WebSocket
connection, a KMS grant (`CreateGrant` with a retiring principal) and its scratch objects under
a per-incarnation prefix `sessions/b-<i>/<uuid>/`. Three live control sessions `b-1x`, `b-2x`,
`b-3x` (ids extending an expired one's, so a prefix listed without its trailing `/` would reach
them; 5 objects each) are never removed. The **scale** runs (batches of 1,000 sessions and
more) build their records without moto, in `GetRecords`' shape reshaped by the runtime's own
`stream_records` (`harness.synthetic_fixture`), and run against the bench endpoint only;
their projected duration is the session count ÷ the lower ceiling at the default memory.

**Runs.** Each implementation runs over the whole batch of a scenario twice against the bench
endpoint (reseeded in between; the faster run is kept, since one run on a shared machine is
noisy), the handler once more against moto; each run in a fresh process (`bench/case.py`):
import, then one `handler(event, context)` call with a context whose
remaining time follows the default timeout. Wall time is that call only. Logging is set up as
Lambda's JSON log format does (INFO, one JSON object per line, extras included); the EMF
metrics go to stdout as in Lambda. **Calls** are counted with botocore's `before-call` event
on every client created in that process (the `create_client` of every botocore session is
wrapped to register the hooks), HTTP attempts with `before-send` (retries would show there),
and in-flight calls from `before-call`/`after-call` timestamps. **Peak memory** is `ru_maxrss`
of that process (what Lambda reports as Max Memory Used: interpreter, boto3 and the batch).
**CPU per session** is `time.process_time()` of that process (all its threads) across the
call, divided by the sessions; the call counters add a few microseconds a call. **Endpoint
CPU** is the endpoint process's utime+stime across the call. **Verification** after
each run: no object left under any removed session's prefix, no connection left, no grant left
(`ListGrants`), and every control session's objects, connection and grant still there.

**Naive baseline** (`bench/naive.py`): the public guides' shape — clients at import, records one
after another, per record DeleteConnection (Gone ignored), RetireGrant, then `ListObjectsV2` page
by page with one `DeleteObjects` per page. It trusts the record: it makes one call a session
fewer than the handler, which looks the grant up (`ListGrants`) to prove it is the removed
session's own before it retires it. So the ratio measures how the handler overlaps calls, less
the cost of that check. The extra row `handler (max_workers=16)` is the project's handler with
the construct's `max_workers` prop at its earlier default, 16 (`SESSION_EXPIRY_MAX_WORKERS`), to
show what the default of 32 adds; the row
`handler (default GC)` (`bench/default_gc.py`) is the same handler with CPython's default garbage
collector settings, to show what `session_expiry_runtime/core/gc_settings.py` is worth.

**Cold start** (`bench/coldstart.py`): each sample is a new `python` process that times, from
its first line, the import of the handler module plus the creation of its boto3 clients (the
project's handler creates them on first use: `get_cleaner()` is called). One unmeasured run
first writes the `.pyc` files. The implementations are sampled in turn (handler, baseline,
Powertools, handler, ...), so a change of the machine's load weighs on all alike; the goal's ratio
is the median of each round's ratio of the handler to the baseline sample taken beside it. The Powertools reference (`bench/powertools_ref.py`) is the
baseline rewritten with `Logger`, `Metrics` and `BatchProcessor`, run from
`bench/.venv-powertools` with the same boto3 version. It is a reference, not a goal.

**Synth** (`bench/synth.py`): one process; a first synth warms jsii up, then for each size a new
`App` with n `SessionExpiry` constructs with no optional prop (own table, function, layer,
queue, alarms each: 13 resources), at most {data["synth"].get("constructs_per_stack", 25)} to a
stack; the build (constructor calls) and `app.synth()` are timed apart, best of
{data["synth"]["repeats"]}. **50 constructs do not fit in one stack**: 650 resources, and
`app.synth()` fails with `TooManyResourcesInStack` (CloudFormation's limit is 500), so one stack
holds at most 38 default `SessionExpiry` constructs.

## Expiry latency model (on paper)

How long after its time to live a session is cleaned up when only TTL drives the cleanup:

```
cleaned_at − ttl  =  TTL lag  +  stream and polling delay  +  batching window
                     +  queueing behind earlier batches  +  cleanup time  (+ retries)
```

| Term | What bounds it | With the construct's defaults |
|---|---|---|
| **TTL lag** = `ApproximateCreationDateTime` of the REMOVE − the TTL value; the runtime's `TtlLagSeconds` metric measures exactly this for every TTL-classified session (`metric_ttl_lag()`, Maximum) | DynamoDB deletes expired items "on a best-effort basis", "typically within two days" (48 hours) (DynamoDB API Reference, UpdateTimeToLive; developer guide, "Time to Live"). No upper bound is guaranteed; the 48 h is a typical figure, not an SLA. | minutes to ~48 h; unbounded in principle |
| Stream and polling delay | Stream records appear in near real time; Lambda polls each shard several times a second. | < 1 s typically |
| Batching window | `MaximumBatchingWindowInSeconds` | {window} s (invoke as soon as records arrive) |
| Queueing | At most {esm["ParallelizationFactor"]} invocations per shard at a time (the parallelization factor); seen as the function's `IteratorAge` (age of the last record of a batch when delivered), alarmed above the construct's iterator-age threshold | 0 while a batch of {esm["BatchSize"]} cleans faster than REMOVEs arrive; measured here a batch of {esm["BatchSize"]} takes ≈ {batch_s:.1f} s at {data["latency_ms"]:g} ms per call, i.e. a shard keeps up with ≈ {esm["ParallelizationFactor"] * esm["BatchSize"] / batch_s if batch_s == batch_s and batch_s else float("nan"):.0f} expiring sessions a second |
| Cleanup time | One batch (table above) | seconds |
| Retries | Failed records are retried (bisecting, {esm["MaximumRetryAttempts"]} retries) until `MaximumRecordAgeInSeconds` | at most {esm["MaximumRecordAgeInSeconds"]} s = {esm["MaximumRecordAgeInSeconds"] / 3600:g} h; then the batch's **metadata** goes to the on-failure queue and must be replayed from the stream within its **24 h retention**, or the session is never cleaned by this path |

**Bound an operator can expect.** Healthy pipeline: `TtlLagSeconds` + a few seconds; i.e.
typically within 48 hours of the TTL, dominated entirely by DynamoDB's TTL lag, with no
guaranteed upper bound. A failing target adds up to {esm["MaximumRecordAgeInSeconds"] / 3600:g} h of
retries, after which cleanup depends on an operator acting on the failure-queue alarm within
the stream's 24 h retention. The S3 lifecycle backstop bounds scratch objects independently
(expiry after `scratch_retention`, default 7 days); WebSocket connections end by themselves
after at most 2 hours (10 minutes idle); **KMS grants have no backstop**: a grant whose REMOVE
is lost stays until someone retires it. Access is never extended by this lag (every read and
write path checks expiry itself); only the resources linger.

**What a future sweeper is judged against.** A sweeper that queries for sessions with
`expiresAt ≤ now` every *P* minutes and deletes them bounds `cleaned_at − ttl` by
*P* + its own run time + the same stream pipeline (its deletes produce ordinary REMOVE records,
classified `explicit`). It is worth building only if *P* + pipeline is well below the
observed p99/maximum of `TtlLagSeconds` (typically hours, up to ~48 h); the metric above gives
the number to beat.
"""
