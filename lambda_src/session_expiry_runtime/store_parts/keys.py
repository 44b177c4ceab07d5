"""Keys and layout: a session's item key, the attribute names the store reserves, and how an
item reads back as a [`Session`][session_expiry_runtime.store.Session].

Key schema: without a sort key the session id is the partition key value; with one, the
partition key value is ``partition`` (a user or tenant, say) and the session id is the sort key
value. Key values are stored as Strings. Pure functions: no AWS calls.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from ..core.config import CLAIM_TOKEN_ATTRIBUTE, PREVIOUS_INCARNATION_ATTRIBUTE, RuntimeConfig
from ..core.prefixes import validate_segment
from ..core.ttl import ttl_from_attribute
from .session import Session

#: DynamoDB partition key values are at most 2048 bytes (sort key values at most 1024).
MAX_PARTITION_BYTES = 2048

Key = dict[str, dict[str, str]]

_DESERIALIZER = TypeDeserializer()


def tenant_is_partition(config: RuntimeConfig) -> bool:
    """The tenant attribute is the partition key of a table with a sort key."""
    return config.sort_key is not None and config.tenant_attribute == config.partition_key


def reserved_attributes(config: RuntimeConfig) -> frozenset[str]:
    """The attribute names of the key and the runtime, which application attributes may not use.

    Raises:
        ValueError: two roles share one attribute name.
    """
    c = config
    roles = {
        "partition key": c.partition_key,
        "sort key": c.sort_key,
        "TTL attribute": c.ttl_attribute,
        "connection id attribute": c.connection_id_attribute,
        "connection ids attribute": c.connection_ids_attribute,
        "not-after attribute": c.not_after_attribute,
        "grant id attribute": c.grant_id_attribute,
        "grant token attribute": c.grant_token_attribute,
        "scratch prefix attribute": c.scratch_prefix_attribute,
        # The tenant may be the partition of a table with a sort key (then the cleanup
        # takes it from the stream record's keys); otherwise it is an attribute of its own.
        "tenant attribute": None if tenant_is_partition(c) else c.tenant_attribute,
        "sweep shard attribute": c.sweep_shard_attribute,
        "owner Region attribute": c.owner_region_attribute,
        "agent runtime session attribute": c.agent_runtime_session_attribute,
        "code interpreter session attribute": c.code_interpreter_session_attribute,
        "browser session attribute": c.browser_session_attribute,
        "incarnation attribute": c.incarnation_attribute,
        "claim token attribute": CLAIM_TOKEN_ATTRIBUTE,
        "previous incarnation attribute": PREVIOUS_INCARNATION_ATTRIBUTE,
        "agent runtime session ids attribute": c.agent_runtime_session_ids_attribute,
        "code interpreter session ids attribute": c.code_interpreter_session_ids_attribute,
        "browser session ids attribute": c.browser_session_ids_attribute,
    }
    seen: dict[str, str] = {}
    for role, attr in roles.items():
        if attr is None:
            continue
        if attr in seen:
            raise ValueError(
                f"attribute name {attr!r} is used as both {seen[attr]} and {role}; "
                "expected distinct names"
            )
        seen[attr] = role
    return frozenset(seen)


def partition_value(config: RuntimeConfig, partition: object) -> str:
    """``partition`` as a partition key value of a table with a sort key.

    Raises:
        ValueError: not a non-empty string of at most 2048 bytes.
    """
    if not isinstance(partition, str) or not partition:
        raise ValueError(
            f"partition {partition!r}: the table has sort key {config.sort_key!r}; "
            f"expected a non-empty value of its partition key {config.partition_key!r} "
            "(e.g. a user or tenant id) as partition=, e.g. "
            "store.create(session_id, partition='tenant-1')"
        )
    if len(partition.encode("utf-8")) > MAX_PARTITION_BYTES:
        raise ValueError(
            f"partition {partition[:40]!r}...: longer than {MAX_PARTITION_BYTES} bytes"
        )
    return partition


def session_key(config: RuntimeConfig, session_id: object, partition: object) -> Key:
    """The item key (low-level DynamoDB form) of a session.

    Raises:
        ValueError: a session id that is not a prefix segment, a bad partition, or a
            partition on a table without a sort key.
    """
    if not isinstance(session_id, str):
        raise ValueError(f"session id {session_id!r}: expected a string")
    validate_segment(session_id, "session id")
    c = config
    if c.sort_key:
        return {
            c.partition_key: {"S": partition_value(c, partition)},
            c.sort_key: {"S": session_id},
        }
    if partition is not None:
        raise ValueError(
            f"partition {partition!r}: the table has no sort key, the session id is the "
            "partition key value; expected partition=None"
        )
    return {c.partition_key: {"S": session_id}}


def tenant_from_partition(
    config: RuntimeConfig, tenant_id: str | None, partition: str | None
) -> str | None:
    """The tenant of a session whose tenant is the partition: ``partition``.

    Raises:
        ValueError: ``tenant_id`` is given and is not ``partition``.
    """
    if tenant_id is not None and tenant_id != partition:
        raise ValueError(
            f"tenant id {tenant_id!r}: the tenant attribute {config.tenant_attribute!r} "
            f"is the partition key, so the tenant is the partition {partition!r}; pass no "
            "tenant_id or the same value"
        )
    return partition


def item_to_session(
    config: RuntimeConfig, reserved: frozenset[str], item: Mapping[str, Any]
) -> Session:
    """A [`Session`][session_expiry_runtime.store.Session] from a low-level item; ``reserved``
    names stay out of ``attributes``."""
    c = config

    def text(name: str) -> str | None:
        value = item.get(name)
        if isinstance(value, Mapping) and isinstance(value.get("S"), str):
            return str(value["S"])
        return None

    def every(single: str, several: str) -> frozenset[str]:
        latest = text(single)
        return string_set(item.get(several)) | ({latest} if latest is not None else set())

    ttl = ttl_from_attribute(item.get(c.ttl_attribute))
    if c.sort_key:
        session_id, partition = text(c.sort_key), text(c.partition_key)
    else:
        session_id, partition = text(c.partition_key), None
    return Session(
        session_id=session_id or "",
        partition=partition,
        expires_at=math.floor(ttl) if ttl is not None else 0,
        scratch_prefix=text(c.scratch_prefix_attribute),
        connection_id=text(c.connection_id_attribute),
        grant_id=text(c.grant_id_attribute),
        grant_token=text(c.grant_token_attribute),
        tenant_id=text(c.tenant_attribute),
        connection_ids=every(c.connection_id_attribute, c.connection_ids_attribute),
        not_after=whole_seconds(item.get(c.not_after_attribute)),
        agent_runtime_session_id=text(c.agent_runtime_session_attribute),
        code_interpreter_session_id=text(c.code_interpreter_session_attribute),
        browser_session_id=text(c.browser_session_attribute),
        incarnation=text(c.incarnation_attribute),
        claim_token=text(CLAIM_TOKEN_ATTRIBUTE),
        owner_region=text(c.owner_region_attribute) if c.owner_region_attribute else None,
        agent_runtime_session_ids=every(
            c.agent_runtime_session_attribute, c.agent_runtime_session_ids_attribute
        ),
        code_interpreter_session_ids=every(
            c.code_interpreter_session_attribute, c.code_interpreter_session_ids_attribute
        ),
        browser_session_ids=every(c.browser_session_attribute, c.browser_session_ids_attribute),
        attributes={
            name: _DESERIALIZER.deserialize(value)
            for name, value in item.items()
            if name not in reserved
        },
    )


# --- DynamoDB values ---------------------------------------------------------------------------
def number(value: Decimal) -> str:
    """A Decimal as a DynamoDB Number's text (no exponent)."""
    return format(value, "f")


