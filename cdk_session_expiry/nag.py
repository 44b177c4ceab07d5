"""The cdk-nag findings ``SessionExpiry``'s design accepts, acknowledged where they arise.

An application that registers cdk-nag's ``AwsSolutionsChecks`` (v3:
``Validations.of(app).add_plugins(AwsSolutionsChecks(app))``) sees no finding on the
construct's own resources: each one its design accepts is acknowledged here, with its reason,
on the narrowest construct that holds it (a role's default policy, the failure queue), and only
when the prop that causes it is set. The acknowledgements use aws-cdk-lib's own
``Validations.of(construct).acknowledge(Acknowledgment(...))``, which cdk-nag v3 reads; this
library does not depend on cdk-nag at run time.

On the cleanup role's default policy (``AwsSolutions-IAM5``, a wildcard resource):

* ``Resource::*``, always: ``dynamodb:ListStreams`` has no resource-level scope;
* the stage's ``…/DELETE/@connections/*``, with ``websocket_stage``;
* ``<bucket>/<scratch_root>*``, with ``scratch_bucket`` (``s3:DeleteObject``);
* ``<bucket>/<archive_prefix>*``, with ``archive_bucket`` (``s3:PutObject``);
* ``<bucket>/*``, with ``failure_destination_bucket`` (``s3:PutObject``);
* ``…:application/<app>/environment/*/configuration/<profile>``, with ``feature_flags``
  (``appconfig:StartConfigurationSession``, ``appconfig:GetLatestConfiguration``);
* ``arn:…:bedrock:<region>:<account>:session/*``, with ``resource_targets={"bedrock_sessions":
  "*"}`` (``bedrock:EndSession``, ``bedrock:DeleteSession``).

On the archive's Firehose stream role (``archive_delivery=ArchiveDelivery.FIREHOSE``,
``AwsSolutions-IAM5``): ``<bucket>/<archive_prefix>*`` and
``<bucket>/<archive prefix>-delivery-errors/*`` (``s3:PutObject``, ``s3:AbortMultipartUpload``):
Firehose names its objects.

On the ``FailureQueue`` the construct creates: ``AwsSolutions-SQS3`` (no DLQ: it is the DLQ).

On the expiry sweeper's role and on each role given ``grant_session_access``, when the table
has a customer managed key (the ownership table uses the same key):
``AwsSolutions-IAM5[Action::kms:GenerateDataKey*]`` and ``[Action::kms:ReEncrypt*]``, granted on
that key alone.

The ownership table and the deferred-work table raise no finding (point-in-time recovery is on,
``AwsSolutions-DDB3``), and their grants name the table (and, for the deferred-work table, its
one index) alone (the cleanup role gets ``kms:Decrypt`` only on their key).

A finding's id names the wildcard resource as cdk-nag flattens it (``<LogicalId.Arn>``,
``<AWS::Partition>``), so ids are computed from the same resolved values cdk-nag reads. A
resource referenced from another stack reaches the policy as ``Fn::ImportValue`` only at
synthesis; its finding then names the export and is left to the application.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import IConstruct

if TYPE_CHECKING:
    from .construct import SessionExpiry

IAM5 = "AwsSolutions-IAM5"
SQS3 = "AwsSolutions-SQS3"
#: The actions ``IKey.grant_encrypt_decrypt`` grants with a wildcard (aws-cdk-lib's
#: ``kms.Key`` ``grantEncryptDecrypt``): what DynamoDB needs of a table's customer managed key.
KEY_WILDCARD_ACTIONS = ("kms:GenerateDataKey*", "kms:ReEncrypt*")

_FLAGS_REASON = (
    "The cleanup reads its feature flags from this one configuration profile of its own AppConfig "
    "application (which has one environment); the environment is matched by '*' because naming "
    "its id would make the function depend on the environment whose monitor watches the "
    "function's errors alarm (a cycle)."
)
_LIST_STREAMS_REASON = (
    "dynamodb:ListStreams has no resource-level scope (Service Authorization Reference); the "
    "stream read actions are scoped to the session table's stream."
)
_FAILURE_QUEUE_REASON = (
    "This queue is the on-failure destination of the cleanup's event source mapping: the dead "
    "end for failed batches, watched by an alarm. A DLQ behind it would only move the same "
    "metadata again."
)
_CONNECTIONS_REASON = (
    "The cleanup deletes connections of ended sessions on this stage only (DELETE method); "
    "connection ids are not known in advance."
)
_APP_CONNECTIONS_REASON = (
    "SessionStore.attach_connection closes a session's earlier connections on this stage only "
    "(DELETE method); connection ids are not known in advance."
)
_SCRATCH_REASON = (
    "The cleanup deletes the objects of an ended session under the scratch root, and only "
    "there; session prefixes are not known in advance (s3:DeleteObject only)."
)
_ARCHIVE_REASON = (
    "The cleanup writes one object per cleaned session under the archive prefix (s3:PutObject "
    "only); its key holds the session and the record's sequence number, not known in advance."
)
_FIREHOSE_REASON = (
    "The archive's Firehose stream writes objects of many sessions under the archive prefix and "
    "records it cannot partition under the delivery-errors prefix, with names Firehose chooses "
    "(s3:PutObject and s3:AbortMultipartUpload, on those two prefixes only)."
)
_FIREHOSE_ACTIONS = frozenset({"s3:PutObject", "s3:AbortMultipartUpload"})
_FAILURE_BUCKET_REASON = (
    "Lambda writes each failed batch to the on-failure destination bucket under a key it "
    "chooses (aws/lambda/<mapping UUID>/<shard>/<date>/...); s3:PutObject only."
)
_BEDROCK_SESSIONS_REASON = (
    "resource_targets['bedrock_sessions']: the cleanup ends and deletes the Bedrock sessions that "
    "ended agent sessions recorded, in this account and Region only (bedrock:EndSession and "
    "bedrock:DeleteSession on session/*); their ids are not known in advance, and each is "
    "checked against its ownership record before the call."
)
_TABLE_KEY_REASON = (
    "grant_encrypt_decrypt on the session table's customer managed key (which also encrypts the "
    "ownership table), and on that key only: DynamoDB uses it for every read and write of the "
    "tables."
)


@dataclass(frozen=True)
class NagAcknowledgement:
    """One cdk-nag finding acknowledged by the construct.

    Attributes:
        path: construct path of the construct the acknowledgement is on (its resources and
            their children are covered).
        finding_id: the finding, e.g. ``"AwsSolutions-SQS3"`` or
            ``"AwsSolutions-IAM5[Resource::*]"``.
        reason: why the design accepts it.
    """

    path: str
    finding_id: str
    reason: str


def flatten_reference(value: Any) -> str:
    """A resolved CloudFormation value flattened as cdk-nag names it in a finding id.

    A port of cdk-nag's ``flattenCfnReference`` (``src/utils/flatten-cfn-reference.ts``):
    ``Fn::Join`` joins, ``Fn::GetAtt`` becomes ``<Logical.Attribute>``, ``Ref`` becomes
    ``<Logical>``, ``${...}`` becomes ``<...>``; anything else is its JSON.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value.replace("${", "<").replace("}", ">")
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Fn::Join":
            delimiter, items = arg
            return str(delimiter).join(flatten_reference(item) for item in items)
        if key in ("Fn::Sub", "Fn::ImportValue"):
            return flatten_reference(arg)
        if key == "Fn::GetAtt":
            resource, attribute = arg
            return f"<{flatten_reference(resource)}.{flatten_reference(attribute)}>"
        if key == "Ref":
            return f"<{flatten_reference(arg)}>"
    return json.dumps(value, separators=(",", ":"))


