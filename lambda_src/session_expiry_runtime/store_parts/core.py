"""The table access every part of the store shares: settings, the clock, liveness conditions
and the conditional UpdateItem that refuses a session that is not live.

DynamoDB deletes expired items lazily, typically within a few days, and until then they are
still returned by GetItem/Query and can still be updated (Amazon DynamoDB Developer Guide,
"Working with time to live (TTL)"). So every read here judges liveness itself and every write
that needs a live session carries a condition expression that requires it (Developer Guide,
"Condition expressions"). The liveness rules are in :mod:`..ttl`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from ..config import ENV_TABLE_NAME, RuntimeConfig
from ..prefixes import validate_scratch_root
from ..sweeper import shard_of
from ..ttl import (
    DEFAULT_SESSION_TTL,
    MAX_SESSION_TTL,
    expiry_from_timestamp,
    expiry_from_ttl,
    horizon_seconds,
    is_live,
    now_seconds,
    ttl_from_attribute,
    validate_max_ttl,
)
from ..ttl_log import UnreadableTtlLog
from .errors import gone, one_grant
from .keys import (
    Key,
    item_to_session,
    number,
    number_value,
    partition_value,
    reserved_attributes,
    session_key,
    tenant_from_partition,
    tenant_is_partition,
)
from .session import Clock, Session, utc_now

#: Every part of the store logs under this one name (it was the single module's name).
LOGGER = logging.getLogger("session_expiry_runtime.store")

CONDITION_FAILED = "ConditionalCheckFailedException"
# Expression placeholders. Every attribute name is aliased, reserved word or not. The type
# test comes first so a TTL of another type never reaches a numeric comparison. A session
# past its absolute end (#na, not-after) is not live whatever its TTL; items written before
# the not-after attribute existed have none and are judged by their TTL alone.
LIVE_TTL = (
    "attribute_type(#t, :num) AND #t > :now AND #t <= :horizon"
    " AND (attribute_not_exists(#na) OR (attribute_type(#na, :num) AND #na > :now))"
)
LIVE = f"attribute_exists(#pk) AND {LIVE_TTL}"
NOT_LIVE = (
    "attribute_not_exists(#pk) OR attribute_not_exists(#t) OR NOT attribute_type(#t, :num)"
    " OR #t <= :now OR #t > :horizon"
    " OR (attribute_exists(#na) AND (NOT attribute_type(#na, :num) OR #na <= :now))"
)


def is_condition_failure(err: ClientError) -> bool:
    """The error is DynamoDB's ``ConditionalCheckFailedException``."""
    return bool(err.response.get("Error", {}).get("Code") == CONDITION_FAILED)


