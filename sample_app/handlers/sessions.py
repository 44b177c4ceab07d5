"""What the three WebSocket route handlers share: the stores, the caller and the session token.

A session outlives its connections (API Gateway closes a WebSocket connection after 2 hours, or
10 minutes idle), so a client resumes it by connecting with ``?session=<token>``; the token is
the session id, which ``$default`` returns to the client. A resume is bound to the caller: the
session records the IAM principal that created it (``owner``), and a token presented by anyone
else is refused. The connections table maps each connection to its session for ``$default``
and ``$disconnect``.

A session's KMS grant lives only while a client is connected (``SessionStore``'s
``connected_grant``, in the handlers that attach and detach connections: those given
``SESSION_GRANTEE_ROLE_ARN``): ``$disconnect`` of its last connection retires it, a resume
creates a new one bound to the same session. A resumable session with no client connected
therefore holds no decrypt grant.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from typing import Any

import boto3
from session_expiry_runtime.store import ConnectedGrant, SessionStore

#: Lifetime of a session, renewed by every message (heartbeat).
SESSION_TTL = timedelta(seconds=int(os.environ.get("SESSION_TTL_SECONDS", "3600")))
#: Application attribute holding the IAM principal (user ARN) that created the session.
OWNER_ATTRIBUTE = "owner"
#: What the session's grant allows its grantee (the message handler) to do with the session key.
GRANT_OPERATIONS = ["Decrypt", "Encrypt"]
#: The grantee of session grants (the message handler's role); set on $connect and $disconnect.
GRANTEE_VARIABLE = "SESSION_GRANTEE_ROLE_ARN"
#: Table mapping a connection id to its session id (``connectionId`` -> ``sessionId``).
CONNECTIONS_TABLE_VARIABLE = "SAMPLE_CONNECTIONS_TABLE"

_store: SessionStore | None = None
_clients: dict[str, Any] = {}


def store() -> SessionStore:
    """The session store, built from the environment ``grant_session_access`` set; with the
    grantee's variable set, grants are kept only while a client is connected."""
    global _store
    if _store is None:
        grantee = os.environ.get(GRANTEE_VARIABLE)
        option = ConnectedGrant(grantee, GRANT_OPERATIONS) if grantee else None
        _store = SessionStore.from_env(connected_grant=option)
    return _store


def client(service: str) -> Any:
    """One boto3 client per service and process."""
    if service not in _clients:
        _clients[service] = boto3.client(service)
    return _clients[service]


def new_session_id() -> str:
    """A fresh session id: 128 random bits, a valid scratch prefix segment."""
    return "ws-" + secrets.token_hex(16)


def connection_id(event: dict[str, Any]) -> str:
    """The connection id of an API Gateway WebSocket event."""
    return str(event["requestContext"]["connectionId"])


def caller(event: dict[str, Any]) -> str | None:
    """The IAM principal that signed ``$connect`` (IAM authorization), or ``None``."""
    identity = event.get("requestContext", {}).get("identity") or {}
    arn = identity.get("userArn")
    return arn if isinstance(arn, str) and arn else None


def session_token(event: dict[str, Any]) -> str | None:
    """The ``session`` query string parameter of ``$connect``, or ``None``."""
    token = (event.get("queryStringParameters") or {}).get("session")
    return token if isinstance(token, str) and token else None


def remember_connection(connection: str, session_id: str, until: int) -> None:
    """Map ``connection`` to ``session_id`` until the session's absolute end (epoch seconds)."""
    client("dynamodb").put_item(
        TableName=os.environ[CONNECTIONS_TABLE_VARIABLE],
        Item={
            "connectionId": {"S": connection},
            "sessionId": {"S": session_id},
            "expiresAt": {"N": str(until)},
        },
    )


def session_of(connection: str) -> str | None:
    """The session id ``connection`` was attached to, or ``None``."""
    item = (
        client("dynamodb")
        .get_item(
            TableName=os.environ[CONNECTIONS_TABLE_VARIABLE],
            Key={"connectionId": {"S": connection}},
            ConsistentRead=True,
        )
        .get("Item")
    )
    return str(item["sessionId"]["S"]) if item else None


def forget_connection(connection: str) -> None:
    client("dynamodb").delete_item(
        TableName=os.environ[CONNECTIONS_TABLE_VARIABLE],
        Key={"connectionId": {"S": connection}},
    )


def response(status: int, body: str = "") -> dict[str, Any]:
    """An API Gateway route response."""
    return {"statusCode": status, "body": body}
