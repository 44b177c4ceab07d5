"""The expiry sweeper: bounded expiry latency on top of time to live (``expiry_sweep_interval``).

DynamoDB's TTL deletes an expired item "typically within a few days" (Amazon DynamoDB
Developer Guide, "Working with time to live (TTL)"). With the sweeper on, a scheduled function
deletes every session whose TTL has passed, so its REMOVE record reaches the cleanup function
within **the interval plus processing time** (the sweeper's run, usually seconds, plus the
stream and event source mapping delay, usually under a second to seconds).

What it adds (all in this module, assembled by `ExpirySweeper`):

* a sparse global secondary index ``expirySweep`` on the session table: partition key
  ``expiryShard`` (String, ``"0"`` .. ``"<expiry_sweep_shards - 1>"``), sort key the TTL
  attribute (Number), projection ``KEYS_ONLY``. The session runtime writes ``expiryShard`` on
  create and touch only when ``grant_session_access`` configured it for the sweeper
  (``SESSION_EXPIRY_SWEEP_*``); items without it stay out of the index and are left to TTL.
  The sweeper Queries each shard for ``TTL <= now`` (never a Scan) and deletes each due session
  with a condition that its TTL is still in the past, so a heartbeat that just extended it
  wins;
* a function (same code asset and runtime as the cleanup function, handler
  ``session_expiry_runtime.sweeps.sweeper.handler``, ``expiry_sweeper_memory_size``), its log group
  and role, invoked every interval once per worker (``expiry_sweep_workers``): an EventBridge
  rule per `TARGETS_PER_RULE` workers, one target per worker, each target's input naming the
  shards that worker owns (`shard_groups`: disjoint, together every shard), the scheduled
  time and the period. EventBridge invokes the targets asynchronously and Lambda runs them side
  by side — the fan-out is AWS's, no dispatcher of ours. It meets first EventBridge's five
  targets per rule (API Reference, PutTargets; hence one rule per five workers, at most
  `MAX_SWEEP_WORKERS`) and, at sizes no storm reaches, Lambda's 1,000 concurrent executions.
  A run starts no call after its period's end less its time guard (the runtime's
  ``period_end_of``) and EventBridge starts the next period's run no earlier, so two runs never
  overlap on one shard. Asynchronous retries are off (the next run is the retry);
* below one minute (5, 6, 10, 12, 15, 20 or 30 s): EventBridge ``rate()`` runs at most once a
  minute, so the rule is ``rate(1 minute)`` and each run makes a pass every interval for its
  minute (``SESSION_EXPIRY_SWEEP_INTERVAL_SECONDS``). Reserved concurrency of one per worker
  ("sets both the maximum and minimum number of concurrent instances allocated to your
  function", AWS Lambda Developer Guide, "Configuring reserved concurrency") keeps the runs at
  most that many at once: a further invocation is throttled, and a throttled asynchronous event
  goes back to the queue and is retried ("Lambda returns the event to the queue", "How Lambda
  handles errors and retries with asynchronous invocation") until its maximum event age of
  60 s (the API's minimum). The timeout (59 s) ends each run before the next minute's; its
  time guard (3.5 s) lets the last slot start; asynchronous retries of function errors are off
  (the next minute is the retry). Reserved concurrency needs 100 unreserved concurrent
  executions left in the account (a new account with a quota of 10 cannot deploy it);
* least-privilege IAM: ``dynamodb:Query`` on the index only, ``dynamodb:DeleteItem`` on the
  table (IAM cannot express "only expired items": the delete's condition expression does that),
  and use of the table's customer managed key if it has one;
* an alarm on the function's errors (a run that could not delete some due session raises
  after writing its metrics).

Cost: the index stores the keys of every session written by the runtime (a few dozen bytes
each) and every write that sets or changes the TTL also writes the index (one more write
request unit per create/touch in on-demand mode, or GSI write capacity in provisioned mode);
each pass costs one Query per shard across the workers (at least 0.5 read request unit each,
plus the due keys read) and one DeleteItem per swept session; one Lambda invocation per worker
per interval (1,440 a day per worker at one minute, 288 at five); below one minute each
worker's run lasts the minute (about 56 s billed per minute whatever the interval, times the
workers and the memory), one Query per shard per pass. A sweeper-on table also rejects a write
whose TTL attribute is not a Number (index key types are enforced), which surfaces the
"String TTL" bug at write time.

For a table passed as ``table=``, the construct does not change the table: a ``Table`` or
``TableV2`` of this app must already have the index (`check_sweep_index` says how to add
it), an imported table is taken on trust with a synth warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Annotations, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from . import _runtime_contract as contract
from . import assets, validation
from .monitoring import alarms as alarm_defaults

#: Name of the sparse index the sweeper Queries.
SWEEP_INDEX_NAME = contract.DEFAULT_SWEEP_INDEX_NAME
#: Partition key (String) of the index: the session's shard.
SWEEP_SHARD_ATTRIBUTE = contract.DEFAULT_SWEEP_SHARD_ATTRIBUTE
#: Shards by default (``expiry_sweep_shards``): concurrent writes spread over this many index
#: partitions, and each pass makes this many Queries (at least) across its workers.
SWEEP_SHARDS = contract.DEFAULT_SWEEP_SHARDS
#: Whole seconds from 5 s (below, a pass's own Queries and the stream's delivery dominate the
#: bound) to a day (beyond, the bound is no bound).
MIN_SWEEP_INTERVAL = Duration.seconds(5)
MAX_SWEEP_INTERVAL = Duration.days(1)
#: The sweeper's timeout: the interval, at most 5 minutes (a run that stops at its time guard
#: is continued by the next one, so a longer run buys nothing but overlap).
MAX_SWEEPER_TIMEOUT = Duration.minutes(5)
#: The sweeper's memory (MB) by default (``expiry_sweeper_memory_size``). Its DeleteItems are
#: CPU-bound (1.1-1.4 ms of CPU each, measured by ``make bench``'s storm): Lambda gives CPU in
#: proportion to memory (one vCPU at 1,769 MB: Lambda Developer Guide, "Configuring Lambda
#: function memory"), so one worker at 512 MB deleted about 220-260 sessions a second and a
#: 100,000-session storm took 8-10 minutes. At 1,024 MB (0.58 vCPU) one worker deletes about
#: 420-570 a second, and the default 4 workers about 1,700-2,300: more than the cleanup behind
#: them takes at its defaults, so the sweeper is no longer a storm's first limit.
DEFAULT_SWEEPER_MEMORY_SIZE = 1024
#: Lambda's memory range (MB): AWS Lambda Developer Guide, "Configuring Lambda function memory".
MIN_SWEEPER_MEMORY_SIZE = 128
MAX_SWEEPER_MEMORY_SIZE = 10_240
#: Sweeper workers by default (``expiry_sweep_workers``): one per shard, so each run Queries
#: one shard and the 4 shards' index partitions (1,000 write units a second each) are deleted
#: from side by side.
DEFAULT_SWEEP_WORKERS = 4
#: "Each rule can have up to five (5) targets associated with it at one time" (Amazon
#: EventBridge API Reference, PutTargets): one schedule rule per 5 workers.
TARGETS_PER_RULE = 5
#: At most 20 workers: 4 rules of the default event bus's 300 per account and Region (Amazon
#: EventBridge User Guide, "Amazon EventBridge quotas", rules per event bus; 100 in af-south-1
#: and eu-south-1), and as many concurrent executions of Lambda's 1,000.
MAX_SWEEP_WORKERS = 20
#: At most 64 shards: each pass makes one Query per shard (0.5 read unit each, even with nothing
#: due), so shards cost reads on every pass; 64 index partitions take 64,000 writes a second.
MAX_SWEEP_SHARDS = 64

# --- below one minute -----------------------------------------------------------------------
#: EventBridge ``rate()`` runs at most once a minute: a sub-minute sweeper is started every
#: minute and runs a pass every interval within its run (the runtime's ``run_passes``).
SUB_MINUTE_RUN = Duration.minutes(1)
#: Sub-minute intervals divide the minute, so every run's passes fall on the same slots.
SUB_MINUTE_INTERVALS_SECONDS = (5, 6, 10, 12, 15, 20, 30)
#: The run's timeout: under the minute, so a run has ended when the next one is started.
SUB_MINUTE_TIMEOUT = Duration.seconds(59)
#: The run's time guard (``SESSION_EXPIRY_TIME_GUARD_MS``): the last slot (55 s at 5 s) still
#: starts inside the 59 s timeout, and one DynamoDB call with its retry fits in 90 % of it.
SUB_MINUTE_TIME_GUARD_MS = 3_500
#: Asynchronous invocation: an event that waited this long (the API's minimum, 60 s) is
#: dropped; the next minute's event has arrived by then.
SUB_MINUTE_MAX_EVENT_AGE = Duration.seconds(60)
_WARNING_IMPORTED_TABLE = "cdk-session-expiry:sweepIndexUnchecked"


def check_sweep_interval(interval: Duration) -> None:
    """Reject an ``expiry_sweep_interval`` the sweeper cannot honour.

    Accepted: whole seconds from 5 s to 1 day; below one minute a divisor of 60 s
    (`SUB_MINUTE_INTERVALS_SECONDS`), so every per-minute run's passes cover its minute;
    from one minute up whole minutes (EventBridge ``rate()`` expressions).

    Raises:
        ValueError: the message names the value and what is expected.
    """
    validation.check_duration_range(
        "expiry_sweep_interval",
        interval,
        minimum=MIN_SWEEP_INTERVAL,
        maximum=MAX_SWEEP_INTERVAL,
    )
    if validation.is_token(interval):
        return
    seconds = int(interval.to_seconds(integral=False))
    if seconds < SUB_MINUTE_RUN.to_seconds() and seconds not in SUB_MINUTE_INTERVALS_SECONDS:
        raise ValueError(
            f"expiry_sweep_interval={interval.to_human_string()}: below one minute expected a "
            f"divisor of 60 seconds ({', '.join(map(str, SUB_MINUTE_INTERVALS_SECONDS))} "
            "seconds), so the passes of every per-minute run fall on the same slots"
        )
    if seconds >= SUB_MINUTE_RUN.to_seconds() and seconds % 60:
        raise ValueError(
            f"expiry_sweep_interval={interval.to_human_string()}: from one minute up expected a "
            "whole number of minutes (EventBridge rate expressions)"
        )


def check_sweeper_props(*, shards: int, workers: int, memory_size: int, sweeper_on: bool) -> None:
    """Reject an ``expiry_sweep_shards``, ``expiry_sweep_workers`` or
    ``expiry_sweeper_memory_size`` the sweeper cannot honour.

    Accepted: 1 to `MAX_SWEEP_SHARDS` shards; 1 to `MAX_SWEEP_WORKERS` workers, at most one per
    shard (a worker owns at least one shard); memory in Lambda's range, `MIN_SWEEPER_MEMORY_SIZE`
    to `MAX_SWEEPER_MEMORY_SIZE` MB; a value other than the default only with the sweeper on.

    Raises:
        PropTypeError: a value is not an ``int``.
        ValueError: the message names the prop, the value and what is expected.
    """
    validation.check_int_range("expiry_sweep_shards", shards, minimum=1, maximum=MAX_SWEEP_SHARDS)
    validation.check_int_range(
        "expiry_sweep_workers", workers, minimum=1, maximum=MAX_SWEEP_WORKERS
    )
    validation.check_int_range(
        "expiry_sweeper_memory_size",
        memory_size,
        minimum=MIN_SWEEPER_MEMORY_SIZE,
        maximum=MAX_SWEEPER_MEMORY_SIZE,
    )
    if not validation.is_token(shards) and not validation.is_token(workers) and workers > shards:
        raise ValueError(
            f"expiry_sweep_workers={workers} with expiry_sweep_shards={shards}: expected at most "
            "one worker per shard (each worker owns at least one shard)"
        )
    defaults = (
        ("expiry_sweep_shards", shards, SWEEP_SHARDS),
        ("expiry_sweep_workers", workers, DEFAULT_SWEEP_WORKERS),
        ("expiry_sweeper_memory_size", memory_size, DEFAULT_SWEEPER_MEMORY_SIZE),
    )
    for name, value, default in defaults:
        if not sweeper_on and value != default:
            raise ValueError(
                f"{name}={value} is set without expiry_sweep_interval: expected an "
                f"expiry_sweep_interval, or no {name}"
            )


def shard_groups(shards: int, workers: int) -> list[list[int]]:
    """The shard indices each worker owns: worker ``k`` owns every shard ``i`` with
    ``i % workers == k`` (disjoint, together every shard, as even as the counts allow)."""
    return [list(range(k, shards, workers)) for k in range(workers)]


def is_sub_minute(interval: Duration) -> bool:
    """True for a resolved interval below one minute (passes within a per-minute run)."""
    return not validation.is_token(interval) and interval.to_seconds(
        integral=False
    ) < SUB_MINUTE_RUN.to_seconds(integral=False)


def check_sub_minute_run(interval_seconds: int, *, timeout: Duration, time_guard_ms: int) -> None:
    """Check that a per-minute run with ``timeout`` can honour ``interval_seconds``.

    The run must have ended when the next one is started (``timeout`` under a minute), and its
    last slot (``60 - interval`` seconds in) must start with the time guard's margin still
    left, or the gap between two runs' passes would exceed the interval.

    Raises:
        ValueError: the timeout is a minute or more, or too short for the last slot.
    """
    timeout_s = timeout.to_seconds(integral=False)
    run_s = SUB_MINUTE_RUN.to_seconds()
    if timeout_s >= run_s:
        raise ValueError(
            f"sweeper timeout {timeout.to_human_string()}: expected less than one minute, so a "
            "run has ended when the next minute's run is started"
        )
    last_slot = run_s - interval_seconds
    if last_slot + time_guard_ms / 1000 >= timeout_s:
        raise ValueError(
            f"sweeper timeout {timeout.to_human_string()} with a {time_guard_ms} ms time guard: "
            f"too short for an interval of {interval_seconds} seconds, whose last pass starts "
            f"{last_slot} seconds into the run; expected more than "
            f"{last_slot + time_guard_ms / 1000:g} seconds"
        )


def add_sweep_index(table: dynamodb.Table, *, time_to_live_attribute: str) -> None:
    """Add the sparse sweep index to a table the construct creates."""
    table.add_global_secondary_index(
        index_name=SWEEP_INDEX_NAME,
        partition_key=dynamodb.Attribute(
            name=SWEEP_SHARD_ATTRIBUTE, type=dynamodb.AttributeType.STRING
        ),
        sort_key=dynamodb.Attribute(
            name=time_to_live_attribute, type=dynamodb.AttributeType.NUMBER
        ),
        projection_type=dynamodb.ProjectionType.KEYS_ONLY,
    )


def _index_howto(time_to_live_attribute: str) -> str:
    return (
        f"add_global_secondary_index(index_name={SWEEP_INDEX_NAME!r}, "
        f"partition_key=Attribute(name={SWEEP_SHARD_ATTRIBUTE!r}, type=AttributeType.STRING), "
        f"sort_key=Attribute(name={time_to_live_attribute!r}, type=AttributeType.NUMBER), "
        "projection_type=ProjectionType.KEYS_ONLY) on the table (global_secondary_indexes= on a "
        "TableV2)"
    )


def check_sweep_index(table: dynamodb.ITable, *, time_to_live_attribute: str) -> bool:
    """Check that a table passed as ``table=`` has the sweep index.

    Returns:
        ``True`` when the index was found on a ``Table``/``TableV2`` of this app; ``False`` for
        an imported table, which cannot be checked at synth time.

    Raises:
        ValueError: a table of this app lacks the index, or has one of that name with other
            keys; the message gives the exact ``add_global_secondary_index`` call.
    """
    cfn = table.node.default_child
    if not isinstance(cfn, (dynamodb.CfnTable, dynamodb.CfnGlobalTable)):
        return False
    props = Stack.of(table).resolve(cfn._cfn_properties)
    types = {
        d.get("attributeName"): d.get("attributeType")
        for d in props.get("attributeDefinitions") or []
    }
    expected = {
        "HASH": (SWEEP_SHARD_ATTRIBUTE, "S"),
        "RANGE": (time_to_live_attribute, "N"),
    }
    for index in props.get("globalSecondaryIndexes") or []:
        if index.get("indexName") != SWEEP_INDEX_NAME:
            continue
        found = {
            k.get("keyType"): (k.get("attributeName"), types.get(k.get("attributeName")))
            for k in index.get("keySchema") or []
        }
        projection = (index.get("projection") or {}).get("projectionType")
        if found == expected and projection in ("KEYS_ONLY", "INCLUDE", "ALL"):
            return True
        raise ValueError(
            f"table {table.node.path} has an index {SWEEP_INDEX_NAME!r} keyed {found}: expected "
            f"partition key {SWEEP_SHARD_ATTRIBUTE!r} (String) and sort key "
            f"{time_to_live_attribute!r} (Number), the time to live attribute"
        )
    raise ValueError(
        f"expiry_sweep_interval is set but table {table.node.path} has no index "
        f"{SWEEP_INDEX_NAME!r}: the construct does not change a table it did not create; "
        f"expected {_index_howto(time_to_live_attribute)}"
    )


class ExpirySweeper(Construct):
    """The scheduled sweeper of one ``SessionExpiry`` (created by it; see the module docstring).

    Args:
        table: the session table, already holding (or checked for) the sweep index.
        interval: how often due sessions are swept: whole minutes from 1 minute to 1 day (one
            run per interval), or 5, 6, 10, 12, 15, 20 or 30 seconds (one run per minute making
            a pass every interval).
        environment: the runtime variables the sweeper shares with the cleanup function (table
            name, key and TTL attribute names, metrics namespace, workers, dry run).
        shards: shards of the sweep index (``expiry_sweep_shards``). Default: 4.
        workers: invocations per scheduled time, each over its own shards
            (``expiry_sweep_workers``). Default: 4.
        memory_size: the function's memory, MB (``expiry_sweeper_memory_size``). Default:
            1,024.
        log_retention: retention of the sweeper's log group.
        metrics_namespace: namespace of the runtime's embedded metrics.
        alarm_actions: actions of the errors alarm.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table: dynamodb.ITable,
        interval: Duration,
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays,
        metrics_namespace: str,
        alarm_actions: Sequence[cloudwatch.IAlarmAction],
        shards: int = SWEEP_SHARDS,
        workers: int = DEFAULT_SWEEP_WORKERS,
        memory_size: int = DEFAULT_SWEEPER_MEMORY_SIZE,
    ) -> None:
        super().__init__(scope, id)
        self.interval = interval
        self.metrics_namespace = metrics_namespace
        #: The sweep index's name, shard attribute and shard count.
        self.index_name = SWEEP_INDEX_NAME
        self.shard_attribute = SWEEP_SHARD_ATTRIBUTE
        self.shards = shards
        #: Invocations per scheduled time, and the shard indices each one owns.
        self.workers = workers
        self.shard_groups = shard_groups(shards, workers)

        log_group = logs.LogGroup(self, "LogGroup", retention=log_retention)
        #: Execution role of the sweeper function.
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Expiry sweeper of the session table (cdk-session-expiry)",
        )
        log_group.grant_write(self.role)
        #: Runs are started every minute and make a pass every ``interval`` (below a minute).
        self.sub_minute = is_sub_minute(interval)
        #: The sweeper function.
        self.function = assets.runtime_function(
            self,
            "Function",
            description="Deletes sessions whose time to live has passed (cdk-session-expiry)",
            handler=contract.SWEEPER_HANDLER,
            role=self.role,
            log_group=log_group,
            timeout=self._timeout(interval),
            memory_size=memory_size,
            environment={**environment, **self.sweeper_environment(), **self._run_environment()},
            # The next scheduled run is the retry; asynchronous retries would only overlap it.
            retry_attempts=0,
            **self._single_run_settings(),
        )
        self._grant_table(table)
        #: The EventBridge rules that invoke the sweeper every ``interval`` (one per
        #: `TARGETS_PER_RULE` workers), and the first of them.
        self.schedules = self._add_schedules()
        self.schedule = self.schedules[0]
        #: Any error of the sweeper function (a due session could not be deleted, or a Query
        #: failed); those sessions are retried by the next run and TTL remains the backstop.
        self.errors_alarm = alarm_defaults.errors_alarm(
            self,
            function=self.function,
            actions=alarm_actions,
            description=alarm_defaults.SWEEPER_ERRORS_DESCRIPTION,
        )

    def _add_schedules(self) -> list[events.Rule]:
        """One target per worker, each sending its shards, the scheduled time and the period
        (the runtime's ``shards_of_event`` and ``period_end_of``): EventBridge invokes the
        workers asynchronously at the same time and Lambda runs them side by side."""
        period = SUB_MINUTE_RUN if self.sub_minute else self.interval
        rules = []
        for first in range(0, self.workers, TARGETS_PER_RULE):
            groups = self.shard_groups[first : first + TARGETS_PER_RULE]
            rules.append(
                events.Rule(
                    self,
                    "Schedule" if first == 0 else f"Schedule{first // TARGETS_PER_RULE + 1}",
                    description="Runs the session expiry sweeper (cdk-session-expiry)",
                    schedule=events.Schedule.rate(period),
                    targets=[self._target(group, period) for group in groups],
                )
            )
        return rules

    def _target(self, shards: list[int], period: Duration) -> targets.LambdaFunction:
        event = events.RuleTargetInput.from_object(
            {
                contract.EVENT_SWEEP_SHARDS: shards,
                contract.EVENT_SWEEP_SCHEDULED_AT: events.EventField.time,
                contract.EVENT_SWEEP_PERIOD_SECONDS: period.to_seconds(),
            }
        )
        return targets.LambdaFunction(self.function, retry_attempts=2, event=event)

    def _timeout(self, interval: Duration) -> Duration:
        """The function's timeout: a sub-minute run's (checked to fit its passes), else the
        interval, at most `MAX_SWEEPER_TIMEOUT` (that maximum for an unresolved token).

        Raises:
            ValueError: a sub-minute ``interval`` whose passes do not fit one run.
        """
        if self.sub_minute:
            check_sub_minute_run(
                int(interval.to_seconds()),
                timeout=SUB_MINUTE_TIMEOUT,
                time_guard_ms=SUB_MINUTE_TIME_GUARD_MS,
            )
            return SUB_MINUTE_TIMEOUT
        if validation.is_token(interval):
            return MAX_SWEEPER_TIMEOUT
        return Duration.seconds(min(interval.to_seconds(), MAX_SWEEPER_TIMEOUT.to_seconds()))

    def _grant_table(self, table: dynamodb.ITable) -> None:
        """``Query`` on the sweep index and ``DeleteItem`` on the table (only expired sessions
        are deleted: the condition expression decides that, not IAM), and the table's key."""
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:Query"],
                resources=[f"{table.table_arn}/index/{SWEEP_INDEX_NAME}"],
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["dynamodb:DeleteItem"], resources=[table.table_arn])
        )
        if table.encryption_key is not None:
            table.encryption_key.grant_encrypt_decrypt(self.role)

    def sweeper_environment(self) -> dict[str, str]:
        """The variables that turn the sweeper on in the runtime (sweeper and session store)."""
        return {
            contract.ENV_SWEEP_SHARD_ATTRIBUTE: self.shard_attribute,
            contract.ENV_SWEEP_SHARDS: str(self.shards),
            contract.ENV_SWEEP_INDEX_NAME: self.index_name,
        }

    def _run_environment(self) -> dict[str, str]:
        """The sweeper function's own variables: the pass interval and its time guard (below
        one minute only; the session runtime never needs them)."""
        if not self.sub_minute:
            return {}
        return {
            contract.ENV_SWEEP_INTERVAL_SECONDS: str(int(self.interval.to_seconds())),
            contract.ENV_TIME_GUARD_MS: str(SUB_MINUTE_TIME_GUARD_MS),
        }

    def _single_run_settings(self) -> dict[str, Any]:
        """Below one minute: reserved concurrency of one per worker (at most that many runs at
        once, whatever EventBridge and the asynchronous queue deliver) and events dropped after
        a minute in the queue."""
        if not self.sub_minute:
            return {}
        return {
            "reserved_concurrent_executions": self.workers,
            "max_event_age": SUB_MINUTE_MAX_EVENT_AGE,
        }

    def metric_sessions_swept(self, **options: Any) -> cloudwatch.Metric:
        """``SessionsSwept`` (embedded metric): sessions deleted by the sweeper, Sum by default."""
        return self._metric(contract.METRIC_SESSIONS_SWEPT, options)

    def metric_sweep_lag(self, **options: Any) -> cloudwatch.Metric:
        """``SweepLagSeconds`` (embedded metric): ``now - TTL`` of each swept session, seconds,
        Maximum by default. Stays below the interval plus a run's duration while the sweeper
        keeps up."""
        return self._metric(
            contract.METRIC_SWEEP_LAG, {"statistic": cloudwatch.Stats.MAXIMUM, **options}
        )

    def metric_sweep_skipped(self, **options: Any) -> cloudwatch.Metric:
        """``SweepSkipped`` (embedded metric): due sessions a heartbeat or an end got to first."""
        return self._metric(contract.METRIC_SWEEP_SKIPPED, options)

    def metric_sweep_failures(self, **options: Any) -> cloudwatch.Metric:
        """``SweepFailures`` (embedded metric): deletes that failed (retried next run), Sum."""
        return self._metric(contract.METRIC_SWEEP_FAILURES, options)

    def _metric(self, name: str, options: Mapping[str, Any]) -> cloudwatch.Metric:
        props: dict[str, Any] = {"statistic": cloudwatch.Stats.SUM, **options}
        return cloudwatch.Metric(namespace=self.metrics_namespace, metric_name=name, **props)


