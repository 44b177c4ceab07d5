"""The step pool: at most ``max_workers`` calls in flight, and a step that waits for another
step's shared ``DeleteObjects`` lends its call slot (``step_pool.py``).

Deterministic by events, no sleeps: where a test shows that a slot was lent, the alternative
(a slot kept while waiting) would leave the test blocked until ``WAIT_S`` and fail it.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest
from runtime_support import FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import process_batch
from session_expiry_runtime.core.step_pool import CallSlots, StepPool
from session_expiry_runtime.steps.delete_objects import BatchingDeleter

WAIT_S = 30  # a bound for a broken test, never reached by a passing one


class HeldS3:
    """A stand-in for the S3 client: ``delete_objects`` answers once ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls: list[list[str]] = []

    def delete_objects(self, *, Bucket: str, Delete: dict[str, Any]) -> dict[str, Any]:
        self.calls.append([o["Key"] for o in Delete["Objects"]])
        assert self.release.wait(WAIT_S), "the held DeleteObjects was never released"
        return {}


def _thread(target: Any, *args: Any) -> threading.Thread:
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


def test_a_step_waiting_for_a_shared_call_lends_its_slot_to_another_step() -> None:
    """Two slots. Step 1 sends a DeleteObjects (its slot in use); step 2's keys wait for the
    next call (slot lent); step 3 must get a slot and run *while* step 1's call is still
    unanswered: the answer is held until step 3 has run."""
    slots = CallSlots(2)
    s3 = HeldS3()
    deleter = BatchingDeleter(s3, "bucket")
    third_ran = threading.Event()
    results: dict[str, Any] = {}

    def step(name: str, keys: list[str]) -> None:
        with slots.held():
            results[name] = deleter.delete(keys, slots.lent)

    def third() -> None:
        with slots.held():
            third_ran.set()
            s3.release.set()  # step 1's call is answered only now

    first = _thread(step, "s-1", ["sessions/s-1/a"])
    with deleter._cond:  # step 1's key has left the queue: its call is being sent
        assert deleter._cond.wait_for(lambda: deleter._remainder_in_flight, timeout=WAIT_S)
    second = _thread(step, "s-2", ["sessions/s-2/a"])
    with deleter._cond:
        assert deleter._cond.wait_for(lambda: deleter.pending_keys == 1, timeout=WAIT_S)
    last = _thread(third)
    for t in (first, second, last):
        t.join(WAIT_S)
    assert third_ran.is_set()
    assert results == {"s-1": [], "s-2": []}
    assert s3.calls == [["sessions/s-1/a"], ["sessions/s-2/a"]]
    assert slots.peak_holders <= 2


def test_the_lender_takes_a_slot_back_before_it_goes_on() -> None:
    """One slot: the lender resumes only after the borrower has given the slot back."""
    slots = CallSlots(1)
    order: list[str] = []
    lent, borrowed = threading.Event(), threading.Event()

    def lender() -> None:
        with slots.held():
            with slots.lent():
                lent.set()
                assert borrowed.wait(WAIT_S)  # the borrower holds the one slot now
            order.append("lender back")

    def borrower() -> None:
        assert lent.wait(WAIT_S)
        with slots.held():
            order.append("borrower in")
            borrowed.set()
            order.append("borrower out")

    with slots.held():  # neither starts until this holder is done
        threads = [_thread(lender), _thread(borrower)]
    for t in threads:
        t.join(WAIT_S)
    assert order == ["borrower in", "borrower out", "lender back"]
    assert slots.peak_holders == 1


def test_a_thread_without_a_slot_lends_nothing() -> None:
    slots = CallSlots(1)
    with slots.lent():  # not holding: no release (a bounded semaphore would raise)
        pass
    with slots.held():
        assert not slots._free.acquire(blocking=False)  # still one slot, and it is taken


@pytest.mark.parametrize("bad", [0, -3])
def test_fails_call_slots_below_one(bad: int) -> None:
    with pytest.raises(ValueError, match=rf"limit={bad}: expected at least 1 call slot"):
        CallSlots(bad)


@pytest.fixture
def in_flight() -> dict[str, int]:
    return {"now": 0, "peak": 0}


