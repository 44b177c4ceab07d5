"""Fan-out: one EventBridge event per cleaned session, put in batches after the cleanup.

A DynamoDB stream serves about two concurrent readers (Amazon DynamoDB Developer Guide,
"DynamoDB Streams and AWS Lambda triggers": no more than two processes should read from the
same shard at once), so other services learn about ended sessions from the event bus instead of
becoming stream readers.

Event (``PutEvents`` entry)::

    Source      "cdk-session-expiry"
    DetailType  "Session Cleaned"
    Detail      {"sessionKey": {"pk": "s-1"}, "tenant": "t-1" | null,
                 "reason": "ttl" | "deleted-after-expiry" | "explicit",
                 "ttlLagSeconds": 42 | null, "sequenceNumber": "...", "eventId": "...",
                 "approximateCreationDateTime": <epoch s>,
                 "steps": {"Archive": "done", "DeleteConnection": "already-done", ...},
                 "archiveKey": "archive/date=..." (with an archive bucket)}

Only ``cleaned`` records get an event, after all their steps succeeded. ``PutEvents`` takes at
most 10 entries a call (Amazon EventBridge API Reference, PutEvents) and answers HTTP 200 even
when some entries fail: their ``Entries[i]`` carries ``ErrorCode``. The record behind a failed
entry (or behind every entry of a call that raised) is turned into a failed record, so the event
source mapping redelivers it; its cleanup steps are idempotent and its event is put again.
Delivery is therefore at least once: consumers deduplicate on ``detail.sequenceNumber``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..core.config import ACTION_PUBLISH_EVENT, EVENT_DETAIL_TYPE, EVENT_SOURCE
from ..core.decode import to_json_value
from ..owners.outcomes import OUTCOME_CLEANED, OUTCOME_FAILED, error_text

#: PutEvents accepts 1..10 entries per request.
MAX_ENTRIES_PER_CALL = 10
_DETAIL_FIELDS = (
    "reason",
    "ttlLagSeconds",
    "sequenceNumber",
    "eventId",
    "approximateCreationDateTime",
    "steps",
    "archiveKey",
)


def event_detail(result: Any) -> dict[str, Any]:
    """The ``Detail`` of one cleaned record's event, from its ``RecordResult``."""
    log = result.log
    # The tenant attribute may hold any DynamoDB type (Number, binary, set): make it JSON.
    detail: dict[str, Any] = {"sessionKey": log.get("keys"), "tenant": to_json_value(result.tenant)}
    for name in _DETAIL_FIELDS:
        if name in log:
            detail[name] = log[name]
    detail.setdefault("ttlLagSeconds", None)
    return detail


def event_entry(result: Any, bus_arn: str | None) -> dict[str, Any]:
    """One ``PutEvents`` entry for a cleaned record."""
    entry = {
        "Source": EVENT_SOURCE,
        "DetailType": EVENT_DETAIL_TYPE,
        "Detail": json.dumps(event_detail(result), separators=(",", ":"), sort_keys=True),
    }
    if bus_arn:
        entry["EventBusName"] = bus_arn
    return entry


def publish(client: Any, bus_arn: str | None, results: Sequence[Any]) -> dict[int, str]:
    """Put one event per result, 10 per call; return ``{index in results: error}`` of failures.

    Never raises: a call that raises fails every entry it carried.
    """
    failures: dict[int, str] = {}
    for start in range(0, len(results), MAX_ENTRIES_PER_CALL):
        chunk = results[start : start + MAX_ENTRIES_PER_CALL]
        try:
            answer = client.put_events(Entries=[event_entry(r, bus_arn) for r in chunk])
        except (ClientError, BotoCoreError) as exc:
            for offset in range(len(chunk)):
                failures[start + offset] = error_text(exc)
            continue
        entries = answer.get("Entries") or []
        for offset in range(len(chunk)):
            entry = entries[offset] if offset < len(entries) else None
            if entry is None:
                failures[start + offset] = "PutEvents answered no entry for this event"
            elif entry.get("ErrorCode") or not entry.get("EventId"):
                code = entry.get("ErrorCode", "NoEventId")
                failures[start + offset] = f"{code}: {entry.get('ErrorMessage', '')}".rstrip(": ")
    return failures


def publish_session_events(client: Any, bus_arn: str | None, results: Sequence[Any]) -> int:
    """Publish the events of every ``cleaned`` result; turn results with failed entries into
    ``failed`` ones (action ``PublishEvent``). Returns how many events were put."""
    cleaned = [r for r in results if r.outcome == OUTCOME_CLEANED]
    failures = publish(client, bus_arn, cleaned)
    for index, error in failures.items():
        result = cleaned[index]
        result.outcome = OUTCOME_FAILED
        result.failed_actions = (*result.failed_actions, ACTION_PUBLISH_EVENT)
        result.log.setdefault("errors", {})[ACTION_PUBLISH_EVENT] = error
    return len(cleaned) - len(failures)
