"""Many connections per session: attach_connection against moto's DynamoDB and API Gateway
Management API (connections read from moto's registry, as the sandbox does)."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.store import SessionGoneError, SessionStore

from cdk_session_expiry.testing.models._moto_internals import open_connection_ids

from ._support import T0_EPOCH, TABLE, WEBSOCKET_ENDPOINT, FakeClock, create_table, raw_item

HOUR = timedelta(hours=1)
KEY = {"pk": {"S": "s-1"}}


def open_now() -> set[str]:
    return open_connection_ids("123456789012", "us-east-1")


def open_connection(connections: Any, connection_id: str) -> None:
    # moto opens a connection at its first PostToConnection.
    connections.post_to_connection(ConnectionId=connection_id, Data=b"hello")


@pytest.fixture
def store(make_store: Any) -> SessionStore:
    return make_store()  # type: ignore[no-any-return]


def test_attach_closes_the_earlier_connection_and_records_the_new_one(
    store: SessionStore, connections: Any, ddb: Any
) -> None:
    open_connection(connections, "conn-1")
    store.create("s-1", ttl=HOUR, connection_id="conn-1")
    open_connection(connections, "conn-2")
    s = store.attach_connection("s-1", "conn-2")
    assert "conn-1" not in open_now()
    assert "conn-2" in open_now()
    assert (s.connection_id, s.connection_ids) == ("conn-2", frozenset({"conn-2"}))
    item = raw_item(ddb, KEY)
    assert item is not None
    assert item["connectionId"] == {"S": "conn-2"}
    assert item["connectionIds"] == {"SS": ["conn-2"]}


def test_attach_can_keep_the_earlier_connections(
    store: SessionStore, connections: Any, ddb: Any
) -> None:
    open_connection(connections, "conn-1")
    store.create("s-1", ttl=HOUR, connection_id="conn-1")
    open_connection(connections, "conn-2")
    s = store.attach_connection("s-1", "conn-2", close_previous=False)
    assert {"conn-1", "conn-2"} <= open_now()
    assert s.connection_ids == {"conn-1", "conn-2"}
    item = raw_item(ddb, KEY)
    assert item is not None and sorted(item["connectionIds"]["SS"]) == ["conn-1", "conn-2"]


def test_concurrent_reconnects_lose_no_id_and_leave_only_the_last_open(
    store: SessionStore, connections: Any, ddb: Any, one_request_at_a_time: None
) -> None:
    ids = [f"conn-{i}" for i in range(12)]
    for cid in ["conn-0", *ids]:
        open_connection(connections, cid)
    store.create("s-1", ttl=HOUR, connection_id="conn-0")
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(lambda cid: store.attach_connection("s-1", cid), ids[1:]))
    item = raw_item(ddb, KEY)
    assert item is not None
    last = item["connectionId"]["S"]
    # Every connection written before the last one was closed by a later attach; the set
    # holds exactly the one still open.
    assert item["connectionIds"] == {"SS": [last]}
    assert open_now() & set(ids) == {last}


def test_an_item_with_the_old_single_id_attribute_keeps_working(
    store: SessionStore, connections: Any, ddb: Any
) -> None:
    ddb.put_item(
        TableName=TABLE,
        Item={**KEY, "expiresAt": {"N": str(T0_EPOCH + 600)}, "connectionId": {"S": "old"}},
    )
    session = store.get("s-1")
    assert session is not None and session.connection_ids == {"old"}
    open_connection(connections, "old")
    open_connection(connections, "new")
    s = store.attach_connection("s-1", "new")
    assert "old" not in open_now() and "new" in open_now()
    assert s.connection_ids == {"new"}
    item = raw_item(ddb, KEY)
    assert item is not None and item["connectionIds"] == {"SS": ["new"]}


def test_gone_counts_as_closed_and_a_refused_close_stays_recorded(
    make_store: Any, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # moto's DeleteConnection of any id succeeds (AWS: GoneException once closed; Forbidden
    # when the role may not): stubbed with botocore's Stubber.
    client = boto3.client(
        "apigatewaymanagementapi", region_name="us-east-1", endpoint_url=WEBSOCKET_ENDPOINT
    )
    create_table(ddb)
    store = SessionStore(
        dynamodb_client=ddb,
        connections_client=client,
        clock=FakeClock(),
        config=RuntimeConfig(table_name=TABLE),
    )
    store.create("s-1", ttl=HOUR, connection_id="a-gone")
    store.attach_connection("s-1", "b-forbidden", close_previous=False)
    with Stubber(client) as stub:
        stub.add_client_error(
            "delete_connection", "GoneException", http_status_code=410, expected_params=None
        )
        stub.add_client_error(
            "delete_connection", "ForbiddenException", http_status_code=403, expected_params=None
        )
        with caplog.at_level(logging.WARNING):
            s = store.attach_connection("s-1", "c-new")
        stub.assert_no_pending_responses()
    assert s.connection_ids == {"b-forbidden", "c-new"}
    item = raw_item(ddb, KEY)
    assert item is not None and sorted(item["connectionIds"]["SS"]) == ["b-forbidden", "c-new"]
    assert "b-forbidden" in caplog.text


def test_attach_to_an_expired_session_is_refused_and_closes_nothing(
    store: SessionStore, connections: Any, ddb: Any, clock: FakeClock
) -> None:
    open_connection(connections, "conn-1")
    store.create("s-1", ttl=HOUR, connection_id="conn-1")
    clock.advance(3600)
    before = raw_item(ddb, KEY)
    with pytest.raises(SessionGoneError, match="'s-1'"):
        store.attach_connection("s-1", "conn-2")
    assert raw_item(ddb, KEY) == before
    assert "conn-1" in open_now()


def test_fails_attach_connection_without_an_endpoint(ddb: Any) -> None:
    create_table(ddb)
    store = SessionStore(
        dynamodb_client=ddb, clock=FakeClock(), config=RuntimeConfig(table_name=TABLE)
    )
    store.create("s-1", ttl=HOUR, connection_id="conn-1")
    before = raw_item(ddb, KEY)
    with pytest.raises(ValueError, match=r"WebSocket endpoint None.*close_previous=False"):
        store.attach_connection("s-1", "conn-2")
    assert raw_item(ddb, KEY) == before
    assert store.attach_connection("s-1", "conn-2", close_previous=False).connection_ids == {
        "conn-1",
        "conn-2",
    }


def test_fails_a_store_from_an_environment_without_the_table_name(ddb: Any) -> None:
    with pytest.raises(
        ValueError,
        match=r"table name None: expected the session table's name .*\$SESSION_EXPIRY_TABLE_NAME"
        r".*grant_session_access sets on a function.*session_expiry_app_env fixture",
    ):
        SessionStore.from_env({}, dynamodb_client=ddb)
