"""The pause watch (issue 21): how long the cleanup's event source mapping has been disabled, from
moto's mapping (``GetEventSourceMapping`` ``State``/``LastModified``) and an injected clock, as
one EMF line; and the kill switch's deadlines from the same values."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from runtime_support import SESSION, Sandbox
from session_expiry_runtime.core import config
from session_expiry_runtime.ops import kill_switch
from session_expiry_runtime.switches import pause_watch


def make_mapping(stream_arn: str, **settings: Any) -> dict[str, Any]:
    """A cleanup function (never run) and its DynamoDB stream mapping in moto."""
    role = SESSION.client("iam").create_role(RoleName="cleanup", AssumeRolePolicyDocument="{}")
    functions = SESSION.client("lambda")
    functions.create_function(
        FunctionName="cleanup",
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler="session_expiry_runtime.handler.handler",
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
    )
    return functions.create_event_source_mapping(  # type: ignore[no-any-return]
        EventSourceArn=stream_arn,
        FunctionName="cleanup",
        StartingPosition=settings.pop("StartingPosition", "TRIM_HORIZON"),
        **settings,
    )


@pytest.fixture
def mapping(sandbox: Sandbox) -> dict[str, Any]:
    return make_mapping(sandbox.stream_arn, MaximumRecordAgeInSeconds=6 * 3600)


def _watch(uuid: str, now: datetime) -> tuple[dict[str, Any], dict[str, Any]]:
    lines: list[str] = []
    found = pause_watch.watch(
        SESSION.client("lambda"), uuid, namespace="SessionExpiry", now=now, write=lines.append
    )
    (line,) = lines
    return found, json.loads(line)


def test_an_enabled_mapping_reports_zero(mapping: dict[str, Any]) -> None:
    now = datetime.now(timezone.utc) + timedelta(hours=30)

    found, document = _watch(mapping["UUID"], now)

    assert found["pausedSeconds"] == 0 and found["pausedSince"] is None
    assert document[config.METRIC_CLEANUP_PAUSED_SECONDS] == 0


def test_a_mapping_disabled_13_hours_ago_reports_13_hours_as_emf(mapping: dict[str, Any]) -> None:
    functions = SESSION.client("lambda")
    functions.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)
    paused = functions.get_event_source_mapping(UUID=mapping["UUID"])
    since = paused["LastModified"].astimezone(timezone.utc)

    found, document = _watch(mapping["UUID"], since + timedelta(hours=13))

    assert found["pausedSeconds"] == 13 * 3600
    assert document[config.METRIC_CLEANUP_PAUSED_SECONDS] == 13 * 3600
    assert document[config.DIMENSION_EVENT_SOURCE_MAPPING] == mapping["UUID"]
    (directive,) = document["_aws"]["CloudWatchMetrics"]
    assert directive == {
        "Namespace": "SessionExpiry",
        "Dimensions": [[config.DIMENSION_EVENT_SOURCE_MAPPING]],
        "Metrics": [{"Name": config.METRIC_CLEANUP_PAUSED_SECONDS, "Unit": "Seconds"}],
    }
    assert found["streamRetentionDeadline"] == (since + timedelta(hours=24)).isoformat()
    assert found["maxRecordAgeDeadline"] == (since + timedelta(hours=6)).isoformat()


def test_the_handler_reads_its_mapping_from_the_environment(
    mapping: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(config.ENV_EVENT_SOURCE_MAPPING_UUID, mapping["UUID"])
    monkeypatch.setenv(config.ENV_METRICS_NAMESPACE, "Custom")
    monkeypatch.setattr(pause_watch, "_clients", {"lambda": SESSION.client("lambda")})

    found = pause_watch.handler({"detail-type": "Scheduled Event"}, None)

    assert found["state"] == "Enabled"
    document = json.loads(capsys.readouterr().out)
    assert document["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Custom"


def test_fails_when_the_mapping_cannot_be_read(sandbox: Sandbox) -> None:
    # A watch that cannot see the mapping raises (errors alarm) instead of reporting 0.
    with pytest.raises(SESSION.client("lambda").exceptions.ResourceNotFoundException):
        _watch("00000000-0000-0000-0000-000000000000", datetime.now(timezone.utc))


@pytest.mark.parametrize(
    ("state", "age", "expected"),
    [
        ("Disabling", 3600, 3600),
        ("Disabled", 60, 60),
        ("Enabled", 3600, 0),
        ("Enabling", 3600, 0),
        ("Updating", 3600, 0),
    ],
)
def test_paused_seconds_counts_only_disabled_states(state: str, age: int, expected: int) -> None:
    now = datetime(2026, 1, 2, tzinfo=timezone.utc)
    mapping = {"State": state, "LastModified": now - timedelta(seconds=age)}
    assert pause_watch.paused_seconds(mapping, now) == expected


def test_an_unlimited_record_age_has_no_on_failure_deadline() -> None:
    since = datetime(2026, 1, 1, tzinfo=timezone.utc)
    found = pause_watch.deadlines(
        {"State": "Disabled", "LastModified": since, "MaximumRecordAgeInSeconds": -1}
    )
    assert found == {
        "pausedSince": "2026-01-01T00:00:00+00:00",
        "streamRetentionDeadline": "2026-01-02T00:00:00+00:00",
        "maxRecordAgeDeadline": None,
        "maximumRecordAgeSeconds": -1,
    }


def test_the_kill_switch_names_both_deadlines(
    mapping: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    status = kill_switch.main(["disable", "--uuid", mapping["UUID"]], session=SESSION)

    captured = capsys.readouterr()
    line = json.loads(captured.out)
    since = datetime.fromisoformat(line["pausedSince"])
    assert status == 0 and line["state"] == "Disabled"
    assert line["streamRetentionDeadline"] == (since + timedelta(hours=24)).isoformat()
    assert line["maxRecordAgeDeadline"] == (since + timedelta(hours=6)).isoformat()
    assert line["maximumRecordAgeSeconds"] == 6 * 3600
    assert f"leave the stream at {line['streamRetentionDeadline']}" in captured.err
    assert f"resumed after {line['maxRecordAgeDeadline']}" in captured.err
    assert "on-failure destination" in captured.err

    status = kill_switch.main(["status", "--uuid", mapping["UUID"]], session=SESSION)
    assert (
        json.loads(capsys.readouterr().out)["streamRetentionDeadline"]
        == line["streamRetentionDeadline"]
    )

    status = kill_switch.main(["enable", "--uuid", mapping["UUID"]], session=SESSION)
    captured = capsys.readouterr()
    resumed = json.loads(captured.out)
    assert resumed["streamRetentionDeadline"] is None and resumed["maxRecordAgeDeadline"] is None
    assert captured.err == ""
