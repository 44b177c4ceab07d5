"""What cleaning sessions costs: the calls the cleanup makes per session times AWS's prices.

``python -m cdk_session_expiry.cost`` prints the monthly bill for your own options — read from a
synthesized template (``--template cdk.out/MyStack.template.json``) or given as flags — and the
things teams build instead, costed the same way: an EventBridge Scheduler one-time schedule
per session, a Step Functions Standard execution waiting per session and a Lambda durable
execution waiting per session (``--help``). With a
template, a last line ``not priced: ...`` names each resource type (and each function, by its
handler) the bill leaves out (`unpriced_resources`), so nothing is free by omission.

**The model** (what this library adds to storing sessions with a TTL; the session item's own
writes are the application's, TTL deletions are free):

* **cleanup function** (Lambda, arm64): one request per invocation; billed duration per
  invocation = ``ROUND_TRIPS`` times the call latency (the invocation's sequential steps: ownership
  mark, the steps in parallel, the listing's deletes, the release) + sessions times CPU per session
  over the vCPU share at the memory (one vCPU at 1,769 MB: Lambda Developer Guide, "Configuring
  Lambda function memory"). CPU per session defaults to what ``make bench`` measured.
* **ownership records** (issue 20): one record per connection, grant and AgentCore session;
  ``SessionStore.create`` writes them in the item's ``TransactWriteItems`` (2 write units an item
  instead of 1 for a ``PutItem``), the cleanup marks and releases each in a transaction: 4 write
  units per record (DynamoDB Developer Guide, "Managing complex workflows with DynamoDB
  transactions": a transactional write of an item up to 1 KB is 2 write units).
* **stream reads**: free — DynamoDB does not charge for the ``GetRecords`` calls of a Lambda
  trigger (DynamoDB pricing, "DynamoDB Streams").
* **per option**: a grant is a ``CreateGrant`` and a ``RetireGrant`` (KMS requests); scratch is a
  ``ListObjectsV2`` per 1,000 keys (S3 LIST) and ``DeleteObjects`` (a delete: free); the archive
  one ``PutObject``; the event bus one custom event; AgentCore stops have no request price; the
  expiry sweeper an index write per create and heartbeat, a ``DeleteItem`` of item and index
  entry, and its schedule's fixed monthly cost; the grant sweep hourly ``ListGrants`` and
  strongly consistent ``GetItem`` per live grant; CloudWatch metrics, alarms and the log lines.

Prices: US East (N. Virginia), on-demand, first tier, no free tier, checked on
`PRICES_CHECKED`; each `Price` names its page. AWS's pricing pages render their
rates in the browser; the figures are the ones those pages publish, as mirrored in AWS's price
list data — check your Region before relying on them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import _runtime_contract as c
from ._kinds import DECLARED_KINDS

# Nothing here imports aws_cdk at import time: that starts the jsii runtime (a Node.js process,
# seconds), which ``--help`` and the arithmetic do not need. The one construct figure the model
# uses, the sweeper's memory, is read when an Options needs it (`_sweeper_memory_size`).
#: Shards the expiry sweeper Queries each pass (the construct's ``sweeper.SWEEP_SHARDS``).
SWEEP_SHARDS = c.DEFAULT_SWEEP_SHARDS

__all__ = [
    "CALL_PRICES",
    "PRICED_RESOURCE_TYPES",
    "PRICES",
    "PRICES_CHECKED",
    "Options",
    "Price",
    "alternatives",
    "monthly_cost",
    "options_from_template",
    "unpriced_resources",
]

#: The day the prices below were checked against their pages.
PRICES_CHECKED = "2026-12-02"

LAMBDA = "https://aws.amazon.com/lambda/pricing/"
DYNAMODB = "https://aws.amazon.com/dynamodb/pricing/on-demand/"
KMS = "https://aws.amazon.com/kms/pricing/"
S3 = "https://aws.amazon.com/s3/pricing/"
EVENTBRIDGE = "https://aws.amazon.com/eventbridge/pricing/"
CLOUDWATCH = "https://aws.amazon.com/cloudwatch/pricing/"
API_GATEWAY = "https://aws.amazon.com/api-gateway/pricing/"
AGENTCORE = "https://aws.amazon.com/bedrock/agentcore/pricing/"
BEDROCK = "https://aws.amazon.com/bedrock/pricing/"
STEP_FUNCTIONS = "https://aws.amazon.com/step-functions/pricing/"
SSM = "https://aws.amazon.com/systems-manager/pricing/"
SQS = "https://aws.amazon.com/sqs/pricing/"
FIREHOSE = "https://aws.amazon.com/firehose/pricing/"
KINESIS = "https://aws.amazon.com/kinesis/data-streams/pricing/"
APPCONFIG = "https://aws.amazon.com/systems-manager/pricing/#AppConfig"


@dataclass(frozen=True)
class Price:
    """USD per one ``unit``, from ``source`` (``note``: why a price is what it is)."""

    usd: float
    unit: str
    source: str
    note: str = ""


PRICES: dict[str, Price] = {
    "lambda_gb_second": Price(0.0000133334, "GB-second of duration (arm64)", LAMBDA),
    "lambda_request": Price(0.20 / 1e6, "request (invocation)", LAMBDA),
    "dynamodb_write_unit": Price(0.625 / 1e6, "write request unit", DYNAMODB),
    "dynamodb_read_unit": Price(0.125 / 1e6, "read request unit", DYNAMODB),
    "stream_read": Price(
        0.0, "stream read request unit", DYNAMODB, "GetRecords by a Lambda trigger: free"
    ),
    "kms_request": Price(0.03 / 10_000, "request", KMS, "past 20,000 free a month"),
    "s3_put_list": Price(0.005 / 1000, "PUT, COPY, POST or LIST request", S3),
    "s3_get": Price(0.0004 / 1000, "GET request", S3),
    "s3_delete": Price(0.0, "DELETE request", S3, "DELETE requests are free"),
    "events_custom": Price(1.00 / 1e6, "custom event (64 KB chunk)", EVENTBRIDGE),
    "scheduler_invocation": Price(
        1.00 / 1e6, "scheduled invocation", EVENTBRIDGE, "past 14 million free a month"
    ),
    "scheduler_api": Price(0.0, "schedule API request", EVENTBRIDGE, "no request price listed"),
    "sfn_transition": Price(0.025 / 1000, "state transition (Standard)", STEP_FUNCTIONS),
    "durable_operation": Price(
        8.00 / 1e6,
        "durable operation (a step, wait or callback of a durable execution)",
        LAMBDA,
        "Lambda durable functions, as the pricing page's durable functions rate reads (mirrored "
        "2026-09-20); the data an execution writes and retains is billed per GB on top and not "
        "priced here (a session's execution writes well under 1 KB)",
    ),
    "cloudwatch_metric_month": Price(0.30, "custom metric a month", CLOUDWATCH),
    "cloudwatch_alarm_month": Price(0.10, "standard-resolution alarm metric a month", CLOUDWATCH),
    "logs_gb": Price(0.50, "GB of log data ingested", CLOUDWATCH),
    "cloudwatch_api": Price(0.01 / 1000, "API request (DescribeAlarms)", CLOUDWATCH),
    "sqs_request": Price(0.40 / 1e6, "request (standard queue, 64 KB chunk)", SQS),
    "apigateway_management": Price(
        0.0,
        "@connections DeleteConnection",
        API_GATEWAY,
        "WebSocket APIs bill messages and connection minutes; closing a connection is neither",
    ),
    "agentcore_stop": Price(
        0.0,
        "Stop*Session or List*Sessions request",
        AGENTCORE,
        "AgentCore bills consumption, not stop or list requests",
    ),
    "bedrock_session_call": Price(
        0.0,
        "session-management request (EndSession, DeleteSession)",
        BEDROCK,
        "the session-management APIs are in preview; no price for their calls was found on "
        "PRICES_CHECKED",
    ),
    "firehose_record": Price(
        0.029 * 5 / (1024 * 1024),
        "record up to 5 KB (Direct PUT ingestion)",
        FIREHOSE,
        "0.029 USD a GB, first 500 TB a month, each record rounded up to 5 KB; dynamic "
        "partitioning is billed per GB and per object delivered on top (bench/archive.py)",
    ),
    "kinesis_control_plane": Price(
        0.0,
        "control-plane request",
        KINESIS,
        "on-demand streams bill stream hours and data in and out, not ListShards or "
        "DescribeStreamSummary",
    ),
    "appconfig_request": Price(
        0.0000002,
        "configuration request (AppConfig Data API call)",
        APPCONFIG,
        "feature_flags: one GetLatestConfiguration per poll interval per warm environment; "
        "the page itself was not at hand on PRICES_CHECKED: the figure is as an AWS re:Post "
        "answer quotes it (repost.aws/questions/QUevHYubJ-TESBPlUxRyujmg)",
    ),
    "appconfig_received": Price(
        0.0008,
        "configuration received",
        APPCONFIG,
        "a GetLatestConfiguration that answers a configuration (after a change), not an empty "
        "one; as the same re:Post answer quotes the page (not the page itself)",
    ),
    "control_plane": Price(
        0.0,
        "control-plane or standard-parameter request",
        SSM,
        "Lambda's and DynamoDB's control planes; standard-throughput Parameter Store",
    ),
}

#: Every AWS operation the runtime calls -> (price key, units per call or item, what counts).
#: ``tests/test_cost.py`` fails when the runtime calls an operation missing here.
CALL_PRICES: dict[str, tuple[str, float, str]] = {
    "apigatewaymanagementapi:DeleteConnection": ("apigateway_management", 1, "call"),
    "kms:CreateGrant": ("kms_request", 1, "call"),
    "kms:RetireGrant": ("kms_request", 1, "call"),
    "kms:ListGrants": ("kms_request", 1, "call (a page of up to 100 grants)"),
    "s3:ListObjectsV2": ("s3_put_list", 1, "call (a page of up to 1,000 keys)"),
    "s3:DeleteObjects": ("s3_delete", 1, "call"),
    "s3:DeleteObject": ("s3_delete", 1, "call"),
    "s3:PutObject": ("s3_put_list", 1, "call"),
    "s3:GetObject": ("s3_get", 1, "call"),
    "events:PutEvents": ("events_custom", 1, "entry"),
    "bedrock-agentcore:ListCodeInterpreterSessions": (
        "agentcore_stop",
        1,
        "call (tool-session sweep: a page of up to 100 sessions)",
    ),
    "bedrock-agentcore:ListBrowserSessions": (
        "agentcore_stop",
        1,
        "call (tool-session sweep: a page of up to 100 sessions)",
    ),
    "dynamodb:TransactWriteItems": ("dynamodb_write_unit", 2, "item up to 1 KB"),
    "dynamodb:BatchGetItem": ("dynamodb_read_unit", 0.5, "item up to 4 KB, eventually consistent"),
    "dynamodb:GetItem": ("dynamodb_read_unit", 1, "strongly consistent read up to 4 KB"),
    "dynamodb:PutItem": ("dynamodb_write_unit", 1, "item up to 1 KB, plus 1 per index"),
    "dynamodb:UpdateItem": ("dynamodb_write_unit", 1, "item up to 1 KB, plus 1 per index"),
    "dynamodb:DeleteItem": ("dynamodb_write_unit", 1, "item up to 1 KB, plus 1 per index"),
    "dynamodb:Query": ("dynamodb_read_unit", 0.5, "4 KB read, eventually consistent"),
    "dynamodbstreams:GetRecords": ("stream_read", 1, "call"),
    "dynamodbstreams:GetShardIterator": ("stream_read", 1, "call"),
    "lambda:Invoke": (
        "lambda_request",
        1,
        "call (SessionStore to the claim registrar; plus its duration, ~50 ms at 256 MiB)",
    ),
    "lambda:GetEventSourceMapping": ("control_plane", 1, "call"),
    "lambda:UpdateEventSourceMapping": ("control_plane", 1, "call"),
    "ssm:GetParameter": ("control_plane", 1, "call"),
    "ssm:PutParameter": ("control_plane", 1, "call"),
    "dynamodb:DescribeTable": ("control_plane", 1, "call"),
    "dynamodb:DescribeKinesisStreamingDestination": ("control_plane", 1, "call (replay)"),
    "lambda:GetFunctionConfiguration": ("control_plane", 1, "call"),
    "lambda:GetFunctionConcurrency": ("control_plane", 1, "call (status command)"),
    "lambda:ListEventSourceMappings": ("control_plane", 1, "call"),
    "cloudwatch:DescribeAlarms": ("cloudwatch_api", 1, "call"),
    "cloudwatch:GetMetricStatistics": ("cloudwatch_api", 1, "call (status command)"),
    "cloudformation:DescribeStacks": ("control_plane", 1, "call (status command)"),
    "cloudformation:ListStackResources": ("control_plane", 1, "call (status command)"),
    "sqs:GetQueueAttributes": ("sqs_request", 1, "call (status command)"),
    "sqs:ReceiveMessage": ("sqs_request", 1, "call"),
    "sqs:ChangeMessageVisibility": ("sqs_request", 1, "call"),
    "firehose:PutRecordBatch": ("firehose_record", 1, "record (of up to 500 a call)"),
    "kinesis:DescribeStreamSummary": ("kinesis_control_plane", 1, "call"),
    "kinesis:ListShards": ("kinesis_control_plane", 1, "call"),
    "appconfigdata:StartConfigurationSession": ("appconfig_request", 1, "call (a cold start)"),
    "appconfigdata:GetLatestConfiguration": (
        "appconfig_request",
        1,
        "call (plus a configuration received when it answers one)",
    ),
    "appconfig:ListEnvironments": ("control_plane", 1, "call (kill switch flags)"),
    "appconfig:ListDeployments": ("control_plane", 1, "call (kill switch flags)"),
    "appconfig:GetHostedConfigurationVersion": ("control_plane", 1, "call (kill switch flags)"),
    "appconfig:CreateHostedConfigurationVersion": (
        "control_plane",
        1,
        "call (kill switch flags)",
    ),
    "appconfig:StartDeployment": ("control_plane", 1, "call (kill switch flags)"),
}
#: Each declared resource kind's release call, priced by its declaration
#: (``session_expiry_runtime/core/kinds.py``, ``Release.price``).
CALL_PRICES.update(
    {
        f"{kind.service}:{operation}": tuple(kind.release.price)
        for kind in DECLARED_KINDS
        if kind.release is not None
        for operation in kind.release.operations
    }
)

#: CPU per session of the cleanup (ms at one vCPU) by scratch objects, as ``make bench``
#: measured it (BENCHMARKS.md, "Cost per million sessions cleaned"; the bench passes its own).
MEASURED_CPU_MS = {0: 5.6, 50: 10.9, 2500: 112.7}
#: Lambda gives one vCPU at 1,769 MB, in proportion below (Lambda Developer Guide).
MB_PER_VCPU = 1769
#: Sequential round trips of one invocation: mark, the steps in parallel, deletes, release.
ROUND_TRIPS = 4
#: Custom metrics the cleanup and sweepers publish (names and dimension values in use).
METRICS = 16
#: Log bytes per invocation (the EMF metrics line and a summary line).
LOG_BYTES_PER_INVOCATION = 1500
#: Seconds in the month the bill is for (30 days).
MONTH_S = 30 * 24 * 3600
#: Billed seconds of a sweeper run of one pass (an interval of a minute and more: 4 Queries of
#: shards with nothing due; an assumption).
SWEEPER_PASS_S = 0.2


@dataclass(frozen=True)
class Options:
    """One deployment's options and traffic (defaults: the construct's defaults, a connection and
    an empty scratch prefix per session, 1 million sessions a month).

    Attributes:
        sessions: sessions cleaned a month (int, default 1,000,000).
        memory_mb: ``cleanup_memory_size`` (MB, default 1,769).
        connection, grant, scratch: each session holds a WebSocket connection (default yes), a
            KMS grant (``grant_key``; default no), a scratch prefix (default yes).
        objects: scratch objects per session (default 0).
        archive, event_bus: ``archive_bucket`` / ``event_bus`` set (default no).
        agentcore_stops: AgentCore kinds stopped per session, 0 to 3 (default 0).
        sweep_interval_s: ``expiry_sweep_interval`` in seconds; ``None`` (default): no sweeper.
        sweeper_memory_mb: the sweeper's memory (MB); ``None`` (default): the construct's
            (``sweeper.DEFAULT_SWEEPER_MEMORY_SIZE``).
        sweep_workers: sweeper invocations per scheduled time (``expiry_sweep_workers``);
            ``None`` (default): the construct's (``sweeper.DEFAULT_SWEEP_WORKERS``).
        sweep_shards: shards every pass Queries (``expiry_sweep_shards``, default 4).
        grant_sweep: the hourly grant sweep deployed (with ``grant_key``; default no).
        alarms: CloudWatch alarms of the stack (default 0).
        heartbeats: heartbeats (``touch``) per session (default 10).
        sessions_per_invocation: records per cleanup invocation (default 1: a trickle).
        latency_ms: one AWS call's round trip (ms, default 20).
        live_sessions: sessions alive at once, for the grant sweep (default 10,000).
        cpu_ms: cleanup CPU per session (ms at one vCPU); ``None`` (default): measured
            (`MEASURED_CPU_MS` at ``objects``).

    Raises:
        ValueError: a count below its minimum (named with the value).
    """

    sessions: int = 1_000_000
    memory_mb: int = 1769
    connection: bool = True
    grant: bool = False
    scratch: bool = True
    objects: int = 0
    archive: bool = False
    event_bus: bool = False
    agentcore_stops: int = 0
    sweep_interval_s: int | None = None
    sweeper_memory_mb: int | None = None
    sweep_workers: int | None = None
    sweep_shards: int = SWEEP_SHARDS
    grant_sweep: bool = False
    alarms: int = 0
    heartbeats: int = 10
    sessions_per_invocation: float = 1.0
    latency_ms: float = 20.0
    live_sessions: int = 10_000
    cpu_ms: float | None = None

    def __post_init__(self) -> None:
        if self.sweeper_memory_mb is None:
            object.__setattr__(self, "sweeper_memory_mb", _sweeper_defaults()[0])
        if self.sweep_workers is None:
            object.__setattr__(self, "sweep_workers", _sweeper_defaults()[1])
        for name, least in (
            ("sessions", 0),
            ("objects", 0),
            ("heartbeats", 0),
            ("alarms", 0),
            ("sweep_workers", 1),
            ("sweep_shards", 1),
        ):
            if getattr(self, name) < least:
                raise ValueError(f"{name}={getattr(self, name)}: expected at least {least}")
        if self.memory_mb < 128:
            raise ValueError(f"memory_mb={self.memory_mb}: expected at least 128 (Lambda's least)")
        if self.sessions_per_invocation < 1:
            raise ValueError(
                f"sessions_per_invocation={self.sessions_per_invocation}: expected at least 1"
            )
        if self.sweep_interval_s is not None and self.sweep_interval_s <= 0:
            raise ValueError(f"sweep_interval_s={self.sweep_interval_s}: expected seconds > 0")


def _sweeper_defaults() -> tuple[int, int]:
    """The construct's sweeper memory (MB) and workers by default (imports aws_cdk: only when an
    Options needs them)."""
    from .sweeper import DEFAULT_SWEEP_WORKERS, DEFAULT_SWEEPER_MEMORY_SIZE

    return DEFAULT_SWEEPER_MEMORY_SIZE, DEFAULT_SWEEP_WORKERS


def cpu_ms(objects: int) -> float:
    """CPU ms per session at ``objects`` scratch objects: linear between measured points."""
    points = sorted(MEASURED_CPU_MS.items())
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if objects <= x1:
            return y0 + (y1 - y0) * (max(objects, x0) - x0) / (x1 - x0)
    (xa, ya), (xb, yb) = points[-2], points[-1]
    return yb + (yb - ya) * (objects - xb) / (xb - xa)


def records_per_session(o: Options) -> int:
    """Ownership records per session: one per connection, grant and AgentCore session."""
    return int(o.connection) + int(o.grant) + o.agentcore_stops


def _units(o: Options) -> dict[str, float]:
    """Units of each price per session (what grows with sessions)."""
    u: dict[str, float] = dict.fromkeys(PRICES, 0.0)
    ms = o.cpu_ms if o.cpu_ms is not None else cpu_ms(o.objects if o.scratch else 0)
    vcpu = min(1.0, o.memory_mb / MB_PER_VCPU)
    invocation_ms = ROUND_TRIPS * o.latency_ms + o.sessions_per_invocation * ms / vcpu
    u["lambda_request"] = 1 / o.sessions_per_invocation
    u["lambda_gb_second"] = (o.memory_mb / 1024) * invocation_ms / 1000 / o.sessions_per_invocation
    records = records_per_session(o)
    # create: the item in a transaction with its records (2 units each) instead of a PutItem (1)
    u["dynamodb_write_unit"] = (2 * (records + 1) - 1 if records else 0) + 4 * records
    u["kms_request"] = 2 * int(o.grant)
    # the batch's requests of the RetireGrant budget every invocation shares, reserved in one
    # UpdateItem beside its marks (shared_pace): one a batch retiring its grants within a second
    u["dynamodb_write_unit"] += int(o.grant) / o.sessions_per_invocation
    if o.scratch:
        u["s3_put_list"] = max(1, math.ceil(o.objects / 1000))
        u["s3_delete"] = math.ceil(o.objects / 1000)
    u["s3_put_list"] += int(o.archive)
    u["events_custom"] = int(o.event_bus)
    u["agentcore_stop"] = o.agentcore_stops
    u["apigateway_management"] = int(o.connection)
    if o.sweep_interval_s is not None:
        # the index entry: written at create (1), moved by every heartbeat's new expiry (2: a
        # changed index key is a delete and a put), deleted with the item by the sweep (1 + 1)
        u["dynamodb_write_unit"] += 1 + 2 * o.heartbeats + 2
    u["logs_gb"] = LOG_BYTES_PER_INVOCATION / 1e9 / o.sessions_per_invocation
    return u


def sweeper_monthly(
    interval_s: int, memory_mb: int, workers: int = 1, shards: int = SWEEP_SHARDS
) -> float:
    """USD a month of the expiry sweeper with nothing due: each of ``workers`` runs once per
    scheduled time; below a minute a run a minute, billed while its passes span the minute
    (``60 - interval`` s plus a pass); from a minute one pass a run (`SWEEPER_PASS_S`); each pass
    Queries every shard once across the workers (0.5 read unit each, eventually consistent, an
    empty page). Sessions swept cost their ``DeleteItem`` (per session)."""
    if interval_s < 60:
        runs, billed, passes = MONTH_S / 60, 60 - interval_s + SWEEPER_PASS_S / 2, 60 // interval_s
    else:
        runs, billed, passes = MONTH_S / interval_s, SWEEPER_PASS_S, 1
    duration = workers * runs * billed * memory_mb / 1024 * PRICES["lambda_gb_second"].usd
    reads = runs * passes * shards * 0.5 * PRICES["dynamodb_read_unit"].usd
    return duration + reads + workers * runs * PRICES["lambda_request"].usd


def _fixed(o: Options) -> dict[str, float]:
    """USD a month that does not grow with sessions, by line."""
    lines = {
        "CloudWatch metrics": METRICS * PRICES["cloudwatch_metric_month"].usd,
        "CloudWatch alarms": o.alarms * PRICES["cloudwatch_alarm_month"].usd,
    }
    if o.sweep_interval_s is not None:
        memory, workers = _sweeper_defaults()
        lines[f"expiry sweeper (every {o.sweep_interval_s} s)"] = sweeper_monthly(
            o.sweep_interval_s,
            o.sweeper_memory_mb or memory,
            o.sweep_workers or workers,
            o.sweep_shards,
        )
    if o.grant_sweep:
        runs = 24 * 30  # hourly
        pages = math.ceil(o.live_sessions / 100)
        lines["grant sweep (hourly)"] = runs * (
            pages * PRICES["kms_request"].usd
            + o.live_sessions * PRICES["dynamodb_read_unit"].usd
            + PRICES["lambda_request"].usd
            + 0.25 * (pages / 5 + 1) * PRICES["lambda_gb_second"].usd  # 256 MB, 5 KMS calls/s
        )
    return lines


def monthly_cost(o: Options) -> dict[str, Any]:
    """The month's bill for ``o``: ``per_service`` USD by price key (growing with sessions),
    ``fixed`` USD by line, ``total`` and ``per_million`` (USD per million sessions, fixed
    lines included at ``o.sessions``)."""
    per_service = {k: n * o.sessions * PRICES[k].usd for k, n in _units(o).items()}
    fixed = _fixed(o)
    total = sum(per_service.values()) + sum(fixed.values())
    return {
        "per_service": per_service,
        "fixed": fixed,
        "total": total,
        "per_million": total / o.sessions * 1e6 if o.sessions else 0.0,
    }


#: Durable operations of one session's durable execution (`alternatives`): the execution's
#: start, its callback waiting for the heartbeats, and the cleanup step run when it times out.
DURABLE_OPERATIONS_PER_SESSION = 3


def alternatives(o: Options) -> dict[str, float]:
    """USD a month for the same sessions cleaned by what teams build instead, the same calls
    made (the connection, grant, scratch, archive and events as ``o``; no ownership records, no
    sweeper, one invocation per session): ``this library`` (``o``), ``EventBridge Scheduler``
    (a one-time schedule per session, ``UpdateSchedule`` per heartbeat, ``ActionAfterCompletion``
    deleting it; 1 USD per million invocations past 14 million free: not deducted), ``Step
    Functions`` (a Standard execution per session waiting until the expiry; each heartbeat stops
    it and starts another: 1 transition per Wait entered and 1 for the cleanup task) and ``Lambda
    durable functions`` (one durable execution per session waiting on a callback whose heartbeat
    timeout is the idle timeout and whose timeout is the absolute lifetime; each heartbeat is a
    ``SendDurableExecutionCallbackHeartbeat``, which adds no operation; the timeout resumes the
    execution: one more invocation than the others, and `DURABLE_OPERATIONS_PER_SESSION`
    operations)."""
    plain = replace(o, sweep_interval_s=None, grant_sweep=False, sessions_per_invocation=1.0)
    base = monthly_cost(plain)
    records = records_per_session(plain)
    ownership_wu = (2 * (records + 1) - 1 if records else 0) + 4 * records
    common = base["total"] - ownership_wu * o.sessions * PRICES["dynamodb_write_unit"].usd
    schedule = o.sessions * PRICES["scheduler_invocation"].usd
    transitions = o.sessions * (o.heartbeats + 2) * PRICES["sfn_transition"].usd
    durable = o.sessions * (
        DURABLE_OPERATIONS_PER_SESSION * PRICES["durable_operation"].usd
        + PRICES["lambda_request"].usd
    )
    return {
        "this library": monthly_cost(o)["total"],
        "EventBridge Scheduler": common + schedule,
        "Step Functions (Standard)": common + transitions,
        "Lambda durable functions": common + durable,
    }


def options_from_template(template: Mapping[str, Any], **traffic: Any) -> Options:
    """The options a synthesized template deployed: the cleanup function's memory and variables,
    the sweepers' presence and schedule, the alarms' count; ``traffic``: the other
    `Options` fields (sessions, heartbeats, objects, ...).

    Raises:
        ValueError: no cleanup function (``session_expiry_runtime.handler.handler``) in it.
    """
    functions = {
        k: r.get("Properties", {})
        for k, r in template.get("Resources", {}).items()
        if r.get("Type") == "AWS::Lambda::Function"
    }
    by_handler = {p.get("Handler"): (k, p) for k, p in functions.items()}
    if c.CLEANUP_HANDLER not in by_handler:
        raise ValueError(
            f"no cleanup function (Handler {c.CLEANUP_HANDLER!r}) in the template: expected a "
            "stack synthesized with a SessionExpiry"
        )
    cleanup = by_handler[c.CLEANUP_HANDLER][1]
    env = cleanup.get("Environment", {}).get("Variables", {})
    agent = (c.ENV_AGENT_RUNTIME_ARN, c.ENV_CODE_INTERPRETER_ID, c.ENV_BROWSER_ID)
    found: dict[str, Any] = dict(
        memory_mb=int(cleanup.get("MemorySize", 128)),
        connection=c.ENV_WEBSOCKET_ENDPOINT in env,
        grant=c.ENV_GRANT_KEY_ARN in env,
        scratch=c.ENV_SCRATCH_BUCKET in env,
        archive=c.ENV_ARCHIVE_BUCKET in env,
        event_bus=c.ENV_EVENT_BUS_ARN in env,
        agentcore_stops=sum(1 for name in agent if name in env),
        sweep_interval_s=_sweep_interval(template, by_handler.get(c.SWEEPER_HANDLER)),
        sweeper_memory_mb=_memory_size(by_handler.get(c.SWEEPER_HANDLER)),
        **_sweep_fan_out(template, by_handler.get(c.SWEEPER_HANDLER)),
        grant_sweep=f"{c.RUNTIME_PACKAGE}.sweeps.grant_sweeper.handler" in by_handler,
        alarms=sum(
            1
            for r in template.get("Resources", {}).values()
            if r.get("Type") == "AWS::CloudWatch::Alarm"
        ),
    )
    return Options(**{**found, **traffic})


def _memory_size(function: tuple[str, Any] | None) -> int | None:
    """A function's ``MemorySize`` in the template; ``None`` (the construct's default) when
    there is no such function or it sets none."""
    if function is None or "MemorySize" not in function[1]:
        return None
    return int(function[1]["MemorySize"])


#: Every resource type the bill accounts for, and where (a line of it, or why it costs
#: nothing); a template's other resources are named on the ``not priced:`` line
#: (`unpriced_resources`). ``AWS::Lambda::Function`` is accounted for by its handler
#: (`PRICED_HANDLERS`).
PRICED_RESOURCE_TYPES: dict[str, str] = {
    "AWS::CDK::Metadata": "CDK's metadata: no resource",
    "AWS::CloudWatch::Alarm": "the CloudWatch alarms line",
    "AWS::DynamoDB::Table": "the writes per session (ownership records, the sweep index); "
    "storage and the application's own reads and writes are the application's",
    "AWS::Events::Rule": "scheduled and AWS-service event rules: no charge (EventBridge pricing)",
    "AWS::IAM::Policy": "no charge",
    "AWS::IAM::Role": "no charge",
    "AWS::Lambda::EventInvokeConfig": "no charge",
    "AWS::Lambda::EventSourceMapping": "no charge; a trigger's stream reads are free",
    "AWS::Lambda::LayerVersion": "no charge",
    "AWS::Lambda::Permission": "no charge",
    "AWS::Logs::LogGroup": "log ingestion per invocation (logs_gb)",
    "AWS::SQS::Queue": "the on-failure queue: requests only when a batch fails",
    "AWS::SQS::QueuePolicy": "no charge",
    "AWS::SSM::Parameter": "a standard parameter: no charge",
}
#: The functions the bill prices, by handler.
PRICED_HANDLERS: dict[str, str] = {
    c.CLEANUP_HANDLER: "per session (lambda_request, lambda_gb_second)",
    c.SWEEPER_HANDLER: "the expiry sweeper line",
    c.GRANT_SWEEPER_HANDLER: "the grant sweep line",
}


def unpriced_resources(template: Mapping[str, Any]) -> list[str]:
    """The template's resources the bill does not price, one entry per type (sorted): a type
    not in `PRICED_RESOURCE_TYPES` (AppConfig, the dashboard, Glue and Athena, a Kinesis
    or Firehose stream, the application's own resources, ...), and a function by its handler
    when `PRICED_HANDLERS` lacks it, e.g. ``AWS::Lambda::Function
    (session_expiry_runtime.switches.pause_watch.handler)``."""
    found = set()
    for logical_id, resource in template.get("Resources", {}).items():
        kind = str(resource.get("Type", "?"))
        if kind == "AWS::Lambda::Function":
            handler = resource.get("Properties", {}).get("Handler")
            if handler not in PRICED_HANDLERS:
                found.add(f"{kind} ({handler or logical_id})")
        elif kind not in PRICED_RESOURCE_TYPES:
            found.add(kind)
    return sorted(found)


def _sweep_interval(template: Mapping[str, Any], sweeper: tuple[str, Any] | None) -> int | None:
    """The expiry sweeper's interval (seconds): its variable below a minute, else its rule."""
    if sweeper is None:
        return None
    logical, props = sweeper
    env = props.get("Environment", {}).get("Variables", {})
    if c.ENV_SWEEP_INTERVAL_SECONDS in env:
        return int(env[c.ENV_SWEEP_INTERVAL_SECONDS])
    for r in template.get("Resources", {}).values():
        p = r.get("Properties", {})
        targets = json.dumps(p.get("Targets", []))
        if r.get("Type") == "AWS::Events::Rule" and logical in targets:
            return _rate_seconds(str(p.get("ScheduleExpression", "")))
    return 60


def _sweep_fan_out(template: Mapping[str, Any], sweeper: tuple[str, Any] | None) -> dict[str, int]:
    """The expiry sweeper's workers (its rules' targets) and shards (its variable); empty
    without a sweeper."""
    if sweeper is None:
        return {}
    logical, props = sweeper
    env = props.get("Environment", {}).get("Variables", {})
    workers = sum(
        1
        for r in template.get("Resources", {}).values()
        if r.get("Type") == "AWS::Events::Rule"
        for target in r.get("Properties", {}).get("Targets", [])
        if logical in json.dumps(target.get("Arn"))
    )
    return {
        "sweep_workers": max(1, workers),
        "sweep_shards": int(env.get(c.ENV_SWEEP_SHARDS, SWEEP_SHARDS)),
    }


def _rate_seconds(expression: str) -> int:
    """``rate(5 minutes)`` -> 300 (a minute for anything else)."""
    units = {"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600, "day": 86400, "days": 86400}
    inner = expression.removeprefix("rate(").removesuffix(")").split()
    if len(inner) == 2 and inner[0].isdigit() and inner[1] in units:
        return int(inner[0]) * units[inner[1]]
    return 60


def render(o: Options, not_priced: Sequence[str] = ()) -> str:
    """The bill for ``o`` as Markdown: by service with each price and its page, then fixed lines
    and the alternatives; then, when ``not_priced`` names any (`unpriced_resources`), a
    line ``not priced: <each>``."""
    bill = monthly_cost(o)
    units = _units(o)
    rows = [
        f"| {k} | {units[k]:.4g} | ${PRICES[k].usd:.6g} per {PRICES[k].unit} | "
        f"${bill['per_service'][k]:,.2f} | {PRICES[k].source} {PRICES[k].note} |"
        for k in PRICES
        if units[k]
    ]
    fixed = [f"| {line} | ${usd:,.2f} |" for line, usd in bill["fixed"].items()]
    alt = [f"| {name} | ${usd:,.2f} |" for name, usd in alternatives(o).items()]
    return "\n".join(
        [
            f"{o.sessions:,} sessions a month; prices checked {PRICES_CHECKED} (US East)",
            "",
            "| price | units per session | price | USD a month | source |",
            "|---|---|---|---|---|",
            *rows,
            "",
            "| fixed a month | USD |",
            "|---|---|",
            *fixed,
            "",
            f"**Total: ${bill['total']:,.2f} a month, ${bill['per_million']:,.2f} per million "
            "sessions.**",
            "",
            "| the same sessions cleaned by | USD a month |",
            "|---|---|",
            *alt,
            *(["", f"not priced: {', '.join(not_priced)}"] if not_priced else []),
        ]
    )


def _prog() -> str:
    """``session-expiry cost`` from the console script (``cli``), else the ``python -m`` form."""
    script = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    if script == "session-expiry":
        return "session-expiry cost"
    return "python -m cdk_session_expiry.cost"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=_prog(),
        description="What cleaning sessions costs a month with your options, by service, with "
        "each price and its page; and the same sessions cleaned by an EventBridge Scheduler "
        "schedule, a Step Functions execution or a Lambda durable execution per session.",
        epilog="With --template, a last line 'not priced: ...' names each resource type of the "
        "template the bill leaves out (AppConfig, the dashboard, the pause watch, Glue and "
        "Athena, your application's own resources, ...). Sizing: docs/benchmarks.md.",
    )
    p.add_argument("--template", type=Path, help="a synthesized template (cdk.out/*.template.json)")
    p.add_argument("--sessions", type=int, default=1_000_000, help="sessions a month (1,000,000)")
    p.add_argument("--heartbeats", type=int, default=10, help="heartbeats per session (10)")
    p.add_argument("--objects", type=int, default=0, help="scratch objects per session (0)")
    p.add_argument(
        "--sessions-per-invocation",
        type=float,
        default=1.0,
        help="records per cleanup invocation (1: a trickle; up to the batch size in a storm)",
    )
    p.add_argument("--memory-mb", type=int, help="cleanup_memory_size without a template (1769)")
    p.add_argument("--sweep-interval", type=int, help="expiry_sweep_interval, seconds (none)")
    for flag in ("grant", "archive", "event-bus", "grant-sweep"):
        p.add_argument(f"--{flag}", action="store_true", help=f"{flag} on (without a template)")
    p.add_argument("--agentcore-stops", type=int, default=0, help="AgentCore kinds stopped (0)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Print the bill (exit 0); a bad template or value: its error on stderr, exit 2."""
    a = _parser().parse_args(argv)
    traffic = dict(
        sessions=a.sessions,
        heartbeats=a.heartbeats,
        objects=a.objects,
        sessions_per_invocation=a.sessions_per_invocation,
    )
    not_priced: list[str] = []
    try:
        if a.template:
            template = json.loads(a.template.read_text())
            options = options_from_template(template, **traffic)
            not_priced = unpriced_resources(template)
        else:
            options = Options(
                memory_mb=a.memory_mb or 1769,
                sweep_interval_s=a.sweep_interval,
                grant=a.grant,
                archive=a.archive,
                event_bus=a.event_bus,
                grant_sweep=a.grant_sweep,
                agentcore_stops=a.agentcore_stops,
                **traffic,
            )
    except (OSError, ValueError) as exc:
        print(f"cdk_session_expiry.cost: {exc}", file=sys.stderr)
        return 2
    print(render(options, not_priced))
    return 0


if __name__ == "__main__":
    sys.exit(main())
