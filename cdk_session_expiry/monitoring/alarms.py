"""CloudWatch alarm defaults of the cleanup pipeline.

Every alarm but one treats missing data as not breaching: no invocations means nothing to clean,
not a failure. The exception is the paused-cleanup alarm: its metric is written on every run of
the pause watch, so its absence means the watch stopped, and a pause would be silent
(`cleanup_paused_alarm`). Thresholds and periods are here so they can be read in one place.

Each alarm has one meaning, and its ``AlarmDescription`` (at most 1,024 characters, CloudWatch's
limit: Amazon CloudWatch API Reference, PutMetricAlarm) states it and ends with a link to its
runbook: ``Runbook: docs/operating.md#alarm-<name>``, a section of the operator's page of the
documentation site giving the meaning, the likely causes and the first command to run: the
page's path in the repository plus the section's anchor (each section sets its id explicitly,
``{#alarm-<name>}``, so a retitled heading keeps it). With ``alarm_runbook_base_url`` (where the
operator hosts that page) `link_runbooks` replaces ``docs/operating.md`` with it in every
description once the construct is complete. ``tests/infra/test_alarm_runbooks.py`` checks every
alarm of a stack with every feature on against the page, and against a base URL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol
from urllib.parse import urlsplit

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from .. import _runtime_contract as contract
from ..validation import check_duration_below, check_duration_range, is_token

#: Period of every alarm's metric.
ALARM_PERIOD = Duration.minutes(5)
#: Default iterator age threshold: far below the stream's 24 h retention, so there is time to
#: act before records age out, and far above a healthy iterator age (seconds).
DEFAULT_ITERATOR_AGE_THRESHOLD = Duration.hours(1)
#: Iterator age thresholds must stay below the stream retention, or the alarm fires too late.
STREAM_RETENTION = Duration.hours(24)

#: The page that holds every alarm's runbook section (relative to the repository: no hosted
#: documentation site yet).
RUNBOOK_PAGE = "docs/operating.md"
#: CloudWatch's limit on ``AlarmDescription`` (PutMetricAlarm: 0 to 1,024 characters).
MAX_DESCRIPTION = 1024
#: The longest ``alarm_runbook_base_url``: the longest description's text (878 characters, the
#: skipped-records alarm's) leaves 146 of CloudWatch's 1,024 for " Runbook: <url>#<anchor>"
#: (``tests/infra/test_alarm_runbooks.py`` links every alarm to a URL this long).
MAX_RUNBOOK_BASE_URL = 100
#: Each alarm's runbook anchor on `RUNBOOK_PAGE`.
RUNBOOK_ITERATOR_AGE = "alarm-iterator-age"
RUNBOOK_CLEANUP_ERRORS = "alarm-cleanup-errors"
RUNBOOK_THROTTLES = "alarm-throttles"
RUNBOOK_ON_FAILURE_DESTINATION = "alarm-on-failure-destination"
RUNBOOK_SKIPPED_RECORDS = "alarm-skipped-records"
RUNBOOK_TTL_HEALTH = "alarm-ttl-health"
RUNBOOK_EXPIRY_SWEEPER_ERRORS = "alarm-expiry-sweeper-errors"
RUNBOOK_ORPHAN_GRANTS = "alarm-orphan-grants"
RUNBOOK_GRANT_SWEEP_INCOMPLETE = "alarm-grant-sweep-incomplete"
RUNBOOK_GRANT_CEILING = "alarm-grant-ceiling"
RUNBOOK_GRANT_SWEEP_ERRORS = "alarm-grant-sweep-errors"
RUNBOOK_ORPHAN_TOOL_SESSIONS = "alarm-orphan-tool-sessions"
RUNBOOK_TOOL_SESSION_SWEEP_ERRORS = "alarm-tool-session-sweep-errors"
RUNBOOK_CLEANUP_PAUSED = "alarm-cleanup-paused"
RUNBOOK_PAUSE_WATCH_ERRORS = "alarm-pause-watch-errors"
RUNBOOK_CIRCUIT_BREAKER_ERRORS = "alarm-circuit-breaker-errors"
RUNBOOK_ARCHIVE_DELIVERY = "alarm-archive-delivery"
RUNBOOK_CHANGE_STREAM_ITERATOR_AGE = "alarm-change-stream-iterator-age"
RUNBOOK_CLAIM_REQUESTS_REFUSED = "alarm-claim-requests-refused"
RUNBOOK_CLAIM_REGISTRAR_ERRORS = "alarm-claim-registrar-errors"


def retention_text(retention: Duration) -> str:
    """How a change source's retention reads in an alarm or warning: "24 hours" for a DynamoDB
    stream, "7 days" (CDK's human string) otherwise."""
    if not retention.is_unresolved() and retention.to_seconds() == STREAM_RETENTION.to_seconds():
        return "24 hours"
    return retention.to_human_string()


def runbook_link(anchor: str) -> str:
    """``docs/operating.md#<anchor>``: where an alarm's runbook section is."""
    return f"{RUNBOOK_PAGE}#{anchor}"


def described(text: str, anchor: str) -> str:
    """An alarm description: ``text`` (the alarm's one meaning, causes, what to do) followed by
    ``Runbook: docs/operating.md#<anchor>``.

    Raises:
        ValueError: the result is longer than CloudWatch's 1,024 characters.
    """
    description = f"{text} Runbook: {runbook_link(anchor)}"
    if len(description) > MAX_DESCRIPTION:
        raise ValueError(
            f"alarm description of {len(description)} characters for #{anchor}: expected at "
            f"most {MAX_DESCRIPTION} (CloudWatch's limit)"
        )
    return description


def check_runbook_base_url(value: str | None) -> None:
    """Reject an ``alarm_runbook_base_url`` that is not an https URL a paged engineer can open:
    a host, no whitespace, no ``#`` fragment (each alarm appends ``#alarm-<name>``).

    Raises:
        ValueError: the message names the value and what is expected.
    """
    if value is None or is_token(value):
        return
    parsed = urlsplit(value)
    if (
        parsed.scheme != "https"
        or not parsed.hostname
        or "#" in value
        or any(c.isspace() or not c.isprintable() for c in value)
        or len(value) > MAX_RUNBOOK_BASE_URL
    ):
        raise ValueError(
            f"alarm_runbook_base_url={value!r}: expected an https:// URL of the operator's "
            f"page, with a host, no '#' fragment (each alarm appends '#alarm-<name>'), no "
            f"whitespace and at most {MAX_RUNBOOK_BASE_URL} characters, e.g. "
            "'https://docs.example.com/session-expiry/operating/'"
        )


def link_runbooks(scope: Construct, base_url: str | None) -> None:
    """Point the runbook link of every alarm under ``scope`` at ``base_url``
    (``alarm_runbook_base_url``): ``Runbook: docs/operating.md#<anchor>`` becomes
    ``Runbook: <base_url>#<anchor>``. ``None`` keeps `RUNBOOK_PAGE`.

    Done once, when the construct is complete, rather than through every alarm's builder: the
    link is the last words of each description (`described`), so one place decides it.

    Raises:
        ValueError: a description would exceed CloudWatch's 1,024 characters.
    """
    if base_url is None:
        return
    suffix = f" Runbook: {RUNBOOK_PAGE}#"
    for child in scope.node.find_all():
        if not isinstance(child, cloudwatch.CfnAlarm):
            continue
        description = child.alarm_description
        if not isinstance(description, str) or suffix not in description:
            continue
        text, anchor = description.rsplit(suffix, 1)
        linked = f"{text} Runbook: {base_url}#{anchor}"
        if not is_token(base_url) and len(linked) > MAX_DESCRIPTION:
            raise ValueError(
                f"alarm_runbook_base_url={base_url!r}: the description of #{anchor} would be "
                f"{len(linked)} characters; expected at most {MAX_DESCRIPTION} (CloudWatch's "
                "limit): a shorter URL"
            )
        child.alarm_description = linked


def _alarm(
    scope: Construct,
    construct_id: str,
    *,
    metric: cloudwatch.IMetric,
    threshold: float,
    description: str,
    actions: Sequence[cloudwatch.IAlarmAction],
    periods: int = 1,
    missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
) -> cloudwatch.Alarm:
    """An alarm above ``threshold`` in ``periods`` of ``periods`` periods (default 1 of 1),
    missing data as ``missing`` (default not breaching)."""
    alarm = cloudwatch.Alarm(
        scope,
        construct_id,
        metric=metric,
        threshold=threshold,
        evaluation_periods=periods,
        datapoints_to_alarm=periods,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treat_missing_data=missing,
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
    retention: Duration = STREAM_RETENTION,
) -> cloudwatch.Alarm:
    """Maximum IteratorAge (milliseconds) above ``threshold``: cleanup is falling behind the
    change source, which keeps records ``retention``."""
    return _alarm(
        scope,
        "IteratorAgeAlarm",
        metric=metric,
        threshold=threshold.to_milliseconds(),
        description=described(
            f"Session cleanup lags more than {threshold.to_human_string()} behind the stream; "
            f"records older than {retention_text(retention)} leave the stream and are never "
            "cleaned.",
            RUNBOOK_ITERATOR_AGE,
        ),
        actions=actions,
    )


#: What an errors alarm says when it fires, by the function it watches.
CLEANUP_ERRORS_DESCRIPTION = described(
    "The session cleanup function failed as a whole (not one record); failed batches are "
    "retried, bisected and finally sent to the on-failure destination.",
    RUNBOOK_CLEANUP_ERRORS,
)
TOOL_SESSION_SWEEPER_ERRORS_DESCRIPTION = described(
    "The AgentCore tool-session sweep did not finish a run: a list, read or Stop call failed, "
    "or the run reached its time guard; the next run retries.",
    RUNBOOK_TOOL_SESSION_SWEEP_ERRORS,
)
GRANT_SWEEPER_ERRORS_DESCRIPTION = described(
    "The session grant sweep could not check or retire some KMS grants; the next run retries them.",
    RUNBOOK_GRANT_SWEEP_ERRORS,
)
SWEEPER_ERRORS_DESCRIPTION = described(
    "The session expiry sweeper failed to delete some due sessions (or to query "
    "its index); the next run retries them and time to live remains the backstop.",
    RUNBOOK_EXPIRY_SWEEPER_ERRORS,
)
PAUSE_WATCH_ERRORS_DESCRIPTION = described(
    "The paused-cleanup watch could not read the cleanup's event source mapping: while it "
    "fails, a paused cleanup raises no alarm before its records leave the stream.",
    RUNBOOK_PAUSE_WATCH_ERRORS,
)
CIRCUIT_BREAKER_ERRORS_DESCRIPTION = described(
    "The session cleanup's circuit breaker could not read or change the event source mapping or "
    "its own record (or refused a mapping whose starting position is LATEST): it may not open "
    "on an alarm, or not resume the cleanup after a probe.",
    RUNBOOK_CIRCUIT_BREAKER_ERRORS,
)

CLAIM_REGISTRAR_ERRORS_DESCRIPTION = described(
    "The claim registrar failed as a whole: SessionStore calls that record a connection, an "
    "AgentCore session or a grant fail (create, attach_*, create_grant raise) until it works.",
    RUNBOOK_CLAIM_REGISTRAR_ERRORS,
)
CLAIM_REQUESTS_REFUSED_DESCRIPTION = described(
    "The claim registrar refused to claim or release ids for a session incarnation that is not "
    "its key's live one: a writer asking for another session's key (a forgery attempt), or a "
    "session that ended while one of its own ids was being recorded. Nothing was written.",
    RUNBOOK_CLAIM_REQUESTS_REFUSED,
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
        description=described(
            "The session cleanup function was throttled; cleanup is delayed.", RUNBOOK_THROTTLES
        ),
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
        description=described(
            "Session cleanup gave up on stream records; the queue holds their shard and "
            "sequence numbers, replayable from the stream only within its 24 hour retention.",
            RUNBOOK_ON_FAILURE_DESTINATION,
        ),
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
        description=described(
            f"Time to live deleted no session in {window.to_human_string()} while sessions were "
            "written: TTL values in milliseconds or not a Number, the wrong TTL attribute name, "
            "or TTL disabled on the table. (Expected when every session is ended explicitly.)",
            RUNBOOK_TTL_HEALTH,
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
        retention: Duration = STREAM_RETENTION,
    ) -> None:
        self.iterator_age = iterator_age_alarm(
            scope,
            metric=iterator_age,
            threshold=iterator_age_threshold,
            actions=actions,
            retention=retention,
        )
        self.errors = errors_alarm(scope, function=function, actions=actions)
        self.throttles = throttles_alarm(scope, function=function, actions=actions)
        self.failure = destination.failure_alarm(scope, actions)

    def all(self) -> list[cloudwatch.Alarm]:
        """The four alarms, in a new list."""
        return [self.iterator_age, self.errors, self.throttles, self.failure]


def check_iterator_age_threshold(
    threshold: Duration, retention: Duration = STREAM_RETENTION
) -> None:
    """Reject an ``alarm_iterator_age_threshold`` below 1 minute or not below the change
    source's ``retention`` (default a DynamoDB stream's 24 hours: the alarm would fire after the
    records are gone).

    Raises:
        ValueError: the message names the value and the expected range.
    """
    check_duration_below(
        "alarm_iterator_age_threshold",
        threshold,
        minimum=Duration.minutes(1),
        limit=retention,
    )


def ttl_health_alarm_of_table(
    scope: Construct,
    *,
    table: dynamodb.ITable,
    swept: cloudwatch.IMetric | None,
    window: Duration,
    actions: Sequence[cloudwatch.IAlarmAction],
) -> cloudwatch.Alarm:
    """`ttl_health_alarm` on ``table``'s ``TimeToLiveDeletedItemCount`` and consumed write
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
#: without sequence number (it cannot be reported for retry); and a Kinesis ``REMOVE`` of an
#: item the table still holds (``ItemStillInTable``: only a record put into the change stream by
#: another writer produces it). ``NotRemove``, ``DuplicateInBatch`` and ``OtherRegion`` are
#: harmless and not watched.
LOST_CLEANUP_CAUSES: tuple[str, ...] = (
    contract.CAUSE_NO_OLD_IMAGE,
    contract.CAUSE_MISSING_ATTRIBUTES,
    contract.CAUSE_NO_SEQUENCE_NUMBER,
    contract.CAUSE_ITEM_STILL_IN_TABLE,
)


#: ``ResourcesRefused`` refusals the skipped-records alarm watches: only a forged image or a
#: writer that bypasses ``SessionStore`` produces them (``Superseded`` and ``Legacy`` happen in
#: normal operation and are counted only; the runtime decides which from the ownership record,
#: never from the image's times).
ALARMED_REFUSALS: tuple[str, ...] = contract.ALARMED_REFUSALS

#: What the skipped-records alarm says, and what to do first (``docs/operating.md`` has one runbook
#: entry per cause, ``docs/ownership.md`` more). At most 1,024 characters (CloudWatch's limit).
SKIPPED_RECORDS_DESCRIPTION = described(
    "Session cleanup skipped work for good. RecordsSkipped NoOldImage/MissingAttributes/"
    "NoSequenceNumber: a stream or image problem; ItemStillInTable: a REMOVE put into the "
    "Kinesis change stream for a live item (forged; nothing done). ScratchPrefixesRefused, "
    "GrantsRefused, ResourcesRefused NotOwned/Unclaimed: a removed item named a scratch prefix, "
    "grant, connection or AgentCore session its session did not own, so nothing was deleted, "
    "retired, closed or stopped; a forged item or a writer bypassing SessionStore. First: the "
    "cleanup log's 'ownership' line names each id and reason; find who wrote the item (CloudTrail "
    "data events on the table); the named resources belong to another session and stay as they "
    "are; resources the removed session did own end by their own limits (WebSocket 2 h, AgentCore "
    "idle timeout, the grant sweep, the scratch lifecycle rule). One entry per cause.",
    RUNBOOK_SKIPPED_RECORDS,
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

    ``skipped`` maps each of `LOST_CLEANUP_CAUSES` to its ``RecordsSkipped`` metric;
    ``refused`` is ``ScratchPrefixesRefused`` (a scratch prefix that is not the session's own,
    ``<root>[<tenant>/]<session id>/<incarnation>/`` from the record's keys, is never deleted);
    ``grants_refused`` is ``GrantsRefused`` (a grant the old image named that KMS does not show
    named for the record's key, or a grant token without a grant id, is never retired);
    ``resources_refused`` maps each of `ALARMED_REFUSALS` to its ``ResourcesRefused``
    metric (an id whose ownership record names another session, ``NotOwned``, or that has no
    ownership record though its item was written with them, ``Unclaimed``: never acted on).
    One metric-math alarm on their sum (each ``FILL``-ed with 0: the runtime writes no datapoint
    when it skips nothing) above 0 (construct id ``SkippedRecordsAlarm``); the runbook is in
    `SKIPPED_RECORDS_DESCRIPTION`.
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
        description=described(
            "The grant sweep stopped at its time guard (or a failed ListGrants) before the last "
            "grant of the key. The next run resumes where it stopped (a marker in the ownership "
            "table), so the rest is checked, but a pass over the key takes more than one "
            "interval and orphans wait longer. Raise the grant sweep function's timeout "
            "(grant_sweep.function, up to 15 minutes), shorten grant_sweep_interval, or reduce "
            "the grants on the key (e.g. a grant_key per application).",
            RUNBOOK_GRANT_SWEEP_INCOMPLETE,
        ),
        actions=actions,
    )


def grant_ceiling_alarm(
    scope: Construct,
    *,
    metric: cloudwatch.IMetric,
    threshold: int,
    quota: int,
    actions: Sequence[cloudwatch.IAlarmAction],
) -> cloudwatch.Alarm:
    """``GrantsOnKey`` above ``threshold`` (80 % of ``quota``) when a grant sweep pass
    finished (construct id ``CeilingAlarm``); missing data (no pass finished in the period)
    keeps the last state."""
    return _alarm(
        scope,
        "CeilingAlarm",
        metric=metric,
        threshold=threshold,
        description=described(
            f"The grant key holds more than {threshold:,} grants, 80 % of its quota of "
            f"{quota:,} (KMS 'Grants per KMS key'). Past the quota CreateGrant fails and new "
            "sessions get no grant. Find who holds them (this store's grants are named "
            "session-expiry:...), retire orphans, raise the quota (Service Quotas) and "
            "grant_key_grant_quota with it, or give applications a grant_key each.",
            RUNBOOK_GRANT_CEILING,
        ),
        actions=actions,
        missing=cloudwatch.TreatMissingData.IGNORE,
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
        description=described(
            "The grant sweep retired KMS grants whose session was gone: the stream path missed "
            "those sessions (stream outage, unreplayed on-failure messages, or a crash while "
            "creating a grant). Check the iterator age and failure queue alarms; the sessions' "
            "connections and scratch data may need the same attention.",
            RUNBOOK_ORPHAN_GRANTS,
        ),
        actions=actions,
    )


def orphan_tool_sessions_alarm(
    scope: Construct, *, metric: cloudwatch.IMetric, actions: Sequence[cloudwatch.IAlarmAction]
) -> cloudwatch.Alarm:
    """``OrphanToolSessionsStopped`` above 0 in a period (construct id
    ``OrphanToolSessionsAlarm``)."""
    return _alarm(
        scope,
        "OrphanToolSessionsAlarm",
        metric=metric,
        threshold=0,
        description=described(
            "The tool-session sweep stopped AgentCore code interpreter or browser sessions whose "
            "session had been gone longer than the stream path's bound: the stream path missed "
            "those sessions (stream outage, unreplayed on-failure messages). Check the iterator "
            "age and failure queue alarms; the sessions' other resources may need the same "
            "attention.",
            RUNBOOK_ORPHAN_TOOL_SESSIONS,
        ),
        actions=actions,
    )


# --- issue 21: a paused cleanup is loud before it is lossy ---------------------------------

#: Default threshold of the paused-cleanup alarm: half the stream's 24 hour retention, so the
#: records written since the pause still have 12 hours in the stream when it fires.
DEFAULT_CLEANUP_PAUSED_AFTER = Duration.hours(12)
#: One run of the pause watch (every 5 minutes): a shorter threshold cannot be told apart.
MIN_CLEANUP_PAUSED_AFTER = Duration.minutes(5)
#: Periods (5 minutes each) the paused-cleanup alarm needs, all breaching or missing: one late
#: or skipped run of the watch is no page, a watch silent for 15 minutes is.
CLEANUP_PAUSED_PERIODS = 3


def cleanup_paused_fire_time(threshold: Duration) -> Duration:
    """How long after a pause began the paused-cleanup alarm fires, at the latest, for a
    ``threshold`` (``alarm_cleanup_paused_after``): ``threshold`` + 3 x 5 minutes.

    The watch writes ``CleanupPausedSeconds`` every 5 minutes (one alarm period), so the first
    value above the threshold comes at most one period after it; the alarm then needs the two
    periods after that one too (3 of 3: `CLEANUP_PAUSED_PERIODS`) — 15 minutes in all.
    """
    slack = CLEANUP_PAUSED_PERIODS * ALARM_PERIOD.to_seconds()
    return Duration.seconds(threshold.to_seconds() + slack)


def largest_cleanup_paused_after(retention: Duration = STREAM_RETENTION) -> Duration:
    """The largest ``alarm_cleanup_paused_after`` (whole seconds) whose alarm fires before the
    records start to leave a change source keeping them ``retention``: ``retention`` - 15
    minutes - 1 second (23 hours 44 minutes 59 seconds on a DynamoDB stream)."""
    slack = CLEANUP_PAUSED_PERIODS * ALARM_PERIOD.to_seconds()
    return Duration.seconds(retention.to_seconds() - slack - 1)


def check_cleanup_paused_after(value: Duration, retention: Duration = STREAM_RETENTION) -> None:
    """Reject an ``alarm_cleanup_paused_after`` below 5 minutes, not whole seconds (the alarm's
    threshold), or whose alarm would fire (`cleanup_paused_fire_time`, 15 minutes after
    it) at or after the records start to leave the change source: its ``retention``, default
    a DynamoDB stream's 24 hours. The largest value accepted is
    `largest_cleanup_paused_after`.

    Raises:
        ValueError: the message names the value, when its alarm would fire and the largest
            value accepted.
    """
    if is_token(value):
        return
    largest = largest_cleanup_paused_after(retention)
    bounds = (
        f"at least {MIN_CLEANUP_PAUSED_AFTER.to_human_string()} and at most "
        f"{exact_text(largest)} (Duration.seconds({int(largest.to_seconds())}))"
    )
    seconds = value.to_seconds(integral=False)
    if seconds != int(seconds):
        raise ValueError(
            f"alarm_cleanup_paused_after={value.to_human_string()}: expected a whole number "
            f"of seconds, {bounds}"
        )
    name = f"alarm_cleanup_paused_after={exact_text(value)}"
    if seconds < MIN_CLEANUP_PAUSED_AFTER.to_seconds():
        raise ValueError(f"{name}: expected {bounds}")
    fires = cleanup_paused_fire_time(value)
    if fires.to_seconds() >= retention.to_seconds():
        raise ValueError(
            f"{name}: its alarm needs {CLEANUP_PAUSED_PERIODS} of {CLEANUP_PAUSED_PERIODS} "
            "five-minute periods above it and fires up to 15 minutes later, "
            f"{exact_text(fires)} after the pause, not before records start to leave the "
            f"stream (kept {retention_text(retention)}); expected {bounds}"
        )


def exact_text(duration: Duration) -> str:
    """A whole-seconds Duration in days, hours, minutes and seconds, none dropped (CDK's
    ``to_human_string`` drops the seconds of 23 hours 44 minutes 59 seconds)."""
    rest = int(duration.to_seconds())
    parts = []
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count != 1 else ''}")
    return " ".join(parts) or "0 seconds"


def cleanup_paused_alarm(
    scope: Construct,
    *,
    metric: cloudwatch.IMetric,
    threshold: Duration,
    actions: Sequence[cloudwatch.IAlarmAction],
    retention: Duration = STREAM_RETENTION,
) -> cloudwatch.Alarm:
    """Maximum ``CleanupPausedSeconds`` above ``threshold``, or no value, in 3 of 3 periods
    (construct id ``CleanupPausedAlarm``; missing data breaching).

    One meaning: the cleanup may have been paused longer than ``threshold`` and no one can
    tell otherwise — its event source mapping has been disabled (or the circuit breaker open)
    that long, or the pause watch, which writes a value on every run, stopped for 15 minutes
    (a disabled or deleted rule, throttled invocations, errors). The state reason says which
    (values above the threshold, or no data points). Missing data as breaching suits "a metric
    that continually reports data" (Amazon CloudWatch User Guide, "Configuring how CloudWatch
    alarms treat missing data")."""
    return _alarm(
        scope,
        "CleanupPausedAlarm",
        metric=metric,
        threshold=threshold.to_seconds(),
        description=described(
            f"The session cleanup has been paused (its event source mapping disabled, or the "
            f"circuit breaker open through failed probes) for more than "
            f"{threshold.to_human_string()}, or no one can tell: records written since the "
            f"pause leave the stream {retention_text(retention)} after it and are then never "
            "cleaned; records older than max_record_age at resume go to the on-failure "
            "destination. Resume it, or know why not. No data (the state reason says no "
            "datapoints): the pause watch itself stopped writing its value for 15 minutes; "
            "first action: check its schedule rule is enabled and its function's errors and "
            "throttles, then the mapping's State.",
            RUNBOOK_CLEANUP_PAUSED,
        ),
        actions=actions,
        periods=CLEANUP_PAUSED_PERIODS,
        missing=cloudwatch.TreatMissingData.BREACHING,
    )


def kinesis_iterator_age_alarm(
    scope: Construct,
    *,
    stream: kinesis.IStream,
    threshold: Duration,
    actions: Sequence[cloudwatch.IAlarmAction],
) -> cloudwatch.Alarm:
    """Maximum ``GetRecords.IteratorAgeMilliseconds`` of the Kinesis change stream above
    ``threshold`` (construct id ``ChangeStreamIteratorAgeAlarm``; Amazon Kinesis Data Streams
    Developer Guide, "Monitoring the Amazon Kinesis Data Streams service with CloudWatch")."""
    return _alarm(
        scope,
        "ChangeStreamIteratorAgeAlarm",
        metric=stream.metric_get_records_iterator_age_milliseconds(
            statistic=cloudwatch.Stats.MAXIMUM, period=ALARM_PERIOD
        ),
        threshold=threshold.to_milliseconds(),
        description=described(
            f"A reader of the Kinesis change stream lags more than "
            f"{threshold.to_human_string()} behind it; records older than the stream's "
            "retention are gone and never cleaned.",
            RUNBOOK_CHANGE_STREAM_ITERATOR_AGE,
        ),
        actions=actions,
    )


RUNBOOK_FEATURE_FLAGS_READ_FAILURES = "alarm-feature-flags-read-failures"
RUNBOOK_DEFERRED_WORK_AGE = "alarm-deferred-work-age"
RUNBOOK_DEFERRED_WORK_REFUSED = "alarm-deferred-work-refused"


def feature_flags_read_failures_alarm(
    scope: Construct, *, metric: cloudwatch.IMetric, actions: Sequence[cloudwatch.IAlarmAction]
) -> cloudwatch.Alarm:
    """``FeatureFlagsReadFailures`` above 0 in 2 of 3 periods (construct id
    ``FeatureFlagsReadFailuresAlarm``): the cleanup cannot read its flags from AppConfig."""
    alarm = _alarm(
        scope,
        "FeatureFlagsReadFailuresAlarm",
        metric=metric,
        threshold=0,
        description=described(
            "The session cleanup could not read its feature flags from AWS AppConfig (the data "
            "API failed, or the document is not a flag document) in 2 of the last 3 periods: "
            "the last flags it read stay in force (before any read: every lever as deployed), "
            "so a flag changed now does not reach it. Find why the reads fail.",
            RUNBOOK_FEATURE_FLAGS_READ_FAILURES,
        ),
        actions=actions,
    )
    cfn = alarm.node.default_child
    cfn.evaluation_periods = 3  # type: ignore[union-attr]
    cfn.datapoints_to_alarm = 2  # type: ignore[union-attr]
    return alarm


def deferred_work_age_alarm(
    scope: Construct,
    *,
    metric: cloudwatch.IMetric,
    threshold: Duration,
    actions: Sequence[cloudwatch.IAlarmAction],
) -> cloudwatch.Alarm:
    """Maximum ``DeferredWorkAgeSeconds`` above ``threshold`` (construct id
    ``DeferredWorkAgeAlarm``): work deferred by a feature flag has waited that long."""
    return _alarm(
        scope,
        "DeferredWorkAgeAlarm",
        metric=metric,
        threshold=threshold.to_seconds(),
        description=described(
            f"Cleanup work deferred by a feature flag (a step switched off, or enabled off) has "
            f"waited more than {threshold.to_human_string()}: a flag is still off, or the drain "
            "fails. Deferred work is kept 14 days; ownership records only 2 days past their "
            "session's end, after which a deferred connection, grant or AgentCore step no "
            "longer acts. Switch the flag back on, or know why not.",
            RUNBOOK_DEFERRED_WORK_AGE,
        ),
        actions=actions,
    )


def deferred_work_refused_alarm(
    scope: Construct, *, metric: cloudwatch.IMetric, actions: Sequence[cloudwatch.IAlarmAction]
) -> cloudwatch.Alarm:
    """``DeferredWorkRefused`` above 0 (construct id ``DeferredWorkRefusedAlarm``): the drain
    refused deferred work whose session is still in the table, or that it could not verify."""
    return _alarm(
        scope,
        "DeferredWorkRefusedAlarm",
        metric=metric,
        threshold=0,
        description=described(
            "The drain of deferred work refused a deferred record: the session table still holds "
            "its item in the same incarnation (the removal it describes did not happen), or the "
            "record could not be verified at all. Nothing was called for it; the item is kept in "
            "the deferred-work table, out of the drain's way, for an operator. Only the cleanup "
            "role may write that table: find who wrote the item or changed the session table, "
            "then delete or re-queue the item.",
            RUNBOOK_DEFERRED_WORK_REFUSED,
        ),
        actions=actions,
    )
