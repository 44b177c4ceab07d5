"""Application-facing session store: create, read, heartbeat and end sessions that fail closed.

DynamoDB deletes expired items lazily, typically within a few days, and until then they are
still returned by GetItem/Query and can still be updated (Amazon DynamoDB Developer Guide,
"Working with time to live (TTL)"). Every call here therefore enforces expiry itself:
reads return live sessions only, and every write that needs a live session carries a
condition expression that requires it (Developer Guide, "Condition expressions"), so an
expired session is never revived by a heartbeat. The liveness rules are in :mod:`.ttl`.

Usage (the construct's ``grant_session_access`` sets the environment read by ``from_env``)::

    from datetime import timedelta
    from session_expiry_runtime.store import SessionStore, SessionGoneError

    store = SessionStore.from_env()
    s = store.create("s-1", ttl=timedelta(hours=1), connection_id=event_connection_id)
    store.touch("s-1", ttl=timedelta(minutes=30))     # SessionGoneError once expired
    store.attach_connection("s-1", new_connection_id) # a reconnect: closes the earlier ones
    store.end("s-1")                                  # cleanup runs from the stream

A session has an absolute lifetime (``max_session_lifetime_seconds``, default 8 hours):
``create`` records its not-after time, no heartbeat sets the TTL past it, and from then on it
is gone whatever its TTL says. It records every WebSocket connection attached to it (a String
Set), and its KMS grant is bound to its encryption context (:attr:`Session.encryption_context`).

Every attribute name goes through ``ExpressionAttributeNames``, so a TTL attribute named
``ttl`` (a DynamoDB reserved word) works. Errors other than the ones documented per method
(throttling, access denied, a missing table) propagate as ``botocore`` ``ClientError``.
"""

from __future__ import annotations

