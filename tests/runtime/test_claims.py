"""The ownership check's batcher (``session_expiry_runtime.owners.claims``): marks, releases and
reads
coalesced across the records of an invocation.

Real boto3 ``TransactWriteItems``/``BatchGetItem`` against moto's DynamoDB (which returns
``CancellationReasons`` with the ``ALL_OLD`` item, as AWS does). What moto never answers — a
``TransactionConflict`` reason, a ``ValidationError`` reason for one action, ``AccessDenied`` —
is stubbed with the wire answer AWS sends, before moto sees the call, and says so. Pauses
between retry rounds go to a recorder, never to ``time.sleep``.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from botocore.awsrequest import AWSPreparedRequest
from botocore.exceptions import NoCredentialsError
from ownership_support import OWNERSHIP_TABLE, calls_of, claim_state, put_claim, read_claim
from runtime_faults import answer, json_error
from runtime_support import SESSION, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import process_batch
from session_expiry_runtime.core.ownership import (
    KIND_CONNECTION,
    STATE_HELD,
    STATE_RELEASED,
    STATE_RELEASING,
    VERDICT_OWNED,
    VERDICT_RELEASED,
    Verdict,
    owner_token,
)
from session_expiry_runtime.owners import claims as claims_module
from session_expiry_runtime.owners.claims import Claimant, ClaimBatcher, ClaimFailure, ClaimRef

ME = {"pk": "s-1"}
OTHER = {"pk": "s-2"}
NOW = 2_000_000_000
#: The REMOVE came after every claim below was made, within their retention.
MINE = Claimant(owner_token(ME), "inc1")


def ref(connection_id: str) -> ClaimRef:
    return ClaimRef(KIND_CONNECTION, connection_id)


def batcher(sandbox: Sandbox, *, dry_run: bool = False) -> tuple[ClaimBatcher, list[float]]:
    pauses: list[float] = []
    return (
        ClaimBatcher(
            sandbox.ddb,
            OWNERSHIP_TABLE,
            dry_run=dry_run,
            clock=lambda: NOW,
            sleep=pauses.append,
        ),
        pauses,
    )


def claim(sandbox: Sandbox, connection_id: str, key: dict[str, str] = ME, **fields: Any) -> None:
    fields.setdefault("claimed_at", NOW - 3600)
    put_claim(sandbox.ddb, KIND_CONNECTION, connection_id, key=key, incarnation="inc1", **fields)


def cancelled(reasons: list[dict[str, Any]]) -> tuple[int, dict[str, str], bytes]:
    """DynamoDB's TransactionCanceledException wire answer (json 1.0) with these reasons."""
    codes = ", ".join(r["Code"] for r in reasons)
    body = {
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "Message": f"Transaction cancelled, please refer cancellation reasons for specific "
        f"reasons [{codes}]",
        "CancellationReasons": reasons,
    }
    return 400, {"content-type": "application/x-amz-json-1.0"}, json.dumps(body).encode()


def actions(request: AWSPreparedRequest) -> list[dict[str, Any]]:
    return json.loads(request.body)["TransactItems"]  # type: ignore[arg-type,no-any-return]


def new_state(request: AWSPreparedRequest) -> str:
    """The state a mark (``releasing``) or release (``released``) transaction writes."""
    return str(actions(request)[0]["Update"]["ExpressionAttributeValues"][":state"]["S"])


def test_cancellation_reasons_are_mapped_item_by_item(sandbox: Sandbox) -> None:
    claim(sandbox, "owned=")
    claim(sandbox, "taken=", OTHER, claimed_at=NOW - 7200)  # another session's, from before
    claim(sandbox, "done=", state=STATE_RELEASED)
    claims, _ = batcher(sandbox)
    calls = calls_of(sandbox.ddb)

    verdicts = claims.check(MINE, [ref("owned="), ref("taken="), ref("done="), ref("none=")])

    assert verdicts == {
        ref("owned="): Verdict(VERDICT_OWNED),
        ref("taken="): Verdict("NotOwned", read_claim(sandbox.ddb, KIND_CONNECTION, "taken=")),
        ref("done="): Verdict(VERDICT_RELEASED, read_claim(sandbox.ddb, KIND_CONNECTION, "done=")),
        ref("none="): Verdict("Unclaimed"),
    }
    # The first call was cancelled (3 conditions failed); only the owned one went again.
    assert [len(p["TransactItems"]) for n, p in calls if n == "TransactWriteItems"] == [4, 1]
    assert claim_state(sandbox.ddb, KIND_CONNECTION, "owned=") == STATE_RELEASING
    assert claim_state(sandbox.ddb, KIND_CONNECTION, "taken=") == STATE_HELD  # unchanged


