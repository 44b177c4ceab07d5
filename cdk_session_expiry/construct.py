"""The ``SessionExpiry`` construct."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import (
    Annotations,
    ArnFormat,
    Duration,
    RemovalPolicy,
    Stack,
)
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from . import _runtime_contract as contract
from . import alarms as alarm_defaults
from . import (
    archive,
    assets,
    dashboard,
    failure_destination,
    fanout,
    lifecycle,
    nag,
    sweeper,
    validation,
)
from .assets import LAYER_RUNTIMES
from .filters import CleanupEventFilter, filter_criteria

DEFAULT_CLEANUP_TIMEOUT = Duration.minutes(5)
#: Lambda allocates CPU in proportion to memory (1,769 MB = one vCPU). The cleanup is CPU-bound
#: once its calls overlap (botocore's per-call work), so below 1,769 MiB a session costs the same
#: at every size and more memory only cleans faster; above it, one Python process gains little
#: from a second vCPU and pays for it. BENCHMARKS.md's cost table ("Cost per million sessions
#: cleaned") supports 1,769 MiB: the most sessions/s at the lowest cost per session.
DEFAULT_CLEANUP_MEMORY_SIZE = 1769
DEFAULT_CLEANUP_LOG_RETENTION = logs.RetentionDays.THREE_MONTHS
DEFAULT_BATCH_SIZE = 100
DEFAULT_PARALLELIZATION_FACTOR = 1
DEFAULT_RETRY_ATTEMPTS = 10
DEFAULT_MAX_RECORD_AGE = Duration.hours(6)
FAILURE_QUEUE_RETENTION = Duration.days(14)
#: DynamoDB Streams keeps records for 24 hours: older limits are meaningless.
STREAM_RETENTION = Duration.hours(24)
MAX_WORKERS_LIMIT = 64

_SESSION_DATA_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:Query",
)
_VIEW_TYPES_WITH_OLD_IMAGES = {"NEW_AND_OLD_IMAGES", "OLD_IMAGE"}
_WARNING_IMPORTED_BUCKET = "cdk-session-expiry:scratchBucketLifecycle"
_WARNING_IMPORTED_FUNCTION = "cdk-session-expiry:sessionAccessEnvironment"


class SessionExpiry(Construct):
    """A DynamoDB session table whose expired and ended sessions are cleaned up.

    Creates (or attaches to) a session table with time to live and a NEW_AND_OLD_IMAGES
    stream, a cleanup function fed by an event source mapping on REMOVE records, an encrypted
    on-failure queue, CloudWatch alarms, and a Lambda layer with the session runtime for the
    application's own functions (``grant_session_access``).

    The cleanup function, for each removed session: deletes its WebSocket connection
    (``websocket_stage``), retires its KMS grant (``grant_key``) and deletes its objects under
    the scratch root (``scratch_bucket``). Each target is optional.

    Args:
        scope: parent construct.
        id: construct id. Renaming it replaces every resource, including the table.
        table: an existing session table to attach to instead of creating one: a
            ``dynamodb.Table``/``TableV2`` of this app, or an imported table given with its
            ``table_stream_arn``. Its stream must carry old images (NEW_AND_OLD_IMAGES or
            OLD_IMAGE). Default: a new table is created.
        partition_key_name: partition key (String) of the session table. Default: ``"pk"``
            for a new table; for a table of this app, its own partition key.
        sort_key_name: sort key (String) of the session table. Default: no sort key for a new
            table; for a table of this app, its own sort key.
        time_to_live_attribute: the table's time to live attribute (a Number, epoch seconds).
            Default: ``"expiresAt"``; for a table of this app, its own TTL attribute.
        table_encryption_key: customer managed key for a new table. Default: the AWS managed
            key ``aws/dynamodb``.
        removal_policy: what happens to a new table when it leaves the stack. Default:
            ``RemovalPolicy.RETAIN``.
        deletion_protection: turn on deletion protection of a new table. Default: off (the
            table is still retained by ``removal_policy``).
        connection_id_attribute, grant_id_attribute, grant_token_attribute,
            scratch_prefix_attribute, tenant_attribute: names of the session attributes the
            runtime writes and the cleanup reads. Defaults: ``connectionId``, ``grantId``,
            ``grantToken``, ``scratchPrefix``, ``tenantId``.
        cleanup_timeout: timeout of the cleanup function, 1 second..15 minutes. Default:
            5 minutes.
        cleanup_memory_size: memory of the cleanup function in MiB, 128..10240; CPU comes in
            proportion (1,769 MiB = one vCPU). Default: 1,769 (one vCPU; see BENCHMARKS.md).
        cleanup_log_retention: retention of the cleanup function's log group. Default:
            three months.
        max_workers: cleanup calls in flight per invocation (the step pool), 1..64. Default:
            16.
        metrics_namespace: CloudWatch namespace of the runtime's embedded metrics. Default:
            ``"SessionExpiry"``.
        event_filter: which REMOVE records reach the cleanup function. Default:
            ``CleanupEventFilter.ALL_REMOVES`` (TTL deletes and explicit ends).
        batch_size: records per invocation, 1..10,000. Default: 100.
        max_batching_window: how long to gather records before invoking, 0..300 seconds.
            Default: none, Lambda invokes as soon as records arrive.
        parallelization_factor: concurrent batches per shard, 1..10. Default: 1.
        retry_attempts: retries of a failing batch (after bisecting), 0..10,000; never
            infinite. Default: 10.
        max_record_age: records older than this go to the on-failure queue, 60 seconds..24
            hours (the stream's retention). Default: 6 hours.
        failure_queue: on-failure destination of the event source mapping. Default: a new SQS
            queue with SQS-managed encryption, SSL enforced and 14 days' retention.
        websocket_stage: WebSocket API stage whose connections are deleted. Default: no
            connection cleanup.
        grant_key: KMS key whose per-session grants are retired. The grants must name
            ``cleanup_role`` as retiring principal (``grant_session_access`` configures the
            session runtime to do so). Default: no grant cleanup.
        scratch_bucket: bucket holding per-session scratch objects under ``scratch_root``.
            Default: no scratch cleanup.
        scratch_root: prefix of all session scratch prefixes: a literal S3 prefix ending in
            ``/``, without a leading ``/`` or wildcards (see ``lifecycle.check_scratch_root``).
            Only with ``scratch_bucket``. Default: ``"sessions/"``.
        tenant_scoped_scratch: session prefixes are ``<root><tenant>/...`` instead of
            ``<root>...``. Default: off.
        scratch_retention: lifecycle backstop: objects under the scratch root expire this
            long after creation, in whole days, at least 1 day. Only with ``scratch_bucket``;
            needs a bucket of this app (an imported bucket gets a synth warning instead).
            Default: 7 days, well beyond TTL's typical 48 hour deletion lag.
        alarm_iterator_age_threshold: the iterator age alarm fires above this, 1 minute..less
            than 24 hours. Default: 1 hour.
        alarm_actions: actions of every alarm (e.g. ``SnsAction``). Default: none.
        expiry_sweep_interval: run the expiry sweeper this often (whole minutes from 1 minute
            to 1 day, or 5, 6, 10, 12, 15, 20 or 30 seconds: started every minute with reserved
            concurrency 1, a pass every interval within the run): a scheduled function deletes
            every session whose TTL has passed, so it is cleaned within the interval plus
            processing time instead of TTL's "within a few days". Adds a sparse index on a new
            table (a ``table=`` of this app must already have it; see
            ``sweeper.check_sweep_index``), the function, an EventBridge rule and an errors
            alarm. Cost: one extra index write per session create/touch, one Query
            per shard (4) and one Lambda invocation per interval, one DeleteItem per swept
            session (see ``cdk_session_expiry.sweeper``). Default: off, TTL alone.
        alarm_ttl_health_window: alarm when time to live deleted no session over this window
            (1 hour..1 day) while the table was written: the signature of TTL values in
            milliseconds or the wrong attribute name (``ttl_health_alarm``). Expected to fire
            for an app that ends every session explicitly. Cost: one alarm (metric math on 2-3
            metrics). Default: off.
        cleanup_enabled: the kill switch: ``False`` disables the event source mapping. Lambda
            stops reading the stream and resumes where it stopped when enabled again; records
            older than ``max_record_age`` by then go to the on-failure queue, and the stream
            keeps them 24 hours at most. Default: ``True``.
        cleanup_dry_run: the cleanup logs and counts (``SessionsWouldBeCleaned``) what it would
            clean and changes nothing (no DeleteConnection, RetireGrant, DeleteObjects, archive
            or event; ListObjectsV2 only); the records are consumed. The sweeper, if on, only
            counts too (``SessionsWouldBeSwept``). Default: ``False``.
        archive_bucket: write every cleaned session's old image as JSON under
            ``archive_prefix`` (``date=YYYY-MM-DD/tenant=<tenant>/<session key>/<sequence
            number>.json``) before any other cleanup step; a failed write fails the record and
            nothing else is done for it. Encrypted with the bucket's KMS key when it has one.
            Cost: one PutObject per session, S3 storage of ~1-5 KB per session. Default: no
            archive.
        archive_prefix: key prefix of the archive, a literal S3 prefix ending in ``/``, not
            overlapping ``scratch_root`` in the same bucket. Only with ``archive_bucket``.
            Default: ``"archive/"``.
        archive_transition_after: lifecycle transition of archived objects, whole days (at
            least 30 for the infrequent access classes). Needs a bucket of this app (an
            imported one gets a synth warning). S3 skips objects under 128 KB by default, which
            archived sessions usually are. Default: no transition.
        archive_transition_storage_class: storage class of that transition. Only with
            ``archive_transition_after``. Default: ``StorageClass.GLACIER_INSTANT_RETRIEVAL``.
        archive_expiration: archived objects (and their noncurrent versions) expire this long
            after creation, whole days, later than the transition. Default: kept forever.
        event_bus: put one ``Session Cleaned`` event (source ``cdk-session-expiry``) per cleaned
            session on this bus, 10 per PutEvents call; a failed entry fails its record. For
            consumers that would otherwise read the stream (which serves about two readers).
            Cost: EventBridge custom events, one per session. Default: no events.
        failure_destination_bucket: S3 on-failure destination instead of the SQS queue: Lambda
            writes the failed batch's metadata and whole payload there, so it can be replayed
            after the stream's 24 hours; alarm on ``OnFailureDestinationDeliveredEventCount``.
            Not with ``failure_queue``. Cost: one S3 object per failed batch. Default: an SQS
            queue (metadata only; replay within 24 hours).

    Raises:
        ValueError: a prop is out of range or inconsistent; the message names the prop, the
            value and what is expected.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table: dynamodb.ITable | None = None,
        partition_key_name: str | None = None,
        sort_key_name: str | None = None,
        time_to_live_attribute: str | None = None,
        table_encryption_key: kms.IKey | None = None,
        removal_policy: RemovalPolicy | None = None,
        deletion_protection: bool | None = None,
        connection_id_attribute: str = contract.DEFAULT_CONNECTION_ID_ATTRIBUTE,
        grant_id_attribute: str = contract.DEFAULT_GRANT_ID_ATTRIBUTE,
        grant_token_attribute: str = contract.DEFAULT_GRANT_TOKEN_ATTRIBUTE,
        scratch_prefix_attribute: str = contract.DEFAULT_SCRATCH_PREFIX_ATTRIBUTE,
        tenant_attribute: str = contract.DEFAULT_TENANT_ATTRIBUTE,
        cleanup_timeout: Duration = DEFAULT_CLEANUP_TIMEOUT,
        cleanup_memory_size: int = DEFAULT_CLEANUP_MEMORY_SIZE,
        cleanup_log_retention: logs.RetentionDays = DEFAULT_CLEANUP_LOG_RETENTION,
        max_workers: int = contract.DEFAULT_MAX_WORKERS,
        metrics_namespace: str = contract.DEFAULT_METRICS_NAMESPACE,
        event_filter: CleanupEventFilter = CleanupEventFilter.ALL_REMOVES,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_batching_window: Duration | None = None,
        parallelization_factor: int = DEFAULT_PARALLELIZATION_FACTOR,
        retry_attempts: int = DEFAULT_RETRY_ATTEMPTS,
        max_record_age: Duration = DEFAULT_MAX_RECORD_AGE,
        failure_queue: sqs.IQueue | None = None,
        websocket_stage: apigwv2.IWebSocketStage | None = None,
        grant_key: kms.IKey | None = None,
        scratch_bucket: s3.IBucket | None = None,
        scratch_root: str | None = None,
        tenant_scoped_scratch: bool = False,
        scratch_retention: Duration | None = None,
        alarm_iterator_age_threshold: Duration = alarm_defaults.DEFAULT_ITERATOR_AGE_THRESHOLD,
        alarm_actions: Sequence[cloudwatch.IAlarmAction] | None = None,
        expiry_sweep_interval: Duration | None = None,
        alarm_ttl_health_window: Duration | None = None,
        cleanup_enabled: bool = True,
        cleanup_dry_run: bool = False,
        archive_bucket: s3.IBucket | None = None,
        archive_prefix: str | None = None,
        archive_transition_after: Duration | None = None,
        archive_transition_storage_class: s3.StorageClass | None = None,
        archive_expiration: Duration | None = None,
        event_bus: events.IEventBus | None = None,
        failure_destination_bucket: s3.IBucket | None = None,
    ) -> None:
        validation.check_prop_types(locals())
        super().__init__(scope, id)

        # --- validation, before any resource exists ---------------------------------------
        _check_event_source_props(
            batch_size=batch_size,
            max_batching_window=max_batching_window,
            parallelization_factor=parallelization_factor,
            retry_attempts=retry_attempts,
            max_record_age=max_record_age,
        )
        validation.check_duration_range(
            "cleanup_timeout",
            cleanup_timeout,
            minimum=Duration.seconds(1),
            maximum=Duration.minutes(15),
        )
        validation.check_int_range(
            "cleanup_memory_size", cleanup_memory_size, minimum=128, maximum=10_240
        )
        validation.check_int_range("max_workers", max_workers, minimum=1, maximum=MAX_WORKERS_LIMIT)
        validation.check_non_empty_name("metrics_namespace", metrics_namespace)
        if not isinstance(event_filter, CleanupEventFilter):
            raise ValueError(
                f"event_filter={event_filter!r}: expected a CleanupEventFilter member, e.g. "
                "CleanupEventFilter.ALL_REMOVES"
            )
        validation.check_duration_below(
            "alarm_iterator_age_threshold",
            alarm_iterator_age_threshold,
            minimum=Duration.minutes(1),
            limit=alarm_defaults.STREAM_RETENTION,
        )
        if scratch_bucket is None:
            for name, value in (
                ("scratch_root", scratch_root),
                ("scratch_retention", scratch_retention),
            ):
                if value is not None:
                    raise ValueError(
                        f"{name}={validation.shown(value)} is set without scratch_bucket: "
                        f"expected a scratch_bucket, or no {name}"
                    )
            if tenant_scoped_scratch:
                raise ValueError(
                    "tenant_scoped_scratch=True is set without scratch_bucket: expected a "
                    "scratch_bucket, or no tenant_scoped_scratch"
                )
        self.scratch_root = contract.DEFAULT_SCRATCH_ROOT if scratch_root is None else scratch_root
        lifecycle.check_scratch_root(self.scratch_root)
        retention = (
            lifecycle.DEFAULT_SCRATCH_RETENTION if scratch_retention is None else scratch_retention
        )
        validation.check_duration_range(
            "scratch_retention",
            retention,
            minimum=Duration.days(1),
            maximum=Duration.days(36_500),
            whole="days",
        )

        if expiry_sweep_interval is not None:
            sweeper.check_sweep_interval(expiry_sweep_interval)
        validation.check_filter_with_sweeper(event_filter, expiry_sweep_interval)
        #: Which REMOVE records reach the cleanup (``grant_session_access`` checks it).
        self.event_filter = event_filter
        if alarm_ttl_health_window is not None:
            alarm_defaults.check_ttl_health_window(alarm_ttl_health_window)
        for switch, flag in (
            ("cleanup_enabled", cleanup_enabled),
            ("cleanup_dry_run", cleanup_dry_run),
        ):
            if not isinstance(flag, bool):
                raise ValueError(f"{switch}={flag!r}: expected True or False")

        #: Key prefix of the archive (``archive_bucket``).
        self.archive_prefix = archive.check_archive_props(
            archive_bucket=archive_bucket,
            archive_prefix=archive_prefix,
            archive_transition_after=archive_transition_after,
            archive_transition_storage_class=archive_transition_storage_class,
            archive_expiration=archive_expiration,
            scratch_bucket=scratch_bucket,
            scratch_root=self.scratch_root,
        )
        failure_destination.check_failure_destination(failure_queue, failure_destination_bucket)
        validation.claim_s3_prefixes(
            self,
            [
                validation.PrefixClaim(bucket, prefix, prop, self.node.path)
                for bucket, prefix, prop in (
                    (scratch_bucket, self.scratch_root, "scratch_root"),
                    (archive_bucket, self.archive_prefix, "archive_prefix"),
                )
                if bucket is not None
            ],
        )

        # --- session table -----------------------------------------------------------------
        if table is None:
            self.partition_key_name = (
                contract.DEFAULT_PARTITION_KEY if partition_key_name is None else partition_key_name
            )
            self.sort_key_name = sort_key_name
            self.time_to_live_attribute = (
                contract.DEFAULT_TTL_ATTRIBUTE
                if time_to_live_attribute is None
                else time_to_live_attribute
            )
        else:
            table_only: tuple[tuple[str, object], ...] = (
                ("table_encryption_key", table_encryption_key),
                ("removal_policy", removal_policy),
                ("deletion_protection", deletion_protection),
            )
            for prop, given in table_only:
                if given is not None:
                    raise ValueError(
                        f"{prop}={validation.shown(given)} applies only to a table the construct "
                        "creates: "
                        f"expected no {prop} together with table=, set it on that table instead"
                    )
            (
                self.partition_key_name,
                self.sort_key_name,
                self.time_to_live_attribute,
            ) = _check_existing_table(
                table,
                partition_key_name=partition_key_name,
                sort_key_name=sort_key_name,
                time_to_live_attribute=time_to_live_attribute,
            )
        self.connection_id_attribute = connection_id_attribute
        self.grant_id_attribute = grant_id_attribute
        self.grant_token_attribute = grant_token_attribute
        self.scratch_prefix_attribute = scratch_prefix_attribute
        self.tenant_attribute = tenant_attribute
        attribute_props = {
            "partition_key_name": self.partition_key_name,
            "sort_key_name": self.sort_key_name,
            "time_to_live_attribute": self.time_to_live_attribute,
            "connection_id_attribute": connection_id_attribute,
            "grant_id_attribute": grant_id_attribute,
            "grant_token_attribute": grant_token_attribute,
            "scratch_prefix_attribute": scratch_prefix_attribute,
            "tenant_attribute": tenant_attribute,
        }
        for prop, attribute in attribute_props.items():
            if attribute is not None:
                validation.check_attribute_name(prop, attribute)
        validation.check_distinct_attribute_names(attribute_props)
        if expiry_sweep_interval is not None:
            validation.check_distinct_attribute_names(
                {**attribute_props, "expiry sweep shard attribute": sweeper.SWEEP_SHARD_ATTRIBUTE}
            )
            if table is not None and not sweeper.check_sweep_index(
                table, time_to_live_attribute=self.time_to_live_attribute
            ):
                sweeper.warn_unchecked_index(self, table, self.time_to_live_attribute)

        if table is None:
            table = self._create_table(
                encryption_key=table_encryption_key,
                removal_policy=RemovalPolicy.RETAIN if removal_policy is None else removal_policy,
                deletion_protection=bool(deletion_protection),
            )
        #: The session table (created, or the one passed as ``table``).
        self.table: dynamodb.ITable = table
        self.grant_key = grant_key
        self.scratch_bucket = scratch_bucket
        self.tenant_scoped_scratch = tenant_scoped_scratch
        self.metrics_namespace = metrics_namespace

        # --- cleanup function --------------------------------------------------------------
        log_group = logs.LogGroup(self, "CleanupLogGroup", retention=cleanup_log_retention)
        #: Execution role of the cleanup function: name it as the retiring principal of every
        #: per-session KMS grant (``retiring_principal_arn``).
        self.cleanup_role = iam.Role(
            self,
            "CleanupRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Cleanup of expired and ended sessions (cdk-session-expiry)",
        )
        log_group.grant_write(self.cleanup_role)
        #: The function that cleans up after each removed session.
        self.cleanup_function = assets.runtime_function(
            self,
            "CleanupFunction",
            description="Cleans up after expired and ended sessions (cdk-session-expiry)",
            handler=contract.CLEANUP_HANDLER,
            role=self.cleanup_role,
            log_group=log_group,
            timeout=cleanup_timeout,
            memory_size=cleanup_memory_size,
            environment=self._cleanup_environment(max_workers),
        )
        self._grant_cleanup_targets(websocket_stage)
        if scratch_bucket is not None:
            self._add_scratch_backstop(scratch_bucket, retention)
        if archive_bucket is not None:
            archive.configure_archive(
                self,
                self.cleanup_function,
                bucket=archive_bucket,
                prefix=self.archive_prefix,
                transition_after=archive_transition_after,
                storage_class=archive_transition_storage_class,
                expiration=archive_expiration,
            )
        if event_bus is not None:
            fanout.configure_event_bus(self.cleanup_function, event_bus)

        # --- event source mapping ----------------------------------------------------------
        if failure_queue is None and failure_destination_bucket is None:
            failure_queue = sqs.Queue(
                self,
                "FailureQueue",
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
                retention_period=FAILURE_QUEUE_RETENTION,
            )
        #: On-failure destination: metadata of batches the cleanup gave up on (``None`` with
        #: ``failure_destination_bucket``).
        self.failure_queue: sqs.IQueue | None = failure_queue
        #: S3 on-failure destination (``failure_destination_bucket``), or ``None``.
        self.failure_destination_bucket = failure_destination_bucket
        table.grant_stream_read(self.cleanup_function)
        #: The event source mapping from the table's stream to the cleanup function.
        self.event_source_mapping = lambda_.EventSourceMapping(
            self,
            "CleanupEventSourceMapping",
            target=self.cleanup_function,
            event_source_arn=table.table_stream_arn,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            filters=filter_criteria(event_filter),
            batch_size=batch_size,
            max_batching_window=max_batching_window,
            parallelization_factor=parallelization_factor,
            bisect_batch_on_error=True,
            retry_attempts=retry_attempts,
            max_record_age=max_record_age,
            report_batch_item_failures=True,
            on_failure=event_sources.SqsDlq(failure_queue)
            if failure_queue is not None
            else failure_destination.S3FailureDestination(failure_destination_bucket),  # type: ignore[arg-type]
            support_s3_on_failure_destination=failure_destination_bucket is not None,
            metrics_config=lambda_.MetricsConfig(metrics=[lambda_.MetricType.EVENT_COUNT]),
            enabled=cleanup_enabled,
        )
        # The mapping is validated against the role when it is created.
        self.event_source_mapping.node.add_dependency(self.cleanup_role)

        # --- runtime layer -----------------------------------------------------------------
        #: Layer with the session runtime (``import session_expiry_runtime``) for application
        #: functions; ``grant_session_access`` adds it to a ``lambda_.Function``.
        self.runtime_layer = lambda_.LayerVersion(
            self,
            "RuntimeLayer",
            code=assets.runtime_layer_code(),
            compatible_runtimes=list(LAYER_RUNTIMES),
            compatible_architectures=[lambda_.Architecture.ARM_64, lambda_.Architecture.X86_64],
            description="Session runtime of cdk-session-expiry (import session_expiry_runtime)",
        )

        # --- alarms ------------------------------------------------------------------------
        actions = list(alarm_actions or [])
        self.iterator_age_alarm = alarm_defaults.iterator_age_alarm(
            self,
            metric=self.metric_iterator_age(period=alarm_defaults.ALARM_PERIOD),
            threshold=alarm_iterator_age_threshold,
            actions=actions,
        )
        self.errors_alarm = alarm_defaults.errors_alarm(
            self, function=self.cleanup_function, actions=actions
        )
        self.throttles_alarm = alarm_defaults.throttles_alarm(
            self, function=self.cleanup_function, actions=actions
        )
        #: Alarm on the on-failure destination: visible messages of the queue, or records
        #: delivered to ``failure_destination_bucket``.
        self.failure_queue_alarm = (
            alarm_defaults.failure_queue_alarm(self, queue=failure_queue, actions=actions)
            if failure_queue is not None
            else failure_destination.delivered_alarm(
                self, mapping=self.event_source_mapping, actions=actions
            )
        )
        #: Every alarm the construct creates.
        self.alarms: list[cloudwatch.Alarm] = [
            self.iterator_age_alarm,
            self.errors_alarm,
            self.throttles_alarm,
            self.failure_queue_alarm,
        ]

        # --- kill switch, expiry sweeper, TTL health (issue 6) -------------------------------
        if cleanup_dry_run:
            self.cleanup_function.add_environment(contract.ENV_DRY_RUN, "true")
        #: The expiry sweeper (``expiry_sweep_interval``), or ``None`` when it is off.
        self.expiry_sweeper: sweeper.ExpirySweeper | None = None
        if expiry_sweep_interval is not None:
            if isinstance(table, dynamodb.Table) and table.node.scope is self:
                sweeper.add_sweep_index(table, time_to_live_attribute=self.time_to_live_attribute)
            sweep_env = {
                contract.ENV_TABLE_NAME: table.table_name,
                **self._attribute_environment(),
                contract.ENV_METRICS_NAMESPACE: metrics_namespace,
                contract.ENV_MAX_WORKERS: str(max_workers),
            }
            if cleanup_dry_run:
                sweep_env[contract.ENV_DRY_RUN] = "true"
            self.expiry_sweeper = sweeper.ExpirySweeper(
                self,
                "ExpirySweeper",
                table=table,
                interval=expiry_sweep_interval,
                environment=sweep_env,
                log_retention=cleanup_log_retention,
                metrics_namespace=metrics_namespace,
                alarm_actions=actions,
            )
            self.alarms.append(self.expiry_sweeper.errors_alarm)
        #: Time to live deleted nothing over ``alarm_ttl_health_window`` while the table was
        #: written; ``None`` when that prop is not set.
        self.ttl_health_alarm: cloudwatch.Alarm | None = None
        if alarm_ttl_health_window is not None:
            window = alarm_ttl_health_window
            self.ttl_health_alarm = alarm_defaults.ttl_health_alarm(
                self,
                ttl_deleted=self.metric_time_to_live_deleted_item_count(period=window),
                writes=table.metric_consumed_write_capacity_units(
                    period=window, statistic=cloudwatch.Stats.SUM
                ),
                swept=None
                if self.expiry_sweeper is None
                else self.expiry_sweeper.metric_sessions_swept(period=window),
                window=window,
                actions=actions,
            )
            self.alarms.append(self.ttl_health_alarm)
        #: The cdk-nag findings the design accepts, acknowledged with their reasons (``nag``).
        self.nag_acknowledgements = nag.acknowledge_design_findings(self)

    # --- public API -------------------------------------------------------------------------

    @property
    def retiring_principal_arn(self) -> str:
        """ARN of ``cleanup_role``: the retiring principal every per-session grant must name."""
        return self.cleanup_role.role_arn

    def grant_read_write_data(self, grantee: iam.IGrantable) -> iam.Grant:
        """Grant every data read/write action on the session table (``grant_read_write_data``)."""
        return self.table.grant_read_write_data(grantee)

    def grant_session_access(self, function: lambda_.IFunction) -> iam.Grant:
        """Let an application function run the session runtime against this table.

        Grants ``dynamodb:GetItem``, ``PutItem``, ``UpdateItem``, ``DeleteItem`` and ``Query``
        on the table (and use of its customer managed key, if any); with ``grant_key``,
        ``kms:CreateGrant`` on that key only for grants that name ``cleanup_role`` as their
        retiring principal (condition key ``kms:RetiringPrincipal``), and ``kms:RetireGrant``
        on it, with which the runtime retires a grant whose session ended while it was being
        created.

        For a ``lambda_.Function`` it also adds ``runtime_layer`` and sets the environment
        ``SessionStore.from_env()`` reads: table name, key names, TTL attribute, session
        attribute names, scratch bucket/root, tenant scoping, grant key ARN and retiring
        principal. Any other ``IFunction`` (e.g. imported) gets the permissions and a synth
        warning that its environment and layer must be set by hand.

        No S3 permissions are granted: what the application writes to its scratch prefix is
        its own decision (``scratch_bucket.grant_put``).

        Raises:
            ValueError: ``event_filter`` is ``TTL_DELETES_ONLY``, which drops the REMOVE
                records of ``SessionStore.end`` and of ``create``'s delete of an expired item.
        """
        validation.check_filter_with_session_store(
            self.event_filter, f"grant_session_access({function.node.path})"
        )
        grant = iam.Grant.add_to_principal(
            grantee=function,
            actions=list(_SESSION_DATA_ACTIONS),
            resource_arns=[self.table.table_arn],
        )
        if self.table.encryption_key is not None:
            grant = grant.combine(self.table.encryption_key.grant_encrypt_decrypt(function))
        if self.grant_key is not None:
            grant = grant.combine(
                iam.Grant.add_to_principal(
                    grantee=function,
                    actions=["kms:CreateGrant"],
                    resource_arns=[self.grant_key.key_arn],
                    conditions={
                        "StringEquals": {"kms:RetiringPrincipal": self.retiring_principal_arn}
                    },
                )
            )
            # When a session ends while its grant is being created, the runtime retires the
            # new grant at once, or the grantee would keep key access past the session. Only
            # the account's IAM delegation allows that (KMS developer guide, "Retiring and
            # revoking grants").
            grant = grant.combine(
                iam.Grant.add_to_principal(
                    grantee=function,
                    actions=["kms:RetireGrant"],
                    resource_arns=[self.grant_key.key_arn],
                )
            )
        self.nag_acknowledgements.extend(nag.acknowledge_session_access(self, function))
        if isinstance(function, lambda_.Function):
            for name, value in self.session_environment().items():
                function.add_environment(name, value)
            function.add_layers(self.runtime_layer)
        else:
            Annotations.of(self).add_warning_v2(
                _WARNING_IMPORTED_FUNCTION,
                f"grant_session_access({function.node.path}): not a lambda_.Function, so its "
                "environment and layers cannot be set; set the variables of "
                "SessionExpiry.session_environment() and add runtime_layer yourself.",
            )
        return grant

    def session_environment(self) -> dict[str, str]:
        """The environment ``SessionStore.from_env()`` reads, as set by ``grant_session_access``.

        Raises:
            ValueError: ``event_filter`` is ``TTL_DELETES_ONLY`` (see ``grant_session_access``).
        """
        validation.check_filter_with_session_store(self.event_filter, "session_environment()")
        env = {
            contract.ENV_TABLE_NAME: self.table.table_name,
            **self._attribute_environment(),
            contract.ENV_SCRATCH_ROOT: self.scratch_root,
            contract.ENV_RETIRING_PRINCIPAL: self.retiring_principal_arn,
        }
        if self.scratch_bucket is not None:
            env[contract.ENV_SCRATCH_BUCKET] = self.scratch_bucket.bucket_name
        if self.tenant_scoped_scratch:
            env[contract.ENV_TENANT_SCOPED_SCRATCH] = "true"
        if self.grant_key is not None:
            env[contract.ENV_GRANT_KEY_ARN] = self.grant_key.key_arn
        if self.expiry_sweeper is not None:
            env.update(self.expiry_sweeper.sweeper_environment())
        return env

    def metric_iterator_age(self, **options: Any) -> cloudwatch.Metric:
        """AWS/Lambda ``IteratorAge`` of the cleanup function (milliseconds), Maximum by default.

        How old the last record of each batch was when the function got it: a rising value
        means cleanup is falling behind the stream (24 hour retention).
        """
        return self.cleanup_function.metric(
            "IteratorAge", **{"statistic": cloudwatch.Stats.MAXIMUM, **options}
        )

    def metric_time_to_live_deleted_item_count(self, **options: Any) -> cloudwatch.Metric:
        """AWS/DynamoDB ``TimeToLiveDeletedItemCount`` of the table, Sum by default.

        A long run of zero while sessions are written means TTL values never expire (e.g.
        written in milliseconds).
        """
        return self.table.metric(
            "TimeToLiveDeletedItemCount", **{"statistic": cloudwatch.Stats.SUM, **options}
        )

    def metric_sessions_cleaned(self, *, reason: str, **options: Any) -> cloudwatch.Metric:
        """``SessionsCleaned`` (embedded metric) for one ``reason``, Sum by default.

        ``reason`` is ``"ttl"``, ``"ttl-replicated"`` or ``"explicit"``.

        Raises:
            ValueError: another ``reason`` (the runtime never emits it: no data, ever).
        """
        validation.check_choice("reason", reason, contract.REASONS)
        return self._runtime_metric(
            contract.METRIC_SESSIONS_CLEANED, {contract.DIMENSION_REASON: reason}, options
        )

    def metric_cleanup_failures(self, *, action: str, **options: Any) -> cloudwatch.Metric:
        """``CleanupFailures`` (embedded metric) for one ``action``, Sum by default.

        ``action`` is ``"DeleteConnection"``, ``"RetireGrant"``, ``"DeleteScratch"``,
        ``"Decode"``, ``"TimeGuard"``, ``"Archive"``, ``"PublishEvent"`` or ``"Unexpected"``.

        Raises:
            ValueError: another ``action`` (the runtime never emits it).
        """
        validation.check_choice("action", action, contract.ACTIONS)
        return self._runtime_metric(
            contract.METRIC_CLEANUP_FAILURES, {contract.DIMENSION_ACTION: action}, options
        )

    def metric_records_skipped(self, *, cause: str, **options: Any) -> cloudwatch.Metric:
        """``RecordsSkipped`` (embedded metric) for one ``cause``, Sum by default.

        ``cause`` is ``"NotRemove"``, ``"NoOldImage"``, ``"MissingAttributes"``,
        ``"NoSequenceNumber"`` or ``"DuplicateInBatch"``.

        Raises:
            ValueError: another ``cause`` (the runtime never emits it).
        """
        validation.check_choice("cause", cause, contract.CAUSES)
        return self._runtime_metric(
            contract.METRIC_RECORDS_SKIPPED, {contract.DIMENSION_CAUSE: cause}, options
        )

    def metric_ttl_lag(self, **options: Any) -> cloudwatch.Metric:
        """``TtlLagSeconds`` (embedded metric): expiry to cleanup, seconds, Maximum by default."""
        return self._runtime_metric(
            contract.METRIC_TTL_LAG, None, {"statistic": cloudwatch.Stats.MAXIMUM, **options}
        )

    def metric_scratch_objects_deleted(self, **options: Any) -> cloudwatch.Metric:
        """``ScratchObjectsDeleted`` (embedded metric), Sum by default."""
        return self._runtime_metric(contract.METRIC_OBJECTS_DELETED, None, options)

    def metric_scratch_prefixes_refused(self, **options: Any) -> cloudwatch.Metric:
        """``ScratchPrefixesRefused`` (embedded metric): prefixes outside the root, Sum."""
        return self._runtime_metric(contract.METRIC_PREFIXES_REFUSED, None, options)

    def metric_sessions_archived(self, **options: Any) -> cloudwatch.Metric:
        """``SessionsArchived`` (embedded metric): old images written to ``archive_bucket``, Sum."""
        return self._runtime_metric(contract.METRIC_SESSIONS_ARCHIVED, None, options)

    def metric_session_events_published(self, **options: Any) -> cloudwatch.Metric:
        """``SessionEventsPublished`` (embedded metric): events put on ``event_bus``, Sum."""
        return self._runtime_metric(contract.METRIC_EVENTS_PUBLISHED, None, options)

    def widgets(self, *, period: Duration | None = None) -> list[cloudwatch.IWidget]:
        """CloudWatch widgets for an application's own dashboard (``cdk_session_expiry.dashboard``):
        the alarms' status, sessions cleaned by reason, TTL lag (p50/p99/max), iterator age,
        failures by action, records skipped by cause, scratch objects deleted, the on-failure
        destination, TTL and sweeper deletions, and with the sweeper its expiry to sweep.

        Args:
            period: the period of every graph. Default: 5 minutes, the alarms' period.
        """
        return dashboard.widgets(self, period=period or dashboard.DEFAULT_PERIOD)

    def add_dashboard(
        self,
        id: str = "Dashboard",
        *,
        dashboard_name: str | None = None,
        period: Duration | None = None,
    ) -> cloudwatch.Dashboard:
        """Create a CloudWatch dashboard of :meth:`widgets` (opt-in; nothing before this call).

        Args:
            id: construct id of the dashboard, a child of this construct. Default:
                ``"Dashboard"``.
            dashboard_name: the dashboard's name. Default: one CloudFormation generates.
            period: the period of every graph. Default: 5 minutes.
        """
        return dashboard.add_dashboard(
            self, id, dashboard_name=dashboard_name, period=period or dashboard.DEFAULT_PERIOD
        )

    # --- internals --------------------------------------------------------------------------

    def _runtime_metric(
        self, name: str, dimensions: dict[str, str] | None, options: dict[str, Any]
    ) -> cloudwatch.Metric:
        props: dict[str, Any] = {"statistic": cloudwatch.Stats.SUM, **options}
        if dimensions:
            props["dimensions_map"] = {**dimensions, **props.get("dimensions_map", {})}
        return cloudwatch.Metric(namespace=self.metrics_namespace, metric_name=name, **props)

    def _create_table(
        self,
        *,
        encryption_key: kms.IKey | None,
        removal_policy: RemovalPolicy,
        deletion_protection: bool,
    ) -> dynamodb.Table:
        sort_key = (
            None
            if self.sort_key_name is None
            else dynamodb.Attribute(name=self.sort_key_name, type=dynamodb.AttributeType.STRING)
        )
        return dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(
                name=self.partition_key_name, type=dynamodb.AttributeType.STRING
            ),
            sort_key=sort_key,
            time_to_live_attribute=self.time_to_live_attribute,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=(
                dynamodb.TableEncryption.AWS_MANAGED
                if encryption_key is None
                else dynamodb.TableEncryption.CUSTOMER_MANAGED
            ),
            encryption_key=encryption_key,
            removal_policy=removal_policy,
            deletion_protection=deletion_protection,
        )

    def _attribute_environment(self) -> dict[str, str]:
        env = {
            contract.ENV_PARTITION_KEY: self.partition_key_name,
            contract.ENV_TTL_ATTRIBUTE: self.time_to_live_attribute,
            contract.ENV_CONNECTION_ID_ATTRIBUTE: self.connection_id_attribute,
            contract.ENV_GRANT_ID_ATTRIBUTE: self.grant_id_attribute,
            contract.ENV_GRANT_TOKEN_ATTRIBUTE: self.grant_token_attribute,
            contract.ENV_SCRATCH_PREFIX_ATTRIBUTE: self.scratch_prefix_attribute,
            contract.ENV_TENANT_ATTRIBUTE: self.tenant_attribute,
        }
        if self.sort_key_name is not None:
            env[contract.ENV_SORT_KEY] = self.sort_key_name
        return env

    def _cleanup_environment(self, max_workers: int) -> dict[str, str]:
        env = {
            **self._attribute_environment(),
            contract.ENV_METRICS_NAMESPACE: self.metrics_namespace,
            contract.ENV_MAX_WORKERS: str(max_workers),
        }
        if self.scratch_bucket is not None:
            env[contract.ENV_SCRATCH_BUCKET] = self.scratch_bucket.bucket_name
            env[contract.ENV_SCRATCH_ROOT] = self.scratch_root
            if self.tenant_scoped_scratch:
                env[contract.ENV_TENANT_SCOPED_SCRATCH] = "true"
        if self.grant_key is not None:
            env[contract.ENV_GRANT_KEY_ARN] = self.grant_key.key_arn
        return env

    def _grant_cleanup_targets(self, websocket_stage: apigwv2.IWebSocketStage | None) -> None:
        fn = self.cleanup_function
        if websocket_stage is not None:
            stack = Stack.of(websocket_stage)
            api_id = websocket_stage.api.api_id
            stage_name = websocket_stage.stage_name
            fn.add_environment(
                contract.ENV_WEBSOCKET_ENDPOINT,
                f"https://{api_id}.execute-api.{stack.region}.{stack.url_suffix}/{stage_name}",
            )
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["execute-api:ManageConnections"],
                    resources=[
                        stack.format_arn(
                            service="execute-api",
                            resource=api_id,
                            resource_name=f"{stage_name}/DELETE/@connections/*",
                            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
                        )
                    ],
                )
            )
        if self.grant_key is not None:
            # Retiring is authorized by the grant's retiring principal (this role), not by IAM;
            # the IAM permission only covers the account's own delegation (KMS developer guide,
            # "Retiring and revoking grants").
            fn.add_to_role_policy(
                iam.PolicyStatement(actions=["kms:RetireGrant"], resources=[self.grant_key.key_arn])
            )
        if self.scratch_bucket is not None:
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["s3:ListBucket"],
                    resources=[self.scratch_bucket.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [f"{self.scratch_root}*"]}},
                )
            )
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["s3:DeleteObject"],
                    resources=[self.scratch_bucket.arn_for_objects(f"{self.scratch_root}*")],
                )
            )

    def _add_scratch_backstop(self, bucket: s3.IBucket, retention: Duration) -> None:
        if lifecycle.can_add_lifecycle_rule(bucket):
            lifecycle.add_scratch_lifecycle_rule(
                bucket,  # type: ignore[arg-type]  # narrowed by can_add_lifecycle_rule
                rule_id=f"session-expiry-scratch-{self.node.addr}",
                scratch_root=self.scratch_root,
                retention=retention,
            )
        else:
            Annotations.of(self).add_warning_v2(
                _WARNING_IMPORTED_BUCKET,
                f"scratch_bucket {bucket.node.path} is imported: no lifecycle backstop rule "
                f"could be added for {self.scratch_root!r}. Add a rule on that prefix "
                "(expiration, abort incomplete multipart uploads after 1 day) where the bucket "
                "is defined.",
            )


