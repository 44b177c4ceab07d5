"""The sample app names AgentCore targets only from context (the sandbox sets them)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from aws_cdk import Stack, assertions

from cdk_session_expiry import _runtime_contract as contract
from sample_app.app import build_app

from .helpers import REPO, cdk_json_context

ACCOUNT, REGION = "123456789012", "us-east-1"
RUNTIME_ARN = f"arn:aws:bedrock-agentcore:{REGION}:{ACCOUNT}:runtime/sandbox_agent-a1B2c3D4e5"
#: A custom code interpreter and browser of the app, as the sandbox names them.
INTERPRETER_ID = "sandboxInterpreter-AbCd123456"
BROWSER_ID = "sandboxBrowser-AbCd123456"


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
            "sample:codeInterpreter": INTERPRETER_ID,
            "sample:browser": BROWSER_ID,
        },
        tmp_path,
    )
    assert env[contract.ENV_AGENT_RUNTIME_ARN] == RUNTIME_ARN
    assert env[contract.ENV_AGENT_RUNTIME_QUALIFIER] == "prod"
    assert env[contract.ENV_CODE_INTERPRETER_ID] == INTERPRETER_ID
    assert env[contract.ENV_BROWSER_ID] == BROWSER_ID
    agentcore = [
        s for s in statements if any(a.startswith("bedrock-agentcore:") for a in _actions(s))
    ]
    by_action = {a: s["Resource"] for s in agentcore for a in _actions(s)}
    assert sorted(by_action) == [
        # the tool-session sweep's, on the same tools (issue 36)
        "bedrock-agentcore:ListBrowserSessions",
        "bedrock-agentcore:ListCodeInterpreterSessions",
        "bedrock-agentcore:StopBrowserSession",
        "bedrock-agentcore:StopCodeInterpreterSession",
        "bedrock-agentcore:StopRuntimeSession",
    ]
    for kind in ("Browser", "CodeInterpreter"):
        listing = by_action[f"bedrock-agentcore:List{kind}Sessions"]
        assert listing == by_action[f"bedrock-agentcore:Stop{kind}Session"]
    runtime_resources = by_action["bedrock-agentcore:StopRuntimeSession"]
    assert sorted(runtime_resources) == [RUNTIME_ARN, f"{RUNTIME_ARN}/runtime-endpoint/prod"]
    assert f":{ACCOUNT}:browser-custom/{BROWSER_ID}" in str(
        by_action["bedrock-agentcore:StopBrowserSession"]
    )
    assert f":{ACCOUNT}:code-interpreter-custom/{INTERPRETER_ID}" in str(
        by_action["bedrock-agentcore:StopCodeInterpreterSession"]
    )


def _sandbox_constants() -> dict[str, str]:
    """The string constants of ``sandbox/agent_sessions.py``, read from its source
    (``tests/sandbox`` shadows the ``sandbox`` package on sys.path here)."""
    tree = ast.parse((REPO / "sandbox" / "agent_sessions.py").read_text())
    return {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def test_the_sandbox_names_a_custom_code_interpreter_and_browser(tmp_path: Path) -> None:
    """The sandbox deploys the sample with the ids of its own module: ones the construct takes
    (it refuses the AWS-managed tools)."""
    constants = _sandbox_constants()
    assert (constants["CODE_INTERPRETER_ID"], constants["BROWSER_ID"]) == (
        INTERPRETER_ID,
        BROWSER_ID,
    )
    env, _ = _cleanup(
        {
            "sample:codeInterpreter": constants["CODE_INTERPRETER_ID"],
            "sample:browser": constants["BROWSER_ID"],
        },
        tmp_path,
    )
    assert env[contract.ENV_CODE_INTERPRETER_ID] == INTERPRETER_ID
    assert env[contract.ENV_BROWSER_ID] == BROWSER_ID
