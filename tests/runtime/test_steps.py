"""The step model: the registry, pure plans, and the runner's treatment of any step.

Plans are pure (no AWS call); the runner tests use moto with real boto3 calls for the built-in
steps and add a step of their own, the way a new built-in is added.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from runtime_support import FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.batch import process_batch
from session_expiry_runtime.cleanup.cleaner import SessionCleaner
from session_expiry_runtime.core.clients import CleanupClients
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.decode import parse_record
from session_expiry_runtime.core.kinds import DECLARED_KINDS
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.core.ownership import KIND_GRANT
from session_expiry_runtime.owners.outcomes import STEP_DONE, STEP_DRY_RUN
from session_expiry_runtime.steps import BUILTIN_STEPS, build_steps
from session_expiry_runtime.steps.base import (
    PLAN_MISSING,
    PLAN_REFUSED,
    PLAN_RUN,
    ClaimRef,
    CleanupStep,
    Plan,
    Session,
    StepContext,
)
from session_expiry_runtime.steps.grant import GrantStep, GrantTarget
from session_expiry_runtime.steps.scratch import ScratchStep

ALL_TARGETS = RuntimeConfig(
    websocket_endpoint="https://example.execute-api.us-east-1.amazonaws.com/prod",
    grant_key_arn="arn:aws:kms:us-east-1:123456789012:key/k",
    scratch_bucket="scratch",
    archive_bucket="archive",
    event_bus_arn="arn:aws:events:us-east-1:123456789012:event-bus/b",
    agent_runtime_arn="arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/r-1",
    code_interpreter_id="ci",
    browser_id="br",
    agent_memory_id="mem-1",
)
SOME_CLIENT = object()


def _session(image: dict[str, Any]) -> Session:
    return Session(image, {"pk": "s-1"}, "explicit", None, parse_record({}))


def test_builtin_steps_are_registered_in_order() -> None:
    clients = CleanupClients(*(SOME_CLIENT,) * 7)
    names = [step.name for step in build_steps(ALL_TARGETS, clients)]
    assert names == [
        "Archive",
        "DeleteConnection",
        "RetireGrant",
        "DeleteScratch",
        "StopRuntimeSession",
        "StopCodeInterpreterSession",
        "StopBrowserSession",
        "DeleteMemoryEvents",
        "PublishEvent",
    ]
    # The AgentCore steps are their kinds' declarations' (core/kinds.py), not registered here.
    declared = sum(1 for k in DECLARED_KINDS if k.own is not None)
    assert len(BUILTIN_STEPS) + declared == len(names)


def test_a_step_without_its_target_is_not_built() -> None:
    clients = CleanupClients(kms=SOME_CLIENT)
    assert [step.name for step in build_steps(ALL_TARGETS, clients)] == ["RetireGrant"]


def test_grant_plan_runs_on_the_id_and_the_record_keys_never_the_token() -> None:
    # A legacy item (no incarnation): the ListGrants name check, with the prefix's incarnation.
    step = GrantStep(ALL_TARGETS, SOME_CLIENT)
    image = {"grantToken": "tok", "grantId": "g-1", "scratchPrefix": "sessions/s-1/inc1/"}
    plan = step.plan(_session(image))
    assert (plan.status, plan.payload) == (PLAN_RUN, GrantTarget("g-1", {"pk": "s-1"}, "inc1"))
    assert plan.claims == ()
    assert plan.log == {"grantId": "g-1"}  # the token is never logged


def test_grant_plan_of_an_item_with_an_incarnation_claims_the_grant() -> None:
    step = GrantStep(ALL_TARGETS, SOME_CLIENT)
    session = dataclasses.replace(
        _session({"grantToken": "tok", "grantId": "g-1"}), incarnation="inc1"
    )
    plan = step.plan(session)
    assert (plan.status, plan.claims) == (PLAN_RUN, (ClaimRef(KIND_GRANT, "g-1"),))
    assert plan.owned == ()  # nothing is owned until the runner's ownership check says so
    assert plan.log == {"grantId": "g-1"}


def test_fails_grant_plan_with_a_token_but_no_id() -> None:
    token = "AQpAM2RhZTk1MGMyNTk2ZmZmMzEyYWVhOWViN2I1NzYyNzRkNTg3"
    plan = GrantStep(ALL_TARGETS, SOME_CLIENT).plan(_session({"grantToken": token, "grantId": ""}))
    assert (plan.status, plan.invalid) == (PLAN_REFUSED, ())
    assert "grantToken without grantId" in plan.log["grantRefusal"]
    assert token not in str(plan.log)  # the token is never logged


def test_fails_grant_plan_for_keys_no_grant_name_can_hold() -> None:
    session = Session({"grantId": "g-1"}, {"pk": ""}, "explicit", None, parse_record({}))
    plan = GrantStep(ALL_TARGETS, SOME_CLIENT).plan(session)
    assert plan.status == PLAN_REFUSED and "not all non-empty Strings" in plan.log["grantRefusal"]


def test_grant_plan_without_token_or_id_is_missing_both() -> None:
    plan = GrantStep(ALL_TARGETS, SOME_CLIENT).plan(_session({}))
    assert (plan.status, plan.missing) == (PLAN_MISSING, ("grantId", "grantToken"))


def test_scratch_plan_refuses_a_prefix_outside_the_root() -> None:
    plan = ScratchStep(ALL_TARGETS, SOME_CLIENT).plan(_session({"scratchPrefix": "other/s-1/"}))
    assert plan.status == PLAN_REFUSED
    assert plan.log["scratchPrefix"] == "other/s-1/" and "refusal" in plan.log


class Marker(CleanupStep):
    """A step of this test's own: runs for sessions naming a ``marker`` attribute."""

    name = "Marker"

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.previewed: list[str] = []
        self.attributes = ("marker",)

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> Marker:
        return cls()

    def plan(self, session: Session) -> Plan:
        if "marker" not in session.image:
            return Plan.missing_attributes(missing=("marker",))
        return Plan.run(session.image["marker"])

    def run(self, plan: Plan, ctx: StepContext) -> str:
        if plan.payload == "boom":
            raise RuntimeError("boom")
        self.ran.append(plan.payload)
        return STEP_DONE

    def preview(self, plan: Plan, ctx: StepContext) -> str:
        self.previewed.append(plan.payload)
        return STEP_DRY_RUN


