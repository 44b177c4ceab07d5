"""Ownership records for the cleanup tests: the table and claims in exactly the format
``session_expiry_runtime.core.ownership`` defines (what ``SessionStore`` writes), seeded straight
into moto so the reader side can be tested on its own.

Everything here is real boto3 against moto; nothing is stubbed. Reusable by any test that needs
a session's claims (``Sandbox.create_session`` seeds them through :func:`put_claim`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from session_expiry_runtime.core import ownership as own

#: The ownership table of the tests (the construct's ``Sessions/OwnershipTable``).
OWNERSHIP_TABLE = "session-ownership"
#: The deferred-work table of the tests (the construct's ``Sessions/DeferredWorkTable``).
DEFERRED_WORK_TABLE = "session-deferred-work"
#: A session's absolute lifetime when a test gives none (SessionStore's default, 8 hours).
DEFAULT_LIFETIME_SECONDS = 8 * 3600


def create_ownership_table(ddb: Any, name: str = OWNERSHIP_TABLE) -> None:
    """The ownership table as the construct creates it: partition key ``resource`` (String),
    on-demand, no stream, no index (moto does not need the time to live to be enabled)."""
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": own.ATTR_RESOURCE, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": own.ATTR_RESOURCE, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def create_deferred_work_table(ddb: Any, name: str = DEFERRED_WORK_TABLE) -> None:
    """The deferred-work table as the construct creates it with ``feature_flags``: partition key
    ``resource`` (String), the sparse ``deferredWork`` index of pending work, on-demand, no
    stream."""
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "resource", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "resource", "AttributeType": "S"},
            {"AttributeName": "deferredStep", "AttributeType": "S"},
            {"AttributeName": "deferredAt", "AttributeType": "N"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "deferredWork",
                "KeySchema": [
                    {"AttributeName": "deferredStep", "KeyType": "HASH"},
                    {"AttributeName": "deferredAt", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def claim_item(
    kind: str,
    resource_id: str,
    *,
    key: Mapping[str, str],
    incarnation: str,
    state: str = own.STATE_HELD,
    claimed_at: float | None = None,
    not_after: float | None = None,
    state_since: float | None = None,
    former_owners: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One ownership record (low-level item): ``key`` owns ``kind``/``resource_id`` in
    ``incarnation``; ``former_owners`` (``own.former_owner(...)`` values) are the holders it took
    the id over from. Defaults: claimed an hour ago, ending in 8 hours from the claim."""
    claimed = int(time.time()) - 3600 if claimed_at is None else int(claimed_at)
    ends = claimed + DEFAULT_LIFETIME_SECONDS if not_after is None else int(not_after)
    return {
        own.ATTR_RESOURCE: {"S": own.resource_key(kind, resource_id)},
        own.ATTR_OWNER: {"S": own.owner_token(key)},
        own.ATTR_INCARNATION: {"S": incarnation},
        own.ATTR_STATE: {"S": state},
        own.ATTR_STATE_SINCE: {"N": str(claimed if state_since is None else int(state_since))},
        own.ATTR_CLAIMED_AT: {"N": str(claimed)},
        own.ATTR_NOT_AFTER: {"N": str(ends)},
        own.ATTR_EXPIRES_AT: {"N": str(ends + own.CLAIM_RETENTION_SECONDS)},
        **(
            {own.ATTR_FORMER_OWNERS: {"L": [{"S": f} for f in former_owners]}}
            if former_owners
            else {}
        ),
    }


def put_claim(
    ddb: Any, kind: str, resource_id: str, *, table: str = OWNERSHIP_TABLE, **fields: Any
) -> dict[str, Any]:
    """Write one ownership record (see :func:`claim_item` for ``fields``); returns the item."""
    item = claim_item(kind, resource_id, **fields)
    ddb.put_item(TableName=table, Item=item)
    return item


