"""Archive of cleaned sessions: each old image as one line of JSON in S3, written first.

Key layout of the per-object mode (deterministic: a redelivered record overwrites its own
object, never adds one)::

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
  ``_none``/``_unknown``/``_empty`` (the empty string) or a relative path. A segment longer
  than `MAX_SEGMENT_CHARACTERS` is cut, suffixed with a SHA-256 of the whole value and
  prefixed with ``_`` (S3 keys are at most 1,024 bytes; DynamoDB partition keys up to 2,048),
  so no shorter value can imitate it either.

With Amazon Data Firehose (``archive_delivery_stream``) the same lines go to the delivery
stream instead (`archive_delivery`), which writes them, many to an object (GZIP), under
``{prefix}date=YYYY-MM-DD/tenant=.../`` from the record's ``partition_date`` and
``partition_tenant`` fields: the same two partition levels, so one table reads both.

**Format** (`FORMAT_VERSION` 2): one JSON object on one line, ending in ``\\n`` — what
Athena's JSON SerDes read ("The Hive and OpenX libraries expect JSON data to be on a single
line ... with records separated by a new line character", Amazon Athena User Guide, "JSON
SerDe libraries"). Every field is a JSON string, integer, number or ``null`` with a lowercase
name, so a column of the Glue table is exactly a field, under either SerDe, Athena, DuckDB or
any JSON reader, with no case folding, key mapping or nested typing::

    format_version     int      2
    session_id         string   the session id: the sort key value with a sort key, else the
                                partition key value (non-strings as JSON text)
    session_partition  string   the partition key value with a sort key, else null
    session_key        string   the record's Keys as compact JSON text, sorted
    incarnation        string   the session incarnation (null on items written before them)
    tenant             string   the tenant attribute (non-strings as JSON text), or null
    reason             string   ttl | deleted-after-expiry | explicit
    removed_at         bigint   ApproximateCreationDateTime, epoch seconds
    expires_at         bigint   the old image's TTL (epoch seconds) when it is a whole number
    ttl_lag_seconds    double   removal - TTL for TTL-classified removals, else null
    sequence_number    string   dynamodb.SequenceNumber
    event_id           string   eventID
    partition_date     string   the key's date segment (YYYY-MM-DD or _unknown)
    partition_tenant   string   the key's tenant segment (percent-encoded, or _none)
    old_image          string   the old image as JSON text (decode.to_json_value: numbers
                                exact, sets sorted lists, bytes base64)
    dynamodb_old_image string   the record's OldImage as JSON text, DynamoDB JSON as Lambda
                                delivered it: decode.decode_image(json.loads(...)) gives back
                                exactly the item that was removed

The content is a function of the stream record alone (no write time), so a redelivered record
and the Firehose mode write the same bytes as the per-object mode.

**Older objects.** Format 1 (before ``format_version``) wrote one compact JSON object per
object with camelCase keys (``schemaVersion``, ``sessionKey``, ``oldImage``, ...). Each is still
one JSON line under the same partitions, so the table reads it: ``reason`` and ``tenant`` keep
their names (the per-day and per-reason queries count format-1 objects too), the other columns
are null, ``format_version`` is null, and ``"$path"`` names the session (its key holds the
session key segment).

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

from ..core.config import CLAIM_TOKEN_ATTRIBUTE, RuntimeConfig

# Defined below this module (config) so that config need not import the archive; re-exported.
from ..core.config import validate_archive_prefix as validate_archive_prefix
from ..core.decode import StreamRecord, to_json_value

#: The archived record's format (its ``format_version`` field); see the module docstring.
FORMAT_VERSION = 2
NO_TENANT = "_none"
NO_DATE = "_unknown"
#: The segment of an empty string.
EMPTY = "_empty"
#: Longest encoded key segment kept whole; longer ones are cut and hashed.
MAX_SEGMENT_CHARACTERS = 200
#: JSON lines (one object per line): what ``Content-Type`` S3 stores with each object.
CONTENT_TYPE = "application/x-ndjson"
#: BIGINT range (Athena/Hive): a larger whole number is not a usable time.
_MAX_BIGINT = 2**63 - 1


def encode_segment(value: object) -> str:
    """One key segment for ``value``: percent-encoded text, never empty, ``_none`` or ``..``.

    Distinct values give distinct segments. An encoded value never starts with ``_`` (a leading
    ``_`` is encoded), so the segments the layout makes up itself all do: ``_none``,
    ``_unknown``, ``_empty`` (the empty string) and ``_<first 100 characters>~<SHA-256>`` (a
    value longer than `MAX_SEGMENT_CHARACTERS` encoded), which no value can imitate.
    """
    encoded = quote(_text(value), safe="-.~")  # "_" is encoded below only where it leads
    if encoded.startswith("_"):
        encoded = "%5F" + encoded[1:]
    if encoded in {"", ".", ".."}:
        encoded = encoded.replace(".", "%2E") or EMPTY
    if len(encoded) > MAX_SEGMENT_CHARACTERS:
        digest = hashlib.sha256(_text(value).encode("utf-8", "surrogatepass")).hexdigest()
        encoded = f"_{encoded[:100]}~{digest}"
    return encoded


def _text(value: object) -> str:
    """A value as text: a string as it is, anything else as compact JSON text."""
    return value if isinstance(value, str) else json.dumps(to_json_value(value))


def day_segment(approximate_creation_time: object) -> str:
    """``YYYY-MM-DD`` (UTC) of the removal time in epoch seconds, or ``_unknown``."""
    value = approximate_creation_time
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return NO_DATE
    try:
        moment = datetime.fromtimestamp(float(value), tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return NO_DATE
    return moment.strftime("%Y-%m-%d")


def tenant_segment(tenant: object) -> str:
    """The key's tenant segment: `encode_segment` of the tenant, ``_none`` without."""
    return NO_TENANT if tenant is None else encode_segment(tenant)


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
    approximate_creation_time: object,
) -> str:
    """The object key of one removed session (see the module docstring for the layout)."""
    session_segment = ",".join(encode_segment(v) for v in key_values(config, keys)) or NO_TENANT
    return (
        f"{config.archive_prefix}date={day_segment(approximate_creation_time)}/"
        f"tenant={tenant_segment(tenant)}/{session_segment}/{encode_segment(sequence_number)}.json"
    )


