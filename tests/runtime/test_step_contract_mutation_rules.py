"""The step contract's helpers (``steps/base.py``) that mutation testing found unpinned (issue 40,
``make mutation MUTATION_ARGS="steps/base.py"``): what a custom step builds its plan from
(`string_attribute`, `Plan.nothing`, `Plan.verdict`) and what `StepContext` gives a running step
(its invocation's shared helpers, the ownership record of an id).

Pure: no AWS call. `StepContext.claim` is given a stand-in for the invocation's `ClaimBatcher`
that records how it is asked (what matters here is the call, not the read behind it).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from session_expiry_runtime.core.decode import parse_record
from session_expiry_runtime.core.ownership import VERDICT_OWNED, Verdict
from session_expiry_runtime.core.step_pool import CallSlots
from session_expiry_runtime.owners.claims import ClaimFailure
from session_expiry_runtime.owners.outcomes import (
    STEP_ALREADY_DONE,
    STEP_DONE,
    StepFailed,
    error_text,
)
from session_expiry_runtime.steps.base import (
    PLAN_MISSING,
    PLAN_NOTHING,
    ClaimRef,
    Plan,
    Session,
    StepContext,
    act_on_each,
    call_aws,
    id_union,
    string_attribute,
)

REF = ClaimRef("connection", "c-1")


def _session(image: dict[str, Any]) -> Session:
    return Session(image, {"pk": "s-1"}, "explicit", None, parse_record({}), "0" * 32)


@pytest.mark.parametrize(
    ("image", "value", "missing", "invalid"),
    [
        ({"secretName": "db"}, "db", (), ()),
        ({}, None, ("secretName",), ()),
        ({"secretName": ""}, None, (), ("secretName",)),
        ({"secretName": 7}, None, (), ("secretName",)),
    ],
)
def test_rule_string_attribute_reads_a_value_or_names_it_missing_or_invalid(
    image: dict[str, Any], value: str | None, missing: tuple[str, ...], invalid: tuple[str, ...]
) -> None:
    found, plan = string_attribute(_session(image), "secretName")

    assert found == value
    if value is not None:
        assert plan is None
    else:
        assert plan is not None
        assert (plan.status, plan.missing, plan.invalid) == (PLAN_MISSING, missing, invalid)


def test_rule_plan_nothing_is_the_nothing_status() -> None:
    assert Plan.nothing().status == PLAN_NOTHING == "nothing"


def test_rule_plan_verdict_is_the_ownership_checks_verdict_or_none() -> None:
    owned, other = Verdict(VERDICT_OWNED), ClaimRef("connection", "c-2")
    unsettled = ClaimRef("connection", "c-3")
    plan = Plan(
        "run",
        claims=(REF, other, unsettled),
        ownership={REF: owned, unsettled: ClaimFailure("no answer")},
    )

    assert plan.verdict(REF) is owned
    assert plan.verdict(other) is None  # unchecked
    assert plan.verdict(unsettled) is None  # unsettled: no verdict


def test_rule_shared_helpers_are_one_per_key() -> None:
    ctx = StepContext(_session({}))
    first = ctx.shared("a", object)

    assert ctx.shared("a", object) is first
    assert ctx.shared("b", object) is not first


def test_fails_claim_without_an_ownership_table_naming_the_record() -> None:
    with pytest.raises(RuntimeError) as caught:
        StepContext(_session({})).claim(REF)
    assert str(caught.value) == "connection#c-1: no ownership table to read it from"


class _Batcher:
    """Records how `ClaimBatcher.claims` is called; answers no record."""

    def __init__(self) -> None:
        self.asked: list[tuple[list[ClaimRef], Callable[[], AbstractContextManager[None]]]] = []

    def claims(
        self, refs: list[ClaimRef], waiting: Callable[[], AbstractContextManager[None]]
    ) -> dict[ClaimRef, None]:
        self.asked.append((refs, waiting))
        return dict.fromkeys(refs)


def test_rule_claim_lends_the_steps_call_slot_while_it_waits_for_the_read() -> None:
    batcher = _Batcher()
    ctx = StepContext(_session({}), claim_batcher=batcher)  # type: ignore[arg-type]

    assert ctx.claim(REF) is None
    assert batcher.asked == [([REF], ctx.waiting)]


def test_rule_missing_attributes_keeps_both_the_missing_and_the_invalid_names() -> None:
    plan = Plan.missing_attributes(missing=["a"], invalid=["b", "c"])
    assert (plan.status, plan.missing, plan.invalid) == (PLAN_MISSING, ("a",), ("b", "c"))


def test_rule_objects_deleted_add_up() -> None:
    ctx = StepContext(_session({}))
    ctx.count_objects_deleted(2)
    ctx.count_objects_deleted(3)
    assert ctx.objects_deleted == 5


def test_rule_act_on_each_acts_on_every_id_after_a_failure_and_names_it() -> None:
    acted: list[str] = []

    def act(resource_id: str) -> str:
        acted.append(resource_id)
        if resource_id != "c-2":
            raise StepFailed("Inner", f"ForbiddenException: not {resource_id}")
        return STEP_DONE

    with pytest.raises(StepFailed) as caught:
        act_on_each("DeleteConnection", ["c-1", "c-2", "c-3"], act)

    assert acted == ["c-1", "c-2", "c-3"]
    assert (caught.value.action, caught.value.detail) == (
        "DeleteConnection",
        "c-1: ForbiddenException: not c-1; c-3: ForbiddenException: not c-3",
    )


def test_rule_act_on_each_is_already_done_when_no_id_made_a_change() -> None:
    assert act_on_each("A", ["c-1", "c-2"], lambda _: STEP_ALREADY_DONE) == STEP_ALREADY_DONE
    assert act_on_each("A", [], lambda _: STEP_DONE) == STEP_ALREADY_DONE
    outcomes = iter([STEP_ALREADY_DONE, STEP_DONE])
    assert act_on_each("A", ["c-1", "c-2"], lambda _: next(outcomes)) == STEP_DONE


def _failing(code: str) -> Callable[..., Any]:
    """A call that answers botocore's error ``code`` (as a client call does after its retries)."""

    def call(**params: Any) -> None:
        assert params == {"ConnectionId": "c-1"}
        raise ClientError({"Error": {"Code": code, "Message": "stubbed"}}, "DeleteConnection")

    return call


