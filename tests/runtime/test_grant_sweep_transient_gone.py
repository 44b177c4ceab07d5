"""A grant seen "gone" for a moment is not an orphan when its session later ends normally.

A connected-grant detach forgets the session's grant on the item, then retires it; when
``RetireGrant`` fails it puts the grant back on the live session and holds its claim again
(``store_parts/connected_grants.py``). A grant sweep that runs in that window sees the session
without its grant and writes ``goneSince`` on the grant's ownership record. Putting the grant
back removes it (``ClaimWriter.hold_again``), so that session's normal end, hours later, is
pending from the sweep that sees the end, not from the earlier sighting: no
``OrphanGrantsRetired`` (review of issue 21).

Real boto3 calls against moto: ``SessionStore`` with ``ConnectedGrant`` on the session and
ownership tables, KMS ``CreateGrant``/``ListGrants``, the real grant sweeper at injected times
(``test_grant_sweeper``'s ``Grants``). Stubbed, because moto does not produce it: the failing
``RetireGrant`` of the detach (botocore's ``Stubber`` on a KMS client of its own; moto's KMS
never fails it) and moto's missing ``CreationDate`` in ``ListGrants`` (``GrantClock``). The sweep
in the window runs from a ``before-call`` handler of that same ``RetireGrant``: the grant is
then forgotten on the item and not yet put back.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
from botocore.stub import Stubber
from ownership_support import OWNERSHIP_TABLE, claim_state
from runtime_support import APP_ROLE, Sandbox
from session_expiry_runtime.core.ownership import ATTR_GONE_SINCE, KIND_GRANT, resource_key
from session_expiry_runtime.store import ConnectedGrant, SessionStore
from session_expiry_runtime.sweeps.grant_sweeper import GrantSweepReport
from test_grant_sweeper import NOW, OLD, Grants

HOUR = timedelta(hours=1)
OPERATIONS = ["Decrypt"]


def _store(sandbox: Sandbox, kms: Any) -> SessionStore:
    return SessionStore(
        dynamodb_client=sandbox.ddb,
        kms_client=kms,
        connections_client=sandbox.apigw,
        config=sandbox.config,
        connected_grant=ConnectedGrant(APP_ROLE, OPERATIONS),
    )


def _record(sandbox: Sandbox, grant_id: str) -> dict[str, Any]:
    item = sandbox.ddb.get_item(
        TableName=OWNERSHIP_TABLE,
        Key={"resource": {"S": resource_key(KIND_GRANT, grant_id)}},
        ConsistentRead=True,
    )["Item"]
    return dict(item)


def a_later_end_is_pending(store: SessionStore, grants: Grants, grant_id: str) -> None:
    """Ten hours later (past the 7-hour pending bound) session ``s-1`` ends, and a sweep runs
    before the stream path released the grant: pending, not an orphan, the grant kept (the
    stream path retires it)."""
    store.end("s-1")

    later = grants.sweeper(now=NOW + 10 * HOUR)
    report = later.sweep()

    assert report.orphans_retired == 0 and report.kept_pending == 1
    assert later.metrics.snapshot()["OrphanGrantsRetired"] == 0
    assert grant_id in grants.alive()


def _detach_with_a_failed_retire(sandbox: Sandbox, grants: Grants) -> list[GrantSweepReport]:
    """Detach the last connection; its ``RetireGrant`` fails once (stubbed) after a sweep at
    :data:`NOW` ran in the window. Returns that sweep's report (one)."""
    kms = boto3.client("kms", region_name=sandbox.kms.meta.region_name)
    in_window: list[GrantSweepReport] = []

    def sweep_first(model: Any, **_: Any) -> None:
        if model.name == "RetireGrant" and not in_window:
            in_window.append(grants.sweeper(now=NOW).sweep())

    # Registered before the Stubber's own before-call handler, so it runs first (it answers
    # nothing: the Stubber's error is the answer).
    kms.meta.events.register("before-call.*.*", sweep_first)
    with Stubber(kms) as stub:
        stub.add_client_error("retire_grant", "KMSInternalException", http_status_code=500)
        _store(sandbox, kms).detach_connection("s-1", "conn-1=")
        stub.assert_no_pending_responses()
    return in_window


def a_session_with_a_grant(sandbox: Sandbox, grants: Grants) -> tuple[SessionStore, str]:
    """Session ``s-1`` with a connection and a grant created past the sweep's grace period:
    its store and the grant id."""
    store = _store(sandbox, sandbox.kms)
    sandbox.open_connection("conn-1=")
    store.create("s-1", ttl=timedelta(hours=48), connection_id="conn-1=")
    grant_id = store.create_grant("s-1", grantee_principal=APP_ROLE, operations=OPERATIONS).grant_id
    assert grant_id is not None
    grants.clock.created[grant_id] = OLD  # past the sweep's grace period
    return store, grant_id


def test_a_normal_end_after_a_transient_gone_sighting_is_pending_not_an_orphan(
    sandbox: Sandbox,
) -> None:
    grants = Grants(sandbox)
    store, grant_id = a_session_with_a_grant(sandbox, grants)

    in_window = _detach_with_a_failed_retire(sandbox, grants)

    # The sweep in the window saw the session without its grant: pending, goneSince written...
    assert [r.kept_pending for r in in_window] == [1]
    # ...the detach put the grant back and held its claim again, which removed goneSince.
    assert store.get("s-1", consistent=True).grant_id == grant_id  # type: ignore[union-attr]
    assert claim_state(sandbox.ddb, KIND_GRANT, grant_id) == "held"
    assert ATTR_GONE_SINCE not in _record(sandbox, grant_id)
    assert grants.sweeper(now=NOW + HOUR).sweep().kept_live == 1
    a_later_end_is_pending(store, grants, grant_id)
    assert _record(sandbox, grant_id)[ATTR_GONE_SINCE] == {
        "N": str(int((NOW + 10 * HOUR).timestamp()))
    }  # its pending bound starts at this end
