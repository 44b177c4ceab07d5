"""The pause watch: how long the cleanup has been paused, as a metric that can be alarmed.

A disabled event source mapping stops reading the stream and keeps its position, but the stream
keeps a record for 24 hours only ("In DynamoDB Streams, there is a 24 hour limit on data
retention": DynamoDB Streams API Reference, TrimmedDataAccessException). Every other alarm of
the cleanup watches what an invocation does, so a paused cleanup is silent until its records are
gone. This check, run every 5 minutes by its own EventBridge rule (handler
``session_expiry_runtime.pause_watch.handler``), reads the mapping (``GetEventSourceMapping``)
and writes one embedded metric:

* ``CleanupPausedSeconds`` (Seconds, dimension ``EventSourceMappingUUID``): now - the mapping's
  ``LastModified`` while its ``State`` is ``Disabled`` or ``Disabling``, 0 in any other state.
  ``LastModified`` is "the date that the event source mapping was last updated or that its state
  changed" (AWS Lambda API Reference, EventSourceMappingConfiguration): an update to a mapping
  that is already disabled (a second ``disable``, a deploy that changes its batch size) starts
  the count again although the stream's clock does not stop; the value is then a lower bound.

The construct alarms on its Maximum above ``alarm_cleanup_paused_after`` (12 hours by default).
:func:`deadlines` gives the kill switch the same times: when the records written since the pause
start to leave the stream, and when the mapping's ``MaximumRecordAgeInSeconds`` sends them to
the on-failure destination at resume. A failed ``GetEventSourceMapping`` raises (the function's
errors alarm fires): a watch that cannot see the mapping must not report 0.

Environment: ``SESSION_EXPIRY_EVENT_SOURCE_MAPPING_UUID`` (required),
``SESSION_EXPIRY_METRICS_NAMESPACE`` (default ``SessionExpiry``). IAM:
``lambda:GetEventSourceMapping`` on that mapping.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
from botocore.config import Config

from .config import (
    DEFAULT_METRICS_NAMESPACE,
    DIMENSION_EVENT_SOURCE_MAPPING,
    ENV_EVENT_SOURCE_MAPPING_UUID,
    ENV_METRICS_NAMESPACE,
    METRIC_CLEANUP_PAUSED_SECONDS,
)
from .metrics import UNIT_SECONDS, gauge_document

logger = logging.getLogger(__name__)

#: Mapping states in which Lambda does not read the stream for the cleanup.
PAUSED_STATES = frozenset({"Disabled", "Disabling"})
#: How long DynamoDB Streams keeps a record.
STREAM_RETENTION = timedelta(hours=24)
#: One call a run: short timeouts, so a hung call ends within the function's 30 seconds.
_CLIENT_CONFIG = Config(connect_timeout=5, read_timeout=10, retries={"mode": "standard"})


def _utc(value: datetime) -> datetime:
    return value.astimezone(timezone.utc)


def paused_since(mapping: Mapping[str, Any]) -> datetime | None:
    """When the mapping was paused (its ``LastModified``, UTC) if its ``State`` is ``Disabled``
    or ``Disabling``; ``None`` otherwise (or without ``LastModified``)."""
    modified = mapping.get("LastModified")
    if mapping.get("State") not in PAUSED_STATES or not isinstance(modified, datetime):
        return None
    return _utc(modified)


def paused_seconds(mapping: Mapping[str, Any], now: datetime) -> int:
    """Whole seconds the mapping has been paused at ``now`` (never negative); 0 when enabled."""
    since = paused_since(mapping)
    if since is None:
        return 0
    return max(0, int((now - since).total_seconds()))


def deadlines(
    mapping: Mapping[str, Any], retention: timedelta = STREAM_RETENTION
) -> dict[str, Any]:
    """The times that bound a pause, as ISO 8601 UTC strings (``None`` while not paused).

    ``retention`` is how long the change source keeps a record: a DynamoDB stream's 24 hours
    by default, the Kinesis stream's retention with the Kinesis change source.

    * ``pausedSince``: the mapping's ``LastModified``;
    * ``streamRetentionDeadline``: ``pausedSince`` + ``retention``. Records written since the pause
      start to leave the stream then; records the cleanup had not reached when it was paused
      (its iterator age at that moment) leave it earlier;
    * ``maxRecordAgeDeadline``: ``pausedSince`` + the mapping's ``MaximumRecordAgeInSeconds``:
      resumed after it, the records written since the pause that are older than that go to the
      on-failure destination instead of the cleanup (``None`` when the age is unlimited, -1);
    * ``maximumRecordAgeSeconds``: that setting as the mapping has it.
    """
    since = paused_since(mapping)
    age = mapping.get("MaximumRecordAgeInSeconds")
    retention_deadline = max_age = None
    if since is not None:
        retention_deadline = (since + retention).isoformat()
        if isinstance(age, int) and age >= 0:
            max_age = (since + timedelta(seconds=age)).isoformat()
    return {
        "pausedSince": None if since is None else since.isoformat(),
        "streamRetentionDeadline": retention_deadline,
        "maxRecordAgeDeadline": max_age,
        "maximumRecordAgeSeconds": age,
    }


def watch(
    lambda_client: Any,
    uuid: str,
    *,
    namespace: str,
    now: datetime,
    write: Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """Read the mapping, write ``CleanupPausedSeconds`` as one EMF line (``write``, default
    stdout); return what was found.

    Raises:
        botocore.exceptions.ClientError: ``GetEventSourceMapping`` failed (e.g. no permission,
            unknown UUID).
    """
    mapping = lambda_client.get_event_source_mapping(UUID=uuid)
    seconds = paused_seconds(mapping, now)
    document = gauge_document(
        namespace,
        METRIC_CLEANUP_PAUSED_SECONDS,
        seconds,
        unit=UNIT_SECONDS,
        dimensions={DIMENSION_EVENT_SOURCE_MAPPING: uuid},
        timestamp_ms=int(now.timestamp() * 1000),
    )
    (write or sys.stdout.write)(json.dumps(document, separators=(",", ":")) + "\n")
    found = {"uuid": uuid, "state": mapping.get("State"), "pausedSeconds": seconds}
    found.update(deadlines(mapping))
    if seconds:
        logger.warning("cleanup paused %s", json.dumps(found), extra={"pause": found})
    return found


_client: Any = None


def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Scheduled entry point: :func:`watch` of the mapping named by the environment.

    Raises:
        KeyError: ``SESSION_EXPIRY_EVENT_SOURCE_MAPPING_UUID`` is not set.
    """
    global _client
    if _client is None:
        _client = boto3.session.Session().client("lambda", config=_CLIENT_CONFIG)
    return watch(
        _client,
        os.environ[ENV_EVENT_SOURCE_MAPPING_UUID],
        namespace=os.environ.get(ENV_METRICS_NAMESPACE) or DEFAULT_METRICS_NAMESPACE,
        now=datetime.now(timezone.utc),
    )
