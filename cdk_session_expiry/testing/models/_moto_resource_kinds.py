"""The release calls of the declared resource kinds that moto lacks, answered from the
declarations (``session_expiry_runtime/core/kinds.py``, read through ``cdk_session_expiry._kinds``).

For every declared kind of ``bedrock-agentcore`` whose release operation moto (5.2.x) does not
implement (``DeleteCapacityProviderSession``, ``DeletePaymentSession``, ...), `install` adds
it to moto's AgentCore responses, routed by botocore's own model (method and request URI): a
resource a test registered with `hold` is released (HTTP status as the model documents it,
an empty JSON body: AWS also returns the resource's ARN, id or status, which the cleanup does not
read) and is no longer held; any other answers ``ResourceNotFoundException`` (HTTP 404), as AWS
answers for a resource already deleted or never there. `deny` makes one resource answer
``AccessDeniedException`` (HTTP 403) instead, for failure tests. Every call is recorded
(`calls`). Not modelled: the resources' creation and lifetimes (a payment session's
``expiryTimeInMinutes``, a capacity provider's workspace volume), the payment user id header,
id and ARN validation beyond botocore's, IAM. `install`/`uninstall` are counted like
`_moto_agentcore_memory`; the state is this process's, shared by in-process moto and the local
emulator's server threads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from cdk_session_expiry import _kinds

_LOCK = threading.Lock()
_COUNT = 0
_ADDED: list[str] = []
#: (kind, target, id) of the resources that exist.
_HELD: set[tuple[str, str, str]] = set()
#: (kind, target, id) answered ``AccessDeniedException``.
_DENIED: set[tuple[str, str, str]] = set()


@dataclass(frozen=True)
class ReleaseCall:
    """One release request answered: the kind, target and id named, and whether it released a
    held resource (``False``: ``ResourceNotFoundException`` or ``AccessDeniedException``)."""

    kind: str
    target: str
    resource_id: str
    released: bool


_CALLS: list[ReleaseCall] = []


def hold(kind: str, target: str, resource_id: str) -> None:
    """Register a resource of the declared ``kind`` that its release call will release.

    Raises:
        ValueError: ``kind`` is no declared kind with a release call.
    """
    _declared(kind)
    with _LOCK:
        _HELD.add((kind, target, resource_id))


def deny(kind: str, target: str, resource_id: str) -> None:
    """Make the release of that resource answer ``AccessDeniedException`` (a missing grant)."""
    _declared(kind)
    with _LOCK:
        _DENIED.add((kind, target, resource_id))


def held(kind: str | None = None) -> set[tuple[str, str]]:
    """(target, id) of the resources still held, of one ``kind`` or all."""
    with _LOCK:
        return {(t, i) for k, t, i in _HELD if kind is None or k == kind}


def calls() -> list[ReleaseCall]:
    """Every release request answered, in order."""
    with _LOCK:
        return list(_CALLS)


def reset() -> None:
    """Forget every resource, denial and call."""
    with _LOCK:
        _HELD.clear()
        _DENIED.clear()
        _CALLS.clear()


def install() -> None:
    """Add the missing release operations (idempotent, counted)."""
    global _COUNT
    from moto.bedrockagentcore.responses import BedrockAgentCoreResponse

    with _LOCK:
        _COUNT += 1
        if _COUNT > 1:
            return
        for kind in _kinds.DECLARED_KINDS:
            release = kind.release
            if kind.service != "bedrock-agentcore" or release is None:
                continue
            if hasattr(BedrockAgentCoreResponse, release.method):
                continue  # moto has it (or another kind added it)
            setattr(BedrockAgentCoreResponse, release.method, _answer(kind))
            _ADDED.append(release.method)


def uninstall() -> None:
    """Undo one `install`; moto's own behaviour is back after the last one."""
    global _COUNT
    from moto.bedrockagentcore.responses import BedrockAgentCoreResponse

    with _LOCK:
        if _COUNT == 0:
            return
        _COUNT -= 1
        if _COUNT:
            return
        for method in _ADDED:
            delattr(BedrockAgentCoreResponse, method)
        _ADDED.clear()


def _declared(kind: str) -> Any:
    for declared in _kinds.DECLARED_KINDS:
        if declared.kind == kind and declared.release is not None:
            return declared
    names = [k.kind for k in _kinds.DECLARED_KINDS if k.release is not None]
    raise ValueError(f"kind={kind!r}: expected a declared kind with a release call, one of {names}")


def _answer(kind: Any) -> Any:
    release = kind.release

    def answer(self: Any) -> Any:
        from moto.bedrockagentcore.exceptions import ResourceNotFoundException
        from moto.core.exceptions import JsonRESTError
        from moto.core.responses import ActionResult

        params = self._get_params()
        target = str(params.get(release.target_parameter) or "")
        key = (kind.kind, target, str(params.get(release.id_parameter) or ""))
        with _LOCK:
            denied = key in _DENIED
            released = not denied and key in _HELD
            if released:
                _HELD.discard(key)
            _CALLS.append(ReleaseCall(*key, released=released))
        if denied:
            error = JsonRESTError("AccessDeniedException", f"not authorized to {release.operation}")
            error.code = 403
            raise error
        if not released:
            raise ResourceNotFoundException(f"{kind.label} {key[2]} not found")
        return ActionResult({})

    answer.__name__ = release.method
    return answer
