"""KMS grant names that identify the session a grant was created for.

A KMS grant never expires: it lives until it is retired or revoked. If a grant is created but
never stored on its session (the UpdateItem failed, and so did the retire that followed), the
only thing that still ties it to a session is its ``Name``. ``CreateGrant`` takes a ``Name`` of
at most 256 characters from letters, digits and ``:/_-``, shown in CloudTrail (AWS KMS API
Reference, "CreateGrant"), so it holds no secret: only the session's key and incarnation.

Form: ``session-expiry:<incarnation>:<key>`` where ``<key>`` is the base64url encoding without
padding (RFC 4648, section 5) of the compact JSON object of the item's key attribute names to
their String values, keys sorted, UTF-8. Example for ``{"pk": "s-1"}`` and incarnation
``0f3a``: ``session-expiry:0f3a:eyJwayI6InMtMSJ9``.

Pure functions only: no AWS calls.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "GRANT_NAME_PREFIX",
    "MAX_GRANT_NAME_LENGTH",
    "GrantOwner",
    "grant_name",
    "owner_key",
    "parse_grant_name",
]

#: Every grant name this library writes starts with this.
GRANT_NAME_PREFIX = "session-expiry:"
#: ``CreateGrant`` ``Name``: at most 256 characters (AWS KMS API Reference, "CreateGrant").
MAX_GRANT_NAME_LENGTH = 256

# An incarnation is one name part: it may hold no ':' (the separator) and no '/'.
_INCARNATION = re.compile(r"[A-Za-z0-9_-]+")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class GrantOwner:
    """The session a grant name points to.

    Attributes:
        key: the session item's key, attribute name to String value (partition key, and sort
            key when the table has one).
        incarnation: the session incarnation the grant was created for (the last segment of
            its scratch prefix).
    """

    key: dict[str, str]
    incarnation: str


def _encode_key(key: Mapping[str, str]) -> str:
    text = json.dumps(dict(key), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def grant_name(key: Mapping[str, str], incarnation: str) -> str | None:
    """The grant ``Name`` for a session's key and incarnation, or ``None`` if it cannot be one.

    Args:
        key: the session item's key, attribute name to String value; at least one entry.
        incarnation: the session incarnation, letters, digits, ``_`` and ``-`` only.

    Returns:
        ``session-expiry:<incarnation>:<base64url key JSON>``; ``None`` when that is longer
        than 256 characters or ``incarnation`` holds a character a name part may not hold
        (anything but letters, digits, ``_``, ``-``) — create the grant without a name then.

    Raises:
        ValueError: ``key`` is not a non-empty mapping of strings to strings, or
            ``incarnation`` is not a string.
    """
    if not isinstance(key, Mapping) or owner_key(key) is None:
        raise ValueError(
            f"grant name key {key!r}: expected a non-empty mapping of attribute names to "
            "non-empty String values, e.g. {'pk': 's-1'}"
        )
    if not isinstance(incarnation, str):
        raise ValueError(f"grant name incarnation {incarnation!r}: expected a string")
    if not _INCARNATION.fullmatch(incarnation):
        return None
    name = f"{GRANT_NAME_PREFIX}{incarnation}:{_encode_key(key)}"
    return name if len(name) <= MAX_GRANT_NAME_LENGTH else None


def parse_grant_name(name: object) -> GrantOwner | None:
    """The session a grant name written by `grant_name` points to, else ``None``.

    Only the exact form `grant_name` writes is accepted: any other name (another
    application's grant, no name, padding, a non-canonical encoding, JSON that is not an
    object of non-empty strings — DynamoDB key values are never empty —, more than 256
    characters) gives ``None``, never an error, so a sweep of a key's grants can pass every
    name it lists.
    """
    if not isinstance(name, str) or len(name) > MAX_GRANT_NAME_LENGTH:
        return None
    if not name.startswith(GRANT_NAME_PREFIX):
        return None
    incarnation, sep, encoded = name[len(GRANT_NAME_PREFIX) :].partition(":")
    if not sep or not _INCARNATION.fullmatch(incarnation) or not _BASE64URL.fullmatch(encoded):
        return None
    try:
        raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        key = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(key, dict) or owner_key(key) is None:
        return None  # an empty key value can name no DynamoDB item
    if grant_name(key, incarnation) != name:
        return None  # not the canonical form: not written by this library
    return GrantOwner(key=key, incarnation=incarnation)


def owner_key(keys: Mapping[Any, object]) -> dict[str, str] | None:
    """A session key as grant names hold it, from a decoded key (e.g. a stream record's
    ``Keys``): attribute name to String value, or ``None`` when it cannot be one (empty, or a
    name or value that is not a non-empty string — a Number or Binary key, an empty String).

    The cleanup compares a grant's `parse_grant_name` key with this key of the record it
    cleans; DynamoDB never stores an empty key value, so a name holding one names no item.
    """
    if not keys:
        return None
    pairs = list(keys.items())
    if not all(isinstance(k, str) and k and isinstance(v, str) and v for k, v in pairs):
        return None
    return {str(k): str(v) for k, v in pairs}
