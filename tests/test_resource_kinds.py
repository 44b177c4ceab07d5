"""A resource kind is one declaration (``session_expiry_runtime/core/kinds.py``): everything else is
derived from it, on both sides, and the docs table says what each declared kind releases."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from session_expiry_runtime.core import kinds as runtime_kinds
from session_expiry_runtime.core import ownership
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.kind_settings import configured_kinds, recorded_kinds
from session_expiry_runtime.steps.custom import RESERVED_NAMES
from session_expiry_runtime.store_parts.claims import KIND_LABELS

from cdk_session_expiry import _kinds, cost, resource_kinds

DOCS = Path(__file__).resolve().parent.parent / "docs" / "agentcore.md"


def test_the_construct_reads_the_runtimes_very_declarations() -> None:
    assert [k.kind for k in _kinds.DECLARED_KINDS] == [k.kind for k in runtime_kinds.DECLARED_KINDS]
    assert [repr(k) for k in _kinds.DECLARED_KINDS] == [
        repr(k) for k in runtime_kinds.DECLARED_KINDS
    ]


def test_every_declared_kind_is_an_ownership_kind_with_a_label() -> None:
    named = (ownership.KIND_AGENT_RUNTIME, ownership.KIND_CODE_INTERPRETER, ownership.KIND_BROWSER)
    assert set(named) | {ownership.KIND_AGENT_MEMORY} <= set(runtime_kinds.BUILTIN_KIND_NAMES)
    assert ownership.KINDS == ("connection", "grant", *runtime_kinds.BUILTIN_KIND_NAMES)
    for kind in runtime_kinds.DECLARED_KINDS:
        assert kind.kind in ownership.KINDS
        assert KIND_LABELS[kind.kind] == kind.label
        assert ownership.resource_key(kind.kind, "x") == f"{kind.kind}#x"


def test_kind_names_actions_and_props_are_unique() -> None:
    declared = runtime_kinds.DECLARED_KINDS
    for values in (
        [k.kind for k in declared],
        [k.action for k in declared if k.action],
        [k.ids.attribute for k in declared],
        [k.target.prop for k in declared if k.target],
    ):
        assert len(values) == len(set(values)), values


def test_every_release_is_priced_and_no_custom_step_may_take_its_name() -> None:
    for kind in runtime_kinds.DECLARED_KINDS:
        if kind.release is None:
            continue
        for operation in kind.release.operations:
            assert f"{kind.service}:{operation}" in cost.CALL_PRICES
        assert kind.release.price[0] in cost.PRICES
        assert kind.release.operation in RESERVED_NAMES


def test_every_release_call_exists_in_botocores_model() -> None:
    import botocore.session

    session = botocore.session.get_session()
    for kind in runtime_kinds.DECLARED_KINDS:
        if kind.release is None:
            continue
        model = session.get_service_model(kind.service)
        operation = model.operation_model(kind.release.operation)
        members = operation.input_shape.members
        assert kind.release.id_parameter in members
        if kind.release.target_parameter:
            assert kind.release.target_parameter in members
        errors = {shape.name for shape in operation.error_shapes}
        assert set(kind.release.gone) <= errors, (kind.kind, errors)
        assert kind.release.method in {
            re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower() for name in model.operation_names
        }
        if kind.release.first is not None:  # called first, with the same parameters
            first = model.operation_model(kind.release.first)
            assert set(first.input_shape.members) >= set(members) & {
                kind.release.id_parameter,
                kind.release.target_parameter,
            }
            first_errors = {shape.name for shape in first.error_shapes}
            assert set(kind.release.gone) | set(kind.release.first_continues) <= first_errors


def _table_rows() -> list[str]:
    text = DOCS.read_text()
    section = text.split("## What the cleanup releases, and what remains", 1)[1]
    return [line for line in section.splitlines() if line.startswith("| ")]


@pytest.mark.parametrize(
    "row",
    [row for kind in runtime_kinds.DECLARED_KINDS for row in kind.docs],
    ids=lambda row: row.service,
)
def test_the_docs_table_has_each_declared_row(row: runtime_kinds.DocsRow) -> None:
    assert row.markdown() in _table_rows()


def test_a_declared_target_is_read_from_the_environment_and_configured() -> None:
    targeted = [k for k in runtime_kinds.DECLARED_KINDS if k.target is not None]
    if not targeted:
        pytest.skip("no kind declared with resource_targets yet")
    kind = targeted[0]
    config = RuntimeConfig.from_env(
        {kind.target.env: "t-1", kind.ids.env: "myIds", "AWS_REGION": "us-east-1"}
    )
    (settings,) = [s for s in configured_kinds(config) if s.kind.kind == kind.kind]
    assert (settings.target, settings.ids_attribute) == ("t-1", "myIds")
    assert recorded_kinds(RuntimeConfig())[kind.kind].ids_attribute == kind.ids.attribute


def test_fails_a_resource_targets_key_no_kind_declares() -> None:
    stack = Stack(App(), "Kinds")
    with pytest.raises(ValueError, match=r"resource_targets key 'nope': expected one of \["):
        resource_kinds.resolve(stack, {"nope": "x"})


def test_fails_resource_targets_that_is_not_a_mapping() -> None:
    stack = Stack(App(), "Kinds")
    with pytest.raises(ValueError, match="expected a mapping of kind prop to target"):
        resource_kinds.resolve(stack, ["capacity_provider"])  # type: ignore[arg-type]


#: Every AgentCore kind's target set, as a deployed cleanup with all four props reads them.
_AGENTCORE_CONFIG = RuntimeConfig(
    agent_runtime_arn="arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/r-a1B2c3D4e5",
    agent_runtime_qualifier="prod",
    code_interpreter_id="ci-AbCd123456",
    browser_id="br-AbCd123456",
    agent_memory_id="mem-AbCd123456",
)


def test_the_agentcore_kinds_steps_are_their_declarations() -> None:
    from session_expiry_runtime.core.clients import CleanupClients
    from session_expiry_runtime.steps import build_steps
    from session_expiry_runtime.steps.agent_memory import AgentMemoryStep
    from session_expiry_runtime.steps.released import ReleasedKindStep

    steps = build_steps(_AGENTCORE_CONFIG, CleanupClients(agentcore=object()))
    by_name = {step.name: step for step in steps}
    for kind in runtime_kinds.DECLARED_KINDS:
        if kind.own is None:
            continue
        step = by_name[str(kind.action)]
        # A kind's own step only where its declaration names one (Memory's), else the generic.
        expected = AgentMemoryStep if kind.step else ReleasedKindStep
        assert type(step) is expected, kind.kind
    assert [s.name for s in steps] == [
        "StopRuntimeSession",
        "StopCodeInterpreterSession",
        "StopBrowserSession",
        "DeleteMemoryEvents",
    ]


def test_the_runtimes_qualifier_is_a_declared_option_of_its_call() -> None:
    runtime = runtime_kinds.declared_kind(ownership.KIND_AGENT_RUNTIME)
    assert runtime is not None
    settings = {s.kind.kind: s for s in configured_kinds(_AGENTCORE_CONFIG)}
    assert settings[ownership.KIND_AGENT_RUNTIME].release_params("s" * 33) == {
        "runtimeSessionId": "s" * 33,
        "agentRuntimeArn": _AGENTCORE_CONFIG.agent_runtime_arn,
        "qualifier": "prod",
    }
    unset = {s.kind.kind: s for s in configured_kinds(RuntimeConfig(agent_runtime_arn="a"))}
    assert "qualifier" not in unset[ownership.KIND_AGENT_RUNTIME].release_params("s" * 33)


def test_fails_release_parameters_of_a_kind_without_a_declared_call() -> None:
    settings = recorded_kinds(_AGENTCORE_CONFIG)[ownership.KIND_AGENT_MEMORY]
    with pytest.raises(ValueError, match="resource kind 'agentMemory' declares no release call"):
        settings.release_params("actor/session")


def test_the_agentcore_iam_actions_are_the_declared_calls() -> None:
    from cdk_session_expiry.agents import agentcore

    stack = Stack(App(), "Kinds", env={"account": "123456789012", "region": "us-east-1"})
    targets = agentcore.resolve_targets(
        stack,
        agent_runtime=str(_AGENTCORE_CONFIG.agent_runtime_arn),
        agent_runtime_qualifier=None,
        code_interpreter="ci-AbCd123456",
        browser="br-AbCd123456",
        agent_runtime_session_attribute="agentRuntimeSessionId",
        code_interpreter_session_attribute="codeInterpreterSessionId",
        browser_session_attribute="browserSessionId",
    )
    actions = [a for statement in targets.statements() for a in statement.actions]
    declared = [
        runtime_kinds.declared_kind(k).iam_action  # type: ignore[union-attr]
        for k in (ownership.KIND_AGENT_RUNTIME, ownership.KIND_CODE_INTERPRETER, "browser")
    ]
    assert (
        actions
        == declared
        == [
            "bedrock-agentcore:StopRuntimeSession",
            "bedrock-agentcore:StopCodeInterpreterSession",
            "bedrock-agentcore:StopBrowserSession",
        ]
    )


def test_a_kinds_own_step_calls_exist_and_are_what_the_construct_grants() -> None:
    import botocore.session
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk.assertions import Template

    from cdk_session_expiry.agents import agent_memory

    model = botocore.session.get_session().get_service_model("bedrock-agentcore")
    memory = runtime_kinds.declared_kind(ownership.KIND_AGENT_MEMORY)
    assert memory is not None
    for call in memory.step_calls:
        assert call.operation in model.operation_names
    arn = "arn:aws:bedrock-agentcore:us-east-1:123456789012:memory/mem-AbCd123456"
    for namespaces, expected in (
        ((), ["ListEvents", "DeleteEvent"]),
        (
            ("/s/{sessionId}/",),
            ["ListEvents", "DeleteEvent", "ListMemoryRecords", "DeleteMemoryRecord"],
        ),
    ):
        stack = Stack(App(), "Kinds")
        function = lambda_.Function(
            stack,
            "F",
            runtime=lambda_.Runtime.PYTHON_3_13,
            handler="x.handler",
            code=lambda_.Code.from_inline("def handler(*_): pass"),
        )
        agent_memory.configure(function, memory=arn, namespaces=namespaces)
        (policy,) = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
        (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
        assert statement["Action"] == [f"bedrock-agentcore:{op}" for op in expected]
