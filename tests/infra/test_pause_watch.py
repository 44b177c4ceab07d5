"""A paused cleanup is loud before it is lossy (issue 21): the always-on pause watch, its alarm
(``alarm_cleanup_paused_after``) and the synth warning of ``cleanup_enabled=False``.

One test joins both sides: moto's event source mapping disabled for a simulated 13 hours, read
by the runtime's watch with an injected clock, gives a datapoint that breaches the alarm as the
construct synthesizes it (same namespace, metric, dimension, statistic and threshold)."""

from __future__ import annotations

import json
from datetime import timedelta, timezone
from typing import Any

import boto3
import pytest
from aws_cdk import App, Duration, Environment, Stack, assertions
from aws_cdk.assertions import Annotations, Match
from moto import mock_aws
from session_expiry_runtime.switches import pause_watch as watch_runtime

from cdk_session_expiry import ChangeSource, PropTypeError, SessionExpiry
from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.monitoring import alarms as alarm_defaults
from cdk_session_expiry.switches import kill_switch

from .helpers import StackTemplate

ENV = Environment(account="123456789012", region="us-east-1")


class Synth(StackTemplate):
    def __init__(self, cdk_context: dict[str, Any]) -> None:
        app = App(context=cdk_context)
        self.stack = stack = Stack(app, "Paused", env=ENV)
        self.default = SessionExpiry(stack, "Default")
        self.six_hours = SessionExpiry(
            stack, "SixHours", alarm_cleanup_paused_after=Duration.hours(6)
        )
        self.template = assertions.Template.from_stack(stack)
        self.json: dict[str, Any] = self.template.to_json()


@pytest.fixture(scope="module")
def synth(cdk_context: dict[str, Any]) -> Synth:
    return Synth(cdk_context)


def _ref(construct: Any, synth: Synth) -> dict[str, str]:
    return {"Ref": synth.id(construct)}


def test_the_watch_runs_every_five_minutes_from_the_cleanup_asset(synth: Synth) -> None:
    watch = synth.default.pause_watch
    function = synth.props(watch.function)
    assert function["Handler"] == contract.PAUSE_WATCH_HANDLER
    assert (function["MemorySize"], function["Timeout"]) == (128, 30)
    assert function["Environment"]["Variables"] == {
        contract.ENV_EVENT_SOURCE_MAPPING_UUID: _ref(synth.default.event_source_mapping, synth),
        contract.ENV_METRICS_NAMESPACE: "SessionExpiry",
    }
    cleanup_code = synth.props(synth.default.cleanup_function)["Code"]
    assert function["Code"] == cleanup_code
    rule = synth.props(watch.schedule)
    assert rule["ScheduleExpression"] == "rate(5 minutes)"
    assert rule["Targets"][0]["Arn"] == {"Fn::GetAtt": [synth.id(watch.function), "Arn"]}


