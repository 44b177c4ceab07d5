"""Every place the local pipeline touches a moto internal, checked before it is used.

moto is pinned ``>=5.2.5,<5.3`` (the ``[testing]``/``dev`` extras). Each function here checks
that the internal it relies on still has the shape it expects and raises
[`MotoInternalsChanged`][cdk_session_expiry.testing.MotoInternalsChanged] naming the attribute
otherwise, so a moto upgrade fails loudly
instead of silently losing stream records. ``tests/sandbox/test_moto_internals.py`` calls
[`check_moto_internals`][cdk_session_expiry.testing.check_moto_internals] so CI fails on the
upgrade itself.

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
  per action as its backup; `_moto_transactions` backs up only the items the actions name
  (and the stream's length), so ownership marks and session creates stay fast.
* ``moto.server.ThreadedMotoServer._server`` (a werkzeug ``BaseWSGIServer`` whose ``app`` every
  request goes through) — fault injection
  ([`LocalEmulator.inject_fault`][cdk_session_expiry.testing.LocalEmulator.inject_fault]) wraps
  that WSGI
  application, so chosen requests fail like AWS answers an error, before moto sees them.
* ``moto.cloudformation.parsing.get_model_list`` / ``get_model_map`` / ``get_name_type_map``
  (cached, built from ``CloudFormationModel.__subclasses__()``) — moto's CloudFormation creates
  only the resource types of its models; `_cloudformation_models` defines models for types
  moto lacks (``AWS::CloudWatch::Alarm``, ...) and clears those caches so they are seen.
* ``moto.kms.models.Grant`` (``__init__``, ``to_json``) — moto's ListGrants answers no
  ``CreationDate``, so the grant sweep (which never retires a grant it cannot age) did nothing
  locally; `date_grants` records each grant's creation and answers it, and
  `age_grants` moves it into the past for a test.
* ``moto.core.base_backend.BackendDict._instances`` (every service's backends, by account and
  Region), each backend's ``__dict__``, ``S3BackendDict.bucket_accounts`` and the models'
  ``instances_tracked`` — an emulator snapshot (`snapshot`) copies and restores them.
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
    ``cdk_session_expiry/testing/models/_moto_internals.py`` for the new moto release.
    """


