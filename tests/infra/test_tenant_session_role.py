"""add_tenant_session_role: one broker function, many tenants, each request confined to its tenant
by a session tag (docs/ownership.md, "One function, many tenants"), statement by statement."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from cdk_session_expiry import SessionExpiry

from .helpers import resources_of
from .test_tenant_session_access import DATA_ACTIONS, ENV, _actions, _function, _resources


class Synth:
    def __init__(self) -> None:
        app = App()
        self.stack = stack = Stack(app, "Brokered", env=ENV)
        api = apigwv2.WebSocketApi(stack, "Api")
        stage = apigwv2.WebSocketStage(stack, "Stage", web_socket_api=api, stage_name="live")
        self.sessions = SessionExpiry(
            stack,
            "Sessions",
            partition_key_name="tenantId",
            sort_key_name="sessionId",
            tenant_attribute="tenantId",
            websocket_stage=stage,  # a target: the ownership table and the registrar
            feature_flags=True,
        )
        self.broker = _function(stack, "Broker")
        self.role = self.sessions.add_tenant_session_role("TenantRole", broker=self.broker)
        self.json = app.synth().get_stack_by_name("Brokered").template

    def ref(self, construct: Any) -> str:
        return self.stack.get_logical_id(construct.node.default_child)

    def arn(self, construct: Any) -> dict[str, Any]:
        return {"Fn::GetAtt": [self.ref(construct), "Arn"]}

    def statements(self, role: Any) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for policy in resources_of(self.json, "AWS::IAM::Policy").values():
            if {"Ref": self.ref(role)} in policy["Properties"]["Roles"]:
                found.extend(policy["Properties"]["PolicyDocument"]["Statement"])
        return found

    def trust(self) -> list[dict[str, Any]]:
        role = self.json["Resources"][self.ref(self.role)]
        return role["Properties"]["AssumeRolePolicyDocument"]["Statement"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def synth() -> Synth:
    return Synth()


def test_the_role_reaches_only_the_partition_of_its_session_tag(synth: Synth) -> None:
    table = synth.arn(synth.sessions.table)
    (data,) = [s for s in synth.statements(synth.role) if table in _resources(s)]
    assert _actions(data) == DATA_ACTIONS
    assert data["Condition"] == {
        "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["${aws:PrincipalTag/tenant}"]}
    }


def test_the_role_may_invoke_the_registrar_and_nothing_else(synth: Synth) -> None:
    registrar = synth.sessions.claim_registrar
    assert registrar is not None
    table = synth.arn(synth.sessions.table)
    others = [s for s in synth.statements(synth.role) if table not in _resources(s)]
    assert [(_actions(s), _resources(s)) for s in others] == [
        ({"lambda:InvokeFunction"}, [synth.arn(registrar.function)])
    ]  # no execute-api:ManageConnections: it cannot be confined to a tenant


def test_only_the_broker_may_assume_the_role_and_only_with_a_tenant_session_tag(
    synth: Synth,
) -> None:
    (statement,) = synth.trust()
    assert statement["Effect"] == "Allow"
    assert _actions(statement) == {"sts:AssumeRole", "sts:TagSession"}
    assert statement["Principal"] == {"AWS": synth.arn(synth.broker.role)}
    assert statement["Condition"] == {
        "StringLike": {"aws:RequestTag/tenant": "?*"},  # a non-empty tenant tag is required
        "ForAllValues:StringEquals": {"aws:TagKeys": ["tenant"]},  # and no other tag
    }


def test_the_broker_may_assume_the_role_and_has_nothing_on_the_table(synth: Synth) -> None:
    statements = synth.statements(synth.broker.role)
    assert [(_actions(s), _resources(s)) for s in statements] == [
        ({"sts:AssumeRole", "sts:TagSession"}, [synth.arn(synth.role)])
    ]
    function = Template.from_json(synth.json).find_resources("AWS::Lambda::Function")[
        synth.ref(synth.broker)
    ]
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["SESSION_EXPIRY_PARTITION_KEY"] == "tenantId"
    assert "SESSION_EXPIRY_CLAIM_REGISTRAR_FUNCTION" in variables
    assert function["Properties"]["Layers"]  # the session runtime


def test_fails_if_the_role_or_the_broker_can_write_claims_or_deferred_work(synth: Synth) -> None:
    assert synth.sessions.ownership_table is not None
    protected = [synth.arn(synth.sessions.ownership_table)]
    if synth.sessions.deferred_work_table is not None:
        protected.append(synth.arn(synth.sessions.deferred_work_table))
    for role in (synth.role, synth.broker.role):
        for statement in synth.statements(role):
            assert not [r for r in _resources(statement) if r in protected], statement


def _tenant_sessions(stack: Stack) -> SessionExpiry:
    """A ``SessionExpiry`` whose partition key is the tenant (what the role requires)."""
    return SessionExpiry(
        stack,
        "Sessions",
        partition_key_name="tenantId",
        sort_key_name="sessionId",
        tenant_attribute="tenantId",
    )


def test_a_custom_tag_reaches_the_condition_and_the_trust_policy() -> None:
    stack = Stack(App(), "CustomTag", env=ENV)
    sessions = _tenant_sessions(stack)
    role = sessions.add_tenant_session_role(
        "TenantRole", broker=_function(stack, "Broker"), tenant_tag="org"
    )
    document = stack.resolve(role.assume_role_policy.to_json())  # type: ignore[union-attr]
    assert document["Statement"][0]["Condition"]["StringLike"] == {"aws:RequestTag/org": "?*"}
    template = Template.from_stack(stack).to_json()
    conditions = [
        s.get("Condition")
        for p in resources_of(template, "AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["${aws:PrincipalTag/org}"]}} in (
        conditions
    )


def test_fails_a_table_whose_partition_key_is_not_the_tenant_and_makes_no_role() -> None:
    stack = Stack(App(), "NotTenant", env=ENV)
    sessions = SessionExpiry(stack, "Sessions")
    with pytest.raises(ValueError, match="expected the tenant as the partition key") as raised:
        sessions.add_tenant_session_role("TenantRole", broker=_function(stack, "Broker"))
    assert str(raised.value).startswith("add_tenant_session_role('TenantRole', broker=NotTenant/")
    assert sessions.node.try_find_child("TenantRole") is None


@pytest.mark.parametrize("tag", ["", "bad*tag", "aws:tenant"])
def test_fails_a_tenant_tag_that_is_not_a_tag_key(tag: str) -> None:
    stack = Stack(App(), "BadTag", env=ENV)
    sessions = _tenant_sessions(stack)
    with pytest.raises(ValueError, match="expected a tag key") as raised:
        sessions.add_tenant_session_role(
            "TenantRole", broker=_function(stack, "Broker"), tenant_tag=tag
        )
    assert f"tenant_tag={tag!r}" in str(raised.value)


def test_fails_a_broker_imported_without_its_role() -> None:
    stack = Stack(App(), "Imported", env=Environment(account="123456789012", region="eu-west-1"))
    sessions = _tenant_sessions(stack)
    broker = lambda_.Function.from_function_name(stack, "Broker", "broker")
    with pytest.raises(ValueError, match=r"^add_tenant_session_role\(Imported/Broker\): "):
        sessions.add_tenant_session_role("TenantRole", broker=broker)
