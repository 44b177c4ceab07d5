"""The circuit breaker on the construct side (issue 21): off by default; with
``circuit_breaker=True`` an SSM parameter, a function with reserved concurrency 1, a rule on the
chosen alarms' changes to ALARM (checked against moto's EventBridge with the documented event), a
schedule, IAM on the cleanup's mapping only; every rejected prop and a LATEST mapping refused."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from aws_cdk import App, Duration, Environment, Stack, assertions
from aws_cdk import aws_logs as logs
from cfnlint.api import ManualArgs, lint
from moto import mock_aws
from session_expiry_runtime.switches.circuit_breaker import Record

from cdk_session_expiry import CircuitBreakerAlarm, PropTypeError, SessionExpiry
from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.switches import circuit_breaker

from .helpers import StackTemplate, resources_of

REGION = "us-east-1"
ENV = Environment(account="123456789012", region=REGION)


class Synth(StackTemplate):
    def __init__(self, cdk_context: dict[str, Any]) -> None:
        app = App(context=cdk_context)
        self.stack = stack = Stack(app, "Breaker", env=ENV)
        self.off = SessionExpiry(stack, "Off")
        self.on = SessionExpiry(stack, "Sessions", circuit_breaker=True)
        self.chosen = SessionExpiry(
            stack,
            "Chosen",
            circuit_breaker=True,
            circuit_breaker_alarms=[
                CircuitBreakerAlarm.THROTTLES,
                CircuitBreakerAlarm.ITERATOR_AGE,
            ],
            circuit_breaker_cool_down=Duration.minutes(30),
            cleanup_enabled=False,
        )
        self.board = self.on.add_dashboard()
        self.template = assertions.Template.from_stack(stack)
        self.json: dict[str, Any] = self.template.to_json()

    def breaker(self, sessions: SessionExpiry) -> circuit_breaker.CircuitBreaker:
        assert sessions.circuit_breaker is not None
        return sessions.circuit_breaker

    def env(self, sessions: SessionExpiry) -> dict[str, Any]:
        return self.props(self.breaker(sessions).function)["Environment"]["Variables"]  # type: ignore[no-any-return]

    def statements(self, sessions: SessionExpiry) -> list[dict[str, Any]]:
        policy = self.breaker(sessions).role.node.find_child("DefaultPolicy")
        return self.props(policy)["PolicyDocument"]["Statement"]  # type: ignore[no-any-return]

    def arn(self, alarm: Any) -> dict[str, Any]:
        return {"Fn::GetAtt": [self.id(alarm), "Arn"]}


@pytest.fixture(scope="module")
def synth(cdk_context: dict[str, Any]) -> Synth:
    return Synth(cdk_context)


def test_off_by_default(synth: Synth) -> None:
    assert synth.off.circuit_breaker is None
    assert synth.off.node.try_find_child("CircuitBreaker") is None
    off_resources = [k for k in synth.json["Resources"] if k.startswith("Off")]
    assert not [k for k in off_resources if "CircuitBreaker" in k]
    assert len(resources_of(synth.json, "AWS::SSM::Parameter")) == 2  # "Sessions" and "Chosen"


def test_the_record_starts_closed_as_the_runtime_reads_it(synth: Synth) -> None:
    parameter = synth.props(synth.breaker(synth.on).state_parameter)
    assert (parameter["Type"], parameter["Tier"]) == ("String", "Standard")
    assert Record.from_json(parameter["Value"]) == Record()


def test_the_function_never_overlaps_and_knows_its_alarms(synth: Synth) -> None:
    breaker = synth.breaker(synth.on)
    function = synth.props(breaker.function)
    assert function["Handler"] == contract.CIRCUIT_BREAKER_HANDLER
    assert function["ReservedConcurrentExecutions"] == 1
    assert function["Code"] == synth.props(synth.on.cleanup_function)["Code"]
    env = synth.env(synth.on)
    assert env[contract.ENV_EVENT_SOURCE_MAPPING_UUID] == {
        "Ref": synth.id(synth.on.event_source_mapping)
    }
    assert env[contract.ENV_BREAKER_STATE_PARAMETER] == {"Ref": synth.id(breaker.state_parameter)}
    alarms = json.dumps(env[contract.ENV_BREAKER_ALARMS])
    assert synth.id(synth.on.errors_alarm) in alarms
    assert synth.id(synth.on.failure_queue_alarm) in alarms
    assert synth.id(synth.on.iterator_age_alarm) not in alarms
    assert env[contract.ENV_BREAKER_CLOSED_ONLY_ALARMS] == "[]"
    assert env[contract.ENV_BREAKER_COOL_DOWN_SECONDS] == "900"
    assert env[contract.ENV_BREAKER_PROBE_SECONDS] == "900"
    assert env[contract.ENV_CLEANUP_ENABLED] == "true"


def test_chosen_alarms_cool_down_and_a_paused_deploy_reach_the_function(synth: Synth) -> None:
    env = synth.env(synth.chosen)
    assert synth.id(synth.chosen.throttles_alarm) in json.dumps(env[contract.ENV_BREAKER_ALARMS])
    assert synth.id(synth.chosen.iterator_age_alarm) in json.dumps(
        env[contract.ENV_BREAKER_CLOSED_ONLY_ALARMS]
    )
    assert env[contract.ENV_BREAKER_COOL_DOWN_SECONDS] == "1800"
    assert env[contract.ENV_CLEANUP_ENABLED] == "false"
    pattern = synth.props(synth.breaker(synth.chosen).alarm_rule)["EventPattern"]
    assert pattern["resources"] == [
        synth.arn(synth.chosen.throttles_alarm),
        synth.arn(synth.chosen.iterator_age_alarm),
    ]


def test_the_alarm_rule_sends_the_chosen_alarms_changes_to_alarm(synth: Synth) -> None:
    breaker = synth.breaker(synth.on)
    rule = synth.props(breaker.alarm_rule)
    assert rule["EventPattern"] == {
        "source": ["aws.cloudwatch"],
        "detail-type": ["CloudWatch Alarm State Change"],
        "resources": [synth.arn(synth.on.errors_alarm), synth.arn(synth.on.failure_queue_alarm)],
        "detail": {"state": {"value": ["ALARM"]}},
    }
    assert rule["Targets"][0]["Arn"] == {"Fn::GetAtt": [synth.id(breaker.function), "Arn"]}
    schedule = synth.props(breaker.schedule)
    assert schedule["ScheduleExpression"] == "rate(5 minutes)"
    assert schedule["Targets"][0]["Arn"] == rule["Targets"][0]["Arn"]


def test_moto_eventbridge_delivers_only_the_chosen_alarms_alarm_events(synth: Synth) -> None:
    """The synthesized pattern on moto's EventBridge (alarm ARNs put in for the GetAtts), fed the
    event CloudWatch sends (Amazon CloudWatch User Guide, "Alarm events and EventBridge")."""
    pattern = synth.props(synth.breaker(synth.on).alarm_rule)["EventPattern"]
    arns = {
        synth.id(a): f"arn:aws:cloudwatch:{REGION}:123456789012:alarm:{synth.id(a)}"
        for a in (synth.on.errors_alarm, synth.on.failure_queue_alarm, synth.on.throttles_alarm)
    }
    pattern["resources"] = [arns[r["Fn::GetAtt"][0]] for r in pattern["resources"]]
    errors, throttles = (
        arns[synth.id(synth.on.errors_alarm)],
        arns[synth.id(synth.on.throttles_alarm)],
    )
    with mock_aws():
        session = boto3.session.Session(region_name=REGION)
        events, sqs = session.client("events"), session.client("sqs")
        queue = sqs.create_queue(QueueName="breaker")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
        events.put_rule(Name="AlarmRule", EventPattern=json.dumps(pattern))
        events.put_targets(
            Rule="AlarmRule",
            Targets=[{"Id": "breaker", "Arn": queue_arn["Attributes"]["QueueArn"]}],
        )
        for arn, value in ((errors, "OK"), (throttles, "ALARM"), (errors, "ALARM")):
            events.put_events(Entries=[_alarm_event(arn, value)])
        delivered = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    (event,) = (json.loads(m["Body"]) for m in delivered)
    assert event["resources"] == [errors] and event["detail"]["state"]["value"] == "ALARM"


def _alarm_event(arn: str, value: str) -> dict[str, Any]:
    name = arn.rsplit(":", 1)[1]
    return {
        "Source": "aws.cloudwatch",
        "DetailType": "CloudWatch Alarm State Change",
        "Resources": [arn],
        "Detail": json.dumps(
            {"alarmName": name, "state": {"value": value}, "previousState": {"value": "OK"}}
        ),
    }


def test_iam_reaches_only_the_cleanups_mapping_its_alarms_and_its_record(synth: Synth) -> None:
    breaker = synth.breaker(synth.on)
    statements = synth.statements(synth.on)
    mapping_arn = synth.stack.resolve(synth.on.event_source_mapping.event_source_mapping_arn)
    assert statements[1:] == [
        {
            "Action": ["lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping"],
            "Effect": "Allow",
            "Resource": mapping_arn,
        },
        {
            "Action": "cloudwatch:DescribeAlarms",
            "Effect": "Allow",
            "Resource": [synth.arn(synth.on.errors_alarm), synth.arn(synth.on.failure_queue_alarm)],
        },
        {
            "Action": ["ssm:GetParameter", "ssm:PutParameter"],
            "Effect": "Allow",
            "Resource": synth.stack.resolve(breaker.state_parameter.parameter_arn),
        },
    ]
    assert statements[0]["Action"] == ["logs:CreateLogStream", "logs:PutLogEvents"]
    # Nobody in the stack may create or delete a mapping (a new one starts over).
    everything = json.dumps(resources_of(synth.json, "AWS::IAM::Policy"))
    assert "lambda:DeleteEventSourceMapping" not in everything
    assert "lambda:CreateEventSourceMapping" not in everything


def test_the_pause_watch_reads_the_breakers_record_and_may_only_read_it(synth: Synth) -> None:
    # A breaker whose every probe fails moves the mapping's LastModified at each re-opening:
    # the watch counts from the breaker's first opening, read from its record.
    breaker, watch = synth.breaker(synth.on), synth.on.pause_watch
    env = synth.props(watch.function)["Environment"]["Variables"]
    assert env[contract.ENV_BREAKER_STATE_PARAMETER] == {"Ref": synth.id(breaker.state_parameter)}
    policy = synth.props(watch.role.node.find_child("DefaultPolicy"))
    assert policy["PolicyDocument"]["Statement"][-1] == {
        "Action": "ssm:GetParameter",
        "Effect": "Allow",
        "Resource": synth.stack.resolve(breaker.state_parameter.parameter_arn),
    }
    off = synth.props(synth.off.pause_watch.function)["Environment"]["Variables"]
    assert contract.ENV_BREAKER_STATE_PARAMETER not in off


def test_errors_alarm_and_dashboard_state(synth: Synth) -> None:
    breaker = synth.breaker(synth.on)
    assert breaker.errors_alarm in synth.on.alarms
    assert synth.props(breaker.errors_alarm)["AlarmDescription"].endswith(
        "Runbook: docs/operating.md#alarm-circuit-breaker-errors"
    )
    body = json.dumps(synth.props(synth.board)["DashboardBody"])
    assert contract.METRIC_CIRCUIT_BREAKER_STATE in body
    assert contract.METRIC_CLEANUP_PAUSED_SECONDS in body
    assert "circuit breaker (0 closed, 1 half-open, 2 open)" in body


def test_cfn_lint_reports_no_errors(synth: Synth) -> None:
    matches = lint(json.dumps(synth.json), config=ManualArgs(regions=[REGION]))
    assert [str(m) for m in matches if m.rule.id.startswith("E")] == []


# --- rejected props ---------------------------------------------------------------------------


def _build(**props: Any) -> SessionExpiry:
    return SessionExpiry(Stack(App(), "Validation"), "Sessions", **props)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"circuit_breaker_alarms": [CircuitBreakerAlarm.ERRORS]},
            "circuit_breaker_alarms=[CircuitBreakerAlarm.ERRORS] is set without "
            "circuit_breaker=True: expected circuit_breaker=True, or no circuit_breaker_alarms",
        ),
        (
            {"circuit_breaker_cool_down": Duration.minutes(30)},
            "circuit_breaker_cool_down=30 minutes is set without circuit_breaker=True: expected "
            "circuit_breaker=True, or no circuit_breaker_cool_down",
        ),
        (
            {"circuit_breaker": True, "circuit_breaker_alarms": []},
            "circuit_breaker_alarms=[]: expected at least one CircuitBreakerAlarm (ERRORS, "
            "FAILURE_DESTINATION, THROTTLES, SKIPPED_RECORDS)",
        ),
        (
            {"circuit_breaker": True, "circuit_breaker_alarms": [CircuitBreakerAlarm.ITERATOR_AGE]},
            "circuit_breaker_alarms=[CircuitBreakerAlarm.ITERATOR_AGE] alone: expected at least "
            "one alarm of failures with it (ERRORS, FAILURE_DESTINATION, THROTTLES, "
            "SKIPPED_RECORDS). Iterator age rises while the cleanup is paused, so alone it "
            "would hold the breaker open, and pausing a cleanup that is only behind puts it "
            "further behind",
        ),
        (
            {
                "circuit_breaker": True,
                "circuit_breaker_alarms": [CircuitBreakerAlarm.SKIPPED_RECORDS],
                "alarm_skipped_records": False,
            },
            "circuit_breaker_alarms=[CircuitBreakerAlarm.SKIPPED_RECORDS] with "
            "alarm_skipped_records=False: expected alarm_skipped_records=True (the alarm to "
            "watch), or no CircuitBreakerAlarm.SKIPPED_RECORDS",
        ),
        (
            {"circuit_breaker": True, "circuit_breaker_cool_down": Duration.minutes(4)},
            "circuit_breaker_cool_down=4 minutes: expected a whole number of seconds, at least "
            "5 minutes (one alarm period)",
        ),
        (
            {"circuit_breaker": True, "circuit_breaker_cool_down": Duration.millis(300_500)},
            "circuit_breaker_cool_down=5 minutes 500 millis: expected a whole number of "
            "seconds, at least 5 minutes (one alarm period)",
        ),
        (
            {
                "circuit_breaker": True,
                "circuit_breaker_cool_down": Duration.hours(2),
                "alarm_cleanup_paused_after": Duration.hours(2),
            },
            "circuit_breaker_cool_down=2 hours: expected less than alarm_cleanup_paused_after "
            "(2 hours): the first probe must come before it fires",
        ),
        (
            {"circuit_breaker": True, "max_record_age": Duration.minutes(10)},
            "circuit_breaker_cool_down=15 minutes: expected less than max_record_age "
            "(10 minutes): a probe after it sends every waiting record to the on-failure "
            "destination, whose alarm opens the breaker again",
        ),
    ],
)
def test_fails_circuit_breaker_props(props: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        _build(**props)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("prop", "value", "expected"),
    [
        ("circuit_breaker", "yes", "True or False (a bool)"),
        (
            "circuit_breaker_alarms",
            ["ERRORS"],
            "a list of CircuitBreakerAlarm, e.g. [CircuitBreakerAlarm.ERRORS]",
        ),
        (
            "circuit_breaker_alarms",
            CircuitBreakerAlarm.ERRORS,
            "a list of CircuitBreakerAlarm, e.g. [CircuitBreakerAlarm.ERRORS]",
        ),
        ("circuit_breaker_cool_down", 900, "a Duration, e.g. Duration.hours(6)"),
    ],
)
def test_fails_circuit_breaker_props_of_the_wrong_type(
    prop: str, value: Any, expected: str
) -> None:
    with pytest.raises(PropTypeError) as raised:
        _build(**{"circuit_breaker": True, prop: value})
    assert str(raised.value) == f"{prop}={value!r}: expected {expected}"


def test_fails_circuit_breaker_on_a_mapping_whose_starting_position_is_latest() -> None:
    """The construct's mapping is TRIM_HORIZON; an escape hatch can make it LATEST after the
    breaker is built: synth refuses it then (FACTS: LATEST can skip records when toggled)."""
    stack = Stack(App(), "Latest")
    sessions = SessionExpiry(stack, "Sessions", circuit_breaker=True)
    sessions.event_source_mapping.node.default_child.starting_position = "LATEST"  # type: ignore[union-attr]

    with pytest.raises(Exception, match=r"StartingPosition is 'LATEST': expected TRIM_HORIZON"):
        assertions.Template.from_stack(stack)


def test_a_latest_mapping_without_the_breaker_still_synthesizes() -> None:
    stack = Stack(App(), "LatestNoBreaker")
    sessions = SessionExpiry(stack, "Sessions")
    sessions.event_source_mapping.node.default_child.starting_position = "LATEST"  # type: ignore[union-attr]
    template = assertions.Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping", {"StartingPosition": "LATEST"}
    )


def test_the_breaker_refuses_a_latest_mapping_when_it_is_built() -> None:
    stack = Stack(App(), "LatestAtBuild")
    sessions = SessionExpiry(stack, "Sessions")
    sessions.event_source_mapping.node.default_child.starting_position = "LATEST"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match=r"StartingPosition is 'LATEST': expected TRIM_HORIZON"):
        circuit_breaker.CircuitBreaker(
            sessions,
            "LateBreaker",
            mapping=sessions.event_source_mapping,
            alarms={CircuitBreakerAlarm.ERRORS: sessions.errors_alarm},
            cool_down=Duration.minutes(15),
            cleanup_enabled=True,
            log_retention=logs.RetentionDays.ONE_DAY,
            metrics_namespace="SessionExpiry",
            alarm_actions=[],
        )
