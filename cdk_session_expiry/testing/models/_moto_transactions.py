"""moto's ``TransactWriteItems``, backed up item by item instead of table by table.

moto (5.2.x) backs a transaction up by deep-copying the whole table once per *action* before it
applies the actions, and restores the copy when one of them fails. A 100-action call on a table
of a few thousand items (the ownership table), or one action on a session table whose stream
holds thousands of records, then costs seconds: the cleanup's ownership marks time out against
their time-guard-sized read timeout, and creating sessions slows down as the stream grows. A
transaction can only change the items its actions name (and append stream records), so backing
up exactly those items, and the length of the table's stream, restores the same state at a
fraction of the cost. The emulated behaviour does not change: every condition is still checked
by moto, and a cancelled transaction still leaves no trace (items and stream records).

Callers serialise moto's DynamoDB handling (the emulator answers DynamoDB requests one at a
time; the runtime tests serialise moto's request handling), so nothing else changes a table
while a transaction runs — AWS applies a transaction atomically, moto does not.

`install` / `uninstall` patch ``DynamoDBBackend.transact_write_items`` process-wide
(counted, so nested users are fine); `check` is called by
[`_moto_internals.check_moto_internals`][cdk_session_expiry.testing.check_moto_internals] and fails
loudly if moto's shape changed.
"""

from __future__ import annotations

import copy
import threading
from types import SimpleNamespace
from typing import Any

_LOCK = threading.Lock()
_ORIGINAL: Any = None
_COUNT = 0

#: (table name, key, the item's attributes before the call or None) for each action.
Backup = tuple[str, dict[str, Any], "dict[str, Any] | None"]


def check() -> None:
    """Raise ``MotoInternalsChanged`` if moto's transaction no longer has the shape this module
    relies on: a backup by ``copy.deepcopy`` of each table, restored on failure, and tables
    whose stream records live in ``stream_shard.items``."""
    import inspect

    from moto.dynamodb import models as dynamodb_models
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import StreamShard

    from cdk_session_expiry.testing.models._moto_internals import _fail

    source = inspect.getsource(_ORIGINAL or DynamoDBBackend.transact_write_items)
    if getattr(dynamodb_models, "copy", None) is not copy or "copy.deepcopy(" not in source:
        raise _fail(
            "DynamoDBBackend.transact_write_items",
            "no longer backs tables up with copy.deepcopy (see _moto_transactions.py)",
        )
    if "self.items" not in inspect.getsource(StreamShard.__init__):
        raise _fail("StreamShard.items", "is gone (transactions roll stream records back)")


def install() -> None:
    """Back transactions up item by item (idempotent; undo with `uninstall`)."""
    global _ORIGINAL, _COUNT
    from moto.dynamodb.models import DynamoDBBackend

    with _LOCK:
        _COUNT += 1
        if _COUNT > 1:
            return
        check()
        _ORIGINAL = DynamoDBBackend.transact_write_items
        DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign,assignment]


def uninstall() -> None:
    """Undo one `install`; moto's own method is back after the last one."""
    global _ORIGINAL, _COUNT
    from moto.dynamodb.models import DynamoDBBackend

    with _LOCK:
        if _COUNT == 0:
            return
        _COUNT -= 1
        if _COUNT == 0 and _ORIGINAL is not None:
            DynamoDBBackend.transact_write_items = _ORIGINAL  # type: ignore[method-assign]
            _ORIGINAL = None


def _transact_write_items(backend: Any, transact_items: Any) -> None:
    from moto.dynamodb import models as dynamodb_models

    original = _ORIGINAL
    backups = _backups(backend, transact_items)
    if backups is None or original is None:
        (original or type(backend).transact_write_items)(backend, transact_items)
        return
    streams = _stream_lengths(backend, backups)
    dynamodb_models.copy = _NO_TABLE_COPIES  # type: ignore[assignment,attr-defined]
    try:
        original(backend, transact_items)
    except Exception:
        _restore(backend, backups, streams)
        raise
    finally:
        dynamodb_models.copy = copy  # type: ignore[attr-defined]


def _restore(backend: Any, backups: list[Backup], streams: dict[str, int]) -> None:
    """Put every named item back as it was, then drop the stream records written since."""
    for table_name, key, attributes in reversed(backups):
        if attributes is not None:
            backend.put_item(table_name, attributes)
        elif backend.get_item(table_name, key) is not None:
            backend.delete_item(table_name, key)
    for table_name, length in streams.items():
        shard = backend.get_table(table_name).stream_shard
        if shard is not None:
            del shard.items[length:]


def _stream_lengths(backend: Any, backups: list[Backup]) -> dict[str, int]:
    lengths: dict[str, int] = {}
    for table_name, _, _ in backups:
        shard = backend.get_table(table_name).stream_shard
        if shard is not None:
            lengths[table_name] = len(shard.items)
    return lengths


def _no_table_copy(value: Any, memo: Any = None) -> Any:
    from moto.dynamodb.models.table import Table

    return value if isinstance(value, Table) else copy.deepcopy(value, memo)


_NO_TABLE_COPIES = SimpleNamespace(deepcopy=_no_table_copy, copy=copy.copy)


def _backups(backend: Any, transact_items: Any) -> list[Backup] | None:
    """The items every action names, as they are now; ``None`` when moto's own backup must be
    used (an unknown table, a malformed action: moto answers those itself)."""
    backups: list[Backup] = []
    try:
        for action in transact_items:
            (op_type, op), *_ = action.items()
            table = backend.get_table(op["TableName"])
            if op_type == "Put":
                names = [table.hash_key_attr, table.range_key_attr]
                key = {name: op["Item"][name] for name in names if name}
            else:
                key = dict(op["Key"])
            current = backend.get_item(op["TableName"], key)
            attributes = copy.deepcopy(current.to_json()["Attributes"]) if current else None
            backups.append((op["TableName"], key, attributes))
    except Exception:
        return None
    return backups
