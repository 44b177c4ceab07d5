"""``StopRuntimeSession``: stop every Amazon Bedrock AgentCore runtime session the session owned.

Configured by ``SESSION_EXPIRY_AGENT_RUNTIME_ARN`` (and the optional
``SESSION_EXPIRY_AGENT_RUNTIME_QUALIFIER``, the endpoint); reads the runtime session ids from
the String Set ``agentRuntimeSessionIds`` (``SESSION_EXPIRY_AGENT_RUNTIME_SESSION_IDS_ATTRIBUTE``)
and the latest one from ``agentRuntimeSessionId``
(``SESSION_EXPIRY_AGENT_RUNTIME_SESSION_ATTRIBUTE``; items written before the set hold only
it), and plans their union as claims (``agentRuntime#<id>``): the runner's ownership check
(`base`) hands the step only the ids this record's ``Keys`` and incarnation own. Calls
``bedrock-agentcore`` ``StopRuntimeSession(runtimeSessionId, agentRuntimeArn, qualifier?)`` for
each. ``ResourceNotFoundException`` means the session already ended: ``already-done``
(idempotent). Anything else botocore's retries do not cure (``AccessDeniedException``,
``ValidationException``, ...) is a failure, after every other owned session was tried. A session
id outside the API's 33-256 characters is an unusable attribute (logged, never sent: it could
only fail on every retry). Without this step a runtime session keeps running until its idle
timeout (15 minutes by default) or its maximum lifetime (8 hours).

This module and one line in `session_expiry_runtime.steps.BUILTIN_STEPS` are the whole
step: the example of adding a built-in.
"""

from __future__ import annotations

from typing import Any

from ..core.agent_sessions import is_runtime_session_id
from ..core.clients import CleanupClients
from ..core.config import ACTION_STOP_RUNTIME_SESSION, RuntimeConfig
from ..core.kinds import declared_kind
from ..core.ownership import KIND_AGENT_RUNTIME
from .base import ClaimRef, CleanupStep, Plan, Session, StepContext, act_on_each, call_aws, id_union


class AgentRuntimeStep(CleanupStep):
    name = ACTION_STOP_RUNTIME_SESSION
    claims_ownership = True

    def __init__(self, config: RuntimeConfig, agentcore: Any) -> None:
        self.agentcore = agentcore
        self.runtime_arn = config.agent_runtime_arn
        self.qualifier = config.agent_runtime_qualifier
        #: (the latest id, the String Set of all of them)
        self.id_attributes = (
            config.agent_runtime_session_attribute,
            config.agent_runtime_session_ids_attribute,
        )
        self.attributes = self.id_attributes

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> AgentRuntimeStep | None:
        if config.agent_runtime_arn is None or clients.agentcore is None:
            return None
        return cls(config, clients.agentcore)

    def plan(self, session: Session) -> Plan:
        ids, unusable, invalid = id_union(session, *self.id_attributes, is_runtime_session_id)
        if unusable is not None:
            return unusable
        return Plan.run(
            log={"agentRuntimeSessionIds": ids},
            invalid=invalid,
            claims=[ClaimRef(KIND_AGENT_RUNTIME, session_id) for session_id in ids],
        )

    def run(self, plan: Plan, ctx: StepContext) -> str:
        return act_on_each(self.name, [ref.resource_id for ref in plan.owned], self._stop)

    def _stop(self, session_id: str) -> str:
        declared = declared_kind(KIND_AGENT_RUNTIME)
        assert declared is not None and declared.release is not None
        release = declared.release  # the operation and its parameters, declared once
        params: dict[str, Any] = {
            release.id_parameter: session_id,
            str(release.target_parameter): self.runtime_arn,
        }
        if self.qualifier:
            params["qualifier"] = self.qualifier
        return call_aws(
            self.name, getattr(self.agentcore, release.method), already_done=release.gone, **params
        )
