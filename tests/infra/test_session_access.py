"""grant_session_access: kms:CreateGrant only when asked and only with its conditions,
execute-api:ManageConnections with a stage, the absolute lifetime handed to the runtime, and
the scratch backstop that outlasts it. Template assertions on one synthesized stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3

from cdk_session_expiry import PropTypeError, SessionExpiry
from cdk_session_expiry import _runtime_contract as contract

from .helpers import StackTemplate, resources_of

ENV = Environment(account="123456789012", region="eu-west-1")


def _function(stack: Stack, name: str) -> lambda_.Function:
    return lambda_.Function(
        stack,
        name,
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
    )


class Synth(StackTemplate):
    def __init__(self, outdir: Path, cdk_context: dict[str, Any]) -> None:
        app = App(context=cdk_context, outdir=str(outdir))
        self.stack = stack = Stack(app, "Access", env=ENV)
        self.grant_key = kms.Key(stack, "GrantKey")
        api = apigwv2.WebSocketApi(stack, "Api")
        self.api = api
        stage = apigwv2.WebSocketStage(stack, "Stage", web_socket_api=api, stage_name="live")
        self.creator = _function(stack, "Creator")
        self.reader = _function(stack, "Reader")
        self.grantee = _function(stack, "Grantee")
        self.sessions = SessionExpiry(
            stack,
            "Sessions",
            websocket_stage=stage,
            grant_key=self.grant_key,
            scratch_bucket=s3.Bucket(stack, "Scratch"),
            max_session_lifetime=Duration.hours(2),
            grant_grantees=[self.grantee.role],  # type: ignore[list-item]
        )
        self.sessions.grant_session_access(self.creator, create_grants=True)
        self.sessions.grant_session_access(self.reader)
        self.sessions.grant_session_access(self.grantee)
        # No stage: no execute-api permission at all.
        self.bare = _function(stack, "Bare")
        SessionExpiry(stack, "NoStage").grant_session_access(self.bare)
        self.json = app.synth().get_stack_by_name("Access").template

    def statements(self, function: lambda_.Function) -> list[dict[str, Any]]:
        role_id = self.stack.get_logical_id(function.role.node.default_child)  # type: ignore[union-attr]
        found: list[dict[str, Any]] = []
        for policy in resources_of(self.json, "AWS::IAM::Policy").values():
            roles = policy["Properties"]["Roles"]
            if {"Ref": role_id} in roles:
                found.extend(policy["Properties"]["PolicyDocument"]["Statement"])
        return found

    def with_action(self, function: lambda_.Function, action: str) -> list[dict[str, Any]]:
        def actions(st: dict[str, Any]) -> list[str]:
            a = st["Action"]
            return [a] if isinstance(a, str) else list(a)

        return [st for st in self.statements(function) if action in actions(st)]


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any]) -> Synth:
    return Synth(tmp_path_factory.mktemp("access"), cdk_context)


def test_create_grant_carries_exactly_its_conditions(synth: Synth) -> None:
    (statement,) = synth.with_action(synth.creator, "kms:CreateGrant")
    assert statement["Resource"] == {"Fn::GetAtt": [synth.id(synth.grant_key), "Arn"]}
    cleanup_role = synth.stack.get_logical_id(synth.sessions.cleanup_role.node.default_child)  # type: ignore[arg-type]
    grantee_role = synth.stack.get_logical_id(synth.grantee.role.node.default_child)  # type: ignore[union-attr]
    assert statement["Condition"] == {
        "ForAllValues:StringEquals": {
            "kms:GrantOperations": ["Decrypt", "Encrypt", "GenerateDataKey"]
        },
        "StringEquals": {
            "kms:GranteePrincipal": [{"Fn::GetAtt": [grantee_role, "Arn"]}],
            "kms:RetiringPrincipal": {"Fn::GetAtt": [cleanup_role, "Arn"]},
            "kms:GrantConstraintType": "EncryptionContextSubset",
        },
    }


def test_no_role_gets_create_grant_unless_asked(synth: Synth) -> None:
    with_create_grant = [
        logical_id
        for logical_id, policy in resources_of(synth.json, "AWS::IAM::Policy").items()
        if "kms:CreateGrant" in str(policy["Properties"]["PolicyDocument"])
    ]
    creator_policy = synth.stack.get_logical_id(
        synth.creator.role.node.find_child("DefaultPolicy").node.default_child  # type: ignore[union-attr]
    )
    assert with_create_grant == [creator_policy]
    for fn in (synth.reader, synth.grantee, synth.bare):
        assert synth.with_action(fn, "kms:RetireGrant") == []


def test_manage_connections_on_the_stage_only_with_a_stage(synth: Synth) -> None:
    for fn in (synth.creator, synth.reader, synth.grantee):
        (statement,) = synth.with_action(fn, "execute-api:ManageConnections")
        resource = statement["Resource"]["Fn::Join"][1]
        assert resource[-1] == "/live/DELETE/@connections/*"
        assert {"Ref": synth.id(synth.api)} in resource
    assert synth.with_action(synth.bare, "execute-api:ManageConnections") == []


def test_the_runtime_gets_the_lifetime_and_the_endpoint(synth: Synth) -> None:
    env = synth.props(synth.creator)["Environment"]["Variables"]
    assert env[contract.ENV_MAX_SESSION_LIFETIME_SECONDS] == "7200"
    assert contract.ENV_WEBSOCKET_ENDPOINT in env
    bare = synth.props(synth.bare)["Environment"]["Variables"]
    assert bare[contract.ENV_MAX_SESSION_LIFETIME_SECONDS] == str(8 * 3600)
    assert contract.ENV_WEBSOCKET_ENDPOINT not in bare


def test_unbound_grants_drop_only_the_constraint_condition(
    tmp_path: Path, cdk_context: dict[str, Any]
) -> None:
    stack = Stack(App(context=cdk_context, outdir=str(tmp_path)), "Unbound", env=ENV)
    grantee = iam.Role(stack, "Grantee", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    sessions = SessionExpiry(
        stack,
        "Sessions",
        grant_key=kms.Key(stack, "Key"),
        grant_grantees=[grantee],
        grant_operations=["Decrypt", "DescribeKey"],
        bind_grants_to_session=False,
    )
    fn = _function(stack, "Fn")
    sessions.grant_session_access(fn, create_grants=True)
    doc = stack.resolve(fn.role.node.find_child("DefaultPolicy").document)  # type: ignore[union-attr]
    (statement,) = [s for s in doc["Statement"] if s["Action"] == "kms:CreateGrant"]
    assert statement["Condition"]["ForAllValues:StringEquals"] == {
        "kms:GrantOperations": ["Decrypt", "DescribeKey"]
    }
    assert "kms:GrantConstraintType" not in statement["Condition"]["StringEquals"]


# --- rejected inputs ------------------------------------------------------------------------


@pytest.fixture
def stack() -> Stack:
    return Stack(App(), "Rejects")


@pytest.mark.parametrize(
    ("lifetime", "retention"),
    [
        (Duration.hours(8), Duration.days(2)),  # 8 h + 2 days > 2 days
        (Duration.days(5), Duration.days(7)),  # exactly 7 days: must exceed
        (Duration.days(6), Duration.days(7)),
    ],
)
def test_fails_scratch_retention_not_beyond_lifetime_plus_ttl_lag(
    stack: Stack, lifetime: Duration, retention: Duration
) -> None:
    with pytest.raises(ValueError, match=r"scratch_retention=.*max_session_lifetime=") as info:
        SessionExpiry(
            stack,
            "Sessions",
            scratch_bucket=s3.Bucket(stack, "B"),
            scratch_retention=retention,
            max_session_lifetime=lifetime,
        )
    assert retention.to_human_string() in str(info.value)
    assert lifetime.to_human_string() in str(info.value)


def test_default_lifetime_fits_the_default_retention(stack: Stack) -> None:
    SessionExpiry(stack, "Sessions", scratch_bucket=s3.Bucket(stack, "B"))
    SessionExpiry(
        stack,
        "Long",
        scratch_bucket=s3.Bucket(stack, "C"),
        scratch_root="long/",
        max_session_lifetime=Duration.days(4),
        scratch_retention=Duration.days(7),
    )


@pytest.mark.parametrize(
    "lifetime", [Duration.seconds(59), Duration.days(366), Duration.millis(90_500)]
)
def test_fails_max_session_lifetime_out_of_range(stack: Stack, lifetime: Duration) -> None:
    with pytest.raises(ValueError, match="max_session_lifetime"):
        SessionExpiry(stack, "Sessions", max_session_lifetime=lifetime)


def test_fails_max_session_lifetime_not_a_duration(stack: Stack) -> None:
    with pytest.raises(ValueError, match="max_session_lifetime=28800"):
        SessionExpiry(stack, "Sessions", max_session_lifetime=28800)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("operations", "match"),
    [
        ([], "non-empty"),
        ("Decrypt", "non-empty"),
        (["Decrypt", "CreateGrant"], "'CreateGrant'"),
        (["Decrypt", "Explode"], "'Explode'"),
        (["DescribeKey"], "'DescribeKey', which takes no encryption context"),
    ],
)
def test_fails_bad_grant_operations(stack: Stack, operations: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SessionExpiry(stack, "Sessions", grant_key=kms.Key(stack, "K"), grant_operations=operations)


@pytest.mark.parametrize(
    "grantees",
    [
        ["arn:aws:iam::123456789012:role/app"],
        "arn:aws:iam::123456789012:role/app",
        [iam.AccountRootPrincipal()],
    ],
)
def test_fails_grant_grantees_that_are_not_roles(stack: Stack, grantees: object) -> None:
    with pytest.raises(PropTypeError) as raised:
        SessionExpiry(
            stack,
            "Sessions",
            grant_key=kms.Key(stack, "K"),
            grant_grantees=grantees,  # type: ignore[arg-type]
        )
    message = str(raised.value)
    assert message.startswith("grant_grantees=")
    assert message.endswith(
        ": expected a list of iam.IRole, the roles that receive session grants (for a role "
        'ARN: iam.Role.from_role_arn(self, "Grantee", arn))'
    )
    if isinstance(grantees, list) and isinstance(grantees[0], str):
        assert message == (
            "grant_grantees=['arn:aws:iam::123456789012:role/app']: expected a list of "
            "iam.IRole, the roles that receive session grants (for a role ARN: "
            'iam.Role.from_role_arn(self, "Grantee", arn))'
        )


def test_fails_create_grants_without_a_grant_key(stack: Stack) -> None:
    sessions = SessionExpiry(stack, "Sessions")
    with pytest.raises(ValueError, match=r"create_grants=True.*grant_key"):
        sessions.grant_session_access(_function(stack, "Fn"), create_grants=True)


def test_fails_create_grants_without_grantees(stack: Stack) -> None:
    sessions = SessionExpiry(stack, "Sessions", grant_key=kms.Key(stack, "K"))
    with pytest.raises(
        ValueError,
        match=r"create_grants=True\): no grant_grantees on the SessionExpiry.*"
        r"SessionExpiry\(\.\.\., grant_key=key, grant_grantees=\[role\]\)",
    ):
        sessions.grant_session_access(_function(stack, "Fn"), create_grants=True)