@pytest.mark.parametrize(
    ("code", "outcome"),
    [("GoneException", STEP_ALREADY_DONE), ("ResourceNotFound", STEP_DONE)],
)
def test_rule_call_aws_reads_the_error_code_as_gone_or_going_on(code: str, outcome: str) -> None:
    assert (
        call_aws(
            "A",
            _failing(code),
            already_done=("GoneException",),
            goes_on=("ResourceNotFound",),
            ConnectionId="c-1",
        )
        == outcome
    )


@pytest.mark.parametrize(
    "error",
    [
        ClientError({"Error": {"Code": "ForbiddenException", "Message": "no"}}, "DeleteConnection"),
        EndpointConnectionError(endpoint_url="https://nowhere.invalid"),
    ],
)
def test_rule_call_aws_fails_any_other_error_under_its_action_with_the_error_text(
    error: Exception,
) -> None:
    def call(**_: Any) -> None:
        raise error

    with pytest.raises(StepFailed) as caught:
        call_aws("DeleteConnection", call, already_done=("GoneException",), goes_on=("X",))

    assert (caught.value.action, caught.value.detail) == ("DeleteConnection", error_text(error))
    assert caught.value.__cause__ is error


def test_rule_holding_takes_a_call_slot_and_waiting_lends_it() -> None:
    slots = CallSlots(1)
    ctx = StepContext(_session({}), slots=slots)

    with ctx.holding():
        assert slots._holders == 1  # the step holds the one slot
        with ctx.waiting():
            assert slots._holders == 0  # lent while it waits for a shared call
        assert slots._holders == 1
    assert (slots._holders, slots.peak_holders) == (0, 1)


def test_rule_holding_and_waiting_without_call_slots_do_nothing() -> None:
    ctx = StepContext(_session({}))
    with ctx.holding(), ctx.waiting():
        pass
    assert ctx.slots is None


def test_rule_id_union_names_an_unusable_single_id_invalid_and_never_uses_it() -> None:
    session = _session({"connectionId": "", "connectionIds": {"c-2"}})

    ids, unusable, invalid = id_union(
        session, "connectionId", "connectionIds", lambda value: value != ""
    )

    assert (ids, unusable, invalid) == (["c-2"], None, ["connectionId"])


@pytest.mark.parametrize(
    ("many", "ids", "invalid"),
    [
        ({"c-2", "c-3"}, ["c-1", "c-2", "c-3"], []),  # a String Set of usable ids
        (frozenset({"c-2", ""}), ["c-1", "c-2"], ["connectionIds"]),  # the usable ones count
        ("c-9", ["c-1"], ["connectionIds"]),  # a String, not a set: no id from it
    ],
)
def test_rule_id_union_takes_the_usable_members_of_a_string_set_only(
    many: object, ids: list[str], invalid: list[str]
) -> None:
    session = _session({"connectionId": "c-1", "connectionIds": many})

    found = id_union(session, "connectionId", "connectionIds", lambda value: value != "")

    assert found == (ids, None, invalid)


def test_rule_id_union_without_a_usable_id_is_a_plan_naming_the_invalid_attributes() -> None:
    session = _session({"connectionId": "", "connectionIds": {""}})

    ids, plan, invalid = id_union(session, "connectionId", "connectionIds", lambda v: v != "")

    assert (ids, invalid) == ([], ["connectionId", "connectionIds"])
    assert plan is not None
    assert (plan.status, plan.missing, plan.invalid) == (
        PLAN_MISSING,
        (),
        ("connectionId", "connectionIds"),
    )
