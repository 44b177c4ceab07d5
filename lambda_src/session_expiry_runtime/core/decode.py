"""Decode DynamoDB stream records exactly as the Lambda event source mapping delivers them.

Lambda hands the function each record as JSON, so the wire form differs from what boto3's
``TypeDeserializer`` expects: ``B``/``BS`` arrive as base64 *text*, numbers as decimal strings
with up to 38 significant digits, and ``dynamodb.ApproximateCreationDateTime`` as epoch seconds
(Lambda Developer Guide, "Using AWS Lambda with Amazon DynamoDB", example event).

Two directions, both pure (no AWS calls):

* `decode_image` turns an ``OldImage`` (``{"name": {"S": "..."}, ...}``) into Python values:
  ``S`` -> ``str``, ``N`` -> ``decimal.Decimal`` (exact, never a float), ``B`` -> ``bytes``,
  ``SS``/``NS``/``BS`` -> ``frozenset``, ``NULL`` -> ``None``, ``BOOL`` -> ``bool``,
  ``M`` -> ``dict``, ``L`` -> ``list``. Malformed input raises `DecodeError` and
  nothing else.
* `to_json_value` turns any decoded value into something ``json.dumps`` accepts, for log
  lines: sets become sorted lists, bytes base64 text, numbers stay exact (see there).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from .ttl import MILLISECONDS_THRESHOLD

#: DynamoDB's number syntax (what ``N`` strings look like on the wire). Decimal() alone would
#: also take "NaN", "Infinity", "1_000" and surrounding blanks, none of which DynamoDB stores.
_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")

#: Integers in this range survive every JSON parser (IEEE double) unchanged.
_JSON_SAFE_INT = 2**53

#: Deepest ``M``/``L`` nesting decoded. DynamoDB stores at most 32 levels (Developer Guide,
#: "Quotas": nested attribute depth); the headroom keeps any counting difference from
#: refusing a real item, and the bound keeps deeper wire input a DecodeError rather than a
#: RecursionError.
MAX_NESTING = 100


class DecodeError(ValueError):
    """An attribute value is not valid DynamoDB JSON; the message names the path and value."""


def decode_number(text: object, path: str = "N") -> Decimal:
    """Decode an ``N`` string exactly.

    Raises:
        DecodeError: ``text`` is not a string in DynamoDB's number syntax.
    """
    if not isinstance(text, str) or not _NUMBER.fullmatch(text):
        raise DecodeError(f"{path}: expected a DynamoDB number string, got {text!r}")
    try:
        return Decimal(text)
    except InvalidOperation:  # pragma: no cover - the regex admits only valid literals
        raise DecodeError(f"{path}: expected a DynamoDB number string, got {text!r}") from None


def decode_binary(value: object, path: str = "B") -> bytes:
    """Decode a ``B`` value: base64 text as Lambda delivers it (raw bytes are accepted too).

    Raises:
        DecodeError: ``value`` is neither bytes nor valid base64 text.
    """
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if not isinstance(value, str):
        raise DecodeError(f"{path}: expected base64 text, got {value!r}")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise DecodeError(f"{path}: expected base64 text, got {value!r}") from None


def _set_members(value: object, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise DecodeError(f"{path}: expected a list of set members, got {value!r}")
    return value


def decode_attribute(value: object, path: str = "$", *, depth: int = 0) -> Any:
    """Decode one DynamoDB AttributeValue (``{"S": "x"}``, ``{"M": {...}}``, ...).

    ``depth`` is how many ``M``/``L`` levels enclose ``value``.

    Raises:
        DecodeError: not a one-key mapping with a known type and a well-formed value, or
            nested deeper than `MAX_NESTING` levels.
    """
    if not isinstance(value, Mapping) or len(value) != 1:
        raise DecodeError(f"{path}: expected an AttributeValue with one type key, got {value!r}")
    ((tag, inner),) = value.items()
    where = f"{path}.{tag}"
    if tag == "S":
        if not isinstance(inner, str):
            raise DecodeError(f"{where}: expected a string, got {inner!r}")
        return inner
    if tag == "N":
        return decode_number(inner, where)
    if tag == "B":
        return decode_binary(inner, where)
    if tag == "BOOL":
        if not isinstance(inner, bool):
            raise DecodeError(f"{where}: expected true or false, got {inner!r}")
        return inner
    if tag == "NULL":
        if inner is not True:
            raise DecodeError(f"{where}: expected true, got {inner!r}")
        return None
    if tag == "SS":
        members = _set_members(inner, where)
        if not all(isinstance(m, str) for m in members):
            raise DecodeError(f"{where}: expected strings, got {inner!r}")
        return frozenset(members)
    if tag == "NS":
        return frozenset(
            decode_number(m, f"{where}[{i}]") for i, m in enumerate(_set_members(inner, where))
        )
    if tag == "BS":
        return frozenset(
            decode_binary(m, f"{where}[{i}]") for i, m in enumerate(_set_members(inner, where))
        )
    if tag in ("L", "M") and depth >= MAX_NESTING:
        raise DecodeError(f"{where}: nested deeper than {MAX_NESTING} levels (DynamoDB: 32)")
    if tag == "L":
        if not isinstance(inner, list):
            raise DecodeError(f"{where}: expected a list, got {inner!r}")
        return [decode_attribute(v, f"{where}[{i}]", depth=depth + 1) for i, v in enumerate(inner)]
    if tag == "M":
        return decode_image(inner, where, depth=depth + 1)
    raise DecodeError(f"{path}: unknown DynamoDB type {tag!r}")


def decode_image(image: object, path: str = "$", *, depth: int = 0) -> dict[str, Any]:
    """Decode an item image (``Keys``, ``OldImage``, ``NewImage`` or an ``M`` value).

    ``depth`` is how many ``M``/``L`` levels enclose ``image`` (0 for a whole item).

    Returns:
        ``{attribute name: Python value}`` with the types listed in the module docstring.

    Raises:
        DecodeError: ``image`` is not a mapping of names to valid AttributeValues.
    """
    if not isinstance(image, Mapping):
        raise DecodeError(f"{path}: expected a map of attribute names, got {image!r}")
    decoded: dict[str, Any] = {}
    for name, value in image.items():
        if not isinstance(name, str):
            raise DecodeError(f"{path}: attribute name {name!r} is not a string")
        decoded[name] = decode_attribute(value, f"{path}.{name}", depth=depth)
    return decoded


def _sort_key(value: Any) -> tuple[str, Any]:
    # DynamoDB sets are homogeneous; the type name only keeps mixed input from raising.
    return (type(value).__name__, value)


def to_json_value(value: Any) -> Any:
    """Convert a decoded value (or any structure of them) into JSON-serialisable data.

    * ``Decimal``: an integer whose magnitude is below 2**53 becomes a JSON integer; any other
      number becomes its exact decimal text (a JSON string), because a JSON float, or an integer
      beyond 2**53, is rounded by most JSON readers (CloudWatch Logs Insights included).
    * ``bytes``: standard base64 text. Sets: sorted lists. Mappings: string keys.
    * ``datetime``: ISO 8601 text. Anything else unknown: ``str(value)``; never raises.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return (
            value if value == value and value not in (float("inf"), float("-inf")) else str(value)
        )
    if isinstance(value, Decimal):
        # copy_abs, not abs(): abs() rounds in the decimal context and raises Overflow for
        # an exponent beyond it (1E+1000000 is valid number syntax).
        if (
            value.is_finite()
            and value == value.to_integral_value()
            and value.copy_abs() < _JSON_SAFE_INT
        ):
            return int(value)
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (set, frozenset)):
        return [to_json_value(v) for v in sorted(value, key=_sort_key)]
    if isinstance(value, Mapping):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


