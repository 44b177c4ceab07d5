"""The grant sweep's acting rules that `make mutation` found unpinned (issue 40), each named for
the rule: how a grant of this store is judged by its ownership record (`GrantSweeper.ownership`,
`_recorded_owner`, `_pending`), kept, retired and released (`_act`, `_release`), and what each
decision logs and counts (`_one`, `_account`). The rules of the rest of the module are in
``test_grant_sweep_mutation_rules.py``.

Real boto3 calls against moto, with the stand-ins of `test_grant_sweeper` (``CreationDate``
added to moto's ``ListGrants`` answer).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from ownership_support import OWNERSHIP_TABLE, calls_of, raw_claim
from runtime_support import APP_ROLE, SESSION
from session_expiry_runtime.core.ownership import (
    ATTR_GONE_SINCE,
    KIND_GRANT,
    STATE_RELEASED,
    STATE_RELEASING,
)
from test_grant_sweep_ownership import PENDING, ended_with_claim, held_by_another, set_gone_since
from test_grant_sweeper import NOW, Grants, grants

__all__ = ["grants"]  # the fixture, shared with test_grant_sweeper.py

LOGGER = "session_expiry_runtime.sweeps.grant_sweeper"
WHOLE = NOW.replace(microsecond=0)  # a whole second: a sighting exactly the bound ago
NOW_S = int(WHOLE.timestamp())


@pytest.fixture(autouse=True)
def _info_logs(caplog: pytest.LogCaptureFixture) -> None:
    """The sweep's INFO lines (a pending grant, a grant judged by its record) in ``caplog``."""
    caplog.set_level(logging.INFO, logger=LOGGER)


def sweep_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER]


def test_rule_the_pending_bound_ends_exactly_at_its_length(grants: Grants) -> None:
    at_bound = ended_with_claim(grants, "s-1")
    within = ended_with_claim(grants, "s-2")
    set_gone_since(grants, at_bound, NOW_S - PENDING)
    set_gone_since(grants, within, NOW_S - PENDING + 1)

    report = grants.sweeper(now=WHOLE).sweep()

    assert (report.orphans_retired, report.kept_pending) == (1, 1)
    assert at_bound not in grants.alive() and within in grants.alive()


