"""SessionStore against moto DynamoDB/KMS with real boto3 calls.

Every table-touching test runs twice: with the TTL attribute named ``expiresAt`` and named
``ttl``, a DynamoDB reserved word that only works through ExpressionAttributeNames.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from session_expiry_runtime.store import (
    Session,
    SessionConflictError,
    SessionGoneError,
    SessionStore,
)

from ._support import T0_EPOCH, TABLE, FakeClock, raw_item

HOUR = timedelta(hours=1)


@pytest.fixture(params=["expiresAt", "ttl"])
def ttl_attr(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(make_store: Any, ttl_attr: str) -> SessionStore:
    """A table without a sort key: the session id is the partition key value."""
    return make_store(ttl_attribute=ttl_attr)  # type: ignore[no-any-return]


@pytest.fixture
def sorted_store(make_store: Any, ttl_attr: str) -> SessionStore:
    """A table with a sort key: partition = user, sort key = session id."""
    return make_store(ttl_attribute=ttl_attr, sort_key="sk")  # type: ignore[no-any-return]


def put_raw(ddb: Any, key: dict[str, Any], ttl_attr: str, ttl_value: dict[str, Any] | None) -> None:
    """Write an item directly, bypassing the store's guard (what another writer could do)."""
    item = {**key, "scratchPrefix": {"S": "sessions/x/old/"}}
    if ttl_value is not None:
        item[ttl_attr] = ttl_value
    ddb.put_item(TableName=TABLE, Item=item)


# --- create / get: the TTL boundary ---------------------------------------------------------


def test_create_writes_ttl_as_number_of_epoch_seconds(
    store: SessionStore, ddb: Any, ttl_attr: str
) -> None:
    s = store.create("s-1", ttl=HOUR, connection_id="conn-1", attributes={"user": "u-1"})
    item = raw_item(ddb, {"pk": {"S": "s-1"}})
    assert item is not None
    assert item[ttl_attr] == {"N": str(T0_EPOCH + 3600)}
    assert item["connectionId"] == {"S": "conn-1"}
    assert item["scratchPrefix"] == {"S": s.scratch_prefix}
    assert item["user"] == {"S": "u-1"}
    assert s.expires_at == T0_EPOCH + 3600
    assert s.expires_at_datetime.timestamp() == T0_EPOCH + 3600
    assert s.scratch_prefix is not None and s.scratch_prefix.startswith("sessions/s-1/")
    assert s.attributes == {"user": "u-1"}
    assert store.get("s-1") == s


def test_create_uses_default_ttl_of_one_hour(store: SessionStore) -> None:
    assert store.create("s-1").expires_at == T0_EPOCH + 3600


@pytest.mark.parametrize(("offset", "live"), [(-1, True), (0, False), (1, False)])
def test_get_at_ttl_boundary(
    store: SessionStore, clock: FakeClock, offset: int, live: bool
) -> None:
    """TTL exactly now -> expired; TTL now - 1 -> expired; TTL now + 1 -> live."""
    created = store.create("s-1", ttl=HOUR)
    clock.set_epoch(created.expires_at + offset)
    for consistent in (False, True):
        assert (store.get("s-1", consistent=consistent) is not None) is live


@pytest.mark.parametrize(("offset", "live"), [(-1, True), (0, False), (1, False)])
def test_list_at_ttl_boundary(
    sorted_store: SessionStore, clock: FakeClock, offset: int, live: bool
) -> None:
    created = sorted_store.create("s-1", ttl=HOUR, partition="u-1")
    clock.set_epoch(created.expires_at + offset)
    assert [s.session_id for s in sorted_store.list("u-1")] == (["s-1"] if live else [])


BAD_TTLS = {
    "missing": None,
    "string": {"S": str(T0_EPOCH + 3600)},
    "milliseconds": {"N": str((T0_EPOCH + 3600) * 1000)},
    "negative": {"N": "-1"},
    "zero": {"N": "0"},
    "beyond-horizon": {"N": str(T0_EPOCH + 2 * 365 * 86_400)},
    "number-set": {"NS": [str(T0_EPOCH + 3600)]},
}


