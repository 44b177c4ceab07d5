"""Property (hypothesis), issue 35: a writer confined to tenant A's partition writes arbitrary
items there — any attributes, any shapes, another tenant's ids and prefix and incarnation,
forged times, no incarnation at all — asks the claim registrar anything while its item is there
(any operation, B's key or its own, B's incarnation or another, any token but B's), and ends
them; B's claims are as they were, the cleanup acts on nothing tenant B's live session owns, and
every one of B's ids it saw is refused under an alarmed cause. Then the grant sweep runs: B's
grant is kept.

Both change sources: the DynamoDB stream, and Kinesis (A's records read back from the table
first, `kinesis_removals`). A may put its key again after ending it, with a forged ``notAfter``
(created "just now") and a forged ``previousIncarnation`` (B's incarnation, the one it ended, a
made-up one), so the read-back of its REMOVE finds an item it wrote. A may hold claims of its
own (it writes its own item's claim token), among them a made-up grant id that KMS does not
find: the cleanup hands that claim over to the grant sweep (`steps.grant`).

Real stream records from moto, the real ``process_batch``, real boto3 calls against moto
(DynamoDB, KMS, API Gateway Management API, S3). Stubbed: ``bedrock-agentcore`` (moto has none;
botocore's ``Stubber`` with nothing queued, so any stop of B's sessions fails the record and
the property); KMS's ``NotFoundException`` for the made-up grant id (moto answers 200). The
Kinesis records are built as the event source mapping delivers them
(`test_kinesis_source.KinesisSource`), arriving now: A's records reach Kinesis only through
DynamoDB.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from botocore.stub import Stubber
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ownership_support import read_claim
from runtime_faults import answer, json_error
from runtime_support import TABLE, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import process_batch
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.ownership import ALARMED_REFUSALS, KIND_GRANT
from session_expiry_runtime.records.kinesis_records import to_stream_event
from session_expiry_runtime.registrar import Registrar
from test_kinesis_source import REGION, change
from test_ownership_cleanup import (
    AGENT_ENV,
    TENANT_A,
    TENANT_B,
    grant_sweep,
    tenant_b_session,
)

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
    "previousIncarnation",
)
#: A grant id no grant has (64 hex digits, as KMS's): A may claim it and name it.
MADE_UP_GRANT = "ab" * 32
A_TOKEN = "a0" * 16
A_KEY = {"tenantId": {"S": "tenant-a"}, "sessionId": {"S": "s-evil"}}
KINESIS_ARN = f"arn:aws:kinesis:{REGION}:123456789012:stream/session-changes"


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
        "previousIncarnation": {"S": "incB"},
    }
    junk = st.one_of(
        st.text(max_size=12).map(lambda s: {"S": s}),
        st.integers(min_value=-5, max_value=2**40).map(lambda n: {"N": str(n)}),
        st.just({"NULL": True}),
        st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=3, unique=True).map(
            lambda v: {"SS": v}
        ),
    )
    a_values = {**b_values, "grantId": {"S": MADE_UP_GRANT}, "previousIncarnation": {"S": "incA"}}
    attribute = st.sampled_from(ID_ATTRIBUTES).flatmap(
        lambda name: st.tuples(
            st.just(name), st.one_of(st.just(b_values[name]), st.just(a_values[name]), junk)
        )
    )
    return st.fixed_dictionaries(
        {
            "attributes": st.lists(attribute, min_size=1, max_size=len(ID_ATTRIBUTES)),
            # no incarnation (a "legacy" copy), B's own, a made-up one, a junk shape, A's own
            "incarnation": st.one_of(
                st.none(),
                st.just({"S": "incB"}),
                st.just({"S": "0" * 32}),
                st.just({"N": "1"}),
                st.just({"S": "incA"}),
            ),
            # forged absolute end and expiry: the class of a refusal must not depend on them;
            # "now": created just now (the Kinesis read-back dates an item by it)
            "notAfter": st.one_of(st.none(), st.sampled_from(["0", "1", "9999999999", "now"])),
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
                    st.one_of(
                        pair,
                        st.just(["connection", "a-own="]),
                        st.just([KIND_GRANT, MADE_UP_GRANT]),
                    ),
                    min_size=1,
                    max_size=3,
                ),
                "token": st.one_of(st.none(), st.just("f" * 32), st.just(A_TOKEN)),
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


def a_item(forged: dict[str, Any]) -> dict[str, Any]:
    """A's item as it chose to write it (its own claim token included: it writes its item)."""
    item: dict[str, Any] = {**A_KEY, **dict(forged["attributes"]), "claimToken": {"S": A_TOKEN}}
    item["expiresAt"] = {"N": forged["expiresAt"]}
    if forged["incarnation"] is not None:
        item["incarnation"] = forged["incarnation"]
    not_after = forged["notAfter"]
    if not_after == "now":
        not_after = str(int(time.time()) + 8 * 3600)
    if not_after is not None:
        item["notAfter"] = {"N": not_after}
    return item