import builtins
import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from .agent_sessions import is_runtime_session_id, is_tool_session_id
from .config import (
    ENV_GRANT_KEY_ARN,
    ENV_RETIRING_PRINCIPAL,
    ENV_TABLE_NAME,
    ENV_WEBSOCKET_ENDPOINT,
    RuntimeConfig,
)
from .grant_names import grant_name
from .prefixes import build_scratch_prefix, validate_scratch_root, validate_segment
from .sweeper import shard_of
from .ttl import (
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
from .ttl_log import UnreadableTtlLog

__all__ = [
    "ENCRYPTION_CONTEXT_PARTITION",
    "ENCRYPTION_CONTEXT_SESSION_ID",
    "Clock",
    "Session",
    "SessionConflictError",
    "SessionError",
    "SessionGoneError",
    "SessionStore",
]

_LOG = logging.getLogger(__name__)

#: The clock type: a callable returning the current time as an **aware** ``datetime``.
Clock = Callable[[], datetime]

# Lost races with concurrent creators/enders before create gives up with a conflict.
_CREATE_ATTEMPTS = 3
# DynamoDB partition key values are at most 2048 bytes; sort key values at most 1024.
_MAX_PARTITION_BYTES = 2048
_CONDITION_FAILED = "ConditionalCheckFailedException"
# Expression placeholders. Every attribute name is aliased, reserved word or not. The type
# test comes first so a TTL of another type never reaches a numeric comparison. A session
# past its absolute end (#na, not-after) is not live whatever its TTL; items written before
# the not-after attribute existed have none and are judged by their TTL alone.
_LIVE_TTL = (
    "attribute_type(#t, :num) AND #t > :now AND #t <= :horizon"
    " AND (attribute_not_exists(#na) OR (attribute_type(#na, :num) AND #na > :now))"
)
_LIVE = f"attribute_exists(#pk) AND {_LIVE_TTL}"
_NOT_LIVE = (
    "attribute_not_exists(#pk) OR attribute_not_exists(#t) OR NOT attribute_type(#t, :num)"
    " OR #t <= :now OR #t > :horizon"
    " OR (attribute_exists(#na) AND (NOT attribute_type(#na, :num) OR #na <= :now))"
)
#: ``GoneException`` (HTTP 410): the connection is already closed (API Gateway Management API).
_GONE = "GoneException"
#: Encryption context keys a session's grant is bound to (``create_grant``).
ENCRYPTION_CONTEXT_SESSION_ID = "sessionId"
ENCRYPTION_CONTEXT_PARTITION = "sessionPartition"
#: Encryption context values in a grant constraint: at most 384 characters (KMS API Reference,
#: "CreateGrant", ``Constraints``).
_MAX_CONTEXT_VALUE = 384

_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


class SessionError(Exception):
    """Base class of the session errors; ``session_id`` and ``partition`` name the session."""

    def __init__(self, message: str, *, session_id: str, partition: str | None = None) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.partition = partition


class SessionConflictError(SessionError):
    """A live session with this id already exists (``create``), or it already carries a
    different KMS grant (``attach_grant``/``create_grant``)."""


class SessionGoneError(SessionError):
    """The session does not exist or has expired (its TTL is at or before now, missing,
    not a Number, or implausible); nothing was written."""


def _describe(session_id: str, partition: str | None) -> str:
    return f"session {session_id!r}" + (f" in partition {partition!r}" if partition else "")


@dataclass(frozen=True)
class Session:
    """A live session as read or written by :class:`SessionStore`.

    Attributes:
        session_id: the session id (partition key value, or sort key value with a sort key).
        partition: the partition key value when the table has a sort key, else ``None``.
        expires_at: the TTL attribute, epoch **seconds** (``int``).
        scratch_prefix: this incarnation's S3 scratch prefix (ends in ``/``), or ``None`` on
            an item not written by :meth:`SessionStore.create`.
        connection_id: the latest API Gateway WebSocket connection id attached, or ``None``.
        grant_id: KMS grant id, or ``None``.
        grant_token: KMS grant token, or ``None`` (left out of ``repr``).
        tenant_id: tenant id, or ``None``.
        attributes: the other (application) attributes, deserialized by boto3's
            ``TypeDeserializer`` (numbers as ``Decimal``).
        connection_ids: every connection id recorded on the session and not yet closed by
            :meth:`SessionStore.attach_connection` (the String Set plus ``connection_id``:
            items written before the set hold only the latter); the cleanup closes them all.
        not_after: the session's absolute end, epoch **seconds**, or ``None`` on an item
            written before the absolute lifetime existed (its first ``touch`` sets one).
        agent_runtime_session_id, code_interpreter_session_id, browser_session_id: the
            Amazon Bedrock AgentCore sessions the cleanup stops, or ``None``.
    """

    session_id: str
    partition: str | None
    expires_at: int
    scratch_prefix: str | None = None
    connection_id: str | None = None
    grant_id: str | None = None
    grant_token: str | None = field(default=None, repr=False)
    tenant_id: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    connection_ids: frozenset[str] = frozenset()
    not_after: int | None = None
    agent_runtime_session_id: str | None = None
    code_interpreter_session_id: str | None = None
    browser_session_id: str | None = None

    @property
    def expires_at_datetime(self) -> datetime:
        """``expires_at`` as an aware UTC ``datetime``."""
        return datetime.fromtimestamp(self.expires_at, tz=timezone.utc)

    @property
    def encryption_context(self) -> dict[str, str]:
        """The KMS encryption context a grant bound to this session requires.

        ``{"sessionId": <session id>}``, plus ``"sessionPartition"`` on a table with a sort key.
        Encrypt the session's data with it (``Encrypt``/``GenerateDataKey``
        ``EncryptionContext=``): a grant made by :meth:`SessionStore.create_grant` with
        ``bind_to_session`` (the default) allows its operations only on requests that carry
        these pairs (KMS Developer Guide, "Using grant constraints").
        """
        context = {ENCRYPTION_CONTEXT_SESSION_ID: self.session_id}
        if self.partition is not None:
            context[ENCRYPTION_CONTEXT_PARTITION] = self.partition
        return context


class SessionStore:
    """Sessions in one DynamoDB table, bound to the key schema and attribute names the
    construct configured.

    Key schema: without a sort key the session id is the partition key value; with a sort
    key (``config.sort_key``), ``partition`` is the partition key value (a user or tenant,
    say) and the session id is the sort key value, and :meth:`list` returns a partition's
    sessions. Key values are stored as Strings.

    Args:
        table_name: the table; default ``config.table_name``.
        dynamodb_client: a boto3 DynamoDB client; default ``boto3.client("dynamodb")``.
        kms_client: a boto3 KMS client for :meth:`create_grant`; default created on first use.
        connections_client: a boto3 ``apigatewaymanagementapi`` client with which
            :meth:`attach_connection` closes earlier connections; default created on first
            use for ``config.websocket_endpoint``.
        clock: returns the current time as an **aware** ``datetime``; default
            ``datetime.now(timezone.utc)``. Every call reads it once.
        config: key names, attribute names, scratch root, grant key, retiring principal,
            WebSocket endpoint and ``max_session_lifetime_seconds`` (a session's absolute
            lifetime from its creation, default 8 hours); default ``RuntimeConfig()`` (the
            construct's defaults).
        max_ttl: the longest lifetime accepted on writes and the read-side plausibility
            horizon (plus a five-minute clock-skew allowance); default
            :data:`~.ttl.MAX_SESSION_TTL` (365 days).
        default_ttl: lifetime used when a call gives neither ``ttl`` nor ``expires_at``;
            default :data:`~.ttl.DEFAULT_SESSION_TTL` (1 hour).

    Raises:
        ValueError: no table name, a bad scratch root, two roles sharing one attribute
            name, a bad ``max_ttl``/``default_ttl``, or a maximum session lifetime that is
            not whole seconds from 1 to ``max_ttl``.
    """

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
        c = self._config
        lifetime = c.max_session_lifetime_seconds
        if (
            isinstance(lifetime, bool)
            or not isinstance(lifetime, int)
            or not 1 <= lifetime <= max_ttl.total_seconds()
        ):
            raise ValueError(
                f"max session lifetime {lifetime!r} seconds: expected whole seconds from 1 to "
                f"max_ttl ({int(max_ttl.total_seconds())} seconds)"
            )
        self._max_lifetime = lifetime
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
            "tenant attribute": None if self._tenant_is_partition else c.tenant_attribute,
            "sweep shard attribute": c.sweep_shard_attribute,
            "agent runtime session attribute": c.agent_runtime_session_attribute,
            "code interpreter session attribute": c.code_interpreter_session_attribute,
            "browser session attribute": c.browser_session_attribute,
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
        self._reserved = frozenset(seen)
        if dynamodb_client is None:
            import boto3

            dynamodb_client = boto3.client("dynamodb")
        self._ddb = dynamodb_client
        self._kms = kms_client
        self._connections = connections_client
        self._clock: Clock = clock or _utc_now
        key_names = [c.partition_key] + ([c.sort_key] if c.sort_key else [])
        self._unreadable_ttl = UnreadableTtlLog(_LOG, c.ttl_attribute, key_names)

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> SessionStore:
        """Build a store from the environment the construct sets (``RuntimeConfig.from_env``).

        Reads ``SESSION_EXPIRY_TABLE_NAME`` (required), ``..._PARTITION_KEY``,
        ``..._SORT_KEY``, ``..._TTL_ATTRIBUTE``, the attribute-name variables,
        ``..._SCRATCH_ROOT``, ``..._TENANT_SCOPED_SCRATCH``, ``..._GRANT_KEY_ARN`` and
        ``..._RETIRING_PRINCIPAL``, and with the expiry sweeper ``..._SWEEP_SHARD_ATTRIBUTE`` and
        ``..._SWEEP_SHARDS`` (create and touch then write the session's shard, see
        :mod:`.sweeper`) (see :mod:`.config`), ``..._WEBSOCKET_ENDPOINT`` and
        ``..._MAX_SESSION_LIFETIME_SECONDS``. ``kwargs`` go to the constructor
        (``dynamodb_client``, ``kms_client``, ``connections_client``, ``clock``, ``max_ttl``,
        ``default_ttl``).

        Raises:
            ValueError: the table name variable is unset, or see the constructor.
        """
        return cls(config=RuntimeConfig.from_env(env), **kwargs)

    @property
    def config(self) -> RuntimeConfig:
        """The configuration this store is bound to."""
        return self._config

    # ------------------------------------------------------------------ public API --------

    def create(
        self,
        session_id: str,
        *,
        ttl: timedelta | None = None,
        expires_at: datetime | int | None = None,
        connection_id: str | None = None,
        tenant_id: str | None = None,
        partition: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        runtime_session_id: str | None = None,
        code_interpreter_session_id: str | None = None,
        browser_session_id: str | None = None,
    ) -> Session:
        """Create a session with a fresh scratch prefix; conditional PutItem.

        The TTL attribute is written as a Number of epoch seconds, ``now + ttl`` rounded up.
        The not-after attribute (``notAfter``) records the session's absolute end, ``now +``
        the maximum session lifetime (default 8 hours) rounded up; the TTL is never set past
        it, here or by :meth:`touch` (a longer ``ttl``/``expires_at`` is cut to it). The
        scratch prefix is unique to this incarnation (``{root}[{tenant}/]{id}/{token}/``).

        Reuse after expiry: an item that exists but is not live (expired and not yet
        deleted by TTL, or with a missing/non-Number/implausible TTL) does not block the id.
        It is removed first with a DeleteItem conditioned on it still being not live, so its
        REMOVE record reaches the stream and the cleanup releases the old incarnation's
        connection, grant and scratch prefix; then the new item is put with
        ``attribute_not_exists``. The old and new incarnations never share a scratch prefix.

        Args:
            session_id: 1-255 characters ``A-Z a-z 0-9 . _ : @ = + -``, starting with a
                letter or digit (it becomes a scratch prefix segment).
            ttl: lifetime, a ``timedelta`` from 1 second to ``max_ttl``; default the
                store's ``default_ttl`` (1 hour). Mutually exclusive with ``expires_at``.
            expires_at: absolute expiry, an aware ``datetime`` or ``int`` epoch seconds.
            connection_id: WebSocket connection id to store (in ``connectionId`` and the
                ``connectionIds`` String Set); default none.
            tenant_id: tenant to store; required with tenant-scoped scratch. When the tenant
                attribute is the partition key (a table with a sort key), the tenant is
                ``partition``: give no ``tenant_id`` or the same value.
            partition: partition key value; required with a sort key, else must be ``None``.
            attributes: extra application attributes, stored as top-level attributes of the
                item (boto3 ``TypeSerializer`` types: ``Decimal`` not ``float``); their names
                must not be the key, TTL or runtime attribute names. This is where a custom
                cleanup step's attributes go: for a step whose ``attributes`` are
                ``["secretName"]``, ``attributes={"secretName": name}``; the step reads them
                from the removed item's old image (docs: Custom cleanup steps, "Storing what
                the step reads"). Read back as :attr:`Session.attributes`. Default: none.
            runtime_session_id: the Amazon Bedrock AgentCore runtime session the cleanup
                stops (AgentCore takes 33-256 characters); see :meth:`attach_agent_session`.
                Default: none.
            code_interpreter_session_id: the AgentCore code interpreter session the cleanup
                stops (AgentCore takes 1-40 letters and digits). Default: none.
            browser_session_id: the AgentCore browser session the cleanup stops (1-40 letters
                and digits). Default: none.

        Returns:
            The new :class:`Session`.

        Raises:
            SessionConflictError: a live session with this id exists.
            ValueError: a bad id, partition, tenant, connection id, attribute name, or
                TTL (see :func:`.ttl.expiry_from_ttl`); the message names the value.
        """
        key = self._key(session_id, partition)
        now = self._now()
        not_after = self._not_after_from(now)
        expiry = min(self._expiry(ttl, expires_at, now), not_after)
        c = self._config
        if tenant_id is not None:
            _require_text(tenant_id, "tenant id")
        if self._tenant_is_partition:
            tenant_id = self._tenant_from_partition(tenant_id, partition)
        prefix = build_scratch_prefix(
            c.scratch_root,
            session_id,
            tenant_id=tenant_id,
            tenant_scoped=c.tenant_scoped_scratch,
        )
        item: dict[str, Any] = dict(key)
        item.update(
            self._agent_session_values(
                runtime_session_id, code_interpreter_session_id, browser_session_id
            )
        )
        for name, value in (attributes or {}).items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"attribute name {name!r}: expected a non-empty string")
            if name in self._reserved:
                raise ValueError(
                    f"attribute name {name!r}: reserved for the key or the runtime; "
                    f"choose a name other than {sorted(self._reserved)}"
                )
            item[name] = _SERIALIZER.serialize(value)
        item[c.ttl_attribute] = {"N": str(expiry)}
        item[c.not_after_attribute] = {"N": str(not_after)}
        item[c.scratch_prefix_attribute] = {"S": prefix}
        if c.sweep_shard_attribute:
            item[c.sweep_shard_attribute] = {"S": self._sweep_shard(key)}
        if tenant_id is not None and not self._tenant_is_partition:
            item[c.tenant_attribute] = {"S": tenant_id}
        if connection_id is not None:
            item[c.connection_id_attribute] = {"S": _require_text(connection_id, "connection id")}
            item[c.connection_ids_attribute] = {"SS": [connection_id]}

        for _ in range(_CREATE_ATTEMPTS):
            try:
                self._ddb.put_item(
                    TableName=self.table_name,
                    Item=item,
                    ConditionExpression="attribute_not_exists(#pk)",
                    ExpressionAttributeNames={"#pk": c.partition_key},
                )
                return self._to_session(item)
            except ClientError as err:
                if not _is_condition_failure(err):
                    raise
            # An item holds the id. Remove it only while it is still not live.
            try:
                self._ddb.delete_item(
                    TableName=self.table_name,
                    Key=key,
                    ConditionExpression=_NOT_LIVE,
                    ExpressionAttributeNames=self._names(),
                    ExpressionAttributeValues=self._time_values(self._now()),
                )
            except ClientError as err:
                if not _is_condition_failure(err):
                    raise
                raise SessionConflictError(
                    f"{_describe(session_id, partition)} already exists and is live; "
                    "end it or wait for it to expire before creating it again",
                    session_id=session_id,
                    partition=partition,
                ) from None
        raise SessionConflictError(
            f"{_describe(session_id, partition)}: lost {_CREATE_ATTEMPTS} races with concurrent "
            "writers of the same id",
            session_id=session_id,
            partition=partition,
        )

    def get(
        self, session_id: str, *, partition: str | None = None, consistent: bool = False
    ) -> Session | None:
        """Read a session; ``None`` unless it exists and is live (fails closed on time).

        Args:
            consistent: strongly consistent read (``ConsistentRead``; twice the read
                capacity). Default ``False``: eventually consistent, may miss a write made
                within about a second.

        Raises:
            ValueError: a bad id or partition.
        """
        key = self._key(session_id, partition)
        now = self._now()
        resp = self._ddb.get_item(TableName=self.table_name, Key=key, ConsistentRead=consistent)
        item = resp.get("Item")
        if item is None or not self._live(item, now):
            return None
        return self._to_session(item)

    def iter_sessions(
        self, partition: str, *, consistent: bool = False, page_size: int | None = None
    ) -> Iterator[Session]:
        """Yield the live sessions of one partition, page by page (lazy :meth:`list`).

        Arguments are checked at once; liveness is judged against the clock read once, here.
        Arguments and errors as for :meth:`list`.
        """
        if not self._config.sort_key:
            raise ValueError(
                f"list({partition!r}): the table has no sort key, so a partition holds one "
                "session; configure a sort key or use get()"
            )
        if page_size is not None and (
            isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1
        ):
            raise ValueError(f"page_size {page_size!r}: expected a positive int or None")
        pk_value = self._partition_value(partition)
        now = self._now()
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk",
            # The filter saves transfer; _pages checks each item again.
            "FilterExpression": _LIVE_TTL,
            "ExpressionAttributeNames": self._names(),
            "ExpressionAttributeValues": {":pk": {"S": pk_value}, **self._time_values(now)},
            "ConsistentRead": consistent,
        }
        if page_size is not None:
            request["Limit"] = page_size
        return self._pages(request, now)

    def _pages(self, request: dict[str, Any], now: Decimal) -> Iterator[Session]:
        while True:
            resp = self._ddb.query(**request)
            for item in resp.get("Items", []):
                if self._live(item, now):
                    yield self._to_session(item)
            # A page the filter emptied still carries LastEvaluatedKey: keep going.
            last = resp.get("LastEvaluatedKey")
            if not last:
                return
            request["ExclusiveStartKey"] = last

    def list(
        self, partition: str, *, consistent: bool = False, page_size: int | None = None
    ) -> builtins.list[Session]:
        """The live sessions of one partition (tables with a sort key only).

        A Query on the partition key with a FilterExpression on the TTL, following
        ``LastEvaluatedKey`` across all pages, including pages the filter empties entirely
        (Developer Guide, "Paginating table query results": the filter applies after
        ``Limit``). Items are ordered by sort key (session id).

        Args:
            partition: the partition key value (e.g. the user or tenant id).
            consistent: strongly consistent Query; default ``False``.
            page_size: ``Limit`` per Query page; default DynamoDB's (up to 1 MB per page).

        Raises:
            ValueError: no sort key configured, or a bad partition or page size.
        """
        return builtins.list(
            self.iter_sessions(partition, consistent=consistent, page_size=page_size)
        )

    def touch(
        self,
        session_id: str,
        *,
        ttl: timedelta | None = None,
        expires_at: datetime | int | None = None,
        partition: str | None = None,
    ) -> Session:
        """Heartbeat: set a new expiry on a live session; conditional UpdateItem.

        The condition requires the item to exist and be live (``attribute_exists(#pk) AND
        #t > :now AND #t <= :horizon``, and its not-after, if any, after now), so an expired
        session is never revived, even while DynamoDB has not deleted it yet. ``ttl`` counts
        from now (it may shorten the session).

        Absolute lifetime: the TTL is never set past the session's not-after time (recorded
        by :meth:`create`); a heartbeat asking for more gets exactly the not-after time (a
        second conditional UpdateItem when the first finds the cap), and from the not-after
        time on the session is gone. An item written before the not-after attribute existed
        gets one at its first heartbeat (now plus the maximum session lifetime).

        Args:
            ttl: new lifetime from now; default the store's ``default_ttl`` (1 hour).
            expires_at: absolute new expiry instead (aware ``datetime`` or epoch seconds).

        Returns:
            The updated :class:`Session`.

        Raises:
            SessionGoneError: the session is missing, not live, or past its not-after time;
                the item is unchanged.
            ValueError: a bad id, partition or TTL.
        """
        key = self._key(session_id, partition)
        now = self._now()
        not_after = self._not_after_from(now)
        expiry = min(self._expiry(ttl, expires_at, now), not_after)
        update = "SET #t = :expiry, #na = if_not_exists(#na, :na)"
        names: dict[str, str] = {}
        values: dict[str, Any] = {":expiry": {"N": str(expiry)}, ":na": {"N": str(not_after)}}
        if self._config.sweep_shard_attribute:
            # Sessions created before the sweeper was turned on join its index here.
            update += ", #shard = :shard"
            names["#shard"] = self._config.sweep_shard_attribute
            values[":shard"] = {"S": self._sweep_shard(key)}
        new, old = self._try_update(
            key, now, update, names, values, "(attribute_not_exists(#na) OR #na >= :expiry)"
        )
        if new is None and old is not None and self._live(old, now):
            cap = _number_value(old.get(self._config.not_after_attribute))
            if cap is not None and cap < expiry:  # ask again for exactly the not-after time
                capped = {**values, ":expiry": {"N": _number(cap)}, ":cap": {"N": _number(cap)}}
                new, old = self._try_update(key, now, update, names, capped, "#na = :cap")
        if new is None:
            raise SessionGoneError(
                f"{_describe(session_id, partition)} is missing, expired or past its absolute "
                "lifetime; nothing was written",
                session_id=session_id,
                partition=partition,
            )
        return self._to_session(new)

    #: Alias of :meth:`touch`.
    heartbeat = touch

    def attach_connection(
        self,
        session_id: str,
        connection_id: str,
        *,
        partition: str | None = None,
        close_previous: bool = True,
    ) -> Session:
        """Record a WebSocket connection on a live session; by default close its earlier ones.

        A session outlives its connections (API Gateway closes a WebSocket connection after
        2 hours, or 10 minutes idle: API Gateway Developer Guide, "Amazon API Gateway quotas
        for configuring and running a WebSocket API"), so it records every connection attached
        to it. One conditional UpdateItem sets ``connectionId`` to the new id and ``ADD``s it
        to the ``connectionIds`` String Set; ``ADD`` is atomic, so concurrent reconnects lose
        no id (DynamoDB Developer Guide, "Update expressions").

        With ``close_previous`` (the default) every connection the item held before this write
        (the set, and ``connectionId`` of items written before the set existed) is closed with
        ``DeleteConnection`` (``GoneException``: already closed, done) and then removed from
        the set. Of concurrent reconnects each closes every connection written before it, so
        only the last one stays open. A connection that could not be closed (e.g.
        ``ForbiddenException``, throttling) is logged and stays recorded: the cleanup closes
        it when the session ends.

        Args:
            connection_id: the new connection id (``requestContext.connectionId``).
            close_previous: close the earlier connections (default); ``False`` keeps them open
                and recorded.

        Returns:
            The session after the write; ``connection_ids`` holds no connection closed here.

        Raises:
            SessionGoneError: the session is missing or not live; the item is unchanged.
            ValueError: a bad id, partition or connection id, or ``close_previous`` without
                a WebSocket endpoint (``SESSION_EXPIRY_WEBSOCKET_ENDPOINT``) or
                ``connections_client``; nothing was written.
        """
        key = self._key(session_id, partition)
        _require_text(connection_id, "connection id")
        connections = self._connections_client() if close_previous else None
        c = self._config
        update = "SET #conn = :conn ADD #conns :conns"
        names = {"#conn": c.connection_id_attribute, "#conns": c.connection_ids_attribute}
        values = {":conn": {"S": connection_id}, ":conns": {"SS": [connection_id]}}
        now = self._now()
        if connections is None:
            return self._update_live(session_id, partition, key, now, update, names, values)
        old, _ = self._try_update(key, now, update, names, values, return_values="ALL_OLD")
        if old is None:
            raise SessionGoneError(
                f"{_describe(session_id, partition)} is missing or expired; nothing was written",
                session_id=session_id,
                partition=partition,
            )
        earlier = self._to_session(old).connection_ids - {connection_id}
        closed = _close_connections(connections, earlier, _describe(session_id, partition))
        after = dict(old)
        after[c.connection_id_attribute] = {"S": connection_id}
        after[c.connection_ids_attribute] = {"SS": sorted(earlier - closed | {connection_id})}
        if closed:
            after = self._forget_connections(key, closed) or after
        return self._to_session(after)

    def attach_grant(
        self,
        session_id: str,
        *,
        grant_id: str,
        grant_token: str,
        partition: str | None = None,
    ) -> Session:
        """Store a KMS grant id and token on a live session, for the cleanup to retire.

        The grant must name the cleanup role as its retiring principal (KMS Developer
        Guide, "Retiring and revoking grants"); :meth:`create_grant` does this for you.
        A session carries at most one grant: attaching a different grant id to a session
        that already has one is refused, since the replaced grant would never be retired.
        Re-attaching the same grant id is allowed (idempotent retries).

        Raises:
            SessionGoneError: the session is missing or not live; the item is unchanged.
            SessionConflictError: the session already carries a different grant id.
            ValueError: a bad id, partition, grant id or token.
        """
        key = self._key(session_id, partition)
        _require_text(grant_id, "grant id")
        _require_text(grant_token, "grant token")
        return self._update_live(
            session_id,
            partition,
            key,
            self._now(),
            "SET #gid = :gid, #gtok = :gtok",
            {"#gid": self._config.grant_id_attribute, "#gtok": self._config.grant_token_attribute},
            {":gid": {"S": grant_id}, ":gtok": {"S": grant_token}},
            extra_condition="(attribute_not_exists(#gid) OR #gid = :gid)",
        )

    def create_grant(
        self,
        session_id: str,
        *,
        grantee_principal: str,
        operations: Sequence[str],
        partition: str | None = None,
        constraints: Mapping[str, Any] | None = None,
        bind_to_session: bool = True,
    ) -> Session:
        """Create the session's KMS grant and store its id and token on the session.

        Calls KMS ``CreateGrant`` on the configured key (``SESSION_EXPIRY_GRANT_KEY_ARN``)
        with ``RetiringPrincipal`` set to the configured retiring principal
        (``SESSION_EXPIRY_RETIRING_PRINCIPAL``, the construct's cleanup role), because only
        a principal the grant names can retire it (KMS Developer Guide, "Grants in AWS KMS"
        and "Retiring and revoking grants").

        Binding: with ``bind_to_session`` (the default) the grant carries the grant constraint
        ``EncryptionContextSubset`` = :attr:`Session.encryption_context` (the session id, and
        the partition on a table with a sort key), so its cryptographic operations work only
        on requests that carry this session's encryption context: the grantee can decrypt
        data encrypted for this session and no other (KMS Developer Guide, "Using grant
        constraints"; DescribeKey and RetireGrant are not constrained). Encrypt the
        session's data with that context. ``bind_to_session=False`` creates an unbound grant
        (the grantee can use the key for any data while the grant lives); only then may
        ``constraints`` hold more than an ``EncryptionContextSubset`` to add to the binding.

        Name: ``grant_names.grant_name(key, incarnation)``, so a grant that is never stored can
        be traced to its session by a sweep of the key's grants, and so the cleanup can prove a
        grant an old image names is this session's before it retires it. A session whose name
        would be longer than 256 characters (a session id beyond about 147 characters without a
        sort key), or an item without a scratch prefix, gets no grant: ``ValueError``.

        Any failure after ``CreateGrant`` (the session ended or expired meanwhile, a throttled
        or failed UpdateItem, access denied) retires the new grant at once by its grant token
        and re-raises; if the retire fails too, it is logged with the grant id and name.

        Args:
            grantee_principal: ARN of the principal that receives the permissions.
            operations: KMS grant operations, e.g. ``["Decrypt", "GenerateDataKey"]``.
            constraints: extra ``Constraints`` for ``CreateGrant``; default none.
            bind_to_session: bind the grant to this session's encryption context; default on.

        Returns:
            The updated :class:`Session` (with ``grant_id`` and ``grant_token``).

        Raises:
            ValueError: no grant key or retiring principal configured, an empty grantee or
                operations list, ``constraints`` that contradict the binding, a binding
                value longer than 384 characters, or a key and incarnation no grant ``Name`` can
                hold (see Name above); the message names the setting or value.
            SessionGoneError: the session is missing or not live.
            SessionConflictError: the session already carries a grant.
        """
        c = self._config
        self._check_grant_settings(grantee_principal, operations)
        key = self._key(session_id, partition)
        grant_constraints = _grant_constraints(
            session_id, partition, constraints, bind=bind_to_session
        )
        current = self.get(session_id, partition=partition, consistent=True)
        if current is None:
            raise SessionGoneError(
                f"{_describe(session_id, partition)} is missing or expired; no grant created",
                session_id=session_id,
                partition=partition,
            )
        if current.grant_id:
            raise SessionConflictError(
                f"{_describe(session_id, partition)} already carries grant "
                f"{current.grant_id!r}; a session holds one grant",
                session_id=session_id,
                partition=partition,
            )
        incarnation = (current.scratch_prefix or "").rstrip("/").rsplit("/", 1)[-1]
        request: dict[str, Any] = {
            "KeyId": c.grant_key_arn,
            "GranteePrincipal": grantee_principal,
            "RetiringPrincipal": c.retiring_principal,
            "Operations": builtins.list(operations),
        }
        name = grant_name({attr: value["S"] for attr, value in key.items()}, incarnation)
        if name is None:
            raise ValueError(
                f"{_describe(session_id, partition)}: its key and incarnation "
                f"({incarnation!r}) do not fit a grant Name (at most 256 characters; about 147 "
                "characters of session id without a sort key), and the cleanup retires only a "
                "grant whose Name names its session; use a shorter session id"
            )
        request["Name"] = name
        if grant_constraints:
            request["Constraints"] = grant_constraints
        kms = self._kms_client()
        grant = kms.create_grant(**request)
        try:
            return self.attach_grant(
                session_id,
                grant_id=grant["GrantId"],
                grant_token=grant["GrantToken"],
                partition=partition,
            )
        except Exception:
            self._retire_unstored_grant(kms, grant, name, _describe(session_id, partition))
            raise

    def _check_grant_settings(self, grantee_principal: object, operations: object) -> None:
        c = self._config
        if not c.retiring_principal:
            raise ValueError(
                f"retiring principal {c.retiring_principal!r}: create_grant needs the cleanup "
                f"role ARN (${ENV_RETIRING_PRINCIPAL} or RuntimeConfig.retiring_principal); "
                "without it the cleanup can never retire the grant"
            )
        if not c.grant_key_arn:
            raise ValueError(
                f"grant key {c.grant_key_arn!r}: create_grant needs the KMS key ARN "
                f"(${ENV_GRANT_KEY_ARN} or RuntimeConfig.grant_key_arn)"
            )
        _require_text(grantee_principal, "grantee principal")
        if (
            isinstance(operations, str)
            or not isinstance(operations, Sequence)
            or not operations
            or not all(isinstance(op, str) and op for op in operations)
        ):
            raise ValueError(
                f"operations {operations!r}: expected a non-empty list of KMS grant operations, "
                "e.g. ['Decrypt']"
            )

    def _retire_unstored_grant(
        self, kms: Any, grant: Mapping[str, Any], name: str | None, session: str
    ) -> None:
        """Retire a grant that no session item points to; log it when even that fails."""
        try:
            kms.retire_grant(GrantToken=grant["GrantToken"])
        except (ClientError, BotoCoreError):
            _LOG.error(
                "grant %s (name %r) on %s for %s was not stored and could not be retired; "
                "retire or revoke it (its name identifies the session)",
                grant["GrantId"],
                name,
                self._config.grant_key_arn,
                session,
                exc_info=True,
            )

    def end(self, session_id: str, *, partition: str | None = None) -> bool:
        """End a session: an unconditional DeleteItem.

        The REMOVE record on the table's stream (no ``userIdentity``: an explicit delete)
        carries the old image, from which the cleanup function closes the connection,
        retires the grant and deletes the scratch prefix. Ending an expired session that
        DynamoDB has not deleted yet is allowed and starts that cleanup sooner.

        Returns:
            ``True`` if an item (live or expired) was deleted, ``False`` if none existed.

        Raises:
            ValueError: a bad id or partition.
        """
        key = self._key(session_id, partition)
        resp = self._ddb.delete_item(TableName=self.table_name, Key=key, ReturnValues="ALL_OLD")
        return bool(resp.get("Attributes"))

    # ------------------------------------------------------------------ internals ---------

    # --- Amazon Bedrock AgentCore sessions (issue 10) -------------------------------------
    def attach_agent_session(
        self,
        session_id: str,
        *,
        runtime_session_id: str | None = None,
        code_interpreter_session_id: str | None = None,
        browser_session_id: str | None = None,
        partition: str | None = None,
    ) -> Session:
        """Record the AgentCore sessions a live session uses, for the cleanup to stop.

        The cleanup calls ``StopRuntimeSession``, ``StopCodeInterpreterSession`` and
        ``StopBrowserSession`` for the ids the removed item holds (with the construct's
        AgentCore props set). Only the ids given are written; an id given again replaces the
        earlier one, which the cleanup will then no longer stop (stop it yourself, or let its
        idle timeout end it).

        Args:
            runtime_session_id: AgentCore Runtime session id (``runtimeSessionId``, 33-256
                characters), stored in ``agentRuntimeSessionId``.
            code_interpreter_session_id: code interpreter session id (1-40 letters and digits),
                stored in ``codeInterpreterSessionId``.
            browser_session_id: browser session id (1-40 letters and digits), stored in
                ``browserSessionId``.

        Raises:
            SessionGoneError: the session is missing or not live; the item is unchanged.
            ValueError: no id given, or an id the AgentCore API would refuse (named).
        """
        key = self._key(session_id, partition)
        values = self._agent_session_values(
            runtime_session_id, code_interpreter_session_id, browser_session_id
        )
        if not values:
            raise ValueError(
                "attach_agent_session: expected at least one of runtime_session_id, "
                "code_interpreter_session_id, browser_session_id"
            )
        names = {f"#agent{i}": name for i, name in enumerate(values)}
        update = "SET " + ", ".join(f"{n} = :{n[1:]}" for n in names)
        placeholders = {f":{n[1:]}": values[attr] for n, attr in names.items()}
        return self._update_live(
            session_id, partition, key, self._now(), update, names, placeholders
        )

    def _agent_session_values(
        self,
        runtime_session_id: str | None,
        code_interpreter_session_id: str | None,
        browser_session_id: str | None,
    ) -> dict[str, dict[str, str]]:
        c = self._config
        checks = (
            (
                c.agent_runtime_session_attribute,
                runtime_session_id,
                "runtime session id",
                is_runtime_session_id,
                "33-256 characters",
            ),
            (
                c.code_interpreter_session_attribute,
                code_interpreter_session_id,
                "code interpreter session id",
                is_tool_session_id,
                "1-40 letters and digits",
            ),
            (
                c.browser_session_attribute,
                browser_session_id,
                "browser session id",
                is_tool_session_id,
                "1-40 letters and digits",
            ),
        )
        values: dict[str, dict[str, str]] = {}
        for attribute, value, what, valid, expected in checks:
            if value is None:
                continue
            if not valid(value):
                raise ValueError(f"{what} {value!r}: expected {expected} (the AgentCore API's)")
            values[attribute] = {"S": value}
        return values

    def _sweep_shard(self, key: Mapping[str, Mapping[str, str]]) -> str:
        # The expiry sweeper's sparse index (see .sweeper): same key, same shard, every write.
        return shard_of([value["S"] for value in key.values()], self._config.sweep_shards)

    def _kms_client(self) -> Any:
        if self._kms is None:
            import boto3

            self._kms = boto3.client("kms")
        return self._kms

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

    def _names(self) -> dict[str, str]:
        c = self._config
        return {"#pk": c.partition_key, "#t": c.ttl_attribute, "#na": c.not_after_attribute}

    def _not_after_from(self, now: Decimal) -> int:
        """Epoch seconds of the absolute end of a session created (or first capped) now: rounded
        down, so a session never lives longer than the maximum lifetime."""
        return math.floor(now + self._max_lifetime)

    def _time_values(self, now: Decimal) -> dict[str, dict[str, str]]:
        return {
            ":now": {"N": _number(now)},
            ":horizon": {"N": _number(horizon_seconds(now, self._max_ttl))},
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
        not_after = _number_value(raw)
        return not_after is not None and not_after > now

    @property
    def _tenant_is_partition(self) -> bool:
        """The tenant attribute is the partition key of a table with a sort key."""
        c = self._config
        return c.sort_key is not None and c.tenant_attribute == c.partition_key

    def _tenant_from_partition(self, tenant_id: str | None, partition: str | None) -> str | None:
        if tenant_id is not None and tenant_id != partition:
            raise ValueError(
                f"tenant id {tenant_id!r}: the tenant attribute {self._config.tenant_attribute!r} "
                f"is the partition key, so the tenant is the partition {partition!r}; pass no "
                "tenant_id or the same value"
            )
        return partition

    def _partition_value(self, partition: object) -> str:
        if not isinstance(partition, str) or not partition:
            raise ValueError(
                f"partition {partition!r}: the table has sort key {self._config.sort_key!r}; "
                "expected a non-empty partition key value (e.g. a user or tenant id)"
            )
        if len(partition.encode("utf-8")) > _MAX_PARTITION_BYTES:
            raise ValueError(
                f"partition {partition[:40]!r}...: longer than {_MAX_PARTITION_BYTES} bytes"
            )
        return partition

    def _key(self, session_id: object, partition: object) -> dict[str, dict[str, str]]:
        if not isinstance(session_id, str):
            raise ValueError(f"session id {session_id!r}: expected a string")
        validate_segment(session_id, "session id")
        c = self._config
        if c.sort_key:
            return {
                c.partition_key: {"S": self._partition_value(partition)},
                c.sort_key: {"S": session_id},
            }
        if partition is not None:
            raise ValueError(
                f"partition {partition!r}: the table has no sort key, the session id is the "
                "partition key value; expected partition=None"
            )
        return {c.partition_key: {"S": session_id}}

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
        new, old = self._try_update(key, now, update, names, values, extra_condition)
        if new is not None:
            return self._to_session(new)
        current = self._to_session(old) if old is not None and self._live(old, now) else None
        if current is not None and current.grant_id and extra_condition is not None:
            raise SessionConflictError(
                f"{_describe(session_id, partition)} already carries grant "
                f"{current.grant_id!r}; a session holds one grant",
                session_id=session_id,
                partition=partition,
            )
        raise SessionGoneError(
            f"{_describe(session_id, partition)} is missing or expired; nothing was written",
            session_id=session_id,
            partition=partition,
        )

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
        condition = _LIVE if extra_condition is None else f"{_LIVE} AND {extra_condition}"
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
            if not _is_condition_failure(err):
                raise
            old = err.response.get("Item")
            return None, dict(old) if old is not None else None
        return dict(resp.get("Attributes") or {}), None

    def _forget_connections(
        self, key: Mapping[str, Any], closed: set[str]
    ) -> dict[str, Any] | None:
        """Remove closed connection ids from the set; the item after it, ``None`` if gone."""
        try:
            resp = self._ddb.update_item(
                TableName=self.table_name,
                Key=key,
                UpdateExpression="DELETE #conns :closed",
                # Never create an item: a session that ended meanwhile stays ended.
                ConditionExpression="attribute_exists(#pk)",
                ExpressionAttributeNames={
                    "#pk": self._config.partition_key,
                    "#conns": self._config.connection_ids_attribute,
                },
                ExpressionAttributeValues={":closed": {"SS": sorted(closed)}},
                ReturnValues="ALL_NEW",
            )
        except ClientError as err:
            if not _is_condition_failure(err):
                raise
            return None
        return dict(resp.get("Attributes") or {}) or None

    def _connections_client(self) -> Any:
        if self._connections is None:
            endpoint = self._config.websocket_endpoint
            if not endpoint:
                raise ValueError(
                    f"WebSocket endpoint {endpoint!r}: attach_connection closes the session's "
                    f"earlier connections and needs ${ENV_WEBSOCKET_ENDPOINT} "
                    "(RuntimeConfig.websocket_endpoint) or connections_client=; pass "
                    "close_previous=False to keep them open"
                )
            import boto3

            self._connections = boto3.client("apigatewaymanagementapi", endpoint_url=endpoint)
        return self._connections

    def _to_session(self, item: Mapping[str, Any]) -> Session:
        c = self._config

        def text(name: str) -> str | None:
            value = item.get(name)
            if isinstance(value, Mapping) and isinstance(value.get("S"), str):
                return str(value["S"])
            return None

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
            connection_ids=frozenset(
                {cid for cid in (text(c.connection_id_attribute),) if cid is not None}
                | _string_set(item.get(c.connection_ids_attribute))
            ),
            not_after=_whole_seconds(item.get(c.not_after_attribute)),
            agent_runtime_session_id=text(c.agent_runtime_session_attribute),
            code_interpreter_session_id=text(c.code_interpreter_session_attribute),
            browser_session_id=text(c.browser_session_attribute),
            attributes={
                name: _DESERIALIZER.deserialize(value)
                for name, value in item.items()
                if name not in self._reserved
            },
        )


