"""docs/agent-frameworks.md, LangGraph's ``DynamoDBSaver``: the custom-step recipe deletes the
threads a session owns with the saver's own ``delete_thread``, and no other thread.

The real ``langgraph`` graph and ``langgraph-checkpoint-aws``'s ``DynamoDBSaver`` write their
checkpoints to moto's DynamoDB; the recipe's module is the page's code, on ``sys.path`` as the
construct stages it; the cleanup is the real one (``process_batch``) with the custom step
configured as the construct configures it.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from docsite.doc_examples import REPO, examples
from langgraph.graph import END, START, StateGraph
from langgraph_checkpoint_aws import DynamoDBSaver
from runtime_support import REGION, SESSION, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import process_batch
from session_expiry_runtime.core.ownership import custom_kind

NAME = "DeleteLangGraphThreads"
TABLE = "langgraph-checkpoints"
STEPS = json.dumps(
    [
        {
            "name": NAME,
            "handler": "my_steps.langgraph_threads.delete_thread",
            "resourceAttribute": "langgraphThreads",
        }
    ]
)


class Chat(TypedDict):
    turns: list[str]


def _graph(saver: DynamoDBSaver) -> Any:
    graph = StateGraph(Chat)
    graph.add_node("reply", lambda state: {"turns": [*state["turns"], "pong"]})
    graph.add_edge(START, "reply")
    graph.add_edge("reply", END)
    return graph.compile(checkpointer=saver)


def _turns(saver: DynamoDBSaver, thread_id: str) -> list[str]:
    state = _graph(saver).get_state({"configurable": {"thread_id": thread_id}})
    return list(state.values.get("turns", []))


@pytest.fixture
def recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The page's ``my_steps/langgraph_threads.py``, staged as the construct stages it."""
    (source,) = [
        b.code
        for b in examples(REPO / "docs" / "agent-frameworks.md")
        if (b.marker or "").endswith("my_steps/langgraph_threads.py")
    ]
    package = tmp_path / "my_steps"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "langgraph_threads.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("CHECKPOINT_TABLE_NAME", TABLE)
    yield importlib.import_module("my_steps.langgraph_threads")
    for name in ("my_steps.langgraph_threads", "my_steps"):
        sys.modules.pop(name, None)


@pytest.fixture
def saver(sandbox: Sandbox) -> DynamoDBSaver:
    sandbox.ddb.create_table(
        TableName=TABLE,
        KeySchema=[
            {"AttributeName": "PK", "KeyType": "HASH"},
            {"AttributeName": "SK", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "PK", "AttributeType": "S"},
            {"AttributeName": "SK", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return DynamoDBSaver(table_name=TABLE, session=SESSION, region_name=REGION)


def test_the_threads_the_session_owns_are_deleted_and_a_forged_one_is_not(
    sandbox: Sandbox, saver: DynamoDBSaver, recipe: Any
) -> None:
    graph = _graph(saver)
    for thread in ("t-own", "t-own-2", "t-other"):
        graph.invoke({"turns": ["ping"]}, {"configurable": {"thread_id": thread}})
    # s-1 names its two threads and, forged, s-2's thread; each recorded by its own session.
    ours = sandbox.create_session(
        "s-1", extra={"langgraphThreads": {"SS": ["t-own", "t-own-2", "t-other"]}}
    )
    other = sandbox.create_session("s-2", extra={"langgraphThreads": {"SS": ["t-other"]}})
    for thread, session in (("t-own", ours), ("t-own-2", ours), ("t-other", other)):
        sandbox.claim(custom_kind(NAME), thread, session.session_id, str(session.incarnation))
    sandbox.read_stream()
    sandbox.delete("s-1")
    (record,) = sandbox.removes()
    cleaner = sandbox.cleaner(dataclasses.replace(sandbox.config, custom_steps=STEPS))

    assert process_batch(event(record), FakeContext(), cleaner)["batchItemFailures"] == []

    assert _turns(saver, "t-own") == []
    assert _turns(saver, "t-own-2") == []
    assert list(saver.list({"configurable": {"thread_id": "t-own"}})) == []
    assert _turns(saver, "t-other") == ["ping", "pong"]  # refused: NotOwned
    # Redelivered: nothing left is success (the saver's delete of an empty thread is a no-op).
    assert process_batch(event(record), FakeContext(), cleaner)["batchItemFailures"] == []
