"""AgentCore session ids on a session: create(...) and attach_agent_session against moto's
DynamoDB, and the cleanup reading them back from the REMOVE record's old image."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from session_expiry_runtime.store import SessionGoneError, SessionStore

from ._support import raw_item

HOUR = timedelta(hours=1)
RUNTIME_SESSION = "rs-" + "0123456789abcdef" * 2  # 35 characters
KEY = {"pk": {"S": "s-1"}}


@pytest.fixture
def store(make_store: Any) -> SessionStore:
    return make_store()  # type: ignore[no-any-return]


def test_create_stores_the_agent_session_ids(store: SessionStore, ddb: Any) -> None:
    session = store.create(
        "s-1",
        ttl=HOUR,
        runtime_session_id=RUNTIME_SESSION,
        code_interpreter_session_id="ci01",
        browser_session_id="br01",
    )
    item = raw_item(ddb, KEY)
    assert item is not None
    assert item["agentRuntimeSessionId"] == {"S": RUNTIME_SESSION}
    assert item["codeInterpreterSessionId"] == {"S": "ci01"}
    assert item["browserSessionId"] == {"S": "br01"}
    assert (session.agent_runtime_session_id, session.browser_session_id) == (
        RUNTIME_SESSION,
        "br01",
    )
    assert "agentRuntimeSessionId" not in session.attributes


def test_attach_writes_only_the_ids_given(store: SessionStore, ddb: Any) -> None:
    store.create("s-1", ttl=HOUR, browser_session_id="br01")
    session = store.attach_agent_session("s-1", code_interpreter_session_id="ci02")
    item = raw_item(ddb, KEY)
    assert item is not None
    assert item["codeInterpreterSessionId"] == {"S": "ci02"}
    assert item["browserSessionId"] == {"S": "br01"}
    assert "agentRuntimeSessionId" not in item
    assert (session.code_interpreter_session_id, session.browser_session_id) == ("ci02", "br01")


def test_attach_uses_the_configured_attribute_names(make_store: Any, ddb: Any) -> None:
    store = make_store(agent_runtime_session_attribute="rtSession")
    store.create("s-1", ttl=HOUR)
    assert store.attach_agent_session("s-1", runtime_session_id=RUNTIME_SESSION)
    item = raw_item(ddb, KEY)
    assert item is not None and item["rtSession"] == {"S": RUNTIME_SESSION}


def test_fails_attach_to_an_expired_session(store: SessionStore, ddb: Any, clock: Any) -> None:
    store.create("s-1", ttl=HOUR)
    clock.advance(HOUR.total_seconds())
    with pytest.raises(SessionGoneError):
        store.attach_agent_session("s-1", browser_session_id="br01")
    item = raw_item(ddb, KEY)
    assert item is not None and "browserSessionId" not in item


def test_fails_attach_without_any_id(store: SessionStore) -> None:
    store.create("s-1", ttl=HOUR)
    with pytest.raises(ValueError, match="expected at least one of runtime_session_id"):
        store.attach_agent_session("s-1")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"runtime_session_id": "short"}, r"runtime session id 'short': expected 33-256"),
        ({"runtime_session_id": "x" * 257}, r"runtime session id 'x+': expected 33-256"),
        ({"code_interpreter_session_id": "has-dash"}, r"code interpreter session id 'has-dash'"),
        ({"browser_session_id": ""}, r"browser session id '': expected 1-40 letters and digits"),
        ({"browser_session_id": "b" * 41}, r"browser session id 'b+'"),
    ],
)
def test_fails_ids_the_agentcore_api_would_refuse(
    store: SessionStore, ddb: Any, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        store.create("s-1", ttl=HOUR, **kwargs)
    assert raw_item(ddb, KEY) is None
    store.create("s-1", ttl=HOUR)
    with pytest.raises(ValueError, match=message):
        store.attach_agent_session("s-1", **kwargs)


def test_fails_an_application_attribute_named_like_an_agent_session(
    store: SessionStore,
) -> None:
    with pytest.raises(ValueError, match="reserved for the key or the runtime"):
        store.create("s-1", ttl=HOUR, attributes={"browserSessionId": "br01"})


def test_ending_a_session_has_the_cleanup_stop_its_agent_sessions(aws: None) -> None:
    # moto implements no AgentCore operation: the cleanup's client is stubbed (botocore
    # Stubber), the table, its stream and the other targets are moto's.
    import dataclasses

    from botocore.stub import Stubber
    from runtime.runtime_support import Sandbox

    sandbox = Sandbox()
    config = dataclasses.replace(
        sandbox.config,
        agent_runtime_arn="arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/r-Ab12Cd34Ef",
        browser_id="coder_browser-Ab12Cd34Ef",
    )
    store = SessionStore(dynamodb_client=sandbox.ddb, kms_client=sandbox.kms, config=config)
    store.create("s-agent", ttl=HOUR, runtime_session_id=RUNTIME_SESSION)
    store.attach_agent_session("s-agent", browser_session_id="br01")
    sandbox.read_stream()
    store.end("s-agent")
    (record,) = sandbox.removes()
    cleaner = sandbox.cleaner(config)
    with Stubber(cleaner.clients.agentcore) as stub:
        stub.add_response(
            "stop_runtime_session",
            {"runtimeSessionId": RUNTIME_SESSION, "statusCode": 200},
            {"runtimeSessionId": RUNTIME_SESSION, "agentRuntimeArn": config.agent_runtime_arn},
        )
        stub.add_client_error(
            "stop_browser_session", "ResourceNotFoundException", http_status_code=404
        )
        result = cleaner.clean(record)
        stub.assert_no_pending_responses()
    assert result.outcome == "cleaned"
    assert result.log["steps"]["StopRuntimeSession"] == "done"
    assert result.log["steps"]["StopBrowserSession"] == "already-done"
