"""The declared resource kinds, read from the runtime's one declaration.

``session_expiry_runtime/core/kinds.py`` declares every resource kind once (its attribute, release
call, "gone" answers, IAM, prop, docs row). It is standard library only, so the construct loads
that very file by its path (`_runtime_contract.runtime_package_dir`) instead of importing the
runtime package (which the construct never does: ``tests/test_contract.py``); the runtime,
deployed alone in the Lambda asset, imports it as its own module. One file, both sides.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any

from ._runtime_contract import runtime_package_dir

#: The name the loaded declaration module is registered under (never the runtime's own).
_MODULE = "cdk_session_expiry._declared_kinds"


def _load() -> ModuleType:
    loaded = sys.modules.get(_MODULE)
    if loaded is not None:
        return loaded
    path = runtime_package_dir() / "core" / "kinds.py"
    spec = importlib.util.spec_from_file_location(_MODULE, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a broken install
        raise FileNotFoundError(f"cannot load the resource kinds from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[_MODULE] = module  # dataclasses resolve their module while the file runs
    spec.loader.exec_module(module)
    return module


_kinds = _load()
#: Every declared kind (``session_expiry_runtime.core.kinds.DECLARED_KINDS``), in order.
DECLARED_KINDS: tuple[Any, ...] = _kinds.DECLARED_KINDS
#: The kinds set through ``SessionExpiry(resource_targets=...)`` (those with a ``Target``).
TARGETED_KINDS: tuple[Any, ...] = tuple(k for k in DECLARED_KINDS if k.target is not None)


def declared(kind: str) -> Any:
    """The declaration of the built-in ``kind`` (``"agentRuntime"``, ...).

    Raises:
        KeyError: no kind of that name is declared.
    """
    found = _kinds.declared_kind(kind)
    if found is None:
        raise KeyError(f"resource kind {kind!r} is not declared in core/kinds.py")
    return found
