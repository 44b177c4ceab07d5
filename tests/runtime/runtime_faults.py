"""Stubs for the AWS behaviour moto does not reproduce, through botocore's event system.

moto 5.2.5 answers DeleteConnection of an unknown connection with 200 (AWS: 410
``GoneException``), RetireGrant of a retired grant with 200 (AWS: 400 ``NotFoundException``),
never puts ``Errors`` into a DeleteObjects answer, and never throttles or fails. These helpers
answer chosen calls *before* moto sees them, with the exact wire response AWS sends, so the
real botocore parsing and retry logic runs on them.

A handler registered with ``register_first`` on ``before-send`` runs before moto's stubber, but
botocore still calls moto afterwards (it keeps the first non-None answer). To make a stubbed
call "not applied" (the usual case: throttled or rejected requests change nothing), the request
URL is pointed at a host moto does not serve. ``applied=True`` keeps moto's side effect and
only replaces the answer (a 5xx after the server acted, which idempotent cleanup must survive).
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import EndpointConnectionError

_NOWHERE = "http://fault-injected.invalid/"


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


def _response(
    request: AWSPreparedRequest, status: int, headers: dict[str, str], body: bytes, applied: bool
) -> AWSResponse:
    url = request.url
    if not applied:
        request.url = _NOWHERE
    return AWSResponse(url, status, headers, _Raw(body))  # type: ignore[arg-type]


# --- wire responses, per protocol -------------------------------------------------------------
def rest_json_error(
    status: int, code: str, message: str = "stubbed"
) -> tuple[int, dict[str, str], bytes]:
    """API Gateway Management API (rest-json): the code travels in ``x-amzn-errortype``."""
    return (
        status,
        {"x-amzn-errortype": code, "content-type": "application/json"},
        json.dumps({"message": message}).encode(),
    )


def json_error(
    status: int, code: str, message: str = "stubbed"
) -> tuple[int, dict[str, str], bytes]:
    """KMS (json 1.1): the code travels in ``__type``."""
    return (
        status,
        {"content-type": "application/x-amz-json-1.1"},
        json.dumps({"__type": code, "message": message}).encode(),
    )


def s3_error(status: int, code: str, message: str = "stubbed") -> tuple[int, dict[str, str], bytes]:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Error><Code>{code}</Code><Message>{message}</Message></Error>"
    )
    return status, {"content-type": "application/xml"}, body.encode()


def s3_delete_result_with_errors(
    keys: list[str], code: str = "AccessDenied"
) -> tuple[int, dict[str, str], bytes]:
    """A DeleteObjects answer: HTTP 200 whose body lists per-key ``Errors``."""
    from xml.sax.saxutils import escape

    errors = "".join(
        f"<Error><Key>{escape(k)}</Key><Code>{code}</Code><Message>Access Denied</Message></Error>"
        for k in keys
    )
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">{errors}</DeleteResult>'
    )
    return 200, {"content-type": "application/xml"}, body.encode()


def answer(
    client: Any,
    operation: str,
    responder: Callable[[AWSPreparedRequest], tuple[int, dict[str, str], bytes] | None],
    *,
    applied: bool = False,
) -> list[AWSPreparedRequest]:
    """Answer ``client``'s ``operation`` calls with ``responder(request)`` (``None``: let moto
    answer). Returns the list of requests the responder answered."""
    answered: list[AWSPreparedRequest] = []
    service = client.meta.service_model.service_id.hyphenize()

    def handler(request: AWSPreparedRequest, **_: Any) -> AWSResponse | None:
        wire = responder(request)
        if wire is None:
            return None
        answered.append(request)
        return _response(request, *wire, applied)

    client.meta.events.register_first(f"before-send.{service}.{operation}", handler)
    return answered


def times(n: int, wire: tuple[int, dict[str, str], bytes]) -> Callable[[AWSPreparedRequest], Any]:
    """A responder that answers ``wire`` to the first ``n`` calls, then lets moto answer."""
    left = [n]
    lock = threading.Lock()

    def responder(_: AWSPreparedRequest) -> Any:
        with lock:
            if left[0] <= 0:
                return None
            left[0] -= 1
            return wire

    return responder


class FaultInjector:
    """Injects throttling, 5xx and connection errors into every call of the given clients at
    ``rate`` (seeded, so a run is reproducible). Counts what it injected."""

    _THROTTLE: ClassVar[dict[str, Callable[[], Any]]] = {
        "apigatewaymanagementapi": lambda: rest_json_error(429, "LimitExceededException"),
        "kms": lambda: json_error(400, "ThrottlingException"),
        "s3": lambda: s3_error(503, "SlowDown"),
        "dynamodb": lambda: json_error(400, "ThrottlingException"),
    }
    _SERVER: ClassVar[dict[str, Callable[[], Any]]] = {
        "apigatewaymanagementapi": lambda: rest_json_error(500, "InternalServerErrorException"),
        "kms": lambda: json_error(500, "KMSInternalException"),
        "s3": lambda: s3_error(500, "InternalError"),
        "dynamodb": lambda: json_error(500, "InternalServerError"),
    }

    def __init__(self, rate: float, seed: int) -> None:
        self.rate = rate
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.injected: Counter[str] = Counter()
        self.calls = 0
        self.enabled = True

    def attach(self, client: Any) -> None:
        name = client.meta.service_model.endpoint_prefix
        service = client.meta.service_model.service_id.hyphenize()
        key = "apigatewaymanagementapi" if "apigateway" in service else name

        def handler(request: AWSPreparedRequest, **_: Any) -> AWSResponse | None:
            with self.lock:
                self.calls += 1
                if not self.enabled or self.rng.random() >= self.rate:
                    return None
                kind = self.rng.choice(("throttle", "5xx", "5xx-applied", "connection"))
                self.injected[kind] += 1
            if kind == "connection":
                raise EndpointConnectionError(endpoint_url=request.url)
            wire = (self._THROTTLE if kind == "throttle" else self._SERVER)[key]()
            return _response(request, *wire, applied=kind == "5xx-applied")

        client.meta.events.register_first(f"before-send.{service}", handler)
