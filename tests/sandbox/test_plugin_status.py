"""The status command (issue 39) against the emulator, in each state it reports: a small app with
the circuit breaker and feature flags (``status_app``) deployed with the real CDK CLI through the
pytest plugin, its levers pulled as an operator or the deployed breaker pulls them — running,
the mapping disabled (the kill switch), the breaker open (its deployed function run on an alarm's
change to ``ALARM``), a step flag off and ``enabled`` off (``flags set``), paused past the
stream's 24 hours — and the JSON object's keys. ``tests/runtime/test_status.py`` covers the same
states against a hand-built stack in moto.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from session_expiry_runtime.ops import status
from session_expiry_runtime.switches.circuit_breaker import OPEN, Record

from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.testing import LocalPipeline

pytestmark = pytest.mark.slow

APP = Path(__file__).resolve().parent / "status_app"


@pytest.fixture(scope="module")
def session_expiry_app_dir() -> Path:
    return APP


class _EmulatorSession:
    """``client(service, **kwargs)`` bound to the emulator, as a boto3 session has it."""

    def __init__(self, pipeline: LocalPipeline) -> None:
        self.pipeline = pipeline

    def client(self, service: str, **kwargs: object) -> object:
        return self.pipeline.emulator.client(service, **kwargs)


def _status(
    p: LocalPipeline, capsys: pytest.CaptureFixture[str], *, human: bool = False
) -> tuple[int, Any]:
    """``session-expiry status --stack <stack> [--json]`` against the emulator: exit code and
    the JSON object (or the human view's text)."""
    capsys.readouterr()
    argv = ["--stack", p.stack.name, *([] if human else ["--json"])]
    code = status.main(argv, session=_EmulatorSession(p))
    out = capsys.readouterr().out
    return code, out if human else json.loads(out)


def _breaker(p: LocalPipeline) -> Any:
    return p.local_function(contract.CIRCUIT_BREAKER_HANDLER)


def _breaker_parameter(p: LocalPipeline) -> str:
    return str(p.stack.outputs[_output_key(p, "CircuitBreakerStateParameterName")])


def _output_key(p: LocalPipeline, output_id: str) -> str:
    (key,) = [k for k in p.stack.outputs if k.startswith(f"Sessions{output_id}")]
    return key


@pytest.fixture
def breaker_reset(session_expiry_pipeline: LocalPipeline) -> Iterator[None]:
    """Whatever a test does to the breaker and the mapping is undone after it: the breaker's
    record closed as deployed, the mapping enabled."""
    p = session_expiry_pipeline
    ssm = p.emulator.client("ssm")
    deployed = ssm.get_parameter(Name=_breaker_parameter(p))["Parameter"]["Value"]
    yield
    ssm.put_parameter(Name=_breaker_parameter(p), Value=deployed, Type="String", Overwrite=True)
    p.resume_cleanup()


def test_a_running_cleanup_is_healthy(
    session_expiry_pipeline: LocalPipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    p = session_expiry_pipeline

    code, answer = _status(p, capsys)

    assert code == status.EXIT_HEALTHY, answer["reasons"]
    assert answer["verdict"] == "healthy" and answer["reasons"] == []
    assert answer["unreadable"] == {}
    assert answer["cleanupFunction"] == p.function.name
    assert answer["mapping"]["enabled"] is True and answer["mapping"]["state"] == "Enabled"
    assert answer["circuitBreaker"]["state"] == "CLOSED"
    assert answer["featureFlags"]["flags"] == {
        "enabled": True,
        "dryRun": False,
        "DeleteScratch": True,
    }
    assert answer["pause"]["pausedSince"] is None
    assert answer["failureQueue"]["messages"] == 0
    assert answer["deferredWork"]["items"] == 0
    assert sorted(answer) == sorted(status.JSON_SCHEMA) and answer["schemaVersion"] == 1


def test_a_disabled_mapping_is_paused_with_its_deadlines(
    session_expiry_pipeline: LocalPipeline,
    capsys: pytest.CaptureFixture[str],
    breaker_reset: None,
) -> None:
    p = session_expiry_pipeline
    p.pause_cleanup()  # the kill switch's disable

    code, answer = _status(p, capsys)
    human_code, text = _status(p, capsys, human=True)

    assert code == human_code == status.EXIT_PAUSED and answer["verdict"] == "paused"
    assert answer["mapping"]["state"] == "Disabled" and answer["mapping"]["enabled"] is False
    since = datetime.fromisoformat(answer["pause"]["pausedSince"])
    retention = datetime.fromisoformat(answer["pause"]["streamRetentionDeadline"])
    assert retention - since == timedelta(hours=24)
    assert "event source mapping is Disabled" in answer["reasons"][0]
    assert "PAUSED (exit 3)" in text and "records start to age out at" in text

    p.resume_cleanup()
    assert _status(p, capsys)[0] == status.EXIT_HEALTHY


def test_an_open_breaker_is_paused_and_past_the_stream_retention_says_so(
    session_expiry_pipeline: LocalPipeline,
    capsys: pytest.CaptureFixture[str],
    breaker_reset: None,
) -> None:
    p = session_expiry_pipeline
    breaker = _breaker(p)
    (alarm, *_) = json.loads(breaker.function.environment[contract.ENV_BREAKER_ALARMS])
    change = {
        "detail-type": "CloudWatch Alarm State Change",
        "source": "aws.cloudwatch",
        "detail": {"alarmName": alarm, "state": {"value": "ALARM"}},
    }

    opened = breaker.invoke(change)  # the deployed breaker trips: mapping disabled, record OPEN

    assert (opened["from"], opened["to"], opened["enabled"]) == ("CLOSED", "OPEN", False)
    code, answer = _status(p, capsys)
    assert code == status.EXIT_PAUSED
    assert answer["circuitBreaker"]["state"] == "OPEN"
    assert answer["mapping"]["enabled"] is False
    # Paused since the opening: the mapping's LastModified (whole seconds) or the breaker's
    # record (fractions), whichever is earlier; the two are the same moment here.
    paused = datetime.fromisoformat(answer["pause"]["pausedSince"])
    opened_at = datetime.fromisoformat(answer["circuitBreaker"]["pausedSince"])
    assert abs((paused - opened_at).total_seconds()) < 1
    assert any("circuit breaker is OPEN" in r for r in answer["reasons"])
    retention = datetime.fromisoformat(answer["pause"]["streamRetentionDeadline"])
    assert retention > datetime.now(timezone.utc)

    # 30 hours on (the breaker's record is the clock the status reads a breaker's pause from):
    # the records written since the first opening have started to leave the stream.
    ssm = p.emulator.client("ssm")
    stored = Record.from_json(ssm.get_parameter(Name=_breaker_parameter(p))["Parameter"]["Value"])
    assert stored.state == OPEN
    earlier = Record(
        state=OPEN,
        since=stored.since,
        reason=stored.reason,
        failed_probes=stored.failed_probes,
        seen_state=stored.seen_state,
        seen_modified=stored.seen_modified,
        paused_since=time.time() - 30 * 3600,
    )
    ssm.put_parameter(
        Name=_breaker_parameter(p), Value=earlier.to_json(), Type="String", Overwrite=True
    )

    code, answer = _status(p, capsys)

    assert code == status.EXIT_PAUSED
    retention = datetime.fromisoformat(answer["pause"]["streamRetentionDeadline"])
    assert retention < datetime.now(timezone.utc)  # records already age out
    assert answer["pause"]["pausedSeconds"] >= 30 * 3600 - 5
    assert answer["pause"]["pausedSince"] == answer["circuitBreaker"]["pausedSince"]


def test_a_step_flag_off_needs_attention_and_enabled_off_is_paused(
    session_expiry_pipeline: LocalPipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    p = session_expiry_pipeline
    step = "DeleteScratch"  # the app's one step (its scratch bucket)
    try:
        p.set_feature_flags(**{step: False})
        code, answer = _status(p, capsys)
        assert code == status.EXIT_ATTENTION and answer["verdict"] == "attention"
        assert answer["featureFlags"]["flags"][step] is False
        assert answer["reasons"] == [f"step flags off: {step}"]

        p.set_feature_flags(**{step: True, "enabled": False})
        code, answer = _status(p, capsys)
        assert code == status.EXIT_PAUSED
        assert answer["reasons"] == ["the feature flag enabled is off: every record is deferred"]
    finally:
        p.set_feature_flags(**{step: True, "enabled": True})
    assert _status(p, capsys)[0] == status.EXIT_HEALTHY
