"""A session's WebSocket connections: attach_connection, and closing the earlier ones.

A session outlives its connections (API Gateway closes a WebSocket connection after 2 hours, or
10 minutes idle: API Gateway Developer Guide, "Amazon API Gateway quotas for configuring and
running a WebSocket API"), so it records every connection attached to it in a String Set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..core.config import ENV_WEBSOCKET_ENDPOINT
from ..core.ownership import KIND_CONNECTION
from .core import Recording, StoreCore
from .errors import LOGGER, describe, gone, is_condition_failure
from .keys import Key, require_text
from .session import Session

#: ``GoneException`` (HTTP 410): the connection is already closed (API Gateway Management API).
_GONE = "GoneException"


class ConnectionsPart(StoreCore):
    """attach_connection (see [`SessionStore`][session_expiry_runtime.store.SessionStore])."""

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

        Ownership records (``SESSION_EXPIRY_OWNERSHIP_TABLE_NAME``): a consistent GetItem reads
        the live incarnation, the id is claimed for it (`claims`), then the UpdateItem
        also requires the item to still be that incarnation; if it is refused, the claim is
        undone. The update's condition proves the claimant was the key's live incarnation when
        the id was recorded, and the claim existed from before: the cleanup's invariant holds
        without a transaction (which could not return the item as it was before the write).

        With ``close_previous`` (the default) every connection the item held before this write
        (the set, and ``connectionId`` of items written before the set existed) is closed with
        ``DeleteConnection`` (``GoneException``: already closed, done) and then removed from
        the set. Of concurrent reconnects each closes every connection written before it, so
        only the last one stays open. A connection that could not be closed (e.g.
        ``ForbiddenException``, throttling) is logged and stays recorded: the cleanup closes
        it when the session ends. With ownership records only connections whose claim this
        incarnation holds are closed (then released); on a legacy item none.

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
                a WebSocket endpoint (``SESSION_EXPIRY_WEBSOCKET_ENDPOINT``) or
                ``connections_client``; nothing was written.
        """
        key = self._key(session_id, partition)
        require_text(connection_id, "connection id")
        connections = self._connections_client() if close_previous else None
        recording = self._recording(key, session_id, partition)
        item = self._claimed(
            recording.claims(KIND_CONNECTION, [connection_id]),
            lambda: self._record_connection(
                key, session_id, partition, connection_id, recording, connections is not None
            ),
        )
        if connections is None:
            return self._to_session(item)
        c = self._config
        earlier = self._to_session(item).connection_ids - {connection_id}
        mine, marked = self._may_act_on(recording, KIND_CONNECTION, earlier)
        closed = _close_connections(connections, mine, describe(session_id, partition))
        after = dict(item)
        after[c.connection_id_attribute] = {"S": connection_id}
        after[c.connection_ids_attribute] = {"SS": sorted(earlier - closed | {connection_id})}
        if closed:  # forgotten before released: the item never names an id it gave up
            after = self._forget_connections(key, closed) or after
        self._settle(marked, closed)
        return self._to_session(after)

    def _record_connection(
        self,
        key: Key,
        session_id: str,
        partition: str | None,
        connection_id: str,
        recording: Recording,
        before: bool,
    ) -> dict[str, Any]:
        """The conditional UpdateItem; the item before it (``before``) or after it.

        Raises:
            SessionGoneError: the session (this incarnation) is missing or not live.
        """
        c = self._config
        written, _ = self._try_update(
            key,
            self._now(),
            "SET #conn = :conn ADD #conns :conns",
            {
                "#conn": c.connection_id_attribute,
                "#conns": c.connection_ids_attribute,
                **recording.names,
            },
            {":conn": {"S": connection_id}, ":conns": {"SS": [connection_id]}, **recording.values},
            recording.condition,
            return_values="ALL_OLD" if before else "ALL_NEW",
        )
        if written is None:
            raise gone(session_id, partition)
        return written

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
            if not is_condition_failure(err):
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


def _close_connections(client: Any, connection_ids: frozenset[str], session: str) -> set[str]:
    """``DeleteConnection`` each id; the ids now closed (``GoneException`` counts as closed)."""
    closed: set[str] = set()
    for connection_id in sorted(connection_ids):
        try:
            client.delete_connection(ConnectionId=connection_id)
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") != _GONE:
                _cannot_close(connection_id, session)
                continue
        except BotoCoreError:
            _cannot_close(connection_id, session)
            continue
        closed.add(connection_id)
    return closed


def _cannot_close(connection_id: str, session: str) -> None:
    LOGGER.warning(
        "could not close connection %s of %s; it stays recorded for the cleanup",
        connection_id,
        session,
        exc_info=True,
    )
