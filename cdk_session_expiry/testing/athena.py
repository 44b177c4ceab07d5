"""The archive table of ``archive_query`` as Athena reads it, run locally by DuckDB.

moto records Athena queries but runs no SQL, and its CloudFormation creates no Glue table. This
module stands in for both over a copy of the archive:
[`download`][cdk_session_expiry.testing.athena.download] copies the objects under
the archive prefix (from moto's S3, or any S3) to local files with their keys, and
[`connect`][cdk_session_expiry.testing.athena.connect] opens a DuckDB connection with a view
``"archive"."sessions"`` that mirrors the
Glue table ``cdk_session_expiry.archiving.archive_query`` defines:

* one column per Glue column, same name, DuckDB's type for the Glue type, read by DuckDB's JSON
  reader as newline-delimited JSON (``.gz`` objects decompressed by their name, as Athena does);
  a field that is not a column is ignored, a column missing in a record is NULL — the Hive JSON
  SerDe's behaviour;
* the partition columns taken from the object key's ``date=``/``tenant=`` levels, as the
  table's ``storage.location.template`` makes Athena do, and only the days partition projection
  offers (``yyyy-MM-dd``, from its start): ``date=_unknown`` is never read.

Run a named query's SQL (``cdk_session_expiry.archiving.archive_query.named_queries``, or the
deployed
template's ``AWS::Athena::NamedQuery``) with [`run`][cdk_session_expiry.testing.athena.run] and the
execution parameters. The SQL
is the subset Athena (Trino) and DuckDB share; what differs from Athena: no partition pruning
(every object is read), DuckDB's JSON reader instead of the Hive SerDe, no workgroup,
encryption or IAM. Needs ``duckdb`` (PyPI; in the ``[testing]`` extra).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cdk_session_expiry.archiving import archive_query as catalog

#: DuckDB's name for each Glue column type of the table.
DUCKDB_TYPES = {"int": "INTEGER", "bigint": "BIGINT", "double": "DOUBLE", "string": "VARCHAR"}
#: The schema and view that stand in for the Glue database and table in the SQL.
DATABASE, TABLE = "archive", "sessions"
QUOTED_TABLE = f'"{DATABASE}"."{TABLE}"'


def download(s3: Any, bucket: str, prefix: str, root: Path) -> int:
    """Copy every object under ``prefix`` to ``root``/<its key>; how many."""
    count = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            target = root / obj["Key"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
            count += 1
    return count


def connect(root: Path, prefix: str, *, tenant_partition: bool) -> Any:
    """A DuckDB connection whose view ``"archive"."sessions"`` reads the archive under
    ``root/prefix`` as the Glue table does (see the module docstring)."""
    import duckdb

    columns = {
        name: DUCKDB_TYPES[kind]
        for name, kind in catalog.table_columns(tenant_partition=tenant_partition)
    }
    files = str(root / prefix) + "/**/*"
    partitions = ", ".join(
        f"regexp_extract(filename, '/{key}=([^/]+)/', 1) AS \"{key}\""
        for key in catalog.partition_keys(tenant_partition=tenant_partition)
    )
    con = duckdb.connect()
    con.execute(f'CREATE SCHEMA "{DATABASE}"')
    # Identifiers and the path are this module's own constants and a temporary directory (a
    # view cannot take parameters): nothing from outside reaches the SQL text.
    path = files.replace("'", "''")
    view = (
        f"CREATE VIEW {QUOTED_TABLE} AS SELECT * FROM ("  # noqa: S608
        f"SELECT * EXCLUDE (filename), {partitions} FROM read_json('{path}', format = "
        f"'newline_delimited', columns = {_struct(columns)}, filename = true, "
        "hive_partitioning = false)"
        ") WHERE regexp_full_match(\"date\", '\\d{4}-\\d{2}-\\d{2}') "
        f"AND \"date\" >= '{catalog.DEFAULT_START}'"
    )
    con.execute(view)
    return con


def _struct(columns: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"'{name}': '{kind}'" for name, kind in columns.items()) + "}"


def run(con: Any, sql: str, parameters: Sequence[object]) -> list[tuple[Any, ...]]:
    """Run one named query's SQL with its execution parameters (``?``), as Athena would."""
    return [tuple(row) for row in con.execute(sql, list(parameters)).fetchall()]