@pytest.mark.parametrize("kind", sorted(BAD_TTLS))
def test_items_with_implausible_ttl_are_never_live(
    sorted_store: SessionStore, ddb: Any, ttl_attr: str, kind: str
) -> None:
    key = {"pk": {"S": "u-1"}, "sk": {"S": "s-1"}}
    put_raw(ddb, key, ttl_attr, BAD_TTLS[kind])
    before = raw_item(ddb, key)
    assert sorted_store.get("s-1", partition="u-1") is None
    assert sorted_store.get("s-1", partition="u-1", consistent=True) is None
    assert sorted_store.list("u-1") == []
    with pytest.raises(SessionGoneError):
        sorted_store.touch("s-1", ttl=HOUR, partition="u-1")
    with pytest.raises(SessionGoneError):
        sorted_store.attach_connection("s-1", "conn-1", partition="u-1")
    with pytest.raises(SessionGoneError):
        sorted_store.attach_grant("s-1", grant_id="g", grant_token="t", partition="u-1")
    assert raw_item(ddb, key) == before
    # Not live means the id is free again.
    assert sorted_store.create("s-1", ttl=HOUR, partition="u-1").session_id == "s-1"


# --- list: pagination across pages the filter empties ----------------------------------------


def test_list_follows_pages_the_filter_empties(
    sorted_store: SessionStore, ddb: Any, clock: FakeClock, ttl_attr: str
) -> None:
    for sid in ("a-1", "a-2", "a-3", "a-4"):
        sorted_store.create(sid, ttl=timedelta(minutes=1), partition="u-1")
    for sid in ("b-1", "b-2", "b-3"):
        sorted_store.create(sid, ttl=HOUR, partition="u-1")
    sorted_store.create("c-1", ttl=HOUR, partition="u-2")
    clock.advance(120)  # the a-* sessions are expired but, as in DynamoDB, still stored

    # The scenario is real: the first Limit=2 page matches nothing yet has more to read.
    first = ddb.query(
        TableName=TABLE,
        KeyConditionExpression="#pk = :pk",
        FilterExpression="#t > :now",
        ExpressionAttributeNames={"#pk": "pk", "#t": ttl_attr},
        ExpressionAttributeValues={":pk": {"S": "u-1"}, ":now": {"N": str(T0_EPOCH + 120)}},
        Limit=2,
    )
    assert first["Items"] == [] and "LastEvaluatedKey" in first

    listed = sorted_store.list("u-1", page_size=2)
    assert [s.session_id for s in listed] == ["b-1", "b-2", "b-3"]
    assert all(s.partition == "u-1" for s in listed)
    assert [s.session_id for s in sorted_store.list("u-1", consistent=True)] == [
        "b-1",
        "b-2",
        "b-3",
    ]
    assert [s.session_id for s in sorted_store.iter_sessions("u-1", page_size=1)] == [
        "b-1",
        "b-2",
        "b-3",
    ]


# --- touch / heartbeat ---------------------------------------------------------------------


def test_touch_extends_a_live_session(
    store: SessionStore, ddb: Any, clock: FakeClock, ttl_attr: str
) -> None:
    store.create("s-1", ttl=timedelta(minutes=5), connection_id="conn-1")
    clock.advance(240)
    touched = store.touch("s-1", ttl=timedelta(minutes=10))
    assert touched.expires_at == T0_EPOCH + 240 + 600
    assert touched.connection_id == "conn-1"
    item = raw_item(ddb, {"pk": {"S": "s-1"}})
    assert item is not None and item[ttl_attr] == {"N": str(T0_EPOCH + 840)}
    assert store.heartbeat("s-1", expires_at=T0_EPOCH + 900).expires_at == T0_EPOCH + 900


def test_heartbeat_one_second_after_expiry_is_refused_and_changes_nothing(
    store: SessionStore, ddb: Any, clock: FakeClock
) -> None:
    created = store.create("s-1", ttl=timedelta(minutes=5), connection_id="conn-1")
    before = raw_item(ddb, {"pk": {"S": "s-1"}})
    clock.set_epoch(created.expires_at + 1)
    with pytest.raises(SessionGoneError, match="'s-1'") as info:
        store.touch("s-1", ttl=HOUR)
    assert info.value.session_id == "s-1"
    assert raw_item(ddb, {"pk": {"S": "s-1"}}) == before


def test_touch_of_a_missing_session_is_refused_and_creates_nothing(
    store: SessionStore, ddb: Any
) -> None:
    with pytest.raises(SessionGoneError, match="'nope'"):
        store.touch("nope", ttl=HOUR)
    assert raw_item(ddb, {"pk": {"S": "nope"}}) is None


# --- create: conflict and reuse after expiry ------------------------------------------------


def test_create_twice_conflicts(store: SessionStore, ddb: Any) -> None:
    first = store.create("s-1", ttl=HOUR)
    before = raw_item(ddb, {"pk": {"S": "s-1"}})
    with pytest.raises(SessionConflictError, match="'s-1'") as info:
        store.create("s-1", ttl=HOUR)
    assert info.value.session_id == "s-1"
    assert raw_item(ddb, {"pk": {"S": "s-1"}}) == before
    assert store.get("s-1") == first


