"""One status command: the cleanup's whole state, read from the stack's outputs.

``python -m session_expiry_runtime.status --stack STACK`` (or ``session-expiry status``) reads the
``SessionExpiry``'s stack outputs (``describe-stacks``; docs, Operating it, "Filling in the
commands") and, from the names they give, everything an operator asks first on day one:

* the event source mapping (``GetEventSourceMapping``): enabled or not, and since when;
* the cleanup function's own levers (``GetFunctionConfiguration``, ``GetFunctionConcurrency``):
  deployed as a dry run (``cleanup_dry_run``) or throttled to no reserved concurrency;
* the circuit breaker's record (``GetParameter``; with ``circuit_breaker``);
* every feature flag as deployed (AppConfig ``ListEnvironments``/``ListDeployments``/
  ``GetHostedConfigurationVersion``, `kill_switch_flags.FlagStore`; with ``feature_flags``);
* while paused, when the records written since the pause start to age out of the stream, and when
  they would go to the on-failure destination at resume (`pause_watch.deadlines`, counted
  from the breaker's first opening as the pause watch counts);
* the construct's alarms in ``ALARM`` with their runbook links (``ListStackResources``, then
  ``DescribeAlarms``);
* the on-failure queue's ``ApproximateNumberOfMessages`` (``GetQueueAttributes``);
* the deferred work waiting, per step, and its oldest item's age (``Query`` of the deferred-work
  table's ``deferredWork`` index; with ``feature_flags``);
* the cleanup's ``IteratorAge``, Maximum of the last 5 minutes (``GetMetricStatistics``).

**Read-only**: only Describe, Get, List and Query calls (a test records every call). A read that
fails does not stop the others: its section is ``null`` and ``unreadable`` names it and why.

**Which construct**: an output's key is ``<construct path><output id><8 hex>``; the construct is
found by its ``CleanupFunctionName`` output. A stack with several ``SessionExpiry`` needs
``--construct`` (the path without slashes, e.g. ``Sessions``; the keys' prefix).

Exit status (`EXIT_HEALTHY` ...): 0 running and healthy; 1 running, something needs
attention (an alarm in ALARM, messages on the failure queue, deferred work, a step flag off, a
section unreadable); 2 bad input, or the stack or its outputs cannot be read (nothing else is
read); 3 the cleanup is paused or stopped (the mapping not enabled, the breaker open or
probing, the flag ``enabled`` off, ``dryRun`` on, the function deployed as a dry run or its
reserved concurrency 0). With ``--json``, one JSON object
(`JSON_SCHEMA` documents its keys); otherwise a few lines for a person.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from ..core.commands import prog
from ..core.config import RuntimeConfig
from ..switches.deferred import ATTR_DEFERRED_AT, ATTR_DEFERRED_STEP, DEFERRED_INDEX, WHOLE_RECORD
from ..switches.feature_flags import FLAG_DRY_RUN, FLAG_ENABLED
from ..switches.kill_switch_flags import FlagStore, Where, values_of
from ..switches.pause_watch import PAUSED_STATES, deadlines, paused_seconds, read_breaker
from .kill_switch import source_retention

EXIT_HEALTHY = 0
EXIT_ATTENTION = 1
EXIT_BAD_INPUT = 2
EXIT_PAUSED = 3
#: Bumped when a key of `JSON_SCHEMA` changes meaning or goes away.
SCHEMA_VERSION = 1

#: The construct's output ids this command reads (``cdk_session_expiry.outputs`` creates them;
#: ``tests/runtime/test_status.py`` checks both sides agree).
OUTPUT_CLEANUP_FUNCTION = "CleanupFunctionName"
OUTPUT_MAPPING = "CleanupEventSourceMappingId"
OUTPUT_TABLE = "TableName"
OUTPUT_FAILURE_QUEUE = "FailureQueueUrl"
OUTPUT_FAILURE_BUCKET = "FailureDestinationBucketName"
OUTPUT_BREAKER_PARAMETER = "CircuitBreakerStateParameterName"
OUTPUT_DEFERRED_WORK_TABLE = "DeferredWorkTableName"
OUTPUT_FLAGS_APPLICATION = "FeatureFlagsApplicationId"
OUTPUT_FLAGS_ENVIRONMENT = "FeatureFlagsEnvironmentId"
OUTPUT_FLAGS_PROFILE = "FeatureFlagsProfileId"
OUTPUT_IDS = (
    OUTPUT_CLEANUP_FUNCTION,
    OUTPUT_MAPPING,
    OUTPUT_TABLE,
    OUTPUT_FAILURE_QUEUE,
    OUTPUT_FAILURE_BUCKET,
    OUTPUT_BREAKER_PARAMETER,
    OUTPUT_DEFERRED_WORK_TABLE,
    OUTPUT_FLAGS_APPLICATION,
    OUTPUT_FLAGS_ENVIRONMENT,
    OUTPUT_FLAGS_PROFILE,
)
#: How far back ``IteratorAge`` is read.
ITERATOR_AGE_WINDOW = timedelta(minutes=5)

#: A stack name (CloudFormation: a letter, then letters, digits and hyphens, at most 128) or a
#: stack ARN; a construct path without slashes (logical ids are alphanumeric).
_STACK = re.compile(r"^(?:[A-Za-z][A-Za-z0-9-]{0,127}|arn:aws[\w-]*:cloudformation:[\w/:.-]+)$")
_CONSTRUCT = re.compile(r"^[A-Za-z0-9]{1,200}$")
_HASH = r"[0-9A-F]{8}"
_RUNBOOK = re.compile(r"Runbook: (\S+)\s*$")

#: The ``--json`` object: each key, its type, and when it is ``null``.
JSON_SCHEMA: dict[str, str] = {
    "schemaVersion": f"int: {SCHEMA_VERSION}",
    "stack": "str: the stack's name",
    "construct": "str: the construct path the output keys start with, e.g. Sessions",
    "checkedAt": "str: ISO 8601 UTC time of the check",
    "exitCode": "int: the exit status (0 healthy, 1 attention, 3 paused or stopped)",
    "verdict": 'str: "healthy", "attention" or "paused"',
    "reasons": "list[str]: why the verdict is not healthy (empty when healthy)",
    "cleanupFunction": "str: the cleanup function's name",
    "function": "object|null: dryRun (bool: deployed with cleanup_dry_run), reservedConcurrency "
    "(int|null: null when none is reserved); null when unreadable",
    "mapping": "object|null: uuid (str), state (str), enabled (bool), since (str: its "
    "LastModified), stateTransitionReason (str|null); null when unreadable",
    "pause": "object: pausedSince, streamRetentionDeadline (records start to age out of the "
    "stream), maxRecordAgeDeadline (str|null each, null while running), pausedSeconds (int)",
    "circuitBreaker": "object|null: parameter, state (CLOSED|OPEN|HALF_OPEN), since (str|null), "
    "reason (str), failedProbes (int), pausedSince (str|null); null without circuit_breaker",
    "featureFlags": "object|null: flags ({name: bool}, true = on), deploymentNumber (int), "
    "deploymentState (str); null without feature_flags",
    "alarmsInAlarm": "list[object]|null: name, since (str), reason (str), runbook (str|null)",
    "failureQueue": "object|null: url (str), messages (int: ApproximateNumberOfMessages); "
    "null without a queue (a failure_destination_bucket instead: failureBucket)",
    "failureBucket": "str|null: the on-failure bucket's name, with failure_destination_bucket",
    "deferredWork": "object|null: table (str), items (int), byStep ({step: int}), "
    "oldestAgeSeconds (int|null: null when none waits); null without feature_flags",
    "iteratorAgeMilliseconds": "float|null: Maximum IteratorAge of the last 5 minutes; null "
    "without a datapoint (no invocation in that time)",
    "runbookValues": "{placeholder: str}: every output of the construct whose description "
    'names a runbook placeholder (docs/operating.md, "Filling in the commands"), by that '
    "placeholder, e.g. GRANT_SWEEP_FN",
    "unreadable": "{section: str}: the sections a read failed for, and the error",
}
#: A runbook placeholder in an output's description: the first ``(NAME`` of capitals.
_PLACEHOLDER = re.compile(r"\(([A-Z][A-Z0-9_]*)\b")


class StatusInputError(ValueError):
    """A value this command cannot honour (exit 2); the message names it."""


def check_input(stack: str, construct: str | None) -> None:
    """Refuse a stack name or construct path that cannot be one, before any call.

    Raises:
        StatusInputError: naming the value and what was expected.
    """
    if not _STACK.match(stack):
        raise StatusInputError(
            f"--stack {stack!r}: expected a stack name (a letter, then letters, digits and "
            "hyphens, at most 128) or a stack ARN"
        )
    if construct is not None and not _CONSTRUCT.match(construct):
        raise StatusInputError(
            f"--construct {construct!r}: expected the construct's path without slashes, letters "
            "and digits only (the output keys' prefix, e.g. Sessions)"
        )


def constructs_in(outputs: Iterable[str]) -> list[str]:
    """The construct paths (output key prefixes) of every ``SessionExpiry`` among the output
    keys: one per ``<path>CleanupFunctionName<hash>`` key."""
    found = (re.match(rf"^([A-Za-z0-9]*){OUTPUT_CLEANUP_FUNCTION}{_HASH}$", k) for k in outputs)
    return sorted({m.group(1) for m in found if m})


def outputs_of(outputs: Mapping[str, str], construct: str) -> dict[str, str]:
    """``{output id: value}`` of the construct ``construct`` (exact ``<construct><id><hash>``)."""
    mine: dict[str, str] = {}
    for output_id in OUTPUT_IDS:
        pattern = re.compile(rf"^{re.escape(construct)}{output_id}{_HASH}$")
        for key, value in outputs.items():
            if pattern.match(key):
                mine[output_id] = value
    return mine


def choose_construct(outputs: Mapping[str, str], construct: str | None, stack: str) -> str:
    """The construct to report: ``construct`` when given, the stack's only one otherwise.

    Raises:
        StatusInputError: no ``SessionExpiry`` outputs, ``construct`` is not among them, or
            several and none chosen.
    """
    found = constructs_in(outputs)
    if not found:
        raise StatusInputError(
            f"stack {stack!r} has no {OUTPUT_CLEANUP_FUNCTION} output: expected a stack with a "
            "SessionExpiry (deployed with a version that has stack outputs)"
        )
    if construct is not None:
        if construct not in found:
            raise StatusInputError(
                f"--construct {construct!r}: not a SessionExpiry of stack {stack!r}; expected "
                f"one of {found}"
            )
        return construct
    if len(found) > 1:
        raise StatusInputError(
            f"stack {stack!r} has {len(found)} SessionExpiry ({found}): expected --construct "
            "with one of them"
        )
    return found[0]


def read_outputs(cloudformation: Any, stack: str) -> tuple[str, dict[str, str]]:
    """The stack's name and ``{output key: value}`` (``DescribeStacks``).

    Raises:
        botocore.exceptions.ClientError: no such stack, no permission.
    """
    name, described = describe_outputs(cloudformation, stack)
    return name, {o["OutputKey"]: o["OutputValue"] for o in described}


def describe_outputs(cloudformation: Any, stack: str) -> tuple[str, list[dict[str, Any]]]:
    """The stack's name and its outputs as ``DescribeStacks`` answers them (key, value,
    description).

    Raises:
        botocore.exceptions.ClientError: no such stack, no permission.
    """
    (described,) = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    return str(described["StackName"]), list(described.get("Outputs") or [])


def runbook_values(described: Iterable[Mapping[str, Any]], construct: str) -> dict[str, str]:
    """``{placeholder: value}`` of the construct's outputs (keys ``<construct><id><hash>``)
    whose description names a runbook placeholder (``(NAME``, e.g. ``(GRANT_SWEEP_FN)``)."""
    described = list(described)
    longer = [  # another construct whose path starts with this one's: not its outputs
        c
        for c in constructs_in(str(o.get("OutputKey", "")) for o in described)
        if c != construct and c.startswith(construct)
    ]
    values: dict[str, str] = {}
    for output in described:
        key = str(output.get("OutputKey", ""))
        found = _PLACEHOLDER.search(str(output.get("Description") or ""))
        mine = re.match(rf"^{re.escape(construct)}[A-Z][A-Za-z0-9]*{_HASH}$", key) and not any(
            key.startswith(c) for c in longer
        )
        if found and mine and found.group(1) not in values:
            values[found.group(1)] = str(output.get("OutputValue", ""))
    return values


def _iso(value: object) -> str | None:
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).isoformat()
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, timezone.utc).isoformat()
    return None


@dataclass
class Reader:
    """The reads of one status check. ``session``: anything with boto3's ``client(name, **kw)``
    (a ``boto3.session.Session``, or the local emulator's adapter); ``now``: the check's time."""

    session: Any
    now: datetime

    def client(self, service: str) -> Any:
        return self.session.client(service)

    def mapping(self, uuid: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.client("lambda").get_event_source_mapping(UUID=uuid)
        return answer

    def function(self, name: str) -> dict[str, Any]:
        """The cleanup function's own levers: its deploy-time dry run (the environment the
        runtime reads, by the runtime's rule) and its reserved concurrency."""
        functions = self.client("lambda")
        variables = (
            functions.get_function_configuration(FunctionName=name).get("Environment") or {}
        ).get("Variables") or {}
        reserved = functions.get_function_concurrency(FunctionName=name)
        return {
            "dryRun": RuntimeConfig.from_env(variables).dry_run,
            "reservedConcurrency": reserved.get("ReservedConcurrentExecutions"),
        }

    def breaker(self, parameter: str) -> Any:
        return read_breaker(self.client("ssm"), parameter)

    def flags(self, found: Mapping[str, str]) -> tuple[dict[str, bool], dict[str, Any]]:
        where = Where(
            found[OUTPUT_FLAGS_APPLICATION],
            found[OUTPUT_FLAGS_ENVIRONMENT],
            found[OUTPUT_FLAGS_PROFILE],
            None,
        )
        document, deployment = FlagStore(self.client("appconfig"), where).deployed()
        return values_of(document), deployment

    def alarms_in_alarm(
        self, stack: str, construct: str, others: list[str]
    ) -> list[dict[str, Any]]:
        """The construct's alarms (the stack's ``AWS::CloudWatch::Alarm`` resources whose logical
        id starts with ``construct``, not with a longer construct path of ``others``) in ALARM."""
        names: list[str] = []
        pages = self.client("cloudformation").get_paginator("list_stack_resources")
        for page in pages.paginate(StackName=stack):
            for resource in page.get("StackResourceSummaries") or []:
                logical = str(resource.get("LogicalResourceId") or "")
                longer = [o for o in others if len(o) > len(construct) and logical.startswith(o)]
                if (
                    resource.get("ResourceType") == "AWS::CloudWatch::Alarm"
                    and logical.startswith(construct)
                    and not longer
                    and resource.get("PhysicalResourceId")
                ):
                    names.append(str(resource["PhysicalResourceId"]))
        firing: list[dict[str, Any]] = []
        cloudwatch = self.client("cloudwatch")
        for start in range(0, len(names), 100):  # DescribeAlarms: at most 100 names a call
            answer = cloudwatch.describe_alarms(
                AlarmNames=names[start : start + 100], StateValue="ALARM"
            )
            for alarm in answer.get("MetricAlarms", []) + answer.get("CompositeAlarms", []):
                if alarm.get("StateValue") != "ALARM":  # StateValue filters names on AWS only
                    continue
                runbook = _RUNBOOK.search(str(alarm.get("AlarmDescription") or ""))
                firing.append(
                    {
                        "name": alarm["AlarmName"],
                        "since": _iso(alarm.get("StateUpdatedTimestamp")),
                        "reason": alarm.get("StateReason"),
                        "runbook": runbook.group(1) if runbook else None,
                    }
                )
        return sorted(firing, key=lambda a: str(a["name"]))

    def queue_depth(self, url: str) -> int:
        answer = self.client("sqs").get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )
        return int(answer["Attributes"]["ApproximateNumberOfMessages"])

    def deferred(self, table: str, steps: Iterable[str]) -> dict[str, Any]:
        """Items waiting per step of the ``deferredWork`` index, and the oldest one's age."""
        dynamodb = self.client("dynamodb")
        by_step: dict[str, int] = {}
        oldest: float | None = None
        for step in [WHOLE_RECORD, *steps]:
            query = {
                "TableName": table,
                "IndexName": DEFERRED_INDEX,
                "KeyConditionExpression": "#s = :s",
                "ExpressionAttributeNames": {"#s": ATTR_DEFERRED_STEP},
                "ExpressionAttributeValues": {":s": {"S": step}},
            }
            count = 0
            for page in dynamodb.get_paginator("query").paginate(**query, Select="COUNT"):
                count += int(page.get("Count", 0))
            if count:
                by_step[step] = count
                first = dynamodb.query(**query, ScanIndexForward=True, Limit=1).get("Items", [])
                if first:
                    at = float(first[0][ATTR_DEFERRED_AT]["N"])
                    oldest = at if oldest is None else min(oldest, at)
        age = None if oldest is None else max(0, int(self.now.timestamp() - oldest))
        return {
            "table": table,
            "items": sum(by_step.values()),
            "byStep": by_step,
            "oldestAgeSeconds": age,
        }

    def iterator_age(self, function: str) -> float | None:
        """Maximum ``IteratorAge`` (ms) of the last 5 minutes, by minute; ``None`` without one."""
        # The API takes whole seconds: round up, or a datapoint of this very second is cut off.
        end = self.now.replace(microsecond=0) + timedelta(seconds=1)
        answer = self.client("cloudwatch").get_metric_statistics(
            Namespace="AWS/Lambda",
            MetricName="IteratorAge",
            Dimensions=[{"Name": "FunctionName", "Value": function}],
            StartTime=end - ITERATOR_AGE_WINDOW,
            EndTime=end,
            Period=60,
            Statistics=["Maximum"],
        )
        points = [float(p["Maximum"]) for p in answer.get("Datapoints") or []]
        return max(points) if points else None


_READ_ERRORS = (ClientError, BotoCoreError, ValueError, KeyError)


def _attempt(unreadable: dict[str, str], section: str, read: Callable[[], Any]) -> Any:
    """``read()``, or ``None`` with the error in ``unreadable[section]``."""
    try:
        return read()
    except _READ_ERRORS as exc:
        unreadable[section] = f"{type(exc).__name__}: {exc}"
        return None


def collect(session: Any, stack: str, construct: str | None = None) -> dict[str, Any]:
    """The status of the ``SessionExpiry`` of ``stack``: the ``--json`` object
    (`JSON_SCHEMA`).

    Raises:
        StatusInputError: a bad ``stack``/``construct`` (before any call), or the stack has no
            such construct.
        botocore.exceptions.ClientError, BotoCoreError: ``DescribeStacks`` failed.
    """
    check_input(stack, construct)
    reader = Reader(session, datetime.now(timezone.utc))
    name, described = describe_outputs(reader.client("cloudformation"), stack)
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described}
    chosen = choose_construct(outputs, construct, name)
    found = outputs_of(outputs, chosen)
    unreadable: dict[str, str] = {}
    status: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "stack": name,
        "construct": chosen,
        "checkedAt": reader.now.isoformat(),
        "cleanupFunction": found[OUTPUT_CLEANUP_FUNCTION],
        "failureBucket": found.get(OUTPUT_FAILURE_BUCKET),
        "unreadable": unreadable,
    }
    _mapping_and_pause(reader, found, status)
    status["function"] = _attempt(
        unreadable, "function", lambda: reader.function(found[OUTPUT_CLEANUP_FUNCTION])
    )
    flags = None
    if OUTPUT_FLAGS_PROFILE in found:
        flags = _attempt(unreadable, "featureFlags", lambda: reader.flags(found))
    status["featureFlags"] = None if flags is None else _flags_view(*flags)
    others = [c for c in constructs_in(outputs) if c != chosen]
    status["alarmsInAlarm"] = _attempt(
        unreadable, "alarmsInAlarm", lambda: reader.alarms_in_alarm(name, chosen, others)
    )
    url = found.get(OUTPUT_FAILURE_QUEUE)
    depth = (
        None
        if url is None
        else _attempt(unreadable, "failureQueue", lambda: reader.queue_depth(url))
    )
    status["failureQueue"] = None if depth is None else {"url": url, "messages": depth}
    status["deferredWork"] = _deferred(reader, found, flags, unreadable)
    status["iteratorAgeMilliseconds"] = _attempt(
        unreadable,
        "iteratorAgeMilliseconds",
        lambda: reader.iterator_age(found[OUTPUT_CLEANUP_FUNCTION]),
    )
    status["runbookValues"] = runbook_values(described, chosen)
    status.update(judge(status))
    return status


