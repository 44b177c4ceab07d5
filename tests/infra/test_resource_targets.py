"""``SessionExpiry(resource_targets={...})``: each declared kind's prop switches it on, and its
environment, IAM and ownership table come from its declaration alone (``session_expiry_runtime/
kinds.py``). A new kind adds its sample here (`SAMPLES`)."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from cdk_session_expiry import SessionExpiry, _kinds

ENV = Environment(account="123456789012", region="us-east-1")
#: Per targeted kind: (a literal target the prop accepts, the target the API takes, the IAM
#: resource ARN, a value the prop refuses).
SAMPLES: dict[str, tuple[str, str, str, str]] = {
    "capacityProviderSession": (
        "arn:aws:bedrock-agentcore:us-east-1:123456789012:capacity-provider/agents_cp-a1B2c3D4e5",
        "agents_cp-a1B2c3D4e5",
        "arn:aws:bedrock-agentcore:us-east-1:123456789012:capacity-provider/agents_cp-a1B2c3D4e5",
        "agents_cp",
    ),
    "paymentSession": (
        "arn:aws:bedrock-agentcore:us-east-1:123456789012:payment-manager/shop-a1b2c3d4e5",
        "arn:aws:bedrock-agentcore:us-east-1:123456789012:payment-manager/shop-a1b2c3d4e5",
        "arn:aws:bedrock-agentcore:us-east-1:123456789012:payment-manager/shop-a1b2c3d4e5",
        "shop-a1b2c3d4e5",  # an id: the API takes the ARN
    ),
    "bedrockSession": (
        "*",
        "*",
        "arn:aws:bedrock:us-east-1:123456789012:session/*",
        "session/*",  # only every session: the ownership records pick them
    ),
}
TARGETED = list(_kinds.TARGETED_KINDS)


def test_every_targeted_kind_has_a_sample() -> None:
    assert sorted(SAMPLES) == sorted(kind.kind for kind in TARGETED)


def _synth(**props: Any) -> tuple[SessionExpiry, dict[str, Any], Stack]:
    stack = Stack(App(), "Kinds", env=ENV)
    sessions = SessionExpiry(stack, "Sessions", **props)
    return sessions, Template.from_stack(stack).to_json(), stack


def _statements(template: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [
        statement
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::IAM::Policy"
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
        if action
        in (statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]])
    ]


def _flat(value: Any) -> str:
    """An ARN as CloudFormation gets it, the partition reference read as ``aws``."""
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_flat(part) for part in parts)
    if value == {"Ref": "AWS::Partition"}:
        return "aws"
    return str(value)


@pytest.mark.parametrize("kind", TARGETED, ids=lambda kind: kind.kind)
def test_a_target_sets_the_environment_iam_and_the_ownership_table(kind: Any) -> None:
    given, api_target, arn, _ = SAMPLES[kind.kind]
    sessions, template, stack = _synth(resource_targets={kind.target.prop: given})

    fn = template["Resources"][stack.get_logical_id(sessions.cleanup_function.node.default_child)]
    env = fn["Properties"]["Environment"]["Variables"]
    assert env[kind.target.env] == api_target
    assert env[kind.ids.env] == kind.ids.attribute
    assert sessions.session_environment()[kind.target.env] == api_target
    assert sessions.ownership_table is not None
    (statement,) = _statements(template, kind.iam_action)
    assert _flat(statement["Resource"]) == arn


@pytest.mark.parametrize("kind", TARGETED, ids=lambda kind: kind.kind)
def test_the_app_function_gets_the_target_but_not_the_release_action(kind: Any) -> None:
    given, api_target, _, _ = SAMPLES[kind.kind]
    stack = Stack(App(), "Kinds", env=ENV)
    sessions = SessionExpiry(stack, "Sessions", resource_targets={kind.target.prop: given})
    app = lambda_.Function(
        stack,
        "App",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(e, c): return None"),
    )
    sessions.grant_session_access(app)
    template = Template.from_stack(stack).to_json()
    app_fn = template["Resources"][stack.get_logical_id(app.node.default_child)]
    assert app_fn["Properties"]["Environment"]["Variables"][kind.target.env] == api_target
    # Only the cleanup role releases: one statement, on the cleanup's policy.
    assert len(_statements(template, kind.iam_action)) == 1


@pytest.mark.parametrize("kind", TARGETED, ids=lambda kind: kind.kind)
def test_fails_a_target_not_of_the_declared_form(kind: Any) -> None:
    refused = SAMPLES[kind.kind][3]
    with pytest.raises(ValueError, match=rf"resource_targets\['{kind.target.prop}'\]=.*expected"):
        _synth(resource_targets={kind.target.prop: refused})


def test_fails_a_key_no_kind_declares() -> None:
    with pytest.raises(ValueError, match=r"resource_targets key 'nope': expected one of"):
        _synth(resource_targets={"nope": "x"})
