"""Archive bucket, EventBridge fan-out and the S3 on-failure destination (issue 6), on and off.

One module-scoped stack holds the constructs (synthesized once):
- ``Default``: none of the three options;
- ``Full``: archive on a KMS-encrypted bucket of this app with transition and expiration,
  an event bus, an S3 on-failure destination;
- ``Plain``: archive on an unencrypted bucket, no lifecycle props;
- ``Imported``: archive on an imported bucket with an expiration (synth warning).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Acknowledgment, App, Duration, Environment, Stack, Validations, assertions
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Match
from cdk_nag import AwsSolutionsChecks

from cdk_session_expiry import SessionExpiry
from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.fanout import session_cleaned_event_pattern

from .helpers import StackTemplate

ENV = Environment(account="123456789012", region="eu-west-1")


class Synth(StackTemplate):
    def __init__(self, outdir: Path, cdk_context: dict[str, Any]) -> None:
        app = App(context=cdk_context, outdir=str(outdir))
        self.stack = stack = Stack(app, "Archive", env=ENV)
        self.archive_key = kms.Key(stack, "ArchiveKey", enable_key_rotation=True)
        self.archive_bucket = s3.Bucket(
            stack,
            "ArchiveBucket",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.archive_key,
            enforce_ssl=True,
            versioned=True,
        )
        self.failures = s3.Bucket(stack, "FailureBucket", enforce_ssl=True)
        self.plain_bucket = s3.Bucket(stack, "PlainArchive", enforce_ssl=True)
        self.bus = events.EventBus(stack, "Bus")
        self.default = SessionExpiry(stack, "Default")
        self.full = SessionExpiry(
            stack,
            "Full",
            archive_bucket=self.archive_bucket,
            archive_prefix="sessions-archive/",
            archive_transition_after=Duration.days(90),
            archive_transition_storage_class=s3.StorageClass.GLACIER,
            archive_expiration=Duration.days(365),
            event_bus=self.bus,
            failure_destination_bucket=self.failures,
        )
        self.plain = SessionExpiry(stack, "Plain", archive_bucket=self.plain_bucket)
        imported = s3.Bucket.from_bucket_name(stack, "ImportedArchive", "legacy-archive")
        self.imported = SessionExpiry(
            stack, "Imported", archive_bucket=imported, archive_expiration=Duration.days(30)
        )
        self.template = assertions.Template.from_stack(stack)
        self.json: dict[str, Any] = self.template.to_json()

    def variables(self, sessions: SessionExpiry) -> dict[str, Any]:
        props = self.json["Resources"][self.id(sessions.cleanup_function)]["Properties"]
        return dict(props["Environment"]["Variables"])

    def statements(self, sessions: SessionExpiry) -> list[dict[str, Any]]:
        policy = sessions.cleanup_role.node.find_child("DefaultPolicy").node.default_child
        props = self.json["Resources"][self.stack.get_logical_id(policy)]["Properties"]
        return list(props["PolicyDocument"]["Statement"])


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any]) -> Synth:
    return Synth(tmp_path_factory.mktemp("archive"), cdk_context)


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


# --- off by default ---------------------------------------------------------------------------
def test_default_has_no_archive_events_or_s3_destination(synth: Synth) -> None:
    variables = synth.variables(synth.default)
    for name in (
        contract.ENV_ARCHIVE_BUCKET,
        contract.ENV_ARCHIVE_PREFIX,
        contract.ENV_ARCHIVE_KMS_KEY_ARN,
        contract.ENV_EVENT_BUS_ARN,
    ):
        assert name not in variables
    actions = {a for s in synth.statements(synth.default) for a in _actions(s)}
    assert not actions & {"s3:PutObject", "events:PutEvents", "kms:GenerateDataKey"}
    mapping = synth.default.event_source_mapping.node.default_child
    props = synth.json["Resources"][synth.stack.get_logical_id(mapping)]["Properties"]
    queue = synth.default.failure_queue
    assert queue is not None
    assert props["DestinationConfig"] == {
        "OnFailure": {"Destination": {"Fn::GetAtt": [synth.id(queue), "Arn"]}}
    }
    assert synth.default.archive_prefix == "archive/"


# --- archive ----------------------------------------------------------------------------------
def test_archive_environment_names_bucket_prefix_and_key(synth: Synth) -> None:
    variables = synth.variables(synth.full)
    assert variables[contract.ENV_ARCHIVE_BUCKET] == {"Ref": synth.id(synth.archive_bucket)}
    assert variables[contract.ENV_ARCHIVE_PREFIX] == "sessions-archive/"
    assert variables[contract.ENV_ARCHIVE_KMS_KEY_ARN] == {
        "Fn::GetAtt": [synth.id(synth.archive_key), "Arn"]
    }
    plain = synth.variables(synth.plain)
    assert plain[contract.ENV_ARCHIVE_PREFIX] == "archive/"
    assert contract.ENV_ARCHIVE_KMS_KEY_ARN not in plain


def _grants(statements: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """``{action: [resource, ...]}`` over every statement (CDK merges statements)."""
    grants: dict[str, list[Any]] = {}
    for statement in statements:
        resources = statement["Resource"]
        resources = resources if isinstance(resources, list) else [resources]
        for action in _actions(statement):
            grants.setdefault(action, []).extend(resources)
    return grants


def _objects(bucket_id: str, pattern: str) -> dict[str, Any]:
    return {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, pattern]]}


def test_archive_may_only_put_objects_under_its_prefix(synth: Synth) -> None:
    grants = _grants(synth.statements(synth.full))
    archive_objects = _objects(synth.id(synth.archive_bucket), "/sessions-archive/*")
    failure_objects = _objects(synth.id(synth.failures), "/*")
    assert sorted(map(str, grants["s3:PutObject"])) == sorted(
        map(str, [archive_objects, failure_objects])
    )
    key_arn = {"Fn::GetAtt": [synth.id(synth.archive_key), "Arn"]}
    assert grants["kms:GenerateDataKey"] == [key_arn]
    assert grants["kms:Encrypt"] == [key_arn]
    # Nothing else on the archive bucket: no reads, no deletes, no listing.
    archive_id = synth.id(synth.archive_bucket)
    on_archive = {a for a, resources in grants.items() if archive_id in str(resources)}
    assert on_archive == {"s3:PutObject"}
    plain = _grants(synth.statements(synth.plain))
    assert plain["s3:PutObject"] == [_objects(synth.id(synth.plain_bucket), "/archive/*")]
    assert "kms:GenerateDataKey" not in plain


def test_archive_lifecycle_rule_on_a_bucket_of_this_app(synth: Synth) -> None:
    synth.template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "LifecycleConfiguration": {
                "Rules": [
                    {
                        "Id": f"session-expiry-archive-{synth.full.node.addr}",
                        "Status": "Enabled",
                        "Prefix": "sessions-archive/",
                        "Transitions": [{"StorageClass": "GLACIER", "TransitionInDays": 90}],
                        "ExpirationInDays": 365,
                        "NoncurrentVersionExpiration": {"NoncurrentDays": 365},
                        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
                    }
                ]
            },
            "VersioningConfiguration": {"Status": "Enabled"},
        },
    )


def test_archive_without_lifecycle_props_adds_no_rule(synth: Synth) -> None:
    props = synth.json["Resources"][synth.id(synth.plain_bucket)].get("Properties", {})
    assert "LifecycleConfiguration" not in props


def test_imported_archive_bucket_gets_a_warning_instead_of_a_rule(synth: Synth) -> None:
    warnings = assertions.Annotations.from_stack(synth.stack).find_warning(
        f"/{synth.stack.stack_name}/Imported", Match.string_like_regexp("legacy|ImportedArchive")
    )
    assert len(warnings) == 1
    assert "archiveBucketLifecycle" in str(warnings[0].entry.data)


# --- fan-out ----------------------------------------------------------------------------------
def test_event_bus_environment_and_put_events_on_that_bus_only(synth: Synth) -> None:
    bus_arn = {"Fn::GetAtt": [synth.id(synth.bus), "Arn"]}
    assert synth.variables(synth.full)[contract.ENV_EVENT_BUS_ARN] == bus_arn
    (statement,) = [s for s in synth.statements(synth.full) if "events:PutEvents" in _actions(s)]
    assert _actions(statement) == ["events:PutEvents"]
    assert statement["Resource"] == bus_arn


def test_event_pattern_matches_the_runtimes_events() -> None:
    pattern = session_cleaned_event_pattern()
    assert pattern.source == ["cdk-session-expiry"]
    assert pattern.detail_type == ["Session Cleaned"]


# --- S3 on-failure destination ----------------------------------------------------------------
def test_s3_on_failure_destination_replaces_the_queue(synth: Synth) -> None:
    assert synth.full.failure_queue is None
    assert synth.full.node.try_find_child("FailureQueue") is None
    mapping = synth.full.event_source_mapping.node.default_child
    props = synth.json["Resources"][synth.stack.get_logical_id(mapping)]["Properties"]
    assert props["DestinationConfig"] == {
        "OnFailure": {"Destination": {"Fn::GetAtt": [synth.id(synth.failures), "Arn"]}}
    }
    grants = _grants(synth.statements(synth.full))
    bucket_arn = {"Fn::GetAtt": [synth.id(synth.failures), "Arn"]}
    assert grants["s3:ListBucket"] == [bucket_arn]
    assert _objects(synth.id(synth.failures), "/*") in grants["s3:PutObject"]
    # Not aws-cdk-lib's S3OnFailureDestination grant: no reads or deletes of the bucket.
    assert not [a for a in grants if a.startswith(("s3:GetObject", "s3:DeleteObject", "s3:List*"))]


def test_s3_on_failure_destination_has_a_delivery_alarm(synth: Synth) -> None:
    mapping = synth.full.event_source_mapping.node.default_child
    synth.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "AWS/Lambda",
            "MetricName": "OnFailureDestinationDeliveredEventCount",
            "Dimensions": [
                {
                    "Name": "EventSourceMappingUUID",
                    "Value": {"Ref": synth.stack.get_logical_id(mapping)},
                }
            ],
            "Statistic": "Sum",
            "Period": 300,
            "Threshold": 1,
            "EvaluationPeriods": 1,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "TreatMissingData": "notBreaching",
        },
    )
    assert synth.full.failure_queue_alarm in synth.full.alarms


# --- cdk-nag ----------------------------------------------------------------------------------
def test_cdk_nag_finds_only_the_documented_wildcards(synth: Synth) -> None:
    findings = {
        (v.rule_name, r.construct_path)
        for v in AwsSolutionsChecks().validate_scope(synth.full).violations
        for r in v.violating_resources
    }
    # What the options add to the construct: object wildcards under the archive prefix and in
    # the failure bucket (keys are not known in advance), as the scratch root has.
    wildcard = {f for f in findings if f[0].startswith("AwsSolutions-IAM5[")}
    assert {f for f in findings if f not in wildcard} <= {
        # The construct's own findings, the same with every option off (acknowledged by the
        # sample app): none of them comes from the options.
        f
        for f in {
            (v.rule_name, r.construct_path.replace("/Default/", "/Full/"))
            for v in AwsSolutionsChecks().validate_scope(synth.default).violations
            for r in v.violating_resources
        }
    }
    # The construct acknowledges both wildcards itself (cdk_session_expiry.nag), so nag no
    # longer reports them; each is in its list with a reason.
    archive_arn = f"<{synth.id(synth.archive_bucket)}.Arn>/sessions-archive/*"
    failures_arn = f"<{synth.id(synth.failures)}.Arn>/*"
    acknowledged = {a.finding_id: a.reason for a in synth.full.nag_acknowledgements}
    for arn in (archive_arn, failures_arn):
        finding = f"AwsSolutions-IAM5[Resource::{arn}]"
        assert finding not in {rule for rule, _ in wildcard}
        assert acknowledged[finding]


def test_cdk_nag_clean_once_the_wildcards_are_acknowledged(
    tmp_path: Path, cdk_context: dict[str, Any]
) -> None:
    app = App(context=cdk_context, outdir=str(tmp_path))
    stack = Stack(app, "Nag", env=ENV)
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    logs = s3.Bucket(stack, "Logs", enforce_ssl=True, encryption=s3.BucketEncryption.S3_MANAGED)
    bucket = s3.Bucket(
        stack,
        "Archive",
        encryption=s3.BucketEncryption.KMS,
        encryption_key=key,
        enforce_ssl=True,
        server_access_logs_bucket=logs,
    )
    sessions = SessionExpiry(
        stack,
        "Sessions",
        archive_bucket=bucket,
        archive_expiration=Duration.days(30),
        event_bus=events.EventBus(stack, "Bus"),
        failure_queue=sqs.Queue(
            stack, "Dlq", enforce_ssl=True, encryption=sqs.QueueEncryption.SQS_MANAGED
        ),
    )
    policy = sessions.cleanup_role.node.find_child("DefaultPolicy")
    Validations.of(policy).acknowledge(
        Acknowledgment(
            id=f"AwsSolutions-IAM5[Resource::<{stack.get_logical_id(bucket.node.default_child)}"  # type: ignore[arg-type]
            ".Arn>/archive/*]",
            reason="The cleanup writes archived sessions under the archive prefix only.",
        )
    )
    findings = [
        (v.rule_name, r.construct_path)
        for v in AwsSolutionsChecks().validate_scope(sessions).violations
        for r in v.violating_resources
    ]
    option_findings = [f for f in findings if "archive" in f[0].lower() or "Bus" in f[1]]
    assert option_findings == []


# --- rejected props ---------------------------------------------------------------------------
def _build(cdk_context: dict[str, Any], **props: Any) -> SessionExpiry:
    stack = Stack(App(context=cdk_context), "Rejected", env=ENV)
    resolved = {
        k: (v(stack) if callable(v) and not isinstance(v, type) else v) for k, v in props.items()
    }
    return SessionExpiry(stack, "Sessions", **resolved)


def _bucket(stack: Stack) -> s3.Bucket:
    return s3.Bucket(stack, "B")


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"archive_prefix": "a/"}, "archive_prefix='a/' is set without archive_bucket"),
        (
            {"archive_expiration": Duration.days(3)},
            "archive_expiration=3 days is set without archive_bucket",
        ),
        (
            {"archive_transition_after": Duration.days(30)},
            "archive_transition_after=30 days is set without archive_bucket",
        ),
        (
            {"archive_transition_storage_class": s3.StorageClass.GLACIER},
            "archive_transition_storage_class=.* is set without archive_bucket",
        ),
        (
            {"archive_bucket": _bucket, "archive_prefix": "archive"},
            "archive_prefix='archive': expected a prefix ending in '/'",
        ),
        (
            {"archive_bucket": _bucket, "archive_prefix": "arch*/"},
            r"archive_prefix='arch\*/'",
        ),
        (
            {"archive_bucket": _bucket, "archive_prefix": "/archive/"},
            "archive_prefix='/archive/'.*without a leading '/'",
        ),
        (
            {
                "archive_bucket": _bucket,
                "archive_transition_storage_class": s3.StorageClass.GLACIER,
            },
            "archive_transition_storage_class='GLACIER' is set without archive_transition_after",
        ),
        (
            {
                "archive_bucket": _bucket,
                "archive_transition_after": Duration.days(10),
                "archive_transition_storage_class": s3.StorageClass.INFREQUENT_ACCESS,
            },
            "archive_transition_after=10 days: expected between 30 days",
        ),
        (
            {"archive_bucket": _bucket, "archive_transition_after": Duration.hours(36)},
            "archive_transition_after=.*whole number of days",
        ),
        (
            {"archive_bucket": _bucket, "archive_expiration": Duration.hours(12)},
            "archive_expiration=12 hours: expected a whole number of days",
        ),
        (
            {
                "archive_bucket": _bucket,
                "archive_transition_after": Duration.days(90),
                "archive_expiration": Duration.days(90),
            },
            "archive_expiration=90 days: expected later than archive_transition_after=90 days",
        ),
    ],
)
def test_fails_on_invalid_archive_props(
    cdk_context: dict[str, Any], props: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        _build(cdk_context, **props)


def test_fails_when_the_archive_prefix_overlaps_the_scratch_root(
    cdk_context: dict[str, Any],
) -> None:
    stack = Stack(App(context=cdk_context), "Overlap", env=ENV)
    bucket = s3.Bucket(stack, "Shared")
    with pytest.raises(
        ValueError, match="archive_prefix='sessions/archive/' overlaps scratch_root='sessions/'"
    ):
        SessionExpiry(
            stack,
            "Sessions",
            scratch_bucket=bucket,
            archive_bucket=bucket,
            archive_prefix="sessions/archive/",
        )
    # Disjoint prefixes in one bucket are fine.
    SessionExpiry(stack, "Disjoint", scratch_bucket=bucket, archive_bucket=bucket)


def test_fails_with_both_a_failure_queue_and_a_failure_bucket(
    cdk_context: dict[str, Any],
) -> None:
    stack = Stack(App(context=cdk_context), "Both", env=ENV)
    queue = sqs.Queue(stack, "Q")
    bucket = s3.Bucket(stack, "F")
    with pytest.raises(
        ValueError,
        match="failure_queue='Both/Q' and failure_destination_bucket='Both/F' are both set",
    ):
        SessionExpiry(stack, "Sessions", failure_queue=queue, failure_destination_bucket=bucket)


def test_metrics_of_the_archive_and_the_fan_out(synth: Synth) -> None:
    archived = synth.full.metric_sessions_archived()
    published = synth.full.metric_session_events_published()
    assert (archived.namespace, archived.metric_name, archived.statistic) == (
        "SessionExpiry",
        "SessionsArchived",
        "Sum",
    )
    assert (published.metric_name, published.statistic) == ("SessionEventsPublished", "Sum")
