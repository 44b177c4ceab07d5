"""A grant sweep's first "gone" sighting must not outlive the grant being put back.

A connected-grant detach forgets the session's grant on the item, fails to retire it, puts it
back on the live session and holds its claim again, which removes ``goneSince``
(``test_grant_sweep_transient_gone``). A sweep that read the item while the grant was
forgotten may still write its first sighting (``SET goneSince = if_not_exists(...)``) after
that: the ownership record then says the grant's session has been gone since a moment when it
was live. Hours later the session ends normally, and the next sweep counts the pending bound
from that stale sighting: the grant is retired as an orphan (``OrphanGrantsRetired``, alarmed)
while the stream path is still due to retire it — and any later moment the item does not hold
the grant (the next detach's window) is read the same way. The sweep now checks the session
again after writing the sighting, and takes it back when the grant is on the item again.

Real boto3 calls against moto: ``SessionStore`` with ``ConnectedGrant``, the real grant sweeper
(``test_grant_sweeper``'s ``Grants``). Stubbed, because moto does not produce it: the failing
``RetireGrant`` of the detach (botocore's ``Stubber`` on a KMS client of its own), and moto's
missing ``CreationDate`` in ``ListGrants`` (``GrantClock``). The interleaving — the sweep reads
the item in the detach's window, the detach puts the grant back, then the sweep writes its
sighting — is made with two threads and events (no sleeps): the sweep runs on a thread of its
own from the detach's ``RetireGrant`` and is held just before its ``goneSince`` write until the
detach has returned.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import boto3
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from ownership_support import claim_state
from runtime_support import SESSION, Sandbox
from session_expiry_runtime.core.ownership import ATTR_GONE_SINCE, KIND_GRANT
from session_expiry_runtime.sweeps.grant_sweeper import GrantSweeper, GrantSweepReport
from test_grant_sweep_transient_gone import (
    _record,
    _store,
    a_later_end_is_pending,
    a_session_with_a_grant,
)
from test_grant_sweeper import NOW, Grants

HOUR = timedelta(hours=1)
OPERATIONS = ["Decrypt"]
#: Longest a thread waits for the other one (seconds); never reached when the test passes.
WAIT = 30


def _held_before_its_sighting(sweeper: GrantSweeper) -> tuple[threading.Event, threading.Event]:
    """Hold ``sweeper``'s ``goneSince`` write until ``go`` is set; ``at_write`` says it got
    there. The sweeper gets a DynamoDB client of its own, so the store's calls are not held."""
    at_write, go = threading.Event(), threading.Event()
    ddb = SESSION.client("dynamodb")

    def hold(params: dict[str, Any], **_: Any) -> None:
        if "if_not_exists" in str(params.get("UpdateExpression")):
            at_write.set()
            assert go.wait(WAIT), "the detach never returned"

    ddb.meta.events.register("provide-client-params.dynamodb.UpdateItem", hold)
    sweeper._ddb = ddb  # the sweep's own client (the test's seam; the handler builds its own)
    return at_write, go


def _sweep_across_the_put_back(
    sandbox: Sandbox, grants: Grants, *, reread_fails: bool = False
) -> GrantSweepReport:
    """Detach the last connection; its ``RetireGrant`` fails (stubbed) while a sweep at
    :data:`NOW`, started in the window, has read the item and waits to write its sighting until
    the detach has put the grant back (``reread_fails``: its check of the session after the
    sighting then fails). Returns that sweep's report."""
    sweeper = grants.sweeper(now=NOW)
    at_write, go = _held_before_its_sighting(sweeper)
    if reread_fails:
        _reread_fails(sweeper, sandbox.config.table_name)
    reports: list[GrantSweepReport] = []
    thread = threading.Thread(target=lambda: reports.append(sweeper.sweep()))
    kms = boto3.client("kms", region_name=sandbox.kms.meta.region_name)

    def sweep_in_the_window(model: Any, **_: Any) -> None:
        if model.name == "RetireGrant" and not thread.is_alive() and not reports:
            thread.start()
            assert at_write.wait(WAIT), "the sweep never reached its goneSince write"

    kms.meta.events.register("before-call.*.*", sweep_in_the_window)
    try:
        with Stubber(kms) as stub:
            stub.add_client_error("retire_grant", "KMSInternalException", http_status_code=500)
            _store(sandbox, kms).detach_connection("s-1", "conn-1=")
            stub.assert_no_pending_responses()
    finally:
        go.set()
        thread.join(WAIT)
    (report,) = reports
    return report


def test_a_sighting_written_after_the_grant_was_put_back_is_taken_back(sandbox: Sandbox) -> None:
    grants = Grants(sandbox)
    store, grant_id = a_session_with_a_grant(sandbox, grants)

    in_window = _sweep_across_the_put_back(sandbox, grants)

    assert in_window.kept_pending == 1 and in_window.failures == 0  # it saw the grant gone...
    # ...but the grant is on its live session again: no sighting may stay on its record.
    assert store.get("s-1", consistent=True).grant_id == grant_id  # type: ignore[union-attr]
    assert claim_state(sandbox.ddb, KIND_GRANT, grant_id) == "held"
    assert ATTR_GONE_SINCE not in _record(sandbox, grant_id)


def test_a_normal_end_after_the_race_is_pending_not_an_orphan(sandbox: Sandbox) -> None:
    grants = Grants(sandbox)
    store, grant_id = a_session_with_a_grant(sandbox, grants)
    _sweep_across_the_put_back(sandbox, grants)

    a_later_end_is_pending(store, grants, grant_id)


def _reread_fails(sweeper: GrantSweeper, table_name: str) -> None:
    """The sweeper's ``GetItem`` of the session item after its ``goneSince`` write fails (a
    throttle outlasting botocore's retries), once."""
    written: list[bool] = []

    def note(params: dict[str, Any], **_: Any) -> None:
        if "if_not_exists" in str(params.get("UpdateExpression")):
            written.append(True)
        elif params.get("TableName") == table_name and written and written.pop():
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "x"}},
                "GetItem",
            )

    sweeper._ddb.meta.events.register("provide-client-params.dynamodb.*", note)


def test_a_sighting_whose_check_failed_is_taken_back(sandbox: Sandbox) -> None:
    """The check of the session after the sighting fails: the sweep cannot tell whether the
    grant was put back meanwhile, so the sighting must not stay. Before, it stayed, and the
    session's normal end ten hours later was retired as an orphan (``orphans_retired == 1``).
    Taking it back only delays the pending bound by one sweep."""
    grants = Grants(sandbox)
    store, grant_id = a_session_with_a_grant(sandbox, grants)

    in_window = _sweep_across_the_put_back(sandbox, grants, reread_fails=True)

    assert in_window.failures == 1  # the re-read failed: counted
    assert store.get("s-1", consistent=True).grant_id == grant_id  # type: ignore[union-attr]
    assert ATTR_GONE_SINCE not in _record(sandbox, grant_id)
    # The session ends normally ten hours later: pending, not an orphan.
    store.end("s-1")
    report = grants.sweeper(now=NOW + 10 * HOUR).sweep()
    assert report.orphans_retired == 0 and report.kept_pending == 1
