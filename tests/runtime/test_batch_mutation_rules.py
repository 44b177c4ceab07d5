"""The batch's rules that mutants of `cleanup.batch` broke without failing a test (issue 40's
mutation testing, third and fourth passes): how many record threads, an interrupt never waits
for them, a Kinesis batch reads its items back once and marks its proven records ahead, the kept
releases are waited for only until the hard stop, what the read-ahead does (and does not) before
the records start — the batch's one reservation of the shared `RetireGrant` budget, waited for
at most `RESERVE_WAIT_SECONDS`, and what it left unspent given back only within the time guard —
a record cleaned with no fan-out to run stays cleaned, and at the hard stop the steps still queued
on the step pool are cancelled, not run. Each was seen to fail on its mutant applied to the
source."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest
from ownership_support import OWNERSHIP_TABLE, calls_of
from runtime_support import FakeContext, Sandbox, event
from session_expiry_runtime.cleanup import batch
from session_expiry_runtime.cleanup.batch import process_batch
from session_expiry_runtime.cleanup.cleaner import SessionCleaner
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.core.shared_pace import SharedBudget
from session_expiry_runtime.core.step_pool import StepPool
from session_expiry_runtime.owners.claims import ClaimBatcher
from session_expiry_runtime.owners.outcomes import STEP_DONE
from session_expiry_runtime.steps.base import CleanupStep, Plan, StepContext

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


class _Budget:
    """The shared ``RetireGrant`` budget as the batch's read-ahead sees it
    (`CleanupRunner.reserve_retire_grants`): what it was asked to reserve. With ``until``, a
    reservation that answers only once that event is set (or after 5 s): a slow budget write."""

    def __init__(self, until: threading.Event | None = None) -> None:
        self.until = until
        self.reserved: list[int] = []
        self.saw_until: list[bool] = []

    def reserve(self, requests: int, metrics: object = None) -> int:
        if self.until is not None:
            self.saw_until.append(self.until.wait(timeout=5))
        self.reserved.append(requests)
        return requests


def _budgeted(sandbox: Sandbox, budget: _Budget) -> Any:
    cleaner = sandbox.cleaner()
    cleaner.retire_grant_budget = budget
    return cleaner


def test_rule_a_batch_reserves_its_grants_requests_once_before_its_records_start(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, session_logs: pytest.LogCaptureFixture
) -> None:
    # The read-ahead asks the shared budget for every grant the batch will retire in one write,
    # beside the marks, and waits for the answer before the records start (issue 38): their
    # RetireGrant calls then take from what it reserved, not one budget write each.
    removes = _removed(sandbox, "s-1", "s-2")  # a connection and a grant a session
    budget = _Budget()
    cleaner = _budgeted(sandbox, budget)
    clean = cleaner.clean
    reserved_at_start: list[int] = []

    def counted(raw: Any, **kw: Any) -> Any:
        reserved_at_start.append(len(budget.reserved))
        return clean(raw, **kw)

    monkeypatch.setattr(cleaner, "clean", counted)

    assert process_batch(event(*removes), FakeContext(), cleaner) == {"batchItemFailures": []}
    assert budget.reserved == [2]
    assert reserved_at_start == [1, 1]
    assert [r for r in session_logs.records if "read-ahead" in r.getMessage()] == []


def test_rule_a_slow_reservation_holds_the_records_no_longer_than_the_reserve_wait(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A budget write that answers late (a throttled budget item) must not hold the batch: the
    # records start after RESERVE_WAIT_SECONDS whatever the reservation is doing. Here the
    # reservation answers only once a record has started.
    removes = _removed(sandbox, "s-1", "s-2")
    started = threading.Event()
    budget = _Budget(until=started)
    cleaner = _budgeted(sandbox, budget)
    clean = cleaner.clean

    def starting(raw: Any, **kw: Any) -> Any:
        started.set()
        return clean(raw, **kw)

    monkeypatch.setattr(cleaner, "clean", starting)
    monkeypatch.setattr(batch, "RESERVE_WAIT_SECONDS", 0.01)

    assert process_batch(event(*removes), FakeContext(), cleaner) == {"batchItemFailures": []}
    assert budget.saw_until == [True]  # a record started while the reservation was unanswered


@pytest.mark.parametrize("kinesis", [False, True], ids=["dynamodb", "kinesis"])
def test_rule_a_batch_of_one_record_plans_and_reserves_nothing_ahead(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, kinesis: bool
) -> None:
    # Premarking starts at two records: a batch of one has nothing to gather, and its record
    # asks its own ownership check and takes its own request of the budget. A Kinesis record
    # is still read back ahead (the read-ahead's other half), but nothing is planned from it.
    (remove,) = _removed(sandbox, "s-1")
    if kinesis:
        remove["eventSourceARN"] = KINESIS_STREAM
        remove["kinesisArrivalTime"] = int(time.time())
    budget = _Budget()
    cleaner = _budgeted(sandbox, budget)
    planned: list[object] = []
    monkeypatch.setattr(cleaner, "planned_claims", lambda raw, *_: planned.append(raw))

    assert process_batch(event(remove), FakeContext(), cleaner) == {"batchItemFailures": []}
    assert (planned, budget.reserved) == ([], [])


def test_rule_a_batch_out_of_time_marks_and_reserves_nothing_ahead(sandbox: Sandbox) -> None:
    # Below the time guard no call starts, the read-ahead's neither: no record will run to use
    # the marks (each would stay "releasing" until a retry) or the reserved requests.
    removes = _removed(sandbox, "s-1", "s-2")
    budget = _Budget()
    cleaner = _budgeted(sandbox, budget)
    calls = calls_of(cleaner.clients.ownership)

    response = process_batch(
        event(*removes), FakeContext(cleaner.config.time_guard_ms - 1), cleaner
    )

    assert len(response["batchItemFailures"]) == 2  # the time guard kept both from starting
    assert (calls, budget.reserved) == ([], [])


def test_rule_a_kinesis_batch_marks_its_records_proven_gone_ahead(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The read-ahead plans a Kinesis REMOVE's claims from its own read-back (a forged one's ids
    # are never marked): every record proven gone is marked in the batch's one premark.
    removes = _removed(sandbox, "s-1", "s-2", "s-3")
    for record in removes:
        record["eventSourceARN"] = KINESIS_STREAM
        record["kinesisArrivalTime"] = int(time.time())
    premarked: list[int] = []
    premark = ClaimBatcher.premark

    def counted(self: ClaimBatcher, requests: Any) -> int:
        premarked.append(len(requests))
        return premark(self, requests)

    monkeypatch.setattr(ClaimBatcher, "premark", counted)

    assert process_batch(event(*removes), FakeContext(), sandbox.cleaner()) == {
        "batchItemFailures": []
    }
    assert premarked == [3]


class _TimeRunsOut(FakeContext):
    """Plenty of time until ``run_out`` is called, then less than the time guard."""

    def __init__(self, margin_ms: int) -> None:
        super().__init__()
        self.margin_ms = margin_ms

    def run_out(self) -> None:
        self.remaining_ms = self.margin_ms - 1


def test_rule_without_a_fan_out_to_run_a_cleaned_record_stays_cleaned_past_the_time_guard(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only a fan-out that did not start fails a cleaned record (to be published on retry); with
    # none to run, time running out after the record was cleaned changes nothing, and the
    # record is not redelivered.
    (remove,) = _removed(sandbox, "s-1")
    cleaner = sandbox.cleaner()
    assert cleaner.after_success_steps == []  # no event bus: no fan-out
    context = _TimeRunsOut(cleaner.config.time_guard_ms)
    clean = cleaner.clean

    def then_time_runs_out(raw: Any, **kw: Any) -> Any:
        result = clean(raw, **kw)
        context.run_out()
        return result

    monkeypatch.setattr(cleaner, "clean", then_time_runs_out)

    assert process_batch(event(remove), context, cleaner) == {"batchItemFailures": []}


def test_rule_with_every_record_done_the_batch_waits_for_its_threads_to_end(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only at the hard stop (or an interrupt) are threads left running; a batch whose records
    # are all done shuts its record threads and its step pool down waiting for them, so no
    # work of this invocation runs on while Lambda freezes the environment.
    removes = _removed(sandbox, "s-1", "s-2")
    waits: list[tuple[str, object]] = []

    class Recording(ThreadPoolExecutor):
        def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
            waits.append((self._thread_name_prefix, wait))
            super().shutdown(wait=wait, cancel_futures=cancel_futures)

    monkeypatch.setattr(batch, "ThreadPoolExecutor", Recording)

    assert process_batch(event(*removes), FakeContext(), sandbox.cleaner()) == {
        "batchItemFailures": []
    }
    assert [w for p, w in waits if p == "cleanup"] == [True]


class _Step(CleanupStep):
    """A session step of this test's own, named ``name``, that does ``act(ctx)``."""

    def __init__(self, name: str, act: Callable[[StepContext], None]) -> None:
        self.name = name
        self.act = act

    @classmethod
    def build(cls, config: Any, clients: Any) -> None:
        return None

    def plan(self, session: Any) -> Plan:
        return Plan.run()

    def run(self, plan: Plan, ctx: StepContext) -> str:
        self.act(ctx)
        return STEP_DONE


