"""The grant sweep (issue 12): the backstop that retires KMS grants the stream path missed.

Real boto3 calls against moto (KMS CreateGrant/ListGrants/RetireGrant, DynamoDB GetItem), with
two stand-ins for what moto 5.2 does not reproduce, each said where it is used:

* moto's ListGrants answers no ``CreationDate`` (AWS always does): an ``after-call`` handler adds
  the time each grant was created here (``GrantClock``);
* moto's ListGrants ignores ``Limit`` (never ``Truncated``, no ``NextMarker``): paging is shown
  with botocore's ``Stubber`` answering three pages.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError
from botocore.stub import Stubber
from ownership_support import OWNERSHIP_TABLE
from runtime_support import APP_ROLE, CLEANUP_ROLE, SESSION, TABLE, Sandbox
from session_expiry_runtime.core.config import (
    DEFAULT_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND,
    RuntimeConfig,
)
from session_expiry_runtime.core.grant_names import grant_name
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.core.pacing import Pacer
from session_expiry_runtime.sweeps import grant_sweeper

NOW = datetime.now(timezone.utc)
OLD = NOW - timedelta(hours=2)


class GrantClock:
    """Adds ``CreationDate`` to moto's ListGrants answer (moto has none; AWS always sends it)."""

    def __init__(self, kms: Any) -> None:
        self.created: dict[str, datetime] = {}
        kms.meta.events.register("after-call.kms.ListGrants", self._add_dates)

    def _add_dates(self, parsed: dict[str, Any], **_: Any) -> None:
        for grant in parsed.get("Grants") or []:
            if grant["GrantId"] in self.created:
                grant["CreationDate"] = self.created[grant["GrantId"]]


class FakeTime:
    """A monotonic clock that only :meth:`sleep` moves: the sweep's pace without real waits."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def pacer(self, per_second: int = DEFAULT_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND) -> Pacer:
        return Pacer(per_second, clock=self.clock, sleep=self.sleep)


class Grants:
    """Sessions written the way ``SessionStore`` writes them, each with a named grant."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.kms = SESSION.client("kms")
        self.clock = GrantClock(self.kms)

    def grant(
        self,
        session_id: str,
        incarnation: str,
        *,
        created: datetime = OLD,
        retiring: str = CLEANUP_ROLE,
        name: str | None = "default",
    ) -> str:
        params: dict[str, Any] = {
            "KeyId": self.sandbox.key_arn,
            "GranteePrincipal": APP_ROLE,
            "RetiringPrincipal": retiring,
            "Operations": ["Decrypt"],
        }
        if name is not None:
            params["Name"] = (
                grant_name({"pk": session_id}, incarnation) if name == "default" else name
            )
        grant_id: str = self.kms.create_grant(**params)["GrantId"]
        self.clock.created[grant_id] = created
        return grant_id

    def session(
        self,
        session_id: str,
        incarnation: str,
        *,
        holds: str | None = None,
        expires_in: int = 3600,
        **extra: Any,
    ) -> None:
        """The session item; ``holds``: the grant id it stores (as ``attach_grant`` does)."""
        item = {
            "pk": {"S": session_id},
            "expiresAt": {"N": str(int(NOW.timestamp()) + expires_in)},
            "scratchPrefix": {"S": f"sessions/{session_id}/{incarnation}/"},
            **extra,
        }
        if holds is not None:
            item["grantId"] = {"S": holds}
        self.sandbox.ddb.put_item(TableName=TABLE, Item=item)

    def sweeper(
        self, kms: Any = None, *, now: datetime = NOW, **config: Any
    ) -> grant_sweeper.GrantSweeper:
        """A sweep at ``now`` (default :data:`NOW`), with the ownership table as the construct
        configures it (grants without an ownership record are judged by the item alone)."""
        settings: dict[str, Any] = {"ownership_table_name": OWNERSHIP_TABLE, **config}
        cfg = RuntimeConfig(
            table_name=TABLE,
            grant_key_arn=self.sandbox.key_arn,
            retiring_principal=CLEANUP_ROLE,
            **settings,
        )
        return grant_sweeper.GrantSweeper(
            cfg,
            kms_client=kms or self.kms,
            dynamodb_client=self.sandbox.ddb,
            metrics=MetricsRecorder("SessionExpiry"),
            clock=lambda: now,
            pacer=FakeTime().pacer(),
        )

    def alive(self) -> set[str]:
        return self.sandbox.grant_ids()


