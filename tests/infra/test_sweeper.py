"""Expiry sweeper (``expiry_sweep_interval``, issue 6): template assertions on and off, existing
tables, rejected values, and no new cdk-nag finding.

One stack (synthesized once) holds:
- ``Off``: the defaults;
- ``On``: a new table, sweeper every 5 minutes, TTL attribute ``ttl``, a customer managed key,
  alarm actions, dry run;
- ``Minute``: sweeper every minute (the shortest interval: timeout 60 s);
- ``Attached``: a table of this app that already has the sweep index;
- ``Imported``: an imported table (index taken on trust, synth warning).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, Stack, assertions
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from cdk_nag import AwsSolutionsChecks

from cdk_session_expiry import SessionExpiry, sweeper
from cdk_session_expiry import _runtime_contract as contract

from .helpers import StackTemplate, resources_of

ENV = Environment(account="123456789012", region="eu-west-1")
IMPORTED_STREAM_ARN = (
    "arn:aws:dynamodb:eu-west-1:123456789012:table/legacy-sessions/stream/2024-01-01T00:00:00.000"
)


def _table_with_index(stack: Stack, id: str, *, index: bool = True, **gsi: Any) -> dynamodb.Table:
    table = dynamodb.Table(
        stack,
        id,
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        time_to_live_attribute="expiresAt",
        stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
    )
    if index:
        table.add_global_secondary_index(
            **{
                "index_name": "expirySweep",
                "partition_key": dynamodb.Attribute(
                    name="expiryShard", type=dynamodb.AttributeType.STRING
                ),
                "sort_key": dynamodb.Attribute(
                    name="expiresAt", type=dynamodb.AttributeType.NUMBER
                ),
                "projection_type": dynamodb.ProjectionType.KEYS_ONLY,
                **gsi,
            }
        )
    return table


class Synth(StackTemplate):
    def __init__(self, outdir: Path, cdk_context: dict[str, Any]) -> None:
        app = App(context=cdk_context, outdir=str(outdir))
        self.stack = stack = Stack(app, "Sweeper", env=ENV)
        self.key = kms.Key(stack, "TableKey", enable_key_rotation=True)
        self.topic = sns.Topic(stack, "Alarms", enforce_ssl=True)
        self.off = SessionExpiry(stack, "Off")
        self.on = SessionExpiry(
            stack,
            "On",
            time_to_live_attribute="ttl",
            table_encryption_key=self.key,
            expiry_sweep_interval=Duration.minutes(5),
            cleanup_dry_run=True,
            alarm_actions=[cloudwatch_actions.SnsAction(self.topic)],
        )
        self.minute = SessionExpiry(stack, "Minute", expiry_sweep_interval=Duration.minutes(1))
        self.own_table = _table_with_index(stack, "OwnTable")
        self.attached = SessionExpiry(
            stack, "Attached", table=self.own_table, expiry_sweep_interval=Duration.hours(1)
        )
        imported = dynamodb.Table.from_table_attributes(
            stack, "Legacy", table_name="legacy-sessions", table_stream_arn=IMPORTED_STREAM_ARN
        )
        self.imported = SessionExpiry(
            stack, "Imported", table=imported, expiry_sweep_interval=Duration.minutes(10)
        )
        self.app_function = lambda_.Function(
            stack,
            "AppFunction",
            runtime=lambda_.Runtime.PYTHON_3_13,
            handler="app.handler",
            code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
        )
        self.on.grant_session_access(self.app_function)
        self.template = assertions.Template.from_stack(stack)
        self.json: dict[str, Any] = self.template.to_json()


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any]) -> Synth:
    return Synth(tmp_path_factory.mktemp("sweeper"), cdk_context)


def _arn(logical_id: str, attribute: str = "Arn") -> dict[str, list[str]]:
    return {"Fn::GetAtt": [logical_id, attribute]}


# --- off ------------------------------------------------------------------------------------
def test_off_by_default(synth: Synth) -> None:
    assert synth.off.expiry_sweeper is None
    assert synth.off.node.try_find_child("ExpirySweeper") is None
    assert "GlobalSecondaryIndexes" not in synth.props(synth.off.table)
    assert len(synth.off.alarms) == 7  # 5 + the pause watch's paused and errors alarms
    env = synth.off.session_environment()
    assert contract.ENV_SWEEP_SHARD_ATTRIBUTE not in env
    handlers = [
        r["Properties"]["Handler"]
        for path, r in resources_of(synth.json, "AWS::Lambda::Function").items()
        if path.startswith("Off")
    ]
    assert handlers == [contract.CLEANUP_HANDLER, contract.PAUSE_WATCH_HANDLER]


# --- on: new table --------------------------------------------------------------------------
def test_new_table_gets_the_sparse_index(synth: Synth) -> None:
    props = synth.props(synth.on.table)
    assert props["GlobalSecondaryIndexes"] == [
        {
            "IndexName": "expirySweep",
            "KeySchema": [
                {"AttributeName": "expiryShard", "KeyType": "HASH"},
                {"AttributeName": "ttl", "KeyType": "RANGE"},
            ],
            "Projection": {"ProjectionType": "KEYS_ONLY"},
        }
    ]
    assert {"AttributeName": "expiryShard", "AttributeType": "S"} in props["AttributeDefinitions"]
    assert {"AttributeName": "ttl", "AttributeType": "N"} in props["AttributeDefinitions"]


def test_sweeper_function(synth: Synth) -> None:
    sw = synth.on.expiry_sweeper
    assert sw is not None
    props = synth.props(sw.function)
    cleanup = synth.props(synth.on.cleanup_function)
    assert (
        props["Handler"]
        == contract.SWEEPER_HANDLER
        == "session_expiry_runtime.sweeps.sweeper.handler"
    )
    assert props["Runtime"] == cleanup["Runtime"] == "python3.14"
    assert props["Architectures"] == cleanup["Architectures"] == ["arm64"]
    assert props["Code"] == cleanup["Code"]  # the same code asset
    assert props["Timeout"] == 300
    assert props["MemorySize"] == 1024  # CPU-bound DeleteItems: see DEFAULT_SWEEPER_MEMORY_SIZE
    assert props["LoggingConfig"]["LogFormat"] == "JSON"
    assert props["Environment"]["Variables"] == {
        contract.ENV_TABLE_NAME: {"Ref": synth.id(synth.on.table)},
        contract.ENV_PARTITION_KEY: "pk",
        contract.ENV_TTL_ATTRIBUTE: "ttl",
        contract.ENV_CONNECTION_ID_ATTRIBUTE: "connectionId",
        contract.ENV_GRANT_ID_ATTRIBUTE: "grantId",
        contract.ENV_GRANT_TOKEN_ATTRIBUTE: "grantToken",
        contract.ENV_SCRATCH_PREFIX_ATTRIBUTE: "scratchPrefix",
        contract.ENV_TENANT_ATTRIBUTE: "tenantId",
        contract.ENV_INCARNATION_ATTRIBUTE: "incarnation",
        contract.ENV_METRICS_NAMESPACE: "SessionExpiry",
        contract.ENV_MAX_WORKERS: "32",
        contract.ENV_MAX_SESSION_LIFETIME_SECONDS: "28800",  # shared with the cleanup
        contract.ENV_DRY_RUN: "true",
        contract.ENV_SWEEP_SHARD_ATTRIBUTE: "expiryShard",
        contract.ENV_SWEEP_SHARDS: "4",
        contract.ENV_SWEEP_INDEX_NAME: "expirySweep",
    }
    synth.template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {"FunctionName": {"Ref": synth.id(sw.function)}, "MaximumRetryAttempts": 0},
    )


def test_schedule_runs_every_interval(synth: Synth) -> None:
    sw = synth.on.expiry_sweeper
    assert sw is not None
    assert synth.props(sw.schedule) == {
        "Description": "Runs the session expiry sweeper (cdk-session-expiry)",
        "ScheduleExpression": "rate(5 minutes)",
        "State": "ENABLED",
        "Targets": [
            {
                "Arn": _arn(synth.id(sw.function)),
                "Id": f"Target{k}",
                "InputTransformer": {
                    "InputPathsMap": {"time": "$.time"},
                    "InputTemplate": (
                        f'{{"expiryShards":[{k}],"scheduledAt":<time>,"periodSeconds":300}}'
                    ),
                },
                "RetryPolicy": {"MaximumRetryAttempts": 2},
            }
            for k in range(4)  # the default 4 workers, one shard each
        ],
    }
    synth.template.has_resource_properties(
        "AWS::Lambda::Permission",
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": _arn(synth.id(sw.function)),
            "Principal": "events.amazonaws.com",
            "SourceArn": _arn(synth.id(sw.schedule)),
        },
    )


def test_shortest_interval(synth: Synth) -> None:
    sw = synth.minute.expiry_sweeper
    assert sw is not None
    assert synth.props(sw.schedule)["ScheduleExpression"] == "rate(1 minute)"
    assert synth.props(sw.function)["Timeout"] == 60


def test_least_privilege(synth: Synth) -> None:
    sw = synth.on.expiry_sweeper
    assert sw is not None
    table = synth.id(synth.on.table)
    policy = sw.role.node.find_child("DefaultPolicy")
    statements = synth.props(policy)["PolicyDocument"]["Statement"]
    assert statements[:3] == [
        {
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Effect": "Allow",
            "Resource": _arn(synth.id(sw.node.find_child("LogGroup"))),
        },
        {
            "Action": "dynamodb:Query",
            "Effect": "Allow",
            "Resource": {"Fn::Join": ["", [_arn(table), "/index/expirySweep"]]},
        },
        {"Action": "dynamodb:DeleteItem", "Effect": "Allow", "Resource": _arn(table)},
    ]
    # The table's customer managed key, and nothing else.
    (kms_statement,) = statements[3:]
    assert kms_statement["Resource"] == _arn(synth.id(synth.key))
    assert all(a.startswith("kms:") for a in kms_statement["Action"])
    assert "ManagedPolicyArns" not in synth.props(sw.role)


def test_errors_alarm_is_in_alarms_with_the_actions(synth: Synth) -> None:
    sw = synth.on.expiry_sweeper
    assert sw is not None
    assert sw.errors_alarm in synth.on.alarms
    assert len(synth.on.alarms) == 8
    props = synth.props(sw.errors_alarm)
    assert props["MetricName"] == "Errors"
    assert props["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": synth.id(sw.function)}}
    ]
    assert (props["Threshold"], props["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert props["AlarmActions"] == [{"Ref": synth.id(synth.topic)}]


def test_session_runtime_writes_the_index_attribute(synth: Synth) -> None:
    env = synth.props(synth.app_function)["Environment"]["Variables"]
    assert env[contract.ENV_SWEEP_SHARD_ATTRIBUTE] == "expiryShard"
    assert env[contract.ENV_SWEEP_SHARDS] == "4"
    assert synth.on.session_environment()[contract.ENV_SWEEP_INDEX_NAME] == "expirySweep"


def test_metrics(synth: Synth) -> None:
    sw = synth.on.expiry_sweeper
    assert sw is not None
    swept = sw.metric_sessions_swept()
    assert (swept.namespace, swept.metric_name, swept.statistic) == (
        "SessionExpiry",
        "SessionsSwept",
        "Sum",
    )
    assert sw.metric_sweep_lag().metric_name == "SweepLagSeconds"
    assert sw.metric_sweep_lag().statistic == "Maximum"
    assert sw.metric_sweep_skipped().metric_name == "SweepSkipped"
    assert sw.metric_sweep_failures().metric_name == "SweepFailures"


def test_logical_ids_are_pinned(synth: Synth) -> None:
    sw = synth.on.expiry_sweeper
    assert sw is not None
    ids = {synth.id(c) for c in (sw.function, sw.schedule, sw.role, sw.errors_alarm)}
    assert ids == {
        "OnExpirySweeperFunctionC46CECBD",
        "OnExpirySweeperScheduleF8D22542",
        "OnExpirySweeperRoleAEC3B44C",
        "OnExpirySweeperErrorsAlarm79AC0485",
    }


# --- existing tables ------------------------------------------------------------------------
def test_attached_table_with_the_index_is_left_unchanged(synth: Synth) -> None:
    assert synth.attached.expiry_sweeper is not None
    (index,) = synth.props(synth.own_table)["GlobalSecondaryIndexes"]
    assert index["IndexName"] == "expirySweep"


def test_imported_table_gets_a_warning(synth: Synth) -> None:
    warnings = assertions.Annotations.from_stack(synth.stack).find_warning(
        "/Sweeper/Imported", assertions.Match.string_like_regexp("sweepIndexUnchecked")
    )
    assert len(warnings) == 1
    assert "add_global_secondary_index(index_name='expirySweep'" in str(warnings[0].entry.data)


@pytest.fixture
def stack() -> Stack:
    return Stack(App(), "Validation")


def test_fails_table_of_this_app_without_the_index(stack: Stack) -> None:
    table = _table_with_index(stack, "Own", index=False)
    with pytest.raises(
        ValueError,
        match=r"expiry_sweep_interval is set but table Validation/Own has no index 'expirySweep'"
        r".*expected add_global_secondary_index\(index_name='expirySweep', partition_key="
        r"Attribute\(name='expiryShard', type=AttributeType.STRING\), sort_key=Attribute\("
        r"name='expiresAt', type=AttributeType.NUMBER\)",
    ):
        SessionExpiry(stack, "Sessions", table=table, expiry_sweep_interval=Duration.minutes(5))


def test_fails_table_whose_sweep_index_has_other_keys(stack: Stack) -> None:
    table = _table_with_index(
        stack,
        "Own",
        sort_key=dynamodb.Attribute(name="createdAt", type=dynamodb.AttributeType.NUMBER),
    )
    with pytest.raises(
        ValueError, match=r"has an index 'expirySweep' keyed .*'createdAt'.*expected partition key"
    ):
        SessionExpiry(stack, "Sessions", table=table, expiry_sweep_interval=Duration.minutes(5))


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (Duration.seconds(0), "0 seconds: expected between 5 seconds and 1 day"),
        (Duration.days(2), "2 days: expected between 5 seconds and 1 day"),
        (
            Duration.seconds(90),
            "1 minute 30 seconds: from one minute up expected a whole number of minutes",
        ),
    ],
)
def test_fails_expiry_sweep_interval(stack: Stack, value: Duration, shown: str) -> None:
    with pytest.raises(ValueError, match=f"expiry_sweep_interval={shown}"):
        SessionExpiry(stack, "Sessions", expiry_sweep_interval=value)
    assert stack.node.try_find_child("Sessions").node.try_find_child("Table") is None  # type: ignore[union-attr]


def test_interval_limits_are_accepted(stack: Stack) -> None:
    sweeper.check_sweep_interval(Duration.seconds(5))
    sweeper.check_sweep_interval(Duration.minutes(1))
    sweeper.check_sweep_interval(Duration.days(1))


# --- cdk-nag --------------------------------------------------------------------------------
def _findings(options: dict[str, Any]) -> set[tuple[str, str]]:
    app = App()
    stack = Stack(app, "Nag", env=ENV)
    SessionExpiry(stack, "Sessions", **options)
    report = AwsSolutionsChecks().validate_scope(stack)
    return {
        (r.construct_path, v.rule_name) for v in report.violations for r in v.violating_resources
    }


def test_no_new_cdk_nag_finding() -> None:
    baseline = _findings({})
    with_everything = _findings(
        {
            "expiry_sweep_interval": Duration.minutes(5),
            "alarm_ttl_health_window": Duration.days(1),
            "cleanup_enabled": False,
            "cleanup_dry_run": True,
        }
    )
    assert with_everything == baseline
