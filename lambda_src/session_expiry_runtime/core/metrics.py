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

import copy
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
    DIMENSION_TENANT,
    METRIC_CLEANUP_FAILURES,
    METRIC_GRANTS_REFUSED,
    METRIC_OBJECTS_DELETED,
    METRIC_PREFIXES_REFUSED,
    METRIC_RECORDS_SKIPPED,
    METRIC_RESOURCES_REFUSED,
    METRIC_SESSIONS_CLEANED,
    METRIC_TTL_LAG,
)
from .decode import to_json_value

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
    """Thread-safe accumulator of this invocation's metrics; `flush` writes them as EMF.

    Metric names and dimensions (all from `config`):

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

    Tenants: what is recorded through `for_tenant` lands in documents of their own that
    carry the tenant as the root member ``Tenant`` (`config.DIMENSION_TENANT`): a property,
    which CloudWatch Logs Insights and Contributor Insights read and CloudWatch does not turn
    into a metric (CloudWatch User Guide, "Specification: Embedded metric format": members not
    named in a dimension set or metric are ignored by the metric extraction). With
    ``tenant_dimension`` the same documents also name a second dimension set with ``Tenant``, so
    every metric exists once in aggregate and once per tenant (one custom metric per tenant and
    metric and dimension value: priced per metric).

    Args:
        namespace: the CloudWatch namespace.
        tenant_dimension: add the per-tenant dimension set; default off (property only).
    """

    def __init__(self, namespace: str, *, tenant_dimension: bool = False) -> None:
        self.namespace = namespace
        self.tenant_dimension = tenant_dimension
        self._tenant: str | None = None
        self._lock = threading.Lock()
        # Keyed by tenant (None: no tenant) first; shared by every for_tenant() view.
        self._dimensioned: dict[tuple[str | None, str, str], dict[str, float]] = defaultdict(dict)
        self._counts: dict[str | None, dict[str, float]] = defaultdict(dict)
        self._values: dict[str | None, dict[str, list[float]]] = defaultdict(
            lambda: defaultdict(list)
        )

    def fresh(self) -> MetricsRecorder:
        """An empty recorder with this one's namespace and tenant dimension: one invocation's
        own, so that what another invocation of the same process records is never flushed
        with it (`handler`, `sweeper.handler`)."""
        return MetricsRecorder(self.namespace, tenant_dimension=self.tenant_dimension)

    def for_tenant(self, tenant: object) -> MetricsRecorder:
        """A view of this recorder whose counts carry ``tenant`` (the old image's tenant
        attribute, decoded: text, a number or anything `tenant_text` turns into text);
        ``None`` or empty: no tenant, this recorder's own documents."""
        view = copy.copy(self)  # shares the lock and the totals
        view._tenant = tenant_text(tenant)
        return view

    def _add(self, bucket: dict[str, float], name: str, value: float) -> None:
        bucket[name] = bucket.get(name, 0) + value

    def count(
        self, metric: str, value: int = 1, *, dimension: tuple[str, str] | None = None
    ) -> None:
        """Add ``value`` to a Count metric, optionally under one ``(name, value)`` dimension."""
        with self._lock:
            if dimension is None:
                self._add(self._counts[self._tenant], metric, value)
            else:
                self._add(self._dimensioned[(self._tenant, *dimension)], metric, value)

    def value(self, metric: str, value: float | Decimal) -> None:
        """Record one observation of an undimensioned Seconds metric (e.g. ``TtlLagSeconds``)."""
        with self._lock:
            self._values[self._tenant][metric].append(float(value))

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
        """Count one refusal of ``step`` under its `REFUSAL_METRICS` metric, if it has one."""
        metric = REFUSAL_METRICS.get(step)
        if metric is not None:
            self.count(metric)

    def resource_refused(self, refusal: str, count: int = 1) -> None:
        """Count ``count`` ids the ownership check refused for ``refusal`` (``REFUSAL_*``)."""
        self.count(METRIC_RESOURCES_REFUSED, count, dimension=(DIMENSION_REFUSAL, refusal))

    def snapshot(self) -> dict[str, Any]:
        """Totals so far, every tenant together, for tests and log lines:
        ``{metric or "metric|dim=value": total}``."""
        with self._lock:
            out: dict[str, Any] = {}
            for counts in self._counts.values():
                for name, total in counts.items():
                    out[name] = out.get(name, 0) + total
            for (_, dim, dim_value), metrics in self._dimensioned.items():
                for name, total in metrics.items():
                    key = f"{name}|{dim}={dim_value}"
                    out[key] = out.get(key, 0) + total
            for values in self._values.values():
                for name, observations in values.items():
                    out[name] = [*out.get(name, []), *observations]
            return out

    def documents(self, timestamp_ms: int | None = None) -> list[dict[str, Any]]:
        """The EMF documents for everything recorded so far (empty list if nothing was): the
        documents without a tenant first, then each tenant's, tenants in sorted order."""
        return self._documents(timestamp_ms, reset=False)

    def _documents(self, timestamp_ms: int | None, *, reset: bool) -> list[dict[str, Any]]:
        """`documents`; with ``reset``, what they hold is taken out of the recorder under the
        same lock, so a count another thread makes meanwhile goes to the next documents."""
        stamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        with self._lock:
            dimensioned = {k: dict(v) for k, v in self._dimensioned.items() if v}
            counts = {k: dict(v) for k, v in self._counts.items() if v}
            values = {t: {k: list(v) for k, v in vs.items() if v} for t, vs in self._values.items()}
            if reset:
                self._dimensioned.clear()
                self._counts.clear()
                self._values.clear()
        tenants = {t for t, _, _ in dimensioned} | set(counts) | {t for t, v in values.items() if v}
        docs: list[dict[str, Any]] = []
        for tenant in sorted(tenants, key=lambda t: (t is not None, t or "")):
            group = {(d, v): m for (t, d, v), m in dimensioned.items() if t == tenant}
            docs += _Documents(self, stamp, tenant).all(
                group, counts.get(tenant, {}), values.get(tenant, {})
            )
        return docs

    def flush(self, write: Callable[[str], Any] | None = None) -> list[dict[str, Any]]:
        """Take everything recorded so far out of the recorder (one step: what another thread
        records meanwhile stays for the next flush) and write it, one JSON line per document
        (default: stdout)."""
        docs = self._documents(None, reset=True)
        out = write if write is not None else sys.stdout.write
        for doc in docs:
            out(json.dumps(doc, separators=(",", ":")) + "\n")
        if write is None:
            sys.stdout.flush()
        return docs


