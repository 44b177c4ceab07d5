"""Feature-flag kill switches in AWS AppConfig (issue 26 part 1), at synth: the AppConfig
resources with their exact properties, the rollback monitors on the cleanup's failure alarms,
the cleanup's access to that one profile, the deferred-work index and drain schedule, the
alarms (the refused-deferred-work alarm too); the flag document's JSON Schema (checked with
``jsonschema``, as AppConfig's ``JSON_SCHEMA`` validator does); and every rejected prop."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from aws_cdk import App, Duration, Environment, Stack, assertions
from aws_cdk import aws_appconfig as appconfig
from aws_cdk import aws_s3 as s3

from cdk_session_expiry import FeatureFlags, PropTypeError, SessionExpiry
from cdk_session_expiry.switches import feature_flags as unit

from .helpers import resources_of

ENV = Environment(account="123456789012", region="us-east-1")
STEPS = ["DeleteScratch"]


def synth(cdk_context: dict[str, Any], **props: Any) -> tuple[SessionExpiry, dict[str, Any]]:
    stack = Stack(App(context=cdk_context), "Flags", env=ENV)
    sessions = SessionExpiry(stack, "Sessions", scratch_bucket=s3.Bucket(stack, "Scratch"), **props)
    return sessions, assertions.Template.from_stack(stack).to_json()


def only(template: dict[str, Any], kind: str) -> dict[str, Any]:
    (found,) = resources_of(template, kind).values()
    return found["Properties"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def flagged(cdk_context: dict[str, Any]) -> tuple[SessionExpiry, dict[str, Any]]:
    return synth(cdk_context, feature_flags=True, cleanup_dry_run=True)


def test_the_profile_is_a_validated_feature_flag_profile(flagged: Any) -> None:
    _, template = flagged
    profile = only(template, "AWS::AppConfig::ConfigurationProfile")
    assert profile["Type"] == "AWS.AppConfig.FeatureFlags" and profile["LocationUri"] == "hosted"
    (validator,) = profile["Validators"]
    assert validator["Type"] == "JSON_SCHEMA"
    assert json.loads(validator["Content"]) == unit.flag_schema(STEPS)


def test_the_initial_version_is_every_lever_as_deployed(flagged: Any) -> None:
    _, template = flagged
    version = only(template, "AWS::AppConfig::HostedConfigurationVersion")
    document = json.loads(version["Content"])
    assert document["values"] == {
        "enabled": {"enabled": True},
        "dryRun": {"enabled": True},  # cleanup_dry_run=True
        "DeleteScratch": {"enabled": True},
    }
    assert version["ContentType"] == "application/json"
    deployment = only(template, "AWS::AppConfig::Deployment")
    ids = {
        kind: next(iter(resources_of(template, f"AWS::AppConfig::{kind}")))
        for kind in ("HostedConfigurationVersion", "Environment", "ConfigurationProfile")
    }
    assert deployment["ConfigurationVersion"] == {"Ref": ids["HostedConfigurationVersion"]}
    assert deployment["EnvironmentId"] == {"Ref": ids["Environment"]}
    assert deployment["ConfigurationProfileId"] == {"Ref": ids["ConfigurationProfile"]}
    strategy = only(template, "AWS::AppConfig::DeploymentStrategy")
    assert {k: strategy[k] for k in ("DeploymentDurationInMinutes", "FinalBakeTimeInMinutes")} == {
        "DeploymentDurationInMinutes": 0,
        "FinalBakeTimeInMinutes": 5,
    }
    assert strategy["GrowthFactor"] == 100 and strategy["GrowthType"] == "LINEAR"
    assert deployment["DeploymentStrategyId"] == {
        "Ref": next(iter(resources_of(template, "AWS::AppConfig::DeploymentStrategy")))
    }


def test_the_environment_rolls_back_on_the_cleanups_failure_alarms(flagged: Any) -> None:
    sessions, template = flagged
    env = only(template, "AWS::AppConfig::Environment")
    stack = Stack.of(sessions)
    alarms = [
        stack.resolve(a.alarm_arn) for a in (sessions.errors_alarm, sessions.failure_queue_alarm)
    ]
    assert [m["AlarmArn"] for m in env["Monitors"]] == alarms
    assert env["Name"] == unit.ENVIRONMENT_NAME
    role_policy = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for k, p in resources_of(template, "AWS::IAM::Policy").items()
        if "MonitorRole" in k
    ]
    assert role_policy == [
        [{"Action": "cloudwatch:DescribeAlarms", "Effect": "Allow", "Resource": alarms}]
    ]


def _cleanup_statements(sessions: SessionExpiry, template: dict[str, Any]) -> list[Any]:
    policy_id = Stack.of(sessions).get_logical_id(
        sessions.cleanup_role.node.find_child("DefaultPolicy").node.default_child  # type: ignore[arg-type]
    )
    return template["Resources"][policy_id]["Properties"]["PolicyDocument"]["Statement"]  # type: ignore[no-any-return]


def test_the_cleanup_reads_that_profile_only(flagged: Any) -> None:
    sessions, template = flagged
    statements = _cleanup_statements(sessions, template)
    appconfig_statements = [s for s in statements if "appconfig" in json.dumps(s["Action"])]
    (statement,) = appconfig_statements
    assert sorted(statement["Action"]) == [
        "appconfig:GetLatestConfiguration",
        "appconfig:StartConfigurationSession",
    ]
    resource = json.dumps(statement["Resource"])
    assert ":application/" in resource and "/environment/*/configuration/" in resource
    assert "ConfigurationProfile" in resource  # the profile's Ref, not a wildcard
    variables = next(
        f["Properties"]["Environment"]["Variables"]
        for k, f in resources_of(template, "AWS::Lambda::Function").items()
        if "CleanupFunction" in k
    )
    assert variables["SESSION_EXPIRY_FLAGS_ENVIRONMENT"] == unit.ENVIRONMENT_NAME
    assert variables["SESSION_EXPIRY_FLAGS_POLL_SECONDS"] == "30"
    for name in ("APPLICATION", "PROFILE", "DEPLOYMENT_STRATEGY"):
        assert "Ref" in variables[f"SESSION_EXPIRY_FLAGS_{name}"]


def test_deferred_work_has_an_index_and_a_drain(flagged: Any) -> None:
    sessions, template = flagged
    table = next(
        t["Properties"]
        for k, t in resources_of(template, "AWS::DynamoDB::Table").items()
        if "DeferredWorkTable" in k
    )
    (index,) = table["GlobalSecondaryIndexes"]
    assert index["IndexName"] == "deferredWork"
    assert index["KeySchema"] == [
        {"AttributeName": "deferredStep", "KeyType": "HASH"},
        {"AttributeName": "deferredAt", "KeyType": "RANGE"},
    ]
    rules = [
        r["Properties"]
        for k, r in resources_of(template, "AWS::Events::Rule").items()
        if "DrainSchedule" in k
    ]
    assert [(r["ScheduleExpression"], r["Targets"][0]["Input"]) for r in rules] == [
        ("rate(5 minutes)", '{"sessionExpiryDrain":true}')
    ]
    statements = _cleanup_statements(sessions, template)
    on_index = {
        action
        for st in statements
        if "/index/deferredWork" in json.dumps(st["Resource"])
        for action in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])
    }
    assert on_index == {
        "dynamodb:Query"
    }  # the table's writes name the table (test_deferred_work_table)


def test_the_flag_alarms(flagged: Any) -> None:
    sessions, template = flagged
    alarms = {
        k: a["Properties"]
        for k, a in resources_of(template, "AWS::CloudWatch::Alarm").items()
        if "FeatureFlags" in k
    }
    read = next(a for k, a in alarms.items() if "ReadFailures" in k)
    age = next(a for k, a in alarms.items() if "DeferredWorkAge" in k)
    refused = next(a for k, a in alarms.items() if "DeferredWorkRefused" in k)
    assert (refused["MetricName"], refused["Statistic"], refused["Threshold"]) == (
        "DeferredWorkRefused",
        "Sum",
        0,
    )
    assert (refused["EvaluationPeriods"], refused["TreatMissingData"]) == (1, "notBreaching")
    assert refused["AlarmDescription"].endswith(
        "Runbook: docs/operating.md#alarm-deferred-work-refused"
    )
    assert (read["MetricName"], read["Statistic"], read["Threshold"]) == (
        "FeatureFlagsReadFailures",
        "Sum",
        0,
    )
    assert (read["EvaluationPeriods"], read["DatapointsToAlarm"]) == (3, 2)
    assert (age["MetricName"], age["Statistic"], age["Threshold"]) == (
        "DeferredWorkAgeSeconds",
        "Maximum",
        86_400,
    )
    assert sessions.feature_flags is not None
    assert sessions.feature_flags.read_failures_alarm in sessions.alarms
    assert sessions.feature_flags.deferred_work_refused_alarm in sessions.alarms


def test_off_by_default_adds_nothing(cdk_context: dict[str, Any]) -> None:
    sessions, template = synth(cdk_context)
    assert sessions.feature_flags is None
    assert not any(
        t.startswith("AWS::AppConfig::")
        for t in (r["Type"] for r in template["Resources"].values())
    )
    assert sessions.ownership_table is None  # no claimed target, no flags


def test_options_poll_interval_and_strategy(cdk_context: dict[str, Any]) -> None:
    stack = Stack(App(context=cdk_context), "Opts", env=ENV)
    strategy = appconfig.DeploymentStrategy(
        stack,
        "Slow",
        rollout_strategy=appconfig.RolloutStrategy.linear(
            growth_factor=20, deployment_duration=Duration.minutes(10)
        ),
    )
    SessionExpiry(
        stack,
        "Sessions",
        scratch_bucket=s3.Bucket(stack, "Scratch"),
        feature_flags=FeatureFlags(deployment_strategy=strategy, poll_interval=Duration.minutes(2)),
    )
    template = assertions.Template.from_stack(stack).to_json()
    assert len(resources_of(template, "AWS::AppConfig::DeploymentStrategy")) == 1  # the given one
    variables = next(
        f["Properties"]["Environment"]["Variables"]
        for k, f in resources_of(template, "AWS::Lambda::Function").items()
        if "CleanupFunction" in k
    )
    assert variables["SESSION_EXPIRY_FLAGS_POLL_SECONDS"] == "120"


def test_the_schema_accepts_the_initial_document_and_a_step_off() -> None:
    schema = unit.flag_schema(["DeleteConnection", "DeleteScratch"])
    document = unit.flag_document(["DeleteConnection", "DeleteScratch"], dry_run=False)
    jsonschema.validate(document, schema)
    document["values"]["DeleteScratch"]["enabled"] = False
    jsonschema.validate(document, schema)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["values"].pop("DeleteScratch"), "'DeleteScratch' is a required property"),
        (lambda d: d["values"]["enabled"].update(enabled="off"), "is not of type 'boolean'"),
        (lambda d: d["flags"].update(Typo={"name": "Typo"}), "Additional properties"),
        (lambda d: d.update(version="2"), "is not one of"),
    ],
)
def test_fails_a_flag_document_the_schema_refuses(change: Any, message: str) -> None:
    document = unit.flag_document(STEPS, dry_run=False)
    change(document)
    with pytest.raises(jsonschema.ValidationError, match=message):
        jsonschema.validate(document, unit.flag_schema(STEPS))


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ("yes", TypeError, "feature_flags='yes': expected True, False or FeatureFlags"),
        (FeatureFlags(poll_interval=Duration.seconds(5)), ValueError, "15 seconds to 1 hour"),
        (FeatureFlags(poll_interval=Duration.hours(2)), ValueError, "15 seconds to 1 hour"),
        (FeatureFlags(poll_interval=30), TypeError, "poll_interval=30: expected a Duration"),  # type: ignore[arg-type]
        (FeatureFlags(deployment_strategy="fast"), TypeError, "IDeploymentStrategy"),  # type: ignore[arg-type]
    ],
)
def test_fails_bad_feature_flags(
    cdk_context: dict[str, Any], value: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        synth(cdk_context, feature_flags=value)


def test_fails_a_step_named_like_a_lever() -> None:
    with pytest.raises(ValueError, match="none named 'enabled' or 'dryRun'"):
        unit.flag_names(["enabled"])
    assert PropTypeError  # the construct's other type errors keep their class
