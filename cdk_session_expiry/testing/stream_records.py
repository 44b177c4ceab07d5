"""DynamoDB Streams API records (GetRecords, via boto3) to Lambda event records.

Lambda delivers the same record with a few differences in spelling, all applied here:

* ``dynamodb.ApproximateCreationDateTime`` is epoch **seconds** (a number), not a timestamp;
* binary attribute values (``B``, ``BS``) are **base64 text**, not bytes;
* ``userIdentity`` keys are ``type``/``principalId`` instead of ``Type``/``PrincipalId``;
* each record carries ``eventSourceARN``, the stream ARN.

Source: "Using AWS Lambda with Amazon DynamoDB" (example event) in the Lambda developer guide,
and the DynamoDB Streams API reference (``Record``, ``StreamRecord``, ``Identity``).
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping
from typing import Any


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


def _b64(raw: Any) -> str:
    if isinstance(raw, str):  # already base64 text
        return raw
    return base64.b64encode(bytes(raw)).decode("ascii")


def _image(image: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _attribute_value(value) for name, value in image.items()}


def _epoch_seconds(value: Any) -> int | float:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp())
    if isinstance(value, (int, float)):
        return value
    raise TypeError(f"ApproximateCreationDateTime {value!r}: expected a datetime or a number")


def to_lambda_record(
    api_record: Mapping[str, Any], *, stream_arn: str, region: str
) -> dict[str, Any]:
    """Convert one GetRecords ``Record`` (as boto3 parses it) to a Lambda event record.

    Args:
        api_record: one element of ``GetRecords()["Records"]``.
        stream_arn: the stream's ARN, delivered as ``eventSourceARN``.
        region: the stream's Region, delivered as ``awsRegion``.
    """
    ddb_in = api_record["dynamodb"]
    ddb_out: dict[str, Any] = {}
    for name, value in ddb_in.items():
        if name == "ApproximateCreationDateTime":
            ddb_out[name] = _epoch_seconds(value)
        elif name in ("Keys", "NewImage", "OldImage"):
            ddb_out[name] = _image(value)
        else:
            ddb_out[name] = value
    record: dict[str, Any] = {
        "eventID": api_record["eventID"],
        "eventName": api_record["eventName"],
        "eventVersion": api_record.get("eventVersion", "1.1"),
        "eventSource": api_record.get("eventSource", "aws:dynamodb"),
        "awsRegion": region,
        "dynamodb": ddb_out,
        "eventSourceARN": stream_arn,
    }
    identity = api_record.get("userIdentity")
    if identity:
        record["userIdentity"] = {
            "type": identity.get("Type", identity.get("type")),
            "principalId": identity.get("PrincipalId", identity.get("principalId")),
        }
    return record


def sequence_number(record: Mapping[str, Any]) -> str:
    """A Lambda record's ``dynamodb.SequenceNumber`` (the partial batch response identifier)."""
    return str(record["dynamodb"]["SequenceNumber"])
