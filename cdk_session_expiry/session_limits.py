"""The limits of an application session: its absolute lifetime, the KMS grants a function may
create for it, and the WebSocket connections it may close.

**Absolute lifetime.** ``max_session_lifetime`` reaches the session runtime as
``SESSION_EXPIRY_MAX_SESSION_LIFETIME_SECONDS``: ``create`` records the session's not-after
time and no heartbeat sets the time to live past it. The scratch lifecycle backstop deletes
objects by age, so ``scratch_retention`` must exceed the longest session plus TTL's deletion lag
(2 days), or the backstop could delete a live session's objects.

**Grants.** ``kms:CreateGrant`` is the permission to delegate use of the key. Unconditioned, a
function could mint grants of any operations for any grantee, which undoes per-session grants.
A function given ``grant_session_access(fn, create_grants=True)`` gets it only with the
condition keys of the AWS KMS Developer Guide ("Controlling access to grants", "AWS KMS
condition keys"):

* ``kms:GrantOperations`` (``ForAllValues:StringEquals``): within ``grant_operations``;
* ``kms:GranteePrincipal``: one of ``grant_grantees``;
* ``kms:RetiringPrincipal``: the cleanup role, which must retire the grant;
* ``kms:GrantConstraintType`` = ``EncryptionContextSubset`` while ``bind_grants_to_session``
  (the default): every grant carries the session's encryption-context constraint.

Other functions get no ``kms:CreateGrant`` (nor ``kms:RetireGrant``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Duration, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms

from . import _runtime_contract as contract
from . import validation

#: Default ``max_session_lifetime``: 8 hours, Amazon Bedrock AgentCore Runtime's default maximum
#: session lifetime.
DEFAULT_MAX_SESSION_LIFETIME = Duration.seconds(contract.DEFAULT_MAX_SESSION_LIFETIME_SECONDS)
#: Bounds of ``max_session_lifetime``: 1 minute to the session runtime's longest TTL (365 days).
MIN_SESSION_LIFETIME = Duration.minutes(1)
MAX_SESSION_LIFETIME = Duration.days(365)
#: How long DynamoDB may take to delete an expired item ("typically within 48 hours").
TTL_DELETION_LAG = Duration.days(2)
#: Default ``grant_operations``: what a session's grantee needs for envelope encryption.
DEFAULT_GRANT_OPERATIONS: tuple[str, ...] = ("Decrypt", "Encrypt", "GenerateDataKey")
#: The grant constraint every session grant carries while binding is on.
GRANT_CONSTRAINT_TYPE = "EncryptionContextSubset"
#: Grant operations that accept an encryption context, so a bound grant constrains them (AWS KMS
#: API Reference, "GrantConstraints").
OPERATIONS_WITH_CONTEXT: tuple[str, ...] = (
    "Decrypt",
    "Encrypt",
    "GenerateDataKey",
    "GenerateDataKeyPair",
    "GenerateDataKeyPairWithoutPlaintext",
    "GenerateDataKeyWithoutPlaintext",
    "ReEncryptFrom",
    "ReEncryptTo",
)
#: Grant operations without an encryption context (never constrained by a grant constraint).
OPERATIONS_WITHOUT_CONTEXT: tuple[str, ...] = (
    "DescribeKey",
    "RetireGrant",
    "Sign",
    "Verify",
    "GetPublicKey",
    "GenerateMac",
    "VerifyMac",
    "DeriveSharedSecret",
)


@dataclass(frozen=True)
class SessionLimits:
    """The checked lifetime and grant props of one ``SessionExpiry``."""

    lifetime: Duration
    grant_operations: tuple[str, ...]
    grant_grantees: tuple[iam.IRole, ...]
    bind_grants_to_session: bool

    @classmethod
    def from_props(
        cls,
        *,
        max_session_lifetime: Duration | None,
        scratch_retention: Duration | None,
        grant_operations: Sequence[str] | None,
        grant_grantees: Sequence[iam.IRole] | None,
        bind_grants_to_session: bool,
    ) -> SessionLimits:
        """The props with their defaults, checked.

        Args:
            scratch_retention: the scratch backstop's retention; ``None`` without a scratch
                bucket (nothing to compare).

        Raises:
            ValueError: see `check_lifetime` and `check_grant_operations`.
        """
        lifetime = (
            DEFAULT_MAX_SESSION_LIFETIME if max_session_lifetime is None else max_session_lifetime
        )
        check_lifetime(lifetime, scratch_retention)
        operations = check_grant_operations(
            DEFAULT_GRANT_OPERATIONS if grant_operations is None else grant_operations,
            bind=bind_grants_to_session,
        )
        # A grantee that is no role is refused with the other prop types
        # (``validation.PROP_TYPES``: ``PropTypeError``).
        return cls(lifetime, operations, tuple(grant_grantees or ()), bind_grants_to_session)

    def environment(self) -> dict[str, str]:
        """``SESSION_EXPIRY_MAX_SESSION_LIFETIME_SECONDS`` for the session runtime."""
        seconds = (
            Token.as_string(self.lifetime.to_seconds())
            if validation.is_token(self.lifetime)
            else str(int(self.lifetime.to_seconds()))
        )
        return {contract.ENV_MAX_SESSION_LIFETIME_SECONDS: seconds}

    def create_grant_statement(
        self, key: kms.IKey, retiring_principal_arn: str, function_path: str
    ) -> iam.PolicyStatement:
        """``kms:CreateGrant`` on ``key`` with the conditions of the module docstring.

        Raises:
            ValueError: no ``grant_grantees`` (a grant for nobody cannot be created).
        """
        if not self.grant_grantees:
            raise ValueError(
                f"grant_session_access({function_path}, create_grants=True): no grant_grantees "
                "on the SessionExpiry; expected the roles that receive session grants, as "
                "SessionExpiry(..., grant_key=key, grant_grantees=[role]), or create_grants=False"
            )
        string_equals: dict[str, object] = {
            "kms:GranteePrincipal": [role.role_arn for role in self.grant_grantees],
            "kms:RetiringPrincipal": retiring_principal_arn,
        }
        if self.bind_grants_to_session:
            string_equals["kms:GrantConstraintType"] = GRANT_CONSTRAINT_TYPE
        return iam.PolicyStatement(
            actions=["kms:CreateGrant"],
            resources=[key.key_arn],
            conditions={
                "ForAllValues:StringEquals": {"kms:GrantOperations": list(self.grant_operations)},
                "StringEquals": string_equals,
            },
        )


def check_lifetime(lifetime: Duration, scratch_retention: Duration | None) -> None:
    """Check ``max_session_lifetime`` and that the scratch backstop outlasts every session.

    Raises:
        ValueError: ``lifetime`` is not whole seconds from 1 minute to 365 days, or
            ``scratch_retention`` does not exceed ``max_session_lifetime`` plus TTL's deletion
            lag (2 days); the message names both props and their values.
    """
    validation.check_duration_range(
        "max_session_lifetime",
        lifetime,
        minimum=MIN_SESSION_LIFETIME,
        maximum=MAX_SESSION_LIFETIME,
    )
    if scratch_retention is None or validation.is_token(scratch_retention):
        return
    if validation.is_token(lifetime):
        return
    if scratch_retention.to_seconds() <= lifetime.to_seconds() + TTL_DELETION_LAG.to_seconds():
        raise ValueError(
            f"scratch_retention={scratch_retention.to_human_string()} does not exceed "
            f"max_session_lifetime={lifetime.to_human_string()} plus TTL's deletion lag "
            f"({TTL_DELETION_LAG.to_human_string()}): the lifecycle rule could delete a live "
            "session's scratch objects; expected a longer scratch_retention or a shorter "
            "max_session_lifetime"
        )


def check_grant_operations(operations: Sequence[str], *, bind: bool) -> tuple[str, ...]:
    """``grant_operations`` sorted, checked.

    Raises:
        ValueError: not a non-empty list; ``CreateGrant`` among them (a session grant that
            could create grants would undo the per-session limit); an unknown operation; or,
            with ``bind``, an operation that takes no encryption context (the grant constraint
            would not apply to it).
    """
    if isinstance(operations, str) or not isinstance(operations, Sequence) or not operations:
        raise ValueError(
            f"grant_operations={operations!r}: expected a non-empty list of KMS grant "
            f"operations, e.g. {list(DEFAULT_GRANT_OPERATIONS)}"
        )
    known = OPERATIONS_WITH_CONTEXT + OPERATIONS_WITHOUT_CONTEXT
    for op in operations:
        if op == "CreateGrant":
            raise ValueError(
                "grant_operations contains 'CreateGrant': a session grant that can create "
                f"grants would undo the per-session limit; expected operations of {list(known)}"
            )
        if op not in known:
            raise ValueError(f"grant_operations contains {op!r}: expected one of {list(known)}")
        if bind and op not in OPERATIONS_WITH_CONTEXT:
            raise ValueError(
                f"grant_operations contains {op!r}, which takes no encryption context, so a "
                "grant bound to its session would not constrain it; expected operations of "
                f"{list(OPERATIONS_WITH_CONTEXT)}, or bind_grants_to_session=False"
            )
    return tuple(sorted(set(operations)))
