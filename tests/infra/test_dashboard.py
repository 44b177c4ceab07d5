"""The dashboard and ``widgets()``: read back from the synthesized template, each graph shows
the metrics the runtime emits (names, dimensions, statistics) and the alarms' status."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, Stack, assertions
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_s3 as s3

from cdk_session_expiry import SessionExpiry
from cdk_session_expiry import _runtime_contract as contract

from .helpers import resources_of

ENV = Environment(account="123456789012", region="eu-west-1")
NS = contract.DEFAULT_METRICS_NAMESPACE


def _body(template: dict[str, Any]) -> dict[str, Any]:
    """The dashboard's JSON body, with each CloudFormation reference as ``<Ref:...>`` text."""
    (dashboard,) = resources_of(template, "AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    text = "".join(part if isinstance(part, str) else _placeholder(part) for part in parts)
    return json.loads(text)  # type: ignore[no-any-return]


def _placeholder(reference: dict[str, Any]) -> str:
    ((function, argument),) = reference.items()
    name = ".".join(argument) if isinstance(argument, list) else str(argument)
    return f"<{function}:{name}>"


def _graphs(body: dict[str, Any]) -> dict[str, list[list[Any]]]:
    return {
        w["properties"]["title"]: w["properties"]["metrics"]
        for w in body["widgets"]
        if w["type"] == "metric"
    }


class Board:
    def __init__(self, cdk_context: dict[str, Any], **props: Any) -> None:
        self.stack = Stack(App(context=cdk_context), "Test", env=ENV)
        self.sessions = SessionExpiry(self.stack, "Sessions", **props)
        self.dashboard = self.sessions.add_dashboard(dashboard_name="sessions")
        self.template = assertions.Template.from_stack(self.stack).to_json()
        self.body = _body(self.template)
        self.graphs = _graphs(self.body)


@pytest.fixture(scope="module")
def with_sweeper(cdk_context: dict[str, Any]) -> Board:
    return Board(cdk_context, expiry_sweep_interval=Duration.minutes(5))


def _named(metrics: list[list[Any]]) -> list[tuple[str, ...]]:
    """(namespace, name, dimension name/value pairs..., stat) of each metric line."""
    lines = []
    for line in metrics:
        *ids, options = line if isinstance(line[-1], dict) else (*line, {})
        lines.append((*(str(i) for i in ids), options.get("stat", "")))
    return lines


def test_no_dashboard_unless_asked(cdk_context: dict[str, Any]) -> None:
    stack = Stack(App(context=cdk_context), "Test", env=ENV)
    SessionExpiry(stack, "Sessions")
    assertions.Template.from_stack(stack).resource_count_is("AWS::CloudWatch::Dashboard", 0)


def test_dashboard_has_its_name_and_a_logical_id_under_the_construct(with_sweeper: Board) -> None:
    (logical_id,) = resources_of(with_sweeper.template, "AWS::CloudWatch::Dashboard")
    assert logical_id.startswith("SessionsDashboard")
    assert with_sweeper.dashboard.node.path == "Test/Sessions/Dashboard"


def test_sessions_cleaned_by_every_reason(with_sweeper: Board) -> None:
    lines = _named(with_sweeper.graphs["Sessions cleaned by reason"])
    assert lines == [
        (NS, contract.METRIC_SESSIONS_CLEANED, contract.DIMENSION_REASON, reason, "Sum")
        for reason in contract.REASONS
    ]


def test_ttl_lag_percentiles_and_maximum(with_sweeper: Board) -> None:
    title = "TTL lag (seconds after the TTL that DynamoDB deleted)"
    assert _named(with_sweeper.graphs[title]) == [
        (NS, contract.METRIC_TTL_LAG, stat) for stat in ("p50", "p99", "Maximum")
    ]


def test_failures_by_every_action_and_skips_by_every_cause(with_sweeper: Board) -> None:
    assert _named(with_sweeper.graphs["Cleanup failures by action"]) == [
        (NS, contract.METRIC_CLEANUP_FAILURES, contract.DIMENSION_ACTION, action, "Sum")
        for action in contract.ACTIONS
    ]
    assert _named(with_sweeper.graphs["Records skipped by cause"]) == [
        *(
            (NS, contract.METRIC_RECORDS_SKIPPED, contract.DIMENSION_CAUSE, cause, "Sum")
            for cause in contract.CAUSES
        ),
        (NS, contract.METRIC_GRANTS_REFUSED, "Sum"),
    ]


def test_resources_refused_by_every_refusal_the_alarmed_ones_labelled(with_sweeper: Board) -> None:
    title = "Resources refused by reason (ownership records)"
    lines = with_sweeper.graphs[title]
    assert _named(lines) == [
        (NS, contract.METRIC_RESOURCES_REFUSED, contract.DIMENSION_REFUSAL, refusal, "Sum")
        for refusal in contract.REFUSALS
    ]
    labels = {line[-1]["label"] for line in lines}
    assert labels == {
        "NotOwned (alarmed)",
        "Unclaimed (alarmed)",
        "Superseded",
        "Legacy",
        "ClaimExpired",
    }


def test_iterator_age_scratch_and_on_failure_queue(with_sweeper: Board) -> None:
    (iterator_age,) = _named(with_sweeper.graphs["Iterator age (ms), maximum"])
    assert iterator_age[:3] == ("AWS/Lambda", "IteratorAge", "FunctionName")
    assert iterator_age[-1] == "Maximum"
    assert _named(with_sweeper.graphs["Scratch objects deleted"]) == [
        (NS, contract.METRIC_OBJECTS_DELETED, "Sum"),
        (NS, contract.METRIC_PREFIXES_REFUSED, "Sum"),
    ]
    (queue,) = _named(with_sweeper.graphs["On-failure destination"])
    assert queue[:3] == ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName")
    assert queue[-1] == "Maximum"


def test_sweeper_and_ttl_deletions_and_sweep_lag(with_sweeper: Board) -> None:
    lines = _named(with_sweeper.graphs["Sweeper and time to live"])
    assert lines[0][:3] == ("AWS/DynamoDB", "TimeToLiveDeletedItemCount", "TableName")
    assert lines[1:] == [
        (NS, contract.METRIC_SESSIONS_SWEPT, "Sum"),
        (NS, contract.METRIC_SWEEP_SKIPPED, "Sum"),
        (NS, contract.METRIC_SWEEP_FAILURES, "Sum"),
    ]
    assert _named(with_sweeper.graphs["Expiry to sweep (seconds), swept sessions"]) == [
        (NS, contract.METRIC_SWEEP_LAG, stat) for stat in ("p50", "p99", "Maximum")
    ]


def test_alarm_status_lists_every_alarm(with_sweeper: Board) -> None:
    (status,) = [w for w in with_sweeper.body["widgets"] if w["type"] == "alarm"]
    alarms = status["properties"]["alarms"]
    assert len(alarms) == len(with_sweeper.sessions.alarms) == 8
    ids = {
        with_sweeper.stack.get_logical_id(a.node.default_child)
        for a in with_sweeper.sessions.alarms
    }  # type: ignore[arg-type]
    assert all(any(i in str(a) for i in ids) for a in alarms)


def test_every_graph_uses_the_period(cdk_context: dict[str, Any]) -> None:
    board = Board(cdk_context)
    for widget in board.body["widgets"]:
        if widget["type"] == "metric":
            for line in widget["properties"]["metrics"]:
                assert line[-1].get("period", 300) == 300
    assert "Expiry to sweep (seconds), swept sessions" not in board.graphs
    assert _named(board.graphs["Sweeper and time to live"])[1:] == []


def test_s3_on_failure_destination_graphs_delivered_records(cdk_context: dict[str, Any]) -> None:
    stack = Stack(App(context=cdk_context), "Test", env=ENV)
    sessions = SessionExpiry(
        stack, "Sessions", failure_destination_bucket=s3.Bucket(stack, "Failures")
    )
    graph = next(
        w
        for w in sessions.widgets(period=Duration.minutes(1))
        if isinstance(w, cloudwatch.GraphWidget)
        and stack.resolve(w.to_json())[0]["properties"]["title"] == "On-failure destination"
    )
    (line,) = stack.resolve(graph.to_json())[0]["properties"]["metrics"]
    assert line[:3] == [
        "AWS/Lambda",
        "OnFailureDestinationDeliveredEventCount",
        "EventSourceMappingUUID",
    ]
    assert line[-1]["period"] == 60
