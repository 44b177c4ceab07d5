"""Every place the local pipeline touches a moto internal, checked before it is used.

moto is pinned ``>=5.2.5,<5.3`` (the ``[testing]``/``dev`` extras). Each function here checks
that the internal it relies on still has the shape it expects and raises
:class:`MotoInternalsChanged` naming the attribute otherwise, so a moto upgrade fails loudly
instead of silently losing stream records. ``tests/sandbox/test_moto_internals.py`` calls
:func:`check_moto_internals` so CI fails on the upgrade itself.

Internals used, and why:

* ``moto.awslambda.models.LambdaBackend.send_dynamodb_items`` — on every write to a table
  that has an event source mapping, moto tries to run the function through Docker, fails, and
  (when the call returns a result) empties the shard, so GetRecords never sees the records.
  The pipeline replaces it with a no-op that returns ``None``, which keeps the records.
* ``moto.dynamodb.models.table.StreamShard.add`` — moto numbers a record ``len(items) +
  start`` before appending it, without a lock: two concurrent writes (the sweeper's parallel
  deletes) get the same sequence number, which AWS never gives. The pipeline serialises
  ``add`` while stream delivery is switched off, so sequence numbers stay unique.
* ``moto.dynamodb.models.table.StreamShard.items`` / ``StreamRecord.record`` — moto never
  expires items by TTL and its stream records never carry ``userIdentity``. A TTL-shaped
  delete adds the identity DynamoDB's TTL service puts on its REMOVE records to the record
  moto stored, so GetRecords returns it like AWS does.
* ``moto.apigatewaymanagementapi.models.ApiGatewayManagementApiBackend.connections`` —
  moto's GetConnection and PostToConnection *create* a connection that does not exist, so
  the API cannot tell whether a connection is open; the registry is read directly instead.
* ``moto.dynamodb.models.DynamoDBBackend.transact_write_items`` — it deep-copies a whole table
  per action as its backup; :mod:`._moto_transactions` backs up only the items the actions name
  (and the stream's length), so ownership marks and session creates stay fast.
* ``moto.server.ThreadedMotoServer._server`` (a werkzeug ``BaseWSGIServer`` whose ``app`` every
  request goes through) — fault injection (:meth:`LocalEmulator.inject_fault`) wraps that WSGI
  application, so chosen requests fail like AWS answers an error, before moto sees them.
"""

from __future__ import annotations

import importlib
import inspect
import threading
from collections.abc import Iterator, Mapping
from typing import Any

#: The identity DynamoDB's TTL service puts on its REMOVE records, in the DynamoDB Streams
#: API's spelling (GetRecords). Lambda events spell the same keys ``type``/``principalId``.
TTL_USER_IDENTITY_API = {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}

_PATCH_LOCK = threading.Lock()
_ORIGINAL_SEND: Any = None
_ORIGINAL_ADD: Any = None
_PATCH_COUNT = 0
#: Serialises moto's StreamShard.add (see the module docstring).
_ADD_LOCK = threading.Lock()


class MotoInternalsChanged(RuntimeError):
    """A moto internal the local pipeline patches or reads no longer has the expected shape.

    The message names the attribute. Pin moto to the range in pyproject.toml, or update
    ``cdk_session_expiry/testing/_moto_internals.py`` for the new moto release.
    """


def _fail(what: str, detail: str) -> MotoInternalsChanged:
    import moto

    return MotoInternalsChanged(
        f"moto {moto.__version__}: {what} {detail}. The local pipeline of cdk-session-expiry "
        "relies on it (see cdk_session_expiry/testing/_moto_internals.py); install "
        "'moto[server]>=5.2.5,<5.3' or update that module for this moto release."
    )


def _lambda_backend_class() -> Any:
    try:
        module = importlib.import_module("moto.awslambda.models")
    except ImportError as err:  # pragma: no cover - moto missing entirely
        raise _fail("module moto.awslambda.models", f"cannot be imported ({err})") from err
    cls = getattr(module, "LambdaBackend", None)
    if cls is None:
        raise _fail("moto.awslambda.models.LambdaBackend", "does not exist")
    send = getattr(cls, "send_dynamodb_items", None)
    if send is None or not callable(send):
        raise _fail("LambdaBackend.send_dynamodb_items", "does not exist")
    params = list(inspect.signature(send).parameters)
    if params[:4] != ["self", "function_arn", "items", "source"]:
        raise _fail(
            "LambdaBackend.send_dynamodb_items",
            f"has parameters {params}, expected (self, function_arn, items, source)",
        )
    return cls


def _stream_shard_class() -> Any:
    module = importlib.import_module("moto.dynamodb.models.table")
    shard = getattr(module, "StreamShard", None)
    record = getattr(module, "StreamRecord", None)
    if shard is None or record is None:
        raise _fail("moto.dynamodb.models.table.StreamShard/StreamRecord", "do not exist")
    # While patched, check moto's own method (kept for restoring), not the serialising wrapper.
    source = inspect.getsource(_ORIGINAL_ADD or shard.add)
    # The no-op delivery must keep the records: moto empties the shard only "if result".
    if "send_dynamodb_items" not in source or "if result" not in source:
        raise _fail(
            "StreamShard.add",
            "no longer delivers through send_dynamodb_items or no longer keeps the records "
            "when delivery returns nothing",
        )
    return shard


def _connections_backend_dict() -> Any:
    module = importlib.import_module("moto.apigatewaymanagementapi.models")
    backends = getattr(module, "apigatewaymanagementapi_backends", None)
    if backends is None:
        raise _fail(
            "moto.apigatewaymanagementapi.models.apigatewaymanagementapi_backends", "does not exist"
        )
    return backends


