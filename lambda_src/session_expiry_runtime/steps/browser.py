"""``StopBrowserSession``: stop every AgentCore browser session the session owned.

Configured by ``SESSION_EXPIRY_BROWSER_ID`` (the browser identifier); reads the session ids
from the String Set ``browserSessionIds`` (``SESSION_EXPIRY_BROWSER_SESSION_IDS_ATTRIBUTE``)
and the latest one from ``browserSessionId`` (``SESSION_EXPIRY_BROWSER_SESSION_ATTRIBUTE``),
claims ``browser#<id>``. Calls ``bedrock-agentcore``
``StopBrowserSession(browserIdentifier, sessionId)`` for each owned one;
``ResourceNotFoundException`` means the session already ended: ``already-done``. A session id
that is not 1-40 letters and digits (the API's pattern) is an unusable attribute.

One module plus one registration line, like every built-in step; the shape it shares
with the other tool step is `agentcore_tool.ToolSessionStep`.
"""

from __future__ import annotations

from ..core.config import ACTION_STOP_BROWSER_SESSION
from ..core.ownership import KIND_BROWSER
from .agentcore_tool import ToolSessionStep


class BrowserStep(ToolSessionStep):
    name = ACTION_STOP_BROWSER_SESSION
    identifier_field = "browser_id"
    attribute_field = "browser_session_attribute"
    ids_attribute_field = "browser_session_ids_attribute"
    log_key = "browserSessionIds"
    kind = KIND_BROWSER
