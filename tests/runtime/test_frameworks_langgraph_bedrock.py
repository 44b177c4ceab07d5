"""docs/agent-frameworks.md, LangGraph's ``BedrockSessionSaver``: the checkpoints a LangGraph
graph keeps in a Bedrock session are deleted with the session that owns it (the Bedrock session
kind), and another session's are not.

The real ``langgraph`` graph and ``langgraph-checkpoint-aws``'s ``BedrockSessionSaver`` write to
the emulator's Bedrock session management (`cdk_session_expiry.testing.bedrock_sessions`,
in-process: moto has none); the cleanup is the real one on the real REMOVE record.
"""

from __future__ import annotations

from typing import Any, TypedDict

from bedrock_support import bedrock_cleaner, bedrock_client, removed_naming
from langgraph.graph import END, START, StateGraph
from langgraph_checkpoint_aws import BedrockSessionSaver
from runtime_support import FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import process_batch

from cdk_session_expiry.testing.bedrock_sessions import BedrockSessions


class Chat(TypedDict):
    turns: list[str]


def _graph(saver: BedrockSessionSaver) -> Any:
    graph = StateGraph(Chat)
    graph.add_node("reply", lambda state: {"turns": [*state["turns"], "pong"]})
    graph.add_edge(START, "reply")
    graph.add_edge("reply", END)
    return graph.compile(checkpointer=saver)


def _thread(bedrock_session_id: str) -> dict[str, Any]:
    # The saver's thread id is the Bedrock session's id (it never creates the session itself).
    return {"configurable": {"thread_id": bedrock_session_id}}


def test_the_checkpoints_go_with_the_session_and_a_neighbours_stay(sandbox: Sandbox) -> None:
    sessions = BedrockSessions("123456789012")
    client = bedrock_client(sessions)
    saver = BedrockSessionSaver(client=client)
    app = _graph(saver)
    ours = client.create_session()["sessionId"]
    theirs = client.create_session()["sessionId"]
    app.invoke({"turns": ["ping"]}, _thread(ours))
    turns = app.get_state(_thread(ours)).values["turns"]
    app.invoke({"turns": [*turns, "ping again"]}, _thread(ours))
    app.invoke({"turns": ["hello"]}, _thread(theirs))
    assert len(list(saver.list(_thread(ours)))) >= 2  # the checkpoints, as LangGraph lists them
    removed_naming(sandbox, "s-2", [theirs], remove=False)
    record = removed_naming(sandbox, "s-1", [ours])

    response = process_batch(event(record), FakeContext(), bedrock_cleaner(sandbox, sessions))

    assert response["batchItemFailures"] == []
    assert saver.get_tuple(_thread(ours)) is None
    assert list(saver.list(_thread(ours))) == []
    assert app.get_state(_thread(ours)).values == {}
    assert sessions.status(ours) is None
    assert app.get_state(_thread(theirs)).values == {"turns": ["hello", "pong"]}
