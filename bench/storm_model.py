"""The storm's simulated clock: when each swept session is cleaned, given quotas and settings.

The calls are the real code's (:mod:`bench.storm` makes every one of them against the bench
endpoint and counts them); their timing at 1,000 to 100,000 sessions is computed here, on a
simulated clock, from what was measured — calls per session, CPU per session of the cleanup and
per delete of the sweeper — and from the published quotas below. The pipeline:

1. **Sweeper passes** (``expiry_sweep_interval``): the first pass after the sessions are due
   starts one interval later (the worst case: they fell due just after a pass began). The
   sweep is fanned out over ``expiry_sweep_workers`` invocations at once, each owning its
   shards (``sweeper.shard_groups``; sessions spread over the shards by key), each in its own
   execution environment at ``expiry_sweeper_memory_size``. A worker Queries its shards a page
   of 500 keys at a time and deletes a page's sessions with ``max_workers`` threads. A page
   takes the longest of: its latency (``ceil(n / max_workers)`` DeleteItem round trips), its
   CPU (``n`` times the measured CPU of one DeleteItem ÷ the worker's vCPU share at its
   memory), and its share of DynamoDB's write throughput (each delete writes the table —
   shared by the workers — and the index's partition of its shard — one per shard). Below one
   minute a run lasts the minute less its time guard; the next run, started a minute after
   it (``rate(1 minute)``: EventBridge User Guide, "Rate expressions reference", "triggers the
   rule every minute"), continues the work.
2. **The stream**: each REMOVE lands on a stream shard by its key; Lambda polls a shard four
   times a second and runs ``parallelization_factor`` batches of a shard at once (keys split
   among them, order kept per key), each of at most ``batch_size`` records.
3. **A batch's invocation** lasts its invocation overhead plus the longest of: its CPU
   (records × CPU per session ÷ the vCPU share at ``cleanup_memory_size``), its latency
   (calls × round trip ÷ ``max_workers``), and the time its calls wait for each target's quota,
   shared with every other invocation (a first-come token schedule per quota: the pacing of
   ``session_expiry_runtime.core.pacing``, measured in the pacing table). Its records count as
   cleaned evenly across it.

Quotas (defaults, per account and Region unless said; each adjustable unless said):

* API Gateway: 10,000 requests a second across HTTP, REST, WebSocket and WebSocket callback
  (``@connections``) APIs, burst 5,000 not adjustable (API Gateway Developer Guide, "Amazon API
  Gateway quotas"). Shared with the application's own traffic.
* KMS ``RetireGrant``: 50 requests a second, counting every principal of the account;
  ``CreateGrant`` 50, so sessions with grants are created at most 50 a second: AWS KMS Developer
  Guide, "Request quotas", table "Request quotas for each AWS KMS API operation", rows
  "RetireGrant request rate" and "CreateGrant request rate" (the page as published in December
  2026; earlier revisions of the guide's GitHub source, ``awsdocs/aws-kms-developer-guide``,
  listed 15 and then 30). Every KMS request quota is adjustable and Service Quotas shows an
  account's own. The cleanup does not spend it directly: every ``RetireGrant`` attempt first
  takes a request of the **shared budget** (``session_expiry_runtime.core.shared_pace``,
  ``SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET``, default 10 a second for every invocation
  together), which therefore binds first; a batch reserves its grants' requests in one
  ``UpdateItem`` of the ownership table (1 write unit) beside its ownership marks, and a
  request not reserved is one ``UpdateItem`` of its own.
* DynamoDB: each partition serves at most 1,000 write units and 3,000 read units a second; a new
  on-demand table starts with a warm throughput of 4,000 write and 12,000 read units a second
  (DynamoDB Developer Guide, "Understanding DynamoDB warm throughput", warm-throughput
  scenarios). A ``TransactWriteItems`` action on an item up to 1 KB consumes 2 write units
  (Developer Guide, "Managing complex workflows with DynamoDB transactions", capacity
  management). A table's warm throughput can be raised (``WarmThroughput``; Developer Guide,
  "Understanding DynamoDB warm throughput"): the model's ``ownership_write_units``. The sweep
  index's shards are its partition key values: each shard's index writes are one partition's
  1,000 units.
* S3: 3,500 PUT/COPY/POST/DELETE and 5,500 GET/HEAD requests a second per partitioned prefix
  (Amazon S3 User Guide, "Best practices design patterns: optimizing Amazon S3 performance").
* Lambda event source mapping for DynamoDB Streams: polls each shard at a base rate of 4 times
  a second, processes up to ``parallelization_factor`` (1-10) batches of a shard concurrently
  (Lambda Developer Guide, "Using AWS Lambda with Amazon DynamoDB", polling and batching;
  "Lambda parameters for Amazon DynamoDB event source mappings"). DynamoDB Streams: the number
  of shards follows the table's partitions and is not set by the user; a new on-demand table's
  4,000 write units warm throughput are at least 4 partitions, hence the 4 shards assumed.
* Lambda: 1,000 concurrent executions per Region by default (Lambda Developer Guide, "Lambda
  quotas"); a storm uses at most shards × parallelization factor of them.

Latencies are assumptions, not quotas (AWS publishes none): round trips of 10 ms to DynamoDB
("single-digit millisecond" performance), 20 ms to S3, KMS and API Gateway (what the throughput
bench injects), and 25 ms to start an invocation with its batch.
"""

