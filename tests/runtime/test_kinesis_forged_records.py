"""Forged and colliding records on the Kinesis change source (review of issue 23).

The threat: someone who can put records into the Kinesis change stream (``kinesis:PutRecord``,
which a DynamoDB stream grants nobody) but holds no other permission. Records are real: the
session table's changes in moto, forwarded into a real moto Kinesis stream and read back as the
event source mapping delivers them (``test_kinesis_source.KinesisSource``), through the real
handler.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
from runtime_support import Sandbox
from session_expiry_runtime import handler as handler_module
from test_kinesis_source import KinesisSource, change, run


@pytest.fixture
def sandbox(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    box = Sandbox()
    for name, value in box.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(handler_module, "_cleaner", None)  # re-read the environment
    yield box


@pytest.fixture
def source(aws: None) -> KinesisSource:
    return KinesisSource()


def test_a_record_reusing_another_changes_event_id_does_not_hide_that_change(
    sandbox: Sandbox, source: KinesisSource, caplog: pytest.LogCaptureFixture
) -> None:
    """The in-batch de-duplication keyed on ``eventID`` alone: a record put ahead of a genuine
    REMOVE with its ``eventID`` but another session's key made the genuine one a
    ``DuplicateInBatch`` skip, and the session was never cleaned (nothing re-delivers it). A
    Kinesis duplicate is the same change (the same ``data``); another change is not one."""
    session = sandbox.create_session("s-1", expires_at=1)
    sandbox.delete("s-1")
    (remove,) = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    genuine = change(remove)
    forged = copy.deepcopy(genuine)
    forged["dynamodb"]["Keys"] = {"pk": {"S": "decoy"}}
    forged["dynamodb"]["OldImage"] = {"pk": {"S": "decoy"}, "expiresAt": {"N": "1"}}
    source.put(forged, partition_key="one-shard")
    source.put(genuine, partition_key="one-shard")

    responses, lines = run(source.batches(), caplog)

    assert responses == [{"batchItemFailures": []}]
    assert sandbox.is_clean(session)
    assert "DuplicateInBatch" not in [line.get("cause") for line in lines]


def test_an_identical_kinesis_duplicate_is_still_skipped_in_the_batch(
    sandbox: Sandbox, source: KinesisSource, caplog: pytest.LogCaptureFixture
) -> None:
    session = sandbox.create_session("s-1", expires_at=1)
    sandbox.delete("s-1")
    (remove,) = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    source.put(change(remove), partition_key="one-shard")
    source.put(change(remove), partition_key="one-shard")

    responses, lines = run(source.batches(), caplog)

    assert responses == [{"batchItemFailures": []}]
    assert sandbox.is_clean(session)
    assert [line.get("cause") for line in lines if line["outcome"] == "skipped"] == [
        "DuplicateInBatch"
    ]


@pytest.mark.xfail(
    strict=True,
    reason="review of issue 23, not fixed: a REMOVE put into the Kinesis change stream by "
    "anyone with kinesis:PutRecord is cleaned as if DynamoDB had written it. Its old image can "
    "name a live session's key, incarnation and ids exactly (they are in the item), so the "
    "ownership check passes and the live session's connection, grant and scratch objects are "
    "destroyed. The DynamoDB stream has no writer but DynamoDB; the S3 replay path guards the "
    "same threat with a consistent GetItem (removed_items.check_removed); the live Kinesis path "
    "has no such check (docs/security.md names the gap and who must not write the stream).",
)
def test_a_forged_remove_of_a_live_session_put_into_the_stream_touches_nothing(
    sandbox: Sandbox, source: KinesisSource, caplog: pytest.LogCaptureFixture
) -> None:
    live = sandbox.create_session("s-live")  # expires in an hour, still in the table
    (insert,) = sandbox.read_stream()
    forged = change(insert)
    forged["eventName"] = "REMOVE"
    forged["dynamodb"]["OldImage"] = forged["dynamodb"].pop("NewImage")
    source.put(forged)

    run(source.batches(), caplog)

    assert sandbox.is_intact(live)
