"""What if the pause watch itself stops? (review of issue 21)

The paused-cleanup alarm is the only signal of a paused cleanup, and its metric,
``CleanupPausedSeconds``, is written only by the pause watch's runs. A watch that stops running
without an error — its EventBridge rule disabled or deleted by hand, its asynchronous
invocations throttled and dropped — writes nothing, and its errors alarm counts errors only.
The watch therefore writes a value on every run, 0 included (checked here with moto's mapping
and the runtime's watch, enabled and disabled), and the paused-cleanup alarm treats missing
data as breaching over 3 of 3 five-minute periods: 15 minutes without a value is the alarm,
one late run is not. One alarm, one meaning: "the cleanup may have been paused too long, and no
one can tell otherwise"; its description says what no data means and the first action.
"""

from __future__ import annotations

import json
from datetime import timedelta, timezone
from typing import Any

import boto3
import pytest
from aws_cdk import App, Environment, Stack, assertions
from moto import mock_aws
from session_expiry_runtime.switches import pause_watch as watch_runtime

from cdk_session_expiry import SessionExpiry

from .test_pause_watch import _moto_mapping

ENV = Environment(account="123456789012", region="us-east-1")


@pytest.fixture(scope="module")
def on_paused_seconds(cdk_context: dict[str, Any]) -> list[dict[str, Any]]:
    stack = Stack(App(context=cdk_context), "Watched", env=ENV)
    SessionExpiry(stack, "Sessions")
    alarms = assertions.Template.from_stack(stack).find_resources("AWS::CloudWatch::Alarm")
    return [
        a["Properties"]
        for a in alarms.values()
        if a["Properties"].get("MetricName") == "CleanupPausedSeconds"
    ]


def test_the_paused_alarm_hears_a_watch_that_stops_writing_its_metric(
    on_paused_seconds: list[dict[str, Any]],
) -> None:
    (alarm,) = on_paused_seconds  # one alarm on the metric, one meaning
    assert alarm["TreatMissingData"] == "breaching"
    assert (alarm["Period"], alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (300, 3, 3)
    description = alarm["AlarmDescription"]
    assert "or no one can tell" in description
    assert "No data" in description and "the pause watch itself stopped" in description
    assert "first action: check its schedule rule is enabled" in description


@pytest.mark.parametrize("enabled", [True, False])
def test_the_watch_writes_the_alarms_metric_on_every_run(
    on_paused_seconds: list[dict[str, Any]], enabled: bool
) -> None:
    # Missing data can mean "the watch stopped" only if a running watch never skips a value:
    # an enabled mapping writes 0, a disabled one its paused seconds.
    (alarm,) = on_paused_seconds
    lines: list[str] = []
    with mock_aws():
        session = boto3.session.Session(region_name="us-east-1")
        uuid = _moto_mapping(session)
        functions = session.client("lambda")
        functions.update_event_source_mapping(UUID=uuid, Enabled=enabled)
        changed = functions.get_event_source_mapping(UUID=uuid)["LastModified"]
        for minutes in (5, 10, 15):
            watch_runtime.watch(
                functions,
                uuid,
                namespace=alarm["Namespace"],
                now=changed.astimezone(timezone.utc) + timedelta(minutes=minutes),
                write=lines.append,
            )

    documents = [json.loads(line) for line in lines]
    assert len(documents) == 3
    values = [document[alarm["MetricName"]] for document in documents]
    assert values == ([0, 0, 0] if enabled else [300, 600, 900])
