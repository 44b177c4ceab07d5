"""The safety rules a mutation review found unpinned (issue 40), each as a test named after it.

A reviewer's one-line semantic changes to the critical path that passed every test; each test
here fails on such a change (the edit that breaks each rule is in docs/development.md,
"Mutation testing"). Real stream records from moto tables, real boto3 calls against moto's
DynamoDB (both tables), KMS, API Gateway Management API and EventBridge; stubbed, and said
where: what moto never answers (``UnprocessedKeys``, KMS's ``NotFoundException``) and a mark
call that fails outside botocore.

Rules 1 and 8 of the issue (the refusal classes of ``ownership.classify``) are pinned with the
rewrite of ``classify``; rule 7 (the store's grant claim) is in
``tests/store/test_safety_rules_store.py``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from botocore.awsrequest import AWSPreparedRequest
from ownership_support import calls_of, claim_state, emf_totals
from runtime_faults import answer, json_error
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
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, process_batch
from session_expiry_runtime.core.config import DEFAULT_GRANT_CONSISTENCY_SECONDS
from session_expiry_runtime.core.ownership import (
    KIND_CONNECTION,
    KIND_GRANT,
    STATE_HELD,
    STATE_RELEASED,
    STATE_RELEASING,
)


def session_lines(caplog: pytest.LogCaptureFixture) -> dict[str, dict[str, Any]]:
    """The one-line-per-session log of each session id (the last line of each)."""
    return {r.session["keys"]["pk"]: r.session for r in caplog.records if hasattr(r, "session")}


def failed(response: dict[str, Any]) -> list[str]:
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def removed(sandbox: Sandbox, *session_ids: str, **create: Any) -> list[dict[str, Any]]:
    """The REMOVE records (Lambda's shape) of new sessions ``session_ids``, deleted at once."""
    for session_id in session_ids:
        sandbox.create_session(session_id, **create)
    sandbox.read_stream()
    for session_id in session_ids:
        sandbox.delete(session_id)
    return sandbox.removes()


# --- rule 2: the owner comes from the record's Keys, never from the old image -----------------
def test_rule_owner_from_record_keys_not_image(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """A REMOVE whose old image is another live session's item (its key values, incarnation and
    ids) but whose ``Keys`` are its own: the claims name the image's key, not the ``Keys``, so
    every id is refused ``NotOwned`` (alarmed) and the live session keeps everything."""
    victim = sandbox.create_session("s-victim")  # live, its connection and grant claimed
    (record,) = removed(sandbox, "s-1", object_names=())
    # The image as the victim's item reads (Keys stay s-1's): what a writer able to put the
    # victim's values into a record's image would show the cleanup.
    record["dynamodb"]["OldImage"] = copy.deepcopy(victim.item)
    assert record["dynamodb"]["Keys"] == {"pk": {"S": "s-1"}}
    cleaner = sandbox.cleaner()
    closes = calls_of(cleaner.clients.apigateway)

    response = process_batch(event(record), FakeContext(), cleaner)

    assert response == {"batchItemFailures": []}  # refused for good, never retried
    assert closes == []
    assert sandbox.is_intact(victim)
    for kind, resource_id in (
        (KIND_CONNECTION, victim.connection_id),
        (KIND_GRANT, victim.grant_id),
    ):
        assert claim_state(sandbox.ddb, kind, resource_id) == STATE_HELD
    line = session_lines(session_logs)["s-1"]
    assert line["steps"]["DeleteConnection"] == "refused"
    assert line["steps"]["RetireGrant"] == "refused"
    totals = emf_totals(capsys.readouterr().out)
    assert totals["ResourcesRefused|Refusal=NotOwned"] == 2


# --- rule 3: keys BatchGetItem leaves unprocessed are not "no record" -------------------------
def unprocessed(request: AWSPreparedRequest) -> tuple[int, dict[str, str], bytes]:
    """DynamoDB's BatchGetItem answer that read nothing: every key back in ``UnprocessedKeys``
    (what it answers under throttling; moto never does)."""
    asked = json.loads(request.body)["RequestItems"]  # type: ignore[arg-type]
    body = {"Responses": {table: [] for table in asked}, "UnprocessedKeys": asked}
    return 200, {"content-type": "application/x-amz-json-1.0"}, json.dumps(body).encode()


def first_n(n: int, responder: Callable[[AWSPreparedRequest], Any]) -> Callable[..., Any]:
    left = [n]

    def respond(request: AWSPreparedRequest) -> Any:
        if left[0] <= 0:
            return None
        left[0] -= 1
        return responder(request)

    return respond


def young_grant_not_found(
    sandbox: Sandbox, age: float = 0
) -> tuple[Session, dict[str, Any], SessionCleaner]:
    """A session whose grant was claimed ``age`` seconds ago, removed; its cleaner's
    ``RetireGrant`` answers ``NotFoundException`` (stub: KMS does not show a new grant
    everywhere yet, or retired it before; moto would retire it at once)."""
    session = sandbox.create_session("s-1", object_names=())
    incarnation = str(session.incarnation)
    sandbox.claim(KIND_GRANT, session.grant_id, "s-1", incarnation, claimed_at=time.time() - age)
    sandbox.read_stream()
    sandbox.delete("s-1")
    (record,) = sandbox.removes()
    cleaner = sandbox.cleaner()
    answer(cleaner.clients.kms, "RetireGrant", lambda _: json_error(400, "NotFoundException"))
    return session, record, cleaner


def test_rule_unprocessed_claim_reads_are_never_no_record(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    """Every read of the young grant's claim comes back unprocessed: the claim's age is
    unknown, so the record fails (``Ownership``) and the claim stays this incarnation's, never
    released as if there were no record (which would count the ``NotFoundException`` as
    retired before)."""
    session, record, cleaner = young_grant_not_found(sandbox)
    reads = answer(cleaner.clients.ownership, "BatchGetItem", unprocessed)

    response = process_batch(event(record), FakeContext(), cleaner)

    assert failed(response) == [record["dynamodb"]["SequenceNumber"]]
    assert len(reads) == 4  # the first read and its retries, each unprocessed
    line = session_lines(session_logs)["s-1"]
    assert line["steps"]["RetireGrant"] == "failed"
    assert "UnprocessedKeys" in line["errors"]["Ownership"]
    assert claim_state(sandbox.ddb, KIND_GRANT, session.grant_id) == STATE_RELEASING


def test_rule_unprocessed_claim_reads_are_asked_again(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    """The first read leaves the young grant's claim unprocessed, the retry reads it: the
    claim is seconds old, so the ``NotFoundException`` hands the grant over to the grant sweep
    (eventual consistency, or a made-up id) and the claim is kept, not released."""
    session, record, cleaner = young_grant_not_found(sandbox)
    reads = answer(cleaner.clients.ownership, "BatchGetItem", first_n(1, unprocessed))
    calls = calls_of(cleaner.clients.ownership)

    response = process_batch(event(record), FakeContext(), cleaner)

    assert failed(response) == []
    assert len(reads) == 1 and [n for n, _ in calls].count("BatchGetItem") == 2
    line = session_lines(session_logs)["s-1"]
    assert "eventual consistency" in line["grantRefusal"]
    assert claim_state(sandbox.ddb, KIND_GRANT, session.grant_id) == STATE_RELEASING


# --- rule 4: a mark that fails outside botocore fails the record ------------------------------
class SocketBroke(Exception):
    """Not a botocore error: what a broken transport or a bug under the client may raise."""


@pytest.mark.parametrize("records", [1, 2], ids=["alone", "premarked-batch"])
def test_rule_mark_failure_outside_botocore_fails_the_record(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, records: int
) -> None:
    """The mark (``TransactWriteItems``) raises something that is no botocore error: every
    record it carried fails with ``Ownership``, and nothing is acted on unmarked."""
    sessions = [sandbox.create_session(f"s-{i}", object_names=()) for i in range(records)]
    sandbox.read_stream()
    for s in sessions:
        sandbox.delete(s.session_id)
    lambda_records = sandbox.removes()
    cleaner = sandbox.cleaner()
    acted = calls_of(cleaner.clients.apigateway) + calls_of(cleaner.clients.kms)
    marks: list[str] = []

    def broken(**_: Any) -> None:
        marks.append("TransactWriteItems")
        raise SocketBroke("connection reset under the client")

    cleaner.clients.ownership.meta.events.register(
        "before-call.dynamodb.TransactWriteItems", broken
    )

    response = process_batch(event(*lambda_records), FakeContext(), cleaner)

    assert sorted(failed(response)) == sorted(
        r["dynamodb"]["SequenceNumber"] for r in lambda_records
    )
    assert marks  # the mark was tried
    assert acted == []  # no DeleteConnection, no RetireGrant
    for s in sessions:
        assert sandbox.connection_exists(s.connection_id) and s.grant_id in sandbox.grant_ids()
        assert claim_state(sandbox.ddb, KIND_CONNECTION, s.connection_id) == STATE_HELD
        line = session_lines(session_logs)[s.session_id]
        assert "Ownership" in line["failedActions"]
        assert "connection reset under the client" in line["errors"]["Ownership"]


# --- rule 5: KMS's consistency window is five minutes -----------------------------------------
@pytest.mark.parametrize("age", [60, DEFAULT_GRANT_CONSISTENCY_SECONDS - 5])
def test_rule_grant_not_found_within_five_minutes_of_its_claim_is_handed_over(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, age: int
) -> None:
    """KMS: "usually less than five minutes" until a new grant is available everywhere. A
    ``NotFoundException`` for a grant claimed ``age`` seconds ago (inside the window) is not
    retired before, but the record is not failed either (it would hold its shard's later
    records): refused, the claim kept ``releasing`` and handed over to the grant sweep."""
    session, record, cleaner = young_grant_not_found(sandbox, age)

    response = process_batch(event(record), FakeContext(), cleaner)

    assert DEFAULT_GRANT_CONSISTENCY_SECONDS == 300
    assert failed(response) == []
    line = session_lines(session_logs)["s-1"]
    assert line["steps"]["RetireGrant"] == "refused" and "failedActions" not in line
    assert "eventual consistency" in line["grantRefusal"]
    assert claim_state(sandbox.ddb, KIND_GRANT, session.grant_id) == STATE_RELEASING


def test_rule_grant_not_found_after_five_minutes_is_already_done(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    """Past the window, ``NotFoundException`` means retired before: ``already-done``."""
    session, record, cleaner = young_grant_not_found(sandbox, DEFAULT_GRANT_CONSISTENCY_SECONDS + 5)

    assert failed(process_batch(event(record), FakeContext(), cleaner)) == []

    assert session_lines(session_logs)["s-1"]["steps"]["RetireGrant"] == "already-done"
    assert claim_state(sandbox.ddb, KIND_GRANT, session.grant_id) == STATE_RELEASED


# --- rule 6: records cleaned before the time guard stopped the fan-out are redelivered --------
BUS = "sessions-bus"


class DroppingContext(FakeContext):
    """Lambda's context whose remaining time drops below the time guard when told."""

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def test_rule_time_guard_before_fan_out_reports_cleaned_records_failed(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records are cleaned, then the remaining time falls below the guard before the
    events fan-out starts: no event is published, and every cleaned record is in
    ``batchItemFailures`` (``TimeGuard``), so its retry publishes its event."""
    SESSION.client("events").create_event_bus(Name=BUS)
    config = dataclasses.replace(
        sandbox.config,
        event_bus_arn=f"arn:aws:events:{REGION}:{DEFAULT_ACCOUNT_ID}:event-bus/{BUS}",
    )
    records = removed(sandbox, "s-0", "s-1", object_names=())
    cleaner = sandbox.cleaner(config)
    published = calls_of(cleaner.clients.events)
    context = DroppingContext()
    clean_records = batch._clean_records

    def then_out_of_time(*args: Any, **kwargs: Any) -> Any:
        results = clean_records(*args, **kwargs)
        context.remaining_ms = config.time_guard_ms - 1  # below the guard, before the fan-out
        return results

    monkeypatch.setattr(batch, "_clean_records", then_out_of_time)

    first = process_batch(event(*records), context, cleaner)

    assert sorted(failed(first)) == sorted(r["dynamodb"]["SequenceNumber"] for r in records)
    assert published == []
    for session_id in ("s-0", "s-1"):
        line = session_lines(session_logs)[session_id]
        assert line["failedActions"] == ["TimeGuard"]
        assert "fan-out did not start" in line["errors"]["TimeGuard"]
    # The redelivery: the steps find their work done, and the events go out.
    monkeypatch.setattr(batch, "_clean_records", clean_records)
    assert failed(process_batch(event(*records), FakeContext(), cleaner)) == []
    (put_events,) = published
    assert sorted(
        json.loads(entry["Detail"])["sessionKey"]["pk"] for entry in put_events[1]["Entries"]
    ) == ["s-0", "s-1"]
