"""The sample app: whole-template snapshot, cdk-nag, cfn-lint, and how it uses the construct."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack, assertions
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint

from cdk_session_expiry import _runtime_contract as contract
from sample_app.app import build_app
from sample_app.stack import SessionExpirySampleStack

from .helpers import cdk_json_context, resources_of

SNAPSHOT = Path(__file__).parent / "snapshots" / "sample_app.json"
ACCOUNT, REGION = "123456789012", "us-east-1"
CONTEXT = {"sample:account": ACCOUNT, "sample:region": REGION}
_ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")


class Sample:
    def __init__(self, outdir: Path) -> None:
        self.app = build_app({**cdk_json_context(), **CONTEXT}, outdir=str(outdir))
        (stack,) = (c for c in self.app.node.children if isinstance(c, Stack))
        assert isinstance(stack, SessionExpirySampleStack)
        self.stack = stack
        self.template = assertions.Template.from_stack(stack)
        self.json: dict[str, Any] = self.template.to_json()

    def id(self, construct: Any) -> str:
        return self.stack.get_logical_id(construct.node.default_child)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    return Sample(tmp_path_factory.mktemp("sample"))


@pytest.fixture(scope="module")
def findings_without_acknowledgements() -> tuple[SessionExpirySampleStack, list[Any]]:
    """cdk-nag findings of the sample stack built with every acknowledgement left out."""
    app = App(context=cdk_json_context())
    stack = SessionExpirySampleStack(
        app,
        "Unacknowledged",
        env=Environment(account=ACCOUNT, region=REGION),
        acknowledge_findings=False,
    )
    return stack, list(AwsSolutionsChecks().validate_scope(stack).violations)


def _normalised(template: dict[str, Any]) -> dict[str, Any]:
    return json.loads(_ASSET_HASH.sub("<asset-hash>", json.dumps(template)))  # type: ignore[no-any-return]


# --- snapshot -------------------------------------------------------------------------------


def test_snapshot(sample: Sample) -> None:
    actual = _normalised(sample.json)
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(json.dumps(actual, indent=1, sort_keys=True) + "\n")
    assert SNAPSHOT.is_file(), f"no snapshot at {SNAPSHOT}: run with UPDATE_SNAPSHOTS=1"
    assert actual == json.loads(SNAPSHOT.read_text()), (
        "the sample template changed; review the diff and run with UPDATE_SNAPSHOTS=1"
    )


# --- cdk-nag --------------------------------------------------------------------------------


def test_cdk_nag_finds_nothing_unacknowledged(sample: Sample) -> None:
    report = AwsSolutionsChecks().validate_scope(sample.stack)
    assert [
        (v.rule_name, [r.construct_path for r in v.violating_resources]) for v in report.violations
    ] == []
    assert report.success


def test_every_acknowledgement_still_suppresses_a_real_finding(
    sample: Sample,
    findings_without_acknowledgements: tuple[SessionExpirySampleStack, list[Any]],
) -> None:
    stack, violations = findings_without_acknowledgements
    found = {(r.construct_path, v.rule_name) for v in violations for r in v.violating_resources}
    # Same construct tree apart from the stack name: compare paths below the stack.
    found = {(path.split("/", 1)[1], rule) for path, rule in found}
    acknowledged = [(path.split("/", 1)[1], rule) for path, rule in sample.stack.acknowledgements]
    assert acknowledged, "the sample app acknowledges nothing: drop this test"
    for path, rule in acknowledged:
        assert any(
            rule == found_rule and (found_path == path or found_path.startswith(path + "/"))
            for found_path, found_rule in found
        ), f"acknowledgement {rule} on {path} suppresses no finding"
    # And nothing else was found: every finding is one of the acknowledged ones.
    for found_path, found_rule in found:
        assert any(
            rule == found_rule and (found_path == path or found_path.startswith(path + "/"))
            for path, rule in acknowledged
        ), f"unacknowledged finding {found_rule} on {found_path}"
    assert len(stack.acknowledgements) == len(sample.stack.acknowledgements)


# --- cfn-lint -------------------------------------------------------------------------------


def test_cfn_lint_reports_no_errors(sample: Sample) -> None:
    matches = lint(json.dumps(sample.json), config=ManualArgs(regions=[REGION]))
    errors = [str(m) for m in matches if m.rule.id.startswith("E")]
    assert errors == []


# --- how the sample uses the construct ------------------------------------------------------


def test_route_handlers_use_the_runtime_layer_and_session_environment(sample: Sample) -> None:
    layer = {"Ref": sample.id(sample.stack.sessions.runtime_layer)}
    handlers = {
        logical_id: resource["Properties"]
        for logical_id, resource in resources_of(sample.json, "AWS::Lambda::Function").items()
        if resource["Properties"]["Handler"]
        in {"connect.handler", "message.handler", "disconnect.handler"}
    }
    assert len(handlers) == 3
    for props in handlers.values():
        assert props["Layers"] == [layer]
        variables = props["Environment"]["Variables"]
        assert variables[contract.ENV_TABLE_NAME] == {"Ref": sample.id(sample.stack.sessions.table)}
        assert variables[contract.ENV_RETIRING_PRINCIPAL] == {
            "Fn::GetAtt": [sample.id(sample.stack.sessions.cleanup_role), "Arn"]
        }
        assert props["Runtime"] == "python3.14"
        assert props["Architectures"] == ["arm64"]


def test_connect_route_is_iam_authorized(sample: Sample) -> None:
    sample.template.has_resource_properties(
        "AWS::ApiGatewayV2::Route", {"RouteKey": "$connect", "AuthorizationType": "AWS_IAM"}
    )


def test_cleanup_targets_the_stage_key_and_scratch_bucket(sample: Sample) -> None:
    (cleanup,) = (
        resource["Properties"]
        for resource in resources_of(sample.json, "AWS::Lambda::Function").values()
        if resource["Properties"]["Handler"] == contract.CLEANUP_HANDLER
    )
    variables = cleanup["Environment"]["Variables"]
    for name in (
        contract.ENV_WEBSOCKET_ENDPOINT,
        contract.ENV_GRANT_KEY_ARN,
        contract.ENV_SCRATCH_BUCKET,
        contract.ENV_SCRATCH_ROOT,
    ):
        assert name in variables


def test_alarms_notify_the_encrypted_topic(sample: Sample) -> None:
    (topic_id,) = resources_of(sample.json, "AWS::SNS::Topic")
    for alarm in resources_of(sample.json, "AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}]
    sample.template.has_resource_properties(
        "AWS::SNS::Topic", {"KmsMasterKeyId": assertions.Match.any_value()}
    )


def test_keys_rotate(sample: Sample) -> None:
    for key in resources_of(sample.json, "AWS::KMS::Key").values():
        assert key["Properties"]["EnableKeyRotation"] is True


# --- issue 6 options the sample turns on ----------------------------------------------------


def test_expiry_sweeper_runs_every_five_minutes_on_the_cleanup_asset(sample: Sample) -> None:
    sweeper = sample.stack.sessions.expiry_sweeper
    assert sweeper is not None
    (fn,) = (
        resource["Properties"]
        for resource in resources_of(sample.json, "AWS::Lambda::Function").values()
        if resource["Properties"]["Handler"] == contract.SWEEPER_HANDLER
    )
    variables = fn["Environment"]["Variables"]
    assert variables[contract.ENV_TABLE_NAME] == {"Ref": sample.id(sample.stack.sessions.table)}
    sample.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": "rate(5 minutes)",
            "Targets": [  # one per worker, the default 4, each over its own shard
                assertions.Match.object_like(
                    {"Arn": {"Fn::GetAtt": [sample.id(sweeper.function), "Arn"]}}
                )
            ]
            * 4,
        },
    )


def test_route_handlers_write_the_sweep_shard(sample: Sample) -> None:
    for resource in resources_of(sample.json, "AWS::Lambda::Function").values():
        props = resource["Properties"]
        if props["Handler"] in {"connect.handler", "message.handler", "disconnect.handler"}:
            variables = props["Environment"]["Variables"]
            assert variables[contract.ENV_SWEEP_SHARD_ATTRIBUTE] == "expiryShard"
            assert variables[contract.ENV_SWEEP_SHARDS] == "4"


def test_ttl_health_alarm_watches_one_day_and_notifies_the_topic(sample: Sample) -> None:
    alarm = sample.stack.sessions.ttl_health_alarm
    assert alarm is not None
    props = sample.json["Resources"][sample.id(alarm)]["Properties"]
    periods = {query["MetricStat"]["Period"] for query in props["Metrics"] if "MetricStat" in query}
    assert periods == {86_400}
    (topic_id,) = resources_of(sample.json, "AWS::SNS::Topic")
    assert props["AlarmActions"] == [{"Ref": topic_id}]


def test_archive_bucket_is_encrypted_private_logged_and_expires_after_a_year(
    sample: Sample,
) -> None:
    (archive_id,) = (
        lid for lid in resources_of(sample.json, "AWS::S3::Bucket") if lid.startswith("Archive")
    )
    props = sample.json["Resources"][archive_id]["Properties"]
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
    ]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["LoggingConfiguration"]["LogFilePrefix"] == "archive/"
    # The archive's rule, and the queryable archive's Athena results rule (30 days).
    rule, results = props["LifecycleConfiguration"]["Rules"]
    assert rule["Prefix"] == "archive/" or rule.get("Filter", {}).get("Prefix") == "archive/"
    assert rule["ExpirationInDays"] == 365
    assert (results["Prefix"], results["ExpirationInDays"]) == ("archive-query-results/", 30)
    (cleanup,) = (
        resource["Properties"]
        for resource in resources_of(sample.json, "AWS::Lambda::Function").values()
        if resource["Properties"]["Handler"] == contract.CLEANUP_HANDLER
    )
    variables = cleanup["Environment"]["Variables"]
    assert variables[contract.ENV_ARCHIVE_BUCKET] == {"Ref": archive_id}
    assert variables[contract.ENV_ARCHIVE_PREFIX] == "archive/"
    # SSL only: the bucket policy denies every request without TLS.
    policies = [
        p["Properties"]
        for p in resources_of(sample.json, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": archive_id}
    ]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for p in policies
        for s in p["PolicyDocument"]["Statement"]
    )


def test_cleaned_sessions_fan_out_to_the_event_bus(sample: Sample) -> None:
    (bus_id,) = resources_of(sample.json, "AWS::Events::EventBus")
    (cleanup,) = (
        resource["Properties"]
        for resource in resources_of(sample.json, "AWS::Lambda::Function").values()
        if resource["Properties"]["Handler"] == contract.CLEANUP_HANDLER
    )
    assert cleanup["Environment"]["Variables"][contract.ENV_EVENT_BUS_ARN] == {
        "Fn::GetAtt": [bus_id, "Arn"]
    }


def test_on_failure_destination_stays_the_sqs_queue(sample: Sample) -> None:
    assert sample.stack.sessions.failure_queue is not None
    (mapping,) = resources_of(sample.json, "AWS::Lambda::EventSourceMapping").values()
    destination = mapping["Properties"]["DestinationConfig"]["OnFailure"]["Destination"]
    assert destination == {"Fn::GetAtt": [sample.id(sample.stack.sessions.failure_queue), "Arn"]}


def test_cleanup_is_enabled_and_not_a_dry_run_by_default(sample: Sample) -> None:
    (mapping,) = resources_of(sample.json, "AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["Enabled"] is True
    for resource in resources_of(sample.json, "AWS::Lambda::Function").values():
        variables = resource["Properties"].get("Environment", {}).get("Variables", {})
        assert contract.ENV_DRY_RUN not in variables


@pytest.mark.parametrize(
    ("enabled", "dry_run", "expect_enabled", "expect_dry_run"),
    [("false", "true", False, True), (False, True, False, True), ("true", "false", True, False)],
)
def test_kill_switch_and_dry_run_come_from_context(
    tmp_path: Path, enabled: Any, dry_run: Any, expect_enabled: bool, expect_dry_run: bool
) -> None:
    app = build_app(
        {
            **cdk_json_context(),
            **CONTEXT,
            "sample:cleanupEnabled": enabled,
            "sample:cleanupDryRun": dry_run,
        },
        outdir=str(tmp_path),
    )
    (stack,) = (c for c in app.node.children if isinstance(c, Stack))
    template = assertions.Template.from_stack(stack).to_json()
    (mapping,) = resources_of(template, "AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["Enabled"] is expect_enabled
    dry = {
        resource["Properties"]["Handler"]: resource["Properties"]["Environment"]["Variables"].get(
            contract.ENV_DRY_RUN
        )
        for resource in resources_of(template, "AWS::Lambda::Function").values()
        if resource["Properties"]["Handler"] in {contract.CLEANUP_HANDLER, contract.SWEEPER_HANDLER}
    }
    assert dry == {
        contract.CLEANUP_HANDLER: "true" if expect_dry_run else None,
        contract.SWEEPER_HANDLER: "true" if expect_dry_run else None,
    }


def test_fails_on_a_context_flag_that_is_not_a_boolean(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"sample:cleanupEnabled='off': expected true or false"):
        build_app(
            {**cdk_json_context(), **CONTEXT, "sample:cleanupEnabled": "off"},
            outdir=str(tmp_path),
        )
