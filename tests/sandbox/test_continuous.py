"""Continuous mode of the local pipeline (issue 15): the event source mapping poller on its own
thread, and a schedule fired in real time, one run at a time.

Real items in the emulator's table, read back from its stream; no sleeps: each test waits for
an event (a delivery, a poll, a run) with a short timeout.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from typing import Any

import pytest

from cdk_session_expiry.testing import (
    EventSourceMappingConfig,
    EventSourceMappingPoller,
    LocalEmulator,
    PollReport,
    Schedule,
    ScheduleRunner,
    ShardBlocked,
)
from cdk_session_expiry.testing.models import _moto_internals

from .test_poller import REMOVE_FILTER, Recorder, Table

FAST = 0.02  # seconds between polls in these tests (Lambda: about 0.25)
WAIT = 10.0  # the longest any test waits for an event


@pytest.fixture
def table(emulator: LocalEmulator) -> Table:
    return Table(emulator)


def continuous(table: Table, handler: Any, **config: Any) -> EventSourceMappingPoller:
    stall = config.pop("stall_after_attempts", 50)
    return EventSourceMappingPoller(
        EventSourceMappingConfig(event_source_arn=table.stream_arn, **config),
        handler,
        clients=table.emulator.client,
        stall_after_attempts=stall,
    )


def delivered(report: PollReport) -> Counter[str]:
    """How often each sequence number reached the handler."""
    return Counter(seq for i in report.invocations for seq in i.sequence_numbers)


def test_records_are_delivered_without_a_call(table: Table) -> None:
    handler = Recorder()
    poller = continuous(table, handler, filter_patterns=(REMOVE_FILTER,)).start(poll_interval=FAST)
    try:
        assert poller.running
        table.put_and_delete("a", "b", "c")
        assert poller.wait_until(lambda r: sum(delivered(r).values()) == 3, timeout=WAIT)
        table.put_and_delete("d")
        assert poller.wait_until(lambda r: sum(delivered(r).values()) == 4, timeout=WAIT)
    finally:
        report = poller.stop()
    assert sorted(k for call in handler.calls for k in call) == ["a", "b", "c", "d"]
    assert report.records_filtered_out == 4  # the INSERTs
    assert poller.polls >= 2


def test_stops_cleanly_and_keeps_its_position(table: Table) -> None:
    handler = Recorder()
    poller = continuous(table, handler).start(poll_interval=FAST)
    table.put("a")
    assert poller.wait_until(lambda r: r.records_read == 1, timeout=WAIT)

    poller.stop()

    assert not poller.running
    table.put("b")  # written after the stop: not delivered by anyone
    polls = poller.polls
    assert poller.wait_until(lambda r: r.records_read > 1, timeout=0.2) is False
    assert (poller.polls, poller.report.records_read) == (polls, 1)
    # Started again, it resumes after "a".
    poller.start(poll_interval=FAST)
    try:
        assert poller.wait_until(lambda r: r.records_read == 2, timeout=WAIT)
    finally:
        poller.stop()
    assert [k for call in handler.calls for k in call] == ["a", "b"]


def test_no_record_is_delivered_twice_while_written_and_polled_concurrently(
    table: Table,
) -> None:
    handler = Recorder()
    poller = continuous(table, handler, batch_size=7).start(poll_interval=FAST)
    keys = [f"k-{i}" for i in range(60)]
    try:
        writer = threading.Thread(target=lambda: [table.put(k) for k in keys])
        writer.start()
        # A manual poll meanwhile (run_cleanup in a test) is serialised with the thread's.
        poller.poll()
        writer.join(WAIT)
        assert poller.wait_until(lambda r: r.records_read == len(keys), timeout=WAIT)
    finally:
        report = poller.stop()
    counts = delivered(report)
    assert len(counts) == len(keys)
    assert set(counts.values()) == {1}
    assert sorted(k for call in handler.calls for k in call) == sorted(keys)
    assert all(len(call) <= 7 for call in handler.calls)


def test_a_failing_batch_is_redelivered_only_as_documented(table: Table) -> None:
    """A function error retries the batch (here once); nothing else is delivered twice."""
    failures = {"b": 1}

    def respond(keys: list[str], seqs: list[str]) -> Any:
        for key in keys:
            if failures.get(key):
                failures[key] -= 1
                raise RuntimeError(f"injected failure for {key}")
        return {"batchItemFailures": []}

    handler = Recorder(respond)
    poller = continuous(table, handler, batch_size=1, maximum_retry_attempts=2)
    poller.start(poll_interval=FAST)
    try:
        table.put("a")
        table.put("b")
        table.put("c")
        assert poller.wait_until(lambda r: r.records_read == 3, timeout=WAIT)
    finally:
        report = poller.stop()
    counts = delivered(report)
    retried = [i for i in report.invocations if i.retry]
    assert sorted(counts.values()) == [1, 1, 2]
    assert [i.outcome for i in report.invocations if i.retry == 0 and i.outcome != "success"] == [
        "function_error"
    ]
    assert len(retried) == 1 and retried[0].outcome == "success"
    assert report.retries == 1


def test_a_blocked_shard_stops_the_thread_and_stop_raises(table: Table) -> None:
    def always_fail(keys: list[str], seqs: list[str]) -> Any:
        raise RuntimeError("poison")

    poller = continuous(table, Recorder(always_fail), stall_after_attempts=3)
    poller.start(poll_interval=FAST)
    table.put("poison")
    assert poller.wait_until(lambda r: False, timeout=WAIT) is False  # returns once it stopped
    assert not poller.running
    with pytest.raises(ShardBlocked):
        poller.stop()


def test_fails_start_twice_or_with_a_bad_interval(table: Table) -> None:
    poller = continuous(table, Recorder())
    with pytest.raises(ValueError, match="poll_interval=0: expected seconds > 0"):
        poller.start(poll_interval=0)
    poller.start(poll_interval=FAST)
    try:
        with pytest.raises(RuntimeError, match="already running"):
            poller.start()
    finally:
        poller.stop()


# --- schedules fired in real time ---------------------------------------------------------------
SCHEDULE = Schedule(
    rule_arn="arn:aws:events:us-east-1:123456789012:rule/sweeper", expression="rate(1 minute)"
)


def test_schedule_runs_at_once_then_every_period_never_overlapping() -> None:
    release = threading.Event()
    second_started = threading.Event()
    running = 0
    most = 0
    lock = threading.Lock()
    events: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            events.append(event)
            n = len(events)
        if n == 1:
            release.wait(WAIT)  # the first run outlasts several periods
        if n == 2:
            second_started.set()
        with lock:
            running -= 1
        return {"run": n}

    runner = ScheduleRunner(SCHEDULE, handler, period_seconds=FAST).start()
    try:
        assert not second_started.wait(0.2)  # the first run is still going: no second one
        release.set()
        assert second_started.wait(WAIT)
    finally:
        runs = runner.stop()
    assert most == 1
    assert [r.response for r in runs[:2]] == [{"run": 1}, {"run": 2}]
    assert events[0]["detail-type"] == "Scheduled Event"
    assert events[0]["resources"] == [SCHEDULE.rule_arn]


def test_schedule_records_a_failed_run_and_goes_on() -> None:
    calls: list[int] = []
    two = threading.Event()

    def handler(event: dict[str, Any], context: Any) -> None:
        calls.append(1)
        if len(calls) >= 2:
            two.set()
        if len(calls) == 1:
            raise RuntimeError("SweepIncompleteError-like")

    runner = ScheduleRunner(SCHEDULE, handler, period_seconds=FAST).start()
    try:
        assert two.wait(WAIT)
    finally:
        runs = runner.stop()
    assert runs[0].error == "RuntimeError: SweepIncompleteError-like"
    assert runs[1].error is None


def test_schedule_stops_by_itself_after_max_runs() -> None:
    calls: list[int] = []
    runner = ScheduleRunner(
        SCHEDULE, lambda e, c: calls.append(1), period_seconds=FAST, max_runs=3
    ).start()
    runs = runner.join(WAIT)
    assert len(runs) == len(calls) == 3


def test_schedule_period_defaults_to_the_rate() -> None:
    assert ScheduleRunner(SCHEDULE, lambda e, c: None).period == 60.0


# --- unique sequence numbers under concurrent writes (moto patched) ---------------------------
def test_concurrent_writes_get_unique_sequence_numbers(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto numbers a record from len(items) before building and appending it, without a lock.
    Two deletes are made to build their records at the same moment (a barrier inside moto's
    StreamRecord): unserialised, both got the same sequence number; the emulator serialises
    StreamShard.add, so the barrier times out instead and the numbers stay unique."""
    from moto.dynamodb.models import table as moto_table

    barrier = threading.Barrier(2, timeout=0.5)
    original_init = moto_table.StreamRecord.__init__

    def meet_then_build(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > 2 and args[2] == "REMOVE":  # (table, stream_type, event_name, old, new, seq)
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()
        original_init(self, *args, **kwargs)

    table.put("x")
    table.put("y")
    monkeypatch.setattr(moto_table.StreamRecord, "__init__", meet_then_build)
    threads = [threading.Thread(target=table.delete, args=(key,)) for key in ("x", "y")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)

    streams = table.emulator.client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=table.stream_arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(
        StreamArn=table.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    seqs = [r["dynamodb"]["SequenceNumber"] for r in records]
    # A repeated number made GetRecords AFTER_SEQUENCE_NUMBER re-read the second REMOVE until
    # the next write, so a continuous poller delivered it again and again.
    assert len(seqs) == len(set(seqs)) == 4


def test_stream_add_is_patched_only_while_an_emulator_runs(emulator: LocalEmulator) -> None:
    from moto.dynamodb.models.table import StreamShard

    # The module's emulator runs: add is serialised; moto's own method is kept for restoring.
    assert StreamShard.add is not _moto_internals._ORIGINAL_ADD
    assert StreamShard.add.__name__ == "locked_add"


def test_a_repeated_sequence_number_ends_the_read_instead_of_looping() -> None:
    """Stub of the DynamoDB Streams API (moto without the emulator's lock repeated a number):
    AFTER_SEQUENCE_NUMBER 11 answers the second record numbered 11 again, forever; the read
    used to loop on it (until the next write), re-delivering it in every batch."""

    def record(seq: int, key: str) -> dict[str, Any]:
        return {
            "eventID": str(seq),
            "eventName": "REMOVE",
            "dynamodb": {
                "Keys": {"pk": {"S": key}},
                "SequenceNumber": str(seq),
                "ApproximateCreationDateTime": 1_700_000_000,
            },
        }

    stream = [record(10, "a"), record(11, "b"), record(11, "c")]

    class Streams:
        def describe_stream(self, **_: Any) -> dict[str, Any]:
            return {"StreamDescription": {"Shards": [{"ShardId": "s-1"}]}}

        def get_shard_iterator(self, **kw: Any) -> dict[str, Any]:
            after = kw.get("SequenceNumber")
            return {"ShardIterator": "0" if after is None else str(int(after) + 1 - 10)}

        def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:
            start = int(ShardIterator)
            page = stream[start : start + Limit]
            last = max((int(r["dynamodb"]["SequenceNumber"]) for r in page), default=None)
            return {
                "Records": page,
                "NextShardIterator": str((last if last is not None else 9) + 1 - 10),
            }

    handler = Recorder()
    arn = "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/x"
    poller = EventSourceMappingPoller(
        EventSourceMappingConfig(event_source_arn=arn), handler, clients=lambda _: Streams()
    )
    report = poller.poll()
    assert handler.calls == [["a", "b", "c"]]
    assert report.records_read == 3
    assert poller.poll().records_read == 3  # nothing new: nothing re-read


def test_stop_interrupts_the_run_in_progress() -> None:
    """A run that would last until interrupted ends when the runner stops (the expiry
    sweeper's run ends after its pass in progress); without ``interrupt`` it is waited for."""
    interrupted = threading.Event()

    def long_run(event: dict[str, Any], context: Any) -> str:
        return "interrupted" if interrupted.wait(WAIT) else "waited out"

    runner = ScheduleRunner(SCHEDULE, long_run, interrupt=interrupted.set).start()
    assert runner.wait_for_run(WAIT)
    runs = runner.stop()
    assert [r.response for r in runs] == ["interrupted"]
    assert not runner.running
