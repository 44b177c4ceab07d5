"""The Bedrock session kind in the template (issue 36): ``resource_targets={"bedrock_sessions":
"*"}`` gives the cleanup the kind's environment and exactly its two actions, on sessions only,
derived from the one declaration (``session_expiry_runtime/core/kinds.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk.assertions import Template

from cdk_session_expiry import SessionExpiry

ENV = Environment(account="123456789012", region="eu-west-1")
SESSIONS_ARN = "arn:aws:bedrock:eu-west-1:123456789012:session/*"
#: The same ARN as the template writes it (the partition is the stack's).
SESSIONS_ARN_IN_TEMPLATE = {
    "Fn::Join": [
        "",
        ["arn:", {"Ref": "AWS::Partition"}, ":bedrock:eu-west-1:123456789012:session/*"],
    ]
}


def _synth(**props: Any) -> tuple[SessionExpiry, dict[str, Any], Stack]:
    stack = Stack(App(), "Agents", env=ENV)
    sessions = SessionExpiry(stack, "Sessions", **props)
    return sessions, Template.from_stack(stack).to_json(), stack


def _statements(template: dict[str, Any], action_prefix: str) -> list[dict[str, Any]]:
    found = []
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            actions = actions if isinstance(actions, list) else [actions]
            if any(a.startswith(action_prefix) for a in actions):
                found.append(statement)
    return found


def test_the_cleanup_may_end_and_delete_sessions_and_nothing_else_of_bedrock() -> None:
    sessions, template, stack = _synth(resource_targets={"bedrock_sessions": "*"})

    fn = template["Resources"][stack.get_logical_id(sessions.cleanup_function.node.default_child)]
    env = fn["Properties"]["Environment"]["Variables"]
    assert env["SESSION_EXPIRY_BEDROCK_SESSIONS"] == "*"
    assert env["SESSION_EXPIRY_BEDROCK_SESSION_IDS_ATTRIBUTE"] == "bedrockSessionIds"
    assert "SESSION_EXPIRY_OWNERSHIP_TABLE_NAME" in env  # every kind is claimed
    (statement,) = _statements(template, "bedrock:")
    assert statement == {
        "Action": ["bedrock:EndSession", "bedrock:DeleteSession"],
        "Effect": "Allow",
        "Resource": SESSIONS_ARN_IN_TEMPLATE,
    }
    # The metric of the kind's failures is the release operation's.
    metric = sessions.metric_cleanup_failures(action="DeleteSession")
    assert metric.dimensions == {"Action": "DeleteSession"}


def test_without_the_kind_there_is_no_bedrock_permission() -> None:
    _, template, _ = _synth()
    assert _statements(template, "bedrock:") == []


@pytest.mark.parametrize("target", ["session/*", SESSIONS_ARN, "all", ""])
def test_fails_a_target_other_than_every_session(target: str) -> None:
    with pytest.raises(
        ValueError,
        match=r"resource_targets\['bedrock_sessions'\]=.*: expected '\*' \(every Bedrock session",
    ):
        _synth(resource_targets={"bedrock_sessions": target})
