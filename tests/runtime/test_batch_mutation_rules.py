"""The batch's rules that mutants of `cleanup.batch` broke without failing a test (issue 40's
mutation testing, third pass): how many record threads, an interrupt never waits for them, a
Kinesis batch reads its items back once, and the kept releases are waited for only until the
hard stop. Each was seen to fail on its mutant applied to the source."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest
from runtime_support import FakeContext, Sandbox, event
from session_expiry_runtime.cleanup import batch
from session_expiry_runtime.cleanup.batch import process_batch

KINESIS_STREAM = "arn:aws:kinesis:us-east-1:123456789012:stream/changes"


def _removed(sandbox: Sandbox, *ids: str) -> list[dict[str, Any]]:
    for sid in ids:
        sandbox.create_session(sid)
    sandbox.read_stream()
    for sid in ids:
        sandbox.delete(sid)
    return sandbox.removes()


@pytest.mark.parametrize(("max_workers", "records", "threads"), [(1, 2, 1), (3, 2, 2), (3, 1, 1)])
def test_rule_record_threads_are_at_most_one_a_record_and_at_most_max_workers(
    aws: None, monkeypatch: pytest.MonkeyPatch, max_workers: int, records: int, threads: int
) -> None:
    # Each record waits on a thread of its own for its steps (on the step pool); the record
    # threads are bounded as the step pool is, so a batch never holds more threads than it
    # was configured for (Lambda allows 1,024 threads a function).
    sandbox = Sandbox(max_workers=max_workers)
    removes = _removed(sandbox, *(f"s-{i}" for i in range(records)))
    made: list[tuple[str, int | None]] = []

    class Recording(ThreadPoolExecutor):
        def __init__(self, max_workers: int | None = None, thread_name_prefix: str = "") -> None:
            made.append((thread_name_prefix, max_workers))
            super().__init__(max_workers, thread_name_prefix)

    monkeypatch.setattr(batch, "ThreadPoolExecutor", Recording)

    assert process_batch(event(*removes), FakeContext(), sandbox.cleaner()) == {
        "batchItemFailures": []
    }
    assert [n for p, n in made if p == "cleanup"] == [threads]


def test_rule_an_interrupt_while_the_records_run_does_not_wait_for_their_threads(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A signal's KeyboardInterrupt on the invocation's thread propagates at once: the record
    # threads still running are left (their results dropped), never waited for.
    removes = _removed(sandbox, "s-1")
    cleaner = sandbox.cleaner()
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def blocked(raw: Any, **_: Any) -> None:
        started.set()
        release.wait(timeout=5)  # reached only when the interrupt waited for this thread
        finished.set()

    monkeypatch.setattr(cleaner, "clean", blocked)
    wait_for_records = batch._wait_until_done_or_hard_stop

    def interrupted(futures: Any, deadline: Any, invocation: Any = None) -> Any:
        if invocation is None:  # the read-ahead's wait
            return wait_for_records(futures, deadline)
        assert started.wait(timeout=5)
        raise KeyboardInterrupt("a signal while the records run")

    monkeypatch.setattr(batch, "_wait_until_done_or_hard_stop", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt, match="a signal while the records run"):
            process_batch(event(*removes), FakeContext(), cleaner)
        assert not finished.is_set()  # the record's thread was still running
    finally:
        release.set()


def test_rule_a_kinesis_batch_reads_its_items_back_once_before_the_records_start(
    sandbox: Sandbox,
) -> None:
    # The read-ahead reads every Kinesis REMOVE's item back in one BatchGetItem and the
    # records find the answers in the invocation's scope; a record that read again would
    # double the session table's reads.
    removes = _removed(sandbox, "s-1", "s-2", "s-3")
    for record in removes:
        record["eventSourceARN"] = KINESIS_STREAM
        record["kinesisArrivalTime"] = int(time.time())
    cleaner = sandbox.cleaner()
    reads: list[int] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        for request in params.get("RequestItems", {}).values():
            reads.append(len(request["Keys"]))

    cleaner.clients.table.meta.events.register("provide-client-params.dynamodb.BatchGetItem", count)

    assert process_batch(event(*removes), FakeContext(), cleaner) == {"batchItemFailures": []}
    assert reads == [3]


class _Releases:
    def __init__(self) -> None:
        self.finished: list[tuple[object, float | None]] = []
        self.applied: list[list[object]] = []

    def finish(self, claims: object, seconds_left: float | None) -> None:
        self.finished.append((claims, seconds_left))

    def apply(self, results: list[object]) -> None:
        self.applied.append(results)


class _Deadline:
    def seconds_to_hard_stop(self) -> float:
        return 0.25


def test_rule_the_kept_releases_are_waited_for_only_until_the_hard_stop() -> None:
    # A slow ownership table at release time must not hold the invocation past the hard stop:
    # what is unanswered then fails its record (TimeGuard, DeferredReleases.finish).
    releases = _Releases()
    invocation = SimpleNamespace(claims="claims", releases=releases, deadline=_Deadline())

    assert batch._collect([], [], set(), None, None, invocation) == []  # type: ignore[arg-type]

    assert releases.finished == [("claims", 0.25)]
    assert releases.applied == [[]]


class _HardStopAtFirstReading:
    """The read-ahead's reading puts the hard stop at once (the reserve left); every later
    reading, a record thread's, has plenty: a record that started would run to its end."""

    def __init__(self) -> None:
        self.readings = 0

    def get_remaining_time_in_millis(self) -> int:
        self.readings += 1
        return batch.RETURN_RESERVE_MS if self.readings == 1 else 300_000


def test_rule_a_read_ahead_still_running_at_the_hard_stop_starts_no_record(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    removes = _removed(sandbox, "s-1", "s-2")
    cleaner = sandbox.cleaner()
    release = threading.Event()
    started: list[object] = []

    def slow_read_ahead(records: Any, cleaner: Any, invocation: Any) -> None:
        invocation.deadline.out_of_time()  # its one reading
        release.wait(timeout=5)

    monkeypatch.setattr(batch, "_read_ahead", slow_read_ahead)
    monkeypatch.setattr(cleaner, "clean", lambda raw, **_: started.append(raw))
    try:
        response = process_batch(event(*removes), _HardStopAtFirstReading(), cleaner)
    finally:
        release.set()

    assert sorted(f["itemIdentifier"] for f in response["batchItemFailures"]) == sorted(
        r["dynamodb"]["SequenceNumber"] for r in removes
    )
    assert started == []
