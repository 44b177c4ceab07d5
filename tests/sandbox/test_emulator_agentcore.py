"""The emulator answers the AgentCore Stop operations moto lacks, in AWS's wire format."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from cdk_session_expiry.testing import AgentCoreCall, Fault, LocalEmulator
from cdk_session_expiry.testing.agentcore import BROWSER, CODE_INTERPRETER, RUNTIME

RUNTIME_ARN = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/coder_agent-a1B2c3D4e5"
RUNTIME_SESSION = "rs-" + "0123456789abcdef" * 2  # 35 characters: the API takes 33-256


@pytest.fixture
def agentcore(emulator: LocalEmulator):  # type: ignore[no-untyped-def]
    emulator.agentcore.reset()
    return emulator.client("bedrock-agentcore")


def _error(raised: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    response = raised.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


def test_a_running_runtime_session_stops_once_then_is_not_found(
    emulator: LocalEmulator, agentcore: object
) -> None:
    emulator.start_agent_session(RUNTIME, RUNTIME_ARN, RUNTIME_SESSION)
    answer = agentcore.stop_runtime_session(  # type: ignore[attr-defined]
        agentRuntimeArn=RUNTIME_ARN, runtimeSessionId=RUNTIME_SESSION
    )
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert answer["runtimeSessionId"] == RUNTIME_SESSION
    assert emulator.agentcore.running() == set()

    with pytest.raises(ClientError) as again:
        agentcore.stop_runtime_session(  # type: ignore[attr-defined]
            agentRuntimeArn=RUNTIME_ARN, runtimeSessionId=RUNTIME_SESSION
        )
    assert _error(again) == ("ResourceNotFoundException", 404)
    assert emulator.agentcore.calls == [
        AgentCoreCall("StopRuntimeSession", RUNTIME_ARN, RUNTIME_SESSION, None, True),
        AgentCoreCall("StopRuntimeSession", RUNTIME_ARN, RUNTIME_SESSION, None, False),
    ]


def test_a_runtime_session_stops_only_on_its_own_endpoint(
    emulator: LocalEmulator, agentcore: object
) -> None:
    emulator.start_agent_session(RUNTIME, RUNTIME_ARN, RUNTIME_SESSION, qualifier="prod")
    with pytest.raises(ClientError) as default_endpoint:
        agentcore.stop_runtime_session(  # type: ignore[attr-defined]
            agentRuntimeArn=RUNTIME_ARN, runtimeSessionId=RUNTIME_SESSION
        )
    assert _error(default_endpoint)[0] == "ResourceNotFoundException"
    agentcore.stop_runtime_session(  # type: ignore[attr-defined]
        agentRuntimeArn=RUNTIME_ARN, runtimeSessionId=RUNTIME_SESSION, qualifier="prod"
    )
    assert [(c.qualifier, c.stopped) for c in emulator.agentcore.calls] == [
        (None, False),
        ("prod", True),
    ]


def test_code_interpreter_and_browser_sessions(emulator: LocalEmulator, agentcore: object) -> None:
    emulator.start_agent_session(CODE_INTERPRETER, "aws.codeinterpreter.v1", "ci01")
    emulator.start_agent_session(BROWSER, "web-Q1w2E3r4T5", "br01")
    emulator.start_agent_session(BROWSER, "web-Q1w2E3r4T5", "br02")

    stopped = agentcore.stop_code_interpreter_session(  # type: ignore[attr-defined]
        codeInterpreterIdentifier="aws.codeinterpreter.v1", sessionId="ci01"
    )
    assert (stopped["codeInterpreterIdentifier"], stopped["sessionId"]) == (
        "aws.codeinterpreter.v1",
        "ci01",
    )
    assert stopped["lastUpdatedAt"].tzinfo is not None
    agentcore.stop_browser_session(  # type: ignore[attr-defined]
        browserIdentifier="web-Q1w2E3r4T5", sessionId="br01"
    )
    with pytest.raises(ClientError) as unknown:
        agentcore.stop_browser_session(  # type: ignore[attr-defined]
            browserIdentifier="aws.browser.v1", sessionId="br02"
        )
    assert _error(unknown) == ("ResourceNotFoundException", 404)
    assert emulator.agentcore.running() == {("web-Q1w2E3r4T5", "br02")}
    assert [(c.operation, c.stopped) for c in emulator.agentcore.calls] == [
        ("StopCodeInterpreterSession", True),
        ("StopBrowserSession", True),
        ("StopBrowserSession", False),
    ]


def test_a_fault_refuses_a_stop_before_the_emulator_answers_it(
    emulator: LocalEmulator, agentcore: object
) -> None:
    emulator.start_agent_session(BROWSER, "aws.browser.v1", "br03")
    fault = emulator.inject_fault(
        Fault(
            method="PUT",
            path="/browsers/aws.browser.v1/sessions/stop",
            code="AccessDeniedException",
        )
    )
    try:
        with pytest.raises(ClientError) as denied:
            agentcore.stop_browser_session(  # type: ignore[attr-defined]
                browserIdentifier="aws.browser.v1", sessionId="br03"
            )
        assert _error(denied) == ("AccessDeniedException", 403)
        assert emulator.agentcore.calls == []
        assert emulator.agentcore.running() == {("aws.browser.v1", "br03")}
    finally:
        emulator.clear_fault(fault)


def test_fails_on_an_unknown_kind_or_a_tool_qualifier(emulator: LocalEmulator) -> None:
    with pytest.raises(ValueError, match=r"kind='gateway': expected one of runtime"):
        emulator.start_agent_session("gateway", "x", "s")
    with pytest.raises(ValueError, match=r"qualifier='prod': only runtime sessions have one"):
        emulator.start_agent_session(BROWSER, "aws.browser.v1", "s", qualifier="prod")


def test_tool_sessions_are_listed_page_by_page_in_the_emulators_vocabulary(
    emulator: LocalEmulator, agentcore: object
) -> None:
    from datetime import datetime, timezone

    from cdk_session_expiry.testing.agentcore import REFERENCE_VOCABULARY

    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    for n in range(3):
        emulator.start_agent_session(
            CODE_INTERPRETER, "coder-Ab12Cd34Ef", f"ci{n}", created_at=created
        )
    emulator.start_agent_session(CODE_INTERPRETER, "other-Ab12Cd34Ef", "elsewhere")
    agentcore.stop_code_interpreter_session(  # type: ignore[attr-defined]
        codeInterpreterIdentifier="coder-Ab12Cd34Ef", sessionId="ci1"
    )
    list_page = agentcore.list_code_interpreter_sessions  # type: ignore[attr-defined]

    first = list_page(codeInterpreterIdentifier="coder-Ab12Cd34Ef", status="READY", maxResults=1)
    second = list_page(
        codeInterpreterIdentifier="coder-Ab12Cd34Ef",
        status="READY",
        maxResults=1,
        nextToken=first["nextToken"],
    )
    assert [s["sessionId"] for s in first["items"] + second["items"]] == ["ci0", "ci2"]
    assert "nextToken" not in second and first["items"][0]["createdAt"] == created
    everything = list_page(codeInterpreterIdentifier="coder-Ab12Cd34Ef")
    assert {s["sessionId"]: s["status"] for s in everything["items"]} == {
        "ci0": "READY",
        "ci1": "TERMINATED",
        "ci2": "READY",
    }
    with pytest.raises(ClientError) as other_vocabulary:
        list_page(codeInterpreterIdentifier="coder-Ab12Cd34Ef", status="ACTIVE")
    assert _error(other_vocabulary) == ("ValidationException", 400)

    emulator.agentcore.vocabulary = REFERENCE_VOCABULARY
    active = list_page(codeInterpreterIdentifier="coder-Ab12Cd34Ef", status="ACTIVE")
    assert [(s["sessionId"], s["status"]) for s in active["items"]] == [
        ("ci0", "ACTIVE"),
        ("ci2", "ACTIVE"),
    ]
    browsers = agentcore.list_browser_sessions(browserIdentifier="coder-Ab12Cd34Ef")  # type: ignore[attr-defined]
    assert browsers["items"] == []
