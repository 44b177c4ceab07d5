"""The site says how the application finds each setting: every variable
``session_environment()`` can set is in the table of ``docs/session-runtime.md``, "How the
application finds its settings"."""

from __future__ import annotations

from typing import Any

from aws_cdk import App, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from docsite.doc_examples import DOCS, page_section

from cdk_session_expiry import SessionExpiry


def _settings_section() -> str:
    return page_section(DOCS / "session-runtime.md", "## How the application finds its settings")


def test_docs_list_every_variable_session_environment_sets(
    cdk_context: dict[str, Any],
) -> None:
    stack = Stack(App(context=cdk_context), "Test")
    table = dynamodb.Table(
        stack,
        "Table",
        partition_key=dynamodb.Attribute(name="user", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="session", type=dynamodb.AttributeType.STRING),
        time_to_live_attribute="expiresAt",
        stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
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
        grant_key=kms.Key(stack, "Key"),
        scratch_bucket=s3.Bucket(stack, "Scratch"),
        tenant_scoped_scratch=True,
        expiry_sweep_interval=Duration.minutes(5),
        agent_runtime="arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/agent-a1B2c3D4e5",
        agent_runtime_qualifier="prod",
        code_interpreter="team_ci-Z9y8X7w6V5",
        browser="web-Q1w2E3r4T5",
    )
    section = _settings_section()
    missing = [name for name in sessions.session_environment() if f"`{name}`" not in section]
    assert missing == [], f"docs/session-runtime.md's settings table lacks {missing}"
