"""The store's lifetime rules that mutation testing found unpinned (issue 40,
``make mutation MUTATION_ARGS="store_parts/lifetime.py"``): each test fails on a mutant of
`store_parts/lifetime.py` that the other store tests let live.

moto's DynamoDB, real boto3 calls. A concurrent writer is another client writing through moto
from the store's own ``before-call`` hook, so its write lands between the store's attempts.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from session_expiry_runtime.core.config import CLAIM_TOKEN_ATTRIBUTE, PREVIOUS_INCARNATION_ATTRIBUTE
from session_expiry_runtime.core.ownership import owner_token
from session_expiry_runtime.store import (
    ResourceOwnedError,
    SessionConflictError,
    SessionGoneError,
    SessionStore,
)
from session_expiry_runtime.store_parts.claims import RELEASING_RETRY_DELAYS

from ._support import OWNERSHIP_TABLE, T0_EPOCH, TABLE, FakeClock, claim_of, raw_item
from .test_claim_registrar import SORT, A, Deployment

HOUR = timedelta(hours=1)
HOME = "eu-west-1"


def _racing_writer(ddb: Any, operation: str, item: dict[str, Any]) -> list[str]:
    """Before each ``operation`` call of the store, another writer puts ``item`` (a dead
    session: its TTL is in the past), so every attempt of the store finds the key taken again.
    The names of the calls seen, in order."""
    other = boto3.client("dynamodb", region_name="us-east-1")
    calls: list[str] = []

    def race(**_: Any) -> None:
        calls.append(operation)
        other.put_item(TableName=TABLE, Item=item)

    ddb.meta.events.register(f"before-call.dynamodb.{operation}", race)
    ddb.meta.events.register(
        "before-call.dynamodb.DeleteItem", lambda **_: calls.append("DeleteItem")
    )
    return calls


@pytest.mark.parametrize("partition", [None, "u-1"])
@pytest.mark.parametrize(
    ("ownership", "operation", "kwargs"),
    [(False, "PutItem", {}), (True, "TransactWriteItems", {"connection_id": "c-1"})],
)
def test_rule_create_gives_up_after_three_lost_races_naming_the_session(
    make_store: Any,
    ddb: Any,
    ownership: bool,
    operation: str,
    kwargs: dict[str, Any],
    partition: str | None,
) -> None:
    """A dead item put back before each attempt: ``create`` removes it and tries again, three
    attempts in all, then raises ``SessionConflictError`` naming the session and the races."""
    sort_key = "sk" if partition else None
    store: SessionStore = make_store(ownership=ownership, sort_key=sort_key)
    key = {"pk": {"S": partition}, "sk": {"S": "s-1"}} if partition else {"pk": {"S": "s-1"}}
    dead = {**key, "expiresAt": {"N": str(T0_EPOCH - 10)}}
    calls = _racing_writer(ddb, operation, dead)

    with pytest.raises(SessionConflictError) as caught:
        store.create("s-1", ttl=HOUR, partition=partition, **kwargs)

    where = " in partition 'u-1'" if partition else ""
    assert str(caught.value) == (
        f"session 's-1'{where}: lost 3 races with concurrent writers of the same id"
    )
    assert (caught.value.session_id, caught.value.partition) == ("s-1", partition)
    # attempt, remove the dead item, attempt, remove, attempt: the third lost race ends it.
    expected = [operation, "DeleteItem", operation, "DeleteItem", operation]
    assert calls == (expected if ownership else [*expected, "DeleteItem"])
    assert raw_item(ddb, key) == (dead if ownership else None)


# --- the claim registrar's create: over a dead item, over a live one ------------------------------
@pytest.fixture
def deployment(ddb: Any, clock: FakeClock, connections: Any) -> Deployment:
    return Deployment(ddb, clock, connections)


def test_rule_registrar_create_replaces_a_dead_item_of_its_own_key(
    deployment: Deployment, clock: FakeClock, ddb: Any
) -> None:
    """With the claim registrar, ``create`` over an expired item of the same key removes that
    item (not another key's) and names it as the new item's ``previousIncarnation``."""
    store, _ = deployment.store()
    old = store.create("s-1", partition=A, ttl=HOUR, connection_id="c-1")
    clock.advance(HOUR.total_seconds() + 1)  # expired, not yet deleted by TTL

    new = store.create("s-1", partition=A, ttl=HOUR, connection_id="c-1")

    item = raw_item(ddb, {"tenant": {"S": A}, SORT: {"S": "s-1"}})
    assert item is not None and item["incarnation"] == {"S": new.incarnation}
    assert item[PREVIOUS_INCARNATION_ATTRIBUTE] == {"S": old.incarnation}


def test_fails_a_registrar_create_over_a_live_session_naming_it_and_its_partition(
    deployment: Deployment, ddb: Any
) -> None:
    store, _ = deployment.store()
    store.create("s-1", partition=A, ttl=HOUR, connection_id="c-1")

    with pytest.raises(SessionConflictError) as caught:
        store.create("s-1", partition=A, ttl=HOUR, connection_id="c-2")

    assert str(caught.value).startswith("session 's-1' in partition 'tenant-a' already exists")
    assert (caught.value.session_id, caught.value.partition) == ("s-1", A)
    assert claim_of(ddb, "connection#c-2") is None


# --- takeovers within create's transaction --------------------------------------------------------
def _release(ddb: Any, resource: str) -> None:
    """What the cleanup leaves behind: the claim released."""
    ddb.update_item(
        TableName=OWNERSHIP_TABLE,
        Key={"resource": {"S": resource}},
        UpdateExpression="SET #s = :s, #since = :since",
        ExpressionAttributeNames={"#s": "state", "#since": "stateSince"},
        ExpressionAttributeValues={":s": {"S": "released"}, ":since": {"N": str(T0_EPOCH)}},
    )


def test_rule_a_takeover_replaces_the_request_of_its_own_id(make_store: Any, ddb: Any) -> None:
    """The first of two ids is a released claim, taken over; the transaction then claims both
    ids, each for the new session (the successor request replaces its own id's request)."""
    store: SessionStore = make_store(ownership=True)
    store.create("s-1", ttl=HOUR, connection_id="c-1")
    _release(ddb, "connection#c-1")

    store.create("s-2", ttl=HOUR, connection_id="c-1", browser_session_id="br02")

    owner = owner_token({"pk": "s-2"})
    for resource in ("connection#c-1", "browser#br02"):
        claim = claim_of(ddb, resource)
        assert claim is not None and (claim["owner"], claim["state"]) == (
            {"S": owner},
            {"S": "held"},
        ), resource


def test_rule_a_takeover_is_undone_when_another_id_is_refused(make_store: Any, ddb: Any) -> None:
    """A released claim taken over, then another id of the same create refused: the error
    names the id that is owned (not the one taken over), and the taken claim is put back as it
    was (released, its former owner's)."""
    store: SessionStore = make_store(ownership=True)
    store.create("s-1", ttl=HOUR, connection_id="c-1")
    _release(ddb, "connection#c-1")
    released = claim_of(ddb, "connection#c-1")
    store.create("s-3", ttl=HOUR, browser_session_id="br01")

    with pytest.raises(ResourceOwnedError) as caught:
        store.create("s-2", ttl=HOUR, connection_id="c-1", browser_session_id="br01")

    assert str(caught.value).startswith("AgentCore browser session 'br01' is owned by session")
    assert (caught.value.kind, caught.value.owner_key) == ("browser", {"pk": "s-3"})

    assert claim_of(ddb, "connection#c-1") == released
    assert raw_item(ddb, {"pk": {"S": "s-2"}}) is None


def test_rule_a_transaction_cancelled_for_another_reason_is_raised_not_asked_again(
    make_store: Any, ddb: Any, sleeps: list[float]
) -> None:
    """A ``TransactWriteItems`` cancelled with no failed condition (a ``TransactionConflict``
    still there after the writer's waits) refuses no claim: ``create`` raises the botocore error
    and writes nothing, rather than asking again for ever.

    Stubbed (moto never reports ``TransactionConflict``): every ``TransactWriteItems`` of the
    store's client answers the cancellation, from a ``before-call`` hook; past 20 calls the hook
    fails the test instead of looping."""
    store: SessionStore = make_store(ownership=True)
    calls: list[int] = []

    def cancel(**_: Any) -> None:
        calls.append(1)
        assert len(calls) <= 20, "create keeps asking again"
        raise ClientError(
            {
                "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                "CancellationReasons": [{"Code": "None"}, {"Code": "TransactionConflict"}],
            },
            "TransactWriteItems",
        )

    ddb.meta.events.register("before-call.dynamodb.TransactWriteItems", cancel)

    with pytest.raises(ClientError, match="TransactionCanceledException"):
        store.create("s-1", ttl=HOUR, connection_id="c-1")

    assert len(calls) == len(RELEASING_RETRY_DELAYS) + 1  # the writer's own waits, once
    assert raw_item(ddb, {"pk": {"S": "s-1"}}) is None
    assert claim_of(ddb, "connection#c-1") is None


# --- list and iter_sessions -----------------------------------------------------------------------
@pytest.mark.parametrize("consistent", [None, False, True])
@pytest.mark.parametrize("lazy", [False, True])
def test_rule_list_reads_eventually_consistent_unless_asked(
    make_store: Any, ddb: Any, consistent: bool | None, lazy: bool
) -> None:
    """``list`` and ``iter_sessions`` send ``ConsistentRead`` as asked, ``False`` by default
    (a strongly consistent Query costs twice the read capacity)."""
    store: SessionStore = make_store(sort_key="sk")
    store.create("s-1", ttl=HOUR, partition="u-1")
    sent: list[Any] = []
    ddb.meta.events.register(
        "provide-client-params.dynamodb.Query",
        lambda params, **_: sent.append(params.get("ConsistentRead")),
    )
    kwargs = {} if consistent is None else {"consistent": consistent}

    found = list(store.iter_sessions("u-1", **kwargs)) if lazy else store.list("u-1", **kwargs)

    assert [s.session_id for s in found] == ["s-1"]
    assert sent == [bool(consistent)]


def test_fails_list_without_sort_key_saying_what_to_do(make_store: Any) -> None:
    store: SessionStore = make_store()
    with pytest.raises(ValueError) as caught:
        store.list("u-1")
    assert str(caught.value) == (
        "list('u-1'): the table has no sort key, so a partition holds one session; configure "
        "a sort key or use get()"
    )


def _second_store(store: SessionStore, ddb: Any, **config: Any) -> SessionStore:
    """Another store on the same table: ``store``'s settings but ``config`` (another Region,
    another shard count), as a second deployment or a redeployed one would write."""
    cfg = dataclasses.replace(store._config, **config)
    return SessionStore(dynamodb_client=ddb, config=cfg, clock=store._clock)


def test_rule_a_heartbeat_stamps_the_owner_and_shard_only_where_absent(
    make_store: Any, ddb: Any
) -> None:
    """On a global table a heartbeat gives an item written before the index attributes existed
    its owner Region and sweep shard (this Region's); a heartbeat from another Region after a
    failover changes neither, and still sets the new TTL."""
    store = make_store(
        owner_region_attribute="ownerRegion", sweep_shard_attribute="sweepShard", region=HOME
    )
    key = {"pk": {"S": "s-1"}}
    ddb.put_item(TableName=TABLE, Item={**key, "expiresAt": {"N": str(T0_EPOCH + 60)}})
    store.touch("s-1", ttl=HOUR)
    shard = store._sweep_shard(key)
    assert shard.startswith(f"{HOME}#")
    item = raw_item(ddb, key)
    assert item is not None
    assert item["ownerRegion"] == {"S": HOME}
    assert item["sweepShard"] == {"S": shard}
    other = _second_store(store, ddb, region="us-west-2")
    other.touch("s-1", ttl=2 * HOUR)
    item = raw_item(ddb, key)
    assert item is not None
    assert item["ownerRegion"] == {"S": HOME}
    assert item["sweepShard"] == {"S": shard}
    assert item["expiresAt"] == {"N": str(T0_EPOCH + 7200)}


def test_rule_a_one_region_heartbeat_moves_the_session_to_its_current_shard(
    make_store: Any, ddb: Any
) -> None:
    """On a one-Region table a heartbeat writes the shard of the store's current shard count
    (a session created before the sweeper was turned on, or under another shard count, joins
    a shard the sweeper reads), not the one the item already has."""
    store = make_store(sweep_shard_attribute="sweepShard", sweep_shards=4)
    key = {"pk": {"S": "s-1"}}
    ddb.put_item(TableName=TABLE, Item={**key, "expiresAt": {"N": str(T0_EPOCH + 60)}})
    store.touch("s-1", ttl=HOUR)
    item = raw_item(ddb, key)
    assert item is not None
    assert item["sweepShard"] == {"S": store._sweep_shard(key)}
    assert "ownerRegion" not in item
    ddb.update_item(
        TableName=TABLE,
        Key=key,
        UpdateExpression="SET sweepShard = :s",
        ExpressionAttributeValues={":s": {"S": "stale"}},
    )
    store.touch("s-1", ttl=HOUR)
    item = raw_item(ddb, key)
    assert item is not None
    assert item["sweepShard"] == {"S": store._sweep_shard(key)}


def test_fails_a_heartbeat_of_a_missing_session_naming_it_and_its_partition(
    make_store: Any,
) -> None:
    """The `SessionGoneError` of a heartbeat that finds no live session carries the session id
    and the partition asked for, and says nothing was written."""
    store = make_store(sort_key=SORT)
    with pytest.raises(SessionGoneError) as caught:
        store.touch("s-1", partition="u-1", ttl=HOUR)
    assert (caught.value.session_id, caught.value.partition) == ("s-1", "u-1")
    assert str(caught.value) == (
        "session 's-1' in partition 'u-1' is missing, expired or past its absolute lifetime; "
        "nothing was written"
    )


@pytest.mark.parametrize("ownership", [False, True])
def test_fails_a_create_over_a_live_session_saying_what_to_do(
    make_store: Any, ownership: bool
) -> None:
    """``create`` of an id a live session holds, by ``PutItem`` or (with ownership records and
    a connection id) by the claim transaction: `SessionConflictError` naming the session and
    its partition and saying to end it or wait for it to expire; the live item is left."""
    store = make_store(sort_key=SORT, ownership=ownership)
    first = store.create("s-1", partition="u-1", ttl=HOUR, connection_id="c-1")
    with pytest.raises(SessionConflictError) as caught:
        store.create("s-1", partition="u-1", ttl=HOUR, connection_id="c-2")
    assert str(caught.value) == (
        "session 's-1' in partition 'u-1' already exists and is live; end it or wait for it to "
        "expire before creating it again"
    )
    assert (caught.value.session_id, caught.value.partition) == ("s-1", "u-1")
    assert store.get("s-1", partition="u-1", consistent=True) == first


def test_rule_an_id_a_live_session_owns_is_refused_at_once_without_waiting(
    make_store: Any, sleeps: list[float]
) -> None:
    """A claim refused by a live owner (not ``releasing``, not a lost race) cannot be taken
    over and will not free itself: ``create`` raises `ResourceOwnedError` at once, with no
    wait of ``RELEASING_RETRY_DELAYS``."""
    store = make_store(ownership=True)
    store.create("s-1", ttl=HOUR, connection_id="c-1")
    with pytest.raises(ResourceOwnedError):
        store.create("s-2", ttl=HOUR, connection_id="c-1")
    assert sleeps == []


# --- what create writes: the scratch prefix, the claim token, the ids' order ----------------------
def test_rule_a_sorted_table_scratch_prefix_names_the_partition_then_the_id(
    make_store: Any, ddb: Any
) -> None:
    """On a table with a sort key the new incarnation's scratch prefix is
    ``{root}{partition}/{id}/{incarnation}/``, on the item and on the `Session`."""
    store = make_store(sort_key=SORT, scratch_root="scratch/")
    session = store.create("s-1", partition="u-1", ttl=HOUR)
    prefix = f"scratch/u-1/s-1/{session.incarnation}/"
    assert session.scratch_prefix == prefix
    item = raw_item(ddb, {"pk": {"S": "u-1"}, SORT: {"S": "s-1"}})
    assert item is not None and item["scratchPrefix"] == {"S": prefix}


def test_rule_the_claim_token_is_32_random_hex_characters(make_store: Any, ddb: Any) -> None:
    """The registrar's secret on a new item (``claimToken``): 32 hex characters, another one
    for each incarnation, as `registrar` documents."""
    store = make_store()
    tokens = []
    for session_id in ("s-1", "s-2"):
        store.create(session_id, ttl=HOUR)
        item = raw_item(ddb, {"pk": {"S": session_id}})
        assert item is not None
        tokens.append(item[CLAIM_TOKEN_ATTRIBUTE]["S"])
    assert all(re.fullmatch("[0-9a-f]{32}", token) for token in tokens), tokens
    assert tokens[0] != tokens[1]


@pytest.mark.parametrize(
    ("kwargs", "what"),
    [({"connection_id": "a\nb"}, "connection id"), ({"tenant_id": "a\nb"}, "tenant id")],
)
def test_fails_a_create_with_a_bad_connection_or_tenant_id_naming_which(
    make_store: Any, ddb: Any, kwargs: dict[str, str], what: str
) -> None:
    store = make_store()
    with pytest.raises(ValueError) as caught:
        store.create("s-1", ttl=HOUR, **kwargs)
    assert str(caught.value) == (
        f"{what} 'a\\nb': expected a non-empty string without control characters"
    )
    assert raw_item(ddb, {"pk": {"S": "s-1"}}) is None


def test_rule_create_claims_the_connection_before_the_agent_sessions(
    make_store: Any, ddb: Any
) -> None:
    """The connection id is the first id of a create's claims, the AgentCore sessions after it:
    when both are owned by other live sessions, the refusal names the connection's owner."""
    store: SessionStore = make_store(ownership=True)
    store.create("s-1", ttl=HOUR, connection_id="c-1")
    store.create("s-3", ttl=HOUR, browser_session_id="br01")

    with pytest.raises(ResourceOwnedError) as caught:
        store.create("s-2", ttl=HOUR, connection_id="c-1", browser_session_id="br01")

    assert (caught.value.kind, caught.value.owner_key) == ("connection", {"pk": "s-1"})
    assert raw_item(ddb, {"pk": {"S": "s-2"}}) is None


def test_rule_a_global_create_stamps_its_owner_region_and_sweep_shard(
    make_store: Any, ddb: Any
) -> None:
    """On a global table a new item carries this Region as its owner and the sweep shard of its
    own key (the expiry sweeper's sparse index), on the item and on the `Session`."""
    store = make_store(
        owner_region_attribute="ownerRegion", sweep_shard_attribute="sweepShard", region=HOME
    )
    session = store.create("s-1", ttl=HOUR)
    key = {"pk": {"S": "s-1"}}
    shard = store._sweep_shard(key)
    assert shard.startswith(f"{HOME}#") and shard != store._sweep_shard({"pk": {"S": "s-2"}})
    item = raw_item(ddb, key)
    assert item is not None
    assert (item["ownerRegion"], item["sweepShard"]) == ({"S": HOME}, {"S": shard})
    assert session.owner_region == HOME


def test_rule_with_the_tenant_as_partition_key_the_tenant_is_the_partition(
    make_store: Any, ddb: Any
) -> None:
    """When the tenant attribute is the partition key, a session's tenant is its partition:
    ``tenant_id`` may be left out or be the same value, the tenant-scoped scratch prefix has
    the partition once as its tenant segment, and no other tenant attribute is written."""
    store = make_store(
        sort_key=SORT,
        partition_key="tenantId",
        tenant_scoped_scratch=True,
        scratch_root="scratch/",
    )
    for session_id, tenant_id in (("s-1", None), ("s-2", "t-1")):
        session = store.create(session_id, partition="t-1", ttl=HOUR, tenant_id=tenant_id)
        assert session.tenant_id == "t-1"
        assert session.scratch_prefix == f"scratch/t-1/{session_id}/{session.incarnation}/"
        item = raw_item(ddb, {"tenantId": {"S": "t-1"}, SORT: {"S": session_id}})
        assert item is not None and item["tenantId"] == {"S": "t-1"}


def test_fails_a_create_naming_a_tenant_other_than_its_partition(make_store: Any, ddb: Any) -> None:
    store = make_store(sort_key=SORT, partition_key="tenantId")
    with pytest.raises(ValueError) as caught:
        store.create("s-1", partition="t-1", ttl=HOUR, tenant_id="t-2")
    assert str(caught.value) == (
        "tenant id 't-2': the tenant attribute 'tenantId' is the partition key, so the tenant "
        "is the partition 't-1'; pass no tenant_id or the same value"
    )
    assert raw_item(ddb, {"tenantId": {"S": "t-1"}, SORT: {"S": "s-1"}}) is None


@pytest.mark.parametrize("consistent", [None, False, True])
def test_rule_get_reads_eventually_consistent_unless_asked(
    make_store: Any, ddb: Any, consistent: bool | None
) -> None:
    """``get`` sends ``ConsistentRead`` as asked, ``False`` by default (a strongly consistent
    read costs twice the read capacity)."""
    store: SessionStore = make_store(sort_key=SORT)
    created = store.create("s-1", ttl=HOUR, partition="u-1")
    sent: list[Any] = []
    ddb.meta.events.register(
        "provide-client-params.dynamodb.GetItem",
        lambda params, **_: sent.append(params.get("ConsistentRead")),
    )
    kwargs = {} if consistent is None else {"consistent": consistent}

    assert store.get("s-1", partition="u-1", **kwargs) == created
    assert sent == [bool(consistent)]


def test_rule_the_claims_of_a_create_carry_the_items_absolute_end(
    make_store: Any, ddb: Any, clock: FakeClock
) -> None:
    """Each ownership record a create writes holds the new item's own ``notAfter`` (the
    owner's absolute end the refusal classes compare with), not one read again from a clock
    that has moved on meanwhile: here a clock one second later at every read."""

    def ticking() -> Any:
        clock.advance(1)
        return clock()

    store = make_store(ownership=True, store_kwargs={"clock": ticking})
    store.create("s-1", ttl=HOUR, connection_id="c-1")

    item = raw_item(ddb, {"pk": {"S": "s-1"}})
    claim = claim_of(ddb, "connection#c-1")
    assert item is not None and claim is not None
    assert claim["notAfter"] == item["notAfter"]
