"""grant_tenant_session_access: a writer confined to its own tenant (issue 35, the threat model
in docs/security.md), statement by statement, and grant_session_access's roles against the same
table: no application role may write the ownership table or the deferred work."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Annotations, Match

from cdk_session_expiry import SessionExpiry

from .helpers import resources_of

ENV = Environment(account="123456789012", region="eu-west-1")
DATA_ACTIONS = {
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:Query",
}


def _function(stack: Stack, name: str) -> lambda_.Function:
    return lambda_.Function(
        stack,
        name,
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
    )


class Synth:
    def __init__(self) -> None:
        app = App()
        self.stack = stack = Stack(app, "Tenants", env=ENV)
        api = apigwv2.WebSocketApi(stack, "Api")
        stage = apigwv2.WebSocketStage(stack, "Stage", web_socket_api=api, stage_name="live")
        self.sessions = SessionExpiry(
            stack,
            "Sessions",
            partition_key_name="tenantId",
            sort_key_name="sessionId",
            tenant_attribute="tenantId",
            websocket_stage=stage,
            feature_flags=True,
        )
        self.tenant = _function(stack, "TenantWriter")
        self.whole = _function(stack, "WholeTableWriter")
        self.sessions.grant_tenant_session_access(self.tenant, tenant_tag="tenant")
        self.sessions.grant_session_access(self.whole)
        self.json = app.synth().get_stack_by_name("Tenants").template

    def ref(self, construct: Any) -> str:
        return self.stack.get_logical_id(construct.node.default_child)

    def statements(self, function: lambda_.Function) -> list[dict[str, Any]]:
        role = {"Ref": self.ref(function.role)}
        found: list[dict[str, Any]] = []
        for policy in resources_of(self.json, "AWS::IAM::Policy").values():
            if role in policy["Properties"]["Roles"]:
                found.extend(policy["Properties"]["PolicyDocument"]["Statement"])
        return found

    def arn(self, construct: Any) -> dict[str, Any]:
        return {"Fn::GetAtt": [self.ref(construct), "Arn"]}


@pytest.fixture(scope="module")
def synth() -> Synth:
    return Synth()


def _actions(statement: dict[str, Any]) -> set[str]:
    action = statement["Action"]
    return {action} if isinstance(action, str) else set(action)


def _resources(statement: dict[str, Any]) -> list[Any]:
    resource = statement["Resource"]
    return resource if isinstance(resource, list) else [resource]


def test_the_tenant_writer_reaches_only_its_own_partition(synth: Synth) -> None:
    table = synth.arn(synth.sessions.table)
    (data,) = [s for s in synth.statements(synth.tenant) if table in _resources(s)]
    assert _actions(data) == DATA_ACTIONS
    assert data["Condition"] == {
        "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["${aws:PrincipalTag/tenant}"]}
    }


def test_the_tenant_writer_may_invoke_the_registrar_and_nothing_else_of_the_construct(
    synth: Synth,
) -> None:
    registrar = synth.sessions.claim_registrar
    assert registrar is not None
    statements = synth.statements(synth.tenant)
    outside_table = [s for s in statements if synth.arn(synth.sessions.table) not in _resources(s)]
    assert [(_actions(s), _resources(s)) for s in outside_table] == [
        ({"lambda:InvokeFunction"}, [synth.arn(registrar.function)])
    ]
    everything = set().union(*(_actions(s) for s in statements))
    assert "execute-api:ManageConnections" not in everything  # cannot be confined to a tenant


@pytest.mark.parametrize("writer", ["tenant", "whole"])
def test_fails_if_an_application_role_can_write_claims_or_deferred_work(
    synth: Synth, writer: str
) -> None:
    function = synth.tenant if writer == "tenant" else synth.whole
    ownership = synth.sessions.ownership_table
    assert ownership is not None
    protected = [synth.arn(ownership)]
    deferred = getattr(synth.sessions, "deferred_work_table", None)
    if deferred is not None:
        protected.append(synth.arn(deferred))
    for statement in synth.statements(function):
        touched = [r for r in _resources(statement) if r in protected]
        assert not touched, (writer, statement)


def test_fails_a_table_whose_partition_key_is_not_the_tenant() -> None:
    stack = Stack(App(), "NotTenant")
    sessions = SessionExpiry(stack, "Sessions")
    # The message names the props that make such a table, not only what is wrong.
    with pytest.raises(ValueError, match="expected the tenant as the partition key") as raised:
        sessions.grant_tenant_session_access(_function(stack, "Fn"))
    assert "partition_key_name='tenantId', sort_key_name='sessionId'" in str(raised.value)


def _tenant_sessions(stack: Stack) -> SessionExpiry:
    return SessionExpiry(
        stack,
        "Sessions",
        partition_key_name="tenantId",
        sort_key_name="sessionId",
        tenant_attribute="tenantId",
    )


def test_fails_an_imported_function_without_its_role_naming_the_method_called() -> None:
    stack = Stack(App(), "Imported", env=ENV)
    imported = lambda_.Function.from_function_name(stack, "Imported", "tenant-app")
    with pytest.raises(ValueError, match=r"^grant_tenant_session_access\(Imported/Imported\): "):
        _tenant_sessions(stack).grant_tenant_session_access(imported)


def test_an_imported_function_with_its_role_is_warned_about_by_the_method_called() -> None:
    stack = Stack(App(), "ImportedWithRole", env=ENV)
    imported = lambda_.Function.from_function_attributes(
        stack,
        "Imported",
        function_arn="arn:aws:lambda:eu-west-1:123456789012:function:tenant-app",
        role=iam.Role.from_role_arn(stack, "Role", "arn:aws:iam::123456789012:role/tenant-app"),
    )
    _tenant_sessions(stack).grant_tenant_session_access(imported)
    warnings = Annotations.from_stack(stack).find_warning("*", Match.any_value())
    texts = [str(w.entry.data) for w in warnings]
    called = "grant_tenant_session_access(ImportedWithRole/Imported)"
    assert any(text.startswith(called) for text in texts), texts


@pytest.mark.parametrize("tag", ["", "a" * 129, "bad*tag", 3, "aws:tenant", "AWS:tenant"])
def test_fails_a_tenant_tag_that_is_not_a_tag_key(tag: Any) -> None:
    stack = Stack(App(), "BadTag")
    sessions = SessionExpiry(
        stack,
        "Sessions",
        partition_key_name="tenantId",
        sort_key_name="sessionId",
        tenant_attribute="tenantId",
    )
    with pytest.raises(ValueError, match="expected a tag key") as raised:
        sessions.grant_tenant_session_access(_function(stack, "Fn"), tenant_tag=tag)
    assert f"tenant_tag={tag!r}" in str(raised.value)
