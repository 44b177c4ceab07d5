"""cdk-nag on the construct alone: the README's minimal example and stacks with every optional
feature are clean under ``AwsSolutionsChecks``, and each acknowledgement the construct makes
still matches a real finding when it is left out."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Acknowledgment, App, Duration, Environment, Stack, Validations
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

from cdk_session_expiry import (
    CLEANUP_RUNTIME,
    ArchiveDelivery,
    ChangeSource,
    CircuitBreakerAlarm,
    SessionExpiry,
    nag,
)

from .helpers import REPO

ENV = Environment(account="123456789012", region="eu-west-1")


def _ack(construct: IConstruct, finding_id: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=finding_id, reason=reason))


def _clean_bucket(stack: Stack, construct_id: str, logs: s3.IBucket) -> s3.Bucket:
    return s3.Bucket(
        stack,
        construct_id,
        enforce_ssl=True,
        server_access_logs_bucket=logs,
        server_access_logs_prefix=f"{construct_id}/",
    )


def _function(stack: Stack, construct_id: str) -> lambda_.Function:
    """An application function nag finds nothing on by itself (own role, newest runtime)."""
    role = iam.Role(
        stack, f"{construct_id}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com")
    )
    return lambda_.Function(
        stack,
        construct_id,
        runtime=CLEANUP_RUNTIME,
        handler="app.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
        role=role,
    )


def _fixtures(stack: Stack) -> dict[str, Any]:
    """The test stack's own resources, nag-clean or acknowledged by the test itself."""
    logs = s3.Bucket(stack, "AccessLogs", enforce_ssl=True)
    _ack(logs, "AwsSolutions-S1", "the access log bucket of the test stack's buckets")
    api = apigwv2.WebSocketApi(stack, "Api")
    for route in api.node.children:
        _ack(route, "AwsSolutions-APIG4", "test stack: no routes")
    stage = apigwv2.WebSocketStage(stack, "Stage", web_socket_api=api, stage_name="live")
    _ack(stage, "AwsSolutions-APIG1", "test stack: access logging is the application's")
    return {"logs": logs, "stage": stage}


def minimal(stack: Stack) -> SessionExpiry:
    return SessionExpiry(stack, "Sessions")


def everything(stack: Stack) -> SessionExpiry:
    """Every optional feature that can be on together, each target a resource of this app."""
    own = _fixtures(stack)
    sessions = SessionExpiry(
        stack,
        "Sessions",
        websocket_stage=own["stage"],
        grant_key=kms.Key(stack, "GrantKey", enable_key_rotation=True),
        scratch_bucket=_clean_bucket(stack, "Scratch", own["logs"]),
        tenant_scoped_scratch=True,
        table_encryption_key=kms.Key(stack, "TableKey", enable_key_rotation=True),
        expiry_sweep_interval=Duration.minutes(5),
        alarm_ttl_health_window=Duration.days(1),
        cleanup_dry_run=True,
        archive_bucket=_clean_bucket(stack, "Archive", own["logs"]),
        archive_transition_after=Duration.days(30),
        archive_expiration=Duration.days(365),
        # Issue 24: the queryable archive, Firehose delivery, AgentCore Memory data.
        archive_query=True,
        archive_delivery=ArchiveDelivery.FIREHOSE,
        agent_memory="support_memory-a1B2c3D4e5",
        agent_memory_record_namespaces=["/summaries/{actorId}/{sessionId}/"],
        event_bus=events.EventBus(stack, "Bus"),
        function_encryption_key=kms.Key(stack, "FunctionKey", enable_key_rotation=True),
        cleanup_reserved_concurrency=10,
        expiry_sweep_reserved_concurrency=4,
        # AgentCore targets: the cleanup role and the application role may stop their sessions.
        agent_runtime="arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/agent-a1B2c3D4e5",
        code_interpreter="team_ci-Z9y8X7w6V5",
        browser="web-Q1w2E3r4T5",
        # Issue 36: the Bedrock sessions recorded by ended sessions (session/* of the account).
        resource_targets={"bedrock_sessions": "*"},
        change_source=ChangeSource.kinesis(),
        circuit_breaker=True,
        circuit_breaker_alarms=[
            CircuitBreakerAlarm.ERRORS,
            CircuitBreakerAlarm.FAILURE_DESTINATION,
            CircuitBreakerAlarm.SKIPPED_RECORDS,
            CircuitBreakerAlarm.ITERATOR_AGE,
        ],
        # Expiry by tenant: the Tenant dimension and the Contributor Insights rules.
        metrics_tenant_dimension=True,
        tenant_insights=True,
        # Issue 26 part 1: feature-flag kill switches in AWS AppConfig.
        feature_flags=True,
    )
    sessions.grant_session_access(_function(stack, "Connect"))
    return sessions


