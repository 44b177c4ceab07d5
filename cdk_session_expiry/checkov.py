"""checkov's findings on ``SessionExpiry``'s resources, each closed by a prop or explained.

Teams run checkov (``checkov -f template.json``, framework ``cloudformation``) on synthesized
templates as often as cdk-nag. checkov reads a resource's ``Metadata.checkov.skip`` list
(``{"id": ..., "comment": ...}``) and reports such a check as skipped, with the comment, instead
of failed. The construct writes that list on its own resources for each check its design
accepts, and for each check a prop closes while that prop is unset (the comment names the prop):

* ``CKV_AWS_117`` (function not in a VPC), every function (cleanup, sweeper, grant sweep, pause
  watch, circuit breaker, claim registrar): they call only AWS APIs (DynamoDB Streams, API
  Gateway, KMS, S3, EventBridge, Lambda, CloudWatch, SSM); a VPC would add NAT or endpoints and
  nothing to isolate.
* ``CKV_AWS_116`` (no dead-letter queue for asynchronous invocations): the cleanup is invoked
  synchronously by its event source mapping, whose on-failure destination holds what fails; the
  sweepers' and the pause watch's asynchronous retries are off because their next scheduled run
  is the retry; the circuit breaker's alarm events are retried by Lambda and its schedule
  re-reads its stored state; the claim registrar is invoked synchronously by ``SessionStore``.
* ``CKV_AWS_27`` (queue not encrypted), the on-failure queue the construct creates: it has
  SQS-managed server-side encryption (``SqsManagedSseEnabled``), which checkov does not read.
* ``CKV_AWS_119`` (table not on a customer managed key), a table the construct creates (the
  session table, the ownership table, the deferred-work table) without
  ``table_encryption_key`` (or, for the ownership and deferred-work tables with ``table=``, a
  given table without one): AWS managed encryption; the prop closes it.
* ``CKV_AWS_158`` (log group not encrypted with KMS) and ``CKV_AWS_173`` (environment not
  encrypted with a customer managed key) without ``function_encryption_key``; the prop closes
  both.
* ``CKV_AWS_115`` (no reserved concurrency) without ``cleanup_reserved_concurrency`` /
  ``expiry_sweep_reserved_concurrency`` (the sub-minute sweeper always reserves 1); the grant
  sweep runs once per ``grant_sweep_interval``, the pause watch once every 5 minutes; the circuit
  breaker always reserves 1; the claim registrar serves the application's writes (a reserve would
  cap them).

Anything else checkov reports on the construct's resources is not explained here and fails
this project's checkov test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_cdk import CfnResource
from constructs import IConstruct

if TYPE_CHECKING:
    from .construct import SessionExpiry

CHECKOV = "checkov"

VPC = (
    "CKV_AWS_117",
    "Calls only AWS APIs (DynamoDB Streams, API Gateway, KMS, S3, EventBridge) and holds no "
    "network resource: a VPC would add NAT gateways or endpoints and isolate nothing.",
)
CLEANUP_DLQ = (
    "CKV_AWS_116",
    "Invoked synchronously by its event source mapping, never asynchronously: failed batches go "
    "to the mapping's on-failure destination, watched by an alarm.",
)
SWEEPER_DLQ = (
    "CKV_AWS_116",
    "Scheduled: asynchronous retries are off because the next run is the retry; a failed run "
    "raises the function's errors alarm.",
)
QUEUE_ENCRYPTION = (
    "CKV_AWS_27",
    "Encrypted with SQS-managed server-side encryption (SqsManagedSseEnabled: true), which this "
    "check does not read; it holds batch metadata only (shard, sequence numbers).",
)
TABLE_KEY = (
    "CKV_AWS_119",
    "Encrypted with the AWS managed key aws/dynamodb by default; set table_encryption_key for a "
    "customer managed key.",
)
LOG_GROUP_KEY = (
    "CKV_AWS_158",
    "CloudWatch Logs encrypts log data by default; set function_encryption_key to encrypt it "
    "with a customer managed key.",
)
ENVIRONMENT_KEY = (
    "CKV_AWS_173",
    "Lambda encrypts environment variables with an AWS managed key by default (they hold "
    "resource names, no secrets); set function_encryption_key for a customer managed key.",
)
CLEANUP_CONCURRENCY = (
    "CKV_AWS_115",
    "Concurrency is bounded by the event source mapping: at most one invocation per stream "
    "shard and parallelization factor; set cleanup_reserved_concurrency to reserve it.",
)
SWEEPER_CONCURRENCY = (
    "CKV_AWS_115",
    "Runs once per interval with a timeout no longer than the interval; set "
    "expiry_sweep_reserved_concurrency to reserve its concurrency.",
)
GRANT_SWEEP_CONCURRENCY = (
    "CKV_AWS_115",
    "The grant sweep runs once per grant_sweep_interval (hourly by default), one invocation at a "
    "time in practice; reserving concurrency would take it from the account's pool.",
)
TOOL_SESSION_SWEEP_CONCURRENCY = (
    "CKV_AWS_115",
    "The tool-session sweep runs once per tool_session_sweep_interval (hourly by default), one "
    "invocation at a time in practice; reserving concurrency would take it from the account's "
    "pool.",
)
PAUSE_WATCH_CONCURRENCY = (
    "CKV_AWS_115",
    "The pause watch runs once every 5 minutes for well under a second; reserving concurrency "
    "would take it from the account's pool.",
)
REGISTRAR_DLQ = (
    "CKV_AWS_116",
    "Invoked synchronously (RequestResponse) by SessionStore: the caller gets every error and "
    "nothing is retried asynchronously, so a dead-letter queue would never receive anything.",
)
REGISTRAR_CONCURRENCY = (
    "CKV_AWS_115",
    "Called by the application's functions on each write that records an id; reserving "
    "concurrency would cap the application's own throughput. Its errors alarm watches it.",
)
BREAKER_DLQ = (
    "CKV_AWS_116",
    "Invoked by EventBridge: a failed alarm event is retried by Lambda's asynchronous retries, "
    "the 5-minute schedule re-reads the breaker's stored state, and the breaker's errors alarm "
    "fires; a dead-letter queue would hold an alarm event nobody replays.",
)


def cfn_resource(construct: IConstruct) -> CfnResource:
    """The CloudFormation resource of an L2 construct (or the construct itself)."""
    if isinstance(construct, CfnResource):
        return construct
    child = construct.node.default_child
    if not isinstance(child, CfnResource):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource")
    return child


def skip(construct: IConstruct, check: tuple[str, str]) -> None:
    """Add checkov's skip metadata for ``check`` (id, comment) on ``construct``'s resource,
    keeping the skips already there (a check listed twice keeps the newest comment)."""
    check_id, comment = check
    resource = cfn_resource(construct)
    existing: Any = resource.get_metadata(CHECKOV) or {}
    skips = [s for s in existing.get("skip", []) if s.get("id") != check_id]
    resource.add_metadata(
        CHECKOV, {**existing, "skip": [*skips, {"id": check_id, "comment": comment}]}
    )


def skipped(construct: IConstruct) -> dict[str, str]:
    """The checks skipped on ``construct``'s resource: id → comment."""
    existing: Any = cfn_resource(construct).get_metadata(CHECKOV) or {}
    return {s["id"]: s["comment"] for s in existing.get("skip", [])}


