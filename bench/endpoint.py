"""A CPU-cheap local endpoint for the cleanup's calls, with injected latency (bench target).

``python -m bench.endpoint --port 5124`` answers, in AWS's wire format, exactly the calls the
cleanup and the expiry sweeper make (and nothing else):

* API Gateway Management API ``DeleteConnection`` (``DELETE /{stage}/@connections/{id}``):
  204, or 410 ``GoneException`` for a connection it does not hold;
* KMS ``RetireGrant`` (JSON 1.1, by ``GrantToken`` or ``GrantId`` + ``KeyId``): ``{}``, or 400
  ``NotFoundException`` for a grant it does not hold;
* KMS ``ListGrants`` (JSON 1.1, ``KeyId`` + ``GrantId`` filter, as the cleanup's check of items
  written before ownership records sends it): the grant it holds with that id — ``Name``,
  ``GrantId``, ``KeyId`` (the request's), ``GranteePrincipal``, ``RetiringPrincipal``,
  ``Operations``, ``CreationDate`` (epoch seconds) — or no grant, ``Truncated`` false;
* S3 ``ListObjectsV2`` (``GET /{bucket}?list-type=2``, path style; ``encoding-type=url`` encodes
  keys and prefix as S3 does, ``+`` for a space), pages of at most ``max-keys`` (1,000) with a
  continuation token; each entry carries ``LastModified``, ``ETag``, ``Size``, ``StorageClass``
  and ``ChecksumAlgorithm`` as S3 sends them, so the client parses what it parses against S3;
* S3 ``DeleteObjects`` (``POST /{bucket}?delete``, at most 1,000 keys, ``Quiet`` honoured; a
  missing key counts as deleted), ``DeleteObject`` (204) and ``PutObject`` (archive writes);
* EventBridge ``PutEvents`` (every entry accepted);
* DynamoDB (JSON 1.0): ``TransactWriteItems`` (with ``CancellationReasons`` on a failed
  condition), ``BatchGetItem``, ``GetItem``, ``PutItem``, ``DeleteItem``, ``Query`` on a global
  secondary index — the ownership records' marks, releases and reads, and the sweeper's calls
  (:mod:`bench.dynamo`).

**Quotas** (``PUT /_bench/limits`` JSON ``{"<Operation>": requests per second}``): an operation
with a limit is answered through a token bucket of that rate (capacity one second's worth), and
a request beyond it gets the service's throttling answer — KMS and DynamoDB
``ThrottlingException`` (400), API Gateway ``LimitExceededException`` (429), S3 ``SlowDown``
(503) — so the client's retry and pacing code meets what AWS answers above a quota. Every
attempt's arrival time is kept per operation (``GET /_bench/arrivals``) for the largest number
in any one-second window.

Why not moto for throughput: moto builds every answer in pure Python under one lock (a 1,000-key
``ListObjectsV2`` costs it 0.1-0.3 s of CPU), so on a shared 2-core machine it competes with the
measured process for CPU. Here a listing is a join of pre-rendered fragments, and the latency is a
``time.sleep`` in the request's own thread (a threaded server: concurrent calls wait concurrently,
as on a network, and waiting costs no CPU). Its sockets set ``TCP_NODELAY``: without it, Nagle's
algorithm against the client's delayed acknowledgement added ~26 ms to every call made with others
in flight (see ``Handler.disable_nagle_algorithm``). Its CPU time is read from ``/proc`` and
printed with every run, so the claim is checked, not assumed. moto stays the reference for
correctness: every scenario is also run against moto and verified there.

The same answers are available in process (:func:`respond`): the storm benchmark
(:mod:`bench.storm`) hands botocore's requests to it from a ``before-send`` hook instead of a
socket, so a run of 100,000 sessions costs no HTTP work (the runtime's code and botocore's
serialising, signing and parsing all still run).

State (what the cleanup must remove) is seeded and read through bench-only endpoints, never
delayed and never counted:

* ``POST /_bench/reset``: forget everything;
* ``POST /_bench/seed`` JSON ``{"connections": [...], "grants": [{"id", "token", "name"}],
  "objects": {"bucket": {"prefix": count}}, "tables": {"name": {"hash": "pk", "items":
  [...]}}}``: keys are ``{prefix}obj-{i:05d}.bin``; tables are created (if new) and filled;
* ``POST /_bench/count`` JSON ``{"bucket", "prefixes": [...]}``: objects left under each;
* ``POST /_bench/items`` JSON ``{"table", "keys": [...]}``: the items (``null`` when absent);
* ``GET /_bench/connections``, ``GET /_bench/grants``: what is left;
* ``GET/PUT /_bench/latency?ms=20``; ``GET /_bench/stats``: AWS requests by operation since
  the last ``PUT /_bench/latency``, and those throttled since the last ``PUT /_bench/limits``.
"""

