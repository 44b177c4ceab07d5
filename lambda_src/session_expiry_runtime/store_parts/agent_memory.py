"""The Amazon Bedrock AgentCore Memory sessions a session writes to: attach_memory_session.

AgentCore Memory keeps a session's short-term events until they expire (the memory's
``eventExpiryDuration``, up to 365 days) or are deleted (``DeleteEvent``), whatever became of
the agent's runtime session. The cleanup deletes them when the session ends
(`steps.agent_memory`) — only for memory sessions recorded here, and only while their
ownership record names the removed incarnation.
"""

from __future__ import annotations

from typing import Any

from ..core.agent_sessions import memory_session_ref
from ..core.ownership import KIND_AGENT_MEMORY
from .core import Recording, StoreCore
from .errors import gone
from .keys import Key
from .session import Session


class AgentMemoryPart(StoreCore):
    """attach_memory_session (see [`SessionStore`][session_expiry_runtime.store.SessionStore])."""

    def attach_memory_session(
        self,
        session_id: str,
        *,
        actor_id: str,
        memory_session_id: str,
        partition: str | None = None,
    ) -> Session:
        """Record an AgentCore Memory session (``actorId`` + ``sessionId`` of its events) on a
        live session, so the cleanup deletes its events when the session ends.

        One conditional UpdateItem ``ADD``s ``<actorId>/<sessionId>`` to the String Set
        ``agentMemorySessions`` (``SESSION_EXPIRY_AGENT_MEMORY_SESSIONS_ATTRIBUTE``). With
        ownership records (``SESSION_EXPIRY_OWNERSHIP_TABLE_NAME``) the memory session is first
        claimed for this incarnation (``agentMemory#<actorId>/<sessionId>``), as
        [`attach_connection`][session_expiry_runtime.store.SessionStore.attach_connection] claims a
        connection: a memory session another live session
        owns raises [`ResourceOwnedError`][session_expiry_runtime.store.ResourceOwnedError] and
        nothing is written. Recording it again is
        harmless (same claim, set unchanged). The memory session id is the application's
        choice (often the AgentCore runtime session id): any id the Memory API accepts.

        Args:
            actor_id: the events' ``actorId`` (1-255 characters, AgentCore Memory's pattern).
            memory_session_id: the events' ``sessionId`` (1-100 letters, digits, ``-``, ``_``).

        Returns:
            The session after the write (the set is in ``attributes["agentMemorySessions"]``).

        Raises:
            SessionGoneError: the session is missing or not live; nothing was written.
            ResourceOwnedError: another live session owns that memory session.
            ValueError: an actor or session id the Memory API would refuse (named).
        """
        key = self._key(session_id, partition)
        ref = memory_session_ref(actor_id, memory_session_id)
        recording = self._recording(key, session_id, partition)
        item = self._claimed(
            recording.claims(KIND_AGENT_MEMORY, [ref]),
            lambda: self._record_memory_session(key, session_id, partition, ref, recording),
        )
        return self._to_session(item)

    def _record_memory_session(
        self, key: Key, session_id: str, partition: str | None, ref: str, recording: Recording
    ) -> dict[str, Any]:
        written, _ = self._try_update(
            key,
            self._now(),
            "ADD #mem :mem",
            {**recording.names, "#mem": self._config.agent_memory_sessions_attribute},
            {**recording.values, ":mem": {"SS": [ref]}},
            recording.condition,
        )
        if written is None:
            raise gone(session_id, partition)
        return written