def warn_unchecked_index(scope: Construct, table: dynamodb.ITable, ttl_attribute: str) -> None:
    """Synth warning for an imported table, whose indexes cannot be read at synth time."""
    Annotations.of(scope).add_warning_v2(
        _WARNING_IMPORTED_TABLE,
        f"expiry_sweep_interval: table {table.node.path} is imported, so its index "
        f"{SWEEP_INDEX_NAME!r} cannot be checked. Without it every sweep fails (errors alarm). "
        f"Where the table is defined: {_index_howto(ttl_attribute)}.",
    )


def check_expiry_sweeper(
    scope: Construct,
    *,
    table: dynamodb.ITable | None,
    attributes: Mapping[str, str | None],
    time_to_live_attribute: str,
) -> None:
    """Before the table exists: the shard attribute is free, and a ``table=`` has the index.

    Raises:
        ValueError: a session attribute is named like the shard attribute; a table of this app
            lacks the sweep index (``check_sweep_index``). An imported table gets a warning.
    """
    validation.check_distinct_attribute_names(
        {**attributes, "expiry sweep shard attribute": SWEEP_SHARD_ATTRIBUTE}
    )
    if table is not None and not check_sweep_index(
        table, time_to_live_attribute=time_to_live_attribute
    ):
        warn_unchecked_index(scope, table, time_to_live_attribute)


