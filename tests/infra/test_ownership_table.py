"""The ownership table (issue 20): created only for targets with ownership records, its
settings, its logical ID, the environment that names it, least-privilege IAM on it, the grant
sweep's pending bound, and the ``ResourcesRefused`` metric."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, CfnParameter, Duration, Environment, RemovalPolicy, Stack, Token
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template

from cdk_session_expiry import SessionExpiry, grant_sweep
from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.ownership import CLEANUP_ACTIONS

ENV = Environment(account="123456789012", region="eu-west-1")
RUNTIME_ARN = "arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/coder_agent-a1B2c3D4e5"
#: ``Sessions/OwnershipTable``'s logical ID: a public contract (a new one replaces the table).
OWNERSHIP_TABLE_LOGICAL_ID = "SessionsOwnershipTable7E033FF7"


def _stack(cdk_context: dict[str, Any]) -> Stack:
    return Stack(App(context=cdk_context), "Owned", env=ENV)


def _function(stack: Stack, name: str = "App") -> lambda_.Function:
    return lambda_.Function(
        stack,
        name,
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="app.handler",
        code=lambda_.Code.from_inline("def handler(e, c): pass"),
    )


def _target(stack: Stack, prop: str) -> object:
    if prop == "websocket_stage":
        api = apigwv2.WebSocketApi(stack, "Api")
        return apigwv2.WebSocketStage(stack, "Stage", web_socket_api=api, stage_name="live")
    if prop == "grant_key":
        return kms.Key(stack, "GrantKey")
    return {
        "agent_runtime": RUNTIME_ARN,
        "code_interpreter": "team_ci-Z9y8X7w6V5",
        "browser": "web-Q1w2E3r4T5",
    }[prop]


def _variables(template: dict[str, Any], stack: Stack, function: Any) -> dict[str, Any]:
    resource = template["Resources"][stack.get_logical_id(function.node.default_child)]
    return resource["Properties"]["Environment"]["Variables"]  # type: ignore[no-any-return]


def _actions_on(template: dict[str, Any], stack: Stack, role: Any, arn: Any) -> set[str]:
    """Every action ``role``'s policies allow on exactly ``arn``."""
    role_ref = {"Ref": stack.get_logical_id(role.node.default_child)}
    found: set[str] = set()
    for resource in template["Resources"].values():
        if (
            resource["Type"] != "AWS::IAM::Policy"
            or role_ref not in resource["Properties"]["Roles"]
        ):
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            resources = statement["Resource"]
            if arn == resources or (isinstance(resources, list) and arn in resources):
                action = statement["Action"]
                found.update([action] if isinstance(action, str) else action)
    return found


# --- when it exists ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prop", ["websocket_stage", "grant_key", "agent_runtime", "code_interpreter", "browser"]
)
def test_each_target_with_ownership_records_creates_the_table(
    prop: str, cdk_context: dict[str, Any]
) -> None:
    stack = _stack(cdk_context)
    sessions = SessionExpiry(stack, "Sessions", **{prop: _target(stack, prop)})
    assert sessions.ownership_table is not None
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::DynamoDB::Table", 2)
    assert stack.get_logical_id(sessions.ownership_table.node.default_child) == (
        OWNERSHIP_TABLE_LOGICAL_ID
    )


def test_without_such_a_target_there_is_no_table_and_no_variable(
    cdk_context: dict[str, Any],
) -> None:
    stack = _stack(cdk_context)
    # Scratch prefixes are derived from the key and incarnation: no ownership record.
    sessions = SessionExpiry(stack, "Sessions", scratch_bucket=s3.Bucket(stack, "Scratch"))
    fn = _function(stack)
    sessions.grant_session_access(fn)
    template = Template.from_stack(stack)
    assert sessions.ownership_table is None
    template.resource_count_is("AWS::DynamoDB::Table", 1)
    json = template.to_json()
    for function in (sessions.cleanup_function, fn):
        variables = _variables(json, stack, function)
        assert contract.ENV_OWNERSHIP_TABLE_NAME not in variables
        # Every item still carries its incarnation (the scratch prefix's last segment).
        assert variables[contract.ENV_INCARNATION_ATTRIBUTE] == "incarnation"
    assert contract.ENV_OWNERSHIP_TABLE_NAME not in sessions.session_environment()


# --- the table --------------------------------------------------------------------------------


def test_the_table_key_time_to_live_capacity_recovery_and_no_stream(
    cdk_context: dict[str, Any],
) -> None:
    stack = _stack(cdk_context)
    SessionExpiry(stack, "Sessions", agent_runtime=RUNTIME_ARN)
    template = Template.from_stack(stack)
    template.has_resource(
        "AWS::DynamoDB::Table",
        {
            "Properties": {
                "KeySchema": [{"AttributeName": "resource", "KeyType": "HASH"}],
                "AttributeDefinitions": [{"AttributeName": "resource", "AttributeType": "S"}],
                "TimeToLiveSpecification": {"AttributeName": "expiresAt", "Enabled": True},
                "BillingMode": "PAY_PER_REQUEST",
                "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                "SSESpecification": {"SSEEnabled": True},
                # Claims never flow through a stream: their TTL deletes never invoke anything.
                "StreamSpecification": Match.absent(),
            },
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
        },
    )
    table = template.to_json()["Resources"][OWNERSHIP_TABLE_LOGICAL_ID]
    assert "KMSMasterKeyId" not in table["Properties"]["SSESpecification"]


