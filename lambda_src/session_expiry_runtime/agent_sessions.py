"""The Amazon Bedrock AgentCore session ids a session may name, and what the APIs accept.

Shared by the store (which refuses an id the cleanup could never send) and the AgentCore
cleanup steps (which treat such an id in an old image as an unusable attribute).
"""

from __future__ import annotations

import re

#: ``runtimeSessionId`` of ``StopRuntimeSession``/``InvokeAgentRuntime``: 33-256 characters
#: (Amazon Bedrock AgentCore API Reference).
RUNTIME_SESSION_ID_LENGTH = (33, 256)
#: ``sessionId`` of the code interpreter and browser session APIs.
TOOL_SESSION_ID = re.compile(r"[0-9a-zA-Z]{1,40}")


def is_runtime_session_id(value: object) -> bool:
    """``True`` for a string of 33-256 characters."""
    low, high = RUNTIME_SESSION_ID_LENGTH
    return isinstance(value, str) and low <= len(value) <= high


def is_tool_session_id(value: object) -> bool:
    """``True`` for 1-40 ASCII letters and digits (code interpreter and browser sessions)."""
    return isinstance(value, str) and TOOL_SESSION_ID.fullmatch(value) is not None
