"""Replay batches the cleanup gave up on, from the on-failure destination, never losing one.

**SQS (the default on-failure queue)** receives only metadata of a failed batch, never the
records (AWS Lambda Developer Guide, "Retain discarded records for a DynamoDB event source in
Lambda")::

    {"requestContext": {"requestId": ..., "functionArn": ..., "condition": "RetryAttemptsExhausted",
                        "approximateInvokeCount": 4},
     "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": ...},
     "version": "1.0", "timestamp": "2019-11-14T00:13:49.717Z",
     "DDBStreamBatchInfo": {"shardId": "shardId-00000001573689847184-864758bb",
                            "startSequenceNumber": "800000000003126276362",
                            "endSequenceNumber": "800000000003126276362",
                            "approximateArrivalOfFirstRecord": "2019-11-14T00:13:19Z",
                            "approximateArrivalOfLastRecord": "2019-11-14T00:13:19Z",
                            "batchSize": 1,
                            "streamArn": "arn:aws:dynamodb:...:table/mytable/stream/..."}}

`replay_queue` reads each message, reads that sequence range back from the stream
(``GetShardIterator`` ``AT_SEQUENCE_NUMBER`` at the start, ``GetRecords`` until past the end),
reshapes the records into the Lambda event form and runs them through `process_batch` with
a `SessionCleaner`. The stream keeps records for 24 hours: an older range
(``TrimmedDataAccessException``, or records missing from its start) is reported as
``aged-out`` and the message is kept, for an operator to decide (the old images are gone; the
archive bucket, if any, still has the sessions that were archived).

**S3 on-failure destination** objects carry the same metadata plus ``payload``, the whole
invocation event; `replay_s3_object` re-runs that payload, with no 24 hour limit. The
payload must cover the range exactly: records of the stream named, the first at the start
sequence number, the last at the end, none outside.

**Only the configured table's streams.** Anyone who can write the queue or the bucket can
write a failure record. Before anything is read or cleaned, ``streamArn`` must be a stream of
the trusted table (`replay_trust`: any label, so an earlier stream of the same table is
accepted) and every payload record a DynamoDB record of exactly that stream whose ``Keys``
match its ``OldImage`` (`failure_records`), and each payload ``REMOVE`` must name an
item gone from the table (`removed_items`: DynamoDB writes a REMOVE only once the item is
deleted, so a payload forged with this stream's own ARN for a live session is caught there);
otherwise the message is kept as ``foreign-stream``, ``still-in-table`` (or ``invalid``), never
deleted. A payload forged for a session that is really gone is still cleaned with the image it
gives, but only of what that session owned: connection, AgentCore session and grant ids are
acted on only when their ownership record names the record's ``Keys`` and incarnation
(`claims`), and the scratch prefix derives from the ``Keys``. Write access to the
on-failure destination must still stay with Lambda.

**When a message is deleted.** Only when its whole range was read back (or its payload covers
it), it holds at least one ``REMOVE`` record, and every ``REMOVE`` record in it was cleaned.
Anything else keeps the message and reports why (`STATUSES`). A ``REMOVE`` record with a
step that refused what its image names (a grant not provably the session's own, a scratch prefix
that is not its own: ``GrantsRefused``, ``ScratchPrefixesRefused``; an id whose ownership record
names another session or that has none: ``ResourcesRefused`` ``NotOwned``/``Unclaimed``) is not
cleaned: it is in ``not_cleaned`` as ``refused`` and in ``refused`` with each step and why, and
the message is kept. Ids refused for a reason of normal operation (``Superseded``: a later
session holds the id now; ``Legacy``: an item written before ownership records;
``ClaimExpired``) do not keep it: the record counts as cleaned. Records that are not ``REMOVE``
records are skipped (the cleanup skips them too) and do not keep a message.

**One message's error is that message's.** Malformed metadata (a shard id or sequence number
of a length the Streams API refuses, or anything else botocore refuses with
``ParamValidationError``), an AWS error, an endpoint or timeout error, or a bug are reported for
that message, which is kept; the run goes on with the next message.

**The cleanup's levers.** With feature flags configured (``SESSION_EXPIRY_FLAGS_*``), replay
reads them once, with the function's reader, before any message is read
(`replay_levers`): ``enabled`` off or a read that fails refuse the run
(`LeverRefusal`, exit 2); ``dryRun`` on makes it a dry run (every message kept); a step
switched off is held back, its work deferred as the cleanup defers it, and the message kept
(``held-back``). ``--ignore-feature-flags`` replays regardless, and says so on stderr.

**No cleanup target, no run.** Without any of `CLEANUP_TARGET_SETTINGS` (WebSocket
endpoint, grant key, scratch bucket, AgentCore runtime, code interpreter, browser, custom steps)
every record would be skipped as ``MissingAttributes``; replay refuses to start
(`NoCleanupTarget`) and touches no message.

The range of a failed batch covers every record of the batch: records that did succeed are
cleaned again (every step is idempotent), and records the event source mapping's filter had
dropped are cleaned too (the filter does not apply here; the cleanup skips non-REMOVE records).

CLI (same environment variables as the cleanup function; the credentials need
``sqs:ReceiveMessage``/``DeleteMessage``, ``dynamodb:DescribeStream``/``GetShardIterator``/
``GetRecords`` on the stream, ``lambda:ListEventSourceMappings`` or ``dynamodb:DescribeTable``
to find the trusted table, ``dynamodb:GetItem`` on it for S3 objects,
``dynamodb:DescribeKinesisStreamingDestination`` on it and ``kinesis:DescribeStreamSummary``/
``ListShards``/``GetShardIterator``/``GetRecords`` for a Kinesis time range, and the cleanup's
own permissions)::

    python -m session_expiry_runtime.replay --queue-url URL [--dry-run] [--max-messages N]
    python -m session_expiry_runtime.replay --bucket NAME --key KEY [--dry-run] [--delete]
    python -m session_expiry_runtime.replay ... --env-from-function CLEANUP_FUNCTION_NAME
    python -m session_expiry_runtime.replay ... --stream-arn STREAM_ARN
    python -m session_expiry_runtime.replay ... --steps-path DIR
    python -m session_expiry_runtime.replay ... --ignore-feature-flags
    python -m session_expiry_runtime.replay --kinesis-stream-arn ARN --stream-arn TABLE_ARN \
        --from T1 --to T2 [--dry-run]

``--kinesis-stream-arn`` (the Kinesis change source): clean again every session of the table
(``--stream-arn``, else ``SESSION_EXPIRY_TABLE_NAME``; required) removed between ``--from``
and ``--to`` (ISO 8601 with a zone), read back from the change stream with ``AT_TIMESTAMP``
(`kinesis_replay`); one JSON line per shard that holds such a removal. The table must
have ``--kinesis-stream-arn`` among its Kinesis streaming destinations
(``DescribeKinesisStreamingDestination``), else replay refuses to start (exit 2): another
stream, or another table, holds none of the table's removals.

``--stream-arn`` must name the settings' table when the settings name one
(`replay_trust`): another deployment's stream is refused before anything is read (exit
2). When they name none (the deployed cleanup function's environment has no table name), its
table must be one replay reaches (``DescribeTable`` in the Region and account replay runs
with answers that ARN), else it is refused the same way.

Custom steps (``SESSION_EXPIRY_CUSTOM_STEPS``) import as in the deployed function
(`replay_steps`): ``--steps-path DIR``, by default from the app's directory.

Stdout: exactly one JSON object per line, one line per message or object, written as each is
done. Metrics (embedded metric format) and logs go to stderr, and a last summary line (where
the run read, how many messages, objects or shards became what, the exit status), also when
there was nothing to replay. Exit status
(`EXIT_ALL_REPLAYED`, `EXIT_SOME_KEPT`, `EXIT_COULD_NOT_RUN`): 0 every message
was replayed (with ``--dry-run``: could be) or the queue was empty; 1 at least one message was
kept (its line says why, e.g. ``foreign-stream``; a record that failed again is in
``failures`` with its cause; every message of a dry run not asked for with ``--dry-run``); 2
the replay could not run (the feature flag ``enabled`` off or the flags unreadable, without
``--ignore-feature-flags``; no cleanup target, no stream to
trust, a ``--stream-arn`` of another table than the settings' or of a table replay does not
reach, a ``--kinesis-stream-arn`` that is not the table's Kinesis streaming destination or a
time range it cannot replay whole, a custom step that does not import, bad settings, an
unknown function, the queue or object could not be read).
"""