def test_the_table_follows_the_session_tables_key_and_removal_policy(
    cdk_context: dict[str, Any],
) -> None:
    stack = _stack(cdk_context)
    key = kms.Key(stack, "TableKey")
    SessionExpiry(
        stack,
        "Sessions",
        grant_key=kms.Key(stack, "GrantKey"),
        table_encryption_key=key,
        removal_policy=RemovalPolicy.DESTROY,
    )
    table = Template.from_stack(stack).to_json()["Resources"][OWNERSHIP_TABLE_LOGICAL_ID]
    key_arn = {"Fn::GetAtt": [stack.get_logical_id(key.node.default_child), "Arn"]}
    assert table["Properties"]["SSESpecification"] == {
        "KMSMasterKeyId": key_arn,
        "SSEEnabled": True,
        "SSEType": "KMS",
    }
    assert table["DeletionPolicy"] == "Delete"


def test_with_a_given_table_it_takes_that_tables_key_and_is_retained(
    cdk_context: dict[str, Any],
) -> None:
    stack = _stack(cdk_context)
    key = kms.Key(stack, "AppKey")
    table = dynamodb.Table(
        stack,
        "AppTable",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        time_to_live_attribute="expiresAt",
        stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
        encryption_key=key,
    )
    SessionExpiry(stack, "Sessions", table=table, agent_runtime=RUNTIME_ARN)
    owned = Template.from_stack(stack).to_json()["Resources"][OWNERSHIP_TABLE_LOGICAL_ID]
    key_arn = {"Fn::GetAtt": [stack.get_logical_id(key.node.default_child), "Arn"]}
    assert owned["Properties"]["SSESpecification"]["KMSMasterKeyId"] == key_arn
    assert owned["DeletionPolicy"] == "Retain"


def test_the_table_names_agree_with_the_runtime() -> None:
    # The runtime's home for the claim attributes; only the names are compared.
    from session_expiry_runtime.core import ownership as runtime_ownership

    assert contract.OWNERSHIP_PARTITION_KEY == runtime_ownership.ATTR_RESOURCE
    assert contract.OWNERSHIP_TTL_ATTRIBUTE == runtime_ownership.ATTR_EXPIRES_AT


# --- environment and IAM ----------------------------------------------------------------------


class Synth:
    def __init__(self, cdk_context: dict[str, Any], **props: Any) -> None:
        self.stack = stack = _stack(cdk_context)
        self.app_fn = _function(stack)
        self.sessions = SessionExpiry(
            stack, "Sessions", grant_key=kms.Key(stack, "GrantKey"), **props
        )
        self.sessions.grant_session_access(self.app_fn)
        self.template = Template.from_stack(stack)
        self.json = self.template.to_json()
        assert self.sessions.ownership_table is not None
        self.table_ref = {"Ref": OWNERSHIP_TABLE_LOGICAL_ID}
        self.table_arn = {"Fn::GetAtt": [OWNERSHIP_TABLE_LOGICAL_ID, "Arn"]}


@pytest.fixture(scope="module")
def synth(cdk_context: dict[str, Any]) -> Synth:
    return Synth(cdk_context)


def test_the_cleanup_the_grant_sweep_and_the_application_are_told_the_table(synth: Synth) -> None:
    grant_sweep = synth.sessions.grant_sweep
    assert grant_sweep is not None
    for function in (synth.sessions.cleanup_function, grant_sweep.function, synth.app_fn):
        variables = _variables(synth.json, synth.stack, function)
        assert variables[contract.ENV_OWNERSHIP_TABLE_NAME] == synth.table_ref
        assert variables[contract.ENV_INCARNATION_ATTRIBUTE] == "incarnation"
    env = synth.sessions.session_environment()
    assert synth.stack.resolve(env[contract.ENV_OWNERSHIP_TABLE_NAME]) == synth.table_ref


def test_the_cleanup_role_may_update_and_read_claims_only(synth: Synth) -> None:
    role = synth.sessions.cleanup_role
    synth.template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [{"Ref": synth.stack.get_logical_id(role.node.default_child)}],
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        {
                            "Action": [
                                "dynamodb:BatchGetItem",
                                "dynamodb:GetItem",
                                "dynamodb:UpdateItem",
                            ],
                            "Effect": "Allow",
                            "Resource": synth.table_arn,
                        }
                    ]
                )
            },
        },
    )
    # Nothing else on the table: no PutItem, DeleteItem, Scan or Query.
    assert _actions_on(synth.json, synth.stack, role, synth.table_arn) == set(CLEANUP_ACTIONS)