def _mapping_and_pause(reader: Reader, found: Mapping[str, str], status: dict[str, Any]) -> None:
    """``mapping``, ``circuitBreaker`` and ``pause`` of ``status``."""
    unreadable = status["unreadable"]
    mapping = _attempt(unreadable, "mapping", lambda: reader.mapping(found[OUTPUT_MAPPING]))
    parameter = found.get(OUTPUT_BREAKER_PARAMETER)
    record = (
        None
        if parameter is None
        else _attempt(unreadable, "circuitBreaker", lambda: reader.breaker(parameter))
    )
    status["circuitBreaker"] = (
        None
        if record is None
        else {
            "parameter": parameter,
            "state": record.state,
            "since": _iso(record.since),
            "reason": record.reason,
            "failedProbes": record.failed_probes,
            "pausedSince": _iso(record.paused_since),
        }
    )
    status["mapping"] = (
        None
        if mapping is None
        else {
            "uuid": mapping.get("UUID"),
            "state": mapping.get("State"),
            "enabled": mapping.get("State") == "Enabled",
            "since": _iso(mapping.get("LastModified")),
            "stateTransitionReason": mapping.get("StateTransitionReason"),
        }
    )
    pause: dict[str, Any] = {
        "pausedSince": None,
        "streamRetentionDeadline": None,
        "maxRecordAgeDeadline": None,
        "pausedSeconds": 0,
    }
    if mapping is not None:
        retention = _attempt(
            unreadable, "retention", lambda: source_retention(reader.session, mapping)
        )
        dated = deadlines(mapping, retention or timedelta(hours=24), breaker=record)
        pause.update(
            {
                k: dated[k]
                for k in ("pausedSince", "streamRetentionDeadline", "maxRecordAgeDeadline")
            }
        )
        pause["pausedSeconds"] = paused_seconds(mapping, reader.now, record)
    status["pause"] = pause


