"""``StopCodeInterpreterSession``: stop the session's AgentCore code interpreter session.

Configured by ``SESSION_EXPIRY_CODE_INTERPRETER_ID`` (the code interpreter identifier); reads
the session id from the ``codeInterpreterSessionId`` attribute
(``SESSION_EXPIRY_CODE_INTERPRETER_SESSION_ATTRIBUTE``). Calls ``bedrock-agentcore``
``StopCodeInterpreterSession(codeInterpreterIdentifier, sessionId)``;
``ResourceNotFoundException`` means the session already ended: ``already-done``. A session id
that is not 1-40 letters and digits (the API's pattern) is an unusable attribute.

One module plus one registration line, like every built-in step.
"""

from __future__ import annotations

from typing import Any

from ..agent_sessions import is_tool_session_id
from ..clients import CleanupClients
from ..config import ACTION_STOP_CODE_INTERPRETER_SESSION, RuntimeConfig
from .base import CleanupStep, Plan, Session, StepContext, call_aws, string_attribute


class CodeInterpreterStep(CleanupStep):
    name = ACTION_STOP_CODE_INTERPRETER_SESSION

    def __init__(self, config: RuntimeConfig, agentcore: Any) -> None:
        self.agentcore = agentcore
        self.identifier = config.code_interpreter_id
        self.attributes = (config.code_interpreter_session_attribute,)

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> CodeInterpreterStep | None:
        if config.code_interpreter_id is None or clients.agentcore is None:
            return None
        return cls(config, clients.agentcore)

    def plan(self, session: Session) -> Plan:
        session_id, unusable = string_attribute(session, self.attributes[0])
        if unusable is not None:
            return unusable
        if not is_tool_session_id(session_id):
            return Plan.missing_attributes(invalid=self.attributes)
        return Plan.run(session_id, log={"codeInterpreterSessionId": session_id})

    def run(self, plan: Plan, ctx: StepContext) -> str:
        return call_aws(
            self.name,
            self.agentcore.stop_code_interpreter_session,
            already_done=("ResourceNotFoundException",),
            codeInterpreterIdentifier=self.identifier,
            sessionId=plan.payload,
        )
