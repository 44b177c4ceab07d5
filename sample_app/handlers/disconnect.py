"""``$disconnect``: end the session; the cleanup function releases what it held."""

from __future__ import annotations

from typing import Any

from sessions import connection_id, response, session_id_for, store


def handler(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    store().end(session_id_for(connection_id(event)))
    return response(200)
