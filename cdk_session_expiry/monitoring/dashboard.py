"""CloudWatch dashboard widgets of ``SessionExpiry``: what the alarms watch, as a picture.

``SessionExpiry.widgets()`` returns them for an application's own dashboard;
``SessionExpiry.add_dashboard()`` puts them on a dashboard of their own (opt-in: nothing is
created unless it is called). Each widget graphs metrics the construct's ``metric_*`` methods
name, so the widgets and the runtime cannot disagree on names or dimensions:

1. the alarms' status (every alarm of ``SessionExpiry.alarms``);
2. sessions cleaned, one line per reason (``SessionsCleaned`` by ``Reason``);
3. TTL lag, p50 / p99 / maximum (``TtlLagSeconds``: how late DynamoDB deleted);
4. the event source mapping's iterator age, maximum (AWS/Lambda ``IteratorAge``);
5. cleanup failures, one line per action (``CleanupFailures`` by ``Action``);
6. records skipped, one line per cause (``RecordsSkipped`` by ``Cause``), and grants refused
   (``GrantsRefused``);
7. resources refused by their ownership records, one line per reason (``ResourcesRefused`` by
   ``Refusal``; the alarmed ``NotOwned`` and ``Unclaimed`` labelled so);
8. scratch objects deleted and scratch prefixes refused;
9. the on-failure destination: messages visible in the queue (SQS), or records delivered
   (``OnFailureDestinationDeliveredEventCount``, S3);
10. sweeper and backstop: sessions deleted by time to live (``TimeToLiveDeletedItemCount``) and,
    with the expiry sweeper, sessions swept / skipped / failed;
11. with the expiry sweeper, expiry to sweep of swept sessions, p50 / p99 / maximum
    (``SweepLagSeconds``; the cleanup follows within the stream's delivery time);
12. how long the cleanup has been paused (``CleanupPausedSeconds``, with the paused-cleanup
    alarm's threshold as a line) and, with ``circuit_breaker``, the breaker's state on the right
    axis (``CircuitBreakerState``: 0 closed, 1 half-open, 2 open);
13. the top 10 tenants by sessions cleaned, failed and resources refused: a CloudWatch Logs
    Insights table over the cleanup's log group, read from the ``Tenant`` property of the EMF
    documents (`tenant_metrics`; each refresh runs the query, priced per GB scanned).

Embedded metrics exist only once the runtime emitted them: a line with no data is a reason,
action or cause that has not happened yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from .. import _runtime_contract as contract
from .. import failure_destination, tenant_metrics

if TYPE_CHECKING:
    from ..construct import SessionExpiry

#: Default period of every graph: the alarms' period.
DEFAULT_PERIOD = Duration.minutes(5)
#: Dashboard grid: 24 units wide; two graphs a row.
_WIDTH = 12
_HEIGHT = 6
_PERCENTILES = (("p50", "p50"), ("p99", "p99"), (cloudwatch.Stats.MAXIMUM, "max"))


def widgets(
    sessions: SessionExpiry, *, period: Duration = DEFAULT_PERIOD
) -> list[cloudwatch.IWidget]:
    """The construct's widgets, in the order of the module docstring (see there)."""
    graphs: list[cloudwatch.IWidget] = [
        _graph(
            "Sessions cleaned by reason",
            [
                sessions.metric_sessions_cleaned(reason=reason, period=period, label=reason)
                for reason in contract.REASONS
            ],
        ),
        _graph(
            "TTL lag (seconds after the TTL that DynamoDB deleted)",
            [
                sessions.metric_ttl_lag(statistic=statistic, period=period, label=label)
                for statistic, label in _PERCENTILES
            ],
        ),
        _graph(
            "Iterator age (ms), maximum",
            [sessions.metric_iterator_age(period=period, label="iterator age")],
        ),
        _graph(
            "Cleanup failures by action",
            [
                sessions.metric_cleanup_failures(action=action, period=period, label=action)
                for action in (*contract.ACTIONS, *(step.name for step in sessions.custom_steps))
            ],
        ),
        _graph(
            "Records skipped by cause",
            [
                *(
                    sessions.metric_records_skipped(cause=cause, period=period, label=cause)
                    for cause in contract.CAUSES
                ),
                # Skipped for good too: a grant the record could not be shown to own.
                sessions.metric_grants_refused(period=period, label="grants refused"),
            ],
        ),
        _refused_graph(sessions, period),
        _graph(
            "Scratch objects deleted",
            [
                sessions.metric_scratch_objects_deleted(period=period, label="objects deleted"),
                sessions.metric_scratch_prefixes_refused(period=period, label="prefixes refused"),
            ],
        ),
        _graph("On-failure destination", [_on_failure_metric(sessions, period)]),
        _graph("Sweeper and time to live", _deletion_metrics(sessions, period)),
    ]
    sweeper = sessions.expiry_sweeper
    if sweeper is not None:
        graphs.append(
            _graph(
                "Expiry to sweep (seconds), swept sessions",
                [
                    sweeper.metric_sweep_lag(statistic=statistic, period=period, label=label)
                    for statistic, label in _PERCENTILES
                ],
            )
        )
    graphs.append(_paused_graph(sessions, period))
    graphs.append(
        tenant_metrics.top_tenants_widget(
            sessions.cleanup_function.log_group, width=_WIDTH, height=_HEIGHT
        )
    )
    status = cloudwatch.AlarmStatusWidget(
        title="Session expiry alarms", alarms=list(sessions.alarms), width=24, height=4
    )
    return [status, *graphs]


