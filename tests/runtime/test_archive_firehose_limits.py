"""Firehose mode at its record limit (review of issue 24): a line longer than a Firehose record
may be (1,000 KiB) is archived with ``PutObject`` under the same partitions, and the table reads
it beside the delivered lines. Real cleanup (``process_batch``) against moto's S3 and Firehose
(with the emulator's dynamic partitioning, as in ``test_archive_firehose``).
"""

from __future__ import annotations

import json
from pathlib import Path

from runtime_support import Sandbox
from session_expiry_runtime.sinks.archive_delivery import MAX_RECORD_BYTES
from test_archive_firehose import (
    FIREHOSE_BUCKET,
    PREFIX,
    _cleaner,
    _create_stream,
    _lines,
    _objects,
    _run,
    firehose_partitions,  # noqa: F401 - the fixture
)

from cdk_session_expiry.archiving import archive_query as catalog
from cdk_session_expiry.testing import athena as local_athena


def test_a_line_over_firehoses_record_limit_is_put_as_an_object_and_queried(
    sandbox: Sandbox,
    firehose_partitions: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    sandbox.s3.create_bucket(Bucket=FIREHOSE_BUCKET)
    _create_stream(FIREHOSE_BUCKET)
    # 190,000 "é": 380 KB in the item, 1.1 MB in each JSON copy of the image ("\u00e9").
    big = sandbox.create_session("s-big", tenant="t", extra={"notes": {"S": "é" * 190_000}})
    small = sandbox.create_session("s-small", tenant="t")
    sandbox.read_stream()
    sandbox.delete("s-big")
    sandbox.delete("s-small")
    records = sandbox.removes()
    calls: list[str] = []
    cleaner = _cleaner(sandbox, FIREHOSE_BUCKET, firehose=True)
    cleaner.clients.firehose.meta.events.register(
        "before-call.firehose", lambda model, **_: calls.append(model.name)
    )

    assert _run(cleaner, records) == []

    assert sandbox.is_clean(big) and sandbox.is_clean(small)
    lines = _lines(_objects(sandbox, FIREHOSE_BUCKET))
    by_session = {json.loads(line)["session_id"]: key for key, ls in lines.items() for line in ls}
    assert set(by_session) == {"s-big", "s-small"}
    assert by_session["s-big"].endswith(".json")  # PutObject, not Firehose
    assert by_session["s-small"].endswith(".gz")  # delivered by Firehose
    (big_line,) = lines[by_session["s-big"]]
    assert len(big_line) > MAX_RECORD_BYTES
    partition = "/".join(by_session["s-small"].split("/")[:3])
    assert by_session["s-big"].startswith(partition + "/")  # the same date/tenant partition
    assert calls == ["PutRecordBatch"]  # one call, the small line only

    local_athena.download(sandbox.s3, FIREHOSE_BUCKET, PREFIX, tmp_path)
    con = local_athena.connect(tmp_path, PREFIX, tenant_partition=False)
    sql = {
        q.name: q.sql
        for q in catalog.named_queries(local_athena.QUOTED_TABLE, tenant_partition=False)
    }
    rows = local_athena.run(
        con, sql[catalog.QUERY_SESSIONS_PER_TENANT_PER_DAY], ["2000-01-01", "2999-12-31"]
    )
    assert [(row[1], row[3]) for row in rows] == [("t", 2)]
