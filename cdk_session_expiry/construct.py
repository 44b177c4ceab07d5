"""The ``SessionExpiry`` construct: a short composer of one unit per concern.

Each unit owns its resources, IAM statements and environment variables, and creates them
directly in the ``SessionExpiry`` scope with the ids they always had (construct paths and
logical IDs are a public contract): ``table`` (the session table and attribute names),
``ownership`` (the ownership table of connections, AgentCore sessions and grants), ``cleanup``
(function, role, log group, event source mapping, on-failure destination), ``targets``
(connections, grants, scratch prefixes and their lifecycle backstop), ``agentcore``,
``archive``, ``fanout``, ``session_access`` (runtime layer, ``grant_session_access``),
``alarms``, ``sweeper``, ``grant_sweep``, ``pause_watch`` (a paused cleanup is loud) and
``circuit_breaker``. Prop rules live in ``validation`` and in each feature's module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from . import (
    _kinds,
    assets,
    checkov,
    claim_registrar,
    cleanup,
    custom_steps,
    failure_destination,
    fanout,
    grant_sweep,
    hardening,
    multi_region,
    nag,
    outputs,
    ownership,
    resource_kinds,
    sweeper,
    targets,
    tenant_metrics,
    tool_session_sweep,
    validation,
)
from . import _runtime_contract as contract
from . import table as table_unit
from .agents import agent_memory, agentcore
from .archiving import archive, archive_delivery, archive_query
from .archiving.archive_delivery import ArchiveDelivery
from .change_source import (
    ChangeSource,
    check_table_destination,
    create_stream,
    stream_iterator_age_alarm,
)
from .claim_registrar import ClaimRegistrar
from .custom_steps import CustomCleanupStep
from .filters import CleanupEventFilter
from .monitoring import alarms as alarm_defaults
from .monitoring import dashboard
from .props import SessionExpiryProps
from .session_access import SessionAccess
from .session_limits import SessionLimits
from .switches import circuit_breaker, deferred_work, kill_switch, pause_watch
from .switches import feature_flags as feature_flags_unit
from .switches.circuit_breaker import CircuitBreakerAlarm
from .switches.feature_flags import FeatureFlags

#: Lambda allocates CPU in proportion to memory (1,769 MB = one vCPU). The cleanup is CPU-bound
#: once its calls overlap (botocore's per-call work), so below 1,769 MiB a session costs the same
#: at every size and more memory only cleans faster; above it, one Python process gains little
#: from a second vCPU and pays for it. BENCHMARKS.md's cost table ("Cost per million sessions
#: cleaned") supports 1,769 MiB: the most sessions/s at the lowest cost per session.
DEFAULT_CLEANUP_MEMORY_SIZE = 1769
DEFAULT_CLEANUP_LOG_RETENTION = logs.RetentionDays.THREE_MONTHS
DEFAULT_BATCH_SIZE = 100
#: Two concurrent batches per stream shard (issue 38): with one, the cleanup's CPU (4 shards of
#: a new on-demand table, one vCPU each) and the ownership table's write units (4,000 a second of
#: a new on-demand table: about 1,000 sessions a second) bind side by side, and 100,000 sessions
#: due at once took 129 s (p99, the storm bench's clock); with two the write units alone bind and
#: they take 104 s. It costs nothing per session (the same records, batches and duration); the
#: mapping runs up to twice as many invocations at once (8 of the account's 1,000 concurrent
#: executions for a new table), and Lambda keeps order per item, not per shard (AWS Lambda
#: Developer Guide, "Using AWS Lambda with Amazon DynamoDB", parallelization factor), which the
#: ownership records make safe (``docs/ownership.md``: either order of REMOVE and re-create).
DEFAULT_PARALLELIZATION_FACTOR = 2
DEFAULT_RETRY_ATTEMPTS = 10


#: The signature's default of ``code_interpreter_session_attribute`` (one line in it).
_DEFAULT_CODE_INTERPRETER_ATTRIBUTE = contract.DEFAULT_CODE_INTERPRETER_SESSION_ATTRIBUTE


class SessionExpiry(Construct):
    """A DynamoDB session table whose expired and ended sessions are cleaned up.

    Creates (or attaches to) a session table with time to live and a NEW_AND_OLD_IMAGES
    stream, a cleanup function fed by an event source mapping on REMOVE records, an encrypted
    on-failure queue, CloudWatch alarms, and a Lambda layer with the session runtime for the
    application's own functions (``grant_session_access``).

    The cleanup function, for each removed session: deletes its WebSocket connection
    (``websocket_stage``), retires its KMS grant (``grant_key``), deletes its objects under
    the scratch root (``scratch_bucket``), stops its Amazon Bedrock AgentCore runtime, code
    interpreter and browser sessions (``agent_runtime``, ``code_interpreter``, ``browser``) and
    runs your own steps (``custom_steps``). Each target is optional.

    Every prop is keyword-only. Where a signature default is ``None``, it stands for the
    behaviour given as "Default" below. Units are in the prop's type (``Duration``) or its
    description; ranges are inclusive.

    One rule for every connection, AgentCore session and grant: the cleanup acts on it only if
    it is owned by the removed session's incarnation. With any of ``websocket_stage``,
    ``grant_key``, ``agent_runtime``, ``code_interpreter``, ``browser``, the construct creates
    the ownership table (``ownership_table``, ``Sessions/OwnershipTable``) where
    ``SessionStore`` records who holds each id; the cleanup checks it before every act and
    counts what it refuses (``metric_resources_refused``; see ``cdk_session_expiry.ownership``).

    Args:
        scope: parent construct.
        id: construct id. Renaming it replaces every resource, including the table.
        table: an existing session table to attach to instead of creating one: a
            ``dynamodb.Table``/``TableV2`` of this app, or an imported table given with its
            ``table_stream_arn``. Its stream must carry old images (NEW_AND_OLD_IMAGES or
            OLD_IMAGE): a table of this app without a stream or with a ``KEYS_ONLY``/
            ``NEW_IMAGE`` stream is rejected with the setting to change, and so is one whose
            partition or sort key is a Number or Binary (the session runtime writes its keys as
            Strings). Default: a new table is created (on-demand billing, time to live, a
            NEW_AND_OLD_IMAGES stream, point-in-time recovery, retained on stack deletion).
        partition_key_name: partition key (String) of the session table. Default: ``"pk"``
            for a new table; for a table of this app, its own partition key.
        sort_key_name: sort key (String) of the session table. Default: no sort key for a new
            table; for a table of this app, its own sort key.
        time_to_live_attribute: the table's time to live attribute (a Number, epoch seconds).
            A table of this app without time to live is rejected. Default: ``"expiresAt"``; for
            a table of this app, its own TTL attribute.
        table_encryption_key: customer managed key of a new table, and of the ownership and
            deferred-work tables. Default: the AWS managed key ``aws/dynamodb`` (with ``table=``,
            those tables take that table's customer managed key, if it has one).
        removal_policy: what happens to a new table, and to the ownership and deferred-work
            tables, when it leaves the stack. Default: ``RemovalPolicy.RETAIN`` (always so with
            ``table=``).
        deletion_protection: turn on deletion protection of a new table (new tables only).
            Default: off (the table is still retained by ``removal_policy``).
        connection_id_attribute: the session attribute holding the WebSocket connection id
            (the runtime also writes every connection to the String Set ``connectionIds``).
            The attribute names (this one, ``grant_id_attribute``, ``grant_token_attribute``,
            ``scratch_prefix_attribute``, ``tenant_attribute`` and the AgentCore session
            attributes) must be distinct from each other and from the keys, except that
            ``tenant_attribute`` may be the partition key of a table with a sort key.
            Default: ``"connectionId"``.
        grant_id_attribute: the session attribute holding the KMS grant id. Default:
            ``"grantId"``.
        grant_token_attribute: the session attribute holding the KMS grant token. Default:
            ``"grantToken"``.
        scratch_prefix_attribute: the session attribute holding the session's scratch prefix.
            Default: ``"scratchPrefix"``.
        tenant_attribute: the session attribute holding the tenant. It may be the partition
            key of a table with a sort key (the partition is the tenant, the sort key the
            session id): the cleanup then takes the tenant from the stream record's keys
            (docs: Concepts, "The tenant segment"). Default: ``"tenantId"``.
        cleanup_timeout: timeout of the cleanup function, 1 second..15 minutes. Default:
            5 minutes.
        cleanup_memory_size: memory of the cleanup function in MiB, 128..10,240. CPU comes with
            memory (1,769 MiB = one vCPU) and the cleanup is CPU-bound (botocore's per-call
            work), so below 1,769 MiB a session costs the same and is cleaned more slowly;
            above it one Python process gains little and costs more. BENCHMARKS.md, "Cost per
            million sessions cleaned": at 50 objects a session, about $0.16 per million
            sessions (arm64 duration and requests) at every size up to 1,769 MiB, $0.26 at
            3,008 MiB, and one function cleans ~149 sessions/s at 1,769 MiB against ~86 at
            1,024 (estimates from the bench machine's CPU, whose speed drifts between runs:
            another run of the same code read $0.21 and ~111 sessions/s). Default: 1,769 (one
            vCPU).
        cleanup_log_retention: retention of the cleanup function's log group. Default:
            three months.
        function_encryption_key: customer managed KMS key that encrypts the environment
            variables and the log groups of the cleanup, sweeper and grant sweep functions,
            and the archive's Firehose delivery error log group (the functions' roles get
            ``kms:Decrypt``; for a key of this app the key policy gets a statement for
            ``logs.<region>.amazonaws.com``, an imported key gets a synth warning saying what
            its policy needs). Closes checkov's CKV_AWS_173 and CKV_AWS_158.
            Default: AWS managed encryption.
        cleanup_reserved_concurrency: reserved concurrency of the cleanup function, at least
            1. The event source mapping runs at most one invocation per shard and
            ``parallelization_factor``: below that the cleanup is throttled and falls behind.
            Default: none reserved (the mapping bounds it).
        expiry_sweep_reserved_concurrency: reserved concurrency of the sweeper, at least
            ``expiry_sweep_workers`` (one per worker is enough); only with
            ``expiry_sweep_interval``, and exactly one per worker below a minute. Default: none
            reserved, except one per worker for a sub-minute sweeper.
        max_workers: cleanup calls in flight per invocation (the step pool), 1..64; one
            session's steps run side by side, and a session waiting for another's shared
            ``DeleteObjects`` does not count. Default: 32 (BENCHMARKS.md, at 20 ms a call: with
            0 scratch objects 32 in flight reach ~12 times the one-call-at-a-time baseline
            where 16 reach ~10.5 times; with 50 objects a session the handler is CPU-bound on
            the bench machine and both reach ~10 times).
        metrics_namespace: CloudWatch namespace of the runtime's embedded metrics. Default:
            ``"SessionExpiry"``.
        metrics_tenant_dimension: also emit every metric of a tenant-scoped session (its old
            image's ``tenant_attribute``) under a second dimension set with ``Tenant``, beside
            the aggregate one the alarms watch; for platforms with few tenants: each tenant adds
            about 10 custom metrics, about $3 a tenant a month at $0.30 a metric (Amazon
            CloudWatch pricing, December 2026; docs: Operating it, "Expiry by tenant").
            Default: ``False`` (the tenant is a property of the EMF documents only, read by
            Logs Insights and ``tenant_insights``, at no metric cost).
        tenant_insights: create three CloudWatch Contributor Insights rules
            (``AWS::CloudWatch::InsightRule``, ``Sessions/TenantInsights``) on the cleanup's
            log group: top tenants by sessions cleaned (``SessionsCleaned``), failed
            (``CleanupFailures``) and resources refused (``ResourcesRefused``). Cost: $0.50 a
            rule a month plus $0.02 per million matched log events (Amazon CloudWatch pricing,
            December 2026). Default: ``False`` (Logs Insights and the dashboard's top-tenants
            widget still show them).
        event_filter: which REMOVE records reach the cleanup function.
            ``CleanupEventFilter.TTL_DELETES_ONLY`` also drops explicit ends **and** TTL deletes
            replicated into global-table replicas (they carry no ``userIdentity``); it is
            rejected with ``expiry_sweep_interval`` and by ``grant_session_access`` /
            ``session_environment()``, whose deletes carry no ``userIdentity`` either. Default:
            ``CleanupEventFilter.ALL_REMOVES`` (TTL deletes and explicit ends).
        batch_size: records per invocation, 1..10,000. Default: 100.
        max_batching_window: how long to gather records before invoking, 0..300 seconds.
            Default: none, Lambda invokes as soon as records arrive.
        parallelization_factor: concurrent batches per shard, 1..10; Lambda keeps order per
            item above 1. Default: 2 (a storm of 100,000 sessions due at once then waits for
            the ownership table's write units, not the cleanup's CPU: docs, Benchmarks,
            "Sizing").
        retry_attempts: retries of a failing batch (after bisecting), 0..10,000; infinite
            (``-1``) is rejected. Default: 10.
        max_record_age: records older than this go to the on-failure destination, 60
            seconds..24 hours (the stream's retention); with the Kinesis ``change_source`` up
            to its retention, at most 7 days. Default: 6 hours.
        failure_queue: on-failure destination of the event source mapping. Not with
            ``failure_destination_bucket``. Default: a new SQS queue with SQS-managed
            encryption, SSL enforced and 14 days' retention.
        websocket_stage: WebSocket API stage whose connections are deleted. Set: the cleanup's
            endpoint is ``https://{api}.execute-api.{region}.amazonaws.com/{stage}`` and its role
            gets ``execute-api:ManageConnections`` on ``…/{stage}/DELETE/@connections/*``; each
            connection is deleted only when its ownership record shows the removed session held
            it. Default: no connection cleanup.
        grant_key: KMS key whose per-session grants are retired. The grants must name
            ``cleanup_role`` as retiring principal (``grant_session_access`` configures the
            session runtime to do so), and the cleanup retires a grant only when its ``Name``
            names the removed item's key (``SessionStore.create_grant`` names it so; others
            are refused, ``GrantsRefused``; a grant recorded with an ownership record is retired
            only when that record shows the removed session held it, ``ResourcesRefused``). The
            cleanup role gets ``kms:RetireGrant`` and ``kms:ListGrants`` on this key only.
            Turns the grant sweep on. Default: no grant cleanup.
        grant_sweep_interval: how often the grant sweep (on whenever ``grant_key`` is set)
            retires grants of gone or expired sessions, the grants' backstop: whole minutes, 5
            minutes..1 day. Only with ``grant_key``. Cost per run: one invocation, one
            ``ListGrants`` per 100 grants of the key, one strongly consistent ``GetItem`` per
            grant older than 15 minutes (about one per live session), one ``RetireGrant`` per
            grant retired; hourly with 10,000 live sessions: 24 invocations, 2,400 ListGrants
            and 240,000 read request units a day. Default: 1 hour.
        grant_key_grant_quota: the grants ``grant_key`` may hold, KMS's "Grants per KMS key"
            quota (AWS KMS Developer Guide, "Resource quotas": 50,000, adjustable): the grant
            sweep alarms (``GrantCeilingAlarm``) when a pass finds more than 80 % of it on the
            key, before a ``CreateGrant`` fails. With a grant per live session it caps the live
            sessions of one key. An integer, 1 or more; set it to your account's raised quota.
            Only with ``grant_key``. Default: 50,000.
        grant_retire_budget: ``RetireGrant`` requests a second for every cleanup invocation
            together (``SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET`` on the cleanup function): one
            counter per wall-clock second in the ownership table that every invocation takes
            its requests from (`session_expiry_runtime.core.shared_pace`), under KMS's
            ``RetireGrant`` request rate, which the whole account and Region share (AWS KMS
            Developer Guide, "Request quotas": 50 a second by default, adjustable). Two
            seconds' budgets can meet within one second's span, so keep twice the budget, plus
            the grant sweep's 5 and the application's own grant calls, under the quota. An
            integer, 1..10,000. Only with ``grant_key``. Default: 10.
        scratch_bucket: bucket holding per-session scratch objects under ``scratch_root``.
            Set: the cleanup role gets ``s3:ListBucket`` with condition ``s3:prefix`` =
            ``sessions/*`` and ``s3:DeleteObject`` on ``bucket/sessions/*``, and a bucket of this
            app gets the lifecycle backstop (``scratch_retention``). Default: no scratch cleanup.
        scratch_root: prefix of all session scratch prefixes: a literal S3 prefix ending in
            ``/``, at most 256 bytes; empty, a leading ``/``, wildcards (``*`` ``?`` ``[`` ``]``
            ``$``), ``//`` and ``.``/``..`` segments are rejected, never rewritten. Only with
            ``scratch_bucket``. Default: ``"sessions/"``.
        tenant_scoped_scratch: session prefixes are ``<root><tenant>/<id>/<incarnation>/``
            instead of ``<root><id>/<incarnation>/``, and the cleanup refuses a prefix outside
            the session's own tenant. With ``tenant_attribute`` = ``partition_key_name`` on a
            table with a sort key, the cleanup takes the tenant from the stream record's keys;
            otherwise it is the old image's ``tenant_attribute``, taken on trust (the session id
            and the incarnation still come from the record's keys; docs: Concepts, "The tenant
            segment"). Default: off.
        scratch_retention: lifecycle backstop: objects under the scratch root expire this
            long after creation, in whole days, at least 1 day. Only with ``scratch_bucket``;
            needs a bucket of this app (an imported bucket gets a synth warning instead). Must
            exceed ``max_session_lifetime`` + 2 days (TTL's deletion lag), or synth fails naming
            both props: the backstop must never delete a live session's objects. Default: 7
            days, well beyond TTL's typical 48 hour deletion lag.
        alarm_iterator_age_threshold: the iterator age alarm fires above this, 1 minute..less
            than 24 hours (the Kinesis ``change_source``'s retention with it). Default: 1 hour.
        alarm_actions: actions of every alarm (e.g. ``SnsAction``). Default: none.
        alarm_skipped_records: alarm when the cleanup skips a record for a cause that loses
            its cleanup (``RecordsSkipped`` ``NoOldImage``/``MissingAttributes``/
            ``NoSequenceNumber``, ``ScratchPrefixesRefused``, ``GrantsRefused``) or refuses a
            resource another session owns (``ResourcesRefused`` ``NotOwned``/``Unclaimed``:
            a forged item or a writer bypassing ``SessionStore``; runbook in the alarm's
            description, ``alarms.SKIPPED_RECORDS_DESCRIPTION``; ``skipped_records_alarm``;
            docs: Operating it, "Skipped-records runbook").
            Cost: one metric-math alarm. Default: ``True``.
        expiry_sweep_interval: run the expiry sweeper this often (whole minutes from 1 minute
            to 1 day, or 5, 6, 10, 12, 15, 20 or 30 seconds: started every minute with reserved
            concurrency of one per worker, a pass every interval within the run): a scheduled
            function, fanned out over ``expiry_sweep_workers``, deletes
            every session whose TTL has passed, so it is cleaned within the interval plus
            processing time instead of TTL's "within a few days". Adds a sparse index
            ``expirySweep`` (``expiryShard`` + TTL, keys only) on a new table (a ``table=`` of
            this app must already have it, and the error gives the
            ``add_global_secondary_index(...)`` call; an imported table gets a synth warning),
            the function, an EventBridge rule per five workers and an errors alarm. Cost: one
            extra index write per session create/touch, one Query per shard (4) and one Lambda
            invocation per worker (4) per interval, one DeleteItem per swept session; below a
            minute each worker's run lasts the minute, about $127 a month with the defaults at
            5 s (docs: Benchmarks and costs). Default: off, TTL alone.
        expiry_sweep_shards: shards of the sweep index (1..64): the session runtime writes
            each session's shard (its key's CRC-32 modulo this) on create and touch, each
            shard is one partition of the index (1,000 write units a second) and costs one
            Query per pass. Lowering it on a live table leaves sessions written into the
            shards above until their next touch to TTL alone. Only with
            ``expiry_sweep_interval``. Default: 4.
        expiry_sweep_workers: sweeper invocations per scheduled time, 1..20, at most one per
            shard: worker ``k`` owns the shards ``i`` with ``i % workers == k``. One EventBridge
            rule per 5 workers (each rule has up to five targets: Amazon EventBridge API
            Reference, PutTargets) invokes them asynchronously at once and Lambda runs them
            side by side (below a minute with reserved concurrency of one per worker). A run
            starts no call after its schedule period ends, so two runs never overlap on one
            shard. Each worker deletes about 420-570 due sessions a second at 1,024 MB
            (BENCHMARKS.md, storm). Only with ``expiry_sweep_interval``. Default: 4.
        expiry_sweeper_memory_size: memory of the sweeper function, MB, 128..10,240. Its
            DeleteItems are CPU-bound and Lambda gives CPU in proportion to memory (one vCPU
            at 1,769 MB: AWS Lambda Developer Guide, "Configuring Lambda function memory"):
            the sweep's rate per worker grows with it, and so does a sub-minute sweeper's cost,
            whose runs last their minute (docs: Benchmarks and costs). Only with
            ``expiry_sweep_interval``. Default: 1,024 (with 4 workers, 100,000 sessions due at
            once are deleted in about a minute).
        alarm_ttl_health_window: alarm when time to live deleted no session over this window
            (1 hour..1 day) while the table was written: the signature of TTL values in
            milliseconds or the wrong attribute name (``ttl_health_alarm``). Expected to fire
            for an app that ends every session explicitly. Cost: one alarm (metric math on 2-3
            metrics). Default: off.
        cleanup_enabled: the kill switch: ``False`` disables the event source mapping. Lambda
            stops reading the stream and resumes where it stopped when enabled again; records
            older than ``max_record_age`` by then go to the on-failure destination, and the
            stream keeps them 24 hours at most (docs: Operating it, "Kill switch"). ``False``
            gives a synth warning saying so (``kill_switch.WARNING_CLEANUP_PAUSED``), and the
            paused-cleanup alarm fires ``alarm_cleanup_paused_after`` after the deploy.
            Default: ``True``.
        cleanup_dry_run: the cleanup logs and counts (``SessionsWouldBeCleaned``) what it would
            clean and changes nothing (no DeleteConnection, RetireGrant, DeleteObjects, archive
            or event); the records are consumed. Cost: one ListObjectsV2 and one ListGrants per
            session. The sweeper, if on, only counts too (``SessionsWouldBeSwept``), and so does
            the grant sweep (``GrantsWouldBeRetired``). Default: ``False``.
        archive_bucket: write every cleaned session's old image as JSON under
            ``archive_prefix`` (``date=YYYY-MM-DD/tenant=<tenant>/<session key>/<sequence
            number>.json``) before any other cleanup step; a failed write fails the record and
            nothing else is done for it. Encrypted with the bucket's KMS key when it has one.
            IAM: ``s3:PutObject`` on the archive prefix only. Cost: one PutObject per session,
            S3 storage of ~1-5 KB per session. Default: no archive.
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
            after creation, whole days, later than the transition; the setting that bounds
            archive cost. Default: kept forever.
        event_bus: put one ``Session Cleaned`` event (source ``cdk-session-expiry``) per cleaned
            session on this bus, 10 per PutEvents call; a failed entry fails its record. For
            consumers that would otherwise read the stream (which serves about two readers).
            Cost: EventBridge custom events, one per session. Default: no events.
        failure_destination_bucket: S3 on-failure destination instead of the SQS queue: Lambda
            writes the failed batch's metadata and whole payload there, so it can be replayed
            after the stream's 24 hours; alarm on ``OnFailureDestinationDeliveredEventCount``.
            Not with ``failure_queue``. Cost: one S3 object per failed batch. Default: an SQS
            queue (metadata only; replay within 24 hours).
        agent_runtime: the Amazon Bedrock AgentCore runtime whose session each removed session
            names (``agent_runtime_session_attribute``) is stopped (``StopRuntimeSession``): a
            ``Runtime``/``CfnRuntime`` of this app or an import (``IRuntimeRef``), or the
            runtime's ARN ``arn:<partition>:bedrock-agentcore:<region>:<account>:runtime/<id>``
            in the stack's Region, where ``<id>`` is the runtime's name (a letter, then up to
            99 letters, digits or ``_``), a ``-`` and exactly 10 letters or digits
            (``[a-zA-Z][a-zA-Z0-9_]{0,99}-[a-zA-Z0-9]{10}``, the ``agentRuntimeId`` pattern of
            the Amazon Bedrock AgentCore Control API Reference, GetAgentRuntime). A token is
            taken as it is. IAM: ``bedrock-agentcore:StopRuntimeSession`` on the runtime and on
            ``…/runtime-endpoint/<qualifier>`` (``DEFAULT`` without one) only. Cost: one call
            per session that names one. Default: no runtime sessions stopped.
        agent_runtime_qualifier: the runtime endpoint (qualifier) of ``StopRuntimeSession``,
            e.g. ``"prod"``: an endpoint name (a letter, then up to 47 letters, digits or
            ``_``). Only with ``agent_runtime``. Default: none, AgentCore's ``DEFAULT``
            endpoint.
        code_interpreter: the AgentCore code interpreter whose sessions are stopped
            (``StopCodeInterpreterSession``): a custom one of this app
            (``ICodeInterpreterCustomRef``, e.g. ``CodeInterpreterCustom``,
            ``CfnCodeInterpreterCustom.from_code_interpreter_id``), its ARN or its identifier
            (``<name>-<10 letters or digits>``). The AWS-managed ``"aws.codeinterpreter.v1"``
            (or its ``…:aws:code-interpreter/…`` ARN) raises ``ValueError`` unless
            ``allow_stopping_shared_aws_managed_tool_sessions``. IAM:
            ``bedrock-agentcore:StopCodeInterpreterSession`` on it only, for the cleanup role
            and every function given ``grant_session_access``. Default: none.
        browser: the AgentCore browser whose sessions are stopped (``StopBrowserSession``):
            ``IBrowserCustomRef`` (e.g. ``BrowserCustom``), ARN or identifier of a custom one;
            the AWS-managed ``"aws.browser.v1"`` (or its ``…:aws:browser/…`` ARN) only with
            ``allow_stopping_shared_aws_managed_tool_sessions``. IAM:
            ``bedrock-agentcore:StopBrowserSession`` on it only. Default: none.
        allow_stopping_shared_aws_managed_tool_sessions: accept the AWS-managed
            ``aws.codeinterpreter.v1`` / ``aws.browser.v1`` as ``code_interpreter`` /
            ``browser``. **Risk**: the ARN of an AWS-managed tool names one resource shared by
            every application of the account in the Region, so the cleanup role and every
            function given ``grant_session_access`` may stop *any* application's sessions of
            that tool, and AWS offers no IAM condition to narrow it (Service Authorization
            Reference, "Actions, resources, and condition keys for Amazon Bedrock AgentCore":
            no condition key for ``StopCodeInterpreterSession``/``StopBrowserSession`` nor for
            the AWS-managed ``code-interpreter``/``browser`` resource types). The statements
            carry the Sids ``StopSharedAwsManagedCodeInterpreterSessions`` /
            ``StopSharedAwsManagedBrowserSessions`` and no condition; the ownership records are
            then the only guard of the cleanup. Prefer a ``CodeInterpreterCustom`` /
            ``BrowserCustom`` of the app. ``ValueError`` when set without an AWS-managed tool.
            Default: ``False`` (AWS-managed tools are refused).
        tool_session_sweep_interval: how often the tool-session sweep (on whenever a custom
            ``code_interpreter`` or ``browser`` is set; an AWS-managed one is never listed)
            stops the tools' running sessions whose
            ownership record names a session gone past the stream path's bound or expired, the
            tool sessions' backstop (``tool_session_sweep``): whole minutes, 5 minutes..1 day.
            Only with a custom ``code_interpreter`` or ``browser`` (``ValueError`` otherwise).
            IAM:
            ``bedrock-agentcore:ListCodeInterpreterSessions`` / ``ListBrowserSessions`` on
            those tools only. Cost per run: one invocation, two list calls per tool plus one per
            100 running sessions, two strongly consistent ``GetItem`` per recorded running
            session older than 15 minutes, one ``Stop…Session`` per session stopped; hourly with
            1,000 running tool sessions: 24 invocations, about 100 list calls and 48,000 read
            request units a day. Default: 1 hour.
        agent_runtime_session_attribute: the session attribute holding the AgentCore runtime
            session id (written by ``SessionStore.create(..., runtime_session_id=...)`` or
            ``attach_agent_session``); distinct from every other attribute. Default:
            ``"agentRuntimeSessionId"``.
        code_interpreter_session_attribute: the session attribute holding the code
            interpreter session id. Default: ``"codeInterpreterSessionId"``.
        browser_session_attribute: the session attribute holding the browser session id.
            Each of these three holds the latest id of its kind; every id of a kind is also in
            the String Set ``agentRuntimeSessionIds``/``codeInterpreterSessionIds``/
            ``browserSessionIds``, and the session's incarnation is in ``incarnation``: fixed
            names no prop may take. Default: ``"browserSessionId"``.
        custom_steps: your own cleanup steps
            ([`CustomCleanupStep`][cdk_session_expiry.CustomCleanupStep]): each directory's
            contents are copied beside the runtime in the cleanup function's code, and each
            step's handler runs once per removed session, side by side with the built-in steps
            (contract: docs, "Custom cleanup steps"). Grant what a step needs to the step
            itself (``secret.grant_read(step)``; its principal is ``cleanup_role``). Default:
            none.
        max_session_lifetime: a session's absolute lifetime from its creation, whole seconds
            from 1 minute to 365 days, handed to the session runtime
            (``SESSION_EXPIRY_MAX_SESSION_LIFETIME_SECONDS``): no heartbeat sets the time to
            live past it, and from then on the session is expired. With ``scratch_bucket``,
            ``scratch_retention`` must exceed it plus TTL's deletion lag (2 days). Default: 8
            hours, Amazon Bedrock AgentCore Runtime's default maximum session lifetime.
        grant_operations: the KMS grant operations a session grant may allow
            (``kms:GrantOperations`` of ``grant_session_access(fn, create_grants=True)``);
            never ``CreateGrant``; while ``bind_grants_to_session``, only operations that take
            an encryption context. Default: ``Decrypt``, ``Encrypt``, ``GenerateDataKey``.
        grant_grantees: the roles that may receive session grants (``kms:GranteePrincipal``):
            ``iam.IRole`` (a role ARN: ``iam.Role.from_role_arn(self, "Grantee", arn)``; else
            ``PropTypeError``). Needed for ``grant_session_access(fn, create_grants=True)``.
            Default: none.
        bind_grants_to_session: require every session grant to carry an
            ``EncryptionContextSubset`` constraint (``kms:GrantConstraintType``), which
            ``SessionStore.create_grant`` adds by default (the session's encryption context).
            ``False`` allows unbound grants. Default: ``True``.
        alarm_cleanup_paused_after: the paused-cleanup alarm (``cleanup_paused_alarm``) fires when
            the event source mapping has been disabled (``cleanup_enabled=False``, the kill switch,
            the circuit breaker) longer than this, up to 15 minutes later (3 of 3 five-minute
            periods above it): whole seconds, at least 5 minutes, and small enough that the alarm
            fires before records start to leave the stream — at most 23 hours 44 minutes 59 seconds
            on the DynamoDB stream's 24 hours (the Kinesis ``change_source``'s retention less 15
            minutes and 1 second with it; larger raises ``ValueError`` naming the largest accepted).
            Always on: a function (``pause_watch``) reads the mapping every 5 minutes
            (``GetEventSourceMapping``) and writes ``CleanupPausedSeconds`` (now - its
            ``LastModified`` while ``Disabled``, 0 while enabled;
            ``metric_cleanup_paused_seconds``). Cost: about $0.51 a month, mostly the metric and two
            alarms (docs: Operating it, "Paused cleanup"). Default: 12 hours, half the stream's
            retention.
        circuit_breaker: pause the cleanup when one of ``circuit_breaker_alarms`` goes to
            ``ALARM`` (``UpdateEventSourceMapping`` ``Enabled=false``, in place: never deleted
            or replaced) and resume it through a half-open probe: after
            ``circuit_breaker_cool_down``, once those alarms have left ``ALARM``, it enables the
            mapping; an alarm within 15 minutes opens it again, none closes it. It never undoes
            a change it did not make (the kill switch, a deploy; with ``cleanup_enabled=False``
            it never enables), and is never forced closed: a breaker held open raises the
            paused-cleanup alarm. Refused (``ValueError`` at synth) for a mapping whose
            ``StartingPosition`` is ``LATEST``, which can skip records when toggled
            (awsdocs/aws-lambda-developer-guide#487). Adds ``Sessions/CircuitBreaker``
            (``circuit_breaker``): an SSM parameter holding its state, a function with reserved
            concurrency 1, an EventBridge rule on the alarms' state changes and one every
            5 minutes, an errors alarm and the metric ``CircuitBreakerState`` (on the
            dashboard). Cost: about $0.41 a month (docs: Operating it, "Circuit breaker").
            Default: ``False``.
        circuit_breaker_alarms: the alarms that open the breaker
            ([`CircuitBreakerAlarm`][cdk_session_expiry.CircuitBreakerAlarm]): ``ERRORS``,
            ``FAILURE_DESTINATION``, ``THROTTLES``,
            ``SKIPPED_RECORDS`` (needs ``alarm_skipped_records``) and ``ITERATOR_AGE``, which
            only opens a closed breaker and is refused alone (``ValueError``: iterator age rises
            while the cleanup is paused and would hold the breaker open). Only with
            ``circuit_breaker``. Default: ``[ERRORS, FAILURE_DESTINATION]``, the cleanup's
            failures.
        circuit_breaker_cool_down: how long the breaker stays open before its probe, whole
            seconds, at least 5 minutes and less than ``alarm_cleanup_paused_after`` and
            ``max_record_age`` (a later probe would send every waiting record to the on-failure
            destination). Only with ``circuit_breaker``. Default: 15 minutes.
        archive_query: make the archive queryable: a Glue database and table over
            ``archive_prefix`` (aws-cdk-lib's ``aws_glue.S3Table``, the Hive JSON SerDe, one
            column per field of the archived record), partition projection on ``date``
            (``date=YYYY-MM-DD``) and, with ``tenant_scoped_scratch``, on ``tenant``
            (``injected``: every query names its tenant), so no crawler or ``MSCK REPAIR``
            is needed; an Athena workgroup whose enforced result location
            (``<archive prefix>-query-results/``, expiring after 30 days) is encrypted like the
            bucket (SSE-KMS with its key, else SSE-S3); three named queries: a session's
            history, sessions per tenant per day, swept vs expired by time to live
            (``archive_query_resources``; docs: Archive and audit). Only with
            ``archive_bucket``. Cost: Glue's catalog free tier covers it; Athena bills per TB
            scanned (5 USD). Default: ``False`` (the archive is written, not catalogued).
        archive_delivery: how the archive is written: ``ArchiveDelivery.PUT_OBJECT`` (one
            ``PutObject`` per session) or ``ArchiveDelivery.FIREHOSE``: an Amazon Data Firehose
            stream (``archive_delivery_stream``) takes the invocation's records in
            ``PutRecordBatch`` calls of up to 500 and writes GZIP objects of many sessions under
            the same ``date=/tenant=`` partitions (dynamic partitioning), within 5 minutes.
            The gate holds: nothing else is done for a record until Firehose accepted it
            (Firehose keeps an accepted record 24 hours while it retries S3; an alarm fires
            when records wait over an hour). IAM: ``firehose:PutRecordBatch`` on that stream
            only. Cost: fewer calls and objects per session, Firehose ingestion and dynamic
            partitioning per GB (docs: Archive and audit, "When to switch"). Only with
            ``archive_bucket``. Default: ``ArchiveDelivery.PUT_OBJECT``.
        agent_memory: the Amazon Bedrock AgentCore Memory whose short-term events of each
            removed session the cleanup deletes (``ListEvents`` by actor and session id,
            ``DeleteEvent`` each; paginated, bounded by the time guard, idempotent): a
            ``Memory``/``CfnMemory`` (``IMemoryRef``), its ARN in the stack's Region or its id.
            Only memory sessions recorded with ``SessionStore.attach_memory_session`` and owned
            by the removed incarnation (ownership records of kind ``agentMemory``; creates the
            ownership table). IAM: ``bedrock-agentcore:ListEvents`` and ``DeleteEvent`` on that
            memory only. Default: no memory data deleted (events expire by the memory's
            ``eventExpiryDuration``).
        agent_memory_record_namespaces: also delete the long-term memory records filed under
            these namespace templates for the session's actor and session id
            (``ListMemoryRecords``, ``DeleteMemoryRecord``; IAM on the memory only). Each must
            contain ``{sessionId}`` (records of other namespaces cannot be told apart by
            session and are never deleted) and no placeholder but ``{actorId}`` and
            ``{sessionId}``, e.g. ``"/strategies/summary-a1b2c3/actors/{actorId}/sessions/
            {sessionId}/"``. Only with ``agent_memory``. Default: none, records stay.
        resource_targets: switch on declared resource kinds (``session_expiry_runtime/
            kinds.py``): each key is a kind's prop, each value its target (an identifier or
            ARN, as the kind accepts). The cleanup then releases every id of that kind the
            removed session recorded with ``SessionStore.attach_resource`` and owns (ownership
            records: creates the ownership table), with the kind's one call per id; IAM: that
            action on the target only. The keys, calls and what remains: docs: AgentCore,
            "What the cleanup releases, and what remains". Default: none.
        global_table: the table is a DynamoDB global table (version 2019.11.21) and this
            construct is attached to one of its replicas, one stack per Region (docs:
            Multi-Region). Each session is then cleaned once, in its owner Region (the Region
            whose replica ``SessionStore.create`` wrote it in, stamped as ``ownerRegion``): the
            event source mapping's filter passes only REMOVEs whose old image names this
            stack's Region, the cleanup skips any other (``RecordsSkipped``, ``OtherRegion``),
            and the expiry sweeper Queries only this Region's shards. Needs
            ``CleanupEventFilter.ALL_REMOVES`` (a replicated TTL delete carries no
            ``userIdentity``). Raises ``ValueError`` when ``True`` with the construct's own
            table or a table of this app without replicas. Default: derived, ``True`` for a
            ``TableV2`` (or ``Table``) of this app with replicas, ``False`` otherwise (an
            imported replica is taken on trust: say ``True``).
        change_source: where the cleanup reads the table's changes from (docs: Change source).
            ``ChangeSource.kinesis(stream=None, retention=None)``: Kinesis Data Streams for
            DynamoDB, for retention past a DynamoDB stream's 24 hours: a new on-demand stream
            encrypted with ``aws/kinesis`` (retention 7 days by default, up to 365 days) or the
            one given, the table's Kinesis streaming destination (``ApproximateCreationDateTime``
            in milliseconds; a ``table=`` must already stream into it), the event source
            mapping on the Kinesis stream with the same guarantees (filter under ``data``,
            bisect, bounded retries and record age, partial batch response by Kinesis sequence
            number, on-failure destination) and an alarm on the stream's iterator age;
            ``max_record_age``, ``alarm_iterator_age_threshold`` and
            ``alarm_cleanup_paused_after`` are then bounded by its retention (record age at most
            7 days). Default: ``ChangeSource.dynamodb_stream()``, the table's DynamoDB stream.
        feature_flags: kill switches in AWS AppConfig, changed without a deploy (docs: Operating
            it, "Feature flags"): ``True`` or ``FeatureFlags(deployment_strategy=...,
            poll_interval=...)`` adds an AppConfig application, an environment whose monitors
            are ``errors_alarm`` and ``failure_queue_alarm`` (a bad change rolls back), a
            feature-flag profile (flags ``enabled``, ``dryRun`` and one per step by its metric
            ``Action``) with a JSON Schema validator, a deployment strategy (default: all at
            once, 5 minutes of bake), the initial version (every lever as deployed) and its
            deployment; the cleanup reads the flags every ``poll_interval`` (default 30 seconds;
            15 seconds to 1 hour) with ``appconfig:StartConfigurationSession`` and
            ``GetLatestConfiguration`` on that profile only. A step switched off is reported
            ``disabled`` and its work deferred to its own table, ``DeferredWorkTable`` (kept 14
            days; only the cleanup role may write it: ``PutItem``, ``UpdateItem``,
            ``DeleteItem``, ``Query`` on its ``deferredWork`` index; no ``grant_session_access``
            role gets any action on it), ``enabled`` off defers every record before any call; a
            drain every 5 minutes does the deferred work once its flag is on again, after
            reading each record back from the session table (``dynamodb:BatchGetItem``): a
            record whose item is still there in the same incarnation is refused and kept for an
            operator. Alarms ``FeatureFlagsReadFailuresAlarm``, ``DeferredWorkAgeAlarm`` (1 day)
            and ``DeferredWorkRefusedAlarm``. Attributes: ``feature_flags``,
            ``deferred_work_table``. Default: off.
        alarm_runbook_base_url: where the operator's page (docs: Operating it) is served, so
            each alarm's description ends with a link a paged engineer can open: ``Runbook:
            <alarm_runbook_base_url>#alarm-<name>``, e.g.
            ``"https://docs.example.com/session-expiry/operating/"`` (the site ``make docs``
            builds, hosted by you). An ``https://`` URL with a host, no ``#`` fragment, no
            whitespace, at most 100 characters (CloudWatch's 1,024 characters a description);
            else ``ValueError`` naming it. Default: ``docs/operating.md``, the page's path in
            this library's repository.

    Raises:
        PropTypeError: a prop of the wrong type (e.g. ``batch_size="100"`` or
            ``max_record_age=3600`` instead of ``Duration.hours(1)``): a ``TypeError`` and a
            ``ValueError``; the message names the prop, the value and the type expected.
        ValueError: a prop is out of range or inconsistent, or a combination would silently
            lose a cleanup (docs: The construct, "Guards at synth"); the message names the prop,
            the value and what is expected. Unresolved tokens are not validated.
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
        cleanup_timeout: Duration | None = None,
        cleanup_memory_size: int = DEFAULT_CLEANUP_MEMORY_SIZE,
        cleanup_log_retention: logs.RetentionDays = DEFAULT_CLEANUP_LOG_RETENTION,
        function_encryption_key: kms.IKey | None = None,
        cleanup_reserved_concurrency: int | None = None,
        expiry_sweep_reserved_concurrency: int | None = None,
        max_workers: int = contract.DEFAULT_MAX_WORKERS,
        metrics_namespace: str = contract.DEFAULT_METRICS_NAMESPACE,
        metrics_tenant_dimension: bool = False,
        tenant_insights: bool = False,
        event_filter: CleanupEventFilter = CleanupEventFilter.ALL_REMOVES,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_batching_window: Duration | None = None,
        parallelization_factor: int = DEFAULT_PARALLELIZATION_FACTOR,
        retry_attempts: int = DEFAULT_RETRY_ATTEMPTS,
        max_record_age: Duration | None = None,
        failure_queue: sqs.IQueue | None = None,
        websocket_stage: apigwv2.IWebSocketStage | None = None,
        grant_key: kms.IKey | None = None,
        grant_sweep_interval: Duration | None = None,
        grant_key_grant_quota: int | None = None,
        grant_retire_budget: int | None = None,
        scratch_bucket: s3.IBucket | None = None,
        scratch_root: str | None = None,
        tenant_scoped_scratch: bool = False,
        scratch_retention: Duration | None = None,
        alarm_iterator_age_threshold: Duration | None = None,
        alarm_actions: Sequence[cloudwatch.IAlarmAction] | None = None,
        alarm_skipped_records: bool = True,
        expiry_sweep_interval: Duration | None = None,
        expiry_sweep_shards: int = sweeper.SWEEP_SHARDS,
        expiry_sweep_workers: int = sweeper.DEFAULT_SWEEP_WORKERS,
        expiry_sweeper_memory_size: int = sweeper.DEFAULT_SWEEPER_MEMORY_SIZE,
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
        agent_runtime: agentcore.AgentRuntimeTarget | None = None,
        agent_runtime_qualifier: str | None = None,
        code_interpreter: agentcore.CodeInterpreterTarget | None = None,
        browser: agentcore.BrowserTarget | None = None,
        allow_stopping_shared_aws_managed_tool_sessions: bool = False,
        tool_session_sweep_interval: Duration | None = None,
        agent_runtime_session_attribute: str = contract.DEFAULT_AGENT_RUNTIME_SESSION_ATTRIBUTE,
        code_interpreter_session_attribute: str = _DEFAULT_CODE_INTERPRETER_ATTRIBUTE,
        browser_session_attribute: str = contract.DEFAULT_BROWSER_SESSION_ATTRIBUTE,
        custom_steps: Sequence[CustomCleanupStep] | None = None,
        max_session_lifetime: Duration | None = None,
        grant_operations: Sequence[str] | None = None,
        grant_grantees: Sequence[iam.IRole] | None = None,
        bind_grants_to_session: bool = True,
        alarm_cleanup_paused_after: Duration | None = None,
        circuit_breaker: bool = False,
        circuit_breaker_alarms: Sequence[CircuitBreakerAlarm] | None = None,
        circuit_breaker_cool_down: Duration | None = None,
        archive_query: bool = False,
        archive_delivery: ArchiveDelivery = ArchiveDelivery.PUT_OBJECT,
        agent_memory: agent_memory.AgentMemoryTarget | None = None,
        agent_memory_record_namespaces: Sequence[str] | None = None,
        resource_targets: Mapping[str, str] | None = None,
        global_table: bool | None = None,
        change_source: ChangeSource | None = None,
        feature_flags: FeatureFlags | bool | None = None,
        alarm_runbook_base_url: str | None = None,
    ) -> None:
        validation.check_prop_types(locals())
        props = SessionExpiryProps.of(locals())
        super().__init__(scope, id)
        self._check_props(props)
        self._add_resources(props)
        self._finish(props)

    # --- composition: each step hands one concern to its own module -------------------------

    def _add_resources(self, props: SessionExpiryProps) -> None:
        """Every resource, one concern a step, in dependency order."""
        self._settle_attributes(props)
        self._add_tables(props)
        self._add_cleanup_function(props)
        self._add_cleanup_targets(props)
        self._add_event_source(props)
        self._add_claim_registrar(props)
        self._add_session_access()
        self._add_alarms(props)
        self._add_archive_extras(props)
        self._add_expiry_sweeper(props)
        self._add_grant_sweep(props)
        self._add_tool_session_sweep(props)
        self._add_ttl_health_alarm(props)
        self._add_pause_watch(props)
        self._add_circuit_breaker(props)
        self._add_tenant_metrics(props)
        self._add_feature_flags(props)
        outputs.add_operator_outputs(self, archive_bucket=props.archive_bucket)

    def _finish(self, props: SessionExpiryProps) -> None:
        """What reads the finished resources: cdk-nag acknowledgements, hardening, checkov, the
        alarms' runbook links (``alarm_runbook_base_url``)."""
        #: The cdk-nag findings the design accepts, acknowledged with their reasons (``nag``).
        self.nag_acknowledgements = nag.acknowledge_design_findings(self)
        hardening.apply(
            self,
            function_encryption_key=props.function_encryption_key,
            cleanup_reserved_concurrency=props.cleanup_reserved_concurrency,
            expiry_sweep_reserved_concurrency=props.expiry_sweep_reserved_concurrency,
        )
        checkov.explain_findings(self)
        alarm_defaults.link_runbooks(self, props.alarm_runbook_base_url)

    def _check_props(self, props: SessionExpiryProps) -> None:
        """Validation before any resource exists (rules: ``validation`` and each feature's
        module)."""
        hardening.check_hardening_props(
            cleanup_reserved_concurrency=props.cleanup_reserved_concurrency,
            expiry_sweep_reserved_concurrency=props.expiry_sweep_reserved_concurrency,
            sweeper_on=props.expiry_sweep_interval is not None,
        )
        #: Where the cleanup reads the table's changes (``change_source``).
        self.change_source = props.change_source or ChangeSource.dynamodb_stream()
        retention = self.change_source.retention()
        validation.check_event_source_props(
            record_age_limit=self.change_source.record_age_limit(),
            batch_size=props.batch_size,
            max_batching_window=props.max_batching_window,
            parallelization_factor=props.parallelization_factor,
            retry_attempts=props.retry_attempts,
            max_record_age=props.max_record_age,
        )
        validation.check_cleanup_function_props(
            cleanup_timeout=props.cleanup_timeout,
            cleanup_memory_size=props.cleanup_memory_size,
            max_workers=props.max_workers,
            metrics_namespace=props.metrics_namespace,
            event_filter=props.event_filter,
        )
        alarm_defaults.check_iterator_age_threshold(props.alarm_iterator_age_threshold, retention)
        alarm_defaults.check_cleanup_paused_after(props.alarm_cleanup_paused_after, retention)
        alarm_defaults.check_runbook_base_url(props.alarm_runbook_base_url)
        self._breaker_alarms = circuit_breaker.check_circuit_breaker_props(
            enabled=props.circuit_breaker,
            alarms=props.circuit_breaker_alarms,
            cool_down=props.circuit_breaker_cool_down,
            paused_after=props.alarm_cleanup_paused_after,
            max_record_age=props.max_record_age,
            skipped_records_alarm=props.alarm_skipped_records,
        )
        if props.expiry_sweep_interval is not None:
            sweeper.check_sweep_interval(props.expiry_sweep_interval)
        sweeper.check_sweeper_props(
            shards=props.expiry_sweep_shards,
            workers=props.expiry_sweep_workers,
            memory_size=props.expiry_sweeper_memory_size,
            sweeper_on=props.expiry_sweep_interval is not None,
        )
        validation.check_filter_with_sweeper(props.event_filter, props.expiry_sweep_interval)
        #: Global-table mode (``global_table``, or derived from the table's replicas): this
        #: Region cleans and sweeps only the sessions it owns (``multi_region``).
        self.global_table = multi_region.settle_global_table(
            props.table, props.global_table, props.event_filter
        )
        grant_sweep.check_grant_props(props)
        tool_session_sweep.check_tool_session_sweep_props(
            props.code_interpreter is not None or props.browser is not None,
            props.tool_session_sweep_interval,
        )
        self._flag_options = feature_flags_unit.settle(props.feature_flags)
        #: Which REMOVE records reach the cleanup (``grant_session_access`` checks it).
        self.event_filter = props.event_filter
        if props.alarm_ttl_health_window is not None:
            alarm_defaults.check_ttl_health_window(props.alarm_ttl_health_window)
        validation.check_switches(
            cleanup_enabled=props.cleanup_enabled, cleanup_dry_run=props.cleanup_dry_run
        )
        failure_destination.check_failure_destination(
            props.failure_queue, props.failure_destination_bucket
        )
        #: The custom cleanup steps (``custom_steps``), in order.
        self.custom_steps: tuple[CustomCleanupStep, ...] = tuple(props.custom_steps or ())
        self._step_directories = custom_steps.check_custom_steps(self.custom_steps, self.node.path)
        self._check_s3_props(props)
        self._check_archive_and_memory_props(props)
        self._limits = SessionLimits.from_props(
            max_session_lifetime=props.max_session_lifetime,
            scratch_retention=self._scratch.retention if self._scratch.bucket else None,
            grant_operations=props.grant_operations,
            grant_grantees=props.grant_grantees,
            bind_grants_to_session=props.bind_grants_to_session,
        )

    def _check_s3_props(self, props: SessionExpiryProps) -> None:
        """Scratch and archive prefixes, and their claims on the buckets."""
        self._scratch = targets.ScratchTarget.from_props(
            scratch_bucket=props.scratch_bucket,
            scratch_root=props.scratch_root,
            tenant_scoped_scratch=props.tenant_scoped_scratch,
            scratch_retention=props.scratch_retention,
        )
        #: Prefix of every session scratch prefix (``scratch_root``).
        self.scratch_root = self._scratch.root
        #: Key prefix of the archive (``archive_bucket``).
        self.archive_prefix = archive.check_archive_props(
            archive_bucket=props.archive_bucket,
            archive_prefix=props.archive_prefix,
            archive_transition_after=props.archive_transition_after,
            archive_transition_storage_class=props.archive_transition_storage_class,
            archive_expiration=props.archive_expiration,
            scratch_bucket=props.scratch_bucket,
            scratch_root=self.scratch_root,
        )
        validation.claim_s3_prefixes(
            self,
            [
                validation.PrefixClaim(bucket, prefix, prop, self.node.path)
                for bucket, prefix, prop in (
                    (props.scratch_bucket, self.scratch_root, "scratch_root"),
                    (props.archive_bucket, self.archive_prefix, "archive_prefix"),
                )
                if bucket is not None
            ],
        )

    def _check_archive_and_memory_props(self, props: SessionExpiryProps) -> None:
        """The queryable archive, Firehose delivery and AgentCore Memory props."""
        archive_query.check_archive_query_props(
            archive_query=props.archive_query, archive_bucket=props.archive_bucket
        )
        archive_delivery.check_archive_delivery_props(
            archive_delivery=props.archive_delivery, archive_bucket=props.archive_bucket
        )
        self._memory_namespaces = agent_memory.check_record_namespaces(
            props.agent_memory_record_namespaces, agent_memory=props.agent_memory
        )
        #: The AgentCore Memory's ARN (``agent_memory``), or ``None``.
        self.agent_memory_arn = (
            None
            if props.agent_memory is None
            else agent_memory.memory_arn(self, props.agent_memory)
        )

    def _add_archive_extras(self, props: SessionExpiryProps) -> None:
        """The queryable archive and the Firehose stream (both on the archive bucket), and the
        AgentCore Memory release."""
        #: The Glue table, Athena workgroup and named queries (``archive_query``), or ``None``.
        self.archive_query_resources: archive_query.ArchiveQuery | None = None
        #: The archive's Firehose stream (``ArchiveDelivery.FIREHOSE``), or ``None``.
        self.archive_delivery_stream: archive_delivery.ArchiveDeliveryStream | None = None
        bucket = props.archive_bucket
        if bucket is not None and props.archive_query:
            self.archive_query_resources = archive_query.ArchiveQuery(
                self,
                "ArchiveQuery",
                bucket=bucket,
                prefix=self.archive_prefix,
                tenant_partition=props.tenant_scoped_scratch,
            )
        if bucket is not None and props.archive_delivery is ArchiveDelivery.FIREHOSE:
            self.archive_delivery_stream = archive_delivery.ArchiveDeliveryStream(
                self,
                "ArchiveDelivery",
                bucket=bucket,
                prefix=self.archive_prefix,
                log_retention=props.cleanup_log_retention,
                alarm_actions=props.actions,
            )
            self.archive_delivery_stream.configure(self.cleanup_function)
            self.alarms.append(self.archive_delivery_stream.freshness_alarm)
        if self.agent_memory_arn is not None:
            agent_memory.configure(
                self.cleanup_function,
                memory=self.agent_memory_arn,
                namespaces=self._memory_namespaces,
            )

    def _settle_attributes(self, props: SessionExpiryProps) -> None:
        """Key, TTL and session attribute names in effect, checked."""
        keys = table_unit.settle_key_names(
            props.table,
            partition_key_name=props.partition_key_name,
            sort_key_name=props.sort_key_name,
            time_to_live_attribute=props.time_to_live_attribute,
            new_table_props={
                "table_encryption_key": props.table_encryption_key,
                "removal_policy": props.removal_policy,
                "deletion_protection": props.deletion_protection,
            },
        )
        self._attributes = table_unit.SessionAttributes(
            *keys,
            connection_id_attribute=props.connection_id_attribute,
            grant_id_attribute=props.grant_id_attribute,
            grant_token_attribute=props.grant_token_attribute,
            scratch_prefix_attribute=props.scratch_prefix_attribute,
            tenant_attribute=props.tenant_attribute,
        )
        self._agentcore = agentcore.resolve_targets(
            self,
            agent_runtime=props.agent_runtime,
            agent_runtime_qualifier=props.agent_runtime_qualifier,
            code_interpreter=props.code_interpreter,
            browser=props.browser,
            agent_runtime_session_attribute=props.agent_runtime_session_attribute,
            code_interpreter_session_attribute=props.code_interpreter_session_attribute,
            browser_session_attribute=props.browser_session_attribute,
            allow_stopping_shared_aws_managed_tool_sessions=(
                props.allow_stopping_shared_aws_managed_tool_sessions
            ),
        )
        self._resource_targets = resource_kinds.resolve(self, props.resource_targets)
        validation.check_session_attributes(
            {**self._attributes.props(), **self._agentcore.attribute_props()},
            reserved=ownership.reserved_attributes(
                {
                    **self._agentcore.ids_attribute_props(),
                    **self._resource_targets.ids_attributes(),
                    **(
                        {
                            contract.ENV_AGENT_MEMORY_SESSIONS_ATTRIBUTE: (
                                contract.DEFAULT_AGENT_MEMORY_SESSIONS_ATTRIBUTE
                            )
                        }
                        if props.agent_memory is not None
                        else {}
                    ),
                }
            ),
        )
        if props.expiry_sweep_interval is not None:
            sweeper.check_expiry_sweeper(
                self,
                table=props.table,
                attributes=self._attributes.props(),
                time_to_live_attribute=self._attributes.time_to_live_attribute,
            )
        attributes = self._attributes
        self.partition_key_name = attributes.partition_key_name
        self.sort_key_name = attributes.sort_key_name
        self.time_to_live_attribute = attributes.time_to_live_attribute
        self.connection_id_attribute = attributes.connection_id_attribute
        self.grant_id_attribute = attributes.grant_id_attribute
        self.grant_token_attribute = attributes.grant_token_attribute
        self.scratch_prefix_attribute = attributes.scratch_prefix_attribute
        self.tenant_attribute = attributes.tenant_attribute

    def _add_tables(self, props: SessionExpiryProps) -> None:
        """The session table (unless given) and the ownership table (when a target has claims)."""
        self._websocket_stage = props.websocket_stage
        #: The Kinesis stream of the Kinesis change source, or ``None``.
        self.change_stream = (
            create_stream(self, self.change_source) if self.change_source.is_kinesis else None
        )
        if self.change_stream is not None and props.table is not None:
            check_table_destination(props.table, self.change_source.stream)
        #: The session table (created, or the one passed as ``table``).
        self.table: dynamodb.ITable = (
            table_unit.create_table(
                self,
                self._attributes,
                encryption_key=props.table_encryption_key,
                removal_policy=props.removal_policy,
                deletion_protection=props.deletion_protection,
                kinesis_stream=self.change_stream,
            )
            if props.table is None
            else props.table
        )
        self._ownership = ownership.create_ownership_table(
            self,
            session_table=self.table,
            removal_policy=props.removal_policy,
            custom_kinds=any(step.resource_attribute for step in self.custom_steps)
            or self._resource_targets.any,
            **{prop: getattr(props, prop) for prop in ownership.CLAIMED_TARGET_PROPS},
        )
        #: The ownership table (``Sessions/OwnershipTable``: which session incarnation holds
        #: each connection, AgentCore session and grant; see ``cdk_session_expiry.ownership``),
        #: or ``None`` when no ``websocket_stage``, ``grant_key``, ``agent_runtime``,
        #: ``code_interpreter`` or ``browser`` is set.
        self.ownership_table: dynamodb.ITable | None = (
            None if self._ownership is None else self._ownership.table
        )
        self._deferred_work = (
            None
            if self._flag_options is None
            else deferred_work.create_deferred_work_table(
                self, session_table=self.table, removal_policy=props.removal_policy
            )
        )
        #: The deferred-work table (``Sessions/DeferredWorkTable``, with ``feature_flags``: the
        #: work a flag held back, written by the cleanup role alone; see
        #: ``cdk_session_expiry.switches.deferred_work``), or ``None`` without feature flags.
        self.deferred_work_table: dynamodb.ITable | None = (
            None if self._deferred_work is None else self._deferred_work.table
        )
        self.grant_key = props.grant_key
        self.scratch_bucket = props.scratch_bucket
        self.tenant_scoped_scratch = props.tenant_scoped_scratch
        self.metrics_namespace = props.metrics_namespace

    def _add_cleanup_function(self, props: SessionExpiryProps) -> None:
        self._shared_environment = cleanup.cleanup_environment(
            self._attributes,
            metrics_namespace=props.metrics_namespace,
            max_workers=props.max_workers,
            dry_run=props.cleanup_dry_run,
        )
        # A Kinesis REMOVE of a key live under another incarnation is real only if that session
        # was created after it: notAfter less this lifetime (runtime kinesis_removals).
        self._shared_environment.update(self._limits.environment())
        if self.global_table:
            self._shared_environment.update(multi_region.environment(self))
        self._cleanup = cleanup.CleanupFunction(
            self,
            environment=self._shared_environment,
            timeout=props.cleanup_timeout,
            memory_size=props.cleanup_memory_size,
            log_retention=props.cleanup_log_retention,
            code=assets.cleanup_function_code(self._step_directories)
            if self._step_directories
            else None,
        )
        #: Execution role of the cleanup function: name it as the retiring principal of every
        #: per-session KMS grant (``retiring_principal_arn``).
        self.cleanup_role = self._cleanup.role
        #: The function that cleans up after each removed session.
        self.cleanup_function = self._cleanup.function

    def _add_cleanup_targets(self, props: SessionExpiryProps) -> None:
        """What the cleanup does for each session: built-in targets, archive, fan-out."""
        fn = self.cleanup_function
        if self._ownership is not None:
            for name, value in self._ownership.environment().items():
                fn.add_environment(name, value)
            self._ownership.grant_cleanup(self.cleanup_role)
        if self._deferred_work is not None:
            self._deferred_work.configure_cleanup(fn, self.table)
        if props.websocket_stage is not None:
            targets.configure_connections(fn, props.websocket_stage)
        if props.grant_key is not None:
            targets.configure_grants(fn, props.grant_key, props.grant_retire_budget)
        self._scratch.configure(self, fn)
        if props.archive_bucket is not None:
            archive.configure_archive(
                self,
                fn,
                bucket=props.archive_bucket,
                prefix=self.archive_prefix,
                transition_after=props.archive_transition_after,
                storage_class=props.archive_transition_storage_class,
                expiration=props.archive_expiration,
            )
        if props.event_bus is not None:
            fanout.configure_event_bus(fn, props.event_bus)
        self._agentcore.configure(fn)
        self._resource_targets.configure(fn)
        custom_steps.configure(fn, self.custom_steps)

    def _add_event_source(self, props: SessionExpiryProps) -> None:
        if self.change_stream is not None:
            # A Kinesis stream may carry other tables' changes: replay over it keeps only this
            # table's REMOVEs (``tableName``), named by the function's settings.
            self.cleanup_function.add_environment(contract.ENV_TABLE_NAME, self.table.table_name)
        settings = cleanup.EventSourceSettings(
            event_filter=props.event_filter,
            batch_size=props.batch_size,
            max_batching_window=props.max_batching_window,
            parallelization_factor=props.parallelization_factor,
            retry_attempts=props.retry_attempts,
            max_record_age=props.max_record_age,
            enabled=props.cleanup_enabled,
            owner_region=(multi_region.OWNER_REGION_ATTRIBUTE, Stack.of(self).region)
            if self.global_table
            else None,
        )
        self._event_source = cleanup.CleanupEventSource(
            self,
            self._cleanup,
            self.table,
            settings=settings,
            failure_queue=props.failure_queue,
            failure_destination_bucket=props.failure_destination_bucket,
            kinesis_stream=self.change_stream,
        )
        #: On-failure destination: metadata of batches the cleanup gave up on (``None`` with
        #: ``failure_destination_bucket``).
        self.failure_queue: sqs.IQueue | None = self._event_source.failure_queue
        #: S3 on-failure destination (``failure_destination_bucket``), or ``None``.
        self.failure_destination_bucket = props.failure_destination_bucket
        #: The event source mapping from the table's stream to the cleanup function.
        self.event_source_mapping = self._event_source.mapping
        #: The mapping's UUID, for the kill switch without a deploy (``aws lambda
        #: update-event-source-mapping --uuid ... --no-enabled``); also a stack output.
        self.event_source_mapping_id = self.event_source_mapping.event_source_mapping_id
        self.event_source_mapping_id_output = kill_switch.mapping_id_output(
            self, self.event_source_mapping
        )
        #: The stack outputs an operator needs, by construct id (``cdk_session_expiry.outputs``:
        #: ``CleanupFunctionName``, ``FailureQueueUrl``, ``OwnershipTableName``, ...; the
        #: dashboard's ``DashboardUrl`` once ``add_dashboard`` is called).
        self.outputs: dict[str, CfnOutput] = {
            kill_switch.OUTPUT_ID: self.event_source_mapping_id_output
        }
        kill_switch.warn_when_paused(
            self,
            cleanup_enabled=props.cleanup_enabled,
            max_record_age=props.max_record_age,
            paused_after=props.alarm_cleanup_paused_after,
            retention=self.change_source.retention(),
        )

    def _add_claim_registrar(self, props: SessionExpiryProps) -> None:
        """The one writer of ownership records besides the cleanup (with the ownership
        table): ``SessionStore`` invokes it; no application role writes that table."""
        #: The claim registrar (``Sessions/ClaimRegistrar``), or ``None`` without the
        #: ownership table (``cdk_session_expiry.claim_registrar``).
        self.claim_registrar: ClaimRegistrar | None = None
        if self._ownership is None:
            return
        self.claim_registrar = ClaimRegistrar(
            self,
            claim_registrar.CONSTRUCT_ID,
            table=self.table,
            ownership_table=self._ownership.table,
            environment={
                **self._shared_environment,
                contract.ENV_TABLE_NAME: self.table.table_name,
                **self._ownership.environment(),
                **self._agentcore.environment(),
                **self._resource_targets.environment(),
                **custom_steps.kinds_environment(self.custom_steps),
            },
            log_retention=props.cleanup_log_retention,
            metrics_namespace=props.metrics_namespace,
            alarm_actions=props.actions,
        )

    def _add_session_access(self) -> None:
        self._session_access = SessionAccess(
            self,
            table=self.table,
            attributes=self._attributes,
            scratch=self._scratch,
            grant_key=self.grant_key,
            retiring_principal_arn=self.retiring_principal_arn,
            limits=self._limits,
            websocket_stage=self._websocket_stage,
            ownership_table=self._ownership,
            agentcore=self._agentcore,
            claim_registrar=self.claim_registrar,
            # attach_resource's kinds: the custom steps' and the declared kinds switched on.
            custom_kinds={
                **custom_steps.kinds_environment(self.custom_steps),
                **self._resource_targets.environment(),
            },
        )
        #: Layer with the session runtime (``import session_expiry_runtime``) for application
        #: functions; ``grant_session_access`` adds it to a ``lambda_.Function``.
        self.runtime_layer = self._session_access.layer

    def _add_alarms(self, props: SessionExpiryProps) -> None:
        cleanup_alarms = alarm_defaults.CleanupAlarms(
            self,
            function=self.cleanup_function,
            iterator_age=self.metric_iterator_age(period=alarm_defaults.ALARM_PERIOD),
            iterator_age_threshold=props.alarm_iterator_age_threshold,
            destination=self._event_source,
            actions=props.actions,
            retention=self.change_source.retention(),
        )
        self.iterator_age_alarm = cleanup_alarms.iterator_age
        self.errors_alarm = cleanup_alarms.errors
        self.throttles_alarm = cleanup_alarms.throttles
        #: Alarm on the on-failure destination: visible messages of the queue, or records
        #: delivered to ``failure_destination_bucket``.
        self.failure_queue_alarm = cleanup_alarms.failure
        #: Every alarm the construct creates.
        self.alarms: list[cloudwatch.Alarm] = cleanup_alarms.all()
        #: The Kinesis change stream's iterator age (``change_source``), or ``None``.
        self.change_stream_iterator_age_alarm: cloudwatch.Alarm | None = None
        if self.change_stream is not None:
            self.change_stream_iterator_age_alarm = stream_iterator_age_alarm(
                self,
                self.change_stream,
                threshold=props.alarm_iterator_age_threshold,
                actions=props.actions,
            )
            self.alarms.append(self.change_stream_iterator_age_alarm)
        #: Records skipped for good (``alarm_skipped_records``), or ``None`` when turned off.
        self.skipped_records_alarm: cloudwatch.Alarm | None = None
        if props.alarm_skipped_records:
            self.skipped_records_alarm = alarm_defaults.skipped_records_alarm(
                self,
                skipped={
                    cause: self.metric_records_skipped(cause=cause)
                    for cause in alarm_defaults.LOST_CLEANUP_CAUSES
                },
                refused=self.metric_scratch_prefixes_refused(),
                grants_refused=self.metric_grants_refused(),
                resources_refused={
                    refusal: self.metric_resources_refused(refusal=refusal)
                    for refusal in alarm_defaults.ALARMED_REFUSALS
                },
                actions=props.actions,
            )
            self.alarms.append(self.skipped_records_alarm)
        if self.claim_registrar is not None:
            self.alarms += [
                self.claim_registrar.refused_alarm,
                self.claim_registrar.errors_alarm,
            ]

    def _add_expiry_sweeper(self, props: SessionExpiryProps) -> None:
        #: The expiry sweeper (``expiry_sweep_interval``), or ``None`` when it is off.
        self.expiry_sweeper: sweeper.ExpirySweeper | None = None
        if props.expiry_sweep_interval is None:
            return
        self.expiry_sweeper = sweeper.add_expiry_sweeper(
            self,
            table=self.table,
            time_to_live_attribute=self._attributes.time_to_live_attribute,
            interval=props.expiry_sweep_interval,
            environment=self._shared_environment,
            log_retention=props.cleanup_log_retention,
            metrics_namespace=props.metrics_namespace,
            alarm_actions=props.actions,
            shards=props.expiry_sweep_shards,
            workers=props.expiry_sweep_workers,
            memory_size=props.expiry_sweeper_memory_size,
        )
        self.alarms.append(self.expiry_sweeper.errors_alarm)

    def _add_grant_sweep(self, props: SessionExpiryProps) -> None:
        #: The grant sweep (whenever ``grant_key`` is set), or ``None``.
        self.grant_sweep: grant_sweep.GrantSweep | None = None
        if props.grant_key is None:
            return
        self.grant_sweep = grant_sweep.GrantSweep(
            self,
            "GrantSweep",
            table=self.table,
            key=props.grant_key,
            role=self.cleanup_role,
            interval=props.grant_sweep_interval or grant_sweep.DEFAULT_GRANT_SWEEP_INTERVAL,
            grant_quota=props.grant_key_grant_quota or grant_sweep.DEFAULT_GRANT_QUOTA,
            environment={
                contract.ENV_TABLE_NAME: self.table.table_name,
                **self._shared_environment,
                contract.ENV_GRANT_KEY_ARN: props.grant_key.key_arn,
                contract.ENV_RETIRING_PRINCIPAL: self.retiring_principal_arn,
                # A grant_key always comes with the ownership table.
                **(self._ownership.environment() if self._ownership else {}),
                **grant_sweep.pending_environment(props.max_record_age),
            },
            log_retention=props.cleanup_log_retention,
            metrics_namespace=props.metrics_namespace,
            alarm_actions=props.actions,
        )
        self.alarms += [
            self.grant_sweep.orphan_grants_alarm,
            self.grant_sweep.errors_alarm,
            self.grant_sweep.incomplete_alarm,
            self.grant_sweep.ceiling_alarm,
        ]

    def _add_tool_session_sweep(self, props: SessionExpiryProps) -> None:
        #: The tool-session sweep (whenever a custom ``code_interpreter`` or ``browser`` is
        #: set), or ``None``.
        self.tool_session_sweep: tool_session_sweep.ToolSessionSweep | None = None
        tools = tool_session_sweep.swept_tools(self._agentcore)
        if tools.code_interpreter is None and tools.browser is None:
            tool_session_sweep.check_only_shared_tools(props.tool_session_sweep_interval)
            return
        if self._ownership is None:
            return
        self.tool_session_sweep = tool_session_sweep.ToolSessionSweep(
            self,
            "ToolSessionSweep",
            table=self.table,
            tools=tools,
            role=self.cleanup_role,
            interval=props.tool_session_sweep_interval
            or tool_session_sweep.DEFAULT_TOOL_SESSION_SWEEP_INTERVAL,
            environment={
                contract.ENV_TABLE_NAME: self.table.table_name,
                **self._shared_environment,
                **tools.environment(),
                **self._ownership.environment(),
                **tool_session_sweep.pending_environment(props.max_record_age),
            },
            log_retention=props.cleanup_log_retention,
            metrics_namespace=props.metrics_namespace,
            alarm_actions=props.actions,
        )
        self.alarms += [
            self.tool_session_sweep.orphan_tool_sessions_alarm,
            self.tool_session_sweep.errors_alarm,
        ]

    def _add_ttl_health_alarm(self, props: SessionExpiryProps) -> None:
        #: Time to live deleted nothing over ``alarm_ttl_health_window`` while the table was
        #: written; ``None`` when that prop is not set.
        self.ttl_health_alarm: cloudwatch.Alarm | None = None
        window = props.alarm_ttl_health_window
        if window is None:
            return
        self.ttl_health_alarm = alarm_defaults.ttl_health_alarm_of_table(
            self,
            table=self.table,
            swept=None
            if self.expiry_sweeper is None
            else self.expiry_sweeper.metric_sessions_swept(period=window),
            window=window,
            actions=props.actions,
        )
        self.alarms.append(self.ttl_health_alarm)

    def _add_pause_watch(self, props: SessionExpiryProps) -> None:
        #: The pause watch (always on): ``CleanupPausedSeconds`` every 5 minutes, its alarm.
        self.pause_watch = pause_watch.PauseWatch(
            self,
            "PauseWatch",
            mapping=self.event_source_mapping,
            paused_after=props.alarm_cleanup_paused_after,
            log_retention=props.cleanup_log_retention,
            metrics_namespace=props.metrics_namespace,
            alarm_actions=props.actions,
            retention=self.change_source.retention(),
        )
        #: The event source mapping has been disabled longer than ``alarm_cleanup_paused_after``.
        self.cleanup_paused_alarm = self.pause_watch.paused_alarm
        self.alarms += [self.cleanup_paused_alarm, self.pause_watch.errors_alarm]

    def _add_circuit_breaker(self, props: SessionExpiryProps) -> None:
        #: The circuit breaker (``circuit_breaker``), or ``None`` when it is off.
        self.circuit_breaker: circuit_breaker.CircuitBreaker | None = None
        if not props.circuit_breaker:
            return
        chosen = {member: getattr(self, member.value) for member in self._breaker_alarms}
        self.circuit_breaker = circuit_breaker.CircuitBreaker(
            self,
            "CircuitBreaker",
            mapping=self.event_source_mapping,
            alarms=chosen,
            cool_down=props.circuit_breaker_cool_down or circuit_breaker.DEFAULT_COOL_DOWN,
            cleanup_enabled=props.cleanup_enabled,
            log_retention=props.cleanup_log_retention,
            metrics_namespace=props.metrics_namespace,
            alarm_actions=props.actions,
        )
        self.pause_watch.count_breaker_pauses(self.circuit_breaker.state_parameter)
        self.alarms.append(self.circuit_breaker.errors_alarm)

    def _add_feature_flags(self, props: SessionExpiryProps) -> None:
        #: The feature flags in AWS AppConfig (``feature_flags``), or ``None`` when off.
        self.feature_flags: feature_flags_unit.FeatureFlagsUnit | None = None
        if self._flag_options is None:
            return
        self.feature_flags = feature_flags_unit.FeatureFlagsUnit(
            self,
            "FeatureFlags",
            options=self._flag_options,
            function=self.cleanup_function,
            step_names=self._step_names(props),
            dry_run=props.cleanup_dry_run,
            rollback_alarms=[self.errors_alarm, self.failure_queue_alarm],
            metrics_namespace=props.metrics_namespace,
            alarm_actions=props.actions,
        )
        self.alarms += [
            self.feature_flags.read_failures_alarm,
            self.feature_flags.deferred_work_age_alarm,
            self.feature_flags.deferred_work_refused_alarm,
        ]

    def _step_names(self, props: SessionExpiryProps) -> list[str]:
        """The configured steps' metric ``Action`` names, in the runtime's order (its
        ``steps.SESSION_STEPS``, the declared kinds' steps in declaration order, then the custom
        steps): the steps a feature flag switches."""
        configured = [
            (props.archive_bucket, contract.ACTION_ARCHIVE),
            (props.websocket_stage, contract.ACTION_DELETE_CONNECTION),
            (props.grant_key, contract.ACTION_RETIRE_GRANT),
            (props.scratch_bucket, contract.ACTION_DELETE_SCRATCH),
        ]
        names = [name for target, name in configured if target is not None]
        targeted = {t.kind.kind for t in self._resource_targets.targets}
        declared = [
            kind.action
            for kind in _kinds.DECLARED_KINDS
            if kind.action
            and (
                kind.kind in targeted
                or (kind.own is not None and getattr(props, kind.own.prop) is not None)
            )
        ]
        return names + declared + [step.name for step in self.custom_steps]

    def _add_tenant_metrics(self, props: SessionExpiryProps) -> None:
        #: The Contributor Insights rules of ``tenant_insights`` (top tenants), or ``None``.
        self.tenant_insights = tenant_metrics.add_tenant_metrics(
            self,
            self.cleanup_function,
            dimension=props.metrics_tenant_dimension,
            insights=props.tenant_insights,
        )

    # --- public API -------------------------------------------------------------------------

    @property
    def retiring_principal_arn(self) -> str:
        """ARN of ``cleanup_role``: the retiring principal every per-session grant must name."""
        return self.cleanup_role.role_arn

    def custom_step(self, name: str) -> CustomCleanupStep:
        """The custom step named ``name``: a grantable whose principal is ``cleanup_role``.

        Raises:
            ValueError: no step of ``custom_steps`` has that name.
        """
        for step in self.custom_steps:
            if step.name == name:
                return step
        known = ", ".join(repr(step.name) for step in self.custom_steps) or "none"
        raise ValueError(f"custom step {name!r}: expected one of custom_steps ({known})")

    def grant_read_write_data(self, grantee: iam.IGrantable) -> iam.Grant:
        """Grant every data read/write action on the session table (``grant_read_write_data``)."""
        return self.table.grant_read_write_data(grantee)

    def grant_session_access(
        self, function: lambda_.IFunction, *, create_grants: bool = False
    ) -> iam.Grant:
        """Let an application function run the session runtime against this table.

        Grants ``dynamodb:GetItem``, ``PutItem``, ``UpdateItem``, ``DeleteItem`` and ``Query``
        on the table (and use of its customer managed key, if any), and with
        ``websocket_stage`` ``execute-api:ManageConnections`` on the stage's
        ``…/DELETE/@connections/*`` (``attach_connection`` closes a session's earlier
        connections). With the ownership table (``ownership_table``): ``lambda:InvokeFunction``
        on the claim registrar (``claim_registrar``), which writes the ownership records for the
        store, and no action on the ownership table itself (``docs/ownership.md``, "Who writes
        the records"). With AgentCore targets:
        ``bedrock-agentcore:StopRuntimeSession`` / ``StopCodeInterpreterSession`` /
        ``StopBrowserSession`` on those targets only (``attach_agent_session`` stops the
        sessions it replaces).

        With ``create_grants=True`` (default ``False``: a function that should not create grants
        gets none) also ``kms:CreateGrant`` on ``grant_key``, only with the conditions
        ``kms:GrantOperations`` within ``grant_operations``, ``kms:GranteePrincipal`` among
        ``grant_grantees``, ``kms:RetiringPrincipal`` = ``cleanup_role`` and, while
        ``bind_grants_to_session``, ``kms:GrantConstraintType`` = ``EncryptionContextSubset``
        (see ``cdk_session_expiry.session_limits``); and ``kms:RetireGrant`` on it, with which
        the runtime retires a grant it could not store on its session.

        For a ``lambda_.Function`` it also adds ``runtime_layer`` and sets the environment
        ``SessionStore.from_env()`` reads: table name, key names, TTL attribute, session
        attribute names, scratch bucket/root, tenant scoping, grant key ARN, retiring
        principal, ownership table name and the AgentCore targets. A function imported with its role
        (``Function.from_function_attributes(role=...)``) gets the permissions (a policy on
        that role) and a synth warning that its environment and layer must be set by hand.

        No S3 permissions are granted: what the application writes to its scratch prefix is
        its own decision (``scratch_bucket.grant_put``).

        Raises:
            ValueError: ``event_filter`` is ``TTL_DELETES_ONLY``, which drops the REMOVE
                records of ``SessionStore.end`` and of ``create``'s delete of an expired item;
                or ``function`` was imported without its role (``Function.from_function_name``
                or ``from_function_arn``): there is nothing to attach the permissions to;
                or ``create_grants=True`` without ``grant_key`` or ``grant_grantees``.
        """
        validation.check_filter_with_session_store(
            self.event_filter, f"grant_session_access({function.node.path})"
        )
        grant = self._session_access.grant_access(function, create_grants=create_grants)
        self.nag_acknowledgements.extend(nag.acknowledge_session_access(self, function))
        self._session_access.configure(function, self.session_environment())
        return grant

    def grant_tenant_session_access(
        self, function: lambda_.IFunction, *, tenant_tag: str = "tenant"
    ) -> iam.Grant:
        """Let a function confined to one tenant run the session runtime (``docs/security.md``,
        the threat model): the session data actions of ``grant_session_access`` only on items
        whose partition key equals the caller's principal tag ``tenant_tag``
        (``ForAllValues:StringEquals`` on ``dynamodb:LeadingKeys`` =
        ``${aws:PrincipalTag/<tenant_tag>}``; DynamoDB Developer Guide, "Using IAM policy
        conditions for fine-grained access control"), use of the table's customer managed key,
        and ``lambda:InvokeFunction`` on the claim registrar — nothing on the ownership table,
        no ``execute-api:ManageConnections`` and no AgentCore ``Stop…Session`` (neither can be
        confined to a tenant: ``attach_connection(close_previous=False)`` and
        ``attach_agent_session(stop_previous=False)``, or leave earlier ids to the cleanup),
        no ``kms:CreateGrant``. The tag reaches the role as a session tag (``sts:TagSession``
        when your broker assumes it for a tenant) or a tag of the role itself. Layer and
        environment as ``grant_session_access``.

        Such a writer can claim ids only for its own tenant's live sessions and cannot rewrite,
        release or delete another tenant's claims (the registrar decides from the session item
        it reads itself); whatever else it writes in its own partition, the cleanup acts on
        nothing another tenant's session owns.

        Args:
            function: the function (or a function imported with its role).
            tenant_tag: the principal tag holding the tenant id. Default: ``"tenant"``.

        Raises:
            ValueError: the table's partition key is not ``tenant_attribute`` (the tenant must
                be the partition key, the session id the sort key); ``tenant_tag`` is not a tag
                key (or starts with the reserved ``aws:``); ``event_filter`` is
                ``TTL_DELETES_ONLY``; ``function`` has no role.
        """
        validation.check_filter_with_session_store(
            self.event_filter, f"grant_tenant_session_access({function.node.path})"
        )
        grant = self._session_access.grant_tenant_access(function, tenant_tag=tenant_tag)
        self.nag_acknowledgements.extend(nag.acknowledge_session_access(self, function))
        self._session_access.configure(
            function, self.session_environment(), "grant_tenant_session_access"
        )
        return grant

    def add_tenant_session_role(
        self, id: str, *, broker: lambda_.IFunction, tenant_tag: str = "tenant"
    ) -> iam.Role:
        """One function serving many tenants, each request confined to its own tenant: a role
        with the permissions of `grant_tenant_session_access` (the session data actions only
        on items whose partition key is the caller's principal tag ``tenant_tag``,
        ``dynamodb:LeadingKeys`` = ``${aws:PrincipalTag/<tenant_tag>}``; the table's customer
        managed key; ``lambda:InvokeFunction`` on the claim registrar), which ``broker``
        assumes for one tenant with that tenant as a session tag.

        A Lambda function cannot tag its own execution role's session, so ``broker`` calls
        ``sts:AssumeRole`` on this role with ``Tags=[{"Key": tenant_tag, "Value": <tenant>}]``
        and builds its `SessionStore` from those credentials (docs: Ownership, "One function,
        many tenants"). The role's trust policy allows ``broker``'s role ``sts:AssumeRole``
        and ``sts:TagSession`` only when the request carries a non-empty ``tenant_tag`` and no
        other tag (``aws:RequestTag``, ``aws:TagKeys``; IAM User Guide, "Pass session tags in
        AWS STS"); ``broker``'s role gets both actions on this role only, the layer and the
        environment `SessionStore.from_env` reads, and no table permission of its own. Which
        tenant it passes is ``broker``'s word: it must take it from the request's
        authentication, never from the request's payload.

        Args:
            id: the role's construct id (under this construct).
            broker: the function that assumes the role (a ``lambda_.Function``, or one imported
                with its role).
            tenant_tag: the session tag holding the tenant id. Default: ``"tenant"``.

        Returns:
            The role; pass its ARN to ``broker`` (e.g. ``broker.add_environment(...)``).

        Raises:
            ValueError: as `grant_tenant_session_access` (the tenant must be the table's
                partition key; ``tenant_tag`` a tag key not starting with ``aws:``;
                ``event_filter`` not ``TTL_DELETES_ONLY``); ``broker`` has no role.
        """
        method = f"add_tenant_session_role({broker.node.path})"
        validation.check_filter_with_session_store(self.event_filter, method)
        role = self._session_access.tenant_role(self, id, broker=broker, tenant_tag=tenant_tag)
        self.nag_acknowledgements.extend(nag.acknowledge_table_key_grant(self, role))
        self._session_access.configure(
            broker, self.session_environment(), "add_tenant_session_role"
        )
        return role

    def session_environment(self) -> dict[str, str]:
        """The environment ``SessionStore.from_env()`` reads, as set by ``grant_session_access``.

        Raises:
            ValueError: ``event_filter`` is ``TTL_DELETES_ONLY`` (see ``grant_session_access``).
        """
        validation.check_filter_with_session_store(self.event_filter, "session_environment()")
        sweeper_env = (
            {} if self.expiry_sweeper is None else self.expiry_sweeper.sweeper_environment()
        )
        if self.global_table:
            sweeper_env = {**sweeper_env, **multi_region.environment(self)}
        return self._session_access.environment(sweeper_env)

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

    def metric_cleanup_paused_seconds(self, **options: Any) -> cloudwatch.Metric:
        """``CleanupPausedSeconds`` (embedded metric, seconds), Maximum over 5 minutes by default:
        how long the event source mapping has been ``Disabled``/``Disabling`` (0 while enabled),
        written every 5 minutes by ``pause_watch``; dimension ``EventSourceMappingUUID``."""
        return self.pause_watch.metric_cleanup_paused_seconds(**options)

    def metric_sessions_cleaned(self, *, reason: str, **options: Any) -> cloudwatch.Metric:
        """``SessionsCleaned`` (embedded metric) for one ``reason``, Sum by default.

        ``reason`` is ``"ttl"``, ``"deleted-after-expiry"`` or ``"explicit"``.

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
        ``"Decode"``, ``"TimeGuard"``, ``"Archive"``, ``"PublishEvent"``,
        ``"StopRuntimeSession"``, ``"StopCodeInterpreterSession"``, ``"StopBrowserSession"``,
        ``"Unexpected"``, a declared resource kind's release operation
        (``resource_targets``), or the name of one of ``custom_steps``.

        Raises:
            ValueError: another ``action`` (the runtime never emits it).
        """
        validation.check_choice(
            "action",
            action,
            (
                *contract.ACTIONS,
                *resource_kinds.declared_actions(),
                *(step.name for step in self.custom_steps),
            ),
        )
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
        """``ScratchPrefixesRefused`` (embedded metric): scratch prefixes an old image named that
        were not the session's own (``<root>[<tenant>/]<session id>/<incarnation>/``), Sum."""
        return self._runtime_metric(contract.METRIC_PREFIXES_REFUSED, None, options)

    def metric_grants_refused(self, **options: Any) -> cloudwatch.Metric:
        """``GrantsRefused`` (embedded metric): grants an old image named that the cleanup did
        not retire because KMS does not show them named for the record's key (or the image held
        a grant token without a grant id), Sum."""
        return self._runtime_metric(contract.METRIC_GRANTS_REFUSED, None, options)

    def metric_resources_refused(self, *, refusal: str, **options: Any) -> cloudwatch.Metric:
        """``ResourcesRefused`` (embedded metric) for one ``refusal``, Sum by default: ids (a
        connection, an AgentCore session, a grant) a removed session's old image named that the
        cleanup did not act on, because their ownership record does not show the removed
        session's key and incarnation holding them (``cdk_session_expiry.ownership``).

        ``refusal`` is ``"NotOwned"`` (the record names another session: a forged image or a
        writer that bypasses ``SessionStore``; alarmed), ``"Unclaimed"`` (no record for an item
        written with records; alarmed), ``"Superseded"`` (a later incarnation or session holds
        it now, or its record names the removed incarnation as the holder it took the id over
        from), ``"Legacy"`` (an item written before ownership records: its ids are left to
        their own limits) or ``"ClaimExpired"`` (no longer produced since records are kept 21
        days past their owner's end; accepted so existing dashboards keep working).

        Raises:
            ValueError: another ``refusal`` (the runtime never emits it).
        """
        validation.check_choice("refusal", refusal, contract.REFUSALS)
        return self._runtime_metric(
            contract.METRIC_RESOURCES_REFUSED, {contract.DIMENSION_REFUSAL: refusal}, options
        )

    def metric_sessions_archived(self, **options: Any) -> cloudwatch.Metric:
        """``SessionsArchived`` (embedded metric): old images written to ``archive_bucket``, Sum."""
        return self._runtime_metric(contract.METRIC_SESSIONS_ARCHIVED, None, options)

    def metric_session_events_published(self, **options: Any) -> cloudwatch.Metric:
        """``SessionEventsPublished`` (embedded metric): events put on ``event_bus``, Sum."""
        return self._runtime_metric(contract.METRIC_EVENTS_PUBLISHED, None, options)

    def widgets(self, *, period: Duration | None = None) -> list[cloudwatch.IWidget]:
        """CloudWatch widgets for an application's own dashboard
        (``cdk_session_expiry.monitoring.dashboard``):
        the alarms' status, sessions cleaned by reason, TTL lag (p50/p99/max), iterator age,
        failures by action, records skipped by cause, resources refused by reason, scratch
        objects deleted, the on-failure destination, TTL and sweeper deletions, with the
        sweeper its expiry to sweep, how long the cleanup has been paused, and the top tenants
        by sessions cleaned, failed and refused (a Logs Insights table).

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
        """Create a CloudWatch dashboard of `widgets` (opt-in; nothing before this call).

        Args:
            id: construct id of the dashboard, a child of this construct. Default:
                ``"Dashboard"``.
            dashboard_name: the dashboard's name. Default: one CloudFormation generates.
            period: the period of every graph. Default: 5 minutes.
        """
        board = dashboard.add_dashboard(
            self, id, dashboard_name=dashboard_name, period=period or dashboard.DEFAULT_PERIOD
        )
        outputs.add_dashboard_output(self, id, board)
        return board

    # --- internals --------------------------------------------------------------------------

    def _runtime_metric(
        self, name: str, dimensions: dict[str, str] | None, options: dict[str, Any]
    ) -> cloudwatch.Metric:
        props: dict[str, Any] = {"statistic": cloudwatch.Stats.SUM, **options}
        if dimensions:
            props["dimensions_map"] = {**dimensions, **props.get("dimensions_map", {})}
        return cloudwatch.Metric(namespace=self.metrics_namespace, metric_name=name, **props)