@dataclass(frozen=True)
class StreamRecord:
    """The parts of one Lambda DynamoDB stream event record the cleanup uses.

    Built by `parse_record`, which never raises: a field that is missing or malformed is
    ``None`` here and the caller decides (skip, count, log).
    """

    #: ``dynamodb.SequenceNumber``: the only valid ``itemIdentifier`` of a partial batch response.
    sequence_number: str | None
    #: ``INSERT``, ``MODIFY`` or ``REMOVE``.
    event_name: str | None
    event_id: str | None
    #: Top-level ``userIdentity`` as delivered (``None`` when absent); AWS sets it only on TTL
    #: deletes, and only in the Region that ran them.
    user_identity: Any
    #: ``dynamodb.ApproximateCreationDateTime`` in epoch seconds; ``None`` when absent or not
    #: plausible epoch seconds (negative, or at least ``ttl.MILLISECONDS_THRESHOLD``).
    approximate_creation_time: Decimal | None
    #: ``dynamodb.Keys`` in wire form.
    keys: Mapping[str, Any] | None
    #: ``dynamodb.OldImage`` in wire form (``None`` for INSERT or a KEYS_ONLY/NEW_IMAGE stream).
    old_image: Mapping[str, Any] | None
    #: The record came through a Kinesis data stream (the Kinesis change source): its
    #: ``eventSourceARN``, which Lambda sets and the record's data cannot, is a Kinesis stream's.
    #: Such a record may have been written by anyone allowed ``kinesis:PutRecord``
    #: (`kinesis_removals`).
    through_kinesis: bool = False
    #: Kinesis records only: when the record arrived in the stream (epoch seconds), Kinesis's
    #: ``approximateArrivalTimestamp``, which Kinesis sets and no writer of the record can;
    #: ``None`` for a DynamoDB stream record or when absent.
    arrival_time: Decimal | None = None


