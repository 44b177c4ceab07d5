"""The Bedrock session kind (issue 36): each Amazon Bedrock session-management session
(``bedrock-agent-runtime``) a removed session owned is ended, then deleted — only its own.

Through the real cleanup (``process_batch`` on real REMOVE records of moto's table and stream,
the ownership check against moto's ownership table); moto has no ``bedrock-agent-runtime``, so
the step's client is answered in-process by the emulator's
`cdk_session_expiry.testing.bedrock_sessions` (``attach``), in AWS's wire format.
"""

from __future__ import annotations

from typing import Any

import pytest
from bedrock_support import (
    ACTION,
    ATTRIBUTE,
    KIND,
    bedrock_cleaner,
    bedrock_client,
    bedrock_config,
    new_bedrock_session,
    removed_naming,
)
from runtime_support import FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import process_batch
from session_expiry_runtime.store import ResourceOwnedError, SessionStore

from cdk_session_expiry.testing.bedrock_sessions import ACTIVE, BedrockSessions


@pytest.fixture
def sessions() -> BedrockSessions:
    return BedrockSessions("123456789012")


def _run(cleaner: Any, *records: dict[str, Any]) -> list[str]:
    response = process_batch(event(*records), FakeContext(), cleaner)
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def _lines(logs: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.session for r in logs.records if hasattr(r, "session")]


def _calls(sessions: BedrockSessions) -> list[tuple[str, str | None, int]]:
    return [(c.operation, c.session_id, c.status) for c in sessions.calls]


def test_each_owned_session_is_ended_then_deleted_once(
    sandbox: Sandbox, sessions: BedrockSessions, session_logs: pytest.LogCaptureFixture
) -> None:
    first, second = new_bedrock_session(sessions, steps=3), new_bedrock_session(sessions)
    record = removed_naming(sandbox, "s-1", [first, second])
    cleaner = bedrock_cleaner(sandbox, sessions)
    sessions.calls.clear()

    assert _run(cleaner, record) == []

    assert sessions.session_ids() == set()  # the sessions, their invocations and steps
    assert _calls(sessions) == [
        call
        for s in sorted([first, second])
        for call in [("EndSession", s, 200), ("DeleteSession", s, 200)]
    ]
    (line,) = _lines(session_logs)
    assert line["steps"][ACTION] == "done"
    # Delivered again: the claims were released, so no call at all, and still a success.
    sessions.calls.clear()
    session_logs.clear()
    assert _run(cleaner, record) == []
    assert sessions.calls == []
    (line,) = _lines(session_logs)
    assert line["steps"][ACTION] == "already-done"


def test_a_session_already_gone_or_already_ended_is_done(
    sandbox: Sandbox, sessions: BedrockSessions, session_logs: pytest.LogCaptureFixture
) -> None:
    gone, ended, expired = (new_bedrock_session(sessions) for _ in range(3))
    client = bedrock_client(sessions)
    client.end_session(sessionIdentifier=gone)
    client.delete_session(sessionIdentifier=gone)  # deleted by someone else meanwhile
    client.end_session(sessionIdentifier=ended)  # the application ended it itself
    sessions.expire(expired)
    record = removed_naming(sandbox, "s-2", [gone, ended, expired])
    sessions.calls.clear()

    assert _run(bedrock_cleaner(sandbox, sessions), record) == []

    assert sessions.session_ids() == set()
    calls = _calls(sessions)
    assert ("EndSession", gone, 404) in calls and ("DeleteSession", gone, 404) not in calls
    for session_id in (ended, expired):  # EndSession's conflict goes on to the delete
        assert ("EndSession", session_id, 409) in calls
        assert ("DeleteSession", session_id, 200) in calls
    (line,) = _lines(session_logs)
    assert line["steps"][ACTION] == "done"


def test_another_sessions_bedrock_session_is_refused_and_kept(
    sandbox: Sandbox, sessions: BedrockSessions, session_logs: pytest.LogCaptureFixture
) -> None:
    """s-1 names s-2's Bedrock session beside its own (a forged item): s-2's conversation stays,
    the refusal is counted and logged as NotOwned."""
    theirs = new_bedrock_session(sessions, steps=2)
    removed_naming(sandbox, "s-2", [theirs], remove=False)
    ours = new_bedrock_session(sessions)
    record = removed_naming(sandbox, "s-1", [ours, theirs], claim=[ours])
    sessions.calls.clear()

    assert _run(bedrock_cleaner(sandbox, sessions), record) == []

    assert sessions.status(theirs) == ACTIVE
    assert sessions.steps(theirs) == 2
    assert sessions.status(ours) is None
    assert all(c.session_id != theirs for c in sessions.calls)
    (line,) = _lines(session_logs)
    assert line["ownership"][ACTION] == {theirs: "NotOwned"}


