"""The deferred-work store's rules that `make mutation` found unpinned (issue 40), each named for
the rule: the exact item a deferral writes, written once, the drain's hold (taken, stale after
exactly `DRAIN_STALE_SECONDS`, settled or given back only by its holder), a refusal that takes
the item out of the index, the drain event.

`DeferredStore` against moto's DynamoDB (real boto3 calls), on the deferred-work table as the
construct creates it (`ownership_support.create_deferred_work_table`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import boto3
import pytest
from ownership_support import DEFERRED_WORK_TABLE, create_deferred_work_table
from session_expiry_runtime.core.ownership import owner_token
from session_expiry_runtime.switches import deferred
from session_expiry_runtime.switches.deferred import (
    DRAIN_STALE_SECONDS,
    DeferredStore,
    is_drain_event,
    item_key,
    new_drain_id,
)

DAYS_14 = 14 * 24 * 3600
T = 1_000_000


@pytest.fixture
def store(aws: None) -> Iterator[DeferredStore]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    create_deferred_work_table(client)
    yield DeferredStore(client, DEFERRED_WORK_TABLE)


def raw(sequence: object = "100", **dynamodb: Any) -> dict[str, Any]:
    return {"eventName": "REMOVE", "dynamodb": {"SequenceNumber": sequence, **dynamodb}}


def stored(store: DeferredStore, step: str = "DeleteScratch", sequence: str = "100") -> Any:
    return store.client.get_item(
        TableName=store.table, Key={"resource": {"S": item_key(step, sequence)}}
    ).get("Item")


def test_rule_a_deferral_writes_one_exact_item_per_step(store: DeferredStore) -> None:
    record = raw(
        100, ApproximateCreationDateTime=Decimal("1700000000"), Size=Decimal("1.5")
    )  # a Kinesis record's numbers, as Lambda's JSON has them
    store.defer(record, ["DeleteScratch", "*"], keys={"pk": "s-1"}, incarnation="inc1", now=T + 0.9)

    text = (
        '{"eventName":"REMOVE","dynamodb":{"SequenceNumber":100,'
        '"ApproximateCreationDateTime":1700000000,"Size":1.5}}'
    )
    for step in ("DeleteScratch", "*"):
        assert stored(store, step) == {
            "resource": {"S": f"deferred#{step}#100"},
            "deferredStep": {"S": step},
            "deferredAt": {"N": str(T)},
            "owner": {"S": owner_token({"pk": "s-1"})},
            "record": {"S": text},
            "expiresAt": {"N": str(T + DAYS_14)},
            "incarnation": {"S": "inc1"},
        }


@pytest.mark.parametrize("incarnation", [None, ""])
def test_rule_a_deferral_without_an_incarnation_writes_none(
    store: DeferredStore, incarnation: str | None
) -> None:
    store.defer(raw(), ["DeleteScratch"], keys={"pk": "s-1"}, incarnation=incarnation, now=T)
    assert "incarnation" not in stored(store)


def test_rule_an_owner_key_values_are_read_as_text_and_a_bad_key_still_defers(
    store: DeferredStore,
) -> None:
    store.defer(raw("1"), ["A"], keys={"pk": Decimal(5)}, incarnation=None, now=T)
    assert stored(store, "A", "1")["owner"] == {"S": owner_token({"pk": "5"})}
    # An empty key value (owner_token refuses it): the key as sorted JSON, numbers as text.
    store.defer(raw("2"), ["A"], keys={"pk": "", "n": Decimal(1)}, incarnation=None, now=T)
    assert stored(store, "A", "2")["owner"] == {"S": '{"n": "1", "pk": ""}'}


def test_rule_a_deferral_is_dated_now_by_default(store: DeferredStore) -> None:
    before = int(time.time())
    store.defer(raw(), ["DeleteScratch"], keys={"pk": "s-1"}, incarnation=None)
    at = int(stored(store)["deferredAt"]["N"])
    assert before <= at <= int(time.time())


def test_rule_a_record_deferred_again_keeps_the_first_item(store: DeferredStore) -> None:
    store.defer(raw(), ["DeleteScratch"], keys={"pk": "s-1"}, incarnation="inc1", now=T)
    assert store.take(stored(store), "drain-a", T + 1)
    store.defer(raw(), ["DeleteScratch"], keys={"pk": "s-1"}, incarnation="inc1", now=T + 60)
    item = stored(store)
    assert item["deferredAt"] == {"N": str(T)} and item["drainId"] == {"S": "drain-a"}


def test_rule_pending_is_one_steps_items_oldest_first_up_to_the_limit(
    store: DeferredStore,
) -> None:
    for sequence, at in (("1", T + 30), ("2", T + 10), ("3", T + 20)):
        store.defer(raw(sequence), ["A"], keys={"pk": "s"}, incarnation=None, now=at)
    store.defer(raw("4"), ["B"], keys={"pk": "s"}, incarnation=None, now=T)

    assert [i["resource"]["S"] for i in store.pending("A", 2)] == ["deferred#A#2", "deferred#A#3"]
    assert [i["resource"]["S"] for i in store.pending("A", 10)][-1] == "deferred#A#1"
    assert store.pending("C", 10) == []


def test_rule_a_hold_is_taken_once_and_given_up_after_exactly_the_stale_time(
    store: DeferredStore,
) -> None:
    store.defer(raw(), ["DeleteScratch"], keys={"pk": "s-1"}, incarnation=None, now=T)
    item = stored(store)

    assert store.take(item, "drain-a", T + 0.9)
    held = stored(store)
    assert (held["drainingSince"], held["drainId"]) == ({"N": str(T)}, {"S": "drain-a"})
    assert not store.take(item, "drain-b", T + DRAIN_STALE_SECONDS)  # exactly: still held
    assert stored(store)["drainId"] == {"S": "drain-a"}
    assert store.take(item, "drain-b", T + DRAIN_STALE_SECONDS + 1)
    assert stored(store)["drainId"] == {"S": "drain-b"}


def test_rule_an_item_gone_is_never_taken_back_into_being(store: DeferredStore) -> None:
    store.defer(raw(), ["DeleteScratch"], keys={"pk": "s-1"}, incarnation=None, now=T)
    item = stored(store)
    assert store.take(item, "drain-a", T) and store.done(item, "drain-a")

    assert not store.take(item, "drain-b", T + 1)
    assert stored(store) is None


def test_rule_only_the_holder_settles_its_item(store: DeferredStore) -> None:
    store.defer(raw(), ["DeleteScratch"], keys={"pk": "s-1"}, incarnation=None, now=T)
    item = stored(store)
    store.take(item, "drain-a", T)

    assert not store.done(item, "drain-b") and stored(store) is not None
    assert store.done(item, "drain-a") and stored(store) is None
    assert not store.done(item, "drain-a")


def test_rule_only_the_holder_gives_its_item_back_and_it_is_free_at_once(
    store: DeferredStore,
) -> None:
    store.defer(raw(), ["DeleteScratch"], keys={"pk": "s-1"}, incarnation=None, now=T)
    item = stored(store)
    store.take(item, "drain-a", T)

    assert not store.give_back(item, "drain-b")
    assert stored(store)["drainId"] == {"S": "drain-a"}
    assert store.give_back(item, "drain-a")
    back = stored(store)
    assert "drainId" not in back and "drainingSince" not in back
    assert back["deferredStep"] == {"S": "DeleteScratch"}  # still pending
    assert store.take(item, "drain-b", T + 1)


def test_rule_a_refusal_keeps_the_item_out_of_the_index_for_an_operator(
    store: DeferredStore,
) -> None:
    store.defer(raw(), ["DeleteScratch"], keys={"pk": "s-1"}, incarnation=None, now=T)
    item = stored(store)
    store.take(item, "drain-a", T)

    assert not store.refuse(item, "drain-b", "live", T + 5)
    assert stored(store)["deferredStep"] == {"S": "DeleteScratch"}
    assert store.refuse(item, "drain-a", "the session is live", T + 5.7)

    refused = stored(store)
    assert {k: v for k, v in refused.items() if k.startswith(("refus", "expires"))} == {
        "refusal": {"S": "the session is live"},
        "refusedAt": {"N": str(T + 5)},
        "refusedStep": {"S": "DeleteScratch"},
        "expiresAt": {"N": str(T + 5 + DAYS_14)},
    }
    assert not {"deferredStep", "drainingSince", "drainId"} & set(refused)
    assert store.pending("DeleteScratch", 10) == []


def test_rule_only_the_schedules_event_is_a_drain() -> None:
    assert is_drain_event({"sessionExpiryDrain": True})
    assert is_drain_event(MappingProxyType({"sessionExpiryDrain": True}))
    for event in ({"sessionExpiryDrain": 1}, {"sessionExpiryDrain": "true"}, {}, "x", None):
        assert not is_drain_event(event)


def test_rule_item_keys_and_drain_ids() -> None:
    assert item_key("*", "7") == "deferred#*#7"
    one, other = new_drain_id(), new_drain_id()
    assert one != other and len(one) == 32 and int(one, 16) >= 0


def test_fails_a_record_value_json_cannot_write_naming_its_type() -> None:
    with pytest.raises(TypeError) as raised:
        json.dumps({"x": {1}}, default=deferred._number)
    assert str(raised.value) == "Object of type set is not JSON serializable"