def raw_claim(
    ddb: Any, kind: str, resource_id: str, *, table: str = OWNERSHIP_TABLE
) -> dict[str, Any] | None:
    """The ownership record's item as stored (``None``: none)."""
    answer = ddb.get_item(
        TableName=table,
        Key={own.ATTR_RESOURCE: {"S": own.resource_key(kind, resource_id)}},
        ConsistentRead=True,
    )
    return answer.get("Item")  # type: ignore[no-any-return]


def read_claim(
    ddb: Any, kind: str, resource_id: str, *, table: str = OWNERSHIP_TABLE
) -> own.Claim | None:
    return own.Claim.from_item(raw_claim(ddb, kind, resource_id, table=table))


def claim_state(ddb: Any, kind: str, resource_id: str, *, table: str = OWNERSHIP_TABLE) -> str:
    """``held``/``releasing``/``released``, or ``"none"`` when there is no record."""
    claim = read_claim(ddb, kind, resource_id, table=table)
    return claim.state if claim is not None else "none"


def calls_of(client: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every operation ``client`` sends from now on, with its parameters (a botocore event
    hook: the calls still go to moto or the Stubber)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    service = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register(
        f"provide-client-params.{service}",
        lambda model, params, **_: calls.append((model.name, dict(params))),
    )
    return calls


def emf_totals(stdout: str) -> dict[str, float]:
    """The metrics of embedded-metric-format lines: ``{"Name" or "Name|Dim=Value": total}``."""
    totals: dict[str, float] = {}
    for line in stdout.splitlines():
        if not line.startswith('{"_aws"'):
            continue
        doc = json.loads(line)
        (directive,) = doc["_aws"]["CloudWatchMetrics"]
        dimensions = directive["Dimensions"][0]
        suffix = "".join(f"|{d}={doc[d]}" for d in dimensions)
        for metric in directive["Metrics"]:
            value = doc[metric["Name"]]
            total = len(value) if isinstance(value, list) else value
            key = metric["Name"] + suffix
            totals[key] = totals.get(key, 0) + total
    return totals


def adopt(
    ddb: Any, table: str, key: Mapping[str, Any], *, scratch_prefix: str = "scratchPrefix"
) -> str:
    """Give an item written by ``SessionStore`` what it writes with ownership records (issue 20):
    an ``incarnation`` (its scratch prefix's last segment, the value the store uses) and a claim
    for every connection, AgentCore session and grant id it names. For the tests that drive the
    cleanup through ``SessionStore`` while the store's side of issue 20 is merged separately;
    idempotent once the store writes them itself (same incarnation, same owner). Returns the
    incarnation.
    """
    item = ddb.get_item(TableName=table, Key=dict(key), ConsistentRead=True)["Item"]
    incarnation = (
        item.get("incarnation", {}).get("S")
        or item[scratch_prefix]["S"].rstrip("/").rsplit("/", 1)[-1]
    )
    ddb.update_item(
        TableName=table,
        Key=dict(key),
        UpdateExpression="SET incarnation = :i",
        ExpressionAttributeValues={":i": {"S": incarnation}},
    )
    owner = {name: value["S"] for name, value in key.items()}
    for kind, single, many in (
        (own.KIND_CONNECTION, "connectionId", "connectionIds"),
        (own.KIND_AGENT_RUNTIME, "agentRuntimeSessionId", "agentRuntimeSessionIds"),
        (own.KIND_CODE_INTERPRETER, "codeInterpreterSessionId", "codeInterpreterSessionIds"),
        (own.KIND_BROWSER, "browserSessionId", "browserSessionIds"),
        (own.KIND_GRANT, "grantId", ""),
    ):
        ids = set(item.get(many, {}).get("SS", [])) | (
            {item[single]["S"]} if "S" in item.get(single, {}) else set()
        )
        for resource_id in ids:
            put_claim(ddb, kind, resource_id, key=owner, incarnation=incarnation)
    return incarnation