def _count_calls(clients: Any, seen: dict[str, int]) -> None:
    lock = threading.Lock()

    def start(**_: Any) -> None:
        with lock:
            seen["now"] += 1
            seen["peak"] = max(seen["peak"], seen["now"])

    def end(**_: Any) -> None:
        with lock:
            seen["now"] -= 1

    for client in (clients.apigateway, clients.kms, clients.s3):
        client.meta.events.register("before-call", start)
        client.meta.events.register("after-call", end)
        client.meta.events.register("after-call-error", end)


@pytest.mark.parametrize("max_workers", [1, 2])
def test_sessions_sharing_deletes_clean_within_max_workers_calls_in_flight(
    aws: None, in_flight: dict[str, int], max_workers: int
) -> None:
    """Real moto: ten sessions of 30 objects with one or two call slots; every session is
    clean, the DeleteObjects were shared, and no more calls were in flight than slots."""
    sandbox = Sandbox(max_workers=max_workers)
    names = tuple(f"o-{i:02d}" for i in range(30))
    sessions = [sandbox.create_session(f"s-{i}", object_names=names) for i in range(10)]
    sandbox.read_stream()
    for s in sessions:
        sandbox.delete(s.session_id)
    cleaner = sandbox.cleaner()
    _count_calls(cleaner.clients, in_flight)

    assert process_batch(event(*sandbox.removes()), FakeContext(), cleaner) == {
        "batchItemFailures": []
    }
    assert sandbox.keys_under("sessions/") == []
    assert 1 <= in_flight["peak"] <= max_workers
    assert in_flight["now"] == 0


def test_step_pool_runs_each_step_holding_a_slot() -> None:
    pool = StepPool(2)
    try:
        holding = [pool.submit(lambda: pool.slots._local.holding) for _ in range(4)]
        assert [f.result(WAIT_S) for f in holding] == [True] * 4
        assert pool.slots.peak_holders <= 2
    finally:
        pool.shutdown(wait=True, cancel_futures=False)


