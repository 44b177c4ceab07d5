"""The claim registrar: the one writer of ownership records besides the cleanup.

The cleanup trusts the ownership table's records (``docs/ownership.md``), and IAM cannot make a
writer use a condition, so no application role may write that table. ``SessionStore`` asks this
function instead (runtime ``session_expiry_runtime.registrar``), which checks each request
against the session item as the table holds it before it writes (``docs/security.md``, the
threat model). ``Sessions/ClaimRegistrar`` (created with the ownership table):

* a function from the cleanup's code asset (handler
  ``session_expiry_runtime.registrar.handler``, 256 MiB, 30 seconds: it waits up to about
  3 seconds for a claim another session's cleanup is releasing) with its own role and log
  group. Its role may ``PutItem``, ``UpdateItem``, ``DeleteItem`` and ``GetItem`` on the
  ownership table and ``GetItem`` on the session table (and decrypt with the tables' customer
  managed key, if any): nothing else;
* each function given ``grant_session_access`` (or ``grant_tenant_session_access``) gets
  ``lambda:InvokeFunction`` on it and ``SESSION_EXPIRY_CLAIM_REGISTRAR_FUNCTION``, and no
  action on the ownership table;
* ``ClaimRequestsRefusedAlarm`` (any ``ClaimRequestsRefused`` in 5 minutes: a request for a
  session incarnation that is not its key's live one) and ``ErrorsAlarm`` (the function failed).

Cost: one synchronous ``Invoke`` per ``SessionStore`` call that records ids (``create`` with
ids, ``attach_*``, ``create_grant``) and per release of earlier ids, each of a few DynamoDB
calls: $0.20 per million requests plus about 50 ms at 256 MiB ($0.0000133334 per GB-second on
arm64): about $0.37 per million calls (us-east-1 list prices).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from . import _runtime_contract as contract
from . import assets
from .monitoring import alarms as alarm_defaults

CONSTRUCT_ID = "ClaimRegistrar"
REGISTRAR_MEMORY_SIZE = 256
REGISTRAR_TIMEOUT = Duration.seconds(30)
#: What the registrar does with claims (``docs/ownership.md``).
OWNERSHIP_ACTIONS = (
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:GetItem",
)


class ClaimRegistrar(Construct):
    """The registrar function, its role and alarms (see the module docstring).

    Args:
        table: the session table (read: ``GetItem``).
        ownership_table: the ownership table (written).
        environment: the runtime settings (the session table's name, key and attribute names,
            the ownership table's name).
        log_retention: retention of its log group.
        metrics_namespace: namespace of ``ClaimRequestsRefused``.
        alarm_actions: actions of both alarms.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table: dynamodb.ITable,
        ownership_table: dynamodb.ITable,
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays,
        metrics_namespace: str,
        alarm_actions: Sequence[cloudwatch.IAlarmAction],
    ) -> None:
        super().__init__(scope, id)
        self.metrics_namespace = metrics_namespace
        log_group = logs.LogGroup(self, "LogGroup", retention=log_retention)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Writes the session ownership records (cdk-session-expiry)",
        )
        log_group.grant_write(self.role)
        # The tables themselves, not their indexes (Table.grant adds index/*).
        iam.Grant.add_to_principal(
            grantee=self.role,
            actions=list(OWNERSHIP_ACTIONS),
            resource_arns=[ownership_table.table_arn],
        )
        iam.Grant.add_to_principal(
            grantee=self.role, actions=["dynamodb:GetItem"], resource_arns=[table.table_arn]
        )
        for key in {t.encryption_key for t in (table, ownership_table)} - {None}:
            assert key is not None
            key.grant_decrypt(self.role)
        self.function = assets.runtime_function(
            self,
            "Function",
            description="Writes the session ownership records (cdk-session-expiry)",
            handler=contract.CLAIM_REGISTRAR_HANDLER,
            role=self.role,
            log_group=log_group,
            timeout=REGISTRAR_TIMEOUT,
            memory_size=REGISTRAR_MEMORY_SIZE,
            environment={**environment, contract.ENV_METRICS_NAMESPACE: metrics_namespace},
        )
        self.refused_alarm = alarm_defaults._alarm(
            self,
            "ClaimRequestsRefusedAlarm",
            metric=self.metric_claim_requests_refused(),
            threshold=0,
            description=alarm_defaults.CLAIM_REQUESTS_REFUSED_DESCRIPTION,
            actions=alarm_actions,
        )
        self.errors_alarm = alarm_defaults.errors_alarm(
            self,
            function=self.function,
            actions=alarm_actions,
            description=alarm_defaults.CLAIM_REGISTRAR_ERRORS_DESCRIPTION,
        )

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """``lambda:InvokeFunction`` on the registrar (the function itself, not its versions:
        ``Function.grant_invoke`` adds ``<arn>:*``) for ``grantee``."""
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["lambda:InvokeFunction"],
            resource_arns=[self.function.function_arn],
        )

    def environment(self) -> dict[str, str]:
        """``SESSION_EXPIRY_CLAIM_REGISTRAR_FUNCTION`` for the session runtime."""
        return {contract.ENV_CLAIM_REGISTRAR_FUNCTION: self.function.function_name}

    def metric_claim_requests_refused(self, **options: Any) -> cloudwatch.Metric:
        """``ClaimRequestsRefused`` (count), Sum over 5 minutes by default."""
        props: dict[str, Any] = {
            "statistic": cloudwatch.Stats.SUM,
            "period": alarm_defaults.ALARM_PERIOD,
            **options,
        }
        return cloudwatch.Metric(
            namespace=self.metrics_namespace,
            metric_name=contract.METRIC_CLAIM_REQUESTS_REFUSED,
            **props,
        )
