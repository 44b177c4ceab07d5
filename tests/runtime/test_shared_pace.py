"""The budget every invocation shares (``session_expiry_runtime.core.shared_pace``, issue 38) on a
real
DynamoDB table (moto): its conditional counter, its waits, its deadline and its failing open.

How the fleet stays under a quota with it is measured in ``tests/test_pacing.py`` (four
invocations at once against a throttling target).
"""

from __future__ import annotations

import contextvars
import threading
import time
from typing import Any
from unittest import mock

import pytest
from botocore.exceptions import ClientError
from ownership_support import OWNERSHIP_TABLE, emf_totals
from runtime_faults import answer, json_error
from runtime_support import Sandbox
from session_expiry_runtime.cleanup.cleaner import build_clients
from session_expiry_runtime.core.config import METRIC_SHARED_PACE_UNAVAILABLE, RuntimeConfig
from session_expiry_runtime.core.metrics import MetricsRecorder
from session_expiry_runtime.core.pacing import ClientPacer
from session_expiry_runtime.core.shared_pace import (
    KEEP_SECONDS,
    RESERVE_WAIT_SECONDS,
    SharedBudget,
    invocation_demand,
    retire_grant_budget,
)

START = 1_800_000_000.25  # epoch seconds, a quarter into a second


class WallClock:
    """Epoch seconds now, moved only by the budget's own waits."""

    def __init__(self) -> None:
        self.t = START
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


def _budget(sandbox: Sandbox, clock: WallClock, per_second: int = 3, **kw: Any) -> SharedBudget:
    return SharedBudget(
        kw.get("ddb", sandbox.ddb),
        OWNERSHIP_TABLE,
        "RetireGrant",
        per_second,
        kw.get("metrics", MetricsRecorder("Test")),
        wall_clock=clock.now,
        sleep=clock.sleep,
    )


def _item(sandbox: Sandbox, second: int) -> dict[str, Any] | None:
    key = {"resource": {"S": f"pace#RetireGrant#{second}"}}
    got = sandbox.ddb.get_item(TableName=OWNERSHIP_TABLE, Key=key, ConsistentRead=True)
    return got.get("Item")  # type: ignore[no-any-return]


def test_requests_of_a_second_are_counted_up_to_the_budget(sandbox: Sandbox) -> None:
    clock = WallClock()
    budget = _budget(sandbox, clock)

    assert [budget.take(lambda: 5.0) for _ in range(3)] == [True] * 3

    item = _item(sandbox, int(START))
    assert item is not None and item["used"] == {"N": "3"}
    assert item["expiresAt"] == {"N": str(int(START) + KEEP_SECONDS)}  # time to live
    assert clock.slept == []  # within the budget: no wait


def test_a_spent_second_waits_for_the_next_one(sandbox: Sandbox) -> None:
    clock = WallClock()
    budget = _budget(sandbox, clock)
    waits: list[str] = []
    for _ in range(3):
        budget.take(lambda: 5.0)

    assert budget.take(lambda: 5.0, on_wait=lambda: waits.append("waited")) is True

    assert waits == ["waited"] and int(clock.t) == int(START) + 1  # the next second
    assert _item(sandbox, int(START) + 1)["used"] == {"N": "1"}  # type: ignore[index]
    assert _item(sandbox, int(START))["used"] == {"N": "3"}  # type: ignore[index]


def test_a_second_that_ended_during_the_answer_waits_no_negative_time(sandbox: Sandbox) -> None:
    """On a busy host the spent second's answer can come after the second ended: the wait is
    never negative (``time.sleep`` raises ``ValueError`` for it, which failed the record's
    ``RetireGrant`` in the storm bench's pacing run); the next second is asked at once."""
    clock = WallClock()
    budget = _budget(sandbox, clock)
    for _ in range(3):
        budget.take(lambda: 5.0)

    def late_answer() -> None:
        clock.t += 1.5  # the host stalled past the next second's start

    assert budget.take(lambda: 5.0, on_wait=late_answer) is True

    assert clock.slept and min(clock.slept) >= 0
    assert _item(sandbox, int(START) + 1)["used"] == {"N": "1"}  # type: ignore[index]


