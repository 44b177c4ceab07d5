"""A Kinesis ``REMOVE`` of another incarnation than the live one must prove it existed (issue 35,
the threat model's row "writer of the Kinesis change stream").

A writer allowed only ``kinesis:PutRecord`` on the change stream put a ``REMOVE`` of tenant B's
live key with a made-up incarnation. B's session was created 5 minutes before the record arrived
in Kinesis: within the arrival slack the read-back allows for DynamoDB's delivery into Kinesis
(`kinesis_removals.ARRIVAL_SLACK_SECONDS`), so the record passed as a real removal of an
earlier incarnation: counted cleaned, archived and published as an ended session. Now such a
record is accepted only with proof that its incarnation existed, from facts its writer does not
write: B's own item naming it as the incarnation it replaced (``previousIncarnation``, written by
``SessionStore.create``), or an ownership record naming the record's key and incarnation.

Records are real: the session table's changes in moto, forwarded into a real moto Kinesis stream
and delivered as the event source mapping does (``test_kinesis_source.KinesisSource``), through
the real handler with the archive and the fan-out on.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from ownership_support import claim_state, emf_totals
from runtime_support import TABLE, Sandbox
from session_expiry_runtime import handler as handler_module
from session_expiry_runtime.core.config import PREVIOUS_INCARNATION_ATTRIBUTE
from session_expiry_runtime.core.ownership import KIND_CONNECTION, KIND_GRANT, STATE_HELD
from session_expiry_runtime.store import SessionStore
from test_archive import ARCHIVE_BUCKET
from test_events import BUS_ARN, Bus
from test_kinesis_source import KinesisSource, change, run

LIFETIME = 8 * 3600


@pytest.fixture
def sandbox(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    box = Sandbox()
    box.s3.create_bucket(Bucket=ARCHIVE_BUCKET)
    env = {
        **box.env(),
        "SESSION_EXPIRY_ARCHIVE_BUCKET": ARCHIVE_BUCKET,
        "SESSION_EXPIRY_EVENT_BUS_ARN": BUS_ARN,
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(handler_module, "_cleaner", None)  # re-read the environment
    yield box


@pytest.fixture
def source(aws: None) -> KinesisSource:
    return KinesisSource()


@pytest.fixture
def bus(sandbox: Sandbox) -> Bus:
    return Bus(sandbox)


def archived(sandbox: Sandbox) -> list[str]:
    page = sandbox.s3.list_objects_v2(Bucket=ARCHIVE_BUCKET)
    return [o["Key"] for o in page.get("Contents", [])]


def created_ago(sandbox: Sandbox, session_id: str, seconds: int) -> None:
    """Make the live item say it was created ``seconds`` ago (``SessionStore`` writes
    ``notAfter`` = creation + the maximum lifetime, 8 hours by default)."""
    sandbox.ddb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": session_id}},
        UpdateExpression="SET notAfter = :na",
        ExpressionAttributeValues={":na": {"N": str(int(time.time()) - seconds + LIFETIME)}},
    )


def test_a_forged_remove_with_a_made_up_incarnation_of_a_key_created_5_minutes_before_is_refused(
    sandbox: Sandbox,
    source: KinesisSource,
    bus: Bus,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    live = sandbox.create_session("tenant-b-1")
    (insert,) = sandbox.read_stream()
    created_ago(sandbox, "tenant-b-1", 5 * 60)
    forged = change(insert)
    forged["eventName"] = "REMOVE"
    image = forged["dynamodb"].pop("NewImage")
    forged["dynamodb"]["OldImage"] = {**image, "incarnation": {"S": "0" * 32}}
    source.put(forged)
    capsys.readouterr()

    responses, lines = run(source.batches(), caplog)

    assert responses == [{"batchItemFailures": []}]
    ((line,),) = [[x for x in lines if "outcome" in x]]
    assert (line["outcome"], line["cause"], line["readBack"]) == (
        "skipped",
        "ItemStillInTable",
        "unproven",
    )
    totals = emf_totals(capsys.readouterr().out)
    assert totals["RecordsSkipped|Cause=ItemStillInTable"] == 1  # the skipped-records alarm's
    assert "SessionsCleaned" not in totals and "SessionsArchived" not in totals
    assert archived(sandbox) == [] and bus.received() == []
    assert sandbox.is_intact(live)
    assert claim_state(sandbox.ddb, KIND_CONNECTION, live.connection_id) == STATE_HELD
    assert claim_state(sandbox.ddb, KIND_GRANT, live.grant_id) == STATE_HELD


@pytest.mark.parametrize("proof", ["kept", "stripped"])
def test_a_genuine_remove_of_the_incarnation_the_store_replaced_is_proven_by_the_new_item(
    sandbox: Sandbox,
    source: KinesisSource,
    bus: Bus,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    proof: str,
) -> None:
    """Create, expire, create again with the same id (`SessionStore`, no ids: no claim can
    prove anything), then X's real REMOVE (written by the store's reuse) reaches Kinesis after
    Y exists. Y's item names X as the incarnation it replaced: cleaned, archived, published.
    Control: the same with Y's ``previousIncarnation`` stripped is refused (unproven)."""
    store = SessionStore(config=sandbox.config, dynamodb_client=sandbox.ddb)
    first = store.create("s-1")
    sandbox.put_objects([f"{first.scratch_prefix}a.txt"])
    sandbox.ddb.update_item(  # expired: its time to live has passed
        TableName=TABLE,
        Key={"pk": {"S": "s-1"}},
        UpdateExpression="SET expiresAt = :past",
        ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 1)}},
    )
    sandbox.read_stream()
    second = store.create("s-1")
    held = sandbox.ddb.get_item(TableName=TABLE, Key={"pk": {"S": "s-1"}})["Item"]
    assert held[PREVIOUS_INCARNATION_ATTRIBUTE] == {"S": first.incarnation}
    if proof == "stripped":
        sandbox.ddb.update_item(
            TableName=TABLE,
            Key={"pk": {"S": "s-1"}},
            UpdateExpression="REMOVE previousIncarnation",
        )
    (remove,) = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    assert remove["dynamodb"]["OldImage"]["incarnation"] == {"S": first.incarnation}
    source.put(change(remove))
    capsys.readouterr()

    responses, lines = run(source.batches(), caplog)

    assert responses == [{"batchItemFailures": []}]
    ((line,),) = [[x for x in lines if "outcome" in x]]
    totals = emf_totals(capsys.readouterr().out)
    if proof == "kept":
        assert line["outcome"] == "cleaned"
        assert totals["SessionsArchived"] == 1 and len(archived(sandbox)) == 1
        assert [e["detail"]["sessionKey"] for e in bus.received()] == [{"pk": "s-1"}]
        assert sandbox.keys_under(str(first.scratch_prefix)) == []
    else:
        assert (line["cause"], line["readBack"]) == ("ItemStillInTable", "unproven")
        assert archived(sandbox) == [] and bus.received() == []
        assert sandbox.keys_under(str(first.scratch_prefix)) != []
    assert store.get("s-1", consistent=True) == second