class _Documents:
    """The EMF documents of one tenant (or of none) of one flush."""

    def __init__(self, recorder: MetricsRecorder, stamp: int, tenant: str | None) -> None:
        self.namespace = recorder.namespace
        self.stamp = stamp
        self.tenant = tenant
        self.tenant_dimension = recorder.tenant_dimension and tenant is not None

    def document(
        self, dimensions: list[str], members: dict[str, Any], units: dict[str, str]
    ) -> dict[str, Any]:
        sets = [dimensions]
        if self.tenant_dimension:
            sets.append([*dimensions, DIMENSION_TENANT])
        tenant = {DIMENSION_TENANT: self.tenant} if self.tenant is not None else {}
        return {
            "_aws": {
                "Timestamp": self.stamp,
                "CloudWatchMetrics": [
                    {
                        "Namespace": self.namespace,
                        "Dimensions": sets,
                        "Metrics": [{"Name": n, "Unit": units[n]} for n in sorted(units)],
                    }
                ],
            },
            **tenant,
            **members,
        }

    def all(
        self,
        dimensioned: dict[tuple[str, str], dict[str, float]],
        counts: dict[str, float],
        values: dict[str, list[float]],
    ) -> list[dict[str, Any]]:
        docs = [
            self.document([dim], {dim: dim_value, **metrics}, dict.fromkeys(metrics, UNIT_COUNT))
            for (dim, dim_value), metrics in sorted(dimensioned.items())
        ]
        # Undimensioned: counts ride in the first document, value arrays in chunks of 100.
        chunked: list[dict[str, list[float]]] = []
        for name, observations in sorted(values.items()):
            for i in range(0, len(observations), MAX_VALUES_PER_DOCUMENT):
                index = i // MAX_VALUES_PER_DOCUMENT
                while len(chunked) <= index:
                    chunked.append({})
                chunked[index][name] = observations[i : i + MAX_VALUES_PER_DOCUMENT]
        if counts and not chunked:
            chunked.append({})
        for index, arrays in enumerate(chunked):
            members: dict[str, Any] = dict(arrays)
            units = dict.fromkeys(arrays, UNIT_SECONDS)
            if index == 0:
                members.update(counts)
                units.update(dict.fromkeys(counts, UNIT_COUNT))
            docs.append(self.document([], members, units))
        return docs


def tenant_text(tenant: object) -> str | None:
    """The text of a tenant attribute's decoded value as it goes into the ``Tenant`` member:
    a string as it is, a number in its shortest decimal form, anything else as compact JSON;
    ``None`` (no attribute) and the empty string: no tenant. Longer text is cut to 1,024
    characters, the longest dimension value CloudWatch takes (CloudWatch API Reference,
    "Dimension")."""
    if tenant is None or tenant == "":
        return None
    if isinstance(tenant, str):
        text = tenant
    elif isinstance(tenant, bool):
        text = json.dumps(tenant)
    elif isinstance(tenant, (int, float, Decimal)):
        text = str(tenant)
    else:
        text = json.dumps(to_json_value(tenant), separators=(",", ":"), sort_keys=True)
    return text[:MAX_TENANT_CHARACTERS]


#: The longest dimension value CloudWatch takes (CloudWatch API Reference, "Dimension").
MAX_TENANT_CHARACTERS = 1024


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
