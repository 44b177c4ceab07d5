"""What [`SessionStore`][session_expiry_runtime.store.SessionStore] returns: a live
[`Session`][session_expiry_runtime.store.Session]."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

#: The clock type: a callable returning the current time as an **aware** ``datetime``.
Clock = Callable[[], datetime]

#: Encryption context keys a session's grant is bound to (``create_grant``).
ENCRYPTION_CONTEXT_SESSION_ID = "sessionId"
ENCRYPTION_CONTEXT_PARTITION = "sessionPartition"


def utc_now() -> datetime:
    """The default clock."""
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class Session:
    """A live session as read or written by
    [`SessionStore`][session_expiry_runtime.store.SessionStore].

    Attributes:
        session_id: the session id (partition key value, or sort key value with a sort key).
        partition: the partition key value when the table has a sort key, else ``None``.
        expires_at: the TTL attribute, epoch **seconds** (``int``).
        scratch_prefix: this incarnation's S3 scratch prefix (ends in ``/``), or ``None`` on
            an item not written by
            [`SessionStore.create`][session_expiry_runtime.store.SessionStore.create].
        connection_id: the latest API Gateway WebSocket connection id attached, or ``None``.
        grant_id: KMS grant id, or ``None``.
        grant_token: KMS grant token, or ``None`` (left out of ``repr``).
        tenant_id: tenant id, or ``None``.
        attributes: the other (application) attributes, deserialized by boto3's
            ``TypeDeserializer`` (numbers as ``Decimal``).
        connection_ids: every connection id recorded on the session and not yet closed by
            [`SessionStore.attach_connection`][session_expiry_runtime.store.SessionStore.attach_connection]
            (the String Set plus ``connection_id``:
            items written before the set hold only the latter); the cleanup closes them all.
        not_after: the session's absolute end, epoch **seconds**, or ``None`` on an item
            written before the absolute lifetime existed (its first ``touch`` sets one).
        agent_runtime_session_id, code_interpreter_session_id, browser_session_id: the
            latest Amazon Bedrock AgentCore session of each kind attached, or ``None``.
        owner_region: on a global table, the Region whose replica the session was created in
            (the only Region that cleans it up, see ``session_expiry_runtime.core.regions``);
            ``None`` on a one-Region table.
        incarnation: this incarnation of the session (32 hex characters, also the last segment
            of its scratch prefix; its ownership records name it), or ``None`` on an item
            written before ownership records existed (a *legacy* item).
        claim_token: the secret the claim registrar asks of every request for this
            incarnation (32 hex characters, written by `create`; not shown by ``repr``), or
            ``None`` on an item written before it existed. Keep it to the session's own code.
        agent_runtime_session_ids, code_interpreter_session_ids, browser_session_ids: every
            AgentCore session of each kind recorded and not stopped by
            [`SessionStore.attach_agent_session`][session_expiry_runtime.store.SessionStore.attach_agent_session]
            (the String Set plus the single
            attribute: items written before the sets hold only the latter); the cleanup stops
            them all.
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
    incarnation: str | None = None
    claim_token: str | None = field(default=None, repr=False)
    agent_runtime_session_ids: frozenset[str] = frozenset()
    code_interpreter_session_ids: frozenset[str] = frozenset()
    browser_session_ids: frozenset[str] = frozenset()
    owner_region: str | None = None

    @property
    def expires_at_datetime(self) -> datetime:
        """``expires_at`` as an aware UTC ``datetime``."""
        return datetime.fromtimestamp(self.expires_at, tz=timezone.utc)

    @property
    def encryption_context(self) -> dict[str, str]:
        """The KMS encryption context a grant bound to this session requires.

        ``{"sessionId": <session id>}``, plus ``"sessionPartition"`` on a table with a sort key.
        Encrypt the session's data with it (``Encrypt``/``GenerateDataKey``
        ``EncryptionContext=``): a grant made by
        [`SessionStore.create_grant`][session_expiry_runtime.store.SessionStore.create_grant] with
        ``bind_to_session`` (the default) allows its operations only on requests that carry
        these pairs (KMS Developer Guide, "Using grant constraints").
        """
        context = {ENCRYPTION_CONTEXT_SESSION_ID: self.session_id}
        if self.partition is not None:
            context[ENCRYPTION_CONTEXT_PARTITION] = self.partition
        return context
