"""Deferred work: what a feature flag switched off, kept until the flag is on again.

A step whose flag is off (`feature_flags`) is not run; a record that arrives while the flag
``enabled`` is off is not cleaned at all. Their work is never lost: before the record is reported
done, a **deferred-work item** is written to the deferred-work table
(``SESSION_EXPIRY_DEFERRED_WORK_TABLE_NAME``, the construct's ``<SessionExpiry>/DeferredWorkTable``,
which has its own time to live backstop), and the **drain** — the cleanup function invoked every
5 minutes by the construct's ``Sessions/FeatureFlags/DrainSchedule`` with
``{"sessionExpiryDrain": true}`` — runs that work once the flag is on, through the same step
code, with the same ownership checks (`levers`).

**Who writes it**: the cleanup role alone. No application function (``grant_session_access``)
has any action on the table, so an item the drain finds was written by the cleanup from a record
its event source mapping delivered. The drain still reads each record's item back from the
session table before it acts (`levers.drain`): an item still there in the record's
incarnation means the removal did not happen, and the item is **refused**
(`DeferredStore.refuse`). Versions before this one kept deferred work in the ownership
table, which application functions may write; this version neither reads nor writes it there
(drain it before upgrading: docs, Operating it, "Feature flags").

An item (partition key ``resource``):

==================  ==============================================================================
attribute           value
==================  ==============================================================================
``resource``        ``deferred#<step>#<sequence number>`` (`WHOLE_RECORD` ``*``: every step)
``deferredStep``    the step's metric ``Action`` name, or ``*``: the ``deferredWork`` index's key
``deferredAt``      epoch seconds of the deferral: the index's sort key (oldest first)
``owner``           the record's key (`owner_token`), for reading
``incarnation``     the removed session's incarnation, when it has one
``record``          the stream record (JSON): the old image the step needs, its ``Keys``
``expiresAt``       time to live: ``deferredAt`` + `DEFERRED_RETENTION_SECONDS` (14 days)
``drainingSince``   set while a drain runs the item (``drainId`` names the run)
``refusal``         set when a drain refused it (the reason, with ``refusedAt`` and ``refusedStep``:
                    ``deferredStep`` is removed, so the item leaves the index and no drain takes
                    it again; ``expiresAt`` becomes ``refusedAt`` + 14 days)
==================  ==============================================================================

**Exactly once**: a drain takes an item with a conditional update (not taken, or taken longer
than `DRAIN_STALE_SECONDS` ago by a run that stopped), runs it, and deletes it on the
condition that its own run still holds it; a failed run gives the item back. The steps are
idempotent and ownership-checked besides: a claim already released answers ``already-done``.

**A refused item** is kept for an operator: re-queue it (once its session has really ended) with
``SET deferredStep = refusedStep REMOVE refusal, refusedAt, refusedStep``, or delete it.

**Limits**: an item holds the whole stream record; one above DynamoDB's 400 KB item limit cannot
be written, and its record fails (retried, then the on-failure destination: replay it). Ownership
records outlive their session's end by 2 days only: a claimed step (connection, grant, AgentCore)
kept off longer finds its claim expired and does not act (the grant sweep retires grants left).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from ..core.config import (
    METRIC_DEFERRED_WORK_AGE,
    METRIC_DEFERRED_WORK_DONE,
    METRIC_SESSIONS_DEFERRED,
    METRIC_STEPS_DISABLED,
)
from ..core.ownership import owner_token

__all__ = [
    "METRIC_DEFERRED_WORK_AGE",
    "METRIC_DEFERRED_WORK_DONE",
    "METRIC_SESSIONS_DEFERRED",
    "METRIC_STEPS_DISABLED",
    "DeferredStore",
    "is_drain_event",
    "item_key",
    "new_drain_id",
]

DEFERRED_PREFIX = "deferred#"
#: The table's partition key (String) and time to live attribute (Number): the construct creates
#: the table with them (``cdk_session_expiry.switches.deferred_work``; a test checks both sides
#: agree).
ATTR_RESOURCE = "resource"
ATTR_EXPIRES_AT = "expiresAt"
ATTR_DEFERRED_STEP = "deferredStep"
ATTR_DEFERRED_AT = "deferredAt"
ATTR_RECORD = "record"
ATTR_DRAINING_SINCE = "drainingSince"
ATTR_DRAIN_ID = "drainId"
ATTR_REFUSAL = "refusal"
ATTR_REFUSED_AT = "refusedAt"
ATTR_REFUSED_STEP = "refusedStep"
#: The deferred-work table's index of pending work (sparse: a refused item leaves it).
DEFERRED_INDEX = "deferredWork"
#: The step name of a whole record deferred while ``enabled`` was off.
WHOLE_RECORD = "*"
#: How long a deferred item is kept (the table's time to live), and a refused one after its
#: refusal: 14 days.
DEFERRED_RETENTION_SECONDS = 14 * 24 * 3600
#: A drain's hold on an item is given up after this long (a drain that stopped mid-run).
DRAIN_STALE_SECONDS = 15 * 60
#: The event the drain schedule sends the cleanup function.
DRAIN_EVENT_KEY = "sessionExpiryDrain"


def is_drain_event(event: object) -> bool:
    """Whether ``event`` is the drain schedule's (``{"sessionExpiryDrain": true}``)."""
    return isinstance(event, Mapping) and event.get(DRAIN_EVENT_KEY) is True


