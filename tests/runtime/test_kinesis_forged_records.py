"""Forged and colliding records on the Kinesis change source (review of issue 23).

The threat: someone who can put records into the Kinesis change stream (``kinesis:PutRecord``,
which a DynamoDB stream grants nobody) but holds no other permission. Records are real: the
session table's changes in moto, forwarded into a real moto Kinesis stream and read back as the
event source mapping delivers them (``test_kinesis_source.KinesisSource``), through the real
handler.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import pytest
from runtime_faults import answer, json_error
from runtime_support import Sandbox
from session_expiry_runtime import handler as handler_module
from test_kinesis_source import KinesisSource, change, run

from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.monitoring.alarms import LOST_CLEANUP_CAUSES


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


def test_a_forged_remove_of_a_live_session_put_into_the_stream_touches_nothing(
    sandbox: Sandbox, source: KinesisSource, caplog: pytest.LogCaptureFixture
) -> None:
    live = sandbox.create_session("s-live")  # expires in an hour, still in the table
    (insert,) = sandbox.read_stream()
    forged = change(insert)
    forged["eventName"] = "REMOVE"
    forged["dynamodb"]["OldImage"] = forged["dynamodb"].pop("NewImage")
    source.put(forged)

    responses, _ = run(source.batches(), caplog)

    # kinesis_removals: the item was read back (strongly consistent) and is still there with
    # the image's incarnation: the removal did not happen. Skipped (not failed: a retry would
    # find the same), counted under a cause the skipped-records alarm watches.
    assert sandbox.is_intact(live)
    assert responses == [{"batchItemFailures": []}]
    ((line, level),) = [(r.session, r.levelname) for r in caplog.records if hasattr(r, "session")]
    assert line["outcome"] == "skipped" and line["cause"] == "ItemStillInTable"
    assert level == "WARNING"
    assert contract.CAUSE_ITEM_STILL_IN_TABLE in LOST_CLEANUP_CAUSES


def test_a_genuine_remove_of_an_earlier_incarnation_is_cleaned_though_the_key_is_live_again(
    sandbox: Sandbox, source: KinesisSource, caplog: pytest.LogCaptureFixture
) -> None:
    """Kinesis may deliver an old incarnation's REMOVE after the same key was created again:
    the table holds an item under the key, but with another incarnation. The removal is real;
    the ownership check keeps the new incarnation's resources."""
    old = sandbox.create_session("s-1", expires_at=1)
    sandbox.delete("s-1")
    (remove,) = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    new = sandbox.create_session("s-1", prefix="sessions/s-1/i2/")
    sandbox.read_stream()
    source.put(change(remove))

    responses, _ = run(source.batches(), caplog)

    assert responses == [{"batchItemFailures": []}]
    assert sandbox.is_clean(old)
    assert sandbox.is_intact(new)


@pytest.mark.parametrize("incarnation", ["0" * 32, "made-up", None])
def test_a_forged_remove_with_a_made_up_incarnation_of_a_live_key_touches_nothing(
    sandbox: Sandbox,
    source: KinesisSource,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    incarnation: str | None,
) -> None:
    """Issue 35, route 4: a copy of a live item with a made-up incarnation passed the
    read-back ("another incarnation is in the table"), was refused only as Superseded and was
    counted as a cleaned session. The live session was created long before the record arrived
    in Kinesis (its notAfter says when, Kinesis's arrival time says when the record came), so
    the removal did not happen: skipped, alarmed, nothing called, nothing counted cleaned."""
    live = sandbox.create_session("s-live")
    (insert,) = sandbox.read_stream()
    forged = change(insert)
    forged["eventName"] = "REMOVE"
    image = forged["dynamodb"].pop("NewImage")
    if incarnation is None:
        image.pop("incarnation")  # a "legacy" copy without one: the item is held, skipped too
    else:
        image["incarnation"] = {"S": incarnation}
    forged["dynamodb"]["OldImage"] = image
    # The live session was created an hour ago (SessionStore's notAfter: creation + 8 hours);
    # the forged record arrives in Kinesis now.
    sandbox.ddb.update_item(
        TableName="sessions",
        Key={"pk": {"S": "s-live"}},
        UpdateExpression="SET notAfter = :na",
        ExpressionAttributeValues={":na": {"N": str(int(time.time()) - 3600 + 8 * 3600)}},
    )
    source.put(forged)
    capsys.readouterr()

    responses, lines = run(source.batches(), caplog)

    assert responses == [{"batchItemFailures": []}]
    assert sandbox.is_intact(live)
    ((line,),) = [[x for x in lines if "outcome" in x]]
    assert line["outcome"] == "skipped" and line["cause"] == "ItemStillInTable"
    assert "SessionsCleaned" not in capsys.readouterr().out


def test_forged_and_genuine_removes_in_one_batch_are_read_back_in_one_call(
    sandbox: Sandbox, source: KinesisSource, caplog: pytest.LogCaptureFixture
) -> None:
    live = sandbox.create_session("s-live")
    gone = [sandbox.create_session(f"s-{i}", expires_at=1) for i in range(3)]
    (insert, *_) = sandbox.read_stream()
    for s in gone:
        sandbox.delete(s.session_id)
    removes = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    forged = change(insert)
    forged["eventName"] = "REMOVE"
    forged["dynamodb"]["OldImage"] = forged["dynamodb"].pop("NewImage")
    for record in [forged, *map(change, removes)]:
        source.put(record, partition_key="one-shard")
    reads: list[int] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        for request in params.get("RequestItems", {}).values():
            reads.append(len(request["Keys"]))

    handler_module.get_cleaner().clients.table.meta.events.register(
        "provide-client-params.dynamodb.BatchGetItem", count
    )

    responses, lines = run(source.batches(), caplog)

    assert responses == [{"batchItemFailures": []}]
    assert sandbox.is_intact(live) and all(sandbox.is_clean(s) for s in gone)
    assert reads == [4]  # the whole batch's keys in one BatchGetItem
    causes = sorted(line.get("cause") or line["outcome"] for line in lines)
    assert causes == ["ItemStillInTable", "cleaned", "cleaned", "cleaned"]


def test_fails_a_kinesis_remove_whose_item_cannot_be_read_back_and_touches_nothing(
    sandbox: Sandbox, source: KinesisSource, caplog: pytest.LogCaptureFixture
) -> None:
    session = sandbox.create_session("s-1", expires_at=1)
    sandbox.delete("s-1")
    (remove,) = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    source.put(change(remove))
    cleaner = handler_module.get_cleaner()
    # Stub: the read-back refused (moto enforces no IAM): e.g. a role without BatchGetItem.
    answer(
        cleaner.clients.table,
        "BatchGetItem",
        lambda _: json_error(400, "AccessDeniedException"),
    )

    responses, lines = run(source.batches(), caplog)

    assert len(responses[0]["batchItemFailures"]) == 1
    assert sandbox.is_intact(session)
    (line,) = lines
    assert line["failedActions"] == ["Ownership"]
    assert "AccessDeniedException" in line["errors"]["Ownership"]