def _check_event_source_props(
    *,
    batch_size: int,
    max_batching_window: Duration | None,
    parallelization_factor: int,
    retry_attempts: int,
    max_record_age: Duration,
) -> None:
    """Limits of an event source mapping on a DynamoDB stream (Lambda API reference,
    CreateEventSourceMapping), with two made stricter: ``retry_attempts`` may not be -1
    (infinite) and ``max_record_age`` may not exceed the stream's 24 hour retention."""
    validation.check_int_range("batch_size", batch_size, minimum=1, maximum=10_000)
    if max_batching_window is not None:
        validation.check_duration_range(
            "max_batching_window",
            max_batching_window,
            minimum=Duration.seconds(0),
            maximum=Duration.seconds(300),
        )
    validation.check_int_range(
        "parallelization_factor", parallelization_factor, minimum=1, maximum=10
    )
    validation.check_int_range("retry_attempts", retry_attempts, minimum=0, maximum=10_000)
    validation.check_duration_range(
        "max_record_age", max_record_age, minimum=Duration.seconds(60), maximum=STREAM_RETENTION
    )


def _check_existing_table(
    table: dynamodb.ITable,
    *,
    partition_key_name: str | None,
    sort_key_name: str | None,
    time_to_live_attribute: str | None,
) -> tuple[str, str | None, str]:
    """Check a table passed as ``table=`` and settle its key and TTL attribute names.

    A table of this app (``Table``/``TableV2``) is read from its CloudFormation resource; an
    imported table is taken on trust apart from its stream ARN.

    Raises:
        ValueError: the table has no stream, a stream without old images, no time to live,
            or a key/TTL attribute different from the one given.
    """
    no_stream = ValueError(
        f"table {table.node.path} has no stream: expected "
        "stream=StreamViewType.NEW_AND_OLD_IMAGES on the table (dynamo_stream= on a TableV2), "
        "or table_stream_arn when importing it with Table.from_table_attributes"
    )
    if table.table_stream_arn is None:
        raise no_stream
    cfn = table.node.default_child
    if not isinstance(cfn, (dynamodb.CfnTable, dynamodb.CfnGlobalTable)):
        return (
            contract.DEFAULT_PARTITION_KEY if partition_key_name is None else partition_key_name,
            sort_key_name,
            contract.DEFAULT_TTL_ATTRIBUTE
            if time_to_live_attribute is None
            else time_to_live_attribute,
        )
    # The resolved properties of the table's resource, read the same way for Table (CfnTable)
    # and TableV2 (CfnGlobalTable, whose typed struct getters fail on its lazy values).
    props = Stack.of(table).resolve(cfn._cfn_properties)
    validation.check_key_attribute_types(table.node.path, props)
    view_type = (props.get("streamSpecification") or {}).get("streamViewType")
    if view_type is None:
        raise no_stream
    if isinstance(view_type, str) and view_type not in _VIEW_TYPES_WITH_OLD_IMAGES:
        raise ValueError(
            f"table {table.node.path} has stream view type {view_type}: expected "
            "NEW_AND_OLD_IMAGES (or OLD_IMAGE), since REMOVE records must carry the old image. "
            "The view type cannot change in place: set stream=StreamViewType.NEW_AND_OLD_IMAGES "
            "(dynamo_stream= on a TableV2)."
        )
    keys = {k.get("keyType"): k.get("attributeName") for k in props.get("keySchema") or []}
    own = {
        "partition_key_name": (partition_key_name, keys.get("HASH")),
        "sort_key_name": (sort_key_name, keys.get("RANGE")),
    }
    ttl_spec = props.get("timeToLiveSpecification") or {}
    table_ttl = ttl_spec.get("attributeName") if ttl_spec.get("enabled") is True else None
    if table_ttl is None:
        raise ValueError(
            f"table {table.node.path} has no time to live: expected "
            f"time_to_live_attribute={time_to_live_attribute or contract.DEFAULT_TTL_ATTRIBUTE!r}"
            " on the table"
        )
    own["time_to_live_attribute"] = (time_to_live_attribute, table_ttl)
    for prop, (given, actual) in own.items():
        if given is not None and given != actual:
            raise ValueError(
                f"{prop}={given!r} does not match table {table.node.path}: expected {actual!r}"
            )
    return own["partition_key_name"][1], own["sort_key_name"][1], table_ttl  # type: ignore[return-value]