@pytest.fixture
def grants(sandbox: Sandbox) -> Grants:
    return Grants(sandbox)


def test_an_orphaned_grant_is_retired_and_counted(grants: Grants) -> None:
    # The session ended while the stream path was down: the item is gone, its grant is not.
    orphan = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc1", holds=orphan)
    grants.sandbox.delete("s-1")
    sweeper = grants.sweeper()

    report = sweeper.sweep()

    assert orphan not in grants.alive()
    assert report.orphans_retired == 1 and report.failures == 0
    assert sweeper.metrics.snapshot()["OrphanGrantsRetired"] == 1


def test_a_live_sessions_grant_is_kept(grants: Grants) -> None:
    live = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc1", holds=live)

    report = grants.sweeper().sweep()

    assert live in grants.alive() and report.kept_live == 1 and report.orphans_retired == 0


def test_a_live_sessions_grant_is_kept_whatever_incarnation_its_name_gives(
    grants: Grants,
) -> None:
    # The name's incarnation is the grant creator's word; the item holding the grant decides.
    held = grants.grant("s-1", "forged")
    grants.session("s-1", "inc1", holds=held)

    report = grants.sweeper().sweep()

    assert held in grants.alive() and report.kept_live == 1 and report.orphans_retired == 0


def test_a_grant_the_live_item_does_not_hold_is_an_orphan(grants: Grants) -> None:
    # Same key and incarnation, but create_grant could not store it (and its retire failed).
    unstored = grants.grant("s-1", "inc1")
    stored = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc1", holds=stored)

    report = grants.sweeper().sweep()

    assert unstored not in grants.alive() and stored in grants.alive()
    assert report.orphans_retired == 1 and report.kept_live == 1


@pytest.mark.parametrize(
    "encoded_key",
    ['{"pk":""}', '{"":"s-1"}', '{"pk":"s-1","sk":"x"}', "not json", '{"pk":7}'],
)
def test_fails_to_use_a_grant_name_that_gives_no_key_and_skips_it(
    grants: Grants, encoded_key: str
) -> None:
    # A forged name whose key DynamoDB would refuse (an empty key value makes GetItem fail)
    # must not fail every run: skipped, counted, never retired; the other grants still swept.
    encoded = base64.urlsafe_b64encode(encoded_key.encode()).decode().rstrip("=")
    forged = grants.grant("x", "inc1", name=f"session-expiry:inc1:{encoded}")
    orphan = grants.grant("s-gone", "inc1")

    sweeper = grants.sweeper()
    report = sweeper.sweep()

    assert forged in grants.alive() and orphan not in grants.alive()
    assert (report.unusable_names, report.failures, report.orphans_retired) == (1, 0, 1)
    assert sweeper.metrics.snapshot()["GrantSweepUnusableNames"] == 1


def test_a_grant_created_seconds_ago_is_kept_even_without_its_session(grants: Grants) -> None:
    # create_grant creates the grant before it stores it on the session.
    fresh = grants.grant("s-new", "inc1", created=NOW - timedelta(seconds=5))

    report = grants.sweeper().sweep()

    assert fresh in grants.alive() and report.kept_recent == 1


def test_a_grant_without_creation_date_is_never_retired(grants: Grants) -> None:
    undated = grants.grant("s-1", "inc1")
    del grants.clock.created[undated]  # as moto answers it: no CreationDate

    report = grants.sweeper().sweep()

    assert undated in grants.alive() and report.kept_recent == 1


