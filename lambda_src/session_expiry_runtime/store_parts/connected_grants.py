"""Grants that live only while a client is connected: detach_connection, and the grant retired
with a session's last connection and created again on resume.

A KMS grant never expires (KMS Developer Guide, "Grants in AWS KMS"): kept for a resumable
session, a decrypt grant stays usable for the session's whole lifetime with no client connected.
With [`ConnectedGrant`][session_expiry_runtime.store.ConnectedGrant] on the store:

* [`SessionStore.detach_connection`][session_expiry_runtime.store.SessionStore.detach_connection]
  (``$disconnect``) forgets the connection, and
  when it was the session's last one retires the session's grant;
* [`SessionStore.attach_connection`][session_expiry_runtime.store.SessionStore.attach_connection]
  (a resume) creates a new grant bound to the same
  session when it has none;
* [`SessionStore.touch`][session_expiry_runtime.store.SessionStore.touch] (a heartbeat) of a
  session with no connection retires its
  grant: ``$disconnect`` is best effort (API Gateway Developer Guide, "Working with routes for
  WebSocket APIs": the ``$disconnect`` route is executed after the connection is closed, on a
  best-effort basis), so a heartbeat never keeps a grant alive on its own.

Retiring is ownership-checked as the cleanup does it (``docs/ownership.md``): the grant's
ownership record is marked ``releasing`` only if it names this incarnation, the item forgets the
grant (a conditional UpdateItem that also requires the session to have no connection, so a
resume that raced the detach keeps its grant), then ``RetireGrant`` by key and grant id, then the
record is released. The caller is not the grant's retiring principal (the cleanup role is):
it retires as an IAM principal of the account that owns the key, given ``kms:RetireGrant`` on
the key in an IAM policy (AWS KMS Developer Guide, "Retiring and revoking grants": "The AWS
account that owns the KMS key can delegate the kms:RetireGrant permission to IAM principal in
the account"). A grant that cannot be retired is put back on its session for the cleanup.

Cost: one ``CreateGrant`` per resume and one ``RetireGrant`` per last disconnect, each against
its own KMS request quota per account and Region (AWS KMS Developer Guide, "Request quotas",
rows "CreateGrant request rate" and "RetireGrant request rate": by default 50 requests per
second each, adjustable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..core.ownership import KIND_CONNECTION, KIND_GRANT
from .connections import ConnectionsPart
from .core import Recording
from .errors import LOGGER, SessionConflictError, describe, is_condition_failure
from .grants import GrantsPart
from .keys import Key, require_text
from .lifetime import LifetimePart
from .session import Session

#: An already retired grant answers ``NotFoundException`` (KMS API Reference, "RetireGrant").
_NOT_FOUND = "NotFoundException"
#: Attempts of a detach whose item changed between its read and its write.
_DETACH_ATTEMPTS = 3


@dataclass(frozen=True)
class ConnectedGrant:
    """The store option that keeps a session's KMS grant only while a client is connected.

    Args:
        grantee_principal: ARN of the principal a resume's new grant is for (as
            ``create_grant``'s ``grantee_principal``).
        operations: the KMS grant operations of that grant, e.g. ``("Decrypt", "Encrypt")``.

    Raises:
        ValueError: an empty grantee, or operations that are not a non-empty list of names.
    """

    grantee_principal: str
    operations: Sequence[str]

    def __post_init__(self) -> None:
        require_text(self.grantee_principal, "grantee principal")
        ops = self.operations
        if isinstance(ops, str) or not ops or not all(isinstance(o, str) and o for o in ops):
            raise ValueError(
                f"operations {ops!r}: expected a non-empty list of KMS grant operations, "
                "e.g. ['Decrypt']"
            )
        object.__setattr__(self, "operations", tuple(ops))


class ConnectedGrantsPart(LifetimePart, ConnectionsPart, GrantsPart):
    """detach_connection, and the grant kept only while connected (see
    [`SessionStore`][session_expiry_runtime.store.SessionStore])."""

    def detach_connection(
        self, session_id: str, connection_id: str, *, partition: str | None = None
    ) -> Session | None:
        """Forget a connection the client closed (``$disconnect``); with
        [`ConnectedGrant`][session_expiry_runtime.store.ConnectedGrant]
        retire the session's grant when it was the last connection.

        The id leaves the ``connectionIds`` String Set (and ``connectionId`` when it is that
        id) in one conditional UpdateItem on the live incarnation; its ownership record is then
        released (marked ``releasing`` and ``released`` only if it names this incarnation).
        Nothing is closed: the client already went. Detaching an id the session does not hold
        changes nothing.

        Returns:
            The session after the write (without the grant if it was retired), or ``None``
            when the session is missing or not live (a disconnect after its end: nothing to do).

        Raises:
            ValueError: a bad id, partition or connection id.
        """
        key = self._key(session_id, partition)
        require_text(connection_id, "connection id")
        for _ in range(_DETACH_ATTEMPTS):
            current = self._get_live(key, consistent=True)
            if current is None:
                return None
            recording = self._recording_of(key, current)
            if connection_id not in current.connection_ids:
                return self._unless_connected(key, current, recording)
            after = self._forget_connection(key, current, connection_id, recording)
            if after is not None:
                _, marked = self._may_act_on(recording, KIND_CONNECTION, [connection_id])
                self._settle(marked, [connection_id])  # closed by the client: released
                return self._unless_connected(key, self._to_session(after), recording)
        LOGGER.warning(
            "could not detach connection %s of %s: the item kept changing; it stays recorded "
            "for the cleanup",
            connection_id,
            describe(session_id, partition),
        )
        return self._get_live(key, consistent=True)

    def attach_connection(
        self,
        session_id: str,
        connection_id: str,
        *,
        partition: str | None = None,
        close_previous: bool = True,
    ) -> Session:
        """Record a WebSocket connection on a live session; by default close its earlier ones.

        One conditional UpdateItem adds the id to the ``connectionIds`` String Set and sets
        ``connectionId``; with ownership records the id is claimed for the live incarnation
        first; with ``close_previous`` every earlier connection this incarnation holds is
        closed (``DeleteConnection``) and removed from the set (`ConnectionsPart.attach_connection`
        in ``store_parts/connections.py`` says how and why). With
        [`ConnectedGrant`][session_expiry_runtime.store.ConnectedGrant] a session
        without a grant (its last connection was detached) gets a new one, bound to the same
        session (``create_grant``), so a resume restores the client's key access.

        Args:
            connection_id: the new connection id (``requestContext.connectionId``).
            close_previous: close the earlier connections (default); ``False`` keeps them open
                and recorded.

        Returns:
            The session after the write; ``connection_ids`` holds no connection closed here.

        Raises:
            SessionGoneError: the session is missing or not live; the item is unchanged.
            ResourceOwnedError: another session owns ``connection_id``; nothing was written.
            ValueError: a bad id, partition or connection id, or ``close_previous`` without
                a WebSocket endpoint or ``connections_client``; nothing was written. With
                `ConnectedGrant`, also what ``create_grant`` raises.
        """
        session = super().attach_connection(
            session_id, connection_id, partition=partition, close_previous=close_previous
        )
        option = self._connected_grant
        if option is None or session.grant_id:
            return session
        try:
            return self.create_grant(
                session_id,
                partition=partition,
                grantee_principal=option.grantee_principal,
                operations=option.operations,
            )
        except SessionConflictError:  # a concurrent resume created it: keep that one
            return self._get_live(self._key(session_id, partition), consistent=True) or session

    def touch(
        self,
        session_id: str,
        *,
        ttl: timedelta | None = None,
        expires_at: datetime | int | None = None,
        partition: str | None = None,
    ) -> Session:
        """As `LifetimePart.touch`; with
        [`ConnectedGrant`][session_expiry_runtime.store.ConnectedGrant] the grant of a session
        that has no connection is retired (a heartbeat never keeps a grant alive on its own)."""
        session = super().touch(session_id, ttl=ttl, expires_at=expires_at, partition=partition)
        if self._connected_grant is None or not session.grant_id or session.connection_ids:
            return session
        key = self._key(session_id, partition)
        return self._unless_connected(key, session, self._recording_of(key, session))

    # --- the grant ------------------------------------------------------------------------
    def _unless_connected(self, key: Key, session: Session, recording: Recording) -> Session:
        """``session`` after retiring its grant when the option is on and it has no connection."""
        if self._connected_grant is None or not session.grant_id or session.connection_ids:
            return session
        grant_id = session.grant_id
        mine, marked = self._may_act_on(recording, KIND_GRANT, [grant_id])
        if grant_id not in mine:
            LOGGER.warning(
                "grant %s of %s is not proven this session's own (no ownership record names "
                "this incarnation); it stays for the cleanup's rules",
                grant_id,
                describe(session.session_id, session.partition),
            )
            return session
        after = self._forget_grant(key, grant_id, recording)
        if after is None:  # a resume attached a connection meanwhile: it keeps the grant
            self._settle(marked, [])
            return self._get_live(key, consistent=True) or session
        if not self._retire(grant_id, session):
            after = self._put_grant_back(key, session) or after
            self._settle(marked, [])
            return self._to_session(after)
        self._settle(marked, [grant_id])
        return self._to_session(after)

    def _forget_connection(
        self, key: Key, current: Session, connection_id: str, recording: Recording
    ) -> dict[str, Any] | None:
        """The UpdateItem removing ``connection_id``; the item after it, ``None`` when the item
        changed since ``current`` was read (its latest connection id, or its incarnation)."""
        c = self._config
        names = {"#conns": c.connection_ids_attribute, "#conn": c.connection_id_attribute}
        values: dict[str, Any] = {":c": {"SS": [connection_id]}}
        if current.connection_id == connection_id:
            update, condition = "REMOVE #conn DELETE #conns :c", "#conn = :latest"
            values[":latest"] = {"S": connection_id}
        elif current.connection_id is None:
            update, condition = "DELETE #conns :c", "attribute_not_exists(#conn)"
        else:
            update, condition = "DELETE #conns :c", "#conn = :latest"
            values[":latest"] = {"S": current.connection_id}
        new, _ = self._try_update(
            key,
            self._now(),
            update,
            {**names, **recording.names},
            {**values, **recording.values},
            recording.and_condition(condition),
        )
        return new

    def _forget_grant(self, key: Key, grant_id: str, recording: Recording) -> dict[str, Any] | None:
        """Remove the grant from the live item while it has no connection; the item after it,
        ``None`` when refused."""
        c = self._config
        new, _ = self._try_update(
            key,
            self._now(),
            "REMOVE #gid, #gtok",
            {
                "#gid": c.grant_id_attribute,
                "#gtok": c.grant_token_attribute,
                "#conn": c.connection_id_attribute,
                "#conns": c.connection_ids_attribute,
                **recording.names,
            },
            {":gid": {"S": grant_id}, **recording.values},
            recording.and_condition(
                "#gid = :gid AND attribute_not_exists(#conn) AND attribute_not_exists(#conns)"
            ),
        )
        return new

    def _retire(self, grant_id: str, session: Session) -> bool:
        """``RetireGrant`` by key and grant id; ``True`` when retired (or already retired)."""
        try:
            self._kms_client().retire_grant(KeyId=self._config.grant_key_arn, GrantId=grant_id)
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == _NOT_FOUND:
                return True
            return _not_retired(grant_id, session)
        except BotoCoreError:
            return _not_retired(grant_id, session)
        return True

    def _put_grant_back(self, key: Key, session: Session) -> dict[str, Any] | None:
        """Record a grant that could not be retired on its session again, for the cleanup."""
        c = self._config
        try:
            resp = self._ddb.update_item(
                TableName=self.table_name,
                Key=key,
                UpdateExpression="SET #gid = :gid, #gtok = :gtok",
                ConditionExpression="attribute_exists(#pk) AND attribute_not_exists(#gid)",
                ExpressionAttributeNames={
                    "#pk": c.partition_key,
                    "#gid": c.grant_id_attribute,
                    "#gtok": c.grant_token_attribute,
                },
                ExpressionAttributeValues={
                    ":gid": {"S": session.grant_id or ""},
                    ":gtok": {"S": session.grant_token or ""},
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as err:
            if not is_condition_failure(err):
                raise
            LOGGER.error(
                "grant %s of %s was neither retired nor put back (the session ended or holds "
                "another grant); retire it (its name identifies the session)",
                session.grant_id,
                describe(session.session_id, session.partition),
            )
            return None
        return dict(resp.get("Attributes") or {}) or None


def _not_retired(grant_id: str, session: Session) -> bool:
    LOGGER.warning(
        "could not retire grant %s of %s; it is put back on the session for the cleanup",
        grant_id,
        describe(session.session_id, session.partition),
        exc_info=True,
    )
    return False
