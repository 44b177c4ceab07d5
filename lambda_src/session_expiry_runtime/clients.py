"""The boto3 clients of the cleanup: one shared, thread-safe set per process.

:func:`build_clients` creates a client only for a configured target; a step whose client is
``None`` is not configured and never runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

from .config import RuntimeConfig
from .timestamps import fast_timestamp_session

#: botocore ``standard`` retry mode: exponential backoff with jitter, retry quota, and retries
#: of throttling (incl. 429 LimitExceededException), 5xx and connection errors. Attempts per
#: call, the first one included (botocore's ``total_max_attempts``).
MAX_ATTEMPTS = 4
CONNECT_TIMEOUT_SECONDS = 5
READ_TIMEOUT_SECONDS = 10


def client_config(max_workers: int) -> Config:
    """botocore settings shared by every cleanup client.

    ``standard`` retries with :data:`MAX_ATTEMPTS` attempts, bounded timeouts (so one hung call
    cannot outlast the time guard), and a connection pool large enough for the step pool plus
    the record threads (archive writes), so no connection is opened and discarded per call.
    """
    return Config(
        retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS},
        max_pool_connections=max(10, 2 * max_workers),
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
    )


#: The scratch step's S3 client sends only parameters its own code built — the configured bucket,
#: an accepted prefix, continuation tokens and keys S3 itself listed — so botocore's client-side
#: parameter validation (a documented setting, "for performance reasons") checks nothing there;
#: it costs about 2 ms of CPU per 1,000-key DeleteObjects, a few per cent of a 2,500-object
#: session (BENCHMARKS.md). Every other client, the archive's S3 client included, keeps it.
SCRATCH_S3_SETTINGS = Config(parameter_validation=False)


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
    #: ``bedrock-agentcore`` data-plane client (an AgentCore runtime, code interpreter or
    #: browser configured).
    agentcore: Any = None


def build_clients(
    config: RuntimeConfig, session: boto3.session.Session | None = None
) -> CleanupClients:
    """Create the per-process clients (thread safe; shared by all workers).

    Region, credentials and endpoint overrides come from the usual environment
    (``AWS_REGION``, ``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_S3``, ...), so the same code runs
    against moto_server. The management API client's endpoint is the configured
    ``SESSION_EXPIRY_WEBSOCKET_ENDPOINT`` (``https://{api-id}.execute-api.{region}.amazonaws.com/{stage}``).
    """
    # Response timestamps through the standard library (see .timestamps): a third of the CPU
    # of a 1,000-key listing instead of dateutil's. A session passed in is the caller's own.
    session = session or fast_timestamp_session()
    settings = client_config(config.max_workers)
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
        agentcore=session.client("bedrock-agentcore", config=settings)
        if config.agent_runtime_arn or config.code_interpreter_id or config.browser_id
        else None,
    )
