"""Fixtures for the session store tests (moto in-process, real boto3 calls)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.store import SessionStore

from ._support import (
    OWNERSHIP_TABLE,
    TABLE,
    WEBSOCKET_ENDPOINT,
    FakeClock,
    create_ownership_table,
    create_table,
    stream_records,
)


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def ddb(aws: None) -> Any:
    return boto3.client("dynamodb", region_name="us-east-1")


@pytest.fixture
def kms(aws: None) -> Any:
    return boto3.client("kms", region_name="us-east-1")


@pytest.fixture
def connections(aws: None) -> Any:
    """moto's API Gateway Management API at a stage endpoint (it holds connections per region)."""
    return boto3.client(
        "apigatewaymanagementapi", region_name="us-east-1", endpoint_url=WEBSOCKET_ENDPOINT
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


MakeStore = Callable[..., SessionStore]


@pytest.fixture
def sleeps() -> list[float]:
    """The waits a store asked for (its ``sleep``); no test really sleeps."""
    return []


@pytest.fixture
def make_store(
    ddb: Any, kms: Any, connections: Any, clock: FakeClock, sleeps: list[float]
) -> MakeStore:
    """``make_store(ttl_attribute=..., sort_key=..., ownership=True, **config)`` creates the
    table (and with ``ownership`` the ownership table) and a store."""

    def make(
        *,
        sort_key: str | None = None,
        partition_key: str = "pk",
        ownership: bool = False,
        store_kwargs: dict[str, Any] | None = None,
        **config: Any,
    ) -> SessionStore:
        create_table(ddb, partition_key=partition_key, sort_key=sort_key)
        if ownership:
            create_ownership_table(ddb)
            config["ownership_table_name"] = OWNERSHIP_TABLE
        cfg = RuntimeConfig(
            table_name=TABLE, partition_key=partition_key, sort_key=sort_key, **config
        )
        kwargs: dict[str, Any] = {
            "dynamodb_client": ddb,
            "kms_client": kms,
            "connections_client": connections,
            "clock": clock,
            "config": cfg,
            "sleep": sleeps.append,
            **(store_kwargs or {}),
        }
        return SessionStore(**kwargs)

    return make


@pytest.fixture
def one_request_at_a_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto handles each request under one lock, as DynamoDB applies each write atomically.

    moto's backends are not thread safe (an item's ADD and DELETE can interleave and lose an
    update), and its TransactWriteItems deep-copies the tables it touches and restores those
    copies when the transaction is cancelled, which undoes any write another thread made
    meanwhile; AWS applies a transaction atomically. The store's threads still run
    concurrently: only moto's handling of a request is one at a time (as in
    tests/runtime/conftest.py).
    """
    lock = threading.RLock()
    original = BotocoreStubber.process_request

    def serialised(self: BotocoreStubber, request: Any) -> Any:
        with lock:
            return original(self, request)

    monkeypatch.setattr(BotocoreStubber, "process_request", serialised)
    yield


@pytest.fixture
def make_stream(ddb: Any) -> Callable[[], list[dict[str, Any]]]:
    """``make_stream()`` returns every record so far on the session table's stream."""

    def read() -> list[dict[str, Any]]:
        arn = ddb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
        return stream_records(arn)

    return read