def archive_document(
    config: RuntimeConfig,
    record: StreamRecord,
    *,
    keys: Mapping[str, Any],
    image: Mapping[str, Any],
    reason: str,
    lag_seconds: Decimal | None,
) -> dict[str, Any]:
    """The archived record of one removed session (format `FORMAT_VERSION`; every value
    a JSON scalar or ``None``)."""
    tenant = archived_tenant(config, keys=keys, image=image)
    session_id, partition = _session_id(config, keys)
    incarnation = image.get(config.incarnation_attribute)
    return {
        "format_version": FORMAT_VERSION,
        "session_id": session_id,
        "session_partition": partition,
        "session_key": _json_text(keys),
        "incarnation": incarnation if isinstance(incarnation, str) else None,
        "tenant": None if tenant is None else _text(tenant),
        "reason": reason,
        "removed_at": _whole(record.approximate_creation_time),
        "expires_at": _whole(image.get(config.ttl_attribute)),
        "ttl_lag_seconds": None if lag_seconds is None else float(lag_seconds),
        "sequence_number": record.sequence_number,
        "event_id": record.event_id,
        "partition_date": day_segment(record.approximate_creation_time),
        "partition_tenant": tenant_segment(tenant),
        # The claim token is the session's secret to the claim registrar: never archived.
        "old_image": _json_text(_without_token(image)),
        "dynamodb_old_image": _json_text(_without_token(record.old_image)),
    }


def archived_tenant(
    config: RuntimeConfig, *, keys: Mapping[str, Any], image: Mapping[str, Any]
) -> object:
    """The tenant a removed session is archived under: the record's ``Keys`` value when the
    tenant attribute is a key attribute (no writer of the item can change it; a record whose
    image says otherwise was altered after DynamoDB wrote it), else the image's word (which
    the item's writer chose: docs, Security, threat model)."""
    name = config.tenant_attribute
    if name in (config.partition_key, config.sort_key):
        return keys.get(name)
    return image.get(name)


def archive_line(document: Mapping[str, Any]) -> bytes:
    """``document`` as one line of JSON (sorted keys, ASCII, no blanks) ending in ``\\n``."""
    return (json.dumps(document, separators=(",", ":"), sort_keys=True) + "\n").encode("ascii")


def put_archive(s3: Any, config: RuntimeConfig, key: str, line: bytes) -> None:
    """PutObject of one archived record's ``line`` under ``key``; raises botocore errors
    unchanged."""
    params: dict[str, Any] = {
        "Bucket": config.archive_bucket,
        "Key": key,
        "Body": line,
        "ContentType": CONTENT_TYPE,
    }
    if config.archive_kms_key_arn:
        params["ServerSideEncryption"] = "aws:kms"
        params["SSEKMSKeyId"] = config.archive_kms_key_arn
    s3.put_object(**params)


def _without_token(image: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if image is None:
        return None
    return {name: value for name, value in image.items() if name != CLAIM_TOKEN_ATTRIBUTE}


def _session_id(config: RuntimeConfig, keys: Mapping[str, Any]) -> tuple[str | None, str | None]:
    if config.sort_key and config.sort_key in keys:
        partition = keys.get(config.partition_key)
        return _text(keys[config.sort_key]), None if partition is None else _text(partition)
    value = keys.get(config.partition_key)
    return (None if value is None else _text(value)), None


def _json_text(value: object) -> str:
    return json.dumps(to_json_value(value), separators=(",", ":"), sort_keys=True)


def _whole(value: object) -> int | None:
    """A whole number of seconds within BIGINT, else ``None`` (a TTL of another type, a
    fraction, a value no engine reads as a time)."""
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        return None
    if isinstance(value, Decimal) and (
        not value.is_finite() or value.adjusted() > 18 or value != value.to_integral_value()
    ):
        return None
    whole = int(value)
    return whole if -_MAX_BIGINT <= whole <= _MAX_BIGINT else None
