"""The kill switch without a deploy: disable or re-enable the cleanup's event source mapping.

In an incident, redeploying to flip ``cleanup_enabled`` is too slow. This command calls
``UpdateEventSourceMapping`` with ``Enabled`` false (or true) on the mapping in place. A disabled
mapping stops polling and keeps its position in the stream: enabled again it "will resume polling
from the time it had stopped polling, so you don't lose processing of any records. However, if
you delete event source mapping and create it again, it will reset" (AWS Lambda API Reference,
UpdateEventSourceMapping). The stream still keeps records for 24 hours only.

The mapping's id is the construct's ``event_source_mapping_id`` and a stack output whose key is
the CloudFormation logical id of the output, not ``CleanupEventSourceMappingId`` itself:
``<construct path>CleanupEventSourceMappingId<hash>`` (the ids on the path from the stack to the
``SessionExpiry``, without separators, then 8 hexadecimal characters), e.g.
``SessionsCleanupEventSourceMappingId54B6DE77`` for ``SessionExpiry(stack, "Sessions")``. Read it
with `FIND_UUID`; ``--function`` finds the mapping from the cleanup function's name
instead. The same with the AWS CLI::

    aws lambda update-event-source-mapping --uuid UUID --no-enabled   # pull the switch
    aws lambda update-event-source-mapping --uuid UUID --enabled      # resume

CLI::

    python -m session_expiry_runtime.kill_switch disable (--uuid UUID | --function NAME)
    python -m session_expiry_runtime.kill_switch enable  (--uuid UUID | --function NAME)
    python -m session_expiry_runtime.kill_switch status  (--uuid UUID | --function NAME)
    python -m session_expiry_runtime.kill_switch flags (show | set NAME=on|off ...) --function NAME

``flags`` (with the construct's ``feature_flags``): finer levers in AWS AppConfig — one step off,
a dry run, everything deferred — deployed without a deploy of the stack
(`kill_switch_flags`); this mapping toggle stays the full stop.

Prints one JSON line (uuid, state, function, stream, last modified) and, while the mapping is
paused, its deadlines (`session_expiry_runtime.switches.pause_watch.deadlines`):
``streamRetentionDeadline`` (``LastModified`` + 24 hours: records written since the pause start
to leave the stream) and ``maxRecordAgeDeadline`` (``LastModified`` + the mapping's
``MaximumRecordAgeInSeconds``: resumed later, those records go to the on-failure destination
instead of the cleanup), with the same in words on stderr. Waits until the mapping's ``State``
is ``Disabled``/``Enabled`` (it passes through ``Disabling``/``Enabling``), at most ``--wait``
seconds. Exit status: 0 the mapping is in the requested state; 1 still changing after
``--wait``; 2 could not run (unknown mapping or function, no permission). The credentials need
``lambda:UpdateEventSourceMapping`` and ``lambda:GetEventSourceMapping`` (and
``lambda:ListEventSourceMappings`` with ``--function``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from ..core.commands import prog
from ..switches import kill_switch_flags
from ..switches.pause_watch import PAUSED_STATES, STREAM_RETENTION, deadlines

EXIT_DONE = 0
EXIT_STILL_CHANGING = 1
EXIT_COULD_NOT_RUN = 2
#: How long to wait for ``Disabling``/``Enabling`` to settle, by default (seconds).
DEFAULT_WAIT_SECONDS = 120
POLL_SECONDS = 2
_SETTLED = {"disable": "Disabled", "enable": "Enabled"}


class KillSwitchError(ValueError):
    """The mapping cannot be found or is not unambiguous; the message says what to pass."""


def find_mapping(lambda_client: Any, function_name: str) -> str:
    """The UUID of the one DynamoDB stream (or, with the Kinesis change source, Kinesis
    stream) event source mapping of ``function_name``.

    Raises:
        KillSwitchError: the function has none, or more than one (pass ``--uuid``).
    """
    uuids: list[str] = []
    for page in lambda_client.get_paginator("list_event_source_mappings").paginate(
        FunctionName=function_name
    ):
        uuids.extend(
            m["UUID"]
            for m in page.get("EventSourceMappings") or []
            if any(s in str(m.get("EventSourceArn", "")) for s in (":dynamodb:", ":kinesis:"))
        )
    if len(uuids) != 1:
        raise KillSwitchError(
            f"function {function_name!r} has {len(uuids)} DynamoDB or Kinesis stream event source "
            f"mappings ({', '.join(uuids) or 'none'}): expected one; pass --uuid (the stack "
            f"output {OUTPUT_KEY_SHAPE}: {FIND_UUID})"
        )
    return uuids[0]


def source_retention(session: Any, mapping: Mapping[str, Any]) -> timedelta:
    """How long the mapping's change source keeps a record: the Kinesis stream's
    ``RetentionPeriodHours`` (``DescribeStreamSummary``) for a Kinesis change source, a
    DynamoDB stream's 24 hours otherwise.

    Raises:
        botocore.exceptions.ClientError: ``DescribeStreamSummary`` failed.
    """
    arn = str(mapping.get("EventSourceArn") or "")
    if ":kinesis:" not in arn:
        return STREAM_RETENTION
    region = arn.split(":")[3] or None
    described = session.client("kinesis", region_name=region).describe_stream_summary(StreamARN=arn)
    return timedelta(hours=int(described["StreamDescriptionSummary"]["RetentionPeriodHours"]))


def summary(
    mapping: dict[str, Any],
    retention: timedelta = STREAM_RETENTION,
    *,
    paused_before: object = None,
) -> dict[str, Any]:
    """The fields an operator needs from a ``GetEventSourceMapping`` answer (JSON-ready), with
    the pause's `deadlines` (``None`` while enabled)
    for a change source keeping records ``retention``. ``paused_before``: the ``LastModified``
    of a mapping that was already disabled before this run's ``disable`` (a ``datetime``); the
    deadlines then count from it, and ``alreadyPausedSince`` says so."""
    dated = mapping
    already = None
    if isinstance(paused_before, datetime) and mapping.get("State") in PAUSED_STATES:
        dated = {**mapping, "LastModified": paused_before}
        already = paused_before.astimezone(timezone.utc).isoformat()
    return {
        "alreadyPausedSince": already,
        "uuid": mapping.get("UUID"),
        "state": mapping.get("State"),
        "function": mapping.get("FunctionArn"),
        "stream": mapping.get("EventSourceArn"),
        "lastModified": str(mapping.get("LastModified")),
        "stateTransitionReason": mapping.get("StateTransitionReason"),
        **deadlines(dated, retention),
        "retentionHours": retention.total_seconds() / 3600,
    }


def deadline_note(state: dict[str, Any]) -> str | None:
    """The deadlines of a `summary` in words, or ``None`` when the mapping is not paused."""
    since = state.get("pausedSince")
    if since is None:
        return None
    note = (
        f"paused since {since}: records written since then start to leave the stream at "
        f"{state['streamRetentionDeadline']} ({state.get('retentionHours', 24):g}-hour "
        "retention; records the cleanup had not "
        "reached at the pause leave it earlier)"
    )
    if state.get("alreadyPausedSince"):
        note += (
            f"; it was already disabled: this update moved its LastModified to "
            f"{state['lastModified']}, so the paused-cleanup alarm and a later status count "
            f"from then — hours later than the stream's own clock, which these deadlines follow "
            "(if a circuit breaker had paused it, the alarm counts from the breaker's first "
            "opening instead: pausedSince in its record)"
        )
    if state.get("maxRecordAgeDeadline"):
        note += (
            f"; resumed after {state['maxRecordAgeDeadline']} (max_record_age, "
            f"{state['maximumRecordAgeSeconds']} s), the records older than that go to the "
            "on-failure destination instead of the cleanup: replay them before they leave "
            "the stream"
        )
    return note + "."


def switch(
    lambda_client: Any,
    uuid: str,
    action: str,
    *,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    retention_of: Callable[[Mapping[str, Any]], timedelta] | None = None,
) -> tuple[bool, dict[str, Any]]:
    """Disable (``"disable"``), enable (``"enable"``) or read (``"status"``) the mapping.

    Only ``Enabled`` is changed; the mapping, its UUID and its stream position stay.
    ``retention_of`` tells the change source's retention (`source_retention`); default
    a DynamoDB stream's 24 hours.

    Returns:
        ``(settled, summary)``: whether the mapping reached the requested state within
        ``wait_seconds`` (always ``True`` for ``status``), and its `summary`.

    Raises:
        botocore.exceptions.ClientError: e.g. ``ResourceNotFoundException`` for an unknown UUID.
    """
    earlier = None
    if action == "disable":
        # Disabling a disabled mapping moves its LastModified (the breaker reads that as the
        # operator's decision, so the update is still made): the deadlines keep the earlier one.
        before = lambda_client.get_event_source_mapping(UUID=uuid)
        if before.get("State") in PAUSED_STATES:
            earlier = before.get("LastModified")
    if action != "status":
        lambda_client.update_event_source_mapping(UUID=uuid, Enabled=action == "enable")
    deadline = clock() + wait_seconds
    while True:
        mapping = lambda_client.get_event_source_mapping(UUID=uuid)
        retention = STREAM_RETENTION if retention_of is None else retention_of(mapping)
        if action == "status" or mapping.get("State") == _SETTLED[action]:
            return True, summary(mapping, retention, paused_before=earlier)
        if clock() >= deadline:
            return False, summary(mapping, retention, paused_before=earlier)
        sleep(POLL_SECONDS)


#: How to read the mapping's UUID from the stack's outputs (``OUTPUT_KEY_SHAPE`` is their key).
OUTPUT_KEY_SHAPE = "<construct path>CleanupEventSourceMappingId<hash>"
FIND_UUID = (
    "aws cloudformation describe-stacks --stack-name STACK --query "
    "\"Stacks[0].Outputs[?contains(OutputKey, 'CleanupEventSourceMappingId')].OutputValue\" "
    "--output text"
)


def _seconds(text: str) -> float:
    """``--wait``: a finite number of seconds, at least 0 (``nan`` would never end the wait)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number of seconds, 0 or more")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog("python -m session_expiry_runtime.kill_switch", "kill-switch"),
        usage=(
            "%(prog)s [-h] (--uuid UUID | --function FUNCTION) [--wait SECONDS]\n"
            "           {disable,enable,status}\n"
            "       %(prog)s flags {show,set} [NAME=on|off ...] (--function FUNCTION | ...)"
        ),
        description="Disable or re-enable the session cleanup's event source mapping in place\n"
        "(UpdateEventSourceMapping Enabled=false/true): no deploy, the stream position is kept.",
        epilog=(
            "finding the UUID: the construct's event_source_mapping_id, or the stack output\n"
            f"whose key is {OUTPUT_KEY_SHAPE}\n"
            "(e.g. SessionsCleanupEventSourceMappingId54B6DE77 for SessionExpiry(stack, "
            "'Sessions')):\n"
            f"  {FIND_UUID}\n"
            "or pass --function with the cleanup function's name instead.\n\n"
            "while paused, the JSON line gives streamRetentionDeadline (records start to\n"
            "leave the stream: LastModified + its retention, 24 h for a DynamoDB stream,\n"
            "the Kinesis stream's with the Kinesis change source) and maxRecordAgeDeadline\n"
            "(resumed later, records go to the on-failure destination: LastModified +\n"
            "max_record_age).\n\n"
            "finer levers (construct prop feature_flags): one step off, a dry run, every\n"
            "record deferred, in AWS AppConfig, without a deploy:\n"
            "  python -m session_expiry_runtime.kill_switch flags --help\n\n"
            "exit status: 0 the mapping is in the requested state; 1 still changing after\n"
            "--wait; 2 could not run. Before the next deploy, set the construct's\n"
            "cleanup_enabled to match (documentation: Operating it, Kill switch;\n"
            "docs/operating.md)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("action", choices=["disable", "enable", "status"])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--uuid",
        help=f"the mapping's UUID (the stack output {OUTPUT_KEY_SHAPE}; see below)",
    )
    which.add_argument("--function", help="the cleanup function's name or ARN (one mapping)")
    parser.add_argument(
        "--wait",
        type=_seconds,
        default=DEFAULT_WAIT_SECONDS,
        metavar="SECONDS",
        help=f"wait this long for the state to settle (default {DEFAULT_WAIT_SECONDS})",
    )
    return parser


