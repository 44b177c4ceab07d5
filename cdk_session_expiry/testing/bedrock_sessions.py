"""The emulator's Amazon Bedrock session management (``bedrock-agent-runtime``), which moto lacks.

moto (5.2) implements no ``bedrock-agent-runtime`` operation. `BedrockSessions` answers the
session-management API in AWS's REST-JSON wire format (Amazon Bedrock API Reference, "Agents
for Amazon Bedrock Runtime"): ``CreateSession``, ``GetSession``, ``ListSessions``,
``EndSession``, ``DeleteSession``, ``CreateInvocation``, ``ListInvocations``,
``PutInvocationStep``, ``GetInvocationStep`` and ``ListInvocationSteps`` — the calls LangGraph's
``BedrockSessionSaver`` (``langgraph-checkpoint-aws``) and the cleanup make. The emulator's
server answers them (`answer`); a client of an in-process moto (``mock_aws``) gets the same
answers through `attach`.

As AWS documents it:

* a session is ``ACTIVE`` when created; ``EndSession`` ends it (``ENDED``: readable, nothing
  can be added); ``DeleteSession`` deletes an ended (or expired) session with its invocations
  and steps, and refuses an ``ACTIVE`` one (``ConflictException``, HTTP 409);
* an unknown session answers ``ResourceNotFoundException`` (HTTP 404), also once deleted;
* a session is named by its id or its ARN (``arn:aws:bedrock:<region>:<account>:session/<id>``);
* ``ListInvocationSteps`` lists the newest step first (what the checkpointer's "most recent
  checkpoint" relies on) and every list pages with ``maxResults``/``nextToken``.

Where AWS does not document the answer, the emulator's choice (a test that depends on it says
so): ``EndSession`` of a session already ended or expired answers ``ConflictException``; adding
to a session that is not ``ACTIVE`` (``CreateInvocation``, ``PutInvocationStep``) answers
``ConflictException``, as does ``CreateInvocation`` with an ``invocationId`` already used (the
checkpointer relies on that one); a ``PutInvocationStep`` with an ``invocationStepId`` already
used replaces the step; a list page holds 20 items unless ``maxResults`` says otherwise.
Not modelled: session expiry on AWS's own clock (`expire` marks a session ``EXPIRED``),
encryption keys, tags, IAM, quotas, images' byte limits.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

ACTIVE = "ACTIVE"
ENDED = "ENDED"
EXPIRED = "EXPIRED"
#: Items per list page when ``maxResults`` is not given (AWS documents no default).
DEFAULT_PAGE_SIZE = 20

_UUID = r"[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}"
_SESSION_REF = re.compile(
    rf"(?:arn:aws(?:-[^:]+)?:bedrock:[a-z0-9-]+:[0-9]{{12}}:session/)?(?P<id>{_UUID})"
)
_PATH = re.compile(r"/sessions/(?:(?P<ref>arn:[^/]+/[^/]+|[^/]+)(?P<rest>/.*)?)?")
_SIGNING_SERVICE = re.compile(r"Credential=[^/]+/[^/]+/(?P<region>[^/]+)/bedrock/aws4_request")
_REASONS = {
    200: "OK",
    201: "Created",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
}


@dataclass(frozen=True)
class BedrockSessionCall:
    """One session-management request the emulator answered."""

    operation: str
    #: The session's id (``None``: the request named none, or named it unreadably).
    session_id: str | None
    #: The HTTP status answered (200/201 success, 404 not found, 409 conflict, 400 invalid).
    status: int


@dataclass
class _Session:
    session_id: str
    arn: str
    created_at: datetime
    status: str = ACTIVE
    updated_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    metadata: dict[str, str] = field(default_factory=dict)
    #: invocationId -> createdAt, in creation order.
    invocations: dict[str, datetime] = field(default_factory=dict)
    #: invocationStepId -> step (its invocation, time, payload), in the order put.
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)


class _Answer(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class _Request:
    method: str
    path: str
    query: Mapping[str, str]
    body: Mapping[str, Any]
    region: str


class BedrockSessions:
    """Bedrock sessions, their invocations and steps, and the calls answered; thread safe.

    Args:
        account_id: the account of the sessions' ARNs.
    """

    def __init__(self, account_id: str) -> None:
        self.account_id = account_id
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._refused: dict[str, tuple[int, str]] = {}
        #: Every request answered, in order.
        self.calls: list[BedrockSessionCall] = []

    # -- what tests look at ------------------------------------------------------------------
    def status(self, session_id: str) -> str | None:
        """The session's status (``ACTIVE``, ``ENDED``, ``EXPIRED``); ``None`` once deleted or
        never created."""
        with self._lock:
            found = self._sessions.get(session_id)
            return found.status if found else None

    def steps(self, session_id: str) -> int:
        """How many invocation steps the session stores (0 once deleted)."""
        with self._lock:
            found = self._sessions.get(session_id)
            return len(found.steps) if found else 0

    def session_ids(self) -> set[str]:
        """The ids of every session stored, whatever its status."""
        with self._lock:
            return set(self._sessions)

    def expire(self, session_id: str) -> None:
        """Mark a session ``EXPIRED``, as AWS does on its own clock (not modelled).

        Raises:
            KeyError: no such session.
        """
        with self._lock:
            self._sessions[session_id].status = EXPIRED

    def refuse(
        self, session_id: str, *, status: int = 403, code: str = "AccessDeniedException"
    ) -> None:
        """Answer every request naming ``session_id`` with an error (default: HTTP 403
        ``AccessDeniedException``) until `allow`; nothing changes. The in-process counterpart
        of the emulator's `Fault` (which matches one method and path)."""
        with self._lock:
            self._refused[session_id] = (status, code)

    def allow(self, session_id: str) -> None:
        """Stop refusing ``session_id`` (`refuse`). Idempotent."""
        with self._lock:
            self._refused.pop(session_id, None)

    def reset(self) -> None:
        """Forget every session, refusal and call."""
        with self._lock:
            self._sessions.clear()
            self._refused.clear()
            self.calls.clear()

    # -- the two ways in -----------------------------------------------------------------------
    def answer(
        self, environ: Mapping[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes] | None:
        """Answer a session-management request of the emulator's server; ``None`` when
        ``environ`` is not one."""
        signed = _SIGNING_SERVICE.search(str(environ.get("HTTP_AUTHORIZATION", "")))
        path = str(environ.get("PATH_INFO", ""))
        if signed is None or not path.startswith("/sessions/"):
            return None
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        query = {k: v[0] for k, v in parse_qs(str(environ.get("QUERY_STRING", ""))).items()}
        request = _Request(
            str(environ.get("REQUEST_METHOD")), path, query, _json(raw), signed["region"]
        )
        status, headers, body = self.handle(request)
        start_response(f"{status} {_REASONS.get(status, 'Error')}", headers)
        return [body]

    def attach(self, client: Any) -> Any:
        """Answer ``client``'s requests (a boto3 ``bedrock-agent-runtime`` client) in-process,
        e.g. under moto's ``mock_aws``, instead of sending them; returns ``client``. A client
        answers to the first `BedrockSessions` attached to it; attaching again changes nothing."""
        from botocore.awsrequest import AWSResponse

        def send(request: Any, **_: Any) -> Any:
            url = urlsplit(request.url)
            signed = _SIGNING_SERVICE.search(_text(request.headers.get("Authorization")))
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            body = request.body or b""
            parsed = _Request(
                request.method,
                unquote(url.path),
                query,
                _json(body if isinstance(body, bytes) else _text(body).encode("utf-8")),
                signed["region"] if signed else client.meta.region_name,
            )
            status, headers, data = self.handle(parsed)
            return AWSResponse(request.url, status, dict(headers), _Raw(data))

        # botocore calls every before-send handler and takes the first answer: one per client.
        client.meta.events.register(
            "before-send.bedrock-agent-runtime", send, unique_id="cdk-session-expiry-bedrock"
        )
        return client

    # -- the operations --------------------------------------------------------------------------
    def handle(self, request: _Request) -> tuple[int, list[tuple[str, str]], bytes]:
        """``(status, headers, body)`` of one request."""
        operation, session_id = _route(request.method, request.path), None
        try:
            if operation is None:
                raise _Answer(400, "ValidationException", f"unknown request {request.path}")
            ref = _PATH.fullmatch(request.path)
            session_ref = ref["ref"] if ref else None
            if session_ref is not None:
                found = _SESSION_REF.fullmatch(session_ref)
                if found is None:
                    raise _Answer(
                        400, "ValidationException", f"sessionIdentifier {session_ref!r} invalid"
                    )
                session_id = found["id"]
            with self._lock:
                refused = self._refused.get(session_id or "")
                if refused is not None:
                    raise _Answer(*refused, f"refused by the emulator: session {session_id}")
                status, body = getattr(self, f"_{operation}")(session_id, request)
        except _Answer as answer:
            status, body = answer.status, {"message": answer.message}
            headers = [("x-amzn-ErrorType", answer.code)]
        else:
            headers = []
        with self._lock:
            self.calls.append(
                BedrockSessionCall(_OPERATIONS.get(operation or "", "?"), session_id, status)
            )
        data = json.dumps(body, default=_iso).encode("utf-8")
        return (
            status,
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(data))),
                *headers,
            ],
            data,
        )

    def _session(self, session_id: str | None) -> _Session:
        found = self._sessions.get(session_id or "")
        if found is None:
            raise _Answer(404, "ResourceNotFoundException", f"Session {session_id} not found")
        return found

    def _active(self, session_id: str | None) -> _Session:
        found = self._session(session_id)
        if found.status != ACTIVE:
            raise _Answer(
                409,
                "ConflictException",
                f"Session {session_id} is {found.status}: nothing can be added",
            )
        return found

    def _create_session(self, _: str | None, request: _Request) -> tuple[int, dict[str, Any]]:
        session_id = str(uuid.uuid4())
        arn = f"arn:aws:bedrock:{request.region}:{self.account_id}:session/{session_id}"
        now = datetime.now(timezone.utc)
        created = _Session(
            session_id,
            arn,
            now,
            updated_at=now,
            metadata=dict(request.body.get("sessionMetadata") or {}),
        )
        self._sessions[session_id] = created
        return 201, {**_summary(created), "createdAt": now}

    def _get_session(self, session_id: str | None, _: _Request) -> tuple[int, dict[str, Any]]:
        found = self._session(session_id)
        return 200, {**_summary(found), "sessionMetadata": found.metadata}

    def _list_sessions(self, _: str | None, request: _Request) -> tuple[int, dict[str, Any]]:
        items = [_summary(s) for s in self._sessions.values()]
        page, token = _page(items, request.query)
        return 200, {"sessionSummaries": page, **token}

    def _end_session(self, session_id: str | None, _: _Request) -> tuple[int, dict[str, Any]]:
        found = self._session(session_id)
        if found.status != ACTIVE:
            raise _Answer(
                409, "ConflictException", f"Session {session_id} is already {found.status}"
            )
        found.status, found.updated_at = ENDED, datetime.now(timezone.utc)
        return 200, {"sessionArn": found.arn, "sessionId": found.session_id, "sessionStatus": ENDED}

    def _delete_session(self, session_id: str | None, _: _Request) -> tuple[int, dict[str, Any]]:
        found = self._session(session_id)
        if found.status == ACTIVE:
            raise _Answer(
                409,
                "ConflictException",
                f"Session {session_id} is ACTIVE: end it before deleting it",
            )
        del self._sessions[found.session_id]
        return 200, {}

    def _create_invocation(
        self, session_id: str | None, request: _Request
    ) -> tuple[int, dict[str, Any]]:
        found = self._active(session_id)
        invocation_id = str(request.body.get("invocationId") or uuid.uuid4())
        if invocation_id in found.invocations:
            raise _Answer(409, "ConflictException", f"Invocation {invocation_id} already exists")
        now = datetime.now(timezone.utc)
        found.invocations[invocation_id], found.updated_at = now, now
        return 201, {"createdAt": now, "invocationId": invocation_id, "sessionId": found.session_id}

    def _list_invocations(
        self, session_id: str | None, request: _Request
    ) -> tuple[int, dict[str, Any]]:
        found = self._session(session_id)
        items = [
            {"createdAt": at, "invocationId": i, "sessionId": found.session_id}
            for i, at in reversed(found.invocations.items())
        ]
        page, token = _page(items, request.query)
        return 200, {"invocationSummaries": page, **token}

    def _put_invocation_step(
        self, session_id: str | None, request: _Request
    ) -> tuple[int, dict[str, Any]]:
        found = self._active(session_id)
        invocation_id = str(request.body.get("invocationIdentifier") or "")
        if invocation_id not in found.invocations:
            raise _Answer(404, "ResourceNotFoundException", f"Invocation {invocation_id} not found")
        step_id = str(request.body.get("invocationStepId") or uuid.uuid4())
        found.steps.pop(step_id, None)  # a step put again moves to the newest place
        found.steps[step_id] = {
            "invocationId": invocation_id,
            "invocationStepId": step_id,
            "invocationStepTime": _time(request.body.get("invocationStepTime")),
            "payload": request.body.get("payload") or {},
            "sessionId": found.session_id,
        }
        found.updated_at = datetime.now(timezone.utc)
        return 201, {"invocationStepId": step_id}

    def _get_invocation_step(
        self, session_id: str | None, request: _Request
    ) -> tuple[int, dict[str, Any]]:
        found = self._session(session_id)
        step_id = request.path.rstrip("/").rsplit("/", 1)[-1]
        step = found.steps.get(step_id)
        invocation_id = request.body.get("invocationIdentifier")
        if step is None or step["invocationId"] != invocation_id:
            raise _Answer(404, "ResourceNotFoundException", f"Invocation step {step_id} not found")
        return 200, {"invocationStep": step}

    def _list_invocation_steps(
        self, session_id: str | None, request: _Request
    ) -> tuple[int, dict[str, Any]]:
        found = self._session(session_id)
        invocation_id = request.body.get("invocationIdentifier")
        if invocation_id is not None and invocation_id not in found.invocations:
            raise _Answer(404, "ResourceNotFoundException", f"Invocation {invocation_id} not found")
        newest_first = sorted(
            enumerate(found.steps.values()),
            key=lambda pair: (pair[1]["invocationStepTime"], pair[0]),
            reverse=True,
        )
        items = [
            {k: v for k, v in step.items() if k != "payload"}
            for _, step in newest_first
            if invocation_id is None or step["invocationId"] == invocation_id
        ]
        page, token = _page(items, request.query)
        return 200, {"invocationStepSummaries": page, **token}


