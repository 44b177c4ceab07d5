"""The tool-session sweep (issue 36): a scheduled backstop for AgentCore code interpreter and
browser sessions, on whenever ``code_interpreter`` or ``browser`` is set."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, Stack
from aws_cdk.assertions import Template

from cdk_session_expiry import SessionExpiry
from cdk_session_expiry import _runtime_contract as contract

from .helpers import StackTemplate

ENV = Environment(account="123456789012", region="us-east-1")
INTERPRETER = "team_ci-Z9y8X7w6V5"
INTERPRETER_ARN = (
    "arn:aws:bedrock-agentcore:us-east-1:123456789012:code-interpreter-custom/" + INTERPRETER
)
BROWSER_ARN = "arn:aws:bedrock-agentcore:us-east-1:123456789012:browser-custom/web-Q1w2E3r4T5"


class Synth(StackTemplate):
    def __init__(self, **props: Any) -> None:
        self.stack = Stack(App(), "Tools", env=ENV)
        self.sessions = SessionExpiry(self.stack, "Sessions", **props)
        self.json = Template.from_stack(self.stack).to_json()


@pytest.fixture(scope="module")
def synth() -> Synth:
    return Synth(code_interpreter=INTERPRETER, browser=BROWSER_ARN)


def test_on_with_a_tool_running_as_the_cleanup_role(synth: Synth) -> None:
    sweep = synth.sessions.tool_session_sweep
    assert sweep is not None
    props = synth.props(sweep.function)
    assert props["Handler"] == "session_expiry_runtime.sweeps.tool_session_sweeper.handler"
    assert props["Role"] == {"Fn::GetAtt": [synth.id(synth.sessions.cleanup_role), "Arn"]}
    env = props["Environment"]["Variables"]
    assert env[contract.ENV_CODE_INTERPRETER_ID] == INTERPRETER
    assert env[contract.ENV_BROWSER_ID] == "web-Q1w2E3r4T5"
    assert env[contract.ENV_TABLE_NAME] == {"Ref": synth.id(synth.sessions.table)}
    assert contract.ENV_OWNERSHIP_TABLE_NAME in env
    # The stream path's bound: the default max_record_age (6 hours) plus an hour.
    assert env[contract.ENV_TOOL_SESSION_SWEEP_PENDING_SECONDS] == str(7 * 3600)
    assert synth.props(sweep.schedule)["ScheduleExpression"] == "rate(1 hour)"


def test_the_cleanup_role_may_list_the_given_tools_sessions_only(synth: Synth) -> None:
    policy = synth.sessions.cleanup_role.node.find_child("DefaultPolicy")
    statements = synth.props(policy)["PolicyDocument"]["Statement"]
    listing = {
        json.dumps(s["Action"]): s["Resource"]
        for s in statements
        if "List" in json.dumps(s["Action"]) and "bedrock-agentcore" in json.dumps(s["Action"])
    }
    assert listing == {
        '"bedrock-agentcore:ListCodeInterpreterSessions"': {
            "Fn::Join": [
                "",
                ["arn:", {"Ref": "AWS::Partition"}, INTERPRETER_ARN.removeprefix("arn:aws")],
            ]
        },
        '"bedrock-agentcore:ListBrowserSessions"': BROWSER_ARN,
    }


def test_only_the_tool_given_is_listed() -> None:
    synth = Synth(code_interpreter=INTERPRETER)
    assert synth.sessions.tool_session_sweep is not None
    policy = synth.sessions.cleanup_role.node.find_child("DefaultPolicy")
    text = json.dumps(synth.props(policy)["PolicyDocument"])
    assert "ListCodeInterpreterSessions" in text and "ListBrowserSessions" not in text
    env = synth.props(synth.sessions.tool_session_sweep.function)["Environment"]["Variables"]
    assert contract.ENV_BROWSER_ID not in env


def test_orphan_alarm_above_zero_and_errors_alarm(synth: Synth) -> None:
    sweep = synth.sessions.tool_session_sweep
    assert sweep is not None
    assert sweep.orphan_tool_sessions_alarm in synth.sessions.alarms
    assert sweep.errors_alarm in synth.sessions.alarms
    props = synth.props(sweep.orphan_tool_sessions_alarm)
    assert props["MetricName"] == contract.METRIC_ORPHAN_TOOL_SESSIONS_STOPPED
    assert (props["Threshold"], props["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert props["Statistic"] == "Sum" and props["TreatMissingData"] == "notBreaching"
    assert props["AlarmDescription"].endswith("#alarm-orphan-tool-sessions")
    errors = synth.props(sweep.errors_alarm)
    assert errors["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": synth.id(sweep.function)}}
    ]
    assert errors["AlarmDescription"].endswith("#alarm-tool-session-sweep-errors")


def test_off_without_tools() -> None:
    sessions = SessionExpiry(Stack(App(), "NoTools", env=ENV), "Sessions")
    assert sessions.tool_session_sweep is None
    assert sessions.node.try_find_child("ToolSessionSweep") is None


def test_interval_prop() -> None:
    synth = Synth(browser=BROWSER_ARN, tool_session_sweep_interval=Duration.minutes(30))
    assert synth.sessions.tool_session_sweep is not None
    schedule = synth.props(synth.sessions.tool_session_sweep.schedule)
    assert schedule["ScheduleExpression"] == "rate(30 minutes)"


def test_fails_a_tool_session_sweep_interval_without_a_tool() -> None:
    with pytest.raises(
        ValueError,
        match="tool_session_sweep_interval=30 minutes is set without code_interpreter or "
        "browser: expected one of them",
    ):
        SessionExpiry(
            Stack(App(), "X", env=ENV),
            "Sessions",
            tool_session_sweep_interval=Duration.minutes(30),
        )


@pytest.mark.parametrize(
    ("interval", "match"),
    [
        (Duration.minutes(2), "expected between 5 minutes and 1 day"),
        (Duration.days(2), "expected between 5 minutes and 1 day"),
        (Duration.seconds(330), "expected a whole number of minutes"),
    ],
)
def test_fails_a_tool_session_sweep_interval_out_of_range(interval: Duration, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SessionExpiry(
            Stack(App(), "X", env=ENV),
            "Sessions",
            code_interpreter=INTERPRETER,
            tool_session_sweep_interval=interval,
        )


def test_fails_a_tool_session_sweep_interval_of_the_wrong_type() -> None:
    with pytest.raises(TypeError, match="tool_session_sweep_interval=3600: expected a Duration"):
        SessionExpiry(
            Stack(App(), "X", env=ENV),
            "Sessions",
            code_interpreter=INTERPRETER,
            tool_session_sweep_interval=3600,  # type: ignore[arg-type]
        )


def test_an_aws_managed_tool_is_never_swept() -> None:
    # Shared by every application of the account and Region: the construct does not own it.
    synth = Synth(
        code_interpreter="aws.codeinterpreter.v1",
        browser=BROWSER_ARN,
        allow_stopping_shared_aws_managed_tool_sessions=True,
    )
    sweep = synth.sessions.tool_session_sweep
    assert sweep is not None
    env = synth.props(sweep.function)["Environment"]["Variables"]
    assert contract.ENV_CODE_INTERPRETER_ID not in env and contract.ENV_BROWSER_ID in env
    policy = synth.sessions.cleanup_role.node.find_child("DefaultPolicy")
    text = json.dumps(synth.props(policy)["PolicyDocument"])
    assert "ListCodeInterpreterSessions" not in text and "ListBrowserSessions" in text

    only_shared = Synth(
        code_interpreter="aws.codeinterpreter.v1",
        allow_stopping_shared_aws_managed_tool_sessions=True,
    )
    assert only_shared.sessions.tool_session_sweep is None


def test_fails_a_tool_session_sweep_interval_with_only_an_aws_managed_tool() -> None:
    with pytest.raises(
        ValueError,
        match="tool_session_sweep_interval=30 minutes is set, but the only code_interpreter or "
        "browser given is AWS-managed",
    ):
        SessionExpiry(
            Stack(App(), "X", env=ENV),
            "Sessions",
            code_interpreter="aws.codeinterpreter.v1",
            allow_stopping_shared_aws_managed_tool_sessions=True,
            tool_session_sweep_interval=Duration.minutes(30),
        )
