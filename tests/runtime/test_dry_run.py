"""Dry run of the cleanup (issue 6, kill switch): log and count what would be cleaned, change
nothing. Real stream records from moto, real boto3 calls; every call the cleanup makes is
recorded through botocore's event system to prove no change-making call is sent."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from ownership_support import claim_state
from runtime_faults import answer, s3_error, times
from runtime_support import FakeContext, Sandbox, event
from session_expiry_runtime import handler as handler_module
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, process_batch
from session_expiry_runtime.core.config import ENV_DRY_RUN
from session_expiry_runtime.core.ownership import KIND_CONNECTION, KIND_GRANT

#: The calls that change something; none may be sent in a dry run.
CHANGING = {
    "DeleteConnection",
    "RetireGrant",
    "DeleteObjects",
    "DeleteObject",
    "PutObject",
    "TransactWriteItems",
    "UpdateItem",
}


def record_calls(cleaner: SessionCleaner) -> list[str]:
    calls: list[str] = []
    clients = cleaner.clients
    for client in (clients.apigateway, clients.kms, clients.s3, clients.ownership):
        client.meta.events.register("before-call", lambda model, **_: calls.append(model.name))
    return calls


def session_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.session for r in caplog.records if hasattr(r, "session")]


def test_dry_run_changes_nothing_and_reports_what_it_would_clean(
    sandbox: Sandbox,
    session_logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ttl_deleted = sandbox.create_session("s-ttl", expires_at=1_700_000_000)
    ended = sandbox.create_session("s-end")
    sandbox.read_stream()
    sandbox.delete("s-ttl")
    sandbox.delete("s-end")
    records = sandbox.removes(ttl_deletes={"s-ttl"})
    cleaner = sandbox.cleaner(dataclasses.replace(sandbox.config, dry_run=True))
    calls = record_calls(cleaner)
    capsys.readouterr()

    response = process_batch(event(*records), FakeContext(), cleaner)

    # Consumed (not failed): the stream position moves on.
    assert response == {"batchItemFailures": []}
    assert sandbox.is_intact(ttl_deleted)
    assert sandbox.is_intact(ended)
    assert not CHANGING & set(calls)
    # Read-only: the scratch listing and the ownership records (one BatchGetItem for both
    # sessions' connection and grant claims, or one each when they did not meet).
    assert set(calls) == {"ListObjectsV2", "BatchGetItem"}
    assert 1 <= calls.count("BatchGetItem") <= 2
    for session in (ttl_deleted, ended):
        assert claim_state(sandbox.ddb, KIND_CONNECTION, session.connection_id) == "held"
        assert claim_state(sandbox.ddb, KIND_GRANT, session.grant_id) == "held"
    lines = {line["keys"]["pk"]: line for line in session_lines(session_logs)}
    for session_id, reason in (("s-ttl", "ttl"), ("s-end", "explicit")):
        line = lines[session_id]
        assert (line["outcome"], line["reason"]) == ("dry-run", reason)
        assert line["steps"] == {
            "DeleteConnection": "dry-run",
            "RetireGrant": "dry-run",
            "DeleteScratch": "dry-run",
        }
        assert line["objectsWouldBeDeleted"] == 2
        assert line["objectsDeleted"] == 0
        assert line["grantWouldBeRetired"] is True
    docs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    would = {
        d["Reason"]: d["SessionsWouldBeCleaned"] for d in docs if "SessionsWouldBeCleaned" in d
    }
    assert would == {"ttl": 1, "explicit": 1}
    assert not any("SessionsCleaned" in d or "ScratchObjectsDeleted" in d for d in docs)


def test_dry_run_off_by_default_cleans(sandbox: Sandbox) -> None:
    session = sandbox.create_session("s-1")
    sandbox.read_stream()
    sandbox.delete("s-1")
    assert sandbox.config.dry_run is False
    process_batch(event(*sandbox.removes()), FakeContext(), sandbox.cleaner())
    assert sandbox.is_clean(session)


def test_dry_run_from_the_environment(
    sandbox: Sandbox,
    fresh_handler: None,
    monkeypatch: pytest.MonkeyPatch,
    session_logs: pytest.LogCaptureFixture,
) -> None:
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(ENV_DRY_RUN, "true")
    session = sandbox.create_session("s-1")
    sandbox.read_stream()
    sandbox.delete("s-1")

    assert handler_module.handler(event(*sandbox.removes()), FakeContext()) == {
        "batchItemFailures": []
    }

    assert sandbox.is_intact(session)
    (line,) = session_lines(session_logs)
    assert line["outcome"] == "dry-run"


def test_dry_run_listing_failure_fails_the_record(sandbox: Sandbox) -> None:
    """A dry run still reads: a failing ListObjectsV2 fails the record, as in a real run."""
    sandbox.create_session("s-1")
    sandbox.read_stream()
    sandbox.delete("s-1")
    (record,) = sandbox.removes()
    cleaner = sandbox.cleaner(dataclasses.replace(sandbox.config, dry_run=True))
    answer(cleaner.clients.s3, "ListObjectsV2", times(1, s3_error(403, "AccessDenied")))

    response = process_batch(event(record), FakeContext(), cleaner)

    assert response == {
        "batchItemFailures": [{"itemIdentifier": record["dynamodb"]["SequenceNumber"]}]
    }
