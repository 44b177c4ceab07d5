"""moto_server with a fixed injected latency per AWS call, run as its own process.

``python -m bench.server --port 5123`` serves every AWS API moto offers on localhost. A WSGI
middleware around moto's application sleeps ``latency`` seconds before each AWS request, in
the server's request thread: concurrent client calls wait concurrently, as they would on a
real network round trip, and the sleep costs the client process no CPU. The server runs in its
own process because a moto server inside the measured process would share its GIL and slow
the handler's own threads.

Bench-only endpoints (never delayed, never counted):

* ``GET/PUT /_bench/latency?ms=20``: read or set the injected latency.
* ``POST /_bench/seed-objects?bucket=b&prefix=p&count=n``: put ``n`` one-byte objects
  ``{p}{i:05d} ...`` straight into moto's S3 backend (setting up 250,000 objects through the
  API would dominate the bench's runtime; the objects are the same ``FakeKey`` either way).
* ``GET /_bench/connections``: JSON list of the WebSocket connection ids moto holds
  (``GetConnection`` cannot check absence: moto creates a connection on first sight).
* ``GET /_bench/stats``: AWS requests served since the last ``PUT /_bench/latency``.

moto's own request handling runs under one lock (see :meth:`LatencyMiddleware.__call__`);
the injected latency does not.

The API Gateway Management API endpoint carries the stage
(``https://{api-id}.execute-api.{region}.amazonaws.com/{stage}``); moto's server only routes
``/@connections/...`` at the root, so the middleware drops the stage segment the way API
Gateway itself does.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import threading
import time
from collections import Counter
from typing import Any
from urllib.parse import parse_qs, unquote

from moto.core import DEFAULT_ACCOUNT_ID
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple

_STAGE_CONNECTIONS = re.compile(r"^/[^/@]+(/@connections/.*)$")


class LatencyMiddleware:
    """Delay every AWS request by ``latency_s`` and serve the ``/_bench`` endpoints."""

    def __init__(self, app: Any, latency_s: float = 0.0) -> None:
        self.app = app
        self.latency_s = latency_s
        self._lock = threading.Lock()
        self._moto_lock = threading.Lock()
        self.requests: Counter[str] = Counter()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_bench/"):
            return self._bench(path, environ, start_response)
        if _STAGE_CONNECTIONS.match(path):
            for name in ("PATH_INFO", "REQUEST_URI", "RAW_URI"):
                match = _STAGE_CONNECTIONS.match(environ.get(name, ""))
                if match:
                    environ[name] = match.group(1)
        with self._lock:
            self.requests[_service_of(environ)] += 1
        if self.latency_s > 0:
            time.sleep(self.latency_s)
        # The latency is concurrent; moto's own work is not. moto's backends are not thread
        # safe: S3 ListObjectsV2 iterating a bucket while DeleteObjects removes keys fails with
        # KeyError (HTTP 500), and KMS RetireGrant by token rebuilds the key's grant dict, so
        # two concurrent retirements can lose one. The GIL already runs moto's Python one
        # thread at a time, so this lock costs little concurrency, and it removes moto
        # artefacts from the measurement. The response body is built inside the lock.
        with self._moto_lock:
            return list(self.app(environ, start_response))

    def _bench(self, path: str, environ: dict[str, Any], start_response: Any) -> Any:
        query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        method = environ.get("REQUEST_METHOD", "GET")
        body: Any
        if path == "/_bench/latency":
            if method == "PUT":
                self.latency_s = float(query["ms"]) / 1000.0
                with self._lock:
                    self.requests.clear()
            body = {"latency_ms": self.latency_s * 1000.0}
        elif path == "/_bench/seed-objects" and method == "POST":
            body = {"seeded": _seed_objects(query["bucket"], query["prefix"], int(query["count"]))}
        elif path == "/_bench/connections":
            body = {"connections": _connection_ids()}
        elif path == "/_bench/stats":
            with self._lock:
                body = {"requests": dict(self.requests)}
        else:
            start_response("404 Not Found", [("Content-Type", "application/json")])
            return [b'{"error": "unknown bench endpoint"}']
        data = json.dumps(body).encode()
        start_response(
            "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        )
        return [data]


def _service_of(environ: dict[str, Any]) -> str:
    auth = environ.get("HTTP_AUTHORIZATION", "")
    try:
        return str(auth.split(",")[0].split()[1].split("/")[3])
    except IndexError:
        return "unsigned"


def _seed_objects(bucket: str, prefix: str, count: int) -> int:
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for i in range(count):
        backend.put_object(bucket, f"{prefix}obj-{i:05d}.bin", b"x", disable_notification=True)
    return count


def _connection_ids() -> list[str]:
    from moto.apigatewaymanagementapi.models import apigatewaymanagementapi_backends

    ids: list[str] = []
    for account in apigatewaymanagementapi_backends.values():
        for backend in account.values():
            # moto keys connections by the raw, URL-encoded path segment ("abc%3D").
            ids.extend(unquote(c) for c in backend.connections.keys())
    return sorted(ids)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    # One log line per request would cost the server more CPU than moto's own work.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = LatencyMiddleware(DomainDispatcherApplication(create_backend_app), args.latency_ms / 1000)
    run_simple(
        "127.0.0.1",
        args.port,
        app,
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
