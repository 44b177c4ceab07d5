"""The batch's own rules (session_expiry_runtime.cleanup.batch), pinned where mutation testing found
them loose (issue 40): the deadline as Lambda's context tells it (a controlled monotonic clock,
no sleeps), what a record the time guard or a failed after-success step stops becomes, and whole
batches against moto: duplicates, events that are not batches, who publishes."""

from __future__ import annotations

import copy
import dataclasses
import json
import threading
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from ownership_support import calls_of
from runtime_support import (
    DEFAULT_ACCOUNT_ID,
    REGION,
    SESSION,
    FakeContext,
    Sandbox,
    Session,
    event,
)
from session_expiry_runtime.cleanup import batch
from session_expiry_runtime.cleanup.batch import (
    RETURN_RESERVE_MS,
    Deadline,
    out_of_time_check,
    process_batch,
)
from session_expiry_runtime.cleanup.cleaner import SessionCleaner
from session_expiry_runtime.core.config import (
    ACTION_DELETE_CONNECTION,
    ACTION_TIME_GUARD,
    ACTION_UNEXPECTED,
)
from session_expiry_runtime.owners.outcomes import (
    OUTCOME_CLEANED,
    OUTCOME_FAILED,
    OUTCOME_SKIPPED,
    RecordResult,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Context:
    def __init__(self, remaining_ms: float) -> None:
        self.remaining_ms = remaining_ms
        self.reads = 0

    def get_remaining_time_in_millis(self) -> float:
        self.reads += 1
        return self.remaining_ms


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(batch.time, "monotonic", clock)
    return clock


def test_the_hard_stop_is_the_reserve_before_the_deadline_counted_down_from_the_last_reading(
    clock: Clock,
) -> None:
    deadline = Deadline(Context(5_000), margin_ms=1_500)
    assert deadline.seconds_to_hard_stop() is None  # nothing read yet

    assert deadline.remaining_ms() == 5_000.0
    assert RETURN_RESERVE_MS == 1_000
    assert deadline.seconds_to_hard_stop() == 4.0  # (5000 - 1000) ms
    clock.now += 1.5
    assert deadline.seconds_to_hard_stop() == 2.5  # no new reading: the clock counts down


def test_out_of_time_once_the_remaining_time_is_below_the_margin(clock: Clock) -> None:
    context = Context(1_500)
    deadline = Deadline(context, margin_ms=1_500)
    assert not deadline.out_of_time()  # exactly the margin: a call may still start
    context.remaining_ms = 1_499
    assert deadline.out_of_time()
    assert deadline.margin_ms == 1_500
    assert context.reads == 2  # each check reads the context
    assert deadline.seconds_to_hard_stop() == pytest.approx(0.499)


class Unreadable:
    def get_remaining_time_in_millis(self) -> float:
        raise RuntimeError("no deadline here")


@pytest.mark.parametrize("context", [None, object(), Unreadable(), type("C", (), {"x": 1})()])
def test_without_a_readable_deadline_there_is_none(context: object, clock: Clock) -> None:
    deadline = Deadline(context, margin_ms=1_000)
    assert deadline.remaining_ms() is None
    assert not deadline.out_of_time()
    assert deadline.seconds_to_hard_stop() is None
    assert out_of_time_check(context, 1_000)() is False


def test_a_context_attribute_that_is_not_callable_is_no_deadline(clock: Clock) -> None:
    context = type("C", (), {"get_remaining_time_in_millis": 5})()
    assert Deadline(context, margin_ms=1_000).remaining_ms() is None


def test_out_of_time_check_reads_the_context_each_time(clock: Clock) -> None:
    context = Context(5_000)
    check = out_of_time_check(context, 2_000)
    assert check() is False
    context.remaining_ms = 1_999
    assert check() is True


class FailsFirst(Context):
    """A context whose first reading raises, and every later one says the time is up."""

    def get_remaining_time_in_millis(self) -> float:
        self.reads += 1
        if self.reads == 1:
            raise RuntimeError("not yet")
        return 0


def test_out_of_time_check_of_a_deadline_unreadable_at_first_never_reads_it_again(
    clock: Clock,
) -> None:
    context = FailsFirst(0)
    check = out_of_time_check(context, 2_000)

    assert [check(), check()] == [False, False]
    assert context.reads == 1


def result(outcome: str, **kw: Any) -> RecordResult:
    return RecordResult(sequence_number=f"seq-{outcome}", outcome=outcome, **kw)


def test_records_cleaned_before_the_time_guard_stopped_the_fan_out_fail_to_be_redelivered() -> None:
    cleaned = result(OUTCOME_CLEANED, failed_actions=("Earlier",), log={"errors": {"x": "y"}})
    skipped = result(OUTCOME_SKIPPED)

    batch._fail_unpublished([skipped, cleaned])  # a record not cleaned ends nothing

    assert cleaned.outcome == OUTCOME_FAILED
    assert cleaned.failed_actions == ("Earlier", ACTION_TIME_GUARD)
    assert cleaned.log["errors"] == {
        "x": "y",
        ACTION_TIME_GUARD: "cleaned, but the fan-out did not start: remaining time below the guard",
    }
    assert (skipped.outcome, skipped.failed_actions, skipped.log) == (OUTCOME_SKIPPED, (), {})


class Raising:
    name = "PublishEvents"

    def after_success(self, results: list[RecordResult], metrics: object) -> None:
        raise RuntimeError("bus down")


def test_an_after_success_step_that_raises_fails_the_cleaned_records_under_its_name() -> None:
    cleaned = result(OUTCOME_CLEANED)
    failed = result(OUTCOME_FAILED, failed_actions=("DeleteConnection",))
    cleaner: Any = type("Cleaner", (), {"metrics": None})()

    batch._after_success(Raising(), [failed, cleaned], cleaner)  # type: ignore[arg-type]

    assert cleaned.outcome == OUTCOME_FAILED
    assert cleaned.failed_actions == ("PublishEvents",)
    assert cleaned.log == {"errors": {"PublishEvents": "RuntimeError: bus down"}}
    assert failed.failed_actions == ("DeleteConnection",) and failed.log == {}


# --- whole batches (moto) --------------------------------------------------------------------

BUS = "batch-bus"


def _cleaner_with_bus(sandbox: Sandbox, **changes: Any) -> tuple[SessionCleaner, list[int]]:
    """A cleaner whose fan-out publishes to a real (moto) bus; the sizes of its PutEvents."""
    SESSION.client("events").create_event_bus(Name=BUS)
    arn = f"arn:aws:events:{REGION}:{DEFAULT_ACCOUNT_ID}:event-bus/{BUS}"
    cleaner = sandbox.cleaner(dataclasses.replace(sandbox.config, event_bus_arn=arn, **changes))
    sizes: list[int] = []
    cleaner.clients.events.meta.events.register(
        "provide-client-params.events.PutEvents",
        lambda params, **_: sizes.append(len(params["Entries"])),
    )
    return cleaner, sizes


def _removed(sandbox: Sandbox, *ids: str) -> list[dict[str, Any]]:
    return _removed_sessions(sandbox, *ids)[1]


def _removed_sessions(sandbox: Sandbox, *ids: str) -> tuple[list[Session], list[dict[str, Any]]]:
    sessions = [sandbox.create_session(sid) for sid in ids]
    sandbox.read_stream()
    for sid in ids:
        sandbox.delete(sid)
    return sessions, sandbox.removes()


def _failed(response: dict[str, Any]) -> list[str]:
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def test_a_record_delivered_twice_is_cleaned_once_and_the_records_after_it_too(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str], session_logs: pytest.LogCaptureFixture
) -> None:
    sessions, (a, b, c) = _removed_sessions(sandbox, "s-a", "s-b", "s-c")
    capsys.readouterr()

    response = process_batch(event(a, copy.deepcopy(a), b, c), FakeContext(), sandbox.cleaner())

    assert _failed(response) == []
    out = capsys.readouterr().out
    docs = [json.loads(line) for line in out.splitlines() if '"_aws"' in line]
    assert sum(d.get("SessionsCleaned", 0) for d in docs) == 3
    assert [(d["Cause"], d["RecordsSkipped"]) for d in docs if "RecordsSkipped" in d] == [
        ("DuplicateInBatch", 1)
    ]
    lines = [r.session for r in session_logs.records if hasattr(r, "session")]
    (duplicate,) = [line for line in lines if line.get("cause") == "DuplicateInBatch"]
    assert duplicate["sequenceNumber"] == a["dynamodb"]["SequenceNumber"]
    assert all(sandbox.is_clean(s) for s in sessions)


