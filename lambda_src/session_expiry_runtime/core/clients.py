"""The boto3 clients of the cleanup: one shared, thread-safe set per process.

`build_clients` creates a client only for a configured target; a step whose client is
``None`` is not configured and never runs. The ownership table's DynamoDB client (the claims of
`claims`) shares the same settings: its calls fit in the time guard like every other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3
import botocore.session
from botocore.config import Config

from .config import DEFAULT_TIME_GUARD_MS, RuntimeConfig
from .kind_settings import configured_kinds
from .listing_model import use_keys_only_listings
from .timestamps import use_fast_timestamps

#: botocore ``standard`` retry mode: exponential backoff with jitter, retry quota, and retries
#: of throttling (incl. 429 LimitExceededException), 5xx and connection errors. Attempts per
#: call, the first one included (botocore's ``total_max_attempts``): one retry, so that a call
#: with its retry fits in the time guard's margin (what still fails is retried by the event
#: source mapping, every step being idempotent).
MAX_ATTEMPTS = 2
#: Timeouts at the default 10 s margin (`call_timeouts` sizes them to any margin).
CONNECT_TIMEOUT_SECONDS = 1.0
READ_TIMEOUT_SECONDS = 3.0
#: The longest backoff of ``standard`` mode before the first retry: ``random() * 2 ** 0`` s.
MAX_FIRST_BACKOFF_SECONDS = 1.0
#: The share of the margin one call (all its attempts and the backoff) may take.
SDK_SHARE_OF_MARGIN = 0.9
#: The smallest margin the clients can be sized to (``SESSION_EXPIRY_TIME_GUARD_MS``).
MIN_TIME_GUARD_MS = 2_000


def call_timeouts(time_guard_ms: int) -> tuple[float, float]:
    """``(connect, read)`` timeouts in seconds so that one call ends within 90 % of the margin.

    ``MAX_ATTEMPTS * (connect + read) + MAX_FIRST_BACKOFF_SECONDS <= 0.9 * margin``; connect
    gets a quarter of an attempt, at most `CONNECT_TIMEOUT_SECONDS` (a regional endpoint
    answers a TCP/TLS handshake in milliseconds), read the rest. At the default 10 s margin: 1 s
    and 3 s. A read timeout bounds each socket read, not a whole answer: the runner's hard stop
    covers an answer that trickles in (`session_expiry_runtime.cleanup.runner`).

    Raises:
        ValueError: a margin under `MIN_TIME_GUARD_MS`.
    """
    if time_guard_ms < MIN_TIME_GUARD_MS:
        raise ValueError(
            f"time guard {time_guard_ms} ms: expected at least {MIN_TIME_GUARD_MS} ms, room for "
            f"{MAX_ATTEMPTS} attempts of a call and the backoff between them"
        )
    budget = SDK_SHARE_OF_MARGIN * time_guard_ms / 1000 - MAX_FIRST_BACKOFF_SECONDS
    per_attempt = budget / MAX_ATTEMPTS
    connect = min(CONNECT_TIMEOUT_SECONDS, per_attempt / 4)
    return round(connect, 3), round(per_attempt - connect, 3)


def worst_call_seconds(config: Config) -> float:
    """The longest one call of a client built with ``config`` can take with a server that never
    answers: every attempt's connect and read timeouts plus the backoff before each retry."""
    attempts = int((config.retries or {}).get("total_max_attempts", 1))
    per_attempt = float(config.connect_timeout) + float(config.read_timeout)
    return attempts * per_attempt + (attempts - 1) * MAX_FIRST_BACKOFF_SECONDS


def client_config(max_workers: int, time_guard_ms: int = DEFAULT_TIME_GUARD_MS) -> Config:
    """botocore settings shared by every cleanup client.

    ``standard`` retries with `MAX_ATTEMPTS` attempts and timeouts sized to the time
    guard's margin (`call_timeouts`), so a call started just before the guard trips ends
    before the deadline; a connection pool large enough for the step pool plus the record
    threads (archive writes), so no connection is opened and discarded per call.

    Raises:
        ValueError: ``time_guard_ms`` under `MIN_TIME_GUARD_MS`.
    """
    connect, read = call_timeouts(time_guard_ms)
    return Config(
        retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS},
        max_pool_connections=max(10, 2 * max_workers),
        connect_timeout=connect,
        read_timeout=read,
    )