def _epoch_seconds(value: object) -> Decimal | None:
    number = _number_of(value)
    # Anything that is not plausible epoch seconds is unknown: it would overflow the TTL lag
    # arithmetic or the archive's date partition, and fail the record on every retry.
    if number is None or not 0 <= number < MILLISECONDS_THRESHOLD:
        return None
    return number


def _number_of(value: object) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, datetime):  # boto3's shape for GetRecords; Lambda sends a number
        return Decimal(str(value.timestamp()))
    if isinstance(value, (int, Decimal)):
        return Decimal(value) if Decimal(value).is_finite() else None
    if isinstance(value, float):
        return Decimal(repr(value)) if value == value and abs(value) != float("inf") else None
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        return Decimal(value)
    return None


def parse_record(raw: object) -> StreamRecord:
    """Pick the fields of a Lambda DynamoDB stream event record; never raises."""
    record = raw if isinstance(raw, Mapping) else {}
    body = record.get("dynamodb")
    body = body if isinstance(body, Mapping) else {}
    sequence_number = body.get("SequenceNumber")
    event_name = record.get("eventName")
    event_id = record.get("eventID")
    identity = record.get("userIdentity")
    keys = body.get("Keys")
    old_image = body.get("OldImage")
    return StreamRecord(
        sequence_number=sequence_number
        if isinstance(sequence_number, str) and sequence_number
        else None,
        event_name=event_name if isinstance(event_name, str) else None,
        event_id=event_id if isinstance(event_id, str) else None,
        user_identity=identity,
        approximate_creation_time=_epoch_seconds(body.get("ApproximateCreationDateTime")),
        keys=keys if isinstance(keys, Mapping) else None,
        old_image=old_image if isinstance(old_image, Mapping) else None,
        through_kinesis=_is_kinesis_arn(record.get("eventSourceARN")),
        arrival_time=(
            _epoch_seconds(record.get("kinesisArrivalTime"))
            if _is_kinesis_arn(record.get("eventSourceARN"))
            else None
        ),
    )


def _is_kinesis_arn(value: object) -> bool:
    """``arn:<partition>:kinesis:...``."""
    return isinstance(value, str) and value.split(":")[2:3] == ["kinesis"]
