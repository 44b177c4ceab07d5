"""Props that close checkov's findings on the construct's functions and log groups.

* ``function_encryption_key``: a customer managed KMS key that encrypts the environment
  variables of the cleanup, sweeper, grant sweep, pause watch and circuit breaker functions
  (``KmsKeyArn``; their roles get ``kms:Decrypt`` on it) and their log groups (``KmsKeyId``).
  CloudWatch Logs uses the key only if the key policy lets the service principal
  ``logs.<region>.amazonaws.com`` use it for this account's log groups (Amazon CloudWatch Logs
  User Guide, "Encrypt log data in CloudWatch Logs using AWS KMS"); for a ``kms.Key`` of this
  app the statement is added, for an imported key a synth warning says to add it. Closes
  ``CKV_AWS_173`` and ``CKV_AWS_158``.
* ``cleanup_reserved_concurrency``: reserved concurrency of the cleanup function. The event
  source mapping runs at most one invocation per shard and ``parallelization_factor``; a value
  below that throttles the cleanup (the iterator age alarm shows it). Closes ``CKV_AWS_115``.
* ``expiry_sweep_reserved_concurrency``: reserved concurrency of the sweeper (one per worker is
  enough: each worker runs once per interval). The sub-minute sweeper always reserves one per
  worker. Closes ``CKV_AWS_115``.

The values are set on the functions' and log groups' CloudFormation resources once the
construct built them, so the units that create the functions need not know about them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Annotations, ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs

from . import validation

if TYPE_CHECKING:
    from .construct import SessionExpiry
    from .sweeper import ExpirySweeper

#: Reserved concurrency is at most the account's concurrency limit (1,000 by default, raised on
#: request); a larger value would be refused at deploy time by most accounts, so it is refused
#: here only beyond Lambda's documented hard ceiling of the API.
MAX_RESERVED_CONCURRENCY = 100_000
WARNING_IMPORTED_KEY = "cdk-session-expiry:functionEncryptionKeyPolicy"


def check_hardening_props(
    *,
    cleanup_reserved_concurrency: int | None,
    expiry_sweep_reserved_concurrency: int | None,
    sweeper_on: bool,
) -> None:
    """Reject reserved concurrency below 1 (0 would stop the function: use ``cleanup_enabled``)
    and a sweeper concurrency without the sweeper.

    Raises:
        ValueError: the message names the prop, the value and what is expected.
    """
    for name, value in (
        ("cleanup_reserved_concurrency", cleanup_reserved_concurrency),
        ("expiry_sweep_reserved_concurrency", expiry_sweep_reserved_concurrency),
    ):
        if value is not None:
            validation.check_int_range(name, value, minimum=1, maximum=MAX_RESERVED_CONCURRENCY)
    if expiry_sweep_reserved_concurrency is not None and not sweeper_on:
        raise ValueError(
            f"expiry_sweep_reserved_concurrency={expiry_sweep_reserved_concurrency} is set "
            "without expiry_sweep_interval: expected an expiry_sweep_interval, or no "
            "expiry_sweep_reserved_concurrency"
        )


def apply(
    sessions: SessionExpiry,
    *,
    function_encryption_key: kms.IKey | None,
    cleanup_reserved_concurrency: int | None,
    expiry_sweep_reserved_concurrency: int | None,
) -> None:
    """Set the props above on the construct's functions and log groups."""
    functions = [(sessions.cleanup_function, cleanup_reserved_concurrency)]
    sweeper = sessions.expiry_sweeper
    if sweeper is not None:
        _check_sweeper_concurrency(sweeper, expiry_sweep_reserved_concurrency)
        functions.append((sweeper.function, expiry_sweep_reserved_concurrency))
    grant_sweep = sessions.grant_sweep
    if grant_sweep is not None:
        functions.append((grant_sweep.function, None))
    if sessions.tool_session_sweep is not None:
        functions.append((sessions.tool_session_sweep.function, None))
    functions.append((sessions.pause_watch.function, None))
    if sessions.claim_registrar is not None:
        functions.append((sessions.claim_registrar.function, None))
    if sessions.circuit_breaker is not None:
        functions.append((sessions.circuit_breaker.function, None))  # reserves 1 itself
    for function, concurrency in functions:
        resource = function.node.default_child
        assert isinstance(resource, lambda_.CfnFunction)
        if concurrency is not None:
            resource.reserved_concurrent_executions = concurrency
        if function_encryption_key is not None:
            resource.kms_key_arn = function_encryption_key.key_arn
            if function.role is not None:
                function_encryption_key.grant_decrypt(function.role)
            _encrypt_log_group(function.log_group, function_encryption_key)
    delivery = sessions.archive_delivery_stream
    if function_encryption_key is not None and delivery is not None:
        _encrypt_log_group(delivery.log_group, function_encryption_key)
    if function_encryption_key is not None:
        _allow_cloudwatch_logs(sessions, function_encryption_key)


def _check_sweeper_concurrency(sweeper: ExpirySweeper, concurrency: int | None) -> None:
    """Below a minute exactly one per worker; otherwise at least one per worker.

    Raises:
        ValueError: the message names the value and what is expected.
    """
    if concurrency is None or validation.is_token(concurrency):
        return
    if sweeper.sub_minute and concurrency != sweeper.workers:
        raise ValueError(
            f"expiry_sweep_reserved_concurrency={concurrency} with a sub-minute "
            f"expiry_sweep_interval and expiry_sweep_workers={sweeper.workers}: expected "
            f"{sweeper.workers}, one per worker, or no expiry_sweep_reserved_concurrency"
        )
    if concurrency < sweeper.workers:
        raise ValueError(
            f"expiry_sweep_reserved_concurrency={concurrency} with "
            f"expiry_sweep_workers={sweeper.workers}: expected at least {sweeper.workers}, "
            "one per worker (fewer would throttle the workers' runs), or none reserved"
        )


def _encrypt_log_group(log_group: logs.ILogGroup, key: kms.IKey) -> None:
    resource = log_group.node.default_child
    if isinstance(resource, logs.CfnLogGroup):
        resource.kms_key_id = key.key_arn


def _allow_cloudwatch_logs(sessions: SessionExpiry, key: kms.IKey) -> None:
    stack = Stack.of(sessions)
    statement = iam.PolicyStatement(
        sid="CloudWatchLogsOfSessionExpiry",
        principals=[iam.ServicePrincipal(f"logs.{stack.region}.{stack.url_suffix}")],
        actions=[
            "kms:Encrypt*",
            "kms:Decrypt*",
            "kms:ReEncrypt*",
            "kms:GenerateDataKey*",
            "kms:Describe*",
        ],
        resources=["*"],
        conditions={
            "ArnLike": {
                "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                    service="logs",
                    resource="log-group",
                    resource_name="*",
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                )
            }
        },
    )
    if not key.add_to_resource_policy(statement).statement_added:
        Annotations.of(sessions).add_warning_v2(
            WARNING_IMPORTED_KEY,
            f"function_encryption_key {key.node.path} is imported: its key policy must let "
            f"logs.{stack.region}.amazonaws.com use it (kms:Encrypt*, kms:Decrypt*, "
            "kms:ReEncrypt*, kms:GenerateDataKey*, kms:Describe* with condition "
            "kms:EncryptionContext:aws:logs:arn on this account's log groups), or creating the "
            "construct's log groups fails.",
        )
