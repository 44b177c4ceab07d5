"""Fixtures of the cleanup runtime tests (moto in-process, real boto3 calls)."""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber
from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from runtime_support import Sandbox
from session_expiry_runtime import handler as handler_module

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
    up only the items the call names. The rollback leaves the same state, so the emulated
    behaviour does not change, only its cost.
    """
    original = BotocoreStubber.process_request

    def serialised(self: BotocoreStubber, request: Any) -> Any:
        with _MOTO_LOCK:
            return original(self, request)

    monkeypatch.setattr(BotocoreStubber, "process_request", serialised)
    _item_level_backups(monkeypatch)
    with mock_aws():
        yield


def _item_level_backups(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's ``transact_write_items`` with a backup of the items the call names instead of a
    deep copy of each whole table, for tables without a stream (the ownership table): the
    rollback restores exactly those items, which are all a transaction can change. A table
    with a stream keeps moto's own whole-table copy (it also restores the stream's records).
    moto's handling is serialised above, so nothing else changes the tables meanwhile."""
    original = DynamoDBBackend.transact_write_items

    def transact_write_items(self: DynamoDBBackend, transact_items: Any) -> None:
        backups = _backups(self, transact_items)
        if backups is None:
            original(self, transact_items)
            return
        monkeypatch.setattr(dynamodb_models, "copy", _NO_TABLE_COPIES)
        try:
            original(self, transact_items)
        except Exception:
            for table_name, key, attributes in reversed(backups):
                if attributes is not None:
                    self.put_item(table_name, attributes)
                elif self.get_item(table_name, key) is not None:
                    self.delete_item(table_name, key)
            raise
        finally:
            monkeypatch.setattr(dynamodb_models, "copy", copy)

    monkeypatch.setattr(DynamoDBBackend, "transact_write_items", transact_write_items)


def _no_table_copy(value: Any, memo: Any = None) -> Any:
    return value if isinstance(value, Table) else copy.deepcopy(value, memo)


_NO_TABLE_COPIES = SimpleNamespace(deepcopy=_no_table_copy, copy=copy.copy)


def _backups(
    backend: DynamoDBBackend, transact_items: Any
) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]] | None:
    """``(table, key, item attributes or None)`` of every action; ``None`` when moto's own
    backup must be used (a table with a stream, an unknown table, a malformed action)."""
    backups = []
    try:
        for action in transact_items:
            (op_type, op), *_ = action.items()
            table = backend.get_table(op["TableName"])
            if table.stream_shard is not None:
                return None
            if op_type == "Put":
                names = [table.hash_key_attr, table.range_key_attr]
                key = {name: op["Item"][name] for name in names if name}
            else:
                key = op["Key"]
            current = backend.get_item(op["TableName"], key)
            attributes = copy.deepcopy(current.to_json()["Attributes"]) if current else None
            backups.append((op["TableName"], key, attributes))
    except Exception:
        return None
    return backups


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
