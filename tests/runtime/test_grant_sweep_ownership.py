"""The grant sweep reads the grant's ownership record: a grant the stream path may still be
retrying is pending, never an orphan; a released record means no call.

Real boto3 calls against moto (KMS, the session table, the ownership table seeded in the format
``session_expiry_runtime.ownership`` defines). moto's ListGrants answers no ``CreationDate``:
``GrantClock`` adds it (see ``test_grant_sweeper``).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from ownership_support import calls_of, put_claim, raw_claim, read_claim
from runtime_support import Sandbox
from session_expiry_runtime.ownership import ATTR_GONE_SINCE, KIND_GRANT, STATE_HELD, STATE_RELEASED
from test_grant_sweeper import NOW, Grants

PENDING = 7 * 3600  # the default bound: the mapping's maximum record age plus an hour


@pytest.fixture
def grants(sandbox: Sandbox) -> Grants:
    return Grants(sandbox)


def ended_with_claim(grants: Grants, session_id: str = "s-1", **claim: object) -> str:
    """A session that held a named grant and a claim on it, then ended (item gone)."""
    grant_id = grants.grant(session_id, "inc1")
    grants.session(session_id, "inc1", holds=grant_id)
    grants.sandbox.claim(KIND_GRANT, grant_id, session_id, "inc1", **claim)
    grants.sandbox.delete(session_id)
    return grant_id


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
    grants.sandbox.ddb.update_item(
        TableName="session-ownership",
        Key={"resource": {"S": f"grant#{grant_id}"}},
        UpdateExpression="SET goneSince = :g",
        ExpressionAttributeValues={":g": {"N": str(gone_since)}},
    )
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
    grant_id = grants.grant("s-named", "inc1")
    grants.session("s-holder", "inc2", holds=grant_id, expires_in=48 * 3600)
    grants.sandbox.claim(KIND_GRANT, grant_id, "s-holder", "inc2")

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