def _number(value: Decimal) -> str:
    return format(value, "f")


def _number_value(value: object) -> Decimal | None:
    """A DynamoDB Number attribute (``{"N": ...}``) as ``Decimal``; ``None`` for anything else."""
    if not isinstance(value, Mapping) or not isinstance(value.get("N"), str):
        return None
    try:
        number = Decimal(value["N"])
    except ArithmeticError:
        return None
    return number if number.is_finite() else None


def _whole_seconds(value: object) -> int | None:
    number = _number_value(value)
    if number is None:
        return None
    try:
        return math.floor(number)
    except (ArithmeticError, OverflowError):
        return None


def _string_set(value: object) -> frozenset[str]:
    """A String Set attribute (``{"SS": [...]}``) as a frozenset; empty for anything else."""
    if isinstance(value, Mapping) and isinstance(value.get("SS"), list):
        return frozenset(v for v in value["SS"] if isinstance(v, str))
    return frozenset()


def _close_connections(client: Any, connection_ids: frozenset[str], session: str) -> set[str]:
    """``DeleteConnection`` each id; the ids now closed (``GoneException`` counts as closed)."""
    closed: set[str] = set()
    for connection_id in sorted(connection_ids):
        try:
            client.delete_connection(ConnectionId=connection_id)
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") != _GONE:
                _LOG.warning(
                    "could not close connection %s of %s; it stays recorded for the cleanup",
                    connection_id,
                    session,
                    exc_info=True,
                )
                continue
        except BotoCoreError:
            _LOG.warning(
                "could not close connection %s of %s; it stays recorded for the cleanup",
                connection_id,
                session,
                exc_info=True,
            )
            continue
        closed.add(connection_id)
    return closed