def test_two_environments_share_one_budget(sandbox: Sandbox) -> None:
    """Two invocations (each its own `SharedBudget`, as each execution environment builds its
    own) take from the same counter: together no more than the budget in one second."""
    clock = WallClock()
    first, second = _budget(sandbox, clock), _budget(sandbox, clock)

    taken = [first.take(lambda: 0.0), second.take(lambda: 0.0), first.take(lambda: 0.0)]
    late = second.take(lambda: 0.0)  # the second is spent and no time is left

    assert taken == [True, True, True] and late is False
    assert _item(sandbox, int(START))["used"] == {"N": "3"}  # type: ignore[index]


def test_a_spent_second_is_not_asked_again_by_the_same_environment(sandbox: Sandbox) -> None:
    clock = WallClock()
    budget = _budget(sandbox, clock, per_second=1)
    budget.take(lambda: 5.0)
    calls: list[str] = []
    sandbox.ddb.meta.events.register(
        "before-call.dynamodb.UpdateItem", lambda **_: calls.append("UpdateItem")
    )
    left = iter([0.5, 0.5, 0.0])  # two waits inside the spent second... then out of time

    clock.t = START  # the clock does not move: every wait stays in the spent second
    budget.sleep = lambda s: None
    assert budget.take(lambda: next(left)) is False

    assert calls == ["UpdateItem"]  # the spent second asked once, not once per wait