class StoreCore:
    """Settings, clients and the shared table access of :class:`SessionStore` (its arguments
    and errors are documented there)."""

    def __init__(
        self,
        table_name: str | None = None,
        *,
        dynamodb_client: Any = None,
        kms_client: Any = None,
        connections_client: Any = None,
        clock: Clock | None = None,
        config: RuntimeConfig | None = None,
        max_ttl: timedelta = MAX_SESSION_TTL,
        default_ttl: timedelta = DEFAULT_SESSION_TTL,
    ) -> None:
        self._config = config or RuntimeConfig()
        name = table_name or self._config.table_name
        if not name:
            raise ValueError(
                f"table name {name!r}: expected the session table's name "
                f"(argument table_name, RuntimeConfig.table_name or ${ENV_TABLE_NAME})"
            )
        self.table_name: str = name
        validate_scratch_root(self._config.scratch_root)
        self._max_ttl = validate_max_ttl(max_ttl)
        validate_max_ttl(default_ttl)
        if default_ttl > max_ttl:
            raise ValueError(f"default_ttl {default_ttl!r}: beyond max_ttl {max_ttl!r}")
        self._default_ttl = default_ttl
        self._max_lifetime = _max_lifetime(self._config, max_ttl)
        self._reserved = reserved_attributes(self._config)
        if dynamodb_client is None:
            import boto3

            dynamodb_client = boto3.client("dynamodb")
        self._ddb = dynamodb_client
        self._kms = kms_client
        self._connections = connections_client
        self._clock: Clock = clock or utc_now
        c = self._config
        key_names = [c.partition_key] + ([c.sort_key] if c.sort_key else [])
        self._unreadable_ttl = UnreadableTtlLog(LOGGER, c.ttl_attribute, key_names)

    @property
    def config(self) -> RuntimeConfig:
        """The configuration this store is bound to."""
        return self._config

    # --- time ----------------------------------------------------------------------------
    def _now(self) -> Decimal:
        return now_seconds(self._clock())

    def _expiry(self, ttl: object, expires_at: object, now: Decimal) -> int:
        if ttl is not None and expires_at is not None:
            raise ValueError(
                f"ttl {ttl!r} and expires_at {expires_at!r}: give one of them, not both"
            )
        if expires_at is not None:
            return expiry_from_timestamp(expires_at, now=now, max_ttl=self._max_ttl)
        return expiry_from_ttl(
            self._default_ttl if ttl is None else ttl, now=now, max_ttl=self._max_ttl
        )

    def _not_after_from(self, now: Decimal) -> int:
        """Epoch seconds of the absolute end of a session created (or first capped) now: rounded
        down, so a session never lives longer than the maximum lifetime."""
        return math.floor(now + self._max_lifetime)

    # --- keys ----------------------------------------------------------------------------
    def _key(self, session_id: object, partition: object) -> Key:
        return session_key(self._config, session_id, partition)

    def _partition_value(self, partition: object) -> str:
        return partition_value(self._config, partition)

    @property
    def _tenant_is_partition(self) -> bool:
        return tenant_is_partition(self._config)

    def _tenant_from_partition(self, tenant_id: str | None, partition: str | None) -> str | None:
        return tenant_from_partition(self._config, tenant_id, partition)

    def _sweep_shard(self, key: Mapping[str, Mapping[str, str]]) -> str:
        # The expiry sweeper's sparse index (see ..sweeper): same key, same shard, every write.
        return shard_of([value["S"] for value in key.values()], self._config.sweep_shards)

    def _to_session(self, item: Mapping[str, Any]) -> Session:
        return item_to_session(self._config, self._reserved, item)

    # --- liveness --------------------------------------------------------------------------
    def _names(self) -> dict[str, str]:
        c = self._config
        return {"#pk": c.partition_key, "#t": c.ttl_attribute, "#na": c.not_after_attribute}

    def _time_values(self, now: Decimal) -> dict[str, dict[str, str]]:
        return {
            ":now": {"N": number(now)},
            ":horizon": {"N": number(horizon_seconds(now, self._max_ttl))},
            ":num": {"S": "N"},
        }

    def _live(self, item: Mapping[str, Any], now: Decimal) -> bool:
        ttl = ttl_from_attribute(item.get(self._config.ttl_attribute))
        self._unreadable_ttl.check(item, ttl, horizon_seconds(now, self._max_ttl))
        if not is_live(ttl, now=now, max_ttl=self._max_ttl):
            return False
        raw = item.get(self._config.not_after_attribute)
        if raw is None:
            return True  # written before the absolute lifetime existed: the TTL decides
        not_after = number_value(raw)
        return not_after is not None and not_after > now

    def _get_live(self, key: Key, *, consistent: bool) -> Session | None:
        """The session under ``key`` if it exists and is live, else ``None``."""
        now = self._now()
        resp = self._ddb.get_item(TableName=self.table_name, Key=key, ConsistentRead=consistent)
        item = resp.get("Item")
        if item is None or not self._live(item, now):
            return None
        return self._to_session(item)

    # --- conditional updates ------------------------------------------------------------------
    def _update_live(
        self,
        session_id: str,
        partition: str | None,
        key: Mapping[str, Any],
        now: Decimal,
        update: str,
        names: Mapping[str, str],
        values: Mapping[str, Any],
        *,
        extra_condition: str | None = None,
    ) -> Session:
        """:meth:`_try_update`; the session after it, or the error saying why not."""
        new, old = self._try_update(key, now, update, names, values, extra_condition)
        if new is not None:
            return self._to_session(new)
        current = self._to_session(old) if old is not None and self._live(old, now) else None
        if current is not None and current.grant_id and extra_condition is not None:
            raise one_grant(session_id, partition, current.grant_id)
        raise gone(session_id, partition)

    def _try_update(
        self,
        key: Mapping[str, Any],
        now: Decimal,
        update: str,
        names: Mapping[str, str],
        values: Mapping[str, Any],
        extra_condition: str | None = None,
        *,
        return_values: str = "ALL_NEW",
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """One UpdateItem conditioned on the session being live (and ``extra_condition``).

        Returns ``(attributes, None)`` when written (``return_values`` of the item), else
        ``(None, the item as it was)`` (``None`` if there was none).
        """
        condition = LIVE if extra_condition is None else f"{LIVE} AND {extra_condition}"
        try:
            resp = self._ddb.update_item(
                TableName=self.table_name,
                Key=key,
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames={**self._names(), **names},
                ExpressionAttributeValues={**self._time_values(now), **values},
                ReturnValues=return_values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as err:
            if not is_condition_failure(err):
                raise
            old = err.response.get("Item")
            return None, dict(old) if old is not None else None
        return dict(resp.get("Attributes") or {}), None


def _max_lifetime(config: RuntimeConfig, max_ttl: timedelta) -> int:
    lifetime = config.max_session_lifetime_seconds
    if (
        isinstance(lifetime, bool)
        or not isinstance(lifetime, int)
        or not 1 <= lifetime <= max_ttl.total_seconds()
    ):
        raise ValueError(
            f"max session lifetime {lifetime!r} seconds: expected whole seconds from 1 to "
            f"max_ttl ({int(max_ttl.total_seconds())} seconds)"
        )
    return lifetime
