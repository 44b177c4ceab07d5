"""Global tables (``global_table``): one stack per Region, each cleaning only its own sessions.

With a global table (version 2019.11.21) every replica's stream carries a REMOVE for each
deleted session, and only the Region that performed a TTL delete sees ``userIdentity``
(Amazon DynamoDB Developer Guide, "DynamoDB Streams and Time to Live"). A ``SessionExpiry`` is
attached to each replica (one stack per Region); with ``global_table`` on:

* the runtime's environment names the owner Region attribute
  (``SESSION_EXPIRY_OWNER_REGION_ATTRIBUTE``, ``ownerRegion``) and the stack's Region
  (``SESSION_EXPIRY_REGION``): ``SessionStore.create`` stamps the owner Region, the expiry
  sweeper Queries only its own Region's shards (``"<region>#<n>"``), and the cleanup skips any
  record of another Region's session;
* the event source mapping's filter adds the old image's owner Region
  (``{"dynamodb": {"OldImage": {"ownerRegion": {"S": ["<region>"]}}}}``, ``filters``), so the
  other Regions' records never invoke the function (Lambda Developer Guide, "Using event
  filtering with a DynamoDB event source": filters on ``dynamodb`` keys, every leaf a list).

Derived: ``global_table`` defaults to whether the table is a ``TableV2`` (or ``Table``) of this
app with replicas. A table imported with ``from_table_attributes`` (the replica in another
Region's stack) is taken on trust: say ``global_table=True``.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from . import _runtime_contract as contract
from .filters import CleanupEventFilter

#: The attribute ``SessionStore.create`` writes the owner Region to (a String).
OWNER_REGION_ATTRIBUTE = contract.DEFAULT_OWNER_REGION_ATTRIBUTE


def replica_regions(table: dynamodb.ITable | None) -> list[str] | None:
    """The Regions of a table of this app with replicas (its own Region included); ``[]`` for
    one without; ``None`` when the construct cannot tell (an imported table)."""
    if table is None:
        return []
    cfn = table.node.default_child
    if isinstance(cfn, dynamodb.CfnGlobalTable):
        replicas = Stack.of(table).resolve(cfn._cfn_properties).get("replicas") or []
        regions = [r.get("region") for r in replicas if isinstance(r, dict)]
        return [r for r in regions if isinstance(r, str)] if len(regions) > 1 else []
    if isinstance(cfn, dynamodb.CfnTable):
        # Table (v1) with replication_regions: one "Replica<region>" custom resource each.
        children = [c.node.id for c in table.node.children]
        return [c[len("Replica") :] for c in children if c.startswith("Replica")]
    return None


def settle_global_table(
    table: dynamodb.ITable | None, global_table: bool | None, event_filter: CleanupEventFilter
) -> bool:
    """Whether the construct runs in global-table mode (see the module docstring).

    Raises:
        ValueError: ``global_table=True`` with the construct's own table or a table of this app
            without replicas; a global table with ``CleanupEventFilter.TTL_DELETES_ONLY``
            (replicated TTL deletes carry no ``userIdentity`` and would be dropped for good); a
            global table whose stream ARN is the replica wildcard (``.../stream/*``).
    """
    regions = replica_regions(table)
    if global_table is None:
        global_table = bool(regions)
    if global_table and regions == []:
        where = "the construct's own table" if table is None else f"table {table.node.path}"
        raise ValueError(
            f"global_table=True: {where} has no replicas; expected a TableV2 with "
            "replicas=[ReplicaTableProps(region=...)] (or the replica of one, imported with "
            "TableV2.from_table_attributes in the replica Region's stack)"
        )
    if global_table and event_filter is CleanupEventFilter.TTL_DELETES_ONLY:
        raise ValueError(
            "event_filter=TTL_DELETES_ONLY with a global table: a TTL delete replicated into "
            "the owner Region carries no userIdentity and would be dropped for good; expected "
            "CleanupEventFilter.ALL_REMOVES"
        )
    if global_table and table is not None:
        _check_stream_arn(table)
    return global_table


def _check_stream_arn(table: dynamodb.ITable) -> None:
    arn = table.table_stream_arn
    if arn is None:
        return  # check_existing_table names the missing stream
    # A token resolves to an Fn::Join whose last literal part is the wildcard.
    if str(Stack.of(table).resolve(arn)).rstrip("]}'\" ").endswith("/stream/*"):
        raise ValueError(
            f"table {table.node.path}: stream ARN {arn!r} is a wildcard (TableV2.replica() "
            "cannot know a replica's stream); expected the replica's own stream ARN, imported "
            "with TableV2.from_table_attributes(table_name=..., table_stream_arn=...)"
        )


def environment(scope: Construct) -> dict[str, str]:
    """The runtime variables of global-table mode: the owner Region attribute and the Region
    of ``scope``'s stack (a token for an environment-agnostic stack)."""
    return {
        contract.ENV_OWNER_REGION_ATTRIBUTE: OWNER_REGION_ATTRIBUTE,
        contract.ENV_REGION: Stack.of(scope).region,
    }