def test_a_budget_that_cannot_be_written_lets_the_call_go_and_counts_it(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = WallClock()
    metrics = MetricsRecorder("Test")
    failing = mock.Mock()
    failing.update_item.side_effect = ClientError(
        {"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "UpdateItem"
    )
    budget = _budget(sandbox, clock, ddb=failing, metrics=metrics)

    assert budget.take(lambda: 5.0) is True

    metrics.flush()
    assert emf_totals(capsys.readouterr().out)[METRIC_SHARED_PACE_UNAVAILABLE] == 1


def test_a_budget_write_that_fails_past_the_deadline_starts_no_attempt(sandbox: Sandbox) -> None:
    # Failing open lets the call go without the budget, never past its deadline: a budget write
    # that the ownership client kept retrying (a throttled table) until after the time guard
    # answers "no request" (the call fails with PacingTimeout, its record is retried), as a
    # spent second does then.
    clock = WallClock()
    failing = mock.Mock()

    def throttled_until_past_the_deadline(**_: Any) -> None:
        clock.t += 10  # the client's throttle retries, until after the time guard
        raise ClientError(
            {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}},
            "UpdateItem",
        )

    failing.update_item.side_effect = throttled_until_past_the_deadline
    budget = _budget(sandbox, clock, ddb=failing)

    assert budget.take(lambda: START + 5 - clock.now()) is False
    assert budget.take(lambda: START + 60 - clock.now()) is True  # time left: fails open


def test_the_cleanups_budget_is_built_only_with_grants_and_the_ownership_table(
    sandbox: Sandbox,
) -> None:
    metrics = MetricsRecorder("Test")
    with_both = RuntimeConfig(
        grant_key_arn=sandbox.key_arn,
        ownership_table_name=OWNERSHIP_TABLE,
        kms_retire_grant_budget=7,
    )
    budget = retire_grant_budget(with_both, build_clients(with_both), metrics)
    assert budget is not None and (budget.per_second, budget.table_name) == (7, OWNERSHIP_TABLE)
    assert budget.operation == "RetireGrant"
    without_grants = RuntimeConfig(ownership_table_name=OWNERSHIP_TABLE)
    assert retire_grant_budget(without_grants, build_clients(without_grants), metrics) is None
    no_table = RuntimeConfig(grant_key_arn=sandbox.key_arn)
    assert retire_grant_budget(no_table, build_clients(no_table), metrics) is None


def test_the_budget_is_a_setting() -> None:
    assert RuntimeConfig.from_env({}).kms_retire_grant_budget == 10
    env = {"SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET": "12"}
    assert RuntimeConfig.from_env(env).kms_retire_grant_budget == 12


@pytest.mark.parametrize("raw", ["0", "-3", "ten"])
def test_fails_a_budget_that_is_not_a_positive_integer(raw: str) -> None:
    with pytest.raises(
        ValueError, match=rf"SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET='{raw}': expected a positive"
    ):
        RuntimeConfig.from_env({"SESSION_EXPIRY_KMS_RETIRE_GRANT_BUDGET": raw})


def test_fails_a_budget_of_no_requests_a_second(sandbox: Sandbox) -> None:
    with pytest.raises(ValueError, match=r"per_second=0: expected at least 1 request a second"):
        _budget(sandbox, WallClock(), per_second=0)


def test_no_claim_can_name_a_budget_item() -> None:
    # Only the cleanup role and the claim registrar may write the ownership table, and the
    # registrar writes only ownership keys (resource_key of a known kind): no request of an
    # application, whatever its kind and id, can set or spend a budget item (issue 38).
    from session_expiry_runtime.core.ownership import KINDS, is_kind, resource_key
    from session_expiry_runtime.core.shared_pace import PACE_KIND

    assert not is_kind(PACE_KIND)
    with pytest.raises(ValueError, match="resource kind 'pace'"):
        resource_key(PACE_KIND, "RetireGrant#1800000000")
    assert not [k for k in KINDS if f"{k}#".startswith(f"{PACE_KIND}#")]


# --- a batch's requests reserved at once (issue 38: no UpdateItem before each RetireGrant) -----
def _update_items(sandbox: Sandbox) -> list[str]:
    calls: list[str] = []
    sandbox.ddb.meta.events.register(
        "before-call.dynamodb.UpdateItem", lambda **_: calls.append("UpdateItem")
    )
    return calls


def test_a_reservation_takes_a_batchs_requests_in_one_write(sandbox: Sandbox) -> None:
    clock = WallClock()
    budget = _budget(sandbox, clock, per_second=10)
    calls = _update_items(sandbox)

    assert budget.reserve(5) == 5
    assert [budget.take(lambda: 5.0) for _ in range(5)] == [True] * 5

    assert calls == ["UpdateItem"]  # one write for the five requests
    assert _item(sandbox, int(START))["used"] == {"N": "5"}  # type: ignore[index]
    assert budget.take(lambda: 5.0) is True  # the sixth is asked for on its own
    assert len(calls) == 2 and _item(sandbox, int(START))["used"] == {"N": "6"}  # type: ignore[index]


def test_a_reservation_takes_only_what_the_second_has_left(sandbox: Sandbox) -> None:
    clock = WallClock()
    other, budget = _budget(sandbox, clock, per_second=10), _budget(sandbox, clock, per_second=10)
    assert other.reserve(8) == 8  # another environment's batch

    assert budget.reserve(5) == 2

    assert _item(sandbox, int(START))["used"] == {"N": "10"}  # type: ignore[index]
    assert [budget.take(lambda: 0.0) for _ in range(3)] == [True, True, False]


def test_a_reservation_never_takes_more_than_the_budget(sandbox: Sandbox) -> None:
    budget = _budget(sandbox, WallClock(), per_second=3)

    assert budget.reserve(50) == 3
    assert _item(sandbox, int(START))["used"] == {"N": "3"}  # type: ignore[index]


def test_a_reservation_of_a_spent_second_takes_none_and_asks_once(sandbox: Sandbox) -> None:
    clock = WallClock()
    budget = _budget(sandbox, clock, per_second=2)
    assert budget.reserve(2) == 2
    calls = _update_items(sandbox)
    other = _budget(sandbox, clock, per_second=2)

    assert other.reserve(4) == 0 and other.reserve(4) == 0

    assert calls == ["UpdateItem"]  # the spent second is known after one refusal
    assert _item(sandbox, int(START))["used"] == {"N": "2"}  # type: ignore[index]


def test_a_reservation_that_cannot_be_written_takes_none_and_counts_it(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    metrics = MetricsRecorder("Test")
    failing = mock.Mock()
    failing.update_item.side_effect = ClientError(
        {"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "UpdateItem"
    )
    budget = _budget(sandbox, WallClock(), ddb=failing, metrics=metrics)

    assert budget.reserve(3) == 0 and budget.reserve(0) == 0

    assert failing.update_item.call_count == 1  # none asked for nothing
    metrics.flush()
    assert emf_totals(capsys.readouterr().out)[METRIC_SHARED_PACE_UNAVAILABLE] == 1


def test_an_invocations_demand_left_when_its_second_ends_is_asked_for_in_one_write(
    sandbox: Sandbox,
) -> None:
    """A request is spent within its own second or not at all; the calls a reservation still
    had to come — however many seconds later (a slow table, a slow batch) — ask for what is
    left of the invocation's demand together, not one by one: up to half the budget a write
    (5 here), so one write for 3 calls."""
    clock = WallClock()
    budget = _budget(sandbox, clock, per_second=10)
    with invocation_demand() as demand:
        budget.reserve(5)
        budget.take(lambda: 5.0)
        budget.take(lambda: 5.0)
        calls = _update_items(sandbox)

        clock.t = START + 3  # three of the five are still to come, seconds later
        assert [budget.take(lambda: 5.0) for _ in range(3)] == [True] * 3

        assert calls == ["UpdateItem"] and demand.left == 0
    assert _item(sandbox, int(START) + 3)["used"] == {"N": "3"}  # type: ignore[index]
    assert _item(sandbox, int(START))["used"] == {"N": "5"}  # type: ignore[index]


def test_outside_an_invocations_demand_a_later_second_asks_one_at_a_time(
    sandbox: Sandbox,
) -> None:
    """Nothing an invocation left unspent outlives it: with no demand in force the next
    second's calls ask for one request each, never for what an ended batch had reserved."""
    clock = WallClock()
    budget = _budget(sandbox, clock, per_second=10)
    with invocation_demand():
        budget.reserve(5)
    calls = _update_items(sandbox)

    clock.t = START + 1
    assert [budget.take(lambda: 5.0) for _ in range(2)] == [True] * 2

    assert calls == ["UpdateItem"] * 2
    assert _item(sandbox, int(START) + 1)["used"] == {"N": "2"}  # type: ignore[index]


def test_calls_waiting_while_one_asks_are_asked_for_in_that_threads_next_write(
    sandbox: Sandbox,
) -> None:
    """One thread at a time asks the table; the calls that arrived meanwhile are taken together
    by the next write instead of one write each (no reservation here: a record cleaned alone)."""
    clock = WallClock()
    budget = _budget(sandbox, clock, per_second=10)
    calls = _update_items(sandbox)
    first_asks, release = threading.Event(), threading.Event()
    real = sandbox.ddb.update_item

    def slow_first(**kw: Any) -> Any:
        if not first_asks.is_set():
            first_asks.set()
            release.wait(5)
        return real(**kw)

    budget._ddb = mock.Mock(update_item=slow_first)
    results: list[bool] = []
    first = threading.Thread(target=lambda: results.append(budget.take(lambda: 5.0)))
    first.start()
    first_asks.wait(5)
    others = [
        threading.Thread(target=lambda: results.append(budget.take(lambda: 5.0))) for _ in range(3)
    ]
    for t in others:
        t.start()
    waited_until = time.monotonic() + 5
    while budget._waiting < 3 and time.monotonic() < waited_until:
        pass  # until all three wait for the thread asking
    release.set()
    for t in [first, *others]:
        t.join(5)

    assert results == [True] * 4
    assert calls == ["UpdateItem", "UpdateItem"]  # the first's, then one for the three
    assert _item(sandbox, int(START))["used"] == {"N": "4"}  # type: ignore[index]


# --- a reviewer's findings on the reservation (issue 38) ----------------------------------------
def test_a_request_taken_for_a_second_that_ended_meanwhile_is_not_spent(sandbox: Sandbox) -> None:
    """A write answered after its second ended (a throttled write retried, a busy host) took a
    request of a second that is over: the call asks again in its own second instead of going
    out on it (else another environment's full second gets one more)."""
    clock = WallClock()
    budget = _budget(sandbox, clock, per_second=10)
    real, writes = sandbox.ddb.update_item, []

    def answered_late(**kw: Any) -> Any:
        writes.append(kw["Key"]["resource"]["S"])
        answer = real(**kw)
        if len(writes) == 1:
            clock.t += 1.5
        return answer

    budget._ddb = mock.Mock(update_item=answered_late)

    assert budget.take(lambda: 5.0) is True

    assert writes == [f"pace#RetireGrant#{int(START)}", f"pace#RetireGrant#{int(START) + 1}"]
    assert _item(sandbox, int(START) + 1)["used"] == {"N": "1"}  # type: ignore[index]


@pytest.mark.parametrize(("sent", "asked"), [(4, 5), (8, 5)])
def test_an_invocations_demand_asks_for_half_the_budget_whatever_it_sent(
    sandbox: Sandbox, sent: int, asked: int
) -> None:
    """The demand of a batch (60 grants) does not take the fleet's whole second: the next
    second's write asks for half the budget (5 of 10), whatever the invocation sent in its
    last second (4 or 8); the rest stays for the other environments."""
    clock = WallClock()
    greedy, other = _budget(sandbox, clock, per_second=10), _budget(sandbox, clock, per_second=10)
    with invocation_demand():
        assert greedy.reserve(60) == 10
        assert [greedy.take(lambda: 0.0) for _ in range(sent)] == [True] * sent
        clock.t = START + 1

        assert greedy.take(lambda: 0.0) is True

        # while the invocation runs (when it ends, what it holds unspent is given back)
        assert _item(sandbox, int(START) + 1)["used"] == {"N": str(asked)}  # type: ignore[index]
        left = 10 - asked
        assert [other.take(lambda: 0.0) for _ in range(left + 1)] == [True] * left + [False]


@pytest.mark.parametrize("late", [False, True], ids=["within-its-second", "after-its-second"])
def test_calls_that_waited_for_a_failed_budget_write_fail_open_without_writing(
    sandbox: Sandbox, late: bool
) -> None:
    """The budget is an economy: when the thread asking could not write it, the calls that
    waited for it go out at once, not one failing write after another until their deadline —
    also when the failing write took longer than its second (connect timeouts, retries)."""
    clock = WallClock()
    asked, release = threading.Event(), threading.Event()
    failing = mock.Mock()

    def throttled(**_: Any) -> None:
        asked.set()
        release.wait(5)
        if late:
            clock.t += 1.3
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "Update")

    failing.update_item.side_effect = throttled
    budget = _budget(sandbox, clock, ddb=failing)
    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(budget.take(lambda: 5.0)))]
    threads[0].start()
    asked.wait(5)
    threads += [
        threading.Thread(target=lambda: results.append(budget.take(lambda: 5.0))) for _ in range(3)
    ]
    for t in threads[1:]:
        t.start()
    waited_until = time.monotonic() + 5
    while budget._waiting < 3 and time.monotonic() < waited_until:
        pass  # until the three wait for the thread asking
    release.set()
    for t in threads:
        t.join(5)

    assert results == [True] * 4
    assert failing.update_item.call_count == 1


