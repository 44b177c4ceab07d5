"""CloudWatch alarm defaults of the cleanup pipeline.

Every alarm treats missing data as not breaching: no invocations means nothing to clean, not
a failure. Thresholds and periods are here so they can be read in one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from . import _runtime_contract as contract
from .validation import check_duration_below, check_duration_range, is_token

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


#: What an errors alarm says when it fires, by the function it watches.
CLEANUP_ERRORS_DESCRIPTION = (
    "The session cleanup function failed; failed batches are retried, bisected "
    "and finally sent to the on-failure queue."
)
GRANT_SWEEPER_ERRORS_DESCRIPTION = (
    "The session grant sweep could not check or retire some KMS grants; the next run retries them."
)
SWEEPER_ERRORS_DESCRIPTION = (
    "The session expiry sweeper failed to delete some due sessions (or to query "
    "its index); the next run retries them and time to live remains the backstop."
)


def errors_alarm(
    scope: Construct,
    *,
    function: lambda_.IFunction,
    actions: Sequence[cloudwatch.IAlarmAction],
    description: str = CLEANUP_ERRORS_DESCRIPTION,
) -> cloudwatch.Alarm:
    """Any invocation error of ``function`` within a period (construct id ``ErrorsAlarm``)."""
    return _alarm(
        scope,
        "ErrorsAlarm",
        metric=function.metric_errors(period=ALARM_PERIOD, statistic=cloudwatch.Stats.SUM),
        threshold=0,
        description=description,
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


# --- issue 6: expiry sweeper and TTL health -------------------------------------------------

#: The TTL health window is one alarm period: at least an hour (TTL deletes lag by minutes to
#: hours, shorter windows are noise) and at most a day.
MIN_TTL_HEALTH_WINDOW = Duration.hours(1)
MAX_TTL_HEALTH_WINDOW = Duration.days(1)


def ttl_health_alarm(
    scope: Construct,
    *,
    ttl_deleted: cloudwatch.IMetric,
    writes: cloudwatch.IMetric,
    swept: cloudwatch.IMetric | None,
    window: Duration,
    actions: Sequence[cloudwatch.IAlarmAction],
) -> cloudwatch.Alarm:
    """Time to live deleted nothing over ``window`` while the table was written.

    One period of exactly ``window``: ``IF(writes > 0 AND ttlDeleted (+ swept) == 0, 1, 0)``,
    each metric ``FILL``-ed with 0, since DynamoDB publishes no ``TimeToLiveDeletedItemCount``
    datapoint when TTL deletes nothing. With the expiry sweeper on, its ``SessionsSwept`` counts
    as a deletion too (the sweeper deletes most sessions before TTL does; it also finds nothing
    when TTL values are in milliseconds).
    """
    metrics: dict[str, cloudwatch.IMetric] = {"ttlDeleted": ttl_deleted, "writes": writes}
    deleted = "FILL(ttlDeleted, 0)"
    if swept is not None:
        metrics["swept"] = swept
        deleted += " + FILL(swept, 0)"
    expression = cloudwatch.MathExpression(
        expression=f"IF(FILL(writes, 0) > 0 AND {deleted} == 0, 1, 0)",
        using_metrics=metrics,
        period=window,
        label="Written, but nothing expired",
    )
    return _alarm(
        scope,
        "TtlHealthAlarm",
        metric=expression,
        threshold=0,
        description=(
            f"Time to live deleted no session in {window.to_human_string()} while sessions were "
            "written: TTL values in milliseconds or not a Number, the wrong TTL attribute name, "
            "or TTL disabled on the table. (Expected when every session is ended explicitly.)"
        ),
        actions=actions,
    )


def check_ttl_health_window(window: Duration) -> None:
    """Reject an ``alarm_ttl_health_window`` outside 1 hour..1 day or not whole minutes.

    Raises:
        ValueError: the message names the value and the expected range.
    """
    check_duration_range(
        "alarm_ttl_health_window",
        window,
        minimum=MIN_TTL_HEALTH_WINDOW,
        maximum=MAX_TTL_HEALTH_WINDOW,
    )
    if not is_token(window) and window.to_seconds(integral=False) % 60:
        raise ValueError(
            f"alarm_ttl_health_window={window.to_human_string()}: expected a whole number of "
            "minutes (a CloudWatch alarm period)"
        )


# --- the alarms one SessionExpiry creates ------------------------------------------------------


class _FailureDestination(Protocol):
    def failure_alarm(
        self, scope: Construct, actions: Sequence[cloudwatch.IAlarmAction]
    ) -> cloudwatch.Alarm: ...


class CleanupAlarms:
    """The cleanup pipeline's alarms, in ``scope`` with their fixed ids: iterator age, function
    errors, throttles, and the on-failure destination's alarm (from ``destination``)."""

    def __init__(
        self,
        scope: Construct,
        *,
        function: lambda_.IFunction,
        iterator_age: cloudwatch.IMetric,
        iterator_age_threshold: Duration,
        destination: _FailureDestination,
        actions: Sequence[cloudwatch.IAlarmAction],
    ) -> None:
        self.iterator_age = iterator_age_alarm(
            scope, metric=iterator_age, threshold=iterator_age_threshold, actions=actions
        )
        self.errors = errors_alarm(scope, function=function, actions=actions)
        self.throttles = throttles_alarm(scope, function=function, actions=actions)
        self.failure = destination.failure_alarm(scope, actions)

    def all(self) -> list[cloudwatch.Alarm]:
        """The four alarms, in a new list."""
        return [self.iterator_age, self.errors, self.throttles, self.failure]


