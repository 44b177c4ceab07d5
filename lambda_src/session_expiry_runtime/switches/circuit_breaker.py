"""The circuit breaker: a chosen alarm pauses the cleanup, a half-open probe resumes it.

Opt-in (the construct's ``circuit_breaker``). One function (handler
``session_expiry_runtime.switches.circuit_breaker.handler``, reserved concurrency 1, so its runs
never
overlap) gets two kinds of event from EventBridge: a ``CloudWatch Alarm State Change`` to
``ALARM`` of one of the chosen alarms (a rule on those alarms' ARNs), and a ``Scheduled Event``
every 5 minutes, the breaker's clock. It changes one thing only, the event source mapping's
``Enabled`` (``UpdateEventSourceMapping``): the mapping is never deleted or replaced, so it keeps
its position in the stream ("if you delete event source mapping and create it again, it will
reset": AWS Lambda API Reference, UpdateEventSourceMapping).

State machine (``CLOSED`` → ``OPEN`` → ``HALF_OPEN`` → ``CLOSED``)::

    CLOSED    --ALARM of a chosen alarm, mapping Enabled-->  OPEN       (Enabled=false)
    OPEN      --cool-down over, no judged alarm in ALARM-->  HALF_OPEN  (Enabled=true: the probe)
    HALF_OPEN --a judged alarm in ALARM------------------>  OPEN       (Enabled=false)
    HALF_OPEN --probe window over without one----------->  CLOSED
    OPEN / HALF_OPEN --the mapping changed by someone else->  CLOSED   (mapping left as it is)

* *Judged* alarms are the chosen ones except the iterator age alarm, which only opens a closed
  breaker: iterator age rises after any pause, so during a cool-down or a probe it would only
  say that the breaker paused the cleanup, and would hold it open for ever.
* The probe starts only once every judged alarm has left ``ALARM``: an alarm still in ``ALARM``
  (the on-failure queue's, until its messages are replayed) could not say whether the probe
  fails. A breaker held open that way is not forced closed: the paused-cleanup alarm
  (``CleanupPausedSeconds``, `pause_watch`) fires at its threshold, before the stream's
  24 hours, and a person decides.
* **It never overrides anyone.** The record keeps the mapping's ``State`` and ``LastModified`` as
  the breaker last saw them. A mapping in another state than the breaker left it (enabled while
  open, disabled while probing) or updated since (``LastModified`` moved while the state stayed
  put: the kill switch's ``disable`` on a paused mapping, a deploy) is someone else's decision:
  the breaker closes without touching it. With ``cleanup_enabled=False`` deployed
  (``SESSION_EXPIRY_CLEANUP_ENABLED=false``) it never enables the mapping. An alarm while the
  mapping is already disabled by someone else does not open it.
* A mapping whose ``StartingPosition`` is ``LATEST`` is refused (`BreakerRefused`, the
  function's errors alarm fires): toggling such a mapping can skip records
  (awsdocs/aws-lambda-developer-guide#487); the construct refuses it at synth too.

The record is JSON in an SSM String parameter the construct creates (``state``, ``since``,
``reason``, ``failedProbes``, ``seenState``, ``seenModified``, ``pausedSince``), written only
when it changes.

**How long it has paused the cleanup** (``pausedSince``, epoch seconds): the time the breaker
first opened in the current unbroken run of openings and probes. Set when it trips, kept through
every probe and every failed probe's re-opening, dropped when a probe passes or when it yields
to a mapping someone else resumed. Yielding to someone else's *pause* (the kill switch's
``disable`` over the breaker's, a deploy's update while disabled: the stream's clock runs on)
closes the breaker but keeps ``pausedSince`` in the closed record, with the mapping's
``seenState``/``seenModified``, until the mapping is resumed or changed again
(`paused_as_yielded`; a closed record never makes the breaker act on the mapping). Each
re-opening disables the mapping again, which moves the mapping's ``LastModified``; the pause
watch (`pause_watch`) counts ``CleanupPausedSeconds`` from the earlier of ``LastModified``
and ``pausedSince``, so a breaker whose every probe fails reaches the paused-cleanup alarm like
any other pause, and the stream's 24 hours are counted from the first pause, not from the last
failed probe (a record written before this field existed counts from its ``since``, the time it
opened, at its next probe).
Every run writes ``CircuitBreakerState`` (0 closed, 1 half-open, 2 open; dimension
``EventSourceMappingUUID``) for the dashboard, and logs one line with the decision and its
reason.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

import boto3
from botocore.config import Config

from ..core.config import (
    BREAKER_CLOSED,
    BREAKER_HALF_OPEN,
    BREAKER_OPEN,
    DEFAULT_METRICS_NAMESPACE,
    DIMENSION_EVENT_SOURCE_MAPPING,
    ENV_BREAKER_ALARMS,
    ENV_BREAKER_CLOSED_ONLY_ALARMS,
    ENV_BREAKER_COOL_DOWN_SECONDS,
    ENV_BREAKER_PROBE_SECONDS,
    ENV_BREAKER_STATE_PARAMETER,
    ENV_CLEANUP_ENABLED,
    ENV_EVENT_SOURCE_MAPPING_UUID,
    ENV_METRICS_NAMESPACE,
    METRIC_CIRCUIT_BREAKER_STATE,
)
from ..core.metrics import gauge_document

logger = logging.getLogger(__name__)

CLOSED = "CLOSED"
HALF_OPEN = "HALF_OPEN"
OPEN = "OPEN"
#: ``CircuitBreakerState`` of each state.
METRIC_VALUES = {CLOSED: BREAKER_CLOSED, HALF_OPEN: BREAKER_HALF_OPEN, OPEN: BREAKER_OPEN}
#: The ``detail-type`` of CloudWatch's alarm events on EventBridge (Amazon CloudWatch User Guide,
#: "Alarm events and EventBridge").
ALARM_STATE_CHANGE = "CloudWatch Alarm State Change"
#: Mapping states the breaker expects after its own ``Enabled=false`` / ``Enabled=true``.
_AFTER_DISABLE = frozenset({"Disabling", "Disabled"})
_AFTER_ENABLE = frozenset({"Enabling", "Enabled"})
_CLIENT_CONFIG = Config(connect_timeout=5, read_timeout=10, retries={"mode": "standard"})


class BreakerRefused(RuntimeError):
    """The mapping's starting position is ``LATEST``: the breaker never toggles it."""


