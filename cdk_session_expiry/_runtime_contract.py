"""The infrastructure side of the contract with the runtime code.

The construct and the runtime meet only through the code asset's location, environment
variables and metric names. This module holds the construct's copy of those names; the
runtime's copy is ``lambda_src/session_expiry_runtime/core/config.py``. ``tests/test_contract.py``
checks that both agree. Nothing here imports the runtime code.
"""

from __future__ import annotations

from pathlib import Path

#: Python package that holds the cleanup handler and the session runtime.
RUNTIME_PACKAGE = "session_expiry_runtime"
#: Lambda handler of the cleanup function, relative to the code asset's root.
CLEANUP_HANDLER = f"{RUNTIME_PACKAGE}.handler.handler"
#: Lambda handler of the expiry sweeper (same code asset as the cleanup function).
SWEEPER_HANDLER = f"{RUNTIME_PACKAGE}.sweeps.sweeper.handler"
#: Function of the sweeper's handler module that ends its run in progress after the pass in
#: progress (``session_expiry_runtime.sweeps.sweeper.stop_after_pass``); the local emulator calls it
#: in
#: the process hosting the handler (``cdk_session_expiry.testing``), AWS never does.
SWEEPER_STOP_HOOK = "stop_after_pass"


def runtime_package_dir() -> Path:
    """Directory of the runtime package, located from this file.

    In a source checkout (editable install) it is ``<repo>/lambda_src/session_expiry_runtime``;
    in an installed wheel hatchling ships it beside this package in ``site-packages``.

    Raises:
        FileNotFoundError: neither location holds the runtime package (a broken install).
    """
    here = Path(__file__).resolve().parent
    candidates = (
        here.parent / "lambda_src" / RUNTIME_PACKAGE,  # source checkout
        here.parent / RUNTIME_PACKAGE,  # installed wheel: sibling in site-packages
    )
    for candidate in candidates:
        if (candidate / "handler.py").is_file():
            return candidate
    raise FileNotFoundError(
        f"cannot find the {RUNTIME_PACKAGE!r} runtime package; looked in "
        + ", ".join(str(c) for c in candidates)
        + ". Reinstall cdk-session-expiry."
    )


# --- environment variable names (same values as session_expiry_runtime.core.config.ENV_*) -------
ENV_TABLE_NAME = "SESSION_EXPIRY_TABLE_NAME"
ENV_PARTITION_KEY = "SESSION_EXPIRY_PARTITION_KEY"
ENV_SORT_KEY = "SESSION_EXPIRY_SORT_KEY"
ENV_TTL_ATTRIBUTE = "SESSION_EXPIRY_TTL_ATTRIBUTE"
ENV_CONNECTION_ID_ATTRIBUTE = "SESSION_EXPIRY_CONNECTION_ID_ATTRIBUTE"
ENV_GRANT_ID_ATTRIBUTE = "SESSION_EXPIRY_GRANT_ID_ATTRIBUTE"
ENV_GRANT_TOKEN_ATTRIBUTE = "SESSION_EXPIRY_GRANT_TOKEN_ATTRIBUTE"  # noqa: S105 - a name
ENV_SCRATCH_PREFIX_ATTRIBUTE = "SESSION_EXPIRY_SCRATCH_PREFIX_ATTRIBUTE"
ENV_TENANT_ATTRIBUTE = "SESSION_EXPIRY_TENANT_ATTRIBUTE"
ENV_WEBSOCKET_ENDPOINT = "SESSION_EXPIRY_WEBSOCKET_ENDPOINT"
ENV_GRANT_KEY_ARN = "SESSION_EXPIRY_GRANT_KEY_ARN"
ENV_SCRATCH_BUCKET = "SESSION_EXPIRY_SCRATCH_BUCKET"
ENV_SCRATCH_ROOT = "SESSION_EXPIRY_SCRATCH_ROOT"
ENV_TENANT_SCOPED_SCRATCH = "SESSION_EXPIRY_TENANT_SCOPED_SCRATCH"
ENV_RETIRING_PRINCIPAL = "SESSION_EXPIRY_RETIRING_PRINCIPAL"
ENV_METRICS_NAMESPACE = "SESSION_EXPIRY_METRICS_NAMESPACE"
ENV_METRICS_TENANT_DIMENSION = "SESSION_EXPIRY_METRICS_TENANT_DIMENSION"
ENV_MAX_WORKERS = "SESSION_EXPIRY_MAX_WORKERS"
ENV_TIME_GUARD_MS = "SESSION_EXPIRY_TIME_GUARD_MS"