def check_iterator_age_threshold(threshold: Duration) -> None:
    """Reject an ``alarm_iterator_age_threshold`` below 1 minute or not below the stream's
    24 hour retention (the alarm would fire after the records are gone).

    Raises:
        ValueError: the message names the value and the expected range.
    """
    check_duration_below(
        "alarm_iterator_age_threshold",
        threshold,
        minimum=Duration.minutes(1),
        limit=STREAM_RETENTION,
    )


def ttl_health_alarm_of_table(
    scope: Construct,
    *,
    table: dynamodb.ITable,
    swept: cloudwatch.IMetric | None,
    window: Duration,
    actions: Sequence[cloudwatch.IAlarmAction],
) -> cloudwatch.Alarm:
    """:func:`ttl_health_alarm` on ``table``'s ``TimeToLiveDeletedItemCount`` and consumed write
    capacity, Sum over ``window`` (plus the sweeper's ``swept`` when it is on)."""
    return ttl_health_alarm(
        scope,
        ttl_deleted=table.metric(
            "TimeToLiveDeletedItemCount", statistic=cloudwatch.Stats.SUM, period=window
        ),
        writes=table.metric_consumed_write_capacity_units(
            period=window, statistic=cloudwatch.Stats.SUM
        ),
        swept=swept,
        window=window,
        actions=actions,
    )


# --- issue 12: nothing skipped in silence -----------------------------------------------------

#: ``RecordsSkipped`` causes that mean a session's cleanup is lost (never retried): a REMOVE
#: without old image (a KEYS_ONLY or NEW_IMAGE stream: every session leaks), an old image
#: naming nothing the configured targets can clean (attributes missing or invalid), a record
#: without sequence number (it cannot be reported for retry). ``NotRemove`` and
#: ``DuplicateInBatch`` are harmless and not watched.
LOST_CLEANUP_CAUSES: tuple[str, ...] = (
    contract.CAUSE_NO_OLD_IMAGE,
    contract.CAUSE_MISSING_ATTRIBUTES,
    contract.CAUSE_NO_SEQUENCE_NUMBER,
)


#: ``ResourcesRefused`` refusals the skipped-records alarm watches: only a forged image or a
#: writer that bypasses ``SessionStore`` produces them (``Superseded``, ``Legacy`` and
#: ``ClaimExpired`` happen in normal operation and are counted only).
ALARMED_REFUSALS: tuple[str, ...] = contract.ALARMED_REFUSALS

#: What the skipped-records alarm says, and the runbook for each cause (README and
#: ``docs/ownership.md`` say more). At most 1,024 characters (CloudWatch's limit).
SKIPPED_RECORDS_DESCRIPTION = (
    "Session cleanup skipped work for good. RecordsSkipped NoOldImage/MissingAttributes/"
    "NoSequenceNumber: a stream or image problem. ScratchPrefixesRefused, "
    "GrantsRefused, ResourcesRefused NotOwned/Unclaimed: a removed item named a scratch prefix, "
    "grant, connection or AgentCore session its session did not own, so nothing was deleted, "
    "retired, closed or stopped; a forged item or a writer bypassing SessionStore. Runbook: the "
    "cleanup log's 'ownership' line names each id and reason; find who wrote the item (CloudTrail "
    "data events on the table); the named resources belong to another session and stay as they "
    "are; resources the removed session did own end by their own limits (WebSocket 2 h, AgentCore "
    "idle timeout, the grant sweep, the scratch lifecycle rule). Runbook for each cause: "
    "docs/operating.md, skipped-records runbook."
)


