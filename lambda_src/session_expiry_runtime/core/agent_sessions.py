"""AgentCore Memory sessions as a session records them: ``<actorId>/<sessionId>``.

Shared by the store (which refuses an id the cleanup could never send) and the memory step
(which treats such an id in an old image as an unusable attribute). The runtime, code
interpreter and browser session ids' rules are their kinds' declarations' (`kinds`, ``Ids``).
"""

from __future__ import annotations

import re

#: AgentCore Memory ``actorId`` (1-255 characters) and ``sessionId`` (1-100) patterns (Amazon
#: Bedrock AgentCore API Reference, ``CreateEvent``/``ListEvents``). A session id has no ``/``,
#: so ``<actorId>/<sessionId>`` splits at its last ``/`` without ambiguity.
MEMORY_ACTOR_ID = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9-_/]*(?::[a-zA-Z0-9-_/]+)*[a-zA-Z0-9-_/]*")
MEMORY_SESSION_ID = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9-_]*")
MEMORY_ACTOR_ID_LENGTH = (1, 255)
MEMORY_SESSION_ID_LENGTH = (1, 100)


def memory_session_ref(actor_id: object, session_id: object) -> str:
    """``<actorId>/<sessionId>``: how a session records an AgentCore Memory session (its String
    Set ``agentMemorySessions``) and how its ownership record names it (``agentMemory#...``).

    Raises:
        ValueError: an actor or session id the AgentCore Memory API would refuse.
    """
    low, high = MEMORY_ACTOR_ID_LENGTH
    if not (
        isinstance(actor_id, str)
        and low <= len(actor_id) <= high
        and MEMORY_ACTOR_ID.fullmatch(actor_id)
    ):
        raise ValueError(
            f"memory actor id {actor_id!r}: expected 1-255 characters "
            "[a-zA-Z0-9][a-zA-Z0-9-_/]*(?::[a-zA-Z0-9-_/]+)*[a-zA-Z0-9-_/]* (AgentCore Memory's)"
        )
    low, high = MEMORY_SESSION_ID_LENGTH
    if not (
        isinstance(session_id, str)
        and low <= len(session_id) <= high
        and MEMORY_SESSION_ID.fullmatch(session_id)
    ):
        raise ValueError(
            f"memory session id {session_id!r}: expected 1-100 characters "
            "[a-zA-Z0-9][a-zA-Z0-9-_]* (AgentCore Memory's)"
        )
    return f"{actor_id}/{session_id}"


def parse_memory_session(value: object) -> tuple[str, str] | None:
    """``(actorId, sessionId)`` of a `memory_session_ref`, ``None`` if it is not one."""
    if not isinstance(value, str) or "/" not in value:
        return None
    actor_id, session_id = value.rsplit("/", 1)
    try:
        memory_session_ref(actor_id, session_id)
    except ValueError:
        return None
    return actor_id, session_id


def is_memory_session(value: object) -> bool:
    """``True`` for a usable ``<actorId>/<sessionId>``."""
    return parse_memory_session(value) is not None
