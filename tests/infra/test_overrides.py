"""SessionExpiry with every prop overridden, attached to existing tables, with targets.

One stack holds three constructs (synthesized once):
- ``Custom``: a new table with every table/function/mapping/alarm prop overridden and all
  three cleanup targets;
- ``Attached``: a table of the same app, a user-supplied failure queue;
- ``Imported``: an imported table (with its stream ARN) and an imported scratch bucket.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, RemovalPolicy, Stack, assertions
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Match

from cdk_session_expiry import CleanupEventFilter, SessionExpiry
from cdk_session_expiry import _runtime_contract as contract

from .helpers import StackTemplate

ENV = Environment(account="123456789012", region="eu-west-1")
IMPORTED_STREAM_ARN = (
    "arn:aws:dynamodb:eu-west-1:123456789012:table/legacy-sessions/stream/2024-01-01T00:00:00.000"
)


class Synth(StackTemplate):
    def __init__(self, outdir: Path, cdk_context: dict[str, Any]) -> None:
        app = App(context=cdk_context, outdir=str(outdir))
        self.stack = stack = Stack(app, "Overrides", env=ENV)
        self.key = kms.Key(stack, "TableKey")
        self.grant_key = kms.Key(stack, "GrantKey")
        self.bucket = s3.Bucket(stack, "Scratch")
        self.topic = sns.Topic(stack, "Alarms")
        api = apigwv2.WebSocketApi(stack, "Api")
        self.api = api
        self.stage = apigwv2.WebSocketStage(
            stack, "Stage", web_socket_api=api, stage_name="prod", auto_deploy=True
        )
        self.custom = SessionExpiry(
            stack,
            "Custom",
            partition_key_name="id",
            sort_key_name="sk",
            time_to_live_attribute="ttl",
            table_encryption_key=self.key,
            removal_policy=RemovalPolicy.DESTROY,
            deletion_protection=True,
            connection_id_attribute="conn",
            grant_id_attribute="gid",
            grant_token_attribute="gtok",
            scratch_prefix_attribute="scratch",
            tenant_attribute="tenant",
            cleanup_timeout=Duration.minutes(2),
            cleanup_memory_size=512,
            cleanup_log_retention=logs.RetentionDays.ONE_WEEK,
            max_workers=4,
            metrics_namespace="Custom/Sessions",
            # TTL_DELETES_ONLY is rejected with grant_session_access (tests/infra/test_guards.py)
            event_filter=CleanupEventFilter.ALL_REMOVES,
            batch_size=500,
            max_batching_window=Duration.seconds(30),
            parallelization_factor=4,
            retry_attempts=3,
            max_record_age=Duration.hours(1),
            websocket_stage=self.stage,
            grant_key=self.grant_key,
            scratch_bucket=self.bucket,
            scratch_root="app/sessions/",
            tenant_scoped_scratch=True,
            scratch_retention=Duration.days(3),
            alarm_iterator_age_threshold=Duration.minutes(30),
            alarm_actions=[cloudwatch_actions.SnsAction(self.topic)],
        )
        self.own_table = dynamodb.Table(
            stack,
            "OwnTable",
            partition_key=dynamodb.Attribute(name="userId", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sessionId", type=dynamodb.AttributeType.STRING),
            time_to_live_attribute="validUntil",
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        )
        self.own_queue = sqs.Queue(stack, "OwnFailureQueue", enforce_ssl=True)
        self.attached = SessionExpiry(
            stack, "Attached", table=self.own_table, failure_queue=self.own_queue
        )
        imported_table = dynamodb.Table.from_table_attributes(
            stack,
            "LegacyTable",
            table_name="legacy-sessions",
            table_stream_arn=IMPORTED_STREAM_ARN,
        )
        self.imported = SessionExpiry(
            stack,
            "Imported",
            table=imported_table,
            partition_key_name="sessionId",
            scratch_bucket=s3.Bucket.from_bucket_name(stack, "LegacyBucket", "legacy-scratch"),
        )
        self.app_function = lambda_.Function(
            stack,
            "AppFunction",
            runtime=lambda_.Runtime.PYTHON_3_13,
            handler="app.handler",
            code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
        )
        self.session_grant = self.custom.grant_session_access(self.app_function)
        # Imported with its role: the permissions go to that role.
        self.imported_function = lambda_.Function.from_function_attributes(
            stack,
            "ImportedFunction",
            function_arn="arn:aws:lambda:eu-west-1:123456789012:function:elsewhere",
            role=iam.Role.from_role_arn(
                stack, "ImportedRole", "arn:aws:iam::123456789012:role/elsewhere-role"
            ),
        )
        self.attached.grant_session_access(self.imported_function)
        self.template = assertions.Template.from_stack(stack)
        self.json: dict[str, Any] = self.template.to_json()
        self.annotations = assertions.Annotations.from_stack(stack)

    def policy_statements(self, role: iam.IRole) -> list[dict[str, Any]]:
        policy = role.node.find_child("DefaultPolicy")
        return self.props(policy)["PolicyDocument"]["Statement"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any]) -> Synth:
    return Synth(tmp_path_factory.mktemp("overrides"), cdk_context)


def _arn(logical_id: str, attribute: str = "Arn") -> dict[str, list[str]]:
    return {"Fn::GetAtt": [logical_id, attribute]}


# --- table ----------------------------------------------------------------------------------


def test_table_overrides(synth: Synth) -> None:
    table = synth.resource(synth.custom.table)
    assert table["DeletionPolicy"] == "Delete"
    assert table["Properties"]["KeySchema"] == [
        {"AttributeName": "id", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert table["Properties"]["TimeToLiveSpecification"] == {
        "AttributeName": "ttl",
        "Enabled": True,
    }
    assert table["Properties"]["SSESpecification"] == {
        "SSEEnabled": True,
        "SSEType": "KMS",
        "KMSMasterKeyId": _arn(synth.id(synth.key)),
    }
    assert table["Properties"]["DeletionProtectionEnabled"] is True
    assert table["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}


def test_existing_tables_are_attached_not_created(synth: Synth) -> None:
    assert synth.attached.table is synth.own_table
    assert synth.attached.node.try_find_child("Table") is None
    assert synth.imported.node.try_find_child("Table") is None
    # Custom's session and ownership tables (it has a stage), and OwnTable: no table is created
    # for the attached or imported ones, which have no target with ownership records.
    tables = synth.template.find_resources("AWS::DynamoDB::Table")
    assert len(tables) == 3
    assert synth.attached.ownership_table is None and synth.imported.ownership_table is None
    own = synth.props(synth.attached.event_source_mapping)
    assert own["EventSourceArn"] == _arn(synth.id(synth.own_table), "StreamArn")
    imported = synth.props(synth.imported.event_source_mapping)
    assert imported["EventSourceArn"] == IMPORTED_STREAM_ARN


def test_same_app_table_supplies_its_key_and_ttl_names(synth: Synth) -> None:
    env = synth.props(synth.attached.cleanup_function)["Environment"]["Variables"]
    assert env[contract.ENV_PARTITION_KEY] == "userId"
    assert env[contract.ENV_SORT_KEY] == "sessionId"
    assert env[contract.ENV_TTL_ATTRIBUTE] == "validUntil"


def test_imported_table_uses_the_given_key_name(synth: Synth) -> None:
    env = synth.props(synth.imported.cleanup_function)["Environment"]["Variables"]
    assert env[contract.ENV_PARTITION_KEY] == "sessionId"
    assert env[contract.ENV_TTL_ATTRIBUTE] == "expiresAt"
    assert contract.ENV_SORT_KEY not in env


# --- cleanup function -----------------------------------------------------------------------


def test_cleanup_function_overrides(synth: Synth) -> None:
    props = synth.props(synth.custom.cleanup_function)
    assert props["Timeout"] == 120
    assert props["MemorySize"] == 512
    api_id = synth.id(synth.api)
    assert props["Environment"]["Variables"] == {
        contract.ENV_PARTITION_KEY: "id",
        contract.ENV_SORT_KEY: "sk",
        contract.ENV_TTL_ATTRIBUTE: "ttl",
        contract.ENV_CONNECTION_ID_ATTRIBUTE: "conn",
        contract.ENV_GRANT_ID_ATTRIBUTE: "gid",
        contract.ENV_GRANT_TOKEN_ATTRIBUTE: "gtok",
        contract.ENV_SCRATCH_PREFIX_ATTRIBUTE: "scratch",
        contract.ENV_TENANT_ATTRIBUTE: "tenant",
        contract.ENV_INCARNATION_ATTRIBUTE: "incarnation",
        contract.ENV_OWNERSHIP_TABLE_NAME: {"Ref": synth.id(synth.custom.ownership_table)},
        contract.ENV_METRICS_NAMESPACE: "Custom/Sessions",
        contract.ENV_MAX_WORKERS: "4",
        contract.ENV_MAX_SESSION_LIFETIME_SECONDS: "28800",  # the Kinesis read-back's
        contract.ENV_SCRATCH_BUCKET: {"Ref": synth.id(synth.bucket)},
        contract.ENV_SCRATCH_ROOT: "app/sessions/",
        contract.ENV_TENANT_SCOPED_SCRATCH: "true",
        contract.ENV_GRANT_KEY_ARN: _arn(synth.id(synth.grant_key)),
        contract.ENV_WEBSOCKET_ENDPOINT: {
            "Fn::Join": [
                "",
                [
                    "https://",
                    {"Ref": api_id},
                    ".execute-api.eu-west-1.",
                    {"Ref": "AWS::URLSuffix"},
                    "/prod",
                ],
            ]
        },
    }
    log_group = synth.custom.node.find_child("CleanupLogGroup")
    assert synth.props(log_group)["RetentionInDays"] == 7


def test_cleanup_role_is_scoped_to_each_target(synth: Synth) -> None:
    statements = synth.policy_statements(synth.custom.cleanup_role)
    bucket_arn = _arn(synth.id(synth.bucket))
    expected = [
        {
            "Action": "execute-api:ManageConnections",
            "Effect": "Allow",
            "Resource": {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        ":execute-api:eu-west-1:123456789012:",
                        {"Ref": synth.id(synth.api)},
                        "/prod/DELETE/@connections/*",
                    ],
                ]
            },
        },
        {
            # RetireGrant and ListGrants (the grant's ownership check) for the cleanup,
            # ListGrants for the grant sweep (which runs as this role): one statement on the key.
            "Action": ["kms:ListGrants", "kms:RetireGrant"],
            "Effect": "Allow",
            "Resource": _arn(synth.id(synth.grant_key)),
        },
        {
            "Action": "s3:ListBucket",
            "Condition": {"StringLike": {"s3:prefix": ["app/sessions/*"]}},
            "Effect": "Allow",
            "Resource": bucket_arn,
        },
        {
            "Action": "s3:DeleteObject",
            "Effect": "Allow",
            "Resource": {"Fn::Join": ["", [bucket_arn, "/app/sessions/*"]]},
        },
    ]
    for statement in expected:
        assert statement in statements
    actions = {
        a
        for s in statements
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert not {a for a in actions if a.startswith("s3:")} - {"s3:ListBucket", "s3:DeleteObject"}
    assert not {a for a in actions if a.endswith("*")}


# --- event source mapping -------------------------------------------------------------------


def test_event_source_mapping_overrides(synth: Synth) -> None:
    props = synth.props(synth.custom.event_source_mapping)
    assert props["BatchSize"] == 500
    assert props["MaximumBatchingWindowInSeconds"] == 30
    assert props["ParallelizationFactor"] == 4
    assert props["MaximumRetryAttempts"] == 3
    assert props["MaximumRecordAgeInSeconds"] == 3600
    assert props["BisectBatchOnFunctionError"] is True
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["StartingPosition"] == "TRIM_HORIZON"


def test_ttl_only_filter_pattern() -> None:
    stack = Stack(App(), "TtlOnly")
    SessionExpiry(stack, "Sessions", event_filter=CleanupEventFilter.TTL_DELETES_ONLY)
    (mapping,) = (
        assertions.Template.from_stack(stack)
        .find_resources("AWS::Lambda::EventSourceMapping")
        .values()
    )
    (criteria,) = mapping["Properties"]["FilterCriteria"]["Filters"]
    assert json.loads(criteria["Pattern"]) == {
        "eventName": ["REMOVE"],
        "userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]},
    }


def test_user_failure_queue_is_the_destination(synth: Synth) -> None:
    props = synth.props(synth.attached.event_source_mapping)
    assert props["DestinationConfig"] == {
        "OnFailure": {"Destination": _arn(synth.id(synth.own_queue))}
    }
    assert synth.attached.failure_queue is synth.own_queue
    assert synth.attached.node.try_find_child("FailureQueue") is None
    alarm = synth.props(synth.attached.failure_queue_alarm)
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": _arn(synth.id(synth.own_queue), "QueueName")}
    ]


# --- S3 lifecycle backstop ------------------------------------------------------------------


def test_lifecycle_rule_on_the_scratch_root(synth: Synth) -> None:
    synth.template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "LifecycleConfiguration": {
                "Rules": [
                    {
                        "Id": Match.string_like_regexp("^session-expiry-scratch-"),
                        "Prefix": "app/sessions/",
                        "Status": "Enabled",
                        "ExpirationInDays": 3,
                        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
                        "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
                    }
                ]
            }
        },
    )


def test_imported_bucket_warns_that_no_backstop_was_added(synth: Synth) -> None:
    synth.annotations.has_warning(
        "/Overrides/Imported",
        Match.string_like_regexp("no lifecycle backstop rule could be added for 'sessions/'"),
    )


# --- alarms ---------------------------------------------------------------------------------


def test_alarm_overrides(synth: Synth) -> None:
    topic = {"Ref": synth.id(synth.topic)}
    for alarm in synth.custom.alarms:
        assert synth.props(alarm)["AlarmActions"] == [topic]
    assert synth.props(synth.custom.iterator_age_alarm)["Threshold"] == 1_800_000


# --- grant_session_access -------------------------------------------------------------------


def test_grant_session_access_table_permissions(synth: Synth) -> None:
    statements = synth.policy_statements(synth.app_function.role)  # type: ignore[arg-type]
    table_arn = _arn(synth.id(synth.custom.table))
    assert {
        "Action": [
            "dynamodb:DeleteItem",
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:Query",
            "dynamodb:UpdateItem",
        ],
        "Effect": "Allow",
        "Resource": table_arn,
    } in statements


def test_grant_session_access_gives_no_grant_permission_unless_asked(synth: Synth) -> None:
    # create_grants defaults to False; the CreateGrant conditions are in test_session_access.
    statements = synth.policy_statements(synth.app_function.role)  # type: ignore[arg-type]
    actions = {
        a
        for s in statements
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert "kms:CreateGrant" not in actions
    assert "kms:RetireGrant" not in actions


def test_grant_session_access_uses_the_table_key(synth: Synth) -> None:
    statements = synth.policy_statements(synth.app_function.role)  # type: ignore[arg-type]
    key_statements = [s for s in statements if s["Resource"] == _arn(synth.id(synth.key))]
    assert key_statements and "kms:Decrypt" in key_statements[0]["Action"]


def test_grant_session_access_sets_environment_and_layer(synth: Synth) -> None:
    props = synth.props(synth.app_function)
    assert props["Environment"]["Variables"] == {
        contract.ENV_TABLE_NAME: {"Ref": synth.id(synth.custom.table)},
        contract.ENV_PARTITION_KEY: "id",
        contract.ENV_SORT_KEY: "sk",
        contract.ENV_TTL_ATTRIBUTE: "ttl",
        contract.ENV_CONNECTION_ID_ATTRIBUTE: "conn",
        contract.ENV_GRANT_ID_ATTRIBUTE: "gid",
        contract.ENV_GRANT_TOKEN_ATTRIBUTE: "gtok",
        contract.ENV_SCRATCH_PREFIX_ATTRIBUTE: "scratch",
        contract.ENV_TENANT_ATTRIBUTE: "tenant",
        contract.ENV_SCRATCH_ROOT: "app/sessions/",
        contract.ENV_SCRATCH_BUCKET: {"Ref": synth.id(synth.bucket)},
        contract.ENV_TENANT_SCOPED_SCRATCH: "true",
        contract.ENV_RETIRING_PRINCIPAL: _arn(synth.id(synth.custom.cleanup_role)),
        contract.ENV_GRANT_KEY_ARN: _arn(synth.id(synth.grant_key)),
        contract.ENV_MAX_SESSION_LIFETIME_SECONDS: str(8 * 3600),
        contract.ENV_INCARNATION_ATTRIBUTE: "incarnation",
        contract.ENV_OWNERSHIP_TABLE_NAME: {"Ref": synth.id(synth.custom.ownership_table)},
        contract.ENV_CLAIM_REGISTRAR_FUNCTION: {
            "Ref": synth.id(synth.custom.claim_registrar.function)  # type: ignore[union-attr]
        },
        contract.ENV_WEBSOCKET_ENDPOINT: props["Environment"]["Variables"][
            contract.ENV_WEBSOCKET_ENDPOINT
        ],
    }
    assert "execute-api" in json.dumps(
        props["Environment"]["Variables"][contract.ENV_WEBSOCKET_ENDPOINT]
    )
    assert props["Layers"] == [{"Ref": synth.id(synth.custom.runtime_layer)}]
    assert isinstance(synth.session_grant, iam.Grant)


def test_grant_session_access_on_an_imported_function_warns(synth: Synth) -> None:
    synth.annotations.has_warning(
        "/Overrides/Attached",
        Match.string_like_regexp("not a lambda_.Function"),
    )


def test_grant_session_access_on_an_imported_function_attaches_to_its_role(synth: Synth) -> None:
    policies = [
        r["Properties"]
        for r in synth.json["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and r["Properties"].get("Roles") == ["elsewhere-role"]
    ]
    assert len(policies) == 1
    actions = {
        a
        for st in policies[0]["PolicyDocument"]["Statement"]
        for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])
    }
    assert {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"} <= actions


def test_fails_grant_session_access_on_a_function_imported_without_its_role(
    cdk_context: dict[str, Any],
) -> None:
    stack = Stack(App(context=cdk_context), "NoRole")
    sessions = SessionExpiry(stack, "Sessions")
    by_name = lambda_.Function.from_function_name(stack, "ByName", "elsewhere")
    with pytest.raises(ValueError) as caught:
        sessions.grant_session_access(by_name)
    message = str(caught.value)
    assert "grant_session_access(NoRole/ByName)" in message
    assert "imported without its role" in message
    assert "from_function_attributes" in message
