"""Sandbox phase: the archive the deployed cleanup wrote, queried with the named queries' SQL.

The deployed stack has ``archive_query=True``: its template holds the Glue table (columns,
partition projection, location template) and the three Athena named queries. moto's
CloudFormation creates neither Glue nor Athena resources, and moto runs no SQL, so this phase
runs the **same SQL strings** (read from the deployed template) with DuckDB over the **same
objects** (downloaded from the emulator's S3 with their keys), through a view that mirrors the
table: one column per Glue column (read by DuckDB's JSON reader with exactly those names and
types, as the Hive JSON SerDe maps fields to columns), ``date`` taken from the key's
``date=`` level as Athena's ``storage.location.template`` does, and only days partition
projection offers (``yyyy-MM-dd`` from the projection's start). A change of the record format,
the key layout or the SQL that Athena would not read breaks this phase (and the tests that use
``connect``).

What it checks, before the backstop and forgery phases add records of their own:

* ``sessions-per-tenant-per-day`` over the archive's days gives, per reason and tenant, the
  counts of the sandbox's own record of what was cleaned: every REMOVE record of the deployed
  stream (read back with GetRecords, classified by the runtime's classifier, tenant from the old
  image), less the sessions ended during the dry run (never archived);
* per reason, those are at most the cleanup's ``SessionsCleaned`` metrics (the function's and
  the replay CLI's), which count a record again each time it is redelivered (the records after
  a failed one in a partial batch response), and the same reasons;
* ``swept-vs-ttl-expired`` agrees with the per-tenant query, and ``session-history`` of a
  session id reused after expiry finds its archived (expired) incarnation.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdk_session_expiry.archiving import archive_query as catalog
from cdk_session_expiry.testing.athena import QUOTED_TABLE, connect, download, run


def queries_from_template(template: Mapping[str, Any]) -> dict[str, str]:
    """The deployed named queries' SQL, by name, with the table reference replaced by the
    DuckDB view's (the only difference: Glue's generated names)."""
    found: dict[str, str] = {}
    for resource in template.get("Resources", {}).values():
        if resource.get("Type") != "AWS::Athena::NamedQuery":
            continue
        props = resource["Properties"]
        sql = _resolve(props["QueryString"])
        found[props["Name"]] = re.sub(r'FROM "[^"]*"\."[^"]*"', f"FROM {QUOTED_TABLE}", sql)
    return found


def _resolve(value: Any) -> str:
    """A QueryString with its ``Fn::Join`` of the database and table tokens flattened."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(p if isinstance(p, str) else "X" for p in parts)
    raise ValueError(f"QueryString {value!r}: expected a string or Fn::Join")


@dataclass
class ArchiveQueryResult:
    objects: int = 0
    rows: int = 0
    by_reason_tenant: dict[str, int] = field(default_factory=dict)
    expected: dict[str, int] = field(default_factory=dict)
    metrics_by_reason: dict[str, float] = field(default_factory=dict)
    history_incarnations: int = 0
    mismatches: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "objects": self.objects,
            "sessions": self.rows,
            "by_reason_tenant": self.by_reason_tenant,
            "expected": self.expected,
            "metrics_by_reason": self.metrics_by_reason,
            "history_incarnations": self.history_incarnations,
        }


def report_line(summary: Mapping[str, Any] | None) -> str:
    """The report's "archive queried" line."""
    if not summary:
        return "archive queried   not run"
    pairs = ", ".join(f"{k}={v}" for k, v in sorted(summary["by_reason_tenant"].items()))
    equal = summary["by_reason_tenant"] == summary["expected"]
    return (
        f"archive queried   DuckDB, the deployed named queries' SQL over {summary['objects']} "
        f"objects: {summary['sessions']} sessions ({pairs}) "
        + ("= the sandbox's counts" if equal else "!= the sandbox's counts")
        + f"; session-history of one id: {summary['history_incarnations']} incarnation(s)"
    )