# Prose and table cells: the multiplication sign is meant.
# ruff: noqa: RUF001, RUF002

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cdk_session_expiry._runtime_contract import DEFAULT_KMS_RETIRE_GRANT_BUDGET
from cdk_session_expiry.construct import DEFAULT_PARALLELIZATION_FACTOR
from cdk_session_expiry.sweeper import (
    DEFAULT_SWEEP_WORKERS,
    DEFAULT_SWEEPER_MEMORY_SIZE,
    SWEEP_SHARDS,
    shard_groups,
)

#: Lambda gives one vCPU at 1,769 MB, in proportion below (Lambda Developer Guide,
#: "Configuring Lambda function memory"); one Python process gains little above it.
MB_PER_VCPU = 1769
#: Query page size of the sweeper (``session_expiry_runtime.sweeps.sweeper.QUERY_PAGE_SIZE``).
SWEEP_PAGE = 500
#: Lambda polls each stream shard this often (seconds).
POLL_INTERVAL_S = 0.25
#: Seconds between the starts of two sweeper runs below a minute: the rule is ``rate(1 minute)``
#: (``cdk_session_expiry.sweeper``), which "triggers the rule every minute" (EventBridge User
#: Guide, "Rate expressions reference"); each run ends within its 59 s timeout, before the next.
RUN_PERIOD_S = 60.0
#: Seconds from a delete to its record being readable on the stream (assumed; "near real time").
STREAM_DELAY_S = 0.1


def vcpu(memory_mb: float) -> float:
    return min(1.0, memory_mb / MB_PER_VCPU)


@dataclass(frozen=True)
class Quota:
    """A request quota (``per_second``) of a target, its source, and the unit one call uses."""

    name: str
    per_second: float
    source: str


#: The quotas of the model by the name the calls are counted under (API operation, or a
#: capacity the operations consume). ``units`` below says how much of it one call uses.
QUOTAS: dict[str, Quota] = {
    "DeleteConnection": Quota(
        "API Gateway account throttle (incl. @connections)",
        10_000,
        "API Gateway Developer Guide, Amazon API Gateway quotas: 10,000 requests/s per account "
        "and Region across HTTP, REST, WebSocket and WebSocket callback APIs",
    ),
    "RetireGrant": Quota(
        "the shared RetireGrant budget",
        DEFAULT_KMS_RETIRE_GRANT_BUDGET,
        "SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET (session_expiry_runtime.core.shared_pace): "
        f"{DEFAULT_KMS_RETIRE_GRANT_BUDGET} requests/s for every invocation together, under KMS's "
        "RetireGrant request rate (AWS KMS Developer Guide, Request quotas, row 'RetireGrant "
        "request rate': 50 requests/s per account and Region, adjustable)",
    ),
    "OwnershipWriteUnits": Quota(
        "Ownership table write units (TransactWriteItems, 2 per record)",
        4_000,
        "DynamoDB Developer Guide, warm throughput: a new on-demand table takes 4,000 write "
        "units/s at once; transactions: 2 write units per item up to 1 KB",
    ),
    "ListObjectsV2": Quota(
        "S3 GET/HEAD (incl. LIST) per prefix",
        5_500,
        "Amazon S3 User Guide, optimizing performance: 5,500 GET/HEAD requests/s per prefix",
    ),
    "DeleteObjects": Quota(
        "S3 PUT/COPY/POST/DELETE per prefix",
        3_500,
        "Amazon S3 User Guide, optimizing performance: 3,500 PUT/COPY/POST/DELETE requests/s "
        "per prefix",
    ),
}
#: KMS's ``RetireGrant`` request rate (AWS KMS Developer Guide, "Request quotas", table "Request
#: quotas for each AWS KMS API operation", row "RetireGrant request rate"; adjustable).
KMS_RETIRE_GRANT_QUOTA = 50
#: A new on-demand table's warm write throughput (DynamoDB Developer Guide, warm throughput).
NEW_TABLE_WRITE_UNITS = 4_000
#: Quota units one call of an operation uses (default 1 of the quota of its own name).
UNITS: dict[str, tuple[str, float]] = {
    "TransactWriteItems": ("OwnershipWriteUnits", 0.0),  # counted by records, below
}
#: DynamoDB write units of one partition per second (the sweep index's shards, one each).
PARTITION_WRITE_UNITS = 1_000
#: A new on-demand table's warm write throughput (the session table the sweeper deletes from).
TABLE_WARM_WRITE_UNITS = 4_000


