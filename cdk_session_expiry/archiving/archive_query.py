"""A queryable archive: a Glue table over the archive prefix, an Athena workgroup and named
queries (``archive_query=True``, only with ``archive_bucket``).

**Table** (aws-cdk-lib's stable ``aws_glue.S3Table`` in a new ``aws_glue.Database``): one
column per field of the archived record (``session_expiry_runtime.sinks.archive``, format 2: each a
JSON scalar, lowercase), read by the Hive JSON SerDe (``org.apache.hive.hcatalog.data.JsonSerDe``,
one JSON object per line; Amazon Athena User Guide, "JSON SerDe libraries"; the guide warns that
the OpenX SerDe's results "can be non-deterministic"). Its location is the archive prefix, and
**partition projection** computes the partitions from table properties, so there is no crawler
and no ``MSCK REPAIR`` (Athena User Guide, "Partition projection"; "with projection on,
partitions registered in the catalog are ignored"):

* ``date`` (string): projection type ``date``, format ``yyyy-MM-dd``, range
  ``<archive_query_start>,NOW``, one day steps — the key's ``date=YYYY-MM-DD`` level. Records
  without a removal time (``date=_unknown``) are outside the range: no engine of Athena's sees
  them (none exist from Lambda, which always sets ``ApproximateCreationDateTime``).
* ``tenant`` (string), only with ``tenant_scoped_scratch``: projection type ``injected`` — the
  key's ``tenant=`` level, so a query for one tenant reads only that tenant's objects; every
  query then names its tenant(s) (``WHERE tenant = ...``), as injected projection requires.
  The value is the key's segment: the tenant id percent-encoded (RFC 3986 unreserved characters
  stay, so ordinary ids are unchanged), ``_none`` without a tenant. Without
  ``tenant_scoped_scratch`` the tenant is a column of the record, and queries group by it
  freely.

``storage.location.template`` is ``s3://<bucket>/<prefix>date=${date}/`` (and
``tenant=${tenant}/``): Athena reads every object under a partition's location, so the session
key and sequence number levels below it, and Firehose's objects, are all read.

**Workgroup** (``AWS::Athena::WorkGroup``): its result location is
``s3://<archive bucket>/<archive prefix without its slash>-query-results/`` encrypted like the
bucket (``SSE_KMS`` with the bucket's key, else ``SSE_S3``), with
``EnforceWorkGroupConfiguration`` so no client setting can send results elsewhere or
unencrypted, and CloudWatch metrics on. Results expire after 30 days (a lifecycle rule, on a
bucket of this app).

**Named queries** (``AWS::Athena::NamedQuery``, in the workgroup and database; ``?`` are
execution parameters): `named_queries`. They count ``DISTINCT sequence_number``: a record
the event source mapping redelivered is archived again in Firehose mode.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, Names
from aws_cdk import aws_athena as athena
from aws_cdk import aws_glue as glue
from aws_cdk import aws_s3 as s3
from constructs import Construct

from .. import lifecycle

#: The archived record's fields, in the record's format 2, as Glue columns (name, Glue type).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("format_version", "int"),
    ("session_id", "string"),
    ("session_partition", "string"),
    ("session_key", "string"),
    ("incarnation", "string"),
    ("tenant", "string"),
    ("reason", "string"),
    ("removed_at", "bigint"),
    ("expires_at", "bigint"),
    ("ttl_lag_seconds", "double"),
    ("sequence_number", "string"),
    ("event_id", "string"),
    ("partition_date", "string"),
    ("partition_tenant", "string"),
    ("old_image", "string"),
    ("dynamodb_old_image", "string"),
)
_GLUE_TYPES = {
    "int": glue.Schema.INTEGER,
    "bigint": glue.Schema.BIG_INT,
    "double": glue.Schema.DOUBLE,
    "string": glue.Schema.STRING,
}
#: The first day partition projection offers (``projection.date.range``): before the archive
#: existed there is nothing to read, and a later start only shortens Athena's partition list.
#: The first day partition projection offers (``yyyy-MM-dd``); days before it are never read.
DEFAULT_START = "2024-01-01"
QUERY_RESULTS_RETENTION = Duration.days(30)
#: Named query name: every archived removal of one session id.
QUERY_SESSION_HISTORY = "session-history"
#: Named query name: sessions cleaned per day, tenant and reason.
QUERY_SESSIONS_PER_TENANT_PER_DAY = "sessions-per-tenant-per-day"
#: Named query name: per day, sessions swept, expired by time to live, and ended.
QUERY_SWEPT_VS_TTL = "swept-vs-ttl-expired"


def table_columns(*, tenant_partition: bool) -> tuple[tuple[str, str], ...]:
    """The table's data columns: `COLUMNS`, without ``tenant`` when it is the partition
    column (a Glue table cannot have both)."""
    return tuple(c for c in COLUMNS if not (tenant_partition and c[0] == "tenant"))


def partition_keys(*, tenant_partition: bool) -> tuple[str, ...]:
    """The table's partition columns, in key order."""
    return ("date", "tenant") if tenant_partition else ("date",)


