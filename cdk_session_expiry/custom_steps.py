"""User-defined cleanup steps: the user's code beside the runtime in the cleanup function.

A [`CustomCleanupStep`][cdk_session_expiry.CustomCleanupStep] names a directory of the user's
Python code, a handler
``package.module.function`` in it, an optional read-only preview for the dry run, and the session
attributes it reads. The construct

* copies the directory's **contents** to the root of the cleanup function's code asset, beside
  ``session_expiry_runtime/`` (local bundling, no Docker: see ``assets``), so the handler imports
  as it would from the directory itself;
* sets ``SESSION_EXPIRY_CUSTOM_STEPS`` to the JSON list the runtime reads
  (``session_expiry_runtime.steps.custom``, whose docstring is the step contract);
* makes each step a grantable whose principal is the cleanup role, so the user grants what the
  step needs: ``secret.grant_read(step)``, or ``sessions.custom_step("DeleteSecret")``.

Why a directory and not a ``lambda_.Code``: a function has one code package. A separate
``Code.from_asset`` is its own asset and cannot be merged into the runtime's without bundling
both in one step; the runtime's asset is a local copy (no Docker), so the step's sources join
that same copy.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

from . import _runtime_contract as contract
from . import validation


@jsii.implements(iam.IGrantable)
class CustomCleanupStep:
    """A cleanup step of your own, run by the cleanup function once per removed session.

    Args:
        name: the step's name and metric ``Action`` (``CleanupFailures``): a letter, then up
            to 63 letters, digits, ``-`` or ``_``; not a built-in step's action, unique among
            the steps of one ``SessionExpiry``.
        code: a directory (``str`` or ``pathlib.Path``; relative paths resolve against the
            current directory, as ``lambda_.Code.from_asset`` does) whose contents are copied
            beside ``session_expiry_runtime/`` at the root of the cleanup function's code. It
            may not hold a ``session_expiry_runtime`` of its own. Several steps may share one
            directory; two directories may not hold the same top-level name.
        handler: ``package.module.function`` (at least ``module.function``) in ``code``,
            called as ``function(old_image: dict, reason: str)``; its module file must exist.
        preview: the same form: called instead of ``handler`` in a dry run, read-only; it may
            return a mapping of log fields. Default: none, the step is skipped in a dry run.
        attributes: the session attributes the step reads; a session missing one of them gives
            the step nothing to do. Default: none, the step runs for every session.
        resource_attribute: the session attribute (a String Set) holding the ids of the step's
            **own resource kind**, ``custom:<name>``: each recorded by
            ``SessionStore.attach_resource(session_id, "<name>", id)`` with an ownership record,
            checked by the cleanup before the step runs, exactly like a connection
            (``docs/custom-steps.md``). The handler is then called once per owned id as
            ``function(resource_id: str, session: CustomSession)`` (the record's ``keys``,
            ``incarnation``, ``reason`` and a copy of the image): an id another session recorded
            never reaches it. Creates the ownership table and the claim registrar. Default: none
            (then ``allow_acting_on_image_values`` is required).
        allow_acting_on_image_values: a step without ``resource_attribute`` gets the removed
            item's old image (``function(old_image, reason)``), whatever the item's last
            writer put there: a tenant can name another tenant's resource in its own item and
            end its session, and no ownership record is checked. ``True`` accepts that, for a
            step that acts on nothing the image names (deriving names from the key, writing a
            record of the session). Default ``False``: a step without ``resource_attribute``
            raises ``ValueError``; with ``resource_attribute`` it must stay ``False``.

    The step is validated when a ``SessionExpiry`` takes it (``custom_steps=``); each step
    belongs to one ``SessionExpiry``.
    """

    def __init__(
        self,
        *,
        name: str,
        code: str | os.PathLike[str],
        handler: str,
        preview: str | None = None,
        attributes: Sequence[str] = (),
        resource_attribute: str | None = None,
        allow_acting_on_image_values: bool = False,
    ) -> None:
        self.name = name
        self.code = code
        self.handler = handler
        self.preview = preview
        self.attributes = attributes
        self.resource_attribute = resource_attribute
        self.allow_acting_on_image_values = allow_acting_on_image_values
        self._role: iam.IRole | None = None

    @property
    def grant_principal(self) -> iam.IPrincipal:
        """The cleanup role, once a ``SessionExpiry`` took the step.

        Raises:
            ValueError: no ``SessionExpiry`` has taken the step yet.
        """
        if self._role is None:
            raise ValueError(
                f"custom step {self.name!r} is not used by a SessionExpiry yet: expected it in "
                "SessionExpiry(..., custom_steps=[...]) before granting it permissions"
            )
        return self._role.grant_principal

    @property
    def directory(self) -> Path:
        """``code`` as an absolute path."""
        return Path(self.code).resolve()

    def spec(self) -> dict[str, object]:
        """The step's entry of ``SESSION_EXPIRY_CUSTOM_STEPS``."""
        spec: dict[str, object] = {
            "name": self.name,
            "handler": self.handler,
            "preview": self.preview,
            "attributes": list(self.attributes),
        }
        if self.resource_attribute is not None:
            spec["resourceAttribute"] = self.resource_attribute
        return spec

    def _bind(self, role: iam.IRole) -> None:
        self._role = role


