"""Stack outputs an operator needs (issue 39): each resource a runbook acts on is a ``CfnOutput``
of the construct with a description, under a stable id; the operator's page lists each one's
key for ``SessionExpiry(stack, "Sessions")`` and every placeholder its commands use."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aws_cdk import App, Stack, assertions

from cdk_session_expiry import SessionExpiry, outputs
from cdk_session_expiry.switches import kill_switch

from .helpers import REPO
from .test_nag import ENV, everything, failure_bucket_and_own_table, minimal

PAGE = REPO / "docs" / "operating.md"


class Built:
    def __init__(self, stack: Stack, sessions: SessionExpiry) -> None:
        self.stack = stack
        self.sessions = sessions
        self.outputs = dict(assertions.Template.from_stack(stack).find_outputs("*"))

    def output(self, construct_id: str) -> dict[str, Any]:
        key = self.stack.get_logical_id(self.sessions.outputs[construct_id])
        return dict(self.outputs[key])

    def ref(self, construct: Any) -> dict[str, str]:
        return {"Ref": self.stack.get_logical_id(construct.node.default_child)}


def _build(builder: Any, cdk_context: dict[str, Any], dashboard: bool = False) -> Built:
    stack = Stack(App(context=cdk_context), "Outputs", env=ENV)
    sessions = builder(stack)
    if dashboard:
        sessions.add_dashboard()
    return Built(stack, sessions)


@pytest.fixture(scope="module")
def default(cdk_context: dict[str, Any]) -> Built:
    return _build(minimal, cdk_context)


@pytest.fixture(scope="module")
def full(cdk_context: dict[str, Any]) -> Built:
    return _build(everything, cdk_context, dashboard=True)


@pytest.fixture(scope="module")
def s3_destination(cdk_context: dict[str, Any]) -> Built:
    return _build(failure_bucket_and_own_table, cdk_context)


def test_a_default_construct_outputs_what_every_runbook_needs(default: Built) -> None:
    s = default.sessions
    assert set(s.outputs) == {
        kill_switch.OUTPUT_ID,
        outputs.CLEANUP_FUNCTION_NAME,
        outputs.TABLE_NAME,
        outputs.FAILURE_QUEUE_URL,
        outputs.PAUSE_WATCH_FUNCTION_NAME,
        outputs.PAUSE_WATCH_RULE_NAME,
    }
    assert len(default.outputs) == 6  # nothing else in the stack
    assert default.output(outputs.CLEANUP_FUNCTION_NAME)["Value"] == default.ref(s.cleanup_function)
    assert default.output(outputs.TABLE_NAME)["Value"] == default.ref(s.table)
    assert s.failure_queue is not None
    # Ref of an AWS::SQS::Queue is its URL.
    assert default.output(outputs.FAILURE_QUEUE_URL)["Value"] == default.ref(s.failure_queue)
    watch = s.pause_watch
    assert default.output(outputs.PAUSE_WATCH_FUNCTION_NAME)["Value"] == default.ref(watch.function)
    assert default.output(outputs.PAUSE_WATCH_RULE_NAME)["Value"] == default.ref(watch.schedule)
    assert s.ownership_table is None and s.feature_flags is None


def test_every_output_has_a_description_naming_its_placeholder(full: Built) -> None:
    for construct_id, output in full.sessions.outputs.items():
        description = full.stack.resolve(output.description)
        assert isinstance(description, str) and len(description) > 20, construct_id
    assert "CLEANUP_FN" in full.output(outputs.CLEANUP_FUNCTION_NAME)["Description"]
    assert "--queue-url <this value>" in full.stack.resolve(
        full.sessions.outputs[outputs.FAILURE_QUEUE_URL].description
    )


def test_each_optional_resource_brings_its_output(full: Built) -> None:
    s = full.sessions
    assert s.ownership_table is not None and s.feature_flags is not None
    assert s.expiry_sweeper is not None and s.grant_sweep is not None
    assert s.circuit_breaker is not None and s.change_stream is not None
    assert s.archive_delivery_stream is not None and s.tool_session_sweep is not None
    flags = s.feature_flags
    expected = {
        outputs.OWNERSHIP_TABLE_NAME: full.ref(s.ownership_table),
        outputs.FEATURE_FLAGS_APPLICATION_ID: full.ref(flags.application),
        outputs.FEATURE_FLAGS_ENVIRONMENT_ID: full.ref(flags.environment),
        outputs.EXPIRY_SWEEPER_FUNCTION_NAME: full.ref(s.expiry_sweeper.function),
        outputs.GRANT_SWEEP_FUNCTION_NAME: full.ref(s.grant_sweep.function),
        outputs.TOOL_SESSION_SWEEP_FUNCTION_NAME: full.ref(s.tool_session_sweep.function),
        outputs.CIRCUIT_BREAKER_FUNCTION_NAME: full.ref(s.circuit_breaker.function),
        outputs.CIRCUIT_BREAKER_STATE_PARAMETER_NAME: full.ref(s.circuit_breaker.state_parameter),
        outputs.CHANGE_STREAM_NAME: full.ref(s.change_stream),
        outputs.ARCHIVE_DELIVERY_LOG_GROUP_NAME: full.ref(s.archive_delivery_stream.log_group),
        outputs.CLAIM_REGISTRAR_FUNCTION_NAME: full.ref(s.claim_registrar.function),
        outputs.DEFERRED_WORK_TABLE_NAME: full.ref(s.deferred_work_table),
        outputs.GRANT_KEY_ARN: full.stack.resolve(s.grant_sweep.key.key_arn),
    }
    for construct_id, value in expected.items():
        assert full.output(construct_id)["Value"] == value, construct_id
    profile = full.output(outputs.FEATURE_FLAGS_PROFILE_ID)["Value"]
    assert profile == full.stack.resolve(flags.configuration.configuration_profile_id)
    assert full.output(outputs.ARCHIVE_BUCKET_NAME)["Value"]["Ref"].startswith("Archive")
    assert len(s.outputs) == 22  # the most: a queue or a bucket, not both


def test_the_dashboard_url_opens_the_dashboard_in_the_console(full: Built) -> None:
    dashboard = full.sessions.node.find_child("Dashboard")
    value = full.output("DashboardUrl")["Value"]
    assert value == {
        "Fn::Join": [
            "",
            [
                "https://",
                {"Ref": "AWS::Region"},
                ".console.aws.amazon.com/cloudwatch/home?region=",
                {"Ref": "AWS::Region"},
                "#dashboards/dashboard/",
                full.ref(dashboard),
            ],
        ]
    }


def test_an_s3_destination_outputs_its_bucket_instead_of_a_queue(s3_destination: Built) -> None:
    s = s3_destination.sessions
    assert outputs.FAILURE_QUEUE_URL not in s.outputs
    assert s.failure_destination_bucket is not None
    assert s3_destination.output(outputs.FAILURE_DESTINATION_BUCKET_NAME)["Value"] == (
        s3_destination.ref(s.failure_destination_bucket)
    )
    assert "Description" in s3_destination.output(outputs.FAILURE_DESTINATION_BUCKET_NAME)


# --- the operator's page --------------------------------------------------------------------

_ROW = re.compile(
    r"^\| (`[A-Z_]+`|\(the dashboard's console URL\)) \| `(\w+)`.*? \| `(Sessions\w+)` \|", re.M
)


def _table() -> dict[str, tuple[str, str]]:
    """Output id -> (placeholder, key) from "Filling in the commands"."""
    text = PAGE.read_text().split("{#filling-in-the-commands}", 1)[1].split("\n## ", 1)[0]
    return {m.group(2): (m.group(1).strip("`"), m.group(3)) for m in _ROW.finditer(text)}


def test_every_output_description_names_the_placeholder_the_page_gives_it(
    full: Built, s3_destination: Built
) -> None:
    # The kill switch's CleanupEventSourceMappingId (UUID) included: a paged engineer reading
    # describe-stacks matches each output to the runbooks' capitals.
    named = {
        cid: built.stack.resolve(o.description)
        for built in (full, s3_destination)
        for cid, o in built.sessions.outputs.items()
    }
    missing = {
        cid: placeholder
        for cid, (placeholder, _) in _table().items()
        if placeholder.isupper() and not re.search(rf"\b{placeholder}\b", named[cid])
    }
    assert missing == {}


def test_the_page_lists_every_output_with_its_key(full: Built, s3_destination: Built) -> None:
    table = _table()
    keys = {
        cid: built.stack.get_logical_id(o)
        for built in (full, s3_destination)
        for cid, o in built.sessions.outputs.items()
    }
    assert {cid: key for cid, (_, key) in table.items()} == keys


def test_every_placeholder_of_a_runbook_command_is_an_output_or_explained() -> None:
    text = PAGE.read_text()
    used: set[str] = set()
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        used |= set(re.findall(r"\b[A-Z][A-Z0-9_]{2,}\b", block))
    # Not placeholders: words of the commands themselves (jq/JMESPath, log levels).
    words = {"AWS", "ERROR", "WARNING", "JSON", "LOG_GROUP_OF"}
    explained = {"KEY", "ARN", "TABLE_ARN", "DIR", "STACK"}  # the section's last paragraph
    placeholders = {p for p, _ in _table().values()}
    assert used - words - explained <= placeholders, sorted(used - words - explained - placeholders)


def test_the_documented_query_reads_an_output_by_its_key(default: Built) -> None:
    import jmespath

    text = PAGE.read_text()
    query = re.search(r'CLEANUP_FN=\$\(aws cloudformation .*?--query "([^"]+)"', text)
    assert query is not None
    described = {
        "Stacks": [
            {"Outputs": [{"OutputKey": k, "OutputValue": f"value-of-{k}"} for k in default.outputs]}
        ]
    }
    key = default.stack.get_logical_id(default.sessions.outputs[outputs.CLEANUP_FUNCTION_NAME])
    assert jmespath.search(query.group(1), described) == [f"value-of-{key}"]
