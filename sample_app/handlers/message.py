"""``$default``: every message is a heartbeat of the connection's session.

The message is encrypted with the session key under the session's encryption context (which
the session's grant is bound to) and kept under the session's scratch prefix; the reply names
the session (the token a client resumes it with) and its new expiry. ``{"action": "end"}`` ends
the session (the cleanup releases what it held). 410 once the session expired.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

from session_expiry_runtime.store import SessionGoneError
from sessions import SESSION_TTL, client, connection_id, response, session_of, store


def handler(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    session_id = session_of(connection_id(event))
    if session_id is None:
        return response(410, "session expired")
    body = event.get("body") or ""
    if _is_end(body):
        store().end(session_id)
        return response(200, json.dumps({"sessionId": session_id, "ended": True}))
    try:
        session = store().touch(session_id, ttl=SESSION_TTL)
    except SessionGoneError:
        # Expired: the cleanup function closes the connection once the item is deleted.
        return response(410, "session expired")
    if body and session.scratch_prefix:
        ciphertext = client("kms").encrypt(
            KeyId=os.environ["SESSION_EXPIRY_GRANT_KEY_ARN"],
            Plaintext=body.encode("utf-8"),
            EncryptionContext=session.encryption_context,
        )["CiphertextBlob"]
        client("s3").put_object(
            Bucket=os.environ["SESSION_EXPIRY_SCRATCH_BUCKET"],
            Key=f"{session.scratch_prefix}messages/{uuid.uuid4().hex}.bin",
            Body=ciphertext,
        )
    return response(200, json.dumps({"sessionId": session_id, "expiresAt": session.expires_at}))


def _is_end(body: str) -> bool:
    try:
        return bool(json.loads(body).get("action") == "end")
    except (ValueError, AttributeError):
        return False