# --- defaults (the props document them) ----------------------------------------------------
DEFAULT_PARTITION_KEY = "pk"
DEFAULT_TTL_ATTRIBUTE = "expiresAt"
DEFAULT_CONNECTION_ID_ATTRIBUTE = "connectionId"
DEFAULT_GRANT_ID_ATTRIBUTE = "grantId"
DEFAULT_GRANT_TOKEN_ATTRIBUTE = "grantToken"  # noqa: S105 - an attribute name
DEFAULT_SCRATCH_PREFIX_ATTRIBUTE = "scratchPrefix"
DEFAULT_TENANT_ATTRIBUTE = "tenantId"
DEFAULT_SCRATCH_ROOT = "sessions/"
DEFAULT_METRICS_NAMESPACE = "SessionExpiry"
DEFAULT_MAX_WORKERS = 32
DEFAULT_TIME_GUARD_MS = 10_000

# --- metric names the runtime emits (embedded metric format) ------------------------------
METRIC_SESSIONS_CLEANED = "SessionsCleaned"
METRIC_CLEANUP_FAILURES = "CleanupFailures"
METRIC_RECORDS_SKIPPED = "RecordsSkipped"
METRIC_TTL_LAG = "TtlLagSeconds"
METRIC_OBJECTS_DELETED = "ScratchObjectsDeleted"
METRIC_PREFIXES_REFUSED = "ScratchPrefixesRefused"
METRIC_GRANTS_REFUSED = "GrantsRefused"
#: Calls the cleanup held back to its target's request rate (a quota bound), by ``Action`` =
#: the API operation.
METRIC_CALLS_PACED = "CallsPaced"
DIMENSION_REASON = "Reason"
DIMENSION_ACTION = "Action"
DIMENSION_CAUSE = "Cause"
#: The tenant of a session's metrics: always a property (a root member) of its EMF documents,
#: and with ``SESSION_EXPIRY_METRICS_TENANT_DIMENSION`` also a dimension (opt-in: priced per
#: tenant).
DIMENSION_TENANT = "Tenant"

# --- dimension values of the metrics above ---------------------------------------------------
#: Values of the ``Reason`` dimension of ``SessionsCleaned``.
REASON_TTL = "ttl"
REASON_DELETED_AFTER_EXPIRY = "deleted-after-expiry"
REASON_EXPLICIT = "explicit"
#: Values of the ``Action`` dimension of ``CleanupFailures``.
ACTION_DELETE_CONNECTION = "DeleteConnection"
ACTION_RETIRE_GRANT = "RetireGrant"
ACTION_DELETE_SCRATCH = "DeleteScratch"
ACTION_DECODE = "Decode"
ACTION_TIME_GUARD = "TimeGuard"
ACTION_UNEXPECTED = "Unexpected"
# --- values of the Cause dimension of RecordsSkipped ---------------------------------------
CAUSE_NOT_REMOVE = "NotRemove"
CAUSE_NO_OLD_IMAGE = "NoOldImage"
CAUSE_MISSING_ATTRIBUTES = "MissingAttributes"
CAUSE_NO_SEQUENCE_NUMBER = "NoSequenceNumber"
CAUSE_DUPLICATE = "DuplicateInBatch"

# --- global tables: the owner Region (issue 23; same values as session_expiry_runtime.core.config)
ENV_OWNER_REGION_ATTRIBUTE = "SESSION_EXPIRY_OWNER_REGION_ATTRIBUTE"
DEFAULT_OWNER_REGION_ATTRIBUTE = "ownerRegion"
ENV_REGION = "SESSION_EXPIRY_REGION"
CAUSE_OTHER_REGION = "OtherRegion"
CAUSE_ITEM_STILL_IN_TABLE = "ItemStillInTable"