@pytest.mark.parametrize("claims", ["owner", "formerOwners", "none"])
def test_a_genuine_remove_of_a_session_with_ids_is_proven_by_its_claims(
    sandbox: Sandbox,
    source: KinesisSource,
    bus: Bus,
    caplog: pytest.LogCaptureFixture,
    claims: str,
) -> None:
    """X (a connection and a grant, claimed) is removed by its time to live and its key created
    again around the store (no ``previousIncarnation``) before X's REMOVE reaches Kinesis. X's
    claims name its key and incarnation (``owner``: still X's; ``formerOwners``: Y took the
    connection over and the grant's record is gone), which proves X existed: cleaned. Control:
    with no claim naming X (``none``), the record is refused (unproven)."""
    old = sandbox.create_session("s-1", expires_at=1)
    sandbox.delete("s-1")
    (remove,) = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    new = sandbox.create_session("s-1", prefix="sessions/s-1/i2/")
    sandbox.read_stream()
    assert old.incarnation is not None and new.incarnation is not None
    if claims != "owner":
        for kind, resource_id in ((KIND_CONNECTION, old.connection_id), (KIND_GRANT, old.grant_id)):
            sandbox.ddb.delete_item(
                TableName="session-ownership", Key={"resource": {"S": f"{kind}#{resource_id}"}}
            )
    if claims == "formerOwners":
        from session_expiry_runtime.core.ownership import former_owner, owner_token

        sandbox.claim(
            KIND_CONNECTION,
            old.connection_id,
            "s-1",
            new.incarnation,
            former_owners=(former_owner(owner_token({"pk": "s-1"}), old.incarnation),),
        )
    source.put(change(remove))

    responses, lines = run(source.batches(), caplog)

    assert responses == [{"batchItemFailures": []}]
    ((line,),) = [[x for x in lines if "outcome" in x]]
    assert sandbox.is_intact(new)
    if claims == "none":
        assert (line["cause"], line["readBack"]) == ("ItemStillInTable", "unproven")
        assert archived(sandbox) == [] and bus.received() == []
        assert sandbox.keys_under(old.prefix) == sorted(old.keys)
    else:
        assert line["outcome"] == "cleaned"
        assert len(archived(sandbox)) == 1 and len(bus.received()) == 1
        assert sandbox.keys_under(old.prefix) == []


