"""``$disconnect``: detach the connection from its session and forget it; the session stays
resumable until it expires.

API Gateway closes connections on its own (2 hours, 10 minutes idle) and ``attach_connection``
closes a resumed session's earlier ones, so a disconnect does not end the session: the client
resumes it with its token, or it expires (heartbeats stop) and the cleanup releases it. When the
connection was the session's last one, ``detach_connection`` retires the session's KMS grant
(ownership-checked): no decrypt grant outlives the client's connection; a resume creates a new
one. ``$disconnect`` is best effort (API Gateway Developer Guide, "Working with routes for
WebSocket APIs"): a grant a missed disconnect left behind stays until the session ends and the
cleanup retires it.
"""

from __future__ import annotations

from typing import Any

from sessions import connection_id, forget_connection, response, session_of, store


def handler(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    connection = connection_id(event)
    session_id = session_of(connection)
    if session_id is not None:
        store().detach_connection(session_id, connection)
    forget_connection(connection)
    return response(200)
