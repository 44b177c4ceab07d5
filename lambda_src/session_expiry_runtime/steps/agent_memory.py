"""``DeleteMemoryEvents``: release the Amazon Bedrock AgentCore Memory data the session wrote.

Configured by ``SESSION_EXPIRY_AGENT_MEMORY_ID`` (the memory's ARN, which the data plane's
``memoryId`` accepts); reads the session's memory sessions from the String Set
``agentMemorySessions`` (``SESSION_EXPIRY_AGENT_MEMORY_SESSIONS_ATTRIBUTE``), each
``<actorId>/<sessionId>`` as ``SessionStore.attach_memory_session`` records it, and plans them
as claims (``agentMemory#<actorId>/<sessionId>``): the runner's ownership check hands the step
only the memory sessions this record's ``Keys`` and incarnation own (a memory session a later
incarnation or session took over is ``Superseded`` and left alone).

For each owned memory session:

1. **Short-term events** — ``ListEvents(memoryId, actorId, sessionId, includePayloads=false,
   maxResults=100)`` page by page (``nextToken``) until no token is left, then ``DeleteEvent``
   each listed event. Listing by actor *and* session returns only that session's events, never a
   neighbour's of the same actor (Amazon Bedrock AgentCore API Reference, ``ListEvents``).
   Listing is finished before the first delete, so no page token is used across deletes.
   ``ResourceNotFoundException`` from ``DeleteEvent`` means already deleted (done), from
   ``ListEvents`` that the session has no events left.
2. **Long-term records** (only with ``SESSION_EXPIRY_AGENT_MEMORY_RECORD_NAMESPACES``) — for
   each namespace template, with ``{actorId}`` and ``{sessionId}`` filled in:
   ``ListMemoryRecords(memoryId, namespace, maxResults=100)`` page by page, and
   ``DeleteMemoryRecord`` of each record whose ``namespaces`` holds exactly that namespace
   (``ResourceNotFoundException``: already deleted). A namespace without ``{sessionId}`` holds
   records of many sessions that the API cannot tell apart; such templates are refused at
   configuration, and nothing outside the listed namespaces is deleted: "deleting an event
   doesn't remove the structured information derived out of it from the long term memory"
   (``DeleteEvent``), so records of actor-wide strategies (semantic facts, user preferences)
   stay until the memory's own expiry.

Bounded: the time guard is checked before every page and every delete
(``StepFailed(TimeGuard)``: the record is retried and continues where the deletes stopped,
idempotently). ``done`` when something was deleted, ``already-done`` when nothing was left.
The log line gets ``agentMemory: {<actor>/<session>: {"eventsDeleted": n, "recordsDeleted":
m}}``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..core.agent_sessions import is_memory_session, parse_memory_session
from ..core.clients import CleanupClients
from ..core.config import (
    ACTION_DELETE_MEMORY_EVENTS,
    ACTION_DELETE_MEMORY_RECORDS,
    ACTION_TIME_GUARD,
    RuntimeConfig,
)
from ..core.ownership import KIND_AGENT_MEMORY
from ..owners.outcomes import STEP_ALREADY_DONE, STEP_DONE, StepFailed, error_code, error_text
from .base import ClaimRef, CleanupStep, Plan, Session, StepContext

#: Items per ``ListEvents``/``ListMemoryRecords`` page: the APIs' maximum.
PAGE_SIZE = 100
_NOT_FOUND = "ResourceNotFoundException"


class AgentMemoryStep(CleanupStep):
    name = ACTION_DELETE_MEMORY_EVENTS
    claims_ownership = True

    def __init__(self, config: RuntimeConfig, agentcore: Any) -> None:
        self.agentcore = agentcore
        self.memory_id = str(config.agent_memory_id)
        self.attribute = config.agent_memory_sessions_attribute
        self.namespaces = config.agent_memory_record_namespaces
        self.attributes = (self.attribute,)

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> AgentMemoryStep | None:
        if config.agent_memory_id is None or clients.agentcore is None:
            return None
        return cls(config, clients.agentcore)

    def plan(self, session: Session) -> Plan:
        if self.attribute not in session.image:
            return Plan.missing_attributes(missing=(self.attribute,))
        recorded = session.image[self.attribute]
        members = set(recorded) if isinstance(recorded, (set, frozenset)) else set()
        usable = sorted(v for v in members if is_memory_session(v))
        invalid = [self.attribute] if not usable or len(usable) != len(members) else []
        if not usable:
            return Plan.missing_attributes(invalid=invalid)
        return Plan.run(
            log={"agentMemorySessions": usable},
            invalid=invalid,
            claims=[ClaimRef(KIND_AGENT_MEMORY, ref) for ref in usable],
        )

    def run(self, plan: Plan, ctx: StepContext) -> str:
        deleted = 0
        failures: list[tuple[str, StepFailed]] = []
        for ref in plan.owned:
            parsed = parse_memory_session(ref.resource_id)
            if parsed is None:  # pragma: no cover - the plan holds usable refs only
                continue
            try:
                events, records = self._release(*parsed, ctx.out_of_time)
            except StepFailed as exc:
                failures.append((ref.resource_id, exc))
                continue
            ctx.note_in("agentMemory", ref.resource_id, _counts(events, records))
            deleted += events + records
        if failures:
            action = failures[0][1].action
            raise StepFailed(action, "; ".join(f"{ref}: {exc.detail}" for ref, exc in failures))
        return STEP_DONE if deleted else STEP_ALREADY_DONE

    def _release(
        self, actor_id: str, session_id: str, out_of_time: Callable[[], bool]
    ) -> tuple[int, int]:
        """Delete the memory session's events, then (when configured) its records; how many of
        each were deleted now."""
        ids = {"memoryId": self.memory_id, "actorId": actor_id, "sessionId": session_id}
        event_ids = list(self._event_ids(ids, out_of_time))
        events = sum(
            self._delete(
                ACTION_DELETE_MEMORY_EVENTS,
                self.agentcore.delete_event,
                out_of_time,
                **ids,
                eventId=event_id,
            )
            for event_id in event_ids
        )
        records = 0
        for template in self.namespaces:
            namespace = template.replace("{actorId}", actor_id).replace("{sessionId}", session_id)
            for record_id in list(self._record_ids(namespace, out_of_time)):
                records += self._delete(
                    ACTION_DELETE_MEMORY_RECORDS,
                    self.agentcore.delete_memory_record,
                    out_of_time,
                    memoryId=self.memory_id,
                    memoryRecordId=record_id,
                )
        return events, records

    def _event_ids(self, ids: dict[str, str], out_of_time: Callable[[], bool]) -> Iterator[str]:
        params: dict[str, Any] = {**ids, "includePayloads": False, "maxResults": PAGE_SIZE}
        for page in _pages(
            ACTION_DELETE_MEMORY_EVENTS, self.agentcore.list_events, params, out_of_time
        ):
            for event in page.get("events") or []:
                if event.get("eventId"):
                    yield str(event["eventId"])

    def _record_ids(self, namespace: str, out_of_time: Callable[[], bool]) -> Iterator[str]:
        params: dict[str, Any] = {
            "memoryId": self.memory_id,
            "namespace": namespace,
            "maxResults": PAGE_SIZE,
        }
        for page in _pages(
            ACTION_DELETE_MEMORY_RECORDS, self.agentcore.list_memory_records, params, out_of_time
        ):
            for record in page.get("memoryRecordSummaries") or []:
                # Only a record filed under exactly this namespace is this session's.
                if namespace in (record.get("namespaces") or []) and record.get("memoryRecordId"):
                    yield str(record["memoryRecordId"])

    @staticmethod
    def _delete(
        action: str, call: Callable[..., Any], out_of_time: Callable[[], bool], **params: Any
    ) -> int:
        """One delete: 1 when it deleted, 0 when already gone; ``StepFailed`` otherwise."""
        _check_time(action, out_of_time)
        try:
            call(**params)
        except ClientError as exc:
            if error_code(exc) == _NOT_FOUND:
                return 0
            raise StepFailed(action, error_text(exc)) from exc
        except BotoCoreError as exc:
            raise StepFailed(action, error_text(exc)) from exc
        return 1


def _pages(
    action: str,
    call: Callable[..., Any],
    params: dict[str, Any],
    out_of_time: Callable[[], bool],
) -> Iterator[dict[str, Any]]:
    """Every page of a ``nextToken``-paginated list call (a missing session or memory:
    no page); the time guard before each."""
    token: str | None = None
    while True:
        _check_time(action, out_of_time)
        try:
            page = call(**params, **({"nextToken": token} if token else {}))
        except ClientError as exc:
            if error_code(exc) == _NOT_FOUND:
                return
            raise StepFailed(action, error_text(exc)) from exc
        except BotoCoreError as exc:
            raise StepFailed(action, error_text(exc)) from exc
        yield page
        token = page.get("nextToken") or None
        if token is None:
            return


def _check_time(action: str, out_of_time: Callable[[], bool]) -> None:
    if out_of_time():
        raise StepFailed(ACTION_TIME_GUARD, f"{action} stopped by the time guard; retried")


def _counts(events: int, records: int) -> dict[str, int]:
    return {"eventsDeleted": events, "recordsDeleted": records}
