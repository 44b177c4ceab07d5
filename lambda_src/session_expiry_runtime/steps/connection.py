"""``DeleteConnection``: close the session's API Gateway WebSocket connection.

Reads the connection id attribute (``connectionId`` by default). ``GoneException`` (HTTP 410)
means the connection is already closed: ``already-done``. Anything else that botocore's retries
do not cure (``ForbiddenException``, ``LimitExceededException``, ...) is a failure. Idempotent:
a second DeleteConnection answers ``GoneException``.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..clients import CleanupClients
from ..config import ACTION_DELETE_CONNECTION, RuntimeConfig
from ..outcomes import STEP_ALREADY_DONE, STEP_DONE, StepFailed, error_code, error_text
from .base import CleanupStep, Plan, Session, StepContext, string_attribute


class ConnectionStep(CleanupStep):
    name = ACTION_DELETE_CONNECTION

    def __init__(self, config: RuntimeConfig, apigateway: Any) -> None:
        self.apigateway = apigateway
        self.attributes = (config.connection_id_attribute,)

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> ConnectionStep | None:
        return cls(config, clients.apigateway) if clients.apigateway is not None else None

    def plan(self, session: Session) -> Plan:
        connection_id, unusable = string_attribute(session, self.attributes[0])
        if unusable is not None:
            return unusable
        return Plan.run(connection_id, log={"connectionId": connection_id})

    def run(self, plan: Plan, ctx: StepContext) -> str:
        return self.delete_connection(plan.payload)

    def delete_connection(self, connection_id: str) -> str:
        """DeleteConnection; ``GoneException`` is success (``already-done``)."""
        try:
            self.apigateway.delete_connection(ConnectionId=connection_id)
        except ClientError as exc:
            if error_code(exc) == "GoneException":
                return STEP_ALREADY_DONE
            raise StepFailed(self.name, error_text(exc)) from exc
        except BotoCoreError as exc:
            raise StepFailed(self.name, error_text(exc)) from exc
        return STEP_DONE
