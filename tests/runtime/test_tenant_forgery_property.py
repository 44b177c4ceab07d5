"""Property (hypothesis), issue 35: a writer confined to tenant A's partition writes arbitrary
items there — any attributes, any shapes, another tenant's ids and prefix and incarnation,
forged times, no incarnation at all — asks the claim registrar anything while its item is there
(any operation, B's key or its own, B's incarnation or another, any token but B's), and ends
them; B's claims are as they were, the cleanup acts on nothing tenant B's live session owns, and
every one of B's ids it saw is refused under an alarmed cause.

Real stream records from moto, the real ``process_batch``, real boto3 calls against moto
(DynamoDB, KMS, API Gateway Management API, S3). Stubbed: ``bedrock-agentcore`` (moto has none;
botocore's ``Stubber`` with nothing queued, so any stop of B's sessions fails the record and
the property).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.stub import Stubber
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ownership_support import read_claim
from runtime_support import TABLE, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import process_batch
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.ownership import ALARMED_REFUSALS, KIND_GRANT
from session_expiry_runtime.registrar import Registrar
from test_ownership_cleanup import AGENT_ENV, TENANT_A, TENANT_B, tenant_b_session

#: What a forged item may say in each attribute the cleanup reads (B's value among them).
ID_ATTRIBUTES = (
    "connectionId",
    "connectionIds",
    "agentRuntimeSessionId",
    "codeInterpreterSessionIds",
    "browserSessionId",
    "grantId",
    "grantToken",
    "scratchPrefix",
)


def forged_items(b: dict[str, Any]) -> Any:
    ids = b["ids"]
    b_values = {
        "connectionId": {"S": ids["connection"]},
        "connectionIds": {"SS": [ids["connection"], "never-claimed="]},
        "agentRuntimeSessionId": {"S": ids["agentRuntime"]},
        "codeInterpreterSessionIds": {"SS": [ids["codeInterpreter"]]},
        "browserSessionId": {"S": ids["browser"]},
        "grantId": {"S": ids[KIND_GRANT]},
        "grantToken": {"S": b["token"]},
        "scratchPrefix": {"S": b["prefix"]},
    }
    junk = st.one_of(
        st.text(max_size=12).map(lambda s: {"S": s}),
        st.integers(min_value=-5, max_value=2**40).map(lambda n: {"N": str(n)}),
        st.just({"NULL": True}),
        st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=3, unique=True).map(
            lambda v: {"SS": v}
        ),
    )
    attribute = st.sampled_from(ID_ATTRIBUTES).flatmap(
        lambda name: st.tuples(st.just(name), st.one_of(st.just(b_values[name]), junk))
    )
    return st.fixed_dictionaries(
        {
            "attributes": st.lists(attribute, min_size=1, max_size=len(ID_ATTRIBUTES)),
            # no incarnation (a "legacy" copy), B's own, a made-up one, a junk shape
            "incarnation": st.one_of(
                st.none(),
                st.just({"S": "incB"}),
                st.just({"S": "0" * 32}),
                st.just({"N": "1"}),
            ),
            # forged absolute end and expiry: the class of a refusal must not depend on them
            "notAfter": st.one_of(st.none(), st.sampled_from(["0", "1", "9999999999"])),
            "expiresAt": st.sampled_from(["1", "4102444800"]),
        }
    )


@pytest.fixture
def world(aws: None, monkeypatch: pytest.MonkeyPatch) -> tuple[Sandbox, dict[str, Any]]:
    sandbox = Sandbox(tenant_partition=True)
    for name, value in {**sandbox.env(), **AGENT_ENV}.items():
        monkeypatch.setenv(name, value)
    b = tenant_b_session(sandbox)
    # B's item as SessionStore.create writes it: with its claim token (A never reads it).
    sandbox.ddb.update_item(
        TableName=TABLE,
        Key={name: {"S": value} for name, value in TENANT_B.items()},
        UpdateExpression="SET claimToken = :t",
        ExpressionAttributeValues={":t": {"S": B_TOKEN}},
    )
    b["prefix"] = "sessions/tenant-b/s-b/incB/"
    sandbox.put_objects([b["prefix"] + "work.txt"])
    sandbox.read_stream()
    return sandbox, b


B_TOKEN = "b0" * 16


def registrar_requests(b: dict[str, Any]) -> Any:
    """What tenant A may ask the claim registrar (``lambda:InvokeFunction`` is all it has): any
    operation, for B's key or its own, under B's incarnation or another, with any token but
    B's, naming B's ids or others."""
    ids = sorted(set(b["ids"].items()))
    pair = st.sampled_from(ids).map(lambda kv: [kv[0], kv[1]])
    return st.lists(
        st.fixed_dictionaries(
            {
                "op": st.sampled_from(["claim", "release", "undo", "owned"]),
                "key": st.sampled_from([TENANT_B, TENANT_A]),
                "incarnation": st.sampled_from(["incB", "0" * 32, "incA"]),
                "resources": st.lists(
                    st.one_of(pair, st.just(["connection", "a-own="])),
                    min_size=1,
                    max_size=3,
                ),
                "token": st.one_of(st.none(), st.just("f" * 32)),
                "grant": st.booleans(),
            }
        ),
        max_size=4,
    )


def b_is_intact(sandbox: Sandbox, b: dict[str, Any]) -> bool:
    ids = b["ids"]
    grants = sandbox.kms.list_grants(KeyId=sandbox.key_arn, GrantId=ids[KIND_GRANT])["Grants"]
    return (
        sandbox.connection_exists(ids["connection"])
        and [g["GrantId"] for g in grants] == [ids[KIND_GRANT]]
        and sandbox.keys_under(b["prefix"]) == [b["prefix"] + "work.txt"]
    )


def b_claims(sandbox: Sandbox, b: dict[str, Any]) -> list[Any]:
    return [read_claim(sandbox.ddb, kind, resource_id) for kind, resource_id in b["ids"].items()]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_write_of_tenant_a_makes_any_path_touch_tenant_b(
    world: tuple[Sandbox, dict[str, Any]], data: st.DataObject, caplog: pytest.LogCaptureFixture
) -> None:
    sandbox, b = world
    forged = data.draw(forged_items(b))
    key = {"tenantId": {"S": "tenant-a"}, "sessionId": {"S": "s-evil"}}
    item: dict[str, Any] = {**key, **dict(forged["attributes"])}
    item["expiresAt"] = {"N": forged["expiresAt"]}
    if forged["incarnation"] is not None:
        item["incarnation"] = forged["incarnation"]
    if forged["notAfter"] is not None:
        item["notAfter"] = {"N": forged["notAfter"]}
    sandbox.ddb.put_item(TableName=TABLE, Item=item)
    # While A's item is there, A asks the registrar whatever it likes.
    registrar = Registrar(
        RuntimeConfig.from_env({**sandbox.env(), **AGENT_ENV}), sandbox.ddb, emit=lambda _: None
    )
    claims_before = b_claims(sandbox, b)
    for request in data.draw(registrar_requests(b)):
        answer = registrar.handle(json.loads(json.dumps(request)))
        if request["key"] == TENANT_B and request["op"] != "owned":
            assert answer["ok"] is False or not (answer.get("released") or answer.get("undone"))
    assert b_claims(sandbox, b) == claims_before
    sandbox.ddb.delete_item(TableName=TABLE, Key=key)
    records = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    cleaner = sandbox.cleaner(RuntimeConfig.from_env({**sandbox.env(), **AGENT_ENV}))
    caplog.clear()

    with Stubber(cleaner.clients.agentcore):  # nothing queued: any stop fails the record
        response = process_batch(event(*records), FakeContext(), cleaner)

    assert b_is_intact(sandbox, b)
    # A refused record is never retried: nothing of B's is worth another try.
    assert response == {"batchItemFailures": []}
    b_ids = set(b["ids"].values())
    for record in caplog.records:
        for verdicts in (getattr(record, "session", {}).get("ownership") or {}).values():
            for resource_id, verdict in verdicts.items():
                if resource_id in b_ids:
                    assert verdict in ALARMED_REFUSALS, (resource_id, verdict, forged)