@dataclass(frozen=True)
class NamedQuery:
    """One ``AWS::Athena::NamedQuery`` of the workgroup: its name (``QUERY_*``), description
    and SQL (``?`` are execution parameters)."""

    name: str
    description: str
    sql: str


def named_queries(table: str, *, tenant_partition: bool) -> tuple[NamedQuery, ...]:
    """The named queries over ``table`` (e.g. ``"db"."table"``, already quoted).

    * ``session-history``: every archived removal of one session id (its incarnations, reused
      ids included), oldest first. Parameters: the session id.
    * ``sessions-per-tenant-per-day``: sessions cleaned per day, tenant and reason between two
      days. Parameters: first and last day (``YYYY-MM-DD``).
    * ``swept-vs-ttl-expired``: per day, sessions deleted after expiry (the expiry sweeper),
      deleted by time to live, and ended explicitly. Parameters: first and last day.

    With ``tenant_partition`` each also takes the tenant as its first parameter (injected
    projection needs it). The SQL is the subset Athena (Trino) and DuckDB share, so the tests
    run these exact strings against the sandbox's archive.
    """
    tenant = "tenant = ? AND " if tenant_partition else ""
    history = (
        "SELECT DISTINCT session_id, session_partition, incarnation, tenant, reason, removed_at, "
        'expires_at, ttl_lag_seconds, sequence_number, "date"\n'
        f"FROM {table}\n"
        f"WHERE {tenant}session_id = ?\n"
        "ORDER BY removed_at, sequence_number"
    )
    per_tenant = (
        'SELECT "date", tenant, reason, count(DISTINCT sequence_number) AS sessions\n'
        f"FROM {table}\n"
        f'WHERE {tenant}"date" BETWEEN ? AND ?\n'
        'GROUP BY "date", tenant, reason\n'
        'ORDER BY "date", tenant, reason'
    )
    swept = (
        'SELECT "date",\n'
        "  count(DISTINCT CASE WHEN reason = 'deleted-after-expiry' THEN sequence_number END)"
        " AS swept,\n"
        "  count(DISTINCT CASE WHEN reason = 'ttl' THEN sequence_number END) AS ttl_expired,\n"
        "  count(DISTINCT CASE WHEN reason = 'explicit' THEN sequence_number END) AS ended\n"
        f"FROM {table}\n"
        f'WHERE {tenant}"date" BETWEEN ? AND ?\n'
        'GROUP BY "date"\n'
        'ORDER BY "date"'
    )
    return (
        NamedQuery(QUERY_SESSION_HISTORY, "A session's archived history (session id)", history),
        NamedQuery(
            QUERY_SESSIONS_PER_TENANT_PER_DAY,
            "Sessions cleaned per day, tenant and reason (first day, last day)",
            per_tenant,
        ),
        NamedQuery(
            QUERY_SWEPT_VS_TTL,
            "Sessions swept vs expired by time to live vs ended, per day (first day, last day)",
            swept,
        ),
    )


def results_prefix(archive_prefix: str) -> str:
    """Where the workgroup writes query results: beside the archive, never under it (the table
    would read them)."""
    return f"{archive_prefix.rstrip('/')}-query-results/"


def check_archive_query_props(*, archive_query: bool, archive_bucket: s3.IBucket | None) -> None:
    """Raises:
    ValueError: ``archive_query`` without ``archive_bucket``."""
    if archive_query and archive_bucket is None:
        raise ValueError(
            "archive_query=True is set without archive_bucket: the Glue table and the Athena "
            "workgroup read the archive; expected an archive_bucket, or archive_query=False"
        )


