"""AWS CDK construct for DynamoDB-backed sessions that fail closed on time.

Re-exports only; see [`SessionExpiry`][cdk_session_expiry.SessionExpiry].

The names are imported on first use (PEP 562 ``__getattr__``), not when the package is: importing
``aws_cdk`` starts the jsii runtime (a Node.js process, seconds), which
``python -m cdk_session_expiry.cost --help`` does not need and before which the testing plugin
checks that Node.js is there at all (``cdk_session_expiry.testing``). ``from cdk_session_expiry
import SessionExpiry`` works as before; type checkers read the imports below.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .archiving.archive_delivery import ArchiveDelivery
    from .assets import CLEANUP_RUNTIME
    from .change_source import ChangeSource
    from .construct import SessionExpiry
    from .custom_steps import CustomCleanupStep
    from .filters import CleanupEventFilter
    from .switches.circuit_breaker import CircuitBreakerAlarm
    from .switches.feature_flags import FeatureFlags
    from .validation import PropTypeError

#: Each public name and the module it comes from.
_EXPORTS = {
    "ArchiveDelivery": ".archiving.archive_delivery",
    "CLEANUP_RUNTIME": ".assets",
    "ChangeSource": ".change_source",
    "CircuitBreakerAlarm": ".switches.circuit_breaker",
    "SessionExpiry": ".construct",
    "CustomCleanupStep": ".custom_steps",
    "FeatureFlags": ".switches.feature_flags",
    "CleanupEventFilter": ".filters",
    "PropTypeError": ".validation",
}

__all__ = [
    "CLEANUP_RUNTIME",
    "ArchiveDelivery",
    "ChangeSource",
    "CircuitBreakerAlarm",
    "CleanupEventFilter",
    "CustomCleanupStep",
    "FeatureFlags",
    "PropTypeError",
    "SessionExpiry",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # once imported, an ordinary module attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(__all__) | {name for name in globals() if name.startswith("__")})
