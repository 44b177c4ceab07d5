"""The status command (issue 39): the cleanup's whole state from the stack's outputs, against moto
with real boto3 calls — a CloudFormation stack whose outputs are keyed as the construct keys them
and whose alarms are real ``AWS::CloudWatch::Alarm`` resources, the cleanup's event source
mapping, the circuit breaker's parameter, the feature flags in AppConfig (as the emulator teaches
moto), the failure queue and the deferred-work table. Each state: running, mapping disabled,
breaker open, a flag off, paused past a deadline; the JSON schema; bad input refused before any
call; every call a Describe, Get, List or Query."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from flags_support import Flags
from ownership_support import DEFERRED_WORK_TABLE
from runtime_support import SESSION, Sandbox, aws_calls
from session_expiry_runtime.ops import status as status_cli
from session_expiry_runtime.switches.circuit_breaker import OPEN, Record

from cdk_session_expiry import outputs as construct_outputs
from cdk_session_expiry.switches import kill_switch as construct_kill_switch
from cdk_session_expiry.testing.models import _cloudformation_models, _moto_appconfig

STACK = "Sessions"
PARAMETER = "/sessions/breaker"
#: Output keys as CloudFormation keys ``SessionExpiry(stack, "Sessions")``'s outputs.
#: The runbooks' placeholder of each output (docs/operating.md, "Filling in the commands").
PLACEHOLDERS = {
    "CleanupFunctionName": "CLEANUP_FN",
    "CleanupEventSourceMappingId": "UUID",
    "TableName": "TABLE",
    "FailureQueueUrl": "URL",
    "DeferredWorkTableName": "DEFERRED_WORK_TABLE",
    "FeatureFlagsApplicationId": "APPLICATION",
    "FeatureFlagsEnvironmentId": "ENVIRONMENT",
    "FeatureFlagsProfileId": "PROFILE",
    "CircuitBreakerStateParameterName": "PARAMETER",
}
KEYS = {
    "CleanupFunctionName": "SessionsCleanupFunctionName37B1685E",
    "CleanupEventSourceMappingId": "SessionsCleanupEventSourceMappingId54B6DE77",
    "TableName": "SessionsTableName095CFFD7",
    "FailureQueueUrl": "SessionsFailureQueueUrl2B18CD00",
    "DeferredWorkTableName": "SessionsDeferredWorkTableName9A3264C2",
    "FeatureFlagsApplicationId": "SessionsFeatureFlagsApplicationId607AC88E",
    "FeatureFlagsEnvironmentId": "SessionsFeatureFlagsEnvironmentId9B421C27",
    "FeatureFlagsProfileId": "SessionsFeatureFlagsProfileIdC46DB5CB",
    "CircuitBreakerStateParameterName": "SessionsCircuitBreakerStateParameterName43916D2D",
}
ERRORS_ALARM = "Sessions-SessionsErrorsAlarm1A2B3C4D-XYZ"
RUNBOOK = "https://docs.example.com/operating/#alarm-cleanup-errors"


class Deployed:
    """The resources a deployed ``SessionExpiry`` has, in moto, and its stack's outputs."""

    def __init__(self, sandbox: Sandbox, *, flags: Flags | None, breaker: bool) -> None:
        self.sandbox = sandbox
        self.flags = flags
        role = SESSION.client("iam").create_role(RoleName="cleanup", AssumeRolePolicyDocument="{}")
        self.functions = SESSION.client("lambda")
        self.functions.create_function(
            FunctionName="cleanup",
            Runtime="python3.12",
            Role=role["Role"]["Arn"],
            Handler="session_expiry_runtime.handler.handler",
            Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},  # an empty zip: never run here
        )
        self.uuid = self.functions.create_event_source_mapping(
            EventSourceArn=sandbox.stream_arn,
            FunctionName="cleanup",
            StartingPosition="TRIM_HORIZON",
            MaximumRecordAgeInSeconds=21600,
        )["UUID"]
        self.sqs = SESSION.client("sqs")
        self.queue = self.sqs.create_queue(QueueName="failures")["QueueUrl"]
        values = {
            "CleanupFunctionName": "cleanup",
            "CleanupEventSourceMappingId": self.uuid,
            "TableName": "sessions",
            "FailureQueueUrl": self.queue,
        }
        if breaker:
            SESSION.client("ssm").put_parameter(
                Name=PARAMETER, Value=Record().to_json(), Type="String"
            )
            values["CircuitBreakerStateParameterName"] = PARAMETER
        if flags is not None:
            values.update(
                DeferredWorkTableName=DEFERRED_WORK_TABLE,
                FeatureFlagsApplicationId=flags.app,
                FeatureFlagsEnvironmentId=flags.env,
                FeatureFlagsProfileId=flags.profile,
            )
        self.cloudwatch = SESSION.client("cloudwatch")
        _cloudformation_models.install()  # AWS::CloudWatch::Alarm, as the emulator deploys it
        SESSION.client("cloudformation").create_stack(
            StackName=STACK, TemplateBody=json.dumps(template(values))
        )

    def alarm(self) -> None:
        self.cloudwatch.set_alarm_state(
            AlarmName=ERRORS_ALARM, StateValue="ALARM", StateReason="Threshold Crossed"
        )

    def breaker(self, record: Record) -> None:
        SESSION.client("ssm").put_parameter(
            Name=PARAMETER, Value=record.to_json(), Type="String", Overwrite=True
        )


