"""Sandbox phase: the AgentCore Memory data of ended sessions released, everyone else's kept.

The sample app is deployed with an AgentCore Memory and a summary namespace from context
(``deploy_context``), so the deployed cleanup deletes each ended session's memory events and
the long-term records under ``/summaries/{actorId}/{sessionId}/``. Before the cleanup runs:

* some sessions that will be ended record a memory session (``SessionStore.attach_memory_session``,
  claimed like every other resource) and get events through the emulator's AgentCore Memory
  (moto's events; its paging and the memory records are the emulator's,
  ``cdk_session_expiry.testing.models._moto_agentcore_memory``) — one with more than two
  ``ListEvents`` pages — and a summary record in their own namespace;
* the same actor has a neighbour memory session that no ended session owns, and an actor-wide
  record (``/facts/<actor>/``) no session namespace covers;
* some live sessions record memory sessions with events and records too.

``check`` then counts what is left: the ended sessions' events and summaries are gone;
the neighbours', the actor-wide records and the live sessions' are all there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdk_session_expiry import _runtime_contract as contract

MEMORY_ID = "sandbox_memory-AbCd123456"
SUMMARIES = "/summaries/{actorId}/{sessionId}/"
#: How many ended / live sessions get a memory session; events of each; the first ended one
#: gets more than two ListEvents pages (100 events a page).
ENDED, LIVE, EVENTS, MANY_EVENTS = 6, 3, 4, 230


def deploy_context() -> dict[str, str]:
    """``cdk deploy --context`` values naming the memory and the record namespace."""
    return {
        "sample:agentMemory": MEMORY_ID,
        "sample:agentMemoryRecordNamespaces": SUMMARIES,
    }


@dataclass
class MemoryPlan:
    memory: str
    #: session id -> (actor id, memory session id)
    ended: dict[str, tuple[str, str]] = field(default_factory=dict)
    live: dict[str, tuple[str, str]] = field(default_factory=dict)
    neighbours: list[tuple[str, str]] = field(default_factory=list)
    actor_wide: list[str] = field(default_factory=list)
    events_per_session: dict[tuple[str, str], int] = field(default_factory=dict)


def attach(
    emulator: Any,
    store: Any,
    cleanup_env: Mapping[str, str],
    *,
    ended: Sequence[str],
    live: Sequence[str],
) -> MemoryPlan:
    """Record memory sessions with events and records (see the module docstring).

    Raises:
        SystemExit: the deployed cleanup function has no AgentCore Memory.
    """
    memory = cleanup_env.get(contract.ENV_AGENT_MEMORY_ID)
    if not memory:
        raise SystemExit("the deployed cleanup function has no AgentCore Memory")
    client = emulator.client("bedrock-agentcore")
    plan = MemoryPlan(memory)
    for group, ids in ((plan.ended, ended[:ENDED]), (plan.live, live[:LIVE])):
        for session_id in ids:
            actor, memory_session = f"user-{session_id}", f"mem-{session_id}"
            store.attach_memory_session(
                session_id, actor_id=actor, memory_session_id=memory_session
            )
            group[session_id] = (actor, memory_session)
    for index, (actor, memory_session) in enumerate([*plan.ended.values(), *plan.live.values()]):
        count = MANY_EVENTS if index == 0 else EVENTS
        _events(client, memory, actor, memory_session, count)
        plan.events_per_session[(actor, memory_session)] = count
        _record(client, memory, SUMMARIES.format(actorId=actor, sessionId=memory_session))
        neighbour = (actor, f"{memory_session}-other")
        _events(client, memory, *neighbour, EVENTS)
        plan.neighbours.append(neighbour)
        plan.actor_wide.append(f"/facts/{actor}/")
        _record(client, memory, f"/facts/{actor}/")
    return plan


def _events(client: Any, memory: str, actor: str, session: str, count: int) -> None:
    for i in range(count):
        client.create_event(
            memoryId=memory,
            actorId=actor,
            sessionId=session,
            eventTimestamp=1_700_000_000 + i,
            payload=[{"conversational": {"content": {"text": f"turn {i}"}, "role": "USER"}}],
        )


def _record(client: Any, memory: str, namespace: str) -> None:
    client.batch_create_memory_records(
        memoryId=memory,
        records=[
            {
                "requestIdentifier": "r1",
                "namespaces": [namespace],
                "content": {"text": "what the session was about"},
                "timestamp": 1_700_000_000,
            }
        ],
    )


def _count_events(client: Any, memory: str, actor: str, session: str) -> int:
    found, token = 0, None
    while True:
        page = client.list_events(
            memoryId=memory,
            actorId=actor,
            sessionId=session,
            maxResults=100,
            **({"nextToken": token} if token else {}),
        )
        found += len(page["events"])
        token = page.get("nextToken")
        if not token:
            return found


def _count_records(client: Any, memory: str, namespace: str) -> int:
    page = client.list_memory_records(memoryId=memory, namespace=namespace, maxResults=100)
    return len(page["memoryRecordSummaries"])


@dataclass
class AgentDataResult:
    events_deleted: int
    records_deleted: int
    ended_sessions: int
    neighbours_kept: int
    actor_wide_kept: int
    live_kept: int
    mismatches: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {
            "events_deleted": self.events_deleted,
            "records_deleted": self.records_deleted,
            "ended_sessions": self.ended_sessions,
            "neighbours_kept": self.neighbours_kept,
            "actor_wide_kept": self.actor_wide_kept,
            "live_kept": self.live_kept,
        }


def report_line(summary: Mapping[str, Any] | None) -> str:
    """The report's "agent data" line."""
    if not summary:
        return "agent data        not run"
    return (
        f"agent data        AgentCore Memory of {summary['ended_sessions']} ended sessions: "
        f"{summary['events_deleted']} events and {summary['records_deleted']} summary records "
        f"deleted; kept: {summary['neighbours_kept']} neighbour sessions' events (same actor), "
        f"{summary['actor_wide_kept']} actor-wide records, {summary['live_kept']} live "
        "sessions' data"
    )


