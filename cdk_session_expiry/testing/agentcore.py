"""The emulator's Amazon Bedrock AgentCore: the three Stop operations the cleanup calls and the
two list operations of the tool-session sweep.

moto implements no AgentCore data-plane operation. The emulator answers ``StopRuntimeSession``,
``StopCodeInterpreterSession`` and ``StopBrowserSession`` itself, in AWS's REST-JSON wire format
(AgentCore API Reference): a session a test registered as running is stopped (HTTP 200, and it
is no longer running); any other answers ``ResourceNotFoundException`` (HTTP 404, header
``x-amzn-ErrorType``, body ``{"message": ...}``), as AWS answers for an unknown or already
stopped session. Every call is recorded.

``ListCodeInterpreterSessions`` and ``ListBrowserSessions`` list a tool's sessions, running and
stopped, oldest first, ``maxResults`` a page (default 10, as AWS documents) with an opaque
``nextToken``, filtered by ``status``. AWS's documents disagree on the status values (the
service model's enum: ``READY``/``TERMINATED``; its documentation text and the API Reference:
``ACTIVE``/``STOPPING``/``STOPPED``): the emulator speaks one of them at a time
(``emulator.agentcore.vocabulary``, `MODEL_VOCABULARY` by default, or
`REFERENCE_VOCABULARY`), answers each summary's ``status`` in it and refuses a filter in
the other with ``ValidationException`` (HTTP 400) — one plausible behaviour of AWS, which the
documents do not settle; a sweep must cope with either.

What it does not model: session lifetimes and idle timeouts (a session runs until stopped; its
``createdAt`` is what the test gave), a ``STOPPING`` phase (a stopped session is ended at
once), ARN/identifier validation, IAM, and ``clientToken`` idempotency. No call lists runtime
sessions: AWS has none.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs

#: ``kind`` of
#: [`AgentCoreSessions.start`][cdk_session_expiry.testing.agentcore.AgentCoreSessions.start]: an
#: AgentCore runtime session (target: the
#: runtime ARN), a code interpreter or a browser session (target: its identifier).
RUNTIME = "runtime"
CODE_INTERPRETER = "code-interpreter"
BROWSER = "browser"
#: The endpoint AgentCore uses for ``StopRuntimeSession`` without a qualifier.
DEFAULT_QUALIFIER = "DEFAULT"

#: Status values of a running and of an ended session, in the two vocabularies of AWS's
#: documents: the service model's enum, and the API Reference's text (which adds ``STOPPING``).
MODEL_VOCABULARY = ("READY", "TERMINATED")
REFERENCE_VOCABULARY = ("ACTIVE", "STOPPED")

_RUNTIME_PATH = re.compile(r"/runtimes/(?P<target>.+)/stopruntimesession")
_LIST_PATH = re.compile(r"/(?P<tools>code-interpreters|browsers)/(?P<target>[^/]+)/sessions/list")
_TOOL_PATH = re.compile(r"/(?P<tools>code-interpreters|browsers)/(?P<target>[^/]+)/sessions/stop")
_SIGNING_SERVICE = re.compile(r"Credential=[^/]+/[^/]+/[^/]+/bedrock-agentcore/aws4_request")
_OPERATIONS = {
    RUNTIME: "StopRuntimeSession",
    CODE_INTERPRETER: "StopCodeInterpreterSession",
    BROWSER: "StopBrowserSession",
}


@dataclass(frozen=True)
class AgentCoreCall:
    """One Stop request the emulator answered."""

    operation: str
    #: The runtime ARN, or the code interpreter/browser identifier.
    target: str
    session_id: str
    #: ``StopRuntimeSession``'s qualifier as sent (``None``: not sent).
    qualifier: str | None
    #: True when the session was running and is now stopped; False: ResourceNotFoundException.
    stopped: bool


@dataclass(frozen=True)
class _Request:
    kind: str
    target: str
    session_id: str
    qualifier: str | None


class AgentCoreSessions:
    """Running AgentCore sessions and the Stop calls, shared by the emulator's server threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[tuple[str, str, str, str]] = set()
        #: When each session registered (running or stopped) was created, in order of start.
        self._created: dict[tuple[str, str, str, str], datetime] = {}
        #: Every Stop request answered, in order.
        self.calls: list[AgentCoreCall] = []
        #: The status values the list operations speak: (running, ended), `MODEL_VOCABULARY`
        #: or `REFERENCE_VOCABULARY`.
        self.vocabulary: tuple[str, str] = MODEL_VOCABULARY
        #: The list requests answered, in order: (operation, identifier, status filter or None).
        self.list_calls: list[tuple[str, str, str | None]] = []

    def start(
        self,
        kind: str,
        target: str,
        session_id: str,
        *,
        qualifier: str | None = None,
        created_at: datetime | None = None,
    ) -> None:
        """Register a running session: ``kind`` is `RUNTIME` (``target`` the runtime
        ARN, ``qualifier`` its endpoint, default ``DEFAULT``), `CODE_INTERPRETER` or
        `BROWSER` (``target`` the identifier); ``created_at`` is the ``createdAt`` the list
        operations answer (an aware ``datetime``; default now).

        Raises:
            ValueError: an unknown ``kind``, or a qualifier for a tool session.
        """
        if kind not in _OPERATIONS:
            raise ValueError(f"kind={kind!r}: expected one of {', '.join(_OPERATIONS)}")
        if qualifier is not None and kind != RUNTIME:
            raise ValueError(f"qualifier={qualifier!r}: only runtime sessions have one")
        endpoint = (qualifier or DEFAULT_QUALIFIER) if kind == RUNTIME else ""
        key = (kind, target, session_id, endpoint)
        with self._lock:
            self._running.add(key)
            self._created[key] = created_at or datetime.now(timezone.utc)

    def running(self, kind: str | None = None) -> set[tuple[str, str]]:
        """(target, session id) of the sessions still running, of one ``kind`` or all."""
        with self._lock:
            return {(t, s) for k, t, s, _ in self._running if kind is None or k == kind}

    def reset(self) -> None:
        """Forget every session and call."""
        with self._lock:
            self._running.clear()
            self._created.clear()
            self.calls.clear()
            self.list_calls.clear()
            self.vocabulary = MODEL_VOCABULARY

    def answer(
        self, environ: Mapping[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes] | None:
        """Answer a Stop or list request as AgentCore does; ``None`` when ``environ`` is not
        one."""
        listed = self._answer_list(environ, start_response)
        if listed is not None:
            return listed
        request = _parse(environ)
        if request is None:
            return None
        endpoint = (request.qualifier or DEFAULT_QUALIFIER) if request.kind == RUNTIME else ""
        key = (request.kind, request.target, request.session_id, endpoint)
        with self._lock:
            stopped = key in self._running
            self._running.discard(key)
            self.calls.append(
                AgentCoreCall(
                    _OPERATIONS[request.kind],
                    request.target,
                    request.session_id,
                    request.qualifier,
                    stopped,
                )
            )
        if not stopped:
            return _respond(
                start_response,
                404,
                {"message": f"Session {request.session_id} not found or already terminated"},
                [("x-amzn-ErrorType", "ResourceNotFoundException")],
            )
        return _respond(start_response, 200, *_success(request))

    def _answer_list(
        self, environ: Mapping[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes] | None:
        """``List…Sessions``: one page of the tool's sessions (see the module docstring)."""
        found = _LIST_PATH.fullmatch(str(environ.get("PATH_INFO", "")))
        if environ.get("REQUEST_METHOD") != "POST" or found is None or not _signed(environ):
            return None
        kind = CODE_INTERPRETER if found["tools"] == "code-interpreters" else BROWSER
        body = _json_body(environ)
        status = body.get("status")
        with self._lock:
            self.list_calls.append((_LIST_OPERATIONS[kind], found["target"], status))
            running, ended = self.vocabulary
            if status is not None and status not in self.vocabulary:
                return _respond(
                    start_response,
                    400,
                    {"message": f"status {status!r}: expected one of {running}, {ended}"},
                    [("x-amzn-ErrorType", "ValidationException")],
                )
            summaries = [
                _summary(kind, key, created, running if key in self._running else ended)
                for key, created in self._created.items()
                if key[0] == kind and key[1] == found["target"]
            ]
        summaries = [s for s in summaries if status is None or s["status"] == status]
        start = int(body.get("nextToken") or 0)
        size = int(body.get("maxResults") or 10)
        page: dict[str, Any] = {"items": summaries[start : start + size]}
        if start + size < len(summaries):
            page["nextToken"] = str(start + size)
        return _respond(start_response, 200, page, [])


_LIST_OPERATIONS = {
    CODE_INTERPRETER: "ListCodeInterpreterSessions",
    BROWSER: "ListBrowserSessions",
}


def _signed(environ: Mapping[str, Any]) -> bool:
    return _SIGNING_SERVICE.search(str(environ.get("HTTP_AUTHORIZATION", ""))) is not None


def _json_body(environ: Mapping[str, Any]) -> dict[str, Any]:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    raw = environ["wsgi.input"].read(length) if length else b""
    body = json.loads(raw or b"{}")
    return body if isinstance(body, dict) else {}


def _summary(
    kind: str, key: tuple[str, str, str, str], created: datetime, status: str
) -> dict[str, Any]:
    identifier = "codeInterpreterIdentifier" if kind == CODE_INTERPRETER else "browserIdentifier"
    stamp = created.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    return {
        identifier: key[1],
        "sessionId": key[2],
        "status": status,
        "createdAt": stamp,
        "lastUpdatedAt": stamp,
    }


def _parse(environ: Mapping[str, Any]) -> _Request | None:
    if not _SIGNING_SERVICE.search(str(environ.get("HTTP_AUTHORIZATION", ""))):
        return None
    method, path = environ.get("REQUEST_METHOD"), str(environ.get("PATH_INFO", ""))
    query = {k: v[0] for k, v in parse_qs(str(environ.get("QUERY_STRING", ""))).items()}
    runtime = _RUNTIME_PATH.fullmatch(path)
    if method == "POST" and runtime is not None:
        session = str(environ.get("HTTP_X_AMZN_BEDROCK_AGENTCORE_RUNTIME_SESSION_ID", ""))
        return _Request(RUNTIME, runtime["target"], session, query.get("qualifier"))
    tool = _TOOL_PATH.fullmatch(path)
    if method == "PUT" and tool is not None:
        kind = CODE_INTERPRETER if tool["tools"] == "code-interpreters" else BROWSER
        return _Request(kind, tool["target"], query.get("sessionId", ""), None)
    return None


def _success(request: _Request) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    if request.kind == RUNTIME:
        return {}, [("X-Amzn-Bedrock-AgentCore-Runtime-Session-Id", request.session_id)]
    identifier = (
        "codeInterpreterIdentifier" if request.kind == CODE_INTERPRETER else ("browserIdentifier")
    )
    now = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    return {identifier: request.target, "sessionId": request.session_id, "lastUpdatedAt": now}, []


def _respond(
    start_response: Callable[..., Any],
    status: int,
    body: Mapping[str, Any],
    headers: list[tuple[str, str]],
) -> list[bytes]:
    data = json.dumps(body).encode("utf-8")
    reason = {200: "OK", 400: "Bad Request"}.get(status, "Not Found")
    start_response(
        f"{status} {reason}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(data))), *headers],
    )
    return [data]