# --- expiry sweeper and dry run (issue 6; same values as session_expiry_runtime.core.config) ------
ENV_SWEEP_SHARD_ATTRIBUTE = "SESSION_EXPIRY_SWEEP_SHARD_ATTRIBUTE"
ENV_SWEEP_SHARDS = "SESSION_EXPIRY_SWEEP_SHARDS"
ENV_SWEEP_INDEX_NAME = "SESSION_EXPIRY_SWEEP_INDEX_NAME"
ENV_DRY_RUN = "SESSION_EXPIRY_DRY_RUN"
DEFAULT_SWEEP_SHARD_ATTRIBUTE = "expiryShard"
DEFAULT_SWEEP_SHARDS = 4
DEFAULT_SWEEP_INDEX_NAME = "expirySweep"
ENV_SWEEP_INTERVAL_SECONDS = "SESSION_EXPIRY_SWEEP_INTERVAL_SECONDS"
#: Keys of the event each of the sweeper's schedule targets sends (its input transformer):
#: the shard indices that run sweeps, the rule's scheduled time (the event's ``time``) and
#: the rule's period in seconds. A run starts no call after ``scheduledAt + periodSeconds``
#: less its time guard, so two runs of one shard never overlap.
EVENT_SWEEP_SHARDS = "expiryShards"
EVENT_SWEEP_SCHEDULED_AT = "scheduledAt"
EVENT_SWEEP_PERIOD_SECONDS = "periodSeconds"
METRIC_SESSIONS_SWEPT = "SessionsSwept"
METRIC_SWEEP_LAG = "SweepLagSeconds"
METRIC_SWEEP_SKIPPED = "SweepSkipped"
METRIC_SWEEP_FAILURES = "SweepFailures"
METRIC_SESSIONS_WOULD_BE_CLEANED = "SessionsWouldBeCleaned"
METRIC_SESSIONS_WOULD_BE_SWEPT = "SessionsWouldBeSwept"

# --- archive, fan-out (issue 6; same values as session_expiry_runtime.core.config) ---------------
ENV_ARCHIVE_BUCKET = "SESSION_EXPIRY_ARCHIVE_BUCKET"
ENV_ARCHIVE_PREFIX = "SESSION_EXPIRY_ARCHIVE_PREFIX"
ENV_ARCHIVE_KMS_KEY_ARN = "SESSION_EXPIRY_ARCHIVE_KMS_KEY_ARN"
ENV_EVENT_BUS_ARN = "SESSION_EXPIRY_EVENT_BUS_ARN"
DEFAULT_ARCHIVE_PREFIX = "archive/"
METRIC_SESSIONS_ARCHIVED = "SessionsArchived"
METRIC_EVENTS_PUBLISHED = "SessionEventsPublished"
ACTION_ARCHIVE = "Archive"
ACTION_PUBLISH_EVENT = "PublishEvent"
#: Source and detail type of the one event per cleaned session (``event_bus``).
EVENT_SOURCE = "cdk-session-expiry"
EVENT_DETAIL_TYPE = "Session Cleaned"

# --- sessions: connections, absolute lifetime (issue 11; same values as the runtime's) -------
ENV_CONNECTION_IDS_ATTRIBUTE = "SESSION_EXPIRY_CONNECTION_IDS_ATTRIBUTE"
ENV_NOT_AFTER_ATTRIBUTE = "SESSION_EXPIRY_NOT_AFTER_ATTRIBUTE"
ENV_MAX_SESSION_LIFETIME_SECONDS = "SESSION_EXPIRY_MAX_SESSION_LIFETIME_SECONDS"
DEFAULT_CONNECTION_IDS_ATTRIBUTE = "connectionIds"
DEFAULT_NOT_AFTER_ATTRIBUTE = "notAfter"
#: 8 hours: Amazon Bedrock AgentCore Runtime's default maximum session lifetime.
DEFAULT_MAX_SESSION_LIFETIME_SECONDS = 8 * 3600

