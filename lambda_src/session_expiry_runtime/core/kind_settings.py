"""The declared resource kinds (`kinds`) as one configuration has them: target and attributes.

A built-in kind with props of its own reads its settings from named `RuntimeConfig` fields
(``ResourceKind.own``, `kinds.OwnProps`); every other declared kind from
``RuntimeConfig.kind_targets`` and ``kind_attributes``, which `RuntimeConfig.from_env` fills
from each declaration's environment variables; a custom step's kind from
``SESSION_EXPIRY_CUSTOM_KINDS``.
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
        options: the optional parameters of the release call this configuration sets
            (``Release.options``), ``(parameter, value)``.
    """

    kind: ResourceKind
    target: str | None
    ids_attribute: str
    single_attribute: str | None = None
    options: tuple[tuple[str, str], ...] = ()

    @property
    def attributes(self) -> tuple[str, ...]:
        """The attributes naming ids, the latest-id one first."""
        return (*((self.single_attribute,) if self.single_attribute else ()), self.ids_attribute)

    def release_params(self, resource_id: str) -> dict[str, str]:
        """The parameters of the kind's release call(s) for one id: the id, the target (when
        the call takes one) and the options set.

        Raises:
            ValueError: the kind declares no release call.
        """
        release = self.kind.release
        if release is None:
            raise ValueError(f"resource kind {self.kind.kind!r} declares no release call")
        params = {release.id_parameter: resource_id}
        if release.target_parameter is not None:
            params[release.target_parameter] = str(self.target)
        params.update(self.options)
        return params


def settings_of(kind: ResourceKind, config: RuntimeConfig) -> KindSettings:
    """``kind``'s target and attribute names in ``config``."""
    own = kind.own
    if own is not None:
        options = () if kind.release is None else kind.release.options
        return KindSettings(
            kind,
            getattr(config, own.target_field),
            getattr(config, own.ids_field),
            getattr(config, own.single_field) if own.single_field else None,
            tuple((p, str(getattr(config, f))) for p, f in options if getattr(config, f)),
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
