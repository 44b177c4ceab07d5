"""CloudWatch alarm defaults of the cleanup pipeline.

Every alarm treats missing data as not breaching: no invocations means nothing to clean, not
a failure. Thresholds and periods are here so they can be read in one place.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

#: Period of every alarm's metric.
ALARM_PERIOD = Duration.minutes(5)
#: Default iterator age threshold: far below the stream's 24 h retention, so there is time to
#: act before records age out, and far above a healthy iterator age (seconds).
DEFAULT_ITERATOR_AGE_THRESHOLD = Duration.hours(1)
#: Iterator age thresholds must stay below the stream retention, or the alarm fires too late.
STREAM_RETENTION = Duration.hours(24)


def _alarm(
    scope: Construct,
    construct_id: str,
    *,
    metric: cloudwatch.IMetric,
    threshold: float,
    description: str,
    actions: Sequence[cloudwatch.IAlarmAction],
) -> cloudwatch.Alarm:
    alarm = cloudwatch.Alarm(
        scope,
        construct_id,
        metric=metric,
        threshold=threshold,
        evaluation_periods=1,
        datapoints_to_alarm=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        alarm_description=description,
    )
    for action in actions:
        alarm.add_alarm_action(action)
    return alarm


def iterator_age_alarm(
    scope: Construct,
    *,
    metric: cloudwatch.IMetric,
    threshold: Duration,
    actions: Sequence[cloudwatch.IAlarmAction],
) -> cloudwatch.Alarm:
    """Maximum IteratorAge (milliseconds) above ``threshold``: cleanup is falling behind."""
    return _alarm(
        scope,
        "IteratorAgeAlarm",
        metric=metric,
        threshold=threshold.to_milliseconds(),
        description=(
            f"Session cleanup lags more than {threshold.to_human_string()} behind the stream; "
            "records older than 24 hours leave the stream and are never cleaned."
        ),
        actions=actions,
    )


def errors_alarm(
    scope: Construct, *, function: lambda_.IFunction, actions: Sequence[cloudwatch.IAlarmAction]
) -> cloudwatch.Alarm:
    """Any invocation error of the cleanup function within a period."""
    return _alarm(
        scope,
        "ErrorsAlarm",
        metric=function.metric_errors(period=ALARM_PERIOD, statistic=cloudwatch.Stats.SUM),
        threshold=0,
        description="The session cleanup function failed; failed batches are retried, bisected "
        "and finally sent to the on-failure queue.",
        actions=actions,
    )


def throttles_alarm(
    scope: Construct, *, function: lambda_.IFunction, actions: Sequence[cloudwatch.IAlarmAction]
) -> cloudwatch.Alarm:
    """Any throttled invocation of the cleanup function within a period."""
    return _alarm(
        scope,
        "ThrottlesAlarm",
        metric=function.metric_throttles(period=ALARM_PERIOD, statistic=cloudwatch.Stats.SUM),
        threshold=0,
        description="The session cleanup function was throttled; cleanup is delayed.",
        actions=actions,
    )


def failure_queue_alarm(
    scope: Construct, *, queue: sqs.IQueue, actions: Sequence[cloudwatch.IAlarmAction]
) -> cloudwatch.Alarm:
    """Any message visible on the on-failure queue: a batch was given up on."""
    return _alarm(
        scope,
        "FailureQueueAlarm",
        metric=queue.metric_approximate_number_of_messages_visible(
            period=ALARM_PERIOD, statistic=cloudwatch.Stats.MAXIMUM
        ),
        threshold=0,
        description="Session cleanup gave up on stream records; the queue holds their shard and "
        "sequence numbers, replayable from the stream only within its 24 hour retention.",
        actions=actions,
    )
