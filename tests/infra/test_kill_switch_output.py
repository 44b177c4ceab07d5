"""The cleanup's event source mapping id is exposed for the kill switch without a deploy."""

from __future__ import annotations

from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from cdk_session_expiry import SessionExpiry


def test_the_mapping_id_is_an_attribute_and_a_stack_output() -> None:
    stack = Stack(App(), "KillSwitch")
    sessions = SessionExpiry(stack, "Sessions")
    template = Template.from_stack(stack)
    mapping_id = stack.get_logical_id(sessions.event_source_mapping.node.default_child)

    assert stack.resolve(sessions.event_source_mapping_id) == {"Ref": mapping_id}
    outputs = template.find_outputs("*")
    (output,) = [o for o in outputs.values() if o["Value"] == {"Ref": mapping_id}]
    assert "update-event-source-mapping --uuid" in output["Description"]
    assert "--no-enabled" in output["Description"] and "cleanup_enabled" in output["Description"]
    logical = stack.get_logical_id(sessions.event_source_mapping_id_output)
    assert logical.startswith("SessionsCleanupEventSourceMappingId")


def test_two_constructs_in_one_stack_get_two_outputs() -> None:
    stack = Stack(App(), "Two")
    SessionExpiry(stack, "A")
    SessionExpiry(stack, "B")

    assert len(Template.from_stack(stack).find_outputs("*")) == 2