def skipped_records_alarm(
    scope: Construct,
    *,
    skipped: Mapping[str, cloudwatch.IMetric],
    refused: cloudwatch.IMetric,
    grants_refused: cloudwatch.IMetric,
    resources_refused: Mapping[str, cloudwatch.IMetric],
    actions: Sequence[cloudwatch.IAlarmAction],
) -> cloudwatch.Alarm:
    """Any record skipped for a cause that loses its cleanup, or a resource refused for a reason
    only forgery explains, within a period.

    ``skipped`` maps each of :data:`LOST_CLEANUP_CAUSES` to its ``RecordsSkipped`` metric;
    ``refused`` is ``ScratchPrefixesRefused`` (a scratch prefix that is not the session's own,
    ``<root>[<tenant>/]<session id>/<incarnation>/`` from the record's keys, is never deleted);
    ``grants_refused`` is ``GrantsRefused`` (a grant the old image named that KMS does not show
    named for the record's key, or a grant token without a grant id, is never retired);
    ``resources_refused`` maps each of :data:`ALARMED_REFUSALS` to its ``ResourcesRefused``
    metric (an id whose ownership record names another session, ``NotOwned``, or that has no
    ownership record though its item was written with them, ``Unclaimed``: never acted on).
    One metric-math alarm on their sum (each ``FILL``-ed with 0: the runtime writes no datapoint
    when it skips nothing) above 0 (construct id ``SkippedRecordsAlarm``); the runbook is in
    :data:`SKIPPED_RECORDS_DESCRIPTION`.
    """
    metrics: dict[str, cloudwatch.IMetric] = {
        f"skipped{cause}": metric for cause, metric in skipped.items()
    }
    metrics["refused"] = refused
    metrics["grantsRefused"] = grants_refused
    metrics.update({f"refused{reason}": m for reason, m in resources_refused.items()})
    expression = cloudwatch.MathExpression(
        expression=" + ".join(f"FILL({name}, 0)" for name in metrics),
        using_metrics=metrics,
        period=ALARM_PERIOD,
        label="Records whose cleanup was skipped for good",
    )
    return _alarm(
        scope,
        "SkippedRecordsAlarm",
        metric=expression,
        threshold=0,
        description=SKIPPED_RECORDS_DESCRIPTION,
        actions=actions,
    )


def grant_sweep_incomplete_alarm(
    scope: Construct, *, metric: cloudwatch.IMetric, actions: Sequence[cloudwatch.IAlarmAction]
) -> cloudwatch.Alarm:
    """``GrantSweepIncomplete`` above 0 in a period (construct id ``IncompleteAlarm``)."""
    return _alarm(
        scope,
        "IncompleteAlarm",
        metric=metric,
        threshold=0,
        description=(
            "The grant sweep stopped at its time guard (or a failed ListGrants) before the last "
            "grant of the key. Each run starts again from the first ListGrants page, so the "
            "grants past that point are never checked and their orphans never retired. Raise "
            "the grant sweep function's timeout (grant_sweep.function, up to 15 minutes) or "
            "reduce the grants on the key (e.g. a grant_key per application)."
        ),
        actions=actions,
    )


def orphan_grants_alarm(
    scope: Construct, *, metric: cloudwatch.IMetric, actions: Sequence[cloudwatch.IAlarmAction]
) -> cloudwatch.Alarm:
    """``OrphanGrantsRetired`` above 0 in a period (construct id ``OrphanGrantsAlarm``)."""
    return _alarm(
        scope,
        "OrphanGrantsAlarm",
        metric=metric,
        threshold=0,
        description=(
            "The grant sweep retired KMS grants whose session was gone: the stream path missed "
            "those sessions (stream outage, unreplayed on-failure messages, or a crash while "
            "creating a grant). Check the iterator age and failure queue alarms; the sessions' "
            "connections and scratch data may need the same attention."
        ),
        actions=actions,
    )
