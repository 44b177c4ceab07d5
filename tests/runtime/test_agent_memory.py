"""Agent data released (issue 24): a removed session's AgentCore Memory events (and, opted in,
its long-term records) are deleted — only its own, owned by the removed incarnation.

Against moto's AgentCore Memory events (``CreateEvent``/``ListEvents``/``DeleteEvent``), real
boto3 calls. moto's ``ListEvents`` never pages and moto has no memory records: the emulator's
:mod:`cdk_session_expiry.testing.models._moto_agentcore_memory` adds both, in the API's shapes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from runtime_support import SESSION, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, process_batch
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.ownership import KIND_AGENT_MEMORY
from session_expiry_runtime.owners.outcomes import StepFailed
from session_expiry_runtime.steps.agent_memory import AgentMemoryStep
from session_expiry_runtime.store import ResourceOwnedError, SessionStore

from cdk_session_expiry.testing.models import _moto_agentcore_memory

MEMORY_ID = "chat_memory-a1B2c3D4e5"
MEMORY_ARN = f"arn:aws:bedrock-agentcore:us-east-1:123456789012:memory/{MEMORY_ID}"
ACTOR = "user-1"
SUMMARIES = "/summaries/{actorId}/{sessionId}/"


@pytest.fixture
def memory(aws: None) -> Iterator[Any]:
    _moto_agentcore_memory.install()
    yield SESSION.client("bedrock-agentcore")
    _moto_agentcore_memory.uninstall()


def _config(sandbox: Sandbox, **changes: Any) -> RuntimeConfig:
    return dataclasses.replace(sandbox.config, agent_memory_id=MEMORY_ARN, **changes)


def _events(client: Any, session_id: str, count: int, actor: str = ACTOR) -> None:
    for i in range(count):
        client.create_event(
            memoryId=MEMORY_ARN,
            actorId=actor,
            sessionId=session_id,
            eventTimestamp=1_700_000_000 + i,
            payload=[{"conversational": {"content": {"text": f"turn {i}"}, "role": "USER"}}],
        )


def _left(client: Any, session_id: str, actor: str = ACTOR) -> int:
    found, token = 0, None
    while True:
        page = client.list_events(
            memoryId=MEMORY_ARN,
            actorId=actor,
            sessionId=session_id,
            maxResults=100,
            **({"nextToken": token} if token else {}),
        )
        found += len(page["events"])
        token = page.get("nextToken")
        if not token:
            return found


def _removed(
    sandbox: Sandbox, session_id: str, memory_sessions: list[str], *, claim_for: str | None = ""
) -> dict[str, Any]:
    """A removed session naming ``memory_sessions``, each claimed by it (``claim_for=None``: no
    claim; another incarnation's id: claimed by that one)."""
    extra = {"agentMemorySessions": {"SS": memory_sessions}}
    session = sandbox.create_session(session_id, extra=extra)
    for ref in memory_sessions:
        if claim_for is not None:
            sandbox.claim(KIND_AGENT_MEMORY, ref, session_id, claim_for or str(session.incarnation))
    sandbox.read_stream()
    sandbox.delete(session_id)
    (record,) = sandbox.removes()
    return record


def _run(cleaner: SessionCleaner, records: list[dict[str, Any]], **context: Any) -> list[str]:
    response = process_batch(event(*records), FakeContext(**context), cleaner)
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def _lines(logs: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.session for r in logs.records if hasattr(r, "session")]


def test_only_the_sessions_own_events_are_deleted_over_several_pages(
    sandbox: Sandbox, memory: Any, session_logs: pytest.LogCaptureFixture
) -> None:
    _events(memory, "m-own", 250)  # three ListEvents pages of 100
    _events(memory, "m-neighbour", 7)  # same actor, another session
    _events(memory, "m-own", 3, actor="user-2")  # same session id, another actor
    record = _removed(sandbox, "s-1", [f"{ACTOR}/m-own"])
    cleaner = sandbox.cleaner(_config(sandbox))
    calls: list[str] = []
    cleaner.clients.agentcore.meta.events.register(
        "before-call.bedrock-agentcore", lambda model, **_: calls.append(model.name)
    )

    assert _run(cleaner, [record]) == []

    assert _left(memory, "m-own") == 0
    assert _left(memory, "m-neighbour") == 7
    assert _left(memory, "m-own", actor="user-2") == 3
    assert calls.count("ListEvents") == 3
    assert calls.count("DeleteEvent") == 250
    (line,) = _lines(session_logs)
    assert line["steps"]["DeleteMemoryEvents"] == "done"
    assert line["agentMemory"] == {f"{ACTOR}/m-own": {"eventsDeleted": 250, "recordsDeleted": 0}}


def test_already_deleted_is_done_and_a_stopped_run_finishes_on_retry(
    sandbox: Sandbox, memory: Any, session_logs: pytest.LogCaptureFixture
) -> None:
    _events(memory, "m-own", 30)
    record = _removed(sandbox, "s-2", [f"{ACTOR}/m-own"])
    cleaner = sandbox.cleaner(_config(sandbox))
    # The time guard trips after the listing and 10 deletes (a check before every call): the
    # step fails with TimeGuard, and the redelivered record carries on.
    step = next(s for s in cleaner.session_steps if s.name == "DeleteMemoryEvents")
    assert isinstance(step, AgentMemoryStep)
    checks = iter(range(1_000))
    with pytest.raises(StepFailed, match="time guard"):
        step._release(ACTOR, "m-own", lambda: next(checks) >= 11)
    assert _left(memory, "m-own") == 20

    assert _run(cleaner, [record]) == []  # the redelivered record deletes the rest
    assert _left(memory, "m-own") == 0
    # Deleted meanwhile by someone else: ResourceNotFoundException is done, not a failure.
    _events(memory, "m-again", 2)
    ids = [
        e["eventId"]
        for e in memory.list_events(memoryId=MEMORY_ARN, actorId=ACTOR, sessionId="m-again")[
            "events"
        ]
    ]
    memory.delete_event(memoryId=MEMORY_ARN, actorId=ACTOR, sessionId="m-again", eventId=ids[0])
    assert (
        step._delete(
            "DeleteMemoryEvents",
            memory.delete_event,
            lambda: False,
            memoryId=MEMORY_ARN,
            actorId=ACTOR,
            sessionId="m-again",
            eventId=ids[0],
        )
        == 0
    )
    # A second delivery of the cleaned record: its claim is released, no call, already done.
    session_logs.clear()
    assert _run(cleaner, [record]) == []
    (line,) = _lines(session_logs)
    assert line["steps"]["DeleteMemoryEvents"] == "already-done"


def test_the_time_guard_stops_between_deletes(sandbox: Sandbox, memory: Any) -> None:
    _events(memory, "m-slow", 5)
    record = _removed(sandbox, "s-3", [f"{ACTOR}/m-slow"])
    cleaner = sandbox.cleaner(_config(sandbox, time_guard_ms=10_000))

    failed = _run(cleaner, [record], remaining_ms=9_000)  # already below the guard's margin

    assert failed == [record["dynamodb"]["SequenceNumber"]]
    assert _left(memory, "m-slow") == 5


def test_a_memory_session_another_incarnation_holds_is_left_alone(
    sandbox: Sandbox, memory: Any, session_logs: pytest.LogCaptureFixture
) -> None:
    _events(memory, "m-reused", 4)
    record = _removed(sandbox, "s-4", [f"{ACTOR}/m-reused"], claim_for="a-later-incarnation")

    assert _run(sandbox.cleaner(_config(sandbox)), [record]) == []

    assert _left(memory, "m-reused") == 4
    (line,) = _lines(session_logs)
    assert line["ownership"]["DeleteMemoryEvents"] == {f"{ACTOR}/m-reused": "Superseded"}


def test_long_term_records_are_deleted_only_in_the_sessions_own_namespaces(
    sandbox: Sandbox, memory: Any
) -> None:
    def seed(namespace: str) -> None:
        memory.batch_create_memory_records(
            memoryId=MEMORY_ARN,
            records=[
                {
                    "requestIdentifier": f"r{i}",
                    "namespaces": [namespace],
                    "content": {"text": f"summary {i}"},
                    "timestamp": 1_700_000_000,
                }
                for i in range(3)
            ],
        )

    own, neighbour, actor_wide = (
        f"/summaries/{ACTOR}/m-own/",
        f"/summaries/{ACTOR}/m-other/",
        f"/facts/{ACTOR}/",
    )
    for namespace in (own, neighbour, actor_wide):
        seed(namespace)
    record = _removed(sandbox, "s-5", [f"{ACTOR}/m-own"])
    config = _config(sandbox, agent_memory_record_namespaces=(SUMMARIES,))

    assert _run(sandbox.cleaner(config), [record]) == []

    def left(namespace: str) -> int:
        return len(
            memory.list_memory_records(memoryId=MEMORY_ARN, namespace=namespace)[
                "memoryRecordSummaries"
            ]
        )

    assert (left(own), left(neighbour), left(actor_wide)) == (0, 3, 3)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('["/s/{sessionId}/", "/a/{actorId}/{sessionId}"]', "ok"),
        ('["{actorId}/{sessionId}", "/a/{sessionId}/b/{actorId}"]', "ok"),
        ('["/facts/{actorId}/"]', "has no {sessionId}"),
        ('["/x/{memoryStrategyId}/{sessionId}/"]', "only the placeholders"),
        ('"/s/{sessionId}/"', "JSON list"),
        # Review of issue 24: actor "a" with session "b-c" and actor "a-b" with session "c" both
        # fill this to "/s/a-b-c/": one session's cleanup would delete the other's records.
        ('["/s/{actorId}-{sessionId}/"]', "a whole segment"),
        ('["/s/{actorId}/x{sessionId}"]', "a whole segment"),
        ('["{sessionId}_{actorId}"]', "a whole segment"),
    ],
)
def test_fails_on_a_record_namespace_that_is_not_one_sessions(raw: str, expected: str) -> None:
    env = {"SESSION_EXPIRY_AGENT_MEMORY_RECORD_NAMESPACES": raw}
    if expected == "ok":
        assert len(RuntimeConfig.from_env(env).agent_memory_record_namespaces) == 2
        return
    with pytest.raises(ValueError, match=expected.replace("{", r"\{").replace("}", r"\}")):
        RuntimeConfig.from_env(env)


# --- the store records the memory session, claimed ---------------------------------------------
def test_attach_memory_session_records_and_claims_it(sandbox: Sandbox) -> None:
    store = SessionStore(config=sandbox.config, dynamodb_client=sandbox.ddb)
    store.create("s-6")
    session = store.attach_memory_session("s-6", actor_id=ACTOR, memory_session_id="m-6")
    assert session.attributes["agentMemorySessions"] == {f"{ACTOR}/m-6"}
    store.create("s-7")
    with pytest.raises(ResourceOwnedError, match="AgentCore Memory session"):
        store.attach_memory_session("s-7", actor_id=ACTOR, memory_session_id="m-6")
    with pytest.raises(ValueError, match="memory session id"):
        store.attach_memory_session("s-7", actor_id=ACTOR, memory_session_id="no/slash")