def test_a_grant_of_an_earlier_incarnation_is_an_orphan(grants: Grants) -> None:
    old = grants.grant("s-1", "inc1")
    current = grants.grant("s-1", "inc2")
    grants.session("s-1", "inc2", holds=current)  # the id was reused; inc1's cleanup never ran

    report = grants.sweeper().sweep()

    assert old not in grants.alive() and current in grants.alive()
    assert report.orphans_retired == 1 and report.kept_live == 1


def test_an_expired_sessions_grant_is_retired_but_not_as_an_orphan(grants: Grants) -> None:
    expired = grants.grant("s-1", "inc1")
    # TTL passed; DynamoDB has not deleted it
    grants.session("s-1", "inc1", holds=expired, expires_in=-60)

    sweeper = grants.sweeper()
    report = sweeper.sweep()

    assert expired not in grants.alive()
    assert report.expired_retired == 1 and report.orphans_retired == 0
    snapshot = sweeper.metrics.snapshot()
    assert snapshot["ExpiredSessionGrantsRetired"] == 1 and snapshot["OrphanGrantsRetired"] == 0


def test_a_session_past_its_absolute_lifetime_is_expired(grants: Grants) -> None:
    past = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc1", holds=past, notAfter={"N": str(int(NOW.timestamp()) - 1)})

    report = grants.sweeper().sweep()

    assert past not in grants.alive() and report.expired_retired == 1


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"name": None}, "no name"),
        ({"name": "someone-else:grant"}, "another application's name"),
        ({"retiring": "arn:aws:iam::123456789012:role/other"}, "another retiring principal"),
    ],
)
def test_grants_the_store_did_not_create_are_left_alone(
    grants: Grants, kwargs: dict[str, Any], why: str
) -> None:
    foreign = grants.grant("s-1", "inc1", **kwargs)

    report = grants.sweeper().sweep()

    assert foreign in grants.alive(), why
    assert report.ours == 0


def test_a_grant_keyed_for_another_key_schema_is_left_alone(grants: Grants) -> None:
    other = grants.grant("s-1", "inc1", name=grant_name({"userId": "u", "sk": "s-1"}, "inc1"))

    report = grants.sweeper().sweep()

    # Named by a store and retired by this cleanup role, but for no key of this table.
    assert other in grants.alive() and report.ours == 0 and report.unusable_names == 1


def test_dry_run_retires_nothing_and_counts(grants: Grants) -> None:
    orphan = grants.grant("s-gone", "inc1")

    sweeper = grants.sweeper(dry_run=True)
    report = sweeper.sweep()

    assert orphan in grants.alive() and report.would_retire == 1
    assert sweeper.metrics.snapshot()["GrantsWouldBeRetired"] == 1


def test_listing_pages_with_limit_and_next_marker(grants: Grants) -> None:
    # Stub: moto's ListGrants ignores Limit and never truncates; AWS pages with Limit <= 100
    # and NextMarker while Truncated. Three pages of 100, 100 and 1 grants.
    for i in range(199):  # 199 live sessions, each holding its grant
        grants.session(f"s-live-{i}", "inc1", holds=f"{i:064x}")
    kms = SESSION.client("kms")
    stub = Stubber(kms)

    def grant(i: int, session_id: str) -> dict[str, Any]:
        return {
            "KeyId": grants.sandbox.key_arn,
            "GrantId": f"{i:064x}",
            "Name": grant_name({"pk": session_id}, "inc1"),
            "GranteePrincipal": APP_ROLE,
            "RetiringPrincipal": CLEANUP_ROLE,
            "Operations": ["Decrypt"],
            "CreationDate": OLD,
        }

    pages = [
        [grant(i, f"s-live-{i}") for i in range(100)],
        [grant(100 + i, f"s-live-{100 + i}") for i in range(99)] + [grant(199, "s-gone-1")],
        [grant(200, "s-gone-2")],
    ]
    markers = [None, "page-2", "page-3"]
    for index, page in enumerate(pages):
        params: dict[str, Any] = {"KeyId": grants.sandbox.key_arn, "Limit": 100}
        if markers[index]:
            params["Marker"] = markers[index]
        answer: dict[str, Any] = {"Grants": page, "Truncated": index < 2}
        if index < 2:
            answer["NextMarker"] = markers[index + 1]
        stub.add_response("list_grants", answer, params)
        if index == 1:
            stub.add_response(
                "retire_grant", {}, {"KeyId": grants.sandbox.key_arn, "GrantId": f"{199:064x}"}
            )
    stub.add_response(
        "retire_grant", {}, {"KeyId": grants.sandbox.key_arn, "GrantId": f"{200:064x}"}
    )

    with stub:
        report = grants.sweeper(kms=kms).sweep()
        stub.assert_no_pending_responses()

    assert report.pages == 3 and report.listed == 201
    assert report.kept_live == 199 and report.orphans_retired == 2


