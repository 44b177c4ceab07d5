"""AgentCore session ids on a session: create(...) and attach_agent_session against moto's
DynamoDB, and the cleanup reading them back from the REMOVE record's old image."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from botocore.stub import Stubber
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
    # stop_previous=False: no code interpreter is configured to stop replaced sessions on.
    session = store.attach_agent_session(
        "s-1", code_interpreter_session_id="ci02", stop_previous=False
    )
    item = raw_item(ddb, KEY)
    assert item is not None
    assert item["codeInterpreterSessionId"] == {"S": "ci02"}
    assert item["browserSessionId"] == {"S": "br01"}
    assert "agentRuntimeSessionId" not in item
    assert (session.code_interpreter_session_id, session.browser_session_id) == ("ci02", "br01")


def test_attach_uses_the_configured_attribute_names(make_store: Any, ddb: Any) -> None:
    store = make_store(agent_runtime_session_attribute="rtSession")
    store.create("s-1", ttl=HOUR)
    assert store.attach_agent_session(
        "s-1", runtime_session_id=RUNTIME_SESSION, stop_previous=False
    )
    item = raw_item(ddb, KEY)
    assert item is not None and item["rtSession"] == {"S": RUNTIME_SESSION}


def test_fails_attach_to_an_expired_session(store: SessionStore, ddb: Any, clock: Any) -> None:
    store.create("s-1", ttl=HOUR)
    clock.advance(HOUR.total_seconds())
    with pytest.raises(SessionGoneError):
        store.attach_agent_session("s-1", browser_session_id="br01", stop_previous=False)
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


# --- several sessions per kind; replaced ones stopped (issue 20) ----------------------------------
# moto implements no bedrock-agentcore operation: the store's AgentCore client is a real boto3
# client whose Stop…Session calls are answered by botocore's Stubber; DynamoDB (the session and
# ownership tables) is moto's.
RUNTIME_ARN = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/r-Ab12Cd34Ef"
RUNTIME_2 = "rs-" + "fedcba9876543210" * 2


@pytest.fixture
def stop_calls() -> list[tuple[str, dict[str, Any]]]:
    """Every Stop…Session call the store's AgentCore client made (operation, parameters),
    answered or not: a Stubber error for an unexpected call is one the store would log."""
    return []


@pytest.fixture
def agentcore(stop_calls: list[tuple[str, dict[str, Any]]]) -> Any:
    import boto3

    client = boto3.client("bedrock-agentcore", region_name="us-east-1")

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        stop_calls.append((model.name, dict(params)))

    client.meta.events.register("provide-client-params.bedrock-agentcore.*", record)
    return client


@pytest.fixture
def owning_store(make_store: Any, agentcore: Any) -> SessionStore:
    return make_store(  # type: ignore[no-any-return]
        ownership=True,
        agent_runtime_arn=RUNTIME_ARN,
        agent_runtime_qualifier="live",
        browser_id="app_browser-Ab12Cd34Ef",
        code_interpreter_id="app_interpreter-Ab12Cd34Ef",
        store_kwargs={"agentcore_client": agentcore},
    )


def _claim_state(ddb: Any, resource: str) -> str | None:
    from ._support import claim_of

    claim = claim_of(ddb, resource)
    return None if claim is None else str(claim["state"]["S"])


def test_every_session_of_a_kind_is_recorded(store: SessionStore, ddb: Any) -> None:
    store.create("s-1", ttl=HOUR, runtime_session_id=RUNTIME_SESSION)
    s = store.attach_agent_session("s-1", runtime_session_id=RUNTIME_2, stop_previous=False)
    assert s.agent_runtime_session_id == RUNTIME_2
    assert s.agent_runtime_session_ids == {RUNTIME_SESSION, RUNTIME_2}
    item = raw_item(ddb, KEY)
    assert item is not None
    assert item["agentRuntimeSessionId"] == {"S": RUNTIME_2}
    assert sorted(item["agentRuntimeSessionIds"]["SS"]) == sorted([RUNTIME_SESSION, RUNTIME_2])


def test_attach_stops_the_replaced_session_and_releases_its_claim(
    owning_store: SessionStore, agentcore: Any, ddb: Any
) -> None:
    owning_store.create(
        "s-1", ttl=HOUR, runtime_session_id=RUNTIME_SESSION, browser_session_id="br01"
    )
    with Stubber(agentcore) as stub:
        stub.add_response(
            "stop_runtime_session",
            {"runtimeSessionId": RUNTIME_SESSION, "statusCode": 200},
            {
                "runtimeSessionId": RUNTIME_SESSION,
                "agentRuntimeArn": RUNTIME_ARN,
                "qualifier": "live",
            },
        )
        s = owning_store.attach_agent_session("s-1", runtime_session_id=RUNTIME_2)
        stub.assert_no_pending_responses()
    assert s.agent_runtime_session_ids == {RUNTIME_2}
    assert s.browser_session_ids == {"br01"}  # only the kinds given are replaced
    item = raw_item(ddb, KEY)
    assert item is not None and item["agentRuntimeSessionIds"] == {"SS": [RUNTIME_2]}
    assert _claim_state(ddb, f"agentRuntime#{RUNTIME_SESSION}") == "released"
    assert _claim_state(ddb, f"agentRuntime#{RUNTIME_2}") == "held"
    assert _claim_state(ddb, "browser#br01") == "held"


def test_a_replaced_code_interpreter_session_is_stopped_on_the_configured_interpreter(
    owning_store: SessionStore, agentcore: Any, ddb: Any
) -> None:
    owning_store.create("s-1", ttl=HOUR, code_interpreter_session_id="ci01")
    with Stubber(agentcore) as stub:
        stub.add_response(
            "stop_code_interpreter_session",
            {
                "codeInterpreterIdentifier": "app_interpreter-Ab12Cd34Ef",
                "sessionId": "ci01",
                "lastUpdatedAt": "2026-01-01T00:00:00Z",
            },
            {"codeInterpreterIdentifier": "app_interpreter-Ab12Cd34Ef", "sessionId": "ci01"},
        )
        s = owning_store.attach_agent_session("s-1", code_interpreter_session_id="ci02")
        stub.assert_no_pending_responses()
    assert s.code_interpreter_session_ids == {"ci02"}
    assert _claim_state(ddb, "codeInterpreter#ci01") == "released"


def test_stop_previous_false_keeps_the_replaced_sessions_running_and_recorded(
    owning_store: SessionStore,
    agentcore: Any,
    ddb: Any,
    stop_calls: list[tuple[str, dict[str, Any]]],
) -> None:
    owning_store.create("s-1", ttl=HOUR, browser_session_id="br01")
    with Stubber(agentcore):  # no response queued: any Stop call would fail the test
        s = owning_store.attach_agent_session("s-1", browser_session_id="br02", stop_previous=False)
    assert s.browser_session_ids == {"br01", "br02"} and s.browser_session_id == "br02"
    assert _claim_state(ddb, "browser#br01") == "held"
    assert _claim_state(ddb, "browser#br02") == "held"


def test_an_ended_replaced_session_counts_as_stopped_and_a_refused_stop_stays_recorded(
    owning_store: SessionStore, agentcore: Any, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    owning_store.create("s-1", ttl=HOUR, browser_session_id="br01")
    owning_store.attach_agent_session("s-1", browser_session_id="br02", stop_previous=False)
    with Stubber(agentcore) as stub:
        stub.add_client_error(
            "stop_browser_session", "ResourceNotFoundException", http_status_code=404
        )
        stub.add_client_error("stop_browser_session", "AccessDeniedException", http_status_code=403)
        with caplog.at_level(logging.WARNING):
            s = owning_store.attach_agent_session("s-1", browser_session_id="br03")
        stub.assert_no_pending_responses()
    # Stopped in id order: br01 had ended (stopped), br02 could not be stopped.
    assert s.browser_session_ids == {"br02", "br03"}
    assert _claim_state(ddb, "browser#br01") == "released"
    assert _claim_state(ddb, "browser#br02") == "held"  # the cleanup still stops it at the end
    assert "br02" in caplog.text


def test_a_replaced_id_this_session_does_not_own_is_never_stopped(
    owning_store: SessionStore,
    agentcore: Any,
    ddb: Any,
    stop_calls: list[tuple[str, dict[str, Any]]],
) -> None:
    # A writer that bypasses the store adds s-2's browser session to s-1's set: the store
    # stops only ids whose ownership record names s-1's incarnation.
    owning_store.create("s-2", ttl=HOUR, browser_session_id="victim")
    owning_store.create("s-1", ttl=HOUR, browser_session_id="br01")
    ddb.update_item(
        TableName="sessions",
        Key=KEY,
        UpdateExpression="ADD #b :v",
        ExpressionAttributeNames={"#b": "browserSessionIds"},
        ExpressionAttributeValues={":v": {"SS": ["victim"]}},
    )
    with Stubber(agentcore) as stub:
        stub.add_response(
            "stop_browser_session",
            {
                "browserIdentifier": "app_browser-Ab12Cd34Ef",
                "sessionId": "br01",
                "lastUpdatedAt": "2026-01-01T00:00:00Z",
            },
            {"browserIdentifier": "app_browser-Ab12Cd34Ef", "sessionId": "br01"},
        )
        s = owning_store.attach_agent_session("s-1", browser_session_id="br02")
        stub.assert_no_pending_responses()
    assert [params["sessionId"] for _, params in stop_calls] == ["br01"]
    assert s.browser_session_ids == {"victim", "br02"}
    assert _claim_state(ddb, "browser#victim") == "held"


def test_fails_stop_previous_without_the_target_to_stop_on(store: SessionStore, ddb: Any) -> None:
    store.create("s-1", ttl=HOUR)
    before = raw_item(ddb, KEY)
    with pytest.raises(
        ValueError,
        match=r"agent_runtime_arn None: .*SESSION_EXPIRY_AGENT_RUNTIME_ARN.*stop_previous=False",
    ):
        store.attach_agent_session("s-1", runtime_session_id=RUNTIME_SESSION)
    assert raw_item(ddb, KEY) == before