# --- AgentCore sessions and user-defined steps (issue 10; same values on both sides) ---------
#: The AgentCore runtime whose sessions the cleanup stops (``StopRuntimeSession``), its ARN.
ENV_AGENT_RUNTIME_ARN = "SESSION_EXPIRY_AGENT_RUNTIME_ARN"
#: Optional endpoint qualifier of ``StopRuntimeSession`` (unset: the service's default).
ENV_AGENT_RUNTIME_QUALIFIER = "SESSION_EXPIRY_AGENT_RUNTIME_QUALIFIER"
#: The code interpreter identifier of ``StopCodeInterpreterSession``.
ENV_CODE_INTERPRETER_ID = "SESSION_EXPIRY_CODE_INTERPRETER_ID"
#: The browser identifier of ``StopBrowserSession``.
ENV_BROWSER_ID = "SESSION_EXPIRY_BROWSER_ID"
ENV_AGENT_RUNTIME_SESSION_ATTRIBUTE = "SESSION_EXPIRY_AGENT_RUNTIME_SESSION_ATTRIBUTE"
ENV_CODE_INTERPRETER_SESSION_ATTRIBUTE = "SESSION_EXPIRY_CODE_INTERPRETER_SESSION_ATTRIBUTE"
ENV_BROWSER_SESSION_ATTRIBUTE = "SESSION_EXPIRY_BROWSER_SESSION_ATTRIBUTE"
DEFAULT_AGENT_RUNTIME_SESSION_ATTRIBUTE = "agentRuntimeSessionId"
DEFAULT_CODE_INTERPRETER_SESSION_ATTRIBUTE = "codeInterpreterSessionId"
DEFAULT_BROWSER_SESSION_ATTRIBUTE = "browserSessionId"
ACTION_STOP_RUNTIME_SESSION = "StopRuntimeSession"
ACTION_STOP_CODE_INTERPRETER_SESSION = "StopCodeInterpreterSession"
ACTION_STOP_BROWSER_SESSION = "StopBrowserSession"
#: JSON list of user-defined steps: ``[{"name": str, "handler": "package.module.function",
#: "preview": "package.module.function" | null, "attributes": [str, ...]}, ...]``; each
#: ``name`` is the step's metric ``Action``.
ENV_CUSTOM_STEPS = "SESSION_EXPIRY_CUSTOM_STEPS"
#: Custom steps' own resource kinds: JSON object of step name -> the session attribute holding
#: its ids (``CustomCleanupStep(resource_attribute=...)``), for ``SessionStore.attach_resource``
#: and the claim registrar.
ENV_CUSTOM_KINDS = "SESSION_EXPIRY_CUSTOM_KINDS"
# --- grant sweep (issue 12; same values as session_expiry_runtime.core.config) -------------------
GRANT_SWEEPER_HANDLER = f"{RUNTIME_PACKAGE}.sweeps.grant_sweeper.handler"
ENV_GRANT_SWEEP_GRACE_SECONDS = "SESSION_EXPIRY_GRANT_SWEEP_GRACE_SECONDS"
DEFAULT_GRANT_SWEEP_GRACE_SECONDS = 900
METRIC_ORPHAN_GRANTS_RETIRED = "OrphanGrantsRetired"
METRIC_EXPIRED_GRANTS_RETIRED = "ExpiredSessionGrantsRetired"
METRIC_GRANTS_WOULD_BE_RETIRED = "GrantsWouldBeRetired"
METRIC_GRANT_SWEEP_FAILURES = "GrantSweepFailures"
METRIC_GRANT_SWEEP_UNUSABLE_NAMES = "GrantSweepUnusableNames"
METRIC_GRANT_SWEEP_INCOMPLETE = "GrantSweepIncomplete"
METRIC_GRANTS_CHECKED = "GrantsChecked"
#: Grants on the grant key when a grant sweep pass finished (all of the key's grants).
METRIC_GRANTS_ON_KEY = "GrantsOnKey"
ENV_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND = "SESSION_EXPIRY_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND"
DEFAULT_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND = 5
#: The cleanup's KMS ``RetireGrant`` requests a second, every invocation together
#: (`shared_pace`; the construct's ``grant_retire_budget``): a fifth of KMS's default request
#: rate of 50 a second (AWS KMS Developer Guide, "Request quotas"); two seconds' budgets can meet
#: in one second's span (20), the rest to the application and the grant sweep's 5.
ENV_KMS_RETIRE_GRANT_BUDGET = "SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET"
DEFAULT_KMS_RETIRE_GRANT_BUDGET = 10
#: Paced requests sent without the shared budget because its item could not be written.
METRIC_SHARED_PACE_UNAVAILABLE = "SharedPaceUnavailable"

