"""Sessions as ``SessionStore`` writes them, built without a store (thousands at a time).

The bench's small fixtures are written by the real :class:`~session_expiry_runtime.store.
SessionStore` into moto (:func:`bench.harness.build_fixture`). The scale runs and the storm need
thousands to a hundred thousand sessions, which the store would write one ``TransactWriteItems``
at a time; these functions build the same items directly — the session item after
``create(..., connection_id=...)`` and ``create_grant(...)``, and its ownership records
(:mod:`session_expiry_runtime.core.ownership`). ``tests/test_bench_sessions.py`` proves them equal,
attribute for attribute, to what the store writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from session_expiry_runtime.core.config import CLAIM_TOKEN_ATTRIBUTE, RuntimeConfig
from session_expiry_runtime.core.grant_names import grant_name
from session_expiry_runtime.core.ownership import (
    ATTR_CLAIMED_AT,
    ATTR_EXPIRES_AT,
    ATTR_INCARNATION,
    ATTR_NOT_AFTER,
    ATTR_OWNER,
    ATTR_RESOURCE,
    ATTR_STATE,
    ATTR_STATE_SINCE,
    CLAIM_RETENTION_SECONDS,
    KIND_CONNECTION,
    KIND_GRANT,
    STATE_HELD,
    owner_token,
    resource_key,
)
from session_expiry_runtime.core.prefixes import build_scratch_prefix
from session_expiry_runtime.store_parts.claims import ATTR_TOKEN_HASH, token_hash
from session_expiry_runtime.sweeps.sweeper import shard_of

Item = dict[str, Any]


@dataclass(frozen=True)
class SessionSpec:
    """One session of a table without a sort key (key ``{partition_key: session_id}``).

    ``created_at``: epoch seconds of ``create``; ``expires_at``: its TTL (epoch seconds);
    ``connection_id``/``grant_id``/``grant_token``: ``None`` for none.
    """

    session_id: str
    incarnation: str
    created_at: int
    expires_at: int
    connection_id: str | None = None
    grant_id: str | None = None
    grant_token: str | None = None
    tenant_id: str | None = None
    #: the claim registrar's secret ``create`` writes on the item (its hash on each claim)
    claim_token: str | None = None

    def key(self, config: RuntimeConfig) -> dict[str, str]:
        return {config.partition_key: self.session_id}

    def scratch_prefix(self, config: RuntimeConfig) -> str:
        return build_scratch_prefix(
            config.scratch_root, self.session_id, incarnation=self.incarnation
        )

    def not_after(self, config: RuntimeConfig) -> int:
        return self.created_at + config.max_session_lifetime_seconds

    def grant_name(self, config: RuntimeConfig) -> str | None:
        return grant_name(self.key(config), self.incarnation)


def session_item(config: RuntimeConfig, spec: SessionSpec) -> Item:
    """The session item ``create`` (and ``create_grant``, with a grant) leave in the table."""
    c = config
    item: Item = {
        c.partition_key: {"S": spec.session_id},
        c.ttl_attribute: {"N": str(min(spec.expires_at, spec.not_after(c)))},
        c.not_after_attribute: {"N": str(spec.not_after(c))},
        c.scratch_prefix_attribute: {"S": spec.scratch_prefix(c)},
        c.incarnation_attribute: {"S": spec.incarnation},
    }
    if spec.claim_token is not None:
        item[CLAIM_TOKEN_ATTRIBUTE] = {"S": spec.claim_token}
    if c.sweep_shard_attribute and c.sweep_shards:
        item[c.sweep_shard_attribute] = {"S": shard_of([spec.session_id], c.sweep_shards)}
    if spec.tenant_id is not None:
        item[c.tenant_attribute] = {"S": spec.tenant_id}
    if spec.connection_id is not None:
        item[c.connection_id_attribute] = {"S": spec.connection_id}
        item[c.connection_ids_attribute] = {"SS": [spec.connection_id]}
    if spec.grant_id is not None:
        item[c.grant_id_attribute] = {"S": spec.grant_id}
        item[c.grant_token_attribute] = {"S": str(spec.grant_token)}
    return item


def claim_items(config: RuntimeConfig, spec: SessionSpec) -> list[Item]:
    """The ownership records of the session's connection and grant (``held``), as the store
    claims them at ``created_at``."""
    owner = owner_token(spec.key(config))
    not_after = spec.not_after(config)
    ids = [(KIND_CONNECTION, spec.connection_id), (KIND_GRANT, spec.grant_id)]
    hashed = (
        {ATTR_TOKEN_HASH: {"S": token_hash(spec.claim_token)}}
        if spec.claim_token is not None
        else {}
    )
    return [
        {
            ATTR_RESOURCE: {"S": resource_key(kind, resource_id)},
            ATTR_OWNER: {"S": owner},
            ATTR_INCARNATION: {"S": spec.incarnation},
            ATTR_STATE: {"S": STATE_HELD},
            ATTR_STATE_SINCE: {"N": str(spec.created_at)},
            ATTR_CLAIMED_AT: {"N": str(spec.created_at)},
            ATTR_NOT_AFTER: {"N": str(not_after)},
            ATTR_EXPIRES_AT: {"N": str(not_after + CLAIM_RETENTION_SECONDS)},
            **hashed,
        }
        for kind, resource_id in ids
        if resource_id is not None
    ]
