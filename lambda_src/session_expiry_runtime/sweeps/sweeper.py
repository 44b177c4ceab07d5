"""Expiry sweeper: delete sessions whose TTL has passed, minutes after it passed, without a Scan.

DynamoDB's TTL deletes expired items "typically within a few days" (Amazon DynamoDB Developer
Guide, "Working with time to live (TTL)"), so TTL alone cannot bound how long an expired
session's connection, grant and scratch objects live on. The sweeper runs on a schedule (the
construct's ``expiry_sweep_interval``) and deletes every session that is due, so its REMOVE
record reaches the same cleanup function within the interval plus processing time.

How due sessions are found — a sparse global secondary index, never a Scan:

* When the sweeper is configured (``SESSION_EXPIRY_SWEEP_SHARD_ATTRIBUTE`` is set), the session
  runtime writes a shard attribute on every ``create`` and ``touch``: a String ``"0"`` ..
  ``"<shards - 1>"`` derived from the session's key (`shard_of`), so one session always
  lands in the same shard and concurrent writes spread over ``shards`` index partitions.
* The index (``SESSION_EXPIRY_SWEEP_INDEX_NAME``) has that attribute as partition key and the
  table's TTL attribute (Number) as sort key, projection ``KEYS_ONLY``. Items without the shard
  attribute are not in it (sparse): sessions written by other code are left to TTL.
* Each run Queries every shard with ``#shard = :s AND #t <= :now`` (a sort key range: only due
  sessions are read, oldest first, however long ago they expired), page by page.

Why shards and not time buckets (``floor(ttl / width)``): a time bucket has to be queried one by
one, so the sweeper would need a checkpoint of the last bucket swept or a bounded look-back that
silently gives up on older sessions; and sessions written at the same moment share a bucket, so
buckets do not spread the write load either. A handful of fixed shards queried with a TTL range
finds every due session, needs no state, and spreads writes ``shards`` ways.

Each due session is deleted with ``DeleteItem`` and the condition
``attribute_type(#t, :num) AND #t <= :now`` (every name through ``ExpressionAttributeNames``, so
a TTL attribute named ``ttl``, a reserved word, works). A heartbeat that extended the session
between the Query and the delete makes the condition fail: the session stays, unchanged, and
the skip is counted (``SweepSkipped``). Global secondary indexes are eventually consistent, so a
Query may still list a session that was just extended or ended; the condition decides.

The REMOVE record of a swept session carries no ``userIdentity`` and an old image whose TTL is
at or before the record's ``ApproximateCreationDateTime``: the cleanup classifies it as
``deleted-after-expiry`` (`classify`), exactly like any explicit delete of an expired
item, and cleans it the same way.

Sub-minute sweeps (``SESSION_EXPIRY_SWEEP_INTERVAL_SECONDS``, set by the construct for an
interval below one minute): EventBridge rules run at most once a minute, so the function is
started every minute and runs a pass every interval within its run (`run_passes`): passes
at 0, I, 2I, ... seconds after the start while that is under `RUN_SECONDS`, each the same
sharded Query plus conditional delete, so a heartbeat still wins.

Fan-out (``expiry_sweep_workers``): the construct's schedule has one target per worker, each
sending the shard indices that worker owns (``expiryShards``, disjoint sets covering every
shard), the rule's scheduled time and its period (``scheduledAt``, ``periodSeconds``); Lambda
runs the workers' invocations side by side. A run sweeps only its own shards
(`shards_of_event`), reads them a page of each in turn (a run cut by its time guard has
progressed on every shard, and leaves the rest due for the next run), and starts no call after
its period's end less the time guard (`period_end_of`): the next run of the same worker is
started at that moment at the earliest, so two runs never overlap on one shard even when an
event is delivered late. Should two deletes of one session still race, the condition lets only
the first succeed.

Time guard (`Deadline`): no Query or DeleteItem starts once fewer than
``SESSION_EXPIRY_TIME_GUARD_MS`` remain before the invocation's deadline, no pass starts that
the guard would cut before it begins, and the DynamoDB client's connect and read timeouts and
retries are sized so that one call, retries included, ends within 90 % of that margin
(`sweeper_client_config`). So a run returns, and writes its metrics, before Lambda's
timeout whatever the endpoint does; what it did not reach stays due for the next pass.

Metrics (embedded metric format, namespace ``SESSION_EXPIRY_METRICS_NAMESPACE``):
``SessionsSwept``, ``SweepLagSeconds`` (``now - TTL`` per swept session), ``SweepSkipped``,
``SweepFailures``, and in dry run ``SessionsWouldBeSwept`` (nothing is deleted).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ..core.config import (
    ENV_SWEEP_SHARD_ATTRIBUTE,
    ENV_SWEEP_SHARDS,
    ENV_TABLE_NAME,
    EVENT_SWEEP_PERIOD_SECONDS,
    EVENT_SWEEP_SCHEDULED_AT,
    EVENT_SWEEP_SHARDS,
    METRIC_SESSIONS_SWEPT,
    METRIC_SESSIONS_WOULD_BE_SWEPT,
    METRIC_SWEEP_FAILURES,
    METRIC_SWEEP_LAG,
    METRIC_SWEEP_SKIPPED,
    RuntimeConfig,
)
from ..core.metrics import MetricsRecorder
from ..core.regions import is_global, require_region, sweep_shard_value
from ..core.ttl import now_seconds, ttl_from_attribute

LOGGER = logging.getLogger("session_expiry_runtime.sweeps.sweeper")

#: Keys read per Query page; the time guard is checked between pages.
QUERY_PAGE_SIZE = 500
#: A sub-minute run covers this many seconds: the period of its ``rate(1 minute)`` rule.
RUN_SECONDS = 60
#: Attempts per DynamoDB call (botocore ``standard`` retry mode: one retry).
SDK_MAX_ATTEMPTS = 2
#: The longest backoff before that retry: botocore's standard mode waits ``random() * 2 ** 0``
#: seconds before the first retry (``botocore.retries.standard.ExponentialBackoff``).
SDK_MAX_BACKOFF_SECONDS = 1.0
#: The share of the time guard's margin one call may use, retries and backoff included.
SDK_SHARE_OF_MARGIN = 0.9
#: A slot past the guard is moved this far ahead of the moment the guard trips.
LAST_PASS_LEAD_SECONDS = 0.25
#: The smallest margin that leaves each connect and read a tenth of a second.
MIN_TIME_GUARD_MS = 2_000
#: The condition a session must still meet when it is deleted: its TTL is a Number in the past.
DUE_CONDITION = "attribute_type(#t, :num) AND #t <= :now"
_CONDITION_FAILED = "ConditionalCheckFailedException"

OUTCOME_SWEPT = "swept"
OUTCOME_SKIPPED = "skipped"
OUTCOME_FAILED = "failed"
OUTCOME_WOULD_SWEEP = "would-sweep"


def shard_of(key_values: tuple[str, ...] | list[str], shards: int) -> str:
    """The sweep shard (``"0"`` .. ``str(shards - 1)``) of a session key.

    ``key_values`` are the partition key value and, with a sort key, the sort key value. CRC-32
    of their UTF-8 bytes: stable across processes and Python versions (unlike ``hash``).

    Raises:
        ValueError: ``shards`` is not a positive integer.
    """
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise ValueError(f"shards={shards!r}: expected a positive integer")
    data = "\x00".join(key_values).encode("utf-8")
    return str(zlib.crc32(data) % shards)


@dataclass
class SweepReport:
    """What one sweep did. ``lags`` are ``now - TTL`` in seconds of every swept session."""

    swept: int = 0
    skipped: int = 0
    failed: int = 0
    #: Shards whose Query failed (e.g. the index is missing or the role may not query it).
    query_failures: int = 0
    would_sweep: int = 0
    #: Due sessions not attempted because the time guard tripped (still due next pass).
    unfinished: int = 0
    pages: int = 0
    complete: bool = True
    dry_run: bool = False
    lags: list[Decimal] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def max_lag_seconds(self) -> Decimal | None:
        return max(self.lags) if self.lags else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the handler's return value and log line)."""
        lag = self.max_lag_seconds
        return {
            "swept": self.swept,
            "skipped": self.skipped,
            "failed": self.failed,
            "queryFailures": self.query_failures,
            "wouldSweep": self.would_sweep,
            "unfinished": self.unfinished,
            "pages": self.pages,
            "complete": self.complete,
            "dryRun": self.dry_run,
            "maxSweepLagSeconds": float(lag) if lag is not None else None,
            "errors": self.errors[:5],
        }


