"""The grant sweep resumes where the last run stopped, at a pace under KMS's request quotas
(issue 21, part A, point 4).

Grants, session items and ownership records are real (moto: KMS CreateGrant/ListGrants/
RetireGrant, DynamoDB), and the marker is a real item of the ownership table. **Stand-in**:
moto's ListGrants ignores ``Limit`` (every grant in one answer, never ``Truncated``), so
:class:`PagedKms` pages moto's answer as AWS does — ``Limit`` grants a page, ``Truncated`` and
an opaque ``NextMarker`` while grants remain; a marker it cannot place answers
``InvalidMarkerException`` (AWS KMS API Reference, "ListGrants") — and adds ``CreationDate``
(moto sends none). Its markers name the next page's first grant. It also stamps each KMS call
with the sweep's (fake) monotonic clock, so the pace is measured without real waits.

The time guard is the sweeper's ``out_of_time`` callable, with room for one page (100 grants)
a run, the same every run — as a function's timeout is.
"""

from __future__ import annotations

import base64
import logging
from datetime import datetime
from itertools import count, pairwise
from typing import Any

import pytest
from botocore.exceptions import ClientError
from ownership_support import OWNERSHIP_TABLE
from runtime_support import Sandbox
from session_expiry_runtime.core.config import (
    DEFAULT_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND,
    ENV_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND,
    RuntimeConfig,
)
from session_expiry_runtime.core.ownership import KIND_GRANT
from session_expiry_runtime.core.pacing import Pacer
from session_expiry_runtime.sweeps import grant_sweeper
from session_expiry_runtime.sweeps.grant_sweep_marker import marker_resource
from test_grant_sweeper import NOW, FakeTime, Grants

#: AWS KMS Developer Guide, "Request quotas" (the figures the module docstring cites).
RETIRE_GRANT_QUOTA_PER_SECOND = 15
LIST_GRANTS_QUOTA_PER_SECOND = 100
PAGE = grant_sweeper.LIST_GRANTS_LIMIT


class PagedKms:
    """moto's KMS, its ListGrants paged as AWS pages it (module docstring: a stand-in)."""

    def __init__(self, grants: Grants, time: FakeTime) -> None:
        self.kms = grants.kms
        self.created = grants.clock.created
        self.time = time
        #: (operation, Marker or GrantId, fake monotonic time) of every call
        self.calls: list[tuple[str, str | None, float]] = []

    def list_grants(self, *, KeyId: str, Limit: int, Marker: str | None = None) -> dict[str, Any]:
        self.calls.append(("ListGrants", Marker, self.time.now))
        grants = self.kms.list_grants(KeyId=KeyId)["Grants"]  # moto: all, in creation order
        ids = [g["GrantId"] for g in grants]
        start = 0
        if Marker is not None:
            first = base64.b64decode(Marker.encode()).decode(errors="replace")
            if first not in ids:
                raise ClientError(
                    {"Error": {"Code": "InvalidMarkerException", "Message": "bad marker"}},
                    "ListGrants",
                )
            start = ids.index(first)
        page = [{**g, "CreationDate": self.created[g["GrantId"]]} for g in grants[start:][:Limit]]
        answer: dict[str, Any] = {"Grants": page, "Truncated": start + Limit < len(grants)}
        if answer["Truncated"]:
            answer["NextMarker"] = base64.b64encode(ids[start + Limit].encode()).decode()
        return answer

    def retire_grant(self, **params: Any) -> dict[str, Any]:
        self.calls.append(("RetireGrant", params["GrantId"], self.time.now))
        return self.kms.retire_grant(**params)  # type: ignore[no-any-return]

    def markers(self) -> list[str | None]:
        return [marker for op, marker, _ in self.calls if op == "ListGrants"]


class Key:
    """A grant key of 250 grants in creation order: pages 1 and 2 live sessions' grants; page 3
    48 live ones, an unreleased grant of a session ended seconds ago (pending on the stream
    path) and two orphans (sessions gone, no ownership record)."""

    def __init__(self, grants: Grants) -> None:
        self.grants = grants
        for i in range(2 * PAGE + 48):
            session_id = f"live-{i:03d}"
            grants.session(session_id, "inc1", holds=grants.grant(session_id, "inc1"))
        self.pending = grants.grant("ended-just-now", "inc1")
        grants.session("ended-just-now", "inc1", holds=self.pending)
        grants.sandbox.claim(KIND_GRANT, self.pending, "ended-just-now", "inc1")
        grants.sandbox.delete("ended-just-now")
        self.orphans = [grants.grant(f"gone-{i}", "inc1") for i in range(2)]


