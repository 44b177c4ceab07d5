"""Fault injection: 1,000 expired sessions through an event-source-mapping-like loop.

Throttling, 5xx (some after the server acted) and connection errors are injected into every
cleanup call (DeleteConnection, RetireGrant, ListObjectsV2, DeleteObjects, and the ownership
records' TransactWriteItems) at 20 %, seeded. Every session is written as ``SessionStore``
writes it with ownership records (an incarnation, a claim for its connection and its grant). The
loop below behaves like the Lambda event source mapping for DynamoDB streams with
ReportBatchItemFailures: batches of 100 in sequence order, checkpoint at the lowest failed
sequence number, bisect of what remains (no retry consumed), bounded retries, then the
on-failure destination (an SQS queue that, as with AWS, receives only the batch's metadata).
The operator's redrive then re-reads those records from the stream by sequence number (within
the stream's 24 h retention) and hands them to the function once more.

Set-up goes straight into moto's backends where thousands of set-up calls would dominate the
run (grants, connections, objects); every cleanup call is a real boto3 call.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
from moto.apigatewaymanagementapi.models import apigatewaymanagementapi_backends
from moto.core import DEFAULT_ACCOUNT_ID
from moto.kms.models import kms_backends
from ownership_support import OWNERSHIP_TABLE, claim_item
from runtime_faults import FaultInjector
from runtime_support import (
    APP_ROLE,
    BUCKET,
    CLEANUP_ROLE,
    REGION,
    SESSION,
    TABLE,
    FakeContext,
    Sandbox,
    event,
)
from session_expiry_runtime.cleanup.cleaner import process_batch
from session_expiry_runtime.core.grant_names import grant_name
from session_expiry_runtime.core.ownership import KIND_CONNECTION, KIND_GRANT
from session_expiry_runtime.core.prefixes import build_scratch_prefix

EXPIRED = 1_000
LIVE = 200
BATCH_SIZE = 100
MAX_RETRY_ATTEMPTS = 3
FAULT_RATE = 0.20
SEED = 20240601
#: Small per-session scratch (odd keys and the one-by-one DeleteObject path are covered in
#: test_cleanup_kinds.py; here every extra call per session costs a second).
OBJECT_NAMES = ("state.json", "up load+%ü.bin")


def esm_loop(
    records: list[dict[str, Any]],
    invoke: Callable[[dict[str, Any]], dict[str, Any]],
    send_to_failure_destination: Callable[[dict[str, Any]], None],
    stats: Counter[str],
) -> None:
    """Deliver ``records`` (one shard, in order) the way the event source mapping does."""
    position = 0
    size = BATCH_SIZE
    retries: Counter[str] = Counter()
    while position < len(records):
        batch = records[position : position + size]
        sequence_numbers = [r["dynamodb"]["SequenceNumber"] for r in batch]
        stats["invocations"] += 1
        try:
            response = invoke(event(*batch))
            failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
            # Lambda fails the whole batch on an identifier that is not in it; ours never is.
            assert all(f in sequence_numbers for f in failed), failed
            first_failed = min((sequence_numbers.index(f) for f in failed), default=None)
        except Exception:  # a function error: the whole batch failed
            stats["function_errors"] += 1
            first_failed = 0
        if first_failed is None:
            position += len(batch)
            size = BATCH_SIZE
            continue
        stats["partial_failures"] += 1
        position += first_failed  # checkpoint: everything before the lowest failure is done
        remaining = len(batch) - first_failed
        head = sequence_numbers[first_failed]
        if remaining > 1:
            size = math.ceil(remaining / 2)  # bisect; does not consume a retry
            stats["bisects"] += 1
            continue
        retries[head] += 1
        stats["retries"] += 1
        if retries[head] > MAX_RETRY_ATTEMPTS:
            send_to_failure_destination(
                {
                    "requestContext": {"condition": "RetryAttemptsExhausted"},
                    "DDBStreamBatchInfo": {
                        "startSequenceNumber": head,
                        "endSequenceNumber": sequence_numbers[-1],
                        "batchSize": remaining,
                    },
                }
            )
            stats["sent_to_failure_destination"] += 1
            position += remaining
            size = BATCH_SIZE


def _seed(
    sandbox: Sandbox, n: int, prefix_tag: str, expires: Callable[[int], int]
) -> list[dict[str, Any]]:
    kms = kms_backends[DEFAULT_ACCOUNT_ID][REGION]
    connections = apigatewaymanagementapi_backends[DEFAULT_ACCOUNT_ID][REGION].connections
    sessions = []
    claims: list[dict[str, Any]] = []
    for i in range(n):
        sid = f"{prefix_tag}-{i}"
        connection_id = f"{sid}-c="
        connections[quote(connection_id, safe="-_.~")]  # defaultdict: opens the connection
        prefix = build_scratch_prefix("sessions/", sid)
        # Named as SessionStore.create_grant names it (moto's backend: set-up speed).
        name = grant_name({"pk": sid}, prefix.rstrip("/").rsplit("/", 1)[-1])
        grant_id, grant_token = kms.create_grant(
            sandbox.key_arn, APP_ROLE, ["Decrypt"], name, {}, CLEANUP_ROLE
        )
        sandbox.put_objects([prefix + name for name in OBJECT_NAMES])
        incarnation = prefix.rstrip("/").rsplit("/", 1)[-1]
        claims.extend(
            claim_item(kind, rid, key={"pk": sid}, incarnation=incarnation)
            for kind, rid in ((KIND_CONNECTION, connection_id), (KIND_GRANT, grant_id))
        )
        sessions.append(
            {
                "sid": sid,
                "connection": connection_id,
                "grant": grant_id,
                "prefix": prefix,
                "item": {
                    "pk": {"S": sid},
                    "expiresAt": {"N": str(expires(i))},
                    "connectionId": {"S": connection_id},
                    "grantId": {"S": grant_id},
                    "grantToken": {"S": grant_token},
                    "scratchPrefix": {"S": prefix},
                    "incarnation": {"S": incarnation},
                },
            }
        )
    for table, items in ((TABLE, [s["item"] for s in sessions]), (OWNERSHIP_TABLE, claims)):
        for start in range(0, len(items), 25):
            sandbox.ddb.batch_write_item(
                RequestItems={
                    table: [{"PutRequest": {"Item": i}} for i in items[start : start + 25]]
                }
            )
    return sessions


def test_1000_sessions_with_20_percent_faults_leak_nothing_and_touch_no_live_session(
    aws: None, no_backoff: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    sandbox = Sandbox(max_workers=4)
    now = int(time.time())
    expired = _seed(sandbox, EXPIRED, "exp", lambda i: now - 3600 - i)
    live = _seed(sandbox, LIVE, "live", lambda i: now + 86_400)
    # Expire: a mix of TTL deletes (identity added, as AWS documents), replicated TTL deletes
    # (no identity) and explicit deletes by the application.
    for start in range(0, EXPIRED, 25):
        sandbox.ddb.batch_write_item(
            RequestItems={
                TABLE: [
                    {"DeleteRequest": {"Key": {"pk": {"S": s["sid"]}}}}
                    for s in expired[start : start + 25]
                ]
            }
        )
    ttl_ids = {s["sid"] for i, s in enumerate(expired) if i % 2 == 0}
    records = sandbox.lambda_records(ttl_deletes=ttl_ids)
    assert sum(r["eventName"] == "REMOVE" for r in records) == EXPIRED
    assert len(records) == 2 * EXPIRED + LIVE  # INSERTs are delivered too, and skipped

    cleaner = sandbox.cleaner()
    faults = FaultInjector(FAULT_RATE, SEED)
    clients = cleaner.clients
    for client in (clients.apigateway, clients.kms, clients.s3, clients.ownership):
        faults.attach(client)
    sqs = SESSION.client("sqs")
    queue_url = sqs.create_queue(QueueName="cleanup-on-failure")["QueueUrl"]
    stats: Counter[str] = Counter()
    emf_lines: list[str] = []
    flush = cleaner.metrics.flush
    monkeypatch.setattr(cleaner.metrics, "flush", lambda write=None: flush(emf_lines.append))

    def invoke(batch_event: dict[str, Any]) -> dict[str, Any]:
        return process_batch(batch_event, FakeContext(), cleaner)

    def send(message: dict[str, Any]) -> None:
        sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(message))

    esm_loop(records, invoke, send, stats)

    # Redrive from the on-failure queue: re-read the records by sequence number, no faults.
    faults.enabled = False
    by_sequence = {r["dynamodb"]["SequenceNumber"]: i for i, r in enumerate(records)}
    while True:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get(
            "Messages", []
        )
        if not messages:
            break
        for message in messages:
            info = json.loads(message["Body"])["DDBStreamBatchInfo"]
            first = by_sequence[info["startSequenceNumber"]]
            last = by_sequence[info["endSequenceNumber"]]
            replay = records[first : last + 1]
            stats["redriven_records"] += len(replay)
            assert invoke(event(*replay)) == {"batchItemFailures": []}
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])

    # Verify through the AWS APIs (connections: moto's backend, the API has no listing).
    open_connections = set(apigatewaymanagementapi_backends[DEFAULT_ACCOUNT_ID][REGION].connections)
    grants = {g["GrantId"] for g in sandbox.kms.list_grants(KeyId=sandbox.key_arn)["Grants"]}
    keys: set[str] = set()
    for page in sandbox.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        keys.update(o["Key"] for o in page.get("Contents", []))

    def leftovers(s: dict[str, Any]) -> int:
        return (
            (quote(s["connection"], safe="-_.~") in open_connections)
            + (s["grant"] in grants)
            + sum(k.startswith(s["prefix"]) for k in keys)
        )

    leaked = sum(leftovers(s) > 0 for s in expired)
    wrongly_deleted = sum(leftovers(s) != 1 + 1 + len(OBJECT_NAMES) for s in live)
    totals: Counter[str] = Counter()
    for line in emf_lines:
        doc = json.loads(line)
        for metric in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
            name = metric["Name"]
            value = doc[name]
            label = next(
                (f"{name}[{doc[d]}]" for d in ("Reason", "Action", "Cause") if d in doc), name
            )
            totals[label] += len(value) if isinstance(value, list) else value
    elapsed = time.monotonic() - started
    with capsys.disabled():
        print(
            f"\nfault injection: {EXPIRED} expired + {LIVE} live sessions, {len(records)} records; "
            f"{faults.calls} cleanup calls, injected {dict(faults.injected)}; ESM {dict(stats)}; "
            f"metrics {dict(sorted(totals.items()))}; "
            f"leaked={leaked} wrongly_deleted={wrongly_deleted}; {elapsed:.1f}s"
        )
    assert sum(faults.injected.values()) > 0.15 * faults.calls
    assert leaked == 0
    assert wrongly_deleted == 0
    assert len(keys) == LIVE * len(OBJECT_NAMES)
    # Re-deliveries after a checkpoint clean some sessions twice (idempotently): at least once.
    cleaned = sum(v for k, v in totals.items() if k.startswith("SessionsCleaned["))
    assert cleaned >= EXPIRED
    assert totals["RecordsSkipped[NotRemove]"] >= EXPIRED + LIVE
