"""Expiry sweeper: delete sessions whose TTL has passed, minutes after it passed, without a Scan.

DynamoDB's TTL deletes expired items "typically within a few days" (Amazon DynamoDB Developer
Guide, "Working with time to live (TTL)"), so TTL alone cannot bound how long an expired
session's connection, grant and scratch objects live on. The sweeper runs on a schedule (the
construct's ``expiry_sweep_interval``) and deletes every session that is due, so its REMOVE
record reaches the same cleanup function within the interval plus processing time.

How due sessions are found — a sparse global secondary index, never a Scan:

* When the sweeper is configured (``SESSION_EXPIRY_SWEEP_SHARD_ATTRIBUTE`` is set), the session
  runtime writes a shard attribute on every ``create`` and ``touch``: a String ``"0"`` ..
  ``"<shards - 1>"`` derived from the session's key (:func:`shard_of`), so one session always
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
``ttl-replicated`` (:mod:`.classify`), exactly like any explicit delete of an expired item, and
cleans it the same way.

Metrics (embedded metric format, namespace ``SESSION_EXPIRY_METRICS_NAMESPACE``):
``SessionsSwept``, ``SweepLagSeconds`` (``now - TTL`` per swept session), ``SweepSkipped``,
``SweepFailures``, and in dry run ``SessionsWouldBeSwept`` (nothing is deleted).
"""

from __future__ import annotations

import logging
import math
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .config import (
    ENV_SWEEP_SHARD_ATTRIBUTE,
    ENV_TABLE_NAME,
    METRIC_SESSIONS_SWEPT,
    METRIC_SESSIONS_WOULD_BE_SWEPT,
    METRIC_SWEEP_FAILURES,
    METRIC_SWEEP_LAG,
    METRIC_SWEEP_SKIPPED,
    RuntimeConfig,
)
from .metrics import MetricsRecorder
from .ttl import now_seconds, ttl_from_attribute

LOGGER = logging.getLogger("session_expiry_runtime.sweeper")

#: Keys read per Query page; the time guard is checked between pages.
QUERY_PAGE_SIZE = 500
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
        self.config = config
        self.table_name: str = config.table_name
        self.shard_attribute: str = config.sweep_shard_attribute
        self._ddb = dynamodb_client
        self.metrics = metrics
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self.logger = logger
        self._key_names = [config.partition_key] + ([config.sort_key] if config.sort_key else [])

    # --- the two calls ----------------------------------------------------------------------
    def due_pages(
        self, shard: str, now: Decimal, out_of_time: Callable[[], bool] = lambda: False
    ) -> Iterator[list[dict[str, Any]]]:
        """Query one shard of the index for sessions with ``TTL <= now``, one page at a time.

        Stops early (without raising) when ``out_of_time()`` turns true between pages; the
        caller marks the sweep incomplete.
        """
        start: dict[str, Any] | None = None
        while True:
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
            if not start or out_of_time():
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
        self, *, now: Decimal | None = None, out_of_time: Callable[[], bool] = lambda: False
    ) -> SweepReport:
        """Sweep every shard once; never raises (failed deletes and Queries are counted).

        Args:
            now: epoch seconds to sweep up to; default the clock. A session whose TTL passes
                during the run is left for the next one.
            out_of_time: checked between pages and before each shard; when true the run stops
                and the report says ``complete=False`` (the next run continues).
        """
        now = now_seconds(self._clock()) if now is None else now
        report = SweepReport(dry_run=self.config.dry_run)
        lock = threading.Lock()
        workers = max(1, self.config.max_workers)

        def one(item: dict[str, Any]) -> None:
            self._sweep_one(item, now, report, lock)

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sweep") as pool:
            for index in range(self.config.sweep_shards):
                try:
                    for items in self.due_pages(str(index), now, out_of_time):
                        report.pages += 1
                        if self.config.dry_run:
                            report.would_sweep += len(items)
                        else:
                            list(pool.map(one, items))
                except (ClientError, BotoCoreError) as exc:
                    report.query_failures += 1
                    report.complete = False
                    report.errors.append(f"Query shard {index}: {_error_text(exc)}")
                # Conservative: a shard that ended exactly at the guard is counted incomplete.
                if out_of_time():
                    report.complete = False
                    break
        self._account(report)
        return report

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
            "expiry sweep %s: swept=%d skipped=%d failed=%d queryFailures=%d wouldSweep=%d",
            "complete" if report.complete else "incomplete",
            report.swept,
            report.skipped,
            report.failed,
            report.query_failures,
            report.would_sweep,
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


def _out_of_time(context: object, margin_ms: int) -> Callable[[], bool]:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if not callable(remaining):
        return lambda: False
    return lambda: bool(remaining() < margin_ms)


# --- Lambda entry point: session_expiry_runtime.sweeper.handler ------------------------------

_sweeper: ExpirySweeper | None = None
_lock = threading.Lock()


def get_sweeper() -> ExpirySweeper:
    """The process-wide sweeper, built from the environment on first use.

    Raises:
        ValueError: ``SESSION_EXPIRY_TABLE_NAME`` or ``SESSION_EXPIRY_SWEEP_SHARD_ATTRIBUTE``
            is unset, or a numeric variable is not a positive integer.
    """
    global _sweeper
    with _lock:
        if _sweeper is None:
            import boto3

            from .cleaner import client_config

            config = RuntimeConfig.from_env()
            client = boto3.client("dynamodb", config=client_config(config.max_workers))
            _sweeper = ExpirySweeper(config, client, MetricsRecorder(config.metrics_namespace))
        return _sweeper


def handler(event: object, context: object) -> dict[str, Any]:
    """Scheduled entry point: sweep once, write the metrics, return the summary.

    Raises:
        SweepIncompleteError: at least one due session could not be deleted, or a shard could
            not be queried (raised after the metrics are written).
    """
    sweeper = get_sweeper()
    started = time.monotonic()
    report = sweeper.sweep(out_of_time=_out_of_time(context, sweeper.config.time_guard_ms))
    try:
        sweeper.metrics.flush()
    except Exception:
        LOGGER.exception("could not write the metrics")
    summary = report.as_dict()
    summary["durationSeconds"] = math.ceil((time.monotonic() - started) * 1000) / 1000
    if report.failed or report.query_failures:
        raise SweepIncompleteError(
            f"{report.failed} due session(s) could not be deleted and {report.query_failures} "
            f"shard(s) could not be queried, e.g. {report.errors[:1]}; the next run retries"
        )
    return summary
