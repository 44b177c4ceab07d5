"""The Amazon Bedrock AgentCore Memory sessions a session writes to: attach_memory_session.

AgentCore Memory keeps a session's short-term events until they expire (the memory's
``eventExpiryDuration``, up to 365 days) or are deleted (``DeleteEvent``), whatever became of
the agent's runtime session. The cleanup deletes them when the session ends
(`steps.agent_memory`) — only for memory sessions recorded here, and only while their
ownership record names the removed incarnation.
"""

from __future__ import annotations

from ..core.agent_sessions import memory_session_ref
from ..core.kind_settings import settings_of
from ..core.kinds import declared_kind
from ..core.ownership import KIND_AGENT_MEMORY
from .custom_resources import CustomResourcesPart
from .session import Session


class AgentMemoryPart(CustomResourcesPart):
    """attach_memory_session (see [`SessionStore`][session_expiry_runtime.store.SessionStore]):
    the declared kind ``agentMemory`` (`session_expiry_runtime.core.kinds`), recorded like every
    declared kind (`CustomResourcesPart`) under the id ``<actorId>/<sessionId>``."""

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
        ref = memory_session_ref(actor_id, memory_session_id)
        declared = declared_kind(KIND_AGENT_MEMORY)
        assert declared is not None  # declared in core/kinds.py
        return self._attach(settings_of(declared, self._config), session_id, ref, partition)
