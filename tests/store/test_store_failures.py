"""One ``test_fails_...`` per rejected input; each message names the value it rejects."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from session_expiry_runtime.core.config import (
    ENV_GRANT_KEY_ARN,
    ENV_RETIRING_PRINCIPAL,
    ENV_SORT_KEY,
    ENV_TABLE_NAME,
    ENV_TTL_ATTRIBUTE,
    RuntimeConfig,
)
from session_expiry_runtime.store import SessionStore

from ._support import GRANTEE_ROLE, RETIRING_ROLE, T0_EPOCH, TABLE, raw_item

HOUR = timedelta(hours=1)


@pytest.fixture
def store(make_store: Any) -> SessionStore:
    return make_store(ttl_attribute="ttl")  # type: ignore[no-any-return]


@pytest.fixture
def sorted_store(make_store: Any) -> SessionStore:
    return make_store(ttl_attribute="ttl", sort_key="sk")  # type: ignore[no-any-return]


def assert_names(info: pytest.ExceptionInfo[ValueError], value: object) -> None:
    assert repr(value) in str(info.value), str(info.value)


@pytest.mark.parametrize(
    "ttl",
    [
        1_767_229_200_000,  # epoch milliseconds
        "3600",
        3600,
        timedelta(seconds=-60),
        timedelta(0),
        timedelta(days=366),
    ],
    ids=["milliseconds", "string", "bare-int", "negative", "zero", "beyond-horizon"],
)
def test_fails_create_with_bad_ttl(store: SessionStore, ddb: Any, ttl: object) -> None:
    with pytest.raises(ValueError) as info:
        store.create("s-1", ttl=ttl)  # type: ignore[arg-type]
    assert_names(info, ttl)
    assert "timedelta" in str(info.value)
    assert raw_item(ddb, {"pk": {"S": "s-1"}}) is None


@pytest.mark.parametrize(
    "ttl",
    [1_767_229_200_000, "3600", timedelta(seconds=-1), timedelta(days=400)],
    ids=["milliseconds", "string", "negative", "beyond-horizon"],
)
def test_fails_touch_with_bad_ttl(store: SessionStore, ddb: Any, ttl: object) -> None:
    store.create("s-1", ttl=HOUR)
    before = raw_item(ddb, {"pk": {"S": "s-1"}})
    with pytest.raises(ValueError) as info:
        store.touch("s-1", ttl=ttl)  # type: ignore[arg-type]
    assert_names(info, ttl)
    assert raw_item(ddb, {"pk": {"S": "s-1"}}) == before


@pytest.mark.parametrize(
    "expires_at",
    [(T0_EPOCH + 60) * 1000, str(T0_EPOCH + 60), T0_EPOCH, T0_EPOCH + 400 * 86_400],
    ids=["milliseconds", "string", "now", "beyond-horizon"],
)
def test_fails_create_with_bad_expires_at(store: SessionStore, expires_at: object) -> None:
    with pytest.raises(ValueError) as info:
        store.create("s-1", expires_at=expires_at)  # type: ignore[arg-type]
    assert_names(info, expires_at)
    assert "epoch seconds" in str(info.value)


def test_fails_create_with_both_ttl_and_expires_at(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="not both") as info:
        store.create("s-1", ttl=HOUR, expires_at=T0_EPOCH + 60)
    assert_names(info, HOUR)


@pytest.mark.parametrize(
    "session_id", ["", "a/b", "../x", "-lead", "s 1", "x" * 256, None, 42], ids=repr
)
def test_fails_bad_session_id(store: SessionStore, session_id: object) -> None:
    for call in (
        lambda: store.create(session_id, ttl=HOUR),  # type: ignore[arg-type]
        lambda: store.get(session_id),  # type: ignore[arg-type]
        lambda: store.touch(session_id, ttl=HOUR),  # type: ignore[arg-type]
        lambda: store.end(session_id),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValueError) as info:
            call()
        assert_names(info, session_id)


def test_fails_partition_without_sort_key(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="no sort key") as info:
        store.create("s-1", ttl=HOUR, partition="u-1")
    assert_names(info, "u-1")


@pytest.mark.parametrize("partition", [None, ""])
def test_fails_missing_partition_with_sort_key(
    sorted_store: SessionStore, partition: object
) -> None:
    with pytest.raises(ValueError, match="sort key") as info:
        sorted_store.create("s-1", ttl=HOUR, partition=partition)  # type: ignore[arg-type]
    assert_names(info, partition)
    with pytest.raises(ValueError):
        sorted_store.list(partition)  # type: ignore[arg-type]


def test_fails_list_without_sort_key(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="no sort key") as info:
        store.list("u-1")
    assert_names(info, "u-1")


@pytest.mark.parametrize("page_size", [0, -1, True, "2"])
def test_fails_list_with_bad_page_size(sorted_store: SessionStore, page_size: object) -> None:
    with pytest.raises(ValueError) as info:
        sorted_store.list("u-1", page_size=page_size)  # type: ignore[arg-type]
    assert_names(info, page_size)


@pytest.mark.parametrize("name", ["pk", "ttl", "scratchPrefix", "grantToken", ""])
def test_fails_attribute_named_like_a_runtime_attribute(store: SessionStore, name: str) -> None:
    with pytest.raises(ValueError) as info:
        store.create("s-1", ttl=HOUR, attributes={name: "x"})
    assert_names(info, name)


@pytest.mark.parametrize("connection_id", ["", "a\nb", 7])
def test_fails_bad_connection_id(store: SessionStore, connection_id: object) -> None:
    with pytest.raises(ValueError) as info:
        store.create("s-1", ttl=HOUR, connection_id=connection_id)  # type: ignore[arg-type]
    assert_names(info, connection_id)
    store.create("s-1", ttl=HOUR)
    with pytest.raises(ValueError) as info:
        store.attach_connection("s-1", connection_id)  # type: ignore[arg-type]
    assert_names(info, connection_id)


def test_fails_tenant_scoped_create_without_tenant(make_store: Any) -> None:
    store = make_store(tenant_scoped_scratch=True)
    with pytest.raises(ValueError, match="tenant"):
        store.create("s-1", ttl=HOUR)


def test_fails_create_grant_without_retiring_principal(make_store: Any, kms: Any) -> None:
    key = kms.create_key()["KeyMetadata"]["Arn"]
    store = make_store(grant_key_arn=key)
    store.create("s-1", ttl=HOUR)
    with pytest.raises(ValueError, match=ENV_RETIRING_PRINCIPAL) as info:
        store.create_grant("s-1", grantee_principal=GRANTEE_ROLE, operations=["Decrypt"])
    assert_names(info, None)
    assert kms.list_grants(KeyId=key)["Grants"] == []


def test_fails_create_grant_without_key(make_store: Any) -> None:
    store = make_store(retiring_principal=RETIRING_ROLE)
    store.create("s-1", ttl=HOUR)
    with pytest.raises(ValueError, match=ENV_GRANT_KEY_ARN) as info:
        store.create_grant("s-1", grantee_principal=GRANTEE_ROLE, operations=["Decrypt"])
    assert_names(info, None)


@pytest.mark.parametrize("operations", [[], "Decrypt", [""], None])
def test_fails_create_grant_with_bad_operations(
    make_store: Any, kms: Any, operations: object
) -> None:
    key = kms.create_key()["KeyMetadata"]["Arn"]
    store = make_store(grant_key_arn=key, retiring_principal=RETIRING_ROLE)
    store.create("s-1", ttl=HOUR)
    with pytest.raises(ValueError) as info:
        store.create_grant("s-1", grantee_principal=GRANTEE_ROLE, operations=operations)  # type: ignore[arg-type]
    assert_names(info, operations)
    with pytest.raises(ValueError) as info:
        store.create_grant("s-1", grantee_principal="", operations=["Decrypt"])
    assert_names(info, "")


def test_fails_without_table_name(ddb: Any) -> None:
    with pytest.raises(ValueError, match=ENV_TABLE_NAME) as info:
        SessionStore.from_env({}, dynamodb_client=ddb)
    assert_names(info, None)


def test_fails_attribute_name_used_twice(ddb: Any) -> None:
    config = RuntimeConfig(table_name=TABLE, ttl_attribute="pk")
    with pytest.raises(ValueError, match="both") as info:
        SessionStore(dynamodb_client=ddb, config=config)
    assert_names(info, "pk")


@pytest.mark.parametrize("max_ttl", [timedelta(0), 3600, timedelta(seconds=-1)])
def test_fails_bad_max_ttl(ddb: Any, max_ttl: object) -> None:
    with pytest.raises(ValueError) as info:
        SessionStore(TABLE, dynamodb_client=ddb, max_ttl=max_ttl)  # type: ignore[arg-type]
    assert_names(info, max_ttl)


def test_fails_naive_clock(make_store: Any, ddb: Any) -> None:
    naive = datetime(2026, 1, 1)
    store = SessionStore(TABLE, dynamodb_client=ddb, clock=lambda: naive)
    with pytest.raises(ValueError, match="aware") as info:
        store.create("s-1", ttl=HOUR)
    assert_names(info, naive)


def test_from_env_reads_the_construct_environment(make_store: Any, ddb: Any, clock: Any) -> None:
    make_store(ttl_attribute="ttl", sort_key="sk")  # creates the table
    env = {ENV_TABLE_NAME: TABLE, ENV_TTL_ATTRIBUTE: "ttl", ENV_SORT_KEY: "sk"}
    store = SessionStore.from_env(env, dynamodb_client=ddb, clock=clock)
    assert (store.table_name, store.config.ttl_attribute, store.config.sort_key) == (
        TABLE,
        "ttl",
        "sk",
    )
    store.create("s-1", ttl=HOUR, partition="u-1")
    assert raw_item(ddb, {"pk": {"S": "u-1"}, "sk": {"S": "s-1"}}) is not None


def test_fails_iter_sessions_eagerly(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="no sort key"):
        store.iter_sessions("u-1")  # raises before any next()
