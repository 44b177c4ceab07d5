"""Tool-session sweep: the backstop for AgentCore code interpreter and browser sessions the
stream path missed.

The cleanup stops a session's tool sessions when its REMOVE record is cleaned. A REMOVE that is
never cleaned — a stream outage longer than its 24 hours, an on-failure message never replayed —
leaves them running (and billing) until their own ``sessionTimeoutSeconds`` (up to 8 hours).
This sweep is the grant sweep's counterpart (`grant_sweeper`), checked by ownership the same
way.

Each run (the construct's ``tool_session_sweep_interval``) lists, for each tool the construct
was given (never another), its running sessions (`tool_session_listing`: both status
vocabularies, 100 a page, following ``nextToken``) and judges each:

* **recent**: created less than ``SESSION_EXPIRY_TOOL_SESSION_SWEEP_GRACE_SECONDS`` (default 15
  minutes) ago, or with no ``createdAt``: kept (``attach_agent_session`` records a session after
  the application started it).
* **not ours**: no ownership record ``codeInterpreter#<id>`` / ``browser#<id>`` in the ownership
  table (strongly consistent ``GetItem``), or one whose owner is no key of this table: another
  application's session, or one the store never recorded. Left alone, counted in the report
  only (``not_ours``).
* **released**: the record is ``released`` (the stream path stopped it; AgentCore may still list
  it for a moment): kept, no call.
* The record's owner decides (there is no name to read, unlike a grant): its session item
  (strongly consistent ``GetItem``) is **live** and names the tool session (its String Set or
  latest-id attribute): kept, and a ``goneSince`` an earlier run wrote is removed. **expired**
  (it names it but its TTL or absolute lifetime ``notAfter`` passed): stopped early (fail
  closed), ``ExpiredSessionToolSessionsStopped``. **gone** (no item, or one that does not name
  it): **pending** while the stream path may still be retrying — the first run that sees it so
  writes ``goneSince`` on the record, and the session stays pending until it has been gone
  ``SESSION_EXPIRY_TOOL_SESSION_SWEEP_PENDING_SECONDS`` (the event source mapping's maximum
  record age plus an hour, set by the construct; 7 hours by default) — then an **orphan**:
  stopped, ``OrphanToolSessionsStopped`` (alarmed above 0).

Unlike a grant, a tool session is never put back on a session after it left it (no
``hold_again`` path), so a sighting needs no second read: a later run that sees the session
live removes it. Stopping marks the record ``released`` (condition: same owner and
incarnation), so a REMOVE that arrives later makes no call. ``Stop…Session`` answering
``ResourceNotFoundException`` (already ended) is success.

A dry run (``SESSION_EXPIRY_DRY_RUN``) stops and writes nothing: ``ToolSessionsWouldBeStopped``.
A failed call (after botocore's retries) fails only its session (``ToolSessionSweepFailures``);
the others are still checked, and the handler raises after writing its metrics so the function's
errors alarm fires; the next run retries. Once the remaining time is below
``SESSION_EXPIRY_TIME_GUARD_MS`` no new page or session is started: ``ToolSessionSweepIncomplete``
is 1 and the handler raises too (the next run starts at page one). At most
``SESSION_EXPIRY_TOOL_SESSION_SWEEP_REQUESTS_PER_SECOND`` AgentCore requests a second (default
5; `pacing`), list pages and Stop calls together: the account's AgentCore quotas are shared with
the application.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ..core.config import (
    DEFAULT_TOOL_SESSION_SWEEP_GRACE_SECONDS,
    DEFAULT_TOOL_SESSION_SWEEP_PENDING_SECONDS,
    DEFAULT_TOOL_SESSION_SWEEP_REQUESTS_PER_SECOND,
    ENV_OWNERSHIP_TABLE_NAME,
    ENV_TABLE_NAME,
    ENV_TOOL_SESSION_SWEEP_GRACE_SECONDS,
    ENV_TOOL_SESSION_SWEEP_PENDING_SECONDS,
    ENV_TOOL_SESSION_SWEEP_REQUESTS_PER_SECOND,
    METRIC_EXPIRED_TOOL_SESSIONS_STOPPED,
    METRIC_ORPHAN_TOOL_SESSIONS_STOPPED,
    METRIC_TOOL_SESSION_SWEEP_FAILURES,
    METRIC_TOOL_SESSION_SWEEP_INCOMPLETE,
    METRIC_TOOL_SESSIONS_CHECKED,
    METRIC_TOOL_SESSIONS_WOULD_BE_STOPPED,
    RuntimeConfig,
)
from ..core.metrics import MetricsRecorder
from ..core.ownership import (
    ATTR_GONE_SINCE,
    ATTR_INCARNATION,
    ATTR_OWNER,
    ATTR_RESOURCE,
    ATTR_STATE,
    ATTR_STATE_SINCE,
    STATE_RELEASED,
    Claim,
    owner_key_of_token,
    resource_key,
)
from ..core.pacing import Pacer
from ..core.ttl import MAX_SESSION_TTL, is_live, now_seconds, ttl_from_attribute
from .tool_session_listing import AllFiltersRefused, Listing, Tool, running_sessions, tools_of

LOGGER = logging.getLogger("session_expiry_runtime.sweeps.tool_session_sweeper")

VERDICT_RECENT = "recent"
VERDICT_NOT_OURS = "not-ours"
VERDICT_RELEASED = "released"
VERDICT_LIVE = "live"
VERDICT_PENDING = "pending"
VERDICT_GONE = "gone"
VERDICT_EXPIRED = "expired"
_KEPT = {
    VERDICT_RECENT: "kept_recent",
    VERDICT_NOT_OURS: "not_ours",
    VERDICT_RELEASED: "kept_released",
    VERDICT_LIVE: "kept_live",
    VERDICT_PENDING: "kept_pending",
}


def client_config() -> Config:
    """Bounded timeouts and retries, so one hung call cannot outlast the time guard."""
    return Config(
        retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=3, read_timeout=5
    )


@dataclass(frozen=True)
class SweepSettings:
    """The sweep's own settings (seconds, requests a second), from its environment."""

    grace_seconds: int = DEFAULT_TOOL_SESSION_SWEEP_GRACE_SECONDS
    pending_seconds: int = DEFAULT_TOOL_SESSION_SWEEP_PENDING_SECONDS
    requests_per_second: int = DEFAULT_TOOL_SESSION_SWEEP_REQUESTS_PER_SECOND

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SweepSettings:
        """Read ``SESSION_EXPIRY_TOOL_SESSION_SWEEP_*`` (defaults when unset).

        Raises:
            ValueError: a value that is not a positive integer (the message names it).
        """
        env = os.environ if env is None else env
        values: dict[str, int] = {}
        for field, name in (
            ("grace_seconds", ENV_TOOL_SESSION_SWEEP_GRACE_SECONDS),
            ("pending_seconds", ENV_TOOL_SESSION_SWEEP_PENDING_SECONDS),
            ("requests_per_second", ENV_TOOL_SESSION_SWEEP_REQUESTS_PER_SECOND),
        ):
            raw = env.get(name)
            if raw is None:
                continue
            if not raw.isdigit() or int(raw) < 1:
                raise ValueError(f"{name}={raw!r}: expected a positive whole number")
            values[field] = int(raw)
        return cls(**values)