from __future__ import annotations

import argparse
import base64
import bisect
import json
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple
from urllib.parse import parse_qs, quote_plus, unquote, urlsplit
from xml.sax.saxutils import escape

from . import dynamo

S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
MAX_KEYS = 1000
#: One fixed LastModified for every object: the client parses it as it parses S3's.
LAST_MODIFIED = "2026-11-30T12:00:00.000Z"


class Bucket:
    """Keys in sorted order (for listing by prefix) plus the set of keys that still exist."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.live: set[str] = set()
        self._known: set[str] = set()
        self._sorted = True

    def put(self, key: str) -> None:
        if key not in self._known:
            self._known.add(key)
            self.keys.append(key)
            self._sorted = False
        self.live.add(key)

    def page(self, prefix: str, start_after: str, max_keys: int) -> tuple[list[str], bool]:
        if not self._sorted:
            self.keys.sort()
            self._sorted = True
        i = bisect.bisect_right(self.keys, start_after) if start_after else 0
        i = max(i, bisect.bisect_left(self.keys, prefix))
        out: list[str] = []
        n = len(self.keys)
        while i < n and len(out) <= max_keys:
            key = self.keys[i]
            if not key.startswith(prefix):
                break
            if key in self.live:
                out.append(key)
            i += 1
        truncated = len(out) > max_keys
        return out[:max_keys], truncated

    def count(self, prefix: str) -> int:
        if not self._sorted:
            self.keys.sort()
            self._sorted = True
        i, live = bisect.bisect_left(self.keys, prefix), 0
        while i < len(self.keys) and self.keys[i].startswith(prefix):
            live += self.keys[i] in self.live
            i += 1
        return live


class RateLimit:
    """A token bucket: ``rate`` requests a second, at most one second's worth banked."""

    def __init__(self, rate: float, clock: Any = time.monotonic) -> None:
        if rate <= 0:
            raise ValueError(f"rate={rate!r}: expected requests per second above 0")
        self.rate, self.clock = float(rate), clock
        self.tokens, self.at = float(rate), clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class State:
    """Everything the endpoint holds; one lock (each operation is short)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latency_s = 0.0
        self.requests: Counter[str] = Counter()
        self.throttled: Counter[str] = Counter()
        self.limits: dict[str, RateLimit] = {}
        self.arrivals: dict[str, list[float]] = {}
        #: the clock of the quotas and arrival times (the storm and the tests set a simulated one)
        self.clock: Any = time.monotonic
        self.tables = dynamo.Tables()
        self.reset()

    def reset(self) -> None:
        self.requests.clear()
        self.throttled.clear()
        self.limits.clear()
        self.arrivals.clear()
        self.tables.reset()
        self.connections: set[str] = set()
        self.grant_tokens: dict[str, str] = {}
        self.grant_ids: set[str] = set()
        self.grant_names: dict[str, str] = {}
        self.buckets: dict[str, Bucket] = {}

    def bucket(self, name: str) -> Bucket:
        return self.buckets.setdefault(name, Bucket())

    def seed(self, doc: dict[str, Any]) -> dict[str, int]:
        self.connections.update(doc.get("connections", []))
        for grant in doc.get("grants", []):
            self.grant_ids.add(grant["id"])
            self.grant_tokens[grant["token"]] = grant["id"]
            if grant.get("name"):
                self.grant_names[grant["id"]] = grant["name"]
        n = 0
        for name, prefixes in doc.get("objects", {}).items():
            bucket = self.bucket(name)
            for prefix, count in prefixes.items():
                for i in range(int(count)):
                    bucket.put(f"{prefix}obj-{i:05d}.bin")
                n += int(count)
        for table, spec in doc.get("tables", {}).items():
            if table not in self.tables.tables:
                self.tables.create(
                    table,
                    spec["hash"],
                    spec.get("range"),
                    stream=bool(spec.get("stream")),
                    indexes={k: tuple(v) for k, v in (spec.get("indexes") or {}).items()},
                )
            n += self.tables.seed(table, spec.get("items", []))
        return {"objects": n}

    def admit(self, op: str) -> bool:
        """Count one attempt of ``op``; ``False`` when its quota (``limits``) throttles it."""
        with self.lock:
            self.requests[op] += 1
            limit = self.limits.get(op)
            if limit is None:
                return True
            self.arrivals.setdefault(op, []).append(self.clock())
            if limit.take():
                return True
            self.throttled[op] += 1
            return False


STATE = State()


def _list_xml(bucket: str, query: dict[str, str]) -> bytes:
    prefix = query.get("prefix", "")
    encode = query.get("encoding-type") == "url"
    token = query.get("continuation-token")
    start_after = (
        base64.urlsafe_b64decode(token).decode() if token else query.get("start-after", "")
    )
    max_keys = min(int(query.get("max-keys", MAX_KEYS)), MAX_KEYS)
    with STATE.lock:
        keys, truncated = STATE.bucket(bucket).page(prefix, start_after, max_keys)

    def enc(text: str) -> str:
        return quote_plus(text, safe="/") if encode else escape(text)

    parts = [
        f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{S3_NS}">',
        f"<Name>{escape(bucket)}</Name><Prefix>{enc(prefix)}</Prefix>",
        f"<KeyCount>{len(keys)}</KeyCount><MaxKeys>{max_keys}</MaxKeys>",
        "<EncodingType>url</EncodingType>" if encode else "",
        f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>",
    ]
    if token:
        parts.append(f"<ContinuationToken>{escape(token)}</ContinuationToken>")
    if truncated:
        nxt = base64.urlsafe_b64encode(keys[-1].encode()).decode()
        parts.append(f"<NextContinuationToken>{nxt}</NextContinuationToken>")
    parts.extend(
        f"<Contents><Key>{enc(k)}</Key><LastModified>{LAST_MODIFIED}</LastModified>"
        '<ETag>"9dd4e461268c8034f5c8564e155c67a6"</ETag><ChecksumAlgorithm>CRC64NVME'
        "</ChecksumAlgorithm><ChecksumType>FULL_OBJECT</ChecksumType><Size>1</Size>"
        "<StorageClass>STANDARD</StorageClass></Contents>"
        for k in keys
    )
    parts.append("</ListBucketResult>")
    return "".join(parts).encode()


def _delete_xml(bucket: str, body: bytes) -> tuple[int, bytes]:
    try:
        root = ET.fromstring(body)  # noqa: S314 - localhost, the bench's own client
    except ET.ParseError:
        return 400, _s3_error("MalformedXML", "The XML you provided was not well-formed")
    keys = [el.text or "" for el in root.iter() if el.tag.endswith("Key")]
    quiet = any(el.tag.endswith("Quiet") and el.text == "true" for el in root.iter())
    if not keys or len(keys) > MAX_KEYS:
        return 400, _s3_error("MalformedXML", f"{len(keys)} keys: between 1 and 1,000 expected")
    with STATE.lock:
        live = STATE.bucket(bucket).live
        for key in keys:
            live.discard(key)
    deleted = "" if quiet else "".join(f"<Deleted><Key>{escape(k)}</Key></Deleted>" for k in keys)
    doc = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<DeleteResult xmlns="{S3_NS}">{deleted}</DeleteResult>'
    )
    return 200, doc.encode()


#: The principals every seeded grant names (the bench's cleanup role and session role).
GRANTEE_PRINCIPAL = "arn:aws:iam::123456789012:role/bench-session-role"
RETIRING_PRINCIPAL = "arn:aws:iam::123456789012:role/bench-cleanup-function-role"


def _list_grants_json(doc: dict[str, Any]) -> bytes:
    """``ListGrants`` filtered by ``GrantId`` (every grant it holds is on the request's key)."""
    grant_id = doc.get("GrantId")
    with STATE.lock:
        held = grant_id in STATE.grant_ids
        name = STATE.grant_names.get(grant_id or "", "")
    grants = (
        [
            {
                "KeyId": doc.get("KeyId"),
                "GrantId": grant_id,
                "Name": name,
                "CreationDate": 1796083200.0,
                "GranteePrincipal": GRANTEE_PRINCIPAL,
                "RetiringPrincipal": RETIRING_PRINCIPAL,
                "Operations": ["Decrypt", "Encrypt"],
            }
        ]
        if held
        else []
    )
    return json.dumps({"Grants": grants, "Truncated": False}).encode()


def _s3_error(code: str, message: str) -> bytes:
    return f"<Error><Code>{code}</Code><Message>{escape(message)}</Message></Error>".encode()


def _json_error(code: str, message: str) -> bytes:
    return json.dumps({"__type": code, "message": message}).encode()


class Answer(NamedTuple):
    """One HTTP answer: status, headers, body."""

    status: int
    body: bytes = b""
    ctype: str = "application/xml"
    headers: tuple[tuple[str, str], ...] = ()


KMS_JSON = "application/x-amz-json-1.1"
DYNAMODB_JSON = "application/x-amz-json-1.0"
_THROTTLED = {
    "kms": Answer(400, _json_error("ThrottlingException", "Rate exceeded"), KMS_JSON),
    "dynamodb": Answer(
        400,
        _json_error("com.amazonaws.dynamodb.v20120810#ThrottlingException", "Rate exceeded"),
        DYNAMODB_JSON,
    ),
    "apigateway": Answer(
        429,
        b'{"message": "Too Many Requests"}',
        "application/json",
        (("x-amzn-ErrorType", "LimitExceededException"),),
    ),
    "s3": Answer(503, _s3_error("SlowDown", "Please reduce your request rate.")),
}


def operation(method: str, path: str, query: dict[str, str], target: str) -> tuple[str, str]:
    """``(operation name, service)`` of an AWS request (``"Unsupported"`` if not served)."""
    if target:
        service = (
            "dynamodb"
            if target.startswith("DynamoDB_")
            else ("kms" if target.startswith("TrentService.") else "events")
        )
        return target.split(".")[-1], service
    if "/@connections/" in path:
        return "DeleteConnection", "apigateway"
    _, _, key = path.lstrip("/").partition("/")
    if method == "GET" and not key and query.get("list-type") == "2":
        return "ListObjectsV2", "s3"
    if method == "POST" and not key and "delete" in query:
        return "DeleteObjects", "s3"
    if method == "DELETE" and key:
        return "DeleteObject", "s3"
    if method == "PUT" and key:
        return "PutObject", "s3"
    return "Unsupported", "s3"


def respond(
    method: str, path: str, query: dict[str, str], target: str, body: bytes
) -> tuple[str, Answer]:
    """The operation's name and the answer to one AWS request (no latency: the caller waits).

    Used by the HTTP handler below and, in process, by :mod:`bench.transport`.
    """
    op, service = operation(method, path, query, target)
    if op != "Unsupported" and not STATE.admit(op):
        return op, _THROTTLED.get(service, _THROTTLED["s3"])
    if target:
        return op, _json_api(target, body)
    if op == "DeleteConnection":
        return op, _delete_connection(method, path)
    bucket, _, key = path.lstrip("/").partition("/")
    bucket, key = unquote(bucket), unquote(key)
    if op == "ListObjectsV2":
        return op, Answer(200, _list_xml(bucket, query))
    if op == "DeleteObjects":
        return op, Answer(*_delete_xml(bucket, body))
    if op == "DeleteObject":
        with STATE.lock:
            STATE.bucket(bucket).live.discard(key)
        return op, Answer(204)
    if op == "PutObject":
        with STATE.lock:
            STATE.bucket(bucket).put(key)
        return op, Answer(200, headers=(("ETag", '"bench"'),))
    return op, Answer(
        501, _s3_error("NotImplemented", f"{method} {path} is not served by the bench endpoint")
    )


def _delete_connection(method: str, path: str) -> Answer:
    connection = unquote(path.rsplit("/@connections/", 1)[1])
    if method != "DELETE":
        return Answer(501, _json_error("NotImplemented", method), "application/json")
    with STATE.lock:
        known = connection in STATE.connections
        STATE.connections.discard(connection)
    if known:
        return Answer(204)
    return Answer(
        410, b'{"message": null}', "application/json", (("x-amzn-ErrorType", "GoneException"),)
    )


def _json_api(target: str, body: bytes) -> Answer:
    doc = json.loads(body or b"{}")
    if target.startswith("DynamoDB_20120810."):
        try:
            answer = STATE.tables.dispatch(target.split(".", 1)[1], doc)
        except dynamo.DynamoError as exc:
            return Answer(exc.status, json.dumps(exc.body()).encode(), DYNAMODB_JSON)
        return Answer(200, json.dumps(answer).encode(), DYNAMODB_JSON)
    if target == "TrentService.RetireGrant":
        with STATE.lock:
            grant_id = (
                STATE.grant_tokens.pop(doc["GrantToken"], None)
                if "GrantToken" in doc
                else doc.get("GrantId")
            )
            found = grant_id in STATE.grant_ids
            STATE.grant_ids.discard(grant_id)  # type: ignore[arg-type]
        if found:
            return Answer(200, b"{}", KMS_JSON)
        return Answer(400, _json_error("NotFoundException", "Grant not found"), KMS_JSON)
    if target == "TrentService.ListGrants":
        return Answer(200, _list_grants_json(doc), KMS_JSON)
    if target == "AWSEvents.PutEvents":
        entries = [{"EventId": f"bench-{i}"} for i in range(len(doc.get("Entries", [])))]
        return Answer(
            200, json.dumps({"FailedEntryCount": 0, "Entries": entries}).encode(), KMS_JSON
        )
    return Answer(400, _json_error("UnknownOperationException", target), KMS_JSON)


def bench_answer(method: str, path: str, query: dict[str, str], body: bytes) -> Any:
    """The answer of a ``/_bench/...`` request (``None``: unknown)."""
    doc = json.loads(body) if body else {}
    if path == "/_bench/seed":
        return STATE.seed(doc)  # tables take their own lock
    if path == "/_bench/items":
        table = STATE.tables.table(doc["table"])
        with STATE.tables.lock:
            return {"items": [table.items.get(table.key_of(k)) for k in doc["keys"]]}
    with STATE.lock:
        if path == "/_bench/latency":
            if method == "PUT":
                STATE.latency_s = float(query["ms"]) / 1000.0
                STATE.requests.clear()
            return {"latency_ms": STATE.latency_s * 1000.0}
        if path == "/_bench/limits":
            STATE.limits = {op: RateLimit(rate, STATE.clock) for op, rate in doc.items()}
            STATE.arrivals.clear()
            STATE.throttled.clear()
            return {"limits": doc}
        if path == "/_bench/arrivals":
            return {"arrivals": {op: list(times) for op, times in STATE.arrivals.items()}}
        if path == "/_bench/count":
            bucket = STATE.bucket(doc["bucket"])
            return {p: bucket.count(p) for p in doc["prefixes"]}
        if path == "/_bench/connections":
            return {"connections": sorted(STATE.connections)}
        if path == "/_bench/grants":
            return {"grants": sorted(STATE.grant_ids)}
        if path == "/_bench/stats":
            return {"requests": dict(STATE.requests), "throttled": dict(STATE.throttled)}
    if path == "/_bench/reset":
        with STATE.lock:
            STATE.reset()
        return {"reset": True}
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: botocore reuses its pooled connections
    # TCP_NODELAY on every answer's socket. The handler writes an answer's headers and its
    # body in two sends; with Nagle's algorithm the body waits for the client to acknowledge
    # the headers, and the client delays that acknowledgement (Linux: up to ~40 ms). Measured
    # on this bench: 46 ms a call instead of 20 with 16 calls in flight, halving the handler's
    # throughput. AWS's front ends answer without that stall, so the endpoint must too.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would cost more CPU than answering it

    def _send(self, answer: Answer) -> None:
        self.send_response(answer.status)
        if answer.status != 204:
            self.send_header("Content-Type", answer.ctype)
            self.send_header("Content-Length", str(len(answer.body)))
        self.send_header("x-amz-request-id", "bench")
        for name, value in answer.headers:
            self.send_header(name, value)
        self.end_headers()
        if answer.body and answer.status != 204:
            self.wfile.write(answer.body)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        body = self._body()
        if url.path.startswith("/_bench/"):
            answer = bench_answer(method, url.path, query, body)
            if answer is None:
                self._send(Answer(404, b'{"error": "unknown bench endpoint"}', "application/json"))
            else:
                self._send(Answer(200, json.dumps(answer).encode(), "application/json"))
            return
        target = self.headers.get("X-Amz-Target", "")
        _, answer = respond(method, url.path, query, target, body)
        with STATE.lock:
            latency = STATE.latency_s
        if latency > 0:
            time.sleep(latency)
        self._send(answer)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # every worker of the measured process may connect at once


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    Server(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
