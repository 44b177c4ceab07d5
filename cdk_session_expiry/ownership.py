"""The ownership table: which session incarnation holds each connection, agent session, grant.

The cleanup acts on a WebSocket connection, an Amazon Bedrock AgentCore session or a KMS grant
only when its ownership record (a *claim*) names the REMOVE record's own key and the removed
session's incarnation (see ``docs/ownership.md`` and the runtime's
``session_expiry_runtime.core.ownership``). The claim registrar writes the claims for
``SessionStore``; the cleanup marks and releases them; the grant sweep reads them.

The table (``<scope>/OwnershipTable``) exists only when a target that needs claims is set:
``websocket_stage``, ``grant_key``, ``agent_runtime``, ``code_interpreter`` or ``browser``
(`needs_ownership_table`). It holds claims only: the work a feature flag deferred lives in
its own table, which only the cleanup role may write
(``cdk_session_expiry.switches.deferred_work``),
because the application's functions may write this one. It has:

* partition key ``resource`` (String, ``<kind>#<id>``) and no sort key;
* time to live on ``expiresAt`` (Number, epoch seconds: the owner's absolute end plus 21 days),
  the claims' backstop;
* on-demand capacity, point-in-time recovery, **no stream**: its writes and TTL deletions never
  reach the cleanup and never move the session table's TTL-health signal;
* the session table's encryption: ``table_encryption_key`` for a new session table, the given
  table's customer managed key for ``table=`` (if it has one), else the AWS managed key;
* the construct's ``removal_policy`` (``RETAIN`` by default, and with ``table=``).

IAM, on this table only (Service Authorization Reference, "Actions, resources, and condition keys
for Amazon DynamoDB"; a ``TransactWriteItems`` is authorised item by item by the action each
item performs, "Using IAM with DynamoDB transactions"):

* the cleanup role (and the grant sweep, which runs as it): ``dynamodb:UpdateItem`` (mark and
  release, inside ``TransactWriteItems``), ``dynamodb:BatchGetItem`` (dry run),
  ``dynamodb:GetItem``;
* the claim registrar (``cdk_session_expiry.claim_registrar``): ``PutItem``, ``UpdateItem``,
  ``DeleteItem``, ``GetItem`` — the one writer of claims besides the cleanup;
* no function given ``grant_session_access``: ``SessionStore`` asks the registrar
  (``lambda:InvokeFunction`` on it), because IAM cannot make a writer use a condition and a role
  allowed to write the table could rewrite any session's claim.

With a customer managed key, the cleanup role gets ``kms:Decrypt`` on it (DynamoDB decrypts
the table's key on the caller's behalf, AWS KMS Developer Guide, "How Amazon DynamoDB uses AWS
KMS"; as for its stream read and the grant sweep's ``GetItem``, and no wildcard action), and so
does the claim registrar's role.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from . import _runtime_contract as contract
from . import table as table_unit

#: Construct id of the table, a child of ``SessionExpiry``: a public contract (renaming it
#: replaces the table and loses every claim).
CONSTRUCT_ID = "OwnershipTable"
#: What the cleanup role does with claims.
CLEANUP_ACTIONS = ("dynamodb:UpdateItem", "dynamodb:BatchGetItem", "dynamodb:GetItem")
#: The props whose targets carry ownership records.
CLAIMED_TARGET_PROPS = (
    "websocket_stage",
    "grant_key",
    "agent_runtime",
    "code_interpreter",
    "browser",
    "agent_memory",
)


def needs_ownership_table(*, custom_kinds: bool = False, **targets: object) -> bool:
    """Whether any of `CLAIMED_TARGET_PROPS` is set (``targets``: prop name → value), or a
    custom step declares its own resource kind (``custom_kinds``)."""
    return custom_kinds or any(targets.get(prop) is not None for prop in CLAIMED_TARGET_PROPS)


def attribute_environment() -> dict[str, str]:
    """The session attribute the ownership rule reads on every session item (its incarnation),
    for the cleanup, the sweepers and ``SessionStore``; set whether or not the table exists."""
    return {contract.ENV_INCARNATION_ATTRIBUTE: contract.DEFAULT_INCARNATION_ATTRIBUTE}


def reserved_attributes(ids_attributes: dict[str, str]) -> dict[str, str]:
    """The session attributes whose names are fixed (no prop), labelled for the error of
    ``validation.check_session_attributes``: the incarnation, the claim token, the incarnation a
    session replaced (``previousIncarnation``), and the String Sets of AgentCore
    session ids of the targets set (``ids_attributes``: environment variable → name)."""
    reserved = {
        "the incarnation attribute": contract.DEFAULT_INCARNATION_ATTRIBUTE,
        "the claim token attribute": contract.DEFAULT_CLAIM_TOKEN_ATTRIBUTE,
        "the previous incarnation attribute": contract.DEFAULT_PREVIOUS_INCARNATION_ATTRIBUTE,
    }
    for env, name in ids_attributes.items():
        kind = env.removeprefix("SESSION_EXPIRY_").removesuffix("_ATTRIBUTE").lower()
        reserved[f"the {kind.replace('_', ' ')} attribute"] = name
    return reserved


class OwnershipTable:
    """The ownership table of one ``SessionExpiry`` (see the module docstring).

    Args:
        scope: the ``SessionExpiry``; the table is its child ``OwnershipTable``.
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
            partition_key=contract.OWNERSHIP_PARTITION_KEY,
            time_to_live_attribute=contract.OWNERSHIP_TTL_ATTRIBUTE,
            encryption_key=encryption_key,
            removal_policy=removal_policy,
        )

    def environment(self) -> dict[str, str]:
        """The table's name, for the cleanup, the grant sweep and ``SessionStore``."""
        return {contract.ENV_OWNERSHIP_TABLE_NAME: self.table.table_name}

    def grant_cleanup(self, role: iam.IGrantable) -> iam.Grant:
        """`CLEANUP_ACTIONS` on the table (and ``kms:Decrypt`` on its customer managed
        key)."""
        grant = self._grant(role, CLEANUP_ACTIONS)
        key = self.table.encryption_key
        return grant if key is None else grant.combine(key.grant_decrypt(role))

    def _grant(self, grantee: iam.IGrantable, actions: tuple[str, ...]) -> iam.Grant:
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=list(actions), resource_arns=[self.table.table_arn]
        )


def create_ownership_table(
    scope: Construct,
    *,
    session_table: dynamodb.ITable,
    removal_policy: RemovalPolicy | None,
    custom_kinds: bool = False,
    **targets: object,
) -> OwnershipTable | None:
    """The ownership table when one of ``targets`` (`CLAIMED_TARGET_PROPS`) is set or a
    custom step declares a resource kind, on the session table's encryption key; else ``None``."""
    if not needs_ownership_table(custom_kinds=custom_kinds, **targets):
        return None
    return OwnershipTable(
        scope, encryption_key=session_table.encryption_key, removal_policy=removal_policy
    )
