"""What the application's own functions need to run the session runtime against the table.

``RuntimeLayer`` (the session runtime as a Lambda layer), the environment
``SessionStore.from_env()`` reads, and the grants of ``SessionExpiry.grant_session_access``
(the grant and lifetime limits are in `session_limits`, the ownership table's grants in
`ownership`, the AgentCore targets' in `agentcore`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import cast

from aws_cdk import Annotations
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from . import _runtime_contract as contract
from . import assets, ownership
from .agents.agentcore import AgentCoreTargets
from .claim_registrar import ClaimRegistrar
from .ownership import OwnershipTable
from .session_limits import SessionLimits
from .table import SessionAttributes
from .targets import ScratchTarget, connections_endpoint, delete_connections_statement

WARNING_IMPORTED_FUNCTION = "cdk-session-expiry:sessionAccessEnvironment"
_SESSION_DATA_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:Query",
)


class SessionAccess:
    """The runtime layer of one ``SessionExpiry`` and the access it grants to functions."""

    def __init__(
        self,
        scope: Construct,
        *,
        table: dynamodb.ITable,
        attributes: SessionAttributes,
        scratch: ScratchTarget,
        grant_key: kms.IKey | None,
        retiring_principal_arn: str,
        limits: SessionLimits,
        websocket_stage: apigwv2.IWebSocketStage | None,
        ownership_table: OwnershipTable | None,
        agentcore: AgentCoreTargets,
        claim_registrar: ClaimRegistrar | None = None,
        custom_kinds: Mapping[str, str] | None = None,
    ) -> None:
        self._scope = scope
        self._limits = limits
        self._websocket_stage = websocket_stage
        self._table = table
        self._attributes = attributes
        self._scratch = scratch
        self._grant_key = grant_key
        self._retiring_principal_arn = retiring_principal_arn
        self._ownership = ownership_table
        self._agentcore = agentcore
        self._registrar = claim_registrar
        #: ``SESSION_EXPIRY_CUSTOM_KINDS`` (custom steps' own resource kinds), or empty.
        self._custom_kinds = dict(custom_kinds or {})
        self.layer = lambda_.LayerVersion(
            scope,
            "RuntimeLayer",
            code=assets.runtime_layer_code(),
            compatible_runtimes=list(assets.LAYER_RUNTIMES),
            compatible_architectures=[lambda_.Architecture.ARM_64, lambda_.Architecture.X86_64],
            description="Session runtime of cdk-session-expiry (import session_expiry_runtime)",
        )

    def environment(self, extra: Mapping[str, str]) -> dict[str, str]:
        """The variables ``SessionStore.from_env()`` reads, plus ``extra`` (e.g. the sweeper's)."""
        env = {
            contract.ENV_TABLE_NAME: self._table.table_name,
            **self._attributes.environment(),
            contract.ENV_SCRATCH_ROOT: self._scratch.root,
            contract.ENV_RETIRING_PRINCIPAL: self._retiring_principal_arn,
        }
        if self._scratch.bucket is not None:
            env[contract.ENV_SCRATCH_BUCKET] = self._scratch.bucket.bucket_name
        if self._scratch.tenant_scoped:
            env[contract.ENV_TENANT_SCOPED_SCRATCH] = "true"
        if self._grant_key is not None:
            env[contract.ENV_GRANT_KEY_ARN] = self._grant_key.key_arn
        if self._websocket_stage is not None:
            # attach_connection closes a session's earlier connections.
            env[contract.ENV_WEBSOCKET_ENDPOINT] = connections_endpoint(self._websocket_stage)
        env.update(self._limits.environment())
        env.update(ownership.attribute_environment())
        if self._ownership is not None:
            env.update(self._ownership.environment())
        if self._registrar is not None:
            # SessionStore asks the registrar to write ownership records (never the table).
            env.update(self._registrar.environment())
        env.update(self._custom_kinds)  # attach_resource's kinds
        # attach_agent_session stops the sessions it replaces: it needs the targets too.
        env.update(self._agentcore.environment())
        env.update(extra)
        return env

    def grant_access(self, function: lambda_.IFunction, *, create_grants: bool) -> iam.Grant:
        """The permissions of ``SessionExpiry.grant_session_access``.

        Raises:
            ValueError: ``function`` has no role to attach them to (imported by name or ARN),
                or ``create_grants`` without ``grant_key`` or without ``grant_grantees``.
        """
        _check_has_role(function, "grant_session_access")
        grant = iam.Grant.add_to_principal(
            grantee=function,
            actions=list(_SESSION_DATA_ACTIONS),
            resource_arns=[self._table.table_arn],
        )
        if self._table.encryption_key is not None:
            grant = grant.combine(self._table.encryption_key.grant_encrypt_decrypt(function))
        if create_grants:
            if self._grant_key is None:
                raise ValueError(
                    f"grant_session_access({function.node.path}, create_grants=True): no "
                    "grant_key; expected a grant_key on the SessionExpiry, or create_grants=False"
                )
            grant = grant.combine(self._grant_key_access(function, self._grant_key))
        for extra in self._target_grants(function):
            grant = grant.combine(extra)
        return grant

    def grant_tenant_access(self, function: lambda_.IFunction, *, tenant_tag: str) -> iam.Grant:
        """The permissions of ``SessionExpiry.grant_tenant_session_access``: the session data
        actions on the table only for items whose partition key is the caller's principal tag
        ``tenant_tag`` (``dynamodb:LeadingKeys``), the table's key, and the claim registrar.

        Raises:
            ValueError: ``function`` has no role; the table's partition key is not the tenant
                attribute; ``tenant_tag`` is not a tag key.
        """
        _check_has_role(function, "grant_tenant_session_access")
        return self._tenant_grant(
            function, tenant_tag, f"grant_tenant_session_access({function.node.path})"
        )

    def tenant_role(
        self, scope: Construct, id: str, *, broker: lambda_.IFunction, tenant_tag: str
    ) -> iam.Role:
        """The role of ``SessionExpiry.add_tenant_session_role``: the tenant-confined grant of
        `grant_tenant_access` on a role of its own, which ``broker``'s role may assume only
        with the session tag ``tenant_tag`` (``sts:AssumeRole`` and ``sts:TagSession`` in the
        trust policy, with the tag required, non-empty, and the only one passed; IAM User Guide,
        "Pass session tags in AWS STS", "Permissions required to add session tags"); ``broker``
        gets ``sts:AssumeRole`` and ``sts:TagSession`` on that role only.

        Raises:
            ValueError: as `grant_tenant_access`, naming ``add_tenant_session_role``.
        """
        method = f"add_tenant_session_role({id!r}, broker={broker.node.path})"
        _check_has_role(broker, "add_tenant_session_role")
        self._check_tenant_schema(tenant_tag, method)  # before the role exists
        broker_role = cast(iam.IRole, broker.role)
        principal = iam.SessionTagsPrincipal(iam.ArnPrincipal(broker_role.role_arn))
        role = iam.Role(
            scope,
            id,
            assumed_by=principal.with_conditions(
                {
                    "StringLike": {f"aws:RequestTag/{tenant_tag}": "?*"},
                    "ForAllValues:StringEquals": {"aws:TagKeys": [tenant_tag]},
                }
            ),
            description=(
                f"Session runtime confined to the tenant of its session tag {tenant_tag!r} "
                "(dynamodb:LeadingKeys); assumed by the broker function"
            ),
        )
        self._tenant_grant(role, tenant_tag, method)
        role.grant(broker_role, "sts:AssumeRole", "sts:TagSession")
        return role

    def _check_tenant_schema(self, tenant_tag: str, method: str) -> None:
        _check_tag_key(tenant_tag, method)
        attributes = self._attributes
        if attributes.tenant_attribute != attributes.partition_key_name:
            raise ValueError(
                f"{method}: the session table's "
                f"partition key is {attributes.partition_key_name!r} and the tenant attribute "
                f"{attributes.tenant_attribute!r}: expected the tenant as the partition "
                "key (tenant_attribute = partition_key_name, with a sort key for the session "
                "id, e.g. SessionExpiry(..., partition_key_name='tenantId', "
                "sort_key_name='sessionId', tenant_attribute='tenantId')), so that "
                "dynamodb:LeadingKeys confines a role to its tenant's items"
            )

    def _tenant_grant(self, grantee: iam.IGrantable, tenant_tag: str, method: str) -> iam.Grant:
        self._check_tenant_schema(tenant_tag, method)
        grant = iam.Grant.add_to_principal(
            grantee=grantee,
            actions=list(_SESSION_DATA_ACTIONS),
            resource_arns=[self._table.table_arn],
            conditions={
                "ForAllValues:StringEquals": {
                    "dynamodb:LeadingKeys": [f"${{aws:PrincipalTag/{tenant_tag}}}"]
                }
            },
        )
        if self._table.encryption_key is not None:
            grant = grant.combine(self._table.encryption_key.grant_encrypt_decrypt(grantee))
        if self._registrar is not None:
            grant = grant.combine(self._registrar.grant_invoke(grantee))
        return grant

    def _target_grants(self, function: lambda_.IFunction) -> list[iam.Grant]:
        """Claims in the ownership table, closing earlier connections, stopping replaced
        AgentCore sessions: each only when its target is configured."""
        grants: list[iam.Grant] = []
        if self._registrar is not None:
            grants.append(self._registrar.grant_invoke(function))
        if self._websocket_stage is not None:
            statement = delete_connections_statement(self._websocket_stage)
            grants.append(
                iam.Grant.add_to_principal(
                    grantee=function,
                    actions=statement.actions,
                    resource_arns=statement.resources,
                )
            )
        agentcore = self._agentcore.grant(function)
        if agentcore is not None:
            grants.append(agentcore)
        return grants

    def _grant_key_access(self, function: lambda_.IFunction, key: kms.IKey) -> iam.Grant:
        statement = self._limits.create_grant_statement(
            key, self._retiring_principal_arn, function.node.path
        )
        grant = iam.Grant.add_to_principal(
            grantee=function,
            actions=statement.actions,
            resource_arns=statement.resources,
            conditions=statement.conditions,
        )
        # When a session ends while its grant is being created, the runtime retires the new
        # grant at once, or the grantee would keep key access past the session. Only the
        # account's IAM delegation allows that (KMS developer guide, "Retiring and revoking
        # grants").
        return grant.combine(
            iam.Grant.add_to_principal(
                grantee=function, actions=["kms:RetireGrant"], resource_arns=[key.key_arn]
            )
        )

    def configure(
        self,
        function: lambda_.IFunction,
        environment: Mapping[str, str],
        method: str = "grant_session_access",
    ) -> None:
        """Set ``environment`` and add the layer on a ``lambda_.Function``; warn otherwise,
        naming ``method`` (the `SessionExpiry` method that was called)."""
        if isinstance(function, lambda_.Function):
            for name, value in environment.items():
                function.add_environment(name, value)
            function.add_layers(self.layer)
            return
        Annotations.of(self._scope).add_warning_v2(
            WARNING_IMPORTED_FUNCTION,
            f"{method}({function.node.path}): not a lambda_.Function, so its "
            "environment and layers cannot be set; set the variables of "
            "SessionExpiry.session_environment() and add runtime_layer yourself.",
        )


def _check_tag_key(tag: object, method: str) -> None:
    # IAM User Guide, "Tagging IAM resources": "You can't create tag keys or values that begin
    # with the text aws:" (reserved for AWS), so no role or session could carry such a tag.
    if not isinstance(tag, str) or not _TAG_KEY.fullmatch(tag) or tag.lower().startswith("aws:"):
        raise ValueError(
            f"{method}: tenant_tag={tag!r}: expected a tag key of "
            "1-128 letters, digits, spaces or _ . : / = + - @ (IAM session tags), not starting "
            "with the reserved 'aws:', e.g. 'tenant'"
        )


_TAG_KEY = re.compile(r"[\w .:/=+\-@]{1,128}")


def _check_has_role(function: lambda_.IFunction, method: str) -> None:
    if function.role is None:
        raise ValueError(
            f"{method}({function.node.path}): the function was imported "
            "without its role (Function.from_function_name/from_function_arn), so no "
            "permission can be attached to it: expected a lambda_.Function, or an import "
            "that names its role, Function.from_function_attributes(function_arn=..., "
            "role=iam.Role.from_role_arn(...)) (it then gets the permissions; set the "
            "variables of session_environment() and add runtime_layer yourself)"
        )