def test_a_session_created_after_the_record_arrived_needs_no_proof(
    sandbox: Sandbox, source: KinesisSource, bus: Bus, caplog: pytest.LogCaptureFixture
) -> None:
    """The record was in Kinesis before the key's live session was created: it cannot be a copy
    of it. X (no ids: no claim) was removed by its time to live, not by the store, so Y names
    nothing either; still cleaned, archived and published."""
    store = SessionStore(config=sandbox.config, dynamodb_client=sandbox.ddb)
    store.create("s-1")
    sandbox.read_stream()
    sandbox.delete("s-1")  # as its time to live would
    (remove,) = sandbox.read_stream()
    store.create("s-1")
    created_ago(sandbox, "s-1", 5)  # created 5 seconds ago ...
    source.put(change(remove))
    (batch,) = source.batches()
    for delivered in batch:  # ... after the record arrived, 10 seconds ago
        delivered["kinesis"]["approximateArrivalTimestamp"] = time.time() - 10

    responses, lines = run([batch], caplog)

    assert responses == [{"batchItemFailures": []}]
    ((line,),) = [[x for x in lines if "outcome" in x]]
    assert line["outcome"] == "cleaned" and "readBack" not in line
    assert len(archived(sandbox)) == 1 and len(bus.received()) == 1


def pure_record(arrival: int) -> Any:
    from session_expiry_runtime.core.decode import parse_record

    return parse_record(
        {
            "eventName": "REMOVE",
            "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/changes",
            "kinesisArrivalTime": arrival,
            "dynamodb": {"Keys": {"pk": {"S": "k"}}},
        }
    )


@pytest.mark.parametrize(
    ("created", "replaced", "expected"),
    [
        (10_000, None, "gone"),  # created at the arrival
        (9_999, None, "unproven"),  # a second before: needs proof
        (9_999, "x", "gone"),  # ... which the held item gives
        (10_000 - 15 * 60, None, "unproven"),  # at the slack's edge
        (10_000 - 15 * 60 - 1, "x", "held"),  # beyond it: held, whatever the item says
    ],
)
def test_the_read_back_rule_at_its_edges(created: int, replaced: str | None, expected: str) -> None:
    from decimal import Decimal

    from session_expiry_runtime.records.kinesis_removals import RemovalCheck, _identity

    check = RemovalCheck(None, "t", ["pk"], "incarnation", max_lifetime_seconds=100)
    check._read[_identity({"pk": {"S": "k"}})] = ("y", Decimal(created + 100), replaced)

    assert check.removal(pure_record(10_000), "x") == expected


def test_a_made_up_incarnation_of_a_key_dated_in_the_future_is_refused(
    sandbox: Sandbox,
    source: KinesisSource,
    bus: Bus,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The store's maximum lifetime was larger than the cleanup's (24 hours then, 8 now:
    ``max_session_lifetime`` lowered at a deploy, or a store configured on its own): the live
    session, created 5 minutes ago, is dated 16 hours from now, so a forged REMOVE of its key
    with a made-up incarnation looked as if it arrived before the session existed and passed
    unproven: counted cleaned, archived and published, nothing alarmed. A creation date past
    the read-back itself cannot be true: the session cannot be placed in time, held."""
    live = sandbox.create_session("tenant-b-1")
    (insert,) = sandbox.read_stream()
    created_ago(sandbox, "tenant-b-1", 5 * 60 - 16 * 3600)  # 24-hour notAfter, 8-hour cleanup
    forged = change(insert)
    forged["eventName"] = "REMOVE"
    image = forged["dynamodb"].pop("NewImage")
    forged["dynamodb"]["OldImage"] = {**image, "incarnation": {"S": "0" * 32}}
    source.put(forged)
    capsys.readouterr()

    responses, lines = run(source.batches(), caplog)

    assert responses == [{"batchItemFailures": []}]
    ((line,),) = [[x for x in lines if "outcome" in x]]
    assert (line["outcome"], line["cause"], line["readBack"]) == (
        "skipped",
        "ItemStillInTable",
        "held",
    )
    totals = emf_totals(capsys.readouterr().out)
    assert "SessionsCleaned" not in totals and "SessionsArchived" not in totals
    assert archived(sandbox) == [] and bus.received() == []
    assert sandbox.is_intact(live)


@pytest.mark.parametrize(("created", "expected"), [(10_000, "gone"), (10_001, "held")])
def test_a_session_dated_after_the_read_back_cannot_be_placed(created: int, expected: str) -> None:
    from decimal import Decimal

    from session_expiry_runtime.records.kinesis_removals import RemovalCheck, _identity

    check = RemovalCheck(
        None, "t", ["pk"], "incarnation", max_lifetime_seconds=100, clock=lambda: 10_000.5
    )
    check._read[_identity({"pk": {"S": "k"}})] = ("y", Decimal(created + 100), None)

    assert check.removal(pure_record(9_990), "x") == expected
