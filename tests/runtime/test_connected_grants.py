"""Grants that live only while a client is connected (``SessionStore(connected_grant=...)``).

Real boto3 calls against moto: the session table, the ownership table, KMS grants
(``CreateGrant``/``ListGrants``/``RetireGrant``) and the API Gateway management API; the cleanup
runs through ``process_batch`` on real stream records. The one answer moto does not give — a
``RetireGrant`` that fails (moto's KMS never throttles) — comes from botocore's ``Stubber`` on a
KMS client of its own, and the test says so.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from ownership_support import claim_state, put_claim
from runtime_support import APP_ROLE, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import process_batch
from session_expiry_runtime.core.ownership import KIND_CONNECTION, KIND_GRANT
from session_expiry_runtime.store import ConnectedGrant, SessionStore

OPERATIONS = ["Decrypt", "Encrypt"]


def store_of(sandbox: Sandbox, *, kms_client: Any = None, on: bool = True) -> SessionStore:
    return SessionStore(
        dynamodb_client=sandbox.ddb,
        kms_client=kms_client or sandbox.kms,
        connections_client=sandbox.apigw,
        config=sandbox.config,
        connected_grant=ConnectedGrant(APP_ROLE, OPERATIONS) if on else None,
    )


def connected(sandbox: Sandbox, store: SessionStore, *connections: str) -> Any:
    """A session with a grant and ``connections`` attached (none closed)."""
    for connection in connections:
        sandbox.open_connection(connection)
    store.create("s-1", ttl=timedelta(hours=1), connection_id=connections[0])
    session = store.create_grant("s-1", grantee_principal=APP_ROLE, operations=OPERATIONS)
    for connection in connections[1:]:
        session = store.attach_connection("s-1", connection, close_previous=False)
    return session


def grant_of(sandbox: Sandbox, grant_id: str) -> dict[str, Any] | None:
    grants = sandbox.kms.list_grants(KeyId=sandbox.key_arn)["Grants"]
    return next((g for g in grants if g["GrantId"] == grant_id), None)


def test_detaching_the_last_connection_retires_the_grant_and_releases_its_record(
    sandbox: Sandbox,
) -> None:
    store = store_of(sandbox)
    session = connected(sandbox, store, "conn-1=")

    after = store.detach_connection("s-1", "conn-1=")

    assert after is not None
    assert after.grant_id is None and after.grant_token is None
    assert after.connection_ids == frozenset() and after.connection_id is None
    assert grant_of(sandbox, session.grant_id) is None  # ListGrants: gone
    assert claim_state(sandbox.ddb, KIND_GRANT, session.grant_id) == "released"
    assert claim_state(sandbox.ddb, KIND_CONNECTION, "conn-1=") == "released"
    assert store.get("s-1", consistent=True) == after  # the item says the same


def test_a_resume_creates_a_new_grant_bound_to_the_same_session(sandbox: Sandbox) -> None:
    store = store_of(sandbox)
    first = connected(sandbox, store, "conn-1=")
    store.detach_connection("s-1", "conn-1=")
    sandbox.open_connection("conn-2=")

    resumed = store.attach_connection("s-1", "conn-2=")

    assert resumed.grant_id is not None and resumed.grant_id != first.grant_id
    grant = grant_of(sandbox, resumed.grant_id)
    assert grant is not None
    assert grant["GranteePrincipal"] == APP_ROLE
    assert sorted(grant["Operations"]) == OPERATIONS
    assert grant["Constraints"] == {"EncryptionContextSubset": resumed.encryption_context}
    assert resumed.encryption_context == first.encryption_context  # the same session
    assert claim_state(sandbox.ddb, KIND_GRANT, resumed.grant_id) == "held"
    assert store.get("s-1", consistent=True).grant_id == resumed.grant_id  # type: ignore[union-attr]


def test_two_connections_one_detached_keeps_the_grant(sandbox: Sandbox) -> None:
    store = store_of(sandbox)
    session = connected(sandbox, store, "conn-1=", "conn-2=")

    after = store.detach_connection("s-1", "conn-1=")

    assert after is not None
    assert after.grant_id == session.grant_id
    assert after.connection_ids == frozenset({"conn-2="})
    assert after.connection_id == "conn-2="  # the latest one stays the latest
    assert grant_of(sandbox, session.grant_id) is not None
    assert claim_state(sandbox.ddb, KIND_GRANT, session.grant_id) == "held"


def test_a_resume_that_races_the_last_detach_keeps_the_grant(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = store_of(sandbox)
    session = connected(sandbox, store, "conn-1=")
    sandbox.open_connection("conn-2=")
    resume = store_of(sandbox)
    may_act_on = SessionStore._may_act_on

    def resumed_meanwhile(self: SessionStore, *args: Any) -> Any:
        # The resume lands between the detach's read and its forgetting of the grant.
        if args[1] == KIND_GRANT:
            resume.attach_connection("s-1", "conn-2=")
        return may_act_on(self, *args)

    monkeypatch.setattr(SessionStore, "_may_act_on", resumed_meanwhile)

    after = store.detach_connection("s-1", "conn-1=")

    assert after is not None
    assert after.grant_id == session.grant_id  # the resumed client keeps its grant
    assert after.connection_ids == frozenset({"conn-2="})
    assert grant_of(sandbox, session.grant_id) is not None
    assert claim_state(sandbox.ddb, KIND_GRANT, session.grant_id) == "held"


def test_a_heartbeat_without_a_connection_does_not_keep_the_grant(sandbox: Sandbox) -> None:
    store = store_of(sandbox)
    store.create("s-1", ttl=timedelta(hours=1))  # e.g. its $disconnect never arrived
    session = store.create_grant("s-1", grantee_principal=APP_ROLE, operations=OPERATIONS)

    touched = store.heartbeat("s-1", ttl=timedelta(hours=1))

    assert touched.grant_id is None
    assert grant_of(sandbox, session.grant_id) is None
    # ...and a heartbeat never creates one: only a resume (attach_connection) does.
    assert store.touch("s-1", ttl=timedelta(hours=1)).grant_id is None
    assert sandbox.grant_ids() == set()


def test_without_the_option_a_detach_keeps_the_grant(sandbox: Sandbox) -> None:
    store = store_of(sandbox, on=False)
    session = connected(sandbox, store, "conn-1=")

    after = store.detach_connection("s-1", "conn-1=")

    assert after is not None and after.connection_ids == frozenset()
    assert after.grant_id == session.grant_id
    assert grant_of(sandbox, session.grant_id) is not None
    assert store.touch("s-1").grant_id == session.grant_id


def test_a_grant_whose_record_names_another_incarnation_is_not_retired(
    sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    store = store_of(sandbox)
    session = connected(sandbox, store, "conn-1=")
    # Another writer's ownership record now names the grant (another key and incarnation).
    put_claim(sandbox.ddb, KIND_GRANT, session.grant_id, key={"pk": "s-9"}, incarnation="i-9")

    with caplog.at_level(logging.WARNING, logger="session_expiry_runtime.store"):
        after = store.detach_connection("s-1", "conn-1=")

    assert after is not None and after.grant_id == session.grant_id  # stays for the cleanup
    assert grant_of(sandbox, session.grant_id) is not None
    assert "not proven this session's own" in caplog.text


def test_a_grant_that_cannot_be_retired_is_put_back_for_the_cleanup(sandbox: Sandbox) -> None:
    # Stub: moto's KMS never fails RetireGrant; AWS can (throttling, an internal error).
    store = store_of(sandbox)
    session = connected(sandbox, store, "conn-1=")
    kms = _stubbed_kms(sandbox)
    failing = store_of(sandbox, kms_client=kms)
    with Stubber(kms) as stub:
        stub.add_client_error("retire_grant", "KMSInternalException", http_status_code=500)
        after = failing.detach_connection("s-1", "conn-1=")
        stub.assert_no_pending_responses()

    assert after is not None
    assert after.grant_id == session.grant_id and after.grant_token == session.grant_token
    assert claim_state(sandbox.ddb, KIND_GRANT, session.grant_id) == "held"
    assert grant_of(sandbox, session.grant_id) is not None


def test_the_cleanup_retires_the_grant_a_resume_created(sandbox: Sandbox) -> None:
    store = store_of(sandbox)
    first = connected(sandbox, store, "conn-1=")
    store.detach_connection("s-1", "conn-1=")
    sandbox.open_connection("conn-2=")
    resumed = store.attach_connection("s-1", "conn-2=")
    sandbox.read_stream()
    store.end("s-1")

    response = process_batch(event(*sandbox.removes()), FakeContext(), sandbox.cleaner())

    assert response == {"batchItemFailures": []}
    assert resumed.grant_id is not None
    assert sandbox.grant_ids() == set()  # neither the first nor the resumed grant is left
    assert claim_state(sandbox.ddb, KIND_GRANT, resumed.grant_id) == "released"
    assert claim_state(sandbox.ddb, KIND_GRANT, first.grant_id) == "released"


def test_detaching_from_a_session_that_ended_does_nothing(sandbox: Sandbox) -> None:
    store = store_of(sandbox)
    connected(sandbox, store, "conn-1=")
    store.end("s-1")

    assert store.detach_connection("s-1", "conn-1=") is None


def test_fails_a_connected_grant_without_operations() -> None:
    with pytest.raises(ValueError, match=r"operations \[\]: expected a non-empty list"):
        ConnectedGrant(APP_ROLE, [])


def test_fails_a_connected_grant_without_a_grantee() -> None:
    with pytest.raises(ValueError, match="grantee principal"):
        ConnectedGrant("", OPERATIONS)


def test_fails_the_option_on_a_store_without_a_grant_key(sandbox: Sandbox) -> None:
    config = dataclasses.replace(sandbox.config, grant_key_arn=None)
    with pytest.raises(ValueError, match=r"connected_grant .*grant key \(None\)"):
        SessionStore(
            dynamodb_client=sandbox.ddb,
            config=config,
            connected_grant=ConnectedGrant(APP_ROLE, OPERATIONS),
        )


def _stubbed_kms(sandbox: Sandbox) -> Any:
    return boto3.client("kms", region_name=sandbox.kms.meta.region_name)
