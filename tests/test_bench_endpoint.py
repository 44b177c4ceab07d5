"""The bench endpoint (``bench/endpoint.py``) answers the cleanup's calls as AWS does.

The throughput bench measures the handler against it instead of moto, so its answers must be
what botocore gets from AWS: if they were not, the bench would measure a different client
path. Each test drives it with real boto3 clients over HTTP on localhost, no latency injected.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from bench import endpoint as ep


@pytest.fixture
def server() -> Iterator[str]:
    ep.STATE.reset()
    httpd = ep.Server(("localhost", 0), ep.Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://localhost:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _bench(url: str, path: str, doc: Any = None) -> Any:
    data = json.dumps(doc).encode() if doc is not None else None
    req = urllib.request.Request(url + path, data=data, method="POST" if data else "GET")
    with urllib.request.urlopen(req) as resp:
        return json.loads(resp.read())


def _client(service: str, url: str) -> Any:
    cfg = Config(
        retries={"mode": "standard", "total_max_attempts": 1}, s3={"addressing_style": "path"}
    )
    return boto3.client(service, endpoint_url=url, region_name="us-east-1", config=cfg)


def test_list_objects_v2_pages_keys_with_url_encoding_and_delete_objects_removes_them(
    server: str,
) -> None:
    _bench(
        server, "/_bench/seed", {"objects": {"b": {"sessions/s-1/": 2_500, "sessions/s-10/": 3}}}
    )
    s3 = _client("s3", server)
    tricky = "sessions/s-1/a b+c%d\u00e9\u2028.txt"
    s3.put_object(Bucket="b", Key=tricky, Body=b"x")
    pages = list(s3.get_paginator("list_objects_v2").paginate(Bucket="b", Prefix="sessions/s-1/"))
    keys = [o["Key"] for p in pages for o in p.get("Contents", [])]
    assert [p["KeyCount"] for p in pages] == [1_000, 1_000, 501]
    assert len(set(keys)) == 2_501 and tricky in keys  # botocore decoded S3's url encoding
    assert all(k.startswith("sessions/s-1/") for k in keys)  # s-10 is not under s-1/
    assert pages[0]["Contents"][0]["LastModified"].year == 2026  # parsed as S3's timestamps
    plain = [k for k in keys if k != tricky]
    answer = s3.delete_objects(
        Bucket="b", Delete={"Objects": [{"Key": k} for k in plain[:1_000]], "Quiet": True}
    )
    assert "Errors" not in answer and "Deleted" not in answer
    s3.delete_object(Bucket="b", Key=tricky)
    counts = _bench(
        server, "/_bench/count", {"bucket": "b", "prefixes": ["sessions/s-1/", "sessions/s-10/"]}
    )
    assert counts == {"sessions/s-1/": 1_500, "sessions/s-10/": 3}


def test_fails_delete_objects_of_more_than_1000_keys(server: str) -> None:
    s3 = _client("s3", server)
    with pytest.raises(s3.exceptions.ClientError, match="MalformedXML"):
        s3.delete_objects(Bucket="b", Delete={"Objects": [{"Key": f"k{i}"} for i in range(1_001)]})


def test_delete_connection_then_gone_and_retire_grant_then_not_found(server: str) -> None:
    _bench(
        server,
        "/_bench/seed",
        {
            "connections": ["c1="],
            "grants": [{"id": "g1", "token": "t1"}, {"id": "g2", "token": "t2"}],
        },
    )
    apigw = _client("apigatewaymanagementapi", f"{server}/prod")
    kms = _client("kms", server)
    apigw.delete_connection(ConnectionId="c1=")
    with pytest.raises(apigw.exceptions.GoneException):
        apigw.delete_connection(ConnectionId="c1=")
    kms.retire_grant(GrantToken="t1")
    kms.retire_grant(GrantId="g2", KeyId="arn:aws:kms:us-east-1:123456789012:key/k")
    with pytest.raises(kms.exceptions.NotFoundException):
        kms.retire_grant(GrantToken="t1")
    assert _bench(server, "/_bench/connections") == {"connections": []}
    assert _bench(server, "/_bench/grants") == {"grants": []}
    assert _bench(server, "/_bench/stats")["requests"] == {"DeleteConnection": 2, "RetireGrant": 3}


def test_answers_leave_with_tcp_nodelay_so_a_body_never_waits_for_a_delayed_ack() -> None:
    """Every answering socket has ``TCP_NODELAY``. Without it the body, sent after the headers,
    waited for the client's delayed acknowledgement (Nagle's algorithm): ~26 ms added to each
    call made with others in flight, which the bench then blamed on the handler."""
    import socket

    seen: list[int] = []

    class Recording(ep.Handler):
        def setup(self) -> None:
            super().setup()
            seen.append(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    ep.STATE.reset()
    httpd = ep.Server(("localhost", 0), Recording)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        assert _bench(f"http://localhost:{httpd.server_address[1]}", "/_bench/stats") == {
            "requests": {},
            "throttled": {},
        }
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert seen and all(seen), seen


def test_list_grants_by_id_answers_the_seeded_name_as_kms_does(server: str) -> None:
    key = "arn:aws:kms:us-east-1:123456789012:key/k"
    name = "session-expiry:inc0:eyJwayI6InMtMSJ9"
    _bench(server, "/_bench/seed", {"grants": [{"id": "g1", "token": "t1", "name": name}]})
    kms = _client("kms", server)

    (grant,) = kms.list_grants(KeyId=key, GrantId="g1")["Grants"]

    assert (grant["Name"], grant["GrantId"], grant["KeyId"]) == (name, "g1", key)
    assert grant["CreationDate"].tzinfo is not None  # parsed by botocore as a timestamp
    assert grant["RetiringPrincipal"] == ep.RETIRING_PRINCIPAL
    assert grant["Operations"] == ["Decrypt", "Encrypt"]
    kms.retire_grant(KeyId=key, GrantId="g1")
    assert kms.list_grants(KeyId=key, GrantId="g1")["Grants"] == []
    assert _bench(server, "/_bench/stats")["requests"] == {"ListGrants": 2, "RetireGrant": 1}


def test_a_refused_update_returns_the_item_it_saw_when_asked_as_dynamodb_does(
    server: str,
) -> None:
    """The shared RetireGrant budget (``shared_pace``) learns what a refused second has left
    from the item its refusal returns (``ReturnValuesOnConditionCheckFailure``)."""
    _bench(server, "/_bench/seed", {"tables": {"t": {"hash": "pk", "items": []}}})
    ddb = _client("dynamodb", server)
    update = {
        "TableName": "t",
        "Key": {"pk": {"S": "pace#1"}},
        "UpdateExpression": "SET used = if_not_exists(used, :zero) + :n",
        "ConditionExpression": "attribute_not_exists(used) OR used <= :limit",
        "ExpressionAttributeValues": {":zero": {"N": "0"}, ":n": {"N": "8"}, ":limit": {"N": "2"}},
    }
    ddb.update_item(**update)

    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException) as asked:
        ddb.update_item(**update, ReturnValuesOnConditionCheckFailure="ALL_OLD")
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException) as not_asked:
        ddb.update_item(**update)

    assert asked.value.response["Item"] == {"pk": {"S": "pace#1"}, "used": {"N": "8"}}
    assert "Item" not in not_asked.value.response
