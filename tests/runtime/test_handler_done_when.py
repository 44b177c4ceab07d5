"""Issue 2 "Done when": a real session item deleted in moto, its stream record handed to the
real handler entry point, leaves its connection deleted, its grant retired and its scratch
objects gone, while another session's objects under the neighbouring prefix remain."""

from __future__ import annotations

import json

import pytest
from runtime_support import TTL_IDENTITY, FakeContext, Sandbox, event
from session_expiry_runtime.handler import handler


def test_deleted_session_is_cleaned_and_neighbour_prefix_survives(
    sandbox: Sandbox,
    fresh_handler: None,
    monkeypatch: pytest.MonkeyPatch,
    session_logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    # Neighbouring prefixes: "sessions/s-1/..." must never take "sessions/s-10/..." with it.
    gone = sandbox.create_session(
        "s-1", prefix="sessions/s-1/i1/", object_names=("a", "b c", "d+e%")
    )
    kept = sandbox.create_session("s-10", prefix="sessions/s-10/i1/", object_names=("a", "b"))
    assert sandbox.is_intact(gone) and sandbox.is_intact(kept)
    sandbox.read_stream()  # consume the INSERTs

    sandbox.delete("s-1")
    (record,) = sandbox.lambda_records()
    assert record["eventName"] == "REMOVE" and "OldImage" in record["dynamodb"]

    response = handler(event(record), FakeContext())

    assert response == {"batchItemFailures": []}
    assert not sandbox.connection_exists(gone.connection_id)
    assert gone.grant_id not in sandbox.grant_ids()
    assert sandbox.keys_under("sessions/s-1/") == []
    assert sandbox.is_intact(kept)
    assert sorted(sandbox.keys_under("sessions/s-10/")) == [
        "sessions/s-10/i1/a",
        "sessions/s-10/i1/b",
    ]

    (line,) = [r.session for r in session_logs.records if hasattr(r, "session")]
    assert line["outcome"] == "cleaned"
    assert line["reason"] == "explicit"
    assert line["steps"] == {
        "DeleteConnection": "done",
        "RetireGrant": "done",
        "DeleteScratch": "done",
    }
    assert line["objectsDeleted"] == 3
    assert line["sequenceNumber"] == record["dynamodb"]["SequenceNumber"]
    assert "grantToken" not in json.dumps(line)  # the bearer token never reaches the logs

    emf = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    cleaned = [d for d in emf if d.get("Reason") == "explicit"]
    assert cleaned and cleaned[0]["SessionsCleaned"] == 1


def test_ttl_deleted_session_reports_reason_and_lag(
    sandbox: Sandbox,
    fresh_handler: None,
    monkeypatch: pytest.MonkeyPatch,
    session_logs: pytest.LogCaptureFixture,
) -> None:
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    expired = sandbox.create_session("s-ttl", expires_at=1_700_000_000)
    sandbox.read_stream()
    sandbox.delete("s-ttl")
    (record,) = sandbox.lambda_records(ttl_deletes={"s-ttl"})
    assert record["userIdentity"] == TTL_IDENTITY

    assert handler(event(record), FakeContext()) == {"batchItemFailures": []}

    assert sandbox.is_clean(expired)
    (line,) = [r.session for r in session_logs.records if hasattr(r, "session")]
    assert line["reason"] == "ttl"
    created = record["dynamodb"]["ApproximateCreationDateTime"]
    assert line["ttlLagSeconds"] == created - 1_700_000_000
