"""AgentCore capacity-provider sessions (``DeleteCapacityProviderSession``): deleted only after the
session's runtime session is stopped (``Release.after``), through the real batch handler.

Its five common behaviours (released once, gone, not owned, superseded, a failure fails only its
record) are in ``test_declared_kinds.py``. moto lacks ``StopRuntimeSession``: a ``before-call``
handler on the cleanup's own client answers it (in botocore's shape), another records the order
of the calls; ``DeleteCapacityProviderSession`` is the emulator's (``_moto_resource_kinds``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from runtime_support import FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import process_batch
from session_expiry_runtime.store import SessionStore

from cdk_session_expiry.testing.models import _moto_resource_kinds as releases

RUNTIME_ARN = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/coder-Ab12Cd34Ef"
RUNTIME_SESSION = "rs-" + "0123456789abcdef" * 2
PROVIDER = "agents_cp-a1B2c3D4e5"
KIND = "capacityProviderSession"


@pytest.fixture
def released(aws: None) -> Iterator[None]:
    releases.install()
    releases.reset()
    yield
    releases.reset()
    releases.uninstall()


def _removed_session(sandbox: Sandbox, config: Any) -> list[dict[str, Any]]:
    store = SessionStore(config=config, dynamodb_client=sandbox.ddb)
    store.create("s-cp")
    store.attach_agent_session("s-cp", runtime_session_id=RUNTIME_SESSION, stop_previous=False)
    store.attach_resource("s-cp", KIND, "workspace-1")
    releases.hold(KIND, PROVIDER, "workspace-1")
    sandbox.read_stream()
    sandbox.delete("s-cp")
    return sandbox.removes()


def _run(sandbox: Sandbox, stop_status: int) -> tuple[list[str], list[str]]:
    """The batch's failures and the AgentCore calls in order."""
    config = dataclasses.replace(
        sandbox.config, agent_runtime_arn=RUNTIME_ARN, kind_targets=((KIND, PROVIDER),)
    )
    records = _removed_session(sandbox, config)
    cleaner = sandbox.cleaner(config)
    calls: list[str] = []

    def record(model: Any, **_: Any) -> None:
        calls.append(model.name)

    def stop(model: Any, **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if model.name != "StopRuntimeSession":
            return None
        http = AWSResponse("https://agentcore", stop_status, {}, None)
        if stop_status == 200:
            return http, {"runtimeSessionId": RUNTIME_SESSION, "statusCode": 200}
        error = {"Code": "AccessDeniedException", "Message": "no StopRuntimeSession"}
        return http, {"Error": error, "ResponseMetadata": {"HTTPStatusCode": stop_status}}

    events = cleaner.clients.agentcore.meta.events
    events.register("before-parameter-build.bedrock-agentcore", record)
    events.register("before-call.bedrock-agentcore.StopRuntimeSession", stop)
    response = process_batch(event(*records), FakeContext(), cleaner)
    return [f["itemIdentifier"] for f in response["batchItemFailures"]], calls


def test_the_workspace_is_deleted_after_the_runtime_session_is_stopped(
    sandbox: Sandbox, released: None
) -> None:
    failures, calls = _run(sandbox, 200)

    assert failures == []
    assert calls == ["StopRuntimeSession", "DeleteCapacityProviderSession"]
    assert releases.held(KIND) == set()


def test_a_runtime_session_not_stopped_keeps_its_workspace_and_fails_the_record(
    sandbox: Sandbox, released: None, session_logs: pytest.LogCaptureFixture
) -> None:
    failures, calls = _run(sandbox, 403)

    assert len(failures) == 1
    (line,) = [r.session for r in session_logs.records if hasattr(r, "session")]
    assert line["steps"]["DeleteCapacityProviderSession"] == "failed"
    assert "not started: StopRuntimeSession failed" in str(line["errors"])
    assert calls == ["StopRuntimeSession"]  # never deleted while its session may still run
    assert releases.held(KIND) == {(PROVIDER, "workspace-1")}
