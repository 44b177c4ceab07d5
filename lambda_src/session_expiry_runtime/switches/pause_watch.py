"""The pause watch: how long the cleanup has been paused, as a metric that can be alarmed.

A disabled event source mapping stops reading the stream and keeps its position, but the stream
keeps a record for 24 hours only ("In DynamoDB Streams, there is a 24 hour limit on data
retention": DynamoDB Streams API Reference, TrimmedDataAccessException). Every other alarm of
the cleanup watches what an invocation does, so a paused cleanup is silent until its records are
gone. This check, run every 5 minutes by its own EventBridge rule (handler
``session_expiry_runtime.switches.pause_watch.handler``), reads the mapping
(``GetEventSourceMapping``)
and writes one embedded metric on **every** run, 0 included (the construct's alarm treats a
missing value as breaching: a watch that stopped running is heard):

* ``CleanupPausedSeconds`` (Seconds, dimension ``EventSourceMappingUUID``): now - the time the
  pause started while the mapping's ``State`` is ``Disabled`` or ``Disabling``, 0 in any other
  state. The pause started at the mapping's ``LastModified``, "the date that the event source
  mapping was last updated or that its state changed" (AWS Lambda API Reference,
  EventSourceMappingConfiguration) — or earlier, when the circuit breaker paused it: each of
  the breaker's failed probes disables the mapping again and moves ``LastModified``, so with
  the breaker on (``SESSION_EXPIRY_BREAKER_STATE_PARAMETER``) the watch reads the breaker's
  record (``GetParameter``) and, while the breaker is open or half-open and the mapping is as
  the breaker left it (`circuit_breaker.moved_by_others`), counts from the earlier of
  ``LastModified`` and the record's ``pausedSince`` — the breaker's first opening of an
  unbroken run of openings and probes. A half-open breaker's probe (the mapping enabled for a
  few minutes) does not end that count: the run ends when the breaker closes after a passed
  probe, or when the mapping is resumed. Someone else's update of the mapping the breaker
  paused (the kill switch's ``disable``, a deploy's update while it is disabled) does not end
  it either: the breaker yields (closes) but keeps ``pausedSince``, and the watch counts from
  it while the mapping stays disabled and unchanged since
  (`circuit_breaker.paused_as_yielded`). Without the breaker, any update to a mapping
  that is already disabled (a second kill-switch ``disable``, a deploy that changes its batch
  size) starts the count again although the stream's clock does not stop; the value is then a
  lower bound (the kill switch says so, with ``alreadyPausedSince``).

The construct alarms on its Maximum above ``alarm_cleanup_paused_after`` (12 hours by default).
`deadlines` gives the kill switch the same times: when the records written since the pause
start to leave the stream, and when the mapping's ``MaximumRecordAgeInSeconds`` sends them to
the on-failure destination at resume; the watch's own answer gives them from the same start as
the metric. A failed ``GetEventSourceMapping`` (or ``GetParameter`` of the breaker's record, or an
unreadable record) raises and writes no metric (the function's errors alarm fires, and the
paused-cleanup alarm on the missing value): a watch that cannot see the pause must not report 0.

Environment: ``SESSION_EXPIRY_EVENT_SOURCE_MAPPING_UUID`` (required),
``SESSION_EXPIRY_METRICS_NAMESPACE`` (default ``SessionExpiry``),
``SESSION_EXPIRY_BREAKER_STATE_PARAMETER`` (the breaker's record; set by the construct with
``circuit_breaker`` only). IAM: ``lambda:GetEventSourceMapping`` on that mapping,
``ssm:GetParameter`` on that parameter.
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

from ..core.config import (
    DEFAULT_METRICS_NAMESPACE,
    DIMENSION_EVENT_SOURCE_MAPPING,
    ENV_BREAKER_STATE_PARAMETER,
    ENV_EVENT_SOURCE_MAPPING_UUID,
    ENV_METRICS_NAMESPACE,
    METRIC_CLEANUP_PAUSED_SECONDS,
)
from ..core.metrics import UNIT_SECONDS, gauge_document
from .circuit_breaker import CLOSED, MappingView, Record, moved_by_others, paused_as_yielded

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


def breaker_paused_since(record: Record | None, mapping: Mapping[str, Any]) -> datetime | None:
    """The circuit breaker's first opening of its current run (``record.paused_since``, UTC)
    while it is open or half-open and the mapping is as it left it or disabled by someone
    else since, or while it is closed after yielding to someone else's pause and the mapping
    is still paused as then (`circuit_breaker.paused_as_yielded`); ``None`` otherwise
    (no breaker, a record without the field, a passed probe, a mapping resumed or changed
    since the yield)."""
    if record is None or record.paused_since is None:
        return None
    view = MappingView.of(mapping)
    if record.state == CLOSED:
        kept = paused_as_yielded(record, view)
    else:  # someone else's disable over the breaker's pause does not restart the stream's clock
        kept = moved_by_others(record, view) is None or view.state in PAUSED_STATES
    return datetime.fromtimestamp(record.paused_since, timezone.utc) if kept else None


def pause_start(mapping: Mapping[str, Any], breaker: Record | None = None) -> datetime | None:
    """When the current pause started (UTC): the earlier of `paused_since` and
    `breaker_paused_since` (the latter alone during a breaker's probe); ``None`` when
    the cleanup is not paused."""
    starts = [t for t in (paused_since(mapping), breaker_paused_since(breaker, mapping)) if t]
    return min(starts) if starts else None


def paused_seconds(mapping: Mapping[str, Any], now: datetime, breaker: Record | None = None) -> int:
    """Whole seconds the cleanup has been paused at ``now`` (never negative), counted from
    `pause_start`; 0 when it is not paused."""
    since = pause_start(mapping, breaker)
    if since is None:
        return 0
    return max(0, int((now - since).total_seconds()))


def deadlines(
    mapping: Mapping[str, Any],
    retention: timedelta = STREAM_RETENTION,
    *,
    breaker: Record | None = None,
) -> dict[str, Any]:
    """The times that bound a pause, as ISO 8601 UTC strings (``None`` while not paused).

    ``retention`` is how long the change source keeps a record: a DynamoDB stream's 24 hours
    by default, the Kinesis stream's retention with the Kinesis change source.

    * ``pausedSince``: the mapping's ``LastModified``, or the circuit breaker's first opening
      when earlier (``breaker``, the breaker's record: `pause_start`);
    * ``streamRetentionDeadline``: ``pausedSince`` + ``retention``. Records written since the pause
      start to leave the stream then; records the cleanup had not reached when it was paused
      (its iterator age at that moment) leave it earlier;
    * ``maxRecordAgeDeadline``: ``pausedSince`` + the mapping's ``MaximumRecordAgeInSeconds``:
      resumed after it, the records written since the pause that are older than that go to the
      on-failure destination instead of the cleanup (``None`` when the age is unlimited, -1);
    * ``maximumRecordAgeSeconds``: that setting as the mapping has it.
    """
    since = pause_start(mapping, breaker)
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


def read_breaker(ssm_client: Any, parameter: str) -> Record:
    """The circuit breaker's record (``GetParameter`` of ``parameter``).

    Raises:
        botocore.exceptions.ClientError: ``GetParameter`` failed (no permission, no parameter).
        ValueError: the value is not a breaker record (`circuit_breaker.Record.from_json`).
    """
    answer = ssm_client.get_parameter(Name=parameter)
    return Record.from_json(answer["Parameter"]["Value"])


def watch(
    lambda_client: Any,
    uuid: str,
    *,
    namespace: str,
    now: datetime,
    write: Callable[[str], Any] | None = None,
    breaker: Callable[[], Record] | None = None,
) -> dict[str, Any]:
    """Read the mapping (and, with ``breaker``, the circuit breaker's record after it), write
    ``CleanupPausedSeconds`` as one EMF line (``write``, default stdout) on every run, 0
    included; return what was found.

    Raises:
        botocore.exceptions.ClientError: ``GetEventSourceMapping`` failed (e.g. no permission,
            unknown UUID), or ``breaker``'s read did; nothing is written then.
        ValueError: ``breaker`` read no breaker record.
    """
    mapping = lambda_client.get_event_source_mapping(UUID=uuid)
    record = breaker() if breaker is not None else None
    seconds = paused_seconds(mapping, now, record)
    document = gauge_document(
        namespace,
        METRIC_CLEANUP_PAUSED_SECONDS,
        seconds,
        unit=UNIT_SECONDS,
        dimensions={DIMENSION_EVENT_SOURCE_MAPPING: uuid},
        timestamp_ms=int(now.timestamp() * 1000),
    )
    (write or sys.stdout.write)(json.dumps(document, separators=(",", ":")) + "\n")
    found = {
        "uuid": uuid,
        "state": mapping.get("State"),
        "pausedSeconds": seconds,
        "breaker": None if record is None else record.state,
    }
    found.update(deadlines(mapping, breaker=record))
    if seconds:
        logger.warning("cleanup paused %s", json.dumps(found), extra={"pause": found})
    return found


_clients: dict[str, Any] = {}


def _client(service: str) -> Any:
    if service not in _clients:
        _clients[service] = boto3.session.Session().client(service, config=_CLIENT_CONFIG)
    return _clients[service]


def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Scheduled entry point: `watch` of the mapping named by the environment (and of the
    breaker's record when ``SESSION_EXPIRY_BREAKER_STATE_PARAMETER`` is set).

    Raises:
        KeyError: ``SESSION_EXPIRY_EVENT_SOURCE_MAPPING_UUID`` is not set.
    """
    parameter = os.environ.get(ENV_BREAKER_STATE_PARAMETER)
    return watch(
        _client("lambda"),
        os.environ[ENV_EVENT_SOURCE_MAPPING_UUID],
        namespace=os.environ.get(ENV_METRICS_NAMESPACE) or DEFAULT_METRICS_NAMESPACE,
        now=datetime.now(timezone.utc),
        breaker=(lambda: read_breaker(_client("ssm"), parameter)) if parameter else None,
    )