def number_value(value: object) -> Decimal | None:
    """A DynamoDB Number attribute (``{"N": ...}``) as ``Decimal``; ``None`` for anything else."""
    if not isinstance(value, Mapping) or not isinstance(value.get("N"), str):
        return None
    try:
        parsed = Decimal(value["N"])
    except ArithmeticError:
        return None
    return parsed if parsed.is_finite() else None


def whole_seconds(value: object) -> int | None:
    """A Number attribute rounded down to whole seconds; ``None`` for anything else."""
    parsed = number_value(value)
    if parsed is None:
        return None
    try:
        return math.floor(parsed)
    except (ArithmeticError, OverflowError):
        return None


def string_set(value: object) -> frozenset[str]:
    """A String Set attribute (``{"SS": [...]}``) as a frozenset; empty for anything else."""
    if isinstance(value, Mapping) and isinstance(value.get("SS"), list):
        return frozenset(v for v in value["SS"] if isinstance(v, str))
    return frozenset()


def require_text(value: object, what: str) -> str:
    """``value`` when it is a non-empty string without control characters.

    Raises:
        ValueError: anything else; the message names ``what`` and the value.
    """
    if (
        not isinstance(value, str)
        or not value
        or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value)
    ):
        raise ValueError(
            f"{what} {value!r}: expected a non-empty string without control characters"
        )
    return value
