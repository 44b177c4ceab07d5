"""Expiry by tenant, the construct's side: the opt-in ``Tenant`` dimension, the opt-in
Contributor Insights rules (``tenant_insights``) and the dashboard's top-tenants widget.

That the rules' body ranks tenants from the cleanup's real log lines is proven on the runtime
side (``tests/runtime/test_tenant_metrics.py``) with :func:`tenant_metrics.rule_body`; here the
synthesized ``RuleBody`` is checked to be exactly that body over the cleanup's log group.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack, assertions

from cdk_session_expiry import PropTypeError, SessionExpiry, tenant_metrics
from cdk_session_expiry import _runtime_contract as contract

from .helpers import resources_of

ENV = Environment(account="123456789012", region="us-east-1")


def synth(cdk_context: dict[str, Any], **props: Any) -> tuple[SessionExpiry, dict[str, Any]]:
    app = App(context=cdk_context)
    stack = Stack(app, "Tenants", env=ENV)
    sessions = SessionExpiry(stack, "Sessions", **props)
    sessions.add_dashboard("Dashboard")
    return sessions, assertions.Template.from_stack(stack).to_json()


def cleanup_env(template: dict[str, Any]) -> dict[str, Any]:
    functions = resources_of(template, "AWS::Lambda::Function")
    (cleanup,) = [
        f for f in functions.values() if f["Properties"]["Handler"] == contract.CLEANUP_HANDLER
    ]
    return cleanup["Properties"]["Environment"]["Variables"]  # type: ignore[no-any-return]


def log_group_id(template: dict[str, Any]) -> str:
    (name,) = [n for n in resources_of(template, "AWS::Logs::LogGroup") if "CleanupLogGroup" in n]
    return name


def body_of(rule: dict[str, Any], log_group_name: str) -> dict[str, Any]:
    """The rule body with the log group's ``Ref`` replaced by ``log_group_name``."""
    parts = rule["Properties"]["RuleBody"]["Fn::Join"][1]
    return json.loads("".join(p if isinstance(p, str) else log_group_name for p in parts))  # type: ignore[no-any-return]


def test_by_default_no_rule_no_dimension_and_the_top_tenants_widget(
    cdk_context: dict[str, Any],
) -> None:
    sessions, template = synth(cdk_context)

    assert sessions.tenant_insights is None
    assert resources_of(template, "AWS::CloudWatch::InsightRule") == {}
    assert contract.ENV_METRICS_TENANT_DIMENSION not in cleanup_env(template)
    (board,) = resources_of(template, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(board["Properties"]["DashboardBody"])
    # The Logs Insights table of the top tenants (CDK joins the lines with "\n| ").
    assert all(line in body for line in tenant_metrics.TOP_TENANTS_QUERY)
    assert '\\"view\\":\\"table\\"' in body
    assert log_group_id(template) in body  # over the cleanup's log group


def test_the_tenant_dimension_is_turned_on_in_the_cleanups_environment(
    cdk_context: dict[str, Any],
) -> None:
    _, template = synth(cdk_context, metrics_tenant_dimension=True)

    assert cleanup_env(template)[contract.ENV_METRICS_TENANT_DIMENSION] == "true"
    assert resources_of(template, "AWS::CloudWatch::InsightRule") == {}


def test_tenant_insights_creates_three_rules_on_the_cleanups_log_group(
    cdk_context: dict[str, Any],
) -> None:
    sessions, template = synth(cdk_context, tenant_insights=True)

    rules = resources_of(template, "AWS::CloudWatch::InsightRule")
    group = log_group_id(template)
    # Construct ids are a public contract: pinned logical ids.
    assert sorted(rules) == sorted(
        f"SessionsTenantInsights{rule_id}" + rules_suffix(rules, rule_id)
        for rule_id, _ in tenant_metrics.RULES
    )
    assert sessions.tenant_insights is not None
    for rule_id, metric in tenant_metrics.RULES:
        (logical_id,) = [n for n in rules if n.startswith(f"SessionsTenantInsights{rule_id}")]
        rule = rules[logical_id]
        assert rule["Properties"]["RuleState"] == "ENABLED"
        assert rule["Properties"]["RuleName"].endswith(f"-{rule_id}")
        assert len(rule["Properties"]["RuleName"]) <= 128
        parts = rule["Properties"]["RuleBody"]["Fn::Join"][1]
        assert {"Ref": group} in parts
        assert body_of(rule, "LOG-GROUP") == tenant_metrics.rule_body("LOG-GROUP", metric)
    assert contract.ENV_METRICS_TENANT_DIMENSION not in cleanup_env(template)


def rules_suffix(rules: dict[str, Any], rule_id: str) -> str:
    (name,) = [n for n in rules if n.startswith(f"SessionsTenantInsights{rule_id}")]
    suffix = name.removeprefix(f"SessionsTenantInsights{rule_id}")
    assert len(suffix) == 8  # CDK's hash of the construct path
    return suffix


def test_the_rule_names_are_unique_per_construct(cdk_context: dict[str, Any]) -> None:
    app = App(context=cdk_context)
    stack = Stack(app, "Two", env=ENV)
    SessionExpiry(stack, "A", tenant_insights=True)
    SessionExpiry(stack, "B", tenant_insights=True)
    template = assertions.Template.from_stack(stack).to_json()

    names = [
        r["Properties"]["RuleName"]
        for r in resources_of(template, "AWS::CloudWatch::InsightRule").values()
    ]
    assert len(names) == len(set(names)) == 6


@pytest.mark.parametrize("prop", ["metrics_tenant_dimension", "tenant_insights"])
def test_fails_a_tenant_switch_that_is_not_a_bool(cdk_context: dict[str, Any], prop: str) -> None:
    with pytest.raises(PropTypeError, match=f"{prop}='yes': expected"):
        synth(cdk_context, **{prop: "yes"})