def _default_policy(role: iam.IRole | None) -> IConstruct | None:
    """A role's default policy (where ``add_to_principal_policy`` statements go), if any."""
    if role is None:
        return None
    return role.node.try_find_child("DefaultPolicy")


def _statements(policy: IConstruct) -> list[dict[str, Any]]:
    """The resolved Allow statements of a policy (as cdk-nag reads them)."""
    document = Stack.of(policy).resolve(policy.document)  # type: ignore[attr-defined]
    return [s for s in document.get("Statement", []) if s.get("Effect") == "Allow"]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def acknowledge(
    acknowledgements: list[NagAcknowledgement],
    construct: IConstruct,
    finding_id: str,
    reason: str,
) -> None:
    """Acknowledge one finding on ``construct`` and record it in ``acknowledgements``."""
    Validations.of(construct).acknowledge(Acknowledgment(id=finding_id, reason=reason))
    acknowledgements.append(NagAcknowledgement(construct.node.path, finding_id, reason))


def acknowledge_design_findings(sessions: SessionExpiry) -> list[NagAcknowledgement]:
    """Acknowledge the findings on the construct's own resources (see the module docstring).

    Called once, at the end of ``SessionExpiry.__init__``, when every statement is in place:
    statements added to the construct's roles later are the application's and stay flagged.
    Returns what was acknowledged (``SessionExpiry.nag_acknowledgements``).
    """
    done: list[NagAcknowledgement] = []
    policy = _default_policy(sessions.cleanup_role)
    if policy is not None:
        failure_objects = None
        if sessions.failure_destination_bucket is not None:
            bucket = sessions.failure_destination_bucket
            failure_objects = _flat(policy, bucket.arn_for_objects("*"))
        for resource, reason in _wildcard_resources(policy, failure_objects).items():
            acknowledge(done, policy, f"{IAM5}[Resource::{resource}]", reason)
    queue = sessions.failure_queue
    if queue is not None and queue.node.path.startswith(sessions.node.path + "/"):
        acknowledge(done, queue, SQS3, _FAILURE_QUEUE_REASON)
    if sessions.expiry_sweeper is not None:
        done.extend(acknowledge_table_key_grant(sessions, sessions.expiry_sweeper.role))
    if sessions.archive_delivery_stream is not None:
        done.extend(_acknowledge_firehose_role(sessions.archive_delivery_stream.role))
    return done