def failure_bucket_and_own_table(stack: Stack) -> SessionExpiry:
    """The other side of each either/or: an S3 on-failure destination, a table of the app."""
    own = _fixtures(stack)
    table = dynamodb.Table(
        stack,
        "AppTable",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        time_to_live_attribute="expiresAt",
        stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
        encryption_key=kms.Key(stack, "AppTableKey", enable_key_rotation=True),
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
    )
    table.add_global_secondary_index(
        index_name="expirySweep",
        partition_key=dynamodb.Attribute(name="expiryShard", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="expiresAt", type=dynamodb.AttributeType.NUMBER),
        projection_type=dynamodb.ProjectionType.KEYS_ONLY,
    )
    sessions = SessionExpiry(
        stack,
        "Sessions",
        table=table,
        scratch_bucket=_clean_bucket(stack, "Scratch", own["logs"]),
        scratch_root="tenants/scratch/",
        expiry_sweep_interval=Duration.minutes(1),
        failure_destination_bucket=_clean_bucket(stack, "Failures", own["logs"]),
        # not TTL_DELETES_ONLY: rejected with the sweeper and the session store (test_guards)
        circuit_breaker=True,  # the S3 destination's alarm opens it
    )
    sessions.grant_session_access(_function(stack, "Connect"))
    sessions.grant_session_access(_function(stack, "Message"))
    return sessions


def imported_targets(stack: Stack) -> SessionExpiry:
    """Targets imported by name or ARN: the finding ids then hold literal names."""
    api = apigwv2.WebSocketApi.from_web_socket_api_attributes(stack, "Api", web_socket_id="abc123")
    dlq = sqs.Queue(stack, "AppDlq", enforce_ssl=True)
    _ack(dlq, "AwsSolutions-SQS3", "test stack: this is the DLQ")
    queue = sqs.Queue(
        stack,
        "AppFailureQueue",
        enforce_ssl=True,
        dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=3),
    )
    return SessionExpiry(
        stack,
        "Sessions",
        websocket_stage=apigwv2.WebSocketStage.from_web_socket_stage_attributes(
            stack, "Stage", stage_name="prod", api=api
        ),
        grant_key=kms.Key.from_key_arn(
            stack, "GrantKey", "arn:aws:kms:eu-west-1:123456789012:key/0a1b2c3d"
        ),
        scratch_bucket=s3.Bucket.from_bucket_name(stack, "Scratch", "app-scratch"),
        archive_bucket=s3.Bucket.from_bucket_name(stack, "Archive", "app-archive"),
        archive_prefix="sessions-archive/",
        failure_queue=queue,
    )


def imported_failure_bucket(stack: Stack) -> SessionExpiry:
    return SessionExpiry(
        stack,
        "Sessions",
        failure_destination_bucket=s3.Bucket.from_bucket_name(stack, "Failures", "app-failures"),
    )


BUILDERS: dict[str, Callable[[Stack], SessionExpiry]] = {
    "minimal": minimal,
    "everything": everything,
    "failure_bucket_and_own_table": failure_bucket_and_own_table,
    "imported_targets": imported_targets,
    "imported_failure_bucket": imported_failure_bucket,
}


def _findings(stack: Stack) -> set[tuple[str, str]]:
    report = AwsSolutionsChecks().validate_scope(stack)
    return {
        (r.construct_path, v.rule_name) for v in report.violations for r in v.violating_resources
    }


def _build(builder: Callable[[Stack], SessionExpiry], cdk_context: dict[str, Any]) -> Stack:
    app = App(context=cdk_context)
    stack = Stack(app, "Test", env=ENV)
    builder(stack)
    return stack


class _NoAcknowledgements:
    """Stands in for ``Validations`` inside ``cdk_session_expiry.nag``: records, applies none."""

    @staticmethod
    def of(_construct: IConstruct) -> _NoAcknowledgements:
        return _NoAcknowledgements()

    def acknowledge(self, *_acknowledgements: Acknowledgment) -> None:
        return None


