"""The deferred-work table: what a feature flag held back, written by the cleanup alone.

With ``feature_flags``, a step switched off (or every step, ``enabled`` off) is not run: its work
is written to this table before the record is reported done, and the drain (the cleanup function
every 5 minutes, ``Sessions/FeatureFlags/DrainSchedule``) does it once the flag is on again
(runtime ``session_expiry_runtime.switches.deferred`` and
``session_expiry_runtime.cleanup.levers``).

**Only the cleanup role writes it.** The drain acts on what an item holds (a stream ``REMOVE``:
the session's key, incarnation and old image), so who may write an item decides who can make the
cleanup close a connection, delete scratch objects or release claims. No function given
``grant_session_access`` gets any action on this table; an application that needs one is
adding a way to forge cleanup work. The drain also reads every record's item back from the
session table before it acts (``dynamodb:BatchGetItem``, strongly consistent) and refuses a
record whose item is still there in the same incarnation (``DeferredWorkRefused``, alarmed:
``DeferredWorkRefusedAlarm``).

The table (``<scope>/DeferredWorkTable``, pinned logical ID: renaming it replaces the table and
loses the deferred work) has:

* partition key ``resource`` (String, ``deferred#<step>#<sequence number>``), no sort key;
* a sparse global secondary index ``deferredWork`` (``deferredStep``, ``deferredAt``): the
  drain's oldest-first query per step; a refused item leaves it;
* time to live on ``expiresAt`` (Number, epoch seconds: 14 days after the deferral, or after a
  refusal), the items' backstop;
* on-demand capacity, point-in-time recovery, **no stream**;
* the session table's encryption, by the ownership table's rule: ``table_encryption_key`` for a
  new session table, the given table's customer managed key for ``table=`` (if it has one), else
  the AWS managed key;
* the construct's ``removal_policy`` (``RETAIN`` by default, and with ``table=``).

IAM of the cleanup role (Service Authorization Reference, "Actions, resources, and condition keys
for Amazon DynamoDB"): ``dynamodb:PutItem`` (defer), ``UpdateItem`` (take, give back, refuse) and
``DeleteItem`` (done) on the table, ``dynamodb:Query`` on the index only; ``dynamodb:BatchGetItem``
on the session table (the read-back); ``kms:Decrypt`` on a customer managed key of either (as for
the ownership table). Nothing else, and no other principal of the construct.

Before this version deferred work lived in the ownership table (index ``deferredWork``), which the
application's functions may write. That index is gone; drain before upgrading (docs: Operating
it, "Feature flags", "Upgrading").
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from .. import _runtime_contract as contract
from .. import table as table_unit

#: Construct id of the table, a child of ``SessionExpiry``: a public contract (renaming it
#: replaces the table and loses the deferred work).
CONSTRUCT_ID = "DeferredWorkTable"
#: What the cleanup role does with items: defer (put), take / give back / refuse (update),
#: settle (delete).
CLEANUP_TABLE_ACTIONS = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
#: What the cleanup role does on the index: the drain's oldest-first query per step.
CLEANUP_INDEX_ACTIONS = ("dynamodb:Query",)
#: What the cleanup role does on the session table for the drain: read each record back.
SESSION_TABLE_ACTIONS = ("dynamodb:BatchGetItem",)


class DeferredWorkTable:
    """The deferred-work table of one ``SessionExpiry`` (see the module docstring).

    Args:
        scope: the ``SessionExpiry``; the table is its child ``DeferredWorkTable``.
        encryption_key: the session table's customer managed key, or ``None`` for the AWS
            managed key.
        removal_policy: the construct's ``removal_policy``; ``None`` means ``RETAIN``.
    """

    def __init__(
        self,
        scope: Construct,
        *,
        encryption_key: kms.IKey | None,
        removal_policy: RemovalPolicy | None,
    ) -> None:
        #: The table.
        self.table = table_unit.internal_table(
            scope,
            CONSTRUCT_ID,
            partition_key=contract.DEFERRED_WORK_PARTITION_KEY,
            time_to_live_attribute=contract.DEFERRED_WORK_TTL_ATTRIBUTE,
            encryption_key=encryption_key,
            removal_policy=removal_policy,
        )
        # Sparse: only pending items carry its keys (a refused item drops deferredStep).
        self.table.add_global_secondary_index(
            index_name=contract.DEFERRED_INDEX,
            partition_key=dynamodb.Attribute(
                name=contract.DEFERRED_INDEX_PARTITION_KEY, type=dynamodb.AttributeType.STRING
            ),
            sort_key=dynamodb.Attribute(
                name=contract.DEFERRED_INDEX_SORT_KEY, type=dynamodb.AttributeType.NUMBER
            ),
        )

    @property
    def index_arn(self) -> str:
        """The ``deferredWork`` index's ARN (``<table ARN>/index/deferredWork``)."""
        return f"{self.table.table_arn}/index/{contract.DEFERRED_INDEX}"

    def configure_cleanup(
        self, function: lambda_.Function, session_table: dynamodb.ITable
    ) -> iam.Grant:
        """Tell the cleanup function the table (and the session table, which the drain reads
        back) and grant its role `CLEANUP_TABLE_ACTIONS` on the table,
        `CLEANUP_INDEX_ACTIONS` on the index, `SESSION_TABLE_ACTIONS` on the session
        table, and ``kms:Decrypt`` on a customer managed key of either."""
        function.add_environment(contract.ENV_DEFERRED_WORK_TABLE_NAME, self.table.table_name)
        function.add_environment(contract.ENV_TABLE_NAME, session_table.table_name)
        grant = iam.Grant.add_to_principal(
            grantee=function,
            actions=list(CLEANUP_TABLE_ACTIONS),
            resource_arns=[self.table.table_arn],
        )
        grant = grant.combine(
            iam.Grant.add_to_principal(
                grantee=function,
                actions=list(CLEANUP_INDEX_ACTIONS),
                resource_arns=[self.index_arn],
            )
        )
        grant = grant.combine(
            iam.Grant.add_to_principal(
                grantee=function,
                actions=list(SESSION_TABLE_ACTIONS),
                resource_arns=[session_table.table_arn],
            )
        )
        keys: list[kms.IKey] = []
        for key in (self.table.encryption_key, session_table.encryption_key):
            if key is not None and all(key is not k for k in keys):
                keys.append(key)
        for key in keys:
            grant = grant.combine(key.grant_decrypt(function))
        return grant


def create_deferred_work_table(
    scope: Construct,
    *,
    session_table: dynamodb.ITable,
    removal_policy: RemovalPolicy | None,
) -> DeferredWorkTable:
    """The deferred-work table on the session table's encryption key."""
    return DeferredWorkTable(
        scope, encryption_key=session_table.encryption_key, removal_policy=removal_policy
    )