def test_create_twice_conflicts_per_partition(sorted_store: SessionStore) -> None:
    sorted_store.create("s-1", ttl=HOUR, partition="u-1")
    sorted_store.create("s-1", ttl=HOUR, partition="u-2")  # another partition: no conflict
    with pytest.raises(SessionConflictError, match="'u-1'"):
        sorted_store.create("s-1", ttl=HOUR, partition="u-1")


def test_create_after_expiry_is_a_new_incarnation(
    store: SessionStore, clock: FakeClock, make_stream: Any
) -> None:
    old = store.create("s-1", ttl=timedelta(minutes=1), connection_id="conn-old")
    clock.advance(61)  # expired, not yet deleted by TTL
    new = store.create("s-1", ttl=HOUR)
    assert new.scratch_prefix != old.scratch_prefix
    assert new.connection_id is None
    assert store.get("s-1") == new
    # The old incarnation left through a REMOVE record, so its cleanup still runs.
    removes = [r for r in make_stream() if r["eventName"] == "REMOVE"]
    assert len(removes) == 1
    old_image = removes[0]["dynamodb"]["OldImage"]
    assert old_image["scratchPrefix"] == {"S": old.scratch_prefix}
    assert old_image["connectionId"] == {"S": "conn-old"}


def test_tenant_scoped_scratch_prefix(make_store: Any) -> None:
    store = make_store(tenant_scoped_scratch=True, scratch_root="scratch/")
    s = store.create("s-1", ttl=HOUR, tenant_id="t-1")
    assert s.tenant_id == "t-1"
    assert s.scratch_prefix is not None and s.scratch_prefix.startswith("scratch/t-1/s-1/")
    assert s.scratch_prefix.endswith("/")


# --- attach ---------------------------------------------------------------------------------


def test_attach_connection_and_grant_on_a_live_session(store: SessionStore, ddb: Any) -> None:
    store.create("s-1", ttl=HOUR)
    assert store.attach_connection("s-1", "conn-2").connection_id == "conn-2"
    s = store.attach_grant("s-1", grant_id="g-1", grant_token="tok-1")
    assert (s.grant_id, s.grant_token, s.connection_id) == ("g-1", "tok-1", "conn-2")
    assert "tok-1" not in repr(s)
    assert store.attach_grant("s-1", grant_id="g-1", grant_token="tok-1").grant_id == "g-1"
    item = raw_item(ddb, {"pk": {"S": "s-1"}})
    assert item is not None
    assert (item["grantId"], item["grantToken"]) == ({"S": "g-1"}, {"S": "tok-1"})


def test_attach_after_expiry_is_refused(store: SessionStore, ddb: Any, clock: FakeClock) -> None:
    created = store.create("s-1", ttl=HOUR)
    before = raw_item(ddb, {"pk": {"S": "s-1"}})
    clock.set_epoch(created.expires_at)
    with pytest.raises(SessionGoneError):
        store.attach_connection("s-1", "conn-2")
    with pytest.raises(SessionGoneError):
        store.attach_grant("s-1", grant_id="g-1", grant_token="tok-1")
    assert raw_item(ddb, {"pk": {"S": "s-1"}}) == before


def test_attach_a_second_grant_conflicts(store: SessionStore, ddb: Any) -> None:
    store.create("s-1", ttl=HOUR)
    store.attach_grant("s-1", grant_id="g-1", grant_token="tok-1")
    before = raw_item(ddb, {"pk": {"S": "s-1"}})
    with pytest.raises(SessionConflictError, match="'g-1'"):
        store.attach_grant("s-1", grant_id="g-2", grant_token="tok-2")
    assert raw_item(ddb, {"pk": {"S": "s-1"}}) == before


# --- end -------------------------------------------------------------------------------------


def test_end_deletes_and_reports_whether_it_existed(store: SessionStore, ddb: Any) -> None:
    store.create("s-1", ttl=HOUR)
    assert store.end("s-1") is True
    assert raw_item(ddb, {"pk": {"S": "s-1"}}) is None
    assert store.end("s-1") is False
    assert store.get("s-1") is None


def test_end_of_an_expired_session_still_deletes_it(store: SessionStore, clock: FakeClock) -> None:
    store.create("s-1", ttl=HOUR)
    clock.advance(7200)
    assert store.end("s-1") is True


def test_session_fields_round_trip_with_sort_key(sorted_store: SessionStore) -> None:
    s = sorted_store.create("s-1", ttl=HOUR, partition="u-1", tenant_id="t-1")
    assert isinstance(s, Session)
    assert (s.session_id, s.partition, s.tenant_id) == ("s-1", "u-1", "t-1")
    assert sorted_store.get("s-1", partition="u-1") == s
    assert sorted_store.end("s-1", partition="u-1") is True