class ExpirySweeper:
    """Finds due sessions through the sparse index and deletes them conditionally.

    Args:
        config: table name, key names, TTL attribute, shard attribute, shard count, index name,
            ``max_workers`` (concurrent deletes) and ``dry_run``.
        dynamodb_client: a boto3 DynamoDB client (thread safe).
        metrics: where the counts go; the caller flushes it.
        clock: returns the current time as an aware ``datetime``; default UTC now.

    Raises:
        ValueError: no table name or no shard attribute in ``config``.
    """

    def __init__(
        self,
        config: RuntimeConfig,
        dynamodb_client: Any,
        metrics: MetricsRecorder,
        *,
        clock: Callable[[], datetime] | None = None,
        logger: logging.Logger = LOGGER,
    ) -> None:
        if not config.table_name:
            raise ValueError(
                f"table name {config.table_name!r}: the sweeper needs ${ENV_TABLE_NAME}"
            )
        if not config.sweep_shard_attribute:
            raise ValueError(
                f"shard attribute {config.sweep_shard_attribute!r}: the sweeper needs "
                f"${ENV_SWEEP_SHARD_ATTRIBUTE} (set by the construct's expiry_sweep_interval)"
            )
        if is_global(config):
            require_region(config)
        self.config = config
        self.table_name: str = config.table_name
        self.shard_attribute: str = config.sweep_shard_attribute
        self._ddb = dynamodb_client
        self.metrics = metrics
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self.logger = logger
        self._key_names = [config.partition_key] + ([config.sort_key] if config.sort_key else [])

    def for_invocation(self) -> ExpirySweeper:
        """This sweeper for one invocation: a shallow copy (client and configuration shared)
        with a metrics recorder of its own."""
        sweeper = copy.copy(self)
        sweeper.metrics = self.metrics.fresh()
        return sweeper

    def _shard(self, index: int) -> str:
        # A global table's shards carry the owner Region: each Region sweeps its own sessions.
        region = self.config.region if is_global(self.config) else None
        return sweep_shard_value(index, region)

    # --- the two calls ----------------------------------------------------------------------
    def due_pages(
        self, shard: str, now: Decimal, out_of_time: Callable[[], bool] = lambda: False
    ) -> Iterator[list[dict[str, Any]]]:
        """Query one shard of the index for sessions with ``TTL <= now``, one page at a time.

        Stops early (without raising) when ``out_of_time()`` is true before a page; the caller
        marks the sweep incomplete.
        """
        start: dict[str, Any] | None = None
        while not out_of_time():
            params: dict[str, Any] = {
                "TableName": self.table_name,
                "IndexName": self.config.sweep_index_name,
                "KeyConditionExpression": "#s = :s AND #t <= :now",
                "ExpressionAttributeNames": {
                    "#s": self.shard_attribute,
                    "#t": self.config.ttl_attribute,
                },
                "ExpressionAttributeValues": {":s": {"S": shard}, ":now": {"N": _number(now)}},
                "Limit": QUERY_PAGE_SIZE,
            }
            if start is not None:
                params["ExclusiveStartKey"] = start
            page = self._ddb.query(**params)
            yield list(page.get("Items") or [])
            start = page.get("LastEvaluatedKey")
            if not start:
                return

    def delete_if_due(self, key: Mapping[str, Any], now: Decimal) -> str:
        """Delete one session only while its TTL is still a Number at or before ``now``.

        Returns:
            ``"swept"``, or ``"skipped"`` when the condition failed (extended, ended, or no
            longer holding a Number TTL): the item, if any, is unchanged.

        Raises:
            ClientError, BotoCoreError: any other failure (after botocore's retries).
        """
        try:
            self._ddb.delete_item(
                TableName=self.table_name,
                Key=dict(key),
                ConditionExpression=DUE_CONDITION,
                ExpressionAttributeNames={"#t": self.config.ttl_attribute},
                ExpressionAttributeValues={":now": {"N": _number(now)}, ":num": {"S": "N"}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == _CONDITION_FAILED:
                return OUTCOME_SKIPPED
            raise
        return OUTCOME_SWEPT

    # --- one run ----------------------------------------------------------------------------
    def sweep(
        self,
        *,
        now: Decimal | None = None,
        out_of_time: Callable[[], bool] = lambda: False,
        shards: Sequence[int] | None = None,
    ) -> SweepReport:
        """Sweep the given shards once; never raises (failed deletes and Queries are counted).

        The shards are read page by page in turn (a page of shard 0, of shard 1, ..., then each
        one's next page), so a run cut by its time guard has made progress on every shard it
        owns and no shard waits behind another's backlog; what it did not reach is still due
        and the next run finds it.

        Args:
            now: epoch seconds to sweep up to; default the clock. A session whose TTL passes
                during the run is left for the next one.
            out_of_time: checked before each Query page and each DeleteItem; when true no new
                call starts and the report says ``complete=False`` (the next pass continues).
            shards: the shard indices (``0`` .. ``sweep_shards - 1``) this run owns; default
                all of them (one worker). Several workers own disjoint sets (`shards_of_event`).
        """
        now = now_seconds(self._clock()) if now is None else now
        report = SweepReport(dry_run=self.config.dry_run)
        lock = threading.Lock()
        workers = max(1, self.config.max_workers)

        def one(item: dict[str, Any]) -> None:
            if out_of_time():
                with lock:
                    report.unfinished += 1
                    report.complete = False
                return
            self._sweep_one(item, now, report, lock)

        indices = range(self.config.sweep_shards) if shards is None else shards
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sweep") as pool:
            for items in self._pages_in_turn(indices, now, out_of_time, report):
                report.pages += 1
                if self.config.dry_run:
                    report.would_sweep += len(items)
                else:
                    list(pool.map(one, items))
        # Conservative: a shard that ended exactly at the guard is counted incomplete.
        if out_of_time():
            report.complete = False
        self._account(report)
        return report

    def _pages_in_turn(
        self,
        indices: Iterable[int],
        now: Decimal,
        out_of_time: Callable[[], bool],
        report: SweepReport,
    ) -> Iterator[list[dict[str, Any]]]:
        """One page of each shard in turn until every shard is read or the guard trips; a shard
        whose Query fails is counted (``query_failures``) and dropped from this run."""
        pending = {index: self.due_pages(self._shard(index), now, out_of_time) for index in indices}
        while pending and not out_of_time():
            for index, pages in list(pending.items()):
                try:
                    yield next(pages)
                except StopIteration:
                    del pending[index]
                except (ClientError, BotoCoreError) as exc:
                    del pending[index]
                    report.query_failures += 1
                    report.complete = False
                    report.errors.append(f"Query shard {index}: {_error_text(exc)}")
                if out_of_time():
                    return

    def _sweep_one(
        self, item: Mapping[str, Any], now: Decimal, report: SweepReport, lock: threading.Lock
    ) -> None:
        key = {name: item[name] for name in self._key_names if name in item}
        ttl = ttl_from_attribute(item.get(self.config.ttl_attribute))
        try:
            outcome = self.delete_if_due(key, now)
        except (ClientError, BotoCoreError) as exc:
            with lock:
                report.failed += 1
                report.errors.append(_error_text(exc))
            self.logger.warning(
                "sweep of %s failed: %s", key, _error_text(exc), extra={"sweep": {"key": key}}
            )
            return
        with lock:
            if outcome == OUTCOME_SWEPT:
                report.swept += 1
                if ttl is not None:
                    report.lags.append(now - ttl)
            else:
                report.skipped += 1

    def _account(self, report: SweepReport) -> None:
        m = self.metrics
        if report.dry_run:
            m.count(METRIC_SESSIONS_WOULD_BE_SWEPT, report.would_sweep)
        else:
            m.count(METRIC_SESSIONS_SWEPT, report.swept)
            m.count(METRIC_SWEEP_SKIPPED, report.skipped)
            m.count(METRIC_SWEEP_FAILURES, report.failed + report.query_failures)
            for lag in report.lags:
                m.value(METRIC_SWEEP_LAG, lag)
        level = logging.ERROR if report.failed or report.query_failures else logging.INFO
        self.logger.log(
            level,
            "expiry sweep %s: swept=%d skipped=%d failed=%d queryFailures=%d wouldSweep=%d "
            "unfinished=%d",
            "complete" if report.complete else "incomplete",
            report.swept,
            report.skipped,
            report.failed,
            report.query_failures,
            report.would_sweep,
            report.unfinished,
            extra={"sweep": report.as_dict()},
        )


class SweepIncompleteError(RuntimeError):
    """Some due sessions could not be deleted (raised after the metrics are written, so the
    sweeper's errors alarm fires; the next scheduled run retries them)."""


def _number(value: Decimal) -> str:
    return format(value, "f")


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'Unknown')}: {error.get('Message', '')}".rstrip(": ")
    return f"{type(exc).__name__}: {exc}"