# The CLI and library live by concern in the modules below; this module is the public surface
# (every public name it defined before the split, and the failure-record and trust names its
# callers reach through it) and the ``python -m`` entry point.
from __future__ import annotations

import sys

from ..records.stream_records import to_lambda_record
from .failure_records import BatchInfo, ForeignStream, ReplayError, parse_failure_record
from .removed_items import ItemStillInTable
from .replay_cli import (
    EPILOG,
    EXIT_ALL_REPLAYED,
    EXIT_COULD_NOT_RUN,
    EXIT_SOME_KEPT,
    StderrMetricsRecorder,
    environment_of_function,
    main,
)
from .replay_levers import LeverRefusal, ReplayLevers, replay_levers
from .replay_outcomes import (
    STATUS_AGED_OUT,
    STATUS_DRY_RUN,
    STATUS_FAILED,
    STATUS_FOREIGN_STREAM,
    STATUS_HELD_BACK,
    STATUS_INVALID,
    STATUS_NOTHING_CLEANED,
    STATUS_PARTLY_CLEANED,
    STATUS_REPLAYED,
    STATUS_STILL_IN_TABLE,
    STATUSES,
    ReplayOutcome,
    replay_records,
)
from .replay_sources import (
    GET_RECORDS_LIMIT,
    MAX_EMPTY_PAGES,
    STREAM_RETENTION,
    VISIBILITY_TIMEOUT_SECONDS,
    QueueReadError,
    RangeAgedOut,
    read_range,
    replay_message,
    replay_queue,
    replay_s3_object,
)
from .replay_targets import (
    CLEANUP_TARGET_SETTINGS,
    NoCleanupTarget,
    configured_targets,
    require_cleanup_target,
)
from .replay_trust import NoTrustedStream, TrustedStreams