def test_rule_a_grant_judged_by_its_record_is_logged_with_both_sessions(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    grant_id = held_by_another(grants)

    assert grants.sweeper().sweep().kept_live == 1

    (line,) = [r for r in sweep_lines(caplog) if "judged by the record" in r.getMessage()]
    assert line.levelno == logging.INFO
    assert line.getMessage() == (
        f"grant {grant_id}: its name gives session {{'pk': 's-named'}} (incarnation inc1), "
        "its ownership record {'pk': 's-holder'} (incarnation inc2): judged by the record"
    )
    assert line.grantSweep == {  # type: ignore[attr-defined]
        "grantId": grant_id,
        "namedKey": {"pk": "s-named"},
        "key": {"pk": "s-holder"},
    }


def test_rule_a_grant_recorded_for_its_own_key_is_logged_in_the_records_incarnation(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    grant_id = grants.grant("s-1", "inc-name")
    grants.sandbox.claim(KIND_GRANT, grant_id, "s-1", "inc-record")  # s-1 gone (never was)

    assert grants.sweeper().sweep().kept_pending == 1

    (line,) = [r for r in sweep_lines(caplog) if r.getMessage().startswith(f"grant {grant_id} ")]
    assert "(incarnation inc-record): session pending" in line.getMessage()
    stored = raw_claim(grants.sandbox.ddb, KIND_GRANT, grant_id)
    assert stored is not None and ATTR_GONE_SINCE in stored


class Sweep:
    """One grant of each verdict on the key: the ids, by what the sweep must do with them."""

    def __init__(self, grants: Grants) -> None:
        self.recent = grants.grant("s-recent", "inc1", created=NOW - timedelta(minutes=1))
        self.live = grants.grant("s-live", "inc1")
        grants.session("s-live", "inc1", holds=self.live)
        self.pending = ended_with_claim(grants, "s-pending")
        self.released = ended_with_claim(grants, "s-released", state=STATE_RELEASED)
        self.orphans = [grants.grant(s, "inc1") for s in ("s-gone-1", "s-gone-2")]
        self.expired = grants.grant("s-expired", "inc1")
        grants.session("s-expired", "inc1", holds=self.expired, expires_in=-60)
        grants.sandbox.claim(KIND_GRANT, self.expired, "s-expired", "inc1")
        self.expired_legacy = grants.grant("s-expired-2", "inc1")  # no ownership record
        grants.session("s-expired-2", "inc1", holds=self.expired_legacy, expires_in=-60)
        self.unusable = [
            grants.grant("s-x", "inc1", name=f"session-expiry:inc1:not-a-key-{i}") for i in (1, 2)
        ]
        self.not_ours = grants.grant("s-gone-1", "inc1", retiring=APP_ROLE)


def per_grant_lines(caplog: pytest.LogCaptureFixture) -> dict[str, logging.LogRecord]:
    """The sweep's line for each grant it retired or kept pending, by grant id."""
    lines = {}
    for record in sweep_lines(caplog):
        extra = getattr(record, "grantSweep", {})
        if "verdict" in extra:
            assert extra["grantId"] not in lines
            lines[extra["grantId"]] = record
    return lines


def test_rule_a_run_counts_each_grant_of_this_store_under_its_verdict(grants: Grants) -> None:
    sweep = Sweep(grants)

    report = grants.sweeper().sweep()

    assert report.as_dict() == {
        "pages": 1,
        "listed": 11,
        "checked": 11,
        "resumed": False,
        "next_marker": None,
        "ours": 8,  # neither the grant another role retires nor the unusable name
        "kept_live": 1,
        "kept_recent": 1,
        "orphans_retired": 2,
        "expired_retired": 2,
        "would_retire": 0,
        "kept_pending": 1,
        "kept_released": 1,
        "unusable_names": 2,
        "failures": 0,
        "incomplete": False,
        "pass_listed": 11,
        "grants_on_key": 11,
    }
    gone = {*sweep.orphans, sweep.expired, sweep.expired_legacy}
    assert grants.alive() & gone == set()
    assert {sweep.recent, sweep.live, sweep.pending, sweep.released} <= grants.alive()
    record = raw_claim(grants.sandbox.ddb, KIND_GRANT, sweep.expired)
    assert record is not None and record["state"] == {"S": STATE_RELEASED}


def test_rule_a_run_writes_every_count_and_the_optional_ones_only_when_not_zero(
    grants: Grants,
) -> None:
    Sweep(grants)
    sweeper = grants.sweeper()
    sweeper.sweep()
    assert sweeper.metrics.snapshot() == {
        "OrphanGrantsRetired": 2,
        "ExpiredSessionGrantsRetired": 2,
        "GrantSweepIncomplete": 0,
        "GrantsChecked": 11,
        "GrantsOnKey": 11,
        "GrantSweepUnusableNames": 2,
    }

    quiet = grants.sweeper()  # the next run: nothing left to retire, nothing to report
    quiet.sweep(out_of_time=lambda: True)
    assert quiet.metrics.snapshot() == {
        "OrphanGrantsRetired": 0,
        "ExpiredSessionGrantsRetired": 0,
        "GrantSweepIncomplete": 1,
        "GrantsChecked": 0,
    }


def test_rule_a_dry_run_counts_what_it_would_retire_and_logs_it_as_such(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    sweep = Sweep(grants)
    sweeper = grants.sweeper(dry_run=True)

    report = sweeper.sweep()

    assert (report.would_retire, report.orphans_retired, report.expired_retired) == (4, 0, 0)
    assert sweeper.metrics.snapshot()["GrantsWouldBeRetired"] == 4
    lines = per_grant_lines(caplog)
    assert (
        lines[sweep.orphans[0]]
        .getMessage()
        .endswith(": session gone, grant orphan, would be retired (dry run)")
    )
    assert (
        lines[sweep.expired]
        .getMessage()
        .endswith(": session expired, grant would be retired (dry run)")
    )
    assert {*sweep.orphans, sweep.expired, sweep.expired_legacy} <= grants.alive()


def test_rule_each_grant_retired_or_kept_pending_is_logged_with_its_verdict_the_others_not(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    sweep = Sweep(grants)

    grants.sweeper().sweep()

    lines = per_grant_lines(caplog)
    assert set(lines) == {*sweep.orphans, sweep.expired, sweep.expired_legacy, sweep.pending}
    orphan, expired, pending = lines[sweep.orphans[0]], lines[sweep.expired], lines[sweep.pending]
    assert (orphan.levelno, expired.levelno, pending.levelno) == (
        logging.WARNING,
        logging.WARNING,
        logging.INFO,
    )
    assert orphan.getMessage() == (
        f"grant {sweep.orphans[0]} of session {{'pk': 's-gone-1'}} (incarnation inc1): "
        "session gone, grant orphan, retired"
    )
    assert expired.getMessage() == (
        f"grant {sweep.expired} of session {{'pk': 's-expired'}} (incarnation inc1): "
        "session expired, grant retired"
    )
    assert pending.getMessage() == (
        f"grant {sweep.pending} of session {{'pk': 's-pending'}} (incarnation inc1): "
        "session pending, grant kept: its ownership record is unreleased, the stream path may "
        "still retire it"
    )
    assert orphan.grantSweep == {  # type: ignore[attr-defined]
        "grantId": sweep.orphans[0],
        "key": {"pk": "s-gone-1"},
        "verdict": "gone",
    }


def test_rule_a_grant_whose_check_fails_is_counted_and_logged_and_the_run_goes_on(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    failing = {grants.grant(s, "inc1"): s for s in ("s-bad-1", "s-bad-2")}
    orphan = grants.grant("s-gone", "inc1")
    sweeper = grants.sweeper()

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key", {}).get("pk", {}).get("S", "").startswith("s-bad"):
            raise ClientError(
                {"Error": {"Code": "InternalServerError", "Message": "try again"}}, "GetItem"
            )

    grants.sandbox.ddb.meta.events.register("before-parameter-build.dynamodb.GetItem", refuse)
    try:
        report = sweeper.sweep()
    finally:
        grants.sandbox.ddb.meta.events.unregister("before-parameter-build.dynamodb.GetItem", refuse)

    assert (report.failures, report.orphans_retired, report.ours) == (2, 1, 3)
    assert set(failing) <= grants.alive() and orphan not in grants.alive()
    errors = [r for r in sweep_lines(caplog) if r.levelno == logging.ERROR]
    assert sorted(r.getMessage() for r in errors) == sorted(
        f"grant {g} of {{'pk': '{s}'}}: InternalServerError: try again" for g, s in failing.items()
    )
    assert set(per_grant_lines(caplog)) == {orphan}  # no verdict line for a failed grant
    assert sweeper.metrics.snapshot()["GrantSweepFailures"] == 2


def stubbed_pages(grants: Grants, sizes: list[int]) -> Any:
    """A KMS client whose ``ListGrants`` answers pages of ``sizes`` grants another role retires
    (stub: moto never truncates), each but the last ``Truncated`` with ``page-<n+1>``."""
    kms, key = SESSION.client("kms"), grants.sandbox.key_arn
    stub = Stubber(kms)
    for index, size in enumerate(sizes):
        params: dict[str, Any] = {"KeyId": key, "Limit": 100}
        if index:
            params["Marker"] = f"page-{index + 1}"
        ids = [f"{index}{i:063x}" for i in range(size)]
        page = [{"KeyId": key, "GrantId": i, "RetiringPrincipal": APP_ROLE} for i in ids]
        answer: dict[str, Any] = {"Grants": page, "Truncated": index < len(sizes) - 1}
        if index < len(sizes) - 1:
            answer["NextMarker"] = f"page-{index + 2}"
        stub.add_response("list_grants", answer, params)
    stub.activate()
    return kms


@pytest.mark.parametrize(
    ("looks", "resumes"),
    [
        (2, "at page one"),  # cut within page one: its marker is none
        (6, "where this one stopped (grant sweep marker)"),  # cut within page two
    ],
)
def test_rule_an_incomplete_run_says_how_far_it_got_and_where_the_next_one_resumes(
    grants: Grants, caplog: pytest.LogCaptureFixture, looks: int, resumes: str
) -> None:
    kms = stubbed_pages(grants, [3, 3])
    budget = iter(range(1_000))

    report = grants.sweeper(kms=kms).sweep(out_of_time=lambda: next(budget) >= looks)

    checked, pages = (2, 1) if looks == 2 else (5, 2)
    assert (report.checked, report.listed, report.pages) == (checked, 3 * pages, pages)
    (warning,) = [r for r in sweep_lines(caplog) if r.levelno == logging.WARNING]
    assert warning.getMessage() == (
        f"grant sweep incomplete after checking {checked} of {3 * pages} grant(s) listed on "
        f"{pages} page(s): the next run resumes {resumes}"
    )


def test_rule_every_run_logs_its_whole_report(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    Sweep(grants)

    report = grants.sweeper().sweep()

    (line,) = [r for r in sweep_lines(caplog) if r.getMessage().startswith("grant sweep {")]
    assert line.levelno == logging.INFO
    assert line.getMessage() == f"grant sweep {report.as_dict()}"
    assert line.grantSweep == report.as_dict()  # type: ignore[attr-defined]
    assert not [r for r in sweep_lines(caplog) if "sweep incomplete" in r.getMessage()]


def hand_over(grants: Grants, grant_id: str) -> None:
    """``handedOverAt`` on the grant's record, as the cleanup's grant step writes it."""
    grants.sandbox.ddb.update_item(
        TableName=OWNERSHIP_TABLE,
        Key={"resource": {"S": f"grant#{grant_id}"}},
        UpdateExpression="SET handedOverAt = :at",
        ExpressionAttributeValues={":at": {"N": str(NOW_S - 60)}},
    )


def test_rule_a_gone_grant_the_cleanup_handed_over_is_retired_at_once_without_a_sighting(
    grants: Grants,
) -> None:
    handed = ended_with_claim(grants, "s-handed", state=STATE_RELEASING)
    hand_over(grants, handed)
    releasing = ended_with_claim(grants, "s-releasing", state=STATE_RELEASING)  # not handed over
    held_again = ended_with_claim(grants, "s-held")  # put back (held) after a hand-over
    hand_over(grants, held_again)

    report = grants.sweeper().sweep()

    assert (report.orphans_retired, report.kept_pending) == (1, 2)
    assert handed not in grants.alive() and {releasing, held_again} <= grants.alive()
    record = raw_claim(grants.sandbox.ddb, KIND_GRANT, handed)
    assert record is not None and record["state"] == {"S": STATE_RELEASED}
    assert ATTR_GONE_SINCE not in record
    for pending in (releasing, held_again):
        assert ATTR_GONE_SINCE in (raw_claim(grants.sandbox.ddb, KIND_GRANT, pending) or {})


def test_rule_the_grants_ownership_record_is_read_strongly_consistent(grants: Grants) -> None:
    grant_id = ended_with_claim(grants)
    sweeper = grants.sweeper()
    calls = calls_of(grants.sandbox.ddb)

    assert sweeper.sweep().kept_pending == 1

    reads = [p for name, p in calls if name == "GetItem" and p["TableName"] == OWNERSHIP_TABLE]
    records = [p for p in reads if p["Key"]["resource"]["S"].startswith("grant#")]  # no marker
    assert [(p["Key"], p["ConsistentRead"]) for p in records] == [
        ({"resource": {"S": f"grant#{grant_id}"}}, True)
    ]


def record_key(grant_id: str) -> dict[str, Any]:
    return {"resource": {"S": f"grant#{grant_id}"}}


def gone_since(grants: Grants, grant_id: str) -> object:
    return (raw_claim(grants.sandbox.ddb, KIND_GRANT, grant_id) or {}).get(ATTR_GONE_SINCE)


def test_rule_a_sighting_is_written_once_and_only_on_an_existing_record(grants: Grants) -> None:
    grant_id = ended_with_claim(grants)
    sweeper = grants.sweeper()

    assert sweeper._mark_gone(record_key(grant_id), WHOLE) == NOW_S
    sweeper._mark_gone(record_key(grant_id), WHOLE + timedelta(hours=1))  # the first one stays
    assert gone_since(grants, grant_id) == {"N": str(NOW_S)}

    assert sweeper._mark_gone(record_key("g-none"), WHOLE) is None  # the record went away
    assert raw_claim(grants.sandbox.ddb, KIND_GRANT, "g-none") is None  # and is not made up


def test_rule_a_sighting_written_elsewhere_fails_loudly(grants: Grants) -> None:
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        grants.sweeper(ownership_table_name="no-such-table")._mark_gone(record_key("g"), WHOLE)


def test_rule_a_sighting_is_taken_back_only_while_it_is_the_one_written(grants: Grants) -> None:
    grant_id = ended_with_claim(grants)
    set_gone_since(grants, grant_id, NOW_S)
    sweeper = grants.sweeper()

    sweeper._unmark_gone(record_key(grant_id), Decimal(NOW_S - 1))  # another sighting: kept
    assert gone_since(grants, grant_id) == {"N": str(NOW_S)}
    sweeper._unmark_gone(record_key(grant_id), Decimal(NOW_S))
    assert gone_since(grants, grant_id) is None
    sweeper._unmark_gone(record_key(grant_id), Decimal(NOW_S))  # already gone: quietly
    assert gone_since(grants, grant_id) is None

    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        grants.sweeper(ownership_table_name="no-such-table")._unmark_gone(
            record_key(grant_id), Decimal(NOW_S)
        )


def refused(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "no"}}, "GetItem")


def test_rule_a_sighting_whose_session_check_fails_is_taken_back_and_the_failure_raised(
    grants: Grants,
) -> None:
    grant_id = ended_with_claim(grants)
    set_gone_since(grants, grant_id, NOW_S)
    sweeper = grants.sweeper()
    assert sweeper._back(lambda: True, record_key(grant_id), Decimal(NOW_S)) is True
    assert sweeper._back(lambda: False, record_key(grant_id), Decimal(NOW_S)) is False
    assert gone_since(grants, grant_id) == {"N": str(NOW_S)}  # an answer: nothing taken back

    def fails() -> bool:
        raise refused("ProvisionedThroughputExceededException")

    with pytest.raises(ClientError, match="ProvisionedThroughputExceededException"):
        sweeper._back(fails, record_key(grant_id), Decimal(NOW_S))
    assert gone_since(grants, grant_id) is None


def test_rule_a_sighting_that_cannot_be_taken_back_is_logged_and_the_check_failure_raised(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    sweeper = grants.sweeper(ownership_table_name="no-such-table")

    def fails() -> bool:
        raise refused("ProvisionedThroughputExceededException")

    with pytest.raises(ClientError, match="ProvisionedThroughputExceededException"):
        sweeper._back(fails, record_key("g1"), Decimal(NOW_S))

    (error,) = [r for r in sweep_lines(caplog) if r.levelno == logging.ERROR]
    assert error.getMessage().startswith(
        f"grant#g1: goneSince {NOW_S} not taken back after its session check failed: "
        "ResourceNotFoundException: "
    )


def test_rule_a_check_that_fails_outside_botocore_takes_nothing_back(grants: Grants) -> None:
    grant_id = ended_with_claim(grants)
    set_gone_since(grants, grant_id, NOW_S)

    def breaks() -> bool:
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        grants.sweeper()._back(breaks, record_key(grant_id), Decimal(NOW_S))
    assert gone_since(grants, grant_id) == {"N": str(NOW_S)}


def test_rule_a_stale_sighting_is_forgotten_by_its_value_and_never_in_a_dry_run(
    grants: Grants,
) -> None:
    grant_id = ended_with_claim(grants)
    set_gone_since(grants, grant_id, NOW_S)
    item = {ATTR_GONE_SINCE: {"N": str(NOW_S)}}

    grants.sweeper(dry_run=True)._forget_sighting(record_key(grant_id), item)
    assert gone_since(grants, grant_id) == {"N": str(NOW_S)}
    sweeper = grants.sweeper()
    calls = calls_of(grants.sandbox.ddb)
    sweeper._forget_sighting(record_key(grant_id), {})  # no sighting on the record read: no call
    assert calls == []
    sweeper._forget_sighting(record_key(grant_id), item)
    assert gone_since(grants, grant_id) is None