def test_a_dry_run_or_a_batch_without_grants_reserves_nothing(sandbox: Sandbox) -> None:
    from session_expiry_runtime.core.ownership import KIND_CONNECTION, KIND_GRANT
    from session_expiry_runtime.owners.claims import Claimant, ClaimRef

    planned = [
        (Claimant("o", "i1"), [ClaimRef(KIND_CONNECTION, "c1"), ClaimRef(KIND_GRANT, "g1")]),
        (Claimant("o", "i2"), [ClaimRef(KIND_CONNECTION, "c2")]),
    ]
    budget = mock.Mock(reserve=mock.Mock(return_value=1))
    cleaner = sandbox.cleaner()
    cleaner.retire_grant_budget = budget

    assert cleaner.reserve_retire_grants(planned) == 1
    budget.reserve.assert_called_once_with(1, cleaner.metrics)  # the grant, not the connections
    budget.reserve.reset_mock()

    assert cleaner.with_levers(dry_run=True).reserve_retire_grants(planned) == 0
    budget.reserve.assert_not_called()  # a dry run sends no RetireGrant
    cleaner.reserve_retire_grants(planned[1:])
    budget.reserve.assert_called_once_with(0, cleaner.metrics)  # takes none (reserve(0) == 0)


def test_a_call_whose_every_write_answers_after_its_second_stops_at_its_deadline(
    sandbox: Sandbox,
) -> None:
    """Writes that each take longer than a second (a throttled budget item) never give a
    request of the call's own second: the call asks again only while its deadline allows, then
    fails (PacingTimeout, its record retried) instead of asking for ever."""
    clock = WallClock()
    budget = _budget(sandbox, clock, per_second=10)
    real, writes = sandbox.ddb.update_item, []

    def slow(**kw: Any) -> Any:
        writes.append(kw["Key"]["resource"]["S"])
        clock.t += 1.2
        return real(**kw)

    budget._ddb = mock.Mock(update_item=slow)

    assert budget.take(lambda: START + 3 - clock.now()) is False
    assert len(writes) == 3  # asked at 0, 1.2 and 2.4 s; none of them spent