def template(values: dict[str, str]) -> dict[str, Any]:
    """A stack with the construct's two kinds of alarm (one of another construct, whose path
    starts the same) and the outputs ``values`` under the construct's keys."""

    def alarm(name: str, description: str) -> dict[str, Any]:
        return {
            "Type": "AWS::CloudWatch::Alarm",
            "Properties": {
                "AlarmName": name,
                "AlarmDescription": description,
                "MetricName": "Errors",
                "Namespace": "AWS/Lambda",
                "Statistic": "Sum",
                "Period": 300,
                "EvaluationPeriods": 1,
                "Threshold": 0,
                "ComparisonOperator": "GreaterThanThreshold",
            },
        }

    return {
        "Resources": {
            "SessionsErrorsAlarm1A2B3C4D": alarm(
                ERRORS_ALARM, f"The cleanup failed as a whole. Runbook: {RUNBOOK}"
            ),
            "SessionsTwoErrorsAlarm9F8E7D6C": alarm("Sessions-SessionsTwoErrors-ABC", "Other."),
        },
        "Outputs": {
            **{
                KEYS[k]: {"Value": v, "Description": f"What it is ({PLACEHOLDERS[k]}): a command."}
                for k, v in values.items()
            },
            # A second SessionExpiry in the stack: --construct chooses.
            "SessionsTwoCleanupFunctionName0A1B2C3D": {
                "Value": "another-cleanup",
                "Description": "Session cleanup function (CLEANUP_FN in docs/operating.md).",
            },
        },
    }


@pytest.fixture
def flags(sandbox: Sandbox) -> Iterator[Flags]:
    _moto_appconfig.install()
    try:
        served = Flags()
        served.deploy()
        yield served
    finally:
        _moto_appconfig.uninstall()


@pytest.fixture
def deployed(sandbox: Sandbox, flags: Flags) -> Deployed:
    return Deployed(sandbox, flags=flags, breaker=True)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = status_cli.main([*argv, "--construct", "Sessions", "--json"], session=SESSION)
    out = capsys.readouterr().out
    return code, json.loads(out) if out else {}


