"""The shared shape of the AgentCore tool steps: stop one code interpreter or browser session.

Both tools take ``Stop…Session(<tool>Identifier, sessionId)`` and answer
``ResourceNotFoundException`` once the session has ended (``already-done``). A subclass names
its action, the :class:`~session_expiry_runtime.config.RuntimeConfig` fields of its tool
identifier and session attribute, the log key, and the ``bedrock-agentcore`` operation with its
identifier parameter; a session id that is not 1-40 letters and digits (the APIs' pattern) is
an unusable attribute (logged, never sent).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..agent_sessions import is_tool_session_id
from ..clients import CleanupClients
from ..config import RuntimeConfig
from .base import CleanupStep, Plan, Session, StepContext, call_aws, string_attribute


class ToolSessionStep(CleanupStep):
    #: ``RuntimeConfig`` field holding the tool identifier (``None``: the step is off).
    identifier_field: ClassVar[str]
    #: ``RuntimeConfig`` field holding the name of the session attribute with the session id.
    attribute_field: ClassVar[str]
    #: Key of the session id in the record's log line.
    log_key: ClassVar[str]
    #: boto3 ``bedrock-agentcore`` method and its tool identifier parameter.
    operation: ClassVar[str]
    identifier_parameter: ClassVar[str]

    def __init__(self, config: RuntimeConfig, agentcore: Any) -> None:
        self.agentcore = agentcore
        self.identifier = getattr(config, self.identifier_field)
        self.attributes = (getattr(config, self.attribute_field),)

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> ToolSessionStep | None:
        if getattr(config, cls.identifier_field) is None or clients.agentcore is None:
            return None
        return cls(config, clients.agentcore)

    def plan(self, session: Session) -> Plan:
        session_id, unusable = string_attribute(session, self.attributes[0])
        if unusable is not None:
            return unusable
        if not is_tool_session_id(session_id):
            return Plan.missing_attributes(invalid=self.attributes)
        return Plan.run(session_id, log={self.log_key: session_id})

    def run(self, plan: Plan, ctx: StepContext) -> str:
        return call_aws(
            self.name,
            getattr(self.agentcore, self.operation),
            already_done=("ResourceNotFoundException",),
            **{self.identifier_parameter: self.identifier, "sessionId": plan.payload},
        )
