"""The props of ``SessionExpiry`` as one value its internal units read.

``SessionExpiry.__init__`` keeps the keyword-only signature (the public API, documented there);
this struct only carries the values given, defaults applied, from the composer to its units.
The ``Duration`` defaults live here (``SessionExpiry``'s signature shows ``None`` for them, and
`SessionExpiryProps.of` applies them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs

from .agents import agent_memory, agentcore
from .archiving.archive_delivery import ArchiveDelivery
from .change_source import ChangeSource
from .custom_steps import CustomCleanupStep
from .filters import CleanupEventFilter
from .monitoring import alarms as alarm_defaults
from .switches.circuit_breaker import CircuitBreakerAlarm

DEFAULT_CLEANUP_TIMEOUT = Duration.minutes(5)
DEFAULT_MAX_RECORD_AGE = Duration.hours(6)
#: ``Duration`` props whose ``None`` means a default (applied by `SessionExpiryProps.of`).
_DURATION_DEFAULTS = {
    "cleanup_timeout": DEFAULT_CLEANUP_TIMEOUT,
    "max_record_age": DEFAULT_MAX_RECORD_AGE,
    "alarm_iterator_age_threshold": alarm_defaults.DEFAULT_ITERATOR_AGE_THRESHOLD,
    "alarm_cleanup_paused_after": alarm_defaults.DEFAULT_CLEANUP_PAUSED_AFTER,
}


@dataclass(frozen=True)
class SessionExpiryProps:
    """Every prop of ``SessionExpiry`` (see its docstring for meaning and defaults)."""

    table: dynamodb.ITable | None
    partition_key_name: str | None
    sort_key_name: str | None
    time_to_live_attribute: str | None
    table_encryption_key: kms.IKey | None
    removal_policy: RemovalPolicy | None
    deletion_protection: bool | None
    connection_id_attribute: str
    grant_id_attribute: str
    grant_token_attribute: str
    scratch_prefix_attribute: str
    tenant_attribute: str
    cleanup_timeout: Duration
    cleanup_memory_size: int
    cleanup_log_retention: logs.RetentionDays
    max_workers: int
    metrics_namespace: str
    metrics_tenant_dimension: bool
    tenant_insights: bool
    event_filter: CleanupEventFilter
    batch_size: int
    max_batching_window: Duration | None
    parallelization_factor: int
    retry_attempts: int
    max_record_age: Duration
    failure_queue: sqs.IQueue | None
    websocket_stage: apigwv2.IWebSocketStage | None
    grant_key: kms.IKey | None
    grant_sweep_interval: Duration | None
    grant_key_grant_quota: int | None
    grant_retire_budget: int | None
    scratch_bucket: s3.IBucket | None
    scratch_root: str | None
    tenant_scoped_scratch: bool
    scratch_retention: Duration | None
    alarm_iterator_age_threshold: Duration
    alarm_actions: Sequence[cloudwatch.IAlarmAction] | None
    alarm_skipped_records: bool
    expiry_sweep_interval: Duration | None
    expiry_sweep_shards: int
    expiry_sweep_workers: int
    expiry_sweeper_memory_size: int
    alarm_ttl_health_window: Duration | None
    cleanup_enabled: bool
    cleanup_dry_run: bool
    archive_bucket: s3.IBucket | None
    archive_prefix: str | None
    archive_transition_after: Duration | None
    archive_transition_storage_class: s3.StorageClass | None
    archive_expiration: Duration | None
    event_bus: events.IEventBus | None
    failure_destination_bucket: s3.IBucket | None
    agent_runtime: agentcore.AgentRuntimeTarget | None
    agent_runtime_qualifier: str | None
    code_interpreter: agentcore.CodeInterpreterTarget | None
    browser: agentcore.BrowserTarget | None
    agent_runtime_session_attribute: str
    code_interpreter_session_attribute: str
    browser_session_attribute: str
    allow_stopping_shared_aws_managed_tool_sessions: bool
    tool_session_sweep_interval: Duration | None
    custom_steps: Sequence[CustomCleanupStep] | None
    function_encryption_key: kms.IKey | None
    cleanup_reserved_concurrency: int | None
    expiry_sweep_reserved_concurrency: int | None
    max_session_lifetime: Duration | None
    grant_operations: Sequence[str] | None
    grant_grantees: Sequence[iam.IRole] | None
    bind_grants_to_session: bool
    alarm_cleanup_paused_after: Duration
    circuit_breaker: bool
    circuit_breaker_alarms: Sequence[CircuitBreakerAlarm] | None
    circuit_breaker_cool_down: Duration | None
    archive_query: bool
    archive_delivery: ArchiveDelivery
    agent_memory: agent_memory.AgentMemoryTarget | None
    agent_memory_record_namespaces: Sequence[str] | None
    resource_targets: Mapping[str, str] | None
    global_table: bool | None
    change_source: ChangeSource | None
    feature_flags: object
    alarm_runbook_base_url: str | None

    @classmethod
    def of(cls, given: Mapping[str, object]) -> SessionExpiryProps:
        """The props among ``given`` (the constructor's ``locals()``; other names are ignored),
        with the ``Duration`` defaults applied where ``given`` holds ``None``."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in given.items() if k in names}
        for name, default in _DURATION_DEFAULTS.items():
            if values.get(name) is None:
                values[name] = default
        return cls(**values)  # type: ignore[arg-type]

    @property
    def actions(self) -> list[cloudwatch.IAlarmAction]:
        """``alarm_actions`` as a list (empty when not given)."""
        return list(self.alarm_actions or [])