def main(argv: Iterable[str] | None = None, session: boto3.session.Session | None = None) -> int:
    """The CLI; returns the exit status. ``flags ...`` is `kill_switch_flags.main`."""
    given = list(argv) if argv is not None else sys.argv[1:]
    if given[:1] == ["flags"]:
        return kill_switch_flags.main(given[1:], session)
    args = _parser().parse_args(given)
    boto_session = session or boto3.session.Session()
    client = boto_session.client("lambda")
    try:
        uuid = args.uuid or find_mapping(client, args.function)
        settled, state = switch(
            client,
            uuid,
            args.action,
            wait_seconds=args.wait,
            retention_of=lambda mapping: source_retention(boto_session, mapping),
        )
    except (ClientError, BotoCoreError, KillSwitchError) as exc:
        sys.stderr.write(f"kill_switch: {type(exc).__name__}: {exc}\n")
        return EXIT_COULD_NOT_RUN
    sys.stdout.write(json.dumps(state, sort_keys=True) + "\n")
    note = deadline_note(state)
    if note is not None:
        sys.stderr.write(f"kill_switch: {note}\n")
    return EXIT_DONE if settled else EXIT_STILL_CHANGING


if __name__ == "__main__":  # pragma: no cover - exercised through main() in tests
    sys.exit(main())
