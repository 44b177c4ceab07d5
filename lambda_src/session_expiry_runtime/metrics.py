"""CloudWatch embedded metric format (EMF) documents for one invocation, written by hand.

Powertools for AWS Lambda would write the same JSON, but the deployed cleanup function must need
nothing beyond the Lambda Python runtime (boto3 + standard library): no layer ARN to pin per
Region, no bundling step, no Docker at synth. The format is small enough to own here
(Amazon CloudWatch User Guide, "Specification: Embedded metric format"):

``{"_aws": {"Timestamp": <ms>, "CloudWatchMetrics": [{"Namespace": ..., "Dimensions": [[...]],
"Metrics": [{"Name": ..., "Unit": ...}]}]}, "<dimension>": "<value>", "<metric>": <number>}``

One document per dimension value (a document's dimension values are root members), plus one
undimensioned document (an empty DimensionSet is allowed) carrying at most 100 values per metric
array, as the specification requires. Documents are printed as single lines on stdout; with
Lambda's JSON log format, stdout lines that are not from the logging module pass through as they
are, and CloudWatch Logs extracts the metrics.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from .config import (
    ACTION_DELETE_SCRATCH,
    ACTION_RETIRE_GRANT,
    DIMENSION_ACTION,
    DIMENSION_CAUSE,
    DIMENSION_REASON,
    DIMENSION_REFUSAL,
    METRIC_CLEANUP_FAILURES,
    METRIC_GRANTS_REFUSED,
    METRIC_OBJECTS_DELETED,
    METRIC_PREFIXES_REFUSED,
    METRIC_RECORDS_SKIPPED,
    METRIC_RESOURCES_REFUSED,
    METRIC_SESSIONS_CLEANED,
    METRIC_TTL_LAG,
)

UNIT_COUNT = "Count"
UNIT_SECONDS = "Seconds"
#: "Numeric array metric targets MUST NOT have more than 100 members."
MAX_VALUES_PER_DOCUMENT = 100
#: The Count metric of each step that can refuse what an old image names (``refused``): the
#: skipped-records alarm watches both.
REFUSAL_METRICS = {
    ACTION_DELETE_SCRATCH: METRIC_PREFIXES_REFUSED,
    ACTION_RETIRE_GRANT: METRIC_GRANTS_REFUSED,
}


class MetricsRecorder:
    """Thread-safe accumulator of this invocation's metrics; :meth:`flush` writes them as EMF.

    Metric names and dimensions (all from :mod:`.config`):

    * ``SessionsCleaned`` (Count) by ``Reason``: ``ttl`` / ``deleted-after-expiry`` / ``explicit``.
    * ``CleanupFailures`` (Count) by ``Action``: ``DeleteConnection``, ``RetireGrant``,
      ``DeleteScratch``, ``Decode``, ``TimeGuard``, ``Unexpected``.
    * ``RecordsSkipped`` (Count) by ``Cause``: see ``config.CAUSE_*``.
    * ``TtlLagSeconds`` (Seconds), no dimension: one value per TTL-classified session.
    * ``ScratchObjectsDeleted``, ``ScratchPrefixesRefused`` and ``GrantsRefused`` (Count), no
      dimension.
    * ``ResourcesRefused`` (Count) by ``Refusal``: one per connection, AgentCore session or
      grant id an old image named that the ownership check refused (``config.REFUSAL_*``;
      ``NotOwned`` and ``Unclaimed`` are alarmed, the others counted only).
    """

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self._lock = threading.Lock()
        self._dimensioned: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
        self._counts: dict[str, float] = {}
        self._values: dict[str, list[float]] = defaultdict(list)

    def _add(self, bucket: dict[str, float], name: str, value: float) -> None:
        bucket[name] = bucket.get(name, 0) + value

    def count(
        self, metric: str, value: int = 1, *, dimension: tuple[str, str] | None = None
    ) -> None:
        """Add ``value`` to a Count metric, optionally under one ``(name, value)`` dimension."""
        with self._lock:
            if dimension is None:
                self._add(self._counts, metric, value)
            else:
                self._add(self._dimensioned[dimension], metric, value)

    def value(self, metric: str, value: float | Decimal) -> None:
        """Record one observation of an undimensioned Seconds metric (e.g. ``TtlLagSeconds``)."""
        with self._lock:
            self._values[metric].append(float(value))

    # Convenience wrappers with the project's names, so call sites cannot mix them up.
    def session_cleaned(self, reason: str) -> None:
        self.count(METRIC_SESSIONS_CLEANED, dimension=(DIMENSION_REASON, reason))

    def cleanup_failed(self, action: str) -> None:
        self.count(METRIC_CLEANUP_FAILURES, dimension=(DIMENSION_ACTION, action))

    def record_skipped(self, cause: str) -> None:
        self.count(METRIC_RECORDS_SKIPPED, dimension=(DIMENSION_CAUSE, cause))

    def ttl_lag(self, seconds: float | Decimal) -> None:
        self.value(METRIC_TTL_LAG, seconds)

    def objects_deleted(self, count: int) -> None:
        if count:
            self.count(METRIC_OBJECTS_DELETED, count)

    def prefix_refused(self) -> None:
        self.count(METRIC_PREFIXES_REFUSED)

    def step_refused(self, step: str) -> None:
        """Count one refusal of ``step`` under its :data:`REFUSAL_METRICS` metric, if it has one."""
        metric = REFUSAL_METRICS.get(step)
        if metric is not None:
            self.count(metric)

    def resource_refused(self, refusal: str, count: int = 1) -> None:
        """Count ``count`` ids the ownership check refused for ``refusal`` (``REFUSAL_*``)."""
        self.count(METRIC_RESOURCES_REFUSED, count, dimension=(DIMENSION_REFUSAL, refusal))

    def snapshot(self) -> dict[str, Any]:
        """Totals so far, for tests and log lines: ``{metric or "metric|dim=value": total}``."""
        with self._lock:
            out: dict[str, Any] = dict(self._counts)
            for (dim, dim_value), metrics in self._dimensioned.items():
                for name, total in metrics.items():
                    out[f"{name}|{dim}={dim_value}"] = total
            for name, values in self._values.items():
                out[name] = list(values)
            return out

    def documents(self, timestamp_ms: int | None = None) -> list[dict[str, Any]]:
        """The EMF documents for everything recorded so far (empty list if nothing was)."""
        stamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        with self._lock:
            dimensioned = {k: dict(v) for k, v in self._dimensioned.items()}
            counts = dict(self._counts)
            values = {k: list(v) for k, v in self._values.items() if v}

        def document(
            dimensions: list[str], members: dict[str, Any], units: dict[str, str]
        ) -> dict[str, Any]:
            return {
                "_aws": {
                    "Timestamp": stamp,
                    "CloudWatchMetrics": [
                        {
                            "Namespace": self.namespace,
                            "Dimensions": [dimensions],
                            "Metrics": [{"Name": n, "Unit": units[n]} for n in sorted(units)],
                        }
                    ],
                },
                **members,
            }

        docs: list[dict[str, Any]] = []
        for (dim, dim_value), metrics in sorted(dimensioned.items()):
            docs.append(
                document(
                    [dim],
                    {dim: dim_value, **metrics},
                    dict.fromkeys(metrics, UNIT_COUNT),
                )
            )
        # Undimensioned: counts ride in the first document, value arrays in chunks of 100.
        chunked: list[dict[str, list[float]]] = []
        for name, observations in sorted(values.items()):
            for i in range(0, len(observations), MAX_VALUES_PER_DOCUMENT):
                part = observations[i : i + MAX_VALUES_PER_DOCUMENT]
                index = i // MAX_VALUES_PER_DOCUMENT
                while len(chunked) <= index:
                    chunked.append({})
                chunked[index][name] = part
        if counts and not chunked:
            chunked.append({})
        for index, arrays in enumerate(chunked):
            members: dict[str, Any] = dict(arrays)
            units = dict.fromkeys(arrays, UNIT_SECONDS)
            if index == 0:
                members.update(counts)
                units.update(dict.fromkeys(counts, UNIT_COUNT))
            docs.append(document([], members, units))
        return docs

    def flush(self, write: Callable[[str], Any] | None = None) -> list[dict[str, Any]]:
        """Write every document as one JSON line (default: stdout), then reset the recorder."""
        docs = self.documents()
        out = write if write is not None else sys.stdout.write
        for doc in docs:
            out(json.dumps(doc, separators=(",", ":")) + "\n")
        if write is None:
            sys.stdout.flush()
        with self._lock:
            self._dimensioned.clear()
            self._counts.clear()
            self._values.clear()
        return docs


def gauge_document(
    namespace: str,
    name: str,
    value: float,
    *,
    unit: str,
    dimensions: dict[str, str],
    timestamp_ms: int,
) -> dict[str, Any]:
    """One EMF document holding one value of one metric under ``dimensions`` (all of them one
    dimension set): what a scheduled check writes once per run (the pause watch, the breaker)."""
    return {
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [
                {
                    "Namespace": namespace,
                    "Dimensions": [sorted(dimensions)],
                    "Metrics": [{"Name": name, "Unit": unit}],
                }
            ],
        },
        **dimensions,
        name: value,
    }
