"""The kill switch without a deploy (issue 12), against moto's Lambda: the cleanup's event source
mapping is disabled and re-enabled in place (same UUID, same stream, same settings)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from runtime_support import SESSION, Sandbox
from session_expiry_runtime.ops import kill_switch


@pytest.fixture
def mapping(sandbox: Sandbox) -> dict[str, Any]:
    role = SESSION.client("iam").create_role(RoleName="cleanup", AssumeRolePolicyDocument="{}")
    functions = SESSION.client("lambda")
    functions.create_function(
        FunctionName="cleanup",
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler="session_expiry_runtime.handler.handler",
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},  # an empty zip: never run here
    )
    return functions.create_event_source_mapping(  # type: ignore[no-any-return]
        EventSourceArn=sandbox.stream_arn,
        FunctionName="cleanup",
        StartingPosition="TRIM_HORIZON",
        BatchSize=100,
        MaximumRetryAttempts=10,
        BisectBatchOnFunctionError=True,
        FilterCriteria={"Filters": [{"Pattern": json.dumps({"eventName": ["REMOVE"]})}]},
    )


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    status = kill_switch.main(list(argv), session=SESSION)
    out = capsys.readouterr().out
    return status, json.loads(out) if out else {}


KEPT = ("UUID", "EventSourceArn", "FunctionArn", "StartingPosition", "BatchSize", "FilterCriteria")


def test_disable_then_enable_in_place_keeps_the_mapping(
    mapping: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    uuid = mapping["UUID"]
    functions = SESSION.client("lambda")

    status, line = _run(capsys, "disable", "--uuid", uuid)

    assert status == 0 and line["state"] == "Disabled" and line["uuid"] == uuid
    paused = functions.get_event_source_mapping(UUID=uuid)
    assert paused["State"] == "Disabled"
    assert {k: paused[k] for k in KEPT} == {k: mapping[k] for k in KEPT}  # updated, not replaced
    assert [m["UUID"] for m in functions.list_event_source_mappings()["EventSourceMappings"]] == [
        uuid
    ]

    status, line = _run(capsys, "enable", "--uuid", uuid)

    assert status == 0 and line["state"] == "Enabled"
    resumed = functions.get_event_source_mapping(UUID=uuid)
    assert {k: resumed[k] for k in KEPT} == {k: mapping[k] for k in KEPT}


def test_the_mapping_is_found_from_the_cleanup_function(
    mapping: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    status, line = _run(capsys, "disable", "--function", "cleanup")

    assert status == 0 and line["uuid"] == mapping["UUID"] and line["state"] == "Disabled"
    status, line = _run(capsys, "status", "--function", "cleanup")
    assert status == 0 and line["state"] == "Disabled"


class Settling:
    """A Lambda client whose mapping passes through ``Disabling`` (moto switches at once)."""

    def __init__(self, states: list[str]) -> None:
        self.states = states
        self.updates: list[dict[str, Any]] = []

    def update_event_source_mapping(self, **kwargs: Any) -> None:
        self.updates.append(kwargs)

    def get_event_source_mapping(self, **_: Any) -> dict[str, Any]:
        return {
            "UUID": "u",
            "State": self.states.pop(0) if len(self.states) > 1 else self.states[0],
        }


def test_waits_for_disabling_to_settle_and_reports_when_it_does_not() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    settled, state = kill_switch.switch(  # the first read: the state before the update
        Settling(["Enabled", "Disabling", "Disabling", "Disabled"]),
        "u",
        "disable",
        sleep=sleep,
        clock=lambda: now[0],
    )
    assert settled and state["state"] == "Disabled" and len(slept) == 2

    stuck = Settling(["Enabled", "Disabling"])
    settled, state = kill_switch.switch(
        stuck, "u", "disable", wait_seconds=5, sleep=sleep, clock=lambda: now[0]
    )
    assert not settled and state["state"] == "Disabling"
    assert stuck.updates == [{"UUID": "u", "Enabled": False}]


def test_fails_on_an_unknown_mapping_with_one_line(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    status = kill_switch.main(
        ["disable", "--uuid", "00000000-0000-0000-0000-000000000000"], session=SESSION
    )

    assert status == kill_switch.EXIT_COULD_NOT_RUN
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("kill_switch: ")
    assert "Traceback" not in captured.err


def test_fails_on_a_function_without_exactly_one_mapping(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    status = kill_switch.main(["disable", "--function", "nothing"], session=SESSION)

    assert status == 2
    assert "has 0 DynamoDB or Kinesis stream event source mappings" in capsys.readouterr().err


def test_help_names_the_actions_and_the_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        kill_switch.main(["--help"])

    text = capsys.readouterr().out
    assert "{disable,enable,status}" in text and "exit status" in text and "cleanup_enabled" in text


def test_help_says_what_the_stack_output_key_looks_like_and_how_to_find_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        kill_switch.main(["--help"])

    text = capsys.readouterr().out
    # Not the bare construct id: the key is the output's logical id.
    assert "<construct path>CleanupEventSourceMappingId<hash>" in text
    assert "SessionsCleanupEventSourceMappingId54B6DE77" in text
    assert (
        "aws cloudformation describe-stacks --stack-name STACK --query "
        "\"Stacks[0].Outputs[?contains(OutputKey, 'CleanupEventSourceMappingId')].OutputValue\" "
        "--output text"
    ) in text
    assert "--function" in text and "event_source_mapping_id" in text
