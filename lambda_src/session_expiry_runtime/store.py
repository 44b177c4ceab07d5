"""Application-facing session store: create, read, heartbeat and end sessions that fail closed.

DynamoDB deletes expired items lazily, typically within a few days, and until then they are
still returned by GetItem/Query and can still be updated (Amazon DynamoDB Developer Guide,
"Working with time to live (TTL)"). Every call here therefore enforces expiry itself:
reads return live sessions only, and every write that needs a live session carries a
condition expression that requires it (Developer Guide, "Condition expressions"), so an
expired session is never revived by a heartbeat. The liveness rules are in `ttl`.

Usage (the construct's ``grant_session_access`` sets the environment read by ``from_env``)::

    from datetime import timedelta
    from session_expiry_runtime.store import SessionStore, SessionGoneError

    store = SessionStore.from_env()
    s = store.create("s-1", ttl=timedelta(hours=1), connection_id=event_connection_id)
    store.touch("s-1", ttl=timedelta(minutes=30))     # SessionGoneError once expired
    store.attach_connection("s-1", new_connection_id) # a reconnect: closes the earlier ones
    store.detach_connection("s-1", new_connection_id) # $disconnect: forgets it
    store.end("s-1")                                  # cleanup runs from the stream

A session has an absolute lifetime (``max_session_lifetime_seconds``, default 8 hours):
``create`` records its not-after time, no heartbeat sets the TTL past it, and from then on it
is gone whatever its TTL says. It records every WebSocket connection and AgentCore session
attached to it (String Sets), and its KMS grant is bound to its encryption context
([`Session.encryption_context`][session_expiry_runtime.store.Session.encryption_context]).

Ownership records (``SESSION_EXPIRY_OWNERSHIP_TABLE_NAME``, set by the construct when it has a
connection, AgentCore or grant target): every connection id, AgentCore session id and grant id
is claimed for the session incarnation that records it, before or atomically with the write
that records it, and an id another live session owns is refused with
[`ResourceOwnedError`][session_expiry_runtime.store.ResourceOwnedError] (`store_parts.claims`). The
cleanup acts only on ids whose
record names the removed item's key and incarnation (`ownership`).

Every attribute name goes through ``ExpressionAttributeNames``, so a TTL attribute named
``ttl`` (a DynamoDB reserved word) works. Errors other than the ones documented per method
(throttling, access denied, a missing table) propagate as ``botocore`` ``ClientError``.

One class, its concerns in their own modules (`store_parts`): keys and layout, lifetime
(create/get/list/touch/end), connections, agent sessions, AgentCore Memory sessions, grants,
grants kept only while connected, ownership records (claims).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .core.config import RuntimeConfig
from .store_parts.agent_memory import AgentMemoryPart
from .store_parts.agent_sessions import AgentSessionsPart
from .store_parts.connected_grants import ConnectedGrant, ConnectedGrantsPart
from .store_parts.connections import ConnectionsPart
from .store_parts.custom_resources import CustomResourcesPart
from .store_parts.errors import (
    ResourceOwnedError,
    SessionConflictError,
    SessionError,
    SessionGoneError,
)
from .store_parts.grants import GrantsPart
from .store_parts.lifetime import LifetimePart
from .store_parts.session import (
    ENCRYPTION_CONTEXT_PARTITION,
    ENCRYPTION_CONTEXT_SESSION_ID,
    Clock,
    Session,
)

__all__ = [
    "ENCRYPTION_CONTEXT_PARTITION",
    "ENCRYPTION_CONTEXT_SESSION_ID",
    "Clock",
    "ConnectedGrant",
    "ResourceOwnedError",
    "Session",
    "SessionConflictError",
    "SessionError",
    "SessionGoneError",
    "SessionStore",
]


class SessionStore(
    ConnectedGrantsPart,
    LifetimePart,
    ConnectionsPart,
    AgentSessionsPart,
    AgentMemoryPart,
    CustomResourcesPart,
    GrantsPart,
):
    """Sessions in one DynamoDB table, bound to the key schema and attribute names the
    construct configured.

    Key schema: without a sort key the session id is the partition key value; with a sort
    key (``config.sort_key``), ``partition`` is the partition key value (a user or tenant,
    say) and the session id is the sort key value, and
    [`list`][session_expiry_runtime.store.SessionStore.list] returns a partition's
    sessions. Key values are stored as Strings.

    Args:
        table_name: the table; default ``config.table_name``.
        dynamodb_client: a boto3 DynamoDB client; default ``boto3.client("dynamodb")``.
        kms_client: a boto3 KMS client for
            [`create_grant`][session_expiry_runtime.store.SessionStore.create_grant]; default
            created on first use.
        connections_client: a boto3 ``apigatewaymanagementapi`` client with which
            [`attach_connection`][session_expiry_runtime.store.SessionStore.attach_connection]
            closes earlier connections; default created on first
            use for ``config.websocket_endpoint``.
        agentcore_client: a boto3 ``bedrock-agentcore`` client with which
            [`attach_agent_session`][session_expiry_runtime.store.SessionStore.attach_agent_session]
            stops replaced AgentCore sessions; default created
            on first use.
        clock: returns the current time as an **aware** ``datetime``; default
            ``datetime.now(timezone.utc)``. Every call reads it once.
        config: key names, attribute names, scratch root, grant key, retiring principal,
            WebSocket endpoint and ``max_session_lifetime_seconds`` (a session's absolute
            lifetime from its creation, default 8 hours); default ``RuntimeConfig()`` (the
            construct's defaults).
        max_ttl: the longest lifetime accepted on writes and the read-side plausibility
            horizon (plus a five-minute clock-skew allowance); default
            `MAX_SESSION_TTL` (365 days).
        default_ttl: lifetime used when a call gives neither ``ttl`` nor ``expires_at``;
            default `DEFAULT_SESSION_TTL` (1 hour).
        sleep: waits the given seconds before asking again for an id whose previous owner's
            cleanup is releasing it (a few times, about 3 seconds in all); default
            ``time.sleep``.
        connected_grant: a [`ConnectedGrant`][session_expiry_runtime.store.ConnectedGrant] (grantee
            principal and operations) keeps
            a session's KMS grant only while a client is connected: retired when
            [`detach_connection`][session_expiry_runtime.store.SessionStore.detach_connection]
            detaches its last connection (or a heartbeat finds it has
            none), created again, bound to the same session, by
            [`attach_connection`][session_expiry_runtime.store.SessionStore.attach_connection] on a
            resume (`store_parts.connected_grants`); default off: the grant lives until
            the session ends and the cleanup retires it.
        claim_registrar: how ownership records are written: a callable that sends one request
            to the claim registrar and returns its answer (``session_expiry_runtime.registrar``;
            a test passes ``Registrar(...).handle``), or ``None`` to write them directly with
            ``dynamodb_client`` (tests, and the registrar itself). Default: the function
            ``config.claim_registrar_function`` names (``SESSION_EXPIRY_CLAIM_REGISTRAR_FUNCTION``,
            which ``grant_session_access`` sets), invoked synchronously with a Lambda client
            made here (or ``lambda_client``); direct writes when it is unset. With the
            registrar the application's role needs no action on the ownership table
            (``docs/ownership.md``).
        lambda_client: a boto3 Lambda client with which the store invokes the claim registrar;
            default created on first need (the environment's credentials, Region and endpoint).

    Raises:
        ValueError: no table name, a bad scratch root, two roles sharing one attribute
            name, a bad ``max_ttl``/``default_ttl``, a maximum session lifetime that is
            not whole seconds from 1 to ``max_ttl``, or ``connected_grant`` without a grant
            key and retiring principal configured.
    """

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
        `sweeper`) (see `config`), ``..._WEBSOCKET_ENDPOINT`` and
        ``..._MAX_SESSION_LIFETIME_SECONDS``, ``..._OWNERSHIP_TABLE_NAME`` (ownership records)
        and the AgentCore targets (``..._AGENT_RUNTIME_ARN``, ``..._AGENT_RUNTIME_QUALIFIER``,
        ``..._CODE_INTERPRETER_ID``, ``..._BROWSER_ID``). ``kwargs`` go to the constructor
        (``dynamodb_client``, ``kms_client``, ``connections_client``, ``agentcore_client``,
        ``lambda_client``, ``clock``, ``max_ttl``, ``default_ttl``, ``sleep``,
        ``connected_grant``, ``claim_registrar``).

        Raises:
            ValueError: the table name variable is unset, or see the constructor.
        """
        return cls(config=RuntimeConfig.from_env(env), **kwargs)

    #: Alias of [`touch`][session_expiry_runtime.store.SessionStore.touch].
    heartbeat = ConnectedGrantsPart.touch
