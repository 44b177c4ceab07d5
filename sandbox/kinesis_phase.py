"""Kinesis phase (issue 23): the deployed cleanup code fed by a Kinesis change stream, late.

Sessions are created and ended by the deployed application's ``SessionStore`` (a KMS grant and
scratch objects each). Their changes are read from the deployed table's DynamoDB stream and
written into a Kinesis stream of the emulator as Kinesis Data Streams for DynamoDB writes them
(``stream_records.to_kinesis_change``, ``ApproximateCreationDateTime`` in milliseconds): moto
5.2.5 has Kinesis but not the table's Kinesis streaming destination, so this phase forwards what
the destination would. Each ``REMOVE`` is stamped 30 hours in the past (a cleanup paused longer
than a DynamoDB stream keeps records), written twice, and the whole lot in reverse order. Each
shard's records are one batch to the deployed function's code (``pipeline.local_lambda()``),
as a Kinesis event source mapping delivers them.

Checks: no batch item failure; every session's grant retired and scratch objects deleted;
``SessionsCleaned`` rose by exactly the number of sessions (each cleaned once), the duplicates
skipped (``DuplicateInBatch``). The sample app deploys the DynamoDB stream source (the
Kinesis source's template is checked by ``tests/infra/test_change_source.py``): the phase runs
the same code on the Kinesis path. Its sessions' REMOVEs stay on the DynamoDB stream unread:
this phase runs last.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from session_expiry_runtime.records import stream_records

from cdk_session_expiry import _runtime_contract as contract

from .two_regions import stream_records_of

STREAM = "sandbox-session-changes"
SESSIONS = 6
PAUSED_HOURS = 30


def _batches(kinesis: Any, stream_arn: str) -> list[list[dict[str, Any]]]:
    batches = []
    for shard in kinesis.list_shards(StreamName=STREAM)["Shards"]:
        iterator = kinesis.get_shard_iterator(
            StreamName=STREAM, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records = kinesis.get_records(ShardIterator=iterator, Limit=10_000)["Records"]
        if records:
            batches.append([_lambda_record(stream_arn, shard["ShardId"], r) for r in records])
    return batches


def _lambda_record(stream_arn: str, shard_id: str, record: dict[str, Any]) -> dict[str, Any]:
    return {
        "eventSource": "aws:kinesis",
        "eventName": "aws:kinesis:record",
        "eventID": f"{shard_id}:{record['SequenceNumber']}",
        "eventSourceARN": stream_arn,
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": record["PartitionKey"],
            "sequenceNumber": record["SequenceNumber"],
            "data": base64.b64encode(record["Data"]).decode("ascii"),
        },
    }


def run(
    *,
    emulator: Any,
    pipeline: Any,
    store: Any,
    bucket: str,
    grantee: str,
    say: Callable[[str], None],
) -> tuple[dict[str, Any], list[str]]:
    """Run the phase; returns its summary and the mismatches."""
    s3, kms, kinesis = emulator.client("s3"), emulator.client("kms"), emulator.client("kinesis")
    key_arn = pipeline.function.environment[contract.ENV_GRANT_KEY_ARN]
    kinesis.create_stream(StreamName=STREAM, StreamModeDetails={"StreamMode": "ON_DEMAND"})
    stream_arn = kinesis.describe_stream(StreamName=STREAM)["StreamDescription"]["StreamARN"]
    sessions = {}
    for i in range(SESSIONS):
        session_id = f"kinesis-{i}"
        store.create(session_id, ttl=timedelta(hours=1))
        s = store.create_grant(session_id, grantee_principal=grantee, operations=["Decrypt"])
        keys = [f"{s.scratch_prefix}{name}" for name in ("a.txt", "b/c.bin")]
        for key in keys:
            s3.put_object(Bucket=bucket, Key=key, Body=b"x")
        sessions[session_id] = (s.grant_id, s.scratch_prefix)
        store.end(session_id)
    pk = store.config.partition_key
    changes = stream_records_of(
        emulator.client("dynamodbstreams"), pipeline.stream_arn, set(sessions), pk
    )
    puts = 0
    for record in reversed(changes):  # out of order, as Kinesis may deliver them
        removed = record["eventName"] == "REMOVE"
        at_ms = int(record["dynamodb"]["ApproximateCreationDateTime"].timestamp() * 1000)
        change = stream_records.to_kinesis_change(
            record,
            table_name=pipeline.table_name,
            region=record.get("awsRegion", "us-east-1"),
            created_at_ms=at_ms - PAUSED_HOURS * 3_600_000 if removed else at_ms,
        )
        for _ in range(2 if removed else 1):  # every REMOVE more than once
            kinesis.put_record(
                StreamName=STREAM,
                Data=json.dumps(change).encode("utf-8"),
                PartitionKey=json.dumps(change["dynamodb"]["Keys"], sort_keys=True),
            )
            puts += 1
    metrics = pipeline.metrics
    cleaned_before = metrics.total(contract.METRIC_SESSIONS_CLEANED)
    duplicates_before = metrics.total(
        contract.METRIC_RECORDS_SKIPPED, Cause=contract.CAUSE_DUPLICATE
    )
    # The table name the construct sets on the cleanup of a Kinesis change source: every REMOVE
    # that came through Kinesis is read back from it first (kinesis_removals).
    handler = pipeline.local_lambda({contract.ENV_TABLE_NAME: pipeline.table_name})
    batches = _batches(kinesis, stream_arn)
    try:
        failures = [
            f for batch in batches for f in handler({"Records": batch})["batchItemFailures"]
        ]
    finally:
        handler.close()
    grants = {
        g["GrantId"]
        for page in kms.get_paginator("list_grants").paginate(KeyId=key_arn)
        for g in page["Grants"]
    }
    left = {
        sid: s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("KeyCount", 0)
        for sid, (_, prefix) in sessions.items()
    }
    summary = {
        "sessions": len(sessions),
        "records_put": puts,
        "batches": len(batches),
        "batch_item_failures": len(failures),
        "cleaned": int(metrics.total(contract.METRIC_SESSIONS_CLEANED) - cleaned_before),
        "duplicates_skipped": int(
            metrics.total(contract.METRIC_RECORDS_SKIPPED, Cause=contract.CAUSE_DUPLICATE)
            - duplicates_before
        ),
        "grants_retired": sum(1 for grant, _ in sessions.values() if grant not in grants),
        "prefixes_emptied": sum(1 for count in left.values() if not count),
        "paused_hours": PAUSED_HOURS,
    }
    expected = {
        "batch_item_failures": 0,
        "cleaned": SESSIONS,
        "duplicates_skipped": SESSIONS,
        "grants_retired": SESSIONS,
        "prefixes_emptied": SESSIONS,
    }
    mismatches = [
        f"kinesis: {name} {summary[name]}, expected {value}"
        for name, value in expected.items()
        if summary[name] != value
    ]
    say(report_line(summary))
    return summary, mismatches


def report_line(summary: dict[str, Any]) -> str:
    """One line of the sandbox report."""
    return (
        f"kinesis source    {summary['sessions']} sessions ended, REMOVEs {summary['paused_hours']}"
        f" h old (past a DynamoDB stream's 24 h), each twice, in reverse: "
        f"{summary['records_put']} records in {summary['batches']} shard batches -> cleaned "
        f"{summary['cleaned']}, duplicates skipped {summary['duplicates_skipped']}, grants "
        f"retired {summary['grants_retired']}, prefixes emptied {summary['prefixes_emptied']}, "
        f"batch item failures {summary['batch_item_failures']}"
    )
