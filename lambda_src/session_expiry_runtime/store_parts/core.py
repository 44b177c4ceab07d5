"""The table access every part of the store shares: settings, the clock, liveness conditions
and the conditional UpdateItem that refuses a session that is not live.

DynamoDB deletes expired items lazily, typically within a few days, and until then they are
still returned by GetItem/Query and can still be updated (Amazon DynamoDB Developer Guide,
"Working with time to live (TTL)"). So every read here judges liveness itself and every write
that needs a live session carries a condition expression that requires it (Developer Guide,
"Condition expressions"). The liveness rules are in `ttl`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any, Protocol, TypeVar

from botocore.exceptions import ClientError

from ..core.config import ENV_TABLE_NAME, RuntimeConfig
from ..core.ownership import owner_token
from ..core.prefixes import validate_scratch_root
from ..core.regions import is_global, sweep_shard_value
from ..core.ttl import (
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
from ..core.ttl_log import UnreadableTtlLog
from ..sweeps.sweeper import shard_of
from .claims import Claimed, ClaimRequest, ClaimWriter, Holder
from .errors import LOGGER, describe, gone, is_condition_failure, one_grant
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
from .registrar_client import Invoke, RegistrarClaims, lambda_invoke
from .session import Clock, Session, utc_now

T = TypeVar("T")


class ConnectedGrantOption(Protocol):
    """What the store reads of
    [`connected_grants.ConnectedGrant`][session_expiry_runtime.store.ConnectedGrant]."""

    @property
    def grantee_principal(self) -> str: ...

    @property
    def operations(self) -> Sequence[str]: ...


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


#: ``claim_registrar``'s default: the registrar the configuration names, if any.
FROM_CONFIG: object = object()


class StoreCore:
    """Settings, clients and the shared table access of
    [`SessionStore`][session_expiry_runtime.store.SessionStore] (its arguments
    and errors are documented there)."""

    def __init__(
        self,
        table_name: str | None = None,
        *,
        dynamodb_client: Any = None,
        kms_client: Any = None,
        connections_client: Any = None,
        agentcore_client: Any = None,
        clock: Clock | None = None,
        config: RuntimeConfig | None = None,
        max_ttl: timedelta = MAX_SESSION_TTL,
        default_ttl: timedelta = DEFAULT_SESSION_TTL,
        sleep: Callable[[float], None] = time.sleep,
        connected_grant: ConnectedGrantOption | None = None,
        claim_registrar: Invoke | object | None = FROM_CONFIG,
        lambda_client: Any = None,
    ) -> None:
        self._config = config or RuntimeConfig()
        name = table_name or self._config.table_name
        if not name:
            raise ValueError(
                f"table name {name!r}: expected the session table's name "
                f"(argument table_name, RuntimeConfig.table_name or ${ENV_TABLE_NAME}, which "
                "SessionExpiry.grant_session_access sets on a function; in a test, request the "
                "session_expiry_app_env fixture of cdk_session_expiry.testing)"
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
        self._agentcore = agentcore_client
        self._clock: Clock = clock or utc_now
        #: Grants kept only while a client is connected (`connected_grants`); ``None``: off.
        self._connected_grant = _connected_grant(self._config, connected_grant)
        c = self._config
        key_names = [c.partition_key] + ([c.sort_key] if c.sort_key else [])
        self._unreadable_ttl = UnreadableTtlLog(LOGGER, c.ttl_attribute, key_names)
        #: Ownership records: through the claim registrar (`registrar_client`) when one
        #: is configured, else written directly (`claims`: tests and the registrar itself);
        #: ``None``: none are written (no ownership table configured).
        self._claims: ClaimWriter | RegistrarClaims | None = None
        invoke = _registrar_transport(c, claim_registrar, lambda_client)
        if invoke is not None:
            self._claims = RegistrarClaims(invoke, sleep=sleep)
        elif c.ownership_table_name:
            self._claims = ClaimWriter(
                dynamodb_client, c.ownership_table_name, clock=self._now, sleep=sleep
            )

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
        # The expiry sweeper's sparse index (see ..sweeper): same key, same shard, every write;
        # on a global table the shard carries the owner Region (..regions).
        shard = shard_of([value["S"] for value in key.values()], self._config.sweep_shards)
        return sweep_shard_value(int(shard), self._owner_region)

    @property
    def _owner_region(self) -> str | None:
        """The Region this store stamps as a new session's owner on a global table (the
        configured Region, else its DynamoDB client's); ``None`` on a one-Region table."""
        if not is_global(self._config):
            return None
        if self._config.region:
            return self._config.region
        region = getattr(getattr(self._ddb, "meta", None), "region_name", None)
        if not isinstance(region, str) or not region:
            raise ValueError(
                f"owner Region attribute {self._config.owner_region_attribute!r} is set (a "
                "global table) but the Region is unknown: expected SESSION_EXPIRY_REGION, "
                "AWS_REGION or a DynamoDB client with a Region"
            )
        return region

    def _to_session(self, item: Mapping[str, Any]) -> Session:
        return item_to_session(self._config, self._reserved, item)

    # --- ownership records ----------------------------------------------------------------------
    def _holder(
        self, key: Key, incarnation: str, not_after: int | None, token: str | None = None
    ) -> Holder:
        """The session incarnation ``incarnation`` of ``key`` (its claim token ``token``) as
        the claimant of ids."""
        c = self._config
        if c.sort_key:
            session_id, partition = key[c.sort_key]["S"], key[c.partition_key]["S"]
        else:
            session_id, partition = key[c.partition_key]["S"], None
        return Holder(
            owner=owner_token({name: value["S"] for name, value in key.items()}),
            incarnation=incarnation,
            # Only an item a foreign writer made lacks it: the end touch() would give it.
            not_after=not_after if not_after is not None else self._not_after_from(self._now()),
            session_id=session_id,
            partition=partition,
            label=f"{describe(session_id, partition)} (incarnation {incarnation!r})",
            token=token,
        )

    def _recording(self, key: Key, session_id: str, partition: str | None) -> Recording:
        """How an attach records ids on the live session under ``key`` (a consistent GetItem
        when ownership records are on).

        Raises:
            SessionGoneError: the session is missing or not live.
        """
        if self._claims is None:
            return Recording(None, None, {}, {}, None)
        current = self._get_live(key, consistent=True)
        if current is None:
            raise gone(session_id, partition)
        return self._recording_of(key, current)

    def _recording_of(self, key: Key, current: Session) -> Recording:
        if self._claims is None:
            return Recording(None, None, {}, {}, current)
        names = {"#inc": self._config.incarnation_attribute}
        if current.incarnation is None:  # legacy: no claims, and it must still be that item
            return Recording(None, "attribute_not_exists(#inc)", names, {}, current)
        holder = self._holder(key, current.incarnation, current.not_after, current.claim_token)
        inc = {":inc": {"S": current.incarnation}}
        return Recording(holder, "#inc = :inc", names, inc, current)

    def _claimed(self, requests: Sequence[ClaimRequest], write: Callable[[], T]) -> T:
        """Claim every id, then ``write`` (the item update, which requires the claimant's
        incarnation to be the live one); if anything fails, undo the claims and re-raise."""
        claims = self._claims
        if claims is None or not requests:
            return write()
        done: list[Claimed] = []
        try:
            if isinstance(claims, RegistrarClaims):
                done = claims.put_all(requests)
            else:
                for request in requests:
                    done.append(claims.put(request))
            return write()
        except BaseException:
            for claimed in reversed(done):
                claims.undo(claimed)
            raise

    def _may_act_on(
        self, recording: Recording, kind: str, ids: Iterable[str]
    ) -> tuple[frozenset[str], list[ClaimRequest]]:
        """Of earlier ids recorded on the item, those this incarnation may close or stop
        itself, and their claims (now ``releasing``): every id without ownership records; on
        a legacy item none (its ids cannot be proven its own: they end by their own limits or
        the cleanup's rules); else the ids whose claims it still holds."""
        wanted = sorted(set(ids))
        if self._claims is None:
            return frozenset(wanted), []
        if recording.holder is None:
            return frozenset(), []
        marked = self._claims.mark_releasing(recording.claims(kind, wanted))
        return frozenset(r.resource_id for r in marked), marked

    def _settle(self, marked: Sequence[ClaimRequest], done: Iterable[str]) -> None:
        """Release the claims of the ids closed or stopped; hold the others again."""
        if self._claims is None or not marked:
            return
        finished = set(done)
        self._claims.release([r for r in marked if r.resource_id in finished])
        self._claims.hold_again([r for r in marked if r.resource_id not in finished])

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
        grant_conflict: bool = False,
    ) -> Session:
        """`_try_update`; the session after it, or the error saying why not
        (``grant_conflict``: a live session that carries a grant refused it)."""
        new, old = self._try_update(key, now, update, names, values, extra_condition)
        if new is not None:
            return self._to_session(new)
        current = self._to_session(old) if old is not None and self._live(old, now) else None
        if grant_conflict and current is not None and current.grant_id:
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


