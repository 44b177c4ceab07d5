"""AgentCore steps: StopRuntimeSession, StopCodeInterpreterSession, StopBrowserSession.

moto (5.2) implements none of these operations, so the ``bedrock-agentcore`` client is stubbed
with botocore's ``Stubber``: it checks each request's parameters against the service model and
answers as AWS documents (``ResourceNotFoundException`` for a session already ended,
``AccessDeniedException`` for a missing permission). Everything else — the stream records, the
other steps, the runner — is real, against moto.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from botocore.stub import Stubber
from runtime_support import FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, process_batch
from session_expiry_runtime.core.config import RuntimeConfig, validate_cleanup_config
from session_expiry_runtime.core.ownership import (
    KIND_AGENT_RUNTIME,
    KIND_BROWSER,
    KIND_CODE_INTERPRETER,
)

RUNTIME_ARN = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/coder-Ab12Cd34Ef"
RUNTIME_SESSION = "rs-" + "0123456789abcdef" * 2  # the API takes 33-256 characters
INTERPRETER_ID = "coder_interpreter-Ab12Cd34Ef"
BROWSER_ID = "coder_browser-Ab12Cd34Ef"


def agent_config(sandbox: Sandbox, **changes: Any) -> RuntimeConfig:
    settings: dict[str, Any] = {
        "agent_runtime_arn": RUNTIME_ARN,
        "agent_runtime_qualifier": "prod",
        "code_interpreter_id": INTERPRETER_ID,
        "browser_id": BROWSER_ID,
    }
    return dataclasses.replace(sandbox.config, **{**settings, **changes})


#: The single-id attribute of each AgentCore kind and the kind of its ownership records.
AGENT_KINDS = {
    "agentRuntimeSessionId": KIND_AGENT_RUNTIME,
    "codeInterpreterSessionId": KIND_CODE_INTERPRETER,
    "browserSessionId": KIND_BROWSER,
}


def agent_session_record(sandbox: Sandbox, session_id: str, **ids: str) -> dict[str, Any]:
    """A removed session naming one session of each AgentCore kind, each claimed by it (as
    ``SessionStore`` records them)."""
    values = {
        "agentRuntimeSessionId": RUNTIME_SESSION,
        "codeInterpreterSessionId": "ci01",
        "browserSessionId": "br01",
        **ids,
    }
    extra = {name: {"S": value} for name, value in values.items()}
    session = sandbox.create_session(session_id, extra=extra)
    for name, value in values.items():
        sandbox.claim(AGENT_KINDS[name], value, session_id, str(session.incarnation))
    sandbox.read_stream()
    sandbox.delete(session_id)
    (record,) = sandbox.removes()
    return record


def expect_all_stops(stub: Stubber, qualifier: str | None = "prod") -> None:
    runtime_params = {"runtimeSessionId": RUNTIME_SESSION, "agentRuntimeArn": RUNTIME_ARN}
    if qualifier:
        runtime_params["qualifier"] = qualifier
    stub.add_response(
        "stop_runtime_session",
        {"runtimeSessionId": RUNTIME_SESSION, "statusCode": 200},
        runtime_params,
    )
    stub.add_response(
        "stop_code_interpreter_session",
        {"codeInterpreterIdentifier": INTERPRETER_ID, "sessionId": "ci01", "lastUpdatedAt": 0},
        {"codeInterpreterIdentifier": INTERPRETER_ID, "sessionId": "ci01"},
    )
    stub.add_response(
        "stop_browser_session",
        {"browserIdentifier": BROWSER_ID, "sessionId": "br01", "lastUpdatedAt": 0},
        {"browserIdentifier": BROWSER_ID, "sessionId": "br01"},
    )


def test_stops_each_agent_session_with_its_ids_and_the_qualifier(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    record = agent_session_record(sandbox, "s-agent")
    cleaner = sandbox.cleaner(agent_config(sandbox))
    with Stubber(cleaner.clients.agentcore) as stub:
        expect_all_stops(stub)
        # Without a step pool the steps run in registry order, which the Stubber needs.
        result = cleaner.clean(record)
        stub.assert_no_pending_responses()
    assert result.outcome == "cleaned"
    assert result.log["steps"] == {
        "DeleteConnection": "done",
        "RetireGrant": "done",
        "DeleteScratch": "done",
        "StopRuntimeSession": "done",
        "StopCodeInterpreterSession": "done",
        "StopBrowserSession": "done",
    }
    assert result.log["agentRuntimeSessionIds"] == [RUNTIME_SESSION]


def test_without_a_qualifier_none_is_sent(sandbox: Sandbox) -> None:
    record = agent_session_record(sandbox, "s-noqual")
    cleaner = sandbox.cleaner(agent_config(sandbox, agent_runtime_qualifier=None))
    with Stubber(cleaner.clients.agentcore) as stub:
        expect_all_stops(stub, qualifier=None)
        assert cleaner.clean(record).outcome == "cleaned"
        stub.assert_no_pending_responses()


def test_a_session_already_ended_is_done(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    record = agent_session_record(sandbox, "s-gone")
    cleaner = sandbox.cleaner(agent_config(sandbox))
    with Stubber(cleaner.clients.agentcore) as stub:
        for operation in (
            "stop_runtime_session",
            "stop_code_interpreter_session",
            "stop_browser_session",
        ):
            stub.add_client_error(operation, "ResourceNotFoundException", http_status_code=404)
        cleaner.clean(record)  # in registry order (the Stubber answers in order)
    (line,) = [r.session for r in session_logs.records if hasattr(r, "session")]
    assert line["outcome"] == "cleaned"
    for action in ("StopRuntimeSession", "StopCodeInterpreterSession", "StopBrowserSession"):
        assert line["steps"][action] == "already-done"


def test_access_denied_fails_the_record_under_its_action(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = agent_session_record(sandbox, "s-denied")
    cleaner = sandbox.cleaner(agent_config(sandbox, code_interpreter_id=None, browser_id=None))
    monkeypatch.setattr(cleaner.metrics, "flush", lambda write=None: [])
    with Stubber(cleaner.clients.agentcore) as stub:
        stub.add_client_error(
            "stop_runtime_session", "AccessDeniedException", "not allowed", http_status_code=403
        )
        response = process_batch(event(record), FakeContext(), cleaner)
    assert response == {
        "batchItemFailures": [{"itemIdentifier": record["dynamodb"]["SequenceNumber"]}]
    }
    assert cleaner.metrics.snapshot()["CleanupFailures|Action=StopRuntimeSession"] == 1
    (line,) = [r.session for r in session_logs.records if hasattr(r, "session")]
    # Each failed session is named: a session may hold several of a kind.
    assert line["errors"] == {
        "StopRuntimeSession": f"{RUNTIME_SESSION}: AccessDeniedException: not allowed"
    }
    assert line["steps"]["DeleteConnection"] == "done"  # the other steps still ran


def test_an_unusable_session_id_is_logged_and_never_sent(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    record = agent_session_record(
        sandbox, "s-bad-ids", agentRuntimeSessionId="too-short", browserSessionId="has/slash"
    )
    cleaner = sandbox.cleaner(agent_config(sandbox))
    with Stubber(cleaner.clients.agentcore) as stub:
        stub.add_response(
            "stop_code_interpreter_session",
            {"codeInterpreterIdentifier": INTERPRETER_ID, "sessionId": "ci01", "lastUpdatedAt": 0},
            {"codeInterpreterIdentifier": INTERPRETER_ID, "sessionId": "ci01"},
        )
        result = cleaner.clean(record)
        stub.assert_no_pending_responses()
    assert result.outcome == "cleaned"
    assert result.log["invalidAttributes"] == ["agentRuntimeSessionId", "browserSessionId"]


def test_a_dry_run_sends_no_stop(sandbox: Sandbox) -> None:
    record = agent_session_record(sandbox, "s-dry")
    cleaner = sandbox.cleaner(agent_config(sandbox, dry_run=True))
    with Stubber(cleaner.clients.agentcore):  # no response queued: any call would raise
        result = cleaner.clean(record)
    assert result.outcome == "dry-run"
    assert result.log["steps"]["StopRuntimeSession"] == "dry-run"


def test_without_agentcore_targets_there_is_no_client_and_no_step(sandbox: Sandbox) -> None:
    cleaner = sandbox.cleaner()
    assert cleaner.clients.agentcore is None
    assert not {"StopRuntimeSession", "StopBrowserSession"} & {
        step.name for step in cleaner.session_steps
    }


def test_fails_a_runtime_arn_that_is_not_an_agentcore_runtime() -> None:
    bad = "arn:aws:lambda:us-east-1:123456789012:function:coder"
    with pytest.raises(ValueError, match=r"SESSION_EXPIRY_AGENT_RUNTIME_ARN=.*lambda.*runtime/"):
        validate_cleanup_config(RuntimeConfig(agent_runtime_arn=bad))


def test_the_attribute_names_come_from_the_environment() -> None:
    config = RuntimeConfig.from_env(
        {
            "SESSION_EXPIRY_AGENT_RUNTIME_ARN": RUNTIME_ARN,
            "SESSION_EXPIRY_AGENT_RUNTIME_SESSION_ATTRIBUTE": "rtSession",
            "SESSION_EXPIRY_BROWSER_ID": BROWSER_ID,
        }
    )
    assert (config.agent_runtime_arn, config.agent_runtime_session_attribute) == (
        RUNTIME_ARN,
        "rtSession",
    )
    assert config.browser_session_attribute == "browserSessionId"
    assert config.code_interpreter_id is None


def test_a_cleaner_built_from_the_environment_has_the_agentcore_client(
    monkeypatch: pytest.MonkeyPatch, aws: None
) -> None:
    monkeypatch.setenv("SESSION_EXPIRY_CODE_INTERPRETER_ID", INTERPRETER_ID)
    monkeypatch.setenv("SESSION_EXPIRY_OWNERSHIP_TABLE_NAME", "ownership")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://localhost:4566")
    from session_expiry_runtime.cleanup.cleaner import build_clients
    from session_expiry_runtime.core.metrics import MetricsRecorder

    config = RuntimeConfig.from_env()
    cleaner = SessionCleaner(config, build_clients(config), MetricsRecorder("t"))
    assert cleaner.clients.agentcore.meta.endpoint_url == "http://localhost:4566"
    assert [s.name for s in cleaner.session_steps] == ["StopCodeInterpreterSession"]


def test_fails_to_build_a_cleanup_with_agentcore_targets_and_no_ownership_table(
    aws: None,
) -> None:
    from session_expiry_runtime.cleanup.cleaner import build_clients
    from session_expiry_runtime.core.metrics import MetricsRecorder

    config = RuntimeConfig(browser_id=BROWSER_ID)  # no SESSION_EXPIRY_OWNERSHIP_TABLE_NAME
    with pytest.raises(
        ValueError, match=r"SESSION_EXPIRY_OWNERSHIP_TABLE_NAME is not set.*StopBrowserSession"
    ):
        SessionCleaner(config, build_clients(config), MetricsRecorder("t"))