def _flags_view(values: dict[str, bool], deployment: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "flags": values,
        "deploymentNumber": deployment.get("DeploymentNumber"),
        "deploymentState": deployment.get("State"),
    }


def _deferred(
    reader: Reader,
    found: Mapping[str, str],
    flags: tuple[dict[str, bool], dict[str, Any]] | None,
    unreadable: dict[str, str],
) -> dict[str, Any] | None:
    table = found.get(OUTPUT_DEFERRED_WORK_TABLE)
    if table is None:
        return None
    if flags is None:  # the steps are the flag document's: without it, only whole records
        unreadable.setdefault(
            "deferredWork", "the steps are named by the flag document: only whole records counted"
        )
    steps = [n for n in (flags[0] if flags else {}) if n not in (FLAG_ENABLED, FLAG_DRY_RUN)]
    answer: dict[str, Any] | None = _attempt(
        unreadable, "deferredWork", lambda: reader.deferred(table, steps)
    )
    return answer


def judge(status: Mapping[str, Any]) -> dict[str, Any]:
    """``exitCode``, ``verdict`` and ``reasons`` of a collected status (see the module)."""
    stopped: list[str] = []
    attention: list[str] = []
    mapping = status.get("mapping")
    if mapping is not None and mapping["state"] in PAUSED_STATES:
        stopped.append(f"the event source mapping is {mapping['state']} since {mapping['since']}")
    elif mapping is not None and not mapping["enabled"]:  # Creating, Enabling, Updating: for now
        attention.append(f"the event source mapping is {mapping['state']}")
    function = status.get("function") or {}
    if function.get("dryRun"):
        stopped.append(
            "the cleanup function is deployed as a dry run (cleanup_dry_run): nothing is cleaned"
        )
    if function.get("reservedConcurrency") == 0:
        stopped.append(
            "the cleanup function's reserved concurrency is 0: no invocation runs, the records "
            "wait in the stream"
        )
    breaker = status.get("circuitBreaker")
    if breaker is not None and breaker["state"] != "CLOSED":
        stopped.append(f"the circuit breaker is {breaker['state']} since {breaker['since']}")
    values = (status.get("featureFlags") or {}).get("flags") or {}
    if values.get(FLAG_ENABLED) is False:
        stopped.append("the feature flag enabled is off: every record is deferred")
    if values.get(FLAG_DRY_RUN) is True:
        stopped.append("the feature flag dryRun is on: nothing is cleaned")
    off = sorted(n for n, on in values.items() if n not in (FLAG_ENABLED, FLAG_DRY_RUN) and not on)
    if off:
        attention.append(f"step flags off: {', '.join(off)}")
    for alarm in status.get("alarmsInAlarm") or []:
        attention.append(f"alarm {alarm['name']} in ALARM")
    queue = status.get("failureQueue")
    if queue is not None and queue["messages"]:
        attention.append(f"{queue['messages']} messages on the failure queue: replay them")
    deferred = status.get("deferredWork")
    if deferred is not None and deferred["items"]:
        attention.append(f"{deferred['items']} deferred work items waiting")
    for section in status.get("unreadable") or {}:
        attention.append(f"{section} could not be read")
    if stopped:
        return {"exitCode": EXIT_PAUSED, "verdict": "paused", "reasons": stopped + attention}
    if attention:
        return {"exitCode": EXIT_ATTENTION, "verdict": "attention", "reasons": attention}
    return {"exitCode": EXIT_HEALTHY, "verdict": "healthy", "reasons": []}