@pytest.fixture
def key(grants: Grants) -> Key:
    return Key(grants)


@pytest.fixture
def grants(sandbox: Sandbox) -> Grants:
    return Grants(sandbox)


def one_page_a_run() -> Any:
    """The time guard of a run with time for 100 grants: asked before each grant and between
    pages, it answers ``True`` from the 101st question on."""
    asked = count()
    return lambda: next(asked) >= PAGE


def sweeper(grants: Grants, kms: PagedKms, *, now: datetime = NOW, **config: Any) -> Any:
    """A new sweeper (a new invocation: nothing carried over but the table's marker)."""
    built = grants.sweeper(kms=kms, now=now, **config)
    built.pacer = kms.time.pacer()
    return built


def stored_marker(grants: Grants) -> dict[str, Any] | None:
    item = grants.sandbox.ddb.get_item(
        TableName=OWNERSHIP_TABLE,
        Key={"resource": {"S": marker_resource(grants.sandbox.key_arn)}},
        ConsistentRead=True,
    ).get("Item")
    return item  # type: ignore[no-any-return]


def test_pages_past_the_time_guard_are_reached_by_the_next_run(grants: Grants, key: Key) -> None:
    kms = PagedKms(grants, FakeTime())
    runs = []
    for _ in range(3):
        run = sweeper(grants, kms)
        runs.append((run.sweep(out_of_time=one_page_a_run()), run.metrics.snapshot()))

    assert [r.checked for r, _ in runs] == [PAGE, PAGE, 51]
    assert [m["GrantsChecked"] for _, m in runs] == [PAGE, PAGE, 51]
    assert [m["GrantSweepIncomplete"] for _, m in runs] == [1, 1, 0]
    assert [r.resumed for r, _ in runs] == [False, True, True]
    # The orphans on page 3 are reached by the third run; the pending rule still holds there.
    assert [m["OrphanGrantsRetired"] for _, m in runs] == [0, 0, 2]
    assert not set(key.orphans) & grants.alive()
    assert runs[2][0].kept_pending == 1 and key.pending in grants.alive()
    assert len(set(kms.markers())) == 3  # each run listed a page the one before had not


def test_the_run_that_finishes_a_pass_reports_every_grant_of_the_key(
    grants: Grants, key: Key
) -> None:
    """``GrantsOnKey`` (the ceiling alarm's metric): the pages earlier runs finished are carried
    in the marker, so the third run of a three-run pass reports all 251 grants, and the runs
    that stopped report none (a part of the key is not its size)."""
    kms = PagedKms(grants, FakeTime())
    runs, carried = [], []
    for _ in range(3):
        run = sweeper(grants, kms)
        runs.append((run.sweep(out_of_time=one_page_a_run()), run.metrics.snapshot()))
        carried.append((stored_marker(grants) or {}).get("passListed"))

    assert [m.get("GrantsOnKey") for _, m in runs] == [None, None, 2 * PAGE + 48 + 1 + 2]
    assert [r.grants_on_key for r, _ in runs] == [None, None, 251]
    assert carried == [{"N": "100"}, {"N": "200"}, None]  # the finished pass removes it


def test_a_complete_run_resets_the_marker_and_the_next_run_starts_at_page_one(
    grants: Grants, key: Key
) -> None:
    kms = PagedKms(grants, FakeTime())
    cut = sweeper(grants, kms).sweep(out_of_time=one_page_a_run())
    stored = stored_marker(grants)
    assert cut.next_marker is not None and stored is not None
    assert stored["nextMarker"] == {"S": cut.next_marker}
    assert stored["keyArn"] == {"S": grants.sandbox.key_arn}

    report = sweeper(grants, kms).sweep()  # time for the rest: pages 2 and 3

    assert not report.incomplete and report.checked == PAGE + 51 and report.next_marker is None
    stored = stored_marker(grants)
    assert stored is not None and "nextMarker" not in stored
    assert sweeper(grants, kms).sweep(out_of_time=one_page_a_run()).resumed is False
    assert kms.markers() == [None, cut.next_marker, kms.markers()[2], None]


