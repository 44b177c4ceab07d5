"""The circuit breaker (opt-in, ``circuit_breaker=True``): an alarm pauses the cleanup, a
half-open probe resumes it.

When one of the chosen alarms (``circuit_breaker_alarms``; default: the cleanup function's errors
alarm and the on-failure destination's alarm) goes to ``ALARM``, the breaker disables the event
source mapping in place (``UpdateEventSourceMapping`` ``Enabled=false``: never deleted or
replaced, so it keeps its stream position). After ``circuit_breaker_cool_down`` it re-enables it
as a probe, once no chosen alarm is in ``ALARM``; an alarm during the probe window
(`PROBE_WINDOW`, 15 minutes) opens it again, a quiet probe closes it. The state machine,
its record and why each rule is as it is: the runtime module
``session_expiry_runtime.switches.circuit_breaker`` and docs/operating.md, "Circuit breaker".

What it adds (`CircuitBreaker`, ``Sessions/CircuitBreaker``):

* ``State``: an SSM String parameter (standard tier) holding the breaker's record, first
  ``{"state": "CLOSED"}``;
* ``Function``: from the cleanup's code asset (handler
  ``session_expiry_runtime.switches.circuit_breaker.handler``), 128 MiB, 30 seconds, **reserved
  concurrency 1** (its runs never overlap, so the record needs no lock; this takes one unit from
  the account's unreserved concurrency, which must stay at 100 or more), its own role and log
  group;
* ``AlarmRule``: an EventBridge rule on ``aws.cloudwatch`` / ``CloudWatch Alarm State Change``
  for the chosen alarms' ARNs and ``state.value`` ``ALARM`` (CloudWatch "guarantees the delivery
  of alarm state change events to EventBridge": Amazon CloudWatch User Guide, "Alarm events and
  EventBridge") → the function;
* ``Schedule``: an EventBridge rule every 5 minutes → the function (the breaker's clock);
* IAM on its role: ``lambda:GetEventSourceMapping`` and ``lambda:UpdateEventSourceMapping`` on
  the cleanup's mapping only, ``cloudwatch:DescribeAlarms`` on the chosen alarms only (a
  narrower scope than ``*`` only hides composite alarms: Amazon CloudWatch API Reference,
  DescribeAlarms), ``ssm:GetParameter`` and ``ssm:PutParameter`` on its parameter only;
* ``ErrorsAlarm`` on the breaker's own errors, and the metric ``CircuitBreakerState`` (0 closed,
  1 half-open, 2 open) on the dashboard.

It never stays open silently: the pause watch's ``CleanupPausedAlarm`` fires when the mapping
has been disabled ``alarm_cleanup_paused_after`` (12 hours), so a breaker held open (its alarms
never clear, every probe fails) pages a person well before the stream's 24 hours, rather than
being forced closed by a timer while whatever opened it may still be wrong. Synth refuses the
breaker for a mapping whose starting position is ``LATEST``: toggling ``Enabled`` on such a
mapping can skip records (awsdocs/aws-lambda-developer-guide#487).

Cost (us-east-1 list prices): 8,928 scheduled invocations a month (one ``GetParameter``, one
``GetEventSourceMapping``, and ``DescribeAlarms`` while open or probing), about $0.005 of Lambda;
SSM standard parameters and their API calls at standard throughput, and AWS service events on
the default event bus, are not charged; one custom metric ($0.30) and one alarm ($0.10).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

import jsii
from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from constructs import Construct, IValidation

from .. import _runtime_contract as contract
from .. import assets, validation
from ..monitoring import alarms as alarm_defaults


class CircuitBreakerAlarm(enum.Enum):
    """An alarm of ``SessionExpiry`` that opens the circuit breaker (``circuit_breaker_alarms``).

    Each value is the name of the ``SessionExpiry`` attribute holding the alarm.
    """

    #: ``errors_alarm``: the cleanup function failed as a whole.
    ERRORS = "errors_alarm"
    #: ``failure_queue_alarm``: the on-failure destination received a batch (it stays in
    #: ``ALARM`` while the queue holds messages: the breaker probes only once they are replayed).
    FAILURE_DESTINATION = "failure_queue_alarm"
    #: ``throttles_alarm``: the cleanup function was throttled.
    THROTTLES = "throttles_alarm"
    #: ``skipped_records_alarm``: records skipped for good or resources refused (needs
    #: ``alarm_skipped_records``).
    SKIPPED_RECORDS = "skipped_records_alarm"
    #: ``iterator_age_alarm``: only with another alarm, and it only opens a closed breaker.
    ITERATOR_AGE = "iterator_age_alarm"


#: The alarms that open the breaker unless ``circuit_breaker_alarms`` says otherwise.
DEFAULT_ALARMS = (CircuitBreakerAlarm.ERRORS, CircuitBreakerAlarm.FAILURE_DESTINATION)
#: Default ``circuit_breaker_cool_down``: three alarm periods, time for the errors alarm to clear
#: once no invocation runs.
DEFAULT_COOL_DOWN = Duration.minutes(15)
#: The shortest cool-down: one alarm period.
MIN_COOL_DOWN = Duration.minutes(5)
#: How long a probe lasts: three alarm periods, long enough for a failing cleanup to raise its
#: errors alarm or send a batch to the on-failure destination after its retries.
PROBE_WINDOW = Duration.minutes(15)
#: How often the breaker's clock ticks.
SCHEDULE_INTERVAL = Duration.minutes(5)
FUNCTION_MEMORY_SIZE = 128
FUNCTION_TIMEOUT = Duration.seconds(30)
#: The record the state parameter is deployed with (the runtime's ``Record.from_json`` reads it).
INITIAL_RECORD = '{"state": "CLOSED"}'
#: The detail type of CloudWatch's alarm events on EventBridge.
ALARM_STATE_CHANGE = "CloudWatch Alarm State Change"
_LATEST = "LATEST"


def _alarm_list(alarms: Sequence[CircuitBreakerAlarm]) -> str:
    return "[" + ", ".join(f"CircuitBreakerAlarm.{a.name}" for a in alarms) + "]"


def check_circuit_breaker_props(
    *,
    enabled: bool,
    alarms: Sequence[CircuitBreakerAlarm] | None,
    cool_down: Duration | None,
    paused_after: Duration,
    max_record_age: Duration,
    skipped_records_alarm: bool,
) -> tuple[CircuitBreakerAlarm, ...]:
    """The breaker's alarms (duplicates dropped, in order), after checking the props.

    Raises:
        ValueError: ``circuit_breaker_alarms``/``circuit_breaker_cool_down`` without
            ``circuit_breaker=True``; no alarm; the iterator age alarm alone; the skipped-records
            alarm while ``alarm_skipped_records=False``; a cool-down below 5 minutes, or not below
            ``alarm_cleanup_paused_after`` or ``max_record_age``. The message names the value and
            what is expected.
    """
    validation.check_switches(circuit_breaker=enabled)
    if not enabled:
        given = {
            "circuit_breaker_alarms": None if alarms is None else _alarm_list(alarms),
            "circuit_breaker_cool_down": None if cool_down is None else validation.shown(cool_down),
        }
        for name, shown in given.items():
            if shown is not None:
                raise ValueError(
                    f"{name}={shown} is set without circuit_breaker=True: expected "
                    f"circuit_breaker=True, or no {name}"
                )
        return ()
    chosen = tuple(dict.fromkeys(DEFAULT_ALARMS if alarms is None else alarms))
    _check_alarm_choice(chosen, skipped_records_alarm)
    _check_cool_down(cool_down or DEFAULT_COOL_DOWN, paused_after, max_record_age)
    return chosen


def _check_alarm_choice(
    chosen: tuple[CircuitBreakerAlarm, ...], skipped_records_alarm: bool
) -> None:
    failures = ", ".join(
        a.name for a in CircuitBreakerAlarm if a is not CircuitBreakerAlarm.ITERATOR_AGE
    )
    if not chosen:
        raise ValueError(
            f"circuit_breaker_alarms=[]: expected at least one CircuitBreakerAlarm ({failures})"
        )
    if chosen == (CircuitBreakerAlarm.ITERATOR_AGE,):
        raise ValueError(
            "circuit_breaker_alarms=[CircuitBreakerAlarm.ITERATOR_AGE] alone: expected at least "
            f"one alarm of failures with it ({failures}). Iterator age rises while the cleanup "
            "is paused, so alone it would hold the breaker open, and pausing a cleanup that is "
            "only behind puts it further behind"
        )
    if CircuitBreakerAlarm.SKIPPED_RECORDS in chosen and not skipped_records_alarm:
        raise ValueError(
            f"circuit_breaker_alarms={_alarm_list(chosen)} with alarm_skipped_records=False: "
            "expected alarm_skipped_records=True (the alarm to watch), or no "
            "CircuitBreakerAlarm.SKIPPED_RECORDS"
        )


def _check_cool_down(cool_down: Duration, paused_after: Duration, max_record_age: Duration) -> None:
    if validation.is_token(cool_down):
        return
    seconds = cool_down.to_seconds(integral=False)
    shown = cool_down.to_human_string()
    if seconds != int(seconds) or seconds < MIN_COOL_DOWN.to_seconds():
        raise ValueError(
            f"circuit_breaker_cool_down={shown}: expected a whole number of seconds, at least "
            f"{MIN_COOL_DOWN.to_human_string()} (one alarm period)"
        )
    for prop, limit, why in (
        ("alarm_cleanup_paused_after", paused_after, "the first probe must come before it fires"),
        (
            "max_record_age",
            max_record_age,
            "a probe after it sends every waiting record to the "
            "on-failure destination, whose alarm opens the breaker again",
        ),
    ):
        if not validation.is_token(limit) and seconds >= limit.to_seconds():
            raise ValueError(
                f"circuit_breaker_cool_down={shown}: expected less than {prop} "
                f"({limit.to_human_string()}): {why}"
            )


def starting_position(mapping: lambda_.EventSourceMapping) -> str | None:
    """The mapping's ``StartingPosition`` as its CloudFormation resource has it (an escape hatch
    that sets ``starting_position`` on it included)."""
    resource = mapping.node.default_child
    position = getattr(resource, "starting_position", None)
    return position if isinstance(position, str) else None


def _latest_refusal(mapping: lambda_.EventSourceMapping) -> str | None:
    if starting_position(mapping) != _LATEST:
        return None
    return (
        f"circuit_breaker=True on {mapping.node.path} whose StartingPosition is 'LATEST': "
        "expected TRIM_HORIZON. A LATEST mapping can skip records when its Enabled is toggled "
        "(awsdocs/aws-lambda-developer-guide#487), which is what the breaker does"
    )


@jsii.implements(IValidation)
class _RefuseLatest:
    """Synth-time check: the mapping's starting position may have been changed after the
    breaker was built (``mapping.node.default_child.starting_position = "LATEST"``)."""

    def __init__(self, mapping: lambda_.EventSourceMapping) -> None:
        self._mapping = mapping

    def validate(self) -> list[str]:
        refusal = _latest_refusal(self._mapping)
        return [] if refusal is None else [refusal]


class CircuitBreaker(Construct):
    """The breaker of one ``SessionExpiry`` (see the module docstring).

    Args:
        mapping: the cleanup's event source mapping.
        alarms: the chosen alarms, by
            [`CircuitBreakerAlarm`][cdk_session_expiry.CircuitBreakerAlarm].
        cool_down: ``circuit_breaker_cool_down``.
        cleanup_enabled: ``cleanup_enabled``: with ``False`` the breaker never enables the
            mapping.
        log_retention: retention of the breaker's log group.
        metrics_namespace: namespace of ``CircuitBreakerState``.
        alarm_actions: actions of the breaker's errors alarm.

    Raises:
        ValueError: the mapping's starting position is ``LATEST`` (also checked at synth).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        mapping: lambda_.EventSourceMapping,
        alarms: Mapping[CircuitBreakerAlarm, cloudwatch.IAlarm],
        cool_down: Duration,
        cleanup_enabled: bool,
        log_retention: logs.RetentionDays,
        metrics_namespace: str,
        alarm_actions: Sequence[cloudwatch.IAlarmAction],
    ) -> None:
        refusal = _latest_refusal(mapping)
        if refusal is not None:
            raise ValueError(refusal)
        super().__init__(scope, id)
        self.node.add_validation(_RefuseLatest(mapping))
        self.mapping = mapping
        #: The alarms that open the breaker.
        self.alarms: dict[CircuitBreakerAlarm, cloudwatch.IAlarm] = dict(alarms)
        self.metrics_namespace = metrics_namespace
        #: The SSM parameter holding the breaker's record.
        self.state_parameter = ssm.StringParameter(
            self,
            "State",
            string_value=INITIAL_RECORD,
            description="State of the session cleanup's circuit breaker (cdk-session-expiry)",
            tier=ssm.ParameterTier.STANDARD,
        )
        self._add_function(cool_down, cleanup_enabled, log_retention)
        self._add_rules()
        #: Any error of the breaker (it could not read or change the mapping or its record).
        self.errors_alarm = alarm_defaults.errors_alarm(
            self,
            function=self.function,
            actions=alarm_actions,
            description=alarm_defaults.CIRCUIT_BREAKER_ERRORS_DESCRIPTION,
        )

    def _environment(self, cool_down: Duration, cleanup_enabled: bool) -> dict[str, str]:
        stack = Stack.of(self)
        closed_only = [
            alarm.alarm_name
            for member, alarm in self.alarms.items()
            if member is CircuitBreakerAlarm.ITERATOR_AGE
        ]
        return {
            contract.ENV_EVENT_SOURCE_MAPPING_UUID: self.mapping.event_source_mapping_id,
            contract.ENV_BREAKER_STATE_PARAMETER: self.state_parameter.parameter_name,
            contract.ENV_BREAKER_ALARMS: stack.to_json_string(
                [alarm.alarm_name for alarm in self.alarms.values()]
            ),
            contract.ENV_BREAKER_CLOSED_ONLY_ALARMS: stack.to_json_string(closed_only),
            contract.ENV_BREAKER_COOL_DOWN_SECONDS: str(int(cool_down.to_seconds())),
            contract.ENV_BREAKER_PROBE_SECONDS: str(int(PROBE_WINDOW.to_seconds())),
            contract.ENV_CLEANUP_ENABLED: "true" if cleanup_enabled else "false",
            contract.ENV_METRICS_NAMESPACE: self.metrics_namespace,
        }

    def _add_function(
        self, cool_down: Duration, cleanup_enabled: bool, log_retention: logs.RetentionDays
    ) -> None:
        log_group = logs.LogGroup(self, "LogGroup", retention=log_retention)
        #: The breaker's own role.
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Circuit breaker of the session cleanup (cdk-session-expiry)",
        )
        log_group.grant_write(self.role)
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping"],
                resources=[self.mapping.event_source_mapping_arn],
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:DescribeAlarms"],
                resources=[alarm.alarm_arn for alarm in self.alarms.values()],
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["ssm:GetParameter", "ssm:PutParameter"],
                resources=[self.state_parameter.parameter_arn],
            )
        )
        #: The breaker function (reserved concurrency 1).
        self.function = assets.runtime_function(
            self,
            "Function",
            description="Circuit breaker of the session cleanup (cdk-session-expiry)",
            handler=contract.CIRCUIT_BREAKER_HANDLER,
            role=self.role,
            log_group=log_group,
            timeout=FUNCTION_TIMEOUT,
            memory_size=FUNCTION_MEMORY_SIZE,
            environment=self._environment(cool_down, cleanup_enabled),
            reserved_concurrent_executions=1,
        )

    def _add_rules(self) -> None:
        #: The rule that sends the chosen alarms' changes to ``ALARM`` to the breaker.
        self.alarm_rule = events.Rule(
            self,
            "AlarmRule",
            description="Opens the session cleanup's circuit breaker (cdk-session-expiry)",
            event_pattern=events.EventPattern(
                source=["aws.cloudwatch"],
                detail_type=[ALARM_STATE_CHANGE],
                resources=[alarm.alarm_arn for alarm in self.alarms.values()],
                detail={"state": {"value": ["ALARM"]}},
            ),
            targets=[targets.LambdaFunction(self.function)],
        )
        #: The rule that runs the breaker every 5 minutes (its clock).
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Runs the session cleanup's circuit breaker (cdk-session-expiry)",
            schedule=events.Schedule.rate(SCHEDULE_INTERVAL),
            targets=[targets.LambdaFunction(self.function, retry_attempts=0)],
        )

    def metric_circuit_breaker_state(self, **options: Any) -> cloudwatch.Metric:
        """``CircuitBreakerState`` (0 closed, 1 half-open, 2 open), Maximum over 5 minutes by
        default."""
        props: dict[str, Any] = {
            "statistic": cloudwatch.Stats.MAXIMUM,
            "period": alarm_defaults.ALARM_PERIOD,
            **options,
        }
        return cloudwatch.Metric(
            namespace=self.metrics_namespace,
            metric_name=contract.METRIC_CIRCUIT_BREAKER_STATE,
            dimensions_map={
                contract.DIMENSION_EVENT_SOURCE_MAPPING: self.mapping.event_source_mapping_id,
                **props.pop("dimensions_map", {}),
            },
            **props,
        )