def test_the_time_guard_stops_between_pages(grants: Grants) -> None:
    kms = SESSION.client("kms")
    stub = Stubber(kms)
    stub.add_response(
        "list_grants",
        {"Grants": [], "Truncated": True, "NextMarker": "next"},
        {"KeyId": grants.sandbox.key_arn, "Limit": 100},
    )

    with stub:
        report = grants.sweeper(kms=kms).sweep(out_of_time=lambda: True)

    assert report.pages == 1 and report.incomplete


def test_handler_retires_writes_metrics_and_raises_on_failures(
    grants: Grants, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    orphan = grants.grant("s-gone", "inc1")
    monkeypatch.setattr(grant_sweeper, "_sweeper", grants.sweeper())

    report = grant_sweeper.handler({}, None)

    assert report["orphans_retired"] == 1 and orphan not in grants.alive()
    (doc,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert doc["OrphanGrantsRetired"] == 1

    failing = grants.sweeper()

    def unreachable(grant: Any) -> None:
        raise EndpointConnectionError(endpoint_url="https://kms.us-east-1.amazonaws.com")

    failing.retire = unreachable  # type: ignore[method-assign]
    grants.grant("s-gone-2", "inc1")
    monkeypatch.setattr(grant_sweeper, "_sweeper", failing)
    with pytest.raises(grant_sweeper.GrantSweepFailed, match="1 grant"):
        grant_sweeper.handler({}, None)
    assert '"GrantSweepFailures":1' in capsys.readouterr().out  # written before raising


def test_fails_without_the_settings_it_needs(sandbox: Sandbox) -> None:
    with pytest.raises(ValueError, match="SESSION_EXPIRY_RETIRING_PRINCIPAL is not set"):
        grant_sweeper.GrantSweeper(
            RuntimeConfig(table_name=TABLE, grant_key_arn=sandbox.key_arn),
            kms_client=None,
            dynamodb_client=None,
            metrics=MetricsRecorder("x"),
        )


def test_a_run_cut_by_the_time_guard_is_counted_incomplete_and_the_tail_stays(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    # Two live sessions' grants, then an orphan; the run has time for the first two grants only.
    for i in range(2):
        grants.session(f"live-{i}", "inc1", holds=grants.grant(f"live-{i}", "inc1"))
    orphan = grants.grant("gone", "inc1")
    looks = iter(range(1_000))
    sweeper = grants.sweeper()

    report = sweeper.sweep(out_of_time=lambda: next(looks) >= 2)

    assert report.incomplete and report.kept_live == 2 and report.orphans_retired == 0
    assert orphan in grants.alive()  # not checked: the alarm is the only signal
    assert sweeper.metrics.snapshot()["GrantSweepIncomplete"] == 1
    assert "grant sweep incomplete after checking 2 of 3 grant(s) listed on 1 page(s)" in (
        caplog.text
    )


def test_a_complete_run_counts_incomplete_zero(grants: Grants) -> None:
    grants.session("live", "inc1", holds=grants.grant("live", "inc1"))
    sweeper = grants.sweeper()

    report = sweeper.sweep(out_of_time=lambda: False)

    assert not report.incomplete
    assert sweeper.metrics.snapshot()["GrantSweepIncomplete"] == 0