@dataclass
class ToolSweepReport:
    """What one run did (counts over every tool)."""

    tools: int = 0
    pages: int = 0
    listed: int = 0
    checked: int = 0
    kept_recent: int = 0
    not_ours: int = 0
    kept_released: int = 0
    kept_live: int = 0
    kept_pending: int = 0
    orphans_stopped: int = 0
    expired_stopped: int = 0
    would_stop: int = 0
    failures: int = 0
    incomplete: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Judged:
    verdict: str
    claim: Claim | None = None


class ToolSessionSweeper:
    """Lists the construct's AgentCore tools' running sessions and stops those no live session
    owns (see the module docstring).

    Args:
        config: table and ownership table names, key and attribute names, tool identifiers,
            dry run.
        agentcore_client, dynamodb_client: boto3 clients (see `client_config`).
        metrics: where the counts go; the caller flushes it.
        settings: grace period, pending bound, pace (default: `SweepSettings` defaults).
        clock: returns the current time as an aware ``datetime``; default UTC now.

    Raises:
        ValueError: no table or ownership table name in ``config``.
    """

    def __init__(
        self,
        config: RuntimeConfig,
        *,
        agentcore_client: Any,
        dynamodb_client: Any,
        metrics: MetricsRecorder,
        settings: SweepSettings | None = None,
        clock: Callable[[], datetime] | None = None,
        logger: logging.Logger = LOGGER,
    ) -> None:
        for name, value in (
            (ENV_TABLE_NAME, config.table_name),
            (ENV_OWNERSHIP_TABLE_NAME, config.ownership_table_name),
        ):
            if not value:
                raise ValueError(f"{name} is not set: the tool-session sweep needs it")
        self.config = config
        self.settings = settings or SweepSettings()
        self.tools = tools_of(config)
        self._agentcore = agentcore_client
        self._ddb = dynamodb_client
        self.metrics = metrics
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self.logger = logger
        self._key_names = {config.partition_key} | ({config.sort_key} if config.sort_key else set())
        self.pacer = Pacer(self.settings.requests_per_second)

    def for_invocation(self) -> ToolSessionSweeper:
        """This sweeper for one invocation: a shallow copy (clients, pacer and configuration
        shared) with a metrics recorder of its own, so that two runs in one process (threads of
        one execution environment) never write each other's counts."""
        sweeper = copy.copy(self)
        sweeper.metrics = self.metrics.fresh()
        return sweeper

    def sweep(self, *, out_of_time: Callable[[], bool] = lambda: False) -> ToolSweepReport:
        """One run over every tool; never raises (failures are counted)."""
        report = ToolSweepReport(tools=len(self.tools))
        now = self._clock()
        for tool in self.tools:
            if report.incomplete:
                break
            self._sweep_tool(tool, now, out_of_time, report)
        self._account(report)
        return report

    def _sweep_tool(
        self, tool: Tool, now: datetime, out_of_time: Callable[[], bool], report: ToolSweepReport
    ) -> None:
        """List every running session of ``tool`` first, then judge each: a session stopped
        while the listing pages on could shift the sessions after it out of the next page
        (AWS does not document what its ``nextToken`` points at)."""
        listing = Listing()
        summaries: list[dict[str, Any]] = []
        try:
            for summary in running_sessions(
                self._agentcore, tool, listing, before_call=self.pacer.wait
            ):
                summaries.append(summary)
        except (ClientError, BotoCoreError, AllFiltersRefused) as exc:
            report.failures += 1
            report.incomplete = True
            self.logger.error("%s of %s failed: %s", tool.list_operation, tool.identifier, exc)
        report.pages += listing.pages
        report.listed += listing.listed
        for summary in summaries:
            if out_of_time():
                report.incomplete = True
                return
            report.checked += 1
            self._one(tool, summary, now, report)

    def _one(
        self, tool: Tool, summary: Mapping[str, Any], now: datetime, report: ToolSweepReport
    ) -> None:
        session_id = str(summary["sessionId"])
        try:
            judged = self.judge(tool, session_id, summary.get("createdAt"), now)
            self._act(tool, session_id, judged, now, report)
        except (ClientError, BotoCoreError) as exc:
            report.failures += 1
            self.logger.error(
                "%s session %s of %s: %s", tool.kind, session_id, tool.identifier, exc
            )
            return
        if judged.verdict in (VERDICT_GONE, VERDICT_EXPIRED):
            done = "would be stopped (dry run)" if self.config.dry_run else "stopped"
            self.logger.warning(
                "%s session %s of %s: owner %s, %s",
                tool.kind,
                session_id,
                tool.identifier,
                "gone: orphan" if judged.verdict == VERDICT_GONE else "expired",
                done,
                extra={"toolSessionSweep": {"sessionId": session_id, "verdict": judged.verdict}},
            )

    def judge(self, tool: Tool, session_id: str, created: object, now: datetime) -> _Judged:
        """The verdict on one running session of ``tool`` (see the module docstring); writes or
        removes the record's ``goneSince`` (not in a dry run).

        Raises:
            ClientError, BotoCoreError: a GetItem or UpdateItem failed (after the retries).
        """
        grace = timedelta(seconds=self.settings.grace_seconds)
        if not isinstance(created, datetime) or now - created < grace:
            return _Judged(VERDICT_RECENT)  # no date: never stop what cannot be aged
        key = {ATTR_RESOURCE: {"S": resource_key(tool.kind, session_id)}}
        record = self._ddb.get_item(
            TableName=self.config.ownership_table_name, Key=key, ConsistentRead=True
        ).get("Item")
        claim = Claim.from_item(record)
        owner = None if claim is None else owner_key_of_token(claim.owner)
        if claim is None or owner is None or set(owner) != self._key_names:
            return _Judged(VERDICT_NOT_OURS)
        if claim.state == STATE_RELEASED:
            return _Judged(VERDICT_RELEASED, claim)
        verdict = self._owner_verdict(tool, session_id, owner, now)
        since = _seconds((record or {}).get(ATTR_GONE_SINCE))
        if verdict == VERDICT_GONE:
            return _Judged(self._pending_or_gone(key, since, now), claim)
        if since is not None and not self.config.dry_run:
            self._unmark_gone(key, since)  # seen gone once, live again (or expired) now
        return _Judged(verdict, claim)

    def _owner_verdict(
        self, tool: Tool, session_id: str, owner: dict[str, str], now: datetime
    ) -> str:
        """``live``, ``expired`` or ``gone`` for the record's owner (strongly consistent
        ``GetItem`` of its session item)."""
        item: dict[str, Any] | None = self._ddb.get_item(
            TableName=self.config.table_name,
            Key={name: {"S": value} for name, value in owner.items()},
            ConsistentRead=True,
        ).get("Item")
        if item is None or not tool.holds(item, session_id):
            return VERDICT_GONE
        ttl = ttl_from_attribute(item.get(self.config.ttl_attribute))
        if not is_live(ttl, now=now_seconds(now), max_ttl=MAX_SESSION_TTL):
            return VERDICT_EXPIRED
        raw_not_after = item.get(self.config.not_after_attribute)
        not_after = ttl_from_attribute(raw_not_after)
        if raw_not_after is not None and (not_after is None or not_after <= now_seconds(now)):
            return VERDICT_EXPIRED
        return VERDICT_LIVE

    def _pending_or_gone(self, key: dict[str, Any], since: Decimal | None, now: datetime) -> str:
        """``pending`` while the owner has been seen gone for less than the stream path's bound
        (the first sighting writes ``goneSince``; a dry run writes nothing), else ``gone``."""
        if since is None:
            if not self.config.dry_run:
                self._mark_gone(key, now)
            return VERDICT_PENDING
        if now_seconds(now) - since < self.settings.pending_seconds:
            return VERDICT_PENDING
        return VERDICT_GONE

    def _act(
        self, tool: Tool, session_id: str, judged: _Judged, now: datetime, report: ToolSweepReport
    ) -> None:
        """Keep, count or stop one session by its verdict."""
        kept = _KEPT.get(judged.verdict)
        if kept is not None:
            setattr(report, kept, getattr(report, kept) + 1)
            return
        if self.config.dry_run:
            report.would_stop += 1
            return
        self.stop(tool, session_id)
        if judged.claim is not None:
            self._release(judged.claim, now)
        if judged.verdict == VERDICT_GONE:
            report.orphans_stopped += 1
        else:
            report.expired_stopped += 1

    def stop(self, tool: Tool, session_id: str) -> None:
        """``Stop…Session`` on ``tool``, paced; ``ResourceNotFoundException`` means the session
        already ended.

        Raises:
            ClientError, BotoCoreError: any other failure (after botocore's retries).
        """
        self.pacer.wait()
        try:
            getattr(self._agentcore, tool.stop_operation)(
                **{tool.identifier_parameter: tool.identifier, "sessionId": session_id}
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise

    def _mark_gone(self, key: dict[str, Any], now: datetime) -> None:
        """``SET goneSince = if_not_exists(goneSince, :now)`` on the existing record."""
        try:
            self._ddb.update_item(
                TableName=self.config.ownership_table_name,
                Key=key,
                UpdateExpression="SET #gone = if_not_exists(#gone, :now)",
                ConditionExpression="attribute_exists(#resource)",
                ExpressionAttributeNames={"#gone": ATTR_GONE_SINCE, "#resource": ATTR_RESOURCE},
                ExpressionAttributeValues={":now": {"N": str(int(now_seconds(now)))}},
            )
        except ClientError as exc:
            if not _condition_failed(exc):
                raise

    def _unmark_gone(self, key: dict[str, Any], since: Decimal) -> None:
        """``REMOVE goneSince`` while it is still ``since``."""
        try:
            self._ddb.update_item(
                TableName=self.config.ownership_table_name,
                Key=key,
                UpdateExpression="REMOVE #gone",
                ConditionExpression="#gone = :since",
                ExpressionAttributeNames={"#gone": ATTR_GONE_SINCE},
                ExpressionAttributeValues={":since": {"N": str(since)}},
            )
        except ClientError as exc:
            if not _condition_failed(exc):
                raise

    def _release(self, claim: Claim, now: datetime) -> None:
        """Mark the stopped session's record ``released`` (only while it names the same owner
        and incarnation; a record taken over since is left alone)."""
        try:
            self._ddb.update_item(
                TableName=self.config.ownership_table_name,
                Key={ATTR_RESOURCE: {"S": claim.resource}},
                UpdateExpression="SET #state = :released, #since = :now",
                ConditionExpression="#owner = :owner AND #incarnation = :incarnation",
                ExpressionAttributeNames={
                    "#state": ATTR_STATE,
                    "#since": ATTR_STATE_SINCE,
                    "#owner": ATTR_OWNER,
                    "#incarnation": ATTR_INCARNATION,
                },
                ExpressionAttributeValues={
                    ":released": {"S": STATE_RELEASED},
                    ":now": {"N": str(int(now_seconds(now)))},
                    ":owner": {"S": claim.owner},
                    ":incarnation": {"S": claim.incarnation},
                },
            )
        except ClientError as exc:
            if not _condition_failed(exc):
                raise

    def _account(self, report: ToolSweepReport) -> None:
        m = self.metrics
        m.count(METRIC_ORPHAN_TOOL_SESSIONS_STOPPED, report.orphans_stopped)
        m.count(METRIC_EXPIRED_TOOL_SESSIONS_STOPPED, report.expired_stopped)
        m.count(METRIC_TOOL_SESSION_SWEEP_INCOMPLETE, int(report.incomplete))
        m.count(METRIC_TOOL_SESSIONS_CHECKED, report.checked)
        if report.would_stop:
            m.count(METRIC_TOOL_SESSIONS_WOULD_BE_STOPPED, report.would_stop)
        if report.failures:
            m.count(METRIC_TOOL_SESSION_SWEEP_FAILURES, report.failures)
        self.logger.info(
            "tool-session sweep %s", report.as_dict(), extra={"toolSessionSweep": report.as_dict()}
        )


def _condition_failed(exc: ClientError) -> bool:
    return bool(exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException")


def _seconds(value: object) -> Decimal | None:
    """A low-level ``{"N": ...}`` value as epoch seconds, else ``None``."""
    if not isinstance(value, Mapping) or not isinstance(value.get("N"), str):
        return None
    try:
        return Decimal(value["N"])
    except ArithmeticError:
        return None


def _out_of_time(context: object, margin_ms: int) -> Callable[[], bool]:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if not callable(remaining):
        return lambda: False
    return lambda: bool(remaining() < margin_ms)


class ToolSessionSweepFailed(RuntimeError):
    """Some tool sessions could not be listed, checked or stopped, or the run ran out of time
    (the next run retries)."""


_sweeper: ToolSessionSweeper | None = None
_lock = threading.Lock()


def get_tool_session_sweeper() -> ToolSessionSweeper:
    """The per-process sweeper, from the function's environment (built once, whichever
    thread of the process asks first)."""
    global _sweeper
    with _lock:
        if _sweeper is None:
            config = RuntimeConfig.from_env()
            session = boto3.session.Session()
            _sweeper = ToolSessionSweeper(
                config,
                agentcore_client=session.client("bedrock-agentcore", config=client_config()),
                dynamodb_client=session.client("dynamodb", config=client_config()),
                metrics=MetricsRecorder(config.metrics_namespace),
                settings=SweepSettings.from_env(),
            )
        return _sweeper


def handler(event: object, context: object) -> dict[str, Any]:
    """Scheduled entry point: one sweep, metrics flushed, the report returned.

    Raises:
        ToolSessionSweepFailed: after the metrics are written, when a call failed or the run
            stopped at its time guard.
    """
    sweeper = get_tool_session_sweeper().for_invocation()  # this run's own metrics
    report = sweeper.sweep(out_of_time=_out_of_time(context, sweeper.config.time_guard_ms))
    sweeper.metrics.flush()
    if report.failures or report.incomplete:
        raise ToolSessionSweepFailed(
            f"{report.failures} call(s) failed; incomplete: {report.incomplete}"
        )
    return report.as_dict()


__all__ = [
    "SweepSettings",
    "ToolSessionSweepFailed",
    "ToolSessionSweeper",
    "ToolSweepReport",
    "handler",
]
