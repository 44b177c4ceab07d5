"""The deferred-work table ("what the cleanup trusts, only a trusted writer writes"): with
``feature_flags``, deferred work lives in its own table that only the cleanup role may write —
its logical ID, settings, encryption and removal policy, the cleanup role's exact statements on
it (and the one read it needs on the session table), the environment that names it, and the
failure cases: any application role (``grant_session_access``) with an action on it, or the
ownership table keeping the old ``deferredWork`` index."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from aws_cdk import App, Environment, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from cdk_session_expiry import SessionExpiry
from cdk_session_expiry import _runtime_contract as contract

from .helpers import resources_of

ENV = Environment(account="123456789012", region="eu-west-1")
#: ``Sessions/DeferredWorkTable``'s logical ID: a public contract (a new one replaces the table
#: and loses the deferred work).
DEFERRED_WORK_TABLE_LOGICAL_ID = "SessionsDeferredWorkTable1553EFFD"


def _function(stack: Stack, name: str) -> lambda_.Function:
    return lambda_.Function(
        stack,
        name,
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="app.handler",
        code=lambda_.Code.from_inline("def handler(e, c): pass"),
    )


@dataclass
class Synth:
    stack: Stack
    sessions: SessionExpiry
    apps: list[lambda_.Function]
    json: Any

    def logical_id(self, construct: Any) -> str:
        return self.stack.get_logical_id(construct.node.default_child)

    def arn(self, construct: Any) -> dict[str, Any]:
        return {"Fn::GetAtt": [self.logical_id(construct), "Arn"]}


def _synth(cdk_context: dict[str, Any], **props: Any) -> Synth:
    """A stack with feature flags and every claimed target that makes an application role write
    (WebSocket, grants with ``create_grants``), and two application functions."""
    stack = Stack(App(context=cdk_context), "Deferred", env=ENV)
    api = apigwv2.WebSocketApi(stack, "Api")
    stage = apigwv2.WebSocketStage(stack, "Stage", web_socket_api=api, stage_name="live")
    grantee = _function(stack, "Grantee")
    sessions = SessionExpiry(
        stack,
        "Sessions",
        websocket_stage=stage,
        grant_key=kms.Key(stack, "GrantKey"),
        grant_grantees=[grantee.role] if grantee.role else [],
        scratch_bucket=s3.Bucket(stack, "Scratch"),
        feature_flags=True,
        **props,
    )
    apps = [_function(stack, "Connect"), _function(stack, "Message")]
    sessions.grant_session_access(apps[0])
    sessions.grant_session_access(apps[1], create_grants=True)
    return Synth(stack, sessions, apps, Template.from_stack(stack).to_json())


@pytest.fixture(scope="module")
def synth(cdk_context: dict[str, Any]) -> Synth:
    return _synth(cdk_context)


def _policies_of(synth: Synth, role: Any) -> list[dict[str, Any]]:
    role_ref = {"Ref": synth.stack.get_logical_id(role.node.default_child)}
    return [
        p["Properties"]["PolicyDocument"]
        for p in resources_of(synth.json, "AWS::IAM::Policy").values()
        if role_ref in p["Properties"]["Roles"]
    ]


def _actions_naming(synth: Synth, role: Any, logical_id: str) -> dict[str, set[str]]:
    """Every statement of ``role`` whose resources name ``logical_id``: its resources (as JSON)
    -> its actions."""
    found: dict[str, set[str]] = {}
    for document in _policies_of(synth, role):
        for statement in document["Statement"]:
            where = json.dumps(statement["Resource"], sort_keys=True)
            if logical_id not in where:
                continue
            action = statement["Action"]
            found.setdefault(where, set()).update([action] if isinstance(action, str) else action)
    return found


def _deferred_work_home(synth: Synth) -> str:
    """The logical ID of the table that holds deferred work: the one with the ``deferredWork``
    index the drain queries."""
    (home,) = [
        logical_id
        for logical_id, table in resources_of(synth.json, "AWS::DynamoDB::Table").items()
        if any(
            index["IndexName"] == contract.DEFERRED_INDEX
            for index in table["Properties"].get("GlobalSecondaryIndexes", [])
        )
    ]
    return home


# --- the table --------------------------------------------------------------------------------


def test_the_table_has_its_pinned_logical_id(synth: Synth) -> None:
    table = synth.sessions.deferred_work_table
    assert table is not None and table is not synth.sessions.ownership_table
    assert synth.logical_id(table) == DEFERRED_WORK_TABLE_LOGICAL_ID
    assert _deferred_work_home(synth) == DEFERRED_WORK_TABLE_LOGICAL_ID


def test_the_table_key_index_time_to_live_capacity_recovery_no_stream_retained(
    synth: Synth,
) -> None:
    resource = synth.json["Resources"][DEFERRED_WORK_TABLE_LOGICAL_ID]
    properties = resource["Properties"]
    assert properties["KeySchema"] == [{"AttributeName": "resource", "KeyType": "HASH"}]
    assert properties["GlobalSecondaryIndexes"] == [
        {
            "IndexName": "deferredWork",
            "KeySchema": [
                {"AttributeName": "deferredStep", "KeyType": "HASH"},
                {"AttributeName": "deferredAt", "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "ALL"},
        }
    ]
    assert properties["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert properties["SSESpecification"] == {"SSEEnabled": True}  # AWS managed, as the table
    assert "StreamSpecification" not in properties
    assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Retain", "Retain")


def test_the_table_follows_the_session_tables_key_and_removal_policy(
    cdk_context: dict[str, Any],
) -> None:
    stack = Stack(App(context=cdk_context), "Keyed", env=ENV)
    key = kms.Key(stack, "TableKey")
    sessions = SessionExpiry(
        stack,
        "Sessions",
        scratch_bucket=s3.Bucket(stack, "Scratch"),
        feature_flags=True,
        table_encryption_key=key,
        removal_policy=RemovalPolicy.DESTROY,
    )
    assert sessions.deferred_work_table is not None
    template = Template.from_stack(stack).to_json()
    logical_id = stack.get_logical_id(sessions.deferred_work_table.node.default_child)  # type: ignore[arg-type]
    resource = template["Resources"][logical_id]
    key_arn = {"Fn::GetAtt": [stack.get_logical_id(key.node.default_child), "Arn"]}  # type: ignore[arg-type]
    assert resource["Properties"]["SSESpecification"] == {
        "KMSMasterKeyId": key_arn,
        "SSEEnabled": True,
        "SSEType": "KMS",
    }
    assert resource["DeletionPolicy"] == "Delete"
    on_key = {
        action
        for doc in _policies_of(Synth(stack, sessions, [], template), sessions.cleanup_role)
        for st in doc["Statement"]
        if st["Resource"] == key_arn
        for action in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])
    }
    # kms:Decrypt (what DynamoDB asks of a caller, as for the ownership table), no wildcard;
    # DescribeKey comes with the stream read.
    assert "kms:Decrypt" in on_key and not {a for a in on_key if "*" in a}


def test_with_a_given_table_it_takes_that_tables_key(cdk_context: dict[str, Any]) -> None:
    stack = Stack(App(context=cdk_context), "Given", env=ENV)
    key = kms.Key(stack, "TableKey")
    table = dynamodb.Table(
        stack,
        "AppTable",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        time_to_live_attribute="expiresAt",
        encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
        encryption_key=key,
    )
    sessions = SessionExpiry(stack, "Sessions", table=table, feature_flags=True)
    assert sessions.deferred_work_table is not None
    assert sessions.deferred_work_table.encryption_key is key


def test_without_feature_flags_there_is_no_table_and_no_variable(
    cdk_context: dict[str, Any],
) -> None:
    stack = Stack(App(context=cdk_context), "NoFlags", env=ENV)
    sessions = SessionExpiry(stack, "Sessions", scratch_bucket=s3.Bucket(stack, "Scratch"))
    assert sessions.deferred_work_table is None
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::DynamoDB::Table", 1)
    assert contract.ENV_DEFERRED_WORK_TABLE_NAME not in json.dumps(template.to_json())


def test_feature_flags_alone_create_no_ownership_table(cdk_context: dict[str, Any]) -> None:
    # The ownership table holds claims only now: a scratch-only stack with flags has none.
    stack = Stack(App(context=cdk_context), "FlagsOnly", env=ENV)
    sessions = SessionExpiry(
        stack, "Sessions", scratch_bucket=s3.Bucket(stack, "Scratch"), feature_flags=True
    )
    assert sessions.ownership_table is None and sessions.deferred_work_table is not None
    Template.from_stack(stack).resource_count_is("AWS::DynamoDB::Table", 2)


# --- who may write it ---------------------------------------------------------------------------


def test_the_cleanup_role_may_put_update_delete_and_query_the_index_only(synth: Synth) -> None:
    from cdk_session_expiry.switches.deferred_work import (
        CLEANUP_INDEX_ACTIONS,
        CLEANUP_TABLE_ACTIONS,
    )

    table = synth.sessions.deferred_work_table
    assert table is not None
    arn = json.dumps(synth.arn(table), sort_keys=True)
    index = json.dumps(
        {"Fn::Join": ["", [synth.arn(table), "/index/deferredWork"]]}, sort_keys=True
    )
    assert _actions_naming(synth, synth.sessions.cleanup_role, synth.logical_id(table)) == {
        arn: set(CLEANUP_TABLE_ACTIONS),
        index: set(CLEANUP_INDEX_ACTIONS),
    }
    assert set(CLEANUP_TABLE_ACTIONS) == {
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
    }
    assert CLEANUP_INDEX_ACTIONS == ("dynamodb:Query",)


def test_the_cleanup_role_reads_the_session_table_back_with_batch_get_item_only(
    synth: Synth,
) -> None:
    from cdk_session_expiry.switches.deferred_work import SESSION_TABLE_ACTIONS

    session_table = json.dumps(synth.arn(synth.sessions.table), sort_keys=True)
    found = _actions_naming(
        synth, synth.sessions.cleanup_role, synth.logical_id(synth.sessions.table)
    )
    # The grant sweep (grant_key) runs as the cleanup role and adds its GetItem; the stream read
    # names the stream, not the table.
    assert found[session_table] == set(SESSION_TABLE_ACTIONS) | {"dynamodb:GetItem"}
    assert SESSION_TABLE_ACTIONS == ("dynamodb:BatchGetItem",)


def test_the_cleanup_function_is_told_both_tables(synth: Synth) -> None:
    function = synth.json["Resources"][synth.logical_id(synth.sessions.cleanup_function)]
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables[contract.ENV_DEFERRED_WORK_TABLE_NAME] == {
        "Ref": DEFERRED_WORK_TABLE_LOGICAL_ID
    }
    assert variables[contract.ENV_TABLE_NAME] == {"Ref": synth.logical_id(synth.sessions.table)}


def test_fails_if_an_application_role_has_any_action_on_the_deferred_work_table(
    synth: Synth,
) -> None:
    home = _deferred_work_home(synth)
    for app in synth.apps:
        assert _actions_naming(synth, app.role, home) == {}, app.node.path
        function = synth.json["Resources"][synth.logical_id(app)]
        variables = function["Properties"]["Environment"]["Variables"]
        assert contract.ENV_DEFERRED_WORK_TABLE_NAME not in variables
    assert contract.ENV_DEFERRED_WORK_TABLE_NAME not in synth.sessions.session_environment()
    # Only the cleanup role names it, in any policy of the stack.
    naming = [
        logical_id
        for logical_id, policy in resources_of(synth.json, "AWS::IAM::Policy").items()
        if home in json.dumps(policy["Properties"]["PolicyDocument"])
    ]
    assert naming == [
        synth.stack.get_logical_id(
            synth.sessions.cleanup_role.node.find_child("DefaultPolicy").node.default_child  # type: ignore[arg-type]
        )
    ]


def test_fails_if_the_ownership_table_keeps_the_deferred_work_index(synth: Synth) -> None:
    ownership = synth.sessions.ownership_table
    assert ownership is not None
    properties = synth.json["Resources"][synth.logical_id(ownership)]["Properties"]
    assert "GlobalSecondaryIndexes" not in properties
    assert _deferred_work_home(synth) != synth.logical_id(ownership)


def test_the_table_names_agree_with_the_runtime() -> None:
    # The runtime's home for the deferred-work attributes; only the names are compared.
    from session_expiry_runtime.switches import deferred

    assert contract.DEFERRED_WORK_PARTITION_KEY == deferred.ATTR_RESOURCE
    assert contract.DEFERRED_WORK_TTL_ATTRIBUTE == deferred.ATTR_EXPIRES_AT
    assert contract.DEFERRED_INDEX == deferred.DEFERRED_INDEX
    assert contract.DEFERRED_INDEX_PARTITION_KEY == deferred.ATTR_DEFERRED_STEP
    assert contract.DEFERRED_INDEX_SORT_KEY == deferred.ATTR_DEFERRED_AT
