"""``StopRuntimeSession``: stop the session's Amazon Bedrock AgentCore runtime session.

Configured by ``SESSION_EXPIRY_AGENT_RUNTIME_ARN`` (and the optional
``SESSION_EXPIRY_AGENT_RUNTIME_QUALIFIER``, the endpoint); reads the runtime session id from
the ``agentRuntimeSessionId`` attribute (``SESSION_EXPIRY_AGENT_RUNTIME_SESSION_ATTRIBUTE``).
Calls ``bedrock-agentcore`` ``StopRuntimeSession(runtimeSessionId, agentRuntimeArn,
qualifier?)``. ``ResourceNotFoundException`` means the session already ended: ``already-done``
(idempotent). Anything else botocore's retries do not cure (``AccessDeniedException``,
``ValidationException``, ...) is a failure. A session id outside the API's 33-256 characters
is an unusable attribute (logged, never sent: it could only fail on every retry). Without this
step a runtime session keeps running until its idle timeout (15 minutes by default) or its
maximum lifetime (8 hours).

This module and one line in :data:`session_expiry_runtime.steps.BUILTIN_STEPS` are the whole
step: the example of adding a built-in.
"""

from __future__ import annotations

from typing import Any

from ..agent_sessions import is_runtime_session_id
from ..clients import CleanupClients
from ..config import ACTION_STOP_RUNTIME_SESSION, RuntimeConfig
from .base import CleanupStep, Plan, Session, StepContext, call_aws, string_attribute


class AgentRuntimeStep(CleanupStep):
    name = ACTION_STOP_RUNTIME_SESSION

    def __init__(self, config: RuntimeConfig, agentcore: Any) -> None:
        self.agentcore = agentcore
        self.runtime_arn = config.agent_runtime_arn
        self.qualifier = config.agent_runtime_qualifier
        self.attributes = (config.agent_runtime_session_attribute,)

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> AgentRuntimeStep | None:
        if config.agent_runtime_arn is None or clients.agentcore is None:
            return None
        return cls(config, clients.agentcore)

    def plan(self, session: Session) -> Plan:
        session_id, unusable = string_attribute(session, self.attributes[0])
        if unusable is not None:
            return unusable
        if not is_runtime_session_id(session_id):
            return Plan.missing_attributes(invalid=self.attributes)
        return Plan.run(session_id, log={"agentRuntimeSessionId": session_id})

    def run(self, plan: Plan, ctx: StepContext) -> str:
        params: dict[str, Any] = {
            "runtimeSessionId": plan.payload,
            "agentRuntimeArn": self.runtime_arn,
        }
        if self.qualifier:
            params["qualifier"] = self.qualifier
        return call_aws(
            self.name,
            self.agentcore.stop_runtime_session,
            already_done=("ResourceNotFoundException",),
            **params,
        )
