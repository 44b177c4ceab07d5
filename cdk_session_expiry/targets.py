"""The built-in cleanup targets: WebSocket connections, KMS grants, scratch prefixes.

Each target is optional and owns what the cleanup function needs for it: its environment
variables and least-privilege IAM statements on its own resources (and, for the scratch
prefixes, the S3 lifecycle backstop).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Annotations, ArnFormat, Duration, Stack, Tokenization
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from . import _runtime_contract as contract
from . import lifecycle, validation

WARNING_IMPORTED_BUCKET = "cdk-session-expiry:scratchBucketLifecycle"


def connections_endpoint(stage: apigwv2.IWebSocketStage) -> str:
    """The API Gateway management endpoint of ``stage``:
    ``https://{api}.execute-api.{region}.{url suffix}/{stage}``."""
    stack = Stack.of(stage)
    return (
        f"https://{stage.api.api_id}.execute-api.{stack.region}.{stack.url_suffix}/"
        f"{stage.stage_name}"
    )


def delete_connections_statement(stage: apigwv2.IWebSocketStage) -> iam.PolicyStatement:
    """``execute-api:ManageConnections`` on ``…/{stage}/DELETE/@connections/*`` only."""
    return iam.PolicyStatement(
        actions=["execute-api:ManageConnections"],
        resources=[
            Stack.of(stage).format_arn(
                service="execute-api",
                resource=stage.api.api_id,
                resource_name=f"{stage.stage_name}/DELETE/@connections/*",
                arn_format=ArnFormat.SLASH_RESOURCE_NAME,
            )
        ],
    )


def configure_connections(function: lambda_.Function, stage: apigwv2.IWebSocketStage) -> None:
    """``DeleteConnection`` on ``stage``: its endpoint, ``execute-api:ManageConnections`` on
    ``…/{stage}/DELETE/@connections/*`` only."""
    function.add_environment(contract.ENV_WEBSOCKET_ENDPOINT, connections_endpoint(stage))
    function.add_to_role_policy(delete_connections_statement(stage))


def configure_grants(
    function: lambda_.Function, key: kms.IKey, retire_budget: int | None = None
) -> None:
    """``RetireGrant`` of per-session grants on ``key``: its ARN, and ``kms:RetireGrant`` and
    ``kms:ListGrants`` on it only (the cleanup looks a grant up by id on the key to check its
    name names the removed session before it retires it); ``retire_budget`` (requests a second
    for every invocation together) when set, else the runtime's default."""
    function.add_environment(contract.ENV_GRANT_KEY_ARN, key.key_arn)
    if retire_budget is not None:
        function.add_environment(
            contract.ENV_KMS_RETIRE_GRANT_BUDGET, Tokenization.stringify_number(retire_budget)
        )
    # Retiring is authorized by the grant's retiring principal (this role), not by IAM; the IAM
    # permission only covers the account's own delegation (KMS developer guide, "Retiring and
    # revoking grants"). ListGrants is authorized by IAM on the key (KMS API Reference).
    function.add_to_role_policy(
        iam.PolicyStatement(actions=["kms:RetireGrant", "kms:ListGrants"], resources=[key.key_arn])
    )


@dataclass(frozen=True)
class ScratchTarget:
    """Per-session scratch prefixes under ``root`` in ``bucket`` (none without a bucket)."""

    bucket: s3.IBucket | None
    root: str
    tenant_scoped: bool
    retention: Duration

    @classmethod
    def from_props(
        cls,
        *,
        scratch_bucket: s3.IBucket | None,
        scratch_root: str | None,
        tenant_scoped_scratch: bool,
        scratch_retention: Duration | None,
    ) -> ScratchTarget:
        """The scratch props with their defaults, checked.

        Raises:
            ValueError: see ``validation.check_scratch_props`` and
                ``lifecycle.check_scratch_root``.
        """
        retention = (
            lifecycle.DEFAULT_SCRATCH_RETENTION if scratch_retention is None else scratch_retention
        )
        validation.check_scratch_props(
            scratch_bucket=scratch_bucket,
            retention=retention,
            scratch_root=scratch_root,
            scratch_retention=scratch_retention,
            tenant_scoped_scratch=tenant_scoped_scratch,
        )
        root = contract.DEFAULT_SCRATCH_ROOT if scratch_root is None else scratch_root
        lifecycle.check_scratch_root(root)
        return cls(scratch_bucket, root, tenant_scoped_scratch, retention)

    def environment(self) -> dict[str, str]:
        """Bucket, root and tenant scoping, as the cleanup reads them (empty without a bucket)."""
        if self.bucket is None:
            return {}
        env = {
            contract.ENV_SCRATCH_BUCKET: self.bucket.bucket_name,
            contract.ENV_SCRATCH_ROOT: self.root,
        }
        if self.tenant_scoped:
            env[contract.ENV_TENANT_SCOPED_SCRATCH] = "true"
        return env

    def configure(self, scope: Construct, function: lambda_.Function) -> None:
        """Environment, ``s3:ListBucket`` (condition ``s3:prefix``) and ``s3:DeleteObject``
        under the root only, and the lifecycle backstop; nothing without a bucket."""
        if self.bucket is None:
            return
        for name, value in self.environment().items():
            function.add_environment(name, value)
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{self.root}*"]}},
            )
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:DeleteObject"],
                resources=[self.bucket.arn_for_objects(f"{self.root}*")],
            )
        )
        self._add_backstop(scope, self.bucket)

    def _add_backstop(self, scope: Construct, bucket: s3.IBucket) -> None:
        if lifecycle.can_add_lifecycle_rule(bucket):
            lifecycle.add_scratch_lifecycle_rule(
                bucket,  # type: ignore[arg-type]  # narrowed by can_add_lifecycle_rule
                rule_id=f"session-expiry-scratch-{scope.node.addr}",
                scratch_root=self.root,
                retention=self.retention,
            )
            return
        Annotations.of(scope).add_warning_v2(
            WARNING_IMPORTED_BUCKET,
            f"scratch_bucket {bucket.node.path} is imported: no lifecycle backstop rule "
            f"could be added for {self.root!r}. Add a rule on that prefix "
            "(expiration, abort incomplete multipart uploads after 1 day) where the bucket "
            "is defined.",
        )