#: The scratch step's S3 client sends only parameters its own code built — the configured bucket,
#: an accepted prefix, continuation tokens and keys S3 itself listed — so botocore's client-side
#: parameter validation (a documented setting, "for performance reasons") checks nothing there;
#: it costs about 2 ms of CPU per 1,000-key DeleteObjects, a few per cent of a 2,500-object
#: session (BENCHMARKS.md).
SCRATCH_S3_SETTINGS = Config(parameter_validation=False)
#: The ownership table's client likewise sends only requests `claims` builds: the
#: configured table, ``<kind>#<id>`` keys of ids `ClaimRef` accepted, owner
#: tokens and incarnations that are strings by construction, the module's own expressions.
#: Validating a 100-action ``TransactWriteItems`` walks every member of every action: about a
#: tenth of the handler's CPU at 0 objects (cProfile, ``python -m bench --profile``). Every other
#: client, the archive's S3 client included, keeps the validation.
OWNERSHIP_SETTINGS = Config(parameter_validation=False)


@dataclass(frozen=True)
class CleanupClients:
    """boto3 clients of the configured targets; ``None`` for a target that is not configured."""

    apigateway: Any = None
    kms: Any = None
    s3: Any = None
    #: S3 client for the archive bucket (``archive_bucket``).
    archive: Any = None
    #: EventBridge client for the fan-out (``event_bus_arn``).
    events: Any = None
    #: ``bedrock-agentcore`` data-plane client (an AgentCore runtime, code interpreter,
    #: browser or memory configured).
    agentcore: Any = None
    #: DynamoDB client for the ownership table (``ownership_table_name``): the claims' marks,
    #: releases and reads (`claims`).
    ownership: Any = None
    #: Amazon Data Firehose client of the archive's delivery stream (``archive_delivery_stream``).
    firehose: Any = None
    #: DynamoDB client that reads Kinesis ``REMOVE`` records' items back from the session table
    #: (``table_name``: `kinesis_removals`), and the drain's deferred records
    #: (`levers`); the ownership client when there is one.
    table: Any = None
    #: DynamoDB client of the deferred-work table (``deferred_work_table_name``:
    #: `deferred`); the session table's client (a DynamoDB client names its table per call).
    deferred: Any = None
    #: The clients of the configured declared kinds' release calls, by boto3 service name
    #: (`kinds`; ``bedrock-agentcore`` is ``agentcore``).
    services: Mapping[str, Any] = field(default_factory=dict)

    def service(self, name: str) -> Any:
        """The client of the boto3 service ``name`` (``None``: no configured kind uses it)."""
        if name == "bedrock-agentcore" and self.agentcore is not None:
            return self.agentcore
        return self.services.get(name)


def cleanup_session() -> boto3.session.Session:
    """A new boto3 session for the cleanup's clients: response timestamps through the standard
    library (`timestamps`: a third of the CPU of a 1,000-key listing instead of
    ``dateutil``'s) and listed objects parsed for their keys only (`listing_model`: about
    half of what remains). Region, credentials and endpoints come from the environment."""
    core = botocore.session.get_session()
    use_fast_timestamps(core)
    use_keys_only_listings(core)
    return boto3.session.Session(botocore_session=core)


def build_clients(
    config: RuntimeConfig, session: boto3.session.Session | None = None
) -> CleanupClients:
    """Create the per-process clients (thread safe; shared by all workers).

    Region, credentials and endpoint overrides come from the usual environment
    (``AWS_REGION``, ``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_S3``, ...), so the same code runs
    against moto_server. The management API client's endpoint is the configured
    ``SESSION_EXPIRY_WEBSOCKET_ENDPOINT`` (``https://{api-id}.execute-api.{region}.amazonaws.com/{stage}``).
    """
    # A session passed in is the caller's own.
    session = session or cleanup_session()
    settings = client_config(config.max_workers, config.time_guard_ms)
    ownership = (
        session.client("dynamodb", config=settings.merge(OWNERSHIP_SETTINGS))
        if config.ownership_table_name
        else None
    )
    table = None
    if config.table_name:
        table = ownership or session.client("dynamodb", config=settings)
    # One client per service the configured kinds' release calls use (AgentCore's four kinds
    # with props of their own included: their targets are in ``configured_kinds`` too).
    services = {
        name: session.client(name, config=settings)
        for name in dict.fromkeys(settings.kind.service for settings in configured_kinds(config))
    }
    deferred = None
    if config.deferred_work_table_name:
        deferred = table or session.client("dynamodb", config=settings)
    return CleanupClients(
        apigateway=session.client(
            "apigatewaymanagementapi", endpoint_url=config.websocket_endpoint, config=settings
        )
        if config.websocket_endpoint
        else None,
        kms=session.client("kms", config=settings) if config.grant_key_arn else None,
        s3=session.client("s3", config=settings.merge(SCRATCH_S3_SETTINGS))
        if config.scratch_bucket
        else None,
        archive=session.client("s3", config=settings) if config.archive_bucket else None,
        events=session.client("events", config=settings) if config.event_bus_arn else None,
        agentcore=services.get("bedrock-agentcore"),
        ownership=ownership,
        table=table,
        deferred=deferred,
        firehose=session.client("firehose", config=settings)
        if config.archive_delivery_stream and config.archive_bucket
        else None,
        services=services,
    )