@pytest.mark.parametrize(
    "not_a_batch", [None, [], {}, {"Records": None}, {"Records": {"0": {}}}, {"records": []}]
)
def test_an_event_without_a_records_list_cleans_nothing_and_fails_nothing(
    sandbox: Sandbox, not_a_batch: object
) -> None:
    assert process_batch(not_a_batch, FakeContext(), sandbox.cleaner()) == {"batchItemFailures": []}


def test_the_fan_out_publishes_the_cleaned_records(sandbox: Sandbox) -> None:
    records = _removed(sandbox, "s-1", "s-2")
    cleaner, sizes = _cleaner_with_bus(sandbox)

    assert _failed(process_batch(event(*records), FakeContext(), cleaner)) == []
    assert sizes == [2]


def test_a_dry_run_publishes_nothing(sandbox: Sandbox) -> None:
    records = _removed(sandbox, "s-1", "s-2")
    cleaner, sizes = _cleaner_with_bus(sandbox, dry_run=True)

    assert _failed(process_batch(event(*records), FakeContext(), cleaner)) == []
    assert sizes == []


def test_the_drain_of_one_step_publishes_nothing(sandbox: Sandbox) -> None:
    records = _removed(sandbox, "s-1", "s-2")
    cleaner, sizes = _cleaner_with_bus(sandbox)
    drain = cleaner.with_levers(only_steps=frozenset({ACTION_DELETE_CONNECTION}))

    assert _failed(process_batch(event(*records), FakeContext(), drain)) == []
    assert sizes == []


