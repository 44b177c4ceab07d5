"""Why was a session item removed: time to live, deleted after its expiry, or an explicit delete.

Rules (Amazon DynamoDB Developer Guide, "Time to Live (TTL)" and "DynamoDB Streams and Time to
Live"; "Working with expired items" for global tables):

* ``ttl`` -- the record carries ``userIdentity``
  ``{"type": "Service", "principalId": "dynamodb.amazonaws.com"}`` and the old image's TTL
  attribute is a plausible epoch-seconds Number.
* ``deleted-after-expiry`` -- no ``userIdentity`` at all, and the old image's TTL is a plausible
  epoch-seconds Number at or before ``dynamodb.ApproximateCreationDateTime``: the item had
  expired when someone other than the TTL service removed it -- the expiry sweeper, a TTL
  delete replicated into a global-table replica (which carries no identity), or an application
  ending a session after its expiry. The record cannot tell these apart, so the reason says
  what it knows.
* ``explicit`` -- everything else: an application DeleteItem of a live item, a TTL held as a
  String, in milliseconds, or missing (DynamoDB never expires those), an unknown identity.

The reason only labels logs and metrics: every reason gets the same cleanup.

Pure functions only: no AWS calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from ..core.config import REASON_DELETED_AFTER_EXPIRY, REASON_EXPLICIT, REASON_TTL
from ..core.ttl import ttl_epoch_seconds

#: ``userIdentity`` of a TTL delete (DynamoDB Developer Guide, "DynamoDB Streams and TTL").
TTL_IDENTITY_TYPE = "Service"
TTL_IDENTITY_PRINCIPAL = "dynamodb.amazonaws.com"


@dataclass(frozen=True)
class Classification:
    """Outcome of `classify_removal`.

    Attributes:
        reason: ``"ttl"``, ``"deleted-after-expiry"`` or ``"explicit"`` (``config.REASON_*``).
        ttl_seconds: the old image's TTL in epoch seconds, when it is a plausible one.
        lag_seconds: ``ApproximateCreationDateTime - ttl_seconds`` for the two TTL reasons when
            both are known: how late DynamoDB removed the item. ``None`` otherwise.
    """

    reason: str
    ttl_seconds: Decimal | None = None
    lag_seconds: Decimal | None = None


def is_ttl_identity(user_identity: object) -> bool:
    """True when ``user_identity`` is DynamoDB's TTL service identity (exact, case sensitive)."""
    return (
        isinstance(user_identity, Mapping)
        and user_identity.get("type") == TTL_IDENTITY_TYPE
        and user_identity.get("principalId") == TTL_IDENTITY_PRINCIPAL
    )


def ttl_lag_seconds(ttl_seconds: Decimal | None, removed_at: Decimal | None) -> Decimal | None:
    """Seconds from expiry (``ttl_seconds``) to removal (``removed_at``); ``None`` if either is."""
    if ttl_seconds is None or removed_at is None:
        return None
    return removed_at - ttl_seconds


def classify_removal(
    *,
    user_identity: object,
    ttl_value: object,
    approximate_creation_time: Decimal | None,
) -> Classification:
    """Classify one REMOVE record (see the module docstring for the rules).

    Args:
        user_identity: the record's top-level ``userIdentity`` as delivered, ``None`` if absent.
        ttl_value: the old image's TTL attribute, decoded (``None`` if absent).
        approximate_creation_time: ``dynamodb.ApproximateCreationDateTime`` in epoch seconds.
    """
    ttl = ttl_epoch_seconds(ttl_value)
    if ttl is not None:
        if is_ttl_identity(user_identity):
            return Classification(REASON_TTL, ttl, ttl_lag_seconds(ttl, approximate_creation_time))
        if (
            user_identity is None
            and approximate_creation_time is not None
            and ttl <= approximate_creation_time
        ):
            return Classification(
                REASON_DELETED_AFTER_EXPIRY, ttl, ttl_lag_seconds(ttl, approximate_creation_time)
            )
    return Classification(REASON_EXPLICIT, ttl)
