"""The grant sweep reads the grant's ownership record: a grant the stream path may still be
retrying is pending, never an orphan; a released record means no call.

Real boto3 calls against moto (KMS, the session table, the ownership table seeded in the format
``session_expiry_runtime.core.ownership`` defines). moto's ListGrants answers no ``CreationDate``:
``GrantClock`` adds it (see ``test_grant_sweeper``).
"""

from __future__ import annotations

import base64
import logging
from datetime import timedelta

import pytest
from ownership_support import calls_of, put_claim, raw_claim, read_claim
from runtime_support import APP_ROLE, CLEANUP_ROLE, TABLE, Sandbox
from session_expiry_runtime.core.grant_names import grant_name
from session_expiry_runtime.core.ownership import (
    ATTR_GONE_SINCE,
    KIND_GRANT,
    STATE_HELD,
    STATE_RELEASED,
)
from session_expiry_runtime.store import SessionStore
from test_grant_sweeper import NOW, Grants

PENDING = 7 * 3600  # the default bound: the mapping's maximum record age plus an hour


@pytest.fixture
def grants(sandbox: Sandbox) -> Grants:
    return Grants(sandbox)


@pytest.fixture(autouse=True)
def _info_logs(caplog: pytest.LogCaptureFixture) -> None:
    """The sweep's INFO lines (a grant judged by its record) in ``caplog``."""
    caplog.set_level(logging.INFO, logger="session_expiry_runtime.sweeps.grant_sweeper")


def ended_with_claim(grants: Grants, session_id: str = "s-1", **claim: object) -> str:
    """A session that held a named grant and a claim on it, then ended (item gone)."""
    grant_id = grants.grant(session_id, "inc1")
    grants.session(session_id, "inc1", holds=grant_id)
    grants.sandbox.claim(KIND_GRANT, grant_id, session_id, "inc1", **claim)
    grants.sandbox.delete(session_id)
    return grant_id


def held_by_another(grants: Grants, incarnation: str = "inc2") -> str:
    """A grant named for ``s-named`` (no such session), recorded and held by the live session
    ``s-holder`` in ``incarnation`` (``attach_grant`` of a grant created elsewhere)."""
    grant_id = grants.grant("s-named", "inc1")
    grants.session("s-holder", incarnation, holds=grant_id, expires_in=48 * 3600)
    grants.sandbox.claim(KIND_GRANT, grant_id, "s-holder", incarnation)
    return grant_id


def set_gone_since(grants: Grants, grant_id: str, seconds: int) -> None:
    """``goneSince`` on the grant's record, as an earlier sweep wrote it."""
    grants.sandbox.ddb.update_item(
        TableName="session-ownership",
        Key={"resource": {"S": f"grant#{grant_id}"}},
        UpdateExpression="SET goneSince = :g",
        ExpressionAttributeValues={":g": {"N": str(seconds)}},
    )


def test_an_unreleased_grant_gone_for_less_than_the_bound_is_pending_not_an_orphan(
    grants: Grants,
) -> None:
    grant_id = ended_with_claim(grants)  # created 2 hours ago: past the 15-minute grace
    sweeper = grants.sweeper()

    report = sweeper.sweep()

    assert grant_id in grants.alive()
    assert report.kept_pending == 1 and report.orphans_retired == 0 and report.failures == 0
    assert sweeper.metrics.snapshot()["OrphanGrantsRetired"] == 0
    stored = raw_claim(grants.sandbox.ddb, KIND_GRANT, grant_id)
    assert stored is not None and stored[ATTR_GONE_SINCE] == {"N": str(int(NOW.timestamp()))}

    # A later run within the bound keeps the first sighting and the grant.
    later = grants.sweeper(now=NOW + timedelta(seconds=PENDING - 60))
    assert later.sweep().kept_pending == 1
    assert raw_claim(grants.sandbox.ddb, KIND_GRANT, grant_id) == stored  # the first sighting

    # Past the bound the stream path has given up: an orphan, retired and released.
    last = grants.sweeper(now=NOW + timedelta(seconds=PENDING + 1))
    report = last.sweep()
    assert grant_id not in grants.alive()
    assert report.orphans_retired == 1 and last.metrics.snapshot()["OrphanGrantsRetired"] == 1
    claim = read_claim(grants.sandbox.ddb, KIND_GRANT, grant_id)
    assert claim is not None and claim.state == STATE_RELEASED