def test_the_mark_is_one_conditional_write_per_record(sandbox: Sandbox) -> None:
    claim(sandbox, "owned=")
    claims, _ = batcher(sandbox)
    calls = calls_of(sandbox.ddb)

    claims.check(MINE, [ref("owned=")])

    ((name, params),) = calls  # nothing else: no read before the write
    (action,) = params["TransactItems"]
    update = action["Update"]
    assert name == "TransactWriteItems"
    assert update["ConditionExpression"] == (
        "#owner = :owner AND #incarnation = :incarnation AND #state <> :released"
    )
    assert update["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
    assert update["ExpressionAttributeValues"][":owner"] == {"S": owner_token(ME)}


def test_a_transaction_conflict_is_sent_again(sandbox: Sandbox) -> None:
    claim(sandbox, "a=")
    claim(sandbox, "b=")
    claims, pauses = batcher(sandbox)
    # Stub: moto never reports a conflict with a concurrent transaction; AWS does, per action.
    first = [True]

    def conflict_once(_: AWSPreparedRequest) -> Any:
        if not first[0]:
            return None
        first[0] = False
        return cancelled([{"Code": "TransactionConflict", "Message": "conflict"}, {"Code": "None"}])

    stubbed = answer(sandbox.ddb, "TransactWriteItems", conflict_once)

    verdicts = claims.check(MINE, [ref("a="), ref("b=")])

    assert set(verdicts.values()) == {Verdict(VERDICT_OWNED)}
    assert len(stubbed) == 1 and pauses == [claims_module.RETRY_PAUSES[0]]
    assert claim_state(sandbox.ddb, KIND_CONNECTION, "a=") == STATE_RELEASING


def test_fails_after_bounded_rounds_of_conflicts(sandbox: Sandbox) -> None:
    claim(sandbox, "a=")
    claims, pauses = batcher(sandbox)
    # Stub: a conflict on every call (moto never has one).
    stubbed = answer(
        sandbox.ddb,
        "TransactWriteItems",
        lambda _: cancelled([{"Code": "TransactionConflict", "Message": "conflict"}]),
    )

    (verdict,) = claims.check(MINE, [ref("a=")]).values()

    assert isinstance(verdict, ClaimFailure)
    assert "TransactionCanceledException" in verdict.detail and "connection#a=" in verdict.detail
    assert len(stubbed) == claims_module.MAX_ROUNDS and len(pauses) == claims_module.MAX_ROUNDS - 1
    assert claim_state(sandbox.ddb, KIND_CONNECTION, "a=") == STATE_HELD


def test_requests_that_arrive_while_a_call_is_answered_go_together_in_the_next(
    sandbox: Sandbox,
) -> None:
    """Natural batching: the first request goes at once; the eight that arrive meanwhile share
    one call (not eight)."""
    for i in range(9):
        put_claim(sandbox.ddb, KIND_CONNECTION, f"c{i}=", key={"pk": f"s-{i}"}, incarnation="inc1")
    claims, _ = batcher(sandbox)
    calls = calls_of(sandbox.ddb)
    release_first = threading.Event()
    held_once = [False]

    def hold_the_first_call(**_: Any) -> None:
        if not held_once[0]:
            held_once[0] = True
            release_first.wait(timeout=10)

    sandbox.ddb.meta.events.register("before-send.dynamodb.TransactWriteItems", hold_the_first_call)
    results: dict[int, Any] = {}

    def record(i: int) -> Callable[[], None]:
        claimant = Claimant(owner_token({"pk": f"s-{i}"}), "inc1")
        return lambda: results.update({i: claims.check(claimant, [ref(f"c{i}=")])})

    first = threading.Thread(target=record(0))
    first.start()
    while not held_once[0]:
        threading.Event().wait(0.001)
    others = [threading.Thread(target=record(i)) for i in range(1, 9)]
    for thread in others:
        thread.start()
    while len(claims.marks._pending) < 8:  # every other record is waiting for the next call
        threading.Event().wait(0.001)
    release_first.set()
    for thread in [first, *others]:
        thread.join(timeout=10)

    assert [len(p["TransactItems"]) for _, p in calls] == [1, 8]
    assert all(v == {ref(f"c{i}="): Verdict(VERDICT_OWNED)} for i, v in results.items())
    assert len(results) == 9


def test_the_same_record_and_owner_share_one_action_another_owner_waits(
    sandbox: Sandbox,
) -> None:
    claim(sandbox, "shared=")
    claims, _ = batcher(sandbox)
    calls = calls_of(sandbox.ddb)
    forger = Claimant(owner_token(OTHER), "incX")

    # One record naming the id twice (set and single attribute) asks once; a second
    # claimant of the same record cannot share the transaction (DynamoDB refuses two actions
    # on one item): it goes in a call of its own.
    both = claims.marks.submit(
        [
            claims_module._Write("connection#shared=", MINE.owner or "", "inc1"),
            claims_module._Write("connection#shared=", MINE.owner or "", "inc1"),
            claims_module._Write("connection#shared=", forger.owner or "", "incX"),
        ],
        lambda: __import__("contextlib").nullcontext(),
    )

    assert [len(p["TransactItems"]) for _, p in calls] == [1, 1]
    assert sorted(a.applied for a in both.values()) == [False, True]
    assert claims.check(forger, [ref("shared=")])[ref("shared=")].status == "NotOwned"


def test_a_release_marks_released_and_one_no_longer_ours_is_not_a_failure(
    sandbox: Sandbox,
) -> None:
    claim(sandbox, "mine=", state=STATE_RELEASING)
    claim(sandbox, "taken-over=", OTHER)  # taken after our mark went stale
    claims, _ = batcher(sandbox)

    failures = claims.release(MINE, [ref("mine="), ref("taken-over=")])

    assert failures == []
    assert claim_state(sandbox.ddb, KIND_CONNECTION, "mine=") == STATE_RELEASED
    assert read_claim(sandbox.ddb, KIND_CONNECTION, "taken-over=") is not None
    assert claim_state(sandbox.ddb, KIND_CONNECTION, "taken-over=") == STATE_HELD


def test_a_dry_run_reads_and_writes_nothing(sandbox: Sandbox) -> None:
    claim(sandbox, "owned=")
    claim(sandbox, "taken=", OTHER, claimed_at=NOW - 7200)
    claims, _ = batcher(sandbox, dry_run=True)
    calls = calls_of(sandbox.ddb)

    verdicts = claims.check(MINE, [ref("owned="), ref("taken=")])
    assert claims.release(MINE, [ref("owned=")]) == []

    assert [name for name, _ in calls] == ["BatchGetItem"]
    assert calls[0][1]["RequestItems"][OWNERSHIP_TABLE]["ConsistentRead"] is True
    assert verdicts[ref("owned=")].status == VERDICT_OWNED  # type: ignore[union-attr]
    assert verdicts[ref("taken=")].status == "NotOwned"  # type: ignore[union-attr]
    assert claim_state(sandbox.ddb, KIND_CONNECTION, "owned=") == STATE_HELD


def test_a_legacy_item_reads_and_never_marks(sandbox: Sandbox) -> None:
    claims, _ = batcher(sandbox)
    calls = calls_of(sandbox.ddb)

    verdicts = claims.check(Claimant(owner_token(ME), None), [ref("c=")])

    assert verdicts == {ref("c="): Verdict("Legacy")}
    assert [name for name, _ in calls] == ["BatchGetItem"]


@pytest.mark.parametrize("max_items", [0, 101])
def test_fails_a_batch_size_outside_what_the_apis_take(sandbox: Sandbox, max_items: int) -> None:
    with pytest.raises(ValueError, match=rf"max_items={max_items}: expected 1..100"):
        ClaimBatcher(sandbox.ddb, OWNERSHIP_TABLE, max_items=max_items)


# --- through the handler's batch -----------------------------------------------------------
@pytest.mark.parametrize("count", [12, 60])
def test_one_invocation_marks_and_releases_its_records_in_the_fewest_calls(
    sandbox: Sandbox, count: int
) -> None:
    sessions = [sandbox.create_session(f"s-{i}", object_names=()) for i in range(count)]
    sandbox.read_stream()
    for s in sessions:
        sandbox.delete(s.session_id)
    cleaner = sandbox.cleaner()
    calls = calls_of(cleaner.clients.ownership)

    assert process_batch(event(*sandbox.removes()), FakeContext(), cleaner) == {
        "batchItemFailures": []
    }

    assert all(sandbox.is_clean(s) for s in sessions)
    writes = [p for name, p in calls if name == "TransactWriteItems"]
    # Two claims a session (connection, grant), marked up front for the whole batch
    # (ClaimBatcher.premark) and released together once every record is done
    # (deferred_releases): ceil(2 * count / 100) calls each, the minimum.
    per_call = [len(p["TransactItems"]) for p in writes]
    calls_each = math.ceil(2 * count / 100)
    assert sum(per_call) == 4 * count
    assert len(writes) == 2 * calls_each and max(per_call) <= 100
    assert [name for name, _ in calls if name != "TransactWriteItems"] == []


def test_an_ownership_failure_fails_exactly_the_records_it_touches(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    bad = sandbox.create_session("s-bad", object_names=())
    good = sandbox.create_session("s-good", object_names=())
    sandbox.read_stream()
    sandbox.delete("s-bad")
    sandbox.delete("s-good")
    bad_record, good_record = sandbox.removes()
    cleaner = sandbox.cleaner()
    target = f"connection#{bad.connection_id}"

    # Stub: a ValidationError reason for the bad record's action (moto never answers one),
    # whichever call carries it; the other actions are answered "None" (not applied).
    def validation_error_for_bad(request: AWSPreparedRequest) -> Any:
        sent = actions(request)
        keys = [a["Update"]["Key"]["resource"]["S"] for a in sent]
        if target not in keys or new_state(request) != STATE_RELEASING:
            return None
        return cancelled(
            [
                {"Code": "ValidationError", "Message": "bad item"}
                if k == target
                else {"Code": "None"}
                for k in keys
            ]
        )

    answer(cleaner.clients.ownership, "TransactWriteItems", validation_error_for_bad)

    response = process_batch(event(bad_record, good_record), FakeContext(), cleaner)

    assert response == {
        "batchItemFailures": [{"itemIdentifier": bad_record["dynamodb"]["SequenceNumber"]}]
    }
    assert sandbox.is_clean(good)
    assert sandbox.connection_exists(bad.connection_id)  # never acted on: unsettled
    assert bad.grant_id not in sandbox.grant_ids()  # its other step's claim was settled
    lines = {
        r.session["keys"]["pk"]: r.session for r in session_logs.records if hasattr(r, "session")
    }
    assert lines["s-bad"]["failedActions"] == ["Ownership"]
    assert "ValidationError: bad item" in lines["s-bad"]["errors"]["Ownership"]
    assert lines["s-bad"]["steps"]["DeleteConnection"] == "failed"
    assert lines["s-good"]["outcome"] == "cleaned"


def test_a_failed_release_fails_the_record_and_its_retry_finishes(sandbox: Sandbox) -> None:
    session = sandbox.create_session("s-1", object_names=())
    sandbox.read_stream()
    sandbox.delete("s-1")
    (record,) = sandbox.removes()
    cleaner = sandbox.cleaner()

    # Stub: the release transactions are refused (e.g. a policy without dynamodb:UpdateItem).
    def deny_release(request: AWSPreparedRequest) -> Any:
        denied = new_state(request) == STATE_RELEASED
        return json_error(400, "AccessDeniedException") if denied else None

    stubbed = answer(cleaner.clients.ownership, "TransactWriteItems", deny_release)
    first = process_batch(event(record), FakeContext(), cleaner)

    assert len(first["batchItemFailures"]) == 1 and stubbed
    assert not sandbox.connection_exists(session.connection_id)  # acted, not yet released
    assert claim_state(sandbox.ddb, KIND_CONNECTION, session.connection_id) == STATE_RELEASING

    retry = sandbox.cleaner()  # the redelivery: marks again (releasing), acts again, releases
    assert process_batch(event(record), FakeContext(), retry) == {"batchItemFailures": []}
    assert claim_state(sandbox.ddb, KIND_CONNECTION, session.connection_id) == STATE_RELEASED
    assert sandbox.is_clean(session)


def test_a_failed_release_in_the_invocations_release_call_fails_only_its_record(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    bad = sandbox.create_session("s-bad", object_names=())
    good = sandbox.create_session("s-good", object_names=())
    sandbox.read_stream()
    sandbox.delete("s-bad")
    sandbox.delete("s-good")
    bad_record, good_record = sandbox.removes()
    cleaner = sandbox.cleaner()
    target = f"connection#{bad.connection_id}"

    # Stub: the one release call carries both records' ids (deferred_releases); a
    # ValidationError reason for the bad record's connection (moto never answers one), the
    # others "None" (not applied: sent again alone, then applied).
    def validation_error_for_bad(request: AWSPreparedRequest) -> Any:
        keys = [a["Update"]["Key"]["resource"]["S"] for a in actions(request)]
        if target not in keys or new_state(request) != STATE_RELEASED:
            return None
        return cancelled(
            [
                {"Code": "ValidationError", "Message": "bad item"}
                if k == target
                else {"Code": "None"}
                for k in keys
            ]
        )

    answer(cleaner.clients.ownership, "TransactWriteItems", validation_error_for_bad)

    response = process_batch(event(bad_record, good_record), FakeContext(), cleaner)

    assert response == {
        "batchItemFailures": [{"itemIdentifier": bad_record["dynamodb"]["SequenceNumber"]}]
    }
    assert sandbox.is_clean(good) and sandbox.is_clean(bad)  # both acted
    assert claim_state(sandbox.ddb, KIND_CONNECTION, good.connection_id) == STATE_RELEASED
    assert claim_state(sandbox.ddb, KIND_CONNECTION, bad.connection_id) == STATE_RELEASING
    lines = {
        r.session["keys"]["pk"]: r.session for r in session_logs.records if hasattr(r, "session")
    }
    assert lines["s-bad"]["failedActions"] == ["Ownership"]
    assert "ValidationError: bad item" in lines["s-bad"]["errors"]["Ownership"]
    assert lines["s-bad"]["steps"]["DeleteConnection"] == "failed"
    assert lines["s-good"]["outcome"] == "cleaned"


def test_a_denied_mark_fails_every_record_it_carried_and_acts_on_nothing(
    sandbox: Sandbox,
) -> None:
    sessions = [sandbox.create_session(f"s-{i}", object_names=()) for i in range(2)]
    sandbox.read_stream()
    for s in sessions:
        sandbox.delete(s.session_id)
    records = sandbox.removes()
    cleaner = sandbox.cleaner()
    calls = calls_of(cleaner.clients.apigateway)
    # Stub: every ownership write refused (moto enforces no IAM).
    answer(
        cleaner.clients.ownership,
        "TransactWriteItems",
        lambda _: json_error(400, "AccessDeniedException"),
    )

    response = process_batch(event(*records), FakeContext(), cleaner)

    assert len(response["batchItemFailures"]) == 2
    assert calls == [] and all(sandbox.is_intact(s) or s.keys == [] for s in sessions)
    assert all(sandbox.connection_exists(s.connection_id) for s in sessions)
    assert all(s.grant_id in sandbox.grant_ids() for s in sessions)


def test_the_cleanup_builds_its_ownership_client_with_the_cleanup_settings(
    sandbox: Sandbox,
) -> None:
    cleaner = sandbox.cleaner()
    config = cleaner.clients.ownership.meta.config
    assert config.retries["total_max_attempts"] == 2
    assert (config.connect_timeout, config.read_timeout) == (1.0, 3.0)  # the 10 s margin's
    assert cleaner.clients.ownership.meta.service_model.service_name == "dynamodb"
    assert SESSION.region_name == cleaner.clients.ownership.meta.region_name


def test_rule_no_record_is_unclaimed_and_alarmed_even_when_the_image_says_it_ended_long_ago(
    sandbox: Sandbox,
) -> None:
    # Issue 40, rule 1: the image's notAfter (three days before the REMOVE, or 1) is the
    # writer's word; the verdict without a record is Unclaimed, alarmed.
    claims, _ = batcher(sandbox)

    (verdict,) = claims.check(MINE, [ref("gone=")]).values()

    assert verdict == Verdict("Unclaimed") and verdict.alarmed


def test_a_legacy_image_naming_another_sessions_held_id_is_not_owned(sandbox: Sandbox) -> None:
    # Without an incarnation the image once read as Legacy (quiet) whatever it named; the
    # record is read now, and another key's record makes it NotOwned (alarmed). Nothing marked.
    claims, _ = batcher(sandbox)
    claim(sandbox, "c-victim=", OTHER)

    (verdict,) = claims.check(Claimant(owner_token(ME), None), [ref("c-victim=")]).values()

    assert isinstance(verdict, Verdict) and verdict.status == "NotOwned" and verdict.alarmed
    assert claim_state(sandbox.ddb, KIND_CONNECTION, "c-victim=") == STATE_HELD


def test_keys_no_record_can_name_make_every_id_unclaimed(sandbox: Sandbox) -> None:
    claims, _ = batcher(sandbox)
    calls = calls_of(sandbox.ddb)

    verdicts = claims.check(Claimant(None, "inc1"), [ref("c=")])

    assert verdicts == {ref("c="): Verdict("Unclaimed")} and calls == []


@pytest.mark.parametrize(("kind", "resource_id"), [("socket", "c-1"), (KIND_CONNECTION, "")])
def test_fails_a_claim_ref_of_an_unknown_kind_or_empty_id(kind: str, resource_id: str) -> None:
    with pytest.raises(ValueError, match="resource"):
        ClaimRef(kind, resource_id)


# --- the read (dry run, and a step's look-up): its failures and retries (issue 40) -------------
def test_a_read_a_later_call_may_cure_is_sent_again_after_a_pause(
    sandbox: Sandbox, no_backoff: None
) -> None:
    claim(sandbox, "a=")
    claims, pauses = batcher(sandbox)
    # Stub: a transaction in progress on the record (moto has none) through every attempt of
    # the first call (botocore's own retries included), then moto answers.
    first_call: list[bytes] = []

    def in_progress_once(request: AWSPreparedRequest) -> Any:
        invocation = request.headers["amz-sdk-invocation-id"]
        first_call[:] = first_call or [invocation]
        return (
            json_error(400, "TransactionInProgressException")
            if first_call == [invocation]
            else None
        )

    stubbed = answer(sandbox.ddb, "BatchGetItem", in_progress_once)

    read = claims.claims([ref("a=")])

    assert read == {ref("a="): read_claim(sandbox.ddb, KIND_CONNECTION, "a=")}
    assert len(stubbed) > 1 and pauses == [claims_module.RETRY_PAUSES[0]]


def test_fails_a_read_refused_for_good_at_once_naming_the_error(sandbox: Sandbox) -> None:
    claims, pauses = batcher(sandbox)
    # Stub: moto enforces no IAM.
    stubbed = answer(
        sandbox.ddb, "BatchGetItem", lambda _: json_error(400, "AccessDeniedException", "denied")
    )

    with pytest.raises(RuntimeError) as failed:
        claims.claims([ref("a=")])

    assert str(failed.value) == (
        "reading connection#a=: unsettled after retries: AccessDeniedException: denied"
    )
    assert len(stubbed) == 1 and pauses == []


def test_fails_a_read_that_fails_before_reaching_the_service_at_once(sandbox: Sandbox) -> None:
    claims, pauses = batcher(sandbox)
    tried: list[str] = []

    def no_credentials(**_: Any) -> None:
        tried.append("BatchGetItem")
        raise NoCredentialsError()

    sandbox.ddb.meta.events.register("before-call.dynamodb.BatchGetItem", no_credentials)

    with pytest.raises(RuntimeError) as failed:
        claims.claims([ref("a=")])

    assert str(failed.value) == (
        "reading connection#a=: unsettled after retries: NoCredentialsError: "
        "Unable to locate credentials"
    )
    assert tried == ["BatchGetItem"] and pauses == []


def test_a_dry_run_whose_read_fails_answers_a_failure_for_each_id(sandbox: Sandbox) -> None:
    claims, _ = batcher(sandbox, dry_run=True)
    answer(sandbox.ddb, "BatchGetItem", lambda _: json_error(400, "AccessDeniedException", "no"))

    verdicts = claims.check(MINE, [ref("a="), ref("b=")])

    assert list(verdicts) == [ref("a="), ref("b=")]
    failure = ClaimFailure(
        "reading connection#a=: unsettled after retries: AccessDeniedException: no"
    )
    assert set(verdicts.values()) == {failure}


def test_every_call_of_a_check_or_release_is_waited_for_through_the_callers_waiting(
    sandbox: Sandbox,
) -> None:
    """``waiting`` lends the caller's call slot to others while it waits (the step context's
    ``waiting``): the dry run's read, the mark and the release all go through it."""
    claim(sandbox, "a=")
    entered: list[str] = []

    @contextmanager
    def waiting() -> Iterator[None]:
        entered.append("waiting")
        yield

    for dry_run in (True, False):
        claims, _ = batcher(sandbox, dry_run=dry_run)
        entered.clear()
        claims.check(MINE, [ref("a=")], waiting)
        assert entered, f"check, dry_run={dry_run}"
    entered.clear()
    claims.release(MINE, [ref("a=")], waiting)
    assert entered


def test_a_read_of_ids_without_a_record_answers_none_for_each(sandbox: Sandbox) -> None:
    claim(sandbox, "a=")
    claims, _ = batcher(sandbox, dry_run=True)

    read = claims.claims([ref("a="), ref("none=")])
    verdicts = claims.check(MINE, [ref("none=")])

    assert read == {ref("a="): read_claim(sandbox.ddb, KIND_CONNECTION, "a="), ref("none="): None}
    assert verdicts == {ref("none="): Verdict("Unclaimed")}


def test_fails_a_read_whose_keys_stay_unprocessed_naming_them(sandbox: Sandbox) -> None:
    claim(sandbox, "a=")
    claims, pauses = batcher(sandbox)

    def unprocessed(request: AWSPreparedRequest) -> tuple[int, dict[str, str], bytes]:
        # Stub: DynamoDB's answer that read nothing (under throttling; moto never gives it).
        asked = json.loads(request.body)["RequestItems"]  # type: ignore[arg-type]
        body = {"Responses": {t: [] for t in asked}, "UnprocessedKeys": asked}
        return 200, {"content-type": "application/x-amz-json-1.0"}, json.dumps(body).encode()

    stubbed = answer(sandbox.ddb, "BatchGetItem", unprocessed)

    with pytest.raises(RuntimeError) as failed:
        claims.claims([ref("a=")])

    assert str(failed.value) == "reading connection#a=: unsettled after retries: UnprocessedKeys"
    assert len(stubbed) == claims_module.MAX_ROUNDS
    assert pauses == list(claims_module.RETRY_PAUSES)


# --- cancellation reasons that settle nothing or fail one action (issue 40) --------------------
@pytest.mark.parametrize(
    "reasons",
    [None, [], [{}]],
    ids=["no-reasons", "a-reason-per-action-missing", "a-reason-without-a-code"],
)
def test_a_cancellation_that_settles_nothing_is_sent_again(
    sandbox: Sandbox, reasons: list[dict[str, Any]] | None
) -> None:
    """No ``CancellationReasons`` (an older SDK), fewer than the actions, or a reason without a
    ``Code``: nothing is settled by it, every action goes again."""
    claim(sandbox, "a=")
    claims, pauses = batcher(sandbox)

    def cancelled_once(_: AWSPreparedRequest) -> Any:
        if pauses:
            return None
        body: dict[str, Any] = {
            "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
            "Message": "Transaction cancelled",
        }
        if reasons is not None:
            body["CancellationReasons"] = reasons
        return 400, {"content-type": "application/x-amz-json-1.0"}, json.dumps(body).encode()

    stubbed = answer(sandbox.ddb, "TransactWriteItems", cancelled_once)

    assert claims.check(MINE, [ref("a=")]) == {ref("a="): Verdict(VERDICT_OWNED)}
    assert len(stubbed) == 1 and pauses == [claims_module.RETRY_PAUSES[0]]


@pytest.mark.parametrize(
    ("reason", "detail"),
    [
        ({"Code": "ValidationError", "Message": "bad key X"}, "ValidationError: bad key X"),
        ({"Code": "ValidationError"}, "ValidationError"),
    ],
)
def test_a_reason_that_fails_one_action_answers_its_code_and_message(
    sandbox: Sandbox, reason: dict[str, str], detail: str
) -> None:
    claim(sandbox, "a=")
    claims, _ = batcher(sandbox)
    # Stub: moto never answers a ValidationError reason.
    answer(sandbox.ddb, "TransactWriteItems", lambda _: cancelled([reason]))

    assert claims.check(MINE, [ref("a=")]) == {ref("a="): ClaimFailure(f"connection#a=: {detail}")}


def test_a_dry_run_premarks_nothing(sandbox: Sandbox) -> None:
    claim(sandbox, "a=")
    dry, _ = batcher(sandbox, dry_run=True)
    real, _ = batcher(sandbox)
    calls = calls_of(sandbox.ddb)

    assert dry.premark([(MINE, [ref("a=")])]) == 0 and calls == []
    assert real.premark([(Claimant(owner_token(ME), None), [ref("a=")])]) == 0 and calls == []
    assert real.premark([(MINE, [ref("a=")])]) == 1
    assert claim_state(sandbox.ddb, KIND_CONNECTION, "a=") == STATE_RELEASING


def test_the_release_is_conditioned_on_owner_and_incarnation_only(sandbox: Sandbox) -> None:
    claim(sandbox, "a=", state=STATE_RELEASING)
    claims, _ = batcher(sandbox)
    calls = calls_of(sandbox.ddb)

    assert claims.release(MINE, [ref("a=")]) == []

    ((name, params),) = calls
    (action,) = params["TransactItems"]
    update = action["Update"]
    assert name == "TransactWriteItems"
    assert update["ConditionExpression"] == "#owner = :owner AND #incarnation = :incarnation"
    assert "ReturnValuesOnConditionCheckFailure" not in update
    assert update["ExpressionAttributeValues"][":state"] == {"S": STATE_RELEASED}


class Broken(Exception):
    """Not a botocore error: what a bug under the client may raise."""


def test_a_mark_or_release_that_fails_outside_botocore_is_answered_never_raised(
    sandbox: Sandbox,
) -> None:
    claim(sandbox, "a=")
    claims, _ = batcher(sandbox)

    def broken(**_: Any) -> None:
        raise Broken("under the client")

    sandbox.ddb.meta.events.register("before-call.dynamodb.TransactWriteItems", broken)

    assert claims.premark([(MINE, [ref("a=")])]) == 0
    assert claims.release_all([(MINE, [ref("a=")]), (Claimant(owner_token(ME), None), [])]) == [
        ["releasing the ownership records: under the client"],
        [],
    ]
    assert claim_state(sandbox.ddb, KIND_CONNECTION, "a=") == STATE_HELD


def first_call_fails(code: str) -> Callable[[AWSPreparedRequest], Any]:
    """A responder: ``code`` to every attempt of the first call (botocore's retries included),
    then moto answers."""
    first: list[str] = []

    def respond(request: AWSPreparedRequest) -> Any:
        invocation = request.headers["amz-sdk-invocation-id"]
        first[:] = first or [invocation]
        return json_error(400, code, "stubbed") if first == [invocation] else None

    return respond


def test_a_mark_a_later_call_may_cure_is_sent_again_after_a_pause(
    sandbox: Sandbox, no_backoff: None
) -> None:
    claim(sandbox, "a=")
    claims, pauses = batcher(sandbox)
    # Stub: another transaction in progress on the record (moto has none).
    answer(sandbox.ddb, "TransactWriteItems", first_call_fails("TransactionInProgressException"))

    assert claims.check(MINE, [ref("a=")]) == {ref("a="): Verdict(VERDICT_OWNED)}
    assert pauses == [claims_module.RETRY_PAUSES[0]]


def test_fails_a_mark_refused_for_good_at_once(sandbox: Sandbox) -> None:
    claim(sandbox, "a=")
    claims, pauses = batcher(sandbox)
    # Stub: moto enforces no IAM.
    stubbed = answer(sandbox.ddb, "TransactWriteItems", first_call_fails("AccessDeniedException"))

    assert claims.check(MINE, [ref("a=")]) == {
        ref("a="): ClaimFailure(
            "connection#a=: unsettled after retries: AccessDeniedException: stubbed"
        )
    }
    assert len(stubbed) == 1 and pauses == []


def test_fails_a_mark_that_fails_before_reaching_the_service_at_once(sandbox: Sandbox) -> None:
    claim(sandbox, "a=")
    claims, pauses = batcher(sandbox)

    def no_credentials(**_: Any) -> None:
        raise NoCredentialsError()

    sandbox.ddb.meta.events.register("before-call.dynamodb.TransactWriteItems", no_credentials)

    assert claims.check(MINE, [ref("a=")]) == {
        ref("a="): ClaimFailure(
            "connection#a=: unsettled after retries: NoCredentialsError: "
            "Unable to locate credentials"
        )
    }
    assert pauses == []


def test_a_full_call_goes_at_once_while_another_is_answered(sandbox: Sandbox) -> None:
    """Natural batching never holds a full call back: with ``max_items`` requests waiting, they
    go while the first call is still being answered (the first call waits to see them)."""
    for i in range(3):
        put_claim(sandbox.ddb, KIND_CONNECTION, f"c{i}=", key={"pk": f"s-{i}"}, incarnation="inc1")
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

    def record(i: int) -> Callable[[], None]:
        claimant = Claimant(owner_token({"pk": f"s-{i}"}), "inc1")
        return lambda: results.update({i: claims.check(claimant, [ref(f"c{i}=")])})

    threads = [threading.Thread(target=record(0))]
    threads[0].start()
    while not sent:
        threading.Event().wait(0.001)
    threads += [threading.Thread(target=record(i)) for i in (1, 2)]
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert seen_in_time == [True]  # the full call did not wait for the first
    assert sorted(len(p["TransactItems"]) for _, p in calls) == [1, 2]
    assert all(v == {ref(f"c{i}="): Verdict(VERDICT_OWNED)} for i, v in results.items())


def test_the_marks_and_the_releases_of_a_large_batch_go_out_at_once(sandbox: Sandbox) -> None:
    """250 ids take three calls each way (100 + 100 + 50 actions), sent side by side, not one
    after another (issue 38: each call in turn was a round trip of its own). The barrier lets
    no call through until all three are in flight: calls sent in turn would break it."""
    ids = [f"a{i}=" for i in range(250)]
    for connection_id in ids:
        claim(sandbox, connection_id)
    claims, _ = batcher(sandbox)
    calls = calls_of(sandbox.ddb)
    barrier = threading.Barrier(3, timeout=30)

    def all_three_in_flight(**_: Any) -> None:
        barrier.wait()

    sandbox.ddb.meta.events.register("before-call.dynamodb.TransactWriteItems", all_three_in_flight)

    assert claims.premark([(MINE, [ref(i) for i in ids])]) == 250
    assert {claim_state(sandbox.ddb, KIND_CONNECTION, i) for i in ids} == {STATE_RELEASING}
    assert claims.release_all([(MINE, [ref(i) for i in ids])]) == [[]]
    assert {claim_state(sandbox.ddb, KIND_CONNECTION, i) for i in ids} == {STATE_RELEASED}
    writes = [p for name, p in calls if name == "TransactWriteItems"]
    assert sorted(len(p["TransactItems"]) for p in writes) == [50, 50, 100, 100, 100, 100]
    assert not barrier.broken


def test_requests_for_one_item_share_a_part_of_the_calls_sent_at_once() -> None:
    """Two requests naming one item never go to two calls sent side by side (two
    transactions on one item at once would conflict)."""
    parts = claims_module._chunks(["x1", "y1", "x2", "z1", "y2"], lambda r: r[0], 2)

    assert parts == [["x1", "x2", "y1", "y2"], ["z1"]]


def test_the_calls_sent_at_once_are_bounded_by_calls_at_once(sandbox: Sandbox) -> None:
    """400 ids, four 100-action calls, at most two in flight (the construct's ``max_workers``
    bounds the calls in flight). The barrier passes calls in pairs; with a third allowed in
    flight, it would be."""
    ids = [f"b{i}=" for i in range(400)]
    for connection_id in ids:
        claim(sandbox, connection_id)
    claims = ClaimBatcher(sandbox.ddb, OWNERSHIP_TABLE, clock=lambda: NOW, calls_at_once=2)
    barrier = threading.Barrier(2, timeout=30)
    lock = threading.Lock()
    in_flight = [0, 0]  # now, most

    def enter(**_: Any) -> None:
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
        barrier.wait()

    def leave(**_: Any) -> None:
        with lock:
            in_flight[0] -= 1

    sandbox.ddb.meta.events.register("before-call.dynamodb.TransactWriteItems", enter)
    sandbox.ddb.meta.events.register("after-call.dynamodb.TransactWriteItems", leave)

    assert claims.premark([(MINE, [ref(i) for i in ids])]) == 400
    assert in_flight[1] == 2
