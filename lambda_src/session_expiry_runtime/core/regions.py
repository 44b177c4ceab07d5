"""Global tables: every session is cleaned once, in its owner Region.

With a global table (version 2019.11.21) every replica's stream carries a REMOVE for each
deleted session, and only the Region that performed a TTL delete sees ``userIdentity`` on it
(Amazon DynamoDB Developer Guide, "DynamoDB Streams and Time to Live"). A session's resources
are regional too (its WebSocket connection lives in the Region its client connected to, its
ownership records in that Region's ownership table). So one Region cleans each session: its
**owner Region**, the Region whose replica it was created in.

* ``SessionStore.create`` stamps the owner Region under ``SESSION_EXPIRY_OWNER_REGION_ATTRIBUTE``
  (default ``ownerRegion``, a String). ``touch`` never changes it: a heartbeat from another
  Region (after a failover) extends the session and leaves its owner as it was.
* The expiry sweeper's shard values carry it (`sweep_shard_value`: ``"<region>#<n>"``), so
  each Region's sweeper Queries only its own sessions and two Regions never race on one item.
* The cleanup's event source mapping filters on it (``cdk_session_expiry.filters``), and the
  runner checks it again (`owned_here`): a record of another Region's session is skipped
  (``RecordsSkipped``, cause ``OtherRegion``) and no call is made for it.

Pure functions only: no AWS calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config import RuntimeConfig

#: Between the Region and the shard number in a global table's sweep shard value.
SHARD_SEPARATOR = "#"


def is_global(config: RuntimeConfig) -> bool:
    """True when ``config`` names an owner Region attribute (a global table)."""
    return bool(config.owner_region_attribute)


def require_region(config: RuntimeConfig) -> str:
    """The Region of ``config`` on a global table.

    Raises:
        ValueError: the owner Region attribute is set but no Region is known
            (``SESSION_EXPIRY_REGION`` and ``AWS_REGION`` both unset).
    """
    if not config.region:
        raise ValueError(
            f"owner Region attribute {config.owner_region_attribute!r} is set (a global table) "
            "but the Region is unknown: expected SESSION_EXPIRY_REGION or AWS_REGION"
        )
    return config.region


def sweep_shard_value(index: int, region: str | None) -> str:
    """The sweep index's partition key value of shard ``index``: ``"<region>#<index>"`` on a
    global table (``region`` given), ``"<index>"`` otherwise."""
    return f"{region}{SHARD_SEPARATOR}{index}" if region else str(index)


def owner_region_of(old_image: Mapping[str, Any] | None, attribute: str) -> str | None:
    """The owner Region a wire-form image (``{"ownerRegion": {"S": "eu-west-1"}}``) names;
    ``None`` when absent or not a String."""
    if not isinstance(old_image, Mapping):
        return None
    value = old_image.get(attribute)
    if isinstance(value, Mapping):
        text = value.get("S")
        if isinstance(text, str) and text:
            return text
    return None


def owned_here(old_image: Mapping[str, Any] | None, config: RuntimeConfig) -> bool:
    """Whether this Region's cleanup acts on a REMOVE with ``old_image`` (wire form).

    Always true on a one-Region table. On a global table, true only when the image names this
    Region as its owner: an image without the attribute (written before the table was global,
    or by other code) is nobody's, exactly as the event source mapping's filter drops it.
    """
    if not is_global(config):
        return True
    attribute = config.owner_region_attribute
    assert attribute is not None
    # No known Region owns nothing: never act on a session that might be another Region's.
    return config.region is not None and owner_region_of(old_image, attribute) == config.region