def test_an_unreleased_grant_gone_for_longer_than_the_bound_is_retired_as_an_orphan(
    grants: Grants,
) -> None:
    grant_id = ended_with_claim(grants)
    gone_since = int(NOW.timestamp()) - PENDING - 1
    set_gone_since(grants, grant_id, gone_since)
    sweeper = grants.sweeper()

    report = sweeper.sweep()

    assert grant_id not in grants.alive()
    assert report.orphans_retired == 1 and report.kept_pending == 0
    assert sweeper.metrics.snapshot()["OrphanGrantsRetired"] == 1
    claim = read_claim(grants.sandbox.ddb, KIND_GRANT, grant_id)
    assert claim is not None and claim.state == STATE_RELEASED


def test_a_released_grant_is_kept_without_a_call_and_never_an_orphan(grants: Grants) -> None:
    # The stream path retired it and released the record; KMS still lists it for a while.
    grant_id = ended_with_claim(grants, state=STATE_RELEASED)
    sweeper = grants.sweeper()
    calls = calls_of(grants.kms)

    report = sweeper.sweep()

    assert [name for name, _ in calls] == ["ListGrants"]  # no RetireGrant
    assert report.kept_released == 1 and report.orphans_retired == 0
    assert grant_id in grants.alive()


def test_an_expired_sessions_grant_is_retired_early_and_its_record_released(
    grants: Grants,
) -> None:
    grant_id = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc1", holds=grant_id, expires_in=-60)  # expired, not deleted yet
    grants.sandbox.claim(KIND_GRANT, grant_id, "s-1", "inc1")
    sweeper = grants.sweeper()

    report = sweeper.sweep()

    assert grant_id not in grants.alive()
    assert report.expired_retired == 1 and report.orphans_retired == 0
    claim = read_claim(grants.sandbox.ddb, KIND_GRANT, grant_id)
    assert claim is not None and claim.state == STATE_RELEASED  # its late REMOVE: no call


def test_a_dry_run_writes_no_gone_since_and_keeps_the_pending_grant(grants: Grants) -> None:
    grant_id = ended_with_claim(grants)
    sweeper = grants.sweeper(dry_run=True)

    report = sweeper.sweep()

    assert report.kept_pending == 1 and report.would_retire == 0
    stored = raw_claim(grants.sandbox.ddb, KIND_GRANT, grant_id)
    assert stored is not None and ATTR_GONE_SINCE not in stored
    assert stored["state"] == {"S": STATE_HELD}


def test_a_grant_without_a_record_is_judged_by_the_item_alone(grants: Grants) -> None:
    # A legacy grant (created before ownership records): an orphan as soon as it is gone.
    grant_id = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc1", holds=grant_id)
    grants.sandbox.delete("s-1")

    report = grants.sweeper().sweep()

    assert grant_id not in grants.alive() and report.orphans_retired == 1


def test_without_an_ownership_table_the_sweep_reads_no_record(grants: Grants) -> None:
    grant_id = ended_with_claim(grants)
    sweeper = grants.sweeper(ownership_table_name=None)

    assert sweeper.sweep().orphans_retired == 1  # as before ownership records
    assert grant_id not in grants.alive()


