"""DeleteObjects across the sessions of one invocation (``steps/delete_objects.py``).

Real boto3 against moto for everything but one thing moto cannot do: answer a DeleteObjects
with per-key ``Errors`` (moto deletes every key it is given and reports none). Where a test
needs that answer it is **stubbed** by botocore event hooks on the cleanup's own S3 client: the
chosen keys are taken out of the request before it is sent (so moto keeps them, as S3 keeps a
key it failed to delete) and their ``Errors`` entries are added to the parsed answer
(``AccessDenied``, as S3 reports a key it may not delete).

To make a call carry several sessions' keys deterministically, a hook holds the first
DeleteObjects until the other sessions' keys are waiting (no sleeps: it waits on the deleter's
own condition, which every submission notifies).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from runtime_support import BUCKET, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import process_batch
from session_expiry_runtime.steps import scratch
from session_expiry_runtime.steps.delete_objects import BatchingDeleter
from session_expiry_runtime.steps.scratch import ScratchDeleter

WAIT_S = 30  # a bound for a broken test, never reached by a passing one


def _deleters(monkeypatch: pytest.MonkeyPatch) -> list[ScratchDeleter]:
    """Every scratch deleter the invocations make from now on, in order (one per invocation)."""
    made: list[ScratchDeleter] = []

    class Recorded(ScratchDeleter):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            made.append(self)

    monkeypatch.setattr(scratch, "ScratchDeleter", Recorded)
    return made


def _wait_pending(deleter: BatchingDeleter, keys: int) -> None:
    with deleter._cond:  # notified on every submission
        assert deleter._cond.wait_for(lambda: len(deleter._pending) >= keys, timeout=WAIT_S)


def _record_calls(s3: Any) -> list[list[str]]:
    """The keys of every DeleteObjects request, in the order they were built."""
    sent: list[list[str]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        sent.append([o["Key"] for o in params["Delete"]["Objects"]])

    s3.meta.events.register("before-parameter-build.s3.DeleteObjects", record)
    return sent


def _hold_first_call(s3: Any, until: Callable[[], None]) -> threading.Event:
    """Hold the first DeleteObjects (before it is built) until ``until()`` returns."""
    started = threading.Event()

    def hold(**_: Any) -> None:
        if not started.is_set():
            started.set()
            until()

    s3.meta.events.register_first("before-parameter-build.s3.DeleteObjects", hold)
    return started


def test_keys_that_arrive_while_a_call_is_answered_share_the_next_call(sandbox: Sandbox) -> None:
    s3 = sandbox.cleaner().clients.s3
    deleter = BatchingDeleter(s3, BUCKET)
    keys = {f"s-{i}": [f"sessions/s-{i}/k-{j}" for j in range(3)] for i in range(5)}
    sandbox.put_objects([k for ks in keys.values() for k in ks])
    sent = _record_calls(s3)
    started = _hold_first_call(s3, until=lambda: _wait_pending(deleter, 12))
    results: dict[str, list[dict[str, Any]]] = {}

    def clean(sid: str) -> None:
        results[sid] = deleter.delete(keys[sid])

    first = threading.Thread(target=clean, args=("s-0",))
    first.start()
    assert started.wait(WAIT_S)  # s-0's call is in flight (held): the others queue behind it
    others = [threading.Thread(target=clean, args=(sid,)) for sid in ("s-1", "s-2", "s-3", "s-4")]
    for t in others:
        t.start()
    for t in [first, *others]:
        t.join(WAIT_S)

    assert sent[0] == keys["s-0"]
    assert sorted(sent[1]) == sorted(k for sid in ("s-1", "s-2", "s-3", "s-4") for k in keys[sid])
    assert len(sent) == 2
    assert results == {sid: [] for sid in keys}
    assert sandbox.keys_under("sessions/") == []


def test_at_most_1000_keys_a_call_and_a_key_given_twice_is_sent_once(sandbox: Sandbox) -> None:
    s3 = sandbox.cleaner().clients.s3
    deleter = BatchingDeleter(s3, BUCKET)
    keys = [f"sessions/s-1/k-{j:04d}" for j in range(2_500)]
    sandbox.put_objects(keys)
    sent = _record_calls(s3)

    assert deleter.delete(keys) == []
    assert deleter.delete(keys[:10] + keys[:10]) == []  # already gone: deleted, as S3 says

    assert [len(call) for call in sent] == [1000, 1000, 500, 10]
    assert sandbox.keys_under("sessions/s-1/") == []


@pytest.mark.parametrize("bad", [0, 1001])
def test_fails_max_keys_outside_1_to_1000(sandbox: Sandbox, bad: int) -> None:
    s3 = sandbox.cleaner().clients.s3
    with pytest.raises(ValueError, match=rf"max_keys={bad}: expected 1\.\.1000"):
        BatchingDeleter(s3, BUCKET, max_keys=bad)


def test_a_call_that_raises_fails_its_owner_and_leaves_the_deleter_usable(
    sandbox: Sandbox,
) -> None:
    s3 = sandbox.cleaner().clients.s3
    deleter = BatchingDeleter(s3, "no-such-bucket")
    with pytest.raises(s3.exceptions.NoSuchBucket):
        deleter.delete(["sessions/s-1/a"])
    assert deleter.pending_keys == 0
    with pytest.raises(s3.exceptions.NoSuchBucket):  # not stuck waiting on the failed call
        deleter.delete(["sessions/s-1/b"])


def test_errors_fail_exactly_the_two_sessions_of_five_that_own_the_failed_keys(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """STUBBED answer (moto never reports per-key Errors): the DeleteObjects that carries the
    keys of four sessions fails one key each of two of them."""
    sandbox = Sandbox(max_workers=16)
    names = ("a", "b", "c")
    sessions = [sandbox.create_session(f"s-{i}", object_names=names) for i in range(1, 6)]
    kept = sandbox.create_session("s-10", object_names=names)
    sandbox.read_stream()
    for s in sessions:
        sandbox.delete(s.session_id)
    records = sandbox.removes()
    cleaner = sandbox.cleaner()
    s3 = cleaner.clients.s3
    calls: Counter[str] = Counter()
    s3.meta.events.register("before-call", lambda model, **_: calls.update([model.name]))
    sent = _record_calls(s3)
    failed_keys: list[str] = []

    def fail_one_key_of_two_sessions(params: dict[str, Any], context: Any, **_: Any) -> None:
        objects = params["Delete"]["Objects"]
        owners = list(dict.fromkeys(o["Key"].split("/")[1] for o in objects))
        if failed_keys or len(owners) < 4:
            return
        chosen = [next(o["Key"] for o in objects if f"/{sid}/" in o["Key"]) for sid in owners[:2]]
        failed_keys.extend(chosen)
        context["stub_failed_keys"] = chosen
        params["Delete"]["Objects"] = [o for o in objects if o["Key"] not in chosen]

    def add_errors(parsed: dict[str, Any], context: Any, **_: Any) -> None:
        for key in context.get("stub_failed_keys", ()):
            error = {"Key": key, "Code": "AccessDenied", "Message": "Access Denied"}
            parsed.setdefault("Errors", []).append(error)

    s3.meta.events.register("before-parameter-build.s3.DeleteObjects", fail_one_key_of_two_sessions)
    s3.meta.events.register("after-call.s3.DeleteObjects", add_errors)
    deleters = _deleters(monkeypatch)
    _hold_first_call(s3, until=lambda: _wait_pending(deleters[-1].batcher, 12))

    response = process_batch(event(*records), FakeContext(), cleaner)

    owners = {key.split("/")[1] for key in failed_keys}
    assert len(owners) == 2, sent
    sequence = {r["dynamodb"]["Keys"]["pk"]["S"]: r["dynamodb"]["SequenceNumber"] for r in records}
    assert sorted(f["itemIdentifier"] for f in response["batchItemFailures"]) == sorted(
        sequence[sid] for sid in owners
    )
    assert calls["DeleteObjects"] == 2  # five sessions' keys: one held call, then one shared
    for s in sessions:
        if s.session_id in owners:
            assert sandbox.keys_under(s.prefix) == [
                k for k in failed_keys if k.startswith(s.prefix)
            ]
        else:
            assert sandbox.is_clean(s)
    assert sandbox.is_intact(kept)

    # The event source mapping redelivers the two failed records: the retry cleans them.
    s3.meta.events.unregister(
        "before-parameter-build.s3.DeleteObjects", fail_one_key_of_two_sessions
    )
    again = [r for r in records if r["dynamodb"]["Keys"]["pk"]["S"] in owners]
    assert process_batch(event(*again), FakeContext(), cleaner) == {"batchItemFailures": []}
    assert all(sandbox.is_clean(s) for s in sessions)
    assert sandbox.is_intact(kept)


class _FlakyS3:
    """A stand-in S3 client for the stress test: each call sleeps a random moment (0-2 ms), then
    raises (1 in 8) or answers, naming a random few of its keys in ``Errors``."""

    def __init__(self, seed: int) -> None:
        import random

        self._random = random.Random(seed)
        self._lock = threading.Lock()
        #: every call: its keys, and whether it raised, and the keys its answer failed
        self.calls: list[tuple[list[str], bool, set[str]]] = []

    def delete_objects(self, *, Bucket: str, Delete: dict[str, Any]) -> dict[str, Any]:
        import time

        keys = [o["Key"] for o in Delete["Objects"]]
        with self._lock:
            delay = self._random.random() * 0.002
            raises = self._random.random() < 0.125
            failed = {k for k in keys if self._random.random() < 0.05}
            self.calls.append((keys, raises, failed))
        time.sleep(delay)
        if raises:
            raise RuntimeError("DeleteObjects failed")
        return {"Errors": [{"Key": k, "Code": "AccessDenied", "Message": "no"} for k in failed]}


@pytest.mark.parametrize("max_keys", [1, 2, 3, 7, 1000])
@pytest.mark.parametrize("seed", range(4))
def test_stress_every_delete_returns_and_every_key_is_sent_once(max_keys: int, seed: int) -> None:
    """24 steps on 24 threads, each deleting a random 1-12 distinct keys (a few steps also
    repeat another step's keys), every wait lending a slot of 4 (``CallSlots``), against an S3
    that answers after a random moment, raises 1 call in 8 and fails a few keys: every delete
    returns, every submitted key is sent (a key submitted once, exactly once; no call over
    ``max_keys`` distinct keys), and each step gets exactly its own failures."""
    import random

    from session_expiry_runtime.core.step_pool import CallSlots

    rnd = random.Random(seed)
    s3 = _FlakyS3(seed)
    deleter = BatchingDeleter(s3, "bucket", max_keys=max_keys)
    slots = CallSlots(4)
    steps: list[list[str]] = []
    for i in range(24):
        steps.append([f"s-{i}/{k}" for k in range(rnd.randint(1, 12))])
    for i in rnd.sample(range(24), 4):  # duplicates across steps (a record twice in a batch)
        steps[i] = steps[i] + rnd.sample(steps[rnd.randrange(24)], 1)
    outcome: dict[int, Any] = {}
    start = threading.Barrier(len(steps))

    def step(i: int) -> None:
        start.wait()
        with slots.held():
            try:
                outcome[i] = deleter.delete(steps[i], slots.lent)
            except RuntimeError as exc:
                outcome[i] = exc

    threads = [threading.Thread(target=step, args=(i,), daemon=True) for i in range(len(steps))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert [i for i, t in enumerate(threads) if t.is_alive()] == [], "a delete never returned"
    assert deleter.pending_keys == 0
    assert all(len(set(keys)) <= max_keys for keys, _, _ in s3.calls)
    sent = Counter(k for keys, _, _ in s3.calls for k in keys)
    submitted = Counter(k for keys in steps for k in set(keys))
    assert set(sent) == set(submitted)
    assert all(sent[k] <= submitted[k] for k in sent), "a key was sent more often than given"
    for i, keys in enumerate(steps):
        calls = [c for c in s3.calls if set(c[0]) & set(keys)]
        if any(k for k in keys if submitted[k] > 1):
            continue  # which of the key's calls carried this step's copy is not known
        if any(raised for _, raised, _ in calls):
            assert isinstance(outcome[i], RuntimeError), (i, outcome[i])
        else:
            failed = sorted(k for _, _, f in calls for k in f if k in keys)
            assert sorted(e["Key"] for e in outcome[i]) == failed, (i, outcome[i])
