"""The AgentCore tools the tool-session sweep may list, and their running sessions, page by page.

A tool is one the construct was given (``SESSION_EXPIRY_CODE_INTERPRETER_ID``,
``SESSION_EXPIRY_BROWSER_ID``): the sweep never lists another tool's sessions, and drops any
listed session whose tool identifier is not the one it asked for.

**Two status vocabularies.** ``ListCodeInterpreterSessions`` and ``ListBrowserSessions``
(``bedrock-agentcore``, ``POST /code-interpreters/{id}/sessions/list`` and
``/browsers/{id}/sessions/list``; ``maxResults`` 1-100, ``nextToken``) filter by ``status``. The
service model botocore 1.44 ships gives the status enum as ``READY``/``TERMINATED``; the
documentation text of the same models and of the API Reference pages says "ACTIVE, STOPPING,
and STOPPED". botocore does not check an enum before sending, so either spelling reaches
AgentCore. The sweep asks for the running sessions in **both** spellings (`RUNNING_STATUSES`,
one listing each): a spelling AgentCore refuses (``ValidationException`` on its first page) is
skipped, and the run fails only when both are refused. A session listed twice is checked once,
and one whose ``status`` is an ended or stopping value of either vocabulary (`ENDED_STATUSES`)
is skipped: a refused filter that AgentCore ignored instead must not make the sweep stop a
stopped session.

**Runtime sessions are not listed**: the ``bedrock-agentcore`` model (botocore 1.44) has no
operation that lists an AgentCore runtime's sessions (its ``ListSessions`` lists AgentCore
Memory sessions), so a runtime session whose REMOVE was lost ends at the runtime's own idle
timeout (15 minutes by default) or maximum lifetime (8 hours by default).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..core.config import RuntimeConfig
from ..core.ownership import KIND_BROWSER, KIND_CODE_INTERPRETER

#: ``maxResults`` of the list calls: 1..100 (Amazon Bedrock AgentCore API Reference).
LIST_SESSIONS_LIMIT = 100
#: ``status`` filters asking for running sessions: the service model's enum value first, then
#: the API Reference's word.
RUNNING_STATUSES = ("READY", "ACTIVE")
#: Statuses of a session that is ended or ending, in either vocabulary: never stopped.
ENDED_STATUSES = frozenset({"TERMINATED", "STOPPED", "STOPPING"})


@dataclass(frozen=True)
class Tool:
    """One AgentCore tool of the construct: how to list, stop and recognise its sessions."""

    #: The ownership records' kind (``codeInterpreter``/``browser``).
    kind: str
    identifier: str
    #: boto3 ``bedrock-agentcore`` methods and the identifier parameter they share.
    list_operation: str
    stop_operation: str
    identifier_parameter: str
    #: The session item's attributes naming its sessions of this tool (latest id, String Set).
    single_attribute: str
    set_attribute: str

    def holds(self, item: Mapping[str, Any], session_id: str) -> bool:
        """Whether a low-level session item names ``session_id`` as one of its sessions of this
        tool (its String Set, or its latest-id attribute)."""
        ids = item.get(self.set_attribute)
        if isinstance(ids, Mapping) and session_id in (ids.get("SS") or ()):
            return True
        single = item.get(self.single_attribute)
        return isinstance(single, Mapping) and single.get("S") == session_id


def tools_of(config: RuntimeConfig) -> list[Tool]:
    """The code interpreter and browser the construct was given (none, one or both)."""
    tools: list[Tool] = []
    if config.code_interpreter_id:
        tools.append(
            Tool(
                KIND_CODE_INTERPRETER,
                config.code_interpreter_id,
                "list_code_interpreter_sessions",
                "stop_code_interpreter_session",
                "codeInterpreterIdentifier",
                config.code_interpreter_session_attribute,
                config.code_interpreter_session_ids_attribute,
            )
        )
    if config.browser_id:
        tools.append(
            Tool(
                KIND_BROWSER,
                config.browser_id,
                "list_browser_sessions",
                "stop_browser_session",
                "browserIdentifier",
                config.browser_session_attribute,
                config.browser_session_ids_attribute,
            )
        )
    return tools


class AllFiltersRefused(RuntimeError):
    """AgentCore refused every running-status filter (`RUNNING_STATUSES`) of a tool."""


@dataclass
class Listing:
    """Pages read and sessions given, for the run's report."""

    pages: int = 0
    listed: int = 0
    refused_filters: tuple[str, ...] = ()


def running_sessions(
    agentcore: Any,
    tool: Tool,
    listing: Listing,
    *,
    before_call: Callable[[], None] = lambda: None,
) -> Iterator[dict[str, Any]]:
    """Every running session of ``tool``, each once, page by page, in both status vocabularies;
    ``before_call`` runs before each list call (pacing).

    Raises:
        AllFiltersRefused: every filter answered ``ValidationException``.
        ClientError, BotoCoreError: any other failed call (after botocore's retries).
    """
    seen: set[str] = set()
    refused: list[str] = []
    for status in RUNNING_STATUSES:
        try:
            for summary in _pages(agentcore, tool, status, listing, before_call):
                session_id = summary.get("sessionId")
                if not isinstance(session_id, str) or session_id in seen:
                    continue
                seen.add(session_id)
                if _is_running(summary, tool):
                    yield summary
        except _FilterRefused:
            refused.append(status)
    listing.refused_filters = tuple(refused)
    if len(refused) == len(RUNNING_STATUSES):
        raise AllFiltersRefused(
            f"{tool.list_operation} of {tool.identifier}: every status filter refused "
            f"({', '.join(refused)})"
        )


class _FilterRefused(Exception):
    pass


def _pages(
    agentcore: Any,
    tool: Tool,
    status: str,
    listing: Listing,
    before_call: Callable[[], None],
) -> Iterator[dict[str, Any]]:
    """The summaries of one status filter, following ``nextToken``; a ``ValidationException``
    on the first page is `_FilterRefused` (AgentCore does not speak that vocabulary)."""
    token: str | None = None
    first = True
    while True:
        params: dict[str, Any] = {
            tool.identifier_parameter: tool.identifier,
            "status": status,
            "maxResults": LIST_SESSIONS_LIMIT,
        }
        if token is not None:
            params["nextToken"] = token
        before_call()
        try:
            page = getattr(agentcore, tool.list_operation)(**params)
        except ClientError as exc:
            if first and exc.response.get("Error", {}).get("Code") == "ValidationException":
                raise _FilterRefused() from exc
            raise
        first = False
        listing.pages += 1
        items = page.get("items") or []
        listing.listed += len(items)
        yield from items
        token = page.get("nextToken")
        if not token:
            return


def _is_running(summary: Mapping[str, Any], tool: Tool) -> bool:
    """A session of ``tool`` (the identifier it was listed for) not ended or stopping."""
    listed_for = summary.get(tool.identifier_parameter)
    if listed_for is not None and listed_for != tool.identifier:
        return False
    return summary.get("status") not in ENDED_STATUSES


__all__ = [
    "ENDED_STATUSES",
    "LIST_SESSIONS_LIMIT",
    "RUNNING_STATUSES",
    "AllFiltersRefused",
    "Listing",
    "Tool",
    "running_sessions",
    "tools_of",
]
