"""AgentCore targets (issue 10): props, the cleanup's environment and IAM scoped to each target."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_bedrockagentcore as agentcore
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from cdk_session_expiry import SessionExpiry
from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.validation import PropTypeError

ENV = Environment(account="123456789012", region="us-east-1")
RUNTIME_ARN = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/coder_agent-a1B2c3D4e5"
CUSTOM_CI_ID = "team_ci-Z9y8X7w6V5"
CUSTOM_BROWSER_ARN = (
    "arn:aws:bedrock-agentcore:us-east-1:123456789012:browser-custom/web-Q1w2E3r4T5"
)


def _stack() -> Stack:
    return Stack(App(), "Agents", env=ENV)


def _synth(**props: Any) -> tuple[SessionExpiry, dict[str, Any], Stack]:
    stack = _stack()
    sessions = SessionExpiry(stack, "Sessions", **props)
    return sessions, Template.from_stack(stack).to_json(), stack


def _cleanup_env(sessions: SessionExpiry, template: dict[str, Any], stack: Stack) -> Any:
    fn = template["Resources"][stack.get_logical_id(sessions.cleanup_function.node.default_child)]
    return fn["Properties"]["Environment"]["Variables"]


def _agentcore_statements(sessions: SessionExpiry, template: dict[str, Any]) -> list[Any]:
    policies = [
        r["Properties"]["PolicyDocument"]["Statement"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        and any(role["Ref"].startswith("SessionsCleanupRole") for role in r["Properties"]["Roles"])
    ]
    return [
        s
        for statements in policies
        for s in statements
        if any(
            a.startswith("bedrock-agentcore:")
            for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
        )
    ]


def test_without_targets_nothing_agentcore_is_configured() -> None:
    sessions, template, stack = _synth()
    env = _cleanup_env(sessions, template, stack)
    assert not any("AGENT" in k or "CODE_INTERPRETER" in k or "BROWSER" in k for k in env)
    assert _agentcore_statements(sessions, template) == []


def test_runtime_by_arn_with_qualifier_environment_and_iam_on_that_endpoint_only() -> None:
    sessions, template, stack = _synth(agent_runtime=RUNTIME_ARN, agent_runtime_qualifier="prod")
    env = _cleanup_env(sessions, template, stack)
    assert env[contract.ENV_AGENT_RUNTIME_ARN] == RUNTIME_ARN
    assert env[contract.ENV_AGENT_RUNTIME_QUALIFIER] == "prod"
    assert env[contract.ENV_AGENT_RUNTIME_SESSION_ATTRIBUTE] == "agentRuntimeSessionId"
    (statement,) = _agentcore_statements(sessions, template)
    assert statement["Action"] == "bedrock-agentcore:StopRuntimeSession"
    assert statement["Effect"] == "Allow"
    assert sorted(statement["Resource"]) == [
        RUNTIME_ARN,
        f"{RUNTIME_ARN}/runtime-endpoint/prod",
    ]


def test_runtime_without_qualifier_is_allowed_on_the_default_endpoint_only() -> None:
    sessions, template, stack = _synth(agent_runtime=RUNTIME_ARN)
    assert contract.ENV_AGENT_RUNTIME_QUALIFIER not in _cleanup_env(sessions, template, stack)
    (statement,) = _agentcore_statements(sessions, template)
    assert sorted(statement["Resource"]) == [
        RUNTIME_ARN,
        f"{RUNTIME_ARN}/runtime-endpoint/DEFAULT",
    ]


def test_runtime_of_this_app_by_its_reference() -> None:
    stack = _stack()
    runtime = agentcore.Runtime(
        stack,
        "Agent",
        runtime_name="coder_agent",
        agent_runtime_artifact=agentcore.AgentRuntimeArtifact.from_image_uri(
            "123456789012.dkr.ecr.us-east-1.amazonaws.com/agent:1"
        ),
    )
    sessions = SessionExpiry(stack, "Sessions", agent_runtime=runtime)
    template = Template.from_stack(stack).to_json()
    cfn_id = stack.get_logical_id(runtime.node.default_child)
    env = _cleanup_env(sessions, template, stack)
    assert env[contract.ENV_AGENT_RUNTIME_ARN] == {"Fn::GetAtt": [cfn_id, "AgentRuntimeArn"]}
    (statement,) = _agentcore_statements(sessions, template)
    assert {"Fn::GetAtt": [cfn_id, "AgentRuntimeArn"]} in statement["Resource"]


def test_managed_code_interpreter_and_browser_by_identifier() -> None:
    sessions, template, stack = _synth(
        code_interpreter="aws.codeinterpreter.v1", browser="aws.browser.v1"
    )
    env = _cleanup_env(sessions, template, stack)
    assert env[contract.ENV_CODE_INTERPRETER_ID] == "aws.codeinterpreter.v1"
    assert env[contract.ENV_BROWSER_ID] == "aws.browser.v1"
    assert env[contract.ENV_CODE_INTERPRETER_SESSION_ATTRIBUTE] == "codeInterpreterSessionId"
    assert env[contract.ENV_BROWSER_SESSION_ATTRIBUTE] == "browserSessionId"
    resources = {s["Action"]: s["Resource"] for s in _agentcore_statements(sessions, template)}
    assert resources == {
        "bedrock-agentcore:StopCodeInterpreterSession": {
            "Fn::Join": [
                "",
                [
                    "arn:",
                    {"Ref": "AWS::Partition"},
                    ":bedrock-agentcore:us-east-1:aws:code-interpreter/aws.codeinterpreter.v1",
                ],
            ]
        },
        "bedrock-agentcore:StopBrowserSession": {
            "Fn::Join": [
                "",
                [
                    "arn:",
                    {"Ref": "AWS::Partition"},
                    ":bedrock-agentcore:us-east-1:aws:browser/aws.browser.v1",
                ],
            ]
        },
    }


def test_custom_tools_by_identifier_reference_and_arn() -> None:
    stack = _stack()
    interpreter = agentcore.CfnCodeInterpreterCustom.from_code_interpreter_id(
        stack, "Interpreter", CUSTOM_CI_ID
    )
    sessions = SessionExpiry(
        stack,
        "Sessions",
        code_interpreter=interpreter,
        browser=CUSTOM_BROWSER_ARN,
        browser_session_attribute="webSession",
    )
    template = Template.from_stack(stack).to_json()
    env = _cleanup_env(sessions, template, stack)
    assert env[contract.ENV_CODE_INTERPRETER_ID] == CUSTOM_CI_ID
    assert env[contract.ENV_BROWSER_ID] == "web-Q1w2E3r4T5"
    assert env[contract.ENV_BROWSER_SESSION_ATTRIBUTE] == "webSession"
    resources = {s["Action"]: s["Resource"] for s in _agentcore_statements(sessions, template)}
    assert resources["bedrock-agentcore:StopBrowserSession"] == CUSTOM_BROWSER_ARN
    interpreter_arn = Stack.of(stack).resolve(
        interpreter.code_interpreter_custom_ref.code_interpreter_arn
    )
    assert resources["bedrock-agentcore:StopCodeInterpreterSession"] == interpreter_arn
    assert "code-interpreter-custom/" in str(interpreter_arn)


def test_session_access_gives_the_store_the_attribute_names_of_the_targets_set() -> None:
    stack = _stack()
    sessions = SessionExpiry(
        stack, "Sessions", agent_runtime=RUNTIME_ARN, agent_runtime_session_attribute="agentSid"
    )
    env = sessions.session_environment()
    assert env[contract.ENV_AGENT_RUNTIME_SESSION_ATTRIBUTE] == "agentSid"
    assert contract.ENV_BROWSER_SESSION_ATTRIBUTE not in env
    assert contract.ENV_AGENT_RUNTIME_ARN not in env  # the application never stops sessions
    fn = lambda_.Function(
        stack,
        "App",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="app.handler",
        code=lambda_.Code.from_inline("def handler(e, c): pass"),
    )
    sessions.grant_session_access(fn)
    template = Template.from_stack(stack).to_json()
    variables = template["Resources"][stack.get_logical_id(fn.node.default_child)]["Properties"][
        "Environment"
    ]["Variables"]
    assert variables[contract.ENV_AGENT_RUNTIME_SESSION_ATTRIBUTE] == "agentSid"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"agent_runtime": "my-agent"},
            r"agent_runtime='my-agent': expected an AgentCore runtime ARN",
        ),
        (
            {"agent_runtime": RUNTIME_ARN.replace(":runtime/", ":agent/")},
            r"expected an AgentCore runtime ARN arn:<partition>",
        ),
        (
            {"agent_runtime": RUNTIME_ARN.replace("us-east-1", "eu-west-1")},
            r"is in Region eu-west-1: expected the stack's Region us-east-1",
        ),
        (
            {"agent_runtime_qualifier": "prod"},
            r"agent_runtime_qualifier='prod' is set without agent_runtime",
        ),
        (
            {"agent_runtime": RUNTIME_ARN, "agent_runtime_qualifier": "prod/v1"},
            r"agent_runtime_qualifier='prod/v1': expected an AgentCore runtime endpoint name",
        ),
        (
            {"code_interpreter": "my interpreter"},
            r"code_interpreter='my interpreter': expected the identifier of an AWS-managed "
            r"code interpreter \(e.g. 'aws.codeinterpreter.v1'\)",
        ),
        (
            {"browser": "arn:aws:bedrock-agentcore:us-east-1:123456789012:browser/aws.browser.v1"},
            r"browser='arn:.*': expected an ARN arn:<partition>:bedrock-agentcore:<region>:"
            r"<account>:browser-custom/<id> or .*:aws:browser/aws.browser.v1",
        ),
        (
            {"browser": "aws.browser.v1", "browser_session_attribute": "connectionId"},
            r"browser_session_attribute='connectionId' is also connection_id_attribute",
        ),
    ],
    ids=[
        "runtime-not-an-arn",
        "runtime-wrong-resource-type",
        "runtime-other-region",
        "qualifier-without-runtime",
        "qualifier-not-an-endpoint-name",
        "interpreter-bad-identifier",
        "browser-arn-account-with-managed-type",
        "attribute-clash",
    ],
)
def test_fails_on_bad_agentcore_props(props: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SessionExpiry(_stack(), "Sessions", **props)


def test_fails_on_a_runtime_of_the_wrong_type() -> None:
    stack = _stack()
    bucket_like = lambda_.Function(
        stack,
        "NotARuntime",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="app.handler",
        code=lambda_.Code.from_inline("def handler(e, c): pass"),
    )
    with pytest.raises(PropTypeError, match=r"agent_runtime=<Function Agents/NotARuntime>"):
        SessionExpiry(stack, "Sessions", agent_runtime=bucket_like)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "runtime_id",
    [
        "coder_agent-a1B2c3D4e",  # 9 characters after the dash
        "coder_agent-a1B2c3D4e5f",  # 11
        "coder_agent-a1B2c3D4_5",  # '_' among the 10
        "coder_agent",  # no dash at all
        "1coder-a1B2c3D4e5",  # the name starts with a digit
    ],
)
def test_fails_on_a_runtime_id_outside_agentcores_pattern_saying_what_it_must_be(
    runtime_id: str,
) -> None:
    arn = RUNTIME_ARN.replace("coder_agent-a1B2c3D4e5", runtime_id)
    with pytest.raises(ValueError) as raised:
        SessionExpiry(_stack(), "Sessions", agent_runtime=arn)
    message = str(raised.value)
    assert message.startswith(f"agent_runtime={arn!r}: expected an AgentCore runtime ARN")
    assert "a '-' and exactly 10 letters or digits" in message
    assert "[a-zA-Z][a-zA-Z0-9_]{0,99}-[a-zA-Z0-9]{10}" in message


def test_a_runtime_id_of_the_longest_name_is_accepted() -> None:
    arn = RUNTIME_ARN.replace("coder_agent", "a" * 100)
    sessions, template, stack = _synth(agent_runtime=arn)
    assert _cleanup_env(sessions, template, stack)[contract.ENV_AGENT_RUNTIME_ARN] == arn
