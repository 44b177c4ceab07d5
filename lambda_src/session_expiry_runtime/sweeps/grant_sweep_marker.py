"""Where the grant sweep stopped: one item of the ownership table per grant key.

A run that stops before the key's last ``ListGrants`` page (its time guard, a failed call)
writes the marker of the page it did not finish; the next run starts there instead of at page
one, so the grants past the cut are reached by the next run. A run that reaches the last page
removes the marker: the run after it starts at page one again. The item lives in the ownership
table, which exists whenever the grant sweep does (a ``grant_key`` makes both), and the
cleanup role the sweep runs as may already read and update it (``dynamodb:GetItem``,
``UpdateItem``); it has no time to live attribute, so it never expires:

``{"resource": "grantSweep#<key id>", "keyArn": <the grant key's ARN>,
"nextMarker": <ListGrants Marker, while a pass is unfinished>, "passListed": <grants on the
pages of the unfinished pass the earlier runs finished>, "savedAt": <epoch seconds of the last
change>}``

``passListed`` lets the run that finishes a pass report every grant of the key
(``GrantsOnKey``, alarmed before KMS's 50,000 grants per key), however many runs the pass took.

The ``resource`` value's kind, ``grantSweep``, is none of the ownership records' kinds
(`KINDS`), so no claim can ever collide with it. ``ListGrants`` markers are
opaque and KMS may refuse an old one (``InvalidMarkerException``, AWS KMS API Reference,
"ListGrants"): the sweep then starts at page one (`grant_sweeper`).
"""

from __future__ import annotations

from typing import Any

from ..core.ownership import ATTR_RESOURCE

__all__ = ["MARKER_KIND", "GrantSweepMarker", "marker_resource"]

#: The ``resource`` prefix of marker items (not an ownership record kind).
MARKER_KIND = "grantSweep"
ATTR_NEXT_MARKER = "nextMarker"
ATTR_KEY_ARN = "keyArn"
ATTR_SAVED_AT = "savedAt"
ATTR_LISTED = "passListed"


def marker_resource(key_arn: str) -> str:
    """``grantSweep#<key id>``: the key id is the last segment of the key ARN
    (``arn:aws:kms:<region>:<account>:key/<key id>``)."""
    return f"{MARKER_KIND}#{key_arn.rsplit('/', 1)[-1]}"


class GrantSweepMarker:
    """The grant key's marker item in the ownership table.

    Args:
        dynamodb: a boto3 DynamoDB client.
        table_name: the ownership table.
        key_arn: the grant key's ARN.
    """

    def __init__(self, dynamodb: Any, table_name: str, key_arn: str) -> None:
        self._ddb = dynamodb
        self.table_name = table_name
        self.key_arn = key_arn
        self._key = {ATTR_RESOURCE: {"S": marker_resource(key_arn)}}

    def load(self) -> tuple[str | None, int]:
        """Where the last unfinished run stopped (strongly consistent read): its ``Marker``
        (``None``: start at page one) and the grants the pass's earlier runs listed on the
        pages they finished (0 without a marker, or when the item has no count).

        Raises:
            botocore.exceptions.ClientError, BotoCoreError: the GetItem failed.
        """
        got = self._ddb.get_item(TableName=self.table_name, Key=self._key, ConsistentRead=True)
        item = got.get("Item") or {}
        value = item.get(ATTR_NEXT_MARKER)
        marker = value.get("S") if isinstance(value, dict) else None
        if not (isinstance(marker, str) and marker):
            return None, 0
        listed = (item.get(ATTR_LISTED) or {}).get("N")
        return marker, int(listed) if isinstance(listed, str) and listed.isdigit() else 0

    def save(self, marker: str, now: int, listed: int = 0) -> None:
        """Record that the next run starts at ``marker`` (``now``: epoch seconds), the pass
        having listed ``listed`` grants on the pages finished so far.

        Raises:
            botocore.exceptions.ClientError, BotoCoreError: the UpdateItem failed.
        """
        self._ddb.update_item(
            TableName=self.table_name,
            Key=self._key,
            UpdateExpression="SET #next = :marker, #saved = :now, #key = :key, #listed = :listed",
            ExpressionAttributeNames={
                "#next": ATTR_NEXT_MARKER,
                "#saved": ATTR_SAVED_AT,
                "#key": ATTR_KEY_ARN,
                "#listed": ATTR_LISTED,
            },
            ExpressionAttributeValues={
                ":marker": {"S": marker},
                ":now": {"N": str(now)},
                ":key": {"S": self.key_arn},
                ":listed": {"N": str(listed)},
            },
        )

    def reset(self, now: int) -> None:
        """A run reached the last page: the next one starts at page one.

        Raises:
            botocore.exceptions.ClientError, BotoCoreError: the UpdateItem failed.
        """
        self._ddb.update_item(
            TableName=self.table_name,
            Key=self._key,
            UpdateExpression="SET #saved = :now, #key = :key REMOVE #next, #listed",
            ExpressionAttributeNames={
                "#saved": ATTR_SAVED_AT,
                "#key": ATTR_KEY_ARN,
                "#next": ATTR_NEXT_MARKER,
                "#listed": ATTR_LISTED,
            },
            ExpressionAttributeValues={":now": {"N": str(now)}, ":key": {"S": self.key_arn}},
        )