def test_without_a_marker_every_run_checks_the_first_page_only(grants: Grants, key: Key) -> None:
    """What the marker fixes: with nowhere to resume (no ownership table, as before), the same
    time guard cuts every run at page one and the orphans on page 3 stay for ever."""
    kms = PagedKms(grants, FakeTime())
    for _ in range(3):
        sweeper(grants, kms, ownership_table_name=None).sweep(out_of_time=one_page_a_run())

    assert kms.markers() == [None, None, None]
    assert set(key.orphans) <= grants.alive()


def test_a_marker_kms_refuses_restarts_at_page_one(
    grants: Grants, key: Key, caplog: pytest.LogCaptureFixture
) -> None:
    kms = PagedKms(grants, FakeTime())
    cut = sweeper(grants, kms).sweep(out_of_time=one_page_a_run())
    assert cut.next_marker is not None
    # The grant this fake's marker names is retired meanwhile: the marker cannot be placed.
    named = base64.b64decode(cut.next_marker).decode()
    grants.kms.retire_grant(KeyId=grants.sandbox.key_arn, GrantId=named)
    caplog.set_level(logging.WARNING, logger="session_expiry_runtime.sweeps.grant_sweeper")

    report = sweeper(grants, kms).sweep()

    assert not report.incomplete and report.resumed is False and report.failures == 0
    assert report.checked == 250  # every grant left, from page one
    assert kms.markers()[1:3] == [cut.next_marker, None]
    assert "KMS refused the stored marker" in caplog.text
    # The first run's 100 grants are not carried into a pass that started again at page one.
    assert report.grants_on_key == 250
    assert "nextMarker" not in (stored_marker(grants) or {})


def test_a_dry_run_reads_the_marker_and_writes_none(grants: Grants, key: Key) -> None:
    kms = PagedKms(grants, FakeTime())

    report = sweeper(grants, kms, dry_run=True).sweep(out_of_time=one_page_a_run())

    assert report.incomplete and report.next_marker is not None
    assert stored_marker(grants) is None
    assert report.grants_on_key is None


def test_the_kms_requests_keep_the_pace_under_the_quotas(grants: Grants, key: Key) -> None:
    time = FakeTime()
    kms = PagedKms(grants, time)
    run = sweeper(grants, kms, now=NOW)
    # Orphans on every page: RetireGrant calls between the ListGrants pages.
    for i in range(20):
        key.orphans.append(grants.grant(f"gone-more-{i}", "inc1"))

    report = run.sweep()

    assert report.orphans_retired == 22 and not report.incomplete
    starts = [at for _, _, at in kms.calls]
    assert len(starts) == report.pages + 22
    gaps = [later - earlier for earlier, later in pairwise(starts)]
    per_second = DEFAULT_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND
    assert min(gaps) >= 1 / per_second - 1e-9  # never more than 5 KMS requests a second
    assert per_second * 3 <= RETIRE_GRANT_QUOTA_PER_SECOND < LIST_GRANTS_QUOTA_PER_SECOND
    assert sum(time.slept) == pytest.approx((len(starts) - 1) / per_second)


def test_the_pace_is_a_setting() -> None:
    config = RuntimeConfig.from_env({ENV_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND: "2"})
    assert config.grant_sweep_kms_requests_per_second == 2
    assert RuntimeConfig.from_env({}).grant_sweep_kms_requests_per_second == 5
    time = FakeTime()
    pacer = Pacer(2, clock=time.clock, sleep=time.sleep)
    for _ in range(5):
        pacer.wait()
    assert time.now == pytest.approx(2.0)  # 5 calls at 2 a second: 4 gaps of half a second


@pytest.mark.parametrize("raw", ["0", "-1", "five", "2.5"])
def test_fails_a_kms_pace_that_is_not_a_positive_integer(raw: str) -> None:
    with pytest.raises(
        ValueError,
        match=rf"SESSION_EXPIRY_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND='{raw}': expected a positive",
    ):
        RuntimeConfig.from_env({ENV_GRANT_SWEEP_KMS_REQUESTS_PER_SECOND: raw})


def test_fails_a_pacer_of_no_calls_a_second() -> None:
    with pytest.raises(ValueError, match=r"per_second=0: expected at least 1 call a second"):
        Pacer(0)


def test_the_handler_reports_grants_checked(
    grants: Grants, key: Key, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kms = PagedKms(grants, FakeTime())
    monkeypatch.setattr(grant_sweeper, "_sweeper", sweeper(grants, kms))

    report = grant_sweeper.handler({}, None)

    assert report["checked"] == 2 * PAGE + 51 and report["pages"] == 3
    assert '"GrantsChecked":251' in capsys.readouterr().out.replace(" ", "")
