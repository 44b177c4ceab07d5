"""The errors :class:`~session_expiry_runtime.store.SessionStore` raises."""

from __future__ import annotations


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