def through_kinesis(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The records as the Kinesis event source mapping delivers them, arriving now."""
    delivered = []
    for number, record in enumerate(records, start=1):
        data = json.dumps(change(record)).encode("utf-8")
        delivered.append(
            {
                "eventSource": "aws:kinesis",
                "eventName": "aws:kinesis:record",
                "eventID": f"shardId-000000000000:{number}",
                "eventSourceARN": KINESIS_ARN,
                "awsRegion": REGION,
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": "a",
                    "sequenceNumber": str(number),
                    "data": base64.b64encode(data).decode("ascii"),
                    "approximateArrivalTimestamp": time.time(),
                },
            }
        )
    return to_stream_event({"Records": delivered})  # type: ignore[return-value]


def not_found_for_the_made_up_grant(request: Any) -> Any:
    """Stub: KMS answers ``NotFoundException`` for a grant id no grant has (moto: 200)."""
    if json.loads(request.body)["GrantId"] == MADE_UP_GRANT:
        return json_error(400, "NotFoundException")
    return None


@pytest.mark.parametrize("source", ["dynamodb", "kinesis"])
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_write_of_tenant_a_makes_any_path_touch_tenant_b(
    source: str,
    world: tuple[Sandbox, dict[str, Any]],
    data: st.DataObject,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sandbox, b = world
    forged = data.draw(forged_items(b))
    sandbox.ddb.put_item(TableName=TABLE, Item=a_item(forged))
    # While A's item is there, A asks the registrar whatever it likes; often first a claim of
    # its own, in its item's incarnation (the made-up grant: handed over when it ends).
    registrar = Registrar(
        RuntimeConfig.from_env({**sandbox.env(), **AGENT_ENV}), sandbox.ddb, emit=lambda _: None
    )
    claims_before = b_claims(sandbox, b)
    requests = data.draw(registrar_requests(b))
    incarnation = (forged["incarnation"] or {}).get("S")
    if incarnation is not None and data.draw(st.booleans()):
        resources = [[KIND_GRANT, MADE_UP_GRANT], ["connection", "a-own="]]
        own = {"op": "claim", "key": TENANT_A, "incarnation": incarnation, "token": A_TOKEN}
        requests.insert(0, {**own, "resources": resources, "grant": True})
        sandbox.ddb.update_item(
            TableName=TABLE,
            Key=A_KEY,
            UpdateExpression="SET grantId = :g",
            ExpressionAttributeValues={":g": {"S": MADE_UP_GRANT}},
        )
    for request in requests:
        answer_ = registrar.handle(json.loads(json.dumps(request)))
        if request["key"] == TENANT_B and request["op"] != "owned":
            assert answer_["ok"] is False or not (answer_.get("released") or answer_.get("undone"))
    assert b_claims(sandbox, b) == claims_before
    sandbox.ddb.delete_item(TableName=TABLE, Key=A_KEY)
    # A may put its key again at once: the item a read-back of its REMOVE finds.
    # created just now, in another incarnation: the read-back asks for proof
    fresh = forged_items(b).map(lambda f: {**f, "notAfter": "now", "incarnation": {"S": "incA2"}})
    again = data.draw(st.one_of(st.none(), forged_items(b), fresh))
    if again is not None:
        sandbox.ddb.put_item(TableName=TABLE, Item=a_item(again))
    records = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    cleaner = sandbox.cleaner(RuntimeConfig.from_env({**sandbox.env(), **AGENT_ENV}))
    answer(cleaner.clients.kms, "RetireGrant", not_found_for_the_made_up_grant)
    batch = event(*records) if source == "dynamodb" else through_kinesis(records)
    caplog.clear()

    with Stubber(cleaner.clients.agentcore):  # nothing queued: any stop fails the record
        response = process_batch(batch, FakeContext(), cleaner)

    assert b_is_intact(sandbox, b)
    # A refused record is never retried: nothing of B's is worth another try.
    assert response == {"batchItemFailures": []}
    b_ids = set(b["ids"].values())
    for record in caplog.records:
        for verdicts in (getattr(record, "session", {}).get("ownership") or {}).values():
            for resource_id, verdict in verdicts.items():
                if resource_id in b_ids:
                    assert verdict in ALARMED_REFUSALS, (resource_id, verdict, source)
    # The grant sweep, after all that: B's grant is live and kept.
    grant_sweep(sandbox).sweep()
    assert b_is_intact(sandbox, b) and b_claims(sandbox, b) == claims_before
    sandbox.ddb.delete_item(TableName=TABLE, Key=A_KEY)  # the next example starts afresh
