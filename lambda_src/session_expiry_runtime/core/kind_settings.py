"""The declared resource kinds (`kinds`) as one configuration has them: target and attributes.

A built-in kind with props of its own reads its settings from named `RuntimeConfig` fields
(``ResourceKind.config_fields``); every other declared kind from ``RuntimeConfig.kind_targets``
and ``kind_attributes``, which `RuntimeConfig.from_env` fills from each declaration's
environment variables; a custom step's kind from ``SESSION_EXPIRY_CUSTOM_KINDS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .kinds import DECLARED_KINDS, ResourceKind, custom_resource_kind
from .ownership import custom_kinds_of

if TYPE_CHECKING:
    from .config import RuntimeConfig

__all__ = ["KindSettings", "configured_kinds", "recorded_kinds", "settings_of"]


@dataclass(frozen=True)
class KindSettings:
    """One kind in one configuration.

    Attributes:
        kind: the declaration.
        target: the target the release call names (``None``: not configured, or none needed).
        ids_attribute: the String Set attribute holding every id.
        single_attribute: the attribute holding the latest id (built-ins written before the
            sets existed), or ``None``.
    """

    kind: ResourceKind
    target: str | None
    ids_attribute: str
    single_attribute: str | None = None

    @property
    def attributes(self) -> tuple[str, ...]:
        """The attributes naming ids, the latest-id one first."""
        return (*((self.single_attribute,) if self.single_attribute else ()), self.ids_attribute)


def settings_of(kind: ResourceKind, config: RuntimeConfig) -> KindSettings:
    """``kind``'s target and attribute names in ``config``."""
    if kind.config_fields is not None:
        target_field, single_field, ids_field = kind.config_fields
        return KindSettings(
            kind,
            getattr(config, target_field),
            getattr(config, ids_field),
            getattr(config, single_field) if single_field else None,
        )
    return KindSettings(
        kind,
        dict(config.kind_targets).get(kind.kind),
        dict(config.kind_attributes).get(kind.kind) or kind.ids.attribute,
    )


def configured_kinds(config: RuntimeConfig) -> list[KindSettings]:
    """The declared kinds whose target ``config`` sets, in declaration order."""
    found = (settings_of(kind, config) for kind in DECLARED_KINDS)
    return [settings for settings in found if settings.target is not None]


def recorded_kinds(config: RuntimeConfig) -> dict[str, KindSettings]:
    """Every kind a session item may name ids of in ``config``: each declared kind (configured
    or not: an item written before a target was removed still names its ids) and each custom
    step's kind (``custom:<name>``), by kind name.

    Raises:
        ValueError: ``SESSION_EXPIRY_CUSTOM_KINDS`` is malformed (`ownership.custom_kinds_of`).
    """
    found = {kind.kind: settings_of(kind, config) for kind in DECLARED_KINDS}
    for name, attribute in custom_kinds_of(config.custom_kinds).items():
        kind = custom_resource_kind(name.removeprefix("custom:"), attribute)
        found[name] = KindSettings(kind, None, attribute)
    return found
