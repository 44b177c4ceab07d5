"""``DeleteConnection``: close every API Gateway WebSocket connection the session recorded.

A session spans several connections (API Gateway closes a connection after 2 hours, or 10
minutes idle), so the session runtime records each one in a String Set (``connectionIds``) and
keeps the latest in ``connectionId``; items written before the set existed hold only the
latter. The step closes the union of both. ``GoneException`` (HTTP 410) means a connection is
already closed: ``already-done`` when every one was. Anything else that botocore's retries do
not cure (``ForbiddenException``, ``LimitExceededException``, ...) fails the step — after every
other connection was tried. Idempotent: a second DeleteConnection answers ``GoneException``.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..clients import CleanupClients
from ..config import ACTION_DELETE_CONNECTION, RuntimeConfig
from ..outcomes import STEP_ALREADY_DONE, STEP_DONE, StepFailed, error_code, error_text
from .base import CleanupStep, Plan, Session, StepContext, nonempty_str


class ConnectionStep(CleanupStep):
    name = ACTION_DELETE_CONNECTION

    def __init__(self, config: RuntimeConfig, apigateway: Any) -> None:
        self.apigateway = apigateway
        self.attributes = (config.connection_id_attribute, config.connection_ids_attribute)

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> ConnectionStep | None:
        return cls(config, clients.apigateway) if clients.apigateway is not None else None

    def plan(self, session: Session) -> Plan:
        single_name, set_name = self.attributes
        present = [name for name in self.attributes if name in session.image]
        if not present:
            return Plan.missing_attributes(missing=self.attributes)
        ids: set[str] = set()
        invalid: list[str] = []
        if single_name in session.image:
            single = nonempty_str(session.image[single_name])
            if single is None:
                invalid.append(single_name)
            else:
                ids.add(single)
        if set_name in session.image:
            recorded = session.image[set_name]
            # A String Set decodes to a frozenset; anything else is an unusable value.
            members = set(recorded) if isinstance(recorded, (set, frozenset)) else set()
            usable = {v for v in members if nonempty_str(v)}
            if not usable or usable != members:
                invalid.append(set_name)
            ids |= usable
        if not ids:
            return Plan.missing_attributes(invalid=invalid)
        ordered = sorted(ids)
        return Plan.run(ordered, log={"connectionIds": ordered}, invalid=invalid)

    def run(self, plan: Plan, ctx: StepContext) -> str:
        outcomes = [self._close(connection_id) for connection_id in plan.payload]
        failures = [text for text in outcomes if text not in (STEP_DONE, STEP_ALREADY_DONE)]
        if failures:
            raise StepFailed(self.name, "; ".join(failures))
        return STEP_DONE if STEP_DONE in outcomes else STEP_ALREADY_DONE

    def delete_connection(self, connection_id: str) -> str:
        """DeleteConnection; ``GoneException`` is success (``already-done``)."""
        outcome = self._close(connection_id)
        if outcome not in (STEP_DONE, STEP_ALREADY_DONE):
            raise StepFailed(self.name, outcome)
        return outcome

    def _close(self, connection_id: str) -> str:
        """``done``, ``already-done``, or the error text of a failed DeleteConnection."""
        try:
            self.apigateway.delete_connection(ConnectionId=connection_id)
        except ClientError as exc:
            if error_code(exc) == "GoneException":
                return STEP_ALREADY_DONE
            return f"{connection_id}: {error_text(exc)}"
        except BotoCoreError as exc:
            return f"{connection_id}: {error_text(exc)}"
        return STEP_DONE
