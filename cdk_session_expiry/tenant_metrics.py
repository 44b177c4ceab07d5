"""Expiry by tenant: top tenants by sessions cleaned, failed and refused.

The cleanup writes the tenant of a tenant-scoped session (its old image's tenant attribute)
into every embedded metric format (EMF) document of that session's counts as the root member
``Tenant``: a property, which CloudWatch does not turn into a metric, so it costs nothing beyond
the log bytes. Three ways to read it:

* **CloudWatch Logs Insights**: `TOP_TENANTS_QUERY` over the cleanup's log group (the
  dashboard's top-tenants widget, `top_tenants_widget`, always on ``widgets()``).
* **Contributor Insights** (``tenant_insights=True``, opt-in): three
  ``AWS::CloudWatch::InsightRule`` rules on the cleanup's log group, one per measure
  (`RULES`), each summing its metric by ``$.Tenant`` (rule syntax: CloudWatch User Guide,
  "Contributor Insights rule syntax in CloudWatch", schema ``CloudWatchLogRule`` version 1).
  Priced per rule and per matched log event (Amazon CloudWatch pricing, as of December 2026:
  $0.50 a rule a month and $0.02 per million matched log events).
* **A ``Tenant`` dimension** (``metrics_tenant_dimension=True``, opt-in, for platforms with few
  tenants): every metric of a tenant's sessions is emitted once in aggregate (the alarms' metrics,
  unchanged) and once per tenant. Each metric name and dimension values combination is a custom
  metric, priced per metric-month (Amazon CloudWatch pricing, as of December 2026: $0.30 a
  metric a month for the first 10,000, US East (N. Virginia)): a tenant whose sessions are
  cleaned (3 reasons), fail (say 3 actions) and are refused (2 reasons), plus TTL lag and
  scratch objects deleted, is about 10 metrics, about $3 a tenant a month.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_cdk import Names, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_logs as logs
from constructs import Construct

from . import _runtime_contract as contract

if TYPE_CHECKING:
    from aws_cdk import aws_lambda as lambda_

#: The rules of ``tenant_insights``: construct id, and the metric each sums by tenant.
RULES = (
    ("TopTenantsCleaned", contract.METRIC_SESSIONS_CLEANED),
    ("TopTenantsFailed", contract.METRIC_CLEANUP_FAILURES),
    ("TopTenantsRefused", contract.METRIC_RESOURCES_REFUSED),
)
#: Tenants the dashboard's top-tenants widget lists.
TOP = 10
#: The CloudWatch Logs Insights query of the top-tenants widget.
TOP_TENANTS_QUERY = [
    f"filter ispresent({contract.DIMENSION_TENANT})",
    f"stats sum({contract.METRIC_SESSIONS_CLEANED}) as cleaned,"
    f" sum({contract.METRIC_CLEANUP_FAILURES}) as failed,"
    f" sum({contract.METRIC_RESOURCES_REFUSED}) as refused by {contract.DIMENSION_TENANT}",
    "sort cleaned desc",
    f"limit {TOP}",
]
#: Longest Contributor Insights rule name (CloudWatch API Reference, "PutInsightRule").
_MAX_RULE_NAME = 128


def rule_body(log_group_name: str, metric: str) -> dict[str, Any]:
    """The Contributor Insights rule (schema ``CloudWatchLogRule`` version 1) that sums ``metric``
    by ``Tenant`` over the EMF documents in ``log_group_name`` that carry both."""
    tenant, value = f"$.{contract.DIMENSION_TENANT}", f"$.{metric}"
    return {
        "Schema": {"Name": "CloudWatchLogRule", "Version": 1},
        "LogGroupNames": [log_group_name],
        "LogFormat": "JSON",
        "Contribution": {
            "Keys": [tenant],
            "ValueOf": value,
            "Filters": [
                {"Match": tenant, "IsPresent": True},
                {"Match": value, "GreaterThan": 0},
            ],
        },
        "AggregateOn": "Sum",
    }


class TenantInsights(Construct):
    """The Contributor Insights rules of ``tenant_insights`` (``Sessions/TenantInsights``).

    Attributes:
        rules: the ``CfnInsightRule`` of each `RULES` entry, by construct id.
    """

    def __init__(self, scope: Construct, construct_id: str, *, log_group: logs.ILogGroup) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.rules: dict[str, cloudwatch.CfnInsightRule] = {}
        for rule_id, metric in RULES:
            self.rules[rule_id] = cloudwatch.CfnInsightRule(
                self,
                rule_id,
                rule_name=Names.unique_resource_name(self, max_length=_MAX_RULE_NAME - 20)
                + f"-{rule_id}",
                rule_state="ENABLED",
                rule_body=stack.to_json_string(rule_body(log_group.log_group_name, metric)),
            )


def add_tenant_metrics(
    scope: Construct,
    cleanup_function: lambda_.Function,
    *,
    dimension: bool,
    insights: bool,
) -> TenantInsights | None:
    """Turn on the opt-in ``Tenant`` dimension (the cleanup's environment) and create the
    Contributor Insights rules; the rules' construct, or ``None`` without ``insights``."""
    if dimension:
        cleanup_function.add_environment(contract.ENV_METRICS_TENANT_DIMENSION, "true")
    if not insights:
        return None
    return TenantInsights(scope, "TenantInsights", log_group=cleanup_function.log_group)


def top_tenants_widget(log_group: logs.ILogGroup, *, width: int, height: int) -> cloudwatch.IWidget:
    """The dashboard's top tenants by sessions cleaned, failed and refused (a Logs Insights
    table over the cleanup's log group; each dashboard refresh runs the query, priced per GB
    scanned)."""
    return cloudwatch.LogQueryWidget(
        title=f"Top {TOP} tenants: sessions cleaned, failed, resources refused",
        log_group_names=[log_group.log_group_name],
        query_lines=TOP_TENANTS_QUERY,
        view=cloudwatch.LogQueryVisualizationType.TABLE,
        width=width,
        height=height,
    )


__all__ = [
    "RULES",
    "TOP_TENANTS_QUERY",
    "TenantInsights",
    "add_tenant_metrics",
    "rule_body",
    "top_tenants_widget",
]
