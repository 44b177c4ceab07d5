"""The tool-session sweep: a scheduled backstop for AgentCore code interpreter and browser
sessions (on whenever a custom ``code_interpreter`` or ``browser`` is set; an AWS-managed tool,
shared by every application of the account, is never listed: `swept_tools`).

The cleanup stops a session's tool sessions when its REMOVE record is cleaned; a REMOVE never
cleaned (a stream outage longer than its 24 hours, an on-failure message never replayed) leaves
them running, and billing, until their own session timeout (up to 8 hours). This sweep is their
backstop, the grant sweep's counterpart (`grant_sweep`), checked by ownership the same way.

What it adds (assembled by `ToolSessionSweep`):

* a function (same code asset and runtime as the cleanup function, handler
  ``session_expiry_runtime.sweeps.tool_session_sweeper.handler``) and its log group, run every
  ``tool_session_sweep_interval`` by an EventBridge rule; asynchronous retries are off (the next
  run is the retry). It runs as the cleanup role, which already holds ``Stop…Session`` on the
  tools, ``dynamodb:GetItem`` and ``UpdateItem`` on the ownership table;
* on the cleanup role: ``bedrock-agentcore:ListCodeInterpreterSessions`` /
  ``ListBrowserSessions`` on the tools given only (Service Authorization Reference, "Actions,
  resources, and condition keys for Amazon Bedrock AgentCore": both on the ``code-interpreter``
  / ``browser`` resource types), and ``dynamodb:GetItem`` on the table (plus decrypt with the
  table's customer managed key, if any);
* an alarm on ``OrphanToolSessionsStopped`` above 0 (the stream path missed a session) and one
  on the function's errors (a session could not be listed, checked or stopped, or a run ran out
  of time; the next run retries).

Each run lists the tools' running sessions (100 a page, both status vocabularies AWS documents)
and stops each one whose ownership record names a session that is gone (past the stream path's
bound: the event source mapping's ``max_record_age`` plus an hour) or expired, once the tool
session is older than the grace period (15 minutes); a session with no ownership record is
never touched (another application's, on a shared tool). See the runtime module
``session_expiry_runtime.sweeps.tool_session_sweeper``. No runtime sessions: AWS has no call that
lists them.

Cost per run: one invocation (256 MB, usually seconds), two list calls per tool (one per status
vocabulary; one is refused) plus one per 100 running sessions, two strongly consistent
``GetItem`` (the record and the session item) per running session older than the grace
period that has a record, and one ``Stop…Session`` per session stopped. At the default hourly
interval with 1,000 running tool sessions: 24 invocations, about 100 list calls and 48,000
read request units a day.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from . import _runtime_contract as contract
from . import grant_sweep, validation
from .agents.agentcore import AgentCoreTargets
from .monitoring import alarms as alarm_defaults
from .scheduled_sweep import SweepFunction, add_sweep_function, sum_metric

#: How often the sweep runs unless ``tool_session_sweep_interval`` says otherwise.
DEFAULT_TOOL_SESSION_SWEEP_INTERVAL = Duration.hours(1)
MIN_TOOL_SESSION_SWEEP_INTERVAL = Duration.minutes(5)
MAX_TOOL_SESSION_SWEEP_INTERVAL = Duration.days(1)
TOOL_SESSION_SWEEPER_MEMORY_SIZE = 256
TOOL_SESSION_SWEEPER_TIMEOUT = Duration.minutes(5)

_LIST_ACTIONS = {
    "code_interpreter": "bedrock-agentcore:ListCodeInterpreterSessions",
    "browser": "bedrock-agentcore:ListBrowserSessions",
}


def pending_environment(max_record_age: Duration) -> dict[str, str]:
    """``SESSION_EXPIRY_TOOL_SESSION_SWEEP_PENDING_SECONDS``: the same bound as the grant
    sweep's (``max_record_age`` plus an hour; the stream's 24 hours for a token)."""
    seconds = grant_sweep.pending_environment(max_record_age)[
        contract.ENV_GRANT_SWEEP_PENDING_SECONDS
    ]
    return {contract.ENV_TOOL_SESSION_SWEEP_PENDING_SECONDS: seconds}


def check_tool_session_sweep_props(has_tools: bool, interval: Duration | None) -> None:
    """Reject a ``tool_session_sweep_interval`` without ``code_interpreter`` or ``browser``,
    outside 5 minutes..1 day, or not whole minutes.

    Raises:
        ValueError: the message names the value and what is expected.
    """
    if interval is None:
        return
    if not has_tools:
        raise ValueError(
            f"tool_session_sweep_interval={validation.shown(interval)} is set without "
            "code_interpreter or browser: expected one of them, or no tool_session_sweep_interval"
        )
    validation.check_duration_range(
        "tool_session_sweep_interval",
        interval,
        minimum=MIN_TOOL_SESSION_SWEEP_INTERVAL,
        maximum=MAX_TOOL_SESSION_SWEEP_INTERVAL,
    )
    if not validation.is_token(interval) and interval.to_seconds(integral=False) % 60:
        raise ValueError(
            f"tool_session_sweep_interval={interval.to_human_string()}: expected a whole number "
            "of minutes (EventBridge rate expressions)"
        )


def swept_tools(targets: AgentCoreTargets) -> AgentCoreTargets:
    """The targets the sweep may list: the custom code interpreter and browser given, never an
    AWS-managed one (``aws.codeinterpreter.v1``/``aws.browser.v1``, accepted with
    ``allow_stopping_shared_aws_managed_tool_sessions``): that tool is shared by every
    application of the account and Region, and the construct does not own it. No runtime: AWS
    lists no runtime sessions."""
    ci, browser = targets.code_interpreter, targets.browser
    return dataclasses.replace(
        targets,
        runtime_arn=None,
        qualifier=None,
        code_interpreter=None if ci is None or ci.aws_managed else ci,
        browser=None if browser is None or browser.aws_managed else browser,
    )


def check_only_shared_tools(interval: Duration | None) -> None:
    """Reject a ``tool_session_sweep_interval`` when every tool given is AWS-managed (no sweep).

    Raises:
        ValueError: the message names the value and what is expected.
    """
    if interval is not None:
        raise ValueError(
            f"tool_session_sweep_interval={validation.shown(interval)} is set, but the only "
            "code_interpreter or browser given is AWS-managed, which the sweep never lists (it "
            "is shared by every application of the account): expected a custom code_interpreter "
            "or browser, or no tool_session_sweep_interval"
        )


def list_statements(tools: AgentCoreTargets) -> list[iam.PolicyStatement]:
    """One ``List…Sessions`` statement per tool given, on that tool only."""
    found = []
    for prop, target in (("code_interpreter", tools.code_interpreter), ("browser", tools.browser)):
        if target is not None:
            found.append(iam.PolicyStatement(actions=[_LIST_ACTIONS[prop]], resources=[target.arn]))
    return found


#: The tool-session sweep's function and schedule.
_FUNCTION = SweepFunction(
    handler=contract.TOOL_SESSION_SWEEPER_HANDLER,
    description="Stops AgentCore tool sessions of gone or expired sessions (cdk-session-expiry)",
    schedule_description="Runs the AgentCore tool-session sweep (cdk-session-expiry)",
    timeout=TOOL_SESSION_SWEEPER_TIMEOUT,
    memory_size=TOOL_SESSION_SWEEPER_MEMORY_SIZE,
)


class ToolSessionSweep(Construct):
    """The scheduled tool-session sweep of one ``SessionExpiry`` (see the module docstring).

    Args:
        table: the session table.
        tools: the tools to sweep (`swept_tools`: a custom code interpreter, browser or both).
        role: the cleanup role (holds the Stop actions and the ownership table's access).
        interval: how often the sweep runs.
        environment: the runtime variables (table, attribute names, tool identifiers,
            ownership table, pending bound, metrics namespace, dry run).
        log_retention: retention of the sweep's log group.
        metrics_namespace: namespace of the runtime's embedded metrics.
        alarm_actions: actions of the two alarms.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table: dynamodb.ITable,
        tools: AgentCoreTargets,
        role: iam.IRole,
        interval: Duration,
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays,
        metrics_namespace: str,
        alarm_actions: Sequence[cloudwatch.IAlarmAction],
    ) -> None:
        super().__init__(scope, id)
        self.interval = interval
        self.metrics_namespace = metrics_namespace
        #: The tool-session sweep function (runs as the cleanup role) and the EventBridge rule
        #: that runs it every ``interval``.
        self.function, self.schedule = add_sweep_function(
            self,
            _FUNCTION,
            table=table,
            role=role,
            interval=interval,
            environment=environment,
            log_retention=log_retention,
            statements=list_statements(tools),
        )
        #: ``OrphanToolSessionsStopped`` above 0: the stream path missed a session.
        self.orphan_tool_sessions_alarm = alarm_defaults.orphan_tool_sessions_alarm(
            self, metric=self.metric_orphan_tool_sessions_stopped(), actions=alarm_actions
        )
        #: Any error of the sweep function (a call failed, or a run ran out of time).
        self.errors_alarm = alarm_defaults.errors_alarm(
            self,
            function=self.function,
            actions=alarm_actions,
            description=alarm_defaults.TOOL_SESSION_SWEEPER_ERRORS_DESCRIPTION,
        )

    def metric_orphan_tool_sessions_stopped(self, **options: Any) -> cloudwatch.Metric:
        """``OrphanToolSessionsStopped`` (embedded metric): tool sessions of gone sessions
        stopped, Sum."""
        return self._metric(contract.METRIC_ORPHAN_TOOL_SESSIONS_STOPPED, options)

    def metric_expired_session_tool_sessions_stopped(self, **options: Any) -> cloudwatch.Metric:
        """``ExpiredSessionToolSessionsStopped`` (embedded metric): tool sessions of expired
        sessions not yet deleted by time to live, stopped early, Sum."""
        return self._metric(contract.METRIC_EXPIRED_TOOL_SESSIONS_STOPPED, options)

    def metric_tool_session_sweep_failures(self, **options: Any) -> cloudwatch.Metric:
        """``ToolSessionSweepFailures`` (embedded metric): calls that failed (retried next
        run), Sum."""
        return self._metric(contract.METRIC_TOOL_SESSION_SWEEP_FAILURES, options)

    def metric_tool_sessions_checked(self, **options: Any) -> cloudwatch.Metric:
        """``ToolSessionsChecked`` (embedded metric): running tool sessions the runs checked,
        Sum."""
        return self._metric(contract.METRIC_TOOL_SESSIONS_CHECKED, options)

    def _metric(self, name: str, options: Mapping[str, Any]) -> cloudwatch.Metric:
        return sum_metric(self.metrics_namespace, name, options)