def _acknowledge_firehose_role(role: iam.IRole) -> list[NagAcknowledgement]:
    """The Firehose role's object wildcards, for statements of its object actions only."""
    done: list[NagAcknowledgement] = []
    policy = _default_policy(role)
    if policy is None:
        return done
    for statement in _statements(policy):
        if not set(_as_list(statement.get("Action"))) <= _FIREHOSE_ACTIONS:
            continue
        for resource in (flatten_reference(r) for r in _as_list(statement.get("Resource"))):
            if "*" in resource:
                acknowledge(done, policy, f"{IAM5}[Resource::{resource}]", _FIREHOSE_REASON)
    return done


def _flat(scope: IConstruct, value: str) -> str:
    return flatten_reference(Stack.of(scope).resolve(value))


def _wildcard_resources(policy: IConstruct, failure_objects: str | None) -> dict[str, str]:
    """Wildcard resources of the cleanup role's statements whose actions all have a reason
    here, each with its reason; any other wildcard is left for cdk-nag to report."""
    found: dict[str, str] = {}
    for statement in _statements(policy):
        actions = _as_list(statement.get("Action"))
        for resource in (flatten_reference(r) for r in _as_list(statement.get("Resource"))):
            if "*" not in resource:
                continue
            reasons = [_resource_reason(action, resource, failure_objects) for action in actions]
            if all(reasons):
                found[resource] = " ".join(dict.fromkeys(r for r in reasons if r))
    return found


def _resource_reason(action: str, resource: str, failure_objects: str | None) -> str | None:
    if action == "s3:PutObject":
        return _FAILURE_BUCKET_REASON if resource == failure_objects else _ARCHIVE_REASON
    return _REASON_BY_ACTION.get(action)


def acknowledge_table_key_grant(
    sessions: SessionExpiry, role: iam.IRole | None
) -> list[NagAcknowledgement]:
    """Acknowledge the wildcard KMS actions (``kms:GenerateDataKey*``, ``kms:ReEncrypt*``)
    that ``grant_encrypt_decrypt`` on the table's customer managed key put in ``role``'s
    default policy, where a statement grants them on that key alone. Nothing without such a
    key, or for a role without a default policy (e.g. imported)."""
    done: list[NagAcknowledgement] = []
    policy = _default_policy(role)
    key = sessions.table.encryption_key
    if key is None or policy is None:
        return done
    key_arn = Stack.of(policy).resolve(key.key_arn)
    actions: set[str] = set()
    for statement in _statements(policy):
        if _as_list(statement.get("Resource")) == [key_arn]:
            actions.update(a for a in _as_list(statement.get("Action")) if "*" in a)
    for action in sorted(actions & set(KEY_WILDCARD_ACTIONS)):
        acknowledge(done, policy, f"{IAM5}[Action::{action}]", _TABLE_KEY_REASON)
    return done


def acknowledge_session_access(
    sessions: SessionExpiry, function: lambda_.IFunction
) -> list[NagAcknowledgement]:
    """Acknowledge what ``grant_session_access`` adds to ``function``'s role that cdk-nag flags:
    the wildcard KMS actions on the table's customer managed key, if the table has one, and
    the stage's ``…/DELETE/@connections/*``, with ``websocket_stage``."""
    done = acknowledge_table_key_grant(sessions, function.role)
    policy = _default_policy(function.role)
    if policy is None:
        return done
    for statement in _statements(policy):
        if _as_list(statement.get("Action")) != ["execute-api:ManageConnections"]:
            continue
        for resource in (flatten_reference(r) for r in _as_list(statement.get("Resource"))):
            if resource.endswith("/DELETE/@connections/*"):
                acknowledge(done, policy, f"{IAM5}[Resource::{resource}]", _APP_CONNECTIONS_REASON)
    return done


_REASON_BY_ACTION = {
    "dynamodb:ListStreams": _LIST_STREAMS_REASON,
    "execute-api:ManageConnections": _CONNECTIONS_REASON,
    "s3:DeleteObject": _SCRATCH_REASON,
    "appconfig:StartConfigurationSession": _FLAGS_REASON,
    "appconfig:GetLatestConfiguration": _FLAGS_REASON,
    "bedrock:EndSession": _BEDROCK_SESSIONS_REASON,
    "bedrock:DeleteSession": _BEDROCK_SESSIONS_REASON,
}