def _or(value: object, absent: str) -> str:
    return absent if value is None else str(value)


def _levers(function: Mapping[str, Any] | None) -> str:
    if function is None:
        return "unreadable"
    reserved = _or(function["reservedConcurrency"], "none")
    return f"dry run {'on' if function['dryRun'] else 'off'}, reserved concurrency {reserved}"


def _runbook_lines(values: Mapping[str, str]) -> list[str]:
    if not values:
        return []
    head = "runbook values     (docs/operating.md's placeholders, from the outputs)"
    return [head, *(f"  {name:<20} {value}" for name, value in sorted(values.items()))]


def render(status: Mapping[str, Any]) -> str:
    """The status in a few lines for a person (what ``--json`` holds, in words)."""
    mapping, pause = status.get("mapping"), status["pause"]
    lines = [
        f"{status['stack']} / {status['construct']}: {status['verdict'].upper()} "
        f"(exit {status['exitCode']}) at {status['checkedAt']}",
        f"cleanup function   {status['cleanupFunction']}",
        "event source map   "
        + (
            "unreadable"
            if mapping is None
            else f"{mapping['state']} since {mapping['since']} ({mapping['uuid']})"
        ),
    ]
    lines.append(f"cleanup levers     {_levers(status.get('function'))}")
    breaker = status.get("circuitBreaker")
    lines.append(
        "circuit breaker    "
        + (
            "not configured"
            if breaker is None
            else f"{breaker['state']} since {breaker['since']} ({breaker['reason']})"
        )
    )
    if pause["pausedSince"]:
        lines.append(
            f"paused since       {pause['pausedSince']}: records start to age out at "
            f"{pause['streamRetentionDeadline']}"
            + (
                f"; resumed after {pause['maxRecordAgeDeadline']} they go to the on-failure "
                "destination"
                if pause["maxRecordAgeDeadline"]
                else ""
            )
        )
    flags = status.get("featureFlags")
    lines.append(
        "feature flags      "
        + (
            "not configured or unreadable"
            if flags is None
            else ", ".join(f"{n}={'on' if v else 'off'}" for n, v in sorted(flags["flags"].items()))
        )
    )
    alarms = status.get("alarmsInAlarm")
    if alarms is None:
        lines.append("alarms in ALARM    unreadable")
    elif not alarms:
        lines.append("alarms in ALARM    none")
    for alarm in alarms or []:
        lines.append(
            f"alarm in ALARM     {alarm['name']} since {alarm['since']}; runbook "
            f"{_or(alarm['runbook'], '(none in its description)')}"
        )
    queue = status.get("failureQueue")
    if queue is not None:
        lines.append(f"failure queue      {queue['messages']} messages ({queue['url']})")
    elif status.get("failureBucket"):
        lines.append(f"failure bucket     {status['failureBucket']} (aws s3 ls it)")
    deferred = status.get("deferredWork")
    if deferred is not None:
        oldest = deferred["oldestAgeSeconds"]
        lines.append(
            f"deferred work      {deferred['items']} items"
            + ("" if oldest is None else f", oldest {oldest} s old")
            + (f" ({deferred['byStep']})" if deferred["byStep"] else "")
        )
    age = status.get("iteratorAgeMilliseconds")
    lines.append(
        "iterator age       "
        + ("no datapoint in the last 5 minutes" if age is None else f"{age:g} ms (max, 5 min)")
    )
    lines += _runbook_lines(status.get("runbookValues") or {})
    for section, error in (status.get("unreadable") or {}).items():
        lines.append(f"unreadable         {section}: {error}")
    for reason in status["reasons"]:
        lines.append(f"needs attention    {reason}")
    return "\n".join(lines)


