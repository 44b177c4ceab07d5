"""Sub-minute expiry sweeper (issue 15): the per-minute schedule, the single-run guarantee, the
interval in the environment; the interval's accepted values and the rejected ones.

One stack (synthesized once) holds ``Five`` (5 s), ``Thirty`` (30 s, with dry run) and
``Minute`` (1 minute: as before, no sub-minute settings).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, Stack, assertions
from cdk_nag import AwsSolutionsChecks

from cdk_session_expiry import SessionExpiry, sweeper
from cdk_session_expiry import _runtime_contract as contract

from .helpers import StackTemplate, resources_of

ENV = Environment(account="123456789012", region="eu-west-1")


class Synth(StackTemplate):
    def __init__(self, outdir: Path, cdk_context: dict[str, Any]) -> None:
        app = App(context=cdk_context, outdir=str(outdir))
        self.stack = stack = Stack(app, "SubMinute", env=ENV)
        self.five = SessionExpiry(stack, "Five", expiry_sweep_interval=Duration.seconds(5))
        self.thirty = SessionExpiry(
            stack, "Thirty", expiry_sweep_interval=Duration.seconds(30), cleanup_dry_run=True
        )
        self.minute = SessionExpiry(stack, "Minute", expiry_sweep_interval=Duration.minutes(1))
        self.template = assertions.Template.from_stack(stack)
        self.json: dict[str, Any] = self.template.to_json()

    def invoke_config(self, function: Any) -> dict[str, Any]:
        (config,) = [
            r["Properties"]
            for r in resources_of(self.json, "AWS::Lambda::EventInvokeConfig").values()
            if r["Properties"]["FunctionName"] == {"Ref": self.id(function)}
        ]
        return config


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any]) -> Synth:
    return Synth(tmp_path_factory.mktemp("sub_minute"), cdk_context)


def test_a_sub_minute_interval_runs_every_minute(synth: Synth) -> None:
    for construct in (synth.five, synth.thirty):
        sw = construct.expiry_sweeper
        assert sw is not None and sw.sub_minute
        assert synth.props(sw.schedule)["ScheduleExpression"] == "rate(1 minute)"


def test_one_run_per_worker_at_a_time_is_enforced_by_lambda(synth: Synth) -> None:
    sw = synth.five.expiry_sweeper
    assert sw is not None
    props = synth.props(sw.function)
    assert props["ReservedConcurrentExecutions"] == sw.workers == 4
    assert props["Timeout"] == 59  # ends before the next minute's run is started
    assert synth.invoke_config(sw.function) == {
        "FunctionName": {"Ref": synth.id(sw.function)},
        "Qualifier": "$LATEST",
        "MaximumEventAgeInSeconds": 60,
        "MaximumRetryAttempts": 0,
    }


def test_the_interval_and_time_guard_are_in_the_sweeper_environment_only(synth: Synth) -> None:
    for construct, seconds in ((synth.five, "5"), (synth.thirty, "30")):
        sw = construct.expiry_sweeper
        assert sw is not None
        variables = synth.props(sw.function)["Environment"]["Variables"]
        assert variables[contract.ENV_SWEEP_INTERVAL_SECONDS] == seconds
        assert variables[contract.ENV_TIME_GUARD_MS] == "3500"
        assert variables[contract.ENV_SWEEP_SHARD_ATTRIBUTE] == "expiryShard"
        # The session runtime writes the shard attribute but never runs passes.
        assert contract.ENV_SWEEP_INTERVAL_SECONDS not in construct.session_environment()
        cleanup = synth.props(construct.cleanup_function)["Environment"]["Variables"]
        assert contract.ENV_SWEEP_INTERVAL_SECONDS not in cleanup
    thirty = synth.thirty.expiry_sweeper
    assert thirty is not None
    assert synth.props(thirty.function)["Environment"]["Variables"][contract.ENV_DRY_RUN] == "true"


def test_one_minute_and_up_is_unchanged(synth: Synth) -> None:
    sw = synth.minute.expiry_sweeper
    assert sw is not None and not sw.sub_minute
    props = synth.props(sw.function)
    assert props["Timeout"] == 60
    assert "ReservedConcurrentExecutions" not in props
    assert contract.ENV_SWEEP_INTERVAL_SECONDS not in props["Environment"]["Variables"]
    assert contract.ENV_TIME_GUARD_MS not in props["Environment"]["Variables"]
    assert "MaximumEventAgeInSeconds" not in synth.invoke_config(sw.function)
    assert synth.props(sw.schedule)["ScheduleExpression"] == "rate(1 minute)"


def test_construct_paths_are_those_of_a_minute_sweeper(synth: Synth) -> None:
    """Switching an existing sweeper between 1 minute and 5 s keeps its resources (same ids)."""
    five, minute = synth.five.expiry_sweeper, synth.minute.expiry_sweeper
    assert five is not None and minute is not None
    for a, b in ((five.function, minute.function), (five.schedule, minute.schedule)):
        assert a.node.path.replace("/Five/", "/X/") == b.node.path.replace("/Minute/", "/X/")


@pytest.fixture
def stack() -> Stack:
    return Stack(App(), "Validation", env=ENV)


@pytest.mark.parametrize("seconds", sweeper.SUB_MINUTE_INTERVALS_SECONDS)
def test_every_divisor_of_the_minute_is_accepted(seconds: int) -> None:
    sweeper.check_sweep_interval(Duration.seconds(seconds))
    sweeper.check_sub_minute_run(
        seconds,
        timeout=sweeper.SUB_MINUTE_TIMEOUT,
        time_guard_ms=sweeper.SUB_MINUTE_TIME_GUARD_MS,
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (Duration.seconds(4), "4 seconds: expected between 5 seconds and 1 day"),
        (Duration.seconds(0), "0 seconds: expected between 5 seconds and 1 day"),
        (Duration.millis(7500), "7 seconds 500 millis: expected a whole number of seconds"),
        (Duration.millis(5001), "5 seconds 1 milli: expected a whole number of seconds"),
        (Duration.seconds(7), "7 seconds: below one minute expected a divisor of 60 seconds"),
        (Duration.seconds(45), "45 seconds: below one minute expected a divisor of 60 seconds"),
        (Duration.seconds(59), "59 seconds: below one minute expected a divisor of 60 seconds"),
        (
            Duration.seconds(90),
            "1 minute 30 seconds: from one minute up expected a whole number of minutes",
        ),
        (Duration.days(2), "2 days: expected between 5 seconds and 1 day"),
    ],
)
def test_fails_expiry_sweep_interval(stack: Stack, value: Duration, shown: str) -> None:
    with pytest.raises(ValueError, match=f"expiry_sweep_interval={shown}"):
        SessionExpiry(stack, "Sessions", expiry_sweep_interval=value)


def test_fails_sub_minute_run_whose_timeout_is_too_short() -> None:
    with pytest.raises(
        ValueError,
        match=r"sweeper timeout 50 seconds with a 3500 ms time guard: too short for an interval "
        r"of 5 seconds, whose last pass starts 55 seconds into the run; expected more than 58.5",
    ):
        sweeper.check_sub_minute_run(5, timeout=Duration.seconds(50), time_guard_ms=3_500)


def test_fails_sub_minute_run_whose_timeout_reaches_the_next_run() -> None:
    with pytest.raises(ValueError, match="sweeper timeout 1 minute: expected less than one minute"):
        sweeper.check_sub_minute_run(5, timeout=Duration.minutes(1), time_guard_ms=3_500)


def test_fails_sub_minute_run_whose_time_guard_eats_the_last_slot() -> None:
    with pytest.raises(ValueError, match="with a 5000 ms time guard: too short"):
        sweeper.check_sub_minute_run(5, timeout=Duration.seconds(59), time_guard_ms=5_000)


def test_no_new_cdk_nag_finding() -> None:
    def findings(interval: Duration) -> set[tuple[str, str]]:
        app = App()
        stack = Stack(app, "Nag", env=ENV)
        SessionExpiry(stack, "Sessions", expiry_sweep_interval=interval)
        report = AwsSolutionsChecks().validate_scope(stack)
        return {
            (r.construct_path, v.rule_name)
            for v in report.violations
            for r in v.violating_resources
        }

    assert findings(Duration.seconds(5)) == findings(Duration.minutes(5))
