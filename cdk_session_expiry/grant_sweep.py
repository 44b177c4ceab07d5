"""The grant sweep: a scheduled backstop for per-session KMS grants (on whenever ``grant_key``).

A KMS grant never expires (AWS KMS Developer Guide, "Grants in AWS KMS"): a grant whose
session's REMOVE record was never cleaned — a stream outage longer than its 24 hours, an
on-failure message never replayed, a crash inside ``SessionStore.create_grant`` — would keep its
grantee's key access for ever. Scratch objects have the lifecycle rule and WebSocket connections
end within API Gateway's limits; this sweep is the grants' backstop.

What it adds (assembled by `GrantSweep`):

* a function (same code asset and runtime as the cleanup function, handler
  ``session_expiry_runtime.sweeps.grant_sweeper.handler``) and its log group, run every
  ``grant_sweep_interval`` by an EventBridge rule; asynchronous retries are off (the next run
  is the retry). It runs **as the cleanup role**: KMS lets a grant's retiring principal retire
  it, and the session store names the cleanup role; an IAM permission alone would not do
  (KMS Developer Guide, "Retiring and revoking grants");
* on the cleanup role: ``kms:ListGrants`` on the grant key and ``dynamodb:GetItem`` on the
  table (plus decrypt with the table's customer managed key, if any);
* an alarm on ``GrantsOnKey`` above 80 % of KMS's grants-per-key quota
  (``grant_key_grant_quota``, 50,000 unless raised; a ``CreateGrant`` past it fails);
* an alarm on ``OrphanGrantsRetired`` above 0 (the stream path missed a session), one on
  ``GrantSweepIncomplete`` above 0 (a run stopped at its time guard before the key's last
  grant: the next run resumes where it stopped, from a marker in the ownership table, so a pass
  over the key takes more than one run) and one on the function's errors (a grant could not be
  checked or retired; the next run retries).

Each run lists the key's grants (``ListGrants``, 100 a page, from where the last run stopped)
and retires each grant the store created (its ``Name`` and retiring principal say so) whose
session is gone or expired, once the grant is older than the grace period (15 minutes), at
most 5 KMS requests a second (``SESSION_EXPIRY_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND`` on
``function``; KMS's request quotas are in the runtime module's docstring). See the runtime
module ``session_expiry_runtime.sweeps.grant_sweeper``.

Cost per run: one invocation (256 MB, usually seconds), one ``ListGrants`` per 100 grants of the
key, one strongly consistent ``GetItem`` (one read request unit for an item up to 4 KB) per
grant of the store older than the grace period — that is, about one per live session — and one
``RetireGrant`` per grant retired. At the default hourly interval with 10,000 live sessions:
24 invocations, 2,400 ListGrants and 240,000 read request units a day.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Duration, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from . import _runtime_contract as contract
from . import validation
from .monitoring import alarms as alarm_defaults
from .props import SessionExpiryProps
from .scheduled_sweep import SweepFunction, add_sweep_function, sum_metric

#: How often the grant sweep runs unless ``grant_sweep_interval`` says otherwise.
DEFAULT_GRANT_SWEEP_INTERVAL = Duration.hours(1)
MIN_GRANT_SWEEP_INTERVAL = Duration.minutes(5)
MAX_GRANT_SWEEP_INTERVAL = Duration.days(1)
GRANT_SWEEPER_MEMORY_SIZE = 256
GRANT_SWEEPER_TIMEOUT = Duration.minutes(5)
#: KMS's "Grants per KMS key" quota (AWS KMS Developer Guide, "Resource quotas"; adjustable).
DEFAULT_GRANT_QUOTA = 50_000
#: The largest ``grant_retire_budget`` accepted (requests a second): a bound, far above KMS's
#: default ``RetireGrant`` request rate of 50 a second (AWS KMS Developer Guide, "Request quotas").
MAX_RETIRE_GRANT_BUDGET = 10_000
#: The share of the quota on the key above which ``GrantCeilingAlarm`` fires.
GRANT_CEILING_SHARE = 0.8


#: How long past the event source mapping's ``max_record_age`` a grant whose session is gone but
#: whose ownership record is still held counts as pending on the stream path (its REMOVE record
#: may still be retried) rather than orphaned: the cleanup's retries are bounded by
#: ``max_record_age``, the margin covers the last attempt and the sweep's own period of sighting.
PENDING_MARGIN = Duration.hours(1)


def pending_environment(max_record_age: Duration) -> dict[str, str]:
    """``SESSION_EXPIRY_GRANT_SWEEP_PENDING_SECONDS`` = ``max_record_age`` + `PENDING_MARGIN`
    in seconds. An unresolved ``max_record_age`` (a token) gets the stream's 24 hour retention
    instead, the most any record can wait."""
    age = validation.STREAM_RETENTION if validation.is_token(max_record_age) else max_record_age
    seconds = int(age.to_seconds() + PENDING_MARGIN.to_seconds())
    return {contract.ENV_GRANT_SWEEP_PENDING_SECONDS: str(seconds)}


def check_grant_sweep_props(key: kms.IKey | None, interval: Duration | None) -> None:
    """Reject a ``grant_sweep_interval`` without ``grant_key``, or out of range.

    Raises:
        ValueError: the message names the value and what is expected.
    """
    if interval is None:
        return
    _needs_key(key, "grant_sweep_interval", validation.shown(interval))
    check_grant_sweep_interval(interval)


def check_grant_quota(key: kms.IKey | None, quota: int | None) -> None:
    """Reject a ``grant_key_grant_quota`` without ``grant_key``, or below 1.

    Raises:
        ValueError: the message names the value and what is expected.
    """
    if quota is None:
        return
    _needs_key(key, "grant_key_grant_quota", quota)
    if quota < 1:
        raise ValueError(
            f"grant_key_grant_quota={quota}: expected 1 or more (the grants the key may hold; "
            f"KMS's default quota is {DEFAULT_GRANT_QUOTA:,})"
        )


def _needs_key(key: kms.IKey | None, prop: str, shown: object) -> None:
    """Reject ``prop`` (set, shown as ``shown``) without ``grant_key``: ValueError."""
    if key is None:
        raise ValueError(
            f"{prop}={shown} is set without grant_key: expected a grant_key, or no {prop}"
        )


def check_grant_props(props: SessionExpiryProps) -> None:
    """Check the grant props of a `SessionExpiryProps`: ``grant_sweep_interval``,
    ``grant_key_grant_quota`` and ``grant_retire_budget``, each only with ``grant_key``.

    Raises:
        ValueError: the message names the value and what is expected.
    """
    check_grant_sweep_props(props.grant_key, props.grant_sweep_interval)
    check_grant_quota(props.grant_key, props.grant_key_grant_quota)
    check_retire_budget(props.grant_key, props.grant_retire_budget)


def check_retire_budget(key: kms.IKey | None, budget: int | None) -> None:
    """Reject a ``grant_retire_budget`` without ``grant_key``, or outside
    1..`MAX_RETIRE_GRANT_BUDGET` requests a second (a token, known only at deploy time, is not
    checked: the runtime rejects one below 1 when it starts).

    Raises:
        ValueError: the message names the value and what is expected.
    """
    if budget is None:
        return
    _needs_key(key, "grant_retire_budget", budget)
    if not Token.is_unresolved(budget) and not 1 <= budget <= MAX_RETIRE_GRANT_BUDGET:
        raise ValueError(
            f"grant_retire_budget={budget}: expected 1..{MAX_RETIRE_GRANT_BUDGET:,} RetireGrant "
            "requests a second for every cleanup invocation together (KMS's default request "
            "rate is 50 a second for the account and Region)"
        )


def check_grant_sweep_interval(interval: Duration) -> None:
    """Reject a ``grant_sweep_interval`` outside 5 minutes..1 day or not whole minutes.

    Raises:
        ValueError: the message names the value and what is expected.
    """
    validation.check_duration_range(
        "grant_sweep_interval",
        interval,
        minimum=MIN_GRANT_SWEEP_INTERVAL,
        maximum=MAX_GRANT_SWEEP_INTERVAL,
    )
    if not validation.is_token(interval) and interval.to_seconds(integral=False) % 60:
        raise ValueError(
            f"grant_sweep_interval={interval.to_human_string()}: expected a whole number of "
            "minutes (EventBridge rate expressions)"
        )


#: The grant sweep's function and schedule.
_FUNCTION = SweepFunction(
    handler=contract.GRANT_SWEEPER_HANDLER,
    description="Retires KMS grants of gone or expired sessions (cdk-session-expiry)",
    schedule_description="Runs the session grant sweep (cdk-session-expiry)",
    timeout=GRANT_SWEEPER_TIMEOUT,
    memory_size=GRANT_SWEEPER_MEMORY_SIZE,
)


class GrantSweep(Construct):
    """The scheduled grant sweep of one ``SessionExpiry`` (see the module docstring).

    Args:
        table: the session table.
        key: the grant key (``grant_key``).
        role: the cleanup role, the retiring principal of every grant the store creates.
        interval: how often the sweep runs.
        environment: the runtime variables (table, attribute names, grant key, retiring
            principal, metrics namespace, dry run).
        log_retention: retention of the sweep's log group.
        metrics_namespace: namespace of the runtime's embedded metrics.
        alarm_actions: actions of the four alarms.
        grant_quota: the grants the key may hold (KMS's quota, 50,000 unless raised): the
            ceiling alarm fires above `GRANT_CEILING_SHARE` of it.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table: dynamodb.ITable,
        key: kms.IKey,
        role: iam.IRole,
        interval: Duration,
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays,
        metrics_namespace: str,
        alarm_actions: Sequence[cloudwatch.IAlarmAction],
        grant_quota: int = DEFAULT_GRANT_QUOTA,
    ) -> None:
        super().__init__(scope, id)
        self.interval = interval
        #: The grant key (``grant_key``) whose grants the sweep lists.
        self.key = key
        self.metrics_namespace = metrics_namespace
        #: The grant sweep function (runs as the cleanup role) and the EventBridge rule that
        #: runs it every ``interval``.
        self.function, self.schedule = add_sweep_function(
            self,
            _FUNCTION,
            table=table,
            role=role,
            interval=interval,
            environment=environment,
            log_retention=log_retention,
            statements=[iam.PolicyStatement(actions=["kms:ListGrants"], resources=[key.key_arn])],
        )
        #: ``OrphanGrantsRetired`` above 0: the stream path missed a session.
        self.orphan_grants_alarm = alarm_defaults.orphan_grants_alarm(
            self, metric=self.metric_orphan_grants_retired(), actions=alarm_actions
        )
        #: ``GrantSweepIncomplete`` above 0: a run stopped before the key's last grant.
        self.incomplete_alarm = alarm_defaults.grant_sweep_incomplete_alarm(
            self, metric=self.metric_grant_sweep_incomplete(), actions=alarm_actions
        )
        #: ``GrantsOnKey`` above 80 % of ``grant_quota``: the key nears KMS's grant ceiling.
        self.ceiling_alarm = alarm_defaults.grant_ceiling_alarm(
            self,
            metric=self.metric_grants_on_key(period=interval),
            threshold=int(grant_quota * GRANT_CEILING_SHARE),
            quota=grant_quota,
            actions=alarm_actions,
        )
        #: Any error of the sweep function (a grant could not be checked or retired).
        self.errors_alarm = alarm_defaults.errors_alarm(
            self,
            function=self.function,
            actions=alarm_actions,
            description=alarm_defaults.GRANT_SWEEPER_ERRORS_DESCRIPTION,
        )

    def metric_orphan_grants_retired(self, **options: Any) -> cloudwatch.Metric:
        """``OrphanGrantsRetired`` (embedded metric): grants of gone sessions retired, Sum."""
        return self._metric(contract.METRIC_ORPHAN_GRANTS_RETIRED, options)

    def metric_expired_session_grants_retired(self, **options: Any) -> cloudwatch.Metric:
        """``ExpiredSessionGrantsRetired`` (embedded metric): grants of expired sessions not yet
        deleted by time to live, retired early, Sum."""
        return self._metric(contract.METRIC_EXPIRED_GRANTS_RETIRED, options)

    def metric_grant_sweep_failures(self, **options: Any) -> cloudwatch.Metric:
        """``GrantSweepFailures`` (embedded metric): calls that failed (retried next run), Sum."""
        return self._metric(contract.METRIC_GRANT_SWEEP_FAILURES, options)

    def metric_grant_sweep_unusable_names(self, **options: Any) -> cloudwatch.Metric:
        """``GrantSweepUnusableNames`` (embedded metric): grants named ``session-expiry:…`` for
        the cleanup role whose name gives no key of the table, skipped (never retired), Sum."""
        return self._metric(contract.METRIC_GRANT_SWEEP_UNUSABLE_NAMES, options)

    def metric_grant_sweep_incomplete(self, **options: Any) -> cloudwatch.Metric:
        """``GrantSweepIncomplete`` (embedded metric): 1 per run that stopped at its time guard
        (or a failed ``ListGrants``) before the key's last grant — the next run resumes there —,
        0 per complete run, Sum."""
        return self._metric(contract.METRIC_GRANT_SWEEP_INCOMPLETE, options)

    def metric_grants_checked(self, **options: Any) -> cloudwatch.Metric:
        """``GrantsChecked`` (embedded metric): grants of the key the runs checked, Sum."""
        return self._metric(contract.METRIC_GRANTS_CHECKED, options)

    def metric_grants_on_key(self, **options: Any) -> cloudwatch.Metric:
        """``GrantsOnKey`` (embedded metric): every grant on the grant key — this store's and
        any other's — when a pass over the key finished, Maximum."""
        return self._metric(
            contract.METRIC_GRANTS_ON_KEY, {"statistic": cloudwatch.Stats.MAXIMUM, **options}
        )

    def _metric(self, name: str, options: Mapping[str, Any]) -> cloudwatch.Metric:
        return sum_metric(self.metrics_namespace, name, options)
