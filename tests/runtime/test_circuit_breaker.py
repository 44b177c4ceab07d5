"""The circuit breaker (issue 21) against moto: its record in an SSM parameter, the chosen alarms
in CloudWatch (states set with ``SetAlarmState``), the cleanup's event source mapping in Lambda.
It is driven with the events EventBridge delivers (Amazon CloudWatch User Guide, "Alarm events
and EventBridge": ``detail-type`` ``CloudWatch Alarm State Change``; the schedule's ``Scheduled
Event``) and an injected clock; moto cannot advance its own clock, so where a test needs a later
``LastModified`` it moves moto's ``utcnow`` (said at the place)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import moto.awslambda.models as lambda_models
import pytest
from runtime_support import SESSION, Sandbox
from session_expiry_runtime.core import config
from session_expiry_runtime.ops import kill_switch
from session_expiry_runtime.switches import circuit_breaker as breaker_module
from session_expiry_runtime.switches.circuit_breaker import (
    CLOSED,
    HALF_OPEN,
    OPEN,
    BreakerRefused,
    CircuitBreaker,
    Record,
    Settings,
)
from test_pause_watch import make_mapping

ERRORS = "sessions-errors"
FAILURES = "sessions-failure-queue"
ITERATOR_AGE = "sessions-iterator-age"
OTHER = "someone-elses-alarm"
PARAMETER = "/sessions/circuit-breaker"
#: What the construct deploys as the parameter's first value (tests/infra checks the template).
INITIAL = '{"state": "CLOSED"}'
COOL_DOWN = 900
PROBE = 900
SCHEDULED = {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}


def alarm_event(name: str, value: str = "ALARM") -> dict[str, Any]:
    """A ``CloudWatch Alarm State Change`` event as EventBridge delivers it (the documented
    single-metric example's shape)."""
    return {
        "version": "0",
        "id": "c4c1c1c9-6542-e61b-6ef0-8c4d36933a92",
        "detail-type": "CloudWatch Alarm State Change",
        "source": "aws.cloudwatch",
        "account": "123456789012",
        "time": "2026-01-01T00:00:00Z",
        "region": "us-east-1",
        "resources": [f"arn:aws:cloudwatch:us-east-1:123456789012:alarm:{name}"],
        "detail": {
            "alarmName": name,
            "state": {"value": value, "reason": "test", "timestamp": "2026-01-01T00:00:00Z"},
            "previousState": {"value": "OK" if value == "ALARM" else "ALARM"},
        },
    }


@dataclass
class World:
    uuid: str
    breaker: CircuitBreaker
    now: list[float]
    lines: list[str] = field(default_factory=list)

    def run(self, event: dict[str, Any], *, after: float = 0) -> dict[str, Any]:
        self.now[0] += after
        return self.breaker.handle(event)

    def tick(self, after: float) -> dict[str, Any]:
        return self.run(SCHEDULED, after=after)

    def mapping(self) -> dict[str, Any]:
        return SESSION.client("lambda").get_event_source_mapping(UUID=self.uuid)  # type: ignore[no-any-return]

    def record(self) -> Record:
        return self.breaker.record()

    def set_alarm(self, name: str, value: str) -> None:
        SESSION.client("cloudwatch").set_alarm_state(
            AlarmName=name, StateValue=value, StateReason="test"
        )

    def states(self) -> list[int]:
        return [json.loads(line)[config.METRIC_CIRCUIT_BREAKER_STATE] for line in self.lines]


def _alarms() -> None:
    cloudwatch = SESSION.client("cloudwatch")
    for name in (ERRORS, FAILURES, ITERATOR_AGE, OTHER):
        cloudwatch.put_metric_alarm(
            AlarmName=name,
            Namespace="AWS/Lambda",
            MetricName="Errors",
            Statistic="Sum",
            Period=300,
            EvaluationPeriods=1,
            Threshold=0,
            ComparisonOperator="GreaterThanThreshold",
        )
        cloudwatch.set_alarm_state(AlarmName=name, StateValue="OK", StateReason="test")


def build(sandbox: Sandbox, *, starting_position: str = "TRIM_HORIZON", **settings: Any) -> World:
    mapping = make_mapping(sandbox.stream_arn, StartingPosition=starting_position)
    _alarms()
    SESSION.client("ssm").put_parameter(Name=PARAMETER, Value=INITIAL, Type="String")
    now = [datetime.now().timestamp()]
    world = World(uuid=mapping["UUID"], breaker=None, now=now)  # type: ignore[arg-type]
    world.breaker = CircuitBreaker(
        lambda_client=SESSION.client("lambda"),
        ssm_client=SESSION.client("ssm"),
        cloudwatch_client=SESSION.client("cloudwatch"),
        uuid=mapping["UUID"],
        parameter=PARAMETER,
        settings=Settings(
            alarms=frozenset({ERRORS, FAILURES, ITERATOR_AGE}),
            closed_only=frozenset({ITERATOR_AGE}),
            cool_down_seconds=COOL_DOWN,
            probe_seconds=PROBE,
            **settings,
        ),
        clock=lambda: now[0],
        write=world.lines.append,
    )
    return world


@pytest.fixture
def world(sandbox: Sandbox) -> World:
    return build(sandbox)


def move_moto_clock_an_hour_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto stamps ``LastModified`` with its own clock in whole seconds: an update made in the
    same second as the breaker's would look unchanged. Move moto's clock (only) an hour on."""
    real = lambda_models.utcnow
    monkeypatch.setattr(lambda_models, "utcnow", lambda: real() + timedelta(hours=1))


def _open(world: World) -> None:
    world.run(alarm_event(ERRORS))
    world.set_alarm(ERRORS, "OK")  # no invocations while paused: the errors alarm clears


def test_an_alarm_opens_the_breaker_and_disables_the_mapping_in_place(world: World) -> None:
    before = world.mapping()

    outcome = world.run(alarm_event(ERRORS))

    assert outcome["to"] == OPEN and outcome["enabled"] is False
    after = world.mapping()
    assert after["State"] == "Disabled"
    # Updated, never replaced: same UUID, stream, starting position; still the one mapping.
    kept = ("UUID", "EventSourceArn", "FunctionArn", "StartingPosition", "BatchSize")
    assert {k: after[k] for k in kept} == {k: before[k] for k in kept}
    listed = SESSION.client("lambda").list_event_source_mappings()["EventSourceMappings"]
    assert [m["UUID"] for m in listed] == [world.uuid]
    record = world.record()
    assert record.state == OPEN and record.reason == f"tripped: {ERRORS} in ALARM"
    assert record.seen_state == "Disabled" and record.since == world.now[0]
    assert world.states() == [config.BREAKER_OPEN]


def test_ok_after_the_cool_down_starts_a_half_open_probe_that_closes(world: World) -> None:
    _open(world)

    assert world.tick(after=COOL_DOWN - 60)["reason"] == "open: cooling down"
    assert world.mapping()["State"] == "Disabled"

    probe = world.tick(after=60)
    assert probe["to"] == HALF_OPEN and probe["enabled"] is True
    assert world.mapping()["State"] == "Enabled"

    assert world.tick(after=PROBE - 1)["to"] == HALF_OPEN
    closed = world.tick(after=1)
    assert closed["to"] == CLOSED and closed["reason"] == "closed: the probe passed"
    assert world.mapping()["State"] == "Enabled"
    assert world.record() == Record(CLOSED, world.now[0], "closed: the probe passed")
    assert world.states() == [2, 2, 1, 1, 0]


def test_a_failing_probe_opens_again(world: World) -> None:
    _open(world)
    world.tick(after=COOL_DOWN)
    assert world.mapping()["State"] == "Enabled"

    outcome = world.run(alarm_event(ERRORS), after=120)

    assert outcome["from"] == HALF_OPEN and outcome["to"] == OPEN
    assert world.mapping()["State"] == "Disabled"
    record = world.record()
    assert record.reason == f"probe failed: {ERRORS} in ALARM" and record.failed_probes == 1
    # A new cool-down starts from the failed probe, then a second probe.
    world.set_alarm(ERRORS, "OK")
    assert world.tick(after=COOL_DOWN - 1)["to"] == OPEN
    assert world.tick(after=1)["to"] == HALF_OPEN


def test_a_probe_whose_alarm_event_went_missing_still_fails_on_the_schedule(world: World) -> None:
    _open(world)
    world.tick(after=COOL_DOWN)
    world.set_alarm(FAILURES, "ALARM")  # no event delivered

    outcome = world.tick(after=300)

    assert outcome["to"] == OPEN and world.mapping()["State"] == "Disabled"
    assert world.record().reason == f"probe failed: {FAILURES} in ALARM"


def test_no_probe_while_a_judged_alarm_stays_in_alarm(world: World) -> None:
    world.run(alarm_event(FAILURES))  # the failure queue's alarm stays in ALARM until replayed
    world.set_alarm(FAILURES, "ALARM")

    waiting = world.tick(after=COOL_DOWN * 4)

    assert waiting["to"] == OPEN and waiting["enabled"] is None
    assert waiting["reason"] == f"open: waiting for {FAILURES} to leave ALARM"
    assert world.mapping()["State"] == "Disabled"
    world.set_alarm(FAILURES, "OK")  # replayed
    assert world.tick(after=300)["to"] == HALF_OPEN


def test_iterator_age_opens_a_closed_breaker_but_never_holds_it_open(world: World) -> None:
    assert world.run(alarm_event(ITERATOR_AGE))["to"] == OPEN
    world.set_alarm(ITERATOR_AGE, "ALARM")  # rises further while paused

    assert world.tick(after=COOL_DOWN)["to"] == HALF_OPEN

    ignored = world.run(alarm_event(ITERATOR_AGE), after=60)
    assert ignored["to"] == HALF_OPEN and ignored["enabled"] is None
    assert world.tick(after=PROBE)["to"] == CLOSED


def test_an_alarm_not_chosen_changes_nothing(world: World) -> None:
    outcome = world.run(alarm_event(OTHER))

    assert outcome["to"] == CLOSED and outcome["enabled"] is None
    assert world.mapping()["State"] == "Enabled"


def test_an_ok_event_is_no_trip(world: World) -> None:
    assert world.run(alarm_event(ERRORS, "OK"))["to"] == CLOSED
    assert world.mapping()["State"] == "Enabled"


def test_the_breaker_yields_when_the_kill_switch_resumes_an_open_breaker(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    _open(world)
    assert kill_switch.main(["enable", "--uuid", world.uuid], session=SESSION) == 0
    capsys.readouterr()

    outcome = world.tick(after=60)

    assert outcome["to"] == CLOSED and outcome["enabled"] is None
    assert outcome["reason"].startswith("yielded: the mapping is Enabled")
    assert world.mapping()["State"] == "Enabled"


def test_a_kill_switch_disable_during_an_open_breaker_is_never_undone(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    world.run(alarm_event(ERRORS))  # the breaker saw the mapping Disabled at moto's real time
    world.set_alarm(ERRORS, "OK")
    move_moto_clock_an_hour_on(monkeypatch)
    # The operator pulls the switch too, on the mapping the breaker had already disabled.
    assert kill_switch.main(["disable", "--uuid", world.uuid], session=SESSION) == 0
    capsys.readouterr()

    outcome = world.tick(after=COOL_DOWN)

    assert outcome["to"] == CLOSED
    assert outcome["reason"] == "yielded: the mapping was updated since the breaker last saw it"
    assert world.mapping()["State"] == "Disabled"
    assert world.tick(after=COOL_DOWN)["enabled"] is None
    assert world.mapping()["State"] == "Disabled"


def test_an_alarm_while_someone_else_paused_the_mapping_leaves_it(world: World) -> None:
    SESSION.client("lambda").update_event_source_mapping(UUID=world.uuid, Enabled=False)

    outcome = world.run(alarm_event(ERRORS))

    assert outcome["to"] == CLOSED and outcome["enabled"] is None
    assert world.tick(after=COOL_DOWN * 2)["enabled"] is None
    assert world.mapping()["State"] == "Disabled"


def test_cleanup_enabled_false_deployed_is_never_overridden(sandbox: Sandbox) -> None:
    world = build(sandbox, may_enable=False)
    world.run(alarm_event(ERRORS))
    world.set_alarm(ERRORS, "OK")

    outcome = world.tick(after=COOL_DOWN)

    assert outcome["to"] == CLOSED and outcome["enabled"] is None
    assert outcome["reason"] == "yielded: cleanup_enabled=False is deployed"
    assert world.mapping()["State"] == "Disabled"


def test_fails_on_a_mapping_whose_starting_position_is_latest(sandbox: Sandbox) -> None:
    world = build(sandbox, starting_position="LATEST")

    with pytest.raises(BreakerRefused, match="StartingPosition is LATEST: expected TRIM_HORIZON"):
        world.run(alarm_event(ERRORS))

    assert world.mapping()["State"] == "Enabled"
    assert world.record() == Record.from_json(INITIAL)


def test_fails_on_a_record_that_is_not_the_breakers() -> None:
    with pytest.raises(ValueError, match=r"record '\{\"state\": \"AJAR\"\}': expected"):
        Record.from_json('{"state": "AJAR"}')


def test_the_record_round_trips() -> None:
    record = Record(HALF_OPEN, 1.5, "half-open", 2, "Enabled", 3.0)
    assert Record.from_json(record.to_json()) == record


def test_the_handler_reads_its_settings_from_the_environment(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    world = build(sandbox)
    env = {
        config.ENV_EVENT_SOURCE_MAPPING_UUID: world.uuid,
        config.ENV_BREAKER_STATE_PARAMETER: PARAMETER,
        config.ENV_BREAKER_ALARMS: json.dumps([ERRORS, FAILURES, ITERATOR_AGE]),
        config.ENV_BREAKER_CLOSED_ONLY_ALARMS: json.dumps([ITERATOR_AGE]),
        config.ENV_BREAKER_COOL_DOWN_SECONDS: str(COOL_DOWN),
        config.ENV_BREAKER_PROBE_SECONDS: str(PROBE),
        config.ENV_METRICS_NAMESPACE: "Custom",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(breaker_module, "_breaker", None)

    outcome = breaker_module.handler(alarm_event(ERRORS), None)

    assert outcome["to"] == OPEN and world.mapping()["State"] == "Disabled"
    document = json.loads(capsys.readouterr().out)
    assert document["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Custom"
    assert document[config.DIMENSION_EVENT_SOURCE_MAPPING] == world.uuid
    monkeypatch.setattr(breaker_module, "_breaker", None)