_EPILOG = """\
exit status: 0 running and healthy; 1 running, something needs attention (an alarm in
ALARM, messages on the failure queue, deferred work waiting, a step flag off, a section
that could not be read); 2 bad input, or the stack or its outputs cannot be read;
3 the cleanup is paused or stopped (the event source mapping not enabled, the circuit
breaker open or half-open, the feature flag enabled off or dryRun on, the function
deployed as a dry run, or its reserved concurrency 0).

read-only: only Describe, Get, List and Query calls (DescribeStacks, ListStackResources,
GetEventSourceMapping, GetFunctionConfiguration, GetFunctionConcurrency, GetParameter,
AppConfig ListEnvironments/ListDeployments/GetHostedConfigurationVersion, DescribeAlarms,
GetQueueAttributes, Query, GetMetricStatistics; DescribeStreamSummary with a Kinesis change
source).

--json prints one object; its keys (docs/operating.md, "Status"): schemaVersion, stack,
construct, checkedAt, exitCode, verdict, reasons, cleanupFunction, function, mapping, pause,
circuitBreaker, featureFlags, alarmsInAlarm, failureQueue, failureBucket, deferredWork,
iteratorAgeMilliseconds, runbookValues, unreadable (null where a resource is absent or
unreadable).
"""


def parser() -> argparse.ArgumentParser:
    """The command's arguments."""
    p = argparse.ArgumentParser(
        prog=prog("python -m session_expiry_runtime.status", "status"),
        description="The session cleanup's whole state, read from the stack's outputs:\n"
        "the event source mapping, circuit breaker, feature flags, pause deadlines,\n"
        "alarms in ALARM with their runbooks, failure queue, deferred work, iterator age.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--stack", required=True, help="the stack's name (or ARN)")
    p.add_argument(
        "--construct",
        help="the SessionExpiry's path without slashes, the output keys' prefix (e.g. "
        "Sessions); needed when the stack has several",
    )
    p.add_argument("--region", help="the stack's Region (default: the AWS configuration's)")
    p.add_argument("--json", action="store_true", help="print one JSON object (schema: docs)")
    return p


def main(argv: Iterable[str] | None = None, session: Any = None) -> int:
    """The CLI; returns the exit status (module docstring)."""
    args = parser().parse_args(list(argv) if argv is not None else sys.argv[1:])
    try:
        check_input(args.stack, args.construct)
        boto_session = session or boto3.session.Session(region_name=args.region)
        status = collect(boto_session, args.stack, args.construct)
    except (StatusInputError, ClientError, BotoCoreError) as exc:
        sys.stderr.write(f"status: {type(exc).__name__}: {exc}\n")
        return EXIT_BAD_INPUT
    if args.json:
        sys.stdout.write(json.dumps(status, sort_keys=True, default=str) + "\n")
    else:
        sys.stdout.write(render(status) + "\n")
    return int(status["exitCode"])


if __name__ == "__main__":  # pragma: no cover - exercised through main() in tests
    sys.exit(main())
