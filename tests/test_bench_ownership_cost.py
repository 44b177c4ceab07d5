"""The bench's count of what recording and checking ownership costs (``bench/ownership_cost.py``,
issue 35) and its critical path of a batch's round trips (``bench/round_trips.py``, issue 38).

The calls are the real `SessionStore.create`'s, on moto in process, counted by the bench's own
botocore hooks; the claim registrar answers the store's ``Invoke`` in process (moto cannot run a
function), as the bench has it. If create's calls change — one more read, one fewer claim, a
conditional write that stops being conditional — the expected lists below fail, and the cost the
bench states beside the minimum must be looked at again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from bench import ownership_cost, round_trips

APP_PUT = ("application", "dynamodb:PutItem", "conditional")
INVOKE = ("application", "lambda:Invoke", "RequestResponse")
READ_BACK = ("registrar", "dynamodb:GetItem", "strongly consistent")
CLAIM = ("registrar", "dynamodb:PutItem", "conditional")


@pytest.fixture
def make_client() -> Iterator[Any]:
    with mock_aws():
        yield lambda service: boto3.client(service, region_name="us-east-1")


def _calls(make_client: Any, ids: int) -> dict[str, list[tuple[str, str, str]]]:
    made = ownership_cost.measure_creates(make_client, ids, creates=2)
    return {v.name: v.calls for v in made}


@pytest.mark.parametrize("ids", [1, 4])
def test_create_calls_are_counted_call_by_call(make_client: Any, ids: int) -> None:
    calls = _calls(make_client, ids)

    # With the registrar: the item, then the registrar's read-back and one claim per id
    # inside the application's one synchronous Invoke (which ends last).
    assert calls["create with the claim registrar"] == [APP_PUT, READ_BACK, *[CLAIM] * ids, INVOKE]
    # The minimum: one conditional PutItem of the item.
    assert calls["minimum: create with no ownership table"] == [APP_PUT]
    assert calls["create by a trusted writer (claims written by the store itself)"] == [
        ("application", "dynamodb:TransactWriteItems", f"{ids + 1} actions")
    ]


def test_the_registrar_create_is_priced_by_its_calls_and_its_duration() -> None:
    """Hand-computed: 1 write unit ($0.625 a million) for the item and for the claim, 1 read
    unit ($0.125) for the read-back, $0.20 a million for the Invoke, and 26 ms (GetItem 10 +
    PutItem 10 + 6 ms of its own) at 256 MiB ($0.0000133334 a GB-second)."""
    v = {
        "calls": [APP_PUT, READ_BACK, CLAIM, INVOKE],
        "registrar": True,
        "registrar_billed_ms": ownership_cost.registrar_ms_model([READ_BACK, CLAIM], 6.0),
    }
    duration = 0.026 * 0.25 * 0.0000133334

    assert v["registrar_billed_ms"] == 26.0
    assert ownership_cost.create_usd(v) * 1e6 == pytest.approx(
        0.625 * 2 + 0.125 + 0.20 + duration * 1e6
    )
    assert ownership_cost.modelled_ms([APP_PUT, READ_BACK, CLAIM, INVOKE], 6.0) == 51.0


def test_the_critical_path_is_the_longest_chain_of_calls_one_after_another() -> None:
    """Two marks in turn, three steps of which two overlap, one release: 5 waves; with the
    marks at once, 4."""
    steps = [("DeleteConnection", "", 2.0, 3.0), ("RetireGrant", "", 2.0, 3.0)]
    steps.append(("ListObjectsV2", "", 3.0, 4.0))
    release = [("TransactWriteItems", "release x2", 4.0, 5.0)]
    in_turn = [("TransactWriteItems", "mark x100", 0.0, 1.0)]
    in_turn.append(("TransactWriteItems", "mark x100", 1.0, 2.0))
    at_once = [("TransactWriteItems", "mark x100", 1.0, 2.0)] * 2

    path = round_trips.critical_path(in_turn + steps + release)

    assert len(path) == 5
    assert round_trips.path_text(path) == (
        "TransactWriteItems (mark x100) ×2 → DeleteConnection → ListObjectsV2 → "  # noqa: RUF001
        "TransactWriteItems (release x2)"
    )
    assert len(round_trips.critical_path(at_once + steps + release)) == 4
    assert round_trips.floor_waves(in_turn + steps + release, max_workers=2) == 4


def test_the_budgets_reservation_is_a_mark_phase_call_and_a_later_budget_write_a_steps() -> None:
    """The shared RetireGrant budget's reservation goes beside the marks (issue 38); a budget
    write after the steps began belongs to a grant step, never to the releases."""
    marks = [("TransactWriteItems", "mark x100", 0.0, 1.0), ("UpdateItem", "", 0.0, 1.0)]
    steps = [("RetireGrant", "", 1.0, 2.0), ("UpdateItem", "", 2.0, 2.5)]
    release = [("TransactWriteItems", "release x100", 3.0, 4.0)]

    phases = round_trips.phases(marks + steps + release)

    assert phases["marks"]["calls"] == {"TransactWriteItems (mark x100)": 1, "UpdateItem": 1}
    assert phases["marks"]["max_in_flight"] == 2
    assert phases["steps"]["calls"] == {"RetireGrant": 1, "UpdateItem": 1}
    assert phases["releases"]["calls"] == {"TransactWriteItems (release x100)": 1}