# --- tool-session sweep (issue 36; same values as session_expiry_runtime.core.config) ------------
TOOL_SESSION_SWEEPER_HANDLER = f"{RUNTIME_PACKAGE}.sweeps.tool_session_sweeper.handler"
ENV_TOOL_SESSION_SWEEP_GRACE_SECONDS = "SESSION_EXPIRY_TOOL_SESSION_SWEEP_GRACE_SECONDS"
DEFAULT_TOOL_SESSION_SWEEP_GRACE_SECONDS = 900
ENV_TOOL_SESSION_SWEEP_PENDING_SECONDS = "SESSION_EXPIRY_TOOL_SESSION_SWEEP_PENDING_SECONDS"
DEFAULT_TOOL_SESSION_SWEEP_PENDING_SECONDS = 7 * 3600
ENV_TOOL_SESSION_SWEEP_REQUESTS_PER_SECOND = "SESSION_EXPIRY_TOOL_SESSION_SWEEP_REQUESTS_PER_SECOND"
DEFAULT_TOOL_SESSION_SWEEP_REQUESTS_PER_SECOND = 5
METRIC_ORPHAN_TOOL_SESSIONS_STOPPED = "OrphanToolSessionsStopped"
METRIC_EXPIRED_TOOL_SESSIONS_STOPPED = "ExpiredSessionToolSessionsStopped"
METRIC_TOOL_SESSIONS_WOULD_BE_STOPPED = "ToolSessionsWouldBeStopped"
METRIC_TOOL_SESSION_SWEEP_FAILURES = "ToolSessionSweepFailures"
METRIC_TOOL_SESSION_SWEEP_INCOMPLETE = "ToolSessionSweepIncomplete"
METRIC_TOOL_SESSIONS_CHECKED = "ToolSessionsChecked"

# --- ownership records (issue 20; same values as session_expiry_runtime.core.config) ------------
ENV_OWNERSHIP_TABLE_NAME = "SESSION_EXPIRY_OWNERSHIP_TABLE_NAME"
#: The claim registrar (the one writer of ownership records besides the cleanup): the function
#: ``SessionStore`` invokes to claim and release ids. Set on every function given
#: ``grant_session_access`` when the ownership table exists.
ENV_CLAIM_REGISTRAR_FUNCTION = "SESSION_EXPIRY_CLAIM_REGISTRAR_FUNCTION"
#: Counted by the registrar for each request it refuses because its session incarnation is not
#: the key's live one (alarmed: a writer asking for another session, or a session that ended
#: while one of its ids was being recorded).
METRIC_CLAIM_REQUESTS_REFUSED = "ClaimRequestsRefused"
ENV_INCARNATION_ATTRIBUTE = "SESSION_EXPIRY_INCARNATION_ATTRIBUTE"
DEFAULT_INCARNATION_ATTRIBUTE = "incarnation"
#: String (fixed name): the session's secret for the claim registrar, written by the store.
DEFAULT_CLAIM_TOKEN_ATTRIBUTE = "claimToken"  # noqa: S105 (an attribute name)
#: String (fixed name): the incarnation a session replaced under its key, written by the store.
DEFAULT_PREVIOUS_INCARNATION_ATTRIBUTE = "previousIncarnation"
ENV_AGENT_RUNTIME_SESSION_IDS_ATTRIBUTE = "SESSION_EXPIRY_AGENT_RUNTIME_SESSION_IDS_ATTRIBUTE"
ENV_CODE_INTERPRETER_SESSION_IDS_ATTRIBUTE = "SESSION_EXPIRY_CODE_INTERPRETER_SESSION_IDS_ATTRIBUTE"
ENV_BROWSER_SESSION_IDS_ATTRIBUTE = "SESSION_EXPIRY_BROWSER_SESSION_IDS_ATTRIBUTE"
DEFAULT_AGENT_RUNTIME_SESSION_IDS_ATTRIBUTE = "agentRuntimeSessionIds"
DEFAULT_CODE_INTERPRETER_SESSION_IDS_ATTRIBUTE = "codeInterpreterSessionIds"
DEFAULT_BROWSER_SESSION_IDS_ATTRIBUTE = "browserSessionIds"
DEFAULT_GRANT_CONSISTENCY_SECONDS = 300
ENV_GRANT_SWEEP_PENDING_SECONDS = "SESSION_EXPIRY_GRANT_SWEEP_PENDING_SECONDS"
DEFAULT_GRANT_SWEEP_PENDING_SECONDS = 7 * 3600
METRIC_RESOURCES_REFUSED = "ResourcesRefused"
DIMENSION_REFUSAL = "Refusal"
#: Values of the ``Refusal`` dimension of ``ResourcesRefused``.
REFUSAL_NOT_OWNED = "NotOwned"
REFUSAL_UNCLAIMED = "Unclaimed"
REFUSAL_SUPERSEDED = "Superseded"
REFUSAL_LEGACY = "Legacy"
REFUSAL_CLAIM_EXPIRED = "ClaimExpired"
#: Refusals that only a forged image or a writer bypassing SessionStore produce: alarmed.
ALARMED_REFUSALS: tuple[str, ...] = (REFUSAL_NOT_OWNED, REFUSAL_UNCLAIMED)
ACTION_OWNERSHIP = "Ownership"
#: The ownership table's partition key (String) and time to live attribute (Number): fixed
#: names, the construct creates the table with them. The runtime's home for them is
#: ``session_expiry_runtime.core.ownership`` (``ATTR_RESOURCE``, ``ATTR_EXPIRES_AT``);
#: ``tests/infra/test_ownership_table.py`` checks both agree.
OWNERSHIP_PARTITION_KEY = "resource"
OWNERSHIP_TTL_ATTRIBUTE = "expiresAt"

