"""Grant sweep: the backstop for KMS grants the stream path missed.

A KMS grant never expires: it lives until it is retired or revoked (AWS KMS Developer Guide,
"Grants in AWS KMS"). Scratch objects have the lifecycle rule and WebSocket connections end
within API Gateway's limits, but a grant whose session's REMOVE record was never cleaned — a
stream outage longer than its 24 hours, an on-failure message never replayed, a crash inside
``SessionStore.create_grant`` — would give its grantee key access for ever.

Each run (the construct's ``grant_sweep_interval``) lists the grant key's grants (``ListGrants``,
``Limit`` 100, following ``NextMarker`` while ``Truncated``) and, for each grant the session
store created, retires it when its session is gone or expired:

* **the store created it**: its ``RetiringPrincipal`` is the cleanup role
  (``SESSION_EXPIRY_RETIRING_PRINCIPAL``) — which is also the role this function runs as, since
  only a grant's retiring principal (not an IAM permission) may retire it — and its ``Name``
  starts with ``session-expiry:``; every other grant is left alone, uncounted;
* **unusable name**: such a grant whose name does not parse
  (`parse_grant_name`: ``session-expiry:<incarnation>:
  <key>``) to a key of this table — a forged or damaged name, an empty key value, another key
  schema — is skipped and counted (``GrantSweepUnusableNames``, logged): never retired, never a
  failure of the run (a key DynamoDB refuses would otherwise fail every run);
* **grace period**: a grant created less than ``SESSION_EXPIRY_GRANT_SWEEP_GRACE_SECONDS``
  (default 15 minutes) ago is kept, whatever its session: ``create_grant`` creates the grant
  before it stores it on the session;
* **gone**: no item with the grant's key (``GetItem``, strongly consistent), or an item that
  does not hold this grant (its grant id attribute is another grant's or missing: an earlier
  incarnation's grant after the id was reused, or a grant ``create_grant`` could not store).
  The item's own grant id decides, as in the cleanup, not the incarnation in the grant's name:
  a live session holding a grant (``attach_grant``) keeps it whatever incarnation its name
  gives. Such a grant is an orphan: nothing will ever retire it. Counted as
  ``OrphanGrantsRetired``, whose alarm fires above 0;
* **expired**: the item holds the grant but is not live (its TTL passed, or is missing or
  unreadable, or its absolute lifetime ``notAfter`` passed): DynamoDB has not deleted it yet.
  Retired early (fail closed), counted as ``ExpiredSessionGrantsRetired`` (no alarm: TTL lags
  by design);
* otherwise (a live session holding the grant) the grant is kept.

**The grant's ownership record** (``grant#<id>`` in the ownership table,
``SESSION_EXPIRY_OWNERSHIP_TABLE_NAME``; `ownership`) refines *gone* and *expired*; read
with a strongly consistent ``GetItem`` only for those:

* ``released``: the stream path (or an earlier sweep) retired it; KMS may still list it for a
  while (eventual consistency). Kept, **no call**, never counted as an orphan.
* ``held``/``releasing`` and the session *gone*: the session's REMOVE record may still be on
  the stream path, failing and retrying (a grant KMS does not show yet, a throttled call):
  **pending**, not an orphan. The first sweep that sees it so writes ``goneSince``
  (``SET goneSince = if_not_exists(goneSince, :now)``); the grant stays pending until it has
  been gone ``SESSION_EXPIRY_GRANT_SWEEP_PENDING_SECONDS`` (the event source mapping's maximum
  record age plus a margin, set by the construct; 7 hours by default): past it the stream path
  has given up (the failure destination holds the record) and the grant is an orphan, retired
  and counted as ``OrphanGrantsRetired``. A sighting can be transient: a connected-grant detach
  forgets the grant on the item, fails to retire it and puts it back
  (`store_parts.connected_grants`). Putting it back holds its claim again, and that write
  removes ``goneSince`` (`hold_again`), so the
  session's later normal end is pending from the sweep that sees *that* end, not from the
  earlier sighting. A sweep that read the item before the put-back may write its sighting
  after ``hold_again``: a first sighting is therefore followed by a second strongly consistent
  ``GetItem`` of the item, and taken back (``REMOVE goneSince``, condition: still the value
  written) when the grant is on it again. Not one ``TransactWriteItems`` with a
  ``ConditionCheck`` on the session item: while such a transaction runs, the application's own
  writes to that item (a put-back, a heartbeat, a new incarnation's create) fail with a
  transaction conflict (Amazon DynamoDB Developer Guide, "Transaction conflict handling in
  DynamoDB"), and the sweep must never make the application's writes fail.
* ``releasing`` with ``handedOverAt`` (`ATTR_HANDED_OVER_AT`) and the session *gone*: the
  cleanup's ``RetireGrant`` did not find the grant within KMS's consistency window and handed
  it over here instead of retrying its record (`steps.grant`): the stream path will not retire
  it, so no pending bound — retired at once, counted as ``OrphanGrantsRetired``.
* a record naming **another session** than the grant's name (a grant created elsewhere and
  ``attach_grant``-ed to a session other than the one its name gives): the record decides —
  the grant is judged by the record's session (live, gone, expired, as above), logged;
  a record whose owner is no key of this table is ignored for this (judged by the name);
* no record (a legacy grant, created before ownership records, or one whose record was never
  written): as above, by the item alone.

Retiring a grant that has a record marks the record ``released`` (condition: the same owner
and incarnation), so a REMOVE record that arrives later makes no call.

``RetireGrant`` by ``KeyId`` + ``GrantId``; ``NotFoundException`` (already retired) is success.
In a dry run (``SESSION_EXPIRY_DRY_RUN``) nothing is retired and nothing is written (no
``goneSince``: a grant without one is pending): ``GrantsWouldBeRetired`` counts.
Failures (a ``GetItem`` or ``RetireGrant`` that still fails after botocore's retries, a marker
that cannot be read or written) are counted (``GrantSweepFailures``) and the handler raises after
writing its metrics, so the function's errors alarm fires; the next run retries.

**Time guard and resumption.** Once the remaining time is below ``SESSION_EXPIRY_TIME_GUARD_MS``,
no new page or grant is started and the run is incomplete: ``GrantSweepIncomplete`` is 1 (0
after a run that reached the last page; a run whose ``ListGrants`` failed is incomplete too),
and the construct alarms above 0. The run writes where it stopped — the ``Marker`` of the page
it did not finish — into the ownership table (`grant_sweep_marker`, item
``grantSweep#<key id>``), and the next run **resumes there**: the grants past the cut are
reached by the next run, not only as the first ones get retired. A run that reaches the last
page removes the marker; the next one starts at page one. A full pass over a key too large
for one run so takes several runs (``GrantSweepIncomplete`` 1 on all but the last). A marker
KMS refuses (``InvalidMarkerException``) is dropped and the run starts at page one. In a dry
run the marker is read, never written. ``GrantsChecked`` counts the grants each run checked.

**The key's ceiling.** KMS allows 50,000 grants per KMS key (adjustable; AWS KMS Developer
Guide, "Resource quotas", "Grants per KMS key"); with a grant per live session that caps the
live sessions of one key, and a ``CreateGrant`` past it fails (``LimitExceededException``).
The run that finishes a pass reports every grant the pass listed — all of the key's grants,
not only this store's — as ``GrantsOnKey`` (the pages earlier runs finished are carried in the
marker, so a pass of several runs still reports the whole key); the construct alarms above
80 % of the quota (``grant_key_grant_quota``).

**Pace.** KMS throttles requests above per-second quotas shared by every caller of the account and
Region (AWS KMS Developer Guide, "Request quotas",
https://docs.aws.amazon.com/kms/latest/developerguide/requests-per-second.html, table "Request
quotas for each AWS KMS API operation": ``ListGrants`` 100, ``RetireGrant`` 50 and ``CreateGrant``
50 requests per second; earlier revisions listed ``RetireGrant`` 15, then 30; all adjustable per
account, the Service Quotas console shows an account's own). The sweep makes at most
``SESSION_EXPIRY_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND`` KMS requests a second, ``ListGrants`` pages
and ``RetireGrant`` calls together (default 5: a tenth of ``RetireGrant``'s 50 and a third of the
earliest revision's 15, leaving the rest of the ``RetireGrant`` quota to the cleanup's stream path
and the ``ListGrants`` quota to everyone else; `pacing`). A page of 100 grants costs about 100
``GetItem`` calls, so the pace holds a pass back only while it retires many orphans: at 5 a second,
1,500 in a 5-minute run.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from functools import partial
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ..core.config import (
    ENV_GRANT_KEY_ARN,
    ENV_RETIRING_PRINCIPAL,
    ENV_TABLE_NAME,
    METRIC_EXPIRED_GRANTS_RETIRED,
    METRIC_GRANT_SWEEP_FAILURES,
    METRIC_GRANT_SWEEP_INCOMPLETE,
    METRIC_GRANT_SWEEP_UNUSABLE_NAMES,
    METRIC_GRANTS_CHECKED,
    METRIC_GRANTS_ON_KEY,
    METRIC_GRANTS_WOULD_BE_RETIRED,
    METRIC_ORPHAN_GRANTS_RETIRED,
    RuntimeConfig,
)
from ..core.grant_names import GRANT_NAME_PREFIX, GrantOwner, parse_grant_name
from ..core.metrics import MetricsRecorder
from ..core.ownership import (
    ATTR_GONE_SINCE,
    ATTR_HANDED_OVER_AT,
    ATTR_INCARNATION,
    ATTR_OWNER,
    ATTR_RESOURCE,
    ATTR_STATE,
    ATTR_STATE_SINCE,
    KIND_GRANT,
    STATE_RELEASED,
    STATE_RELEASING,
    Claim,
    owner_key_of_token,
    owner_token,
    resource_key,
)
from ..core.pacing import Pacer
from ..core.ttl import MAX_SESSION_TTL, is_live, now_seconds, ttl_from_attribute
from .grant_sweep_marker import GrantSweepMarker

LOGGER = logging.getLogger("session_expiry_runtime.sweeps.grant_sweeper")

#: ``ListGrants`` ``Limit``: 1..100 (AWS KMS API Reference, "ListGrants").
LIST_GRANTS_LIMIT = 100

VERDICT_NOT_OURS = "not-ours"
VERDICT_RECENT = "recent"
VERDICT_LIVE = "live"
VERDICT_GONE = "gone"
VERDICT_EXPIRED = "expired"
#: Gone, but its ownership record is unreleased and the stream path may still be retrying.
VERDICT_PENDING = "pending"
#: Its ownership record is released: the stream path retired it.
VERDICT_RELEASED = "released"


def client_config() -> Config:
    """Bounded timeouts and retries, so one hung call cannot outlast the time guard."""
    return Config(
        retries={"mode": "standard", "total_max_attempts": 3},
        connect_timeout=3,
        read_timeout=5,
    )


@dataclass
class GrantSweepReport:
    """What one run did (counts, and where the next run starts)."""

    pages: int = 0
    #: grants ListGrants gave this run
    listed: int = 0
    #: grants this run checked (``GrantsChecked``): listed, and not cut off by the time guard
    checked: int = 0
    #: the run started where the last one stopped (a marker in the ownership table)
    resumed: bool = False
    #: the ``Marker`` the next run starts at (``None``: page one)
    next_marker: str | None = None
    ours: int = 0
    kept_live: int = 0
    kept_recent: int = 0
    orphans_retired: int = 0
    expired_retired: int = 0
    would_retire: int = 0
    #: gone, unreleased record, within the pending bound: the stream path may still retire it
    kept_pending: int = 0
    #: the record says the stream path retired it (KMS still lists it): no call
    kept_released: int = 0
    unusable_names: int = 0
    failures: int = 0
    incomplete: bool = False
    #: grants on the pages of this pass finished so far, earlier runs' included (the marker)
    pass_listed: int = 0
    #: every grant of the key, once a run finished a pass (``GrantsOnKey``); ``None`` before
    grants_on_key: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'Unknown')}: {error.get('Message', '')}"
    return f"{type(exc).__name__}: {exc}"


class GrantSweeper:
    """Lists the grant key's grants and retires those of gone or expired sessions.

    Args:
        config: table name, key, TTL and grant id attribute names, grant key ARN, retiring
            principal (the cleanup role), grace period, dry run.
        kms_client, dynamodb_client: boto3 clients (see `client_config`).
        metrics: where the counts go; the caller flushes it.
        clock: returns the current time as an aware ``datetime``; default UTC now.
        pacer: spaces the KMS requests; default: ``config.grant_sweep_kms_requests_per_second``
            (`pacing`).

    Without ``config.ownership_table_name`` no marker is kept (each run starts at page one);
    the construct always sets it with a grant key.

    Raises:
        ValueError: no table name, grant key ARN or retiring principal in ``config``.
    """

    def __init__(
        self,
        config: RuntimeConfig,
        *,
        kms_client: Any,
        dynamodb_client: Any,
        metrics: MetricsRecorder,
        clock: Callable[[], datetime] | None = None,
        logger: logging.Logger = LOGGER,
        pacer: Pacer | None = None,
    ) -> None:
        for name, value in (
            (ENV_TABLE_NAME, config.table_name),
            (ENV_GRANT_KEY_ARN, config.grant_key_arn),
            (ENV_RETIRING_PRINCIPAL, config.retiring_principal),
        ):
            if not value:
                raise ValueError(f"{name} is not set: the grant sweep needs it")
        self.config = config
        self._kms = kms_client
        self._ddb = dynamodb_client
        self.metrics = metrics
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self.logger = logger
        self._key_names = {config.partition_key} | ({config.sort_key} if config.sort_key else set())
        self.pacer = pacer or Pacer(config.grant_sweep_kms_requests_per_second)
        self.marker = (
            GrantSweepMarker(dynamodb_client, config.ownership_table_name, config.grant_key_arn)
            if config.ownership_table_name and config.grant_key_arn
            else None
        )

    def page(
        self, marker: str | None, report: GrantSweepReport, *, stored: bool = False
    ) -> tuple[dict[str, Any], str | None]:
        """One ``ListGrants`` page (``Limit`` 100) at ``marker`` (``None``: the first), paced,
        and the marker it was read at: a ``stored`` marker (the last run's) that KMS refuses
        (``InvalidMarkerException``) gives the first page instead.

        Raises:
            ClientError, BotoCoreError: the call failed (after botocore's retries).
        """
        params: dict[str, Any] = {"KeyId": self.config.grant_key_arn, "Limit": LIST_GRANTS_LIMIT}
        if marker is not None:
            params["Marker"] = marker
        self.pacer.wait()
        try:
            page: dict[str, Any] = self._kms.list_grants(**params)
        except ClientError as exc:
            if not stored or _code(exc) != "InvalidMarkerException":
                raise
            self.logger.warning("KMS refused the stored marker (%s): starting at page one", exc)
            report.resumed = False
            report.pass_listed = 0
            return self.page(None, report)
        report.pages += 1
        return page, marker

    def walk(
        self,
        start: str | None,
        now: datetime,
        out_of_time: Callable[[], bool],
        report: GrantSweepReport,
    ) -> None:
        """Check every grant from the page at ``start`` to the last, or until the time guard;
        ``report.next_marker`` is where the next run starts (the unfinished page).

        Raises:
            ClientError, BotoCoreError: a ``ListGrants`` failed (``next_marker``: that page).
        """
        marker = start
        while True:
            report.next_marker = marker  # a ListGrants that fails: the next run retries this page
            page, marker = self.page(marker, report, stored=report.pages == 0 and report.resumed)
            report.next_marker = marker
            grants = page.get("Grants") or []
            report.listed += len(grants)
            for grant in grants:
                if out_of_time():
                    report.incomplete = True
                    return
                report.checked += 1
                self._one(grant, now, report)
            report.pass_listed += len(grants)
            marker = page.get("NextMarker")
            if not page.get("Truncated") or not marker:
                report.next_marker = None
                return
            if out_of_time():
                report.next_marker = marker
                report.incomplete = True
                return

    def owner(self, grant: Mapping[str, Any], report: GrantSweepReport) -> GrantOwner | None:
        """The session a grant of this store points to, or ``None`` for any other grant and
        for one whose name gives no key of this table (counted in ``report.unusable_names``)."""
        name = grant.get("Name")
        if grant.get("RetiringPrincipal") != self.config.retiring_principal or not (
            isinstance(name, str) and name.startswith(GRANT_NAME_PREFIX)
        ):
            return None
        owner = parse_grant_name(name)
        if owner is None or set(owner.key) != self._key_names:
            report.unusable_names += 1
            self.logger.warning(
                "grant %s: name %r gives no key of table %s; skipped, never retired",
                grant.get("GrantId"),
                name,
                self.config.table_name,
                extra={"grantSweep": {"grantId": grant.get("GrantId"), "name": name}},
            )
            return None
        return owner

    def verdict(self, grant: Mapping[str, Any], owner: GrantOwner, now: datetime) -> str:
        """``recent``, ``live``, ``gone`` or ``expired`` for a grant of this store.

        Raises:
            ClientError, BotoCoreError: the GetItem failed (after botocore's retries).
        """
        created = grant.get("CreationDate")
        if not isinstance(created, datetime) or now - created < timedelta(
            seconds=self.config.grant_sweep_grace_seconds
        ):
            return VERDICT_RECENT  # no date: never retire what cannot be aged
        item = self._session_item(owner)
        if item is None or not self._holds_grant(item, grant.get("GrantId")):
            return VERDICT_GONE  # the item does not hold this grant: nothing else will retire it
        ttl = ttl_from_attribute(item.get(self.config.ttl_attribute))
        if not is_live(ttl, now=now_seconds(now), max_ttl=MAX_SESSION_TTL):
            return VERDICT_EXPIRED
        # The session store's absolute lifetime: a session past it is expired whatever its TTL.
        not_after = ttl_from_attribute(item.get(self.config.not_after_attribute))
        if item.get(self.config.not_after_attribute) is not None and (
            not_after is None or not_after <= now_seconds(now)
        ):
            return VERDICT_EXPIRED
        return VERDICT_LIVE

    def retire(self, grant: Mapping[str, Any]) -> None:
        """RetireGrant by key ARN + grant id, paced; ``NotFoundException`` means already
        retired."""
        self.pacer.wait()
        try:
            self._kms.retire_grant(KeyId=self.config.grant_key_arn, GrantId=grant["GrantId"])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "NotFoundException":
                raise

    def for_invocation(self) -> GrantSweeper:
        """This sweeper for one invocation: a shallow copy (clients, pacer and configuration
        shared) with a metrics recorder of its own, so that two runs in one process never
        write each other's counts."""
        sweeper = copy.copy(self)
        sweeper.metrics = self.metrics.fresh()
        return sweeper

    def sweep(self, *, out_of_time: Callable[[], bool] = lambda: False) -> GrantSweepReport:
        """One run: from where the last run stopped (or page one) to the key's last grant, or
        until the time guard; never raises (failures are counted).

        ``ListGrants`` failing on a page ends the run (counted as a failure, incomplete; the
        next run resumes at that page).
        """
        report = GrantSweepReport()
        now = self._clock()
        start = self._load_marker(report)
        try:
            self.walk(start, now, out_of_time, report)
        except (ClientError, BotoCoreError) as exc:
            report.failures += 1
            report.incomplete = True
            self.logger.error("ListGrants failed: %s", _error_text(exc))
        if not report.incomplete:
            report.grants_on_key = report.pass_listed
        self._save_marker(start, report, now)
        self._account(report)
        return report

    def _load_marker(self, report: GrantSweepReport) -> str | None:
        """Where the last run stopped (``None``: page one; also when it cannot be read, a
        failure of this run)."""
        if self.marker is None:
            return None
        try:
            start, report.pass_listed = self.marker.load()
        except (ClientError, BotoCoreError) as exc:
            report.failures += 1
            self.logger.error("grant sweep marker unreadable, starting at page one: %s", exc)
            return None
        report.resumed = start is not None
        return start

    def _save_marker(self, start: str | None, report: GrantSweepReport, now: datetime) -> None:
        """Keep ``report.next_marker`` for the next run; remove the marker once a run reached
        the last page (or stopped on page one). Nothing is written in a dry run."""
        if self.marker is None or self.config.dry_run:
            return
        try:
            if report.next_marker is not None:
                self.marker.save(report.next_marker, int(now_seconds(now)), report.pass_listed)
            elif start is not None:
                self.marker.reset(int(now_seconds(now)))
        except (ClientError, BotoCoreError) as exc:
            report.failures += 1
            self.logger.error("grant sweep marker not written: %s", _error_text(exc))

    def _one(self, grant: Mapping[str, Any], now: datetime, report: GrantSweepReport) -> None:
        owner = self.owner(grant, report)
        if owner is None:
            return
        report.ours += 1
        grant_id = grant.get("GrantId")
        try:
            verdict = self.verdict(grant, owner, now)
            claim: Claim | None = None
            if verdict in (VERDICT_GONE, VERDICT_EXPIRED):
                claim, verdict, owner = self.ownership(grant, verdict, now, owner)
            self._act(grant, verdict, claim, now, report)
        except (ClientError, BotoCoreError) as exc:
            report.failures += 1
            self.logger.error("grant %s of %s: %s", grant_id, owner.key, _error_text(exc))
            return
        if verdict in (VERDICT_GONE, VERDICT_EXPIRED, VERDICT_PENDING):
            retired = "would be retired (dry run)" if self.config.dry_run else "retired"
            what = {
                VERDICT_PENDING: "kept: its ownership record is unreleased, the stream path may "
                "still retire it",
                # "orphan": the word the orphan-grants runbook's log filter looks for; an
                # expired session's grant is no orphan (retired early, TTL lags by design).
                VERDICT_GONE: "orphan, " + retired,
                VERDICT_EXPIRED: retired,
            }
            self.logger.log(
                logging.INFO if verdict == VERDICT_PENDING else logging.WARNING,
                "grant %s of session %s (incarnation %s): session %s, grant %s",
                grant_id,
                owner.key,
                owner.incarnation,
                verdict,
                what[verdict],
                extra={"grantSweep": {"grantId": grant_id, "key": owner.key, "verdict": verdict}},
            )

    def _act(
        self,
        grant: Mapping[str, Any],
        verdict: str,
        claim: Claim | None,
        now: datetime,
        report: GrantSweepReport,
    ) -> None:
        """Keep, count or retire one grant of this store by its verdict."""
        kept = {
            VERDICT_RECENT: "kept_recent",
            VERDICT_LIVE: "kept_live",
            VERDICT_PENDING: "kept_pending",
            VERDICT_RELEASED: "kept_released",
        }
        if verdict in kept:
            setattr(report, kept[verdict], getattr(report, kept[verdict]) + 1)
        elif self.config.dry_run:
            report.would_retire += 1
        else:
            self.retire(grant)
            if claim is not None:
                self._release(claim, now)
            if verdict == VERDICT_GONE:
                report.orphans_retired += 1
            else:
                report.expired_retired += 1

    def ownership(
        self, grant: Mapping[str, Any], verdict: str, now: datetime, owner: GrantOwner
    ) -> tuple[Claim | None, str, GrantOwner]:
        """The grant's ownership record, the verdict it gives a ``gone`` or ``expired`` grant
        — ``released`` (the stream path retired it), ``pending`` (gone, unreleased, within the
        pending bound), else ``verdict`` — and the session that verdict is about. No ownership
        table, or no record: ``(None, verdict, owner)``.

        ``owner`` is the session the grant's name gives. When the record names another session
        (`_recorded_owner`), the record decides: the verdict is that session's. A first
        sighting checks that the grant is still off that session once it is written
        (`_pending`).

        Raises:
            ClientError, BotoCoreError: a GetItem or UpdateItem failed (after the retries).
        """
        table = self.config.ownership_table_name
        if table is None:
            return None, verdict, owner
        grant_id = str(grant.get("GrantId"))
        key = {ATTR_RESOURCE: {"S": resource_key(KIND_GRANT, grant_id)}}
        item = self._ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        claim = Claim.from_item(item)
        if claim is None:
            return None, verdict, owner
        if claim.state == STATE_RELEASED:
            return claim, VERDICT_RELEASED, owner
        recorded = self._recorded_owner(claim, owner, grant_id)
        if recorded.key == owner.key:
            owner = recorded
        else:
            owner, verdict = recorded, self.verdict(grant, recorded, now)
            if verdict not in (VERDICT_GONE, VERDICT_EXPIRED):
                self._forget_sighting(key, item or {})
                return claim, verdict, owner
        if verdict == VERDICT_GONE and _handed_over(claim, item or {}):
            return claim, verdict, owner  # the stream path gave it up: no pending bound
        back = partial(self._holds, owner, grant_id)
        if verdict == VERDICT_GONE and self._pending(key, item or {}, now, back):
            return claim, VERDICT_PENDING, owner
        return claim, verdict, owner

    def _recorded_owner(self, claim: Claim, owner: GrantOwner, grant_id: str) -> GrantOwner:
        """The session the grant's ownership record names (its owner token and incarnation):
        ``owner``'s key when the record names it (in the record's incarnation: the verdict
        is by key), or when the record's owner is no key of this table; else the record's
        session, logged. The record is written with the grant by ``SessionStore``
        (one transaction with the session item), the name by whoever created the grant: a
        grant ``attach_grant``-ed to a session other than the one its name gives is that
        session's, and must not be retired because the named one is gone. The token is
        decoded as such (`ownership.owner_key_of_token`), not as a grant name: a key
        too long for a 256-character name is still a key of this table."""
        if claim.owner == owner_token(owner.key):
            return GrantOwner(key=owner.key, incarnation=claim.incarnation)
        key = owner_key_of_token(claim.owner)
        if key is None or set(key) != self._key_names:
            return owner
        recorded = GrantOwner(key=key, incarnation=claim.incarnation)
        self.logger.info(
            "grant %s: its name gives session %s (incarnation %s), its ownership record %s "
            "(incarnation %s): judged by the record",
            grant_id,
            owner.key,
            owner.incarnation,
            recorded.key,
            recorded.incarnation,
            extra={"grantSweep": {"grantId": grant_id, "namedKey": owner.key, "key": recorded.key}},
        )
        return recorded

    def _forget_sighting(self, key: dict[str, Any], item: Mapping[str, Any]) -> None:
        """Take back a "gone" sighting on the record of a grant its recorded session holds
        live: written by a sweep that judged the grant by its name (before the record
        decided), it would start the pending bound of that session's later end from then, and
        that end would be retired as an orphan at once. Not in a dry run.

        Raises:
            ClientError, BotoCoreError: the UpdateItem failed (after botocore's retries).
        """
        since = _seconds(item.get(ATTR_GONE_SINCE))
        if since is not None and not self.config.dry_run:
            self._unmark_gone(key, since)

    def _pending(
        self,
        key: dict[str, Any],
        item: Mapping[str, Any],
        now: datetime,
        back: Callable[[], bool],
    ) -> bool:
        """``True`` while the grant's session has been seen gone for less than the stream
        path's bound (``grant_sweep_pending_seconds``); the first sighting writes ``goneSince``
        (not in a dry run).

        The session item was read before the sighting is written: a connected-grant detach
        may have put the grant back on its live session in between, and removed ``goneSince``
        before this write (``hold_again``). So after writing it, ``back()`` reads the item
        again; when the grant is on it, the sighting is taken back at once (`_unmark_gone`)
        and the grant kept. Put back after that read, ``hold_again`` removes the sighting. When
        that read fails, the sighting is taken back too (`_back`)."""
        since = _seconds(item.get(ATTR_GONE_SINCE))
        if since is None and not self.config.dry_run:
            since = self._mark_gone(key, now)
            if since is not None and self._back(back, key, since):
                self._unmark_gone(key, since)
                return True
        if since is None:
            return True  # first sighting (or a dry run): it has just been seen gone
        return now_seconds(now) - since < self.config.grant_sweep_pending_seconds

    def _mark_gone(self, key: dict[str, Any], now: datetime) -> Decimal | None:
        """``SET goneSince = if_not_exists(goneSince, :now)`` on an existing record; the value
        it holds now (``None`` when the record went away meanwhile)."""
        try:
            answer = self._ddb.update_item(
                TableName=self.config.ownership_table_name,
                Key=key,
                UpdateExpression="SET #gone = if_not_exists(#gone, :now)",
                ConditionExpression="attribute_exists(#resource)",
                ExpressionAttributeNames={"#gone": ATTR_GONE_SINCE, "#resource": ATTR_RESOURCE},
                ExpressionAttributeValues={":now": {"N": str(int(now_seconds(now)))}},
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return None
            raise
        return _seconds((answer.get("Attributes") or {}).get(ATTR_GONE_SINCE))

    def _back(self, back: Callable[[], bool], key: dict[str, Any], since: Decimal) -> bool:
        """``back()``; when it fails, the sighting ``since`` is taken back before the error is
        raised: unchecked, it may be on a grant put back on its live session, where it would
        start the pending bound of that session's later, normal end (an orphan retired early).
        Taken back, the next sweep that sees the session gone writes it again (the bound starts
        at most one sweep later).

        Raises:
            ClientError, BotoCoreError: what ``back()`` raised (the take-back is best effort).
        """
        try:
            return back()
        except (ClientError, BotoCoreError):
            try:
                self._unmark_gone(key, since)
            except (ClientError, BotoCoreError) as exc:
                self.logger.error(
                    "%s: goneSince %s not taken back after its session check failed: %s",
                    key[ATTR_RESOURCE]["S"],
                    since,
                    _error_text(exc),
                )
            raise

    def _holds(self, owner: GrantOwner, grant_id: str) -> bool:
        """Whether ``owner``'s session item holds ``grant_id`` now (strongly consistent
        ``GetItem``).

        Raises:
            ClientError, BotoCoreError: the GetItem failed (after botocore's retries).
        """
        item = self._session_item(owner)
        return item is not None and self._holds_grant(item, grant_id)

    def _session_item(self, owner: GrantOwner) -> dict[str, Any] | None:
        """``owner``'s session item (strongly consistent ``GetItem``), ``None`` when gone.

        Raises:
            ClientError, BotoCoreError: the GetItem failed (after botocore's retries).
        """
        item: dict[str, Any] | None = self._ddb.get_item(
            TableName=self.config.table_name,
            Key={name: {"S": value} for name, value in owner.key.items()},
            ConsistentRead=True,
        ).get("Item")
        return item

    def _holds_grant(self, item: Mapping[str, Any], grant_id: object) -> bool:
        held = item.get(self.config.grant_id_attribute)
        return isinstance(held, Mapping) and held.get("S") == grant_id

    def _unmark_gone(self, key: dict[str, Any], since: Decimal) -> None:
        """``REMOVE goneSince`` while it is still ``since`` (a sighting already removed by
        ``hold_again``, or another one, is left alone)."""
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
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def _release(self, claim: Claim, now: datetime) -> None:
        """Mark the retired grant's record ``released`` (only while it still names the same
        owner and incarnation; a record taken over since is left alone)."""
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
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def _account(self, report: GrantSweepReport) -> None:
        m = self.metrics
        m.count(METRIC_ORPHAN_GRANTS_RETIRED, report.orphans_retired)
        m.count(METRIC_EXPIRED_GRANTS_RETIRED, report.expired_retired)
        m.count(METRIC_GRANT_SWEEP_INCOMPLETE, int(report.incomplete))
        m.count(METRIC_GRANTS_CHECKED, report.checked)
        if report.grants_on_key is not None:
            m.count(METRIC_GRANTS_ON_KEY, report.grants_on_key)
        if report.would_retire:
            m.count(METRIC_GRANTS_WOULD_BE_RETIRED, report.would_retire)
        if report.failures:
            m.count(METRIC_GRANT_SWEEP_FAILURES, report.failures)
        if report.unusable_names:
            m.count(METRIC_GRANT_SWEEP_UNUSABLE_NAMES, report.unusable_names)
        if report.incomplete:
            self.logger.warning(
                "grant sweep incomplete after checking %d of %d grant(s) listed on %d page(s): "
                "the next run resumes %s",
                report.checked,
                report.listed,
                report.pages,
                "at page one"
                if report.next_marker is None
                else "where this one stopped (grant sweep marker)",
            )
        self.logger.info("grant sweep %s", report.as_dict(), extra={"grantSweep": report.as_dict()})


def _handed_over(claim: Claim, item: Mapping[str, Any]) -> bool:
    """Whether the cleanup handed the grant over to the sweep (`ATTR_HANDED_OVER_AT` on a
    record still ``releasing``: a put-back, ``held`` again, is live again)."""
    return claim.state == STATE_RELEASING and _seconds(item.get(ATTR_HANDED_OVER_AT)) is not None


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


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


class GrantSweepFailed(RuntimeError):
    """Some grants could not be checked or retired (the next run retries them)."""


_sweeper: GrantSweeper | None = None


def get_grant_sweeper() -> GrantSweeper:
    """The per-process sweeper, from the function's environment."""
    global _sweeper
    if _sweeper is None:
        config = RuntimeConfig.from_env()
        session = boto3.session.Session()
        _sweeper = GrantSweeper(
            config,
            kms_client=session.client("kms", config=client_config()),
            dynamodb_client=session.client("dynamodb", config=client_config()),
            metrics=MetricsRecorder(config.metrics_namespace),
        )
    return _sweeper


def handler(event: object, context: object) -> dict[str, Any]:
    """Scheduled entry point: one sweep, metrics flushed, the report returned.

    Raises:
        GrantSweepFailed: after the metrics are written, when a call failed.
    """
    sweeper = get_grant_sweeper().for_invocation()  # this run's own metrics
    report = sweeper.sweep(out_of_time=_out_of_time(context, sweeper.config.time_guard_ms))
    sweeper.metrics.flush()
    if report.failures:
        raise GrantSweepFailed(f"{report.failures} grant(s) could not be checked or retired")
    return report.as_dict()


__all__ = [
    "LIST_GRANTS_LIMIT",
    "GrantSweepFailed",
    "GrantSweepReport",
    "GrantSweeper",
    "handler",
]
