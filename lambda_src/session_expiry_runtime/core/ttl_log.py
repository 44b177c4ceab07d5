"""Say so when a session's time to live cannot be read (the store still fails closed).

DynamoDB only expires items whose TTL attribute is a top-level Number of epoch seconds; a String,
a value in milliseconds, or a missing attribute never expires (Amazon DynamoDB Developer Guide,
"Using time to live"). ``SessionStore`` treats such a session as expired — correct, but silent:
the application sees sessions vanish and nothing says why. `UnreadableTtlLog` writes one
warning per item (its key and the bad value), naming the attribute, its type and its value.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

#: Items remembered as already reported; past this the memory starts over (a store lives as
#: long as its process, and a warning repeated after 10,000 others costs nothing).
MAX_REMEMBERED = 10_000
_TYPE_NAMES = {
    "S": "String",
    "N": "Number",
    "B": "Binary",
    "BOOL": "Boolean",
    "NULL": "Null",
    "M": "Map",
    "L": "List",
    "SS": "String Set",
    "NS": "Number Set",
    "BS": "Binary Set",
}
_MAX_VALUE_CHARS = 100


def _described(attribute: object) -> tuple[str, str]:
    """``(type, value)`` of a low-level AttributeValue for the log line."""
    if not isinstance(attribute, Mapping) or len(attribute) != 1:
        return "not an AttributeValue", repr(attribute)[:_MAX_VALUE_CHARS]
    ((kind, value),) = attribute.items()
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return f"{_TYPE_NAMES.get(kind, kind)} ({kind})", text[:_MAX_VALUE_CHARS]


class UnreadableTtlLog:
    """Logs an unreadable TTL once per item and value; thread safe.

    Args:
        logger: where the warning goes (field ``unreadableTtl`` holds the details).
        ttl_attribute: the TTL attribute name.
        key_names: the table's key attribute names (partition key, then sort key).
    """

    def __init__(
        self, logger: logging.Logger, ttl_attribute: str, key_names: Sequence[str]
    ) -> None:
        self._logger = logger
        self._ttl_attribute = ttl_attribute
        self._key_names = tuple(key_names)
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def check(self, item: Mapping[str, Any], ttl: Decimal | None, horizon: Decimal) -> None:
        """Warn (once) when ``ttl`` (read from ``item``) is missing, not a positive Number, or
        beyond ``horizon`` (``now + max_ttl`` + skew: e.g. milliseconds). A readable TTL in
        the past is an ordinary expiry: nothing is logged."""
        if ttl is not None and 0 < ttl <= horizon:
            return
        raw = item.get(self._ttl_attribute)
        key = {name: item.get(name) for name in self._key_names}
        identity = json.dumps([key, raw], sort_keys=True, default=str)
        with self._lock:
            if identity in self._seen:
                return
            if len(self._seen) >= MAX_REMEMBERED:
                self._seen.clear()
            self._seen.add(identity)
        kind, value = ("missing", "") if raw is None else _described(raw)
        what = "missing" if raw is None else f"a {kind} with value {value!r}"
        self._logger.warning(
            "session %s: time to live attribute %r is %s, not a Number of epoch seconds within "
            "max_ttl; the session is treated as expired (fail closed)",
            json.dumps(key, sort_keys=True, default=str),
            self._ttl_attribute,
            what,
            extra={
                "unreadableTtl": {
                    "key": key,
                    "attribute": self._ttl_attribute,
                    "type": kind,
                    "value": value,
                }
            },
        )
