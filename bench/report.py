"""The tables (stdout and BENCHMARKS.md) and the rest of BENCHMARKS.md, from the raw results."""

# This module is mostly Markdown prose: typographic signs (times, dashes, minus) are meant,
# and table rows are long lines by nature.
# ruff: noqa: RUF001, E501

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from importlib import metadata
from typing import Any

from . import coldstart, harness
from .throughput import minimum_calls

GOAL_RATIO = 10.0
OPERATIONS = ("DeleteConnection", "RetireGrant", "ListObjectsV2", "DeleteObjects")


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


def _by_scenario(data: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    grouped: dict[str, dict[str, dict[str, Any]]] = {}
    for run in data["throughput"]:
        grouped.setdefault(run["scenario"]["name"], {})[run["impl"]] = run
    return grouped


def throughput_table(data: dict[str, Any]) -> str:
    memory = data["synth"]["defaults"]["memory_mb"]
    rows = []
    for name, runs in _by_scenario(data).items():
        base = runs.get("naive")
        for impl, run in runs.items():
            case, sc, ver = run["case"], run["scenario"], run["verification"]
            ratio = (
                "1.0× (baseline)"
                if impl == "naive" or base is None
                else f"**{run['sessions_per_s'] / base['sessions_per_s']:.1f}×**"
            )
            rows.append(
                [
                    name,
                    f"{sc['sessions']} × {sc['objects']:,}",
                    impl,
                    f"{case['wall_s']:.2f}",
                    f"{run['sessions_per_s']:.1f}",
                    ratio,
                    f"{case['mean_in_flight']:.1f} / {case['max_in_flight']:.0f}",
                    f"{case['cpu_s']:.2f}",
                    f"{run['server_cpu_s']:.2f} ({run['server_cpu_s'] / case['wall_s']:.0%})",
                    f"{case['rss_peak_mb']:.0f} of {memory}",
                    "clean"
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
            "vs naive",
            "Calls in flight (mean / max)",
            "Function CPU s",
            "moto server CPU s (of wall)",
            "Peak RSS MiB (of default memory)",
            "Verified",
        ],
        rows,
    )


def calls_table(data: dict[str, Any]) -> str:
    rows = []
    for runs in _by_scenario(data).values():
        run = runs.get("handler")
        if run is None:
            continue
        n, sessions = run["scenario"]["objects"], run["scenario"]["sessions"]
        minimum = minimum_calls(n)
        calls = run["case"]["calls"]
        attempts = run["case"]["attempts"]
        measured = {op: calls.get(op, 0) / sessions for op in OPERATIONS}
        others = {op: c for op, c in calls.items() if op not in OPERATIONS}
        total = sum(calls.values()) / sessions
        met = all(measured[op] == minimum[op] for op in OPERATIONS) and not others
        rows.append(
            [
                f"{n:,}",
                " + ".join(f"{measured[op]:g}" for op in OPERATIONS)
                + (f" + others {others}" if others else ""),
                f"{total:g}",
                " + ".join(str(minimum[op]) for op in OPERATIONS),
                str(sum(minimum.values())),
                f"{sum(attempts.values()) / sessions:g}",
                "**met**" if met else "**not met**",
            ]
        )
    return _md(
        [
            "Objects per session",
            "Measured per session (DeleteConnection + RetireGrant + ListObjectsV2 + DeleteObjects)",
            "Total",
            "Minimum",
            "Min. total",
            "HTTP attempts per session",
            "Goal: exactly the minimum",
        ],
        rows,
    )


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


def goals_table(data: dict[str, Any]) -> str:
    memory = data["synth"]["defaults"]["memory_mb"]
    rows = []
    for name, runs in _by_scenario(data).items():
        base, run = runs.get("naive"), runs.get("handler")
        if not (base and run):
            continue
        ratio = run["sessions_per_s"] / base["sessions_per_s"]
        server_share = run["server_cpu_s"] / run["case"]["wall_s"]
        note = " (moto server CPU-bound: see notes)" if server_share > 0.7 else ""
        rows.append(
            [
                f"Throughput ≥ {GOAL_RATIO:g}× naive, {name}",
                f"{ratio:.1f}×{note}",
                "met" if ratio >= GOAL_RATIO else "**not met**",
            ]
        )
    for name, runs in _by_scenario(data).items():
        run = runs.get("handler")
        if run:
            n, sessions = run["scenario"]["objects"], run["scenario"]["sessions"]
            total = sum(run["case"]["calls"].values()) / sessions
            minimum = sum(minimum_calls(n).values())
            rows.append(
                [
                    f"Calls per session = minimum, {name}",
                    f"{total:g} vs {minimum}",
                    "met"
                    if total == minimum
                    and all(
                        run["case"]["calls"].get(op, 0) == v * sessions
                        for op, v in minimum_calls(n).items()
                    )
                    else "**not met**",
                ]
            )
    peak = max(
        (r["case"]["rss_peak_mb"] for r in data["throughput"] if r["impl"] == "handler"),
        default=0.0,
    )
    rows.append(
        [
            f"Peak memory within the default {memory} MiB",
            f"{peak:.0f} MiB (process RSS)",
            "met" if peak <= memory else "**not met**",
        ]
    )
    clean = all(r["verification"]["clean"] for r in data["throughput"])
    rows.append(
        [
            "Equal correctness: every session verified clean, controls intact",
            "all runs" if clean else "see table",
            "met" if clean else "**not met**",
        ]
    )
    return _md(["Goal (issue 7)", "Measured", "Status"], rows)


#: Lambda gives a function one vCPU's worth of CPU at 1,769 MB, in proportion below that
#: (Lambda developer guide, "Configuring Lambda function memory").
MB_PER_VCPU = 1769


def limits(data: dict[str, Any]) -> str:
    """The ceilings behind the measured numbers, computed from this run's data."""
    d = data["synth"]["defaults"]
    memory = d["memory_mb"]
    workers = int(d["environment"]["SESSION_EXPIRY_MAX_WORKERS"])
    lat = data["latency_ms"] / 1000
    vcpu = min(1.0, memory / MB_PER_VCPU)
    rows = []
    for name, runs in _by_scenario(data).items():
        run = runs.get("handler")
        if not run:
            continue
        n, sessions = run["scenario"]["objects"], run["scenario"]["sessions"]
        chain = sum(minimum_calls(n).values())  # every call of a session
        naive_ideal = 1 / (chain * lat)
        design = workers / (chain * lat)
        cpu_per_session = run["case"]["cpu_s"] / sessions
        lambda_cpu = vcpu / cpu_per_session if cpu_per_session else float("inf")
        rows.append(
            [
                name,
                str(chain),
                f"{naive_ideal:.1f}",
                f"{design:.0f} ({design / naive_ideal:.0f}×)",
                f"{cpu_per_session * 1000:.1f}",
                f"{lambda_cpu:.0f} ({lambda_cpu / naive_ideal:.1f}×)",
                f"{run['sessions_per_s']:.1f}",
            ]
        )
    table = _md(
        [
            "Scenario",
            "Calls per session (handler and naive alike)",
            "Naive ideal sessions/s (latency only)",
            f"Handler ceiling, {workers} calls in flight (vs naive ideal)",
            "Function CPU ms per session (this machine)",
            f"Lambda CPU ceiling at {memory} MiB = {vcpu:.2f} vCPU, sessions/s (vs naive ideal)",
            "Measured handler sessions/s",
        ],
        rows,
    )
    failed = {}
    for run in data["throughput"]:
        for what, count in run["case"].get("failed_attempts", {}).items():
            failed[f"{run['impl']}, {run['scenario']['name']}: {what}"] = count
    retries = (
        "Failed HTTP attempts in this run (retried by botocore's standard retry mode): "
        + "; ".join(f"{k} ×{v}" for k, v in failed.items())
        + " (moto server log: `bench/results/moto_server.log`)."
        if failed
        else "No HTTP attempt failed in this run."
    )
    return f"""{table}

* **The handler's design caps it at {workers}× the naive baseline** in the latency-bound regime,
  whatever the machine: at most {workers} cleanup calls (`max_workers` default) are in flight,
  shared by all sessions of the batch; one session's independent steps (DeleteConnection,
  RetireGrant, the scratch deletion) overlap, and only a scratch deletion's own pages follow
  one another. The baseline keeps one call in flight. When the "calls in flight" column
  approaches {workers}, the handler is at its own limit; when the moto server's CPU approaches
  the wall time, the emulator is.
* **In Lambda, CPU caps it next.** At the default {memory} MiB a function gets {vcpu:.2f} of a
  vCPU; the function CPU per session measured here (boto3 request signing, parsing, logging)
  then allows the sessions/s shown, well below what more concurrency could reach. Graviton
  cores are not this machine's cores, so treat the column as an estimate.
* **This bench's own ceiling** is the moto server: one process (one GIL) on a 2-CPU machine
  that the function process, and other engineers' test runs, share. It serialises a 1,000-key
  `ListObjectsV2` answer in pure Python (~0.1–0.3 s CPU), which makes the 2,500-object rows
  measure moto more than either implementation. moto's backends are not thread safe (without
  a lock, a `ListObjectsV2` racing a `DeleteObjects` on the same bucket fails with `KeyError`
  → HTTP 500, and concurrent KMS retirements by token can lose one), so the bench server runs
  moto's request handling under one lock — the injected latency stays concurrent. This lowers
  the concurrent handler's numbers somewhat (one spot check, 100 × 50 objects: 5.4 s with the
  lock, 4.5 s without, on a loaded machine) and leaves the baseline unchanged. {retries}"""


def tables(data: dict[str, Any]) -> str:
    return "\n\n".join(
        [
            "### Goals",
            goals_table(data),
            f"### Cleanup throughput ({data['latency_ms']:g} ms injected per AWS call)",
            throughput_table(data),
            "### AWS calls per cleaned session (handler)",
            calls_table(data),
            "### Cold start (fresh interpreter)",
            coldstart_table(data),
            "### Synth scaling (`SessionExpiry` with no optional props, "
            f"at most {data['synth'].get('constructs_per_stack', 25)} to a stack)",
            synth_table(data),
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
comes from that one run. Issue 7 defines the measurements and goals.

## Machine

{m["nproc"]} CPUs ({m["cpu"]}), {m["memory_gib"]} GiB memory, {m["os"]}; Python {m["python"]},
boto3 {m["boto3"]} / botocore {m["botocore"]}, moto {m["moto"]} (server mode, werkzeug
{m["werkzeug"]}), aws-cdk-lib {m["aws-cdk-lib"]}. Load average (1, 5, 15 min) before the run:
{load_b}; after: {load_a}. Other engineers' test runs share this machine; a load above
the CPU count means the timings below are inflated by CPU contention (all implementations in
the same way, but not to the same degree: the concurrent handler and the moto server need
CPU at the same moments).

## Commands

```
make bench                      # = make setup, then .venv/bin/python -m bench
.venv/bin/python -m bench --quick   # smaller sizes, prints the tables, leaves this file alone
.venv/bin/python -m bench.synth out.json   # synth part alone
```

`make bench` needs nothing beyond `make setup` and PyPI: the Powertools reference for the cold
start is installed by the bench itself into `bench/.venv-powertools` (git-ignored).

## Results

{tables_md}

## Physical limits: what caps each number

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

**Server.** `bench/server.py` runs moto's own WSGI application (`DomainDispatcherApplication`)
under werkzeug's threaded server in a **separate process**, wrapped in a middleware that sleeps
{data["latency_ms"]:g} ms in the request thread before every AWS request: concurrent calls wait
concurrently, as on a network, and the sleep costs the measured process nothing. moto's own
handling of a request then runs under one lock (its backends are not thread safe; see above). The same
middleware drops the stage segment of `/{{stage}}/@connections/{{id}}` (API Gateway does; moto's
server routes only `/@connections/...`) and serves bench-only endpoints: latency, seeding of S3
objects straight into moto's backend (setup speed only), and the list of WebSocket connections
moto holds (moto's `GetConnection` creates a connection it has not seen, so it cannot check
absence). Setup and verification run with the latency at 0.

**Records.** Each run gets its own table (stream `NEW_AND_OLD_IMAGES`), bucket and KMS key.
Sessions are written with `PutItem` and removed with `DeleteItem`; the REMOVE records are read
back from moto's stream (`GetShardIterator` TRIM_HORIZON + `GetRecords`) and converted to the
shape Lambda delivers (`eventSourceARN` added, `ApproximateCreationDateTime` as epoch seconds,
`B` as base64). moto never expires items, so the `userIdentity` DynamoDB puts on TTL deletes
(`{{"type": "Service", "principalId": "dynamodb.amazonaws.com"}}`) is added: the handler sees the
records of a TTL expiry, TTL value one hour before the REMOVE. Every session has a WebSocket
connection, a KMS grant (`CreateGrant` with a retiring principal) and its scratch objects under
a per-incarnation prefix `sessions/b-<i>/<uuid>/`. Three live control sessions `b-1x`, `b-2x`,
`b-3x` (ids extending an expired one's, so a prefix listed without its trailing `/` would reach
them; 5 objects each) are never removed.

**Runs.** Each implementation runs once per scenario over the whole batch, in a fresh process
(`bench/case.py`): import, then one `handler(event, context)` call with a context whose
remaining time follows the default timeout. Wall time is that call only. Logging is set up as
Lambda's JSON log format does (INFO, one JSON object per line, extras included); the EMF
metrics go to stdout as in Lambda. **Calls** are counted with botocore's `before-call` event
on every client created in that process (the `create_client` of every botocore session is
wrapped to register the hooks), HTTP attempts with `before-send` (retries would show there),
and in-flight calls from `before-call`/`after-call` timestamps. **Peak memory** is `ru_maxrss`
of that process (what Lambda reports as Max Memory Used: interpreter, boto3 and the batch).
**moto server CPU** is its process's utime+stime across the call: when it approaches the wall
time the moto server, not the function, is the bottleneck (moto serialises a 1,000-key
`ListObjectsV2` answer in pure Python, ~0.1–0.3 s of CPU; S3 does not). **Verification** after
each run: no object left under any removed session's prefix, no connection left, no grant left
(`ListGrants`), and every control session's objects, connection and grant still there.

**Naive baseline** (`bench/naive.py`): the public guides' shape — clients at import, records one
after another, per record DeleteConnection (Gone ignored), RetireGrant, then `ListObjectsV2` page
by page with one `DeleteObjects` per page. It makes exactly the minimum number of calls, so the
ratio measures how the handler overlaps calls, not a call-count difference. The extra row
`handler (max_workers=32)` is the project's handler with the construct's `max_workers` prop set
to 32 (`SESSION_EXPIRY_MAX_WORKERS`), to show what the default leaves on the table.

**Cold start** (`bench/coldstart.py`): each sample is a new `python` process that times, from
its first line, the import of the handler module plus the creation of its boto3 clients (the
project's handler creates them on first use: `get_cleaner()` is called). One unmeasured run
first writes the `.pyc` files. The Powertools reference (`bench/powertools_ref.py`) is the
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
| Queueing | One invocation per shard at a time (parallelization factor {esm["ParallelizationFactor"]}); seen as the function's `IteratorAge` (age of the last record of a batch when delivered), alarmed above the construct's iterator-age threshold | 0 while a batch of {esm["BatchSize"]} cleans faster than REMOVEs arrive; measured here a batch of {esm["BatchSize"]} takes ≈ {batch_s:.1f} s at {data["latency_ms"]:g} ms per call, i.e. a shard keeps up with ≈ {esm["BatchSize"] / batch_s if batch_s == batch_s and batch_s else float("nan"):.0f} expiring sessions a second |
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