def test_rule_at_the_hard_stop_steps_not_yet_started_are_cancelled_not_run(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At max_workers 1 the step pool has two threads. A record's first step runs on its own
    # thread and the pool's two take the next two; all three wait (their call slot lent, as for
    # a shared call) past the hard stop, so the fourth is still in the pool's queue when the
    # batch returns, its record unfinished. That step must never start: it would make its call
    # after the invocation returned (on the next thaw), its result dropped. The two already
    # started finish.
    sandbox = Sandbox(max_workers=1)
    (remove,) = _removed(sandbox, "s-1")
    context = FakeContext()
    release = threading.Event()
    started = {name: threading.Event() for name in ("Second", "Third")}
    ran: list[str] = []

    def past_the_hard_stop(name: str) -> Callable[[StepContext], None]:
        def act(ctx: StepContext) -> None:
            with ctx.waiting():
                if name == "First":  # once the pool's two threads hold a step each
                    assert all(e.wait(timeout=5) for e in started.values())
                    context.remaining_ms = batch.RETURN_RESERVE_MS  # the hard stop is here
                    ctx.out_of_time()  # a step that reads the time (as a paging step does)
                else:
                    started[name].set()
                release.wait(timeout=5)
            ran.append(name)

        return act

    steps = [
        *(_Step(name, past_the_hard_stop(name)) for name in ("First", "Second", "Third")),
        _Step("Queued", lambda ctx: ran.append("Queued")),
    ]
    cleaner = SessionCleaner(
        sandbox.config, sandbox.cleaner().clients, MetricsRecorder("t"), steps=steps
    )
    pools: list[StepPool] = []

    class Recording(StepPool):
        def __init__(self, max_calls: int) -> None:
            super().__init__(max_calls)
            pools.append(self)

    monkeypatch.setattr(batch, "StepPool", Recording)
    try:
        response = process_batch(event(remove), context, cleaner)
    finally:
        release.set()
    (pool,) = pools
    pool.shutdown(wait=True, cancel_futures=False)  # whatever the pool still holds, run

    sequence_number = remove["dynamodb"]["SequenceNumber"]
    assert response == {"batchItemFailures": [{"itemIdentifier": sequence_number}]}
    assert "Queued" not in ran
    assert {"Second", "Third"} <= set(ran)  # the steps already started finish


@pytest.mark.parametrize(
    ("below_the_guard_ms", "given_back"), [(0, 7), (1, 0)], ids=["within", "past"]
)
def test_rule_a_batch_gives_back_its_unspent_budget_only_within_its_time_guard(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, below_the_guard_ms: int, given_back: int
) -> None:
    # What the batch reserved of the shared RetireGrant budget and did not spend goes back to
    # the fleet at its end, in one UpdateItem — but no new call starts within the time guard's
    # margin: past it, the give-back would start after the hard stop, and the 1 s kept for the
    # response is less than one attempt's timeouts. The context is the batch's own, read then.
    # Stub: the batch's records (10 reserved, 3 retired), as in test_shared_pace.
    second = 1_800_000_000
    budget = SharedBudget(
        sandbox.ddb,
        OWNERSHIP_TABLE,
        "RetireGrant",
        10,
        MetricsRecorder("t"),
        wall_clock=lambda: second + 0.25,
        sleep=lambda s: pytest.fail("waited for the budget"),
    )
    cleaner = sandbox.cleaner()

    def records(*_: Any) -> list[Any]:
        assert budget.reserve(10) == 10
        assert [budget.take(lambda: 5.0) for _ in range(3)] == [True] * 3
        return []

    monkeypatch.setattr(batch, "_clean_batch", records)
    context = FakeContext(cleaner.config.time_guard_ms - below_the_guard_ms)

    assert process_batch({"Records": []}, context, cleaner) == {"batchItemFailures": []}
    key = {"resource": {"S": f"pace#RetireGrant#{second}"}}
    item = sandbox.ddb.get_item(TableName=OWNERSHIP_TABLE, Key=key, ConsistentRead=True)["Item"]
    assert item["used"] == {"N": str(10 - given_back)}
