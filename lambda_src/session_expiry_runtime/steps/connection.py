"""``DeleteConnection``: close every API Gateway WebSocket connection the session owned.

A session spans several connections (API Gateway closes a connection after 2 hours, or 10
minutes idle), so the session runtime records each one in a String Set (``connectionIds``) and
keeps the latest in ``connectionId``; items written before the set existed hold only the
latter. The step plans the union of both as claims (``connection#<id>``): the runner's
ownership check (`base`) hands it only the ids whose ownership record names this
record's ``Keys`` and incarnation, so a forged image naming another session's connection, or an
old incarnation's REMOVE naming a connection its successor holds now, closes nothing.

``GoneException`` (HTTP 410) means a connection is already closed: ``already-done`` when every
one was. Anything else that botocore's retries do not cure (``ForbiddenException``,
``LimitExceededException``, ...) fails the step — after every other owned connection was tried.
Idempotent: a second DeleteConnection answers ``GoneException``.
"""

from __future__ import annotations

from typing import Any

from ..core.clients import CleanupClients
from ..core.config import ACTION_DELETE_CONNECTION, RuntimeConfig
from ..core.ownership import KIND_CONNECTION
from .base import (
    ClaimRef,
    CleanupStep,
    Plan,
    Session,
    StepContext,
    act_on_each,
    call_aws,
    id_union,
    nonempty_str,
)


class ConnectionStep(CleanupStep):
    name = ACTION_DELETE_CONNECTION
    claims_ownership = True

    def __init__(self, config: RuntimeConfig, apigateway: Any) -> None:
        self.apigateway = apigateway
        #: (the latest id, the String Set of all of them)
        self.id_attributes = (config.connection_id_attribute, config.connection_ids_attribute)
        self.attributes = self.id_attributes

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> ConnectionStep | None:
        return cls(config, clients.apigateway) if clients.apigateway is not None else None

    def plan(self, session: Session) -> Plan:
        ids, unusable, invalid = id_union(
            session, *self.id_attributes, lambda value: nonempty_str(value) is not None
        )
        if unusable is not None:
            return unusable
        return Plan.run(
            log={"connectionIds": ids},
            invalid=invalid,
            claims=[ClaimRef(KIND_CONNECTION, connection_id) for connection_id in ids],
        )

    def run(self, plan: Plan, ctx: StepContext) -> str:
        return act_on_each(self.name, [ref.resource_id for ref in plan.owned], self._close)

    def _close(self, connection_id: str) -> str:
        """DeleteConnection; ``GoneException`` is success (``already-done``)."""
        return call_aws(
            self.name,
            self.apigateway.delete_connection,
            already_done=("GoneException",),
            ConnectionId=connection_id,
        )
