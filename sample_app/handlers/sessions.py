"""What the three WebSocket route handlers share: the store and the session id rule."""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta
from typing import Any

from session_expiry_runtime.store import SessionStore

#: Lifetime of a session, renewed by every message (heartbeat).
SESSION_TTL = timedelta(seconds=int(os.environ.get("SESSION_TTL_SECONDS", "3600")))

_store: SessionStore | None = None


def store() -> SessionStore:
    """The session store, built from the environment ``grant_session_access`` set."""
    global _store
    if _store is None:
        _store = SessionStore.from_env()
    return _store


def session_id_for(connection_id: str) -> str:
    """Session id of a WebSocket connection.

    Connection ids are base64 text and may hold ``/``, which a session id (a scratch prefix
    segment) may not; a digest keeps the id stable across the three routes.
    """
    return "ws-" + hashlib.sha256(connection_id.encode("utf-8")).hexdigest()[:40]


def connection_id(event: dict[str, Any]) -> str:
    """The connection id of an API Gateway WebSocket event."""
    return str(event["requestContext"]["connectionId"])


def response(status: int, body: str = "") -> dict[str, Any]:
    """An API Gateway route response."""
    return {"statusCode": status, "body": body}
