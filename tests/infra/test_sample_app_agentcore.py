"""The sample app names AgentCore targets only from context (the sandbox sets them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import Stack, assertions

from cdk_session_expiry import _runtime_contract as contract
from sample_app.app import build_app

from .helpers import cdk_json_context

ACCOUNT, REGION = "123456789012", "us-east-1"
RUNTIME_ARN = f"arn:aws:bedrock-agentcore:{REGION}:{ACCOUNT}:runtime/sandbox_agent-a1B2c3D4e5"


def _cleanup(context: dict[str, Any], outdir: Path) -> tuple[dict[str, Any], list[Any]]:
    app = build_app(
        {**cdk_json_context(), "sample:account": ACCOUNT, "sample:region": REGION, **context},
        outdir=str(outdir),
    )
    (stack,) = (c for c in app.node.children if isinstance(c, Stack))
    sessions = stack.sessions  # type: ignore[attr-defined]
    template = assertions.Template.from_stack(stack).to_json()
    fn = template["Resources"][stack.get_logical_id(sessions.cleanup_function.node.default_child)]
    role_id = stack.get_logical_id(sessions.cleanup_role.node.default_child)
    statements = [
        s
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    return fn["Properties"]["Environment"]["Variables"], statements


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def test_without_context_the_sample_names_no_agentcore_resource(tmp_path: Path) -> None:
    env, statements = _cleanup({}, tmp_path)
    assert contract.ENV_AGENT_RUNTIME_ARN not in env
    assert not [a for s in statements for a in _actions(s) if a.startswith("bedrock-agentcore:")]


def test_context_names_the_targets_and_the_cleanup_may_stop_only_their_sessions(
    tmp_path: Path,
) -> None:
    env, statements = _cleanup(
        {
            "sample:agentRuntimeArn": RUNTIME_ARN,
            "sample:agentRuntimeQualifier": "prod",
            "sample:codeInterpreter": "aws.codeinterpreter.v1",
            "sample:browser": "aws.browser.v1",
        },
        tmp_path,
    )
    assert env[contract.ENV_AGENT_RUNTIME_ARN] == RUNTIME_ARN
    assert env[contract.ENV_AGENT_RUNTIME_QUALIFIER] == "prod"
    assert env[contract.ENV_CODE_INTERPRETER_ID] == "aws.codeinterpreter.v1"
    assert env[contract.ENV_BROWSER_ID] == "aws.browser.v1"
    agentcore = [
        s for s in statements if any(a.startswith("bedrock-agentcore:") for a in _actions(s))
    ]
    by_action = {a: s["Resource"] for s in agentcore for a in _actions(s)}
    assert sorted(by_action) == [
        "bedrock-agentcore:StopBrowserSession",
        "bedrock-agentcore:StopCodeInterpreterSession",
        "bedrock-agentcore:StopRuntimeSession",
    ]
    runtime_resources = by_action["bedrock-agentcore:StopRuntimeSession"]
    assert sorted(runtime_resources) == [RUNTIME_ARN, f"{RUNTIME_ARN}/runtime-endpoint/prod"]
    assert "aws:browser/aws.browser.v1" in str(by_action["bedrock-agentcore:StopBrowserSession"])
