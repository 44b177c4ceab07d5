"""The targets of the declared resource kinds: ``SessionExpiry(resource_targets={...})``.

Each kind declared in ``session_expiry_runtime/core/kinds.py`` with a ``Target`` (`_kinds`) is
switched on by one key of ``resource_targets``: its prop (``"capacity_provider"``,
``"payment_manager"``, ...) → the target (its identifier or ARN, as the kind's declaration
accepts). From the declaration alone this unit checks the value, sets the target and the ids
attribute on the cleanup function, the claim registrar and every function given
``grant_session_access`` (``SessionStore.attach_resource`` records the kind's ids), and grants
the cleanup role the kind's release action on the target's ARN only. Every kind is claimed, so
any target needs the ownership table.

The kinds, their calls and what remains after them: ``docs/agentcore.md``, "What the cleanup
releases, and what remains".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from . import _kinds, validation

#: The keys ``resource_targets`` accepts, each a declared kind's ``Target.prop``.
PROPS: tuple[str, ...] = tuple(kind.target.prop for kind in _kinds.TARGETED_KINDS)


@dataclass(frozen=True)
class ResolvedTarget:
    """One kind switched on: the declaration, the target the API takes, the ARN IAM names."""

    kind: Any
    target: str
    arn: str


@dataclass(frozen=True)
class ResourceTargets:
    """The declared kinds ``resource_targets`` switched on (possibly none)."""

    targets: tuple[ResolvedTarget, ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.targets)

    def environment(self) -> dict[str, str]:
        """Each target and its ids attribute (the declared name: no prop renames it)."""
        env: dict[str, str] = {}
        for t in self.targets:
            env[t.kind.target.env] = t.target
            env[t.kind.ids.env] = t.kind.ids.attribute
        return env

    def ids_attributes(self) -> dict[str, str]:
        """The fixed ids attributes of the kinds set: environment variable → name."""
        return {t.kind.ids.env: t.kind.ids.attribute for t in self.targets}

    def step_names(self) -> list[str]:
        """The cleanup steps (metric ``Action``) of the kinds set, in declaration order."""
        return [t.kind.action for t in self.targets if t.kind.action]

    def statements(self) -> list[iam.PolicyStatement]:
        """The release actions of each kind (``Release.first`` too) on its target only."""
        return [
            iam.PolicyStatement(actions=list(t.kind.iam_actions), resources=[t.arn])
            for t in self.targets
            if t.kind.iam_actions
        ]

    def configure(self, function: lambda_.Function) -> None:
        """The cleanup's environment and `statements`."""
        for name, value in self.environment().items():
            function.add_environment(name, value)
        for statement in self.statements():
            function.add_to_role_policy(statement)


def declared_actions() -> tuple[str, ...]:
    """Every declared kind's release operation: values of the ``Action`` dimension."""
    return tuple(kind.action for kind in _kinds.DECLARED_KINDS if kind.action)


def resolve(scope: Construct, resource_targets: Mapping[str, str] | None) -> ResourceTargets:
    """Check ``resource_targets`` against the declarations and settle targets and ARNs.

    Raises:
        ValueError: a key that is no declared kind's prop, or a value not of the form the
            kind's declaration accepts (an unresolved token included: IAM needs the ARN and
            the cleanup the identifier); the message names both and what was expected.
        PropTypeError: ``resource_targets`` is not a mapping of strings.
    """
    if resource_targets is None:
        return ResourceTargets()
    if not isinstance(resource_targets, Mapping):
        raise validation.PropTypeError(
            f"resource_targets={validation.shown(resource_targets)}: expected a mapping of "
            f"kind prop to target, the props being {list(PROPS)}"
        )
    by_prop = {kind.target.prop: kind for kind in _kinds.TARGETED_KINDS}
    found = []
    for prop, value in resource_targets.items():
        kind = by_prop.get(prop)
        if kind is None:
            raise ValueError(
                f"resource_targets key {prop!r}: expected one of {list(PROPS)} (the declared "
                "resource kinds, session_expiry_runtime/core/kinds.py)"
            )
        found.append(_resolve_one(scope, kind, value))
    return ResourceTargets(tuple(sorted(found, key=lambda t: _kinds.DECLARED_KINDS.index(t.kind))))


def _resolve_one(scope: Construct, kind: Any, value: object) -> ResolvedTarget:
    prop = f"resource_targets[{kind.target.prop!r}]"
    if not isinstance(value, str) or validation.is_token(value):
        raise ValueError(
            f"{prop}={validation.shown(value)}: expected a literal {kind.target.expected} (IAM "
            "needs the ARN, the cleanup the identifier)"
        )
    matched = re.fullmatch(kind.target.pattern, value)
    if matched is None:
        raise ValueError(f"{prop}={value!r}: expected {kind.target.expected}")
    target = matched.groupdict().get("id") or value
    stack = Stack.of(scope)
    arn = kind.target.iam_resource.format(
        partition=stack.partition, region=stack.region, account=stack.account, target=target
    )
    return ResolvedTarget(kind, target, arn)