# --- waiting for the records until the hard stop ---------------------------------------------


class ScriptedDeadline:
    """``seconds_to_hard_stop`` answers from a script (its last answer repeats)."""

    margin_ms = 1_500

    def __init__(self, *lefts: float | None) -> None:
        self.lefts = list(lefts)

    def seconds_to_hard_stop(self) -> float | None:
        return self.lefts.pop(0) if len(self.lefts) > 1 else self.lefts[0]


class Releases:
    def __init__(self, due: bool) -> None:
        self.is_due = due
        self.asked: list[tuple[float | None, float]] = []
        self.sent: list[object] = []

    def due(self, left: float | None, margin: float) -> bool:
        self.asked.append((left, margin))
        return self.is_due

    def send_soon(self, claims: object) -> None:
        self.sent.append(claims)


def _invocation(releases: Releases, claims: object = "claims") -> Any:
    return SimpleNamespace(claims=claims, releases=releases)


def test_records_are_waited_for_in_polls_no_longer_than_the_time_to_the_hard_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running: Future[None] = Future()
    timeouts: list[float] = []

    def wait(pending: set[Future[None]], timeout: float) -> tuple[set[Any], set[Any]]:
        timeouts.append(timeout)
        if len(timeouts) == 3:
            running.set_result(None)
            return {running}, set()
        return set(), set(pending)

    monkeypatch.setattr(batch, "wait", wait)
    releases = Releases(due=False)

    left = batch._wait_until_done_or_hard_stop(
        [running],
        ScriptedDeadline(0.05, 0.3, None),  # type: ignore[arg-type]
        _invocation(releases),
    )

    assert left == set()
    assert (
        timeouts
        == [0.05, batch.HARD_STOP_POLL_SECONDS, batch.HARD_STOP_POLL_SECONDS]
        == [
            0.05,
            0.1,
            0.1,
        ]
    )
    # While records still run, the kept releases are looked at after each poll, not after the last.
    assert len(releases.asked) == 2


def test_at_the_hard_stop_the_records_still_running_are_left_without_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running: Future[None] = Future()
    monkeypatch.setattr(batch, "wait", lambda *a, **k: pytest.fail("waited past the hard stop"))

    assert batch._wait_until_done_or_hard_stop([running], ScriptedDeadline(0.0)) == {running}  # type: ignore[arg-type]
    assert batch._wait_until_done_or_hard_stop([running], ScriptedDeadline(-1.0)) == {running}  # type: ignore[arg-type]


@pytest.mark.parametrize("left", [None, 0.5, 2.0])
def test_records_already_done_are_collected_whatever_the_time_left(left: float | None) -> None:
    done: Future[None] = Future()
    done.set_result(None)

    assert batch._wait_until_done_or_hard_stop([done], ScriptedDeadline(left)) == set()  # type: ignore[arg-type]