@pytest.fixture
def without_acknowledgements(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(nag, "Validations", _NoAcknowledgements)
    yield


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_no_unacknowledged_findings(name: str, cdk_context: dict[str, Any]) -> None:
    stack = _build(BUILDERS[name], cdk_context)
    assert sorted(_findings(stack)) == []


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_each_acknowledgement_matches_a_real_finding(
    name: str, cdk_context: dict[str, Any], without_acknowledgements: None
) -> None:
    stack = _build(BUILDERS[name], cdk_context)
    (sessions,) = (c for c in stack.node.find_all() if isinstance(c, SessionExpiry))
    acknowledged = {(a.path, a.finding_id) for a in sessions.nag_acknowledgements}
    assert acknowledged, "the construct acknowledges nothing here"
    found = _findings(stack)
    for path, finding_id in acknowledged:
        assert any(
            rule == finding_id and found_path.startswith(path + "/") for found_path, rule in found
        ), f"acknowledgement {finding_id} on {path} matches no finding"
    # Left out, the construct's acknowledgements are exactly what nag finds.
    assert {
        (found_path, rule)
        for found_path, rule in found
        if not any(found_path.startswith(path + "/") and rule == f for path, f in acknowledged)
    } == set()
    assert all(a.reason for a in sessions.nag_acknowledgements)


def test_acknowledgements_follow_the_props(cdk_context: dict[str, Any]) -> None:
    ids = {
        name: sorted(
            (a.path.removeprefix("Test/"), a.finding_id)
            for c in _build(builder, cdk_context).node.find_all()
            if isinstance(c, SessionExpiry)
            for a in c.nag_acknowledgements
        )
        for name, builder in BUILDERS.items()
    }
    assert ids["minimal"] == [
        ("Sessions/CleanupRole/DefaultPolicy", "AwsSolutions-IAM5[Resource::*]"),
        ("Sessions/FailureQueue", "AwsSolutions-SQS3"),
    ]
    assert ids["imported_targets"] == [
        (
            "Sessions/CleanupRole/DefaultPolicy",
            "AwsSolutions-IAM5[Resource::*]",
        ),
        (
            "Sessions/CleanupRole/DefaultPolicy",
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:eu-west-1:123456789012:"
            "abc123/prod/DELETE/@connections/*]",
        ),
        (
            "Sessions/CleanupRole/DefaultPolicy",
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::app-archive/sessions-archive/*]",
        ),
        (
            "Sessions/CleanupRole/DefaultPolicy",
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::app-scratch/sessions/*]",
        ),
    ]
    key_actions = [
        (path, finding)
        for path, finding in ids["failure_bucket_and_own_table"]
        if "Action::" in finding
    ]
    assert key_actions == [
        (role, f"AwsSolutions-IAM5[Action::{action}]")
        for role in (
            "ConnectRole/DefaultPolicy",
            "MessageRole/DefaultPolicy",
            "Sessions/ExpirySweeper/Role/DefaultPolicy",
        )
        for action in ("kms:GenerateDataKey*", "kms:ReEncrypt*")
    ]


def test_a_wildcard_the_application_adds_later_is_still_reported(
    cdk_context: dict[str, Any],
) -> None:
    app = App(context=cdk_context)
    stack = Stack(app, "Test", env=ENV)
    sessions = SessionExpiry(stack, "Sessions")
    sessions.cleanup_function.add_to_role_policy(
        iam.PolicyStatement(actions=["s3:GetObject"], resources=["arn:aws:s3:::other/*"])
    )
    assert _findings(stack) == {
        (
            "Test/Sessions/CleanupRole/DefaultPolicy/Resource",
            "AwsSolutions-IAM5[Resource::arn:aws:s3:::other/*]",
        )
    }


def test_flatten_reference_names_values_as_cdk_nag_does() -> None:
    joined = {
        "Fn::Join": [
            "",
            ["arn:", {"Ref": "AWS::Partition"}, ":s3:::", {"Fn::GetAtt": ["B1", "Arn"]}, "/*"],
        ]
    }
    assert nag.flatten_reference(joined) == "arn:<AWS::Partition>:s3:::<B1.Arn>/*"
    assert nag.flatten_reference({"Fn::Sub": "arn:${AWS::Partition}:x"}) == "arn:<AWS::Partition>:x"
    assert nag.flatten_reference({"Fn::ImportValue": "Export"}) == "Export"
    assert nag.flatten_reference({"Fn::If": ["c", "a", "b"]}) == '{"Fn::If":["c","a","b"]}'


# --- the README's minimal example, with cdk-nag registered as a user would -----------------


def _readme_minimal_example() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Minimal example", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "no python block under '## Minimal example' in README.md"
    return match.group(1)


def _run_with_nag(source: str, outdir: Path) -> None:
    assert "app = App()" in source, "the minimal example no longer creates `app = App()`"
    registered = source.replace(
        "app = App()",
        f"app = App(outdir={str(outdir)!r})\n"
        "from aws_cdk import Validations\n"
        "from cdk_nag import AwsSolutionsChecks\n"
        "Validations.of(app).add_plugins(AwsSolutionsChecks(app))",
        1,
    )
    exec(compile(registered, "README.md (minimal example)", "exec"), {})


def test_readme_minimal_example_synthesizes_with_aws_solutions_checks(tmp_path: Path) -> None:
    _run_with_nag(_readme_minimal_example(), tmp_path)
    assert (tmp_path / "Sessions.template.json").is_file()


def test_readme_minimal_example_fails_synth_without_the_acknowledgements(
    tmp_path: Path, without_acknowledgements: None
) -> None:
    """The plugin really runs in the example above: without the construct's acknowledgements
    the same synth fails on its findings."""
    with pytest.raises(Exception, match="AwsSolutions-SQS3"):
        _run_with_nag(_readme_minimal_example(), tmp_path)
