"""AWS CDK construct for DynamoDB-backed sessions that fail closed on time.

Re-exports only; see :class:`SessionExpiry`.
"""

from .archive_delivery import ArchiveDelivery
from .assets import CLEANUP_RUNTIME
from .change_source import ChangeSource
from .circuit_breaker import CircuitBreakerAlarm
from .construct import SessionExpiry
from .custom_steps import CustomCleanupStep
from .feature_flags import FeatureFlags
from .filters import CleanupEventFilter
from .validation import PropTypeError

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
