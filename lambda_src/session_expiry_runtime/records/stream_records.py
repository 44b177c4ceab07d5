"""Stream records as ``GetRecords`` returns them, reshaped into what Lambda delivers.

The event source mapping reads DynamoDB Streams with ``GetRecords`` and hands the function JSON.
Anything else that feeds the cleanup from the stream — the failure replay here, the local
pipeline in ``cdk_session_expiry.testing``, the tests and benchmarks — must reshape records the
same way, so this is the one place that does it. Differences (AWS Lambda Developer Guide,
"Using AWS Lambda with Amazon DynamoDB", example event):

* ``dynamodb.ApproximateCreationDateTime`` is epoch seconds, not a timestamp;
* ``B`` and ``BS`` values are base64 text, not bytes;
* ``userIdentity`` keys are ``type``/``principalId`` (boto3 parses ``Type``/``PrincipalId``);
* Lambda adds ``eventSourceARN``.

Pure functions only: no AWS calls.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

#: ``userIdentity`` of a record written by DynamoDB's time to live process.
TTL_USER_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def _b64(raw: Any) -> str:
    if isinstance(raw, str):  # already base64 text
        return raw
    return base64.b64encode(bytes(raw)).decode("ascii")


def _attribute_value(value: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for type_, inner in value.items():
        if type_ == "B":
            out[type_] = _b64(inner)
        elif type_ == "BS":
            out[type_] = [_b64(v) for v in inner]
        elif type_ == "M":
            out[type_] = {k: _attribute_value(v) for k, v in inner.items()}
        elif type_ == "L":
            out[type_] = [_attribute_value(v) for v in inner]
        else:
            out[type_] = inner
    return out


def _epoch_seconds(value: Any) -> int | float:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    raise TypeError(f"ApproximateCreationDateTime {value!r}: expected a datetime or a number")


def to_lambda_record(
    api_record: Mapping[str, Any],
    *,
    stream_arn: str,
    region: str | None = None,
    user_identity: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Convert one ``GetRecords`` record (as boto3 parses it) into a Lambda event record.

    Args:
        api_record: one element of ``GetRecords()["Records"]``.
        stream_arn: the stream's ARN, delivered as ``eventSourceARN``.
        region: ``awsRegion``. Default: the record's own ``awsRegion``.
        user_identity: ``userIdentity`` to set (e.g. `TTL_USER_IDENTITY` where an emulator
            cannot produce TTL deletes). Default: the record's own, if it has one.

    Returns:
        A JSON-serialisable dict in Lambda's event record shape.

    Raises:
        KeyError: ``api_record`` lacks ``eventID``, ``eventName`` or ``dynamodb``.
        TypeError: ``ApproximateCreationDateTime`` is neither a datetime nor a number.
    """
    ddb_out: dict[str, Any] = {}
    for name, value in api_record["dynamodb"].items():
        if name == "ApproximateCreationDateTime":
            ddb_out[name] = _epoch_seconds(value)
        elif name in ("Keys", "NewImage", "OldImage"):
            ddb_out[name] = {k: _attribute_value(v) for k, v in value.items()}
        else:
            ddb_out[name] = value
    record: dict[str, Any] = {
        "eventID": api_record["eventID"],
        "eventName": api_record["eventName"],
        "eventVersion": api_record.get("eventVersion", "1.1"),
        "eventSource": api_record.get("eventSource", "aws:dynamodb"),
        "awsRegion": region if region is not None else api_record.get("awsRegion"),
        "dynamodb": ddb_out,
        "eventSourceARN": stream_arn,
    }
    identity = user_identity if user_identity is not None else api_record.get("userIdentity")
    if identity:
        record["userIdentity"] = {
            "type": identity.get("Type", identity.get("type")),
            "principalId": identity.get("PrincipalId", identity.get("principalId")),
        }
    return record


def sequence_number(record: Mapping[str, Any]) -> str:
    """A Lambda record's ``dynamodb.SequenceNumber`` (the partial batch response identifier)."""
    return str(record["dynamodb"]["SequenceNumber"])


def to_kinesis_change(
    api_record: Mapping[str, Any],
    *,
    table_name: str,
    region: str,
    user_identity: Mapping[str, str] | None = None,
    created_at_ms: int | None = None,
) -> dict[str, Any]:
    """The change document Kinesis Data Streams for DynamoDB writes for ``api_record`` (what an
    emulator without the streaming destination forwards into the Kinesis stream).

    Same images as the DynamoDB stream record, ``ApproximateCreationDateTime`` in milliseconds
    (the precision the construct sets), no ``SequenceNumber`` (Kinesis numbers the record),
    ``recordFormat`` ``application/json`` and the ``tableName`` (DynamoDB Developer Guide,
    "Using Kinesis Data Streams to capture changes to DynamoDB").

    Args:
        created_at_ms: ``ApproximateCreationDateTime`` to write, in epoch milliseconds.
            Default: the record's own.

    Raises:
        KeyError, TypeError: as `to_lambda_record`.
    """
    shaped = to_lambda_record(api_record, stream_arn="", region=region, user_identity=user_identity)
    body = dict(shaped["dynamodb"])
    body.pop("SequenceNumber", None)
    body.pop("StreamViewType", None)
    seconds = body.get("ApproximateCreationDateTime")
    body["ApproximateCreationDateTime"] = (
        created_at_ms if created_at_ms is not None else int(Decimal(str(seconds)) * 1000)
    )
    change: dict[str, Any] = {
        "awsRegion": shaped["awsRegion"],
        "eventID": shaped["eventID"],
        "eventName": shaped["eventName"],
        "eventSource": "aws:dynamodb",
        "recordFormat": "application/json",
        "tableName": table_name,
        "dynamodb": body,
    }
    if "userIdentity" in shaped:
        change["userIdentity"] = shaped["userIdentity"]
    return change