class MappingBusy(RuntimeError):
    """The mapping is being created, updated or enabled: the run fails and Lambda's
    asynchronous retry (or the next scheduled run) tries again."""


@dataclass(frozen=True)
class Record:
    """The breaker's own state (the SSM parameter's JSON). ``since`` and ``seen_modified`` are
    epoch seconds; ``seen_*`` are the mapping's ``State``/``LastModified`` as last seen while
    open or half-open, or closed with a pause run; ``paused_since`` (epoch seconds) is when the
    breaker first opened in the current run of openings and probes (``None`` when closed,
    unless it yielded to someone else's pause that still holds: `paused_as_yielded`)."""

    state: str = CLOSED
    since: float | None = None
    reason: str = "initial"
    failed_probes: int = 0
    seen_state: str | None = None
    seen_modified: float | None = None
    #: When the breaker first opened in this run of openings and probes (see above).
    paused_since: float | None = None

    @classmethod
    def from_json(cls, text: str) -> Record:
        """Parse the parameter's value; missing fields take their defaults.

        Raises:
            ValueError: not a JSON object, or an unknown ``state``.
        """
        raw = json.loads(text)
        if not isinstance(raw, dict) or raw.get("state", CLOSED) not in METRIC_VALUES:
            raise ValueError(
                f"circuit breaker record {text!r}: expected a JSON object with a "
                f"state among {', '.join(METRIC_VALUES)}"
            )
        return cls(
            state=raw.get("state", CLOSED),
            since=raw.get("since"),
            reason=raw.get("reason", "initial"),
            failed_probes=int(raw.get("failedProbes", 0)),
            seen_state=raw.get("seenState"),
            seen_modified=raw.get("seenModified"),
            paused_since=raw.get("pausedSince"),
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "state": self.state,
                "since": self.since,
                "reason": self.reason,
                "failedProbes": self.failed_probes,
                "seenState": self.seen_state,
                "seenModified": self.seen_modified,
                "pausedSince": self.paused_since,
            },
            sort_keys=True,
        )


