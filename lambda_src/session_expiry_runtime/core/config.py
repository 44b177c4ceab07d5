"""The runtime side of the contract with the construct.

Every environment variable the runtime reads, its default, and every metric name the
runtime emits are defined here and nowhere else. ``cdk_session_expiry/_runtime_contract.py``
holds the same names for the infrastructure side; ``tests/test_contract.py`` checks they agree.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .kinds import DECLARED_KINDS
from .prefixes import ScratchPrefixError, validate_scratch_root

#: An AgentCore runtime id: the runtime's name, a ``-`` and exactly 10 letters or digits (the
#: ``agentRuntimeId`` pattern of the Amazon Bedrock AgentCore Control API Reference,
#: GetAgentRuntime).
AGENT_RUNTIME_ID_PATTERN = r"[a-zA-Z][a-zA-Z0-9_]{0,99}-[a-zA-Z0-9]{10}"
_AGENT_RUNTIME_ARN = re.compile(
    rf"arn:aws[a-z-]*:bedrock-agentcore:[a-z0-9-]+:\d{{12}}:runtime/{AGENT_RUNTIME_ID_PATTERN}"
)

# --- environment variable names -------------------------------------------------------------
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
ENV_ARCHIVE_BUCKET = "SESSION_EXPIRY_ARCHIVE_BUCKET"
ENV_ARCHIVE_PREFIX = "SESSION_EXPIRY_ARCHIVE_PREFIX"
ENV_ARCHIVE_KMS_KEY_ARN = "SESSION_EXPIRY_ARCHIVE_KMS_KEY_ARN"
ENV_EVENT_BUS_ARN = "SESSION_EXPIRY_EVENT_BUS_ARN"

# --- defaults (documented in the construct's props) ----------------------------------------
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
DEFAULT_ARCHIVE_PREFIX = "archive/"

# --- metric names (CloudWatch embedded metric format) --------------------------------------
METRIC_SESSIONS_CLEANED = "SessionsCleaned"  # dimension Reason
METRIC_CLEANUP_FAILURES = "CleanupFailures"  # dimension Action
METRIC_RECORDS_SKIPPED = "RecordsSkipped"  # dimension Cause
METRIC_TTL_LAG = "TtlLagSeconds"  # no dimension; unit Seconds
METRIC_OBJECTS_DELETED = "ScratchObjectsDeleted"
METRIC_PREFIXES_REFUSED = "ScratchPrefixesRefused"
#: Grants an old image named that are not provably the session's own (see ``steps/grant.py``).
METRIC_GRANTS_REFUSED = "GrantsRefused"
METRIC_SESSIONS_ARCHIVED = "SessionsArchived"
METRIC_EVENTS_PUBLISHED = "SessionEventsPublished"
#: Calls that waited for their target's request rate (a quota bound; ``pacing.py``), by
#: ``Action`` = the API operation (``RetireGrant``, ``DeleteConnection``, ...).
METRIC_CALLS_PACED = "CallsPaced"
DIMENSION_REASON = "Reason"
DIMENSION_ACTION = "Action"
DIMENSION_CAUSE = "Cause"
#: The tenant of a session's metrics: always a property (a root member) of its EMF documents,
#: and with ``SESSION_EXPIRY_METRICS_TENANT_DIMENSION`` also a dimension (opt-in: priced per
#: tenant).
DIMENSION_TENANT = "Tenant"

# --- classification reasons ----------------------------------------------------------------
REASON_TTL = "ttl"
#: Deleted after its TTL had passed by someone other than the TTL service: the expiry sweeper,
#: a TTL delete replicated into a global-table replica, an application ending it after expiry.
REASON_DELETED_AFTER_EXPIRY = "deleted-after-expiry"
REASON_EXPLICIT = "explicit"

# --- cleanup actions (dimension values of CleanupFailures) ---------------------------------
ACTION_DELETE_CONNECTION = "DeleteConnection"
ACTION_RETIRE_GRANT = "RetireGrant"
ACTION_DELETE_SCRATCH = "DeleteScratch"
ACTION_DECODE = "Decode"
ACTION_TIME_GUARD = "TimeGuard"
#: A bug or an error outside the AWS calls; the record is reported, never lost.
ACTION_UNEXPECTED = "Unexpected"
#: The old image could not be written to the archive bucket (nothing else was done).
ACTION_ARCHIVE = "Archive"
#: The session's event could not be put on the event bus.
ACTION_PUBLISH_EVENT = "PublishEvent"

# --- expiry sweeper and dry run (issue 6) ---------------------------------------------------
#: Set (by the construct) only when the expiry sweeper is on: the session runtime then writes
#: the sparse index's shard attribute on create and touch.
ENV_SWEEP_SHARD_ATTRIBUTE = "SESSION_EXPIRY_SWEEP_SHARD_ATTRIBUTE"
ENV_SWEEP_SHARDS = "SESSION_EXPIRY_SWEEP_SHARDS"
ENV_SWEEP_INDEX_NAME = "SESSION_EXPIRY_SWEEP_INDEX_NAME"
#: "true": the cleanup (and the sweeper) log and count what they would do and change nothing.
ENV_DRY_RUN = "SESSION_EXPIRY_DRY_RUN"
DEFAULT_SWEEP_SHARD_ATTRIBUTE = "expiryShard"
DEFAULT_SWEEP_SHARDS = 4
DEFAULT_SWEEP_INDEX_NAME = "expirySweep"
#: Set (by the construct) only on a sub-minute sweeper: the sweeper function is started every
#: minute and runs a pass every this many seconds (a divisor of 60, at least 5) within its run.
ENV_SWEEP_INTERVAL_SECONDS = "SESSION_EXPIRY_SWEEP_INTERVAL_SECONDS"
#: Keys of the event each of the sweeper's schedule targets sends (its input transformer):
#: the shard indices that run sweeps, the rule's scheduled time (the event's ``time``) and
#: the rule's period in seconds. A run starts no call after ``scheduledAt + periodSeconds``
#: less its time guard, so two runs of one shard never overlap.
EVENT_SWEEP_SHARDS = "expiryShards"
EVENT_SWEEP_SCHEDULED_AT = "scheduledAt"
EVENT_SWEEP_PERIOD_SECONDS = "periodSeconds"
METRIC_SESSIONS_SWEPT = "SessionsSwept"  # no dimension
METRIC_SWEEP_LAG = "SweepLagSeconds"  # no dimension; unit Seconds; now - TTL at the delete
#: Due sessions the conditional delete left alone (a heartbeat extended them, or they ended).
METRIC_SWEEP_SKIPPED = "SweepSkipped"
METRIC_SWEEP_FAILURES = "SweepFailures"
#: Dry run: sessions the cleanup would have cleaned (dimension Reason) / the sweeper deleted.
METRIC_SESSIONS_WOULD_BE_CLEANED = "SessionsWouldBeCleaned"
METRIC_SESSIONS_WOULD_BE_SWEPT = "SessionsWouldBeSwept"

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

# --- reasons a record is skipped (dimension values of RecordsSkipped) ----------------------
#: ``eventName`` is not ``REMOVE`` (the filter changed or was dropped).
CAUSE_NOT_REMOVE = "NotRemove"
#: A REMOVE record without ``OldImage`` (stream view type KEYS_ONLY or NEW_IMAGE).
CAUSE_NO_OLD_IMAGE = "NoOldImage"
#: The old image names nothing the configured targets can clean (absent or unusable values).
CAUSE_MISSING_ATTRIBUTES = "MissingAttributes"
#: The record has no ``dynamodb.SequenceNumber``, so it cannot be reported or retried.
CAUSE_NO_SEQUENCE_NUMBER = "NoSequenceNumber"
#: The same ``SequenceNumber`` appeared earlier in the same batch; it was cleaned once.
CAUSE_DUPLICATE = "DuplicateInBatch"

# --- global tables: the owner Region (issue 23; same values on both sides) ---------------------
#: Set (by the construct) only for a global table: ``SessionStore.create`` then stamps the
#: session's owner Region (the Region whose replica it was created in) under this attribute,
#: the expiry sweeper's shard values carry it (``"<region>#<n>"``), and the cleanup acts only on
#: REMOVE records whose old image names its own Region (`regions`).
ENV_OWNER_REGION_ATTRIBUTE = "SESSION_EXPIRY_OWNER_REGION_ATTRIBUTE"
DEFAULT_OWNER_REGION_ATTRIBUTE = "ownerRegion"
#: The Region this cleanup, sweeper or store runs in; default ``AWS_REGION`` (set by Lambda).
ENV_REGION = "SESSION_EXPIRY_REGION"
#: Skip cause: the old image names another owner Region (or none) on a global table; that
#: Region's cleanup cleans the session.
CAUSE_OTHER_REGION = "OtherRegion"
#: Skip cause: a REMOVE that came through the Kinesis change stream names an item the table still
#: holds (with the image's incarnation): the removal did not happen; a record put into the stream
#: by another writer (`kinesis_removals`). Watched by the skipped-records alarm.
CAUSE_ITEM_STILL_IN_TABLE = "ItemStillInTable"

# --- grant sweep (issue 12) -----------------------------------------------------------------
#: A grant created less than this many seconds ago is never retired by the grant sweep (the
#: session store creates a grant before it stores it on the session).
ENV_GRANT_SWEEP_GRACE_SECONDS = "SESSION_EXPIRY_GRANT_SWEEP_GRACE_SECONDS"
DEFAULT_GRANT_SWEEP_GRACE_SECONDS = 900
#: Grants retired whose session was gone (no item, or another incarnation): the stream path
#: missed them. Alarmed above 0.
METRIC_ORPHAN_GRANTS_RETIRED = "OrphanGrantsRetired"
#: Grants retired whose session item was still there but expired (TTL had not deleted it yet).
METRIC_EXPIRED_GRANTS_RETIRED = "ExpiredSessionGrantsRetired"
#: Dry run: grants the sweep would have retired.
METRIC_GRANTS_WOULD_BE_RETIRED = "GrantsWouldBeRetired"
#: GetItem, RetireGrant or ListGrants calls that failed (the next run retries).
METRIC_GRANT_SWEEP_FAILURES = "GrantSweepFailures"
#: Grants named like the store's whose name gives no usable key of the table (skipped).
METRIC_GRANT_SWEEP_UNUSABLE_NAMES = "GrantSweepUnusableNames"
#: 1 when a run stopped at its time guard (or a failed ListGrants) before the last grant, else 0:
#: the grants past it wait for the next run, which resumes where this one stopped (a marker in
#: the ownership table). Alarmed above 0: a pass over the key takes more than one run.
METRIC_GRANT_SWEEP_INCOMPLETE = "GrantSweepIncomplete"
#: Grants of the key one run checked (every grant ListGrants gave it, the store's or not).
METRIC_GRANTS_CHECKED = "GrantsChecked"
#: Grants on the grant key when a grant sweep pass finished (all of the key's grants).
METRIC_GRANTS_ON_KEY = "GrantsOnKey"
#: KMS requests (ListGrants pages and RetireGrant calls) the grant sweep makes per second at
#: most: under the account's per-Region quotas, which every caller shares (AWS KMS Developer
#: Guide, "Request quotas": ListGrants 100, RetireGrant 50 per second by default).
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

# --- tool-session sweep (issue 36) ----------------------------------------------------------
#: An AgentCore code interpreter or browser session created less than this many seconds ago is
#: never stopped by the tool-session sweep (``SessionStore.attach_agent_session`` records a
#: session after the application started it).
ENV_TOOL_SESSION_SWEEP_GRACE_SECONDS = "SESSION_EXPIRY_TOOL_SESSION_SWEEP_GRACE_SECONDS"
DEFAULT_TOOL_SESSION_SWEEP_GRACE_SECONDS = 900
#: The stream path's bound: a tool session whose claim is unreleased and whose session is gone
#: is pending on the stream path (not an orphan) until it has been seen gone this long (the
#: event source mapping's maximum record age plus an hour). Set by the construct.
ENV_TOOL_SESSION_SWEEP_PENDING_SECONDS = "SESSION_EXPIRY_TOOL_SESSION_SWEEP_PENDING_SECONDS"
DEFAULT_TOOL_SESSION_SWEEP_PENDING_SECONDS = 7 * 3600
#: AgentCore requests (list pages and Stop calls) the sweep makes per second at most.
ENV_TOOL_SESSION_SWEEP_REQUESTS_PER_SECOND = "SESSION_EXPIRY_TOOL_SESSION_SWEEP_REQUESTS_PER_SECOND"
DEFAULT_TOOL_SESSION_SWEEP_REQUESTS_PER_SECOND = 5
#: Tool sessions stopped whose owning session was gone past the bound: the stream path missed
#: them. Alarmed above 0.
METRIC_ORPHAN_TOOL_SESSIONS_STOPPED = "OrphanToolSessionsStopped"
#: Tool sessions stopped whose session item was still there but expired (TTL lags by design).
METRIC_EXPIRED_TOOL_SESSIONS_STOPPED = "ExpiredSessionToolSessionsStopped"
#: Dry run: tool sessions the sweep would have stopped.
METRIC_TOOL_SESSIONS_WOULD_BE_STOPPED = "ToolSessionsWouldBeStopped"
#: List, GetItem, Stop or UpdateItem calls that failed (the next run retries).
METRIC_TOOL_SESSION_SWEEP_FAILURES = "ToolSessionSweepFailures"
#: 1 when a run stopped at its time guard before a tool's last running session, else 0.
METRIC_TOOL_SESSION_SWEEP_INCOMPLETE = "ToolSessionSweepIncomplete"
#: Running tool sessions one run checked.
METRIC_TOOL_SESSIONS_CHECKED = "ToolSessionsChecked"

# --- fan-out events (EventBridge PutEvents; the construct's rule patterns use the same) -----
EVENT_SOURCE = "cdk-session-expiry"
EVENT_DETAIL_TYPE = "Session Cleaned"

# --- sessions: connections, absolute lifetime (issue 11) -----------------------------------
#: String Set of every WebSocket connection id attached to a session (``connectionId`` keeps
#: the latest one, and is all that items written before the set hold).
ENV_CONNECTION_IDS_ATTRIBUTE = "SESSION_EXPIRY_CONNECTION_IDS_ATTRIBUTE"
#: Number, epoch seconds: the session's absolute end; no heartbeat sets the TTL past it.
ENV_NOT_AFTER_ATTRIBUTE = "SESSION_EXPIRY_NOT_AFTER_ATTRIBUTE"
ENV_MAX_SESSION_LIFETIME_SECONDS = "SESSION_EXPIRY_MAX_SESSION_LIFETIME_SECONDS"
DEFAULT_CONNECTION_IDS_ATTRIBUTE = "connectionIds"
DEFAULT_NOT_AFTER_ATTRIBUTE = "notAfter"
#: 8 hours: Amazon Bedrock AgentCore Runtime's default maximum session lifetime.
DEFAULT_MAX_SESSION_LIFETIME_SECONDS = 8 * 3600


# --- ownership records (issue 20; same values on both sides) ---------------------------------
#: The ownership table (see `ownership`): which session incarnation holds each
#: connection, AgentCore session and grant id. Set when a claimed target is configured.
ENV_OWNERSHIP_TABLE_NAME = "SESSION_EXPIRY_OWNERSHIP_TABLE_NAME"
#: The claim registrar (the one writer of ownership records besides the cleanup): the function
#: ``SessionStore`` invokes to claim and release ids. Set on every function given
#: ``grant_session_access`` when the ownership table exists.
ENV_CLAIM_REGISTRAR_FUNCTION = "SESSION_EXPIRY_CLAIM_REGISTRAR_FUNCTION"
#: Counted by the registrar for each request it refuses because its session incarnation is not
#: the key's live one (alarmed: a writer asking for another session, or a session that ended
#: while one of its ids was being recorded).
METRIC_CLAIM_REQUESTS_REFUSED = "ClaimRequestsRefused"
#: String: the session incarnation (also the last segment of its scratch prefix).
ENV_INCARNATION_ATTRIBUTE = "SESSION_EXPIRY_INCARNATION_ATTRIBUTE"
DEFAULT_INCARNATION_ATTRIBUTE = "incarnation"
#: String (fixed name): the secret a request to the claim registrar must show for its session
#: (32 random hex characters written by ``SessionStore.create``). Unlike the incarnation, which
#: the scratch prefix, the grant's name and the archive show, only a reader of the item has it.
CLAIM_TOKEN_ATTRIBUTE = "claimToken"  # noqa: S105 (an attribute name)
#: The same name as the construct's contract spells it (a prop naming it is refused at synth).
DEFAULT_CLAIM_TOKEN_ATTRIBUTE = CLAIM_TOKEN_ATTRIBUTE
#: String (fixed name): the incarnation a session replaced under its key, written by
#: ``SessionStore.create`` when it removed the key's dead item first (its reuse after expiry). The
#: Kinesis read-back takes it as proof that a ``REMOVE`` of that incarnation really happened
#: (`kinesis_removals`); only a writer of the session's key writes it.
PREVIOUS_INCARNATION_ATTRIBUTE = "previousIncarnation"
#: The same name as the construct's contract spells it (a prop naming it is refused at synth).
DEFAULT_PREVIOUS_INCARNATION_ATTRIBUTE = PREVIOUS_INCARNATION_ATTRIBUTE
#: String Sets of every AgentCore session id of each kind attached to a session (the single
#: ``agentRuntimeSessionId``-style attributes keep the latest one, and are all that items
#: written before the sets hold).
ENV_AGENT_RUNTIME_SESSION_IDS_ATTRIBUTE = "SESSION_EXPIRY_AGENT_RUNTIME_SESSION_IDS_ATTRIBUTE"
ENV_CODE_INTERPRETER_SESSION_IDS_ATTRIBUTE = "SESSION_EXPIRY_CODE_INTERPRETER_SESSION_IDS_ATTRIBUTE"
ENV_BROWSER_SESSION_IDS_ATTRIBUTE = "SESSION_EXPIRY_BROWSER_SESSION_IDS_ATTRIBUTE"
DEFAULT_AGENT_RUNTIME_SESSION_IDS_ATTRIBUTE = "agentRuntimeSessionIds"
DEFAULT_CODE_INTERPRETER_SESSION_IDS_ATTRIBUTE = "codeInterpreterSessionIds"
DEFAULT_BROWSER_SESSION_IDS_ATTRIBUTE = "browserSessionIds"
#: KMS: "there might be a brief delay, usually less than five minutes, until the grant is
#: available throughout AWS KMS" (AWS KMS API Reference, CreateGrant). A grant this young that
#: KMS does not find is retried, not counted retired.
DEFAULT_GRANT_CONSISTENCY_SECONDS = 300
#: The grant sweep treats a grant whose claim is unreleased and whose session item is gone as
#: pending on the stream path (not an orphan) until it has been seen gone this long: the event
#: source mapping's maximum record age (6 hours by default) plus an hour. Set by the construct.
ENV_GRANT_SWEEP_PENDING_SECONDS = "SESSION_EXPIRY_GRANT_SWEEP_PENDING_SECONDS"
DEFAULT_GRANT_SWEEP_PENDING_SECONDS = 7 * 3600
#: Resource ids an old image named that the cleanup did not act on (dimension Refusal).
METRIC_RESOURCES_REFUSED = "ResourcesRefused"
DIMENSION_REFUSAL = "Refusal"
#: The ownership record names another session (a forged image, or a writer that bypasses
#: SessionStore). Alarmed.
REFUSAL_NOT_OWNED = "NotOwned"
#: No ownership record for an id of an item written with ownership records. Alarmed.
REFUSAL_UNCLAIMED = "Unclaimed"
#: A later incarnation of this key, or a later session, holds the id now. Counted only.
REFUSAL_SUPERSEDED = "Superseded"
#: An item written before ownership records existed: its ids are never acted on (each resource
#: ends by its own limit). Counted only.
REFUSAL_LEGACY = "Legacy"
#: No longer produced (records are kept 21 days past their owner's end and a missing one is
#: ``Unclaimed``); the value stays a valid ``Refusal`` dimension for existing dashboards.
REFUSAL_CLAIM_EXPIRED = "ClaimExpired"
#: Reading, marking or releasing ownership records failed (the record fails and is retried).
ACTION_OWNERSHIP = "Ownership"
#: Writing the deferred work of a step switched off by its feature flag (`deferred`).
ACTION_DEFERRAL = "Deferral"

# Feature flags in AWS AppConfig (`feature_flags`, `deferred`; issue 26).
ENV_FLAGS_APPLICATION = "SESSION_EXPIRY_FLAGS_APPLICATION"
ENV_FLAGS_ENVIRONMENT = "SESSION_EXPIRY_FLAGS_ENVIRONMENT"
ENV_FLAGS_PROFILE = "SESSION_EXPIRY_FLAGS_PROFILE"
ENV_FLAGS_POLL_SECONDS = "SESSION_EXPIRY_FLAGS_POLL_SECONDS"
#: The deployment strategy the kill switch's ``flags set`` deploys with (not read by the cleanup).
ENV_FLAGS_DEPLOYMENT_STRATEGY = "SESSION_EXPIRY_FLAGS_DEPLOYMENT_STRATEGY"
#: Seconds between two reads of the flags in one execution environment.
DEFAULT_FLAGS_POLL_SECONDS = 30
#: AppConfig could not be read; the last good flags stayed in force.
METRIC_FEATURE_FLAGS_READ_FAILURES = "FeatureFlagsReadFailures"
#: A step switched off by its flag: its work deferred (dimension ``Action``).
METRIC_STEPS_DISABLED = "StepsDisabled"
#: A whole record deferred while the flag ``enabled`` was off.
METRIC_SESSIONS_DEFERRED = "SessionsDeferred"
#: Deferred work done by the drain (dimension ``Action``; ``*``: a whole record).
METRIC_DEFERRED_WORK_DONE = "DeferredWorkDone"
#: Age of the oldest deferred item left after a drain run (Seconds; 0 when none).
METRIC_DEFERRED_WORK_AGE = "DeferredWorkAgeSeconds"
#: The deferred-work table (`deferred`): only the cleanup role may write it.
ENV_DEFERRED_WORK_TABLE_NAME = "SESSION_EXPIRY_DEFERRED_WORK_TABLE_NAME"
#: Deferred work the drain refused to run: the session table still holds its record's item in
#: the same incarnation (the removal did not happen), or the record cannot be verified. Alarmed.
METRIC_DEFERRED_WORK_REFUSED = "DeferredWorkRefused"

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

# --- a paused cleanup is loud; the circuit breaker (issue 21; same values on both sides) -----
#: The cleanup's event source mapping (its UUID), read by the pause watch and the breaker.
ENV_EVENT_SOURCE_MAPPING_UUID = "SESSION_EXPIRY_EVENT_SOURCE_MAPPING_UUID"
#: Seconds the mapping has been ``Disabled``/``Disabling`` (now - ``LastModified``), 0 while it
#: is enabled; Maximum alarmed above ``alarm_cleanup_paused_after`` (see `pause_watch`).
METRIC_CLEANUP_PAUSED_SECONDS = "CleanupPausedSeconds"
#: The circuit breaker's state: `BREAKER_CLOSED`, `BREAKER_HALF_OPEN` or
#: `BREAKER_OPEN` (see `circuit_breaker`).
METRIC_CIRCUIT_BREAKER_STATE = "CircuitBreakerState"
#: Dimension of both metrics: the mapping's UUID (AWS/Lambda's name for it).
DIMENSION_EVENT_SOURCE_MAPPING = "EventSourceMappingUUID"
BREAKER_CLOSED = 0
BREAKER_HALF_OPEN = 1
BREAKER_OPEN = 2
#: The SSM parameter (a String) holding the breaker's record (JSON).
ENV_BREAKER_STATE_PARAMETER = "SESSION_EXPIRY_BREAKER_STATE_PARAMETER"
#: JSON list of the names of the alarms whose ALARM opens the breaker.
ENV_BREAKER_ALARMS = "SESSION_EXPIRY_BREAKER_ALARMS"
#: JSON list of those names that only open a closed breaker (the iterator age alarm: it rises
#: after any pause, so it says nothing during a cool-down or a probe).
ENV_BREAKER_CLOSED_ONLY_ALARMS = "SESSION_EXPIRY_BREAKER_CLOSED_ONLY_ALARMS"
ENV_BREAKER_COOL_DOWN_SECONDS = "SESSION_EXPIRY_BREAKER_COOL_DOWN_SECONDS"
ENV_BREAKER_PROBE_SECONDS = "SESSION_EXPIRY_BREAKER_PROBE_SECONDS"
#: ``"false"`` when the construct deploys the mapping disabled (``cleanup_enabled=False``): the
#: breaker then never enables it.
ENV_CLEANUP_ENABLED = "SESSION_EXPIRY_CLEANUP_ENABLED"


def _is_url(value: str, schemes: tuple[str, ...]) -> bool:
    scheme, sep, rest = value.partition("://")
    return bool(sep) and scheme in schemes and bool(rest.split("/", 1)[0])


def validate_cleanup_config(config: RuntimeConfig) -> RuntimeConfig:
    """Check the settings the cleanup function needs and return ``config`` unchanged.

    Called once per process when the cleanup handler starts, so a bad deployment fails every
    invocation loudly (function errors alarm) instead of skipping cleanups silently.

    Raises:
        ValueError: the WebSocket endpoint is not an ``https://`` (or, for local endpoints such as
            moto_server, ``http://``) URL; the grant key is not a key ARN; the scratch root breaks
            `session_expiry_runtime.core.prefixes.validate_scratch_root`; the metrics namespace
            is empty or longer than 1024 characters; the AgentCore runtime ARN is not one
            (``arn:aws:bedrock-agentcore:{region}:{account}:runtime/{id}``, the id matching
            `AGENT_RUNTIME_ID_PATTERN`: the runtime's name, ``-``, 10 letters or digits);
            the deferred-work table is set without the session table (the drain could verify
            nothing).
    """
    endpoint = config.websocket_endpoint
    if endpoint is not None and not _is_url(endpoint, ("https", "http")):
        raise ValueError(
            f"{ENV_WEBSOCKET_ENDPOINT}={endpoint!r}: expected the API Gateway management endpoint "
            "https://{api-id}.execute-api.{region}.amazonaws.com/{stage}"
        )
    key = config.grant_key_arn
    if key is not None and not (key.startswith("arn:") and ":key/" in key):
        raise ValueError(
            f"{ENV_GRANT_KEY_ARN}={key!r}: expected a KMS key ARN "
            "arn:aws:kms:{region}:{account}:key/{key-id}"
        )
    runtime_arn = config.agent_runtime_arn
    if runtime_arn is not None and not _AGENT_RUNTIME_ARN.fullmatch(runtime_arn):
        raise ValueError(
            f"{ENV_AGENT_RUNTIME_ARN}={runtime_arn!r}: expected an AgentCore runtime ARN "
            "arn:aws:bedrock-agentcore:{region}:{account}:runtime/{runtime-id}, where the "
            "runtime id is the runtime's name (a letter, then up to 99 letters, digits or '_'), "
            "a '-' and exactly 10 letters or digits "
            f"({AGENT_RUNTIME_ID_PATTERN}), e.g. "
            "'arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/my_agent-a1B2c3D4e5'"
        )
    if config.scratch_bucket is not None:
        validate_scratch_root(config.scratch_root)
    if config.archive_bucket is not None:
        validate_archive_prefix(config.archive_prefix)
    if not 1 <= len(config.metrics_namespace) <= 1024:
        raise ValueError(
            f"{ENV_METRICS_NAMESPACE}={config.metrics_namespace!r}: expected 1-1024 characters"
        )
    if config.deferred_work_table_name is not None and config.table_name is None:
        raise ValueError(
            f"{ENV_DEFERRED_WORK_TABLE_NAME} is set but {ENV_TABLE_NAME} is not: the drain reads "
            "each deferred record's item back from the session table before it acts; set it to "
            "the session table (the construct does with feature_flags: redeploy)"
        )
    return config


def validate_archive_prefix(prefix: str) -> str:
    """Check the archive prefix with the scratch root's rules and return it.

    Lives here, not in `archive`, so this module and the archive both import it from below
    (no import cycle).

    Raises:
        ValueError: ``prefix`` is empty, starts with ``/``, lacks the trailing ``/``, or holds
            wildcards, control characters or empty/``.``/``..`` segments.
    """
    try:
        return validate_scratch_root(prefix)
    except ScratchPrefixError as exc:
        raise ValueError(f"{ENV_ARCHIVE_PREFIX}={prefix!r}: {exc}") from None


#: A namespace placeholder with another character than ``/`` beside it: actor and session ids
#: hold ``-``, ``_`` (and actor ids ``/``, ``:``), so such a template fills to one namespace for
#: two different (actor, session) pairs. A whole segment is unambiguous: a session id holds no
#: ``/``. The construct's copy: ``cdk_session_expiry.agents.agent_memory``.
UNBOUNDED_NAMESPACE_PLACEHOLDER = re.compile(
    r"[^/]\{(?:actorId|sessionId)\}|\{(?:actorId|sessionId)\}[^/]"
)


def memory_record_namespaces(raw: str | None) -> tuple[str, ...]:
    """``SESSION_EXPIRY_AGENT_MEMORY_RECORD_NAMESPACES`` parsed: a JSON list of namespace
    templates, each holding ``{sessionId}`` (a namespace without it gathers records of many
    sessions, which cannot be told apart); empty when unset.

    Raises:
        ValueError: not a JSON list of strings, a template without ``{sessionId}``, with
            another placeholder, or with a placeholder that is not a whole segment.
    """
    if not raw:
        return ()
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if not isinstance(parsed, list) or not all(isinstance(t, str) and t for t in parsed):
        raise ValueError(
            f"{ENV_AGENT_MEMORY_RECORD_NAMESPACES}={raw!r}: expected a JSON list of namespace "
            'templates, e.g. ["/summaries/{actorId}/{sessionId}/"]'
        )
    for template in parsed:
        if "{sessionId}" not in template:
            raise ValueError(
                f"{ENV_AGENT_MEMORY_RECORD_NAMESPACES}: namespace {template!r} has no "
                "{sessionId}: its records are not one session's and are never deleted"
            )
        if "{" in template.replace("{actorId}", "").replace("{sessionId}", ""):
            raise ValueError(
                f"{ENV_AGENT_MEMORY_RECORD_NAMESPACES}: namespace {template!r}: expected only "
                "the placeholders {actorId} and {sessionId} (write a strategy id literally)"
            )
        if UNBOUNDED_NAMESPACE_PLACEHOLDER.search(template):
            raise ValueError(
                f"{ENV_AGENT_MEMORY_RECORD_NAMESPACES}: namespace {template!r}: expected each "
                "placeholder to be a whole segment (between '/' or the ends): ids beside "
                "another character fill one namespace for two sessions (actor 'a', session "
                "'b-c' and actor 'a-b', session 'c' in '{actorId}-{sessionId}')"
            )
    return tuple(parsed)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    """``env[name]`` as a positive integer; ``default`` when unset or empty.

    Raises:
        ValueError: the value is not a positive integer (the message names the variable).
    """
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected a positive integer") from None
    if value <= 0:
        raise ValueError(f"{name}={raw!r}: expected a positive integer")
    return value


#: The text settings: field -> (environment variable, value when it is unset or empty).
_TEXT_SETTINGS: dict[str, tuple[str, str | None]] = {
    "table_name": (ENV_TABLE_NAME, None),
    "partition_key": (ENV_PARTITION_KEY, DEFAULT_PARTITION_KEY),
    "sort_key": (ENV_SORT_KEY, None),
    "ttl_attribute": (ENV_TTL_ATTRIBUTE, DEFAULT_TTL_ATTRIBUTE),
    "connection_id_attribute": (ENV_CONNECTION_ID_ATTRIBUTE, DEFAULT_CONNECTION_ID_ATTRIBUTE),
    "grant_id_attribute": (ENV_GRANT_ID_ATTRIBUTE, DEFAULT_GRANT_ID_ATTRIBUTE),
    "grant_token_attribute": (ENV_GRANT_TOKEN_ATTRIBUTE, DEFAULT_GRANT_TOKEN_ATTRIBUTE),
    "scratch_prefix_attribute": (ENV_SCRATCH_PREFIX_ATTRIBUTE, DEFAULT_SCRATCH_PREFIX_ATTRIBUTE),
    "tenant_attribute": (ENV_TENANT_ATTRIBUTE, DEFAULT_TENANT_ATTRIBUTE),
    "websocket_endpoint": (ENV_WEBSOCKET_ENDPOINT, None),
    "grant_key_arn": (ENV_GRANT_KEY_ARN, None),
    "scratch_bucket": (ENV_SCRATCH_BUCKET, None),
    "scratch_root": (ENV_SCRATCH_ROOT, DEFAULT_SCRATCH_ROOT),
    "retiring_principal": (ENV_RETIRING_PRINCIPAL, None),
    "metrics_namespace": (ENV_METRICS_NAMESPACE, DEFAULT_METRICS_NAMESPACE),
    "archive_bucket": (ENV_ARCHIVE_BUCKET, None),
    "archive_prefix": (ENV_ARCHIVE_PREFIX, DEFAULT_ARCHIVE_PREFIX),
    "archive_kms_key_arn": (ENV_ARCHIVE_KMS_KEY_ARN, None),
    "event_bus_arn": (ENV_EVENT_BUS_ARN, None),
    "sweep_shard_attribute": (ENV_SWEEP_SHARD_ATTRIBUTE, None),
    "sweep_index_name": (ENV_SWEEP_INDEX_NAME, DEFAULT_SWEEP_INDEX_NAME),
    "owner_region_attribute": (ENV_OWNER_REGION_ATTRIBUTE, None),
    "connection_ids_attribute": (ENV_CONNECTION_IDS_ATTRIBUTE, DEFAULT_CONNECTION_IDS_ATTRIBUTE),
    "not_after_attribute": (ENV_NOT_AFTER_ATTRIBUTE, DEFAULT_NOT_AFTER_ATTRIBUTE),
    "agent_runtime_arn": (ENV_AGENT_RUNTIME_ARN, None),
    "agent_runtime_qualifier": (ENV_AGENT_RUNTIME_QUALIFIER, None),
    "code_interpreter_id": (ENV_CODE_INTERPRETER_ID, None),
    "browser_id": (ENV_BROWSER_ID, None),
    "agent_runtime_session_attribute": (
        ENV_AGENT_RUNTIME_SESSION_ATTRIBUTE,
        DEFAULT_AGENT_RUNTIME_SESSION_ATTRIBUTE,
    ),
    "code_interpreter_session_attribute": (
        ENV_CODE_INTERPRETER_SESSION_ATTRIBUTE,
        DEFAULT_CODE_INTERPRETER_SESSION_ATTRIBUTE,
    ),
    "browser_session_attribute": (ENV_BROWSER_SESSION_ATTRIBUTE, DEFAULT_BROWSER_SESSION_ATTRIBUTE),
    "custom_steps": (ENV_CUSTOM_STEPS, None),
    "custom_kinds": (ENV_CUSTOM_KINDS, None),
    "ownership_table_name": (ENV_OWNERSHIP_TABLE_NAME, None),
    "claim_registrar_function": (ENV_CLAIM_REGISTRAR_FUNCTION, None),
    "deferred_work_table_name": (ENV_DEFERRED_WORK_TABLE_NAME, None),
    "incarnation_attribute": (ENV_INCARNATION_ATTRIBUTE, DEFAULT_INCARNATION_ATTRIBUTE),
    "agent_runtime_session_ids_attribute": (
        ENV_AGENT_RUNTIME_SESSION_IDS_ATTRIBUTE,
        DEFAULT_AGENT_RUNTIME_SESSION_IDS_ATTRIBUTE,
    ),
    "code_interpreter_session_ids_attribute": (
        ENV_CODE_INTERPRETER_SESSION_IDS_ATTRIBUTE,
        DEFAULT_CODE_INTERPRETER_SESSION_IDS_ATTRIBUTE,
    ),
    "browser_session_ids_attribute": (
        ENV_BROWSER_SESSION_IDS_ATTRIBUTE,
        DEFAULT_BROWSER_SESSION_IDS_ATTRIBUTE,
    ),
    "archive_delivery_stream": (ENV_ARCHIVE_DELIVERY_STREAM, None),
    "agent_memory_id": (ENV_AGENT_MEMORY_ID, None),
    "agent_memory_sessions_attribute": (
        ENV_AGENT_MEMORY_SESSIONS_ATTRIBUTE,
        DEFAULT_AGENT_MEMORY_SESSIONS_ATTRIBUTE,
    ),
}
#: The positive integer settings: field -> (environment variable, value when it is unset).
_COUNT_SETTINGS: dict[str, tuple[str, int]] = {
    "max_workers": (ENV_MAX_WORKERS, DEFAULT_MAX_WORKERS),
    "time_guard_ms": (ENV_TIME_GUARD_MS, DEFAULT_TIME_GUARD_MS),
    "sweep_shards": (ENV_SWEEP_SHARDS, DEFAULT_SWEEP_SHARDS),
    "max_session_lifetime_seconds": (
        ENV_MAX_SESSION_LIFETIME_SECONDS,
        DEFAULT_MAX_SESSION_LIFETIME_SECONDS,
    ),
    "grant_sweep_grace_seconds": (ENV_GRANT_SWEEP_GRACE_SECONDS, DEFAULT_GRANT_SWEEP_GRACE_SECONDS),
    "grant_sweep_pending_seconds": (
        ENV_GRANT_SWEEP_PENDING_SECONDS,
        DEFAULT_GRANT_SWEEP_PENDING_SECONDS,
    ),
    "grant_sweep_kms_requests_per_second": (
        ENV_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND,
        DEFAULT_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND,
    ),
    "kms_retire_grant_budget": (ENV_KMS_RETIRE_GRANT_BUDGET, DEFAULT_KMS_RETIRE_GRANT_BUDGET),
}
#: The on/off settings: field -> environment variable (on: ``true``, ``1`` or ``yes``).
_FLAG_SETTINGS: dict[str, str] = {
    "tenant_scoped_scratch": ENV_TENANT_SCOPED_SCRATCH,
    "metrics_tenant_dimension": ENV_METRICS_TENANT_DIMENSION,
    "dry_run": ENV_DRY_RUN,
}


@dataclass(frozen=True)
class RuntimeConfig:
    """What the cleanup function and the session runtime read from their environment.

    Build it with `from_env`; tests build it directly. Optional targets are ``None``
    when the construct did not configure them, and the matching cleanup step is skipped.
    """

    table_name: str | None = None
    partition_key: str = DEFAULT_PARTITION_KEY
    sort_key: str | None = None
    ttl_attribute: str = DEFAULT_TTL_ATTRIBUTE
    connection_id_attribute: str = DEFAULT_CONNECTION_ID_ATTRIBUTE
    grant_id_attribute: str = DEFAULT_GRANT_ID_ATTRIBUTE
    grant_token_attribute: str = DEFAULT_GRANT_TOKEN_ATTRIBUTE
    scratch_prefix_attribute: str = DEFAULT_SCRATCH_PREFIX_ATTRIBUTE
    tenant_attribute: str = DEFAULT_TENANT_ATTRIBUTE
    websocket_endpoint: str | None = None
    grant_key_arn: str | None = None
    scratch_bucket: str | None = None
    scratch_root: str = DEFAULT_SCRATCH_ROOT
    tenant_scoped_scratch: bool = False
    retiring_principal: str | None = None
    metrics_namespace: str = DEFAULT_METRICS_NAMESPACE
    #: Add the ``Tenant`` dimension to the metrics of tenant-scoped sessions (opt-in).
    metrics_tenant_dimension: bool = False
    max_workers: int = DEFAULT_MAX_WORKERS
    time_guard_ms: int = DEFAULT_TIME_GUARD_MS
    archive_bucket: str | None = None
    archive_prefix: str = DEFAULT_ARCHIVE_PREFIX
    archive_kms_key_arn: str | None = None
    event_bus_arn: str | None = None
    sweep_shard_attribute: str | None = None
    sweep_shards: int = DEFAULT_SWEEP_SHARDS
    sweep_index_name: str = DEFAULT_SWEEP_INDEX_NAME
    #: Seconds between sweeper passes within one run; ``None``: one pass per run.
    sweep_interval_seconds: int | None = None
    #: Global tables (`regions`): the owner Region attribute; ``None``: a one-Region table.
    owner_region_attribute: str | None = None
    #: The Region this process runs in (``SESSION_EXPIRY_REGION``, else ``AWS_REGION``).
    region: str | None = None
    dry_run: bool = False
    connection_ids_attribute: str = DEFAULT_CONNECTION_IDS_ATTRIBUTE
    not_after_attribute: str = DEFAULT_NOT_AFTER_ATTRIBUTE
    max_session_lifetime_seconds: int = DEFAULT_MAX_SESSION_LIFETIME_SECONDS
    agent_runtime_arn: str | None = None
    agent_runtime_qualifier: str | None = None
    code_interpreter_id: str | None = None
    browser_id: str | None = None
    agent_runtime_session_attribute: str = DEFAULT_AGENT_RUNTIME_SESSION_ATTRIBUTE
    code_interpreter_session_attribute: str = DEFAULT_CODE_INTERPRETER_SESSION_ATTRIBUTE
    browser_session_attribute: str = DEFAULT_BROWSER_SESSION_ATTRIBUTE
    #: ``SESSION_EXPIRY_CUSTOM_STEPS`` as given (JSON text); parsed and imported by
    #: `session_expiry_runtime.steps.custom.load_custom_steps` when the cleanup starts.
    custom_steps: str | None = None
    #: Custom steps' own resource kinds (JSON, ``SESSION_EXPIRY_CUSTOM_KINDS``); ``None``: none.
    custom_kinds: str | None = None
    grant_sweep_grace_seconds: int = DEFAULT_GRANT_SWEEP_GRACE_SECONDS
    #: The ownership table (`ownership`); ``None``: no ownership records are written or
    #: read (no connection, AgentCore or grant target is configured).
    ownership_table_name: str | None = None
    #: The claim registrar function (`registrar`) ``SessionStore`` asks to write the
    #: ownership records; ``None``: the store writes them itself (tests, the registrar).
    claim_registrar_function: str | None = None
    #: The deferred-work table (`deferred`, feature flags); ``None``: no feature flags.
    deferred_work_table_name: str | None = None
    incarnation_attribute: str = DEFAULT_INCARNATION_ATTRIBUTE
    agent_runtime_session_ids_attribute: str = DEFAULT_AGENT_RUNTIME_SESSION_IDS_ATTRIBUTE
    code_interpreter_session_ids_attribute: str = DEFAULT_CODE_INTERPRETER_SESSION_IDS_ATTRIBUTE
    browser_session_ids_attribute: str = DEFAULT_BROWSER_SESSION_IDS_ATTRIBUTE
    grant_sweep_pending_seconds: int = DEFAULT_GRANT_SWEEP_PENDING_SECONDS
    #: The archive's Firehose delivery stream (name); ``None``: one PutObject per session.
    archive_delivery_stream: str | None = None
    #: The AgentCore Memory (ARN or id) whose events the cleanup deletes; ``None``: none.
    agent_memory_id: str | None = None
    agent_memory_sessions_attribute: str = DEFAULT_AGENT_MEMORY_SESSIONS_ATTRIBUTE
    #: Long-term record namespace templates (``{actorId}``, ``{sessionId}``); empty: records
    #: are left alone.
    agent_memory_record_namespaces: tuple[str, ...] = ()
    #: The grant sweep's KMS requests per second at most (``ListGrants`` + ``RetireGrant``).
    grant_sweep_kms_requests_per_second: int = DEFAULT_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND
    #: The cleanup's ``RetireGrant`` requests a second, every invocation together (the shared
    #: budget in the ownership table; `shared_pace`).
    kms_retire_grant_budget: int = DEFAULT_KMS_RETIRE_GRANT_BUDGET
    #: The targets of the declared kinds configured through ``resource_targets`` (`kinds`):
    #: (kind, target as the release call takes it) pairs, from each ``Target.env``.
    kind_targets: tuple[tuple[str, str], ...] = ()
    #: Their ids attributes when not the declared default: (kind, attribute) pairs, from each
    #: ``Ids.env``.
    kind_attributes: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RuntimeConfig:
        """Read the configuration from ``env`` (default: ``os.environ``).

        Raises:
            ValueError: a numeric variable is not a positive integer.
        """
        e = os.environ if env is None else env
        values: dict[str, Any] = {
            field: e.get(name) or default for field, (name, default) in _TEXT_SETTINGS.items()
        }
        values.update({f: _positive_int(e, *setting) for f, setting in _COUNT_SETTINGS.items()})
        values.update({field: _truthy(e.get(name)) for field, name in _FLAG_SETTINGS.items()})
        return cls(
            **values,
            sweep_interval_seconds=_positive_int(e, ENV_SWEEP_INTERVAL_SECONDS, 0) or None,
            region=e.get(ENV_REGION) or e.get("AWS_REGION") or None,
            agent_memory_record_namespaces=memory_record_namespaces(
                e.get(ENV_AGENT_MEMORY_RECORD_NAMESPACES)
            ),
            kind_targets=_kind_targets(e),
            kind_attributes=_kind_attributes(e),
        )


def _kind_targets(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``kind_targets`` from the declared kinds' ``Target.env`` variables (`kinds`)."""
    return tuple(
        (kind.kind, env[kind.target.env])
        for kind in DECLARED_KINDS
        if kind.target is not None and env.get(kind.target.env)
    )


def _kind_attributes(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``kind_attributes`` from the declared kinds' ``Ids.env`` variables (`kinds`)."""
    return tuple(
        (kind.kind, env[kind.ids.env])
        for kind in DECLARED_KINDS
        if kind.target is not None and env.get(kind.ids.env)
    )