def _runner(sandbox: Sandbox, marker: Marker, config: RuntimeConfig) -> SessionCleaner:
    clients = sandbox.cleaner(config).clients
    steps = [*build_steps(config, clients), marker]
    return SessionCleaner(config, clients, MetricsRecorder("t"), steps=steps)


def test_an_added_step_runs_beside_the_builtins_and_its_error_fails_only_its_record(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, session_logs: pytest.LogCaptureFixture
) -> None:
    fine = sandbox.create_session("s-fine", extra={"marker": {"S": "ok"}})
    poison = sandbox.create_session("s-poison", extra={"marker": {"S": "boom"}})
    sandbox.read_stream()
    sandbox.delete("s-fine")
    sandbox.delete("s-poison")
    records = sandbox.removes()
    marker = Marker()
    runner = _runner(sandbox, marker, sandbox.config)
    monkeypatch.setattr(runner.metrics, "flush", lambda write=None: [])

    response = process_batch(event(*records), FakeContext(), runner)

    poison_seq = next(r for r in records if r["dynamodb"]["Keys"]["pk"]["S"] == "s-poison")
    assert response == {
        "batchItemFailures": [{"itemIdentifier": poison_seq["dynamodb"]["SequenceNumber"]}]
    }
    assert marker.ran == ["ok"]
    # The failing step does not stop the session's other steps (they run side by side).
    assert sandbox.is_clean(fine) and sandbox.is_clean(poison)
    counts = runner.metrics.snapshot()
    assert counts["CleanupFailures|Action=Marker"] == 1
    assert counts["SessionsCleaned|Reason=explicit"] == 1
    failed = next(r.session for r in session_logs.records if r.session["outcome"] == "failed")
    assert failed["errors"] == {"Marker": "RuntimeError: boom"}
    assert failed["steps"]["Marker"] == "failed"
    assert failed["steps"]["DeleteConnection"] == "done"


def test_a_dry_run_calls_only_preview(sandbox: Sandbox) -> None:
    session = sandbox.create_session("s-dry", extra={"marker": {"S": "ok"}})
    sandbox.read_stream()
    sandbox.delete("s-dry")
    marker = Marker()
    runner = _runner(sandbox, marker, dataclasses.replace(sandbox.config, dry_run=True))

    assert process_batch(event(*sandbox.removes()), FakeContext(), runner) == {
        "batchItemFailures": []
    }
    assert (marker.ran, marker.previewed) == ([], ["ok"])
    assert sandbox.is_intact(session)