def sweeper_client_config(time_guard_ms: int, max_workers: int) -> Config:
    """botocore settings of the sweeper's DynamoDB client, sized to its time guard.

    ``standard`` retries with `SDK_MAX_ATTEMPTS` attempts, and connect and read timeouts of
    ``(0.9 * margin - 1 s backoff) / (2 * attempts)`` each, so one call — both attempts, each
    with a connect and a read timeout, and the backoff between them — ends within 90 % of the
    margin: a call started just before the guard trips still ends before the deadline. A read
    timeout bounds each socket read (a DynamoDB answer of the sweeper's is a few KB).

    Args:
        time_guard_ms: the time guard's margin in milliseconds (``SESSION_EXPIRY_TIME_GUARD_MS``).
        max_workers: concurrent deletes; the connection pool holds at least that many.

    Raises:
        ValueError: a margin under `MIN_TIME_GUARD_MS`, too short for any call.
    """
    if time_guard_ms < MIN_TIME_GUARD_MS:
        raise ValueError(
            f"time guard {time_guard_ms} ms: expected at least {MIN_TIME_GUARD_MS} ms, room for "
            f"{SDK_MAX_ATTEMPTS} attempts of a DynamoDB call and the backoff between them"
        )
    budget = SDK_SHARE_OF_MARGIN * time_guard_ms / 1000 - SDK_MAX_BACKOFF_SECONDS
    timeout = round(budget / (2 * SDK_MAX_ATTEMPTS), 3)
    return Config(
        retries={"mode": "standard", "total_max_attempts": SDK_MAX_ATTEMPTS},
        max_pool_connections=max(10, max_workers),
        connect_timeout=timeout,
        read_timeout=timeout,
    )