def explain_findings(sessions: SessionExpiry) -> None:
    """Write the skips of the module docstring on the construct's resources, from what each
    resource ended up with (a key, a reserved concurrency), so a prop that closes a check
    leaves no skip behind. Called once, at the end of ``SessionExpiry.__init__``."""
    functions = [(sessions.cleanup_function, CLEANUP_DLQ, CLEANUP_CONCURRENCY)]
    if sessions.expiry_sweeper is not None:
        functions.append((sessions.expiry_sweeper.function, SWEEPER_DLQ, SWEEPER_CONCURRENCY))
    grant_sweep = sessions.grant_sweep
    if grant_sweep is not None:
        functions.append((grant_sweep.function, SWEEPER_DLQ, GRANT_SWEEP_CONCURRENCY))
    if sessions.tool_session_sweep is not None:
        functions.append(
            (sessions.tool_session_sweep.function, SWEEPER_DLQ, TOOL_SESSION_SWEEP_CONCURRENCY)
        )
    functions.append((sessions.pause_watch.function, SWEEPER_DLQ, PAUSE_WATCH_CONCURRENCY))
    if sessions.claim_registrar is not None:
        functions.append((sessions.claim_registrar.function, REGISTRAR_DLQ, REGISTRAR_CONCURRENCY))
    if sessions.circuit_breaker is not None:  # reserved concurrency 1: CKV_AWS_115 closed
        functions.append((sessions.circuit_breaker.function, BREAKER_DLQ, CLEANUP_CONCURRENCY))
    for function, dead_letter, concurrency in functions:
        resource = cfn_resource(function)
        skip(function, VPC)
        skip(function, dead_letter)
        if resource.kms_key_arn is None:  # type: ignore[attr-defined]
            skip(function, ENVIRONMENT_KEY)
        if resource.reserved_concurrent_executions is None:  # type: ignore[attr-defined]
            skip(function, concurrency)
        log_group = function.log_group
        if _owned(sessions, log_group) and cfn_resource(log_group).kms_key_id is None:  # type: ignore[attr-defined]
            skip(log_group, LOG_GROUP_KEY)
    delivery = sessions.archive_delivery_stream  # its delivery error log group
    if delivery is not None and cfn_resource(delivery.log_group).kms_key_id is None:  # type: ignore[attr-defined]
        skip(delivery.log_group, LOG_GROUP_KEY)
    queue = sessions.failure_queue
    if queue is not None and _owned(sessions, queue):
        skip(queue, QUEUE_ENCRYPTION)
    for table in (sessions.table, sessions.ownership_table, sessions.deferred_work_table):
        if table is not None and _owned(sessions, table) and table.encryption_key is None:
            skip(table, TABLE_KEY)


def _owned(sessions: SessionExpiry, construct: IConstruct) -> bool:
    """Whether ``construct`` is one of the construct's own resources (not the application's)."""
    return construct.node.path.startswith(sessions.node.path + "/")