def item_key(step: str, sequence_number: str) -> str:
    """The ``resource`` of the deferred item of ``step`` for one record."""
    return f"{DEFERRED_PREFIX}{step}#{sequence_number}"


class DeferredStore:
    """Deferred-work items in the deferred-work table (see the module docstring).

    Args:
        client: boto3 DynamoDB client. table: the deferred-work table's name.
    """

    def __init__(self, client: Any, table: str) -> None:
        self.client = client
        self.table = table

    def defer(
        self,
        raw: Mapping[str, Any],
        steps: Sequence[str],
        *,
        keys: Mapping[str, Any],
        incarnation: str | None,
        now: float | None = None,
    ) -> None:
        """Write one item per step of ``steps`` for the stream record ``raw``; an item already
        there (the same record deferred before: a retried batch) is kept as it is.

        Raises:
            botocore.exceptions.ClientError: a write failed (e.g. an item above 400 KB): the
                caller fails the record, which is retried.
        """
        at = int(time.time() if now is None else now)
        sequence_number = str(raw["dynamodb"]["SequenceNumber"])
        try:
            owner = owner_token({k: str(v) for k, v in keys.items()})
        except ValueError:
            owner = json.dumps(dict(keys), default=str, sort_keys=True)
        for step in steps:
            item = {
                ATTR_RESOURCE: {"S": item_key(step, sequence_number)},
                ATTR_DEFERRED_STEP: {"S": step},
                ATTR_DEFERRED_AT: {"N": str(at)},
                "owner": {"S": owner},
                ATTR_RECORD: {"S": json.dumps(raw, separators=(",", ":"), default=_number)},
                ATTR_EXPIRES_AT: {"N": str(at + DEFERRED_RETENTION_SECONDS)},
            }
            if incarnation:
                item["incarnation"] = {"S": incarnation}
            self._put_once(item)

    def _put_once(self, item: dict[str, Any]) -> None:
        """Write ``item`` unless the same record's step is deferred already (a retried batch):
        an overwrite would drop a running drain's hold, leaving the item to be done twice."""
        try:
            self.client.put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression="attribute_not_exists(#r)",
                ExpressionAttributeNames={"#r": ATTR_RESOURCE},
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            pass  # deferred once already: that item stands

    def pending(self, step: str, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` items of ``step``, oldest first (strongly consistent reads are not
        available on a global secondary index: an item written a moment ago may show later)."""
        answer = self.client.query(
            TableName=self.table,
            IndexName=DEFERRED_INDEX,
            KeyConditionExpression="#s = :s",
            ExpressionAttributeNames={"#s": ATTR_DEFERRED_STEP},
            ExpressionAttributeValues={":s": {"S": step}},
            ScanIndexForward=True,
            Limit=limit,
        )
        items: list[dict[str, Any]] = answer.get("Items", [])
        return items

    def take(self, item: Mapping[str, Any], drain_id: str, now: float) -> bool:
        """Hold ``item`` for this drain run; ``False`` when it is gone or held by another."""
        try:
            self.client.update_item(
                TableName=self.table,
                Key={ATTR_RESOURCE: item[ATTR_RESOURCE]},
                UpdateExpression="SET #d = :now, #i = :id",
                ConditionExpression=(
                    "attribute_exists(#r) AND (attribute_not_exists(#d) OR #d < :stale)"
                ),
                ExpressionAttributeNames={
                    "#d": ATTR_DRAINING_SINCE,
                    "#i": ATTR_DRAIN_ID,
                    "#r": ATTR_RESOURCE,
                },
                ExpressionAttributeValues={
                    ":now": {"N": str(int(now))},
                    ":stale": {"N": str(int(now) - DRAIN_STALE_SECONDS)},
                    ":id": {"S": drain_id},
                },
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def done(self, item: Mapping[str, Any], drain_id: str) -> bool:
        """Delete ``item`` if this run still holds it; whether it did."""
        return self._conditional(item, drain_id, delete=True)

    def give_back(self, item: Mapping[str, Any], drain_id: str) -> bool:
        """Release this run's hold on ``item`` (its work failed: a later run retries it)."""
        return self._conditional(item, drain_id, delete=False)

    def refuse(self, item: Mapping[str, Any], drain_id: str, reason: str, now: float) -> bool:
        """Keep ``item`` for an operator, out of every drain's way (module docstring), if this
        run still holds it; whether it did."""
        step = item[ATTR_DEFERRED_STEP]["S"]
        try:
            self.client.update_item(
                TableName=self.table,
                Key={ATTR_RESOURCE: item[ATTR_RESOURCE]},
                UpdateExpression=(
                    "SET #rf = :reason, #ra = :now, #rs = :step, #e = :expires REMOVE #s, #d, #i"
                ),
                ConditionExpression="#i = :id",
                ExpressionAttributeNames={
                    "#rf": ATTR_REFUSAL,
                    "#ra": ATTR_REFUSED_AT,
                    "#rs": ATTR_REFUSED_STEP,
                    "#e": ATTR_EXPIRES_AT,
                    "#s": ATTR_DEFERRED_STEP,
                    "#d": ATTR_DRAINING_SINCE,
                    "#i": ATTR_DRAIN_ID,
                },
                ExpressionAttributeValues={
                    ":reason": {"S": reason},
                    ":now": {"N": str(int(now))},
                    ":step": {"S": step},
                    ":expires": {"N": str(int(now) + DEFERRED_RETENTION_SECONDS)},
                    ":id": {"S": drain_id},
                },
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def _conditional(self, item: Mapping[str, Any], drain_id: str, *, delete: bool) -> bool:
        common: dict[str, Any] = {
            "TableName": self.table,
            "Key": {ATTR_RESOURCE: item[ATTR_RESOURCE]},
            "ConditionExpression": "#i = :id",
            "ExpressionAttributeNames": {"#i": ATTR_DRAIN_ID},
            "ExpressionAttributeValues": {":id": {"S": drain_id}},
        }
        try:
            if delete:
                self.client.delete_item(**common)
            else:
                common["ExpressionAttributeNames"]["#d"] = ATTR_DRAINING_SINCE
                self.client.update_item(UpdateExpression="REMOVE #d, #i", **common)
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True


def _number(value: object) -> int | float:
    """A ``Decimal`` of the record as a JSON number (a record of the Kinesis change source carries
    ``ApproximateCreationDateTime`` as one: `kinesis_records`), as Lambda's JSON has it.

    Raises:
        TypeError: ``value`` is not a ``Decimal`` (``json.dumps``'s own error).
    """
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def new_drain_id() -> str:
    """A fresh id naming one drain run."""
    return uuid.uuid4().hex
