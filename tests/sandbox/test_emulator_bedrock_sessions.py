"""The emulator answers Bedrock session management (``bedrock-agent-runtime``), which moto lacks,
in AWS's wire format: through its server, and in-process through ``attach``."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from cdk_session_expiry.testing import Fault, LocalEmulator
from cdk_session_expiry.testing.bedrock_sessions import ENDED, BedrockSessions


@pytest.fixture
def runtime(emulator: LocalEmulator) -> Any:
    emulator.bedrock_sessions.reset()
    return emulator.client("bedrock-agent-runtime")


def _error(raised: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    response = raised.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


def _step(runtime: Any, session_id: str, invocation_id: str, text: str, at: int) -> str:
    answer = runtime.put_invocation_step(
        sessionIdentifier=session_id,
        invocationIdentifier=invocation_id,
        invocationStepTime=at,
        payload={"contentBlocks": [{"text": text}]},
    )
    return str(answer["invocationStepId"])


def test_a_session_is_ended_then_deleted_with_its_steps_and_then_not_found(
    emulator: LocalEmulator, runtime: Any
) -> None:
    created = runtime.create_session(sessionMetadata={"user": "u-1"})
    session_id, arn = created["sessionId"], created["sessionArn"]
    assert arn == f"arn:aws:bedrock:us-east-1:123456789012:session/{session_id}"
    assert created["sessionStatus"] == "ACTIVE"
    invocation = runtime.create_invocation(sessionIdentifier=session_id)["invocationId"]
    _step(runtime, session_id, invocation, "hello", 1_700_000_000)

    with pytest.raises(ClientError) as active:
        runtime.delete_session(sessionIdentifier=session_id)
    assert _error(active) == ("ConflictException", 409)  # "You can't delete ... ACTIVE"
    ended = runtime.end_session(sessionIdentifier=arn)  # by ARN as well as by id
    assert (ended["sessionId"], ended["sessionStatus"]) == (session_id, ENDED)
    with pytest.raises(ClientError) as closed:
        runtime.create_invocation(sessionIdentifier=session_id)  # ended: nothing can be added
    assert _error(closed) == ("ConflictException", 409)
    assert runtime.get_session(sessionIdentifier=session_id)["sessionMetadata"] == {"user": "u-1"}
    assert emulator.bedrock_sessions.steps(session_id) == 1  # ended: still readable

    runtime.delete_session(sessionIdentifier=arn)
    assert emulator.bedrock_sessions.status(session_id) is None
    assert emulator.bedrock_sessions.steps(session_id) == 0
    for call in (runtime.end_session, runtime.delete_session, runtime.get_session):
        with pytest.raises(ClientError) as gone:
            call(sessionIdentifier=session_id)
        assert _error(gone) == ("ResourceNotFoundException", 404)
    operations = [(c.operation, c.status) for c in emulator.bedrock_sessions.calls]
    assert operations[-4:] == [
        ("DeleteSession", 200),
        ("EndSession", 404),
        ("DeleteSession", 404),
        ("GetSession", 404),
    ]


def test_ending_a_session_twice_or_an_expired_one_is_a_conflict(
    emulator: LocalEmulator, runtime: Any
) -> None:
    # AWS lists ConflictException for EndSession without saying when: the emulator's choice.
    first = runtime.create_session()["sessionId"]
    runtime.end_session(sessionIdentifier=first)
    second = runtime.create_session()["sessionId"]
    emulator.bedrock_sessions.expire(second)
    for session_id in (first, second):
        with pytest.raises(ClientError) as again:
            runtime.end_session(sessionIdentifier=session_id)
        assert _error(again) == ("ConflictException", 409)
        runtime.delete_session(sessionIdentifier=session_id)  # ended or expired: deletable
    assert emulator.bedrock_sessions.session_ids() == set()


def test_steps_list_newest_first_page_by_page(runtime: Any) -> None:
    session_id = runtime.create_session()["sessionId"]
    invocation = runtime.create_invocation(sessionIdentifier=session_id)["invocationId"]
    other = runtime.create_invocation(sessionIdentifier=session_id)["invocationId"]
    ids = [_step(runtime, session_id, invocation, f"turn {i}", 1_700_000_000 + i) for i in range(5)]
    _step(runtime, session_id, other, "elsewhere", 1_800_000_000)

    listed, token, pages = [], None, 0
    while True:
        page = runtime.list_invocation_steps(
            sessionIdentifier=session_id,
            invocationIdentifier=invocation,
            maxResults=2,
            **({"nextToken": token} if token else {}),
        )
        pages += 1
        listed += [s["invocationStepId"] for s in page["invocationStepSummaries"]]
        token = page.get("nextToken")
        if not token:
            break
    assert (listed, pages) == (ids[::-1], 3)
    step = runtime.get_invocation_step(
        sessionIdentifier=session_id, invocationIdentifier=invocation, invocationStepId=ids[2]
    )["invocationStep"]
    assert step["payload"] == {"contentBlocks": [{"text": "turn 2"}]}
    assert step["invocationStepTime"].timestamp() == 1_700_000_002
    with pytest.raises(ClientError) as reused:
        runtime.create_invocation(sessionIdentifier=session_id, invocationId=invocation)
    assert _error(reused) == ("ConflictException", 409)  # what the checkpointer relies on


def test_a_fault_refuses_a_delete_before_the_emulator_answers_it(
    emulator: LocalEmulator, runtime: Any
) -> None:
    session_id = runtime.create_session()["sessionId"]
    runtime.end_session(sessionIdentifier=session_id)
    fault = emulator.inject_fault(
        Fault("DELETE", f"/sessions/{session_id}/", 500, "InternalServerException")
    )
    try:
        with pytest.raises(ClientError) as failed:
            emulator.client("bedrock-agent-runtime", config=_no_retries()).delete_session(
                sessionIdentifier=session_id
            )
        assert _error(failed) == ("InternalServerException", 500)
        assert emulator.bedrock_sessions.status(session_id) == ENDED
    finally:
        emulator.clear_fault(fault)


def test_attach_answers_an_in_process_client_the_same_way() -> None:
    sessions = BedrockSessions("111122223333")
    client = sessions.attach(
        boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name="eu-west-1"
        ).client("bedrock-agent-runtime")
    )
    created = client.create_session()
    assert created["sessionArn"].startswith("arn:aws:bedrock:eu-west-1:111122223333:session/")
    with pytest.raises(ClientError) as invalid:
        client.end_session(sessionIdentifier="not-a-uuid")
    assert _error(invalid) == ("ValidationException", 400)
    client.end_session(sessionIdentifier=created["sessionId"])
    client.delete_session(sessionIdentifier=created["sessionArn"])
    assert sessions.session_ids() == set()


def _no_retries() -> Any:
    from botocore.config import Config

    return Config(retries={"mode": "standard", "max_attempts": 1})


def test_langgraphs_checkpointer_keeps_and_resumes_a_thread_through_the_server(
    emulator: LocalEmulator, runtime: Any
) -> None:
    """The calls ``BedrockSessionSaver`` makes (``langgraph-checkpoint-aws``, installed by the
    dev extra) against the emulator's server: a thread resumes from its last checkpoint, and is
    gone once the session is ended and deleted."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph_checkpoint_aws import BedrockSessionSaver

    class Chat(TypedDict):
        turns: list[str]

    graph = StateGraph(Chat)
    graph.add_node("reply", lambda state: {"turns": [*state["turns"], "pong"]})
    graph.add_edge(START, "reply")
    graph.add_edge("reply", END)
    app = graph.compile(checkpointer=BedrockSessionSaver(client=runtime))
    thread = {"configurable": {"thread_id": runtime.create_session()["sessionId"]}}

    app.invoke({"turns": ["ping"]}, thread)
    resumed = app.get_state(thread).values["turns"]
    app.invoke({"turns": [*resumed, "again"]}, thread)
    assert app.get_state(thread).values == {"turns": ["ping", "pong", "again", "pong"]}
    operations = {c.operation for c in emulator.bedrock_sessions.calls}
    assert {"CreateInvocation", "PutInvocationStep", "ListInvocationSteps"} <= operations

    session_id = thread["configurable"]["thread_id"]
    runtime.end_session(sessionIdentifier=session_id)
    runtime.delete_session(sessionIdentifier=session_id)
    assert app.get_state(thread).values == {}