@dataclass(frozen=True)
class Settings:
    """What the simulated deployment is: the construct's props and the account's setup."""

    stream_shards: int = 4
    parallelization_factor: int = DEFAULT_PARALLELIZATION_FACTOR
    batch_size: int = 100
    cleanup_memory_mb: int = 1769
    max_workers: int = 32
    sweeper_memory_mb: int = DEFAULT_SWEEPER_MEMORY_SIZE
    sweep_interval_s: int = 5
    sweep_shards: int = SWEEP_SHARDS
    sweep_workers: int = DEFAULT_SWEEP_WORKERS
    #: seconds a sweeper run works before its time guard (below a minute: 59 s timeout less
    #: the 3.5 s guard); ``None`` for one pass a run (an interval of a minute and more)
    sweeper_run_s: float | None = 55.5
    #: the ownership table's write units a second (warm throughput; a new on-demand table's)
    ownership_write_units: int = NEW_TABLE_WRITE_UNITS
    #: the shared ``RetireGrant`` budget, requests a second
    #: (``SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET``)
    retire_grant_budget: int = DEFAULT_KMS_RETIRE_GRANT_BUDGET

    def rate(self, quota: str) -> float:
        """Units a second of ``quota`` for this deployment: the ownership table's warm write
        throughput and the shared ``RetireGrant`` budget (never above KMS's quota) are settings."""
        if quota == "OwnershipWriteUnits":
            return float(self.ownership_write_units)
        if quota == "RetireGrant":
            return float(min(self.retire_grant_budget, KMS_RETIRE_GRANT_QUOTA))
        return QUOTAS[quota].per_second

    def describe(self) -> str:
        return (
            f"{self.stream_shards} stream shards × parallelization factor "
            f"{self.parallelization_factor}, batch {self.batch_size}, cleanup "
            f"{self.cleanup_memory_mb:,} MiB, max_workers {self.max_workers}, sweeper "
            f"{self.sweep_workers} workers over {self.sweep_shards} shards at "
            f"{self.sweeper_memory_mb:,} MiB, sweep every {self.sweep_interval_s} s, ownership "
            f"table {self.ownership_write_units:,} write units/s, RetireGrant budget "
            f"{self.retire_grant_budget}/s"
        )


@dataclass(frozen=True)
class Latency:
    """Round trips (seconds) assumed per service."""

    dynamodb: float = 0.010
    other: float = 0.020
    invoke: float = 0.025


@dataclass(frozen=True)
class Measured:
    """What the real run and the calibration measured (this machine, this run)."""

    #: cleanup calls per session by operation (the real run's counts ÷ sessions)
    calls_per_session: Mapping[str, float]
    #: ownership records per session (marked and released: 2 write units each, twice)
    claims_per_session: float
    #: CPU seconds per session of the cleanup (its handler process over HTTP)
    cleanup_cpu_s: float
    #: CPU seconds per DeleteItem of the sweeper (over HTTP)
    sweeper_cpu_per_delete_s: float
    #: sweeper Query pages per session (the real run's)
    queries_per_session: float = 1 / SWEEP_PAGE
    #: grants retired on disconnect before the storm, per session (not retired by the cleanup)
    retired_on_disconnect: float = 0.0

    @property
    def ownership_units(self) -> float:
        """Ownership table write units per session: each record marked and released in a
        transaction (2 units each time), and the shared budget's ``UpdateItem`` calls as the
        real run made them (a batch reserves its grants' requests at once: about one a batch
        and second, not one a ``RetireGrant``)."""
        return 4 * self.claims_per_session + self.calls_per_session.get("UpdateItem", 0.0)