@dataclass(frozen=True)
class Recording:
    """How an attach records ids: the claimant (``None``: no claims, without ownership records
    or on a legacy item) and the condition its item update adds (the claimant's incarnation is
    still the live one; a legacy item is still legacy)."""

    holder: Holder | None
    condition: str | None
    names: dict[str, str]
    values: dict[str, Any]
    #: The session as read (consistently) to learn its incarnation; ``None`` when not read.
    current: Session | None

    def claims(self, kind: str, ids: Sequence[str]) -> list[ClaimRequest]:
        """The claims of ``ids`` (none without a claimant)."""
        if self.holder is None:
            return []
        return [ClaimRequest(kind, resource_id, self.holder) for resource_id in ids]

    def and_condition(self, condition: str | None) -> str | None:
        """``condition`` AND this recording's condition."""
        parts = [part for part in (condition, self.condition) if part]
        return " AND ".join(f"({part})" for part in parts) or None


def _registrar_transport(config: RuntimeConfig, given: object, lambda_client: Any) -> Invoke | None:
    """The transport to the claim registrar: ``given`` when it is one, else the function
    ``SESSION_EXPIRY_CLAIM_REGISTRAR_FUNCTION`` names, invoked with ``lambda_client`` (made
    here when ``None``)."""
    if given is not FROM_CONFIG:
        return given  # type: ignore[return-value]
    if not config.claim_registrar_function or not config.ownership_table_name:
        return None
    if lambda_client is None:
        import boto3
        from botocore.config import Config

        lambda_client = boto3.client(
            "lambda",
            config=Config(connect_timeout=5, read_timeout=30, retries={"mode": "standard"}),
        )
    return lambda_invoke(lambda_client, config.claim_registrar_function)


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


def _connected_grant(
    config: RuntimeConfig, option: ConnectedGrantOption | None
) -> ConnectedGrantOption | None:
    if option is not None and not (config.grant_key_arn and config.retiring_principal):
        raise ValueError(
            f"connected_grant {option!r}: grants kept only while connected need the grant key "
            f"({config.grant_key_arn!r}) and the retiring principal "
            f"({config.retiring_principal!r}) configured, as create_grant does"
        )
    return option
