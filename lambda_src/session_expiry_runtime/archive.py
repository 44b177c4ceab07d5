"""Archive of cleaned sessions: each old image as one JSON object in S3, written first.

Key layout (deterministic: a redelivered record overwrites its own object, never adds one)::

    {prefix}date=YYYY-MM-DD/tenant={tenant or _none}/{session key}/{sequence number}.json

* ``date`` is the UTC day of ``dynamodb.ApproximateCreationDateTime`` (when the item was
  removed), not of the write, so every retry lands on the same key; ``date=_unknown`` when the
  record has no such time.
* ``tenant`` is the old image's tenant attribute, ``_none`` when absent.
* ``session key`` is the table key values in key-schema order (partition key, then sort key),
  joined by ``,``.
* Every value is percent-encoded (RFC 3986 unreserved characters stay), so any character a
  DynamoDB string can hold is safe in a key and ``/``, ``,`` or ``=`` cannot fake a level. A
  leading ``_`` and the segments ``.``/``..`` are encoded too, so no real value can equal
  ``_none``/``_unknown`` or a relative path. A segment longer than
  :data:`MAX_SEGMENT_CHARACTERS` is cut and suffixed with a SHA-256 of the whole value (S3
  keys are at most 1,024 bytes; DynamoDB partition keys up to 2,048).

Body (``application/json``)::

    {"schemaVersion": 1, "sessionKey": {...}, "tenant": ..., "reason": "ttl",
     "sequenceNumber": "...", "eventId": "...", "approximateCreationDateTime": <epoch s>,
     "ttl": <epoch s>, "ttlLagSeconds": <s or null>,
     "oldImage": {<plain JSON, decode.to_json_value>},
     "dynamodbOldImage": {<the record's OldImage, DynamoDB JSON as Lambda delivered it>}}

``oldImage`` is for readers (numbers exact, sets as sorted lists, bytes as base64 text);
``dynamodbOldImage`` keeps the types, so ``decode.decode_image`` of it gives back exactly the
item that was removed.

Encryption: ``ServerSideEncryption=aws:kms`` with ``SSEKMSKeyId`` when the construct passed the
bucket's key (``SESSION_EXPIRY_ARCHIVE_KMS_KEY_ARN``); otherwise no header, so the bucket's
default encryption applies (S3 encrypts every new object, SSE-S3 at least; Amazon S3 User
Guide, "Setting default server-side encryption behavior").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any
from urllib.parse import quote

from .config import RuntimeConfig

# Defined below this module (config) so that config need not import the archive; re-exported.
from .config import validate_archive_prefix as validate_archive_prefix
from .decode import StreamRecord, to_json_value

SCHEMA_VERSION = 1
NO_TENANT = "_none"
NO_DATE = "_unknown"
#: Longest encoded key segment kept whole; longer ones are cut and hashed.
MAX_SEGMENT_CHARACTERS = 200
CONTENT_TYPE = "application/json"


def encode_segment(value: object) -> str:
    """One key segment for ``value``: percent-encoded text, never empty, ``_none`` or ``..``."""
    text = value if isinstance(value, str) else json.dumps(to_json_value(value))
    encoded = quote(text, safe="-.~")  # "_" is encoded below only where it leads
    if encoded.startswith("_"):
        encoded = "%5F" + encoded[1:]
    if encoded in {"", ".", ".."}:
        encoded = encoded.replace(".", "%2E") or "%00empty"
    if len(encoded) > MAX_SEGMENT_CHARACTERS:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        encoded = f"{encoded[:100]}~{digest}"
    return encoded


def _day(approximate_creation_time: Decimal | None) -> str:
    if approximate_creation_time is None:
        return NO_DATE
    moment = datetime.fromtimestamp(float(approximate_creation_time), tz=timezone.utc)
    return moment.strftime("%Y-%m-%d")


def key_values(config: RuntimeConfig, keys: Mapping[str, Any]) -> list[Any]:
    """The table key values in key-schema order (partition key, sort key); other names sorted."""
    order = [config.partition_key] + ([config.sort_key] if config.sort_key else [])
    names = [n for n in order if n in keys] + sorted(n for n in keys if n not in order)
    return [keys[n] for n in names]


def archive_key(
    config: RuntimeConfig,
    *,
    keys: Mapping[str, Any],
    tenant: object,
    sequence_number: str,
    approximate_creation_time: Decimal | None,
) -> str:
    """The object key of one removed session (see the module docstring for the layout)."""
    tenant_segment = NO_TENANT if tenant is None else encode_segment(tenant)
    session_segment = ",".join(encode_segment(v) for v in key_values(config, keys)) or NO_TENANT
    return (
        f"{config.archive_prefix}date={_day(approximate_creation_time)}/"
        f"tenant={tenant_segment}/{session_segment}/{encode_segment(sequence_number)}.json"
    )


def archive_document(
    record: StreamRecord,
    *,
    keys: Mapping[str, Any],
    image: Mapping[str, Any],
    tenant: object,
    reason: str,
    ttl: object,
    lag_seconds: Decimal | None,
) -> dict[str, Any]:
    """The JSON body of one archived session (already JSON-serialisable)."""
    return {
        "schemaVersion": SCHEMA_VERSION,
        "sessionKey": to_json_value(keys),
        "tenant": to_json_value(tenant),
        "reason": reason,
        "sequenceNumber": record.sequence_number,
        "eventId": record.event_id,
        "approximateCreationDateTime": to_json_value(record.approximate_creation_time),
        "ttl": to_json_value(ttl),
        "ttlLagSeconds": to_json_value(lag_seconds),
        "oldImage": to_json_value(image),
        "dynamodbOldImage": to_json_value(record.old_image),
    }


def put_archive(s3: Any, config: RuntimeConfig, key: str, document: Mapping[str, Any]) -> None:
    """PutObject of ``document`` under ``key``; raises botocore errors unchanged."""
    params: dict[str, Any] = {
        "Bucket": config.archive_bucket,
        "Key": key,
        "Body": json.dumps(document, separators=(",", ":"), sort_keys=True).encode("utf-8"),
        "ContentType": CONTENT_TYPE,
    }
    if config.archive_kms_key_arn:
        params["ServerSideEncryption"] = "aws:kms"
        params["SSEKMSKeyId"] = config.archive_kms_key_arn
    s3.put_object(**params)