def _grant_constraints(
    session_id: str,
    partition: str | None,
    constraints: Mapping[str, Any] | None,
    *,
    bind: bool,
) -> dict[str, Any] | None:
    """The ``Constraints`` of a session's grant (see ``SessionStore.create_grant``)."""
    if not bind:
        return dict(constraints) if constraints else None
    context = {ENCRYPTION_CONTEXT_SESSION_ID: session_id}
    if partition is not None:
        context[ENCRYPTION_CONTEXT_PARTITION] = partition
    for name, value in context.items():
        if len(value) > _MAX_CONTEXT_VALUE:
            raise ValueError(
                f"{name} {value[:40]!r}...: longer than {_MAX_CONTEXT_VALUE} characters, the "
                "limit of a grant constraint's values; pass bind_to_session=False"
            )
    extra = dict(constraints or {})
    subset = extra.pop("EncryptionContextSubset", None) or {}
    if extra or not isinstance(subset, Mapping):
        raise ValueError(
            f"constraints {constraints!r}: a grant bound to its session takes only an added "
            "EncryptionContextSubset; pass bind_to_session=False for other constraints"
        )
    # Keys of a grant constraint are not case sensitive (KMS API Reference, GrantConstraints).
    ours = {name.lower(): name for name in context}
    for name, value in subset.items():
        mine = ours.get(str(name).lower())
        if mine is not None and (name != mine or value != context[mine]):
            raise ValueError(
                f"constraints {constraints!r}: {name!r} contradicts the session binding "
                f"{mine!r}={context[mine]!r}"
            )
    return {"EncryptionContextSubset": {**subset, **context}}


def _require_text(value: object, what: str) -> str:
    if (
        not isinstance(value, str)
        or not value
        or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value)
    ):
        raise ValueError(
            f"{what} {value!r}: expected a non-empty string without control characters"
        )
    return value


def _is_condition_failure(err: ClientError) -> bool:
    return bool(err.response.get("Error", {}).get("Code") == _CONDITION_FAILED)