def test_every_call_is_made_holding_a_slot_also_on_record_threads(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records with one step to run (only a scratch prefix) run it on their own thread, and
    the archive gate runs there too: those calls hold a slot like the pool's, so record threads
    and pool threads together never exceed ``max_workers`` (an adversarial review measured 23
    calls in flight with 16 before they did)."""
    from session_expiry_runtime.cleanup import batch

    pools: list[StepPool] = []

    class Recorded(StepPool):
        def __init__(self, max_calls: int) -> None:
            super().__init__(max_calls)
            pools.append(self)

    monkeypatch.setattr(batch, "StepPool", Recorded)
    sandbox = Sandbox(max_workers=2)
    sandbox.s3.create_bucket(Bucket="archive-bucket")
    full = [sandbox.create_session(f"full-{i}") for i in range(2)]
    solo = [sandbox.create_session(f"solo-{i}", write_item=False) for i in range(4)]
    for s in solo:  # an item naming only its scratch prefix: one runnable session step
        item = {k: v for k, v in s.item.items() if k in ("pk", "expiresAt", "scratchPrefix")}
        sandbox.ddb.put_item(TableName="sessions", Item=item)
    sandbox.read_stream()
    for s in full + solo:
        sandbox.delete(s.session_id)
    config = dataclasses.replace(sandbox.config, archive_bucket="archive-bucket")
    cleaner = sandbox.cleaner(config)
    without_slot: list[str] = []

    def check(model: Any, **_: Any) -> None:
        if not getattr(pools[-1].slots._local, "holding", False):
            without_slot.append(f"{model.name} on {threading.current_thread().name}")

    for client in (cleaner.clients.apigateway, cleaner.clients.kms, cleaner.clients.s3):
        client.meta.events.register("before-call", check)
    cleaner.clients.archive.meta.events.register("before-call", check)

    assert process_batch(event(*sandbox.removes()), FakeContext(), cleaner) == {
        "batchItemFailures": []
    }
    assert sandbox.keys_under("sessions/") == []
    assert without_slot == []
    assert pools[-1].slots.peak_holders <= 2


def test_an_answer_wakes_the_steps_it_answered_and_one_sender_not_every_waiting_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """30 steps' keys arrive one after another behind one held call. Waking every waiting step
    on every change (as a shared condition's ``notify_all`` did) made the steps check ~15 times
    each (every later arrival woke every earlier one); each step now checks a few times at most,
    and every key is still deleted exactly once."""
    import types

    from session_expiry_runtime.steps import delete_objects

    checks: list[int] = []

    class CountingCondition(threading.Condition):
        def wait_for(self, predicate: Any, timeout: float | None = None) -> Any:
            def counted() -> Any:
                checks.append(1)
                return predicate()

            return super().wait_for(counted, timeout)

    monkeypatch.setattr(
        delete_objects,
        "threading",
        types.SimpleNamespace(Condition=CountingCondition, RLock=threading.RLock),
    )
    s3 = HeldS3()
    deleter = BatchingDeleter(s3, "bucket")
    first = _thread(deleter.delete, ["sessions/s-0/a"])
    with deleter._cond:
        assert deleter._cond.wait_for(lambda: deleter._remainder_in_flight, timeout=WAIT_S)
    checks.clear()
    steps = [
        _thread(deleter.delete, [f"sessions/s-{i}/{k}" for k in range(7)]) for i in range(1, 31)
    ]
    with deleter._cond:
        assert deleter._cond.wait_for(lambda: deleter.pending_keys == 210, timeout=WAIT_S)
    s3.release.set()
    for t in (first, *steps):
        t.join(WAIT_S)
        assert not t.is_alive()
    sent = [key for call in s3.calls for key in call]
    assert sorted(sent) == sorted(
        ["sessions/s-0/a"] + [f"sessions/s-{i}/{k}" for i in range(1, 31) for k in range(7)]
    )
    assert len(s3.calls) == 2  # the held call, then the 210 keys that waited, together
    assert len(checks) <= 3 * 31, len(checks)


class KeyHeldS3:
    """``delete_objects`` holds a call carrying any key in ``held`` until that key's event is
    set; every other call is answered at once."""

    def __init__(self, held: dict[str, threading.Event]) -> None:
        self.held = held
        self.calls: list[list[str]] = []
        self.started: dict[str, threading.Event] = {k: threading.Event() for k in held}
        self._lock = threading.Lock()

    def delete_objects(self, *, Bucket: str, Delete: dict[str, Any]) -> dict[str, Any]:
        keys = [o["Key"] for o in Delete["Objects"]]
        with self._lock:
            self.calls.append(keys)
        for key in keys:
            if key in self.held:
                self.started[key].set()
                assert self.held[key].wait(WAIT_S), f"the call carrying {key} was never released"
        return {}


def test_a_step_whose_keys_wait_is_not_held_by_another_steps_unrelated_call() -> None:
    """max_keys=3. Step C's remainder is in flight (held); step A sends a full call of its
    first 3 keys (held too) and its 4th key waits, the oldest in the queue; step B's key waits
    behind it. When C's call is answered a call can go out: the step to wake is one that
    waits, not A (busy sending, it would not look until its own call is answered). B's delete
    returns while A's unrelated call is still unanswered."""
    release_c, release_a = threading.Event(), threading.Event()
    s3 = KeyHeldS3({"c": release_c, "a1": release_a})
    deleter = BatchingDeleter(s3, "bucket", max_keys=3)
    results: dict[str, Any] = {}

    def step(name: str, keys: list[str]) -> None:
        results[name] = deleter.delete(keys)

    c = _thread(step, "c", ["c"])
    assert s3.started["c"].wait(WAIT_S)
    a = _thread(step, "a", ["a1", "a2", "a3", "a4"])
    assert s3.started["a1"].wait(WAIT_S)
    b = _thread(step, "b", ["b1"])
    with deleter._cond:
        assert deleter._cond.wait_for(lambda: deleter.pending_keys == 2, timeout=WAIT_S)
    release_c.set()
    c.join(WAIT_S)
    b.join(5)
    try:
        assert not b.is_alive(), "step B waited for step A's call, which carried none of its keys"
        assert results["b"] == []
        assert s3.calls[-1] == ["a4", "b1"]
    finally:
        release_a.set()
        a.join(WAIT_S)
    assert results == {"a": [], "b": [], "c": []}
