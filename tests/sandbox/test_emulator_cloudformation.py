"""What the emulator teaches moto's CloudFormation (raw templates, no CDK): alarms (single
metric and metric math) answering Ref and Fn::GetAtt Arn, asynchronous invoke settings, a
parameter without a name, the Ref of an event bus, the outputs of a stack created by a change
set, and KMS grants' CreationDate."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdk_session_expiry.testing import LocalEmulator, MotoInternalsChanged
from cdk_session_expiry.testing.models import _moto_internals

ALARM = {
    "Type": "AWS::CloudWatch::Alarm",
    "Properties": {
        "AlarmDescription": "iterator age",
        "ComparisonOperator": "GreaterThanThreshold",
        "EvaluationPeriods": 1,
        "MetricName": "IteratorAge",
        "Namespace": "AWS/Lambda",
        "Period": 300,
        "Statistic": "Maximum",
        "Threshold": 3600000,
        "Dimensions": [{"Name": "FunctionName", "Value": "cleanup"}],
    },
}
MATH_ALARM = {
    "Type": "AWS::CloudWatch::Alarm",
    "Properties": {
        "AlarmName": "skipped-records",
        "ComparisonOperator": "GreaterThanThreshold",
        "EvaluationPeriods": 1,
        "Threshold": 0,
        "Metrics": [
            {"Id": "e", "Expression": "FILL(m, 0)", "ReturnData": True},
            {
                "Id": "m",
                "ReturnData": False,
                "MetricStat": {
                    "Metric": {"Namespace": "SessionExpiry", "MetricName": "RecordsSkipped"},
                    "Period": 300,
                    "Stat": "Sum",
                },
            },
        ],
    },
}


def _template(**extra: Any) -> str:
    return json.dumps(
        {
            "Resources": {"Alarm": ALARM, "MathAlarm": MATH_ALARM, **extra},
            "Outputs": {
                "AlarmName": {"Value": {"Ref": "Alarm"}},
                "AlarmArn": {"Value": {"Fn::GetAtt": ["Alarm", "Arn"]}},
                "MathAlarmArn": {"Value": {"Fn::GetAtt": ["MathAlarm", "Arn"]}},
            },
        }
    )


def _outputs(emulator: LocalEmulator, stack: str) -> dict[str, str]:
    got = emulator.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in got.get("Outputs", [])}


def test_alarms_are_created_and_answer_ref_and_arn(emulator: LocalEmulator) -> None:
    cfn, cloudwatch = emulator.client("cloudformation"), emulator.client("cloudwatch")
    cfn.create_stack(StackName="alarms", TemplateBody=_template())
    outputs = _outputs(emulator, "alarms")
    alarms = {a["AlarmName"]: a for a in cloudwatch.describe_alarms()["MetricAlarms"]}
    assert outputs["AlarmName"].startswith("alarms-Alarm-")  # generated as CloudFormation does
    assert outputs["AlarmArn"] == alarms[outputs["AlarmName"]]["AlarmArn"]
    assert outputs["AlarmArn"].startswith("arn:aws:cloudwatch:us-east-1:123456789012:alarm:")
    assert alarms[outputs["AlarmName"]]["Threshold"] == 3600000
    math = alarms["skipped-records"]
    assert math["AlarmArn"] == outputs["MathAlarmArn"]
    assert [m["Id"] for m in math["Metrics"]] == ["e", "m"]
    cfn.delete_stack(StackName="alarms")
    assert cloudwatch.describe_alarms()["MetricAlarms"] == []


def test_a_change_set_stack_answers_its_outputs_and_the_ref_of_an_event_bus(
    emulator: LocalEmulator,
) -> None:
    cfn = emulator.client("cloudformation")
    template = _template(
        Bus={"Type": "AWS::Events::EventBus", "Properties": {"Name": "sessions-bus"}},
        Rule={
            "Type": "AWS::Events::Rule",
            "Properties": {"EventBusName": {"Ref": "Bus"}, "EventPattern": {"source": ["x"]}},
        },
    )
    cfn.create_change_set(
        StackName="by-change-set",
        ChangeSetName="deploy",
        ChangeSetType="CREATE",
        TemplateBody=template,
    )
    cfn.execute_change_set(ChangeSetName="deploy", StackName="by-change-set")
    outputs = _outputs(emulator, "by-change-set")
    assert set(outputs) == {"AlarmName", "AlarmArn", "MathAlarmArn"}
    rules = emulator.client("events").list_rules(EventBusName="sessions-bus")["Rules"]
    assert len(rules) == 1


def test_a_parameter_without_a_name_is_named_as_cloudformation_names_it(
    emulator: LocalEmulator,
) -> None:
    # The circuit breaker's state parameter has no Name: moto's own model passed none to
    # PutParameter and the stack's resource listing answered HTTP 500.
    cfn, ssm = emulator.client("cloudformation"), emulator.client("ssm")
    parameter = {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": "{}"}}
    template = {
        "Resources": {"State": parameter},
        "Outputs": {"StateName": {"Value": {"Ref": "State"}}},
    }
    cfn.create_stack(StackName="params", TemplateBody=json.dumps(template))

    name = _outputs(emulator, "params")["StateName"]
    assert name.startswith("params-State-")
    assert ssm.get_parameter(Name=name)["Parameter"]["Value"] == "{}"
    (listed,) = cfn.list_stack_resources(StackName="params")["StackResourceSummaries"]
    assert listed["PhysicalResourceId"] == name
    cfn.delete_stack(StackName="params")
    assert ssm.describe_parameters()["Parameters"] == []


def test_kms_grants_answer_their_creation_date_and_age_on_request(
    emulator: LocalEmulator,
) -> None:
    kms = emulator.client("kms")
    key = kms.create_key()["KeyMetadata"]["KeyId"]
    kms.create_grant(
        KeyId=key, GranteePrincipal="arn:aws:iam::123456789012:role/r", Operations=["Decrypt"]
    )
    (fresh,) = kms.list_grants(KeyId=key)["Grants"]
    assert emulator.age_grants(3600) == 1
    (aged,) = kms.list_grants(KeyId=key)["Grants"]
    assert 3599 <= (fresh["CreationDate"] - aged["CreationDate"]).total_seconds() <= 3601


def test_fails_loudly_when_moto_s_model_registry_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.cloudformation import parsing

    monkeypatch.setattr(parsing, "get_model_map", lambda: {})
    with pytest.raises(MotoInternalsChanged, match=r"parsing\.get_model_map is not a cached"):
        _moto_internals.register_cloudformation_models([], [])


def test_fails_loudly_when_moto_s_grants_change(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.kms import models

    monkeypatch.delattr(models.Grant, "to_json")
    with pytest.raises(MotoInternalsChanged, match=r"Grant\.to_json"):
        _moto_internals.date_grants()


def test_fails_loudly_when_moto_s_change_sets_or_buses_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from moto.cloudformation import models as cfn_models
    from moto.events import models as events_models

    monkeypatch.setattr(cfn_models, "Stack", None)
    with pytest.raises(MotoInternalsChanged, match="execute_change_set/Stack"):
        _moto_internals.output_change_set_stacks()
    monkeypatch.setattr(events_models, "EventBus", None)
    with pytest.raises(MotoInternalsChanged, match=r"EventBus\.name"):
        _moto_internals.name_event_buses()


def test_fails_loudly_when_moto_s_backend_registry_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from moto.core.base_backend import BackendDict

    monkeypatch.setattr(BackendDict, "_instances", None)
    with pytest.raises(MotoInternalsChanged, match=r"BackendDict\._instances"):
        _moto_internals.snapshot_backends()