def add_expiry_sweeper(
    scope: Construct,
    *,
    table: dynamodb.ITable,
    time_to_live_attribute: str,
    interval: Duration,
    environment: Mapping[str, str],
    log_retention: logs.RetentionDays,
    metrics_namespace: str,
    alarm_actions: Sequence[cloudwatch.IAlarmAction],
    shards: int = SWEEP_SHARDS,
    workers: int = DEFAULT_SWEEP_WORKERS,
    memory_size: int = DEFAULT_SWEEPER_MEMORY_SIZE,
) -> ExpirySweeper:
    """The sweep index on a table ``scope`` created, and ``<scope>/ExpirySweeper``.

    ``environment`` is what the sweeper shares with the cleanup (key and attribute names,
    namespace, workers, dry run); the table name is added here.
    """
    if isinstance(table, dynamodb.Table) and table.node.scope is scope:
        add_sweep_index(table, time_to_live_attribute=time_to_live_attribute)
    return ExpirySweeper(
        scope,
        "ExpirySweeper",
        table=table,
        interval=interval,
        environment={contract.ENV_TABLE_NAME: table.table_name, **environment},
        log_retention=log_retention,
        metrics_namespace=metrics_namespace,
        alarm_actions=alarm_actions,
        shards=shards,
        workers=workers,
        memory_size=memory_size,
    )
