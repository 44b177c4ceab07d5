"""The kill switch's ``flags`` commands (issue 26 part 1) against moto's AppConfig as the
emulator teaches it: a change is a new hosted version and a deployment the cleanup then reads;
a bad request changes nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from flags_support import Flags
from runtime_support import SESSION, Sandbox
from session_expiry_runtime.ops import kill_switch
from session_expiry_runtime.switches.feature_flags import FlagReader, FlagSource

from cdk_session_expiry.testing.models import _moto_appconfig


@pytest.fixture
def flags(sandbox: Sandbox) -> Iterator[Flags]:
    _moto_appconfig.install()
    try:
        served = Flags()
        served.deploy()
        yield served
    finally:
        _moto_appconfig.uninstall()


def cleanup_function(variables: dict[str, str]) -> None:
    """A cleanup function in moto with ``variables`` (never run here)."""
    role = SESSION.client("iam").create_role(RoleName="cleanup", AssumeRolePolicyDocument="{}")
    SESSION.client("lambda").create_function(
        FunctionName="cleanup",
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler="session_expiry_runtime.handler.handler",
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
        Environment={"Variables": variables},
    )


def with_strategy(flags: Flags) -> dict[str, str]:
    return {**flags.env_vars(), "SESSION_EXPIRY_FLAGS_DEPLOYMENT_STRATEGY": flags.strategy}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    status = kill_switch.main(["flags", *argv], session=SESSION)
    captured = capsys.readouterr()
    return status, json.loads(captured.out) if captured.out else {}, captured.err


def deployments(flags: Flags) -> int:
    return len(flags.ac.list_deployments(ApplicationId=flags.app, EnvironmentId=flags.env)["Items"])


def test_set_a_step_off_deploys_a_version_the_cleanup_reads(
    flags: Flags, capsys: pytest.CaptureFixture[str]
) -> None:
    cleanup_function(with_strategy(flags))

    status, answer, _ = run(
        capsys, "set", "DeleteScratch=off", "dryRun=on", "--function", "cleanup"
    )

    assert status == 0
    assert answer["flags"]["DeleteScratch"] is False and answer["flags"]["dryRun"] is True
    assert answer["deployment"]["State"] == "COMPLETE"
    reader = FlagReader(
        SESSION.client("appconfigdata"), FlagSource(flags.app, "live", flags.profile)
    )
    read = reader.current(metrics=None)
    assert read.disabled_steps == frozenset({"DeleteScratch"}) and read.dry_run
    status, shown, _ = run(capsys, "show", "--function", "cleanup")
    assert status == 0 and shown["flags"] == answer["flags"]


def test_set_with_explicit_identifiers(flags: Flags, capsys: pytest.CaptureFixture[str]) -> None:
    ids = ["--application", flags.app, "--environment", "live", "--profile", flags.profile]

    status, answer, _ = run(capsys, "set", "enabled=off", *ids, "--strategy", flags.strategy)

    assert status == 0 and answer["flags"]["enabled"] is False


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("Nope=off", "unknown flags \\['Nope'\\]"),
        ("DeleteScratch=maybe", "expected NAME=on or NAME=off"),
        ("DeleteScratch", "expected NAME=on or NAME=off"),
    ],
)
def test_fails_a_bad_assignment_and_changes_nothing(
    flags: Flags, capsys: pytest.CaptureFixture[str], assignment: str, message: str
) -> None:
    cleanup_function(with_strategy(flags))
    before = deployments(flags)

    status, answer, err = run(capsys, "set", assignment, "--function", "cleanup")

    assert status == 2 and answer == {}
    assert re.search(message, err), err
    assert deployments(flags) == before


def test_fails_set_without_an_assignment(flags: Flags, capsys: pytest.CaptureFixture[str]) -> None:
    cleanup_function(with_strategy(flags))
    status, _, err = run(capsys, "set", "--function", "cleanup")
    assert status == 2 and "at least one NAME=on|off" in err


def test_fails_a_function_without_feature_flags(
    flags: Flags, capsys: pytest.CaptureFixture[str]
) -> None:
    cleanup_function({})
    status, _, err = run(capsys, "show", "--function", "cleanup")
    assert status == 2 and "feature_flags=True" in err


def test_help_says_what_the_flags_do(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        kill_switch.main(["flags", "--help"])
    text = capsys.readouterr().out
    for word in ("show", "set", "enabled", "dryRun", "DeleteScratch", "full stop", "rolled back"):
        assert word in text, word
    with pytest.raises(SystemExit):
        kill_switch.main(["--help"])
    text = capsys.readouterr().out
    assert "kill_switch flags --help" in text
    # the usage names both forms, the mapping toggle and the flags
    usage = text.split("\n\n", 1)[0]
    assert "{disable,enable,status}" in usage
    assert "kill_switch flags {show,set} [NAME=on|off ...] (--function FUNCTION" in usage


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["set", "DeleteScratch=off", "DeleteScratch=on"],
            r"'DeleteScratch' is given twice \('DeleteScratch=off', 'DeleteScratch=on'\): "
            r"expected each flag once",
        ),
        (
            ["show", "DeleteScratch=off"],
            r"flags show takes no NAME=on\|off \(got \['DeleteScratch=off'\]\): "
            r"expected flags set to change a flag",
        ),
        (
            ["set", "DeleteScratch=off", "--application", "x"],
            r"--application, --environment and --profile \(got --application\) with "
            r"--function: expected one or the other",
        ),
    ],
)
def test_fails_an_ambiguous_command_and_changes_nothing(
    flags: Flags, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    cleanup_function(with_strategy(flags))
    before = deployments(flags)

    status, answer, err = run(capsys, *argv, "--function", "cleanup")

    assert status == 2 and answer == {}
    assert re.search(message, err), err
    assert deployments(flags) == before


def test_set_with_function_and_strategy_deploys_with_that_strategy(
    flags: Flags, capsys: pytest.CaptureFixture[str]
) -> None:
    cleanup_function(with_strategy(flags))
    other = flags.ac.create_deployment_strategy(
        Name="other", DeploymentDurationInMinutes=0, GrowthFactor=100, ReplicateTo="NONE"
    )["Id"]

    status, _, err = run(
        capsys, "set", "DeleteScratch=off", "--function", "cleanup", "--strategy", other
    )

    assert status == 0, err
    items = flags.ac.list_deployments(ApplicationId=flags.app, EnvironmentId=flags.env)["Items"]
    latest = max(items, key=lambda d: int(d["DeploymentNumber"]))
    number = int(latest["DeploymentNumber"])
    got = flags.ac.get_deployment(
        ApplicationId=flags.app, EnvironmentId=flags.env, DeploymentNumber=number
    )
    assert got["DeploymentStrategyId"] == other


def test_fails_an_unknown_strategy_and_deploys_nothing(
    flags: Flags, capsys: pytest.CaptureFixture[str]
) -> None:
    cleanup_function(with_strategy(flags))
    before = deployments(flags)

    status, answer, err = run(
        capsys, "set", "DeleteScratch=off", "--function", "cleanup", "--strategy", "nope"
    )

    assert status == 2 and answer == {} and "nope" in err, err
    assert deployments(flags) == before