#: The method and path shape of each operation (Amazon Bedrock API Reference).
_ROUTES: tuple[tuple[str, str, str], ...] = (
    ("PUT", r"/sessions/", "create_session"),
    ("POST", r"/sessions/", "list_sessions"),
    ("GET", r"/sessions/[^/]+(?:/[^/]+)?/?", "get_session"),
    ("PATCH", r"/sessions/[^/]+(?:/[^/]+)?/?", "end_session"),
    ("DELETE", r"/sessions/[^/]+(?:/[^/]+)?/?", "delete_session"),
    ("PUT", r"/sessions/.+/invocations/?", "create_invocation"),
    ("POST", r"/sessions/.+/invocations/?", "list_invocations"),
    ("PUT", r"/sessions/.+/invocationSteps/?", "put_invocation_step"),
    ("POST", r"/sessions/.+/invocationSteps/?", "list_invocation_steps"),
    ("POST", rf"/sessions/.+/invocationSteps/{_UUID}", "get_invocation_step"),
)
_OPERATIONS = {
    name: "".join(part.capitalize() for part in name.split("_")) for _, _, name in _ROUTES
}


def _route(method: str, path: str) -> str | None:
    for route_method, pattern, name in _ROUTES:
        if method == route_method and re.fullmatch(pattern, path):
            return name
    return None


def _summary(session: _Session) -> dict[str, Any]:
    return {
        "createdAt": session.created_at,
        "lastUpdatedAt": session.updated_at,
        "sessionArn": session.arn,
        "sessionId": session.session_id,
        "sessionStatus": session.status,
    }


def _page(items: list[Any], query: Mapping[str, str]) -> tuple[list[Any], dict[str, str]]:
    start = int(query.get("nextToken") or 0)
    end = start + int(query.get("maxResults") or DEFAULT_PAGE_SIZE)
    return items[start:end], ({"nextToken": str(end)} if end < len(items) else {})


def _time(value: Any) -> datetime:
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, timezone.utc)
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return datetime.now(timezone.utc)


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    raise TypeError(f"{value!r} is not JSON serializable")


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return "" if value is None else str(value)


def _json(raw: bytes) -> dict[str, Any]:
    if not raw:
        return {}
    loaded = json.loads(raw)
    return loaded if isinstance(loaded, dict) else {}


class _Raw:
    """The raw response botocore reads an in-process answer from."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterable[bytes]:
        yield self._data