def test_before_an_invocation_has_spent_in_a_second_it_asks_for_half_the_budget(
    sandbox: Sandbox,
) -> None:
    """A reservation whose grants came only in the next second is no rate: that second's first
    call asks for half the budget in one write (not one write a call, not the batch's whole
    demand), and the other half stays for the other environments."""
    clock = WallClock()
    greedy, other = _budget(sandbox, clock, per_second=10), _budget(sandbox, clock, per_second=10)
    with invocation_demand():
        assert greedy.reserve(60) == 10  # none of them spent within their second
        clock.t = START + 1

        assert [greedy.take(lambda: 0.0) for _ in range(5)] == [True] * 5

    assert _item(sandbox, int(START) + 1)["used"] == {"N": "5"}  # type: ignore[index]
    assert [other.take(lambda: 0.0) for _ in range(6)] == [True] * 5 + [False]


def test_an_invocation_does_not_ask_by_what_an_earlier_one_sent(sandbox: Sandbox) -> None:
    """An invocation asks by its own demand: one that sent 8 in a second does not let the next
    invocation of the same environment ask for 8 (it asks for half the budget)."""
    clock = WallClock()
    budget = _budget(sandbox, clock, per_second=10)
    with invocation_demand():
        assert budget.reserve(8) == 8
        assert [budget.take(lambda: 0.0) for _ in range(8)] == [True] * 8
    clock.t = START + 1
    with invocation_demand():
        assert budget.reserve(60) == 10
        clock.t = START + 2

        assert budget.take(lambda: 0.0) is True

        assert _item(sandbox, int(START) + 2)["used"] == {"N": "5"}  # type: ignore[index]


