"""``StopBrowserSession``: stop the session's AgentCore browser session.

Configured by ``SESSION_EXPIRY_BROWSER_ID`` (the browser identifier); reads the session id
from the ``browserSessionId`` attribute (``SESSION_EXPIRY_BROWSER_SESSION_ATTRIBUTE``). Calls
``bedrock-agentcore`` ``StopBrowserSession(browserIdentifier, sessionId)``;
``ResourceNotFoundException`` means the session already ended: ``already-done``. A session id
that is not 1-40 letters and digits (the API's pattern) is an unusable attribute.

One module plus one registration line, like every built-in step.
"""

from __future__ import annotations

from typing import Any

from ..agent_sessions import is_tool_session_id
from ..clients import CleanupClients
from ..config import ACTION_STOP_BROWSER_SESSION, RuntimeConfig
from .base import CleanupStep, Plan, Session, StepContext, call_aws, string_attribute


class BrowserStep(CleanupStep):
    name = ACTION_STOP_BROWSER_SESSION

    def __init__(self, config: RuntimeConfig, agentcore: Any) -> None:
        self.agentcore = agentcore
        self.identifier = config.browser_id
        self.attributes = (config.browser_session_attribute,)

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> BrowserStep | None:
        if config.browser_id is None or clients.agentcore is None:
            return None
        return cls(config, clients.agentcore)

    def plan(self, session: Session) -> Plan:
        session_id, unusable = string_attribute(session, self.attributes[0])
        if unusable is not None:
            return unusable
        if not is_tool_session_id(session_id):
            return Plan.missing_attributes(invalid=self.attributes)
        return Plan.run(session_id, log={"browserSessionId": session_id})

    def run(self, plan: Plan, ctx: StepContext) -> str:
        return call_aws(
            self.name,
            self.agentcore.stop_browser_session,
            already_done=("ResourceNotFoundException",),
            browserIdentifier=self.identifier,
            sessionId=plan.payload,
        )
