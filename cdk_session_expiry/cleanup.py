"""The cleanup function, its role and log group, and the event source mapping that feeds it.

* ``CleanupFunction``: ``CleanupLogGroup``, ``CleanupRole`` (the retiring principal of
  per-session grants) and ``CleanupFunction`` with the runtime's settings in its environment.
  The cleanup targets and optional features add their own variables and IAM statements.
* ``CleanupEventSource``: stream read, the on-failure destination (a new encrypted queue
  ``FailureQueue``, the queue given, or an S3 bucket) and ``CleanupEventSourceMapping``.

Every resource is created directly in the ``SessionExpiry`` scope with the ids it always had:
construct paths and logical IDs are a public contract.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from . import _runtime_contract as contract
from . import assets, failure_destination, ownership
from .filters import CleanupEventFilter, filter_criteria
from .monitoring import alarms as alarm_defaults
from .table import SessionAttributes

FAILURE_QUEUE_RETENTION = Duration.days(14)


def cleanup_environment(
    attributes: SessionAttributes, *, metrics_namespace: str, max_workers: int, dry_run: bool
) -> dict[str, str]:
    """The runtime settings the cleanup and the sweepers share (no table name, no targets):
    the session attribute names (with the incarnation's), metrics namespace, workers, dry run."""
    env = {
        **attributes.environment(),
        **ownership.attribute_environment(),
        contract.ENV_METRICS_NAMESPACE: metrics_namespace,
        contract.ENV_MAX_WORKERS: str(max_workers),
    }
    if dry_run:
        env[contract.ENV_DRY_RUN] = "true"
    return env


class CleanupFunction:
    """The cleanup function with its own role and log group (see the module docstring).

    ``code`` is the function's code asset. Default: the runtime alone
    (``assets.cleanup_function_code()``).
    """

    def __init__(
        self,
        scope: Construct,
        *,
        environment: Mapping[str, str],
        timeout: Duration,
        memory_size: int,
        log_retention: logs.RetentionDays,
        code: lambda_.Code | None = None,
    ) -> None:
        log_group = logs.LogGroup(scope, "CleanupLogGroup", retention=log_retention)
        self.role = iam.Role(
            scope,
            "CleanupRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Cleanup of expired and ended sessions (cdk-session-expiry)",
        )
        log_group.grant_write(self.role)
        self.function = assets.runtime_function(
            scope,
            "CleanupFunction",
            description="Cleans up after expired and ended sessions (cdk-session-expiry)",
            handler=contract.CLEANUP_HANDLER,
            role=self.role,
            log_group=log_group,
            timeout=timeout,
            memory_size=memory_size,
            environment=dict(environment),
            code=code,
        )


@dataclass(frozen=True)
class EventSourceSettings:
    """The props of the event source mapping (checked by
    ``validation.check_event_source_props``)."""

    event_filter: CleanupEventFilter
    batch_size: int
    max_batching_window: Duration | None
    parallelization_factor: int
    retry_attempts: int
    max_record_age: Duration
    enabled: bool
    #: A global table's (owner Region attribute, this Region): filtered on (``multi_region``).
    owner_region: tuple[str, str] | None = None


class CleanupEventSource:
    """The table's stream feeding the cleanup function, with its on-failure destination.

    With ``kinesis_stream`` (the Kinesis change source, ``change_source``) the mapping reads
    that Kinesis stream instead, with the same settings and its filter under ``data``.
    """

    def __init__(
        self,
        scope: Construct,
        cleanup: CleanupFunction,
        table: dynamodb.ITable,
        *,
        settings: EventSourceSettings,
        failure_queue: sqs.IQueue | None,
        failure_destination_bucket: s3.IBucket | None,
        kinesis_stream: kinesis.IStream | None = None,
    ) -> None:
        if failure_queue is None and failure_destination_bucket is None:
            failure_queue = sqs.Queue(
                scope,
                "FailureQueue",
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                retention_period=FAILURE_QUEUE_RETENTION,
            )
        self.failure_queue = failure_queue
        self.failure_destination_bucket = failure_destination_bucket
        if kinesis_stream is None:
            table.grant_stream_read(cleanup.function)
            source_arn = table.table_stream_arn
        else:
            kinesis_stream.grant_read(cleanup.function)
            source_arn = kinesis_stream.stream_arn
            # A REMOVE that came through Kinesis is read back from the table before it is
            # cleaned (session_expiry_runtime.records.kinesis_removals): anyone with
            # kinesis:PutRecord
            # could have written it. BatchGetItem only; the table's key if it has its own.
            cleanup.function.add_to_role_policy(
                iam.PolicyStatement(actions=["dynamodb:BatchGetItem"], resources=[table.table_arn])
            )
            if table.encryption_key is not None:
                table.encryption_key.grant_decrypt(cleanup.function)
        self.mapping = lambda_.EventSourceMapping(
            scope,
            "CleanupEventSourceMapping",
            target=cleanup.function,
            event_source_arn=source_arn,
            # TRIM_HORIZON on both sources: LATEST can skip records after the kill switch
            # toggles Enabled (awsdocs/aws-lambda-developer-guide#487).
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            filters=filter_criteria(
                settings.event_filter,
                owner_region=settings.owner_region,
                under_data=kinesis_stream is not None,
                table_name=table.table_name if kinesis_stream is not None else None,
            ),
            batch_size=settings.batch_size,
            max_batching_window=settings.max_batching_window,
            parallelization_factor=settings.parallelization_factor,
            bisect_batch_on_error=True,
            retry_attempts=settings.retry_attempts,
            max_record_age=settings.max_record_age,
            report_batch_item_failures=True,
            on_failure=self._on_failure(),
            support_s3_on_failure_destination=failure_destination_bucket is not None,
            metrics_config=lambda_.MetricsConfig(metrics=[lambda_.MetricType.EVENT_COUNT]),
            enabled=settings.enabled,
        )
        # The mapping is validated against the role when it is created.
        self.mapping.node.add_dependency(cleanup.role)

    def _on_failure(self) -> lambda_.IEventSourceDlq:
        if self.failure_queue is not None:
            return event_sources.SqsDlq(self.failure_queue)
        return failure_destination.S3FailureDestination(self.failure_destination_bucket)  # type: ignore[arg-type]

    def failure_alarm(
        self, scope: Construct, actions: Sequence[cloudwatch.IAlarmAction]
    ) -> cloudwatch.Alarm:
        """Visible messages of the queue, or records delivered to the bucket."""
        if self.failure_queue is not None:
            return alarm_defaults.failure_queue_alarm(
                scope, queue=self.failure_queue, actions=actions
            )
        return failure_destination.delivered_alarm(
            scope, mapping=self.mapping, actions=list(actions)
        )