def test_fails_if_an_application_role_has_any_action_on_the_ownership_table(synth: Synth) -> None:
    # Issue 35, route 2: IAM cannot require a condition, so a role allowed to write the table
    # could rewrite another session's claim. The application reaches it through the registrar.
    role = synth.app_fn.role
    assert _actions_on(synth.json, synth.stack, role, synth.table_arn) == set()
    registrar = synth.sessions.claim_registrar
    assert registrar is not None
    function_arn = {
        "Fn::GetAtt": [synth.stack.get_logical_id(registrar.function.node.default_child), "Arn"]
    }
    assert "lambda:InvokeFunction" in _actions_on(synth.json, synth.stack, role, function_arn)
    variables = _variables(synth.json, synth.stack, synth.app_fn)
    assert variables[contract.ENV_CLAIM_REGISTRAR_FUNCTION] == {
        "Ref": synth.stack.get_logical_id(registrar.function.node.default_child)
    }


def test_only_the_registrar_and_the_cleanup_may_write_the_ownership_table(synth: Synth) -> None:
    registrar = synth.sessions.claim_registrar
    assert registrar is not None
    writers = set()
    for resource in synth.json["Resources"].values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            resources = statement["Resource"]
            resources = resources if isinstance(resources, list) else [resources]
            actions = statement["Action"]
            actions = [actions] if isinstance(actions, str) else actions
            writes = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
            if synth.table_arn in resources and writes & set(actions):
                writers.update(r["Ref"] for r in resource["Properties"]["Roles"])
    ids = {
        synth.stack.get_logical_id(r.node.default_child)  # type: ignore[union-attr]
        for r in (registrar.role, synth.sessions.cleanup_role)
    }
    assert writers == ids
    assert _actions_on(synth.json, synth.stack, registrar.role, synth.table_arn) == {
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
    }


def test_with_a_customer_managed_key_the_cleanup_decrypts_and_the_application_encrypts(
    cdk_context: dict[str, Any],
) -> None:
    stack = _stack(cdk_context)
    key = kms.Key(stack, "TableKey")
    sessions = SessionExpiry(
        stack,
        "Sessions",
        websocket_stage=_target(stack, "websocket_stage"),
        table_encryption_key=key,
    )
    fn = _function(stack)
    sessions.grant_session_access(fn)
    json = Template.from_stack(stack).to_json()
    key_arn = {"Fn::GetAtt": [stack.get_logical_id(key.node.default_child), "Arn"]}
    # No wildcard action on the cleanup role: kms:Decrypt is what DynamoDB asks of a caller.
    assert "kms:Decrypt" in _actions_on(json, stack, sessions.cleanup_role, key_arn)
    assert not {a for a in _actions_on(json, stack, sessions.cleanup_role, key_arn) if "*" in a}
    assert {"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*"} <= _actions_on(
        json, stack, fn.role, key_arn
    )


def test_the_grant_sweep_waits_for_the_stream_path_max_record_age_plus_an_hour(
    synth: Synth, cdk_context: dict[str, Any]
) -> None:
    grant_sweep = synth.sessions.grant_sweep
    assert grant_sweep is not None
    variables = _variables(synth.json, synth.stack, grant_sweep.function)
    # Default max_record_age, 6 hours, plus 1 hour: the runtime's own default.
    assert variables[contract.ENV_GRANT_SWEEP_PENDING_SECONDS] == str(7 * 3600)
    assert contract.DEFAULT_GRANT_SWEEP_PENDING_SECONDS == 7 * 3600
    custom = Synth(cdk_context, max_record_age=Duration.minutes(90))
    assert custom.sessions.grant_sweep is not None
    variables = _variables(custom.json, custom.stack, custom.sessions.grant_sweep.function)
    assert variables[contract.ENV_GRANT_SWEEP_PENDING_SECONDS] == str(90 * 60 + 3600)


# --- ResourcesRefused -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "refusal", ["NotOwned", "Unclaimed", "Superseded", "Legacy", "ClaimExpired"]
)
def test_metric_resources_refused_by_refusal(refusal: str, synth: Synth) -> None:
    metric = synth.sessions.metric_resources_refused(refusal=refusal)
    assert metric.metric_name == contract.METRIC_RESOURCES_REFUSED
    assert metric.namespace == contract.DEFAULT_METRICS_NAMESPACE
    assert metric.dimensions == {contract.DIMENSION_REFUSAL: refusal}
    assert metric.statistic == "Sum"


def test_fails_metric_resources_refused_of_an_unknown_refusal(synth: Synth) -> None:
    with pytest.raises(ValueError, match=r"refusal='Forged': expected one of 'NotOwned', "):
        synth.sessions.metric_resources_refused(refusal="Forged")


def test_an_unresolved_max_record_age_waits_for_the_streams_retention_plus_an_hour() -> None:
    stack = Stack(App(), "Tokens")
    age = Duration.seconds(Token.as_number(CfnParameter(stack, "Age", type="Number")))
    assert grant_sweep.pending_environment(age) == {
        contract.ENV_GRANT_SWEEP_PENDING_SECONDS: str(25 * 3600)
    }
