"""Archive per object vs Firehose (issue 24): calls, CPU and cost per 1,000 sessions.

The cleanup with only the archive configured (the gate step, nothing else) cleans 1,000
removed sessions — 10 invocations of 100 records, each old image about 1 KB, the construct's
defaults otherwise — once with ``PutObject`` per session and once with ``PutRecordBatch`` to a
Firehose stream. moto's server answers in **another process** (``python -m moto.server``), so
``time.process_time()`` of this process is the cleanup's own CPU: building the lines, botocore
signing, serialising and parsing. Calls are counted from botocore's ``before-call`` events.

Cost per 1,000 sessions, us-east-1 prices (:data:`PRICES`, read from the AWS pricing pages
named there on :data:`PRICES_CHECKED`; re-check before relying on them):

* Lambda: CPU seconds x 1.769 GB (the default 1,769 MiB is one vCPU: CPU-bound work is billed
  about its CPU time) x the arm64 GB-second price;
* per object: one S3 ``PUT`` per session;
* Firehose: ingestion per GB **rounded up to 5 KB per record**, dynamic partitioning per GB
  processed and per object delivered (one object per partition and 5-minute buffer: the table
  assumes the 1,000 sessions fall into 10 such date/tenant buffers), and the S3 ``PUT`` of those
  objects. JQ processing hours (0.07 USD an hour of jq time) are left out: microseconds per
  record.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from decimal import Decimal
from typing import Any

SESSIONS = 1_000
BATCH = 100
#: Objects Firehose delivers for the 1,000 sessions (partition x buffer windows); see above.
FIREHOSE_OBJECTS = 10
PRICES_CHECKED = "2026-12-02"
PRICES = {
    # AWS Lambda pricing: arm64, first 6 billion GB-seconds a month.
    "lambda_gb_second": 0.0000133334,
    # Amazon S3 pricing: S3 Standard PUT, COPY, POST, LIST requests, per 1,000.
    "s3_put_per_1000": 0.005,
    # Amazon Data Firehose pricing: Direct PUT ingestion, first 500 TB a month, per GB
    # (billed in 5 KB increments per record).
    "firehose_ingest_gb": 0.029,
    # Amazon Data Firehose pricing: dynamic partitioning, per GB processed and per 1,000
    # objects delivered.
    "dynamic_partitioning_gb": 0.020,
    "dynamic_partitioning_per_1000_objects": 0.005,
}
LAMBDA_GB = 1.769


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _records(start: int, count: int) -> list[dict[str, Any]]:
    now = 1_790_000_000
    records = []
    for i in range(start, start + count):
        image = {
            "pk": {"S": f"s-{i}"},
            "expiresAt": {"N": str(now - 60)},
            "tenantId": {"S": f"tenant-{i % 10}"},
            "incarnation": {"S": f"{i:032x}"},
            "profile": {"S": "x" * 800},
        }
        records.append(
            {
                "eventID": f"e-{i}",
                "eventName": "REMOVE",
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
                "dynamodb": {
                    "ApproximateCreationDateTime": now,
                    "Keys": {"pk": {"S": f"s-{i}"}},
                    "OldImage": image,
                    "SequenceNumber": f"{10**20 + i}",
                    "StreamViewType": "NEW_AND_OLD_IMAGES",
                },
            }
        )
    return records


def _run_mode(endpoint: str, *, firehose: bool) -> dict[str, Any]:
    import boto3
    from session_expiry_runtime.cleanup.cleaner import SessionCleaner, build_clients, process_batch
    from session_expiry_runtime.core.config import RuntimeConfig
    from session_expiry_runtime.core.metrics import MetricsRecorder

    session = boto3.session.Session(region_name="us-east-1")
    bucket = "bench-archive-firehose" if firehose else "bench-archive-objects"
    s3 = session.client("s3", endpoint_url=endpoint)
    s3.create_bucket(Bucket=bucket)
    if firehose:
        session.client("firehose", endpoint_url=endpoint).create_delivery_stream(
            DeliveryStreamName="bench-archive",
            ExtendedS3DestinationConfiguration={
                "RoleARN": "arn:aws:iam::123456789012:role/bench",
                "BucketARN": f"arn:aws:s3:::{bucket}",
                "Prefix": "archive/",
            },
        )
    config = RuntimeConfig(
        archive_bucket=bucket, archive_delivery_stream="bench-archive" if firehose else None
    )
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    clients = build_clients(config, session)
    calls: Counter[str] = Counter()
    for client in (clients.archive, clients.firehose):
        if client is not None:
            client.meta.events.register(
                "before-call", lambda model, **_: calls.update([model.name])
            )
    cleaner = SessionCleaner(config, clients, MetricsRecorder(config.metrics_namespace))
    cpu = wall = 0.0
    failed = 0
    devnull = open(os.devnull, "w")  # EMF lines go nowhere
    stdout, sys.stdout = sys.stdout, devnull
    try:
        for start in range(0, SESSIONS, BATCH):
            event = {"Records": _records(start, BATCH)}
            c0, w0 = time.process_time(), time.perf_counter()
            response = process_batch(event, None, cleaner)
            cpu += time.process_time() - c0
            wall += time.perf_counter() - w0
            failed += len(response["batchItemFailures"])
    finally:
        sys.stdout = stdout
        devnull.close()
    line_bytes = _line_bytes(config)
    return {
        "mode": "Firehose (PutRecordBatch)" if firehose else "per object (PutObject)",
        "firehose": firehose,
        "calls": dict(calls),
        "cpu_s": cpu,
        "wall_s": wall,
        "failed": failed,
        "line_bytes": line_bytes,
    }


def _line_bytes(config: Any) -> int:
    from session_expiry_runtime.core.decode import decode_image, parse_record
    from session_expiry_runtime.sinks import archive

    raw = _records(0, 1)[0]
    record = parse_record(raw)
    document = archive.archive_document(
        config,
        record,
        keys=decode_image(raw["dynamodb"]["Keys"]),
        image=decode_image(raw["dynamodb"]["OldImage"]),
        reason="ttl",
        lag_seconds=Decimal(60),
    )
    return len(archive.archive_line(document))


def cost(run: dict[str, Any]) -> dict[str, float]:
    """USD per 1,000 sessions: Lambda, requests and Firehose charges (module docstring)."""
    p = PRICES
    lambda_usd = run["cpu_s"] * LAMBDA_GB * p["lambda_gb_second"] * 1_000 / SESSIONS
    if not run["firehose"]:
        return {
            "lambda": lambda_usd,
            "service": p["s3_put_per_1000"],
            "total": lambda_usd + p["s3_put_per_1000"],
        }
    billed_kb = math.ceil(run["line_bytes"] / 1024 / 5) * 5
    ingest_gb = 1_000 * billed_kb / 1024 / 1024
    processed_gb = 1_000 * run["line_bytes"] / 1024**3
    service = (
        ingest_gb * p["firehose_ingest_gb"]
        + processed_gb * p["dynamic_partitioning_gb"]
        + FIREHOSE_OBJECTS * p["dynamic_partitioning_per_1000_objects"] / 1_000
        + FIREHOSE_OBJECTS * p["s3_put_per_1000"] / 1_000
    )
    return {"lambda": lambda_usd, "service": service, "total": lambda_usd + service}


def run() -> dict[str, Any]:
    """Both modes against one moto server in another process."""
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        os.environ.setdefault(name, value)  # moto takes any credentials; never real ones
    port = _free_port()
    server = subprocess.Popen(  # noqa: S603 - moto's own server module
        [sys.executable, "-m", "moto.server", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        _wait(port)
        runs = [_run_mode(endpoint, firehose=False), _run_mode(endpoint, firehose=True)]
    finally:
        server.terminate()
        server.wait(timeout=30)
        os.environ.pop("AWS_ENDPOINT_URL", None)
    for r in runs:
        r["cost"] = cost(r)
    return {"sessions": SESSIONS, "batch": BATCH, "prices": PRICES, "runs": runs}


def _wait(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"moto server on port {port} did not start")


def table(data: dict[str, Any]) -> str:
    """The section's Markdown table and its notes."""
    rows = [
        "| mode | calls per 1,000 sessions | CPU ms per 1,000 sessions | Lambda USD | "
        "S3/Firehose USD | total USD per 1,000 sessions |",
        "|---|---|---|---|---|---|",
    ]
    for r in data["runs"]:
        calls = ", ".join(f"{n} {op}" for op, n in sorted(r["calls"].items()))
        c = r["cost"]
        rows.append(
            f"| {r['mode']} | {calls} | {r['cpu_s'] * 1000:,.0f} | {c['lambda']:.6f} | "
            f"{c['service']:.6f} | {c['total']:.6f} |"
        )
    line = data["runs"][0]["line_bytes"]
    return "\n".join(rows) + (
        f"\n\n{data['sessions']:,} sessions in batches of {data['batch']}, archive only, an "
        f"archived line of {line:,} bytes (billed by Firehose as "
        f"{math.ceil(line / 1024 / 5) * 5} KB); moto in another process, so CPU is the "
        f"cleanup's own. Prices: us-east-1, as listed on the AWS Lambda, Amazon S3 and Amazon "
        f"Data Firehose pricing pages ({PRICES_CHECKED}): {json.dumps(data['prices'])}. "
        f"Firehose objects assumed: {FIREHOSE_OBJECTS} per 1,000 sessions (one per date/tenant "
        "partition and 5-minute buffer). Reading the archive costs one S3 GET per object too: "
        "a full scan reads 1,000 objects per 1,000 sessions per object, about 10 with Firehose."
    )


def main() -> int:
    data = run()
    print(table(data))
    return 0 if all(r["failed"] == 0 for r in data["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
