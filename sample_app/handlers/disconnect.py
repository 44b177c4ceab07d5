"""``$disconnect``: forget the connection; its session stays resumable until it expires.

API Gateway closes connections on its own (2 hours, 10 minutes idle) and ``attach_connection``
closes a resumed session's earlier ones, so a disconnect does not end the session: the client
resumes it with its token, or it expires (heartbeats stop) and the cleanup releases it.
"""

from __future__ import annotations

from typing import Any

from sessions import connection_id, forget_connection, response


def handler(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    forget_connection(connection_id(event))
    return response(200)
