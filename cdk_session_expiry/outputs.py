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
Guide, "CloudFormation quotas"): a ``SessionExpiry`` adds 6 with no optional prop, at most 22
(every optional resource and a dashboard).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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


@dataclass(frozen=True)
class _Output:
    """One operator output: its construct id, its value read off the construct (``None`` when
    the resource is absent: no output) and its description (naming the runbooks' placeholder)."""

    construct_id: str
    value: Callable[[SessionExpiry], str | None]
    description: str


def _attr(path: str) -> Callable[[SessionExpiry], str | None]:
    """``sessions.<a>.<b>...`` along the dotted ``path``, or ``None`` where a step is absent."""

    def read(sessions: SessionExpiry) -> str | None:
        value: Any = sessions
        for name in path.split("."):
            value = getattr(value, name, None)
            if value is None:
                return None
        return str(value)

    return read


def _archive_bucket_name(bucket: s3.IBucket | None) -> Callable[[SessionExpiry], str | None]:
    return lambda _sessions: None if bucket is None else bucket.bucket_name


#: Every operator output in template order, but the archive bucket's (a prop, not an attribute).
_OUTPUTS_BEFORE_ARCHIVE = (
    _Output(
        CLEANUP_FUNCTION_NAME,
        _attr("cleanup_function.function_name"),
        "Session cleanup function (CLEANUP_FN in docs/operating.md): python -m "
        "session_expiry_runtime.kill_switch status|disable|enable --function <this value>.",
    ),
    _Output(
        TABLE_NAME,
        _attr("table.table_name"),
        "Session table (TABLE): aws dynamodb describe-time-to-live --table-name <this value>.",
    ),
    _Output(
        FAILURE_QUEUE_URL,
        _attr("failure_queue.queue_url"),
        "On-failure queue of the session cleanup (URL): python -m "
        "session_expiry_runtime.replay --queue-url <this value> --dry-run.",
    ),
    _Output(
        FAILURE_DESTINATION_BUCKET_NAME,
        _attr("failure_destination_bucket.bucket_name"),
        "On-failure bucket of the session cleanup (BUCKET): python -m "
        "session_expiry_runtime.replay --bucket <this value> --key KEY --dry-run.",
    ),
    _Output(
        OWNERSHIP_TABLE_NAME,
        _attr("ownership_table.table_name"),
        "Ownership table of the session cleanup (OWNERSHIP_TABLE): who owns each "
        "connection, grant and AgentCore session.",
    ),
    _Output(
        CLAIM_REGISTRAR_FUNCTION_NAME,
        _attr("claim_registrar.function.function_name"),
        "Claim registrar function (REGISTRAR_FN): the one writer of ownership records "
        "besides the cleanup; aws logs tail of its log group.",
    ),
    _Output(
        DEFERRED_WORK_TABLE_NAME,
        _attr("deferred_work_table.table_name"),
        "Deferred work of the feature flags (DEFERRED_WORK_TABLE): aws dynamodb scan "
        "--table-name <this value>.",
    ),
    _Output(
        PAUSE_WATCH_FUNCTION_NAME,
        _attr("pause_watch.function.function_name"),
        "Pause watch function (PAUSE_WATCH_FN): its errors and throttles when the "
        "paused-cleanup alarm has no data.",
    ),
    _Output(
        PAUSE_WATCH_RULE_NAME,
        _attr("pause_watch.schedule.rule_name"),
        "Pause watch schedule (PAUSE_WATCH_RULE): aws events describe-rule --name <this value>.",
    ),
    _Output(
        EXPIRY_SWEEPER_FUNCTION_NAME,
        _attr("expiry_sweeper.function.function_name"),
        "Expiry sweeper function (SWEEPER_FN).",
    ),
    _Output(
        GRANT_SWEEP_FUNCTION_NAME,
        _attr("grant_sweep.function.function_name"),
        "Grant sweep function (GRANT_SWEEP_FN).",
    ),
    _Output(
        GRANT_KEY_ARN,
        _attr("grant_sweep.key.key_arn"),
        "Grant key (GRANT_KEY): aws kms list-grants --key-id <this value>.",
    ),
    _Output(
        TOOL_SESSION_SWEEP_FUNCTION_NAME,
        _attr("tool_session_sweep.function.function_name"),
        "AgentCore tool-session sweep function (TOOL_SWEEP_FN).",
    ),
    _Output(
        CIRCUIT_BREAKER_FUNCTION_NAME,
        _attr("circuit_breaker.function.function_name"),
        "Circuit breaker function (BREAKER_FN).",
    ),
    _Output(
        CIRCUIT_BREAKER_STATE_PARAMETER_NAME,
        _attr("circuit_breaker.state_parameter.parameter_name"),
        "Circuit breaker's state (PARAMETER): aws ssm get-parameter --name <this value>.",
    ),
    _Output(
        CHANGE_STREAM_NAME,
        _attr("change_stream.stream_name"),
        "Kinesis change stream (STREAM): aws kinesis describe-stream-summary "
        "--stream-name <this value>.",
    ),
)

#: The outputs after the archive bucket's.
_OUTPUTS_AFTER_ARCHIVE = (
    _Output(
        ARCHIVE_DELIVERY_LOG_GROUP_NAME,
        _attr("archive_delivery_stream.log_group.log_group_name"),
        "Delivery errors of the archive's Firehose stream (LOG_GROUP_OF_STREAM): aws logs "
        "tail <this value> --since 1h.",
    ),
    _Output(
        FEATURE_FLAGS_APPLICATION_ID,
        _attr("feature_flags.application.application_id"),
        "AppConfig application of the cleanup's feature flags (APPLICATION): python -m "
        "session_expiry_runtime.kill_switch flags show --application <this value> "
        "--environment ENVIRONMENT --profile PROFILE.",
    ),
    _Output(
        FEATURE_FLAGS_ENVIRONMENT_ID,
        _attr("feature_flags.environment.environment_id"),
        "AppConfig environment of the cleanup's feature flags (ENVIRONMENT).",
    ),
    _Output(
        FEATURE_FLAGS_PROFILE_ID,
        _attr("feature_flags.configuration.configuration_profile_id"),
        "AppConfig configuration profile of the cleanup's feature flags (PROFILE).",
    ),
)


def add_operator_outputs(sessions: SessionExpiry, *, archive_bucket: s3.IBucket | None) -> None:
    """The outputs of every resource ``sessions`` has (see the module docstring), into
    ``sessions.outputs`` by construct id; ``archive_bucket`` is the prop of that name."""
    archive = _Output(
        ARCHIVE_BUCKET_NAME,
        _archive_bucket_name(archive_bucket),
        "Archive bucket of the cleaned sessions (ARCHIVE_BUCKET).",
    )
    for spec in (*_OUTPUTS_BEFORE_ARCHIVE, archive, *_OUTPUTS_AFTER_ARCHIVE):
        value = spec.value(sessions)
        if value is not None:
            _output(sessions, spec.construct_id, value, spec.description)


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
