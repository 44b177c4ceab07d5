"""The claims coalescer's batching rules (`owners/claims.py`), each pinned by the value that
matters (issue 40: mutation testing of the module's coalescer). Real boto3 calls against moto.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError
from ownership_support import OWNERSHIP_TABLE, calls_of, claim_state, put_claim, raw_claim
from runtime_support import Sandbox
from session_expiry_runtime.core.config import DEFAULT_MAX_WORKERS
from session_expiry_runtime.core.ownership import (
    ATTR_HANDED_OVER_AT,
    KIND_CONNECTION,
    KIND_GRANT,
    STATE_RELEASED,
    STATE_RELEASING,
    VERDICT_OWNED,
    Verdict,
    owner_token,
)
from session_expiry_runtime.owners import claims as claims_module
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


# ``ClaimBatcher.hand_over``: the grant step leaves a grant KMS has not found within its
# consistency window to the grant sweep (``handedOverAt``), only on the record this run marked.

GRANT = "g-handed"
HOLDER = {"pk": "s-handed"}


def grant_ref() -> ClaimRef:
    return ClaimRef(KIND_GRANT, GRANT)


def handed_over_at(sandbox: Sandbox) -> str | None:
    record = raw_claim(sandbox.ddb, KIND_GRANT, GRANT)
    assert record is not None
    return record.get(ATTR_HANDED_OVER_AT, {}).get("N")  # type: ignore[no-any-return]


def test_rule_hand_over_writes_now_on_the_record_this_run_marked(sandbox: Sandbox) -> None:
    """The record names the claimant and is ``releasing``: ``handedOverAt`` is the clock's now
    (seconds), and the answer is ``True``."""
    put_claim(sandbox.ddb, KIND_GRANT, GRANT, key=HOLDER, incarnation="inc1", state=STATE_RELEASING)
    claims = ClaimBatcher(sandbox.ddb, OWNERSHIP_TABLE, clock=lambda: NOW + 0.7)

    assert claims.hand_over(Claimant(owner_token(HOLDER), "inc1"), grant_ref()) is True
    assert handed_over_at(sandbox) == str(NOW)


@pytest.mark.parametrize(
    ("owner", "incarnation", "dry_run"),
    [
        pytest.param(None, "inc1", False, id="no-owner"),
        pytest.param(owner_token(HOLDER), None, False, id="no-incarnation"),
        pytest.param(owner_token(HOLDER), "inc1", True, id="dry-run"),
    ],
)
def test_rule_hand_over_without_an_owner_an_incarnation_or_in_a_dry_run_writes_nothing(
    sandbox: Sandbox, owner: str | None, incarnation: str | None, dry_run: bool
) -> None:
    """A claimant no record can name (no owner, or no incarnation: an item from before
    ownership records) has nothing to hand over, and a dry run writes nothing: ``False``, no
    call at all."""
    put_claim(sandbox.ddb, KIND_GRANT, GRANT, key=HOLDER, incarnation="inc1", state=STATE_RELEASING)
    claims = ClaimBatcher(sandbox.ddb, OWNERSHIP_TABLE, clock=lambda: NOW, dry_run=dry_run)
    calls = calls_of(sandbox.ddb)

    assert claims.hand_over(Claimant(owner, incarnation), grant_ref()) is False
    assert [name for name, _ in calls] == []
    assert handed_over_at(sandbox) is None


@pytest.mark.parametrize(
    ("owner", "incarnation", "state"),
    [
        pytest.param({"pk": "s-other"}, "inc1", STATE_RELEASING, id="taken-over"),
        pytest.param(HOLDER, "inc2", STATE_RELEASING, id="a-later-incarnation"),
        pytest.param(HOLDER, "inc1", STATE_RELEASED, id="released"),
    ],
)
def test_rule_hand_over_of_a_record_no_longer_the_claimants_is_false_and_writes_nothing(
    sandbox: Sandbox, owner: dict[str, str], incarnation: str, state: str
) -> None:
    """The condition names the owner, the incarnation and ``releasing``: a record another
    owner took over, a later incarnation holds or already released is not ours to hand over —
    ``False`` (the condition's failure is an answer, not an error), the record unchanged."""
    put_claim(sandbox.ddb, KIND_GRANT, GRANT, key=owner, incarnation=incarnation, state=state)
    claims = ClaimBatcher(sandbox.ddb, OWNERSHIP_TABLE, clock=lambda: NOW)

    assert claims.hand_over(Claimant(owner_token(HOLDER), "inc1"), grant_ref()) is False
    assert handed_over_at(sandbox) is None


def test_rule_hand_over_raises_any_other_error(sandbox: Sandbox) -> None:
    """Only the condition's failure is an answer: any other error of the ``UpdateItem`` (here
    the table is missing) is raised, for the step to fail its record."""
    claims = ClaimBatcher(sandbox.ddb, "no-such-ownership-table", clock=lambda: NOW)

    with pytest.raises(ClientError) as raised:
        claims.hand_over(Claimant(owner_token(HOLDER), "inc1"), grant_ref())
    assert raised.value.response["Error"]["Code"] == "ResourceNotFoundException"


# ``_Coalescer.submit_all``: the calls of a large batch side by side, from threads of their own.

OWNER = {"pk": "s-many"}


def releasing(sandbox: Sandbox, count: int) -> list[ClaimRef]:
    """``count`` connection ids this run marked ``releasing`` for ``OWNER``'s ``inc1``."""
    refs = [ref(f"m{i}=") for i in range(count)]
    for each in refs:
        put_claim(
            sandbox.ddb,
            KIND_CONNECTION,
            each.resource_id,
            key=OWNER,
            incarnation="inc1",
            state=STATE_RELEASING,
        )
    return refs


def threads_of_calls(sandbox: Sandbox) -> list[str]:
    """The name of the thread each ``TransactWriteItems`` goes from."""
    names: list[str] = []
    sandbox.ddb.meta.events.register(
        "before-call.dynamodb.TransactWriteItems",
        lambda **_: names.append(threading.current_thread().name),
    )
    return names


def calls_held_together(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, calls: int
) -> dict[str, Any]:
    """Holds each ``TransactWriteItems`` sent from a thread ``release_all`` started until all
    ``calls`` of the batch were handed to the pool and every thread it started is in a call;
    then lets them all go. ``together`` is how many were in flight at that moment (the most
    there can be: every thread is in one), ``threads`` how many the pool started, ``names``
    the thread of every call. No timing: the hold ends on what the threads did (the wait's
    limit is reached only when the rule is broken). ``submit_in_context`` is wrapped, not
    replaced, to count the hand-overs; a call from the caller's own thread is never held."""
    caller, before = threading.current_thread(), set(threading.enumerate())
    gate = threading.Condition()
    seen: dict[str, Any] = {"handed": 0, "in_flight": 0, "together": 0, "threads": 0}
    seen["names"], seen["released"] = [], False
    handing = claims_module.submit_in_context

    def counted(*args: Any) -> Any:
        future = handing(*args)
        with gate:
            seen["handed"] += 1
            gate.notify_all()
        return future

    def everyone_in_a_call() -> bool:
        started = len(set(threading.enumerate()) - before)
        return bool(seen["released"]) or (seen["handed"] == calls and seen["in_flight"] == started)

    def hold(**_: Any) -> None:
        with gate:
            seen["names"].append(threading.current_thread().name)
            if threading.current_thread() is caller or seen["released"]:
                return
            seen["in_flight"] += 1
            gate.notify_all()
            gate.wait_for(everyone_in_a_call, timeout=60)
            if not seen["released"]:
                seen["released"] = True
                seen["together"] = seen["in_flight"]
                seen["threads"] = len(set(threading.enumerate()) - before)
                gate.notify_all()
            seen["in_flight"] -= 1

    monkeypatch.setattr(claims_module, "submit_in_context", counted)
    sandbox.ddb.meta.events.register("before-call.dynamodb.TransactWriteItems", hold)
    return seen


def test_rule_the_calls_of_a_two_call_batch_go_side_by_side_from_named_threads(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """150 ids are two calls (100 + 50): both in flight together, from two threads the batch
    started, each a ``cleanup-claims`` thread (a thread dump names them)."""
    refs = releasing(sandbox, 150)
    claims = ClaimBatcher(sandbox.ddb, OWNERSHIP_TABLE, clock=lambda: NOW, calls_at_once=2)
    seen = calls_held_together(sandbox, monkeypatch, calls=2)

    assert claims.release_all([(Claimant(owner_token(OWNER), "inc1"), refs)]) == [[]]
    assert (seen["together"], seen["threads"]) == (2, 2)
    assert len(seen["names"]) == 2
    assert {name.rsplit("_", 1)[0] for name in seen["names"]} == {"cleanup-claims"}


@pytest.mark.parametrize(
    ("count", "at_once"),
    [pytest.param(50, 32, id="one-call"), pytest.param(250, 1, id="one-at-a-time")],
)
def test_rule_one_call_or_one_at_a_time_starts_no_thread(
    sandbox: Sandbox, count: int, at_once: int
) -> None:
    """A batch that fits one call, or a bound of one call at a time, starts no thread: every
    call goes from the caller's thread, in turn."""
    refs = releasing(sandbox, count)
    claims = ClaimBatcher(sandbox.ddb, OWNERSHIP_TABLE, clock=lambda: NOW, calls_at_once=at_once)
    names = threads_of_calls(sandbox)

    assert claims.release_all([(Claimant(owner_token(OWNER), "inc1"), refs)]) == [[]]
    assert names == [threading.current_thread().name] * -(-count // 100)


def test_rule_a_failed_call_of_a_batch_sent_side_by_side_is_reported_not_lost(
    sandbox: Sandbox,
) -> None:
    """250 ids, three calls or more side by side; the one carrying ``m150=`` fails with
    something other than a botocore error (botocore's errors are answers per id, asked again):
    the request's failure names it, exactly that call's ids stay ``releasing``, every other
    call's ids are released, and nothing raises (``release_all`` never raises). Which ids
    share a call depends on the order the threads queue them in: the test reads the call."""
    refs = releasing(sandbox, 250)
    claims = ClaimBatcher(sandbox.ddb, OWNERSHIP_TABLE, clock=lambda: NOW)
    broken = ref("m150=").resource
    failed: set[str] = set()
    calls: list[set[str]] = []

    def fail_the_call_with_m150(params: dict[str, Any], **_: Any) -> None:
        keys = {i["Update"]["Key"]["resource"]["S"] for i in params["TransactItems"]}
        calls.append(keys)
        if broken in keys:
            failed.update(keys)
            raise RuntimeError("a fault outside botocore")

    sandbox.ddb.meta.events.register(
        "provide-client-params.dynamodb.TransactWriteItems", fail_the_call_with_m150
    )

    failures = claims.release_all([(Claimant(owner_token(OWNER), "inc1"), refs)])

    assert failures == [["releasing the ownership records: a fault outside botocore"]]
    assert len(calls) >= 3 and 0 < len(failed) <= 100
    states = {
        each.resource: claim_state(sandbox.ddb, KIND_CONNECTION, each.resource_id) for each in refs
    }
    assert {r for r, state in states.items() if state == STATE_RELEASING} == failed
    assert [state for r, state in states.items() if r not in failed] == [STATE_RELEASED] * (
        250 - len(failed)
    )


def test_rule_calls_at_once_defaults_to_the_constructs_max_workers(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``calls_at_once``, at most 32 calls are in flight together (the construct's
    default ``max_workers``): of 33 one-item calls, 32 are in flight at once from 32 threads
    once all 33 were handed to the pool, and no 33rd thread is there to send the last."""
    bound = DEFAULT_MAX_WORKERS
    refs = releasing(sandbox, bound + 1)
    claims = ClaimBatcher(sandbox.ddb, OWNERSHIP_TABLE, clock=lambda: NOW, max_items=1)
    seen = calls_held_together(sandbox, monkeypatch, calls=bound + 1)

    assert claims.release_all([(Claimant(owner_token(OWNER), "inc1"), refs)]) == [[]]
    assert (seen["together"], seen["threads"]) == (bound, bound) == (32, 32)
    assert len(seen["names"]) == bound + 1