# --- a hostile review of the budget (h3) --------------------------------------------------------
def test_a_budget_write_answered_past_the_deadline_starts_no_attempt(sandbox: Sandbox) -> None:
    """A write that succeeds but is answered after the call's deadline (the time guard; a slow
    table, a retried write) starts no attempt, as a failed one does then (the call fails with
    PacingTimeout, its record is retried); the request it took stays for the environment's next
    call of that second, with no write of its own."""
    clock = WallClock()
    budget = _budget(sandbox, clock, per_second=10)
    real = sandbox.ddb.update_item

    def slow(**kw: Any) -> Any:
        clock.t += 0.5  # still within its second, but past the call's deadline
        return real(**kw)

    budget._ddb = mock.Mock(update_item=slow)

    assert budget.take(lambda: START + 0.3 - clock.now()) is False

    budget._ddb = sandbox.ddb
    calls = _update_items(sandbox)
    assert budget.take(lambda: 5.0) is True and calls == []
    assert _item(sandbox, int(START))["used"] == {"N": "1"}  # type: ignore[index]


def test_every_call_sent_without_the_budget_is_counted_in_its_own_invocation(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    """``SharedPaceUnavailable`` counts the ``RetireGrant`` calls sent without the budget
    (docs/operating.md): the calls of a second whose write failed go out without writing again,
    and each is counted — in the metrics of the invocation it works for, also when another
    invocation of the process made the failed write."""
    clock = WallClock()
    failing = mock.Mock()
    failing.update_item.side_effect = ClientError(
        {"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "UpdateItem"
    )
    budget = _budget(sandbox, clock, ddb=failing)
    first, other = MetricsRecorder("Test"), MetricsRecorder("Test")

    assert budget.take(lambda: 5.0, metrics=first) is True
    assert [budget.take(lambda: 5.0, metrics=other) for _ in range(3)] == [True] * 3

    assert failing.update_item.call_count == 1  # the failed second is not written again
    first.flush()
    assert emf_totals(capsys.readouterr().out)[METRIC_SHARED_PACE_UNAVAILABLE] == 1
    other.flush()
    assert emf_totals(capsys.readouterr().out)[METRIC_SHARED_PACE_UNAVAILABLE] == 3


def test_an_invocation_that_spent_a_whole_second_does_not_ask_for_the_next_whole(
    sandbox: Sandbox,
) -> None:
    """What an invocation spent in a second is what it was given (its reservation takes up to
    the whole second), not what the fleet can spare: one that spent the whole budget once still
    asks for half of the next second, or it would ask for every second after whole and leave
    the other environments none (measured with threads against moto: 9 or 10 of 10 a second
    for the batch, 0 or 1 for another environment's four calls, for seconds on end)."""
    clock = WallClock()
    greedy, other = _budget(sandbox, clock, per_second=10), _budget(sandbox, clock, per_second=10)
    with invocation_demand():
        assert greedy.reserve(60) == 10
        assert [greedy.take(lambda: 0.0) for _ in range(10)] == [True] * 10
        for second in (1, 2):
            clock.t = START + second

            assert greedy.take(lambda: 0.0) is True

            assert _item(sandbox, int(START) + second)["used"] == {"N": "5"}  # type: ignore[index]
            assert [other.take(lambda: 0.0) for _ in range(5)] == [True] * 5
            assert [greedy.take(lambda: 0.0) for _ in range(4)] == [True] * 4


def test_a_throttled_budget_item_lets_the_call_go_within_a_moment_not_at_its_deadline(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ownership client is paced (`pacing`): a throttled write is retried until the call's
    deadline. A budget write must not be — the budget is an economy: a budget item that stays
    throttled lets the call go (counted) after a moment, instead of holding it, and every other
    RetireGrant of the environment waiting behind it, until the time guard fails them all (it
    did: 290 s of a 300 s invocation, 145 writes, then PacingTimeout)."""
    clock = WallClock()
    writes: list[float] = []

    def throttled(request: Any) -> tuple[int, dict[str, str], bytes] | None:
        if b"pace#" not in (request.body or b""):
            return None
        writes.append(clock.t)
        clock.t += 0.02  # a round trip
        return json_error(400, "ProvisionedThroughputExceededException")

    def invocation() -> bool:
        pacer = ClientPacer(MetricsRecorder("Test"), budget=5.0, clock=clock.now, sleep=clock.sleep)
        pacer.install(sandbox.ddb)
        answer(sandbox.ddb, "UpdateItem", throttled)
        pacer.start_invocation(300_000, 10_000)  # a 300 s invocation, the default time guard
        return budget.take(lambda: pacer.deadline({}) - clock.now())

    metrics = MetricsRecorder("Test")
    budget = _budget(sandbox, clock, per_second=10, metrics=metrics)

    assert contextvars.copy_context().run(invocation) is True

    assert clock.t - START <= RESERVE_WAIT_SECONDS + 0.1 and len(writes) > 1  # retried a moment
    metrics.flush()
    assert emf_totals(capsys.readouterr().out)[METRIC_SHARED_PACE_UNAVAILABLE] == 1


def test_a_call_past_its_deadline_spends_no_held_request(sandbox: Sandbox) -> None:
    """An attempt past its call's deadline (standard mode's second attempt of a call abandoned at
    its invocation's hard stop) gets no request, not even a held one: it would go out past its
    time guard on a request another invocation of the environment reserved for its grants."""
    clock = WallClock()
    budget = _budget(sandbox, clock, per_second=10)
    with invocation_demand():
        assert budget.reserve(2) == 2  # the next invocation's batch

        assert budget.take(lambda: -1.0) is False  # the abandoned call, its time guard passed

        calls = _update_items(sandbox)
        assert [budget.take(lambda: 5.0) for _ in range(2)] == [True] * 2 and calls == []


# --- what an invocation reserved and did not spend goes back to the fleet ---------------------
def test_an_invocation_gives_back_what_it_reserved_and_did_not_spend(sandbox: Sandbox) -> None:
    """A redelivered batch reserves for grants whose claims are already released and retires
    none of them (a hostile review's repro: 10 of 10 taken, 0 sent, another environment refused
    for the second): when the invocation ends within the second, what it did not spend is given
    back in one write, and another environment takes it."""
    clock = WallClock()
    redelivered, other = (_budget(sandbox, clock, per_second=10) for _ in range(2))
    with invocation_demand():
        assert redelivered.reserve(40) == 10
        assert [redelivered.take(lambda: 0.0) for _ in range(3)] == [True] * 3
        calls = _update_items(sandbox)

    assert calls == ["UpdateItem"]
    assert _item(sandbox, int(START))["used"] == {"N": "3"}  # type: ignore[index]
    assert [other.take(lambda: 0.0) for _ in range(8)] == [True] * 7 + [False]
    assert redelivered.take(lambda: 0.0) is False  # nothing is held for it any more


def test_nothing_is_given_back_once_everything_is_spent_or_the_second_is_over(
    sandbox: Sandbox,
) -> None:
    clock = WallClock()
    budget = _budget(sandbox, clock, per_second=10)
    with invocation_demand():
        assert budget.reserve(4) == 4
        assert [budget.take(lambda: 0.0) for _ in range(4)] == [True] * 4
        calls = _update_items(sandbox)
    with invocation_demand():
        assert budget.reserve(6) == 6
        clock.t = START + 1  # its requests' second ended: they were not spent, and are gone

    assert calls == ["UpdateItem"]  # the second reservation; no give-back write
    assert _item(sandbox, int(START))["used"] == {"N": "10"}  # type: ignore[index]
    assert budget.give_back(6) == 0


def test_a_give_back_that_cannot_be_written_is_logged_and_raises_nothing(
    sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    clock = WallClock()
    budget = _budget(sandbox, clock, per_second=10)
    with invocation_demand():
        assert budget.reserve(5) == 5
        answer(sandbox.ddb, "UpdateItem", lambda _r: json_error(400, "AccessDeniedException"))

    assert "could not give back 5 RetireGrant requests" in caplog.text
    assert _item(sandbox, int(START))["used"] == {"N": "5"}  # type: ignore[index]


def test_a_give_back_that_raises_anything_fails_no_invocation(sandbox: Sandbox) -> None:
    """At an invocation's end nothing of the budget may fail it: not even an error that is no
    botocore error (a client wrapped by the application's instrumentation, say)."""
    clock = WallClock()
    failing = mock.Mock()
    failing.update_item.side_effect = [{}, RuntimeError("instrumentation broke")]
    budget = _budget(sandbox, clock, per_second=10, ddb=failing)
    with invocation_demand():
        assert budget.reserve(5) == 5

    assert failing.update_item.call_count == 2  # the reservation, then the give-back
    assert budget.give_back(5) == 0  # nothing held any more


def test_a_give_back_whose_answer_is_lost_is_not_sent_again(sandbox: Sandbox) -> None:
    """A write may be applied and its answer lost (a read timeout, a 500: "the request may have
    succeeded", Amazon DynamoDB Developer Guide, "Error handling"); the client's ``standard``
    retries send it again. Taking again only counts more, but giving back twice frees requests
    another environment then spends: the fleet's second went over its budget (6 sent + 8 taken
    by another of 10). The lost answer is stubbed (moto answers every write): botocore retries
    the applied first attempt."""
    clock = WallClock()
    budget, other = (_budget(sandbox, clock, per_second=10) for _ in range(2))

    def lose_the_first_answer(attempts: int = 0, **_: Any) -> float | None:
        return 0.0 if attempts == 1 else None

    with invocation_demand():
        assert budget.reserve(10) == 10
        assert [budget.take(lambda: 0.0) for _ in range(6)] == [True] * 6
        sandbox.ddb.meta.events.register_first(
            "needs-retry.dynamodb.UpdateItem", lose_the_first_answer
        )

    assert _item(sandbox, int(START))["used"] == {"N": "6"}  # type: ignore[index]
    sandbox.ddb.meta.events.unregister("needs-retry.dynamodb.UpdateItem", lose_the_first_answer)
    assert [other.take(lambda: 0.0) for _ in range(5)] == [True] * 4 + [False]


def test_a_batch_past_its_time_guard_gives_nothing_back(sandbox: Sandbox) -> None:
    """No new call starts within the time guard's margin (``runner``'s module docstring): the
    give-back, one more ``UpdateItem`` at the batch's end, would otherwise start after the
    hard stop, whose 1 s kept for the response is less than one attempt's connect and read
    timeouts (4 s at the default margin); a Lambda timeout loses the partial batch response
    and the whole batch is retried. Stub: the batch's records (a reservation of 10 and 3
    grants retired, as `_clean_batch` would)."""
    from runtime_support import FakeContext
    from session_expiry_runtime.cleanup import batch

    clock = WallClock()
    budget = _budget(sandbox, clock, per_second=10)
    cleaner = sandbox.cleaner()

    def records_until_the_guard(*_: Any) -> list[Any]:
        assert budget.reserve(10) == 10
        assert [budget.take(lambda: 5.0) for _ in range(3)] == [True] * 3
        writes.append(_update_items(sandbox))  # from now on
        return []

    writes: list[list[str]] = []
    with mock.patch.object(batch, "_clean_batch", records_until_the_guard):
        batch.process_batch({"Records": []}, FakeContext(remaining_ms=500), cleaner)

    assert writes == [[]]  # no give-back write: the guard had tripped
    assert _item(sandbox, int(START))["used"] == {"N": "10"}  # type: ignore[index]
