"""The replay CLI (``python -m session_expiry_runtime.replay``, documented in `replay`):
its argument parser and ``--help`` text, `main` and its exit statuses, reading the
cleanup function's settings, choosing the streams to trust and building the cleaner, one JSON
line per outcome on stdout, metrics and the last summary line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from ..cleanup.cleaner import SessionCleaner, build_clients
from ..core.commands import prog
from ..core.config import RuntimeConfig, validate_cleanup_config
from ..core.metrics import MetricsRecorder
from .replay_levers import OVERRIDE, ReplayLevers, replay_levers
from .replay_outcomes import STATUS_DRY_RUN, STATUS_REPLAYED, ReplayOutcome
from .replay_sources import QueueReadError, replay_queue, replay_s3_object
from .replay_steps import steps_path, use_steps_path
from .replay_targets import require_cleanup_target
from .replay_trust import NoTrustedStream, TrustedStreams, resolve_trusted_streams

EXIT_ALL_REPLAYED = 0
EXIT_SOME_KEPT = 1
EXIT_COULD_NOT_RUN = 2


def environment_of_function(lambda_client: Any, function_name: str) -> dict[str, str]:
    """The environment variables of the deployed cleanup function (``GetFunctionConfiguration``)."""
    answer = lambda_client.get_function_configuration(FunctionName=function_name)
    return dict((answer.get("Environment") or {}).get("Variables") or {})


def _to_stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


class StderrMetricsRecorder(MetricsRecorder):
    """The replay CLI's metrics: the same EMF documents, on stderr, so that stdout holds only
    the one JSON line per message."""

    def flush(self, write: Callable[[str], Any] | None = None) -> list[dict[str, Any]]:
        return super().flush(write if write is not None else _to_stderr)


EPILOG = """\
stdout: one JSON object per line, one line per message (object), written as each is done:
  source, status, records, removes, cleaned, failed_sequence_numbers, not_cleaned, refused,
  held_back (sequence number -> step -> why, for each step a feature flag held back),
  failures (sequence number -> failed action -> error, for each record that failed again),
  error (why the message was kept; set for every kept message but an asked-for --dry-run),
  deleted.
  status: replayed (every REMOVE record cleaned; the message is deleted) | dry-run |
  failed | aged-out | invalid | foreign-stream | still-in-table | nothing-cleaned |
  partly-cleaned | held-back (all kept). A REMOVE record whose grant or scratch prefix a
  step refused, or with an id whose ownership record names another session or is missing
  (NotOwned, Unclaimed), is not cleaned: not_cleaned says "refused", refused names each step
  and why; kept, even with --delete.
stderr: metrics (embedded metric format), logs, the table whose streams are trusted, the
  feature flags obeyed (or ignored), why a run could not start, and a last summary line of
  every run that started (where it read, how many messages, objects or shards became what,
  the exit status), also when there was nothing to replay.

exit status:
  0  every message was replayed (with --dry-run: could be), or the queue was empty
  1  at least one message was kept: its line says why (also every message of a dry run
     not asked for with --dry-run: SESSION_EXPIRY_DRY_RUN or the dryRun flag)
  2  could not run: the feature flag enabled is off or the flags could not be read
     (without --ignore-feature-flags), no cleanup target configured, no stream to trust, a
     --stream-arn of another table than the settings' table or of a table replay does not
     reach, a --kinesis-stream-arn that is not the table's Kinesis streaming destination or
     a --from/--to range it cannot replay whole, a custom step that does not import, bad
     settings, unknown function, the queue or the object could not be read (no message was
     read or changed)

Only failures of the configured table's streams are replayed. Before anything is read or
cleaned: --stream-arn, when given, must be a stream of the settings' table (refused with exit
2 otherwise, naming both tables); DDBStreamBatchInfo.streamArn must be
arn:<partition>:dynamodb:<region>:<account>:table/<table>/stream/<any label> of that table
(an earlier stream of the same table is accepted); in an S3 object, every payload record must
have eventSource aws:dynamodb, eventSourceARN equal to that streamArn, Keys equal to its
OldImage's key attributes, and a sequence number inside the range (the first and last at its
ends), and the item each REMOVE record names must be gone from the table (GetItem, consistent
read). Otherwise the message is kept (foreign-stream, still-in-table or invalid), even with
--delete. The settings' table comes from the DynamoDB event source mappings of the cleanup
function (--env-from-function, else AWS_LAMBDA_FUNCTION_NAME), else SESSION_EXPIRY_TABLE_NAME
(DescribeTable); --stream-arn narrows the trust to its table, which must be that one (it is the
only source when the settings name no table: then its table must exist where replay runs,
DescribeTable in the Region and account of the credentials answering that very ARN, else
replay refuses to start, exit 2); without any, replay refuses to start. A payload
forged with this stream's ARN for a session that is really gone is still cleaned with the image
it gives: only Lambda should be able to write the on-failure queue or bucket.

