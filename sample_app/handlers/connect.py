"""``$connect``: resume the caller's live session with ``?session=<token>``, else create one.

Resume: the session must be live and created by the same IAM principal; the new connection is
attached and the session's earlier connections are closed (``attach_connection``), and a session
whose grant was retired with its last connection gets a new one, bound to it. A token of
another principal's session is refused with 403 and the session is left untouched; an expired
or unknown one with 410. Create: a new session owned by the caller, and its KMS grant for the
message handler, bound to the session's encryption context. A connection id another live
session owns (``ResourceOwnedError``: API Gateway never reuses one, so only a replayed or forged
event) is refused with 409 and nothing is written.
"""

from __future__ import annotations

import json
import os
from typing import Any

from session_expiry_runtime.store import ResourceOwnedError, SessionGoneError
from sessions import (
    GRANT_OPERATIONS,
    GRANTEE_VARIABLE,
    OWNER_ATTRIBUTE,
    SESSION_TTL,
    caller,
    connection_id,
    new_session_id,
    remember_connection,
    response,
    session_token,
    store,
)


def handler(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    principal = caller(event)
    if principal is None:
        return response(403, "no caller identity")
    token = session_token(event)
    if token is None:
        return _create(connection_id(event), principal)
    return _resume(connection_id(event), principal, token)


def _create(connection: str, principal: str) -> dict[str, Any]:
    session_id = new_session_id()
    try:
        session = store().create(
            session_id,
            ttl=SESSION_TTL,
            connection_id=connection,
            attributes={OWNER_ATTRIBUTE: principal},
        )
    except ResourceOwnedError:
        return response(409, "connection belongs to another session")
    store().create_grant(
        session_id,
        grantee_principal=os.environ[GRANTEE_VARIABLE],
        operations=GRANT_OPERATIONS,
    )
    remember_connection(connection, session_id, session.not_after or session.expires_at)
    return response(200, json.dumps({"sessionId": session_id}))


def _resume(connection: str, principal: str, token: str) -> dict[str, Any]:
    try:
        session = store().get(token, consistent=True)
    except ValueError:
        return response(400, "malformed session token")
    if session is None:
        return response(410, "session expired")
    if session.attributes.get(OWNER_ATTRIBUTE) != principal:
        # A token alone never takes over another caller's session.
        return response(403, "not your session")
    try:
        session = store().attach_connection(token, connection)  # closes the earlier ones
    except ResourceOwnedError:
        return response(409, "connection belongs to another session")
    except SessionGoneError:
        return response(410, "session expired")
    remember_connection(connection, token, session.not_after or session.expires_at)
    return response(200, json.dumps({"sessionId": token}))
