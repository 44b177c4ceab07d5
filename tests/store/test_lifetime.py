"""Absolute session lifetime: create records the not-after time, touch never passes it, reads
and writes fail closed from it on (moto DynamoDB, settable clock)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from session_expiry_runtime.core.config import (
    DEFAULT_MAX_SESSION_LIFETIME_SECONDS,
    ENV_MAX_SESSION_LIFETIME_SECONDS,
    ENV_TABLE_NAME,
    RuntimeConfig,
)
from session_expiry_runtime.store import SessionGoneError, SessionStore

from ._support import T0_EPOCH, TABLE, FakeClock, raw_item

HOUR = timedelta(hours=1)
LIFETIME = 3600
KEY = {"pk": {"S": "u-1"}, "sk": {"S": "s-1"}}


@pytest.fixture
def store(make_store: Any) -> SessionStore:
    return make_store(  # type: ignore[no-any-return]
        sort_key="sk", max_session_lifetime_seconds=LIFETIME
    )


def test_default_lifetime_is_eight_hours(make_store: Any, ddb: Any) -> None:
    assert DEFAULT_MAX_SESSION_LIFETIME_SECONDS == 8 * 3600
    s = make_store().create("s-1", ttl=HOUR)
    assert s.not_after == T0_EPOCH + 8 * 3600
    item = raw_item(ddb, {"pk": {"S": "s-1"}})
    assert item is not None and item["notAfter"] == {"N": str(T0_EPOCH + 8 * 3600)}


def test_create_never_sets_the_ttl_past_the_not_after_time(store: SessionStore) -> None:
    s = store.create("s-1", ttl=timedelta(days=2), partition="u-1")
    assert (s.expires_at, s.not_after) == (T0_EPOCH + LIFETIME, T0_EPOCH + LIFETIME)
    t = store.create("s-2", expires_at=T0_EPOCH + 90_000, partition="u-1")
    assert t.expires_at == T0_EPOCH + LIFETIME


def test_heartbeats_never_extend_past_the_not_after_time(
    store: SessionStore, clock: FakeClock, ddb: Any
) -> None:
    store.create("s-1", ttl=timedelta(minutes=10), partition="u-1")
    for _ in range(5):  # heartbeat every 9 minutes: allowed up to the cap
        clock.advance(540)
        s = store.touch("s-1", ttl=timedelta(minutes=10), partition="u-1")
        assert s.expires_at <= T0_EPOCH + LIFETIME
    clock.advance(540)  # T0 + 54 min: ten more minutes would pass the cap at T0 + 60 min
    s = store.touch("s-1", ttl=timedelta(minutes=10), partition="u-1")
    assert s.expires_at == T0_EPOCH + LIFETIME
    item = raw_item(ddb, KEY)
    assert item is not None and item["expiresAt"] == {"N": str(T0_EPOCH + LIFETIME)}


@pytest.mark.parametrize(("offset", "live"), [(-1, True), (0, False), (1, False)])
def test_boundary_one_second_before_at_and_after_the_not_after_time(
    store: SessionStore, clock: FakeClock, ddb: Any, offset: int, live: bool
) -> None:
    store.create("s-1", ttl=timedelta(minutes=10), partition="u-1")
    # Another writer left the TTL beyond the cap: the not-after time still decides.
    ddb.update_item(
        TableName=TABLE,
        Key=KEY,
        UpdateExpression="SET expiresAt = :t",
        ExpressionAttributeValues={":t": {"N": str(T0_EPOCH + 2 * LIFETIME)}},
    )
    clock.set_epoch(T0_EPOCH + LIFETIME + offset)
    before = raw_item(ddb, KEY)
    assert (store.get("s-1", partition="u-1") is not None) is live
    assert (store.get("s-1", partition="u-1", consistent=True) is not None) is live
    assert [s.session_id for s in store.list("u-1")] == (["s-1"] if live else [])
    if live:
        touched = store.touch("s-1", ttl=HOUR, partition="u-1")
        assert touched.expires_at == T0_EPOCH + LIFETIME  # cut to the not-after time
        return
    with pytest.raises(SessionGoneError, match="absolute lifetime"):
        store.touch("s-1", ttl=HOUR, partition="u-1")
    with pytest.raises(SessionGoneError):
        store.attach_connection("s-1", "conn-2", partition="u-1", close_previous=False)
    with pytest.raises(SessionGoneError):
        store.attach_grant("s-1", grant_id="g", grant_token="t", partition="u-1")
    assert raw_item(ddb, KEY) == before
    # Past its not-after time the id is free for a new incarnation.
    assert store.create("s-1", ttl=HOUR, partition="u-1").not_after == (
        T0_EPOCH + LIFETIME + offset + LIFETIME
    )


def test_an_item_without_a_not_after_time_gets_one_at_its_first_heartbeat(
    store: SessionStore, clock: FakeClock, ddb: Any
) -> None:
    ddb.put_item(TableName=TABLE, Item={**KEY, "expiresAt": {"N": str(T0_EPOCH + 600)}})
    assert store.get("s-1", partition="u-1") is not None  # no cap yet: the TTL decides
    clock.advance(300)
    s = store.touch("s-1", ttl=timedelta(days=1), partition="u-1")
    assert s.not_after == T0_EPOCH + 300 + LIFETIME
    assert s.expires_at == T0_EPOCH + 300 + LIFETIME
    clock.advance(LIFETIME)
    with pytest.raises(SessionGoneError):
        store.touch("s-1", ttl=HOUR, partition="u-1")


@pytest.mark.parametrize("not_after", [{"S": str(T0_EPOCH + 600)}, {"NS": ["1"]}, {"N": "0"}])
def test_a_not_after_time_that_is_not_a_future_number_is_never_live(
    store: SessionStore, ddb: Any, not_after: dict[str, Any]
) -> None:
    ddb.put_item(
        TableName=TABLE,
        Item={**KEY, "expiresAt": {"N": str(T0_EPOCH + 600)}, "notAfter": not_after},
    )
    before = raw_item(ddb, KEY)
    assert store.get("s-1", partition="u-1") is None
    assert store.list("u-1") == []
    with pytest.raises(SessionGoneError):
        store.touch("s-1", ttl=HOUR, partition="u-1")
    assert raw_item(ddb, KEY) == before


def test_the_lifetime_comes_from_the_environment(ddb: Any) -> None:
    store = SessionStore.from_env(
        {ENV_TABLE_NAME: TABLE, ENV_MAX_SESSION_LIFETIME_SECONDS: "120"},
        dynamodb_client=ddb,
        clock=FakeClock(),
    )
    assert store.config.max_session_lifetime_seconds == 120


@pytest.mark.parametrize("lifetime", [0, -1, True, 1.5, "3600", 366 * 86_400])
def test_fails_bad_max_session_lifetime(ddb: Any, lifetime: object) -> None:
    cfg = RuntimeConfig(table_name=TABLE, max_session_lifetime_seconds=lifetime)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max session lifetime") as info:
        SessionStore(dynamodb_client=ddb, config=cfg)
    assert repr(lifetime) in str(info.value)


@pytest.mark.parametrize("raw", ["0", "-5", "8h"])
def test_fails_bad_max_session_lifetime_variable(raw: str) -> None:
    with pytest.raises(ValueError, match=ENV_MAX_SESSION_LIFETIME_SECONDS):
        RuntimeConfig.from_env({ENV_TABLE_NAME: TABLE, ENV_MAX_SESSION_LIFETIME_SECONDS: raw})