@dataclass(frozen=True)
class Settings:
    """What the construct configured (see the module docstring)."""

    alarms: frozenset[str]
    closed_only: frozenset[str]
    cool_down_seconds: int
    probe_seconds: int
    may_enable: bool = True

    @property
    def judged(self) -> frozenset[str]:
        """The alarms that hold a breaker open and fail a probe."""
        return self.alarms - self.closed_only

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Raises KeyError/ValueError for a missing or malformed variable."""
        return cls(
            alarms=frozenset(json.loads(env[ENV_BREAKER_ALARMS])),
            closed_only=frozenset(json.loads(env.get(ENV_BREAKER_CLOSED_ONLY_ALARMS) or "[]")),
            cool_down_seconds=int(env[ENV_BREAKER_COOL_DOWN_SECONDS]),
            probe_seconds=int(env[ENV_BREAKER_PROBE_SECONDS]),
            may_enable=(env.get(ENV_CLEANUP_ENABLED) or "true").lower() != "false",
        )


@dataclass(frozen=True)
class MappingView:
    """What the breaker reads of a ``GetEventSourceMapping``/``UpdateEventSourceMapping`` answer."""

    state: str
    last_modified: float | None
    starting_position: str | None

    @classmethod
    def of(cls, answer: Mapping[str, Any]) -> MappingView:
        modified = answer.get("LastModified")
        return cls(
            state=str(answer.get("State")),
            last_modified=modified.timestamp() if isinstance(modified, datetime) else None,
            starting_position=answer.get("StartingPosition"),
        )


@dataclass(frozen=True)
class Decision:
    """The next record, what to do to the mapping (``None``: nothing), and why."""

    record: Record
    enable: bool | None
    reason: str


def alarm_change(event: Mapping[str, Any]) -> str | None:
    """The alarm's name when ``event`` is an alarm's change to ``ALARM``; ``None`` for any other
    event (the schedule's, or another state: the rule only sends ``ALARM``)."""
    if event.get("detail-type") != ALARM_STATE_CHANGE:
        return None
    detail = event.get("detail") or {}
    if (detail.get("state") or {}).get("value") != "ALARM":
        return None
    name = detail.get("alarmName")
    return name if isinstance(name, str) else None


def paused_as_yielded(record: Record, mapping: MappingView) -> bool:
    """Whether a closed record's pause run (``paused_since``, kept when the breaker yielded to
    someone else's pause of the mapping) still holds: the mapping is disabled and unchanged
    since the breaker last saw it (seen ``Disabling``, it may have settled since)."""
    if record.state != CLOSED or record.paused_since is None:
        return False
    if mapping.state not in _AFTER_DISABLE:
        return False
    if record.seen_state == "Disabling":
        return True
    return mapping.state == record.seen_state and mapping.last_modified == record.seen_modified


def moved_by_others(record: Record, mapping: MappingView) -> str | None:
    """Why the mapping is someone else's decision now (see the module docstring), or ``None``
    when it is as an open or half-open breaker left it."""
    expected = _AFTER_DISABLE if record.state == OPEN else _AFTER_ENABLE
    if mapping.state not in expected:
        return f"the mapping is {mapping.state}, not as the breaker left it"
    if (
        record.seen_state == mapping.state
        and record.seen_modified is not None
        and mapping.last_modified != record.seen_modified
    ):
        return "the mapping was updated since the breaker last saw it"
    return None


def decide(
    record: Record,
    mapping: MappingView,
    *,
    now: float,
    settings: Settings,
    alarm: str | None,
    alarms_in_alarm: Callable[[], Iterable[str]],
) -> Decision:
    """The breaker's next step (pure; see the module docstring's state machine).

    ``alarm`` names the alarm that went to ``ALARM`` (``None`` on a scheduled run);
    ``alarms_in_alarm`` lists the chosen alarms now in ``ALARM`` (called only when needed).

    Raises:
        BreakerRefused: the mapping's starting position is ``LATEST``.
        MappingBusy: an alarm would open the breaker but the mapping is not settled.
    """
    if mapping.starting_position == "LATEST":
        raise BreakerRefused(
            "the event source mapping's StartingPosition is LATEST: expected TRIM_HORIZON; "
            "toggling a LATEST mapping can skip records, so the breaker never does"
        )
    if record.state != CLOSED:
        moved = moved_by_others(record, mapping)
        if moved is not None:
            return _yield(record, mapping, now, f"yielded: {moved}")
    elif record.paused_since is not None and not paused_as_yielded(record, mapping):
        record = replace(record, paused_since=None)  # resumed or changed since the yield
    if alarm is not None:
        return _on_alarm(record, mapping, now=now, settings=settings, alarm=alarm)
    return _on_schedule(record, now=now, settings=settings, alarms_in_alarm=alarms_in_alarm)


def _yield(record: Record, mapping: MappingView, now: float, reason: str) -> Decision:
    """Close without touching the mapping. Yielding to someone else's pause (the mapping is
    disabled: a kill switch's ``disable``, a deploy's update while paused) does not end the
    pause the stream sees: the closed record keeps the run's ``paused_since`` (a record older
    than that field: its opening) for the pause watch, while the mapping stays as it is now."""
    kept = None
    if mapping.state in _AFTER_DISABLE:
        kept = record.paused_since or record.since
    return Decision(Record(CLOSED, now, reason, paused_since=kept), None, reason)


def _open(record: Record, now: float, reason: str, *, probe_failed: bool) -> Decision:
    """Open: a trip starts the run's ``paused_since``; a failed probe keeps it."""
    failed = record.failed_probes + 1 if probe_failed else 0
    first = (record.paused_since or record.since or now) if probe_failed else now
    return Decision(Record(OPEN, now, reason, failed, paused_since=first), False, reason)


def _on_alarm(
    record: Record, mapping: MappingView, *, now: float, settings: Settings, alarm: str
) -> Decision:
    if alarm not in settings.alarms:
        return Decision(record, None, f"{alarm} is not one of the breaker's alarms")
    if record.state == OPEN:
        return Decision(record, None, f"{alarm} in ALARM: already open")
    if record.state == HALF_OPEN:
        if alarm in settings.closed_only:
            return Decision(record, None, f"{alarm} is not judged during a probe")
        return _open(record, now, f"probe failed: {alarm} in ALARM", probe_failed=True)
    if mapping.state in _AFTER_DISABLE:
        return Decision(record, None, f"{alarm} in ALARM: the mapping is already {mapping.state}")
    if mapping.state != "Enabled":
        raise MappingBusy(f"{alarm} in ALARM but the mapping is {mapping.state}: try again")
    return _open(record, now, f"tripped: {alarm} in ALARM", probe_failed=False)


def _on_schedule(
    record: Record,
    *,
    now: float,
    settings: Settings,
    alarms_in_alarm: Callable[[], Iterable[str]],
) -> Decision:
    if record.state == CLOSED:
        return Decision(record, None, "closed")
    elapsed = now - (record.since or now)
    if record.state == OPEN:
        if not settings.may_enable:
            reason = "yielded: cleanup_enabled=False is deployed"
            return Decision(Record(CLOSED, now, reason), None, reason)
        if elapsed < settings.cool_down_seconds:
            return Decision(record, None, "open: cooling down")
        firing = sorted(set(alarms_in_alarm()) & settings.judged)
        if firing:
            return Decision(record, None, f"open: waiting for {', '.join(firing)} to leave ALARM")
        reason = "half-open: cool-down over and no judged alarm in ALARM; probing"
        first = record.paused_since or record.since  # an older record: its opening
        probing = replace(record, state=HALF_OPEN, since=now, reason=reason, paused_since=first)
        return Decision(probing, True, reason)
    firing = sorted(set(alarms_in_alarm()) & settings.judged)
    if firing:
        return _open(record, now, f"probe failed: {', '.join(firing)} in ALARM", probe_failed=True)
    if elapsed >= settings.probe_seconds:
        reason = "closed: the probe passed"
        return Decision(Record(CLOSED, now, reason), None, reason)
    return Decision(record, None, "half-open: probing")


class CircuitBreaker:
    """The side effects around `decide`: read the record and the mapping, act, store."""

    def __init__(
        self,
        *,
        lambda_client: Any,
        ssm_client: Any,
        cloudwatch_client: Any,
        uuid: str,
        parameter: str,
        settings: Settings,
        namespace: str = DEFAULT_METRICS_NAMESPACE,
        clock: Callable[[], float] = time.time,
        write: Callable[[str], Any] | None = None,
    ) -> None:
        self._lambda = lambda_client
        self._ssm = ssm_client
        self._cloudwatch = cloudwatch_client
        self.uuid = uuid
        self.parameter = parameter
        self.settings = settings
        self.namespace = namespace
        self._clock = clock
        self._write = write

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CircuitBreaker:
        e = os.environ if env is None else env
        session = boto3.session.Session()
        return cls(
            lambda_client=session.client("lambda", config=_CLIENT_CONFIG),
            ssm_client=session.client("ssm", config=_CLIENT_CONFIG),
            cloudwatch_client=session.client("cloudwatch", config=_CLIENT_CONFIG),
            uuid=e[ENV_EVENT_SOURCE_MAPPING_UUID],
            parameter=e[ENV_BREAKER_STATE_PARAMETER],
            settings=Settings.from_env(e),
            namespace=e.get(ENV_METRICS_NAMESPACE) or DEFAULT_METRICS_NAMESPACE,
        )

    def record(self) -> Record:
        """The stored record."""
        answer = self._ssm.get_parameter(Name=self.parameter)
        return Record.from_json(answer["Parameter"]["Value"])

    def alarms_in_alarm(self) -> list[str]:
        """The chosen alarms whose state is ``ALARM`` now (``DescribeAlarms``)."""
        names = sorted(self.settings.alarms)
        found: list[str] = []
        for page in self._cloudwatch.get_paginator("describe_alarms").paginate(AlarmNames=names):
            found += [
                a["AlarmName"]
                for a in page.get("MetricAlarms", [])
                if a.get("StateValue") == "ALARM"
            ]
        return found

    def handle(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Run one step for ``event``; return what was decided (also logged).

        Raises:
            BreakerRefused, MappingBusy: see `decide`.
            botocore.exceptions.ClientError: a call failed (the next run starts from the
                stored record again).
        """
        before = self.record()
        now = self._clock()
        mapping = MappingView.of(self._lambda.get_event_source_mapping(UUID=self.uuid))
        decision = decide(
            before,
            mapping,
            now=now,
            settings=self.settings,
            alarm=alarm_change(event),
            alarms_in_alarm=self.alarms_in_alarm,
        )
        if decision.enable is not None:
            answer = self._lambda.update_event_source_mapping(
                UUID=self.uuid, Enabled=decision.enable
            )
            mapping = MappingView.of(answer)
        after = decision.record
        # A closed record that keeps a pause run (after a yield) watches the mapping as well.
        watching = after.state != CLOSED or after.paused_since is not None
        seen = (mapping.state, mapping.last_modified) if watching else (None, None)
        after = replace(after, seen_state=seen[0], seen_modified=seen[1])
        if after != before:
            self._ssm.put_parameter(
                Name=self.parameter, Value=after.to_json(), Type="String", Overwrite=True
            )
        self._emit(after.state, now)
        outcome = {
            "from": before.state,
            "to": after.state,
            "enabled": decision.enable,
            "reason": decision.reason,
            "mapping": mapping.state,
            "record": asdict(after),
        }
        logger.info("circuit breaker %s", json.dumps(outcome), extra={"breaker": outcome})
        return outcome

    def _emit(self, state: str, now: float) -> None:
        document = gauge_document(
            self.namespace,
            METRIC_CIRCUIT_BREAKER_STATE,
            METRIC_VALUES[state],
            unit="None",
            dimensions={DIMENSION_EVENT_SOURCE_MAPPING: self.uuid},
            timestamp_ms=int(now * 1000),
        )
        (self._write or sys.stdout.write)(json.dumps(document, separators=(",", ":")) + "\n")


_breaker: CircuitBreaker | None = None


def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """EventBridge entry point (alarm changes and the schedule): `CircuitBreaker.handle`.

    Raises:
        KeyError, ValueError: a ``SESSION_EXPIRY_*`` variable is missing or malformed.
    """
    global _breaker
    if _breaker is None:
        _breaker = CircuitBreaker.from_env()
    return _breaker.handle(event)
