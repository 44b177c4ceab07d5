"""The claims coalescer's batching rules (`owners/claims.py`), each pinned by the value that
matters (issue 40: mutation testing of the module's coalescer). Real boto3 calls against moto.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ownership_support import OWNERSHIP_TABLE, calls_of, put_claim
from runtime_support import Sandbox
from session_expiry_runtime.core.ownership import (
    KIND_CONNECTION,
    VERDICT_OWNED,
    Verdict,
    owner_token,
)
from session_expiry_runtime.owners.claims import Claimant, ClaimBatcher, ClaimRef

NOW = 2_000_000_000


def ref(connection_id: str) -> ClaimRef:
    return ClaimRef(KIND_CONNECTION, connection_id)


def test_rule_coalescer_a_remainder_goes_while_a_full_call_is_answered(sandbox: Sandbox) -> None:
    """A call of exactly ``max_items`` is full, not a remainder: a remainder that arrives while
    it is being answered goes at once (at most one *remainder* is in flight, not one call)."""
    owners = {i: {"pk": f"s-{i}"} for i in range(3)}
    for i, key in owners.items():
        put_claim(sandbox.ddb, KIND_CONNECTION, f"c{i}=", key=key, incarnation="inc1")
    claims = ClaimBatcher(sandbox.ddb, OWNERSHIP_TABLE, clock=lambda: NOW, max_items=2)
    calls = calls_of(sandbox.ddb)
    second_call_sent = threading.Event()
    sent: list[int] = []
    seen_in_time: list[bool] = []

    def hold_the_first_call_until_a_second_one(params: dict[str, Any], **_: Any) -> None:
        sent.append(len(params["TransactItems"]))
        if len(sent) == 1:
            seen_in_time.append(second_call_sent.wait(timeout=3))
        else:
            second_call_sent.set()

    sandbox.ddb.meta.events.register(
        "provide-client-params.dynamodb.TransactWriteItems", hold_the_first_call_until_a_second_one
    )
    results: dict[int, Any] = {}
    claimant = Claimant(owner_token(owners[0]), "inc1")

    def check(refs: list[ClaimRef], who: Claimant, slot: int) -> Callable[[], None]:
        return lambda: results.update({slot: claims.check(who, refs)})

    # One record marks two ids of one session: a full call of max_items.
    put_claim(sandbox.ddb, KIND_CONNECTION, "c0b=", key=owners[0], incarnation="inc1")
    first = threading.Thread(target=check([ref("c0="), ref("c0b=")], claimant, 0))
    first.start()
    while not sent:
        threading.Event().wait(0.001)
    later = threading.Thread(
        target=check([ref("c1=")], Claimant(owner_token(owners[1]), "inc1"), 1)
    )
    later.start()
    for thread in (first, later):
        thread.join(timeout=10)

    assert seen_in_time == [True]  # the remainder did not wait for the full call
    assert sorted(len(p["TransactItems"]) for n, p in calls if n == "TransactWriteItems") == [1, 2]
    assert results == {
        0: {ref("c0="): Verdict(VERDICT_OWNED), ref("c0b="): Verdict(VERDICT_OWNED)},
        1: {ref("c1="): Verdict(VERDICT_OWNED)},
    }


def test_rule_batcher_takes_one_item_per_call_at_the_smallest_size(sandbox: Sandbox) -> None:
    """``max_items`` 1 is a valid size (1..100): each id is its own call."""
    key = {"pk": "s-0"}
    for name in ("a=", "b="):
        put_claim(sandbox.ddb, KIND_CONNECTION, name, key=key, incarnation="inc1")
    claims = ClaimBatcher(sandbox.ddb, OWNERSHIP_TABLE, clock=lambda: NOW, max_items=1)
    calls = calls_of(sandbox.ddb)

    verdicts = claims.check(Claimant(owner_token(key), "inc1"), [ref("a="), ref("b=")])

    assert verdicts == {ref("a="): Verdict(VERDICT_OWNED), ref("b="): Verdict(VERDICT_OWNED)}
    # Marks, releases and reads alike: each coalescer of the batcher keeps the size.
    assert claims.release(Claimant(owner_token(key), "inc1"), [ref("a="), ref("b=")]) == []
    read = claims.claims([ref("a="), ref("b=")])
    assert [r.state if r else None for r in read.values()] == ["released", "released"]
    sizes = [
        (
            n,
            len(p["TransactItems"])
            if "TransactItems" in p
            else len(p["RequestItems"][OWNERSHIP_TABLE]["Keys"]),
        )
        for n, p in calls
    ]
    assert sizes == [("TransactWriteItems", 1)] * 4 + [("BatchGetItem", 1)] * 2


def test_rule_coalescer_the_same_request_of_two_records_goes_in_one_call(
    sandbox: Sandbox,
) -> None:
    """Two records asking the same mark at once (a record delivered twice) share one call and
    one action: the duplicate is the same request for the same item, not a second request."""
    for name, pk in (("x=", "s-x"), ("y=", "s-y")):
        put_claim(sandbox.ddb, KIND_CONNECTION, name, key={"pk": pk}, incarnation="inc1")
    claims = ClaimBatcher(sandbox.ddb, OWNERSHIP_TABLE, clock=lambda: NOW, max_items=2)
    calls = calls_of(sandbox.ddb)
    second_call_sent = threading.Event()
    sent: list[int] = []

    def hold_the_first_call_until_a_second_one(params: dict[str, Any], **_: Any) -> None:
        sent.append(len(params["TransactItems"]))
        if len(sent) == 1:
            second_call_sent.wait(timeout=10)
        else:
            second_call_sent.set()

    sandbox.ddb.meta.events.register(
        "provide-client-params.dynamodb.TransactWriteItems", hold_the_first_call_until_a_second_one
    )
    results: list[Any] = []
    x, y = (Claimant(owner_token({"pk": pk}), "inc1") for pk in ("s-x", "s-y"))
    first = threading.Thread(target=lambda: results.append(claims.check(x, [ref("x=")])))
    first.start()
    while not sent:
        threading.Event().wait(0.001)
    twins = [
        threading.Thread(target=lambda: results.append(claims.check(y, [ref("y=")])))
        for _ in range(2)
    ]
    for thread in twins:
        thread.start()
    for thread in (first, *twins):
        thread.join(timeout=20)

    assert [len(p["TransactItems"]) for n, p in calls if n == "TransactWriteItems"] == [1, 1]
    assert sorted(map(str, results)) == sorted(
        map(str, [{ref("x="): Verdict(VERDICT_OWNED)}] + [{ref("y="): Verdict(VERDICT_OWNED)}] * 2)
    )
