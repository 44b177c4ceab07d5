"""The Kinesis read-back's rules one at a time (`records.kinesis_removals`, issue 40's mutation
testing): each test pins a rule a mutant of the module broke without failing another test.

`RemovalCheck` reads a real moto table through a real boto3 client; a spy passes every call on
and records it. moto never leaves keys unprocessed, so the tests of ``UnprocessedKeys`` answer
the call themselves (said where they do).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from session_expiry_runtime.core.decode import parse_record
from session_expiry_runtime.records.kinesis_removals import (
    GONE,
    HELD,
    UNPROVEN,
    ReadBackFailed,
    RemovalCheck,
)

TABLE = "sessions"
STREAM = "arn:aws:kinesis:us-east-1:123456789012:stream/changes"
LIFETIME = 100
ARRIVAL = 10_000


class Spy:
    """A boto3 DynamoDB client whose ``batch_get_item`` calls are recorded, then made; or
    answered by ``answers`` (one per call, in order) where moto cannot answer as AWS may."""

    def __init__(self, client: Any, answers: list[Any] | None = None) -> None:
        self.client = client
        self.calls: list[dict[str, Any]] = []
        self.answers = list(answers or [])

    def batch_get_item(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        if self.answers:
            answer = self.answers.pop(0)
            if isinstance(answer, BaseException):
                raise answer
            return answer
        return self.client.batch_get_item(**kwargs)


@pytest.fixture
def ddb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


def table(ddb: Any, kind: str = "S", name: str = TABLE, sort: bool = False) -> None:
    keys = [("pk", kind, "HASH")] + ([("sk", "S", "RANGE")] if sort else [])
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": n, "KeyType": t} for n, _, t in keys],
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": k} for n, k, _ in keys],
        BillingMode="PAY_PER_REQUEST",
    )


def record(keys: dict[str, Any], *, kinesis: bool = True, event: str = "REMOVE") -> Any:
    raw: dict[str, Any] = {"eventName": event, "dynamodb": {"Keys": keys}}
    if kinesis:
        raw |= {"eventSourceARN": STREAM, "kinesisArrivalTime": ARRIVAL}
    else:
        raw["eventSourceARN"] = "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/s"
    return parse_record(raw)


def check(client: Any, key_names: tuple[str, ...] = ("pk",), **kwargs: Any) -> RemovalCheck:
    return RemovalCheck(
        client,
        kwargs.pop("table_name", TABLE),
        list(key_names),
        "incarnation",
        max_lifetime_seconds=LIFETIME,
        clock=lambda: 20_000.0,
        **kwargs,
    )


def unprocessed(keys: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Responses": {TABLE: []}, "UnprocessedKeys": {TABLE: {"Keys": keys}}}


def test_rule_the_read_back_is_one_strongly_consistent_call_of_the_proof_attributes(
    ddb: Any,
) -> None:
    table(ddb)
    ddb.put_item(
        TableName=TABLE,
        Item={
            "pk": {"S": "a"},
            "incarnation": {"S": "y"},
            "expiresAt": {"N": "1"},
            "na": {"N": str(ARRIVAL + LIFETIME)},
            "previousIncarnation": {"S": "x"},
        },
    )
    spy = Spy(ddb)
    removals = check(spy, not_after_attribute="na")

    removals.prefetch([record({"pk": {"S": "a"}}), record({"pk": {"S": "b"}})])

    ((call,),) = [spy.calls]
    request = call["RequestItems"][TABLE]
    assert request["ConsistentRead"] is True
    assert request["ExpressionAttributeNames"] == {
        "#k0": "pk",
        "#inc": "incarnation",
        "#na": "na",
        "#prev": "previousIncarnation",
    }
    assert request["ProjectionExpression"] == "#k0, #inc, #na, #prev"
    assert sorted(k["pk"]["S"] for k in request["Keys"]) == ["a", "b"]
    # What was read decides without another call: created at the arrival, so gone.
    assert removals.removal(record({"pk": {"S": "a"}}), "x") == GONE
    assert removals.removal(record({"pk": {"S": "b"}}), "x") == GONE
    assert len(spy.calls) == 1


def test_rule_the_held_item_is_read_as_its_incarnation_not_after_and_previous_incarnation(
    ddb: Any,
) -> None:
    table(ddb)
    ddb.put_item(
        TableName=TABLE,
        Item={
            "pk": {"S": "a"},
            "incarnation": {"S": "y"},
            "notAfter": {"N": str(ARRIVAL - 1 + LIFETIME)},
            "previousIncarnation": {"S": "x"},
        },
    )
    removals = check(ddb)
    removals.prefetch([record({"pk": {"S": "a"}})])

    # Created a second before the arrival: gone only for the incarnation the item replaced.
    assert removals.removal(record({"pk": {"S": "a"}}), "x") == GONE
    assert removals.removal(record({"pk": {"S": "a"}}), "z") == UNPROVEN
    assert removals.removal(record({"pk": {"S": "a"}}), "y") == HELD


def test_rule_removals_are_read_back_100_keys_a_call(ddb: Any) -> None:
    table(ddb)
    spy = Spy(ddb)
    records = [record({"pk": {"S": f"k{i}"}}) for i in range(201)]

    check(spy).prefetch(records)

    assert [len(c["RequestItems"][TABLE]["Keys"]) for c in spy.calls] == [100, 100, 1]


def test_rule_only_kinesis_removes_are_prefetched_unless_every_source(ddb: Any) -> None:
    table(ddb)
    spy = Spy(ddb)
    records = [
        record({"pk": {"S": "kinesis"}}),
        record({"pk": {"S": "stream"}}, kinesis=False),
        record({"pk": {"S": "insert"}}, event="INSERT"),
    ]

    check(spy).prefetch(records)
    check(spy).prefetch(records, every_source=True)

    assert [sorted(k["pk"]["S"] for k in c["RequestItems"][TABLE]["Keys"]) for c in spy.calls] == [
        ["kinesis"],
        ["kinesis", "stream"],
    ]


def test_rule_a_key_is_read_once_however_often_it_is_asked(ddb: Any) -> None:
    table(ddb)
    spy = Spy(ddb)
    removals = check(spy)
    same = [record({"pk": {"S": "a"}}), record({"pk": {"S": "a"}})]

    removals.prefetch(same)
    removals.prefetch(same)
    assert removals.removal(same[0], "x") == GONE

    assert [len(c["RequestItems"][TABLE]["Keys"]) for c in spy.calls] == [1]


def test_rule_unprocessed_keys_are_asked_again_up_to_three_calls_then_fail(ddb: Any) -> None:
    table(ddb)
    key = {"pk": {"S": "a"}}
    # moto never leaves keys unprocessed: the spy answers as DynamoDB may.
    spy = Spy(ddb, [unprocessed([key])] * 6)
    removals = check(spy)

    removals.prefetch([record(key)])
    assert len(spy.calls) == 3
    # What the prefetch could not read is read again (three calls more) when it is asked.
    with pytest.raises(ReadBackFailed, match=r"^reading the item back: UnprocessedKeys$"):
        removals.removal(record(key), "x")
    assert len(spy.calls) == 6


def test_rule_unprocessed_keys_read_on_a_later_call_are_not_failed(ddb: Any) -> None:
    table(ddb)
    key = {"pk": {"S": "a"}}
    spy = Spy(ddb, [unprocessed([key]), unprocessed([key])])  # the third call reaches moto
    removals = check(spy)

    removals.prefetch([record(key), record({"pk": {"S": "b"}})])

    assert [len(c["RequestItems"][TABLE]["Keys"]) for c in spy.calls] == [2, 1, 1]
    assert removals.removal(record(key), "x") == GONE


def test_rule_a_failed_call_is_not_repeated_at_once_and_its_failure_says_why(ddb: Any) -> None:
    table(ddb)
    refused = ClientError(
        {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
        "BatchGetItem",
    )
    spy = Spy(ddb, [refused, refused])
    removals = check(spy)
    removals.prefetch([record({"pk": {"S": "a"}})])
    assert len(spy.calls) == 1

    with pytest.raises(
        ReadBackFailed,
        match=r"^reading the item back: ProvisionedThroughputExceededException: slow down$",
    ):
        removals.removal(record({"pk": {"S": "a"}}), "x")
    assert len(spy.calls) == 2  # asked once more when the record is checked


def test_rule_without_a_table_name_every_read_back_fails_and_calls_nothing(ddb: Any) -> None:
    spy = Spy(ddb)
    removals = check(spy, table_name=None)
    removals.prefetch([record({"pk": {"S": "a"}})])

    with pytest.raises(ReadBackFailed) as raised:
        removals.removal(record({"pk": {"S": "a"}}), "x")

    assert str(raised.value) == (
        "SESSION_EXPIRY_TABLE_NAME is not set (redeploy: the construct sets it)"
    )
    assert spy.calls == []


@pytest.mark.parametrize(
    ("asked", "stored"), [("1.0", "1"), ("01", "1"), ("1E+1", "10"), ("-0.50", "-0.5")]
)
def test_rule_number_keys_are_one_key_whatever_their_spelling(
    ddb: Any, asked: str, stored: str
) -> None:
    table(ddb, "N")
    ddb.put_item(TableName=TABLE, Item={"pk": {"N": stored}, "incarnation": {"S": "x"}})
    removals = check(ddb)
    removals.prefetch([record({"pk": {"N": asked}})])

    assert removals.removal(record({"pk": {"N": asked}}), "x") == HELD


def test_rule_binary_keys_are_read_back_by_their_bytes(ddb: Any) -> None:
    table(ddb, "B")
    ddb.put_item(TableName=TABLE, Item={"pk": {"B": b"\x00\xff"}, "incarnation": {"S": "x"}})
    removals = check(ddb)
    keys = {"pk": {"B": base64.b64encode(b"\x00\xff").decode()}}
    removals.prefetch([record(keys)])

    assert removals.removal(record(keys), "x") == HELD
    assert removals.removal(record({"pk": {"B": base64.b64encode(b"\x00").decode()}}), "x") == GONE


def test_rule_a_table_with_a_sort_key_is_read_back_by_both(ddb: Any) -> None:
    table(ddb, sort=True)
    ddb.put_item(
        TableName=TABLE,
        Item={"pk": {"S": "t"}, "sk": {"S": "s"}, "incarnation": {"S": "x"}},
    )
    spy = Spy(ddb)
    removals = check(spy, ("pk", "sk"))
    keys = {"sk": {"S": "s"}, "pk": {"S": "t"}}
    removals.prefetch([record(keys)])

    assert removals.removal(record(keys), "x") == HELD
    names = spy.calls[0]["RequestItems"][TABLE]["ExpressionAttributeNames"]
    assert (names["#k0"], names["#k1"]) == ("pk", "sk")


@pytest.mark.parametrize(
    ("keys", "why"),
    [
        (None, "a REMOVE record without Keys cannot be read back"),
        (
            {"id": {"S": "a"}},
            "Keys name ['id']: expected the table's key ['pk']; no item of this table can be "
            "read back",
        ),
        (
            {"pk": {"S": "a", "N": "1"}},
            "the item cannot be read back: Keys.pk={'S': 'a', 'N': '1'}: expected one S, N or "
            "B value",
        ),
        (
            {"pk": {"BOOL": True}},
            "the item cannot be read back: Keys.pk={'BOOL': True}: expected one S, N or B value",
        ),
        (
            {"pk": {"N": 1}},
            "the item cannot be read back: Keys.pk={'N': 1}: expected one S, N or B value",
        ),
        ({"pk": "a"}, "the item cannot be read back: Keys.pk='a': expected one S, N or B value"),
        (
            {"pk": {"B": "not base64!"}},
            "the item cannot be read back: Keys.pk.B: expected base64 text, got 'not base64!'",
        ),
        (
            {"pk": {"N": "1e999999999"}},
            "the item cannot be read back: Keys.pk.N='1e999999999': expected a number",
        ),
    ],
)
def test_fails_a_record_whose_keys_cannot_be_read_back_naming_them_and_calls_nothing(
    ddb: Any, keys: Any, why: str
) -> None:
    spy = Spy(ddb)
    removals = check(spy)
    bad = record(keys)
    removals.prefetch([bad])

    with pytest.raises(RuntimeError) as raised:
        removals.removal(bad, "x")

    assert str(raised.value) == why
    assert not isinstance(raised.value, ReadBackFailed)
    assert spy.calls == []


def test_rule_a_bad_record_does_not_stop_the_others_being_read_in_one_call(ddb: Any) -> None:
    table(ddb)
    spy = Spy(ddb)
    removals = check(spy)
    records = [record({"id": {"S": "a"}}), record({"pk": {"N": "x"}}), record({"pk": {"S": "b"}})]

    removals.prefetch(records)

    assert [c["RequestItems"][TABLE]["Keys"] for c in spy.calls] == [[{"pk": {"S": "b"}}]]


@pytest.mark.parametrize(
    ("item", "incarnation"),
    [
        ({"incarnation": {"S": "x"}}, "x"),  # the removed incarnation itself
        ({}, "x"),  # an item without incarnation
        ({"incarnation": {"N": "1"}}, "x"),  # nor one as text
        ({"incarnation": {"S": "y"}}, None),  # an image without one
        # ... even when the item was created at the arrival (another incarnation: gone)
        ({"incarnation": {"S": "y"}, "notAfter": {"N": str(ARRIVAL + LIFETIME)}}, None),
        ({"notAfter": {"N": str(ARRIVAL + LIFETIME)}}, "x"),
        ({"incarnation": {"S": "y"}, "notAfter": {"S": "10100"}}, "x"),  # notAfter not a number
        ({"incarnation": {"S": "y"}, "notAfter": {"N": "NaN"}}, "x"),  # nor a finite one
        ({"incarnation": {"S": "y"}, "notAfter": {"N": "Infinity"}}, "x"),
    ],
)
def test_rule_an_item_that_cannot_be_placed_in_time_is_held(
    item: dict[str, Any], incarnation: str | None
) -> None:
    """The held item as `_get` reads it (moto refuses NaN and Infinity as N values)."""
    removals = check(None)
    answer = {"Responses": {TABLE: [{"pk": {"S": "a"}, **item}]}}
    removals.dynamodb = Spy(None, [answer])

    assert removals.removal(record({"pk": {"S": "a"}}), incarnation) == HELD


def test_rule_a_dynamodb_stream_remove_of_another_incarnation_is_gone(ddb: Any) -> None:
    table(ddb)
    ddb.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "incarnation": {"S": "y"}})
    removals = check(ddb)
    removals.prefetch([record({"pk": {"S": "a"}}, kinesis=False)], every_source=True)

    assert removals.removal(record({"pk": {"S": "a"}}, kinesis=False), "x") == GONE
    assert removals.removal(record({"pk": {"S": "a"}}, kinesis=False), "y") == HELD
    # Through Kinesis, an item without notAfter cannot be placed in time: held.
    assert removals.removal(record({"pk": {"S": "a"}}), "x") == HELD


def test_rule_a_kinesis_record_without_an_arrival_time_is_held() -> None:
    removals = check(None)
    answer = {
        "Responses": {
            TABLE: [{"pk": {"S": "a"}, "incarnation": {"S": "y"}, "notAfter": {"N": "10100"}}]
        }
    }
    removals.dynamodb = Spy(None, [answer])
    keys = {"pk": {"S": "a"}}
    raw = {"eventName": "REMOVE", "eventSourceARN": STREAM, "dynamodb": {"Keys": keys}}

    assert removals.removal(parse_record(raw), "x") == HELD


def test_rule_the_default_lifetime_is_eight_hours_and_not_after_its_attribute() -> None:
    removals = RemovalCheck(None, TABLE, ["pk"], "incarnation", clock=lambda: 20_000.0)
    created = ARRIVAL - 1
    answer = {
        "Responses": {
            TABLE: [
                {
                    "pk": {"S": "a"},
                    "incarnation": {"S": "y"},
                    "notAfter": {"N": str(created + 8 * 3600)},
                }
            ]
        }
    }
    removals.dynamodb = Spy(None, [answer])

    # Created a second before the arrival (8 hours before notAfter): unproven, not held.
    assert removals.removal(record({"pk": {"S": "a"}}), "x") == UNPROVEN
    assert removals.max_lifetime == Decimal(8 * 3600)


@pytest.mark.parametrize(("clock", "expected"), [(ARRIVAL + 5.0, GONE), (ARRIVAL + 4.0, HELD)])
def test_rule_a_session_created_in_the_second_of_the_read_back_is_placed_in_time(
    clock: float, expected: str
) -> None:
    # notAfter is whole seconds rounded down: a session created at the read-back's own second
    # is dated at it, never after it; only a date after the read-back cannot be true.
    removals = RemovalCheck(
        None, TABLE, ["pk"], "incarnation", max_lifetime_seconds=LIFETIME, clock=lambda: clock
    )
    created = ARRIVAL + 5
    item = {"pk": {"S": "a"}, "incarnation": {"S": "y"}, "notAfter": {"N": str(created + LIFETIME)}}
    removals.dynamodb = Spy(None, [{"Responses": {TABLE: [item]}}])

    assert removals.removal(record({"pk": {"S": "a"}}), "x") == expected
