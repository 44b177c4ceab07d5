"""AgentCore Memory as the cleanup uses it, where moto (5.2.x) lacks it.

moto implements AgentCore Memory's short-term events (``CreateEvent``, ``GetEvent``,
``ListEvents``, ``DeleteEvent``), but:

* its ``ListEvents`` cuts the list at ``maxResults`` and never returns a ``nextToken``, so a
  client that pages (as AWS requires: "the maximum number of results to return in a single
  call. The default value is 20", Amazon Bedrock AgentCore API Reference, ``ListEvents``) sees
  only the first page. `install` makes it page: ``nextToken`` is the position of the next
  event, returned while events remain.
* it has no long-term memory records. `install` adds ``BatchCreateMemoryRecords`` (to
  seed records in tests), ``ListMemoryRecords`` (the records whose namespace is exactly the one
  asked, ``maxResults``/``nextToken`` paging) and ``DeleteMemoryRecord``
  (``ResourceNotFoundException`` for an unknown or deleted record), in the API's shapes.

What it does not model: extraction of records from events by memory strategies, event expiry,
``namespacePath``, metadata filters, IAM. `install`/`uninstall` are counted like
`_moto_transactions`; `check` fails loudly if moto's shape changed.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Any

_LOCK = threading.Lock()
_COUNT = 0
_ORIGINAL_LIST: Any = None
_ADDED = ("list_memory_records", "delete_memory_record", "batch_create_memory_records")


def check() -> None:
    """Raise ``MotoInternalsChanged`` if moto's AgentCore backend lost what this module uses."""
    from moto.bedrockagentcore.models import BedrockAgentCoreBackend
    from moto.bedrockagentcore.responses import BedrockAgentCoreResponse

    from cdk_session_expiry.testing.models._moto_internals import _fail

    for owner, name in (
        (BedrockAgentCoreResponse, "list_events"),
        (BedrockAgentCoreResponse, "_get_params"),
        (BedrockAgentCoreBackend, "list_events"),
    ):
        if not callable(getattr(owner, name, None)):
            raise _fail(f"{owner.__name__}.{name}", "is gone (see _moto_agentcore_memory.py)")
    if "events" not in BedrockAgentCoreBackend.__init__.__code__.co_names:
        raise _fail("BedrockAgentCoreBackend.events", "is gone (see _moto_agentcore_memory.py)")


def install() -> None:
    """Page ``ListEvents`` and add the memory record operations (idempotent, counted)."""
    global _COUNT, _ORIGINAL_LIST
    from moto.bedrockagentcore.responses import BedrockAgentCoreResponse

    with _LOCK:
        _COUNT += 1
        if _COUNT > 1:
            return
        check()
        _ORIGINAL_LIST = BedrockAgentCoreResponse.list_events
        BedrockAgentCoreResponse.list_events = _list_events  # type: ignore[method-assign]
        for name in _ADDED:
            setattr(BedrockAgentCoreResponse, name, globals()[f"_{name}"])


def uninstall() -> None:
    """Undo one `install`; moto's own behaviour is back after the last one."""
    global _COUNT, _ORIGINAL_LIST
    from moto.bedrockagentcore.responses import BedrockAgentCoreResponse

    with _LOCK:
        if _COUNT == 0:
            return
        _COUNT -= 1
        if _COUNT or _ORIGINAL_LIST is None:
            return
        BedrockAgentCoreResponse.list_events = _ORIGINAL_LIST  # type: ignore[method-assign]
        _ORIGINAL_LIST = None
        for name in _ADDED:
            delattr(BedrockAgentCoreResponse, name)


def _page(items: list[Any], params: dict[str, Any]) -> tuple[list[Any], str | None]:
    start = int(params.get("nextToken") or 0)
    size = int(params.get("maxResults") or 20)
    end = start + size
    return items[start:end], (str(end) if end < len(items) else None)


def _list_events(self: Any) -> Any:
    from moto.core.responses import ActionResult

    params = self._get_params()
    events = self.backend.list_events(
        memory_id=params["memoryId"],
        actor_id=params["actorId"],
        session_id=params["sessionId"],
        max_results=None,
    )
    page, token = _page(events, params)
    include = params.get("includePayloads", True)
    body: dict[str, Any] = {"events": [e.to_dict(include_payload=include) for e in page]}
    if token:
        body["nextToken"] = token
    return ActionResult(body)


def _records(backend: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """memoryId -> memoryRecordId -> record, kept on the moto backend (reset with it)."""
    if not hasattr(backend, "memory_records"):
        backend.memory_records = {}
    found: dict[str, dict[str, dict[str, Any]]] = backend.memory_records
    return found


def _batch_create_memory_records(self: Any) -> Any:
    from moto.core.responses import ActionResult
    from moto.moto_api._internal import mock_random

    params = self._get_params()
    records = _records(self.backend).setdefault(params["memoryId"], {})
    created = []
    for request in params.get("records") or []:
        record_id = f"mem-{mock_random.get_random_hex(40)}"
        records[record_id] = {
            "memoryRecordId": record_id,
            "content": request.get("content") or {},
            "memoryStrategyId": request.get("memoryStrategyId") or "custom",
            "namespaces": list(request.get("namespaces") or []),
            "createdAt": datetime.now(timezone.utc),
        }
        created.append(
            {
                "memoryRecordId": record_id,
                "status": "SUCCEEDED",
                "requestIdentifier": request.get("requestIdentifier"),
            }
        )
    return ActionResult({"successfulRecords": created, "failedRecords": []})


def _list_memory_records(self: Any) -> Any:
    from moto.core.responses import ActionResult

    params = self._get_params()
    namespace = params.get("namespace")
    records = _records(self.backend).get(params["memoryId"], {})
    matching = [dict(r) for r in records.values() if namespace in r["namespaces"]]
    page, token = _page(matching, params)
    body: dict[str, Any] = {"memoryRecordSummaries": page}
    if token:
        body["nextToken"] = token
    return ActionResult(body)


def _delete_memory_record(self: Any) -> Any:
    from moto.bedrockagentcore.exceptions import ResourceNotFoundException
    from moto.core.responses import ActionResult

    params = self._get_params()
    records = _records(self.backend).get(params["memoryId"], {})
    if records.pop(params["memoryRecordId"], None) is None:
        raise ResourceNotFoundException(f"Memory record {params['memoryRecordId']} not found")
    return ActionResult({"memoryRecordId": params["memoryRecordId"]})
