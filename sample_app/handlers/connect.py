"""``$connect``: create the session and its KMS grant."""

from __future__ import annotations

import os
from typing import Any

from session_expiry_runtime.store import SessionConflictError
from sessions import SESSION_TTL, connection_id, response, session_id_for, store

#: What the session's grant allows its grantee to do with the session key.
GRANT_OPERATIONS = ["Decrypt", "GenerateDataKey"]


def handler(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    cid = connection_id(event)
    session_id = session_id_for(cid)
    try:
        store().create(session_id, ttl=SESSION_TTL, connection_id=cid)
    except SessionConflictError:
        return response(409, "session exists")
    store().create_grant(
        session_id,
        grantee_principal=os.environ["SESSION_GRANTEE_ROLE_ARN"],
        operations=GRANT_OPERATIONS,
    )
    return response(200)
