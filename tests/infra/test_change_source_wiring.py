"""The Kinesis change source must read the stream the table actually streams into (review of
issue 23).

A cleanup whose mapping reads a Kinesis stream the table does not stream into is deployed
healthy and never sees a REMOVE: every session's resources are left behind, silently (no error,
no throttle, an iterator age of zero). Each such combination must be refused at synth with a
message naming the value and what was expected.
"""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kinesis as kinesis

from cdk_session_expiry import ChangeSource, SessionExpiry

ENV = Environment(account="111111111111", region="us-east-1")
KEY = dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING)


def _table(stack: Stack, **extra: Any) -> dynamodb.Table:
    return dynamodb.Table(
        stack,
        "Table",
        partition_key=KEY,
        time_to_live_attribute="expiresAt",
        stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        **extra,
    )


def _table_v2(stack: Stack, **extra: Any) -> dynamodb.TableV2:
    return dynamodb.TableV2(
        stack,
        "Table",
        partition_key=KEY,
        time_to_live_attribute="expiresAt",
        dynamo_stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        **extra,
    )


def test_fails_a_kinesis_source_whose_new_stream_the_given_table_does_not_stream_into() -> None:
    """The table streams into its own stream; ``ChangeSource.kinesis()`` without ``stream=``
    creates ``ChangeStream`` and the cleanup reads that one, which nothing writes."""
    stack = Stack(App(), "OtherStream", env=ENV)
    theirs = kinesis.Stream(stack, "Theirs", encryption=kinesis.StreamEncryption.MANAGED)
    table = _table(stack, kinesis_stream=theirs)
    with pytest.raises(ValueError, match=r"stream"):
        SessionExpiry(stack, "Sessions", table=table, change_source=ChangeSource.kinesis())


def test_fails_a_kinesis_source_naming_another_stream_than_the_tables() -> None:
    stack = Stack(App(), "Mismatch", env=ENV)
    theirs = kinesis.Stream(stack, "Theirs", encryption=kinesis.StreamEncryption.MANAGED)
    other = kinesis.Stream(stack, "Other", encryption=kinesis.StreamEncryption.MANAGED)
    table = _table(stack, kinesis_stream=theirs)
    with pytest.raises(ValueError, match=r"stream"):
        SessionExpiry(
            stack, "Sessions", table=table, change_source=ChangeSource.kinesis(stream=other)
        )


def test_fails_a_kinesis_source_on_a_table_v2_of_this_app_without_a_destination() -> None:
    """A ``TableV2`` of this app says in its template whether it streams into Kinesis
    (``Replicas[].KinesisStreamSpecification``); one that does not can never feed the cleanup."""
    stack = Stack(App(), "TableV2NoDestination", env=ENV)
    table = _table_v2(stack)
    with pytest.raises(ValueError, match=r"Kinesis streaming destination"):
        SessionExpiry(stack, "Sessions", table=table, change_source=ChangeSource.kinesis())


def test_the_kinesis_filter_drops_another_tables_changes_in_a_shared_stream() -> None:
    """A Kinesis stream can be the destination of several tables (each change names its
    ``tableName``); the DynamoDB stream is one table's. A REMOVE of another table written into
    the stream the cleanup reads must not invoke it: its old image is no session of this
    construct (archived as one, counted as one, acted on if it names this table's ids).
    Checked with moto's pattern matcher, the language Lambda event filtering uses."""
    from aws_cdk.assertions import Template

    from cdk_session_expiry.testing.poller import pattern_matcher

    stack = Stack(App(), "SharedStream", env=ENV)
    stream = kinesis.Stream.from_stream_arn(
        stack, "Changes", "arn:aws:kinesis:us-east-1:111111111111:stream/shared-changes"
    )
    table = dynamodb.Table.from_table_attributes(
        stack,
        "Table",
        table_name="sessions",
        table_stream_arn="arn:aws:dynamodb:us-east-1:111111111111:table/sessions/stream/x",
    )
    SessionExpiry(stack, "Sessions", table=table, change_source=ChangeSource.kinesis(stream=stream))
    (mapping,) = (
        Template.from_stack(stack).find_resources("AWS::Lambda::EventSourceMapping").values()
    )
    matches = pattern_matcher(
        f["Pattern"] for f in mapping["Properties"]["FilterCriteria"]["Filters"]
    )

    def remove_of(table_name: str) -> dict[str, Any]:
        return {
            "data": {
                "eventName": "REMOVE",
                "tableName": table_name,
                "dynamodb": {"Keys": {"pk": {"S": "s-1"}}, "OldImage": {"pk": {"S": "s-1"}}},
            }
        }

    assert matches(remove_of("sessions"))
    assert not matches(remove_of("orders"))


def test_the_cleanup_function_names_its_table_for_replay_over_the_stream() -> None:
    """``replay --kinesis-stream-arn --env-from-function`` keeps only the REMOVEs of the table
    the function's settings name; without the name it refuses (it cleaned every table's)."""
    from aws_cdk.assertions import Template

    stack = Stack(App(), "ReplayName", env=ENV)
    construct = SessionExpiry(stack, "Sessions", change_source=ChangeSource.kinesis())
    function = construct.cleanup_function.node.default_child
    (props,) = (
        r["Properties"]
        for k, r in Template.from_stack(stack).find_resources("AWS::Lambda::Function").items()
        if k == stack.get_logical_id(function)  # type: ignore[arg-type]
    )
    table_id = stack.get_logical_id(construct.table.node.default_child)  # type: ignore[arg-type]
    assert props["Environment"]["Variables"]["SESSION_EXPIRY_TABLE_NAME"] == {"Ref": table_id}