def _threaded_server_entry() -> None:
    from moto.server import ThreadedMotoServer

    source = inspect.getsource(ThreadedMotoServer)
    if "self._server = make_server(" not in source:
        raise _fail(
            "ThreadedMotoServer._server",
            "is no longer the werkzeug server made by make_server (fault injection wraps its app)",
        )


def wrap_wsgi_app(server: Any, wrap: Any) -> None:
    """Replace the WSGI application of a started ``ThreadedMotoServer`` by ``wrap(app)``.

    Raises:
        MotoInternalsChanged: the server no longer keeps a werkzeug server with an ``app``.
    """
    _threaded_server_entry()
    inner = getattr(server, "_server", None)
    if inner is None or not callable(getattr(inner, "app", None)):
        raise _fail("ThreadedMotoServer._server.app", "is not a WSGI application")
    inner.app = wrap(inner.app)


def check_moto_internals() -> None:
    """Check every moto internal the pipeline relies on; raise :class:`MotoInternalsChanged`."""
    _threaded_server_entry()
    _lambda_backend_class()
    _stream_shard_class()
    backend = _connections_backend_dict()["123456789012"]["us-east-1"]
    if not isinstance(getattr(backend, "connections", None), Mapping):
        raise _fail("ApiGatewayManagementApiBackend.connections", "is not a mapping")
    from cdk_session_expiry.testing import (
        _moto_agentcore_memory,
        _moto_firehose,
        _moto_transactions,
    )

    _moto_transactions.check()
    _moto_agentcore_memory.check()
    _moto_firehose.check()


def _no_delivery(self: Any, function_arn: str, items: list[Any], source: str) -> None:
    """Replacement for moto's DynamoDB-to-Lambda delivery: deliver nothing, keep the records.

    The local event source mapping poller reads the records through GetRecords instead.
    """
    return None


def disable_stream_delivery() -> None:
    """Switch off moto's internal DynamoDB-to-Lambda delivery (reference counted).

    Raises:
        MotoInternalsChanged: the patched attribute changed shape.
    """
    global _ORIGINAL_SEND, _ORIGINAL_ADD, _PATCH_COUNT
    cls = _lambda_backend_class()
    shard = _stream_shard_class()
    with _PATCH_LOCK:
        if _PATCH_COUNT == 0:
            _ORIGINAL_SEND = cls.__dict__["send_dynamodb_items"]
            cls.send_dynamodb_items = _no_delivery
            _ORIGINAL_ADD = shard.__dict__["add"]
            shard.add = _serialised(_ORIGINAL_ADD)
        _PATCH_COUNT += 1


def _serialised(add: Any) -> Any:
    def locked_add(self: Any, old: Any, new: Any) -> None:
        with _ADD_LOCK:
            add(self, old, new)

    return locked_add


def restore_stream_delivery() -> None:
    """Undo one :func:`disable_stream_delivery`; the last one restores moto's method."""
    global _ORIGINAL_SEND, _ORIGINAL_ADD, _PATCH_COUNT
    cls = _lambda_backend_class()
    with _PATCH_LOCK:
        if _PATCH_COUNT == 0:
            return
        _PATCH_COUNT -= 1
        if _PATCH_COUNT == 0 and _ORIGINAL_SEND is not None:
            cls.send_dynamodb_items = _ORIGINAL_SEND
            _ORIGINAL_SEND = None
        if _PATCH_COUNT == 0 and _ORIGINAL_ADD is not None:
            _stream_shard_class().add = _ORIGINAL_ADD
            _ORIGINAL_ADD = None


def stream_delivery_disabled() -> bool:
    """Whether moto's DynamoDB-to-Lambda delivery is currently switched off."""
    return _lambda_backend_class().send_dynamodb_items is _no_delivery


def _table(account_id: str, region: str, table_name: str) -> Any:
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends[account_id][region].get_table(table_name)


def _shard_records(table: Any) -> Iterator[Any]:
    shard = getattr(table, "stream_shard", None)
    if shard is None:
        raise ValueError(f"table {table.name!r} has no stream")
    items = getattr(shard, "items", None)
    if not isinstance(items, list):
        raise _fail("StreamShard.items", "is not a list")
    return reversed(items)


def mark_ttl_delete(account_id: str, region: str, table_name: str, key: Mapping[str, Any]) -> str:
    """Give the newest REMOVE record for ``key`` the TTL service's ``userIdentity``.

    Args:
        key: the item's key in DynamoDB JSON, e.g. ``{"pk": {"S": "s-1"}}``.

    Returns:
        The record's sequence number.

    Raises:
        LookupError: the stream holds no REMOVE record for that key.
        MotoInternalsChanged: moto's stream records changed shape.
    """
    table = _table(account_id, region, table_name)
    for stored in _shard_records(table):
        record = getattr(stored, "record", None)
        if not isinstance(record, dict) or "dynamodb" not in record:
            raise _fail("StreamRecord.record", "is not the dict GetRecords returns")
        if record.get("eventName") == "REMOVE" and record["dynamodb"].get("Keys") == dict(key):
            record["userIdentity"] = dict(TTL_USER_IDENTITY_API)
            return str(record["dynamodb"]["SequenceNumber"])
    raise LookupError(f"no REMOVE record for key {dict(key)!r} on the stream of {table_name!r}")


def open_connection_ids(account_id: str, region: str) -> set[str]:
    """Connection ids moto's API Gateway Management API currently holds (read without creating)."""
    backend = _connections_backend_dict()[account_id][region]
    connections = getattr(backend, "connections", None)
    if not isinstance(connections, Mapping):
        raise _fail("ApiGatewayManagementApiBackend.connections", "is not a mapping")
    return set(connections.keys())
