"""The pause watch counts a circuit breaker's pause from its first opening (review of issue 21).

Each failed probe disables the mapping again, which moves its ``LastModified``; counted from
``LastModified`` alone, a breaker whose every probe fails would never reach the paused-cleanup
alarm's 12 hours while the stream's 24 hours run out. The breaker keeps its first opening
(``pausedSince``) in its record, and the pause watch counts from the earlier of the two.

moto's mapping, alarms and SSM parameter, the real breaker and the real pause watch
(``test_circuit_breaker``'s world). moto stamps ``LastModified`` with its own clock: here it is
moved with the breaker's injected clock (only ``moto.awslambda.models.utcnow``), so each
``UpdateEventSourceMapping`` is stamped at the simulated time it is made.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import moto.awslambda.models as lambda_models
import pytest
from runtime_support import SESSION, Sandbox
from session_expiry_runtime.core import config
from session_expiry_runtime.ops import kill_switch
from session_expiry_runtime.switches import pause_watch
from session_expiry_runtime.switches.circuit_breaker import CLOSED, HALF_OPEN, OPEN
from test_circuit_breaker import COOL_DOWN, ERRORS, PARAMETER, PROBE, World, alarm_event, build

#: ``alarm_cleanup_paused_after``'s default.
PAUSED_AFTER_SECONDS = 12 * 3600


@pytest.fixture
def world(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> World:
    world = build(sandbox)
    monkeypatch.setattr(
        lambda_models,
        "utcnow",
        lambda: datetime.fromtimestamp(world.now[0], timezone.utc).replace(tzinfo=None),
    )
    return world


def _at(world: World) -> datetime:
    return datetime.fromtimestamp(world.now[0], timezone.utc)


def _watch(world: World, *, with_breaker: bool = True) -> tuple[dict[str, Any], int]:
    """One run of the pause watch at the world's time; what it found and the metric it wrote."""
    lines: list[str] = []
    found = pause_watch.watch(
        SESSION.client("lambda"),
        world.uuid,
        namespace="SessionExpiry",
        now=_at(world),
        write=lines.append,
        breaker=(lambda: pause_watch.read_breaker(SESSION.client("ssm"), PARAMETER))
        if with_breaker
        else None,
    )
    (line,) = lines
    return found, json.loads(line)[config.METRIC_CLEANUP_PAUSED_SECONDS]


def _fail_a_probe(world: World) -> None:
    world.set_alarm(ERRORS, "OK")  # no invocations while paused: the errors alarm clears
    assert world.tick(after=COOL_DOWN)["enabled"] is True  # the probe
    world.set_alarm(ERRORS, "ALARM")  # the cleanup still fails as a whole
    assert world.run(alarm_event(ERRORS), after=120)["to"] == OPEN


def test_a_13_hour_pause_behind_failed_probes_reaches_the_paused_alarm(world: World) -> None:
    started = world.now[0]
    world.run(alarm_event(ERRORS))  # tripped
    while world.now[0] - started < 13 * 3600:
        _fail_a_probe(world)
    assert world.record().failed_probes > 40  # open all along but for 2-minute probes
    assert world.record().paused_since == started

    found, metric = _watch(world)

    assert found["pausedSeconds"] == metric == int(world.now[0] - started) > PAUSED_AFTER_SECONDS
    first = datetime.fromtimestamp(started, timezone.utc)
    assert found["pausedSince"] == first.isoformat() and found["breaker"] == OPEN
    assert found["streamRetentionDeadline"] == (first + timedelta(hours=24)).isoformat()
    # The mapping's own LastModified is the last failed probe's: counted from it alone, the
    # value stays under cool-down + probe (the silence the review found).
    assert _watch(world, with_breaker=False)[1] == 0


def test_a_probe_does_not_end_the_count_and_a_passed_probe_does(world: World) -> None:
    started = world.now[0]
    world.run(alarm_event(ERRORS))
    _fail_a_probe(world)
    world.set_alarm(ERRORS, "OK")
    assert world.tick(after=COOL_DOWN)["to"] == HALF_OPEN  # probing: the mapping is enabled
    assert world.mapping()["State"] == "Enabled"

    found, metric = _watch(world)
    assert found["breaker"] == HALF_OPEN and metric == int(world.now[0] - started)

    assert world.tick(after=PROBE)["to"] == CLOSED  # the probe passed: the run ends
    assert world.record().paused_since is None
    found, metric = _watch(world)
    assert metric == 0 and found["pausedSince"] is None and found["breaker"] == CLOSED


def test_a_mapping_someone_else_resumed_is_not_counted_from_the_breakers_record(
    world: World,
) -> None:
    world.run(alarm_event(ERRORS))
    _fail_a_probe(world)
    # The kill switch resumes it; the breaker (still OPEN in its record) has not run since.
    world.now[0] += 60
    SESSION.client("lambda").update_event_source_mapping(UUID=world.uuid, Enabled=True)
    assert world.record().state == OPEN

    found, metric = _watch(world)

    assert metric == 0 and found["pausedSince"] is None


def test_an_open_record_from_before_paused_since_counts_from_its_opening(world: World) -> None:
    # A breaker record written by an earlier version (no pausedSince) that then fails a probe.
    world.run(alarm_event(ERRORS))
    opened = world.record()
    legacy = json.loads(opened.to_json())
    del legacy["pausedSince"]
    SESSION.client("ssm").put_parameter(
        Name=PARAMETER, Value=json.dumps(legacy), Type="String", Overwrite=True
    )
    assert world.record().paused_since is None

    _fail_a_probe(world)

    assert world.record().paused_since == opened.since


