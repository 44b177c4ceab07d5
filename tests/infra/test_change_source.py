"""The Kinesis change source (issue 23): the stream, the table's destination, the mapping, alarms.

Each default and each override is asserted on the synthesized template; each rejected input has
its ``test_fails_...``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kinesis as kinesis
from aws_cdk.assertions import Annotations, Match, Template

from cdk_session_expiry import ChangeSource, PropTypeError, SessionExpiry
from cdk_session_expiry.switches.kill_switch import WARNING_CLEANUP_PAUSED

ENV = Environment(account="111111111111", region="us-east-1")


def synth(**props: Any) -> tuple[Stack, SessionExpiry, Template]:
    stack = Stack(App(), "Kinesis", env=ENV)
    construct = SessionExpiry(stack, "Sessions", **props)
    return stack, construct, Template.from_stack(stack)


def only(template: Template, resource_type: str) -> dict[str, Any]:
    (resource,) = template.find_resources(resource_type).values()
    return dict(resource["Properties"])


@pytest.fixture(scope="module")
def default_kinesis() -> tuple[Stack, SessionExpiry, Template]:
    return synth(change_source=ChangeSource.kinesis())


def test_a_new_on_demand_encrypted_stream_keeps_records_7_days(
    default_kinesis: tuple[Stack, SessionExpiry, Template],
) -> None:
    _, construct, template = default_kinesis
    assert only(template, "AWS::Kinesis::Stream") == {
        "RetentionPeriodHours": 168,
        "StreamEncryption": {"EncryptionType": "KMS", "KeyId": "alias/aws/kinesis"},
        "StreamModeDetails": {"StreamMode": "ON_DEMAND"},
    }
    assert construct.change_source.retention().to_hours() == 168


def test_the_table_streams_into_it_with_millisecond_timestamps(
    default_kinesis: tuple[Stack, SessionExpiry, Template],
) -> None:
    stack, construct, template = default_kinesis
    assert construct.change_stream is not None
    stream_id = stack.get_logical_id(construct.change_stream.node.default_child)  # type: ignore[arg-type]
    assert only(template, "AWS::DynamoDB::Table")["KinesisStreamSpecification"] == {
        "ApproximateCreationDateTimePrecision": "MILLISECOND",
        "StreamArn": {"Fn::GetAtt": [stream_id, "Arn"]},
    }


def test_the_mapping_reads_the_kinesis_stream_with_the_same_guarantees(
    default_kinesis: tuple[Stack, SessionExpiry, Template],
) -> None:
    stack, construct, template = default_kinesis
    props = only(template, "AWS::Lambda::EventSourceMapping")
    stream_id = stack.get_logical_id(construct.change_stream.node.default_child)  # type: ignore[union-attr, arg-type]
    assert props["EventSourceArn"] == {"Fn::GetAtt": [stream_id, "Arn"]}
    (pattern,) = (f["Pattern"] for f in props["FilterCriteria"]["Filters"])
    table_id = stack.get_logical_id(construct.table.node.default_child)  # type: ignore[arg-type]
    separator, parts = pattern["Fn::Join"]  # the table's name is a token: {"Ref": table}
    assert [p for p in parts if not isinstance(p, str)] == [{"Ref": table_id}]
    text = separator.join(p if isinstance(p, str) else "TABLE" for p in parts)
    # Under data (Lambda filters Kinesis records there); only this table's changes.
    assert json.loads(text) == {"data": {"eventName": ["REMOVE"], "tableName": ["TABLE"]}}
    assert props["BisectBatchOnFunctionError"] is True
    assert props["MaximumRetryAttempts"] == 10
    assert props["MaximumRecordAgeInSeconds"] == 6 * 3600
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["StartingPosition"] == "TRIM_HORIZON"
    assert "OnFailure" in props["DestinationConfig"]
    # No second mapping on the DynamoDB stream: each change is cleaned from one source.
    assert len(template.find_resources("AWS::Lambda::EventSourceMapping")) == 1


def test_the_cleanup_may_read_the_stream(
    default_kinesis: tuple[Stack, SessionExpiry, Template],
) -> None:
    _, _, template = default_kinesis
    statements = [
        s
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    actions = {
        a
        for s in statements
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert {"kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:DescribeStream"} <= actions
    assert "dynamodb:GetRecords" not in actions


def _statements_naming(template: Template, action: str) -> list[dict[str, Any]]:
    return [
        s
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    ]


def test_the_cleanup_may_read_back_the_session_table_with_batch_get_item_only(
    default_kinesis: tuple[Stack, SessionExpiry, Template],
) -> None:
    """session_expiry_runtime.records.kinesis_removals: a REMOVE that came through Kinesis is read
    back
    before it is cleaned (anyone with kinesis:PutRecord could have written it)."""
    stack, construct, template = default_kinesis
    table_id = stack.get_logical_id(construct.table.node.default_child)  # type: ignore[arg-type]
    (statement,) = _statements_naming(template, "dynamodb:BatchGetItem")
    assert statement["Action"] == "dynamodb:BatchGetItem"
    assert {"Fn::GetAtt": [table_id, "Arn"]} in (
        statement["Resource"]
        if isinstance(statement["Resource"], list)
        else [statement["Resource"]]
    )
    assert _statements_naming(template, "dynamodb:GetItem") == []  # nothing else of the table
    cleanup_env = [
        f["Properties"]["Environment"]["Variables"]
        for f in template.find_resources("AWS::Lambda::Function").values()
        if "SESSION_EXPIRY_TABLE_NAME"
        in f["Properties"].get("Environment", {}).get("Variables", {})
    ]
    assert cleanup_env  # the read-back names the table


def test_the_dynamodb_stream_source_reads_nothing_back() -> None:
    _, _, template = synth()
    assert _statements_naming(template, "dynamodb:BatchGetItem") == []


def test_alarms_on_the_streams_and_the_mappings_iterator_age(
    default_kinesis: tuple[Stack, SessionExpiry, Template],
) -> None:
    _, construct, template = default_kinesis
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "AWS/Kinesis",
            "MetricName": "GetRecords.IteratorAgeMilliseconds",
            "Statistic": "Maximum",
            "Threshold": 3_600_000,
        },
    )
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "AWS/Lambda",
            "MetricName": "IteratorAge",
            "AlarmDescription": Match.string_like_regexp("records older than 7 days leave"),
        },
    )
    assert construct.change_stream_iterator_age_alarm in construct.alarms


def test_retention_bounds_the_record_age_and_the_paused_alarm() -> None:
    _, _, template = synth(
        change_source=ChangeSource.kinesis(retention=Duration.days(30)),
        max_record_age=Duration.days(7),
        alarm_cleanup_paused_after=Duration.days(3),
    )
    assert only(template, "AWS::Kinesis::Stream")["RetentionPeriodHours"] == 720
    assert only(template, "AWS::Lambda::EventSourceMapping")["MaximumRecordAgeInSeconds"] == 604_800
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"MetricName": "CleanupPausedSeconds", "Threshold": 3 * 86_400},
    )


def test_a_given_stream_and_table_are_used_as_they_are() -> None:
    stack = Stack(App(), "Given", env=ENV)
    stream = kinesis.Stream(
        stack,
        "Changes",
        retention_period=Duration.days(14),
        encryption=kinesis.StreamEncryption.MANAGED,
    )
    table = dynamodb.Table(
        stack,
        "Table",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        time_to_live_attribute="expiresAt",
        stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        kinesis_stream=stream,
        kinesis_precision_timestamp=dynamodb.ApproximateCreationDateTimePrecision.MILLISECOND,
    )
    construct = SessionExpiry(
        stack, "Sessions", table=table, change_source=ChangeSource.kinesis(stream=stream)
    )
    template = Template.from_stack(stack)
    assert len(template.find_resources("AWS::Kinesis::Stream")) == 1
    assert construct.change_source.retention().to_days() == 14
    assert only(template, "AWS::Lambda::EventSourceMapping")["EventSourceArn"] == {
        "Fn::GetAtt": [stack.get_logical_id(stream.node.default_child), "Arn"]  # type: ignore[arg-type]
    }


def test_the_kill_switch_warning_names_the_sources_retention() -> None:
    stack, _, _ = synth(change_source=ChangeSource.kinesis(), cleanup_enabled=False)
    warnings = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp(".*"))
    (text,) = [w.entry.data for w in warnings if WARNING_CLEANUP_PAUSED in str(w.entry.data)]
    assert "The stream keeps records 7 days" in str(text)


def test_the_dynamodb_stream_stays_the_default() -> None:
    stack, construct, template = synth()
    assert not construct.change_source.is_kinesis
    assert construct.change_stream is None
    assert template.find_resources("AWS::Kinesis::Stream") == {}
    table_id = stack.get_logical_id(construct.table.node.default_child)  # type: ignore[arg-type]
    assert only(template, "AWS::Lambda::EventSourceMapping")["EventSourceArn"] == {
        "Fn::GetAtt": [table_id, "StreamArn"]
    }
    assert "KinesisStreamSpecification" not in only(template, "AWS::DynamoDB::Table")


def test_fails_max_record_age_past_the_dynamodb_streams_retention() -> None:
    with pytest.raises(ValueError, match="max_record_age"):
        synth(max_record_age=Duration.days(2))


def test_fails_max_record_age_past_the_kinesis_retention() -> None:
    with pytest.raises(ValueError, match="max_record_age"):
        synth(
            change_source=ChangeSource.kinesis(retention=Duration.days(2)),
            max_record_age=Duration.days(3),
        )


def test_fails_paused_alarm_past_the_kinesis_retention() -> None:
    with pytest.raises(ValueError, match="alarm_cleanup_paused_after"):
        synth(change_source=ChangeSource.kinesis(), alarm_cleanup_paused_after=Duration.days(7))


@pytest.mark.parametrize(
    "retention", [Duration.hours(23), Duration.days(366), Duration.minutes(24 * 60 + 30)]
)
def test_fails_a_retention_kinesis_cannot_keep(retention: Duration) -> None:
    with pytest.raises(ValueError, match="retention="):
        ChangeSource.kinesis(retention=retention)


def test_fails_a_given_table_without_a_kinesis_destination() -> None:
    stack = Stack(App(), "NoDestination", env=ENV)
    table = dynamodb.Table(
        stack,
        "Table",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        time_to_live_attribute="expiresAt",
        stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
    )
    with pytest.raises(ValueError, match="has no Kinesis streaming destination"):
        SessionExpiry(stack, "Sessions", table=table, change_source=ChangeSource.kinesis())


def test_fails_a_kinesis_source_on_a_table_whose_stream_view_lacks_old_images() -> None:
    stack = Stack(App(), "KeysOnly", env=ENV)
    stream = kinesis.Stream(stack, "Changes", encryption=kinesis.StreamEncryption.MANAGED)
    table = dynamodb.Table(
        stack,
        "Table",
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        time_to_live_attribute="expiresAt",
        stream=dynamodb.StreamViewType.KEYS_ONLY,
        kinesis_stream=stream,
    )
    with pytest.raises(ValueError, match="stream view type KEYS_ONLY"):
        SessionExpiry(
            stack, "Sessions", table=table, change_source=ChangeSource.kinesis(stream=stream)
        )


def test_fails_a_change_source_of_the_wrong_type() -> None:
    with pytest.raises(PropTypeError, match=r"^change_source='kinesis': expected a ChangeSource"):
        synth(change_source="kinesis")
