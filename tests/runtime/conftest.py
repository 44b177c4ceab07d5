"""Fixtures of the cleanup runtime tests (moto in-process, real boto3 calls)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber
from runtime_support import Sandbox
from session_expiry_runtime import handler as handler_module

from cdk_session_expiry.testing.models import _moto_transactions

_MOTO_LOCK = threading.RLock()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto in-process, with its request handling serialised.

    moto's backends are not thread safe (KMS ``Key.retire_grant_by_token`` rebuilds the key's
    grant dict without a lock, so two concurrent RetireGrant calls on one key lose one of the
    retirements); AWS is. The cleanup's worker threads still run concurrently: serialisation,
    signing, retries and parsing in botocore; only moto's handling of each request is one at a
    time.

    moto (5.2.5) backs a ``TransactWriteItems`` up by deep-copying the whole table once per
    *action* (100 copies of the ownership table for one 100-action call: seconds with a few
    thousand records, minutes over the fault-injection run); :func:`_item_level_backups` backs
    up only the items the call names (``cdk_session_expiry.testing.models._moto_transactions``, as
    the
    local emulator does). The rollback leaves the same state, so the emulated behaviour does not
    change, only its cost.
    """
    original = BotocoreStubber.process_request

    def serialised(self: BotocoreStubber, request: Any) -> Any:
        with _MOTO_LOCK:
            return original(self, request)

    monkeypatch.setattr(BotocoreStubber, "process_request", serialised)
    _moto_transactions.install()
    try:
        with mock_aws():
            yield
    finally:
        _moto_transactions.uninstall()


@pytest.fixture
def sandbox(aws: None) -> Sandbox:
    return Sandbox()


@pytest.fixture
def session_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Captures the one-line-per-session log records (their ``session`` field)."""
    caplog.set_level(logging.INFO, logger="session_expiry_runtime")
    return caplog


@pytest.fixture
def fresh_handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make ``handler.handler`` read its environment again (it caches one cleaner per process)."""
    monkeypatch.setattr(handler_module, "_cleaner", None)
    yield
    handler_module._cleaner = None


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's standard retry mode, minus its exponential backoff sleeps (tests only)."""
    from botocore.retries import standard

    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, context: 0)


@pytest.fixture
def kinesis_destinations(aws: None) -> Iterator[dict[str, list[str]]]:
    """The tables' Kinesis streaming destinations: table name -> Kinesis stream ARNs.

    Stub: moto (5.2.6) implements neither ``EnableKinesisStreamingDestination`` nor
    ``DescribeKinesisStreamingDestination`` (it raises ``NotImplementedError``). For the
    clients of ``runtime_support.SESSION`` created while the fixture is active (the replay
    CLI's), ``DescribeKinesisStreamingDestination`` answers as DynamoDB does: the destinations
    the test puts in the dict (``ACTIVE``) for a table moto holds, ``ResourceNotFoundException``
    for one it does not.
    """
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends
    from runtime_faults import _response, json_error
    from runtime_support import REGION, SESSION

    destinations: dict[str, list[str]] = {}

    def describe(request: Any, **_: Any) -> Any:
        table = json.loads(request.body)["TableName"]
        if table not in dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].tables:
            wire = json_error(400, "ResourceNotFoundException", f"Table: {table} not found")
            return _response(request, *wire, False)
        answer = {
            "TableName": table,
            "KinesisDataStreamDestinations": [
                {"StreamArn": arn, "DestinationStatus": "ACTIVE"}
                for arn in destinations.get(table, [])
            ],
        }
        body = json.dumps(answer).encode()
        return _response(request, 200, {"content-type": "application/x-amz-json-1.0"}, body, False)

    event = "before-send.dynamodb.DescribeKinesisStreamingDestination"
    SESSION.events.register_first(event, describe)
    try:
        yield destinations
    finally:
        SESSION.events.unregister(event, describe)
