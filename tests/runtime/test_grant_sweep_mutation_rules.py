"""The grant sweep's rules that `make mutation` found unpinned (issue 40), each named for the
rule: the exact end of the grace period, a session item's ``notAfter`` at or past now or
unreadable, the strongly consistent read of the session named, ``RetireGrant`` by the grant
key, and the release of a retired grant's record only while it names the same owner and
incarnation.

Real boto3 calls against moto, with the stand-ins of `test_grant_sweeper` (``CreationDate``
added to moto's ``ListGrants`` answer).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from ownership_support import OWNERSHIP_TABLE, calls_of, put_claim, raw_claim
from runtime_support import TABLE
from session_expiry_runtime.core.grant_names import GrantOwner
from session_expiry_runtime.core.ownership import (
    KIND_GRANT,
    STATE_RELEASED,
    Claim,
    owner_token,
)
from test_grant_sweeper import NOW, Grants, grants

__all__ = ["grants"]  # the fixture, shared with test_grant_sweeper.py

WHOLE = NOW.replace(microsecond=0)  # a whole second: `notAfter` equal to now
NOW_S = int(WHOLE.timestamp())
GRACE = 900


def owner(session_id: str = "s-1") -> GrantOwner:
    return GrantOwner(key={"pk": session_id}, incarnation="inc1")


def listed(grants: Grants, grant_id: str) -> dict[str, Any]:
    (grant,) = [
        g
        for g in grants.kms.list_grants(KeyId=grants.sandbox.key_arn)["Grants"]
        if g["GrantId"] == grant_id
    ]
    return grant  # type: ignore[no-any-return]


def test_rule_the_grace_period_ends_exactly_at_its_length(grants: Grants) -> None:
    edge = grants.grant("s-gone", "inc1", created=NOW - timedelta(seconds=GRACE))
    young = grants.grant("s-gone2", "inc1", created=NOW - timedelta(seconds=GRACE - 1))
    sweeper = grants.sweeper()

    assert sweeper.verdict(listed(grants, edge), owner("s-gone"), NOW) == "gone"
    assert sweeper.verdict(listed(grants, young), owner("s-gone2"), NOW) == "recent"


@pytest.mark.parametrize(
    ("not_after", "verdict"),
    [({"N": str(NOW_S)}, "expired"), ({"S": "soon"}, "expired"), ({"N": str(NOW_S + 1)}, "live")],
)
def test_rule_a_session_at_or_past_its_not_after_or_unreadable_is_expired(
    grants: Grants, not_after: dict[str, str], verdict: str
) -> None:
    held = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc1", holds=held, notAfter=not_after)

    assert grants.sweeper().verdict(listed(grants, held), owner(), WHOLE) == verdict


def test_rule_the_session_item_is_read_strongly_consistent_by_the_owner_key(
    grants: Grants,
) -> None:
    held = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc1", holds=held)
    sweeper = grants.sweeper()
    calls = calls_of(sweeper._ddb)

    assert sweeper.verdict(listed(grants, held), owner(), NOW) == "live"
    assert sweeper._holds(owner(), held) and not sweeper._holds(owner("s-2"), held)

    reads = [p for name, p in calls if name == "GetItem"]
    assert [(p["TableName"], p["Key"], p["ConsistentRead"]) for p in reads] == [
        (TABLE, {"pk": {"S": "s-1"}}, True),
        (TABLE, {"pk": {"S": "s-1"}}, True),
        (TABLE, {"pk": {"S": "s-2"}}, True),
    ]


def test_rule_a_grant_id_held_as_another_type_is_not_held(grants: Grants) -> None:
    held = grants.grant("s-1", "inc1")
    sweeper = grants.sweeper()
    assert not sweeper._holds_grant({"grantId": {"SS": [held]}}, held)
    assert not sweeper._holds_grant({"grantId": held}, held)
    assert sweeper._holds_grant({"grantId": {"S": held}}, held)


def test_rule_retire_by_the_grant_key_and_already_retired_is_success(grants: Grants) -> None:
    orphan = grants.grant("s-gone", "inc1")
    sweeper = grants.sweeper()
    calls = calls_of(sweeper._kms)

    sweeper.retire({"GrantId": orphan})
    sweeper.retire({"GrantId": orphan})  # NotFoundException: already retired

    assert orphan not in grants.alive()
    assert [p for name, p in calls if name == "RetireGrant"] == [
        {"KeyId": grants.sandbox.key_arn, "GrantId": orphan}
    ] * 2


def test_rule_a_retire_refused_otherwise_raises(grants: Grants) -> None:
    sweeper = grants.sweeper()

    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "KMSInternalException"}}, "RetireGrant")

    sweeper._kms.meta.events.register("before-parameter-build.kms.RetireGrant", refuse)
    try:
        with pytest.raises(ClientError, match="KMSInternalException"):
            sweeper.retire({"GrantId": "g" * 64})
    finally:
        sweeper._kms.meta.events.unregister("before-parameter-build.kms.RetireGrant", refuse)


def claim(grants: Grants, grant_id: str) -> Claim:
    put_claim(grants.sandbox.ddb, KIND_GRANT, grant_id, key={"pk": "s-1"}, incarnation="inc1")
    found = Claim.from_item(raw_claim(grants.sandbox.ddb, KIND_GRANT, grant_id))
    assert found is not None
    return found


@pytest.mark.parametrize("field", ["owner", "incarnation"])
def test_rule_a_retired_grants_record_is_released_only_with_the_same_owner_and_incarnation(
    grants: Grants, field: str
) -> None:
    held = claim(grants, "g1")
    other = owner_token({"pk": "s-9"}) if field == "owner" else "inc9"
    sweeper = grants.sweeper()

    sweeper._release(Claim(**{**held.__dict__, field: other}), NOW)  # taken over: quietly
    assert raw_claim(grants.sandbox.ddb, KIND_GRANT, "g1")["state"] != {"S": STATE_RELEASED}  # type: ignore[index]

    sweeper._release(held, NOW + timedelta(seconds=5))
    after = raw_claim(grants.sandbox.ddb, KIND_GRANT, "g1")
    assert after is not None and after["state"] == {"S": STATE_RELEASED}
    assert after["stateSince"] == {"N": str(NOW_S + 5)}


def test_rule_a_release_that_fails_otherwise_raises(grants: Grants) -> None:
    held = claim(grants, "g1")
    with pytest.raises(ClientError):
        grants.sweeper(ownership_table_name="no-such-table")._release(held, NOW)
    assert OWNERSHIP_TABLE != "no-such-table"


def test_rule_an_expired_sessions_grant_is_retired_and_its_record_released(
    grants: Grants,
) -> None:
    expired = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc1", holds=expired, expires_in=-60)
    put_claim(grants.sandbox.ddb, KIND_GRANT, expired, key={"pk": "s-1"}, incarnation="inc1")

    report = grants.sweeper().sweep()

    assert (report.expired_retired, report.orphans_retired, report.would_retire) == (1, 0, 0)
    record = raw_claim(grants.sandbox.ddb, KIND_GRANT, expired)
    assert record is not None and record["state"] == {"S": STATE_RELEASED}


def test_rule_a_dry_run_counts_every_expired_grant_and_retires_nothing(grants: Grants) -> None:
    expired = [grants.grant(s, "inc1") for s in ("s-1", "s-2")]
    for session_id, grant_id in zip(("s-1", "s-2"), expired, strict=True):
        grants.session(session_id, "inc1", holds=grant_id, expires_in=-60)

    report = grants.sweeper(dry_run=True).sweep()

    assert (report.would_retire, report.expired_retired, report.orphans_retired) == (2, 0, 0)
    assert set(expired) <= grants.alive()
