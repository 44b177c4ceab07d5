"""What every scheduled backstop sweep of the construct shares: its function, log group and
schedule, the session table's read access, and its embedded metrics.

The grant sweep (`grant_sweep`) and the AgentCore tool-session sweep (`tool_session_sweep`)
each run the cleanup's code asset as the cleanup role on an EventBridge schedule, with
asynchronous retries off (the next run is the retry) and two retries of the rule's delivery
(Amazon EventBridge User Guide, "Event retry policy and using dead-letter queues"); each reads
the session table with strongly consistent ``GetItem`` to tell a gone or expired session from a
live one. The construct ids (``LogGroup``, ``Function``, ``Schedule``) are children of the
sweep's own construct, so its resources' logical ids are those each sweep has always had.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from . import assets
from .monitoring import alarms as alarm_defaults


@dataclass(frozen=True)
class SweepFunction:
    """How one sweep's function runs.

    Attributes:
        handler: the runtime handler (``session_expiry_runtime.sweeps.<module>.handler``).
        description: the function's description.
        schedule_description: the EventBridge rule's description.
        timeout: the function's timeout.
        memory_size: the function's memory, MiB.
    """

    handler: str
    description: str
    schedule_description: str
    timeout: Duration
    memory_size: int


def add_sweep_function(
    scope: Construct,
    spec: SweepFunction,
    *,
    table: dynamodb.ITable,
    role: iam.IRole,
    interval: Duration,
    environment: Mapping[str, str],
    log_retention: logs.RetentionDays,
    statements: Iterable[iam.PolicyStatement] = (),
) -> tuple[lambda_.Function, events.Rule]:
    """The sweep's function (as ``role``) and its schedule, children of ``scope``.

    ``role`` gets ``statements`` (the sweep's own list calls), then ``dynamodb:GetItem`` on
    ``table`` and decrypt with the table's customer managed key, if any.

    Returns:
        The function and the rule that runs it every ``interval``.
    """
    log_group = logs.LogGroup(scope, "LogGroup", retention=log_retention)
    log_group.grant_write(role)
    function = assets.runtime_function(
        scope,
        "Function",
        description=spec.description,
        handler=spec.handler,
        role=role,
        log_group=log_group,
        timeout=spec.timeout,
        memory_size=spec.memory_size,
        environment=dict(environment),
        retry_attempts=0,
    )
    for statement in statements:
        role.add_to_principal_policy(statement)
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["dynamodb:GetItem"], resources=[table.table_arn])
    )
    if table.encryption_key is not None:
        table.encryption_key.grant_decrypt(role)
    schedule = events.Rule(
        scope,
        "Schedule",
        description=spec.schedule_description,
        schedule=events.Schedule.rate(interval),
        targets=[targets.LambdaFunction(function, retry_attempts=2)],
    )
    return function, schedule


def sum_metric(namespace: str, name: str, options: Mapping[str, Any]) -> cloudwatch.Metric:
    """The embedded metric ``name`` in ``namespace``: Sum over the alarms' period unless
    ``options`` (any `cloudwatch.Metric` option) says otherwise."""
    props: dict[str, Any] = {
        "statistic": cloudwatch.Stats.SUM,
        "period": alarm_defaults.ALARM_PERIOD,
        **options,
    }
    return cloudwatch.Metric(namespace=namespace, metric_name=name, **props)
