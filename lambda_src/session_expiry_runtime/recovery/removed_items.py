"""An S3 payload's ``REMOVE`` records must name items that are gone from the table.

DynamoDB writes a ``REMOVE`` record only once the item is deleted. Replay takes the records of
an S3 on-failure object on the object's word (the stream may no longer hold them), and whoever
can write the bucket can write a ``REMOVE`` record naming this stream's own ARN. So, before a
payload is cleaned, the ``Keys`` of each of its ``REMOVE`` records are read back from the table
(``GetItem``, strongly consistent, key attributes only): when the table holds that item, the
whole message is kept (`ItemStillInTable`). A genuine record whose key was used again
since (a new session under the same key) is kept too, for the operator to decide; the S3
lifecycle rule and the grant sweep still clean the old session's resources.

A queue message's records are read from the stream itself (``read_range``), so they are not
checked here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.decode import DecodeError, decode_binary
from .failure_records import BatchInfo, ReplayError
from .replay_trust import table_of_stream


class ItemStillInTable(ReplayError):
    """A payload ``REMOVE`` record names an item the table still holds (forged, or the key was
    used again)."""


def _key_for_get_item(keys: Mapping[str, Any], index: int) -> dict[str, Any]:
    """``Keys`` as Lambda delivers them (``B`` as base64 text) in boto3's shape (``bytes``)."""
    key: dict[str, Any] = {}
    for name, value in keys.items():
        if not (isinstance(value, Mapping) and len(value) == 1):
            raise ReplayError(f"payload record {index} Keys {name}={value!r}: expected S, N or B")
        ((kind, raw),) = value.items()
        if kind == "B":
            try:
                raw = decode_binary(raw, f"payload record {index} Keys {name}.B")
            except DecodeError as exc:
                raise ReplayError(str(exc)) from None
        elif kind not in ("S", "N") or not isinstance(raw, str):
            raise ReplayError(f"payload record {index} Keys {name}={value!r}: expected S, N or B")
        key[name] = {kind: raw}
    return key


def check_removed(records: Sequence[Mapping[str, Any]], info: BatchInfo, tables: Any) -> None:
    """Refuse a payload whose ``REMOVE`` records name items the table still holds.

    Args:
        records: the payload's records, already checked by
            `failure_records.payload_records` (so ``info.stream_arn`` is trusted).
        info: the message's batch info; its stream ARN names the table.
        tables: a boto3 DynamoDB client (``GetItem`` on the table, addressed by its ARN).

    Raises:
        ItemStillInTable: the table holds the item a ``REMOVE`` record names.
        ReplayError: a ``REMOVE`` record has no ``Keys``, or a key value is not S, N or B.
        botocore.exceptions.ClientError: ``GetItem`` failed (the message is kept as failed).
    """
    table = table_of_stream(info.stream_arn)
    if table is None:  # check_stream refuses such a message first
        raise ReplayError(f"{info.stream_arn!r} is not a DynamoDB stream ARN")
    for index, record in enumerate(records):
        if record.get("eventName") != "REMOVE":
            continue
        keys = (record.get("dynamodb") or {}).get("Keys")
        if not isinstance(keys, Mapping) or not keys:
            raise ReplayError(f"payload record {index} is a REMOVE record without Keys")
        names = {f"#k{i}": name for i, name in enumerate(keys)}
        answer = tables.get_item(
            TableName=table,
            Key=_key_for_get_item(keys, index),
            ConsistentRead=True,
            ProjectionExpression=", ".join(names),
            ExpressionAttributeNames=names,
        )
        if answer.get("Item"):
            raise ItemStillInTable(
                f"payload record {index} is a REMOVE of Keys {dict(keys)!r}, but {table} still "
                "holds that item (GetItem, consistent read): expected it gone. Forged, or the "
                "key was used again since"
            )
