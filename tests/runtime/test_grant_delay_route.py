"""Issue 35, the threat model's "DynamoDB stream (delay)" row: a tenant-confined writer claims a
made-up KMS grant id through the claim registrar (which does not ask KMS whether the grant
exists) and ends its session. Its REMOVE must hold no other record of the shard: the other
tenants' sessions that end after it are cleaned in the same invocation, nothing of anyone
else is retired, and the made-up grant is refused and alarmed (``GrantsRefused``), its claim
handed over to the grant sweep — no failure, so no retry loop.

Everything is written by ``SessionStore`` through the real registrar (in-process, a JSON round
trip as Lambda's ``Invoke``) and cleaned by the real handler from real moto stream records.
Stubbed, and said where: KMS's ``NotFoundException`` for a grant id it does not have (moto's
``RetireGrant`` of an unknown id answers 200).
"""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from typing import Any

import pytest
from ownership_support import emf_totals, raw_claim
from runtime_faults import answer, json_error
from runtime_support import BUCKET, FakeContext, Sandbox, event
from session_expiry_runtime import handler as handler_module
from session_expiry_runtime.core.ownership import (
    ATTR_HANDED_OVER_AT,
    KIND_GRANT,
    STATE_RELEASING,
    owner_token,
)
from session_expiry_runtime.registrar import Registrar
from session_expiry_runtime.store import SessionStore
from test_ownership_cleanup import grant_sweep, lines

APP_ROLE = "arn:aws:iam::123456789012:role/app"
#: Well formed (64 hex digits, as KMS grant ids are), but no grant of any key has it.
MADE_UP = ("ab" * 32, "cd" * 32)


def registrar_store(sandbox: Sandbox) -> SessionStore:
    """A store that reaches the ownership table only through the claim registrar."""
    config = dataclasses.replace(sandbox.config, tenant_attribute="tenantId")
    registrar = Registrar(config, sandbox.ddb)

    def invoke(request: dict[str, Any]) -> Any:
        return json.loads(json.dumps(registrar.handle(json.loads(json.dumps(request)))))

    return SessionStore(
        config=config,
        dynamodb_client=sandbox.ddb,
        kms_client=sandbox.kms,
        connections_client=sandbox.apigw,
        claim_registrar=invoke,
    )


def own_session(sandbox: Sandbox, store: SessionStore, tenant: str, session_id: str) -> Any:
    """A session as an honest tenant makes it: its connection, a real grant, a scratch object."""
    connection_id = f"{tenant}-{session_id}="
    sandbox.open_connection(connection_id)
    store.create(session_id, partition=tenant, ttl=timedelta(hours=1), connection_id=connection_id)
    session = store.create_grant(
        session_id, partition=tenant, grantee_principal=APP_ROLE, operations=["Decrypt"]
    )
    sandbox.s3.put_object(Bucket=BUCKET, Key=f"{session.scratch_prefix}work.txt", Body=b"w")
    return session


def not_found_for_made_up_ids(request: Any) -> Any:
    """Stub: KMS answers ``NotFoundException`` for a grant id no grant has (moto answers 200);
    every other RetireGrant goes to moto."""
    if json.loads(request.body)["GrantId"] in MADE_UP:
        return json_error(400, "NotFoundException")
    return None


@pytest.fixture
def sandbox(aws: None, fresh_handler: None, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    box = Sandbox(tenant_partition=True)
    for name, value in box.env().items():
        monkeypatch.setenv(name, value)
    return box


def test_route_delay_made_up_grants_back_to_back_hold_no_other_tenants_record(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    store = registrar_store(sandbox)
    # Tenant C: live throughout; nothing of it may be touched.
    c = own_session(sandbox, store, "tenant-c", "s-c")
    # Tenant A: two sessions, each with a made-up grant id claimed through the registrar.
    for session_id, grant_id in zip(("s-a1", "s-a2"), MADE_UP, strict=True):
        store.create(session_id, partition="tenant-a", ttl=timedelta(hours=1))
        store.attach_grant(
            session_id, partition="tenant-a", grant_id=grant_id, grant_token="made-up"
        )
        claim = raw_claim(sandbox.ddb, KIND_GRANT, grant_id)
        assert claim is not None  # the registrar recorded it: it does not ask KMS
        assert claim["owner"]["S"] == owner_token({"tenantId": "tenant-a", "sessionId": session_id})
    # Tenant B: an honest session.
    b = own_session(sandbox, store, "tenant-b", "s-b")
    sandbox.read_stream()
    # A ends its sessions back to back, B's ends after them: one shard, in that order.
    for tenant, session_id in (("tenant-a", "s-a1"), ("tenant-a", "s-a2"), ("tenant-b", "s-b")):
        assert store.end(session_id, partition=tenant)
    records = sandbox.removes()
    assert [r["dynamodb"]["Keys"]["sessionId"]["S"] for r in records] == ["s-a1", "s-a2", "s-b"]
    cleaner = handler_module.get_cleaner()
    answer(cleaner.clients.kms, "RetireGrant", not_found_for_made_up_ids)
    capsys.readouterr()

    response = handler_module.handler(event(*records), FakeContext())

    # Nothing failed, so the event source mapping retries nothing: B is not held back.
    assert response == {"batchItemFailures": []}
    assert not sandbox.connection_exists("tenant-b-s-b=")
    assert sandbox.keys_under(b.scratch_prefix) == []
    assert b.grant_id not in sandbox.grant_ids()  # B's own end retires B's own grant
    # Nothing of anyone else: C is intact.
    assert sandbox.connection_exists("tenant-c-s-c=") and c.grant_id in sandbox.grant_ids()
    assert sandbox.keys_under(c.scratch_prefix) == [f"{c.scratch_prefix}work.txt"]
    # A's made-up grants: refused and alarmed, each claim handed over to the grant sweep.
    by_session = {
        line.session["keys"]["sessionId"]: line.session  # type: ignore[attr-defined]
        for line in lines(session_logs)
    }
    for session_id, grant_id in zip(("s-a1", "s-a2"), MADE_UP, strict=True):
        assert by_session[session_id]["steps"]["RetireGrant"] == "refused"
        assert grant_id in by_session[session_id]["grantRefusal"]
        claim = raw_claim(sandbox.ddb, KIND_GRANT, grant_id)
        assert claim is not None and claim["state"]["S"] == STATE_RELEASING
        assert ATTR_HANDED_OVER_AT in claim
    assert by_session["s-b"]["steps"]["RetireGrant"] == "done"
    assert emf_totals(capsys.readouterr().out)["GrantsRefused"] == 2

    # The grant sweep: a made-up id is never listed, so nothing is retired for it; C's live
    # grant is kept.
    report = grant_sweep(sandbox).sweep()
    assert report.orphans_retired == 0 and report.expired_retired == 0
    assert c.grant_id in sandbox.grant_ids()
