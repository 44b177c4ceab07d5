"""``StopBrowserSession``: stop the session's AgentCore browser session.

Configured by ``SESSION_EXPIRY_BROWSER_ID`` (the browser identifier); reads the session id
from the ``browserSessionId`` attribute (``SESSION_EXPIRY_BROWSER_SESSION_ATTRIBUTE``). Calls
``bedrock-agentcore`` ``StopBrowserSession(browserIdentifier, sessionId)``;
``ResourceNotFoundException`` means the session already ended: ``already-done``. A session id
that is not 1-40 letters and digits (the API's pattern) is an unusable attribute.

One module plus one registration line, like every built-in step; the shape it shares
with the other tool step is :class:`.agentcore_tool.ToolSessionStep`.
"""

from __future__ import annotations

from ..config import ACTION_STOP_BROWSER_SESSION
from .agentcore_tool import ToolSessionStep


class BrowserStep(ToolSessionStep):
    name = ACTION_STOP_BROWSER_SESSION
    identifier_field = "browser_id"
    attribute_field = "browser_session_attribute"
    log_key = "browserSessionId"
    operation = "stop_browser_session"
    identifier_parameter = "browserIdentifier"
