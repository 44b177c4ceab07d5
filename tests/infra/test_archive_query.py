"""The queryable archive, the Firehose archive delivery and the AgentCore Memory release
(issue 24), as synthesized.

One module-scoped app holds the stacks (synthesized once):
- ``Kms``: ``archive_query`` and ``FIREHOSE`` on a KMS-encrypted bucket of this app, and
  ``agent_memory`` with record namespaces;
- ``Plain``: ``archive_query`` on an SSE-S3 bucket, tenant-scoped, a memory without namespaces.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack, assertions
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.decode import StreamRecord
from session_expiry_runtime.sinks import archive as runtime_archive

from cdk_session_expiry import ArchiveDelivery, SessionExpiry
from cdk_session_expiry.archiving import archive_query as catalog

from .helpers import resources_of

ENV = Environment(account="123456789012", region="eu-west-1")
MEMORY = "arn:aws:bedrock-agentcore:eu-west-1:123456789012:memory/chat_memory-a1B2c3D4e5"


class Synth:
    def __init__(self, cdk_context: dict[str, Any]) -> None:
        app = App(context=cdk_context)
        kms_stack = Stack(app, "Kms", env=ENV)
        self.key = kms.Key(kms_stack, "ArchiveKey", enable_key_rotation=True)
        self.kms_bucket = s3.Bucket(kms_stack, "Archive", encryption_key=self.key)
        self.kms_sessions = SessionExpiry(
            kms_stack,
            "Sessions",
            archive_bucket=self.kms_bucket,
            archive_query=True,
            archive_delivery=ArchiveDelivery.FIREHOSE,
            agent_memory=MEMORY,
            agent_memory_record_namespaces=["/summaries/{actorId}/{sessionId}/"],
        )
        plain_stack = Stack(app, "Plain", env=ENV)
        self.plain_bucket = s3.Bucket(plain_stack, "Archive")
        self.plain_sessions = SessionExpiry(
            plain_stack,
            "Sessions",
            archive_bucket=self.plain_bucket,
            archive_prefix="audit/",
            archive_query=True,
            tenant_scoped_scratch=True,
            scratch_bucket=s3.Bucket(plain_stack, "Scratch"),
            agent_memory="chat_memory-a1B2c3D4e5",
        )
        self.kms_json = assertions.Template.from_stack(kms_stack).to_json()
        self.plain_json = assertions.Template.from_stack(plain_stack).to_json()
        self.kms_stack, self.plain_stack = kms_stack, plain_stack


@pytest.fixture(scope="module")
def synth(cdk_context: dict[str, Any]) -> Synth:
    return Synth(cdk_context)


def _one(template: dict[str, Any], resource_type: str) -> dict[str, Any]:
    (resource,) = resources_of(template, resource_type).values()
    return resource["Properties"]  # type: ignore[no-any-return]


def _ref(stack: Stack, construct: Any) -> dict[str, str]:
    return {"Ref": stack.get_logical_id(construct.node.default_child)}


def test_the_table_projects_the_date_partition_over_the_archive_prefix(synth: Synth) -> None:
    table = _one(synth.kms_json, "AWS::Glue::Table")["TableInput"]
    bucket = _ref(synth.kms_stack, synth.kms_bucket)
    assert table["PartitionKeys"] == [{"Name": "date", "Type": "string"}]
    assert table["Parameters"] == {
        # SSE objects (the bucket's encryption): no client-side encryption to declare.
        "has_encrypted_data": False,
        "classification": "json",
        "projection.enabled": "true",
        "projection.date.type": "date",
        "projection.date.format": "yyyy-MM-dd",
        "projection.date.range": "2024-01-01,NOW",
        "projection.date.interval": "1",
        "projection.date.interval.unit": "DAYS",
        "storage.location.template": {
            "Fn::Join": ["", ["s3://", bucket, "/archive/date=${date}/"]]
        },
    }
    storage = table["StorageDescriptor"]
    assert storage["Location"] == {"Fn::Join": ["", ["s3://", bucket, "/archive/"]]}
    assert storage["SerdeInfo"] == {
        "SerializationLibrary": "org.apache.hive.hcatalog.data.JsonSerDe"
    }
    assert storage["InputFormat"] == "org.apache.hadoop.mapred.TextInputFormat"
    assert storage["Columns"] == [
        {"Name": "format_version", "Type": "int"},
        {"Name": "session_id", "Type": "string"},
        {"Name": "session_partition", "Type": "string"},
        {"Name": "session_key", "Type": "string"},
        {"Name": "incarnation", "Type": "string"},
        {"Name": "tenant", "Type": "string"},
        {"Name": "reason", "Type": "string"},
        {"Name": "removed_at", "Type": "bigint"},
        {"Name": "expires_at", "Type": "bigint"},
        {"Name": "ttl_lag_seconds", "Type": "double"},
        {"Name": "sequence_number", "Type": "string"},
        {"Name": "event_id", "Type": "string"},
        {"Name": "partition_date", "Type": "string"},
        {"Name": "partition_tenant", "Type": "string"},
        {"Name": "old_image", "Type": "string"},
        {"Name": "dynamodb_old_image", "Type": "string"},
    ]


def test_tenant_scoped_the_tenant_is_an_injected_partition(synth: Synth) -> None:
    table = _one(synth.plain_json, "AWS::Glue::Table")["TableInput"]
    bucket = _ref(synth.plain_stack, synth.plain_bucket)
    assert table["PartitionKeys"] == [
        {"Name": "date", "Type": "string"},
        {"Name": "tenant", "Type": "string"},
    ]
    assert table["Parameters"]["projection.tenant.type"] == "injected"
    assert table["Parameters"]["storage.location.template"] == {
        "Fn::Join": ["", ["s3://", bucket, "/audit/date=${date}/tenant=${tenant}/"]]
    }
    columns = [c["Name"] for c in table["StorageDescriptor"]["Columns"]]
    assert "tenant" not in columns and len(columns) == len(catalog.COLUMNS) - 1


def test_the_columns_are_exactly_the_fields_of_an_archived_record() -> None:
    record = StreamRecord(
        sequence_number="1",
        event_id="e",
        event_name="REMOVE",
        approximate_creation_time=Decimal(1_700_000_000),
        user_identity=None,
        keys={"pk": {"S": "s-1"}},
        old_image={"pk": {"S": "s-1"}},
    )
    document = runtime_archive.archive_document(
        RuntimeConfig(),
        record,
        keys={"pk": "s-1"},
        image={"pk": "s-1"},
        reason="explicit",
        lag_seconds=None,
    )
    assert list(document) == [name for name, _ in catalog.COLUMNS]


def test_the_workgroup_enforces_encrypted_results_like_the_bucket(synth: Synth) -> None:
    kms_group = _one(synth.kms_json, "AWS::Athena::WorkGroup")["WorkGroupConfiguration"]
    bucket = _ref(synth.kms_stack, synth.kms_bucket)
    assert kms_group["EnforceWorkGroupConfiguration"] is True
    assert kms_group["ResultConfiguration"] == {
        "OutputLocation": {"Fn::Join": ["", ["s3://", bucket, "/archive-query-results/"]]},
        "EncryptionConfiguration": {
            "EncryptionOption": "SSE_KMS",
            "KmsKey": {
                "Fn::GetAtt": [synth.kms_stack.get_logical_id(synth.key.node.default_child), "Arn"]
            },
        },
    }
    plain = _one(synth.plain_json, "AWS::Athena::WorkGroup")["WorkGroupConfiguration"]
    assert plain["EnforceWorkGroupConfiguration"] is True
    assert plain["ResultConfiguration"]["EncryptionConfiguration"] == {"EncryptionOption": "SSE_S3"}


def test_the_named_queries_are_there_in_the_workgroup(synth: Synth) -> None:
    queries = {
        q["Properties"]["Name"]: q["Properties"]
        for q in resources_of(synth.kms_json, "AWS::Athena::NamedQuery").values()
    }
    assert set(queries) == {
        "session-history",
        "sessions-per-tenant-per-day",
        "swept-vs-ttl-expired",
    }
    (workgroup_id,) = resources_of(synth.kms_json, "AWS::Athena::WorkGroup")
    for query in queries.values():
        assert query["WorkGroup"] == {"Ref": workgroup_id}
        sql = json.dumps(query["QueryString"])
        assert "DISTINCT" in sql  # Firehose mode may archive a redelivered record twice
    tenant_scoped = resources_of(synth.plain_json, "AWS::Athena::NamedQuery").values()
    assert all("tenant = ?" in json.dumps(q["Properties"]["QueryString"]) for q in tenant_scoped)


def test_the_query_results_expire(synth: Synth) -> None:
    rules = synth.kms_json["Resources"][
        synth.kms_stack.get_logical_id(synth.kms_bucket.node.default_child)
    ]["Properties"]["LifecycleConfiguration"]["Rules"]
    (rule,) = [r for r in rules if r.get("Prefix") == "archive-query-results/"]
    assert rule["ExpirationInDays"] == 30


def test_the_firehose_stream_writes_the_same_partitions_gzip(synth: Synth) -> None:
    stream = _one(synth.kms_json, "AWS::KinesisFirehose::DeliveryStream")
    destination = stream["ExtendedS3DestinationConfiguration"]
    assert destination["Prefix"] == (
        "archive/date=!{partitionKeyFromQuery:date}/tenant=!{partitionKeyFromQuery:tenant}/"
    )
    assert destination["ErrorOutputPrefix"].startswith("archive-delivery-errors/")
    assert destination["CompressionFormat"] == "GZIP"
    assert destination["DynamicPartitioningConfiguration"]["Enabled"] is True
    (processor,) = destination["ProcessingConfiguration"]["Processors"]
    assert processor["Type"] == "MetadataExtraction"
    assert {p["ParameterName"]: p["ParameterValue"] for p in processor["Parameters"]} == {
        "MetadataExtractionQuery": "{date: .partition_date, tenant: .partition_tenant}",
        "JsonParsingEngine": "JQ-1.6",
    }
    assert "AWSKMSKeyARN" in destination["EncryptionConfiguration"]["KMSEncryptionConfig"]
    assert stream["DeliveryStreamEncryptionConfigurationInput"] == {"KeyType": "AWS_OWNED_CMK"}
    statements = _cleanup_statements(synth.kms_json)
    (put,) = [s for s in statements if s["Action"] == "firehose:PutRecordBatch"]
    (stream_id,) = resources_of(synth.kms_json, "AWS::KinesisFirehose::DeliveryStream")
    assert put["Resource"] == {"Fn::GetAtt": [stream_id, "Arn"]}
    (alarm,) = [
        a["Properties"]
        for a in resources_of(synth.kms_json, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "DeliveryToS3.DataFreshness"
    ]
    assert alarm["Threshold"] == 3600


def _cleanup_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for logical_id, policy in resources_of(template, "AWS::IAM::Policy").items():
        if logical_id.startswith("SessionsCleanupRoleDefaultPolicy"):
            found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def test_memory_permissions_are_on_the_memory_only(synth: Synth) -> None:
    (events,) = [
        s
        for s in _cleanup_statements(synth.kms_json)
        if "bedrock-agentcore:ListEvents" in s["Action"]
    ]
    assert sorted(events["Action"]) == [
        "bedrock-agentcore:DeleteEvent",
        "bedrock-agentcore:DeleteMemoryRecord",
        "bedrock-agentcore:ListEvents",
        "bedrock-agentcore:ListMemoryRecords",
    ]
    assert events["Resource"] == MEMORY
    (plain,) = [
        s
        for s in _cleanup_statements(synth.plain_json)
        if "bedrock-agentcore:ListEvents" in s["Action"]
    ]
    assert sorted(plain["Action"]) == [
        "bedrock-agentcore:DeleteEvent",
        "bedrock-agentcore:ListEvents",
    ]
    assert plain["Resource"] == {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":bedrock-agentcore:eu-west-1:123456789012:memory/chat_memory-a1B2c3D4e5",
            ],
        ]
    }
    # A memory target alone needs the ownership table (its claims).
    assert synth.plain_sessions.ownership_table is not None


def _stack(cdk_context: dict[str, Any]) -> Stack:
    return Stack(App(context=cdk_context), "Guard", env=ENV)


def test_fails_archive_query_without_an_archive_bucket(cdk_context: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="archive_query=True is set without archive_bucket"):
        SessionExpiry(_stack(cdk_context), "Sessions", archive_query=True)


def test_fails_firehose_delivery_without_an_archive_bucket(cdk_context: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"FIREHOSE is set without archive_bucket"):
        SessionExpiry(_stack(cdk_context), "Sessions", archive_delivery=ArchiveDelivery.FIREHOSE)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"agent_memory": "not a memory"}, "expected an AgentCore Memory"),
        (
            {"agent_memory": MEMORY.replace("eu-west-1", "us-east-1")},
            "is in Region us-east-1",
        ),
        (
            {"agent_memory_record_namespaces": ["/s/{sessionId}/"]},
            "set without agent_memory",
        ),
        (
            {"agent_memory": MEMORY, "agent_memory_record_namespaces": ["/facts/{actorId}/"]},
            "has no {sessionId}",
        ),
        (
            {
                "agent_memory": MEMORY,
                "agent_memory_record_namespaces": ["/s/{memoryStrategyId}/{sessionId}/"],
            },
            "only placeholders are",
        ),
        ({"agent_memory": MEMORY, "agent_memory_record_namespaces": []}, "non-empty list"),
        (  # review of issue 24: ("a", "b-c") and ("a-b", "c") both fill it to "/s/a-b-c/"
            {
                "agent_memory": MEMORY,
                "agent_memory_record_namespaces": ["/s/{actorId}-{sessionId}/"],
            },
            "a whole segment",
        ),
        ({"archive_delivery": "Firehose"}, "an ArchiveDelivery member"),
    ],
)
def test_fails_on_agent_memory_props_it_cannot_honour(
    cdk_context: dict[str, Any], props: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("{", r"\{").replace("}", r"\}")):
        SessionExpiry(_stack(cdk_context), "Sessions", **props)
