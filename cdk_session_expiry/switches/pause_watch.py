"""The pause watch: a paused cleanup is loud before it is lossy (always on).

A disabled event source mapping (``cleanup_enabled=False``, the kill switch, the circuit breaker)
stops the cleanup and keeps the stream position, but DynamoDB Streams keeps a record 24 hours
only; every other alarm watches what invocations do, so a paused cleanup would stay silent until
its records are gone. The construct therefore always adds (assembled by `PauseWatch`,
``Sessions/PauseWatch``):

* a function from the cleanup's code asset (handler
``session_expiry_runtime.switches.pause_watch.handler``,
  128 MiB, 30 seconds, asynchronous retries off: the next run is the retry) with its own role
  (``lambda:GetEventSourceMapping`` on the cleanup's mapping only) and log group, run every
  5 minutes by an EventBridge rule. Each run writes ``CleanupPausedSeconds`` (now - the mapping's
  ``LastModified`` while it is ``Disabled``/``Disabling``, or from the circuit breaker's first
  opening of its current run when that is earlier; 0 otherwise; dimension
  ``EventSourceMappingUUID``), on every run, 0 included. With ``circuit_breaker`` it also reads
  the breaker's record (`PauseWatch.count_breaker_pauses`: ``ssm:GetParameter`` on that
  parameter only);
* ``CleanupPausedAlarm``: its Maximum above ``alarm_cleanup_paused_after`` (12 hours by default; the
  alarm fires up to 15 minutes after it, which must still be before the stream's 24 hours:
  ``alarms.check_cleanup_paused_after``), **missing data breaching**, 3 of 3 five-minute periods.
  The watch writes a value on every run, so no value for 15 minutes means the watch itself stopped
  (its rule disabled or deleted, its invocations throttled and dropped, or failing — the errors
  alarm says which): the alarm's one meaning is "the cleanup may have been paused too long, and no
  one can tell otherwise". A separate heartbeat alarm would split that meaning in two for one more
  alarm a stack; the alarm's state reason tells the two apart (a value above the threshold, or no
  data points), and the runbook starts from it. Three periods, not one, so one late or skipped run
  (EventBridge's schedule and embedded-metric delivery are not to the second) is no page; a real
  pause is heard 10 minutes later than with one, against 12 hours;
* ``ErrorsAlarm`` on the watch's own errors: a watch that cannot read the mapping raises rather
  than report 0.

Where it runs, and its cost: its own tiny function, because the sweeps that could carry it are
optional (the expiry sweeper) or tied to ``grant_key`` (the grant sweep), and the check must run
whatever is configured. Per month (31 days), at us-east-1 list prices (Lambda arm64: $0.20 per
million requests, $0.0000133334 per GB-second; CloudWatch: $0.30 per custom metric, $0.10 per
standard alarm, $0.50 per GB of logs ingested): 8,928 invocations of about 0.1-0.3 s at 128 MiB,
about $0.002 of requests and $0.003 of duration (inside Lambda's free tier for most accounts);
one ``GetEventSourceMapping`` a run (Lambda API calls are not charged); about 1 KB of logs a run
(~9 MB, ~$0.005); and what dominates, one custom metric ($0.30) and two alarms ($0.20): about
$0.51 a month. A shorter schedule would only multiply the Lambda part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from .. import _runtime_contract as contract
from .. import assets
from ..monitoring import alarms as alarm_defaults

#: How often the watch reads the mapping (the alarms' period).
WATCH_INTERVAL = Duration.minutes(5)
WATCH_MEMORY_SIZE = 128
WATCH_TIMEOUT = Duration.seconds(30)


def metric_cleanup_paused_seconds(
    namespace: str, mapping: lambda_.IEventSourceMapping, **options: Any
) -> cloudwatch.Metric:
    """``CleanupPausedSeconds`` of ``mapping`` (seconds), Maximum over 5 minutes by default."""
    props: dict[str, Any] = {
        "statistic": cloudwatch.Stats.MAXIMUM,
        "period": alarm_defaults.ALARM_PERIOD,
        **options,
    }
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=contract.METRIC_CLEANUP_PAUSED_SECONDS,
        dimensions_map={
            contract.DIMENSION_EVENT_SOURCE_MAPPING: mapping.event_source_mapping_id,
            **props.pop("dimensions_map", {}),
        },
        **props,
    )


class PauseWatch(Construct):
    """The scheduled check and its alarms (see the module docstring).

    Args:
        mapping: the cleanup's event source mapping.
        paused_after: ``alarm_cleanup_paused_after``.
        log_retention: retention of the watch's log group.
        metrics_namespace: namespace of the metric.
        alarm_actions: actions of both alarms.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        mapping: lambda_.EventSourceMapping,
        paused_after: Duration,
        log_retention: logs.RetentionDays,
        metrics_namespace: str,
        alarm_actions: Sequence[cloudwatch.IAlarmAction],
        retention: Duration = alarm_defaults.STREAM_RETENTION,
    ) -> None:
        super().__init__(scope, id)
        self.mapping = mapping
        self.metrics_namespace = metrics_namespace
        log_group = logs.LogGroup(self, "LogGroup", retention=log_retention)
        #: The watch's own role: read the cleanup's mapping, write its log group.
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Watches whether the session cleanup is paused (cdk-session-expiry)",
        )
        log_group.grant_write(self.role)
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["lambda:GetEventSourceMapping"],
                resources=[mapping.event_source_mapping_arn],
            )
        )
        #: The watch function.
        self.function = assets.runtime_function(
            self,
            "Function",
            description="Reports how long the session cleanup has been paused (cdk-session-expiry)",
            handler=contract.PAUSE_WATCH_HANDLER,
            role=self.role,
            log_group=log_group,
            timeout=WATCH_TIMEOUT,
            memory_size=WATCH_MEMORY_SIZE,
            environment={
                contract.ENV_EVENT_SOURCE_MAPPING_UUID: mapping.event_source_mapping_id,
                contract.ENV_METRICS_NAMESPACE: metrics_namespace,
            },
            retry_attempts=0,
        )
        #: The EventBridge rule that runs the watch every 5 minutes.
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Runs the session cleanup's pause watch (cdk-session-expiry)",
            schedule=events.Schedule.rate(WATCH_INTERVAL),
            targets=[targets.LambdaFunction(self.function, retry_attempts=2)],
        )
        #: ``CleanupPausedSeconds`` above ``paused_after``.
        self.paused_alarm = alarm_defaults.cleanup_paused_alarm(
            self,
            metric=self.metric_cleanup_paused_seconds(),
            threshold=paused_after,
            actions=alarm_actions,
            retention=retention,
        )
        #: Any error of the watch (it could not read the mapping).
        self.errors_alarm = alarm_defaults.errors_alarm(
            self,
            function=self.function,
            actions=alarm_actions,
            description=alarm_defaults.PAUSE_WATCH_ERRORS_DESCRIPTION,
        )

    def count_breaker_pauses(self, parameter: ssm.IStringParameter) -> None:
        """Count a circuit breaker's pause from its first opening: the watch reads the breaker's
        record in ``parameter`` (environment ``SESSION_EXPIRY_BREAKER_STATE_PARAMETER``,
        ``ssm:GetParameter`` on that parameter only). Each failed probe disables the mapping
        again and moves its ``LastModified``; without the record such a breaker would never
        reach the paused-cleanup alarm (``session_expiry_runtime.switches.pause_watch``)."""
        self.function.add_environment(
            contract.ENV_BREAKER_STATE_PARAMETER, parameter.parameter_name
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["ssm:GetParameter"], resources=[parameter.parameter_arn])
        )

    def metric_cleanup_paused_seconds(self, **options: Any) -> cloudwatch.Metric:
        """``CleanupPausedSeconds`` (seconds), Maximum over 5 minutes by default."""
        return metric_cleanup_paused_seconds(self.metrics_namespace, self.mapping, **options)
