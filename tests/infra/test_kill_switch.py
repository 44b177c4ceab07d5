"""Kill switch (issue 6): ``cleanup_enabled`` sets the event source mapping's ``Enabled``;
``cleanup_dry_run`` sets ``SESSION_EXPIRY_DRY_RUN`` on the cleanup (and the sweeper)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, Stack, assertions

from cdk_session_expiry import SessionExpiry
from cdk_session_expiry import _runtime_contract as contract

from .helpers import StackTemplate

ENV = Environment(account="123456789012", region="eu-west-1")


class Synth(StackTemplate):
    def __init__(self, outdir: Path, cdk_context: dict[str, Any]) -> None:
        app = App(context=cdk_context, outdir=str(outdir))
        self.stack = stack = Stack(app, "KillSwitch", env=ENV)
        self.default = SessionExpiry(stack, "Default")
        self.paused = SessionExpiry(stack, "Paused", cleanup_enabled=False)
        self.dry = SessionExpiry(
            stack, "Dry", cleanup_dry_run=True, expiry_sweep_interval=Duration.minutes(5)
        )
        self.json: dict[str, Any] = assertions.Template.from_stack(stack).to_json()


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory, cdk_context: dict[str, Any]) -> Synth:
    return Synth(tmp_path_factory.mktemp("kill-switch"), cdk_context)


def test_mapping_enabled_explicitly_by_default(synth: Synth) -> None:
    # Explicit, so that turning the switch back on is a property change CloudFormation applies.
    assert synth.props(synth.default.event_source_mapping)["Enabled"] is True


def test_cleanup_enabled_false_disables_only_the_mapping(synth: Synth) -> None:
    paused = synth.props(synth.paused.event_source_mapping)
    default = synth.props(synth.default.event_source_mapping)
    assert paused["Enabled"] is False
    # Same mapping otherwise: same starting position, filter, retries, destination shape.
    for name in (
        "StartingPosition",
        "FilterCriteria",
        "BatchSize",
        "MaximumRetryAttempts",
        "MaximumRecordAgeInSeconds",
        "BisectBatchOnFunctionError",
        "FunctionResponseTypes",
    ):
        assert paused[name] == default[name]
    assert len(synth.paused.alarms) == 7


def test_dry_run_off_by_default(synth: Synth) -> None:
    env = synth.props(synth.default.cleanup_function)["Environment"]["Variables"]
    assert contract.ENV_DRY_RUN not in env


def test_dry_run_sets_the_runtime_variable(synth: Synth) -> None:
    env = synth.props(synth.dry.cleanup_function)["Environment"]["Variables"]
    assert env[contract.ENV_DRY_RUN] == "true"
    assert synth.props(synth.dry.event_source_mapping)["Enabled"] is True
    sweeper = synth.dry.expiry_sweeper
    assert sweeper is not None
    assert synth.props(sweeper.function)["Environment"]["Variables"][contract.ENV_DRY_RUN] == "true"
    # The application's session runtime is not affected by a cleanup dry run.
    assert contract.ENV_DRY_RUN not in synth.dry.session_environment()


@pytest.mark.parametrize("prop", ["cleanup_enabled", "cleanup_dry_run"])
@pytest.mark.parametrize("value", ["false", 0, None])
def test_fails_kill_switch_not_a_bool(prop: str, value: Any) -> None:
    with pytest.raises(ValueError, match=rf"{prop}={value!r}: expected True or False"):
        SessionExpiry(Stack(App(), "Validation"), "Sessions", **{prop: value})