def _fail(what: str, detail: str) -> MotoInternalsChanged:
    import moto

    return MotoInternalsChanged(
        f"moto {moto.__version__}: {what} {detail}. The local pipeline of cdk-session-expiry "
        "relies on it (see cdk_session_expiry/testing/models/_moto_internals.py); install "
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


_MODEL_REGISTRY = ("get_model_list", "get_model_map", "get_name_type_map")


def _cloudformation_registry() -> Any:
    module = importlib.import_module("moto.cloudformation.parsing")
    for name in _MODEL_REGISTRY:
        if not callable(getattr(getattr(module, name, None), "cache_clear", None)):
            raise _fail(f"moto.cloudformation.parsing.{name}", "is not a cached function")
    if "CloudFormationModel.__subclasses__()" not in inspect.getsource(module.get_model_list):
        raise _fail(
            "moto.cloudformation.parsing.get_model_list",
            "no longer lists the subclasses of CloudFormationModel",
        )
    return module


def register_cloudformation_models(models: list[type[Any]], resource_types: Any) -> None:
    """Make moto's CloudFormation create ``resource_types`` with ``models`` (subclasses of
    moto's ``CloudFormationModel``, found through its ``__subclasses__``).

    Raises:
        MotoInternalsChanged: the model registry changed shape, or a model is not used for its
            type after registering.
    """
    parsing = _cloudformation_registry()
    for name in _MODEL_REGISTRY:
        getattr(parsing, name).cache_clear()
    model_map = parsing.get_model_map()
    for model, resource_type in zip(models, resource_types, strict=True):
        if model_map.get(resource_type) is not model:
            raise _fail(
                "moto.cloudformation.parsing.get_model_map",
                f"does not map {resource_type} to the emulator's model after registering it",
            )


def check_moto_internals() -> None:
    """Check every moto internal the pipeline relies on; raise
    [`MotoInternalsChanged`][cdk_session_expiry.testing.MotoInternalsChanged]."""
    _threaded_server_entry()
    _cloudformation_registry()
    _grant_class()
    _backend_dicts()
    _lambda_backend_class()
    _stream_shard_class()
    backend = _connections_backend_dict()["123456789012"]["us-east-1"]
    if not isinstance(getattr(backend, "connections", None), Mapping):
        raise _fail("ApiGatewayManagementApiBackend.connections", "is not a mapping")
    from cdk_session_expiry.testing.models import (
        _moto_agentcore_memory,
        _moto_appconfig,
        _moto_firehose,
        _moto_transactions,
    )

    _moto_transactions.check()
    _moto_appconfig.check()
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
    """Undo one `disable_stream_delivery`; the last one restores moto's method."""
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


# --- snapshots of moto's state (cdk_session_expiry.testing.snapshot) ---------------------------


class SnapshotError(RuntimeError):
    """A resource moto holds cannot be copied into a snapshot; the message names its type."""


def _backend_dicts() -> Any:
    from moto.core.base_backend import BackendDict

    instances = getattr(BackendDict, "_instances", None)
    if not isinstance(instances, list):
        raise _fail("moto.core.base_backend.BackendDict._instances", "is not a list")
    return BackendDict, instances


def _model_classes() -> list[Any]:
    from moto.core.model_instances import model_data

    return [cls for models in model_data.values() for cls in models.values()]


def _crypto_key_types() -> list[type[Any]]:
    """The classes of cryptography's private keys (moto's KMS keys hold one each)."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    return [
        # The smallest size cryptography accepts: only the class is wanted.
        type(rsa.generate_private_key(public_exponent=65537, key_size=1024)),  # noqa: S505
        type(ec.generate_private_key(ec.SECP256R1())),
        type(ed25519.Ed25519PrivateKey.generate()),
    ]


def _load_private_key(der: bytes) -> Any:
    from cryptography.hazmat.primitives import serialization

    return serialization.load_der_private_key(der, password=None)


def _reduce_private_key(key: Any) -> tuple[Any, tuple[bytes]]:
    from cryptography.hazmat.primitives import serialization

    der = key.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return _load_private_key, (der,)


def _rebuild_parameter_dict(account_id: str, region: str, items: Any, state: Any) -> Any:
    from moto.ssm.models import ParameterDict

    parameters = ParameterDict(account_id, region)
    dict.update(parameters, items)
    parameters.__dict__.update(state)
    return parameters


def _reduce_parameter_dict(parameters: Any) -> tuple[Any, tuple[Any, ...]]:
    # A defaultdict subclass whose __init__ takes other arguments than defaultdict's.
    return _rebuild_parameter_dict, (
        parameters.account_id,
        parameters.region_name,
        dict(parameters),
        dict(parameters.__dict__),
    )


def _rebuild_event(is_set: bool) -> threading.Event:
    event = threading.Event()
    if is_set:
        event.set()
    return event


def _synchronisation_reducers() -> dict[type[Any], Any]:
    """Locks, conditions and events are copied as new, released ones (a copied condition would
    keep methods bound to the original's lock, e.g. SQS's queue of messages)."""
    return {
        type(threading.Lock()): lambda _: (threading.Lock, ()),
        type(threading.RLock()): lambda _: (threading.RLock, ()),
        threading.Condition: lambda _: (threading.Condition, ()),
        threading.Event: lambda event: (_rebuild_event, (event.is_set(),)),
    }


_COPY_LOCK = threading.Lock()
_REDUCERS: dict[type[Any], Any] = {}


def _copy(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """``copy.deepcopy`` with reducers for what moto holds that deepcopy cannot copy (locks,
    conditions, private keys, SSM's parameter dict), registered in ``copyreg`` only while
    copying."""
    import copy
    import copyreg

    from moto.ssm.models import ParameterDict

    with _COPY_LOCK:
        if not _REDUCERS:
            _REDUCERS.update(_synchronisation_reducers())
            _REDUCERS[ParameterDict] = _reduce_parameter_dict
            for key_type in _crypto_key_types():
                _REDUCERS[key_type] = _reduce_private_key
        saved = {cls: copyreg.dispatch_table.get(cls) for cls in _REDUCERS}
        copyreg.dispatch_table.update(_REDUCERS)
        try:
            return copy.deepcopy(value, memo)
        except (TypeError, AttributeError) as err:
            raise SnapshotError(
                f"cannot copy the emulator's state: {err}. A resource moto holds for this app "
                "cannot be copied into a snapshot, so the pytest plugin deploys the app again "
                "for each test module instead of restoring it (please report the type named)"
            ) from err
        finally:
            for cls, reducer in saved.items():
                if reducer is None:
                    copyreg.dispatch_table.pop(cls, None)
                else:
                    copyreg.dispatch_table[cls] = reducer


def snapshot_backends() -> Any:
    """A copy of every backend moto holds, and of S3's bucket name registry.

    The copies are taken out of moto's instance tracking, so that moto's reset (which closes the
    buffers of every tracked S3 object) does not empty them.

    Raises:
        SnapshotError: a resource cannot be copied.
        MotoInternalsChanged: moto's backend registry changed shape.
    """
    backend_dict_cls, instances = _backend_dicts()
    keys: list[tuple[Any, str, str]] = []
    states: list[dict[str, Any]] = []
    extras: list[tuple[Any, dict[str, Any]]] = []
    for backends in list(instances):
        if not isinstance(backends, backend_dict_cls):
            raise _fail("BackendDict._instances", "holds something other than BackendDicts")
        for account_id, by_region in dict.items(backends):
            for region, backend in dict.items(by_region):
                keys.append((backends, account_id, region))
                states.append(backend.__dict__)
        if isinstance(getattr(backends, "bucket_accounts", None), dict):
            extras.append((backends, {"bucket_accounts": backends.bucket_accounts}))
    memo: dict[int, Any] = {}
    copied_states, copied_extras = _copy((states, [e for _, e in extras]), memo)
    copies = {id(c) for c in memo.values()}
    for cls in _model_classes():
        tracked = getattr(cls, "instances_tracked", None)
        if isinstance(tracked, list):
            tracked[:] = [obj for obj in tracked if id(obj) not in copies]
    return keys, copied_states, [(b, e) for (b, _), e in zip(extras, copied_extras, strict=True)]


def restore_backends(snapshot: Any) -> None:
    """Install a copy of ``snapshot`` (from `snapshot_backends`) into moto's backends,
    which must have been reset just before (the emulator's ``reset``).

    Raises:
        MotoInternalsChanged: moto's backend registry changed shape.
    """
    _backend_dicts()
    keys, states, extras = snapshot
    copied_states, copied_extras = _copy((states, [e for _, e in extras]))
    for (backends, account_id, region), state in zip(keys, copied_states, strict=True):
        backends[account_id][region].__dict__ = state
    for (backends, _), extra in zip(extras, copied_extras, strict=True):
        for name, value in extra.items():
            getattr(backends, name).update(value)


# --- Ref of an event bus in CloudFormation ---------------------------------------------------


def name_event_buses() -> None:
    """Give moto's ``EventBus`` the ``physical_resource_id`` (its name) that CloudFormation's
    ``Ref`` answers; moto's model has none, so ``Ref`` returned the model. Idempotent; a moto
    release that adds one is left as it is.

    Raises:
        MotoInternalsChanged: moto's ``EventBus`` no longer has a ``name``.
    """
    module = importlib.import_module("moto.events.models")
    bus = getattr(module, "EventBus", None)
    if bus is None or "self.name = name" not in inspect.getsource(bus.__init__):
        raise _fail("moto.events.models.EventBus.name", "does not exist")
    if "physical_resource_id" not in vars(bus):
        bus.physical_resource_id = property(lambda self: self.name)


# --- Outputs of a stack created by a change set ----------------------------------------------


def output_change_set_stacks() -> None:
    """Make ``DescribeStacks`` answer the ``Outputs`` of a stack created or updated by a change
    set (as the CDK CLI deploys): moto builds a stack's outputs from its template when the
    stack is created, which for a change set is before the template is known, so they stayed
    empty (e.g. the construct's ``...CleanupEventSourceMappingId...`` output, which the kill
    switch documents). After moto executes a change set the stack's template is parsed again
    and its outputs rebuilt. Idempotent.

    Raises:
        MotoInternalsChanged: moto's ``execute_change_set`` or ``Stack`` changed shape.
    """
    module = importlib.import_module("moto.cloudformation.models")
    backend: Any = getattr(module, "CloudFormationBackend", None)
    stack: Any = getattr(module, "Stack", None)
    execute = getattr(backend, "execute_change_set", None)
    if execute is None or stack is None:
        raise _fail("CloudFormationBackend.execute_change_set/Stack", "do not exist")
    if getattr(execute, "_outputs_rebuilt", False):
        return
    for name in ("_parse_template", "_create_output_map"):
        if not callable(getattr(stack, name, None)):
            raise _fail(f"moto.cloudformation.models.Stack.{name}", "does not exist")
    if "stack.template = change_set.template" not in inspect.getsource(execute):
        raise _fail("CloudFormationBackend.execute_change_set", "no longer sets the template")

    def execute_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> Any:
        result = execute(self, change_set_name, stack_name)
        for change_set in list(self.change_sets.values()):
            done = getattr(change_set, "execution_status", "") == "EXECUTE_COMPLETE"
            target = self.stacks.get(change_set.stack_id) if done else None
            if target is not None and target.template == change_set.template:
                target._parse_template()
                target.output_map = target._create_output_map()
        return result

    execute_change_set._outputs_rebuilt = True  # type: ignore[attr-defined]
    backend.execute_change_set = execute_change_set


# --- KMS grants' CreationDate ----------------------------------------------------------------

_GRANT_DATES_LOCK = threading.Lock()


def _grant_class() -> Any:
    module = importlib.import_module("moto.kms.models")
    grant = getattr(module, "Grant", None)
    if grant is None or not callable(getattr(grant, "to_json", None)):
        raise _fail("moto.kms.models.Grant.to_json", "does not exist")
    # Once patched, check moto's own __init__ (kept on the class), not the wrapper.
    init = getattr(grant, "_moto_init", grant.__init__)
    if "self.id = " not in inspect.getsource(init):
        raise _fail("moto.kms.models.Grant.__init__", "no longer sets the grant's id")
    return grant


def date_grants() -> None:
    """Give every moto KMS grant the ``CreationDate`` AWS answers in ``ListGrants`` (epoch
    seconds of its creation, kept as ``creation_date``); moto answers none, so the grant sweep
    took every grant for a recent one. Idempotent; stays for the process (it only adds a field).

    Raises:
        MotoInternalsChanged: moto's ``Grant`` changed shape.
    """
    import time

    grant = _grant_class()
    with _GRANT_DATES_LOCK:
        if getattr(grant, "_dated_by_emulator", False):
            return
        original_init, original_to_json = grant.__init__, grant.to_json

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original_init(self, *args, **kwargs)
            self.creation_date = time.time()

        def to_json(self: Any) -> dict[str, Any]:
            document: dict[str, Any] = original_to_json(self)
            document.setdefault("CreationDate", getattr(self, "creation_date", time.time()))
            return document

        grant.__init__, grant.to_json = __init__, to_json
        grant._moto_init = original_init
        grant._dated_by_emulator = True


def age_grants(account_id: str, region: str, seconds: float) -> int:
    """Move the ``CreationDate`` of every KMS grant ``seconds`` into the past; returns how
    many grants were aged.

    Raises:
        MotoInternalsChanged: moto's KMS backend changed shape.
    """
    from moto.kms.models import kms_backends

    keys = getattr(kms_backends[account_id][region], "keys", None)
    if not isinstance(keys, Mapping):
        raise _fail("KmsBackend.keys", "is not a mapping")
    aged = 0
    for key in list(keys.values()):
        for grant in list(getattr(key, "grants", {}).values()):
            grant.creation_date = getattr(grant, "creation_date", 0.0) - seconds
            aged += 1
    return aged
