"""SessionExpiry with no props: every default, asserted on the synthesized template."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack, assertions
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Match

from cdk_session_expiry import CLEANUP_RUNTIME, SessionExpiry
from cdk_session_expiry import _runtime_contract as contract

from .helpers import asset_dir, resources_of

ENV = Environment(account="123456789012", region="eu-west-1")


class Synth:
    def __init__(self, outdir: Path, cdk_context: dict[str, Any]) -> None:
        self.app = App(context=cdk_context, outdir=str(outdir))
        self.stack = Stack(self.app, "Test", env=ENV)
        self.sessions = SessionExpiry(self.stack, "Sessions")
        self.outdir = outdir
        self.template = assertions.Template.from_stack(self.stack)
        self.json: dict[str, Any] = self.template.to_json()

    def logical_id(self, construct: Any) -> str:
        return self.stack.get_logical_id(construct.node.default_child)


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any]) -> Synth:
    return Synth(tmp_path_factory.mktemp("defaults"), cdk_context)


def _ref(logical_id: str) -> dict[str, str]:
    return {"Ref": logical_id}


def _arn(logical_id: str, attribute: str = "Arn") -> dict[str, list[str]]:
    return {"Fn::GetAtt": [logical_id, attribute]}


# --- logical IDs are a public contract ------------------------------------------------------


def test_logical_ids_are_pinned(synth: Synth) -> None:
    assert sorted(synth.json["Resources"]) == sorted(
        [
            "SessionsTableA5E8383B",
            "SessionsCleanupLogGroup641C14F9",
            "SessionsCleanupRole463B4A5E",
            "SessionsCleanupRoleDefaultPolicy5A19E6D8",
            "SessionsCleanupFunction40CF4160",
            "SessionsFailureQueueC82DA27B",
            "SessionsFailureQueuePolicyB5B03BB3",
            "SessionsCleanupEventSourceMappingE8202608",
            "SessionsRuntimeLayerFEDF96F6",
            "SessionsIteratorAgeAlarmACA3F6CA",
            "SessionsErrorsAlarmA13BEC9E",
            "SessionsThrottlesAlarm508049F5",
            "SessionsFailureQueueAlarm9D727584",
            "SessionsSkippedRecordsAlarmA74503EA",
            # The pause watch (issue 21), always on.
            "SessionsPauseWatchLogGroup91BFD4E4",
            "SessionsPauseWatchRole0C79469A",
            "SessionsPauseWatchRoleDefaultPolicy1CEAAEED",
            "SessionsPauseWatchFunctionA3B87995",
            "SessionsPauseWatchFunctionEventInvokeConfigE93493CD",
            "SessionsPauseWatchSchedule5B906267",
            "SessionsPauseWatchScheduleAllowEventRuleTest"
            "SessionsPauseWatchFunction6C2649EB14D4585E",
            "SessionsPauseWatchCleanupPausedAlarm3A840418",
            "SessionsPauseWatchErrorsAlarm4709D962",
        ]
    )


# --- session table --------------------------------------------------------------------------


def test_table_defaults(synth: Synth) -> None:
    synth.template.has_resource(
        "AWS::DynamoDB::Table",
        {
            "Properties": {
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                "BillingMode": "PAY_PER_REQUEST",
                "TimeToLiveSpecification": {"AttributeName": "expiresAt", "Enabled": True},
                "StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"},
                "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                "SSESpecification": {"SSEEnabled": True, "SSEType": Match.absent()},
                "DeletionProtectionEnabled": False,
            },
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
        },
    )


# --- cleanup function -----------------------------------------------------------------------


def test_cleanup_runtime_is_the_newest_python_in_aws_cdk_lib() -> None:
    def version(name: str) -> tuple[int, ...]:
        return tuple(int(part) for part in name.removeprefix("PYTHON_").split("_"))

    newest = max((n for n in dir(lambda_.Runtime) if n.startswith("PYTHON_3_")), key=version)
    assert CLEANUP_RUNTIME.name == getattr(lambda_.Runtime, newest).name == "python3.14"


def test_cleanup_function_defaults(synth: Synth) -> None:
    synth.template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Runtime": "python3.14",
            "Architectures": ["arm64"],
            "Handler": "session_expiry_runtime.handler.handler",
            "Timeout": 300,
            "MemorySize": 1769,
            "LoggingConfig": {
                "LogFormat": "JSON",
                "ApplicationLogLevel": "INFO",
                "SystemLogLevel": "WARN",
                "LogGroup": _ref("SessionsCleanupLogGroup641C14F9"),
            },
            "Role": _arn("SessionsCleanupRole463B4A5E"),
            "ReservedConcurrentExecutions": Match.absent(),
            "Environment": {
                "Variables": {
                    contract.ENV_PARTITION_KEY: "pk",
                    contract.ENV_TTL_ATTRIBUTE: "expiresAt",
                    contract.ENV_CONNECTION_ID_ATTRIBUTE: "connectionId",
                    contract.ENV_GRANT_ID_ATTRIBUTE: "grantId",
                    contract.ENV_GRANT_TOKEN_ATTRIBUTE: "grantToken",
                    contract.ENV_SCRATCH_PREFIX_ATTRIBUTE: "scratchPrefix",
                    contract.ENV_TENANT_ATTRIBUTE: "tenantId",
                    contract.ENV_METRICS_NAMESPACE: "SessionExpiry",
                    contract.ENV_MAX_WORKERS: "32",
                }
            },
        },
    )


def test_cleanup_environment_holds_only_what_the_runtime_reads(synth: Synth) -> None:
    function = synth.json["Resources"]["SessionsCleanupFunction40CF4160"]
    names = set(function["Properties"]["Environment"]["Variables"])
    contract_names = {getattr(contract, n) for n in dir(contract) if n.startswith("ENV_")}
    assert names <= contract_names
    # Without targets, no target variable is set: the runtime skips those steps.
    assert not names & {
        contract.ENV_WEBSOCKET_ENDPOINT,
        contract.ENV_GRANT_KEY_ARN,
        contract.ENV_SCRATCH_BUCKET,
        contract.ENV_TABLE_NAME,
        contract.ENV_RETIRING_PRINCIPAL,
    }


def test_cleanup_log_group_has_bounded_retention(synth: Synth) -> None:
    synth.template.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 90})


def test_cleanup_code_asset_has_the_handler_package_at_its_root(synth: Synth) -> None:
    function = synth.json["Resources"]["SessionsCleanupFunction40CF4160"]
    root = asset_dir(synth.outdir, function["Properties"]["Code"])
    assert (root / "session_expiry_runtime" / "handler.py").is_file()
    assert (root / "session_expiry_runtime" / "core" / "config.py").is_file()
    assert sorted(p.name for p in root.iterdir()) == ["session_expiry_runtime"]
    assert not list(root.rglob("__pycache__"))


# --- runtime layer --------------------------------------------------------------------------


def test_runtime_layer(synth: Synth) -> None:
    synth.template.has_resource_properties(
        "AWS::Lambda::LayerVersion",
        {
            "CompatibleRuntimes": [
                "python3.10",
                "python3.11",
                "python3.12",
                "python3.13",
                "python3.14",
            ],
            "CompatibleArchitectures": ["arm64", "x86_64"],
        },
    )
    (layer,) = resources_of(synth.json, "AWS::Lambda::LayerVersion").values()
    root = asset_dir(synth.outdir, layer["Properties"]["Content"])
    assert (root / "python" / "session_expiry_runtime" / "store.py").is_file()
    assert sorted(p.name for p in root.iterdir()) == ["python"]
    function = synth.json["Resources"]["SessionsCleanupFunction40CF4160"]
    assert layer["Properties"]["Content"]["S3Key"] != function["Properties"]["Code"]["S3Key"]


# --- event source mapping -------------------------------------------------------------------


def test_event_source_mapping_defaults(synth: Synth) -> None:
    synth.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": _arn("SessionsTableA5E8383B", "StreamArn"),
            "FunctionName": _ref("SessionsCleanupFunction40CF4160"),
            "StartingPosition": "TRIM_HORIZON",
            "FilterCriteria": {
                "Filters": [
                    {"Pattern": json.dumps({"eventName": ["REMOVE"]}, separators=(",", ":"))}
                ]
            },
            "BatchSize": 100,
            "MaximumBatchingWindowInSeconds": Match.absent(),
            "ParallelizationFactor": 2,
            "BisectBatchOnFunctionError": True,
            "MaximumRetryAttempts": 10,
            "MaximumRecordAgeInSeconds": 21600,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "DestinationConfig": {
                "OnFailure": {"Destination": _arn("SessionsFailureQueueC82DA27B")}
            },
            "MetricsConfig": {"Metrics": ["EventCount"]},
            "TumblingWindowInSeconds": Match.absent(),
        },
    )


def test_event_source_mapping_waits_for_the_role_policy(synth: Synth) -> None:
    mapping = synth.json["Resources"]["SessionsCleanupEventSourceMappingE8202608"]
    assert "SessionsCleanupRoleDefaultPolicy5A19E6D8" in mapping["DependsOn"]


def test_failure_queue_is_encrypted_ssl_only_with_14_days_retention(synth: Synth) -> None:
    synth.template.has_resource_properties(
        "AWS::SQS::Queue", {"SqsManagedSseEnabled": True, "MessageRetentionPeriod": 1_209_600}
    )
    synth.template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "Queues": [_ref("SessionsFailureQueueC82DA27B")],
            "PolicyDocument": {
                "Statement": [
                    {
                        "Action": "sqs:*",
                        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                        "Effect": "Deny",
                        "Principal": {"AWS": "*"},
                        "Resource": _arn("SessionsFailureQueueC82DA27B"),
                    }
                ]
            },
        },
    )


# --- IAM ------------------------------------------------------------------------------------


def test_cleanup_role_has_only_logs_stream_read_and_failure_queue(synth: Synth) -> None:
    synth.template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    {
                        "Action": "sts:AssumeRole",
                        "Effect": "Allow",
                        "Principal": {"Service": "lambda.amazonaws.com"},
                    }
                ]
            },
            "ManagedPolicyArns": Match.absent(),
        },
    )
    policy = synth.json["Resources"]["SessionsCleanupRoleDefaultPolicy5A19E6D8"]
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Effect": "Allow",
            "Resource": _arn("SessionsCleanupLogGroup641C14F9"),
        },
        {"Action": "dynamodb:ListStreams", "Effect": "Allow", "Resource": "*"},
        {
            "Action": [
                "dynamodb:DescribeStream",
                "dynamodb:GetRecords",
                "dynamodb:GetShardIterator",
            ],
            "Effect": "Allow",
            "Resource": _arn("SessionsTableA5E8383B", "StreamArn"),
        },
        {
            "Action": ["sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"],
            "Effect": "Allow",
            "Resource": _arn("SessionsFailureQueueC82DA27B"),
        },
    ]


# --- alarms ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("logical_id", "namespace", "metric", "statistic", "threshold", "dimension"),
    [
        (
            "SessionsIteratorAgeAlarmACA3F6CA",
            "AWS/Lambda",
            "IteratorAge",
            "Maximum",
            3_600_000,
            "FunctionName",
        ),
        ("SessionsErrorsAlarmA13BEC9E", "AWS/Lambda", "Errors", "Sum", 0, "FunctionName"),
        ("SessionsThrottlesAlarm508049F5", "AWS/Lambda", "Throttles", "Sum", 0, "FunctionName"),
        (
            "SessionsFailureQueueAlarm9D727584",
            "AWS/SQS",
            "ApproximateNumberOfMessagesVisible",
            "Maximum",
            0,
            "QueueName",
        ),
    ],
)
def test_alarm_defaults(
    synth: Synth,
    logical_id: str,
    namespace: str,
    metric: str,
    statistic: str,
    threshold: int,
    dimension: str,
) -> None:
    alarm = synth.json["Resources"][logical_id]["Properties"]
    assert {k: alarm[k] for k in ("Namespace", "MetricName", "Statistic", "Threshold")} == {
        "Namespace": namespace,
        "MetricName": metric,
        "Statistic": statistic,
        "Threshold": threshold,
    }
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["EvaluationPeriods"] == 1
    assert alarm["Period"] == 300
    assert [d["Name"] for d in alarm["Dimensions"]] == [dimension]
    assert "AlarmActions" not in alarm


# --- attributes and methods -----------------------------------------------------------------


def test_attributes(synth: Synth) -> None:
    s = synth.sessions
    assert isinstance(s.table, dynamodb.Table)
    assert isinstance(s.cleanup_function, lambda_.Function)
    assert isinstance(s.runtime_layer, lambda_.LayerVersion)
    assert isinstance(s.cleanup_role, iam.Role)
    assert s.alarms == [
        s.iterator_age_alarm,
        s.errors_alarm,
        s.throttles_alarm,
        s.failure_queue_alarm,
        s.skipped_records_alarm,
        s.cleanup_paused_alarm,
        s.pause_watch.errors_alarm,
    ]
    assert s.circuit_breaker is None
    assert synth.stack.resolve(s.retiring_principal_arn) == _arn("SessionsCleanupRole463B4A5E")
    assert synth.logical_id(s.event_source_mapping) == "SessionsCleanupEventSourceMappingE8202608"


def test_metric_iterator_age(synth: Synth) -> None:
    metric = synth.sessions.metric_iterator_age()
    assert (metric.namespace, metric.metric_name, metric.statistic) == (
        "AWS/Lambda",
        "IteratorAge",
        "Maximum",
    )
    assert synth.stack.resolve(metric.dimensions)["FunctionName"] == _ref(
        "SessionsCleanupFunction40CF4160"
    )
    assert synth.sessions.metric_iterator_age(statistic="p99").statistic == "p99"


def test_metric_time_to_live_deleted_item_count(synth: Synth) -> None:
    metric = synth.sessions.metric_time_to_live_deleted_item_count()
    assert (metric.namespace, metric.metric_name, metric.statistic) == (
        "AWS/DynamoDB",
        "TimeToLiveDeletedItemCount",
        "Sum",
    )


@pytest.mark.parametrize(
    ("method", "kwargs", "name", "dimensions", "statistic"),
    [
        (
            "metric_sessions_cleaned",
            {"reason": contract.REASON_TTL},
            contract.METRIC_SESSIONS_CLEANED,
            {contract.DIMENSION_REASON: "ttl"},
            "Sum",
        ),
        (
            "metric_cleanup_failures",
            {"action": contract.ACTION_RETIRE_GRANT},
            contract.METRIC_CLEANUP_FAILURES,
            {contract.DIMENSION_ACTION: "RetireGrant"},
            "Sum",
        ),
        (
            "metric_records_skipped",
            {"cause": "NoOldImage"},
            contract.METRIC_RECORDS_SKIPPED,
            {contract.DIMENSION_CAUSE: "NoOldImage"},
            "Sum",
        ),
        ("metric_ttl_lag", {}, contract.METRIC_TTL_LAG, None, "Maximum"),
        ("metric_scratch_objects_deleted", {}, contract.METRIC_OBJECTS_DELETED, None, "Sum"),
        ("metric_scratch_prefixes_refused", {}, contract.METRIC_PREFIXES_REFUSED, None, "Sum"),
        ("metric_grants_refused", {}, contract.METRIC_GRANTS_REFUSED, None, "Sum"),
    ],
)
def test_runtime_metrics(
    synth: Synth,
    method: str,
    kwargs: dict[str, str],
    name: str,
    dimensions: dict[str, str] | None,
    statistic: str,
) -> None:
    metric: cloudwatch.Metric = getattr(synth.sessions, method)(**kwargs)
    assert metric.namespace == contract.DEFAULT_METRICS_NAMESPACE
    assert metric.metric_name == name
    assert metric.statistic == statistic
    assert metric.dimensions == dimensions


def test_grant_read_write_data_returns_a_grant(synth: Synth) -> None:
    stack = Stack(synth.app, "Grantee", env=ENV)
    role = iam.Role(stack, "Reader", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    grant = synth.sessions.grant_read_write_data(role)
    assert isinstance(grant, iam.Grant)
    assert grant.success