def add_dashboard(
    sessions: SessionExpiry,
    construct_id: str,
    *,
    dashboard_name: str | None = None,
    period: Duration = DEFAULT_PERIOD,
) -> cloudwatch.Dashboard:
    """A dashboard (a child of ``sessions``) holding `widgets`, two graphs a row."""
    board = cloudwatch.Dashboard(
        sessions, construct_id, dashboard_name=dashboard_name, default_interval=Duration.days(1)
    )
    status, *graphs = widgets(sessions, period=period)
    board.add_widgets(status)
    for i in range(0, len(graphs), 2):
        board.add_widgets(*graphs[i : i + 2])
    return board


def _graph(title: str, metrics: list[cloudwatch.IMetric]) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(title=title, left=metrics, width=_WIDTH, height=_HEIGHT)


def _paused_graph(sessions: SessionExpiry, period: Duration) -> cloudwatch.GraphWidget:
    """``CleanupPausedSeconds`` against the alarm's threshold; the breaker's state beside it."""
    breaker = sessions.circuit_breaker
    right: list[cloudwatch.IMetric] = []
    if breaker is not None:
        right.append(
            breaker.metric_circuit_breaker_state(
                period=period, label="circuit breaker (0 closed, 1 half-open, 2 open)"
            )
        )
    return cloudwatch.GraphWidget(
        title="Cleanup paused (seconds)" + (" and circuit breaker" if breaker else ""),
        left=[sessions.metric_cleanup_paused_seconds(period=period, label="paused")],
        left_annotations=[sessions.cleanup_paused_alarm.to_annotation()],
        right=right,
        width=_WIDTH,
        height=_HEIGHT,
    )


def _refused_graph(sessions: SessionExpiry, period: Duration) -> cloudwatch.GraphWidget:
    """``ResourcesRefused`` by ``Refusal``, the alarmed reasons labelled so."""
    return _graph(
        "Resources refused by reason (ownership records)",
        [
            sessions.metric_resources_refused(
                refusal=refusal,
                period=period,
                label=f"{refusal} (alarmed)" if refusal in contract.ALARMED_REFUSALS else refusal,
            )
            for refusal in contract.REFUSALS
        ],
    )


def _on_failure_metric(sessions: SessionExpiry, period: Duration) -> cloudwatch.IMetric:
    if sessions.failure_queue is not None:
        return sessions.failure_queue.metric_approximate_number_of_messages_visible(
            period=period, statistic=cloudwatch.Stats.MAXIMUM, label="messages visible (queue)"
        )
    return failure_destination.metric_delivered(sessions.event_source_mapping).with_(
        period=period, label="records delivered (S3)"
    )


def _deletion_metrics(sessions: SessionExpiry, period: Duration) -> list[cloudwatch.IMetric]:
    metrics: list[cloudwatch.IMetric] = [
        sessions.metric_time_to_live_deleted_item_count(period=period, label="deleted by TTL")
    ]
    sweeper = sessions.expiry_sweeper
    if sweeper is not None:
        metrics += [
            sweeper.metric_sessions_swept(period=period, label="swept"),
            sweeper.metric_sweep_skipped(period=period, label="sweep skipped"),
            sweeper.metric_sweep_failures(period=period, label="sweep failures"),
        ]
    return metrics


__all__ = ["DEFAULT_PERIOD", "add_dashboard", "widgets"]