@dataclass
class Outcome:
    """One simulated storm."""

    sessions: int
    settings: Settings
    cleaned_at: list[float]
    swept_by: float
    calls: dict[str, list[float]] = field(default_factory=dict)
    stage_rates: dict[str, float] = field(default_factory=dict)

    def percentile(self, p: float) -> float:
        ordered = sorted(self.cleaned_at)
        return ordered[min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1)]

    @property
    def drained_s(self) -> float:
        return max(self.cleaned_at)

    def peak_rate(self, op: str) -> float:
        """The most calls of ``op`` in any one second of the simulation."""
        times = self.calls.get(op) or []
        if not times:
            return 0.0
        seconds: dict[int, int] = {}
        for t in times:
            seconds[int(t)] = seconds.get(int(t), 0) + 1
        return float(max(seconds.values()))

    def first_limit(self) -> str:
        """The stage whose capacity (sessions/s) is the smallest: what binds this storm."""
        return min(self.stage_rates, key=self.stage_rates.__getitem__)


def stage_rates(
    settings: Settings, measured: Measured, latency: Latency = Latency()
) -> dict[str, float]:
    """Sessions per second each stage can sustain, alone; the smallest binds."""
    s, m = settings, measured
    sweeper = {
        "sweeper CPU (workers × DeleteItem at its memory)": s.sweep_workers
        * vcpu(s.sweeper_memory_mb)
        / m.sweeper_cpu_per_delete_s,
        "sweeper calls in flight (workers × max_workers ÷ DeleteItem latency)": s.sweep_workers
        * s.max_workers
        / latency.dynamodb,
        "sweep index write units (1,000 per shard)": PARTITION_WRITE_UNITS * s.sweep_shards,
        "session table write units (warm throughput)": TABLE_WARM_WRITE_UNITS,
    }
    lanes = s.stream_shards * s.parallelization_factor
    calls = sum(m.calls_per_session.values())
    cleanup = {
        "cleanup CPU (shards × parallelization × vCPU ÷ CPU per session)": lanes
        * vcpu(s.cleanup_memory_mb)
        / m.cleanup_cpu_s,
        "cleanup calls in flight (shards × parallelization × max_workers ÷ latency)": lanes
        * s.max_workers
        / (calls * latency.other),
    }
    quotas = {
        quota_label(op, s): s.rate(op) / per
        for op, per in m.calls_per_session.items()
        if op in QUOTAS and per > 0
    }
    if m.ownership_units:
        quotas[quota_label("OwnershipWriteUnits", s)] = (
            s.rate("OwnershipWriteUnits") / m.ownership_units
        )
    return {**sweeper, **cleanup, **quotas}


def quota_label(op: str, settings: Settings) -> str:
    """A quota's name with its rate in this deployment."""
    return f"{QUOTAS[op].name} ({settings.rate(op):,.0f}/s)"


