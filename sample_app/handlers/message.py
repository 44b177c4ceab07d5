"""``$default``: every message is a heartbeat that extends the session."""

from __future__ import annotations

from typing import Any

from session_expiry_runtime.store import SessionGoneError
from sessions import SESSION_TTL, connection_id, response, session_id_for, store


def handler(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    try:
        store().touch(session_id_for(connection_id(event)), ttl=SESSION_TTL)
    except SessionGoneError:
        # Expired: the cleanup function closes the connection once DynamoDB deletes the item.
        return response(410, "session expired")
    return response(200)