# --- queryable archive, archive at scale, agent memory (issue 24; same values on both sides) --
#: The Amazon Data Firehose delivery stream (its name) the archive step hands records to
#: instead of one PutObject per session (``archive_delivery_stream``). Unset: PutObject.
ENV_ARCHIVE_DELIVERY_STREAM = "SESSION_EXPIRY_ARCHIVE_DELIVERY_STREAM"
#: The AgentCore Memory (its ARN: the data plane's ``memoryId`` accepts it) whose short-term
#: events of each removed session the cleanup deletes (``agent_memory``).
ENV_AGENT_MEMORY_ID = "SESSION_EXPIRY_AGENT_MEMORY_ID"
#: String Set of the session's AgentCore Memory sessions, each ``<actorId>/<sessionId>``.
ENV_AGENT_MEMORY_SESSIONS_ATTRIBUTE = "SESSION_EXPIRY_AGENT_MEMORY_SESSIONS_ATTRIBUTE"
DEFAULT_AGENT_MEMORY_SESSIONS_ATTRIBUTE = "agentMemorySessions"
#: JSON list of long-term memory record namespaces, each with ``{sessionId}`` (and optionally
#: ``{actorId}``): the records in them are the session's own and are deleted too. Unset: none.
ENV_AGENT_MEMORY_RECORD_NAMESPACES = "SESSION_EXPIRY_AGENT_MEMORY_RECORD_NAMESPACES"
#: ListEvents/DeleteEvent of a memory session failed (or ran out of time).
ACTION_DELETE_MEMORY_EVENTS = "DeleteMemoryEvents"
#: ListMemoryRecords/DeleteMemoryRecord of a memory session's namespaces failed.
ACTION_DELETE_MEMORY_RECORDS = "DeleteMemoryRecords"