class ArchiveQuery(Construct):
    """The Glue database and table over the archive, the Athena workgroup and named queries.

    Args:
        bucket: the archive bucket.
        prefix: the archive prefix (ends in ``/``).
        tenant_partition: project the ``tenant=`` level as a partition (``injected``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        bucket: s3.IBucket,
        prefix: str,
        tenant_partition: bool,
    ) -> None:
        super().__init__(scope, id)
        #: The Glue database of the archive table.
        self.database = glue.Database(self, "Database", description="Archived sessions")
        #: The table over the archive prefix (partition projection, Hive JSON SerDe).
        self.table = self._table(bucket, prefix, tenant_partition)
        self.results_prefix = results_prefix(prefix)
        #: The Athena workgroup whose result location is enforced and encrypted.
        self.workgroup = self._workgroup(bucket)
        quoted = f'"{self.database.database_name}"."{self.table.table_name}"'
        #: The named queries (`named_queries`), by name.
        self.named_queries = {
            q.name: athena.CfnNamedQuery(
                self,
                f"Query-{q.name}",
                name=q.name,
                description=q.description,
                database=self.database.database_name,
                work_group=self.workgroup.ref,
                query_string=q.sql,
            )
            for q in named_queries(quoted, tenant_partition=tenant_partition)
        }
        if lifecycle.can_add_lifecycle_rule(bucket):
            bucket.add_lifecycle_rule(  # type: ignore[attr-defined]
                id=f"session-expiry-query-results-{self.node.addr}",
                enabled=True,
                prefix=self.results_prefix,
                expiration=QUERY_RESULTS_RETENTION,
                abort_incomplete_multipart_upload_after=lifecycle.ABORT_INCOMPLETE_MULTIPART_AFTER,
            )

    def _table(self, bucket: s3.IBucket, prefix: str, tenant_partition: bool) -> glue.S3Table:
        keys = partition_keys(tenant_partition=tenant_partition)
        template = f"s3://{bucket.bucket_name}/{prefix}" + "".join(f"{k}=${{{k}}}/" for k in keys)
        projection = {
            "date": glue.PartitionProjectionConfiguration.date(
                min=DEFAULT_START,
                max="NOW",
                format="yyyy-MM-dd",
                step=glue.DateProjectionStep(interval=1, interval_unit=glue.DateIntervalUnit.DAYS),
            )
        }
        if tenant_partition:
            projection["tenant"] = glue.PartitionProjectionConfiguration.injected()
        return glue.S3Table(
            self,
            "Table",
            database=self.database,
            description="Cleaned sessions archived by cdk-session-expiry (JSON lines, format 2)",
            storage=glue.S3TableStorage.from_bucket(bucket),
            s3_prefix=prefix,
            columns=[
                glue.Column(name=name, type=_GLUE_TYPES[kind])
                for name, kind in table_columns(tenant_partition=tenant_partition)
            ],
            partition_keys=[glue.Column(name=k, type=glue.Schema.STRING) for k in keys],
            data_format=glue.DataFormat(
                input_format=glue.InputFormat.TEXT,
                output_format=glue.OutputFormat.HIVE_IGNORE_KEY_TEXT,
                serialization_library=glue.SerializationLibrary.HIVE_JSON,
            ),
            partition_projection=projection,
            # The objects are SSE-S3/SSE-KMS (the bucket's): "No additional table properties
            # need to be specified ... Amazon S3 handles decrypting the SSE objects
            # automatically"; has_encrypted_data=true would declare client-side (CSE-KMS)
            # encryption (Athena User Guide, "Create tables based on encrypted datasets").
            has_encrypted_data=False,
            parameters={"storage.location.template": template, "classification": "json"},
        )

    def _workgroup(self, bucket: s3.IBucket) -> athena.CfnWorkGroup:
        key = bucket.encryption_key
        encryption = athena.CfnWorkGroup.EncryptionConfigurationProperty(
            encryption_option="SSE_KMS" if key is not None else "SSE_S3",
            kms_key=key.key_arn if key is not None else None,
        )
        return athena.CfnWorkGroup(
            self,
            "WorkGroup",
            # Workgroup names are unique per account and Region: the construct path's.
            name=Names.unique_resource_name(self, max_length=128, separator="-"),
            description="Queries over the session archive (cdk-session-expiry)",
            recursive_delete_option=True,
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=f"s3://{bucket.bucket_name}/{self.results_prefix}",
                    encryption_configuration=encryption,
                ),
            ),
        )
