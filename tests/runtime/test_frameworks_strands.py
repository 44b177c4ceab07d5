"""docs/agent-frameworks.md, Strands Agents: a Strands agent whose ``S3SessionManager`` keeps its
conversation under the session's scratch prefix loses it with the session.

The real ``strands-agents`` (``Agent``, ``S3SessionManager``) writes to moto's S3; only the model
is scripted (a ``Model`` that answers "pong" without calling Bedrock). The cleanup is the real
one (``process_batch``, the scratch step) on the real REMOVE record.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import pytest
from runtime_support import BUCKET, SESSION, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import process_batch
from strands import Agent
from strands.models import Model
from strands.session import S3SessionManager

CHAT = "chat-1"


class ScriptedModel(Model):
    """Answers every turn with "pong": Strands' own loop, no model behind it."""

    def update_config(self, **model_config: Any) -> None:
        del model_config

    def get_config(self) -> Any:
        return {}

    async def structured_output(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        raise NotImplementedError
        yield  # pragma: no cover - makes this an async generator

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockDelta": {"delta": {"text": "pong"}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


def _manager(prefix: str) -> S3SessionManager:
    # The recipe: the agent's state under the session's own scratch prefix.
    return S3SessionManager(session_id=CHAT, bucket=BUCKET, prefix=prefix, boto_session=SESSION)


def _converse(prefix: str, *turns: str) -> list[Any]:
    agent = Agent(model=ScriptedModel(), session_manager=_manager(prefix), callback_handler=None)
    for turn in turns:
        agent(turn)
    return list(agent.messages)


def test_the_agents_conversation_under_the_scratch_prefix_is_deleted_with_the_session(
    sandbox: Sandbox,
) -> None:
    ours = sandbox.create_session("s-1", object_names=())
    neighbour = sandbox.create_session("s-2", object_names=())
    _converse(ours.prefix, "ping", "ping again")
    _converse(neighbour.prefix, "hello")
    stored = sandbox.keys_under(ours.prefix)
    assert f"{ours.prefix}session_{CHAT}/session.json" in stored
    assert len([k for k in stored if "/messages/message_" in k]) == 4  # two turns, two replies
    # A new agent on the same prefix resumes the conversation: it is really stored there.
    assert len(_converse(ours.prefix)) == 4

    sandbox.read_stream()
    sandbox.delete("s-1")
    (record,) = sandbox.removes()
    response = process_batch(event(record), FakeContext(), sandbox.cleaner())

    assert response["batchItemFailures"] == []
    assert sandbox.keys_under(ours.prefix) == []  # session.json, agent.json, every message
    assert _converse(ours.prefix) == []  # a new agent starts from nothing
    # Another session's conversation (its own scratch prefix) is untouched.
    assert len(_converse(neighbour.prefix)) == 2


@pytest.mark.parametrize("prefix", ["agents/", ""])
def test_a_conversation_outside_the_scratch_prefix_remains(sandbox: Sandbox, prefix: str) -> None:
    # What remains: the cleanup derives the one prefix it may delete from the record's keys,
    # so state a session manager keeps anywhere else is not the session's to release.
    ours = sandbox.create_session("s-3", object_names=())
    _converse(prefix, "ping")
    sandbox.read_stream()
    sandbox.delete("s-3")
    (record,) = sandbox.removes()

    assert process_batch(event(record), FakeContext(), sandbox.cleaner())["batchItemFailures"] == []
    assert sandbox.keys_under(ours.prefix) == []
    assert len([k for k in sandbox.keys_under(f"{prefix}session_{CHAT}/") if "message_" in k]) == 2
