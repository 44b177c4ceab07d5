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
from session_expiry_runtime import pause_watch as watch_runtime

from cdk_session_expiry import PropTypeError, SessionExpiry, kill_switch
from cdk_session_expiry import _runtime_contract as contract

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


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            Duration.minutes(4),
            "alarm_cleanup_paused_after=4 minutes: expected at least 5 minutes and less than 1 day",
        ),
        (
            Duration.hours(24),
            "alarm_cleanup_paused_after=1 day: expected at least 5 minutes and less than 1 day",
        ),
        (
            Duration.days(2),
            "alarm_cleanup_paused_after=2 days: expected at least 5 minutes and less than 1 day",
        ),
    ],
)
def test_fails_alarm_cleanup_paused_after_out_of_range(value: Duration, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        SessionExpiry(Stack(App(), "Validation"), "Sessions", alarm_cleanup_paused_after=value)
    assert str(raised.value) == message


@pytest.mark.parametrize("value", [43200, "12 hours", timedelta(hours=12)])
def test_fails_alarm_cleanup_paused_after_not_a_duration(value: object) -> None:
    with pytest.raises(PropTypeError) as raised:
        SessionExpiry(Stack(App(), "Validation"), "Sessions", alarm_cleanup_paused_after=value)  # type: ignore[arg-type]
    assert str(raised.value) == (
        f"alarm_cleanup_paused_after={value!r}: expected a Duration, e.g. Duration.hours(6)"
    )
