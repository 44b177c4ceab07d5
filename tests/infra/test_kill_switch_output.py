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


def test_two_constructs_in_one_stack_get_two_mapping_outputs() -> None:
    stack = Stack(App(), "Two")
    SessionExpiry(stack, "A")
    SessionExpiry(stack, "B")

    keys = Template.from_stack(stack).find_outputs("*")
    assert len([k for k in keys if "CleanupEventSourceMappingId" in k]) == 2
    assert len(keys) == 12  # 6 each (tests/infra/test_outputs.py)


def test_the_output_key_is_the_shape_the_docs_and_the_kill_switch_help_give() -> None:
    import re

    import jmespath
    from docsite.doc_examples import DOCS
    from session_expiry_runtime.ops import kill_switch as cli

    stack = Stack(App(), "Sample")
    sessions = SessionExpiry(stack, "Sessions")
    SessionExpiry(stack, "Other")
    key = stack.get_logical_id(sessions.event_source_mapping_id_output)
    # <construct path>CleanupEventSourceMappingId<hash>: the example the docs and --help show.
    assert key == "SessionsCleanupEventSourceMappingId54B6DE77"
    assert re.fullmatch(r"SessionsCleanupEventSourceMappingId[0-9A-F]{8}", key)
    for page in ("operating.md", "faq.md"):
        assert key in (DOCS / page).read_text(), page
    assert key in cli._parser().format_help()

    # The documented query finds the mappings' UUIDs among a stack's outputs, and with the
    # construct's path in the filter, this construct's alone.
    outputs = Template.from_stack(stack).find_outputs("*")
    described = {
        "Stacks": [{"Outputs": [{"OutputKey": k, "OutputValue": f"uuid-of-{k}"} for k in outputs]}]
    }
    query = re.search(r'--query "([^"]+)"', cli.FIND_UUID)
    assert query is not None
    assert sorted(jmespath.search(query.group(1), described)) == sorted(
        f"uuid-of-{k}" for k in outputs if "CleanupEventSourceMappingId" in k
    )
    assert len([k for k in outputs if "CleanupEventSourceMappingId" in k]) == 2
    narrowed = query.group(1).replace("'CleanupEventSourceMappingId'", f"'{key[:-8]}'")
    assert jmespath.search(narrowed, described) == [f"uuid-of-{key}"]