__all__ = [
    "CLEANUP_TARGET_SETTINGS",
    "EPILOG",
    "EXIT_ALL_REPLAYED",
    "EXIT_COULD_NOT_RUN",
    "EXIT_SOME_KEPT",
    "GET_RECORDS_LIMIT",
    "MAX_EMPTY_PAGES",
    "STATUSES",
    "STATUS_AGED_OUT",
    "STATUS_DRY_RUN",
    "STATUS_FAILED",
    "STATUS_FOREIGN_STREAM",
    "STATUS_HELD_BACK",
    "STATUS_INVALID",
    "STATUS_NOTHING_CLEANED",
    "STATUS_PARTLY_CLEANED",
    "STATUS_REPLAYED",
    "STATUS_STILL_IN_TABLE",
    "STREAM_RETENTION",
    "VISIBILITY_TIMEOUT_SECONDS",
    "BatchInfo",
    "ForeignStream",
    "ItemStillInTable",
    "LeverRefusal",
    "NoCleanupTarget",
    "NoTrustedStream",
    "QueueReadError",
    "RangeAgedOut",
    "ReplayError",
    "ReplayLevers",
    "ReplayOutcome",
    "StderrMetricsRecorder",
    "TrustedStreams",
    "configured_targets",
    "environment_of_function",
    "main",
    "parse_failure_record",
    "read_range",
    "replay_levers",
    "replay_message",
    "replay_queue",
    "replay_records",
    "replay_s3_object",
    "require_cleanup_target",
    "to_lambda_record",
]

if __name__ == "__main__":  # pragma: no cover - exercised through main() in tests
    sys.exit(main())
