"""Ids of custom steps' own resource kinds (``CustomCleanupStep(resource_attribute=...)``).

A custom cleanup step that declares a resource kind acts only on ids recorded with an
ownership record of kind ``custom:<step name>``, exactly like a connection or an AgentCore
session (``session_expiry_runtime.steps.custom``): `CustomResourcesPart.attach_resource`
records one on a live session — the id added to the step's String Set attribute and claimed for
the session's incarnation (through the claim registrar when one is configured) — so a writer
that names another session's resource in its own item gets it refused by the cleanup.
"""

from __future__ import annotations

from typing import Any

from ..ownership import CUSTOM_KIND_PREFIX, custom_kind, custom_kinds_of
from .core import Recording, StoreCore
from .errors import gone
from .keys import Key, require_text
from .session import Session


class CustomResourcesPart(StoreCore):
    """``attach_resource`` (module docstring)."""

    def attach_resource(
        self, session_id: str, kind: str, resource_id: str, *, partition: str | None = None
    ) -> Session:
        """Record ``resource_id`` of the custom step ``kind``'s own resource kind on the live
        session, with its ownership record: the cleanup's step then acts on it when the
        session ends, and on nothing another session recorded.

        Args:
            session_id: the session.
            kind: the custom step's name (``CustomCleanupStep(name=...)``), or
                ``"custom:<name>"``.
            resource_id: the resource's id (an ARN, a name: any non-empty string).
            partition: the partition key value, with a sort key.

        Returns:
            The session after the write (the ids are in ``attributes[<resource_attribute>]``).

        Raises:
            SessionGoneError: the session is missing or not live; nothing was written.
            ResourceOwnedError: another live session owns that id.
            ValueError: a kind no custom step declares (``SESSION_EXPIRY_CUSTOM_KINDS``, set by
                ``grant_session_access``), or an empty id.
        """
        full = kind if kind.startswith(CUSTOM_KIND_PREFIX) else custom_kind(kind)
        kinds = custom_kinds_of(self._config.custom_kinds)
        if full not in kinds:
            names = sorted(k.removeprefix(CUSTOM_KIND_PREFIX) for k in kinds)
            raise ValueError(
                f"resource kind {kind!r}: expected the name of a custom step with a "
                f"resource_attribute, one of {names} (SESSION_EXPIRY_CUSTOM_KINDS)"
            )
        require_text(resource_id, "resource id")
        key = self._key(session_id, partition)
        recording = self._recording(key, session_id, partition)
        item = self._claimed(
            recording.claims(full, [resource_id]),
            lambda: self._record_resource(
                key, session_id, partition, kinds[full], resource_id, recording
            ),
        )
        return self._to_session(item)

    def _record_resource(
        self,
        key: Key,
        session_id: str,
        partition: str | None,
        attribute: str,
        resource_id: str,
        recording: Recording,
    ) -> dict[str, Any]:
        written, _ = self._try_update(
            key,
            self._now(),
            "ADD #res :res",
            {**recording.names, "#res": attribute},
            {**recording.values, ":res": {"SS": [resource_id]}},
            recording.condition,
        )
        if written is None:
            raise gone(session_id, partition)
        return written
