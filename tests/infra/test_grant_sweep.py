"""The grant sweep (issue 12): a scheduled backstop for KMS grants, on whenever grant_key is set."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, CfnParameter, Duration, Stack
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from cdk_session_expiry import SessionExpiry
from cdk_session_expiry import _runtime_contract as contract

from .helpers import StackTemplate


class Synth(StackTemplate):
    def __init__(self, **props: Any) -> None:
        self.stack = Stack(App(), "Grants")
        self.key = kms.Key(self.stack, "GrantKey")
        self.sessions = SessionExpiry(self.stack, "Sessions", grant_key=self.key, **props)
        self.json = Template.from_stack(self.stack).to_json()


@pytest.fixture(scope="module")
def synth() -> Synth:
    return Synth()


def test_on_with_grant_key_running_as_the_cleanup_role(synth: Synth) -> None:
    sweep = synth.sessions.grant_sweep
    assert sweep is not None
    props = synth.props(sweep.function)
    assert props["Handler"] == "session_expiry_runtime.sweeps.grant_sweeper.handler"
    assert props["Role"] == {"Fn::GetAtt": [synth.id(synth.sessions.cleanup_role), "Arn"]}
    env = props["Environment"]["Variables"]
    assert env[contract.ENV_GRANT_KEY_ARN] == {"Fn::GetAtt": [synth.id(synth.key), "Arn"]}
    assert env[contract.ENV_RETIRING_PRINCIPAL] == {
        "Fn::GetAtt": [synth.id(synth.sessions.cleanup_role), "Arn"]
    }
    assert env[contract.ENV_TABLE_NAME] == {"Ref": synth.id(synth.sessions.table)}
    assert env[contract.ENV_TTL_ATTRIBUTE] == "expiresAt"
    assert synth.props(sweep.schedule)["ScheduleExpression"] == "rate(1 hour)"


def test_the_cleanup_role_may_list_grants_and_read_sessions_only(synth: Synth) -> None:
    policy = synth.sessions.cleanup_role.node.find_child("DefaultPolicy")
    statements = synth.props(policy)["PolicyDocument"]["Statement"]
    by_action = {json.dumps(s["Action"]): s["Resource"] for s in statements}
    assert by_action['"kms:ListGrants"'] == {"Fn::GetAtt": [synth.id(synth.key), "Arn"]}
    assert by_action['"dynamodb:GetItem"'] == {
        "Fn::GetAtt": [synth.id(synth.sessions.table), "Arn"]
    }


def test_orphan_grants_alarm_above_zero_and_errors_alarm(synth: Synth) -> None:
    sweep = synth.sessions.grant_sweep
    assert sweep is not None
    assert sweep.orphan_grants_alarm in synth.sessions.alarms
    assert sweep.errors_alarm in synth.sessions.alarms
    props = synth.props(sweep.orphan_grants_alarm)
    assert props["MetricName"] == "OrphanGrantsRetired"
    assert props["Namespace"] == "SessionExpiry"
    assert (props["Threshold"], props["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert props["Statistic"] == "Sum" and props["TreatMissingData"] == "notBreaching"
    errors = synth.props(sweep.errors_alarm)
    assert errors["MetricName"] == "Errors"
    assert errors["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": synth.id(sweep.function)}}
    ]


def test_off_without_grant_key() -> None:
    stack = Stack(App(), "NoGrants")
    sessions = SessionExpiry(stack, "Sessions")

    assert sessions.grant_sweep is None
    assert sessions.node.try_find_child("GrantSweep") is None


def test_interval_prop() -> None:
    synth = Synth(grant_sweep_interval=Duration.minutes(30))
    assert synth.sessions.grant_sweep is not None
    assert (
        synth.props(synth.sessions.grant_sweep.schedule)["ScheduleExpression"] == "rate(30 minutes)"
    )


def test_fails_grant_sweep_interval_without_grant_key() -> None:
    with pytest.raises(
        ValueError, match="grant_sweep_interval=30 minutes is set without grant_key"
    ):
        SessionExpiry(Stack(App(), "X"), "Sessions", grant_sweep_interval=Duration.minutes(30))


@pytest.mark.parametrize(
    ("interval", "match"),
    [
        (Duration.minutes(2), "expected between 5 minutes and 1 day"),
        (Duration.days(2), "expected between 5 minutes and 1 day"),
        (Duration.seconds(330), "expected a whole number of minutes"),
    ],
)
def test_fails_a_grant_sweep_interval_out_of_range(interval: Duration, match: str) -> None:
    stack = Stack(App(), "X")
    with pytest.raises(ValueError, match=match):
        SessionExpiry(
            stack, "Sessions", grant_key=kms.Key(stack, "K"), grant_sweep_interval=interval
        )


def test_fails_a_grant_sweep_interval_of_the_wrong_type() -> None:
    stack = Stack(App(), "X")
    with pytest.raises(TypeError, match="grant_sweep_interval=3600: expected a Duration"):
        SessionExpiry(stack, "Sessions", grant_key=kms.Key(stack, "K"), grant_sweep_interval=3600)  # type: ignore[arg-type]


def test_the_unusable_names_metric_is_the_runtimes(synth: Synth) -> None:
    sweep = synth.sessions.grant_sweep
    assert sweep is not None
    metric = sweep.metric_grant_sweep_unusable_names()
    assert (
        metric.metric_name
        == contract.METRIC_GRANT_SWEEP_UNUSABLE_NAMES
        == "GrantSweepUnusableNames"
    )
    assert metric.statistic == "Sum"


def test_incomplete_alarm_on_by_default_above_zero(synth: Synth) -> None:
    sweep = synth.sessions.grant_sweep
    assert sweep is not None
    assert sweep.incomplete_alarm in synth.sessions.alarms
    props = synth.props(sweep.incomplete_alarm)
    assert props["MetricName"] == contract.METRIC_GRANT_SWEEP_INCOMPLETE == "GrantSweepIncomplete"
    assert props["Namespace"] == "SessionExpiry"
    assert (props["Threshold"], props["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert props["Statistic"] == "Sum" and props["TreatMissingData"] == "notBreaching"
    assert "Raise the grant sweep function's timeout" in props["AlarmDescription"]


def test_the_ceiling_alarm_fires_above_80_percent_of_kms_grants_per_key(synth: Synth) -> None:
    """KMS allows 50,000 grants per key unless raised (AWS KMS Developer Guide, "Resource
    quotas"): the alarm fires on a finished pass's ``GrantsOnKey`` above 40,000, once per
    sweep interval, and keeps its state between passes (missing data ignored)."""
    sweep = synth.sessions.grant_sweep
    assert sweep is not None and sweep.ceiling_alarm in synth.sessions.alarms
    props = synth.props(sweep.ceiling_alarm)
    assert props["MetricName"] == contract.METRIC_GRANTS_ON_KEY == "GrantsOnKey"
    assert (props["Threshold"], props["ComparisonOperator"]) == (40_000, "GreaterThanThreshold")
    assert (props["Statistic"], props["Period"]) == ("Maximum", 3600)
    assert props["TreatMissingData"] == "ignore"
    assert "50,000" in props["AlarmDescription"]
    assert "docs/operating.md#alarm-grant-ceiling" in props["AlarmDescription"]


def test_a_raised_quota_moves_the_ceiling_alarm() -> None:
    synth = Synth(grant_key_grant_quota=200_000, grant_sweep_interval=Duration.minutes(30))
    assert synth.sessions.grant_sweep is not None
    props = synth.props(synth.sessions.grant_sweep.ceiling_alarm)
    assert (props["Threshold"], props["Period"]) == (160_000, 1800)
    assert "200,000" in props["AlarmDescription"]


def test_fails_grant_key_grant_quota_without_grant_key() -> None:
    with pytest.raises(ValueError, match="grant_key_grant_quota=100000 is set without grant_key"):
        SessionExpiry(Stack(App(), "X"), "Sessions", grant_key_grant_quota=100_000)


@pytest.mark.parametrize("quota", [0, -5])
def test_fails_a_grant_key_grant_quota_below_one(quota: int) -> None:
    stack = Stack(App(), "X")
    with pytest.raises(ValueError, match=rf"grant_key_grant_quota={quota}: expected 1 or more"):
        SessionExpiry(stack, "Sessions", grant_key=kms.Key(stack, "K"), grant_key_grant_quota=quota)


def test_fails_a_grant_key_grant_quota_of_the_wrong_type() -> None:
    stack = Stack(App(), "X")
    with pytest.raises(TypeError, match="grant_key_grant_quota='50000': expected a whole number"):
        SessionExpiry(
            stack,
            "Sessions",
            grant_key=kms.Key(stack, "K"),
            grant_key_grant_quota="50000",  # type: ignore[arg-type]
        )


# --- the shared RetireGrant budget as a prop (a fresh user found it only as an environment
# variable, with a bad value caught only when the cleanup ran) --------------------------------
def _cleanup_env(synth: Synth) -> dict[str, Any]:
    return dict(synth.props(synth.sessions.cleanup_function)["Environment"]["Variables"])


def test_grant_retire_budget_reaches_the_cleanup_function() -> None:
    env = _cleanup_env(Synth(grant_retire_budget=20))
    assert env[contract.ENV_KMS_RETIRE_GRANT_BUDGET] == "20"


def test_without_grant_retire_budget_the_runtime_default_holds(synth: Synth) -> None:
    assert contract.ENV_KMS_RETIRE_GRANT_BUDGET not in _cleanup_env(synth)
    assert contract.DEFAULT_KMS_RETIRE_GRANT_BUDGET == 10


def test_fails_grant_retire_budget_without_grant_key() -> None:
    with pytest.raises(ValueError, match="grant_retire_budget=20 is set without grant_key"):
        SessionExpiry(Stack(App(), "X"), "Sessions", grant_retire_budget=20)


@pytest.mark.parametrize("budget", [0, -1, 10_001])
def test_fails_a_grant_retire_budget_outside_its_range(budget: int) -> None:
    stack = Stack(App(), "X")
    with pytest.raises(ValueError, match=rf"grant_retire_budget={budget}: expected 1\.\.10,000"):
        SessionExpiry(stack, "Sessions", grant_key=kms.Key(stack, "K"), grant_retire_budget=budget)


def test_fails_a_grant_retire_budget_of_the_wrong_type() -> None:
    stack = Stack(App(), "X")
    with pytest.raises(TypeError, match="grant_retire_budget='10': expected a whole number"):
        SessionExpiry(
            stack,
            "Sessions",
            grant_key=kms.Key(stack, "K"),
            grant_retire_budget="10",  # type: ignore[arg-type]
        )


def test_a_grant_retire_budget_token_is_left_to_deploy_time() -> None:
    """A number token (a `CfnParameter`) is known only at deploy time, as for every other prop
    (`validation`): not checked at synth, and the variable is the parameter's value, not the
    token's placeholder number."""
    stack = Stack(App(), "X")
    budget = CfnParameter(stack, "Budget", type="Number")
    sessions = SessionExpiry(
        stack, "Sessions", grant_key=kms.Key(stack, "K"), grant_retire_budget=budget.value_as_number
    )

    fn = Template.from_stack(stack).find_resources("AWS::Lambda::Function")
    variables = fn[stack.get_logical_id(sessions.cleanup_function.node.default_child)]
    env = variables["Properties"]["Environment"]["Variables"]
    assert env[contract.ENV_KMS_RETIRE_GRANT_BUDGET] == {"Ref": "Budget"}


@pytest.mark.parametrize("budget", [float("nan"), float("inf")])
def test_fails_a_grant_retire_budget_that_is_no_number(budget: float) -> None:
    """A float that JSON cannot carry crashed the jsii kernel (``Token.is_unresolved(nan)``:
    "Unexpected token 'N'") and broke every later CDK call of the process, instead of the
    type error."""
    stack = Stack(App(), "X")
    with pytest.raises(TypeError, match=rf"grant_retire_budget={budget}: expected a whole number"):
        SessionExpiry(stack, "Sessions", grant_key=kms.Key(stack, "K"), grant_retire_budget=budget)  # type: ignore[arg-type]
