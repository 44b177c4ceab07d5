"""The errors [`SessionStore`][session_expiry_runtime.store.SessionStore] raises (and the DynamoDB
error
it reads most: a failed condition)."""

from __future__ import annotations

import logging

from botocore.exceptions import ClientError

#: Every part of the store logs under this one name (it was the single module's name).
LOGGER = logging.getLogger("session_expiry_runtime.store")

CONDITION_FAILED = "ConditionalCheckFailedException"


def is_condition_failure(err: ClientError) -> bool:
    """The error is DynamoDB's ``ConditionalCheckFailedException``."""
    return bool(err.response.get("Error", {}).get("Code") == CONDITION_FAILED)


class SessionError(Exception):
    """Base class of the session errors; ``session_id`` and ``partition`` name the session."""

    def __init__(self, message: str, *, session_id: str, partition: str | None = None) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.partition = partition


class SessionConflictError(SessionError):
    """A live session with this id already exists (``create``), or it already carries a
    different KMS grant (``attach_grant``/``create_grant``)."""


class SessionGoneError(SessionError):
    """The session does not exist or has expired (its TTL is at or before now, missing,
    not a Number, or implausible); nothing was written."""


def describe(session_id: str, partition: str | None) -> str:
    """``session 's-1'`` or ``session 's-1' in partition 'u-1'``, for error messages."""
    return f"session {session_id!r}" + (f" in partition {partition!r}" if partition else "")


def gone(session_id: str, partition: str | None, what: str = "") -> SessionGoneError:
    """The error for a write refused because the session is missing or not live."""
    return SessionGoneError(
        f"{describe(session_id, partition)} is missing or expired; {what or 'nothing was written'}",
        session_id=session_id,
        partition=partition,
    )


def one_grant(session_id: str, partition: str | None, grant_id: str) -> SessionConflictError:
    """The error for a second grant on a session (a session holds one)."""
    return SessionConflictError(
        f"{describe(session_id, partition)} already carries grant {grant_id!r}; "
        "a session holds one grant",
        session_id=session_id,
        partition=partition,
    )


class ResourceOwnedError(SessionConflictError):
    """A connection, AgentCore session or KMS grant id that another session owns (its ownership
    record names another key, or another incarnation of this key that is still being released);
    nothing was written.

    Attributes:
        kind: the resource kind (``ownership.KINDS``: ``connection``, ``agentRuntime``,
            ``codeInterpreter``, ``browser``, ``grant``).
        resource_id: the id refused.
        owner_key: the owning session's key (attribute name to String value), or ``None`` when
            the ownership record does not name one readably.
        owner_incarnation: the owning session incarnation, or ``None``.
        releasing: the owner ended and its cleanup is releasing the id: retry in a few seconds.
    """

    def __init__(
        self,
        message: str,
        *,
        session_id: str,
        partition: str | None,
        kind: str,
        resource_id: str,
        owner_key: dict[str, str] | None,
        owner_incarnation: str | None,
        releasing: bool,
    ) -> None:
        super().__init__(message, session_id=session_id, partition=partition)
        self.kind = kind
        self.resource_id = resource_id
        self.owner_key = owner_key
        self.owner_incarnation = owner_incarnation
        self.releasing = releasing