def test_reuse_after_expiry_leaves_the_successors_session(
    sandbox: Sandbox, sessions: BedrockSessions, session_logs: pytest.LogCaptureFixture
) -> None:
    """The session id s-3 is used again after it expired and its successor took the Bedrock
    session over (its ownership record names the new incarnation): the late REMOVE of the
    expired one leaves it (Superseded), and deletes the one only the expired incarnation held."""
    carried_over = new_bedrock_session(sessions, steps=4)
    only_old = new_bedrock_session(sessions)
    record = removed_naming(
        sandbox, "s-3", [carried_over, only_old], successor_holds=[carried_over]
    )

    assert _run(bedrock_cleaner(sandbox, sessions), record) == []

    assert (sessions.status(carried_over), sessions.steps(carried_over)) == (ACTIVE, 4)
    assert sessions.status(only_old) is None
    (line,) = _lines(session_logs)
    assert line["ownership"][ACTION] == {carried_over: "Superseded"}


def test_a_failure_fails_only_its_record_and_the_retry_finishes(
    sandbox: Sandbox, sessions: BedrockSessions, session_logs: pytest.LogCaptureFixture
) -> None:
    denied, fine = new_bedrock_session(sessions), new_bedrock_session(sessions)
    failing = removed_naming(sandbox, "s-4", [denied])
    cleaned = removed_naming(sandbox, "s-5", [fine])
    cleaner = bedrock_cleaner(sandbox, sessions)
    sessions.refuse(denied)  # AccessDeniedException, as a missing permission answers

    assert _run(cleaner, failing, cleaned) == [failing["dynamodb"]["SequenceNumber"]]

    assert sessions.status(denied) == ACTIVE
    assert sessions.status(fine) is None
    by_session = {line["keys"]["pk"]: line for line in _lines(session_logs)}
    assert by_session["s-4"]["outcome"] == "failed"
    assert ACTION in by_session["s-4"]["failedActions"]
    assert "AccessDeniedException" in str(by_session["s-4"]["errors"])
    assert by_session["s-5"]["outcome"] == "cleaned"

    sessions.allow(denied)  # the permission fixed: the redelivered record ends and deletes
    assert _run(cleaner, failing) == []
    assert sessions.status(denied) is None


def test_an_id_that_is_not_a_session_id_is_never_sent(
    sandbox: Sandbox, sessions: BedrockSessions, session_logs: pytest.LogCaptureFixture
) -> None:
    real = new_bedrock_session(sessions)
    record = removed_naming(sandbox, "s-6", [real, "not-a-uuid"], claim=[real])
    sessions.calls.clear()

    assert _run(bedrock_cleaner(sandbox, sessions), record) == []

    assert [c.session_id for c in sessions.calls] == [real, real]
    (line,) = _lines(session_logs)
    assert ATTRIBUTE in line["invalidAttributes"]
    assert sessions.status(real) is None


def test_the_store_records_a_bedrock_session_with_its_ownership_record(
    sandbox: Sandbox, sessions: BedrockSessions
) -> None:
    store = SessionStore(config=bedrock_config(sandbox), dynamodb_client=sandbox.ddb)
    store.create("s-7")
    bedrock_id = new_bedrock_session(sessions)
    session = store.attach_resource("s-7", KIND, bedrock_id)
    assert session.attributes[ATTRIBUTE] == {bedrock_id}
    store.create("s-8")
    with pytest.raises(ResourceOwnedError, match="Bedrock session"):
        store.attach_resource("s-8", KIND, bedrock_id)
    store.end("s-7")
    (record,) = [r for r in sandbox.removes() if r["dynamodb"]["Keys"]["pk"]["S"] == "s-7"]

    assert _run(bedrock_cleaner(sandbox, sessions), record) == []
    assert sessions.status(bedrock_id) is None


def test_fails_to_record_an_id_that_is_not_a_bedrock_session_id(sandbox: Sandbox) -> None:
    store = SessionStore(config=bedrock_config(sandbox), dynamodb_client=sandbox.ddb)
    store.create("s-9")
    arn = "arn:aws:bedrock:us-east-1:123456789012:session/0b5e6c1a-6b8f-4b8e-9d9a-2f1e0c3d4a5b"
    with pytest.raises(ValueError, match=r"Bedrock session id 'arn:.*': expected a session id"):
        store.attach_resource("s-9", KIND, arn)


def test_fails_to_record_a_bedrock_session_without_the_kind_switched_on(sandbox: Sandbox) -> None:
    store = SessionStore(config=sandbox.config, dynamodb_client=sandbox.ddb)
    store.create("s-10")
    with pytest.raises(ValueError, match=r"'bedrockSession': its target is not configured"):
        store.attach_resource("s-10", KIND, "0b5e6c1a-6b8f-4b8e-9d9a-2f1e0c3d4a5b")