Feature flags (SESSION_EXPIRY_FLAGS_* in the settings: the construct's feature_flags): replay
obeys the levers the cleanup function obeys, read once from AWS AppConfig with the function's
own reader before any message is read. enabled off: refused (exit 2), nothing read or changed.
dryRun on: a dry run (nothing changed, every message kept, status dry-run, exit 1). A step's
flag off: that step is held back as the cleanup holds it back (its work deferred for the
drain, the other steps run) and a message with a record it would act on is kept (held-back,
exit 1). A read that fails: refused (exit 2), never taken for "all on".
--ignore-feature-flags replays regardless of the flags, and says so on stderr. Without flags
configured nothing changes.

Settings: the cleanup function's SESSION_EXPIRY_* environment variables, or
--env-from-function. Without any cleanup target (WebSocket endpoint, grant key, scratch bucket,
AgentCore runtime, code interpreter, browser or custom steps) replay refuses to start.

Custom steps import as in the deployed function, whose code root holds each step's code
directory's contents: --steps-path DIR (repeatable), else, for each step's package, the current
directory, then sys.path, then the cleanup function's code staged in ./cdk.out by the latest
synth. Run replay from the app's directory (where cdk.json is), after cdk synth or deploy.
"""


def _positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r}: expected a positive integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{raw!r}: expected a positive integer")
    return value


def _text(raw: str) -> str:
    """A value that names something: an empty or blank one (``--queue-url "$QUEUE_URL"`` with
    the variable unset) is refused, not taken for the option being absent."""
    if not raw.strip():
        raise argparse.ArgumentTypeError(f"{raw!r}: expected a non-empty value")
    return raw


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog("python -m session_expiry_runtime.replay", "replay"),
        description="Replay failed cleanup batches from the on-failure destination; a message "
        "is deleted only when every REMOVE record of its range was cleaned.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--queue-url", type=_text, help="SQS on-failure queue (metadata; 24 h stream limit)"
    )
    source.add_argument(
        "--bucket", type=_text, help="S3 on-failure destination bucket (with --key)"
    )
    source.add_argument(
        "--kinesis-stream-arn",
        type=_text,
        metavar="ARN",
        help="the Kinesis change stream (change_source=ChangeSource.kinesis()): clean again "
        "every session removed between --from and --to. It must be a Kinesis streaming "
        "destination of the table (DescribeKinesisStreamingDestination), else exit 2",
    )
    # The common case first (the queue: --dry-run, then the same command without it), then
    # the S3 object's and the Kinesis time range's own options.
    parser.add_argument("--dry-run", action="store_true", help="read and report; change nothing")
    parser.add_argument(
        "--max-messages",
        type=_positive_int,
        default=None,
        metavar="N",
        help="stop after N queue messages (default: until the queue answers none); only "
        "with --queue-url",
    )
    parser.add_argument(
        "--env-from-function",
        type=_text,
        metavar="NAME",
        help="read the SESSION_EXPIRY_* settings from this deployed cleanup function, and "
        "trust the streams of the table its event source mapping reads",
    )
    parser.add_argument(
        "--stream-arn",
        type=_text,
        metavar="ARN",
        help="trust the streams of this stream's table (any label) and no other; it must be "
        "the settings' table (the cleanup function's event source mapping, else "
        "SESSION_EXPIRY_TABLE_NAME) when they name one, else a table that exists in the "
        "Region and account replay runs with (DescribeTable); default: that table. With "
        "--kinesis-stream-arn: the table whose REMOVE records are cleaned (needed when the "
        "settings name no table, as the deployed cleanup function's do not)",
    )
    parser.add_argument(
        "--steps-path",
        type=_text,
        metavar="DIR",
        action="append",
        default=[],
        help="a directory holding the custom steps' packages, as a CustomCleanupStep's code "
        "names it (repeatable; put first on sys.path). Default: each step's package from the "
        "current directory, else where Python finds it, else the cleanup function's code "
        "staged in ./cdk.out by the latest synth: run replay from the app's directory",
    )
    parser.add_argument(
        OVERRIDE,
        dest="ignore_feature_flags",
        action="store_true",
        help="replay regardless of the cleanup's feature flags (enabled, dryRun, one per step) "
        "and of a failed read of them; said on stderr. Default: obey them (see below)",
    )
    parser.add_argument("--key", type=_text, help="object key in --bucket")
    parser.add_argument(
        "--delete", action="store_true", help="delete the S3 object once it is replayed"
    )
    parser.add_argument("--from", dest="start", metavar="TIME", help="ISO 8601, with a zone")
    parser.add_argument(
        "--to", dest="end", metavar="TIME", help="ISO 8601, with a zone; at or before now"
    )
    return parser


def main(argv: Iterable[str] | None = None, session: boto3.session.Session | None = None) -> int:
    """The CLI; returns the exit status (`EXIT_ALL_REPLAYED`, `EXIT_SOME_KEPT`,
    `EXIT_COULD_NOT_RUN`)."""
    parser = _parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.bucket and not args.key:
        parser.error("--bucket needs --key")
    if args.kinesis_stream_arn and not (args.start and args.end):
        parser.error("--kinesis-stream-arn needs --from and --to")
    _refuse_options_of_another_source(parser, args)
    try:
        return _replay(args, session or boto3.session.Session())
    except QueueReadError as exc:
        _to_stderr(f"replay: {exc}\n")
        return EXIT_SOME_KEPT if exc.outcomes else EXIT_COULD_NOT_RUN
    except (ClientError, BotoCoreError, ValueError) as exc:
        # An operator runs this by hand: one line saying what failed, not a traceback.
        _to_stderr(f"replay: {type(exc).__name__}: {exc}\n")
        return EXIT_COULD_NOT_RUN


#: option (its argparse dest) -> the source it belongs to, for its refusal message
_SOURCE_OPTIONS = {
    "start": ("--from", "kinesis_stream_arn", "--kinesis-stream-arn ARN"),
    "end": ("--to", "kinesis_stream_arn", "--kinesis-stream-arn ARN"),
    "key": ("--key", "bucket", "--bucket B"),
    "delete": ("--delete", "bucket", "--bucket B"),
    "max_messages": ("--max-messages", "queue_url", "--queue-url URL"),
}


def _refuse_options_of_another_source(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> None:
    """An option of another source (``--from`` with ``--queue-url``) is refused, not ignored:
    the operator meant something this run would not do. Exits 2 (``parser.error``)."""
    for dest, (option, source, expected) in _SOURCE_OPTIONS.items():
        value = getattr(args, dest)
        if value not in (None, False) and not getattr(args, source):
            parser.error(
                f"{option} {'' if value is True else repr(value) + ' '}does not apply to this "
                f"source: expected it only with {expected}"
            )


def _emitter(dry_run_cause: str | None) -> Callable[[ReplayOutcome], None]:
    """Writes each outcome as its JSON line; a ``dry-run`` outcome of a dry run the operator
    did not ask for (``dry_run_cause``) says why in ``error``: its message was kept."""

    def emit(outcome: ReplayOutcome) -> None:
        if dry_run_cause and outcome.status == STATUS_DRY_RUN and outcome.error is None:
            outcome.error = f"{dry_run_cause}: nothing was changed, the message is kept"
        sys.stdout.write(outcome.as_json() + "\n")
        sys.stdout.flush()

    return emit


def _dry_run_cause(
    args: argparse.Namespace, config: RuntimeConfig, levers: ReplayLevers
) -> str | None:
    """Why this run is a dry run the operator did not ask for (``--dry-run``), or ``None``."""
    if args.dry_run:
        return None
    if config.dry_run:
        return "a dry run: the cleanup's settings say SESSION_EXPIRY_DRY_RUN (deploy time)"
    if levers.dry_run:
        return "a dry run: the feature flag dryRun is on"
    return None


def _trusted_streams(
    args: argparse.Namespace, config: RuntimeConfig, session: boto3.session.Session
) -> TrustedStreams:
    """The streams this run may act on (`replay_trust.resolve_trusted_streams`); the
    function is ``--env-from-function``, else Lambda's ``AWS_LAMBDA_FUNCTION_NAME`` when replay
    runs with the cleanup function's own environment."""
    function = args.env_from_function or os.environ.get("AWS_LAMBDA_FUNCTION_NAME")
    trusted = resolve_trusted_streams(
        session,
        stream_arn=args.stream_arn,
        function_names=[function] if function else [],
        table_name=config.table_name,
    )
    _to_stderr(
        f"replay: trusting the streams of {', '.join(trusted.table_arns)} "
        f"(from {trusted.source}) and no other\n"
    )
    return trusted


def _cleaner(
    args: argparse.Namespace,
    config: RuntimeConfig,
    session: boto3.session.Session,
    levers: ReplayLevers,
) -> SessionCleaner:
    """The cleanup, its custom steps imported from where the deployed function imports them
    (`replay_steps`), the steps the feature flags switched off held back
    (`replay_levers`).

    Raises:
        ValueError: a custom step does not import (the message says where replay looked).
    """
    directories = steps_path(config.custom_steps, args.steps_path)
    use_steps_path(directories)
    try:
        cleaner = SessionCleaner(
            config, build_clients(config, session), StderrMetricsRecorder(config.metrics_namespace)
        )
    except ValueError as exc:
        if not config.custom_steps:
            raise
        looked = ", ".join(str(d) for d in directories) or "nowhere beyond sys.path"
        raise ValueError(
            f"{exc}. Replay imports custom steps as the deployed function does: from "
            "--steps-path DIR (the directory your CustomCleanupStep's code names), else from the "
            "current directory, sys.path or the cleanup function's code staged in ./cdk.out by "
            f"the latest synth (run replay from the app's directory); it added: {looked}"
        ) from exc
    cleaner.disabled_steps = levers.disabled_steps  # as CleanupRunner.with_levers sets them
    return cleaner


def _replay(args: argparse.Namespace, session: boto3.session.Session) -> int:
    # A Kinesis range that cannot be replayed is refused before any call, --env-from-function's
    # GetFunctionConfiguration included.
    span = _kinesis_range(args) if args.kinesis_stream_arn else None
    env = (
        environment_of_function(session.client("lambda"), args.env_from_function)
        if args.env_from_function
        else None
    )
    config = validate_cleanup_config(RuntimeConfig.from_env(env))
    require_cleanup_target(config)
    # The levers the function obeys, read before any message is read or anything changed.
    levers = replay_levers(
        os.environ if env is None else env, session, ignore=args.ignore_feature_flags
    )
    if levers.said:
        _to_stderr(f"replay: {levers.said}\n")
    if span is not None:
        return _replay_kinesis(args, config, session, span, levers)
    trusted = _trusted_streams(args, config, session)
    cleaner = _cleaner(args, config, session, levers)
    streams = session.client("dynamodbstreams")
    dry_run = bool(args.dry_run or config.dry_run or levers.dry_run)
    emit = _emitter(_dry_run_cause(args, config, levers))
    if args.queue_url:
        outcomes = replay_queue(
            session.client("sqs"),
            args.queue_url,
            streams=streams,
            cleaner=cleaner,
            trusted=trusted,
            dry_run=dry_run,
            max_messages=args.max_messages,
            on_outcome=emit,
        )
    else:
        outcome = replay_s3_object(
            session.client("s3"),
            args.bucket,
            args.key,
            streams=streams,
            cleaner=cleaner,
            trusted=trusted,
            tables=session.client("dynamodb"),
            dry_run=dry_run,
            delete=args.delete,
        )
        emit(outcome)
        outcomes = [outcome]
    if args.queue_url:
        return _finish(outcomes, args.queue_url, "message", asked_dry_run=args.dry_run)
    return _finish(outcomes, f"s3://{args.bucket}/{args.key}", "object", asked_dry_run=args.dry_run)


def _kinesis_table(
    args: argparse.Namespace, config: RuntimeConfig, session: boto3.session.Session
) -> str:
    """The one table whose ``REMOVE`` records a Kinesis time-range replay cleans: a Kinesis
    change stream may carry several tables' changes. ``--stream-arn`` (this deployment's table
    or stream ARN), else ``SESSION_EXPIRY_TABLE_NAME`` (the construct sets it on the cleanup
    function of a Kinesis change source); both must agree
    (`replay_trust.resolve_trusted_streams`).

    Raises:
        NoTrustedStream: neither names a table.
        StreamArnNotOfSettingsTable, ValueError: see `replay_trust.resolve_trusted_streams`.
    """
    if not args.stream_arn and not config.table_name:
        raise NoTrustedStream(
            f"--kinesis-stream-arn {args.kinesis_stream_arn}: the settings name no table (a "
            "cleanup function deployed before the construct set it has none) and a Kinesis "
            "change stream may carry "
            "several tables' changes: expected --stream-arn TABLE_ARN (this deployment's "
            "table) or SESSION_EXPIRY_TABLE_NAME"
        )
    trusted = resolve_trusted_streams(
        session, stream_arn=args.stream_arn, table_name=config.table_name
    )
    _to_stderr(
        f"replay: cleaning the REMOVE records of {trusted.table_arns[0]} (from "
        f"{trusted.source}) and no other table's\n"
    )
    return trusted.table_arns[0].split(":table/", 1)[1]


def _kinesis_range(args: argparse.Namespace) -> tuple[datetime, datetime, datetime]:
    """``--from``, ``--to`` and now, checked without a call (the stream ARN's form, a zone,
    from <= to, ``--to`` not in the future).

    Raises:
        KinesisReplayError: any of those refused.
    """
    from . import kinesis_replay  # loaded only when a Kinesis time range is asked for

    kinesis_replay.check_stream_arn(args.kinesis_stream_arn)
    start, end = kinesis_replay.parse_time(args.start), kinesis_replay.parse_time(args.end)
    kinesis_replay.check_range(start, end)
    now = datetime.now(timezone.utc)
    kinesis_replay.check_end(end, now)
    return start, end, now


def _replay_kinesis(
    args: argparse.Namespace,
    config: RuntimeConfig,
    session: boto3.session.Session,
    span: tuple[datetime, datetime, datetime],
    levers: ReplayLevers,
) -> int:
    """``--kinesis-stream-arn`` with ``--from``/``--to`` (`kinesis_replay`), ``span``
    from `_kinesis_range`."""
    from . import kinesis_replay

    start, end, now = span
    if args.env_from_function:
        kinesis_replay.check_trusted(
            session.client("lambda"), args.env_from_function, args.kinesis_stream_arn
        )
    table = _kinesis_table(args, config, session)
    kinesis_replay.check_destination(session.client("dynamodb"), table, args.kinesis_stream_arn)
    config = replace(config, table_name=table)
    kinesis = session.client("kinesis")
    kinesis_replay.check_start(kinesis, args.kinesis_stream_arn, start, now)
    late = kinesis_replay.late_arrivals(end, now)
    if late:
        _to_stderr(f"replay: {late}\n")
    dry_run = bool(args.dry_run or config.dry_run or levers.dry_run)
    emit = _emitter(_dry_run_cause(args, config, levers))
    outcomes = kinesis_replay.replay_time_range(
        kinesis,
        args.kinesis_stream_arn,
        start=start,
        end=end,
        cleaner=_cleaner(args, config, session, levers),
        dry_run=dry_run,
    )
    for outcome in outcomes:
        emit(outcome)
    where = f"{args.kinesis_stream_arn}, REMOVE records of table {table}"
    where += f" from {args.start} to {args.end}"
    return _finish(outcomes, where, "shard with such a record", asked_dry_run=args.dry_run)


def _finish(outcomes: list[ReplayOutcome], where: str, noun: str, *, asked_dry_run: bool) -> int:
    """The exit status of a run, after its one summary line on stderr: what was read from
    ``where`` (one outcome per ``noun``: message, object, shard) and what became of it — said
    also when there was nothing to replay (an empty queue, a range without a removal of the
    table), which prints no JSON line on stdout. A dry run the operator did not ask for
    (``--dry-run``) but the settings or the ``dryRun`` flag imposed kept every message: exit 1."""
    ok = {STATUS_DRY_RUN} if asked_dry_run else {STATUS_REPLAYED}
    status = EXIT_ALL_REPLAYED if all(o.status in ok for o in outcomes) else EXIT_SOME_KEPT
    if outcomes:
        counts = Counter(o.status for o in outcomes)
        said = f"{len(outcomes)} {noun}(s): " + ", ".join(
            f"{n} {name}" for name, n in sorted(counts.items())
        )
    else:
        said = f"nothing to replay (no {noun})"
    _to_stderr(f"replay: {where}: {said}; exit {status}\n")
    return status