def _sweep_times(n: int, settings: Settings, measured: Measured, latency: Latency) -> list[float]:
    """When each of ``n`` due sessions is deleted (seconds after they fell due), in order: the
    workers side by side, each over its own shards' share of the sessions."""
    s = settings
    groups = shard_groups(s.sweep_shards, s.sweep_workers)
    times: list[float] = []
    for group in groups:
        # Keys spread evenly over the shards (CRC-32): shard i holds n // shards, plus one for
        # the first n % shards.
        owned = sum(n // s.sweep_shards + (i < n % s.sweep_shards) for i in group)
        per_delete = max(
            measured.sweeper_cpu_per_delete_s / vcpu(s.sweeper_memory_mb),
            1 / (PARTITION_WRITE_UNITS * len(group)),
            s.sweep_workers / TABLE_WARM_WRITE_UNITS,
        )
        times.extend(_worker_times(owned, per_delete, s, latency))
    return sorted(times)


def _worker_times(n: int, per_delete: float, s: Settings, latency: Latency) -> list[float]:
    """When each of a worker's ``n`` due sessions is deleted, ``per_delete`` seconds apart at
    best; below a minute its run stops at the time guard and the next minute's continues.

    Runs start a minute apart (``RUN_PERIOD_S``); the storm fell due just after the first pass
    of one began (at 0), so its first pass comes a whole interval later and the run stops
    ``sweeper_run_s`` after 0: the next starts at 60, not a minute after the guard tripped."""
    times: list[float] = []
    t = float(s.sweep_interval_s)  # the first pass after the storm fell due: worst case
    run_start = 0.0
    left = n
    while left:
        page = min(SWEEP_PAGE, left)
        t += latency.dynamodb  # the Query
        span = max(math.ceil(page / s.max_workers) * latency.dynamodb, page * per_delete)
        times.extend(t + span * (i + 1) / page for i in range(page))
        t += span
        left -= page
        if s.sweeper_run_s is not None and t - run_start >= s.sweeper_run_s and left:
            # The run's time guard: the next run starts a minute after this one did.
            run_start = t = max(run_start + RUN_PERIOD_S, t)
    return times


class _QuotaClock:
    """First-come token schedules, one per quota (the pacing, shared by all invocations)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.next_free: dict[str, float] = {}
        #: the span the last request of each quota was granted over (its calls' times)
        self.windows: dict[str, tuple[float, float]] = {}

    def finish(self, quota: str, start: float, units: float) -> float:
        """When ``units`` of ``quota`` asked for at ``start`` have all been granted."""
        rate = self.settings.rate(quota)
        begin = max(start, self.next_free.get(quota, 0.0))
        end = begin + units / rate
        self.next_free[quota] = end
        self.windows[quota] = (begin, end)
        return end


def _invocation(
    start: float,
    records: int,
    settings: Settings,
    measured: Measured,
    latency: Latency,
    quotas: _QuotaClock,
) -> float:
    """When an invocation of ``records`` sessions starting at ``start`` ends."""
    m = measured
    calls = sum(m.calls_per_session.values()) * records
    busy = max(
        records * m.cleanup_cpu_s / vcpu(settings.cleanup_memory_mb),
        calls * latency.other / settings.max_workers,
    )
    end = start + latency.invoke + busy
    for op, per in m.calls_per_session.items():
        if op in QUOTAS:
            end = max(end, quotas.finish(op, start, per * records))
    if m.ownership_units:
        end = max(end, quotas.finish("OwnershipWriteUnits", start, m.ownership_units * records))
    return end


def simulate(
    sessions: int,
    settings: Settings,
    measured: Measured,
    latency: Latency = Latency(),
    *,
    keep_calls: Sequence[str] = ("DeleteConnection", "RetireGrant"),
) -> Outcome:
    """The storm of ``sessions`` due at once, on the simulated clock (seconds from due)."""
    s = settings
    deleted = _sweep_times(sessions, s, measured, latency)
    lanes = s.stream_shards * s.parallelization_factor
    # Records of each lane in order: a key's shard and lane by its hash (spread evenly).
    queues: list[list[float]] = [[] for _ in range(lanes)]
    for i, t in enumerate(deleted):
        queues[(i * 2654435761) % lanes].append(t + STREAM_DELAY_S)
    quotas = _QuotaClock(s)
    cleaned: list[float] = []
    calls: dict[str, list[float]] = {op: [] for op in keep_calls}
    # One event per lane: (time the lane is free, lane, index of its next record)
    events = [(0.0, lane, 0) for lane in range(lanes) if queues[lane]]
    heapq.heapify(events)
    while events:
        free, lane, i = heapq.heappop(events)
        queue = queues[lane]
        ready_at = max(free, queue[i])
        poll = math.ceil(ready_at / POLL_INTERVAL_S) * POLL_INTERVAL_S
        j = i
        while j < len(queue) and j - i < s.batch_size and queue[j] <= poll:
            j += 1
        n = j - i
        end = _invocation(poll, n, s, measured, latency, quotas)
        cleaned.extend(poll + (end - poll) * (k + 1) / n for k in range(n))
        for op in keep_calls:
            per = measured.calls_per_session.get(op, 0.0)
            count = round(per * n)
            # A paced call goes out when its quota grants it, not evenly across the invocation.
            first, last = quotas.windows.get(op, (poll, end)) if op in QUOTAS else (poll, end)
            calls[op].extend(
                first + (last - first) * (k + 0.5) / max(count, 1) for k in range(count)
            )
        if j < len(queue):
            heapq.heappush(events, (end, lane, j))
    return Outcome(
        sessions,
        s,
        cleaned,
        swept_by=deleted[-1] if deleted else 0.0,
        calls=calls,
        stage_rates=stage_rates(s, measured, latency),
    )


def vary(base: Settings, **changes: Any) -> Settings:
    return replace(base, **changes)
