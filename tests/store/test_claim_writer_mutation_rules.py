"""The store's claim conditions, writer side (``store_parts/claims.py``), each rule pinned by the
value that matters (issue 40: mutation testing of the module).

`ClaimWriter` against moto's DynamoDB (real boto3 calls). Two things moto does not reproduce are
stubbed, and only those: a ``TransactionConflict`` cancellation reason (moto never has two
transactions in flight) and a botocore error that is not a ``ClientError`` (no connection).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from session_expiry_runtime.core.ownership import (
    CLAIM_RETENTION_SECONDS,
    MAX_FORMER_OWNERS,
    RELEASING_STALE_SECONDS,
    Claim,
    former_owner,
    owner_token,
)
from session_expiry_runtime.store_parts.claims import (
    RELEASING_RETRY_DELAYS,
    Claimed,
    ClaimRequest,
    ClaimWriter,
    Holder,
    TransactionCancelled,
    decode_owner,
    refusal,
    takeable,
    token_hash,
)

from ._support import OWNERSHIP_TABLE, T0_EPOCH, claim_of, create_ownership_table

NOW = Decimal(T0_EPOCH)
KEY_1, KEY_2 = {"pk": "s-1"}, {"pk": "s-2"}


def holder(key: dict[str, str] = KEY_1, incarnation: str = "i-1", **kw: Any) -> Holder:
    return Holder(
        owner=owner_token(key),
        incarnation=incarnation,
        not_after=kw.pop("not_after", T0_EPOCH + 3600),
        session_id=key["pk"],
        partition=None,
        label=f"session {key['pk']!r} (incarnation {incarnation!r})",
        **kw,
    )


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> Decimal:
        return self.now


@pytest.fixture
def clock() -> Clock:  # type: ignore[override]
    return Clock()


@pytest.fixture
def writer(ddb: Any, clock: Clock, sleeps: list[float]) -> ClaimWriter:
    create_ownership_table(ddb)
    return ClaimWriter(ddb, OWNERSHIP_TABLE, clock=clock, sleep=sleeps.append)


def claim(kind: str = "connection", rid: str = "c-1", h: Holder | None = None) -> ClaimRequest:
    return ClaimRequest(kind, rid, h or holder())


def record(ddb: Any, rid: str = "c-1", kind: str = "connection") -> dict[str, Any]:
    item = claim_of(ddb, f"{kind}#{rid}")
    assert item is not None
    return item


def held(state: str, *, not_after: Decimal = NOW, since: Decimal = NOW) -> Claim:
    return Claim("connection#c-1", owner_token(KEY_2), "i-2", state, NOW, not_after, since)


# --- what a claim record holds ------------------------------------------------------------------
def test_rule_claim_record_holds_its_holder_times_and_token_hash(
    writer: ClaimWriter, ddb: Any
) -> None:
    writer.put(claim(h=holder(token="t" * 32)))

    assert record(ddb) == {
        "resource": {"S": "connection#c-1"},
        "owner": {"S": owner_token(KEY_1)},
        "incarnation": {"S": "i-1"},
        "state": {"S": "held"},
        "stateSince": {"N": str(T0_EPOCH)},
        "claimedAt": {"N": str(T0_EPOCH)},
        "notAfter": {"N": str(T0_EPOCH + 3600)},
        "expiresAt": {"N": str(T0_EPOCH + 3600 + CLAIM_RETENTION_SECONDS)},
        "tokenHash": {"S": hashlib.sha256(b"t" * 32).hexdigest()},
    }


def test_rule_claim_record_without_a_token_keeps_no_token_hash(
    writer: ClaimWriter, ddb: Any
) -> None:
    writer.put(claim())
    assert "tokenHash" not in record(ddb) and "formerOwners" not in record(ddb)
    assert token_hash(None) == hashlib.sha256(b"").hexdigest()


def test_rule_put_request_names_only_the_placeholders_its_condition_uses(
    writer: ClaimWriter,
) -> None:
    params = writer.put_request(claim(), NOW)
    assert params["ConditionExpression"] == (
        "attribute_not_exists(#resource) OR (#owner = :owner AND #state IN (:held, :released))"
    )
    assert params["ExpressionAttributeNames"] == {
        "#resource": "resource",
        "#owner": "owner",
        "#state": "state",
    }
    assert params["ExpressionAttributeValues"] == {
        ":owner": {"S": owner_token(KEY_1)},
        ":held": {"S": "held"},
        ":released": {"S": "released"},
    }
    assert params["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
    assert params["TableName"] == OWNERSHIP_TABLE
    custom = writer.put_request(claim(), NOW, condition="#notAfter <= :now AND #x < :stale")
    assert custom["ExpressionAttributeNames"] == {"#notAfter": "notAfter"}
    assert custom["ExpressionAttributeValues"] == {
        ":now": {"N": str(T0_EPOCH)},
        ":stale": {"N": str(T0_EPOCH - RELEASING_STALE_SECONDS)},
    }
    inc = writer.put_request(claim(), NOW, condition="#incarnation = :incarnation OR :releasing")
    assert inc["ExpressionAttributeValues"] == {
        ":incarnation": {"S": "i-1"},
        ":releasing": {"S": "releasing"},
    }


# --- when a record may be taken -----------------------------------------------------------------
def test_rule_takeable_held_only_from_its_owners_absolute_end() -> None:
    assert takeable(held("held", not_after=NOW), NOW) is True
    assert takeable(held("held", not_after=NOW + 1), NOW) is False


def test_rule_takeable_releasing_only_once_stale() -> None:
    stale = NOW - RELEASING_STALE_SECONDS
    assert takeable(held("releasing", since=stale), NOW) is True
    assert takeable(held("releasing", since=stale + 1), NOW) is False
    assert takeable(held("released", not_after=NOW + 99, since=NOW), NOW) is True


def test_rule_takeover_names_the_former_holder_and_keeps_at_most_the_last_few() -> None:
    earlier = tuple(f"old-{i}" for i in range(MAX_FORMER_OWNERS))
    other = Claim("r", owner_token(KEY_2), "i-2", "released", NOW, NOW, NOW, earlier)
    taking = ClaimWriter.successor(claim(), other)
    assert taking.former_owners == (
        *earlier[1:],
        former_owner(owner_token(KEY_2), "i-2"),
    )
    own = Claim("r", owner_token(KEY_1), "i-0", "released", NOW, NOW, NOW, ("old-0",))
    assert ClaimWriter.successor(claim(), own).former_owners == ("old-0",)


def test_rule_put_takes_over_a_released_record_and_writes_its_former_owner(
    writer: ClaimWriter, ddb: Any
) -> None:
    writer.put(claim(h=holder(KEY_2, "i-2")))
    writer.release([claim(h=holder(KEY_2, "i-2"))])

    claimed = writer.put(claim())

    assert record(ddb)["formerOwners"] == {"L": [{"S": former_owner(owner_token(KEY_2), "i-2")}]}
    assert record(ddb)["owner"] == {"S": owner_token(KEY_1)}
    assert claimed.previous is not None and claimed.previous["state"] == {"S": "released"}


def test_rule_take_over_answers_not_takeable_for_a_live_owner_or_no_record(
    writer: ClaimWriter, ddb: Any
) -> None:
    from session_expiry_runtime.store_parts.claims import NOT_TAKEABLE

    writer.put(claim(h=holder(KEY_2, "i-2")))
    live = record(ddb)
    assert writer.take_over(claim(), live) is NOT_TAKEABLE
    assert writer.take_over(claim(), None) is NOT_TAKEABLE
    assert writer.take_over(claim(), {"resource": {"S": "x"}}) is NOT_TAKEABLE


def test_rule_take_over_pins_a_record_without_state_since(writer: ClaimWriter, ddb: Any) -> None:
    writer.put(claim(h=holder(KEY_2, "i-2", not_after=T0_EPOCH - 1)))
    ddb.update_item(
        TableName=OWNERSHIP_TABLE,
        Key={"resource": {"S": "connection#c-1"}},
        UpdateExpression="REMOVE stateSince",
    )
    old = record(ddb)

    taken = writer.take_over(claim(), old)

    assert isinstance(taken, Claimed) and taken.previous == old
    assert record(ddb)["owner"] == {"S": owner_token(KEY_1)}


def test_rule_take_over_of_a_record_that_changed_is_raced(writer: ClaimWriter, ddb: Any) -> None:
    from session_expiry_runtime.store_parts.claims import RACED

    writer.put(claim(h=holder(KEY_2, "i-2", not_after=T0_EPOCH - 1)))
    judged = record(ddb)
    ddb.update_item(
        TableName=OWNERSHIP_TABLE,
        Key={"resource": {"S": "connection#c-1"}},
        UpdateExpression="SET stateSince = :s",
        ExpressionAttributeValues={":s": {"N": "1"}},
    )
    assert writer.take_over(claim(), judged) is RACED
    assert record(ddb)["owner"] == {"S": owner_token(KEY_2)}


# --- refusals -----------------------------------------------------------------------------------
def test_rule_refusal_names_the_owner_its_incarnation_and_absolute_end(
    writer: ClaimWriter, ddb: Any, sleeps: list[float]
) -> None:
    writer.put(claim(h=holder(KEY_2, "i-2")))
    with pytest.raises(Exception) as refused:
        writer.put(claim())
    err = refused.value
    assert str(err) == (
        "WebSocket connection 'c-1' is owned by session {'pk': 's-2'} (incarnation 'i-2', "
        "absolute end 2026-01-01T01:00:00+00:00); session 's-1' (incarnation 'i-1') cannot "
        "record it and nothing was written. An id belongs to one session at a time: end the "
        "owning session first, or use another id"
    )
    assert (err.kind, err.resource_id, err.owner_key, err.owner_incarnation, err.releasing) == (  # type: ignore[attr-defined]
        "connection",
        "c-1",
        KEY_2,
        "i-2",
        False,
    )
    assert (err.session_id, err.partition) == ("s-1", None)  # type: ignore[attr-defined]
    assert sleeps == []  # a live owner's id is refused at once, not asked for again


def test_rule_refusal_of_a_releasing_record_says_retry_and_is_asked_again(
    writer: ClaimWriter, ddb: Any, sleeps: list[float]
) -> None:
    writer.put(claim(h=holder(KEY_2, "i-2")))
    writer.mark_releasing([claim(h=holder(KEY_2, "i-2"))])

    with pytest.raises(Exception) as refused:
        writer.put(claim())

    assert str(refused.value) == (
        "WebSocket connection 'c-1' is being released by the cleanup of session {'pk': 's-2'} "
        "(incarnation 'i-2', absolute end 2026-01-01T01:00:00+00:00), which has ended; "
        "session 's-1' (incarnation 'i-1') cannot record it yet and nothing was written: "
        "retry in a few seconds"
    )
    assert refused.value.releasing is True  # type: ignore[attr-defined]
    assert sleeps == list(RELEASING_RETRY_DELAYS)


def test_rule_refusal_without_the_refusing_record_names_no_owner() -> None:
    err = refusal(claim("custom:DeleteSessionSecret", "arn:x"), None)
    assert str(err) == (
        "DeleteSessionSecret resource 'arn:x' is owned by another session; session 's-1' "
        "(incarnation 'i-1') cannot record it and nothing was written. An id belongs to one "
        "session at a time: end the owning session first, or use another id"
    )
    assert (err.owner_key, err.owner_incarnation, err.releasing) == (None, None, False)
    grant = refusal(claim("grant", "g-1"), None)
    assert str(grant).startswith("KMS grant 'g-1' is owned by another session")


def test_rule_refusal_of_an_unreadable_owner_or_end_still_refuses() -> None:
    item = {
        "resource": {"S": "connection#c-1"},
        "owner": {"S": "%%%"},
        "incarnation": {"S": "i-2"},
        "state": {"S": "held"},
        "claimedAt": {"N": "1"},
        "notAfter": {"N": "1e300"},
    }
    err = refusal(claim(), item)
    assert err.owner_key is None and err.owner_incarnation == "i-2"
    assert "owned by another session (incarnation 'i-2', absolute end 1E+300)" in str(err)


def test_rule_decode_owner_reads_only_a_key_of_strings() -> None:
    assert decode_owner(owner_token({"pk": "s-1", "sk": "é"})) == {"pk": "s-1", "sk": "é"}
    padded = base64.urlsafe_b64encode(b'{"pk":"s"}').decode()
    assert decode_owner(padded) == {"pk": "s"} == decode_owner(padded.rstrip("="))
    for raw in (b'["pk"]', b'{"pk": 1}', b'{"1": null}', b"\xff\xfe"):
        assert decode_owner(base64.urlsafe_b64encode(raw).decode()) is None, raw
    assert decode_owner("%%%") is None
    assert decode_owner(base64.urlsafe_b64encode(json.dumps({}).encode()).decode()) == {}


# --- transactions -------------------------------------------------------------------------------
class Transacting:
    """A DynamoDB client stub answering ``TransactWriteItems`` with the given errors in turn
    (moto never reports ``TransactionConflict``)."""

    def __init__(self, *codes: list[str] | str | None) -> None:
        self.codes, self.calls = list(codes), 0

    def transact_write_items(self, TransactItems: list[Any]) -> dict[str, Any]:
        self.calls += 1
        code = self.codes.pop(0) if self.codes else None
        if code is None:
            return {}
        if isinstance(code, str):
            raise ClientError({"Error": {"Code": code, "Message": "no"}}, "TransactWriteItems")
        reasons = [{"Code": c} for c in code]
        raise ClientError(
            {
                "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                "CancellationReasons": reasons,
            },
            "TransactWriteItems",
        )


def test_rule_transact_asks_again_after_a_conflict_then_gives_up(sleeps: list[float]) -> None:
    conflict = ["None", "TransactionConflict"]
    ddb = Transacting(*[conflict] * (len(RELEASING_RETRY_DELAYS) + 1))
    writer = ClaimWriter(ddb, OWNERSHIP_TABLE, clock=Clock(), sleep=sleeps.append)

    with pytest.raises(TransactionCancelled) as cancelled:
        writer.transact([{"Put": {}}])

    assert ddb.calls == len(RELEASING_RETRY_DELAYS) + 1
    assert sleeps == list(RELEASING_RETRY_DELAYS)
    assert cancelled.value.failed(0) is None and cancelled.value.failed(5) is None


def test_rule_transact_after_a_conflict_succeeds_without_more_waits(sleeps: list[float]) -> None:
    ddb = Transacting(["TransactionConflict"], None)
    writer = ClaimWriter(ddb, OWNERSHIP_TABLE, clock=Clock(), sleep=sleeps.append)
    writer.transact([{"Put": {}}])
    assert (ddb.calls, sleeps) == (2, [RELEASING_RETRY_DELAYS[0]])


def test_rule_transact_condition_failure_is_not_asked_again(sleeps: list[float]) -> None:
    ddb = Transacting(["None", "ConditionalCheckFailed"])
    writer = ClaimWriter(ddb, OWNERSHIP_TABLE, clock=Clock(), sleep=sleeps.append)
    with pytest.raises(TransactionCancelled) as cancelled:
        writer.transact([{"Put": {}}, {"Put": {}}])
    assert (ddb.calls, sleeps) == (1, [])
    assert cancelled.value.failed(1) == {"Code": "ConditionalCheckFailed"}
    assert cancelled.value.failed(0) is None
    assert cancelled.value.failed(2) is None  # no reason for an index past the last
    assert cancelled.value.error.response["Error"]["Code"] == "TransactionCanceledException"
    assert str(cancelled.value) == str(cancelled.value.error)


def test_rule_transact_other_errors_raise_as_they_are(sleeps: list[float]) -> None:
    ddb = Transacting("ProvisionedThroughputExceededException")
    writer = ClaimWriter(ddb, OWNERSHIP_TABLE, clock=Clock(), sleep=sleeps.append)
    with pytest.raises(ClientError, match="ProvisionedThroughputExceeded"):
        writer.transact([{"Put": {}}])
    assert sleeps == []


def test_rule_transact_cancelled_without_reasons_has_none() -> None:
    error = ClientError(
        {"Error": {"Code": "TransactionCanceledException", "Message": "x"}}, "TransactWriteItems"
    )
    assert TransactionCancelled(error).reasons == []


# --- undo, release and the states ---------------------------------------------------------------
def test_rule_undo_puts_back_what_the_claim_replaced_only_while_it_is_that_claim(
    writer: ClaimWriter, ddb: Any, clock: Clock
) -> None:
    writer.put(claim(h=holder(KEY_2, "i-2")))
    writer.release([claim(h=holder(KEY_2, "i-2"))])
    before = record(ddb)
    clock.now += 5
    claimed = writer.put(claim())

    writer.undo(claimed)
    assert record(ddb) == before

    fresh = writer.put(claim(rid="c-2"))
    clock.now += 1
    again = writer.put(claim(rid="c-2"))  # the same incarnation again, a second later
    writer.undo(fresh)  # claimedAt no longer the one written: left alone
    assert record(ddb, "c-2")["claimedAt"] == {"N": str(again.claimed_at)}
    writer.undo(again)  # puts back the record it replaced
    assert record(ddb, "c-2")["claimedAt"] == {"N": str(fresh.claimed_at)}
    writer.undo(fresh)  # a fresh claim's undo deletes it
    assert claim_of(ddb, "connection#c-2") is None


def test_rule_undo_of_another_incarnations_claim_leaves_it(writer: ClaimWriter, ddb: Any) -> None:
    mine = writer.put(claim())
    ddb.update_item(
        TableName=OWNERSHIP_TABLE,
        Key={"resource": {"S": "connection#c-1"}},
        UpdateExpression="SET incarnation = :i",
        ExpressionAttributeValues={":i": {"S": "i-9"}},
    )
    writer.undo(mine)
    assert record(ddb)["incarnation"] == {"S": "i-9"}


class Failing:
    """A DynamoDB client stub whose writes fail without a response (no connection): moto
    cannot make a call fail that way."""

    def __getattr__(self, name: str) -> Any:
        def fail(**_: Any) -> Any:
            raise EndpointConnectionError(endpoint_url="https://dynamodb")

        return fail


def test_rule_undo_and_state_writes_that_fail_are_logged_not_raised(
    writer: ClaimWriter, ddb: Any, caplog: pytest.LogCaptureFixture, sleeps: list[float]
) -> None:
    claimed = writer.put(claim())
    for broken in (Failing(), ddb):
        if broken is ddb:
            ddb.delete_table(TableName=OWNERSHIP_TABLE)
        w = ClaimWriter(broken, OWNERSHIP_TABLE, clock=Clock(), sleep=sleeps.append)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            w.undo(claimed)
            assert w.mark_releasing([claim()]) == []
            w.hold_again([claim()])
            w.release([claim()])
        messages = [r.getMessage() for r in caplog.records]
        assert messages == [
            "could not undo the ownership record of connection 'c-1' for session 's-1' "
            "(incarnation 'i-1'); it expires with its time to live",
            "could not set the ownership record of connection 'c-1' for session 's-1' "
            "(incarnation 'i-1') to releasing",
            "could not set the ownership record of connection 'c-1' for session 's-1' "
            "(incarnation 'i-1') to held",
            "could not set the ownership record of connection 'c-1' for session 's-1' "
            "(incarnation 'i-1') to released",
        ], broken


def test_rule_state_writes_act_only_on_the_holders_claim_in_the_expected_state(
    writer: ClaimWriter, ddb: Any, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    writer.put(claim())
    writer.put(claim(rid="c-other", h=holder(KEY_2, "i-2")))
    ddb.update_item(
        TableName=OWNERSHIP_TABLE,
        Key={"resource": {"S": "connection#c-1"}},
        UpdateExpression="SET goneSince = :g",
        ExpressionAttributeValues={":g": {"N": "5"}},
    )
    clock.now += 10

    with caplog.at_level(logging.WARNING):
        assert writer.mark_releasing([claim(), claim(rid="c-other")]) == [claim()]
        assert writer.mark_releasing([claim()]) == []  # no longer held
    assert caplog.records == []  # a condition refusal is no failure
    assert record(ddb)["state"] == {"S": "releasing"}
    assert record(ddb)["stateSince"] == {"N": str(T0_EPOCH + 10)}
    assert record(ddb, "c-other")["state"] == {"S": "held"}

    clock.now += 1
    writer.hold_again([claim()])
    assert record(ddb)["state"] == {"S": "held"} and "goneSince" not in record(ddb)
    assert record(ddb)["stateSince"] == {"N": str(T0_EPOCH + 11)}
    writer.hold_again([claim()])  # held, not releasing: unchanged
    writer.release([claim(), claim(rid="c-other")])
    assert record(ddb)["state"] == {"S": "released"}
    assert record(ddb, "c-other")["state"] == {"S": "held"}
    writer.hold_again([claim()])
    assert record(ddb)["state"] == {"S": "released"}


def test_rule_release_keeps_gone_since_and_put_fails_on_other_errors(
    writer: ClaimWriter, ddb: Any
) -> None:
    writer.put(claim())
    ddb.update_item(
        TableName=OWNERSHIP_TABLE,
        Key={"resource": {"S": "connection#c-1"}},
        UpdateExpression="SET goneSince = :g",
        ExpressionAttributeValues={":g": {"N": "5"}},
    )
    writer.release([claim()])
    assert record(ddb)["goneSince"] == {"N": "5"}
    ddb.delete_table(TableName=OWNERSHIP_TABLE)
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        writer.put(claim(rid="c-2"))


def test_rule_refusal_names_the_requesting_session_and_its_partition() -> None:
    tenant = Holder(
        owner=owner_token({"tenant": "t-1", "sessionId": "s-1"}),
        incarnation="i-1",
        not_after=T0_EPOCH,
        session_id="s-1",
        partition="t-1",
        label="session 's-1' in partition 't-1' (incarnation 'i-1')",
    )
    err = refusal(ClaimRequest("connection", "c-1", tenant), None)
    assert (err.session_id, err.partition) == ("s-1", "t-1")
