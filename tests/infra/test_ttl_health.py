"""TTL health alarm (``alarm_ttl_health_window``, issue 6): off by default, the exact metric-math
alarm when on (with and without the expiry sweeper), imported tables, rejected windows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, Stack, assertions
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_sns as sns

from cdk_session_expiry import SessionExpiry

from .helpers import StackTemplate

ENV = Environment(account="123456789012", region="eu-west-1")
IMPORTED_STREAM_ARN = (
    "arn:aws:dynamodb:eu-west-1:123456789012:table/legacy-sessions/stream/2024-01-01T00:00:00.000"
)


class Synth(StackTemplate):
    def __init__(self, outdir: Path, cdk_context: dict[str, Any]) -> None:
        app = App(context=cdk_context, outdir=str(outdir))
        self.stack = stack = Stack(app, "TtlHealth", env=ENV)
        self.topic = sns.Topic(stack, "Alarms", enforce_ssl=True)
        self.off = SessionExpiry(stack, "Off")
        self.on = SessionExpiry(
            stack,
            "On",
            alarm_ttl_health_window=Duration.hours(6),
            alarm_actions=[cloudwatch_actions.SnsAction(self.topic)],
        )
        self.swept = SessionExpiry(
            stack,
            "Swept",
            metrics_namespace="App/Sessions",
            alarm_ttl_health_window=Duration.days(1),
            expiry_sweep_interval=Duration.minutes(5),
        )
        imported = dynamodb.Table.from_table_attributes(
            stack, "Legacy", table_name="legacy-sessions", table_stream_arn=IMPORTED_STREAM_ARN
        )
        self.imported = SessionExpiry(
            stack, "Imported", table=imported, alarm_ttl_health_window=Duration.hours(1)
        )
        self.template = assertions.Template.from_stack(stack)
        self.json: dict[str, Any] = self.template.to_json()


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any]) -> Synth:
    return Synth(tmp_path_factory.mktemp("ttl-health"), cdk_context)


def _table_metric(name: str, table: Any, period: int) -> dict[str, Any]:
    return {
        "Metric": {
            "Dimensions": [{"Name": "TableName", "Value": table}],
            "MetricName": name,
            "Namespace": "AWS/DynamoDB",
        },
        "Period": period,
        "Stat": "Sum",
    }


def test_off_by_default(synth: Synth) -> None:
    assert synth.off.ttl_health_alarm is None
    assert synth.off.node.try_find_child("TtlHealthAlarm") is None
    assert len(synth.off.alarms) == 7  # 5 + the pause watch's paused and errors alarms


def test_alarm_when_ttl_deletes_nothing_while_sessions_are_written(synth: Synth) -> None:
    alarm = synth.on.ttl_health_alarm
    assert alarm is not None
    assert alarm in synth.on.alarms
    assert len(synth.on.alarms) == 8
    table = {"Ref": synth.id(synth.on.table)}
    props = synth.props(alarm)
    assert props["Metrics"] == [
        {
            "Expression": "IF(FILL(writes, 0) > 0 AND FILL(ttlDeleted, 0) == 0, 1, 0)",
            "Id": "expr_1",
            "Label": "Written, but nothing expired",
            "ReturnData": True,
        },
        {
            "Id": "ttlDeleted",
            "MetricStat": _table_metric("TimeToLiveDeletedItemCount", table, 21_600),
            "ReturnData": False,
        },
        {
            "Id": "writes",
            "MetricStat": _table_metric("ConsumedWriteCapacityUnits", table, 21_600),
            "ReturnData": False,
        },
    ]
    assert props["Threshold"] == 0
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    assert (props["EvaluationPeriods"], props["DatapointsToAlarm"]) == (1, 1)
    assert props["TreatMissingData"] == "notBreaching"
    assert props["AlarmActions"] == [{"Ref": synth.id(synth.topic)}]
    assert props["AlarmDescription"].startswith(
        "Time to live deleted no session in 6 hours while sessions were written"
    )


def test_with_the_sweeper_swept_sessions_count_as_deletions(synth: Synth) -> None:
    alarm = synth.swept.ttl_health_alarm
    assert alarm is not None
    metrics = synth.props(alarm)["Metrics"]
    assert metrics[0]["Expression"] == (
        "IF(FILL(writes, 0) > 0 AND FILL(ttlDeleted, 0) + FILL(swept, 0) == 0, 1, 0)"
    )
    assert metrics[3] == {
        "Id": "swept",
        "MetricStat": {
            "Metric": {"MetricName": "SessionsSwept", "Namespace": "App/Sessions"},
            "Period": 86_400,
            "Stat": "Sum",
        },
        "ReturnData": False,
    }
    assert len(synth.swept.alarms) == 9  # 7 + sweeper errors + TTL health


def test_imported_table_by_name(synth: Synth) -> None:
    alarm = synth.imported.ttl_health_alarm
    assert alarm is not None
    metrics = synth.props(alarm)["Metrics"]
    assert metrics[1]["MetricStat"] == _table_metric(
        "TimeToLiveDeletedItemCount", "legacy-sessions", 3_600
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (Duration.minutes(30), "30 minutes: expected between 1 hour and 1 day"),
        (Duration.days(2), "2 days: expected between 1 hour and 1 day"),
        (Duration.seconds(3_630), "1 hour 30 seconds: expected a whole number of minutes"),
    ],
)
def test_fails_alarm_ttl_health_window(value: Duration, shown: str) -> None:
    with pytest.raises(ValueError, match=f"alarm_ttl_health_window={shown}"):
        SessionExpiry(Stack(App(), "Validation"), "Sessions", alarm_ttl_health_window=value)