def test_the_watch_may_only_read_the_cleanups_mapping(synth: Synth) -> None:
    watch = synth.default.pause_watch
    policy = synth.json["Resources"][
        synth.stack.get_logical_id(watch.role.node.find_child("DefaultPolicy").node.default_child)
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    mapping_arn = synth.stack.resolve(synth.default.event_source_mapping.event_source_mapping_arn)
    assert statements[1] == {
        "Action": "lambda:GetEventSourceMapping",
        "Effect": "Allow",
        "Resource": mapping_arn,
    }
    assert [s["Action"] for s in statements] == [
        ["logs:CreateLogStream", "logs:PutLogEvents"],
        "lambda:GetEventSourceMapping",
    ]
    assert synth.props(watch.function)["Role"] == {"Fn::GetAtt": [synth.id(watch.role), "Arn"]}


def test_the_paused_alarm_fires_above_twelve_hours_by_default(synth: Synth) -> None:
    alarm = synth.props(synth.default.cleanup_paused_alarm)
    assert alarm["MetricName"] == contract.METRIC_CLEANUP_PAUSED_SECONDS
    assert alarm["Namespace"] == "SessionExpiry"
    assert alarm["Dimensions"] == [
        {
            "Name": contract.DIMENSION_EVENT_SOURCE_MAPPING,
            "Value": _ref(synth.default.event_source_mapping, synth),
        }
    ]
    assert (alarm["Statistic"], alarm["Period"]) == ("Maximum", 300)
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (3, 3)
    assert alarm["Threshold"] == 12 * 3600
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "breaching"  # the watch stopped: tests/infra/..._silence
    assert alarm["AlarmDescription"].endswith("Runbook: docs/operating.md#alarm-cleanup-paused")
    assert synth.default.cleanup_paused_alarm in synth.default.alarms


def test_alarm_cleanup_paused_after_sets_the_threshold(synth: Synth) -> None:
    assert synth.props(synth.six_hours.cleanup_paused_alarm)["Threshold"] == 6 * 3600


def test_the_watch_errors_alarm_has_its_own_meaning(synth: Synth) -> None:
    alarm = synth.props(synth.default.pause_watch.errors_alarm)
    assert alarm["Dimensions"] == [
        {"Name": "FunctionName", "Value": _ref(synth.default.pause_watch.function, synth)}
    ]
    assert alarm["AlarmDescription"].startswith("The paused-cleanup watch could not read")


def test_metric_cleanup_paused_seconds(synth: Synth) -> None:
    metric = synth.default.metric_cleanup_paused_seconds()
    assert (metric.metric_name, metric.namespace, metric.statistic) == (
        contract.METRIC_CLEANUP_PAUSED_SECONDS,
        "SessionExpiry",
        "Maximum",
    )
    assert metric.period.to_seconds() == 300


def test_a_mapping_disabled_for_13_hours_breaches_the_synthesized_alarm(synth: Synth) -> None:
    alarm = synth.props(synth.default.cleanup_paused_alarm)
    with mock_aws():
        session = boto3.session.Session(region_name="us-east-1")
        uuid = _moto_mapping(session)
        functions = session.client("lambda")
        functions.update_event_source_mapping(UUID=uuid, Enabled=False)
        since = functions.get_event_source_mapping(UUID=uuid)["LastModified"]
        lines: list[str] = []
        for hours in (11, 13):
            watch_runtime.watch(
                functions,
                uuid,
                namespace=alarm["Namespace"],
                now=since.astimezone(timezone.utc) + timedelta(hours=hours),
                write=lines.append,
            )
    eleven, thirteen = (json.loads(line) for line in lines)
    (directive,) = thirteen["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == alarm["Namespace"]
    assert [m["Name"] for m in directive["Metrics"]] == [alarm["MetricName"]]
    assert directive["Dimensions"] == [[d["Name"] for d in alarm["Dimensions"]]]
    # In the deployed stack the dimension's value is the Ref of this mapping: the watch's UUID.
    assert (
        alarm["Dimensions"][0]["Value"]
        == (
            synth.props(synth.default.pause_watch.function)["Environment"]["Variables"][
                contract.ENV_EVENT_SOURCE_MAPPING_UUID
            ]
        )
    )
    assert thirteen[alarm["MetricName"]] == 13 * 3600 > alarm["Threshold"]
    assert eleven[alarm["MetricName"]] == 11 * 3600 <= alarm["Threshold"]


def _moto_mapping(session: boto3.session.Session) -> str:
    table = session.client("dynamodb").create_table(
        TableName="sessions",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    role = session.client("iam").create_role(RoleName="cleanup", AssumeRolePolicyDocument="{}")
    functions = session.client("lambda")
    functions.create_function(
        FunctionName="cleanup",
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler=contract.CLEANUP_HANDLER,
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},  # never run
    )
    return functions.create_event_source_mapping(  # type: ignore[no-any-return]
        EventSourceArn=table["TableDescription"]["LatestStreamArn"],
        FunctionName="cleanup",
        StartingPosition="TRIM_HORIZON",
    )["UUID"]


# --- cleanup_enabled=False: a synth warning ---------------------------------------------------


def test_cleanup_enabled_false_warns_that_records_age_out_24_hours_after_the_pause() -> None:
    stack = Stack(App(), "Warned")
    SessionExpiry(stack, "Sessions", cleanup_enabled=False, max_record_age=Duration.hours(3))

    Annotations.from_stack(stack).has_warning(
        "/Warned/Sessions",
        Match.string_like_regexp(
            "cleanup_enabled=False: the event source mapping is deployed disabled.*"
            "records written from the pause on age out of the stream 24 hours after it.*"
            r"max_record_age \(3 hours\).*on-failure destination.*"
            r"paused-cleanup alarm fires after 12 hours.*"
            rf"\[ack: {kill_switch.WARNING_CLEANUP_PAUSED}\]"
        ),
    )


def test_an_enabled_cleanup_gives_no_warning() -> None:
    stack = Stack(App(), "Quiet")
    SessionExpiry(stack, "Sessions")
    Annotations.from_stack(stack).has_no_warning("*", Match.any_value())


# --- rejected values --------------------------------------------------------------------------


_LARGEST_ON_STREAM = "at most 23 hours 44 minutes 59 seconds (Duration.seconds(85499))"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            Duration.minutes(4),
            f"alarm_cleanup_paused_after=4 minutes: expected at least 5 minutes and "
            f"{_LARGEST_ON_STREAM}",
        ),
        (
            Duration.hours(24),
            "alarm_cleanup_paused_after=1 day: its alarm needs 3 of 3 five-minute periods above "
            "it and fires up to 15 minutes later, 1 day 15 minutes after the pause, not before "
            "records start to leave the stream (kept 24 hours); expected at least 5 minutes "
            f"and {_LARGEST_ON_STREAM}",
        ),
        (
            Duration.days(2),
            "alarm_cleanup_paused_after=2 days: its alarm needs 3 of 3 five-minute periods "
            "above it and fires up to 15 minutes later, 2 days 15 minutes after the pause, not "
            "before records start to leave the stream (kept 24 hours); expected at least "
            f"5 minutes and {_LARGEST_ON_STREAM}",
        ),
        (
            Duration.millis(3_600_500),
            "alarm_cleanup_paused_after=1 hour 500 millis: expected a whole number of seconds, "
            f"at least 5 minutes and {_LARGEST_ON_STREAM}",
        ),
    ],
)
def test_fails_alarm_cleanup_paused_after_out_of_range(value: Duration, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        SessionExpiry(Stack(App(), "Validation"), "Sessions", alarm_cleanup_paused_after=value)
    assert str(raised.value) == message


# --- the alarm fires before the records leave, for every accepted value (issue 39) ------------

#: 15 minutes: the alarm's 3 of 3 five-minute periods, the first one counted from the threshold.
_FIRE_DELAY = 3 * 300
_DAY = 86_400
_WEEK = 7 * _DAY


def _latest_fire_time(stack: Stack, construct: SessionExpiry) -> int:
    """Seconds from a pause to the paused alarm's firing, at the latest, read from the template:
    the watch writes a value every period, so the first one above the threshold comes within a
    period of it, and every one of the alarm's evaluation periods must breach."""
    resources = assertions.Template.from_stack(stack).to_json()["Resources"]

    def props_of(construct: Any) -> dict[str, Any]:
        return dict(resources[stack.get_logical_id(construct.node.default_child)]["Properties"])

    props = props_of(construct.cleanup_paused_alarm)
    rule = props_of(construct.pause_watch.schedule)
    assert rule["ScheduleExpression"] == "rate(5 minutes)"  # one run a period
    assert props["DatapointsToAlarm"] == props["EvaluationPeriods"] == 3
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    return int(props["Threshold"]) + int(props["EvaluationPeriods"]) * int(props["Period"])


@pytest.mark.parametrize(
    ("change_source", "retention"),
    [
        (None, _DAY),
        (ChangeSource.kinesis(), _WEEK),
        (ChangeSource.kinesis(retention=Duration.hours(30)), 30 * 3600),
    ],
    ids=["dynamodb-stream", "kinesis-7-days", "kinesis-30-hours"],
)
def test_the_largest_accepted_paused_after_fires_before_the_records_leave(
    change_source: ChangeSource | None, retention: int
) -> None:
    largest = Duration.seconds(retention - _FIRE_DELAY - 1)
    stack = Stack(App(), "Largest", env=ENV)
    construct = SessionExpiry(
        stack, "Sessions", change_source=change_source, alarm_cleanup_paused_after=largest
    )
    fires = _latest_fire_time(stack, construct)
    assert fires == retention - 1  # the last second before the first record leaves
    assert alarm_defaults.largest_cleanup_paused_after(
        Duration.seconds(retention)
    ).to_seconds() == (largest.to_seconds())


@pytest.mark.parametrize(
    ("change_source", "value", "message"),
    [
        (
            None,
            Duration.minutes(23 * 60 + 45),
            "alarm_cleanup_paused_after=23 hours 45 minutes: its alarm needs 3 of 3 five-minute "
            "periods above it and fires up to 15 minutes later, 1 day after the pause, not "
            "before records start to leave the stream (kept 24 hours); expected at least "
            f"5 minutes and {_LARGEST_ON_STREAM}",
        ),
        (
            ChangeSource.kinesis(),
            Duration.seconds(_WEEK - _FIRE_DELAY),
            "alarm_cleanup_paused_after=6 days 23 hours 45 minutes: its alarm needs 3 of 3 "
            "five-minute periods above it and fires up to 15 minutes later, 7 days after the "
            "pause, not before records start to leave the stream (kept 7 days); expected at "
            "least 5 minutes and at most 6 days 23 hours 44 minutes 59 seconds "
            "(Duration.seconds(603899))",
        ),
    ],
    ids=["dynamodb-stream", "kinesis-7-days"],
)
def test_fails_the_smallest_paused_after_whose_alarm_fires_as_records_leave(
    change_source: ChangeSource | None, value: Duration, message: str
) -> None:
    with pytest.raises(ValueError) as raised:
        SessionExpiry(
            Stack(App(), "Validation"),
            "Sessions",
            change_source=change_source,
            alarm_cleanup_paused_after=value,
        )
    assert str(raised.value) == message


@pytest.mark.parametrize("value", [43200, "12 hours", timedelta(hours=12)])
def test_fails_alarm_cleanup_paused_after_not_a_duration(value: object) -> None:
    with pytest.raises(PropTypeError) as raised:
        SessionExpiry(Stack(App(), "Validation"), "Sessions", alarm_cleanup_paused_after=value)  # type: ignore[arg-type]
    assert str(raised.value) == (
        f"alarm_cleanup_paused_after={value!r}: expected a Duration, e.g. Duration.hours(6)"
    )
