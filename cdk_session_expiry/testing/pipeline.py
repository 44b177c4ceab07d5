"""The deployed-shape cleanup pipeline, run locally: table → stream → mapping → function."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from session_expiry_runtime.core.ownership import ATTR_GONE_SINCE

from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.testing import app_function
from cdk_session_expiry.testing.cdk_cli import CdkCli
from cdk_session_expiry.testing.deployment import DeployedFunction, DeployedStack, LocalLambda
from cdk_session_expiry.testing.emulator import LocalEmulator
from cdk_session_expiry.testing.failure_replay import ReplayResult, replay_from_destination
from cdk_session_expiry.testing.poller import (
    EventSourceMappingConfig,
    EventSourceMappingPoller,
    Handler,
    Invocation,
    PollReport,
)
from cdk_session_expiry.testing.schedules import Schedule, ScheduleRunner


@dataclass
class EmfMetrics:
    """Metric values the function wrote in CloudWatch embedded metric format, summed.

    ``values[(metric_name, ((dimension, value), ...))]`` is the sum over all log lines.
    """

    values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)

    def add_log_line(self, line: str) -> None:
        """Add the metrics of one log line (ignored unless it is an EMF document)."""
        if "_aws" not in line:
            return
        try:
            doc = json.loads(line)
        except ValueError:
            return
        meta = doc.get("_aws") if isinstance(doc, dict) else None
        if not isinstance(meta, dict):
            return
        for directive in meta.get("CloudWatchMetrics") or []:
            dimension_sets = directive.get("Dimensions") or [[]]
            for metric in directive.get("Metrics") or []:
                name = metric.get("Name")
                value = doc.get(name)
                values = value if isinstance(value, list) else [value]
                total = sum(float(v) for v in values if isinstance(v, (int, float)))
                for dims in dimension_sets:
                    key = tuple((d, str(doc.get(d, ""))) for d in dims)
                    self.values[(name, key)] = self.values.get((name, key), 0.0) + total

    def total(self, name: str, **dimensions: str) -> float:
        """Sum of ``name`` over every dimension set that includes ``dimensions``."""
        wanted = set(dimensions.items())
        return sum(v for (n, dims), v in self.values.items() if n == name and wanted <= set(dims))

    def by_dimension(self, name: str, dimension: str) -> dict[str, float]:
        """``{dimension value: sum}`` of ``name`` over the dimension sets ``[dimension]``."""
        out: dict[str, float] = {}
        for (n, dims), v in self.values.items():
            d = dict(dims)
            if n == name and dimension in d and len(d) == 1:
                out[d[dimension]] = out.get(d[dimension], 0.0) + v
        return out


class LocalPipeline:
    """A deployed stack's stream-to-function pipeline, driven locally.

    Everything is read back from the emulator: the table and its stream ARN, the event source
    mapping (filters, batch size, partial batch response, bisect, retries, record age,
    on-failure destination), and the function's configuration and code asset. The function's
    handler runs from that code asset in its own process
    ([`LocalLambda`][cdk_session_expiry.testing.LocalLambda]), and
    [`run_cleanup`][cdk_session_expiry.testing.LocalPipeline.run_cleanup] delivers the stream to it
    with the mapping's semantics
    ([`EventSourceMappingPoller`][cdk_session_expiry.testing.EventSourceMappingPoller]).

    Build it with [`deploy`][cdk_session_expiry.testing.LocalPipeline.deploy] (bootstrap and deploy
    a CDK app with the CDK CLI) or
    [`from_stack`][cdk_session_expiry.testing.LocalPipeline.from_stack] (a stack already deployed
    into ``emulator``).
    """

    def __init__(
        self,
        emulator: LocalEmulator,
        stack: DeployedStack,
        mapping: EventSourceMappingConfig,
        function: DeployedFunction,
        *,
        table_logical_id: str,
        owns_emulator: bool = False,
    ) -> None:
        self.emulator = emulator
        self.stack = stack
        self.mapping = mapping
        self.function = function
        self.table_logical_id = table_logical_id
        self.table_name = stack.resources[table_logical_id][1]
        self.metrics = EmfMetrics()
        self.logs: list[str] = []
        self._owns_emulator = owns_emulator
        self._lambda: LocalLambda | None = None
        self._functions: dict[str, LocalLambda] = {}
        self._poller: EventSourceMappingPoller | None = None
        self._log_listeners: list[Callable[[str], None]] = []
        self._schedules: list[ScheduleRunner] = []

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def deploy(
        cls,
        app_dir: Path | str,
        *,
        emulator: LocalEmulator | None = None,
        stack: str | None = None,
        app: str | None = None,
        context: Mapping[str, str] | None = None,
        function_logical_id: str | None = None,
    ) -> LocalPipeline:
        """Start an emulator (unless given), ``cdk bootstrap`` and ``cdk deploy`` the app in
        ``app_dir`` into it with the CDK CLI, and read the pipeline back.

        Args:
            app_dir: directory holding the app's ``cdk.json``.
            stack: the stack holding the pipeline. Default: the only deployed stack with a
                DynamoDB Streams event source mapping.
            app: ``--app`` override. context: ``--context`` values.
            function_logical_id: choose among several mappings by their function.

        Raises:
            CdkAppNotFoundError: ``app_dir`` does not exist or has no ``cdk.json``.
            CdkCliError: no CDK CLI, or bootstrap or deploy failed. LookupError: no pipeline
                found.
        """
        owns = emulator is None
        emu = emulator or LocalEmulator().start()
        try:
            cli = CdkCli(emu, app_dir, app=app, context=context)
            try:
                cli.bootstrap()
                outputs = cli.deploy([stack] if stack else [])
            finally:
                shutil.rmtree(cli.output_dir, ignore_errors=True)
            names = [stack] if stack else list(outputs) or _deployed_stack_names(emu)
            pipeline = cls._find(emu, names, function_logical_id)
            pipeline._owns_emulator = owns
            return pipeline
        except BaseException:
            if owns:
                emu.stop()
            raise

    @classmethod
    def from_stack(
        cls, emulator: LocalEmulator, stack_name: str, *, function_logical_id: str | None = None
    ) -> LocalPipeline:
        """Read the pipeline of ``stack_name``, already deployed into ``emulator``."""
        return cls._find(emulator, [stack_name], function_logical_id)

    @classmethod
    def _find(
        cls, emulator: LocalEmulator, stack_names: Sequence[str], function_logical_id: str | None
    ) -> LocalPipeline:
        candidates = []
        for name in stack_names:
            stack = DeployedStack.read(emulator, name)
            functions = stack.physical_ids("AWS::Lambda::Function")
            tables = stack.physical_ids("AWS::DynamoDB::Table")
            for mapping in stack.event_source_mappings():
                fn_name = mapping.function_arn.rsplit(":", 1)[-1]
                fn_lid = next((lid for lid, pid in functions.items() if pid == fn_name), None)
                table_name = mapping.event_source_arn.split(":table/", 1)[1].split("/stream/")[0]
                table_lid = next((lid for lid, pid in tables.items() if pid == table_name), None)
                if table_lid is None:
                    continue
                if function_logical_id and fn_lid != function_logical_id:
                    continue
                candidates.append((stack, mapping, table_lid))
        if len(candidates) != 1:
            found = [(s.name, m.function_arn) for s, m, _ in candidates]
            raise LookupError(
                f"expected exactly one DynamoDB Streams event source mapping on a table of "
                f"stacks {list(stack_names)}, found {found}; pass stack=/function_logical_id="
            )
        stack, mapping, table_lid = candidates[0]
        function = DeployedFunction.read(emulator, mapping.function_arn)
        return cls(emulator, stack, mapping, function, table_logical_id=table_lid)

    @property
    def unmodelled_resource_types(self) -> list[str]:
        """Resource types deployed into the emulator that moto's CloudFormation does not
        create, e.g. ``AWS::CloudWatch::Alarm``; see ``LocalEmulator.unmodelled_resource_types``."""
        return sorted(self.emulator.unmodelled_resource_types)

    # -- what application code needs -----------------------------------------------------------
    @property
    def ttl_attribute(self) -> str:
        """The table's TTL attribute, from the deployed template (moto ignores TTL settings)."""
        name = self.stack.ttl_attribute(self.table_logical_id)
        if name is None:
            raise LookupError(f"table {self.table_logical_id} has no TimeToLiveSpecification")
        return name

    @property
    def stream_arn(self) -> str:
        """The ARN of the session table's stream the mapping reads."""
        return self.mapping.event_source_arn

    def session_environment(self, function: str | None = None) -> dict[str, str]:
        """The environment of the application function the tests stand in for, as deployed
        (what ``SessionStore.from_env()`` and the function's own code read).

        Which function (`cdk_session_expiry.testing.app_function`): ``function`` when
        given; otherwise the one function given ``SessionExpiry.grant_session_access``;
        otherwise, with none, the variables ``SessionExpiry.session_environment()`` sets,
        rebuilt from the cleanup function, the expiry sweeper and the cleanup role (without
        ``SESSION_EXPIRY_MAX_SESSION_LIFETIME_SECONDS``: the runtime's default applies).

        Args:
            function: a construct path (``"MyStack/Connect"`` or its end ``"Connect"``), a
                logical id or a function name. Default: the rule above.

        Raises:
            AppFunctionError: ``function`` names no function of the stack, or several; or no
                ``function`` and several functions given session access have different
                environments (the message names them).
        """
        functions = app_function.stack_functions(self.stack)
        chosen = app_function.choose(functions, table_name=self.table_name, selector=function)
        if chosen is not None:
            return dict(chosen.environment)
        cleanup = next(f for f in functions if f.name == self.function.name)
        return app_function.derived_session_environment(
            functions, table_name=self.table_name, cleanup=cleanup
        )

    def application_env(self, function: str | None = None) -> dict[str, str]:
        """Environment for application code in tests:
        [`session_environment`][cdk_session_expiry.testing.LocalPipeline.session_environment] (of
        ``function``, same rule) plus the emulator's endpoint, Region and fake credentials
        (``AWS_ENDPOINT_URL`` and friends).

        A WebSocket management endpoint (``SESSION_EXPIRY_WEBSOCKET_ENDPOINT``, with which
        ``attach_connection`` closes earlier connections) is pointed at the emulator, which
        answers the API Gateway Management API at its root (as for the deployed functions).
        With ``archive_bucket``, the archive's bucket and prefix
        (``SESSION_EXPIRY_ARCHIVE_BUCKET``, ``SESSION_EXPIRY_ARCHIVE_PREFIX``, the cleanup
        function's) are added unless the function has its own, so a test can read the archive.

        Raises:
            AppFunctionError: see
                [`session_environment`][cdk_session_expiry.testing.LocalPipeline.session_environment].
        """
        env = self.session_environment(function)
        cleanup = next(
            f for f in app_function.stack_functions(self.stack) if f.name == self.function.name
        )
        for name, value in app_function.archive_environment(cleanup).items():
            env.setdefault(name, value)
        if env.get(contract.ENV_WEBSOCKET_ENDPOINT):
            env[contract.ENV_WEBSOCKET_ENDPOINT] = self.emulator.endpoint_url
        return {**env, **self.emulator.aws_env()}

    # -- TTL --------------------------------------------------------------------------------------
    def ttl_delete(self, key: Mapping[str, Any], *, now: float | None = None) -> str | None:
        """Delete one item the way the TTL service does
        ([`LocalEmulator.ttl_delete`][cdk_session_expiry.testing.LocalEmulator.ttl_delete])."""
        return self.emulator.ttl_delete(
            self.table_name, key, ttl_attribute=self.ttl_attribute, now=now
        )

    def expire_due(self, *, now: float | None = None) -> list[str]:
        """Run DynamoDB's TTL sweep once: TTL-delete every item whose TTL attribute is a Number
        at or before ``now``. Returns the REMOVE records' sequence numbers."""
        now_s = int(time.time() if now is None else now)
        ddb = self.emulator.client("dynamodb")
        keys = [
            a["AttributeName"]
            for a in ddb.describe_table(TableName=self.table_name)["Table"]["KeySchema"]
        ]
        names = {f"#k{i}": k for i, k in enumerate(keys)}
        names["#t"] = self.ttl_attribute
        sequence_numbers = []
        for item in self._scan(ddb, names, now_s):
            seq = self.ttl_delete({k: item[k] for k in keys}, now=now_s)
            if seq is not None:
                sequence_numbers.append(seq)
        return sequence_numbers

    def _scan(self, ddb: Any, names: dict[str, str], now_s: int) -> Iterator[dict[str, Any]]:
        projection = ", ".join(names)
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "FilterExpression": "attribute_type(#t, :n) AND #t <= :now",
            "ProjectionExpression": projection,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {":now": {"N": str(now_s)}, ":n": {"S": "N"}},
        }
        while True:
            page = ddb.scan(**kwargs)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # -- running the cleanup ---------------------------------------------------------------------
    def on_log(self, listener: Callable[[str], None]) -> None:
        """Call ``listener`` with every log line of the function."""
        self._log_listeners.append(listener)

    def _log(self, line: str) -> None:
        self.logs.append(line)
        self.metrics.add_log_line(line)
        for listener in self._log_listeners:
            listener(line)

    def local_lambda(self, env_overrides: Mapping[str, str] | None = None) -> LocalLambda:
        """The deployed handler running in its worker process (started on first use).

        Args:
            env_overrides: variables on top of the deployed environment (for example
                ``SESSION_EXPIRY_TABLE_NAME``, which the construct sets on the cleanup of a
                Kinesis change source, to feed it Kinesis records); default none. Given, a new
                worker is started for the caller, who closes it (``close()``); its log lines
                count into `metrics` like the deployed worker's.
        """
        if env_overrides:
            return self.function.start(env_overrides=env_overrides, on_log=self._log)
        if self._lambda is None:
            self._lambda = self.function.start(on_log=self._log)
        return self._lambda

    def poller(
        self,
        *,
        handler: Handler | None = None,
        clock: Callable[[], float] = time.time,
        on_invocation: Callable[[Invocation], None] | None = None,
        stall_after_attempts: int = 50,
    ) -> EventSourceMappingPoller:
        """A new poller for the deployed mapping, delivering to ``handler`` (default: the
        deployed function's code)."""
        return EventSourceMappingPoller(
            self.mapping,
            handler or self.local_lambda(),
            clients=self.emulator.client,
            clock=clock,
            function_timeout_ms=self.function.timeout_ms,
            stall_after_attempts=stall_after_attempts,
            on_invocation=on_invocation,
        )

    def run_cleanup(
        self, *, on_invocation: Callable[[Invocation], None] | None = None
    ) -> PollReport:
        """Deliver every stream record written since the last call to the deployed function,
        with the deployed mapping's semantics. Returns the cumulative report."""
        if self._poller is None:
            self._poller = self.poller(on_invocation=on_invocation)
        elif on_invocation is not None:
            self._poller._on_invocation = on_invocation
        return self._poller.poll()

    def start_cleanup(
        self,
        *,
        poll_interval: float = 0.25,
        on_invocation: Callable[[Invocation], None] | None = None,
    ) -> EventSourceMappingPoller:
        """Continuous mode: the deployed mapping's poller delivers on its own thread every
        ``poll_interval`` seconds (Lambda polls about four times a second) while the
        application and the sweeper run;
        [`stop_cleanup`][cdk_session_expiry.testing.LocalPipeline.stop_cleanup] ends it.
        [`run_cleanup`][cdk_session_expiry.testing.LocalPipeline.run_cleanup] may
        still be called meanwhile (polls are serialised). Returns the poller (its
        ``wait_until`` waits for a delivery without sleeping)."""
        if self._poller is None:
            self._poller = self.poller(on_invocation=on_invocation)
        elif on_invocation is not None:
            self._poller._on_invocation = on_invocation
        return self._poller.start(poll_interval=poll_interval)

    def stop_cleanup(self, *, timeout: float = 30.0) -> PollReport:
        """Stop continuous mode after the invocation in progress; the cumulative report.

        Raises:
            TimeoutError, ShardBlocked: see
                [`EventSourceMappingPoller.stop`][cdk_session_expiry.testing.EventSourceMappingPoller.stop].
        """
        if self._poller is None:
            return PollReport()
        return self._poller.stop(timeout=timeout)

    def refresh(self) -> None:
        """Read the mapping and the cleanup function back from the emulator again.

        After ``UpdateEventSourceMapping`` (e.g. ``Enabled=False``, the kill switch) or
        ``UpdateFunctionConfiguration`` (e.g. ``SESSION_EXPIRY_DRY_RUN``), the next
        [`run_cleanup`][cdk_session_expiry.testing.LocalPipeline.run_cleanup] follows the new
        settings: a disabled mapping delivers nothing and
        keeps its position; a changed function configuration starts a new worker process from
        the code asset with the new environment (like a new execution environment). The poller's
        positions and report carry on.
        """
        mapping = next(
            (m for m in self.stack.event_source_mappings() if m.uuid == self.mapping.uuid), None
        )
        if mapping is None:
            raise LookupError(f"event source mapping {self.mapping.uuid} is gone")
        self.mapping = mapping
        function = DeployedFunction.read(self.emulator, self.mapping.function_arn)
        if function.configuration != self.function.configuration:
            if self._lambda is not None:
                self._lambda.close()
                self._lambda = None
            self.function.remove_task_root()
            self.function = function
        if self._poller is not None:
            self._poller.config = self.mapping
            self._poller.handler = self.local_lambda()

    def _end_activity(self) -> None:
        """Stop what runs on threads (continuous cleanup, schedules); the pytest plugin calls
        it when a test or a module ends.

        Raises:
            ShardBlocked: continuous mode had stopped at a batch that kept failing.
        """
        self.stop_schedules()
        if self._poller is not None and self._poller.running:
            self._poller.stop()

    def _after_restore(self) -> None:
        """Start over after the emulator's state was restored from a snapshot (the pytest
        plugin, between modules): as a pipeline read back afresh (new poller from the stream's
        start, empty metrics and logs), keeping the worker processes whose function
        configuration is unchanged (warm, like a reused execution environment)."""
        try:
            self._end_activity()
        except Exception:  # noqa: S110 - the module that left it blocked has ended
            pass
        self._poller = None
        self._log_listeners.clear()
        self.metrics = EmfMetrics()
        self.logs = []
        self.stack = DeployedStack.read(self.emulator, self.stack.name)
        self.refresh()
        for handler, local in list(self._functions.items()):
            deployed = DeployedFunction.read(self.emulator, local.function.name)
            if deployed.configuration != local.function.configuration:
                self.restart_function(handler)

    # -- the stack's other functions (e.g. the expiry sweeper) ------------------------------------
    def function_with_handler(self, handler: str) -> DeployedFunction:
        """The stack's one function whose ``Handler`` is ``handler``, read from the emulator.

        Raises:
            LookupError: no function, or more than one, has that handler.
        """
        lam = self.emulator.client("lambda")
        found = [
            physical_id
            for physical_id in self.stack.physical_ids("AWS::Lambda::Function").values()
            if lam.get_function_configuration(FunctionName=physical_id)["Handler"] == handler
        ]
        if len(found) != 1:
            raise LookupError(
                f"expected one function with handler {handler!r} in stack {self.stack.name}, "
                f"found {found}"
            )
        return DeployedFunction.read(self.emulator, found[0])

    def local_function(self, handler: str) -> LocalLambda:
        """The stack's function with ``handler``, running from its own deployed code asset
        (started on first use, stopped by
        [`close`][cdk_session_expiry.testing.LocalPipeline.close]). Its log lines and EMF metrics
        join
        `logs` and `metrics`."""
        if handler not in self._functions:
            function = (
                self.function
                if handler == self.function.handler
                else self.function_with_handler(handler)
            )
            self._functions[handler] = function.start(on_log=self._log)
        return self._functions[handler]

    def restart_function(self, handler: str) -> None:
        """Stop the worker of the function with ``handler`` (if started), so that the next
        [`local_function`][cdk_session_expiry.testing.LocalPipeline.local_function] reads its
        configuration again (after
        ``UpdateFunctionConfiguration``), like a new execution environment."""
        local = self._functions.pop(handler, None)
        if local is not None:
            local.close()
            local.function.remove_task_root()

    def schedule_of(self, function: DeployedFunction) -> Schedule:
        """The EventBridge schedule that invokes ``function``, read back from the emulator.

        Raises:
            LookupError: no rule with a ``ScheduleExpression`` targets the function.
        """
        events = self.emulator.client("events")
        for bus in events.list_event_buses()["EventBuses"]:
            names = events.list_rule_names_by_target(
                TargetArn=function.arn, EventBusName=bus["Name"]
            )["RuleNames"]
            for name in names:
                rule = events.describe_rule(Name=name, EventBusName=bus["Name"])
                if rule.get("ScheduleExpression"):
                    return Schedule(
                        rule_arn=rule["Arn"],
                        expression=rule["ScheduleExpression"],
                        enabled=rule.get("State") == "ENABLED",
                    )
        raise LookupError(f"no EventBridge schedule targets {function.name}")

    def start_schedule(
        self,
        schedule: Schedule,
        handler: Handler,
        *,
        period_seconds: float | None = None,
        max_runs: int | None = None,
        interrupt: Callable[[], None] | None = None,
    ) -> ScheduleRunner:
        """Fire ``schedule`` in real time: ``handler(scheduled_event, None)`` every period on
        its own thread, one run at a time (see
        [`ScheduleRunner`][cdk_session_expiry.testing.ScheduleRunner], which documents the
        arguments). Stopped by
        [`stop_schedules`][cdk_session_expiry.testing.LocalPipeline.stop_schedules],
        [`close`][cdk_session_expiry.testing.LocalPipeline.close] or the runner's ``stop``."""
        runner = ScheduleRunner(
            schedule,
            handler,
            period_seconds=period_seconds,
            max_runs=max_runs,
            interrupt=interrupt,
        ).start()
        self._schedules.append(runner)
        return runner

    def stop_schedules(self) -> None:
        """Stop every schedule this pipeline started; a sweeper's run in progress ends after its
        pass in progress (see
        [`start_expiry_sweeper`][cdk_session_expiry.testing.LocalPipeline.start_expiry_sweeper]).
        Idempotent.

        Raises:
            TimeoutError: a run did not end within 120 seconds.
        """
        runners, self._schedules = self._schedules, []
        for runner in runners:
            runner.stop()

    # -- the construct's sweepers, for a test -------------------------------------------------
    def _sweeper(self, handler: str, prop: str) -> tuple[LocalLambda, Schedule]:
        try:
            local = self.local_function(handler)
        except LookupError:
            raise LookupError(
                f"stack {self.stack.name} has no function with handler {handler}: the "
                f"SessionExpiry of this app has no {prop}"
            ) from None
        return local, self.schedule_of(local.function)

    def run_expiry_sweep(self) -> dict[str, Any]:
        """Run the deployed expiry sweeper once, now, from its code asset: one pass (also with
        a sub-minute ``expiry_sweep_interval``, whose scheduled runs make a pass every interval
        for a minute), with the scheduled event its rule sends, over every shard (the emulator
        runs one worker, one run at a time: it waits for a scheduled run in progress). The
        sessions it deletes reach the cleanup with the
        next [`run_cleanup`][cdk_session_expiry.testing.LocalPipeline.run_cleanup].

        Returns:
            The sweeper's summary: ``swept``, ``skipped``, ``failed``, ``queryFailures``,
            ``passes``, ``complete``, ``maxSweepLagSeconds``, ... (the handler's response).

        Raises:
            LookupError: the app's ``SessionExpiry`` has no ``expiry_sweep_interval``.
            FunctionError: the sweep raised, e.g. ``SweepIncompleteError`` when a due session
                could not be deleted.
        """
        local, schedule = self._sweeper(contract.SWEEPER_HANDLER, "expiry_sweep_interval")
        response = local.invoke(schedule.scheduled_event(), call_first=[contract.SWEEPER_STOP_HOOK])
        return dict(response)

    def run_grant_sweep(self) -> dict[str, Any]:
        """Run the deployed grant sweep once, now, from its code asset (what its hourly rule
        does): retires the KMS grants of sessions that are gone or expired.

        Returns:
            The grant sweep's report (the handler's response), e.g. ``orphansRetired``.

        Raises:
            LookupError: the app's ``SessionExpiry`` has no ``grant_key`` (no grant sweep).
            FunctionError: the sweep raised, e.g. ``GrantSweepFailed``.
        """
        local, schedule = self._sweeper(contract.GRANT_SWEEPER_HANDLER, "grant_key")
        return dict(local.invoke(schedule.scheduled_event()))

    def run_tool_session_sweep(self) -> dict[str, Any]:
        """Run the deployed AgentCore tool-session sweep once, now, from its code asset (what
        its hourly rule does): stops the running code interpreter and browser sessions the
        emulator lists whose ownership record names a session gone past the stream path's
        bound, or expired (docs/agentcore.md, "The tool-session sweep").

        Returns:
            The sweep's report (the handler's response), e.g. ``orphans_stopped``,
            ``kept_pending``, ``kept_live``.

        Raises:
            LookupError: the app's ``SessionExpiry`` has no ``code_interpreter`` or ``browser``.
            FunctionError: the sweep raised, e.g. ``ToolSessionSweepFailed``.
        """
        local, schedule = self._sweeper(
            contract.TOOL_SESSION_SWEEPER_HANDLER, "code_interpreter or browser"
        )
        return dict(local.invoke(schedule.scheduled_event()))

    def end_grant_pending_bounds(self) -> int:
        """Make every grant the grant sweep holds **pending** due now: its ended session's
        ``goneSince`` (written by the sweep that first saw the session gone) moves back by the
        deployed pending bound (``grant_sweep_pending_seconds``) plus a minute, the time the
        stream path had to retire it. The next
        [`run_grant_sweep`][cdk_session_expiry.testing.LocalPipeline.run_grant_sweep] counts those
        grants as
        orphans and retires them (docs/ownership.md, "The grant sweep").

        Returns:
            How many grant ownership records were moved (0 when no sweep has seen one pending).

        Raises:
            LookupError: the app's ``SessionExpiry`` has no ``grant_key`` (no grant sweep).
        """
        local, _ = self._sweeper(contract.GRANT_SWEEPER_HANDLER, "grant_key")
        env = local.function.environment
        return _move_gone_since_back(
            self.emulator.client("dynamodb"),
            table=env[contract.ENV_OWNERSHIP_TABLE_NAME],
            seconds=int(env[contract.ENV_GRANT_SWEEP_PENDING_SECONDS]) + 60,
        )

    def start_expiry_sweeper(
        self, *, period_seconds: float | None = None, max_runs: int | None = None
    ) -> ScheduleRunner:
        """Fire the expiry sweeper's rule on the wall clock, at once and then every period, one
        run at a time ([`ScheduleRunner`][cdk_session_expiry.testing.ScheduleRunner]; its ``runs``
        hold each run's summary). With a
        sub-minute interval each run makes a pass every interval for a minute, as deployed;
        [`stop_schedules`][cdk_session_expiry.testing.LocalPipeline.stop_schedules] ends the run in
        progress after its pass in progress (the
        runtime's ``stop_after_pass``, which AWS never calls) instead of waiting out its minute.

        Args:
            period_seconds: seconds between runs. Default: the rule's ``rate()`` (60 s for a
                sub-minute interval).
            max_runs: stop after this many runs. Default: until stopped.

        Raises:
            LookupError: the app's ``SessionExpiry`` has no ``expiry_sweep_interval``.
        """
        local, schedule = self._sweeper(contract.SWEEPER_HANDLER, "expiry_sweep_interval")
        return self.start_schedule(
            schedule,
            local,
            period_seconds=period_seconds,
            max_runs=max_runs,
            interrupt=lambda: local.call(contract.SWEEPER_STOP_HOOK),
        )

    def start_grant_sweeper(
        self, *, period_seconds: float | None = None, max_runs: int | None = None
    ) -> ScheduleRunner:
        """Fire the grant sweep's rule on the wall clock (as
        [`start_expiry_sweeper`][cdk_session_expiry.testing.LocalPipeline.start_expiry_sweeper]).

        Raises:
            LookupError: the app's ``SessionExpiry`` has no ``grant_key``.
        """
        local, schedule = self._sweeper(contract.GRANT_SWEEPER_HANDLER, "grant_key")
        return self.start_schedule(
            schedule, local, period_seconds=period_seconds, max_runs=max_runs
        )

    def on_failure_messages(self, *, max_messages: int = 10_000) -> list[dict[str, Any]]:
        """Messages on the mapping's SQS on-failure destination (received, not deleted)."""
        url = self.on_failure_queue_url()
        if url is None:
            return []
        sqs = self.emulator.client("sqs")
        seen: dict[str, dict[str, Any]] = {}
        handles: list[str] = []
        while len(seen) < max_messages:
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60)
            messages = got.get("Messages", [])
            if not messages:
                break
            for message in messages:
                seen[message["MessageId"]] = json.loads(message["Body"])
                handles.append(message["ReceiptHandle"])
        # Peeked, not consumed: visible again at once (for a replay, say).
        for handle in handles:
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
        return list(seen.values())

    def on_failure_queue_url(self) -> str | None:
        """URL of the mapping's SQS on-failure destination; ``None`` for another kind or none."""
        destination = self.mapping.on_failure_destination
        if not destination or ":sqs:" not in destination:
            return None
        account, name = destination.split(":")[4], destination.split(":")[5]
        sqs = self.emulator.client("sqs")
        return str(sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"])

    def replay_failures(self, *, dry_run: bool = False) -> ReplayResult:
        """Replay what reached the on-failure destination, as an operator does after an
        incident: ``python -m session_expiry_runtime.replay`` from the cleanup function's code
        asset with its settings
        ([`run_module`][cdk_session_expiry.testing.LocalPipeline.run_module]), for the SQS queue
        (every message; a
        message is deleted once its records are cleaned) or for each object of the S3
        destination (deleted once replayed).

        Args:
            dry_run: read and report, change nothing (``--dry-run``). Default: replay.

        Returns:
            The outcomes (one per message or object) and the exit code of each run.

        Raises:
            LookupError: the mapping has no on-failure destination.
        """
        return replay_from_destination(self, dry_run=dry_run)

    # -- a session's life and the kill switch, for a test ---------------------------------------
    def expire_session(self, session_id: str, *, partition: str | None = None) -> PollReport:
        """Expire one session now and wait for its cleanup: delete its item as DynamoDB's TTL
        service does once its TTL has passed
        ([`ttl_delete`][cdk_session_expiry.testing.LocalPipeline.ttl_delete] at its TTL, or now if
        later),
        then [`run_cleanup`][cdk_session_expiry.testing.LocalPipeline.run_cleanup]. Its other items
        and every other session are left alone.

        Args:
            session_id: the session's id (``SessionStore.create``'s ``session_id``).
            partition: the partition key value on a table with a sort key (the store's
                ``partition``). Default: none (the session id is the partition key).

        Returns:
            The cumulative report of
            [`run_cleanup`][cdk_session_expiry.testing.LocalPipeline.run_cleanup].

        Raises:
            LookupError: no such session in the table.
            ValueError: its TTL attribute is not a Number (TTL would never delete it), or
                ``partition`` does not fit the table's key.
        """
        key = self._session_key(session_id, partition)
        ddb = self.emulator.client("dynamodb")
        item = ddb.get_item(TableName=self.table_name, Key=key, ConsistentRead=True).get("Item")
        if item is None:
            raise LookupError(f"no session {session_id!r} in table {self.table_name} ({key})")
        ttl = (item.get(self.ttl_attribute) or {}).get("N")
        if ttl is None:
            raise ValueError(
                f"session {session_id!r} has no Number attribute {self.ttl_attribute!r}: the "
                "TTL service would never delete it; expected SessionStore.create to have set it"
            )
        self.ttl_delete(key, now=max(float(ttl), time.time()))
        return self.run_cleanup()

    def _session_key(self, session_id: str, partition: str | None) -> dict[str, Any]:
        ddb = self.emulator.client("dynamodb")
        schema = ddb.describe_table(TableName=self.table_name)["Table"]["KeySchema"]
        names = {k["KeyType"]: k["AttributeName"] for k in schema}
        if "RANGE" not in names:
            if partition is not None:
                raise ValueError(
                    f"partition={partition!r}: table {self.table_name} has no sort key, the "
                    "session id is the partition key; expected partition=None"
                )
            return {names["HASH"]: {"S": session_id}}
        if partition is None:
            raise ValueError(
                f"table {self.table_name} has a sort key: expected partition= (the value of "
                f"{names['HASH']!r}) with session {session_id!r}"
            )
        return {names["HASH"]: {"S": partition}, names["RANGE"]: {"S": session_id}}

    def pause_cleanup(self) -> None:
        """Pull the kill switch as an operator does (``UpdateEventSourceMapping``
        ``Enabled=False``), then [`refresh`][cdk_session_expiry.testing.LocalPipeline.refresh]:
        [`run_cleanup`][cdk_session_expiry.testing.LocalPipeline.run_cleanup] delivers nothing while
        paused and the stream keeps the records;
        [`resume_cleanup`][cdk_session_expiry.testing.LocalPipeline.resume_cleanup] goes on from
        there."""
        self._set_cleanup_enabled(False)

    def resume_cleanup(self) -> None:
        """Release the kill switch (``Enabled=True``) and
        [`refresh`][cdk_session_expiry.testing.LocalPipeline.refresh]; the next
        [`run_cleanup`][cdk_session_expiry.testing.LocalPipeline.run_cleanup] delivers what was
        written meanwhile."""
        self._set_cleanup_enabled(True)

    def set_feature_flags(self, **flags: bool) -> dict[str, Any]:
        """Change the cleanup's feature flags (``feature_flags``) as an operator does:
        ``python -m session_expiry_runtime.kill_switch flags set NAME=on|off ...`` run from the
        deployed code asset (a new hosted version and its deployment, checked first), then a new
        execution environment for the cleanup, which reads them at its next invocation (the
        emulator's deployments complete at once; in AWS, within the strategy and the poll
        interval). E.g. ``set_feature_flags(DeleteScratch=False)``, ``set_feature_flags(
        enabled=True, dryRun=False)``. Returns the command's JSON line (``flags``,
        ``deployment``).

        Raises:
            ValueError: no flag given, or the command refused (an unknown flag; its stderr).
        """
        if not flags:
            raise ValueError(
                "set_feature_flags: expected NAME=True|False, e.g. DeleteScratch=False"
            )
        assignments = [f"{name}={'on' if on else 'off'}" for name, on in flags.items()]
        done = self.run_module(
            "session_expiry_runtime.ops.kill_switch",
            "flags",
            "set",
            *assignments,
            "--function",
            self.function.name,
        )
        if done.returncode != 0:
            raise ValueError(f"flags set {' '.join(assignments)}: {done.stderr.strip()}")
        self._new_cleanup_environment()
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    def _new_cleanup_environment(self) -> None:
        """Stop the cleanup's worker process: the next invocation starts a new one (a new
        execution environment, which reads the flags anew)."""
        if self._lambda is not None:
            self._lambda.close()
            self._lambda = None
        if self._poller is not None:
            self._poller.handler = self.local_lambda()

    def drain_deferred(self) -> dict[str, Any]:
        """Run the drain of deferred work now, as the construct's drain schedule does every 5
        minutes (the cleanup function invoked with ``{"sessionExpiryDrain": true}``); its report
        ``{"done": {step: n}, "failed": {step: n}}``."""
        report: dict[str, Any] = self.local_lambda().invoke({"sessionExpiryDrain": True})
        return report

    def _set_cleanup_enabled(self, enabled: bool) -> None:
        self.emulator.client("lambda").update_event_source_mapping(
            UUID=self.mapping.uuid, Enabled=enabled
        )
        self.refresh()

    def run_module(
        self, module: str, *args: str, env_overrides: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``python -m module args`` from the cleanup function's deployed code asset, with
        the function's environment pointed at the emulator
        ([`DeployedFunction.runtime_env`][cdk_session_expiry.testing.DeployedFunction.runtime_env]):
        what an operator does with ``python -m session_expiry_runtime.replay`` and the function's
        settings. The module must come from the code asset, or the process exits with status 3.
        """
        root = str(self.function.task_root())
        bootstrap = (
            "import importlib.util, pathlib, runpy, sys\n"
            "root, name = sys.argv[1], sys.argv[2]\n"
            "sys.path.insert(0, root)\n"
            "origin = pathlib.Path(importlib.util.find_spec(name).origin).resolve()\n"
            "if pathlib.Path(root).resolve() not in origin.parents:\n"
            "    sys.stderr.write(f'{name} resolves to {origin}, not the code asset\\n')\n"
            "    sys.exit(3)\n"
            "sys.argv = [name, *sys.argv[3:]]\n"
            "runpy.run_module(name, run_name='__main__', alter_sys=True)\n"
        )
        env = self.function.runtime_env(env_overrides)
        return subprocess.run(  # noqa: S603 - this interpreter, a fixed bootstrap
            [sys.executable, "-c", bootstrap, root, module, *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    def close(self) -> None:
        """Stop continuous mode and schedules, the function's worker process, and the emulator
        if this pipeline started it."""
        if self._poller is not None and self._poller.running:
            self._poller.stop()
        self.stop_schedules()
        if self._lambda is not None:
            self._lambda.close()
            self._lambda = None
        for local in self._functions.values():
            local.close()
            local.function.remove_task_root()
        self._functions.clear()
        self.function.remove_task_root()
        if self._owns_emulator:
            self.emulator.stop()

    def __enter__(self) -> LocalPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _deployed_stack_names(emulator: LocalEmulator) -> list[str]:
    cfn = emulator.client("cloudformation")
    names = []
    for page in cfn.get_paginator("describe_stacks").paginate():
        for stack in page["Stacks"]:
            if stack["StackName"] != "CDKToolkit":
                names.append(stack["StackName"])
    return names


def _move_gone_since_back(ddb: Any, *, table: str, seconds: int) -> int:
    """``SET goneSince = goneSince - seconds`` on every ownership record that has one (grants'
    and AgentCore tool sessions')."""
    moved, key = 0, contract.OWNERSHIP_PARTITION_KEY
    pages = ddb.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression="attribute_exists(#gone)",
        ExpressionAttributeNames={"#gone": ATTR_GONE_SINCE},
    )
    for item in (item for page in pages for item in page.get("Items", [])):
        ddb.update_item(
            TableName=table,
            Key={key: item[key]},
            UpdateExpression="SET #gone = #gone - :seconds",
            ConditionExpression="attribute_exists(#gone)",
            ExpressionAttributeNames={"#gone": ATTR_GONE_SINCE},
            ExpressionAttributeValues={":seconds": {"N": str(seconds)}},
        )
        moved += 1
    return moved