def phase(
    *,
    emulator: Any,
    pipeline: Any,
    bucket: str,
    prefix: str,
    excluded_session_ids: Iterable[str],
    reused_session_id: str | None,
    tenant_attribute: str,
    say: Callable[[str], None],
) -> ArchiveQueryResult:
    """Query the deployed archive with the named queries and compare (module docstring)."""
    from cdk_session_expiry import _runtime_contract as contract

    result = ArchiveQueryResult()
    queries = queries_from_template(pipeline.stack.template)
    missing = {q.name for q in catalog.named_queries("t", tenant_partition=False)} - set(queries)
    if missing:
        result.mismatches.append(f"archive query: named queries missing in the template: {missing}")
        return result
    with tempfile.TemporaryDirectory(prefix="sandbox-archive-") as tmp:
        root = Path(tmp)
        result.objects = download(emulator.client("s3"), bucket, prefix, root)
        con = connect(root, prefix, tenant_partition=False)
        span = f'SELECT min("date"), max("date") FROM {QUOTED_TABLE}'  # noqa: S608
        first, last = con.execute(span).fetchone() or (None, None)
        counts = Counter[str]()
        for _day, tenant, reason, sessions in run(
            con, queries[catalog.QUERY_SESSIONS_PER_TENANT_PER_DAY], [first, last]
        ):
            counts[f"{reason}/{tenant or '-'}"] += int(sessions)
        result.by_reason_tenant = dict(counts)
        result.rows = sum(counts.values())
        swept = run(con, queries[catalog.QUERY_SWEPT_VS_TTL], [first, last])
        if reused_session_id:
            history = run(con, queries[catalog.QUERY_SESSION_HISTORY], [reused_session_id])
            result.history_incarnations = len({row[2] for row in history})
    result.expected = expected_counts(emulator, pipeline, excluded_session_ids, tenant_attribute)
    result.metrics_by_reason = pipeline.metrics.by_dimension(
        contract.METRIC_SESSIONS_CLEANED, contract.DIMENSION_REASON
    )
    _compare(result, swept)
    say(report_line(result.as_dict()))
    return result


def _compare(result: ArchiveQueryResult, swept: list[tuple[Any, ...]]) -> None:
    if result.by_reason_tenant != result.expected:
        result.mismatches.append(
            f"archive query: per reason/tenant {result.by_reason_tenant}, the sandbox's "
            f"{result.expected}"
        )
    per_reason = Counter[str]()
    for key, n in result.by_reason_tenant.items():
        per_reason[key.split("/", 1)[0]] += n
    # SessionsCleaned counts a record each time a delivery cleans it: a record redelivered
    # after a partial batch response (the records after a failed one) is counted again, its
    # archive object overwritten. So the archive never counts more than the metric.
    metrics = {r: int(v) for r, v in result.metrics_by_reason.items() if v}
    if set(per_reason) != set(metrics) or any(n > metrics[r] for r, n in per_reason.items()):
        result.mismatches.append(
            f"archive query: per reason {dict(per_reason)}, SessionsCleaned {metrics}"
        )
    totals = {
        "deleted-after-expiry": sum(int(r[1]) for r in swept),
        "ttl": sum(int(r[2]) for r in swept),
        "explicit": sum(int(r[3]) for r in swept),
    }
    if {k: v for k, v in totals.items() if v} != dict(per_reason):
        result.mismatches.append(f"archive query: swept-vs-ttl {totals} != {dict(per_reason)}")
    if result.history_incarnations < 1:
        result.mismatches.append("archive query: session-history found no removal of its id")


def expected_counts(
    emulator: Any, pipeline: Any, excluded_session_ids: Iterable[str], tenant_attribute: str
) -> dict[str, int]:
    """``{"<reason>/<tenant or ->": sessions}`` of every REMOVE record on the deployed stream,
    classified as the cleanup classifies it, less the excluded sessions' records."""
    from session_expiry_runtime.core.decode import decode_image, parse_record
    from session_expiry_runtime.records.classify import classify_removal
    from session_expiry_runtime.records.stream_records import to_lambda_record

    excluded = set(excluded_session_ids)
    ttl_attribute = pipeline.ttl_attribute
    counts = Counter[str]()
    for raw in _stream_records(emulator.client("dynamodbstreams"), pipeline.stream_arn):
        record = parse_record(to_lambda_record(raw, stream_arn=pipeline.stream_arn))
        if record.event_name != "REMOVE" or record.old_image is None:
            continue
        image = decode_image(record.old_image, "OldImage")
        keys = decode_image(record.keys or {}, "Keys")
        if excluded & {str(v) for v in keys.values()}:
            continue
        reason = classify_removal(
            user_identity=record.user_identity,
            ttl_value=image.get(ttl_attribute),
            approximate_creation_time=record.approximate_creation_time,
        ).reason
        tenant = image.get(tenant_attribute)
        counts[f"{reason}/{tenant if tenant is not None else '-'}"] += 1
    return dict(counts)


def _stream_records(streams: Any, stream_arn: str) -> Iterable[dict[str, Any]]:
    shards = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
    for shard in shards:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            yield from page.get("Records", [])
            if not page.get("Records"):
                break
            iterator = page.get("NextShardIterator")