def test_kept_releases_go_out_when_due_judged_from_the_time_to_the_deadline() -> None:
    releases = Releases(due=True)
    deadline = ScriptedDeadline(2.0)

    batch._send_due_releases(deadline, _invocation(releases))  # type: ignore[arg-type]

    # Two seconds to the hard stop is three to the deadline (RETURN_RESERVE_MS); margin in s.
    assert releases.asked == [(3.0, 1.5)]
    assert releases.sent == ["claims"]


def test_kept_releases_wait_while_not_due_and_without_a_deadline_are_asked_without_one() -> None:
    releases = Releases(due=False)

    batch._send_due_releases(ScriptedDeadline(None), _invocation(releases))  # type: ignore[arg-type]

    assert releases.asked == [(None, 1.5)]
    assert releases.sent == []


def test_without_an_ownership_check_there_are_no_releases_to_send() -> None:
    releases = Releases(due=True)

    batch._send_due_releases(ScriptedDeadline(2.0), _invocation(releases, claims=None))  # type: ignore[arg-type]

    assert (releases.asked, releases.sent) == ([], [])


def test_a_record_the_time_guard_keeps_from_starting_fails_and_is_accounted_once(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    sessions, records = _removed_sessions(sandbox, "s-late")
    cleaner = sandbox.cleaner()
    margin = cleaner.config.time_guard_ms

    response = process_batch(event(*records), FakeContext(margin - 1), cleaner)

    assert _failed(response) == [records[0]["dynamodb"]["SequenceNumber"]]
    (line,) = [r.session for r in session_logs.records if hasattr(r, "session")]  # once
    assert line["outcome"] == OUTCOME_FAILED
    assert line["failedActions"] == [ACTION_TIME_GUARD]
    assert line["errors"] == {ACTION_TIME_GUARD: "not started: remaining time below the guard"}
    assert sandbox.is_intact(sessions[0])


def test_the_batchs_threads_are_named_for_what_they_do(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A thread dump (a Lambda that timed out, faulthandler) tells the read-ahead from the
    # record threads by these names.
    _, records = _removed_sessions(sandbox, "s-1", "s-2")
    cleaner = sandbox.cleaner()
    names: dict[str, set[str]] = {"clean": set(), "planned_claims": set()}
    for method in names:
        original = getattr(cleaner, method)

        def spy(*args: Any, _method: str = method, _original: Any = original, **kw: Any) -> Any:
            names[_method].add(threading.current_thread().name.rsplit("_", 1)[0])
            return _original(*args, **kw)

        monkeypatch.setattr(cleaner, method, spy)

    assert _failed(process_batch(event(*records), FakeContext(), cleaner)) == []
    assert names == {"clean": {"cleanup"}, "planned_claims": {"cleanup-ahead"}}


class ShrinkingContext(FakeContext):
    """Plenty of time for the first ``calls`` readings, then less than any guard."""

    def __init__(self, calls: int) -> None:
        super().__init__()
        self.calls = calls
        self.lock = threading.Lock()

    def get_remaining_time_in_millis(self) -> int:
        with self.lock:
            self.calls -= 1
            return 300_000 if self.calls >= 0 else 500


def test_a_started_records_steps_heed_the_time_guard(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    # One reading lets the record start; its scratch deletion reads the same deadline before
    # each page. Stub: pages of one key (S3 may answer fewer keys than asked for; moto, with
    # two objects, would answer one page).
    sessions, records = _removed_sessions(sandbox, "s-started")
    cleaner = sandbox.cleaner()
    cleaner.clients.s3.meta.events.register(
        "provide-client-params.s3.ListObjectsV2", lambda params, **_: params.update(MaxKeys=1)
    )

    response = process_batch(event(*records), ShrinkingContext(calls=1), cleaner)

    assert _failed(response) == [records[0]["dynamodb"]["SequenceNumber"]]
    assert len(sandbox.keys_under(sessions[0].prefix)) == 1  # the second page never listed
    (line,) = [r.session for r in session_logs.records if hasattr(r, "session")]
    assert line["failedActions"] == [ACTION_TIME_GUARD]
    assert line["errors"][ACTION_TIME_GUARD].startswith("time guard reached while listing ")


@pytest.mark.parametrize("count", [2, 3])
def test_the_records_use_the_invocations_ownership_check_marked_ahead_in_one_call(
    sandbox: Sandbox, count: int
) -> None:
    # The read-ahead marks every record's claims in one call (ClaimBatcher.premark); each
    # record then finds its marks there, and the releases go out together: two calls in all.
    # Premarking starts at two records.
    sessions, records = _removed_sessions(sandbox, *(f"s-{i}" for i in range(count)))
    cleaner = sandbox.cleaner()
    calls = calls_of(cleaner.clients.ownership)

    assert _failed(process_batch(event(*records), FakeContext(), cleaner)) == []

    assert all(sandbox.is_clean(s) for s in sessions)
    assert [(name, len(p["TransactItems"])) for name, p in calls] == [
        ("TransactWriteItems", 2 * count),  # the marks: a connection and a grant a session
        ("TransactWriteItems", 2 * count),  # the releases
    ]


def test_a_read_ahead_that_raises_is_logged_and_the_records_ask_for_themselves(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, session_logs: pytest.LogCaptureFixture
) -> None:
    # The read-ahead never raises by contract (premark, prefetch); should it (a bug), the
    # records still run, each asking its own ownership check, and the error is logged rather
    # than left unread on its thread's future.
    from session_expiry_runtime.owners.claims import ClaimBatcher

    sessions, records = _removed_sessions(sandbox, "s-1", "s-2")

    def broken(self: Any, requests: Any) -> int:
        raise RuntimeError("a bug in the read-ahead")

    monkeypatch.setattr(ClaimBatcher, "premark", broken)

    assert _failed(process_batch(event(*records), FakeContext(), sandbox.cleaner())) == []

    assert all(sandbox.is_clean(s) for s in sessions)
    (warning,) = [r for r in session_logs.records if "read-ahead" in r.getMessage()]
    assert "RuntimeError: a bug in the read-ahead" in warning.getMessage()


def test_a_record_thread_that_raises_fails_its_own_record_once_with_the_error(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, session_logs: pytest.LogCaptureFixture
) -> None:
    # CleanupRunner.clean never raises; should it (a bug), the record thread's own guard
    # fails that record, and only it, naming what was raised.
    sessions, (bad, good) = _removed_sessions(sandbox, "s-bad", "s-good")
    cleaner = sandbox.cleaner()
    clean = cleaner.clean

    def clean_or_raise(raw: Any, **kw: Any) -> Any:
        if raw is bad:
            raise KeyboardInterrupt("a signal on the record's thread")
        return clean(raw, **kw)

    monkeypatch.setattr(cleaner, "clean", clean_or_raise)

    response = process_batch(event(bad, good), FakeContext(), cleaner)

    assert _failed(response) == [bad["dynamodb"]["SequenceNumber"]]
    failed = [
        r.session
        for r in session_logs.records
        if getattr(r, "session", {}).get("outcome") == OUTCOME_FAILED
    ]
    assert [line["errors"] for line in failed] == [
        {ACTION_UNEXPECTED: "KeyboardInterrupt: a signal on the record's thread"}
    ]
    assert sandbox.is_clean(sessions[1])


def test_a_record_thread_whose_own_guard_fails_still_fails_only_its_record(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, session_logs: pytest.LogCaptureFixture
) -> None:
    # The last line of defence: whatever escapes a record thread (here its whole work raises)
    # is collected as that record's failure on the invocation's thread, never the batch's.
    sessions, (bad, good) = _removed_sessions(sandbox, "s-bad", "s-good")
    record_work = batch._record_work

    def work_or_raise(raw: Any, *args: Any) -> Any:
        if raw is bad:
            raise MemoryError("no room for the record")
        return record_work(raw, *args)

    monkeypatch.setattr(batch, "_record_work", work_or_raise)

    response = process_batch(event(bad, good), FakeContext(), sandbox.cleaner())

    assert _failed(response) == [bad["dynamodb"]["SequenceNumber"]]
    lines = [r.session for r in session_logs.records if hasattr(r, "session")]
    failed = [line for line in lines if line["outcome"] == OUTCOME_FAILED]
    assert [line["errors"] for line in failed] == [
        {ACTION_UNEXPECTED: "MemoryError: no room for the record"}
    ]
    assert sandbox.is_clean(sessions[1])