def test_the_handler_reads_the_breakers_record_named_by_the_environment(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started = world.now[0]
    world.run(alarm_event(ERRORS))
    _fail_a_probe(world)
    monkeypatch.setenv(config.ENV_EVENT_SOURCE_MAPPING_UUID, world.uuid)
    monkeypatch.setenv(config.ENV_BREAKER_STATE_PARAMETER, PARAMETER)
    monkeypatch.setattr(
        pause_watch, "_clients", {"lambda": SESSION.client("lambda"), "ssm": SESSION.client("ssm")}
    )
    monkeypatch.setattr(pause_watch, "datetime", _FrozenAt(_at(world)))

    found = pause_watch.handler({"detail-type": "Scheduled Event"}, None)

    assert found["pausedSeconds"] == int(world.now[0] - started) > COOL_DOWN
    document = json.loads(capsys.readouterr().out)
    assert document[config.METRIC_CLEANUP_PAUSED_SECONDS] == found["pausedSeconds"]


def test_fails_when_the_breakers_record_cannot_be_read(world: World) -> None:
    # A watch that cannot read the breaker's record writes nothing and raises (errors alarm;
    # the paused-cleanup alarm treats the missing value as breaching).
    world.run(alarm_event(ERRORS))
    lines: list[str] = []
    ssm = SESSION.client("ssm")
    with pytest.raises(ssm.exceptions.ParameterNotFound):
        pause_watch.watch(
            SESSION.client("lambda"),
            world.uuid,
            namespace="SessionExpiry",
            now=_at(world),
            write=lines.append,
            breaker=lambda: pause_watch.read_breaker(ssm, "/no/such/parameter"),
        )
    assert lines == []


class _FrozenAt:
    """``datetime`` for the handler's ``datetime.now``: the world's time (the rest as is)."""

    def __init__(self, at: datetime) -> None:
        self._at = at

    def now(self, tz: Any = None) -> datetime:
        return self._at

    def __getattr__(self, name: str) -> Any:
        return getattr(datetime, name)


def _kill_switch(world: World, action: str, *, after: float = 60) -> dict[str, Any]:
    """The operator's ``kill_switch disable|enable`` at the world's time (moto settles at once)."""
    world.now[0] += after
    settled, state = kill_switch.switch(
        SESSION.client("lambda"), world.uuid, action, sleep=lambda _: None
    )
    assert settled
    return state


def test_a_kill_switch_disable_over_an_open_breaker_keeps_the_pause_from_its_first_opening(
    world: World,
) -> None:
    """The breaker has held the cleanup paused for 11 hours (every probe failed); the operator
    pulls the kill switch too. Its ``disable`` moves the mapping's ``LastModified``, and the
    breaker yields to it (closes) — but the stream's clock did not stop. Before, the pause
    watch then counted from the kill switch's update: from 11 hours to 0, so the paused-cleanup
    alarm came 11 hours late, after the records written at the first opening had left the
    stream. The count now goes on from the breaker's first opening while the mapping stays
    paused as the operator left it."""
    started = world.now[0]
    world.run(alarm_event(ERRORS))  # tripped
    while world.now[0] - started < 11 * 3600:
        _fail_a_probe(world)

    _kill_switch(world, "disable")
    found, metric = _watch(world)  # the breaker has not run since: still OPEN in its record
    assert found["breaker"] == OPEN and metric == int(world.now[0] - started)

    assert world.tick(after=300)["to"] == CLOSED  # it yields to the operator's pause...
    assert world.mapping()["State"] == "Disabled"  # ...and leaves the mapping as it is
    world.now[0] = started + 13 * 3600
    world.tick(after=0)  # a later scheduled run keeps the pause run while nothing moved
    found, metric = _watch(world)

    assert metric == found["pausedSeconds"] == 13 * 3600 > PAUSED_AFTER_SECONDS
    first = datetime.fromtimestamp(started, timezone.utc)
    assert found["pausedSince"] == first.isoformat()
    assert found["streamRetentionDeadline"] == (first + timedelta(hours=24)).isoformat()


def test_after_the_yield_a_resume_ends_the_breakers_pause_run(world: World) -> None:
    """Kept after a yield, the breaker's first opening must not outlive the pause it belongs
    to: once the operator resumes the cleanup, a later ``disable`` counts from itself."""
    world.run(alarm_event(ERRORS))
    _fail_a_probe(world)
    _kill_switch(world, "disable")
    assert world.tick(after=300)["to"] == CLOSED

    _kill_switch(world, "enable")
    assert _watch(world)[1] == 0
    world.tick(after=300)  # the breaker sees the resumed mapping: the run is over
    assert world.record().paused_since is None
    disabled = _kill_switch(world, "disable", after=3600)
    found, metric = _watch(world)

    assert found["pausedSince"] == disabled["pausedSince"] and metric == 0


def test_a_resume_and_disable_between_two_breaker_runs_ends_the_pause_run(world: World) -> None:
    world.run(alarm_event(ERRORS))
    _fail_a_probe(world)
    _kill_switch(world, "disable")
    assert world.tick(after=300)["to"] == CLOSED

    _kill_switch(world, "enable")
    disabled = _kill_switch(world, "disable", after=120)  # before the breaker runs again
    found, metric = _watch(world)

    assert found["pausedSince"] == disabled["pausedSince"] and metric == 0
    world.tick(after=60)
    assert world.record().paused_since is None
