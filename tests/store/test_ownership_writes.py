"""Ownership records, the writer side (issue 20): every id SessionStore records is claimed for
the session incarnation that records it, before or atomically with the write, in the ownership
table; an id another live session owns is refused with both sessions named and nothing written.

moto's DynamoDB (PutItem, UpdateItem, TransactWriteItems with ``CancellationReasons`` and
``ReturnValuesOnConditionCheckFailure``), KMS and API Gateway Management API, real boto3 calls.
The records read back here are also classified with the cleanup's own rule
(``ownership.classify``), so the two sides are checked against each other.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import boto3
import pytest
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.ownership import (
    CLAIM_RETENTION_SECONDS,
    RELEASING_STALE_SECONDS,
    Claim,
    classify,
    owner_token,
)
from session_expiry_runtime.store import (
    ResourceOwnedError,
    SessionConflictError,
    SessionGoneError,
    SessionStore,
)
from session_expiry_runtime.store_parts.claims import RELEASING_RETRY_DELAYS, token_hash

from ._support import (
    GRANTEE_ROLE,
    OWNERSHIP_TABLE,
    RETIRING_ROLE,
    T0_EPOCH,
    TABLE,
    FakeClock,
    claim_of,
    raw_item,
)

HOUR = timedelta(hours=1)
LIFETIME = 8 * 3600
RUNTIME = "rs-" + "0123456789abcdef" * 2  # 35 characters: a valid runtimeSessionId
S1, S2 = {"pk": {"S": "s-1"}}, {"pk": {"S": "s-2"}}
OWNER_S1, OWNER_S2 = owner_token({"pk": "s-1"}), owner_token({"pk": "s-2"})


@pytest.fixture
def store(make_store: Any) -> SessionStore:
    return make_store(ownership=True)  # type: ignore[no-any-return]


def incarnation(ddb: Any, key: dict[str, Any]) -> str:
    item = raw_item(ddb, key)
    assert item is not None
    return str(item["incarnation"]["S"])


def set_state(ddb: Any, resource: str, state: str, since: int) -> None:
    """What the cleanup does to a claim (``releasing`` while it acts, then ``released``)."""
    ddb.update_item(
        TableName=OWNERSHIP_TABLE,
        Key={"resource": {"S": resource}},
        UpdateExpression="SET #s = :s, #since = :since",
        ExpressionAttributeNames={"#s": "state", "#since": "stateSince"},
        ExpressionAttributeValues={":s": {"S": state}, ":since": {"N": str(since)}},
    )


# --- claims are written with the ids ---------------------------------------------------------
def test_create_claims_every_id_for_its_incarnation(store: SessionStore, ddb: Any) -> None:
    s = store.create(
        "s-1",
        ttl=HOUR,
        connection_id="c-1",
        runtime_session_id=RUNTIME,
        code_interpreter_session_id="ci01",
        browser_session_id="br01",
    )
    inc = incarnation(ddb, S1)
    assert re.fullmatch(r"[0-9a-f]{32}", inc)
    assert (s.incarnation, s.scratch_prefix) == (inc, f"sessions/s-1/{inc}/")
    for resource in ("connection#c-1", f"agentRuntime#{RUNTIME}", "codeInterpreter#ci01"):
        claim = claim_of(ddb, resource)
        assert claim is not None
        assert claim.pop("tokenHash") == {"S": token_hash(s.claim_token)}
        assert {k: v for k, v in claim.items() if k not in ("claimedAt", "stateSince")} == {
            "resource": {"S": resource},
            "owner": {"S": OWNER_S1},
            "incarnation": {"S": inc},
            "state": {"S": "held"},
            "notAfter": {"N": str(T0_EPOCH + LIFETIME)},
            "expiresAt": {"N": str(T0_EPOCH + LIFETIME + CLAIM_RETENTION_SECONDS)},
        }
        assert Decimal(claim["claimedAt"]["N"]) == Decimal(claim["stateSince"]["N"]) == T0_EPOCH
        # The cleanup of this very incarnation may act on it; no other key or incarnation may.
        verdict = classify(
            Claim.from_item(claim),
            owner=OWNER_S1,
            incarnation=inc,
        )
        assert verdict.status == "owned"
    assert claim_of(ddb, "browser#br01") is not None


def test_attach_connection_and_agent_session_claim_before_recording(
    store: SessionStore, ddb: Any
) -> None:
    store.create("s-1", ttl=HOUR)
    inc = incarnation(ddb, S1)
    store.attach_connection("s-1", "c-2", close_previous=False)
    store.attach_agent_session("s-1", browser_session_id="br02", stop_previous=False)
    for resource in ("connection#c-2", "browser#br02"):
        claim = claim_of(ddb, resource)
        assert claim is not None
        assert (claim["owner"], claim["incarnation"], claim["state"]) == (
            {"S": OWNER_S1},
            {"S": inc},
            {"S": "held"},
        )
    item = raw_item(ddb, S1)
    assert item is not None
    assert (item["connectionIds"], item["browserSessionIds"]) == ({"SS": ["c-2"]}, {"SS": ["br02"]})


@pytest.fixture
def key_arn(kms: Any) -> str:
    return str(kms.create_key(Description="session data key")["KeyMetadata"]["Arn"])


def test_create_grant_claims_the_grant_in_the_same_transaction(
    make_store: Any, ddb: Any, kms: Any, key_arn: str
) -> None:
    store = make_store(ownership=True, grant_key_arn=key_arn, retiring_principal=RETIRING_ROLE)
    store.create("s-1", ttl=HOUR)
    inc = incarnation(ddb, S1)
    s = store.create_grant("s-1", grantee_principal=GRANTEE_ROLE, operations=["Decrypt"])
    claim = claim_of(ddb, f"grant#{s.grant_id}")
    assert claim is not None
    assert (claim["owner"], claim["incarnation"], claim["state"]) == (
        {"S": OWNER_S1},
        {"S": inc},
        {"S": "held"},
    )
    item = raw_item(ddb, S1)
    assert item is not None and item["grantId"] == {"S": s.grant_id}
    (grant,) = kms.list_grants(KeyId=key_arn)["Grants"]
    assert grant["Name"] == f"session-expiry:{inc}:eyJwayI6InMtMSJ9"  # the item's incarnation


def test_attach_grant_claims_the_grant(store: SessionStore, ddb: Any) -> None:
    store.create("s-1", ttl=HOUR)
    s = store.attach_grant("s-1", grant_id="g-1", grant_token="t-1")
    assert s.grant_id == "g-1"
    claim = claim_of(ddb, "grant#g-1")
    assert claim is not None and claim["owner"] == {"S": OWNER_S1}


def test_a_grant_whose_transaction_fails_is_retired_and_leaves_no_claim(
    make_store: Any, ddb: Any, kms: Any, key_arn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # moto never throttles: the failing TransactWriteItems is injected on the client;
    # CreateGrant, RetireGrant and ListGrants are moto's.
    from botocore.exceptions import ClientError

    store = make_store(ownership=True, grant_key_arn=key_arn, retiring_principal=RETIRING_ROLE)
    store.create("s-1", ttl=HOUR)

    def transact_write_items(**_: Any) -> Any:
        raise ClientError(
            {"Error": {"Code": "ThrottlingException", "Message": "injected"}},
            "TransactWriteItems",
        )

    monkeypatch.setattr(ddb, "transact_write_items", transact_write_items)
    with pytest.raises(ClientError, match="ThrottlingException"):
        store.create_grant("s-1", grantee_principal=GRANTEE_ROLE, operations=["Decrypt"])
    assert kms.list_grants(KeyId=key_arn)["Grants"] == []
    item = raw_item(ddb, S1)
    assert item is not None and "grantId" not in item
    assert ddb.scan(TableName=OWNERSHIP_TABLE)["Items"] == []


# --- an id another live session owns is refused --------------------------------------------------
ID_KWARGS = {
    "connection": ("connection_id", "c-1", "WebSocket connection 'c-1'"),
    "agentRuntime": ("runtime_session_id", RUNTIME, f"AgentCore runtime session {RUNTIME!r}"),
    "codeInterpreter": ("code_interpreter_session_id", "ci01", "code interpreter session 'ci01'"),
    "browser": ("browser_session_id", "br01", "AgentCore browser session 'br01'"),
}


def _check_refusal(err: ResourceOwnedError, kind: str, inc_s1: str) -> None:
    message = str(err)
    assert ID_KWARGS[kind][2] in message
    assert "{'pk': 's-1'}" in message and inc_s1 in message  # the owner
    assert "session 's-2'" in message  # the requester
    assert "nothing was written" in message and "end the owning session" in message
    assert isinstance(err, SessionConflictError)
    assert (err.kind, err.owner_key, err.owner_incarnation, err.releasing) == (
        kind,
        {"pk": "s-1"},
        inc_s1,
        False,
    )
    assert (err.session_id, err.partition) == ("s-2", None)


@pytest.mark.parametrize("kind", sorted(ID_KWARGS))
def test_fails_create_with_an_id_another_live_session_owns(
    store: SessionStore, ddb: Any, kind: str
) -> None:
    argument, value, _ = ID_KWARGS[kind]
    store.create("s-1", ttl=HOUR, **{argument: value})
    inc_s1 = incarnation(ddb, S1)
    before = claim_of(ddb, f"{kind}#{value}")

    with pytest.raises(ResourceOwnedError) as caught:
        store.create("s-2", ttl=HOUR, **{argument: value})

    _check_refusal(caught.value, kind, inc_s1)
    assert raw_item(ddb, S2) is None
    assert claim_of(ddb, f"{kind}#{value}") == before


@pytest.mark.parametrize("kind", sorted(ID_KWARGS))
def test_fails_attach_with_an_id_another_live_session_owns(
    store: SessionStore, ddb: Any, kind: str
) -> None:
    argument, value, _ = ID_KWARGS[kind]
    store.create("s-1", ttl=HOUR, **{argument: value})
    store.create("s-2", ttl=HOUR)
    inc_s1 = incarnation(ddb, S1)
    before, item_before = claim_of(ddb, f"{kind}#{value}"), raw_item(ddb, S2)

    with pytest.raises(ResourceOwnedError) as caught:
        if kind == "connection":
            store.attach_connection("s-2", value, close_previous=False)
        else:
            store.attach_agent_session("s-2", **{argument: value}, stop_previous=False)

    _check_refusal(caught.value, kind, inc_s1)
    assert raw_item(ddb, S2) == item_before
    assert claim_of(ddb, f"{kind}#{value}") == before


def test_fails_create_when_one_of_several_ids_is_owned_and_claims_none_of_them(
    store: SessionStore, ddb: Any
) -> None:
    store.create("s-1", ttl=HOUR, browser_session_id="br01")
    with pytest.raises(ResourceOwnedError, match="browser session 'br01'"):
        store.create("s-2", ttl=HOUR, connection_id="c-9", browser_session_id="br01")
    assert raw_item(ddb, S2) is None
    assert claim_of(ddb, "connection#c-9") is None  # the transaction is all or nothing


# --- reuse after expiry, released ids, owners past their end -------------------------------------
def test_reuse_after_expiry_takes_over_the_old_incarnations_claims(
    store: SessionStore, ddb: Any, clock: FakeClock
) -> None:
    store.create("s-1", ttl=HOUR, connection_id="c-1", runtime_session_id=RUNTIME)
    old = incarnation(ddb, S1)
    clock.advance(HOUR.total_seconds() + 1)  # expired, not yet deleted by TTL

    store.create("s-1", ttl=HOUR, connection_id="c-1", runtime_session_id=RUNTIME)

    new = incarnation(ddb, S1)
    assert new != old
    for resource in ("connection#c-1", f"agentRuntime#{RUNTIME}"):
        claim = claim_of(ddb, resource)
        assert claim is not None
        assert (claim["owner"], claim["incarnation"]) == ({"S": OWNER_S1}, {"S": new})
        # The old incarnation's REMOVE (create deleted the expired item) leaves it alone.
        verdict = classify(
            Claim.from_item(claim),
            owner=OWNER_S1,
            incarnation=old,
        )
        assert verdict.status == "Superseded"


def test_another_key_takes_a_released_claim(store: SessionStore, ddb: Any) -> None:
    store.create("s-1", ttl=HOUR, connection_id="c-1")
    set_state(ddb, "connection#c-1", "released", T0_EPOCH)
    old = incarnation(ddb, S1)
    store.create("s-2", ttl=HOUR, connection_id="c-1")
    claim = claim_of(ddb, "connection#c-1")
    assert claim is not None and claim["owner"] == {"S": OWNER_S2}
    assert claim["state"] == {"S": "held"}
    # The record names whom it took the id from: s-1's late REMOVE is Superseded by the record's
    # own word, a forged image naming c-1 (any other key or incarnation) NotOwned.
    assert claim["formerOwners"] == {"L": [{"S": f"{OWNER_S1}#{old}"}]}
    record = Claim.from_item(claim)
    assert classify(record, owner=OWNER_S1, incarnation=old).status == "Superseded"
    assert classify(record, owner=OWNER_S1, incarnation="0" * 32).status == "NotOwned"


def test_another_key_takes_a_claim_only_once_its_owner_is_past_its_absolute_end(
    store: SessionStore, ddb: Any, clock: FakeClock
) -> None:
    store.create("s-1", ttl=HOUR, runtime_session_id=RUNTIME)
    for _ in range(15):  # s-1 stays live by its heartbeats
        store.touch("s-1", ttl=HOUR)
        clock.advance(1800)
    store.touch("s-1", ttl=HOUR)
    clock.advance(1799)  # one second before s-1's absolute end
    assert store.get("s-1") is not None
    with pytest.raises(ResourceOwnedError):
        store.create("s-2", ttl=HOUR, runtime_session_id=RUNTIME)
    clock.advance(1)  # s-1 cannot be live any more, whatever its item says
    old = incarnation(ddb, S1)
    store.create("s-2", ttl=HOUR, runtime_session_id=RUNTIME)
    claim = claim_of(ddb, f"agentRuntime#{RUNTIME}")
    assert claim is not None and claim["owner"] == {"S": OWNER_S2}
    assert claim["formerOwners"] == {"L": [{"S": f"{OWNER_S1}#{old}"}]}
    verdict = classify(Claim.from_item(claim), owner=OWNER_S1, incarnation=old)
    assert verdict.status == "Superseded"  # s-1's REMOVE, late by TTL's lag, leaves it alone


def test_a_releasing_claim_is_asked_for_again_and_taken_once_released(
    make_store: Any, ddb: Any
) -> None:
    waits: list[float] = []

    def cleanup_finishes(seconds: float) -> None:
        waits.append(seconds)
        set_state(ddb, "connection#c-1", "released", T0_EPOCH)

    store = make_store(ownership=True, store_kwargs={"sleep": cleanup_finishes})
    store.create("s-1", ttl=HOUR, connection_id="c-1")
    store.end("s-1")
    set_state(ddb, "connection#c-1", "releasing", T0_EPOCH)  # s-1's cleanup is acting

    store.create("s-2", ttl=HOUR, connection_id="c-1")

    assert waits == [RELEASING_RETRY_DELAYS[0]]
    claim = claim_of(ddb, "connection#c-1")
    assert claim is not None and claim["owner"] == {"S": OWNER_S2}


def test_fails_a_claim_still_releasing_after_the_waits(
    store: SessionStore, ddb: Any, sleeps: list[float]
) -> None:
    store.create("s-1", ttl=HOUR, connection_id="c-1")
    store.end("s-1")
    set_state(ddb, "connection#c-1", "releasing", T0_EPOCH)
    store.create("s-2", ttl=HOUR)

    with pytest.raises(ResourceOwnedError, match="is being released by the cleanup of session"):
        store.create("s-3", ttl=HOUR, connection_id="c-1")
    with pytest.raises(ResourceOwnedError, match="retry in a few seconds") as caught:
        store.attach_connection("s-2", "c-1", close_previous=False)

    assert caught.value.releasing
    assert sleeps == list(RELEASING_RETRY_DELAYS) * 2  # bounded: a few waits, then the error
    assert raw_item(ddb, {"pk": {"S": "s-3"}}) is None
    item = raw_item(ddb, S2)
    assert item is not None and "connectionIds" not in item


def test_a_claim_left_releasing_by_a_stopped_cleanup_is_taken(
    store: SessionStore, ddb: Any, sleeps: list[float]
) -> None:
    store.create("s-1", ttl=HOUR, connection_id="c-1")
    store.end("s-1")
    set_state(ddb, "connection#c-1", "releasing", T0_EPOCH - RELEASING_STALE_SECONDS)
    store.create("s-2", ttl=HOUR, connection_id="c-1")
    assert sleeps == []
    claim = claim_of(ddb, "connection#c-1")
    assert claim is not None and claim["owner"] == {"S": OWNER_S2}


# --- a failed write undoes its claim; no table, no claims; legacy items --------------------------
def test_an_attach_that_loses_to_a_new_incarnation_gives_its_claim_back(
    make_store: Any, ddb: Any, clock: FakeClock
) -> None:
    # The race the attach ordering has to survive: between reading the live incarnation I and
    # its update, the session is ended and created again (I2) with the same connection id. The
    # attach's claim (this key, I) replaced I2's; its update is refused (#incarnation = I), and
    # the undo must put I2's claim back: I2's item names c-1.
    store = make_store(ownership=True)
    store.create("s-1", ttl=HOUR)
    other = SessionStore(
        dynamodb_client=boto3.client("dynamodb", region_name="us-east-1"),
        clock=clock,
        config=RuntimeConfig(table_name=TABLE, ownership_table_name=OWNERSHIP_TABLE),
    )
    fired: list[str] = []

    def recreate_first(params: dict[str, Any], **_: Any) -> None:
        if params.get("TableName") == OWNERSHIP_TABLE and not fired:
            fired.append(incarnation(ddb, S1))
            other.end("s-1")
            other.create("s-1", ttl=HOUR, connection_id="c-1")

    ddb.meta.events.register("provide-client-params.dynamodb.PutItem", recreate_first)
    with pytest.raises(SessionGoneError):
        store.attach_connection("s-1", "c-1", close_previous=False)

    new = incarnation(ddb, S1)
    assert fired and new != fired[0]
    claim = claim_of(ddb, "connection#c-1")
    assert claim is not None and claim["incarnation"] == {"S": new}
    item = raw_item(ddb, S1)
    assert item is not None and item["connectionIds"] == {"SS": ["c-1"]}


def test_without_an_ownership_table_nothing_is_claimed(make_store: Any, ddb: Any) -> None:
    store = make_store()  # no ownership table exists: any call to one would fail
    s = store.create("s-1", ttl=HOUR, connection_id="c-1", runtime_session_id=RUNTIME)
    store.attach_connection("s-1", "c-2", close_previous=False)
    store.attach_agent_session("s-1", browser_session_id="br01", stop_previous=False)
    store.attach_grant("s-1", grant_id="g-1", grant_token="t-1")
    assert s.incarnation is not None  # the item still gets its incarnation
    assert OWNERSHIP_TABLE not in ddb.list_tables()["TableNames"]


def test_a_legacy_item_records_ids_without_claims_and_stays_legacy(
    store: SessionStore, ddb: Any, connections: Any
) -> None:
    # Written before ownership records existed: no incarnation. Its ids cannot be proven its
    # own, so the store claims none, closes none of its earlier connections, and never turns
    # it into a non-legacy item (the cleanup treats its ids as Legacy).
    ddb.put_item(
        TableName=TABLE,
        Item={
            **S1,
            "expiresAt": {"N": str(T0_EPOCH + 600)},
            "scratchPrefix": {"S": "sessions/s-1/0f3a/"},
            "connectionId": {"S": "old"},
        },
    )
    connections.post_to_connection(ConnectionId="old", Data=b"hi")  # moto opens it
    s = store.attach_connection("s-1", "new")
    assert s.connection_ids == {"old", "new"} and s.incarnation is None
    item = raw_item(ddb, S1)
    assert item is not None and "incarnation" not in item
    assert ddb.scan(TableName=OWNERSHIP_TABLE)["Items"] == []


def test_attach_connection_closes_only_the_earlier_connections_it_owns(
    store: SessionStore, ddb: Any, connections: Any
) -> None:
    from cdk_session_expiry.testing.models._moto_internals import open_connection_ids

    for connection in ("c-1", "victim", "c-2"):
        connections.post_to_connection(ConnectionId=connection, Data=b"hi")  # moto opens it
    store.create("s-2", ttl=HOUR, connection_id="victim")
    store.create("s-1", ttl=HOUR, connection_id="c-1")
    # A writer that bypasses the store adds s-2's connection to s-1's set.
    ddb.update_item(
        TableName=TABLE,
        Key=S1,
        UpdateExpression="ADD #c :v",
        ExpressionAttributeNames={"#c": "connectionIds"},
        ExpressionAttributeValues={":v": {"SS": ["victim"]}},
    )

    s = store.attach_connection("s-1", "c-2")

    still_open = open_connection_ids("123456789012", "us-east-1")
    assert "c-1" not in still_open and {"victim", "c-2"} <= still_open
    assert s.connection_ids == {"victim", "c-2"}
    claims = {r: claim_of(ddb, f"connection#{r}") for r in ("c-1", "victim", "c-2")}
    assert {r: (c or {}).get("state") for r, c in claims.items()} == {
        "c-1": {"S": "released"},
        "victim": {"S": "held"},
        "c-2": {"S": "held"},
    }
    assert claims["victim"] is not None and claims["victim"]["owner"] == {"S": OWNER_S2}


def test_fails_create_over_a_live_session_and_claims_nothing(store: SessionStore, ddb: Any) -> None:
    store.create("s-1", ttl=HOUR, connection_id="c-1")
    before = raw_item(ddb, S1)
    with pytest.raises(SessionConflictError, match="already exists and is live") as caught:
        store.create("s-1", ttl=HOUR, connection_id="c-2")
    assert not isinstance(caught.value, ResourceOwnedError)
    assert raw_item(ddb, S1) == before
    assert claim_of(ddb, "connection#c-2") is None


def test_fails_an_application_attribute_named_like_the_incarnation(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="'incarnation': reserved for the key or the runtime"):
        store.create("s-1", ttl=HOUR, attributes={"incarnation": "mine"})


def test_fails_an_application_attribute_named_like_the_previous_incarnation(
    store: SessionStore,
) -> None:
    # The Kinesis read-back's proof (kinesis_removals): only create writes it.
    with pytest.raises(
        ValueError, match="'previousIncarnation': reserved for the key or the runtime"
    ):
        store.create("s-1", ttl=HOUR, attributes={"previousIncarnation": "0" * 32})


def test_an_attach_takes_over_a_released_claim_naming_its_former_holder(
    store: SessionStore, ddb: Any
) -> None:
    store.create("s-1", ttl=HOUR, connection_id="c-1")
    old = incarnation(ddb, S1)
    set_state(ddb, "connection#c-1", "released", T0_EPOCH)
    store.create("s-2", ttl=HOUR)

    store.attach_connection("s-2", "c-1", close_previous=False)

    claim = claim_of(ddb, "connection#c-1")
    assert claim is not None and claim["owner"] == {"S": OWNER_S2}
    assert claim["formerOwners"] == {"L": [{"S": f"{OWNER_S1}#{old}"}]}


def test_a_takeover_pins_the_record_it_judged(store: SessionStore, ddb: Any) -> None:
    # The record changes between the refused fresh write and the takeover (s-1's cleanup marks
    # it again): the pinned write is refused and nothing of s-1's record is lost.
    from session_expiry_runtime.store_parts.claims import RACED, ClaimRequest

    store.create("s-1", ttl=HOUR, connection_id="c-1")
    set_state(ddb, "connection#c-1", "released", T0_EPOCH)
    judged = claim_of(ddb, "connection#c-1")
    set_state(ddb, "connection#c-1", "held", T0_EPOCH + 1)  # changed after it was judged
    store.create("s-2", ttl=HOUR)
    writer = store._claims  # the store's own ClaimWriter
    assert writer is not None
    holder = store._holder(S2, incarnation(ddb, S2), T0_EPOCH + LIFETIME)

    outcome = writer.take_over(ClaimRequest("connection", "c-1", holder), judged)

    assert outcome is RACED
    claim = claim_of(ddb, "connection#c-1")
    assert claim is not None and claim["owner"] == {"S": OWNER_S1}
    assert claim["state"] == {"S": "held"}