def test_a_grant_held_by_another_session_than_its_name_gives_is_judged_by_its_record(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    """A grant whose name gives a session that is gone (or never was), recorded and held by
    a live one (``attach_grant`` of a grant created elsewhere): the ownership record decides.
    Before, the name alone decided: pending at once, and retired as an orphan past the bound
    while its holder was live (``orphans_retired == 1`` in the second run)."""
    grant_id = held_by_another(grants)

    for now in (NOW, NOW + timedelta(seconds=PENDING + 1)):
        report = grants.sweeper(now=now).sweep()
        assert (report.kept_live, report.kept_pending, report.orphans_retired) == (1, 0, 0)

    assert grant_id in grants.alive()
    stored = raw_claim(grants.sandbox.ddb, KIND_GRANT, grant_id)
    assert stored is not None and ATTR_GONE_SINCE not in stored  # never seen gone
    assert "its ownership record {'pk': 's-holder'}" in caplog.text


def test_a_grant_whose_recorded_session_is_gone_is_pending_then_an_orphan(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    grant_id = grants.grant("s-named", "inc1")
    grants.session("s-named", "inc1")  # live, but it does not hold the grant
    grants.sandbox.claim(KIND_GRANT, grant_id, "s-holder", "inc2")  # its holder is gone

    first = grants.sweeper(now=NOW).sweep()
    last = grants.sweeper(now=NOW + timedelta(seconds=PENDING + 1)).sweep()

    assert (first.kept_pending, first.orphans_retired) == (1, 0)
    assert last.orphans_retired == 1 and grant_id not in grants.alive()
    claim = read_claim(grants.sandbox.ddb, KIND_GRANT, grant_id)
    assert claim is not None and claim.state == STATE_RELEASED
    assert "its ownership record {'pk': 's-holder'} (incarnation inc2): judged by the record" in (
        caplog.text
    )


def test_a_grant_whose_record_names_a_key_of_another_shape_is_judged_by_its_name(
    grants: Grants,
) -> None:
    """A record whose owner is no key of this table (another schema) cannot be checked: the
    grant is judged by its name, as before."""
    grant_id = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc1", holds=grant_id)
    put_claim(
        grants.sandbox.ddb,
        KIND_GRANT,
        grant_id,
        key={"tenant": "t-1", "sessionId": "s-1"},
        incarnation="inc1",
    )
    grants.sandbox.delete("s-1")

    report = grants.sweeper(now=NOW).sweep()

    assert report.kept_pending == 1 and report.failures == 0


def test_a_grant_attached_to_a_session_whose_key_no_grant_name_can_hold_is_judged_by_its_record(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    """Review 34: the record's session is any key of the table, not only one a grant name can
    hold. ``attach_grant`` takes a grant on a session of any key length (only ``create_grant``
    needs the key to fit a 256-character name); a record naming such a session (here a
    200-character session id, written by the real ``SessionStore``) was read back through
    ``parse_grant_name``, which refuses it, so the grant was judged by its name: pending, and
    retired as an orphan past the bound while the live session held it."""
    store = SessionStore(config=grants.sandbox.config, dynamodb_client=grants.sandbox.ddb)
    holder = "s-" + "h" * 198
    store.create(holder, ttl=timedelta(hours=48))
    created = grants.kms.create_grant(
        KeyId=grants.sandbox.key_arn,
        GranteePrincipal=APP_ROLE,
        RetiringPrincipal=CLEANUP_ROLE,
        Operations=["Decrypt"],
        Name=grant_name({"pk": "s-named"}, "inc1"),  # a session that is gone
    )
    grant_id = created["GrantId"]
    grants.clock.created[grant_id] = NOW - timedelta(hours=2)
    store.attach_grant(holder, grant_id=grant_id, grant_token=created["GrantToken"])

    for now in (NOW, NOW + timedelta(seconds=PENDING + 1)):
        report = grants.sweeper(now=now).sweep()
        assert (report.kept_live, report.kept_pending, report.orphans_retired) == (1, 0, 0)
        assert report.failures == 0

    assert grant_id in grants.alive()
    stored = raw_claim(grants.sandbox.ddb, KIND_GRANT, grant_id)
    assert stored is not None and ATTR_GONE_SINCE not in stored
    assert "judged by the record" in caplog.text


def test_a_record_of_the_grants_own_key_in_another_incarnation_changes_nothing(
    grants: Grants, caplog: pytest.LogCaptureFixture
) -> None:
    """Review 34: a grant attached to a later incarnation of the key its name gives (the
    usual re-attach) is judged by that key either way: no second session read, no warning
    that it was "judged by the record" on every sweep of its pending time."""
    grant_id = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc2", holds=grant_id)
    grants.sandbox.claim(KIND_GRANT, grant_id, "s-1", "inc2")
    grants.sandbox.delete("s-1")
    sweeper = grants.sweeper()
    calls = calls_of(grants.sandbox.ddb)

    report = sweeper.sweep()

    assert report.kept_pending == 1 and report.failures == 0
    assert "judged by the record" not in caplog.text
    reads = [p for name, p in calls if name == "GetItem" and p["TableName"] == TABLE]
    assert len(reads) == 2  # the verdict and the first sighting's re-read, no third


def test_a_record_naming_a_live_holder_in_an_incarnation_no_grant_name_can_hold_keeps_it(
    grants: Grants,
) -> None:
    """Review 34: the record's incarnation is whatever the holder's item says (an item another
    writer made may carry any string); it has no bearing on the verdict, which is by key, so
    it must not make the record unreadable (it did: ``parse_grant_name`` refuses ``.``/``:``)."""
    grant_id = held_by_another(grants, "inc.2:x")

    for now in (NOW, NOW + timedelta(seconds=PENDING + 1)):
        report = grants.sweeper(now=now).sweep()
        assert (report.kept_live, report.orphans_retired, report.failures) == (1, 0, 0)
    assert grant_id in grants.alive()


@pytest.mark.parametrize(
    "owner",
    [
        "!!not base64!!",
        "eyJwayI6InMtMSJ9==",  # padding: not what owner_token writes
        "W10",  # [] : JSON, not an object
        "eyJwayI6IiJ9",  # {"pk": ""}: no DynamoDB key value is empty
        base64.urlsafe_b64encode(b"[" * 3000).decode().rstrip("="),  # deep JSON nesting
    ],
)
def test_a_record_whose_owner_is_no_owner_token_is_judged_by_the_name_without_a_failure(
    grants: Grants, owner: str
) -> None:
    grant_id = grants.grant("s-1", "inc1")
    grants.sandbox.ddb.put_item(
        TableName="session-ownership",
        Item={
            "resource": {"S": f"grant#{grant_id}"},
            "owner": {"S": owner},
            "incarnation": {"S": "inc1"},
            "state": {"S": STATE_HELD},
            "claimedAt": {"N": str(int(NOW.timestamp()) - 7200)},
            "notAfter": {"N": str(int(NOW.timestamp()) + 3600)},
        },
    )

    report = grants.sweeper().sweep()  # s-1 never was: gone, by its name

    assert (report.kept_pending, report.failures) == (1, 0)


def test_a_dry_run_judging_by_the_record_writes_nothing(grants: Grants) -> None:
    grant_id = grants.grant("s-named", "inc1")
    grants.sandbox.claim(KIND_GRANT, grant_id, "s-holder", "inc2")  # both sessions gone
    sweeper = grants.sweeper(dry_run=True)
    calls = calls_of(grants.sandbox.ddb)

    report = sweeper.sweep()

    assert report.kept_pending == 1 and report.would_retire == 0 and report.failures == 0
    assert {name for name, _ in calls} == {"GetItem"}
    assert grant_id in grants.alive()


def test_a_stale_sighting_on_a_grant_its_recorded_session_holds_is_taken_back(
    grants: Grants,
) -> None:
    """A sweep that judged the grant by its name alone (before the record decided) wrote
    ``goneSince`` on a grant its recorded session holds live. Left there, that session's later
    end would be retired as an orphan at once (the bound long passed); the first sweep that
    judges it by the record takes the sighting back."""
    grant_id = held_by_another(grants)
    stale = int(NOW.timestamp()) - 10 * 3600
    set_gone_since(grants, grant_id, stale)

    assert grants.sweeper(now=NOW).sweep().kept_live == 1
    stored = raw_claim(grants.sandbox.ddb, KIND_GRANT, grant_id)
    assert stored is not None and ATTR_GONE_SINCE not in stored

    grants.sandbox.delete("s-holder")  # it ends; the stream path has not run yet
    report = grants.sweeper(now=NOW + timedelta(minutes=5)).sweep()
    assert (report.kept_pending, report.orphans_retired) == (1, 0)
    assert grant_id in grants.alive()


def test_a_dry_run_leaves_a_stale_sighting_where_it_is(grants: Grants) -> None:
    grant_id = held_by_another(grants)
    set_gone_since(grants, grant_id, 1)

    assert grants.sweeper(now=NOW, dry_run=True).sweep().kept_live == 1

    stored = raw_claim(grants.sandbox.ddb, KIND_GRANT, grant_id)
    assert stored is not None and stored[ATTR_GONE_SINCE] == {"N": "1"}
