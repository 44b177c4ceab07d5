"""Fixtures for the session store tests (moto in-process, real boto3 calls)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from session_expiry_runtime.config import RuntimeConfig
from session_expiry_runtime.store import SessionStore

from ._support import TABLE, WEBSOCKET_ENDPOINT, FakeClock, create_table, stream_records


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
def make_store(ddb: Any, kms: Any, connections: Any, clock: FakeClock) -> MakeStore:
    """``make_store(ttl_attribute=..., sort_key=..., **config)`` creates the table and a store."""

    def make(
        *, sort_key: str | None = None, partition_key: str = "pk", **config: Any
    ) -> SessionStore:
        create_table(ddb, partition_key=partition_key, sort_key=sort_key)
        cfg = RuntimeConfig(
            table_name=TABLE, partition_key=partition_key, sort_key=sort_key, **config
        )
        return SessionStore(
            dynamodb_client=ddb,
            kms_client=kms,
            connections_client=connections,
            clock=clock,
            config=cfg,
        )

    return make


@pytest.fixture
def make_stream(ddb: Any) -> Callable[[], list[dict[str, Any]]]:
    """``make_stream()`` returns every record so far on the session table's stream."""

    def read() -> list[dict[str, Any]]:
        arn = ddb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
        return stream_records(arn)

    return read
