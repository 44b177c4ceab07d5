"""The bench endpoint in process: botocore's requests answered without a socket.

botocore emits ``before-send`` just before it would send a signed request over HTTP; a handler
that returns a response replaces the send (``botocore.endpoint.Endpoint._do_get_response``).
:class:`InProcessTransport` is such a handler: it hands the request to the bench endpoint's
:func:`bench.endpoint.respond` and returns its answer as botocore's ``AWSResponse``. Everything
before the send — the runtime's code, botocore's parameter validation, serialisation, endpoint
rules, signing — and everything after — parsing, retries, the adaptive limiter — still runs;
only urllib3 and the socket do not. The storm benchmark uses it to make hundreds of thousands of
real calls in minutes; the throughput bench keeps the HTTP endpoint, whose socket work is part of
what it measures.

Register it **last** (``register_last``), so every other ``before-send`` handler (the pacing
limiter, the call counters) runs first, as it would before a real send.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

from botocore.awsrequest import AWSResponse, HeadersDict

from . import endpoint

#: The endpoint URL every in-process client is built with: an address nothing listens on, so a
#: request that escaped the transport fails at once; an IP address makes S3 use path-style URLs.
ENDPOINT_URL = "http://127.0.0.1:9"


class _Raw:
    """The ``raw`` of an ``AWSResponse``: what botocore reads the body from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


class InProcessTransport:
    """``before-send`` handler answering from :data:`bench.endpoint.STATE`.

    Args:
        on_call: called with ``(operation, status)`` after each answer (the storm's counters);
            default none.
        latency_s: seconds each answer waits in the caller's thread (the GIL is free meanwhile,
            as during a network round trip); default none.
    """

    def __init__(
        self, on_call: Callable[[str, int], None] | None = None, latency_s: float = 0.0
    ) -> None:
        self.on_call = on_call
        self.latency_s = latency_s
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, request: Any, **_: Any) -> AWSResponse:
        url = urlsplit(request.url)
        query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        target = request.headers.get("X-Amz-Target") or ""
        if isinstance(target, bytes):
            target = target.decode()
        body = request.body or b""
        if hasattr(body, "read"):
            body = body.read()
        if isinstance(body, str):
            body = body.encode()
        op, answer = endpoint.respond(request.method, url.path, query, target, bytes(body))
        if self.latency_s:
            time.sleep(self.latency_s)
        with self._lock:
            self.calls[op] += 1
        if self.on_call is not None:
            self.on_call(op, answer.status)
        headers = HeadersDict({"x-amz-request-id": "bench"})
        if answer.status != 204:
            headers["Content-Type"] = answer.ctype
            headers["Content-Length"] = str(len(answer.body))
        for name, value in answer.headers:
            headers[name] = value
        return AWSResponse(request.url, answer.status, headers, _Raw(answer.body))


def install(session: Any, transport: InProcessTransport) -> None:
    """Answer every client later created from ``session`` (a boto3 or botocore session)."""
    core = getattr(session, "_session", session)
    core.get_component("event_emitter").register_last("before-send", transport)