def worst_call_seconds(config: Config) -> float:
    """The longest one call of a client built with ``config`` can take: every attempt's connect
    and read timeouts plus the backoff before each retry."""
    attempts = int((config.retries or {}).get("total_max_attempts", 1))
    per_attempt = float(config.connect_timeout) + float(config.read_timeout)
    return attempts * per_attempt + (attempts - 1) * SDK_MAX_BACKOFF_SECONDS


class Deadline:
    """The invocation's time guard: the time left before no new call may start.

    Args:
        remaining_ms: Lambda's ``context.get_remaining_time_in_millis``; ``None``: no deadline.
        margin_ms: the margin kept free before the deadline for calls already started.
        not_after: epoch seconds the run must end by whatever Lambda's deadline is (the end of
            its schedule period, `period_end_of`); ``None``: Lambda's deadline only.
        wall: the epoch clock ``not_after`` is compared with (seconds); default ``time.time``.
    """

    def __init__(
        self,
        remaining_ms: Callable[[], int] | None,
        margin_ms: int,
        *,
        not_after: float | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._remaining_ms = remaining_ms
        self.margin_ms = margin_ms
        self.not_after = not_after
        self._wall = wall

    @classmethod
    def of(cls, context: object, margin_ms: int, *, not_after: float | None = None) -> Deadline:
        """The deadline of a Lambda ``context`` (one without ``get_remaining_time_in_millis``
        has none), and of the run's period when ``not_after`` is given."""
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        return cls(remaining if callable(remaining) else None, margin_ms, not_after=not_after)

    def remaining_ms(self) -> float:
        """Milliseconds before the earlier of the invocation's deadline and ``not_after``
        (infinite without either)."""
        lambda_ms = math.inf if self._remaining_ms is None else float(self._remaining_ms())
        if self.not_after is None:
            return lambda_ms
        return min(lambda_ms, (self.not_after - self._wall()) * 1000)

    def seconds_left(self) -> float:
        """Seconds until the guard trips (negative once it has)."""
        return (self.remaining_ms() - self.margin_ms) / 1000

    def passed(self) -> bool:
        """True once fewer than ``margin_ms`` remain: no new call may start."""
        return self.remaining_ms() < self.margin_ms


def shards_of_event(event: object, shards: int) -> list[int]:
    """The shard indices a scheduled run owns: the event's ``expiryShards`` (set by the
    construct's schedule target of that worker), or every shard when the event has none (one
    worker, or a run started by hand or by the local emulator).

    Raises:
        ValueError: ``expiryShards`` is not a non-empty list of distinct integers in
            ``0 .. shards - 1`` (a rule target of another deployment's shard count).
    """
    given = event.get(EVENT_SWEEP_SHARDS) if isinstance(event, Mapping) else None
    if given is None:
        return list(range(shards))
    valid = (
        isinstance(given, list)
        and given
        and all(type(i) is int and 0 <= i < shards for i in given)
        and len(set(given)) == len(given)
    )
    if not valid:
        raise ValueError(
            f"{EVENT_SWEEP_SHARDS}={given!r}: expected a non-empty list of distinct shard "
            f"indices from 0 to {shards - 1} (${ENV_SWEEP_SHARDS}={shards})"
        )
    return list(given)


def period_end_of(event: object) -> float | None:
    """Epoch seconds at which the run's schedule period ends: the event's ``scheduledAt`` (the
    rule's scheduled time, ISO 8601) plus ``periodSeconds``; ``None`` when the event lacks
    either (a run started by hand, or by the emulator's plain scheduled event).

    EventBridge sends one event per target per scheduled time, at or after that time, so the
    next run of the same worker starts no earlier than this moment: a run that starts no call
    after it (less the time guard) never overlaps the next one on its shards, even when its own
    event was delivered late.

    Raises:
        ValueError: ``scheduledAt`` is not an ISO 8601 time or ``periodSeconds`` not a
            positive integer.
    """
    if not isinstance(event, Mapping):
        return None
    at, period = event.get(EVENT_SWEEP_SCHEDULED_AT), event.get(EVENT_SWEEP_PERIOD_SECONDS)
    if at is None or period is None:
        return None
    if type(period) is not int or period < 1:
        raise ValueError(f"{EVENT_SWEEP_PERIOD_SECONDS}={period!r}: expected a positive integer")
    try:
        start = datetime.fromisoformat(str(at).replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{EVENT_SWEEP_SCHEDULED_AT}={at!r}: expected an ISO 8601 time such as "
            "2026-12-06T05:00:00Z (the scheduled event's time)"
        ) from None
    if start.tzinfo is None:
        start = start.replace(tzinfo=timezone.utc)
    return start.timestamp() + period


@dataclass(frozen=True)
class RunClock:
    """The clock of a run of passes (tests inject one that advances when slept on)."""

    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@dataclass
class RunReport:
    """What one run of the sweeper did: its passes (one `SweepReport` each)."""

    passes: list[SweepReport] = field(default_factory=list)
    interval_seconds: int | None = None
    #: Seconds after the run's start at which each pass began.
    pass_offsets: list[float] = field(default_factory=list)
    #: The shard indices the run owned (``None``: all of them).
    shards: Sequence[int] | None = None

    def total(self, name: str) -> int:
        return sum(int(getattr(p, name)) for p in self.passes)

    @property
    def complete(self) -> bool:
        return all(p.complete for p in self.passes)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary: the sums over the passes, the largest lag, the pass offsets."""
        lags = [lag for p in self.passes for lag in p.lags]
        names = ("swept", "skipped", "failed", "query_failures", "would_sweep", "unfinished")
        summary: dict[str, Any] = {_camel(n): self.total(n) for n in names}
        summary.update(
            passes=len(self.passes),
            shards=None if self.shards is None else list(self.shards),
            intervalSeconds=self.interval_seconds,
            passOffsetsSeconds=[round(o, 3) for o in self.pass_offsets],
            pages=self.total("pages"),
            complete=self.complete,
            dryRun=bool(self.passes and self.passes[0].dry_run),
            maxSweepLagSeconds=float(max(lags)) if lags else None,
            errors=[e for p in self.passes for e in p.errors][:5],
        )
        return summary


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


def _never() -> bool:
    return False


def run_passes(
    sweeper: ExpirySweeper,
    *,
    interval_seconds: int,
    deadline: Deadline,
    clock: RunClock | None = None,
    run_seconds: int = RUN_SECONDS,
    stop_requested: Callable[[], bool] = _never,
    shards: Sequence[int] | None = None,
) -> RunReport:
    """Run a pass every ``interval_seconds`` for ``run_seconds``, never past the time guard.

    Passes start at 0, I, 2I, ... seconds after the call while that is under ``run_seconds``;
    one pass at a time (a pass that overruns its slot delays the next, skipping slots already
    missed). A slot the guard would cut (the run started late) is moved forward to just before
    the guard trips and is the run's last pass; no pass starts once the guard has tripped.
    Once ``stop_requested()`` is true (checked after each pass and after each wait; the
    handler's clock ends its wait at once, see `stop_after_pass`), no further pass
    starts: the first pass always runs.

    Raises:
        ValueError: ``interval_seconds`` is not a positive integer.
    """
    if isinstance(interval_seconds, bool) or not isinstance(interval_seconds, int):
        raise ValueError(f"interval_seconds={interval_seconds!r}: expected a positive integer")
    if interval_seconds < 1:
        raise ValueError(f"interval_seconds={interval_seconds!r}: expected a positive integer")
    clock = clock or RunClock()
    run = RunReport(interval_seconds=interval_seconds, shards=shards)
    start = clock.monotonic()
    slot = 0
    while slot * interval_seconds < run_seconds:
        if run.passes and stop_requested():
            break
        wait = start + slot * interval_seconds - clock.monotonic()
        last = False
        if wait > 0:
            latest = deadline.seconds_left() - LAST_PASS_LEAD_SECONDS
            if wait >= latest:
                # The slot falls past the guard (a late start, a slow init): make the minute's
                # last pass at the latest moment the guard allows instead of skipping it, so
                # the gap to the next run's first pass stays about one interval.
                if latest <= 0:
                    break
                wait, last = latest, True
            clock.sleep(wait)
        if deadline.passed() or (run.passes and stop_requested()):
            break
        run.pass_offsets.append(clock.monotonic() - start)
        run.passes.append(sweeper.sweep(out_of_time=deadline.passed, shards=shards))
        if last:
            break
        elapsed = clock.monotonic() - start
        slot = max(slot + 1, math.floor(elapsed / interval_seconds))
    return run


# --- Lambda entry point: session_expiry_runtime.sweeps.sweeper.handler ----------------------------

_sweeper: ExpirySweeper | None = None
_lock = threading.Lock()


class _StopRequests:
    """`stop_after_pass`'s requests, one per run in progress in this process: a request
    reaches every run in progress (each ends after its pass in progress) or, with none, the
    next run to start; one run's end never drops a request meant for another run sharing the
    process (threads of one execution environment)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: set[threading.Event] = set()
        self._pending = False
        self._current = threading.local()

    def request(self) -> None:
        with self._lock:
            for stop in self._runs:
                stop.set()
            self._pending = not self._runs

    @contextlib.contextmanager
    def run(self) -> Iterator[threading.Event]:
        """This thread's run: its own stop, set at once by a request made before it began."""
        stop = threading.Event()
        with self._lock:
            if self._pending:
                stop.set()
                self._pending = False
            self._runs.add(stop)
        self._current.stop = stop
        try:
            yield stop
        finally:
            self._current.stop = None
            with self._lock:
                self._runs.discard(stop)

    def pending(self) -> bool:
        """Whether a request waits for the next run (none in progress took it)."""
        with self._lock:
            return self._pending

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, ended at once by a stop of this thread's run."""
        stop: threading.Event | None = getattr(self._current, "stop", None)
        if stop is None:
            time.sleep(seconds)
        else:
            stop.wait(seconds)


_stop_passes = _StopRequests()


def _sleep_unless_stopped(seconds: float) -> None:
    _stop_passes.wait(seconds)


#: The clock of the handler's passes (tests replace it): its waits end at once on
#: `stop_after_pass`.
_run_clock = RunClock(sleep=_sleep_unless_stopped)


def stop_after_pass() -> None:
    """End the handler's run in progress after its pass in progress; thread-safe.

    No further pass starts, a wait for the next pass ends at once, and the handler returns its
    summary and writes its metrics as usual. Without a run in progress, the next run makes one
    pass. AWS never calls it (a deployed run lasts its minute); it is for a process that hosts
    the handler: the local emulator calls it when a test stops the sweeper's schedule or runs
    one sweep now (``cdk_session_expiry.testing``). The name is the contract's
    ``SWEEPER_STOP_HOOK``.
    """
    _stop_passes.request()


def get_sweeper() -> ExpirySweeper:
    """The process-wide sweeper, built from the environment on first use.

    Raises:
        ValueError: ``SESSION_EXPIRY_TABLE_NAME`` or ``SESSION_EXPIRY_SWEEP_SHARD_ATTRIBUTE``
            is unset, a numeric variable is not a positive integer, or the time guard is under
            `MIN_TIME_GUARD_MS`.
    """
    global _sweeper
    with _lock:
        if _sweeper is None:
            import boto3

            config = RuntimeConfig.from_env()
            settings = sweeper_client_config(config.time_guard_ms, config.max_workers)
            client = boto3.client("dynamodb", config=settings)
            _sweeper = ExpirySweeper(config, client, MetricsRecorder(config.metrics_namespace))
        return _sweeper


def sweep_run(sweeper: ExpirySweeper, context: object, event: object = None) -> RunReport:
    """One invocation's passes over the shards the ``event`` gives it (`shards_of_event`),
    never past its period's end (`period_end_of`): one pass, or with
    ``sweep_interval_seconds`` below `RUN_SECONDS` a pass every interval for the run's minute.

    Raises:
        ValueError: the event's shards or period are malformed.
    """
    shards = shards_of_event(event, sweeper.config.sweep_shards)
    deadline = Deadline.of(context, sweeper.config.time_guard_ms, not_after=period_end_of(event))
    interval = sweeper.config.sweep_interval_seconds

    with _stop_passes.run() as stop:
        if interval is not None and interval < RUN_SECONDS:
            return run_passes(
                sweeper,
                interval_seconds=interval,
                deadline=deadline,
                clock=_run_clock,
                stop_requested=stop.is_set,
                shards=shards,
            )
        run = RunReport(interval_seconds=interval, pass_offsets=[0.0], shards=shards)
        run.passes.append(sweeper.sweep(out_of_time=deadline.passed, shards=shards))
        return run


def handler(event: object, context: object) -> dict[str, Any]:
    """Scheduled entry point: run the passes, write the metrics, return the summary.

    The summary adds ``durationSeconds`` and ``msLeftBeforeDeadline`` (what the time guard kept
    free; ``None`` without a deadline).

    Raises:
        SweepIncompleteError: at least one due session could not be deleted, or a shard could
            not be queried (raised after the metrics are written).
    """
    # This invocation's own metrics (threads of one execution environment: another run's
    # counts are never flushed with these).
    sweeper = get_sweeper().for_invocation()
    started = time.monotonic()
    run = sweep_run(sweeper, context, event)
    try:
        sweeper.metrics.flush()
    except Exception:
        LOGGER.exception("could not write the metrics")
    summary = run.as_dict()
    summary["durationSeconds"] = math.ceil((time.monotonic() - started) * 1000) / 1000
    left = Deadline.of(context, 0).remaining_ms()
    summary["msLeftBeforeDeadline"] = None if math.isinf(left) else int(left)
    failed, query_failures = run.total("failed"), run.total("query_failures")
    if failed or query_failures:
        errors = [e for p in run.passes for e in p.errors]
        raise SweepIncompleteError(
            f"{failed} due session(s) could not be deleted and {query_failures} "
            f"shard(s) could not be queried, e.g. {errors[:1]}; the next pass retries"
        )
    return summary
