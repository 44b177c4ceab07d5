"""The shared shape of the AgentCore tool steps: stop every code interpreter or browser session
the session owned.

Both tools take ``Stop…Session(<tool>Identifier, sessionId)`` and answer
``ResourceNotFoundException`` once the session has ended (``already-done``). The ids are the
union of the tool's String Set (``codeInterpreterSessionIds`` / ``browserSessionIds``) and its
single latest-id attribute (all that items written before the sets hold), planned as claims: the
runner's ownership check (`base`) hands the step only the ids this record's ``Keys`` and
incarnation own, and the step stops each. A subclass names its action, the
`RuntimeConfig` fields of its tool identifier and session
attributes, the log key and the ownership kind; the ``bedrock-agentcore`` operation, its
parameters and its "gone" answers are the kind's declaration's
(`session_expiry_runtime.core.kinds`);
a session id that is not 1-40 letters and digits (the APIs' pattern) is an
unusable attribute (logged, never sent).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..core.agent_sessions import is_tool_session_id
from ..core.clients import CleanupClients
from ..core.config import RuntimeConfig
from ..core.kinds import declared_kind
from .base import ClaimRef, CleanupStep, Plan, Session, StepContext, act_on_each, call_aws, id_union


class ToolSessionStep(CleanupStep):
    claims_ownership = True
    #: ``RuntimeConfig`` field holding the tool identifier (``None``: the step is off).
    identifier_field: ClassVar[str]
    #: ``RuntimeConfig`` fields holding the names of the latest-id attribute and the id set.
    attribute_field: ClassVar[str]
    ids_attribute_field: ClassVar[str]
    #: Key of the session ids in the record's log line.
    log_key: ClassVar[str]
    #: The ownership records' kind (``ownership.KIND_*``); its declaration
    #: (`session_expiry_runtime.core.kinds`) names the operation and its parameters.
    kind: ClassVar[str]

    def __init__(self, config: RuntimeConfig, agentcore: Any) -> None:
        self.agentcore = agentcore
        self.identifier = getattr(config, self.identifier_field)
        #: (the latest id, the String Set of all of them)
        self.id_attributes = (
            getattr(config, self.attribute_field),
            getattr(config, self.ids_attribute_field),
        )
        self.attributes = self.id_attributes

    @classmethod
    def build(cls, config: RuntimeConfig, clients: CleanupClients) -> ToolSessionStep | None:
        if getattr(config, cls.identifier_field) is None or clients.agentcore is None:
            return None
        return cls(config, clients.agentcore)

    def plan(self, session: Session) -> Plan:
        ids, unusable, invalid = id_union(session, *self.id_attributes, is_tool_session_id)
        if unusable is not None:
            return unusable
        return Plan.run(
            log={self.log_key: ids},
            invalid=invalid,
            claims=[ClaimRef(self.kind, session_id) for session_id in ids],
        )

    def run(self, plan: Plan, ctx: StepContext) -> str:
        return act_on_each(self.name, [ref.resource_id for ref in plan.owned], self._stop)

    def _stop(self, session_id: str) -> str:
        declared = declared_kind(self.kind)
        assert declared is not None and declared.release is not None
        release = declared.release
        return call_aws(
            self.name,
            getattr(self.agentcore, release.method),
            already_done=release.gone,
            **{str(release.target_parameter): self.identifier, release.id_parameter: session_id},
        )
