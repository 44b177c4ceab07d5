"""Clean up after removed sessions: the side effects, behind one small class.

:class:`SessionCleaner` takes its boto3 clients as arguments (:func:`build_clients` makes the
shared per-process set) and turns one stream record into one :class:`RecordResult`; it never
raises. :func:`process_batch` runs a batch through it concurrently and builds the partial batch
response. The decisions themselves live in pure modules: :mod:`.decode` (wire format),
:mod:`.classify` (why the item was removed), :mod:`.prefixes` (what may be deleted).

Cleanup steps, each run only when its target is configured and the old image names it:

* ``DeleteConnection`` (API Gateway Management API): ``GoneException`` means the connection is
  already closed, which is success. Anything else is a failure.
* ``RetireGrant`` (KMS): by ``GrantToken`` when the old image holds one, else by ``GrantId`` and
  the configured key ARN. ``NotFoundException`` means already retired: success.
* ``DeleteScratch`` (S3): only a prefix accepted by
  :func:`~session_expiry_runtime.prefixes.validate_scratch_prefix`; a refused prefix is counted
  (``ScratchPrefixesRefused``), logged and never retried. Every key under the prefix is listed
  (``ListObjectsV2``, paginated; botocore requests ``EncodingType=url`` and decodes the keys, so
  control characters survive the XML) and deleted with ``DeleteObjects`` (at most 1,000 keys,
  ``Quiet``); any ``Errors`` entry in its HTTP 200 answer is a failure. Keys holding characters
  that XML 1.0 cannot carry in the DeleteObjects body (most C0 controls) or a carriage return
  (XML parsers turn it into a line feed, so S3 would delete a different key) are deleted one by
  one with ``DeleteObject``, whose key travels percent-encoded in the URL.

Dry run (``SESSION_EXPIRY_DRY_RUN=true``, the construct's ``cleanup_dry_run``): every record is
classified, logged (outcome ``dry-run``, each step ``dry-run``, ``objectsWouldBeDeleted`` from a
ListObjectsV2 of the prefix) and counted (``SessionsWouldBeCleaned`` by ``Reason``); no
DeleteConnection, RetireGrant, DeleteObjects, archive write or event is made. The records are
consumed all the same: the stream position moves on.

Throttling, 5xx and connection errors are retried by botocore's ``standard`` retry mode first;
what still fails marks the record failed, so the event source mapping retries it (all steps are
idempotent) and, after its bounded retries, sends it to the on-failure destination.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from . import archive, events
from .classify import Classification, classify_removal
from .config import (
    ACTION_ARCHIVE,
    ACTION_DECODE,
    ACTION_DELETE_CONNECTION,
    ACTION_DELETE_SCRATCH,
    ACTION_RETIRE_GRANT,
    ACTION_TIME_GUARD,
    ACTION_UNEXPECTED,
    CAUSE_DUPLICATE,
    CAUSE_MISSING_ATTRIBUTES,
    CAUSE_NO_OLD_IMAGE,
    CAUSE_NO_SEQUENCE_NUMBER,
    CAUSE_NOT_REMOVE,
    DIMENSION_REASON,
    METRIC_EVENTS_PUBLISHED,
    METRIC_SESSIONS_ARCHIVED,
    METRIC_SESSIONS_WOULD_BE_CLEANED,
    RuntimeConfig,
)
from .decode import DecodeError, StreamRecord, decode_image, parse_record, to_json_value
from .metrics import MetricsRecorder
from .prefixes import ScratchPrefixError, validate_scratch_prefix
from .timestamps import fast_timestamp_session

LOGGER = logging.getLogger("session_expiry_runtime.cleanup")

#: ``DeleteObjects`` takes at most 1,000 keys (Amazon S3 API Reference, DeleteObjects).
DELETE_OBJECTS_MAX_KEYS = 1000
#: botocore ``standard`` retry mode: exponential backoff with jitter, retry quota, and retries
#: of throttling (incl. 429 LimitExceededException), 5xx and connection errors. Attempts per
#: call, the first one included (botocore's ``total_max_attempts``).
MAX_ATTEMPTS = 4
CONNECT_TIMEOUT_SECONDS = 5
READ_TIMEOUT_SECONDS = 10

#: Characters outside XML 1.0's Char production, plus CR (normalised to LF by XML parsers).
_NOT_XML_SAFE = re.compile("[^\t\n\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]|\r")

OUTCOME_CLEANED = "cleaned"
OUTCOME_SKIPPED = "skipped"
OUTCOME_FAILED = "failed"
#: Dry run (``SESSION_EXPIRY_DRY_RUN``): the record would have been cleaned; nothing was changed.
OUTCOME_DRY_RUN = "dry-run"

#: A step's outcome when nothing was wrong.
STEP_DONE = "done"
STEP_ALREADY_DONE = "already-done"
STEP_REFUSED = "refused"
STEP_FAILED = "failed"
#: Dry run: the step would have run (its change-making call was not made).
STEP_DRY_RUN = "dry-run"


def client_config(max_workers: int) -> Config:
    """botocore settings shared by every cleanup client.

    ``standard`` retries with :data:`MAX_ATTEMPTS` attempts, bounded timeouts (so one hung call
    cannot outlast the time guard), and a connection pool large enough for the step pool plus
    the record threads (archive writes), so no connection is opened and discarded per call.
    """
    return Config(
        retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS},
        max_pool_connections=max(10, 2 * max_workers),
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
    )


@dataclass(frozen=True)
class CleanupClients:
    """boto3 clients of the configured targets; ``None`` for a target that is not configured."""

    apigateway: Any = None
    kms: Any = None
    s3: Any = None
    #: S3 client for the archive bucket (``archive_bucket``).
    archive: Any = None
    #: EventBridge client for the fan-out (``event_bus_arn``).
    events: Any = None


def build_clients(
    config: RuntimeConfig, session: boto3.session.Session | None = None
) -> CleanupClients:
    """Create the per-process clients (thread safe; shared by all workers).

    Region, credentials and endpoint overrides come from the usual environment
    (``AWS_REGION``, ``AWS_ENDPOINT_URL``, ``AWS_ENDPOINT_URL_S3``, ...), so the same code runs
    against moto_server. The management API client's endpoint is the configured
    ``SESSION_EXPIRY_WEBSOCKET_ENDPOINT`` (``https://{api-id}.execute-api.{region}.amazonaws.com/{stage}``).
    """
    # Response timestamps through the standard library (see .timestamps): a third of the CPU
    # of a 1,000-key listing instead of dateutil's. A session passed in is the caller's own.
    session = session or fast_timestamp_session()
    settings = client_config(config.max_workers)
    return CleanupClients(
        apigateway=session.client(
            "apigatewaymanagementapi", endpoint_url=config.websocket_endpoint, config=settings
        )
        if config.websocket_endpoint
        else None,
        kms=session.client("kms", config=settings) if config.grant_key_arn else None,
        s3=session.client("s3", config=settings) if config.scratch_bucket else None,
        archive=session.client("s3", config=settings) if config.archive_bucket else None,
        events=session.client("events", config=settings) if config.event_bus_arn else None,
    )


class StepFailed(Exception):
    """A cleanup step did not complete; ``action`` is a ``config.ACTION_*`` value."""

    def __init__(self, action: str, detail: str) -> None:
        super().__init__(f"{action}: {detail}")
        self.action = action
        self.detail = detail


@dataclass
class RecordResult:
    """What happened to one record.

    Attributes:
        sequence_number: ``dynamodb.SequenceNumber`` (``None`` only for a record without one).
        outcome: ``"cleaned"``, ``"skipped"`` or ``"failed"``; only ``failed`` records go into
            the partial batch response.
        reason: classification reason of a REMOVE record with a decodable old image.
        cause: ``config.CAUSE_*`` of a skipped record.
        failed_actions: ``config.ACTION_*`` of every failed step of a failed record.
        objects_deleted: scratch objects deleted while handling it (also on failure).
        prefix_refused: the scratch prefix was refused.
        lag_seconds: TTL lag of a TTL-classified record.
        log: the structured log fields (already JSON-serialisable).
    """

    sequence_number: str | None
    outcome: str
    reason: str | None = None
    cause: str | None = None
    failed_actions: tuple[str, ...] = ()
    objects_deleted: int = 0
    prefix_refused: bool = False
    lag_seconds: Decimal | None = None
    log: dict[str, Any] = field(default_factory=dict)
    #: The old image's tenant attribute (decoded), for the fan-out event.
    tenant: Any = None
    #: The old image was written to the archive bucket.
    archived: bool = False


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'Unknown')}: {error.get('Message', '')}".rstrip(": ")
    return f"{type(exc).__name__}: {exc}"


def _error_code(exc: BaseException) -> str | None:
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code")
        return code if isinstance(code, str) else None
    return None


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _nonempty_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class SessionCleaner:
    """Cleans up after one removed session per call; safe to share between threads.

    Args:
        config: the runtime configuration (attribute names, targets, scratch layout).
        clients: boto3 clients of the configured targets (see :func:`build_clients`).
        metrics: where counts go; flushed by :func:`process_batch`.
        logger: where the one structured line per record goes.
    """

    def __init__(
        self,
        config: RuntimeConfig,
        clients: CleanupClients,
        metrics: MetricsRecorder,
        *,
        logger: logging.Logger = LOGGER,
    ) -> None:
        self.config = config
        self.clients = clients
        self.metrics = metrics
        self.logger = logger

    # --- the three cleanup calls; each raises StepFailed, or returns a step outcome ----------
    def delete_connection(self, connection_id: str) -> str:
        """DeleteConnection; ``GoneException`` (HTTP 410) is success (``already-done``)."""
        try:
            self.clients.apigateway.delete_connection(ConnectionId=connection_id)
        except ClientError as exc:
            if _error_code(exc) == "GoneException":
                return STEP_ALREADY_DONE
            raise StepFailed(ACTION_DELETE_CONNECTION, _error_text(exc)) from exc
        except BotoCoreError as exc:
            raise StepFailed(ACTION_DELETE_CONNECTION, _error_text(exc)) from exc
        return STEP_DONE

    def retire_grant(self, *, grant_token: str | None, grant_id: str | None) -> str:
        """RetireGrant by token, else by id + key ARN; ``NotFoundException`` is success."""
        params = (
            {"GrantToken": grant_token}
            if grant_token
            else {"GrantId": grant_id, "KeyId": self.config.grant_key_arn}
        )
        try:
            self.clients.kms.retire_grant(**params)
        except ClientError as exc:
            if _error_code(exc) == "NotFoundException":
                return STEP_ALREADY_DONE
            raise StepFailed(ACTION_RETIRE_GRANT, _error_text(exc)) from exc
        except BotoCoreError as exc:
            raise StepFailed(ACTION_RETIRE_GRANT, _error_text(exc)) from exc
        return STEP_DONE

    def delete_scratch(
        self, prefix: str, tally: list[int], out_of_time: Callable[[], bool] = lambda: False
    ) -> str:
        """Delete every object under an *already validated* ``prefix``.

        ``tally[0]`` is increased by the number of keys deleted (a missing key counts as
        deleted, as S3 reports it), also when the step fails half-way.

        Raises:
            StepFailed: a call failed, ``DeleteObjects`` answered ``Errors``, a listed key lay
                outside the prefix (never deleted), or time ran out between pages.
        """
        s3 = self.clients.s3
        bucket = self.config.scratch_bucket
        problems: list[str] = []
        try:
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                keys = [item["Key"] for item in page.get("Contents") or ()]
                outside = [k for k in keys if not k.startswith(prefix)]
                if outside:
                    raise StepFailed(
                        ACTION_DELETE_SCRATCH,
                        f"ListObjectsV2 returned {len(outside)} key(s) outside {prefix!r}, "
                        f"e.g. {outside[0]!r}; nothing outside the prefix is deleted",
                    )
                batchable = [k for k in keys if not _NOT_XML_SAFE.search(k)]
                one_by_one = [k for k in keys if _NOT_XML_SAFE.search(k)]
                for chunk in _chunks(batchable, DELETE_OBJECTS_MAX_KEYS):
                    answer = s3.delete_objects(
                        Bucket=bucket,
                        Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True},
                    )
                    errors = answer.get("Errors") or []
                    tally[0] += len(chunk) - len(errors)
                    problems.extend(
                        f"{e.get('Key')!r}: {e.get('Code')} {e.get('Message', '')}".rstrip()
                        for e in errors
                    )
                for key in one_by_one:
                    s3.delete_object(Bucket=bucket, Key=key)
                    tally[0] += 1
                if page.get("IsTruncated") and out_of_time():
                    raise StepFailed(
                        ACTION_TIME_GUARD, f"time guard reached while deleting {prefix!r}"
                    )
        except (ClientError, BotoCoreError) as exc:
            raise StepFailed(ACTION_DELETE_SCRATCH, _error_text(exc)) from exc
        if problems:
            shown = "; ".join(problems[:5])
            more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
            raise StepFailed(
                ACTION_DELETE_SCRATCH,
                f"DeleteObjects reported {len(problems)} error(s): {shown}{more}",
            )
        return STEP_DONE

    def preview_scratch(self, prefix: str, log: dict[str, Any]) -> str:
        """Dry run of :meth:`delete_scratch`: list (never delete) the objects under ``prefix``.

        Sets ``log["objectsWouldBeDeleted"]``. Raises :class:`StepFailed` when the listing fails.
        """
        count = 0
        try:
            pages = self.clients.s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.config.scratch_bucket, Prefix=prefix
            )
            for page in pages:
                contents = page.get("Contents") or ()
                count += sum(1 for item in contents if item["Key"].startswith(prefix))
        except (ClientError, BotoCoreError) as exc:
            raise StepFailed(ACTION_DELETE_SCRATCH, _error_text(exc)) from exc
        log["objectsWouldBeDeleted"] = count
        return STEP_DRY_RUN

    # --- one record ----------------------------------------------------------------------
    def clean(
        self,
        raw: object,
        *,
        out_of_time: Callable[[], bool] = lambda: False,
        account: bool = True,
        step_pool: Executor | None = None,
    ) -> RecordResult:
        """Handle one Lambda DynamoDB stream record; never raises (errors become ``failed``).

        ``account=False`` leaves metrics and the log line to the caller (:meth:`account`), which
        :func:`process_batch` needs when the fan-out may still fail the record. With
        ``step_pool``, the record's cleanup steps run concurrently on it; without, one after
        another.
        """
        record = parse_record(raw)
        try:
            result = self._clean(record, out_of_time, step_pool)
        except Exception as exc:  # per-record isolation: a bug must cost a retry, not the batch
            result = self._result(record, OUTCOME_FAILED, failed_actions=(ACTION_UNEXPECTED,))
            result.log["errors"] = {ACTION_UNEXPECTED: _error_text(exc)}
        if account:
            self._account(result)
        return result

    def account(self, result: RecordResult) -> None:
        """Count the metrics and write the log line of a result from ``clean(account=False)``."""
        self._account(result)

    def not_started(self, raw: object) -> RecordResult:
        """Report a record the time guard kept from starting (``failed``, action ``TimeGuard``)."""
        record = parse_record(raw)
        result = self._result(record, OUTCOME_FAILED, failed_actions=(ACTION_TIME_GUARD,))
        result.log["errors"] = {ACTION_TIME_GUARD: "not started: remaining time below the guard"}
        self._account(result)
        return result

    def duplicate(self, raw: object) -> RecordResult:
        """Account for a record whose sequence number already appeared in this batch."""
        result = self._result(parse_record(raw), OUTCOME_SKIPPED, cause=CAUSE_DUPLICATE)
        self._account(result)
        return result

    def _result(self, record: StreamRecord, outcome: str, **kwargs: Any) -> RecordResult:
        result = RecordResult(record.sequence_number, outcome, **kwargs)
        result.log.update(
            sequenceNumber=record.sequence_number,
            eventId=record.event_id,
            eventName=record.event_name,
        )
        return result

    def _clean(
        self,
        record: StreamRecord,
        out_of_time: Callable[[], bool],
        step_pool: Executor | None = None,
    ) -> RecordResult:
        if record.sequence_number is None:
            return self._result(record, OUTCOME_SKIPPED, cause=CAUSE_NO_SEQUENCE_NUMBER)
        if record.event_name != "REMOVE":
            return self._result(record, OUTCOME_SKIPPED, cause=CAUSE_NOT_REMOVE)
        if record.old_image is None:
            return self._result(record, OUTCOME_SKIPPED, cause=CAUSE_NO_OLD_IMAGE)
        try:
            image = decode_image(record.old_image, "OldImage")
            keys = decode_image(record.keys, "Keys") if record.keys is not None else {}
        except DecodeError as exc:
            result = self._result(record, OUTCOME_FAILED, failed_actions=(ACTION_DECODE,))
            result.log["errors"] = {ACTION_DECODE: str(exc)}
            return result

        cfg = self.config
        verdict: Classification = classify_removal(
            user_identity=record.user_identity,
            ttl_value=image.get(cfg.ttl_attribute),
            approximate_creation_time=record.approximate_creation_time,
        )
        log: dict[str, Any] = {
            "keys": to_json_value(keys),
            "reason": verdict.reason,
            "ttl": to_json_value(image.get(cfg.ttl_attribute)),
            "approximateCreationDateTime": to_json_value(record.approximate_creation_time),
        }
        if verdict.lag_seconds is not None:
            log["ttlLagSeconds"] = to_json_value(verdict.lag_seconds)

        missing: list[str] = []
        invalid: list[str] = []
        steps: dict[str, str] = {}
        errors: dict[str, str] = {}
        tally = [0]
        refused = False
        ran_any = False

        pending: list[tuple[str, Callable[[], str], Callable[[], str] | None]] = []

        def run(
            action: str, call: Callable[[], str], preview: Callable[[], str] | None = None
        ) -> None:
            pending.append((action, call, preview))

        def execute(
            action: str, call: Callable[[], str], preview: Callable[[], str] | None
        ) -> None:
            if cfg.dry_run:
                # The one gate of every change-making call: in a dry run only ``preview``
                # (read-only, e.g. ListObjectsV2) runs.
                call = preview or (lambda: STEP_DRY_RUN)
            try:
                steps[action] = call()
            except StepFailed as exc:
                steps[action] = STEP_FAILED
                errors[exc.action] = exc.detail
            except Exception as exc:
                steps[action] = STEP_FAILED
                errors[action] = _error_text(exc)

        def attribute(name: str) -> str | None:
            if name not in image:
                missing.append(name)
                return None
            value = _nonempty_str(image[name])
            if value is None:
                invalid.append(name)
            return value

        archived = False
        if self.clients.archive is not None and cfg.dry_run:
            steps[ACTION_ARCHIVE] = STEP_DRY_RUN
        elif self.clients.archive is not None:
            # Archive first: if the write fails, nothing else is done for this record, so a
            # session is never cleaned without its archive copy (the retry starts over).
            tenant_value = image.get(cfg.tenant_attribute)
            try:
                key = archive.archive_key(
                    cfg,
                    keys=keys,
                    tenant=tenant_value,
                    sequence_number=record.sequence_number,
                    approximate_creation_time=record.approximate_creation_time,
                )
                archive.put_archive(
                    self.clients.archive,
                    cfg,
                    key,
                    archive.archive_document(
                        record,
                        keys=keys,
                        image=image,
                        tenant=tenant_value,
                        reason=verdict.reason,
                        ttl=image.get(cfg.ttl_attribute),
                        lag_seconds=verdict.lag_seconds,
                    ),
                )
            except Exception as exc:
                result = self._result(
                    record,
                    OUTCOME_FAILED,
                    reason=verdict.reason,
                    failed_actions=(ACTION_ARCHIVE,),
                    lag_seconds=verdict.lag_seconds,
                )
                result.log.update(log, steps={ACTION_ARCHIVE: STEP_FAILED})
                result.log["errors"] = {ACTION_ARCHIVE: _error_text(exc)}
                return result
            log["archiveKey"] = key
            steps[ACTION_ARCHIVE] = STEP_DONE
            archived = ran_any = True

        if self.clients.apigateway is not None:
            connection_id = attribute(cfg.connection_id_attribute)
            if connection_id is not None:
                log["connectionId"] = connection_id
                ran_any = True
                run(ACTION_DELETE_CONNECTION, lambda: self.delete_connection(connection_id))

        if self.clients.kms is not None:
            token = _nonempty_str(image.get(cfg.grant_token_attribute))
            grant_id = _nonempty_str(image.get(cfg.grant_id_attribute))
            for name, value in (
                (cfg.grant_token_attribute, token),
                (cfg.grant_id_attribute, grant_id),
            ):
                if name in image and value is None:
                    invalid.append(name)
            if token is None and grant_id is None:
                missing.extend(
                    n for n in (cfg.grant_token_attribute, cfg.grant_id_attribute) if n not in image
                )
            else:
                log["grantId"] = grant_id
                log["grantBy"] = "GrantToken" if token else "GrantId"  # tokens are not logged
                ran_any = True
                run(
                    ACTION_RETIRE_GRANT,
                    lambda: self.retire_grant(grant_token=token, grant_id=grant_id),
                )

        if self.clients.s3 is not None:
            if cfg.scratch_prefix_attribute not in image:
                missing.append(cfg.scratch_prefix_attribute)
            else:
                prefix = image[cfg.scratch_prefix_attribute]
                tenant = image.get(cfg.tenant_attribute)
                log["scratchPrefix"] = to_json_value(prefix)
                if cfg.tenant_scoped_scratch:
                    log["tenant"] = to_json_value(tenant)
                ran_any = True
                try:
                    accepted = validate_scratch_prefix(
                        prefix,
                        cfg.scratch_root,
                        tenant_id=tenant,
                        tenant_scoped=cfg.tenant_scoped_scratch,
                    )
                except ScratchPrefixError as exc:
                    refused = True
                    steps[ACTION_DELETE_SCRATCH] = STEP_REFUSED
                    log["refusal"] = str(exc)
                else:
                    run(
                        ACTION_DELETE_SCRATCH,
                        lambda: self.delete_scratch(accepted, tally, out_of_time),
                        preview=lambda: self.preview_scratch(accepted, log),
                    )

        # The three steps are independent (each acts only on what the old image names), so they
        # run at the same time when a step pool is given: a session costs the latency of its
        # slowest step, not the sum.
        if step_pool is not None and len(pending) > 1:
            for future in [step_pool.submit(execute, *step) for step in pending]:
                future.result()
        else:
            for step in pending:
                execute(*step)
        if ACTION_DELETE_SCRATCH in steps and steps[ACTION_DELETE_SCRATCH] != STEP_REFUSED:
            log["objectsDeleted"] = tally[0]

        if missing:
            log["missingAttributes"] = missing
        if invalid:
            log["invalidAttributes"] = invalid
        if steps:
            log["steps"] = steps
        failed = tuple(dict.fromkeys(errors))
        if failed:
            outcome, cause = OUTCOME_FAILED, None
            log["errors"] = errors
        elif ran_any:
            outcome, cause = (OUTCOME_DRY_RUN if cfg.dry_run else OUTCOME_CLEANED), None
        else:
            outcome, cause = OUTCOME_SKIPPED, CAUSE_MISSING_ATTRIBUTES
        result = self._result(
            record,
            outcome,
            reason=verdict.reason,
            cause=cause,
            failed_actions=failed,
            objects_deleted=tally[0],
            prefix_refused=refused,
            lag_seconds=verdict.lag_seconds,
            tenant=image.get(cfg.tenant_attribute),
            archived=archived,
        )
        result.log.update(log)
        return result

    def _account(self, result: RecordResult) -> None:
        """Count the record's metrics and write its one log line."""
        m = self.metrics
        m.objects_deleted(result.objects_deleted)
        if result.prefix_refused:
            m.prefix_refused()
        if result.outcome == OUTCOME_FAILED:
            for action in result.failed_actions:
                m.cleanup_failed(action)
        else:
            # Only final outcomes: a failed record comes back, and would be counted twice.
            if result.lag_seconds is not None:
                m.ttl_lag(result.lag_seconds)
            if result.outcome == OUTCOME_CLEANED and result.reason is not None:
                m.session_cleaned(result.reason)
            if result.outcome == OUTCOME_DRY_RUN and result.reason is not None:
                would = (DIMENSION_REASON, result.reason)
                m.count(METRIC_SESSIONS_WOULD_BE_CLEANED, dimension=would)
            if result.outcome == OUTCOME_CLEANED and result.archived:
                m.count(METRIC_SESSIONS_ARCHIVED)
            elif result.cause is not None:
                m.record_skipped(result.cause)
        fields = {"outcome": result.outcome, **result.log}
        if result.cause is not None:
            fields["cause"] = result.cause
        if result.failed_actions:
            fields["failedActions"] = list(result.failed_actions)
        if result.outcome == OUTCOME_FAILED:
            level = logging.ERROR
        elif (
            result.prefix_refused
            or "invalidAttributes" in fields
            or result.cause
            in (
                CAUSE_NO_OLD_IMAGE,
                CAUSE_MISSING_ATTRIBUTES,
                CAUSE_NO_SEQUENCE_NUMBER,
            )
        ):
            level = logging.WARNING
        else:
            level = logging.INFO
        what = (
            result.reason
            if result.outcome in (OUTCOME_CLEANED, OUTCOME_DRY_RUN)
            else (result.cause or ",".join(result.failed_actions))
        )
        self.logger.log(
            level,
            "session cleanup %s (%s) sequenceNumber=%s",
            result.outcome,
            what,
            result.sequence_number,
            extra={"session": to_json_value(fields)},
        )


def batch_response(
    failed_sequence_numbers: Iterable[str | None],
) -> dict[str, list[dict[str, str]]]:
    """Build the partial batch response (``ReportBatchItemFailures``).

    Returns:
        ``{"batchItemFailures": [{"itemIdentifier": "<dynamodb.SequenceNumber>"}, ...]}``, each
        identifier once, in order; empty or ``None`` identifiers are dropped because Lambda
        fails the whole batch on them. An empty list means every record succeeded.
    """
    unique = dict.fromkeys(s for s in failed_sequence_numbers if isinstance(s, str) and s)
    return {"batchItemFailures": [{"itemIdentifier": s} for s in unique]}


def _out_of_time(context: object, margin_ms: int) -> Callable[[], bool]:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if not callable(remaining):
        return lambda: False

    def check() -> bool:
        try:
            return bool(remaining() < margin_ms)
        except Exception:
            return False

    return check


def process_batch(event: object, context: object, cleaner: SessionCleaner) -> dict[str, Any]:
    """Clean a whole Lambda DynamoDB stream batch and return the partial batch response.

    * Records are cleaned concurrently, sharing ``cleaner``'s clients; each record's errors stay
      with that record. The cleanup calls of all records (DeleteConnection, RetireGrant, the
      scratch deletion) run on one pool of ``config.max_workers`` threads, so at most that many
      cleanup steps are in flight, and one session's independent steps overlap.
    * Time guard: once ``context.get_remaining_time_in_millis()`` is below
      ``config.time_guard_ms``, records not yet started are reported failed without starting
      (and a scratch deletion stops between pages), so the function never times out with work
      half reported.
    * A sequence number seen twice in one batch is cleaned once.
    * Metrics are flushed (EMF on stdout) before returning.
    """
    records = event.get("Records") if isinstance(event, Mapping) else None
    if not isinstance(records, list):
        LOGGER.warning("event without a Records list; nothing to clean")
        return batch_response(())
    out_of_time = _out_of_time(context, cleaner.config.time_guard_ms)
    # A dry run publishes nothing: subscribers would act on sessions that were not cleaned.
    fan_out = cleaner.clients.events is not None and not cleaner.config.dry_run
    deferred: list[RecordResult] = []

    seen: set[str] = set()
    unique: list[object] = []
    results: list[RecordResult] = []
    for raw in records:
        sequence_number = parse_record(raw).sequence_number
        if sequence_number is not None and sequence_number in seen:
            results.append(cleaner.duplicate(raw))
            continue
        if sequence_number is not None:
            seen.add(sequence_number)
        unique.append(raw)

    def work(raw: object) -> RecordResult:
        try:
            if out_of_time():
                return cleaner.not_started(raw)
            if not fan_out:
                return cleaner.clean(raw, out_of_time=out_of_time, step_pool=step_pool)
            result = cleaner.clean(raw, out_of_time=out_of_time, account=False, step_pool=step_pool)
            deferred.append(result)
            return result
        except Exception as exc:
            LOGGER.exception("unexpected error outside the record cleanup: %s", exc)
            return RecordResult(
                parse_record(raw).sequence_number,
                OUTCOME_FAILED,
                failed_actions=(ACTION_UNEXPECTED,),
            )

    if unique:
        workers = max(1, min(cleaner.config.max_workers, len(unique)))
        # Record threads mostly wait on their steps; the step pool bounds the calls in flight.
        with (
            ThreadPoolExecutor(
                max_workers=cleaner.config.max_workers, thread_name_prefix="cleanup-step"
            ) as step_pool,
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cleanup") as pool,
        ):
            results.extend(pool.map(work, unique))
    if fan_out:
        # One PutEvents per 10 cleaned sessions, after their steps; a failed entry fails its
        # record. Accounting waits for that outcome, so each record is counted once.
        published = events.publish_session_events(
            cleaner.clients.events, cleaner.config.event_bus_arn, deferred
        )
        if published:
            cleaner.metrics.count(METRIC_EVENTS_PUBLISHED, published)
        for result in deferred:
            cleaner.account(result)
    try:
        cleaner.metrics.flush()
    except Exception:
        LOGGER.exception("could not write the metrics")
    return batch_response(r.sequence_number for r in results if r.outcome == OUTCOME_FAILED)
