"""AgentCore targets (issue 10): props, the cleanup's environment and IAM scoped to each target."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_bedrockagentcore as agentcore
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Match, Template

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


OPT_IN = "allow_stopping_shared_aws_managed_tool_sessions"
MANAGED_CI_ARN = "arn:aws:bedrock-agentcore:us-east-1:aws:code-interpreter/aws.codeinterpreter.v1"
MANAGED_BROWSER_ARN = "arn:aws:bedrock-agentcore:us-east-1:aws:browser/aws.browser.v1"


def _managed_arn(resource: str) -> dict[str, Any]:
    return {
        "Fn::Join": [
            "",
            ["arn:", {"Ref": "AWS::Partition"}, f":bedrock-agentcore:us-east-1:aws:{resource}"],
        ]
    }


@pytest.mark.parametrize(
    ("props", "prop", "kind"),
    [
        ({"code_interpreter": "aws.codeinterpreter.v1"}, "code_interpreter", "code interpreter"),
        ({"code_interpreter": MANAGED_CI_ARN}, "code_interpreter", "code interpreter"),
        ({"browser": "aws.browser.v1"}, "browser", "browser"),
        ({"browser": MANAGED_BROWSER_ARN}, "browser", "browser"),
    ],
    ids=["interpreter-id", "interpreter-arn", "browser-id", "browser-arn"],
)
def test_fails_on_an_aws_managed_tool_without_the_opt_in(
    props: dict[str, Any], prop: str, kind: str
) -> None:
    with pytest.raises(ValueError) as raised:
        SessionExpiry(_stack(), "Sessions", **props)
    message = str(raised.value)
    # The prop, why, and what to use instead.
    assert message.startswith(f"{prop}='aws.")
    assert f"is the AWS-managed {kind}" in message
    assert "shared by every application of the account" in message
    assert f"could stop another application's {kind} sessions" in message
    custom = "CodeInterpreterCustom" if prop == "code_interpreter" else "BrowserCustom"
    assert f"Expected a custom {kind} of this app (aws_bedrockagentcore.{custom}" in message
    assert f"or {OPT_IN}=True to accept that risk" in message


def test_with_the_opt_in_managed_tools_get_a_statement_marked_by_its_sid() -> None:
    sessions, template, stack = _synth(
        code_interpreter="aws.codeinterpreter.v1", browser=MANAGED_BROWSER_ARN, **{OPT_IN: True}
    )
    env = _cleanup_env(sessions, template, stack)
    assert env[contract.ENV_CODE_INTERPRETER_ID] == "aws.codeinterpreter.v1"
    assert env[contract.ENV_BROWSER_ID] == "aws.browser.v1"
    assert env[contract.ENV_CODE_INTERPRETER_SESSION_ATTRIBUTE] == "codeInterpreterSessionId"
    assert env[contract.ENV_BROWSER_SESSION_ATTRIBUTE] == "browserSessionId"
    statements = {s["Action"]: s for s in _agentcore_statements(sessions, template)}
    # AWS offers no condition key for these actions or resource types: none is set.
    assert statements == {
        "bedrock-agentcore:StopCodeInterpreterSession": {
            "Sid": "StopSharedAwsManagedCodeInterpreterSessions",
            "Effect": "Allow",
            "Action": "bedrock-agentcore:StopCodeInterpreterSession",
            "Resource": _managed_arn("code-interpreter/aws.codeinterpreter.v1"),
        },
        "bedrock-agentcore:StopBrowserSession": {
            "Sid": "StopSharedAwsManagedBrowserSessions",
            "Effect": "Allow",
            "Action": "bedrock-agentcore:StopBrowserSession",
            "Resource": MANAGED_BROWSER_ARN,
        },
    }


def test_with_the_opt_in_the_application_role_gets_the_same_marked_statement() -> None:
    stack = _stack()
    sessions = SessionExpiry(
        stack, "Sessions", code_interpreter="aws.codeinterpreter.v1", **{OPT_IN: True}
    )
    fn = _app_function(stack)
    sessions.grant_session_access(fn)
    Template.from_stack(stack).has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [{"Ref": stack.get_logical_id(fn.role.node.default_child)}],  # type: ignore[union-attr]
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        {
                            "Sid": "StopSharedAwsManagedCodeInterpreterSessions",
                            "Effect": "Allow",
                            "Action": "bedrock-agentcore:StopCodeInterpreterSession",
                            "Resource": _managed_arn("code-interpreter/aws.codeinterpreter.v1"),
                        }
                    ]
                )
            },
        },
    )


def test_fails_on_the_opt_in_without_an_aws_managed_tool() -> None:
    with pytest.raises(
        ValueError,
        match=rf"{OPT_IN}=True is set without an AWS-managed code_interpreter or browser: "
        rf"expected code_interpreter='aws.codeinterpreter.v1' or browser='aws.browser.v1'",
    ):
        SessionExpiry(_stack(), "Sessions", code_interpreter=CUSTOM_CI_ID, **{OPT_IN: True})


def test_fails_on_an_opt_in_that_is_not_a_bool() -> None:
    with pytest.raises(PropTypeError, match=rf"{OPT_IN}='yes': expected True or False"):
        SessionExpiry(_stack(), "Sessions", browser="aws.browser.v1", **{OPT_IN: "yes"})


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


def _app_function(stack: Stack) -> lambda_.Function:
    return lambda_.Function(
        stack,
        "App",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="app.handler",
        code=lambda_.Code.from_inline("def handler(e, c): pass"),
    )


def test_session_access_gives_the_store_the_targets_and_their_attribute_names() -> None:
    stack = _stack()
    sessions = SessionExpiry(
        stack,
        "Sessions",
        agent_runtime=RUNTIME_ARN,
        agent_runtime_qualifier="prod",
        code_interpreter=CUSTOM_CI_ID,
        agent_runtime_session_attribute="agentSid",
    )
    env = sessions.session_environment()
    # attach_agent_session stops the sessions it replaces: it needs the targets.
    assert env[contract.ENV_AGENT_RUNTIME_ARN] == RUNTIME_ARN
    assert env[contract.ENV_AGENT_RUNTIME_QUALIFIER] == "prod"
    assert env[contract.ENV_CODE_INTERPRETER_ID] == CUSTOM_CI_ID
    assert env[contract.ENV_AGENT_RUNTIME_SESSION_ATTRIBUTE] == "agentSid"
    assert env[contract.ENV_AGENT_RUNTIME_SESSION_IDS_ATTRIBUTE] == "agentRuntimeSessionIds"
    assert env[contract.ENV_CODE_INTERPRETER_SESSION_IDS_ATTRIBUTE] == "codeInterpreterSessionIds"
    assert contract.ENV_BROWSER_SESSION_ATTRIBUTE not in env
    assert contract.ENV_BROWSER_SESSION_IDS_ATTRIBUTE not in env
    assert contract.ENV_BROWSER_ID not in env
    fn = _app_function(stack)
    sessions.grant_session_access(fn)
    template = Template.from_stack(stack).to_json()
    variables = template["Resources"][stack.get_logical_id(fn.node.default_child)]["Properties"][
        "Environment"
    ]["Variables"]
    assert {k: v for k, v in variables.items() if k in env} == {
        k: stack.resolve(v) for k, v in env.items()
    }


def test_the_application_role_may_stop_sessions_of_the_targets_only() -> None:
    stack = _stack()
    sessions = SessionExpiry(
        stack, "Sessions", agent_runtime=RUNTIME_ARN, browser=CUSTOM_BROWSER_ARN
    )
    fn = _app_function(stack)
    sessions.grant_session_access(fn)
    template = Template.from_stack(stack)
    role = {"Ref": stack.get_logical_id(fn.role.node.default_child)}  # type: ignore[union-attr]
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [role],
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        {
                            "Effect": "Allow",
                            "Action": "bedrock-agentcore:StopRuntimeSession",
                            "Resource": [RUNTIME_ARN, f"{RUNTIME_ARN}/runtime-endpoint/DEFAULT"],
                        },
                        {
                            "Effect": "Allow",
                            "Action": "bedrock-agentcore:StopBrowserSession",
                            "Resource": CUSTOM_BROWSER_ARN,
                        },
                    ]
                )
            },
        },
    )
    actions = [
        action
        for policy in template.to_json()["Resources"].values()
        if policy["Type"] == "AWS::IAM::Policy" and role in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        for action in (
            [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
        )
        if action.startswith("bedrock-agentcore:")
    ]
    assert sorted(actions) == [
        "bedrock-agentcore:StopBrowserSession",
        "bedrock-agentcore:StopRuntimeSession",
    ]


def test_without_targets_the_application_role_gets_no_agentcore_action() -> None:
    stack = _stack()
    sessions = SessionExpiry(stack, "Sessions")
    fn = _app_function(stack)
    sessions.grant_session_access(fn)
    assert "bedrock-agentcore" not in json.dumps(Template.from_stack(stack).to_json())
    assert not any("AGENT" in k or "BROWSER" in k for k in sessions.session_environment())


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
            r"code_interpreter='my interpreter': expected the identifier of a custom "
            r"code interpreter \(<name>-<10 letters or digits>, e.g. 'my_tool-a1B2c3D4e5'\), an "
            r"ARN, or the AWS-managed 'aws.codeinterpreter.v1' \(with "
            r"allow_stopping_shared_aws_managed_tool_sessions=True only\)",
        ),
        (
            {"browser": "arn:aws:bedrock-agentcore:us-east-1:123456789012:browser/aws.browser.v1"},
            r"browser='arn:.*': expected an ARN arn:<partition>:bedrock-agentcore:<region>:"
            r"<account>:browser-custom/<id> or .*:aws:browser/aws.browser.v1",
        ),
        (
            {"browser": CUSTOM_BROWSER_ARN, "browser_session_attribute": "connectionId"},
            r"browser_session_attribute='connectionId' is also connection_id_attribute",
        ),
        (
            {"browser": CUSTOM_BROWSER_ARN, "browser_session_attribute": "browserSessionIds"},
            r"browser_session_attribute='browserSessionIds' is also the browser session ids "
            r"attribute: expected a distinct attribute name",
        ),
        (
            {"tenant_attribute": "incarnation"},
            r"tenant_attribute='incarnation' is also the incarnation attribute: expected a "
            r"distinct attribute name",
        ),
        (
            {"tenant_attribute": "claimToken"},
            r"tenant_attribute='claimToken' is also the claim token attribute: expected a "
            r"distinct attribute name",
        ),
        (
            {"tenant_attribute": "previousIncarnation"},
            r"tenant_attribute='previousIncarnation' is also the previous incarnation "
            r"attribute: expected a distinct attribute name",
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
        "attribute-is-the-session-id-set",
        "attribute-is-the-incarnation",
        "attribute-is-the-claim-token",
        "attribute-is-the-previous-incarnation",
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
