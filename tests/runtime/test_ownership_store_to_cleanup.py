"""Issue 20's attacker, end to end: tenant A, a writer of the tenant-as-partition table, uses
only ``SessionStore`` (and, once refused, raw writes to its own item) against tenant B's live
session — the store refuses, the real handler refuses, nothing of tenant B is closed, stopped,
retired or deleted.

Everything is written by ``SessionStore`` (no seeded ownership records) and cleaned by the real
handler from real moto stream records. Stubbed, and said where: the ``bedrock-agentcore``
operations (moto implements none; botocore's ``Stubber`` fails any call it was not told to
expect, so an AgentCore call for tenant B would fail the record).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from botocore.stub import Stubber
from ownership_support import calls_of, emf_totals
from runtime_support import BUCKET, TABLE, FakeContext, Sandbox, event
from session_expiry_runtime import handler as handler_module
from session_expiry_runtime.store import ResourceOwnedError, SessionStore
from test_ownership_cleanup import AGENT_ENV, BROWSER_ID, INTERPRETER_ID, RUNTIME_ARN, lines

B_RUNTIME = "rs-tenant-b-" + "0123456789abcdef" * 2
B_IDS = {
    "connection_id": "conn-b=",
    "runtime_session_id": B_RUNTIME,
    "code_interpreter_session_id": "ciB01",
    "browser_session_id": "brB01",
}


def store_of(sandbox: Sandbox) -> SessionStore:
    config = dataclasses.replace(
        sandbox.config,
        tenant_attribute="tenantId",  # the partition is the tenant (tenant as partition)
        agent_runtime_arn=RUNTIME_ARN,
        code_interpreter_id=INTERPRETER_ID,
        browser_id=BROWSER_ID,
    )
    return SessionStore(
        dynamodb_client=sandbox.ddb,
        kms_client=sandbox.kms,
        connections_client=sandbox.apigw,
        config=config,
    )


def tenant_b(sandbox: Sandbox, store: SessionStore) -> dict[str, Any]:
    sandbox.open_connection(B_IDS["connection_id"])
    store.create("s-b", partition="tenant-b", ttl=timedelta(hours=1), **B_IDS)
    session = store.create_grant(
        "s-b",
        partition="tenant-b",
        grantee_principal="arn:aws:iam::123456789012:role/app",
        operations=["Decrypt"],
    )
    key = f"{session.scratch_prefix}notes.txt"
    sandbox.s3.put_object(Bucket=BUCKET, Key=key, Body=b"b's work")
    return {
        "grant_id": session.grant_id,
        "grant_token": session.grant_token,
        "key": key,
        "prefix": session.scratch_prefix,
    }


def test_a_tenant_using_the_store_cannot_make_the_cleanup_touch_another_tenants_session(
    aws: None,
    fresh_handler: None,
    monkeypatch: pytest.MonkeyPatch,
    session_logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sandbox = Sandbox(tenant_partition=True)
    for name, value in {**sandbox.env(), **AGENT_ENV}.items():
        monkeypatch.setenv(name, value)
    store = store_of(sandbox)
    b = tenant_b(sandbox, store)

    # 1. The store refuses to record tenant B's ids for tenant A, naming both, writing nothing.
    with pytest.raises(ResourceOwnedError) as refused:
        store.create("s-evil", partition="tenant-a", **B_IDS)
    assert "s-evil" in str(refused.value) and "s-b" in str(refused.value)
    assert store.get("s-evil", partition="tenant-a", consistent=True) is None

    # 2. Tenant A's own session (its own connection), then a raw write of tenant B's ids into
    #    it (a writer bypassing the store), then end() — the scenario.
    sandbox.open_connection("conn-a=")
    store.create("s-evil", partition="tenant-a", connection_id="conn-a=")
    key = {"tenantId": {"S": "tenant-a"}, "sessionId": {"S": "s-evil"}}
    sandbox.ddb.update_item(
        TableName=TABLE,
        Key=key,
        UpdateExpression=(
            "ADD connectionIds :conn, agentRuntimeSessionIds :rt, codeInterpreterSessionIds :ci,"
            " browserSessionIds :br SET grantId = :gid, grantToken = :gtok"
        ),
        ExpressionAttributeValues={
            ":conn": {"SS": [B_IDS["connection_id"]]},
            ":rt": {"SS": [B_RUNTIME]},
            ":ci": {"SS": ["ciB01"]},
            ":br": {"SS": ["brB01"]},
            ":gid": {"S": b["grant_id"]},
            ":gtok": {"S": b["grant_token"]},
        },
    )
    sandbox.read_stream()
    assert store.end("s-evil", partition="tenant-a")
    (record,) = sandbox.removes()
    cleaner = handler_module.get_cleaner()
    calls = {name: calls_of(getattr(cleaner.clients, name)) for name in ("apigateway", "kms")}
    capsys.readouterr()
    with Stubber(cleaner.clients.agentcore):  # nothing queued: any AgentCore call fails
        response = handler_module.handler(event(record), FakeContext())

    assert response == {"batchItemFailures": []}
    # Tenant A's own connection was closed; nothing of tenant B was called.
    assert calls["apigateway"] == [("DeleteConnection", {"ConnectionId": "conn-a="})]
    assert calls["kms"] == []
    assert sandbox.connection_exists(B_IDS["connection_id"])
    assert not sandbox.connection_exists("conn-a=")
    listed = sandbox.kms.list_grants(KeyId=sandbox.key_arn, GrantId=b["grant_id"])["Grants"]
    assert [g["GrantId"] for g in listed] == [b["grant_id"]]
    objects = sandbox.s3.list_objects_v2(Bucket=BUCKET, Prefix=b["prefix"])["Contents"]
    assert [o["Key"] for o in objects] == [b["key"]]
    (line,) = lines(session_logs)
    assert line.session["ownership"] == {  # type: ignore[attr-defined]
        "DeleteConnection": {B_IDS["connection_id"]: "NotOwned"},
        "RetireGrant": {b["grant_id"]: "NotOwned"},
        "StopRuntimeSession": {B_RUNTIME: "NotOwned"},
        "StopCodeInterpreterSession": {"ciB01": "NotOwned"},
        "StopBrowserSession": {"brB01": "NotOwned"},
    }
    assert emf_totals(capsys.readouterr().out)["ResourcesRefused|Refusal=NotOwned"] == 5
    # Tenant B is still live and served.
    assert store.get("s-b", partition="tenant-b", consistent=True) is not None
