"""``StopCodeInterpreterSession``: stop the session's AgentCore code interpreter session.

Configured by ``SESSION_EXPIRY_CODE_INTERPRETER_ID`` (the code interpreter identifier); reads
the session id from the ``codeInterpreterSessionId`` attribute
(``SESSION_EXPIRY_CODE_INTERPRETER_SESSION_ATTRIBUTE``). Calls ``bedrock-agentcore``
``StopCodeInterpreterSession(codeInterpreterIdentifier, sessionId)``;
``ResourceNotFoundException`` means the session already ended: ``already-done``. A session id
that is not 1-40 letters and digits (the API's pattern) is an unusable attribute.

One module plus one registration line, like every built-in step; the shape it shares
with the other tool step is :class:`.agentcore_tool.ToolSessionStep`.
"""

from __future__ import annotations

from ..config import ACTION_STOP_CODE_INTERPRETER_SESSION
from .agentcore_tool import ToolSessionStep


class CodeInterpreterStep(ToolSessionStep):
    name = ACTION_STOP_CODE_INTERPRETER_SESSION
    identifier_field = "code_interpreter_id"
    attribute_field = "code_interpreter_session_attribute"
    log_key = "codeInterpreterSessionId"
    operation = "stop_code_interpreter_session"
    identifier_parameter = "codeInterpreterIdentifier"