# --- a paused cleanup is loud; the circuit breaker (issue 21; same values as the runtime's) ---
PAUSE_WATCH_HANDLER = f"{RUNTIME_PACKAGE}.switches.pause_watch.handler"
#: The claim registrar's entry point (same code asset as the cleanup).
CLAIM_REGISTRAR_HANDLER = f"{RUNTIME_PACKAGE}.registrar.handler"
CIRCUIT_BREAKER_HANDLER = f"{RUNTIME_PACKAGE}.switches.circuit_breaker.handler"
ENV_EVENT_SOURCE_MAPPING_UUID = "SESSION_EXPIRY_EVENT_SOURCE_MAPPING_UUID"
#: Seconds the mapping has been Disabled/Disabling (0 while enabled), Maximum alarmed.
METRIC_CLEANUP_PAUSED_SECONDS = "CleanupPausedSeconds"
#: The breaker's state: BREAKER_CLOSED, BREAKER_HALF_OPEN or BREAKER_OPEN.
METRIC_CIRCUIT_BREAKER_STATE = "CircuitBreakerState"
#: Dimension of both: the mapping's UUID (AWS/Lambda's own name for it).
DIMENSION_EVENT_SOURCE_MAPPING = "EventSourceMappingUUID"
BREAKER_CLOSED = 0
BREAKER_HALF_OPEN = 1
BREAKER_OPEN = 2
ENV_BREAKER_STATE_PARAMETER = "SESSION_EXPIRY_BREAKER_STATE_PARAMETER"
ENV_BREAKER_ALARMS = "SESSION_EXPIRY_BREAKER_ALARMS"
ENV_BREAKER_CLOSED_ONLY_ALARMS = "SESSION_EXPIRY_BREAKER_CLOSED_ONLY_ALARMS"
ENV_BREAKER_COOL_DOWN_SECONDS = "SESSION_EXPIRY_BREAKER_COOL_DOWN_SECONDS"
ENV_BREAKER_PROBE_SECONDS = "SESSION_EXPIRY_BREAKER_PROBE_SECONDS"
ENV_CLEANUP_ENABLED = "SESSION_EXPIRY_CLEANUP_ENABLED"

# --- every value of each dimension the runtime emits (checked by the metric_* methods) -----
REASONS: tuple[str, ...] = tuple(v for k, v in globals().items() if k.startswith("REASON_"))
#: Writing the deferred work of a step switched off by its feature flag.
ACTION_DEFERRAL = "Deferral"
ACTIONS: tuple[str, ...] = tuple(v for k, v in globals().items() if k.startswith("ACTION_"))
CAUSES: tuple[str, ...] = tuple(v for k, v in globals().items() if k.startswith("CAUSE_"))
REFUSALS: tuple[str, ...] = tuple(v for k, v in globals().items() if k.startswith("REFUSAL_"))

# Feature flags in AWS AppConfig (``feature_flags``; runtime ``feature_flags``, ``deferred``).
ENV_FLAGS_APPLICATION = "SESSION_EXPIRY_FLAGS_APPLICATION"
ENV_FLAGS_ENVIRONMENT = "SESSION_EXPIRY_FLAGS_ENVIRONMENT"
ENV_FLAGS_PROFILE = "SESSION_EXPIRY_FLAGS_PROFILE"
ENV_FLAGS_POLL_SECONDS = "SESSION_EXPIRY_FLAGS_POLL_SECONDS"
ENV_FLAGS_DEPLOYMENT_STRATEGY = "SESSION_EXPIRY_FLAGS_DEPLOYMENT_STRATEGY"
DEFAULT_FLAGS_POLL_SECONDS = 30
METRIC_FEATURE_FLAGS_READ_FAILURES = "FeatureFlagsReadFailures"
METRIC_STEPS_DISABLED = "StepsDisabled"
METRIC_SESSIONS_DEFERRED = "SessionsDeferred"
METRIC_DEFERRED_WORK_DONE = "DeferredWorkDone"
METRIC_DEFERRED_WORK_AGE = "DeferredWorkAgeSeconds"
#: The event the drain schedule sends the cleanup function (runtime ``deferred``).
DRAIN_EVENT = {"sessionExpiryDrain": True}
#: The deferred-work table (``<SessionExpiry>/DeferredWorkTable``, runtime ``deferred``): its
#: name, on the cleanup function only (no application function may write deferred work).
ENV_DEFERRED_WORK_TABLE_NAME = "SESSION_EXPIRY_DEFERRED_WORK_TABLE_NAME"
#: Deferred work the drain refused to run: its record's item is still in the session table with
#: the same incarnation (the removal did not happen), or the record cannot be verified. Alarmed.
METRIC_DEFERRED_WORK_REFUSED = "DeferredWorkRefused"
#: The deferred-work table's partition key (String) and time to live attribute (Number).
DEFERRED_WORK_PARTITION_KEY = "resource"
DEFERRED_WORK_TTL_ATTRIBUTE = "expiresAt"
#: The deferred-work table's index of pending work and its keys (runtime ``deferred``).
DEFERRED_INDEX = "deferredWork"
DEFERRED_INDEX_PARTITION_KEY = "deferredStep"
DEFERRED_INDEX_SORT_KEY = "deferredAt"
