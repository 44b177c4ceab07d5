"""The archive's named queries over tenants an item writer chooses (review of issue 24).

Whoever can write a session item chooses its tenant attribute: quotes, slashes, ``=``, non-ASCII
text, the empty string, or a value that imitates a marker of the key layout. The cleanup's
archive keys and lines for those sessions must keep each tenant in its own partition, and the
named queries exactly as the synthesized template holds them must answer for each tenant alone
under DuckDB (``cdk_session_expiry.testing.athena``), with and without the injected tenant
partition. Real cleanup (``process_batch``) against moto; real synth for the SQL.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template
from runtime_support import FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import process_batch
from session_expiry_runtime.sinks import archive

from cdk_session_expiry import SessionExpiry
from cdk_session_expiry.archiving import archive_query as catalog
from cdk_session_expiry.testing import athena as local_athena

BUCKET = "archive-bucket"
PREFIX = "archive/"
LONG = "L" * 300  # cut and hashed in its key segment
#: Imitates the cut-and-hashed segment of LONG: whoever knows a tenant id can compute its digest.
IMITATION = "L" * 100 + "~" + hashlib.sha256(LONG.encode()).hexdigest()
TENANTS = [
    "o'brien",
    'say "hi"',
    "a/b",
    "k=v",
    "Zürich-東京",
    "",
    "_none",
    "\x00empty",  # imitated the empty tenant's segment
    "..",
    "%41",
    LONG,
    IMITATION,
]


def _template_queries(*, tenant_scoped: bool) -> dict[str, str]:
    """The named queries' SQL as synthesized, the table reference pointed at DuckDB's view."""
    stack = Stack(App(), "Archive", env=Environment(account="111111111111", region="us-east-1"))
    SessionExpiry(
        stack,
        "Sessions",
        archive_bucket=s3.Bucket(stack, "Archive", enforce_ssl=True),
        archive_query=True,
        tenant_scoped_scratch=tenant_scoped,
        scratch_bucket=s3.Bucket(stack, "Scratch", enforce_ssl=True),
    )
    found: dict[str, str] = {}
    for resource in Template.from_stack(stack).find_resources("AWS::Athena::NamedQuery").values():
        props = resource["Properties"]
        sql = props["QueryString"]
        if isinstance(sql, dict):  # Fn::Join of the database and table tokens
            separator, parts = sql["Fn::Join"]
            sql = separator.join(p if isinstance(p, str) else "X" for p in parts)
        found[props["Name"]] = re.sub(
            r'FROM "[^"]*"\."[^"]*"', f"FROM {local_athena.QUOTED_TABLE}", sql
        )
    return found


@pytest.fixture(scope="module")
def queries() -> dict[bool, dict[str, str]]:
    return {scoped: _template_queries(tenant_scoped=scoped) for scoped in (False, True)}


@pytest.fixture
def archived(aws: None, tmp_path: Path) -> Path:
    """Each tenant's session cleaned through the real runner; the archive downloaded."""
    sandbox = Sandbox()
    sandbox.s3.create_bucket(Bucket=BUCKET)
    for i, tenant in enumerate(TENANTS):
        sandbox.create_session(f"s-{i}", tenant=tenant)
    sandbox.read_stream()
    for i in range(len(TENANTS)):
        sandbox.delete(f"s-{i}")
    cleaner = sandbox.cleaner(dataclasses.replace(sandbox.config, archive_bucket=BUCKET))
    response = process_batch(event(*sandbox.removes()), FakeContext(), cleaner)
    assert response == {"batchItemFailures": []}
    assert local_athena.download(sandbox.s3, BUCKET, PREFIX, tmp_path) == len(TENANTS)
    return tmp_path


def test_each_tenant_has_a_partition_of_its_own() -> None:
    segments = [archive.tenant_segment(t) for t in TENANTS]
    assert len(set(segments)) == len(TENANTS), dict(zip(TENANTS, segments, strict=True))
    assert all("/" not in s and "=" not in s and s != archive.NO_TENANT for s in segments)


def test_the_per_tenant_query_counts_each_tenant_once(
    archived: Path, queries: dict[bool, dict[str, str]]
) -> None:
    con = local_athena.connect(archived, PREFIX, tenant_partition=False)
    sql = queries[False][catalog.QUERY_SESSIONS_PER_TENANT_PER_DAY]
    rows = local_athena.run(con, sql, ["2000-01-01", "2999-12-31"])
    assert sorted((row[1], row[3]) for row in rows) == sorted((t, 1) for t in TENANTS)


def test_with_the_injected_tenant_partition_each_tenant_reads_only_its_own(
    archived: Path, queries: dict[bool, dict[str, str]]
) -> None:
    """Injected projection: a query names the tenant's key segment, and Athena reads only
    ``.../tenant=<segment>/``. Two tenants must never share that location."""
    con = local_athena.connect(archived, PREFIX, tenant_partition=True)
    per_tenant = queries[True][catalog.QUERY_SESSIONS_PER_TENANT_PER_DAY]
    history = queries[True][catalog.QUERY_SESSION_HISTORY]
    for i, tenant in enumerate(TENANTS):
        segment = archive.tenant_segment(tenant)
        rows = local_athena.run(con, per_tenant, [segment, "2000-01-01", "2999-12-31"])
        assert [(row[1], row[3]) for row in rows] == [(segment, 1)], tenant
        (found,) = local_athena.run(con, history, [segment, f"s-{i}"])
        assert found[0] == f"s-{i}"


def _lines(root: Path) -> list[dict[str, Any]]:
    import json

    return [json.loads(p.read_text()) for p in root.rglob("*.json")]


def test_every_line_is_one_json_object_with_its_format_version(archived: Path) -> None:
    files = list(archived.rglob("*.json"))
    assert all(f.read_bytes().count(b"\n") == 1 and f.read_bytes().endswith(b"\n") for f in files)
    lines = _lines(archived)
    assert {line["format_version"] for line in lines} == {archive.FORMAT_VERSION}
    assert sorted(line["tenant"] for line in lines) == sorted(TENANTS)
