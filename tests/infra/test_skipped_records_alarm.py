"""The skipped-records alarm (issue 12): records skipped for a cause that loses their cleanup."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template

from cdk_session_expiry import SessionExpiry
from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.monitoring.alarms import LOST_CLEANUP_CAUSES


def _alarms(template: Template) -> dict[str, dict[str, Any]]:
    return template.find_resources("AWS::CloudWatch::Alarm")


@pytest.fixture(scope="module")
def synth() -> tuple[SessionExpiry, Template, Stack]:
    stack = Stack(App(), "Skipped")
    topic = sns.Topic(stack, "Topic")
    sessions = SessionExpiry(
        stack,
        "Sessions",
        metrics_namespace="Apps/Sessions",
        alarm_actions=[cw_actions.SnsAction(topic)],
    )
    return sessions, Template.from_stack(stack), stack


def test_the_alarm_is_on_by_default_and_watches_every_cause_that_loses_a_cleanup(
    synth: tuple[SessionExpiry, Template, Stack],
) -> None:
    sessions, template, stack = synth
    assert sessions.skipped_records_alarm in sessions.alarms
    logical_id = stack.get_logical_id(sessions.skipped_records_alarm.node.default_child)
    props = _alarms(template)[logical_id]["Properties"]

    assert props["Threshold"] == 0
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    assert props["TreatMissingData"] == "notBreaching"
    assert len(props["AlarmActions"]) == 1
    (expression,) = [m for m in props["Metrics"] if "Expression" in m]
    watched = [m["MetricStat"] for m in props["Metrics"] if "MetricStat" in m]
    assert {m["Metric"]["Namespace"] for m in watched} == {"Apps/Sessions"}
    skipped = {
        d["Value"]
        for m in watched
        if m["Metric"]["MetricName"] == contract.METRIC_RECORDS_SKIPPED
        for d in m["Metric"]["Dimensions"]
        if d["Name"] == contract.DIMENSION_CAUSE
    }
    # ItemStillInTable: a Kinesis REMOVE of an item still held (forged): kinesis_removals.
    assert skipped == {"NoOldImage", "MissingAttributes", "NoSequenceNumber", "ItemStillInTable"}
    names = {m["Metric"]["MetricName"] for m in watched}
    assert {contract.METRIC_PREFIXES_REFUSED, contract.METRIC_GRANTS_REFUSED} <= names
    refused = {
        d["Value"]
        for m in watched
        if m["Metric"]["MetricName"] == contract.METRIC_RESOURCES_REFUSED
        for d in m["Metric"]["Dimensions"]
        if d["Name"] == contract.DIMENSION_REFUSAL
    }
    # Only forgery (or a writer bypassing SessionStore) explains these two; the others are
    # normal operation and stay off the alarm.
    assert refused == {"NotOwned", "Unclaimed"} == set(contract.ALARMED_REFUSALS)
    assert all(m["Period"] == 300 and m["Stat"] == "Sum" for m in watched)
    # Every watched metric is in the sum, FILL-ed: the runtime writes nothing when all is well.
    assert expression["Expression"].count("FILL(") == len(watched) == 8
    assert "FILL(refusedNotOwned, 0)" in expression["Expression"]
    assert "FILL(refusedUnclaimed, 0)" in expression["Expression"]
    description = props["AlarmDescription"]
    assert "GrantsRefused" in description
    assert "ResourcesRefused NotOwned/Unclaimed" in description
    assert "Runbook:" in description
    assert len(description) <= 1024  # CloudWatch's AlarmDescription limit


def test_harmless_causes_are_not_watched() -> None:
    assert contract.CAUSE_NOT_REMOVE not in LOST_CLEANUP_CAUSES
    assert contract.CAUSE_DUPLICATE not in LOST_CLEANUP_CAUSES
    assert set(LOST_CLEANUP_CAUSES) <= set(contract.CAUSES)


def test_the_alarm_can_be_turned_off() -> None:
    stack = Stack(App(), "Off")
    sessions = SessionExpiry(stack, "Sessions", alarm_skipped_records=False)

    assert sessions.skipped_records_alarm is None
    descriptions = [
        a["Properties"].get("AlarmDescription", "")
        for a in _alarms(Template.from_stack(stack)).values()
    ]
    assert not any("skipped records for good" in d for d in descriptions)


def test_fails_alarm_skipped_records_of_the_wrong_type() -> None:
    with pytest.raises(TypeError, match="alarm_skipped_records='yes': expected True or False"):
        SessionExpiry(Stack(App(), "Bad"), "Sessions", alarm_skipped_records="yes")  # type: ignore[arg-type]
