"""Ids of declared resource kinds (`session_expiry_runtime.core.kinds`) and of custom steps' own
kinds (``CustomCleanupStep(resource_attribute=...)``): ``attach_resource``.

Every declared kind (an AgentCore payment session, a capacity-provider session, ...) is recorded
here, with its ownership record, from its declaration alone: the id checked against the kind's
id rule, ``ADD``ed to its String Set attribute, claimed as ``<kind>#<id>``. A custom cleanup
step that declares a resource kind acts only on ids recorded with an ownership record of kind
``custom:<step name>``, exactly like a connection or an AgentCore session
(``session_expiry_runtime.steps.custom``): `CustomResourcesPart.attach_resource` records one on
a live session — the id added to the step's String Set attribute and claimed for the session's
incarnation (through the claim registrar when one is configured) — so a writer that names
another session's resource in its own item gets it refused by the cleanup.
"""

from __future__ import annotations

from typing import Any

from ..core.kind_settings import KindSettings, recorded_kinds
from ..core.ownership import CUSTOM_KIND_PREFIX, custom_kind
from .core import Recording, StoreCore
from .errors import gone
from .keys import Key, require_text
from .session import Session


class CustomResourcesPart(StoreCore):
    """``attach_resource`` (module docstring)."""

    def attach_resource(
        self, session_id: str, kind: str, resource_id: str, *, partition: str | None = None
    ) -> Session:
        """Record ``resource_id`` of ``kind`` (a declared kind, or a custom step's own) on the
        live session, with its ownership record: the cleanup's step then releases it when the
        session ends, and nothing another session recorded.

        Args:
            session_id: the session.
            kind: a declared kind's name (``"paymentSession"``,
                `session_expiry_runtime.core.kinds`), a custom step's name
                (``CustomCleanupStep(name=...)``), or ``"custom:<name>"``.
            resource_id: the resource's id: one the kind's API accepts (a custom kind's: any
                non-empty string).
            partition: the partition key value, with a sort key.

        Returns:
            The session after the write (the ids are in ``attributes[<resource_attribute>]``).

        Raises:
            SessionGoneError: the session is missing or not live; nothing was written.
            ResourceOwnedError: another live session owns that id.
            ValueError: a kind neither declared nor of a custom step
                (``SESSION_EXPIRY_CUSTOM_KINDS``, set by ``grant_session_access``), a declared
                kind whose target is not configured, or an id the kind's API would refuse.
        """
        settings = self._attachable(kind)
        require_text(resource_id, "resource id")
        if not settings.kind.ids.usable(resource_id):
            raise ValueError(
                f"{settings.kind.label} id {resource_id!r}: expected {settings.kind.ids.expected}"
            )
        return self._attach(settings, session_id, resource_id, partition)

    def _attach(
        self, settings: KindSettings, session_id: str, resource_id: str, partition: str | None
    ) -> Session:
        """Claim ``resource_id`` of the kind for the session's incarnation, then ``ADD`` it to
        the kind's String Set in one conditional UpdateItem (every kind recorded by one id in a
        set: declared, custom, AgentCore Memory's ``<actorId>/<sessionId>``).

        Raises:
            SessionGoneError: the session is missing or not live; nothing was written.
            ResourceOwnedError: another live session owns that id.
        """
        key = self._key(session_id, partition)
        recording = self._recording(key, session_id, partition)
        item = self._claimed(
            recording.claims(settings.kind.kind, [resource_id]),
            lambda: self._record_resource(
                key, session_id, partition, settings.ids_attribute, resource_id, recording
            ),
        )
        return self._to_session(item)

    def _attachable(self, kind: str) -> KindSettings:
        """The settings of ``kind``: a declared kind's name, a custom step's name or
        ``custom:<name>``.

        Raises:
            ValueError: no such kind, or a declared kind whose target is not configured.
        """
        kinds = recorded_kinds(self._config)
        full = kind if kind in kinds or kind.startswith(CUSTOM_KIND_PREFIX) else None
        if full is None and isinstance(kind, str):
            try:
                full = custom_kind(kind)
            except ValueError:
                full = None
        settings = kinds.get(full) if full is not None else None
        if settings is None:
            customs = sorted(k.removeprefix(CUSTOM_KIND_PREFIX) for k in kinds if ":" in k)
            declared = sorted(k for k in kinds if ":" not in k)
            raise ValueError(
                f"resource kind {kind!r}: expected the name of a custom step with a "
                f"resource_attribute, one of {customs} (SESSION_EXPIRY_CUSTOM_KINDS), or a "
                f"declared kind, one of {declared}"
            )
        declared_target = settings.kind.target
        if declared_target is not None and settings.target is None:
            raise ValueError(
                f"resource kind {kind!r}: its target is not configured (${declared_target.env}, "
                f"set by SessionExpiry(resource_targets={{{declared_target.prop!r}: ...}}) through "
                "grant_session_access): the cleanup could never release it"
            )
        return settings

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
