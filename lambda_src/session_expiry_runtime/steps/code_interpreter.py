"""``StopCodeInterpreterSession``: stop every AgentCore code interpreter session the session owned.

Configured by ``SESSION_EXPIRY_CODE_INTERPRETER_ID`` (the code interpreter identifier); reads
the session ids from the String Set ``codeInterpreterSessionIds``
(``SESSION_EXPIRY_CODE_INTERPRETER_SESSION_IDS_ATTRIBUTE``) and the latest one from
``codeInterpreterSessionId`` (``SESSION_EXPIRY_CODE_INTERPRETER_SESSION_ATTRIBUTE``), claims
``codeInterpreter#<id>``. Calls ``bedrock-agentcore``
``StopCodeInterpreterSession(codeInterpreterIdentifier, sessionId)`` for each owned one;
``ResourceNotFoundException`` means the session already ended: ``already-done``. A session id
that is not 1-40 letters and digits (the API's pattern) is an unusable attribute.

One module plus one registration line, like every built-in step; the shape it shares
with the other tool step is `agentcore_tool.ToolSessionStep`.
"""

from __future__ import annotations

from ..core.config import ACTION_STOP_CODE_INTERPRETER_SESSION
from ..core.ownership import KIND_CODE_INTERPRETER
from .agentcore_tool import ToolSessionStep


class CodeInterpreterStep(ToolSessionStep):
    name = ACTION_STOP_CODE_INTERPRETER_SESSION
    identifier_field = "code_interpreter_id"
    attribute_field = "code_interpreter_session_attribute"
    ids_attribute_field = "code_interpreter_session_ids_attribute"
    log_key = "codeInterpreterSessionIds"
    kind = KIND_CODE_INTERPRETER