def test_a_running_cleanup_is_healthy(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    with aws_calls() as calls:
        code, answer = run(capsys, "--stack", STACK)

    assert code == status_cli.EXIT_HEALTHY, answer["reasons"]
    assert answer["verdict"] == "healthy" and answer["reasons"] == []
    assert answer["mapping"]["uuid"] == deployed.uuid and answer["mapping"]["enabled"] is True
    assert answer["circuitBreaker"]["state"] == "CLOSED"
    assert answer["featureFlags"]["flags"] == {
        "enabled": True,
        "dryRun": False,
        "DeleteConnection": True,
        "RetireGrant": True,
        "DeleteScratch": True,
    }
    assert answer["pause"]["pausedSince"] is None
    assert answer["alarmsInAlarm"] == []
    assert answer["failureQueue"] == {"url": deployed.queue, "messages": 0}
    assert (
        answer["deferredWork"]["items"] == 0 and answer["deferredWork"]["oldestAgeSeconds"] is None
    )
    assert answer["iteratorAgeMilliseconds"] is None
    assert answer["unreadable"] == {}
    assert calls and all(c.startswith(("Describe", "Get", "List", "Query")) for c in calls), calls


def test_something_waiting_needs_attention_with_the_runbook(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed.alarm()
    deployed.sqs.send_message(QueueUrl=deployed.queue, MessageBody="{}")
    deployed.sandbox.ddb.put_item(
        TableName=DEFERRED_WORK_TABLE,
        Item={
            "resource": {"S": "deferred#DeleteScratch#1"},
            "deferredStep": {"S": "DeleteScratch"},
            "deferredAt": {"N": str(int(time.time()) - 3600)},
        },
    )
    deployed.cloudwatch.put_metric_data(
        Namespace="AWS/Lambda",
        MetricData=[
            {
                "MetricName": "IteratorAge",
                "Dimensions": [{"Name": "FunctionName", "Value": "cleanup"}],
                "Value": 1234.0,
                "Unit": "Milliseconds",
            }
        ],
    )

    code, answer = run(capsys, "--stack", STACK)

    assert code == status_cli.EXIT_ATTENTION and answer["verdict"] == "attention"
    (alarm,) = answer["alarmsInAlarm"]  # the other construct's alarm is not this one's
    assert alarm["name"] == ERRORS_ALARM and alarm["runbook"] == RUNBOOK
    assert answer["failureQueue"]["messages"] == 1
    assert answer["deferredWork"]["byStep"] == {"DeleteScratch": 1}
    assert 3600 <= answer["deferredWork"]["oldestAgeSeconds"] < 3700
    assert answer["iteratorAgeMilliseconds"] == 1234.0
    assert len(answer["reasons"]) == 3


def test_a_disabled_mapping_is_paused_with_its_deadlines(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed.functions.update_event_source_mapping(UUID=deployed.uuid, Enabled=False)

    code, answer = run(capsys, "--stack", STACK)

    assert code == status_cli.EXIT_PAUSED and answer["verdict"] == "paused"
    assert answer["mapping"]["state"] == "Disabled" and answer["mapping"]["enabled"] is False
    since = datetime.fromisoformat(answer["pause"]["pausedSince"])
    assert since == datetime.fromisoformat(answer["mapping"]["since"])
    deadline = datetime.fromisoformat(answer["pause"]["streamRetentionDeadline"])
    assert deadline - since == timedelta(hours=24)
    assert datetime.fromisoformat(answer["pause"]["maxRecordAgeDeadline"]) - since == timedelta(
        hours=6
    )
    assert "event source mapping is Disabled" in answer["reasons"][0]


def test_an_open_breaker_paused_past_a_deadline_counts_from_its_first_opening(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    mapping = deployed.functions.update_event_source_mapping(UUID=deployed.uuid, Enabled=False)
    modified = deployed.functions.get_event_source_mapping(UUID=deployed.uuid)["LastModified"]
    first = time.time() - 30 * 3600  # 30 hours ago: past the stream's 24 hours
    deployed.breaker(
        Record(
            state=OPEN,
            since=time.time() - 600,
            reason="alarm Errors",
            failed_probes=3,
            seen_state=mapping["State"],
            seen_modified=modified.timestamp(),
            paused_since=first,
        )
    )

    code, answer = run(capsys, "--stack", STACK)

    assert code == status_cli.EXIT_PAUSED
    assert answer["circuitBreaker"]["state"] == "OPEN"
    assert answer["circuitBreaker"]["failedProbes"] == 3
    assert answer["pause"]["pausedSince"] == answer["circuitBreaker"]["pausedSince"]
    deadline = datetime.fromisoformat(answer["pause"]["streamRetentionDeadline"])
    assert deadline < datetime.now(timezone.utc)  # records already age out
    assert answer["pause"]["pausedSeconds"] >= 30 * 3600 - 5
    assert any("circuit breaker is OPEN" in r for r in answer["reasons"])


def test_a_step_flag_off_needs_attention_and_enabled_off_is_paused(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    assert deployed.flags is not None
    deployed.flags.deploy(DeleteScratch=False)

    code, answer = run(capsys, "--stack", STACK)

    assert code == status_cli.EXIT_ATTENTION
    assert answer["featureFlags"]["flags"]["DeleteScratch"] is False
    assert answer["reasons"] == ["step flags off: DeleteScratch"]

    deployed.flags.deploy(enabled=False)
    code, answer = run(capsys, "--stack", STACK)
    assert code == status_cli.EXIT_PAUSED
    assert answer["reasons"] == ["the feature flag enabled is off: every record is deferred"]


def test_a_cleanup_deployed_as_a_dry_run_is_paused(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    # cleanup_dry_run=True (SESSION_EXPIRY_DRY_RUN on the function): nothing is cleaned, as
    # with the flag dryRun on, though the mapping, the breaker and every flag say "running".
    deployed.functions.update_function_configuration(
        FunctionName="cleanup", Environment={"Variables": {"SESSION_EXPIRY_DRY_RUN": "true"}}
    )

    code, answer = run(capsys, "--stack", STACK)

    assert code == status_cli.EXIT_PAUSED
    assert answer["function"] == {"dryRun": True, "reservedConcurrency": None}
    assert "cleanup levers     dry run on, reserved concurrency none" in status_cli.render(answer)
    assert answer["reasons"] == [
        "the cleanup function is deployed as a dry run (cleanup_dry_run): nothing is cleaned"
    ]


def test_a_cleanup_function_throttled_to_no_concurrency_is_paused(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    # Reserved concurrency 0 (AWS's "stop a function" lever): the mapping stays Enabled, but
    # no invocation runs and the records wait in the stream.
    deployed.functions.put_function_concurrency(
        FunctionName="cleanup", ReservedConcurrentExecutions=0
    )

    code, answer = run(capsys, "--stack", STACK)

    assert code == status_cli.EXIT_PAUSED
    assert answer["function"] == {"dryRun": False, "reservedConcurrency": 0}
    assert answer["reasons"] == [
        "the cleanup function's reserved concurrency is 0: no invocation runs, the records wait "
        "in the stream"
    ]


def test_a_read_that_fails_is_named_and_the_others_still_answer(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed.sqs.delete_queue(QueueUrl=deployed.queue)

    code, answer = run(capsys, "--stack", STACK)

    assert code == status_cli.EXIT_ATTENTION
    assert answer["failureQueue"] is None and "failureQueue" in answer["unreadable"]
    assert answer["mapping"]["enabled"] is True and answer["featureFlags"] is not None
    assert answer["reasons"] == ["failureQueue could not be read"]


def test_the_runbook_values_are_the_construct_s_outputs_by_placeholder(
    deployed: Deployed, flags: Flags, capsys: pytest.CaptureFixture[str]
) -> None:
    """An operator with only the stack name gets every placeholder's value (a fresh user's
    trial: the sandbox's report named only some); the other construct's are not mixed in."""
    _, answer = run(capsys, "--stack", STACK)

    assert answer["runbookValues"] == {
        "CLEANUP_FN": "cleanup",
        "UUID": deployed.uuid,
        "TABLE": "sessions",
        "URL": deployed.queue,
        "PARAMETER": PARAMETER,
        "DEFERRED_WORK_TABLE": DEFERRED_WORK_TABLE,
        "APPLICATION": flags.app,
        "ENVIRONMENT": flags.env,
        "PROFILE": flags.profile,
    }


def test_the_person_s_view_lists_the_runbook_values(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    status_cli.main(["--stack", STACK, "--construct", "Sessions"], session=SESSION)
    text = capsys.readouterr().out

    assert f"  {'UUID':<20} {deployed.uuid}" in text.splitlines()
    assert "another-cleanup" not in text


def test_the_json_object_has_the_documented_keys(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    _, answer = run(capsys, "--stack", STACK)

    assert sorted(answer) == sorted(status_cli.JSON_SCHEMA)
    assert answer["schemaVersion"] == 1 and answer["construct"] == "Sessions"
    assert isinstance(answer["exitCode"], int) and isinstance(answer["reasons"], list)


def test_without_the_optional_resources_their_keys_are_null(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    Deployed(sandbox, flags=None, breaker=False)

    code, answer = run(capsys, "--stack", STACK)

    assert code == status_cli.EXIT_HEALTHY, answer
    assert answer["circuitBreaker"] is None and answer["featureFlags"] is None
    assert answer["deferredWork"] is None and answer["failureBucket"] is None


def test_the_human_view_says_when_records_age_out(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed.functions.update_event_source_mapping(UUID=deployed.uuid, Enabled=False)
    deployed.alarm()

    code = status_cli.main(["--stack", STACK, "--construct", "Sessions"], session=SESSION)

    text = capsys.readouterr().out
    assert code == status_cli.EXIT_PAUSED
    assert "PAUSED (exit 3)" in text and "records start to age out at" in text
    assert f"{ERRORS_ALARM} since" in text and RUNBOOK in text


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--stack", "no spaces"], "'no spaces'"),
        (["--stack", "1starts-with-a-digit"], "'1starts-with-a-digit'"),
        (["--stack", STACK, "--construct", "Sessions/Inner"], "'Sessions/Inner'"),
    ],
)
def test_fails_a_value_it_cannot_honour_before_any_call(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    with aws_calls() as calls:
        code = status_cli.main(argv, session=SESSION)

    assert code == status_cli.EXIT_BAD_INPUT
    assert calls == []
    assert named in capsys.readouterr().err


def test_fails_an_unknown_stack(sandbox: Sandbox, capsys: pytest.CaptureFixture[str]) -> None:
    code = status_cli.main(["--stack", "Nowhere"], session=SESSION)

    assert code == status_cli.EXIT_BAD_INPUT
    assert "Nowhere" in capsys.readouterr().err


def test_fails_a_construct_the_stack_does_not_have(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    code = status_cli.main(["--stack", STACK, "--construct", "Other"], session=SESSION)

    assert code == status_cli.EXIT_BAD_INPUT
    assert "--construct 'Other'" in capsys.readouterr().err


def test_fails_a_stack_of_several_constructs_without_construct(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    code = status_cli.main(["--stack", STACK], session=SESSION)

    assert code == status_cli.EXIT_BAD_INPUT
    assert "(['Sessions', 'SessionsTwo']): expected --construct" in capsys.readouterr().err


def test_several_constructs_need_one_chosen() -> None:
    outputs = {
        "SessionsCleanupFunctionName37B1685E": "a",
        "SessionsTwoCleanupFunctionName0A1B2C3D": "b",
        "SessionsTableName095CFFD7": "t1",
        "SessionsTwoTableName11223344": "t2",
    }
    assert status_cli.constructs_in(outputs) == ["Sessions", "SessionsTwo"]
    with pytest.raises(status_cli.StatusInputError, match="--construct"):
        status_cli.choose_construct(outputs, None, "S")
    assert status_cli.outputs_of(outputs, "Sessions") == {
        "CleanupFunctionName": "a",
        "TableName": "t1",
    }
    assert status_cli.outputs_of(outputs, "SessionsTwo")["TableName"] == "t2"


def test_the_output_ids_are_the_constructs() -> None:
    """The ids this command reads are the ones the construct creates (one name, two sides)."""
    ids = {getattr(construct_outputs, n) for n in dir(construct_outputs) if n.isupper()}
    assert set(status_cli.OUTPUT_IDS) <= ids | {construct_kill_switch.OUTPUT_ID}