def check_custom_steps(steps: Sequence[CustomCleanupStep], owner: str) -> tuple[Path, ...]:
    """Validate the steps of the ``SessionExpiry`` at path ``owner``; return their distinct
    directories in order.

    Raises:
        ValueError: a step another ``SessionExpiry`` took already; see also
            ``validation.check_custom_step`` and ``validation.check_custom_step_set``.
    """
    for step in steps:
        if step._role is not None:
            raise ValueError(
                f"custom step {step.name!r} is already used by another SessionExpiry: "
                f"expected one CustomCleanupStep per SessionExpiry (create another for {owner})"
            )
        validation.check_custom_step(
            name=step.name,
            code=step.code,
            handler=step.handler,
            preview=step.preview,
            attributes=step.attributes,
            reserved_names=contract.ACTIONS,
        )
        if step.resource_attribute is not None:
            validation.check_attribute_name(
                f"custom step {step.name!r}: resource_attribute", step.resource_attribute
            )
        _check_image_access(step)
    return validation.check_custom_step_set([(step.name, step.directory) for step in steps])


def _check_image_access(step: CustomCleanupStep) -> None:
    """Raises:
    ValueError: a step without a resource kind that does not accept acting on image values,
        or one with both."""
    allowed = step.allow_acting_on_image_values
    if not isinstance(allowed, bool):
        raise ValueError(
            f"custom step {step.name!r}: allow_acting_on_image_values={allowed!r}; expected "
            "True or False"
        )
    if step.resource_attribute is None and not allowed:
        raise ValueError(
            f"custom step {step.name!r} has no resource_attribute, so its handler would get the "
            "removed item's old image, which any writer of the item chooses (a tenant can name "
            "another tenant's resource in its own item and end its session): expected "
            "resource_attribute='<a String Set attribute>' (ids recorded by "
            "SessionStore.attach_resource, each checked against its ownership record before the "
            "step runs), or allow_acting_on_image_values=True for a step that acts on nothing "
            "the image names (docs: Custom cleanup steps)"
        )
    if step.resource_attribute is not None and allowed:
        raise ValueError(
            f"custom step {step.name!r}: allow_acting_on_image_values=True with "
            f"resource_attribute={step.resource_attribute!r}: a step with a resource kind gets "
            "only owned ids; expected allow_acting_on_image_values=False"
        )


def kinds_environment(steps: Sequence[CustomCleanupStep]) -> dict[str, str]:
    """``SESSION_EXPIRY_CUSTOM_KINDS`` (step name → its ``resource_attribute``) for the session
    runtime and the claim registrar; empty when no step declares a resource kind."""
    kinds = {s.name: s.resource_attribute for s in steps if s.resource_attribute is not None}
    if not kinds:
        return {}
    return {contract.ENV_CUSTOM_KINDS: json.dumps(kinds, separators=(",", ":"), sort_keys=True)}


def configure(function: lambda_.Function, steps: Sequence[CustomCleanupStep]) -> None:
    """``SESSION_EXPIRY_CUSTOM_STEPS`` on the cleanup function; each step's principal is its
    role. Nothing without steps."""
    if not steps:
        return
    function.add_environment(
        contract.ENV_CUSTOM_STEPS,
        json.dumps([step.spec() for step in steps], separators=(",", ":")),
    )
    for step in steps:
        step._bind(function.role)  # type: ignore[arg-type]  # the cleanup role
