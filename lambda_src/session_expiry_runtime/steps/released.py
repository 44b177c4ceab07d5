"""The step of a declared resource kind (`session_expiry_runtime.core.kinds`): release every id of
the kind the session owned, one call each.

Built from the declaration alone, one per configured kind (`build_released_steps`): its
``name`` is the release operation (the metric's ``Action``); it reads the kind's String Set (and
its latest-id attribute, for a built-in that has one), plans each usable id as a claim
(``<kind>#<id>``) so that the runner's ownership check (`base`) hands it only the ids this
record's ``Keys`` and incarnation own, and calls ``Release.operation(target_parameter=target,
id_parameter=id, **options)`` for each (``Release.options`` the configuration sets: the
runtime's endpoint ``qualifier``) — after ``Release.first`` with the same parameters when the kind
declares one (ended before it is deleted: an answer in ``Release.first_continues`` goes on to the
second call). An error code in ``Release.gone`` means the resource is already gone:
``already-done``. Anything else botocore's retries do not cure is a failure of this step
(the record is retried), after every other owned id was tried. An id the API would refuse is an
unusable attribute (logged, never sent). A kind whose ``Release.after`` names other steps runs
once they finished for the session (`CleanupStep.after`).
"""

from __future__ import annotations

import importlib
from typing import Any

from ..core.clients import CleanupClients
from ..core.config import RuntimeConfig
from ..core.kind_settings import KindSettings, configured_kinds
from ..core.kinds import method_of
from ..owners.outcomes import STEP_ALREADY_DONE
from .base import ClaimRef, CleanupStep, Plan, Session, StepContext, act_on_each, call_aws, id_union


class ReleasedKindStep(CleanupStep):
    """Release each owned id of one declared kind (module docstring)."""

    claims_ownership = True
    name = "ReleasedKind"  # replaced per instance by the kind's release operation

    def __init__(self, settings: KindSettings, client: Any) -> None:
        release = settings.kind.release
        if release is None:
            raise ValueError(f"resource kind {settings.kind.kind!r} declares no release call")
        self.settings = settings
        self.release = release
        self.name = release.operation
        self.after = release.after
        self.client = client
        self.attributes = settings.attributes

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> ReleasedKindStep | None:
        """``None``: one step per kind; see `build_released_steps`."""
        return None

    def plan(self, session: Session) -> Plan:
        settings = self.settings
        usable = settings.kind.ids.usable
        if settings.single_attribute is not None:
            ids, unusable, invalid = id_union(
                session, settings.single_attribute, settings.ids_attribute, usable
            )
        else:
            ids, unusable, invalid = _id_set(session, settings.ids_attribute, usable)
        if unusable is not None:
            return unusable
        return Plan.run(
            log={settings.kind.ids.attribute: ids},
            invalid=invalid,
            claims=[ClaimRef(settings.kind.kind, resource_id) for resource_id in ids],
        )

    def run(self, plan: Plan, ctx: StepContext) -> str:
        return act_on_each(self.name, [ref.resource_id for ref in plan.owned], self._release)

    def _release(self, resource_id: str) -> str:
        params = self.settings.release_params(resource_id)
        if self.release.first is not None:
            first = call_aws(
                self.name,
                getattr(self.client, method_of(self.release.first)),
                already_done=self.release.gone,
                goes_on=self.release.first_continues,
                **params,
            )
            if first == STEP_ALREADY_DONE:
                return first
        return call_aws(
            self.name,
            getattr(self.client, self.release.method),
            already_done=self.release.gone,
            **params,
        )


def _id_set(
    session: Session, attribute: str, usable: Any
) -> tuple[list[str], Plan | None, list[str]]:
    """The usable ids of the String Set ``attribute``: ``(sorted ids, None, invalid)``, or a
    missing/invalid plan when it is absent or holds no usable id."""
    if attribute not in session.image:
        return [], Plan.missing_attributes(missing=(attribute,)), []
    recorded = session.image[attribute]
    members = set(recorded) if isinstance(recorded, (set, frozenset)) else set()
    good = sorted(v for v in members if usable(v))
    invalid = [attribute] if not good or len(good) != len(members) else []
    if not good:
        return [], Plan.missing_attributes(invalid=invalid), invalid
    return good, None, invalid


def build_released_steps(config: RuntimeConfig, clients: CleanupClients) -> list[CleanupStep]:
    """One step per configured declared kind, in declaration order: a `ReleasedKindStep` for a
    kind released by its declared call, the kind's own step class (``ResourceKind.step``, built
    by its ``build``) for a kind whose release is more than that; a kind whose client is missing
    is left out like any step without its target."""
    steps: list[CleanupStep] = []
    for settings in configured_kinds(config):
        kind = settings.kind
        if kind.step is not None:
            own = _own_step(kind.step).build(config, clients)
            if own is not None:
                steps.append(own)
            continue
        client = clients.service(kind.service)
        if kind.release is not None and client is not None:
            steps.append(ReleasedKindStep(settings, client))
    return steps


def _own_step(path: str) -> type[CleanupStep]:
    """The step class ``"module.Class"`` of this package (``ResourceKind.step``)."""
    module, _, name = path.rpartition(".")
    found = getattr(importlib.import_module(f"{__package__}.{module}"), name)
    if not (isinstance(found, type) and issubclass(found, CleanupStep)):  # pragma: no cover
        raise TypeError(f"ResourceKind.step {path!r} is no CleanupStep")
    return found