def check(
    emulator: Any,
    plan: MemoryPlan,
    failures_by_action: Mapping[str, float],
    say: Callable[[str], None],
) -> AgentDataResult:
    """Count what is left against the plan (see the module docstring)."""
    client = emulator.client("bedrock-agentcore")
    mismatches: list[str] = []
    deleted_events = deleted_records = 0
    for actor, session in plan.ended.values():
        left = _count_events(client, plan.memory, actor, session)
        deleted_events += plan.events_per_session[(actor, session)] - left
        if left:
            mismatches.append(f"agent data: {left} events left of ended {actor}/{session}")
        summaries = _count_records(
            client, plan.memory, SUMMARIES.format(actorId=actor, sessionId=session)
        )
        deleted_records += 1 - summaries
        if summaries:
            mismatches.append(f"agent data: the summary of ended {actor}/{session} is left")
    neighbours = sum(1 for n in plan.neighbours if _count_events(client, plan.memory, *n) == EVENTS)
    actor_wide = sum(1 for ns in plan.actor_wide if _count_records(client, plan.memory, ns) == 1)
    live = sum(
        1
        for actor, session in plan.live.values()
        if _count_events(client, plan.memory, actor, session)
        == plan.events_per_session[(actor, session)]
        and _count_records(client, plan.memory, SUMMARIES.format(actorId=actor, sessionId=session))
        == 1
    )
    if neighbours != len(plan.neighbours) or actor_wide != len(plan.actor_wide):
        mismatches.append(
            f"agent data: neighbours kept {neighbours}/{len(plan.neighbours)}, actor-wide "
            f"records kept {actor_wide}/{len(plan.actor_wide)}"
        )
    if live != len(plan.live):
        mismatches.append(f"agent data: {live}/{len(plan.live)} live sessions' data intact")
    failed = {
        a: n
        for a, n in failures_by_action.items()
        if a in (contract.ACTION_DELETE_MEMORY_EVENTS, contract.ACTION_DELETE_MEMORY_RECORDS) and n
    }
    if failed:
        mismatches.append(f"agent data: memory steps failed {failed}")
    result = AgentDataResult(
        deleted_events,
        deleted_records,
        len(plan.ended),
        neighbours,
        actor_wide,
        live,
        mismatches,
    )
    say(report_line(result.as_dict()))
    return result
