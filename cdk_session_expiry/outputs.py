"""Stack outputs an operator needs: every name, URL and id the runbooks of ``docs/operating.md``
ask for, readable with ``aws cloudformation describe-stacks`` during an incident.

Each output is a ``CfnOutput`` child of the ``SessionExpiry`` construct, as the kill switch's
``CleanupEventSourceMappingId`` (``kill_switch.mapping_id_output``) has always been: its construct
id below is a public contract, and CloudFormation's output key is the logical id derived from it,
``<construct path without slashes><construct id><8 hexadecimal characters>`` (e.g.
``SessionsCleanupFunctionNameXXXXXXXX`` for ``SessionExpiry(stack, "Sessions")``): stable while
the construct's path is. ``tests/infra/test_outputs.py`` pins the ids, their values and that
every placeholder of the runbooks names one of them (Operating it, "Filling in the commands").

An output exists only when its resource does (a failure queue, an ownership table, feature
flags, a dashboard, ...). CloudFormation allows 200 outputs a template (AWS CloudFormation User
Guide, "CloudFormation quotas"): a ``SessionExpiry`` adds 6 with no optional prop, at most 18
(every optional resource and a dashboard).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Aws, CfnOutput, Fn
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_s3 as s3

if TYPE_CHECKING:
    from .construct import SessionExpiry

#: Construct ids of the outputs (each a child of the ``SessionExpiry``), with the placeholder
#: the runbooks of ``docs/operating.md`` give it.
CLEANUP_FUNCTION_NAME = "CleanupFunctionName"  # CLEANUP_FN
TABLE_NAME = "TableName"  # TABLE
FAILURE_QUEUE_URL = "FailureQueueUrl"  # URL
FAILURE_DESTINATION_BUCKET_NAME = "FailureDestinationBucketName"  # BUCKET
OWNERSHIP_TABLE_NAME = "OwnershipTableName"  # OWNERSHIP_TABLE
PAUSE_WATCH_FUNCTION_NAME = "PauseWatchFunctionName"  # PAUSE_WATCH_FN
PAUSE_WATCH_RULE_NAME = "PauseWatchRuleName"  # PAUSE_WATCH_RULE
EXPIRY_SWEEPER_FUNCTION_NAME = "ExpirySweeperFunctionName"  # SWEEPER_FN
GRANT_SWEEP_FUNCTION_NAME = "GrantSweepFunctionName"  # GRANT_SWEEP_FN
GRANT_KEY_ARN = "GrantKeyArn"  # GRANT_KEY
TOOL_SESSION_SWEEP_FUNCTION_NAME = "ToolSessionSweepFunctionName"  # TOOL_SWEEP_FN
CIRCUIT_BREAKER_FUNCTION_NAME = "CircuitBreakerFunctionName"  # BREAKER_FN
CIRCUIT_BREAKER_STATE_PARAMETER_NAME = "CircuitBreakerStateParameterName"  # PARAMETER
CHANGE_STREAM_NAME = "ChangeStreamName"  # STREAM
ARCHIVE_BUCKET_NAME = "ArchiveBucketName"  # ARCHIVE_BUCKET
ARCHIVE_DELIVERY_LOG_GROUP_NAME = "ArchiveDeliveryLogGroupName"  # LOG_GROUP_OF_STREAM
CLAIM_REGISTRAR_FUNCTION_NAME = "ClaimRegistrarFunctionName"  # REGISTRAR_FN
DEFERRED_WORK_TABLE_NAME = "DeferredWorkTableName"  # DEFERRED_WORK_TABLE
FEATURE_FLAGS_APPLICATION_ID = "FeatureFlagsApplicationId"  # APPLICATION
FEATURE_FLAGS_ENVIRONMENT_ID = "FeatureFlagsEnvironmentId"  # ENVIRONMENT
FEATURE_FLAGS_PROFILE_ID = "FeatureFlagsProfileId"  # PROFILE
#: Suffix of a dashboard's URL output: ``<dashboard construct id>Url``, ``DashboardUrl`` for
#: ``add_dashboard()``'s default id.
DASHBOARD_URL_SUFFIX = "Url"


def _output(sessions: SessionExpiry, construct_id: str, value: str, description: str) -> None:
    sessions.outputs[construct_id] = CfnOutput(
        sessions, construct_id, value=value, description=description
    )


def add_operator_outputs(sessions: SessionExpiry, *, archive_bucket: s3.IBucket | None) -> None:
    """The outputs of every resource ``sessions`` has (see the module docstring), into
    ``sessions.outputs`` by construct id; ``archive_bucket`` is the prop of that name."""
    _output(
        sessions,
        CLEANUP_FUNCTION_NAME,
        sessions.cleanup_function.function_name,
        "Session cleanup function (CLEANUP_FN in docs/operating.md): python -m "
        "session_expiry_runtime.kill_switch status|disable|enable --function <this value>.",
    )
    _output(
        sessions,
        TABLE_NAME,
        sessions.table.table_name,
        "Session table (TABLE): aws dynamodb describe-time-to-live --table-name <this value>.",
    )
    if sessions.failure_queue is not None:
        _output(
            sessions,
            FAILURE_QUEUE_URL,
            sessions.failure_queue.queue_url,
            "On-failure queue of the session cleanup (URL): python -m "
            "session_expiry_runtime.replay --queue-url <this value> --dry-run.",
        )
    if sessions.failure_destination_bucket is not None:
        _output(
            sessions,
            FAILURE_DESTINATION_BUCKET_NAME,
            sessions.failure_destination_bucket.bucket_name,
            "On-failure bucket of the session cleanup (BUCKET): python -m "
            "session_expiry_runtime.replay --bucket <this value> --key KEY --dry-run.",
        )
    if sessions.ownership_table is not None:
        _output(
            sessions,
            OWNERSHIP_TABLE_NAME,
            sessions.ownership_table.table_name,
            "Ownership table of the session cleanup (OWNERSHIP_TABLE): who owns each "
            "connection, grant and AgentCore session.",
        )
    if sessions.claim_registrar is not None:
        _output(
            sessions,
            CLAIM_REGISTRAR_FUNCTION_NAME,
            sessions.claim_registrar.function.function_name,
            "Claim registrar function (REGISTRAR_FN): the one writer of ownership records "
            "besides the cleanup; aws logs tail of its log group.",
        )
    deferred = getattr(sessions, "deferred_work_table", None)
    if deferred is not None:
        _output(
            sessions,
            DEFERRED_WORK_TABLE_NAME,
            deferred.table_name,
            "Deferred work of the feature flags (DEFERRED_WORK_TABLE): aws dynamodb scan "
            "--table-name <this value>.",
        )
    _add_pause_watch_outputs(sessions)
    _add_optional_function_outputs(sessions)
    _add_archive_outputs(sessions, archive_bucket)
    _add_feature_flag_outputs(sessions)


def _add_pause_watch_outputs(sessions: SessionExpiry) -> None:
    watch = sessions.pause_watch
    _output(
        sessions,
        PAUSE_WATCH_FUNCTION_NAME,
        watch.function.function_name,
        "Pause watch function (PAUSE_WATCH_FN): its errors and throttles when the "
        "paused-cleanup alarm has no data.",
    )
    _output(
        sessions,
        PAUSE_WATCH_RULE_NAME,
        watch.schedule.rule_name,
        "Pause watch schedule (PAUSE_WATCH_RULE): aws events describe-rule --name <this value>.",
    )


def _add_optional_function_outputs(sessions: SessionExpiry) -> None:
    if sessions.expiry_sweeper is not None:
        _output(
            sessions,
            EXPIRY_SWEEPER_FUNCTION_NAME,
            sessions.expiry_sweeper.function.function_name,
            "Expiry sweeper function (SWEEPER_FN).",
        )
    if sessions.grant_sweep is not None:
        _output(
            sessions,
            GRANT_SWEEP_FUNCTION_NAME,
            sessions.grant_sweep.function.function_name,
            "Grant sweep function (GRANT_SWEEP_FN).",
        )
        _output(
            sessions,
            GRANT_KEY_ARN,
            sessions.grant_sweep.key.key_arn,
            "Grant key (GRANT_KEY): aws kms list-grants --key-id <this value>.",
        )
    if sessions.tool_session_sweep is not None:
        _output(
            sessions,
            TOOL_SESSION_SWEEP_FUNCTION_NAME,
            sessions.tool_session_sweep.function.function_name,
            "AgentCore tool-session sweep function (TOOL_SWEEP_FN).",
        )
    if sessions.circuit_breaker is not None:
        _output(
            sessions,
            CIRCUIT_BREAKER_FUNCTION_NAME,
            sessions.circuit_breaker.function.function_name,
            "Circuit breaker function (BREAKER_FN).",
        )
        _output(
            sessions,
            CIRCUIT_BREAKER_STATE_PARAMETER_NAME,
            sessions.circuit_breaker.state_parameter.parameter_name,
            "Circuit breaker's state (PARAMETER): aws ssm get-parameter --name <this value>.",
        )
    if sessions.change_stream is not None:
        _output(
            sessions,
            CHANGE_STREAM_NAME,
            sessions.change_stream.stream_name,
            "Kinesis change stream (STREAM): aws kinesis describe-stream-summary "
            "--stream-name <this value>.",
        )


def _add_archive_outputs(sessions: SessionExpiry, archive_bucket: s3.IBucket | None) -> None:
    if archive_bucket is not None:
        _output(
            sessions,
            ARCHIVE_BUCKET_NAME,
            archive_bucket.bucket_name,
            "Archive bucket of the cleaned sessions (ARCHIVE_BUCKET).",
        )
    if sessions.archive_delivery_stream is not None:
        _output(
            sessions,
            ARCHIVE_DELIVERY_LOG_GROUP_NAME,
            sessions.archive_delivery_stream.log_group.log_group_name,
            "Delivery errors of the archive's Firehose stream (LOG_GROUP_OF_STREAM): aws logs "
            "tail <this value> --since 1h.",
        )


def _add_feature_flag_outputs(sessions: SessionExpiry) -> None:
    flags = sessions.feature_flags
    if flags is None:
        return
    _output(
        sessions,
        FEATURE_FLAGS_APPLICATION_ID,
        flags.application.application_id,
        "AppConfig application of the cleanup's feature flags (APPLICATION): python -m "
        "session_expiry_runtime.kill_switch flags show --application <this value> "
        "--environment ENVIRONMENT --profile PROFILE.",
    )
    _output(
        sessions,
        FEATURE_FLAGS_ENVIRONMENT_ID,
        flags.environment.environment_id,
        "AppConfig environment of the cleanup's feature flags (ENVIRONMENT).",
    )
    _output(
        sessions,
        FEATURE_FLAGS_PROFILE_ID,
        flags.configuration.configuration_profile_id,
        "AppConfig configuration profile of the cleanup's feature flags (PROFILE).",
    )


def dashboard_url(dashboard: cloudwatch.Dashboard) -> str:
    """The CloudWatch console URL of ``dashboard`` in the stack's Region (the ``aws``
    partition's console)."""
    return Fn.join(
        "",
        [
            f"https://{Aws.REGION}.console.aws.amazon.com/cloudwatch/home?region={Aws.REGION}"
            "#dashboards/dashboard/",
            dashboard.dashboard_name,
        ],
    )


def add_dashboard_output(
    sessions: SessionExpiry, construct_id: str, dashboard: cloudwatch.Dashboard
) -> None:
    """``<construct_id>Url``: the console URL of the dashboard ``add_dashboard`` created."""
    _output(
        sessions,
        f"{construct_id}{DASHBOARD_URL_SUFFIX}",
        dashboard_url(dashboard),
        "CloudWatch dashboard of the session cleanup: alarms, sessions cleaned, failures, "
        "iterator age, paused time.",
    )
