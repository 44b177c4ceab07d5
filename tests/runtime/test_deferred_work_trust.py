"""What the drain of deferred work trusts ("deferred work only the cleanup writes, verified before
it acts"), through the real handler's drain in moto.

A reviewer showed that a writer confined to tenant A could put a deferred item holding a made-up
``REMOVE`` of tenant B's **live** session (its key and incarnation read from a claim), and the
next drain closed B's connection, deleted its scratch objects and released its claims. The drain
now reads each record's ``Keys`` back from the session table first (strongly consistent) and
refuses what it cannot prove removed: nothing called, ``DeferredWorkRefused`` counted, a WARNING
line with the key and the reason, the item kept for an operator and never taken again. A real
deferral, or a later incarnation in the key's place, is still drained; a read that fails leaves
the item for the next drain, with no refusal.

The forged items are written with the drain's own store (the cleaner's ``deferrals``: the format
the cleanup writes), as a writer of that table would; IAM keeps application roles off the table
(``tests/infra/test_deferred_work_table.py``), which moto does not enforce.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from flags_support import DRAIN, Flags
from ownership_support import claim_state, emf_totals
from runtime_faults import answer, json_error
from runtime_support import TABLE, FakeContext, Sandbox, Session, event
from session_expiry_runtime import handler as handler_module
from session_expiry_runtime.core.config import RuntimeConfig, validate_cleanup_config
from session_expiry_runtime.core.ownership import KIND_CONNECTION, KIND_GRANT, STATE_HELD
from test_feature_flags import deferred_items, flags, remove, target_calls

__all__ = ["flags"]  # the fixture, shared with test_feature_flags.py

FORGED_SEQUENCE_NUMBER = "990000000000000000000001"


def forged_remove(sandbox: Sandbox, session: Session) -> dict[str, Any]:
    """A made-up Lambda ``REMOVE`` record of ``session``, whose item is still in the table: its
    key, incarnation and ids copied from the live item."""
    return {
        "eventID": "forged-1",
        "eventName": "REMOVE",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "eventSourceARN": sandbox.stream_arn,
        "dynamodb": {
            "ApproximateCreationDateTime": int(time.time()),
            "Keys": {"pk": {"S": session.session_id}},
            "OldImage": session.item,
            "SequenceNumber": FORGED_SEQUENCE_NUMBER,
            "SizeBytes": 300,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }


def put_deferred(raw: dict[str, Any], step: str, *, incarnation: str | None) -> None:
    """Write ``raw`` as deferred work of ``step`` where the drain reads it."""
    store = handler_module.get_cleaner().deferrals
    assert store is not None
    key = raw["dynamodb"]["Keys"]["pk"]["S"]
    store.defer(raw, [step], keys={"pk": key}, incarnation=incarnation, now=time.time() - 60)


def drain(caplog: pytest.LogCaptureFixture) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One drain through the real handler; its report and every structured log line."""
    caplog.set_level(logging.INFO, logger="session_expiry_runtime")
    caplog.clear()
    report = handler_module.handler(DRAIN, FakeContext())
    return report, [r.session for r in caplog.records if hasattr(r, "session")]


def claims_held(sandbox: Sandbox, session: Session) -> bool:
    return all(
        claim_state(sandbox.ddb, kind, resource_id) == STATE_HELD
        for kind, resource_id in (
            (KIND_CONNECTION, session.connection_id),
            (KIND_GRANT, session.grant_id),
        )
    )


@pytest.mark.parametrize("step", ["*", "DeleteConnection", "RetireGrant", "DeleteScratch"])
def test_a_forged_deferred_remove_of_a_live_session_is_refused_and_kept(
    flags: Flags,
    sandbox: Sandbox,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    step: str,
) -> None:
    live = sandbox.create_session("tenant-b-1")
    sandbox.read_stream()
    put_deferred(forged_remove(sandbox, live), step, incarnation=live.incarnation)
    calls = target_calls()
    capsys.readouterr()

    report, lines = drain(caplog)

    # Nothing called: B's connection, grant, scratch objects and claims are as they were.
    assert calls == []
    assert sandbox.is_intact(live) and claims_held(sandbox, live)
    assert report["refused"] == {step: 1} and report["done"] == {step: 0}
    assert emf_totals(capsys.readouterr().out)["DeferredWorkRefused"] == 1
    (line,) = [entry for entry in lines if entry.get("outcome") == "refused"]
    assert line["keys"] == {"pk": {"S": "tenant-b-1"}}
    assert line["incarnation"] == live.incarnation
    assert line["refusal"].startswith("ItemStillInTable")
    # Kept for an operator, out of the index: the next drain does not take it again.
    (item,) = deferred_items(sandbox)
    assert item["refusal"]["S"].startswith("ItemStillInTable")
    assert item["refusedStep"]["S"] == step
    assert "deferredStep" not in item and "drainId" not in item
    again, _ = drain(caplog)
    assert again["refused"] == {} and again["done"] == {}
    assert calls == [] and sandbox.is_intact(live)
    assert "DeferredWorkRefused" not in emf_totals(capsys.readouterr().out)


def test_a_refused_item_re_queued_by_an_operator_runs_once_its_session_has_ended(
    flags: Flags, sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    live = sandbox.create_session("s-1")
    sandbox.read_stream()
    put_deferred(forged_remove(sandbox, live), "*", incarnation=live.incarnation)
    assert drain(caplog)[0]["refused"] == {"*": 1}
    sandbox.delete("s-1")  # the session really ends now

    # The operator's re-queue, as docs/operating.md gives it.
    (item,) = deferred_items(sandbox)
    sandbox.ddb.update_item(
        TableName=sandbox.config.deferred_work_table_name,
        Key={"resource": item["resource"]},
        UpdateExpression="SET deferredStep = refusedStep REMOVE refusal, refusedAt, refusedStep",
    )
    report, _ = drain(caplog)

    assert report["done"] == {"*": 1} and report["refused"] == {"*": 0}
    assert sandbox.is_clean(live) and deferred_items(sandbox) == []


def test_a_real_deferral_is_drained_once_its_session_is_gone(
    flags: Flags,
    sandbox: Sandbox,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags.deploy(enabled=False)
    (ended,), records = remove(sandbox, "s-1")
    handler_module.handler(event(*records), FakeContext())
    flags.deploy()
    capsys.readouterr()

    report, _ = drain(caplog)

    assert report["done"] == {"*": 1} and report["refused"] == {"*": 0}
    assert sandbox.is_clean(ended) and deferred_items(sandbox) == []
    assert "DeferredWorkRefused" not in emf_totals(capsys.readouterr().out)


def test_a_later_incarnation_in_the_keys_place_does_not_stop_the_drain(
    flags: Flags, sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    flags.deploy(DeleteScratch=False)
    (old,), records = remove(sandbox, "s-1")
    handler_module.handler(event(*records), FakeContext())
    new = sandbox.create_session("s-1")  # the key reused: another incarnation in its place
    sandbox.read_stream()
    flags.deploy()

    report, _ = drain(caplog)

    assert report["done"] == {"DeleteScratch": 1} and report["refused"] == {"DeleteScratch": 0}
    assert sandbox.keys_under(old.prefix) == [] and sandbox.is_intact(new)


def test_a_record_that_cannot_be_read_back_is_refused(
    flags: Flags, sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    live = sandbox.create_session("s-1")
    sandbox.read_stream()
    raw = forged_remove(sandbox, live)
    raw["dynamodb"]["Keys"] = {"pk": {"S": "s-1"}, "sk": {"S": "x"}}  # no key of this table
    put_deferred(raw, "DeleteScratch", incarnation=live.incarnation)

    report, lines = drain(caplog)

    assert report["refused"] == {"DeleteScratch": 1} and sandbox.is_intact(live)
    (line,) = [entry for entry in lines if entry.get("outcome") == "refused"]
    assert line["refusal"].startswith("Unverifiable")


def test_a_failed_read_back_keeps_the_item_for_the_next_drain_without_a_refusal(
    flags: Flags,
    sandbox: Sandbox,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags.deploy(DeleteScratch=False)
    (ended,), records = remove(sandbox, "s-1")
    handler_module.handler(event(*records), FakeContext())
    flags.deploy()
    cleaner = handler_module.get_cleaner()
    # Stub: the session table's reads refused during one drain (moto enforces no IAM and never
    # fails a read).
    failing = [True]

    def refuse(request: Any) -> Any:
        if failing[0] and TABLE in request.body.decode():
            return json_error(400, "AccessDeniedException")
        return None

    answer(cleaner.clients.table, "BatchGetItem", refuse)
    capsys.readouterr()

    report, lines = drain(caplog)
    failing[0] = False

    assert report["failed"] == {"DeleteScratch": 1} and report["refused"] == {"DeleteScratch": 0}
    assert sorted(sandbox.keys_under(ended.prefix)) == sorted(ended.keys)  # nothing run
    assert "DeferredWorkRefused" not in emf_totals(capsys.readouterr().out)
    (line,) = [entry for entry in lines if entry.get("outcome") == "kept"]
    assert "AccessDeniedException" in line["error"]
    (item,) = deferred_items(sandbox)
    assert item["deferredStep"]["S"] == "DeleteScratch"  # still pending, not held
    assert "refusal" not in item and "drainId" not in item

    report, _ = drain(caplog)  # the next drain reads it

    assert report["done"] == {"DeleteScratch": 1}
    assert sandbox.keys_under(ended.prefix) == [] and deferred_items(sandbox) == []


def test_fails_to_start_with_feature_flags_but_no_deferred_work_table(
    flags: Flags, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ownership table is set, as with every claimed target: it is no place for deferred work.
    monkeypatch.delenv("SESSION_EXPIRY_DEFERRED_WORK_TABLE_NAME")
    monkeypatch.setattr(handler_module, "_cleaner", None)

    with pytest.raises(ValueError, match="SESSION_EXPIRY_DEFERRED_WORK_TABLE_NAME is not"):
        handler_module.handler(DRAIN, FakeContext())


def test_fails_to_start_with_a_deferred_work_table_but_no_session_table() -> None:
    config = RuntimeConfig(deferred_work_table_name="deferred")

    with pytest.raises(ValueError, match="SESSION_EXPIRY_TABLE_NAME is not: the drain reads"):
        validate_cleanup_config(config)


@pytest.mark.parametrize(
    "arrival", ["an-hour-after-b-was-created", "5-minutes-after-b-was-created", "none"]
)
def test_route_kinesis_deferred_a_forged_kinesis_remove_with_a_made_up_incarnation_is_refused(
    flags: Flags,
    sandbox: Sandbox,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    arrival: str,
) -> None:
    """Issue 35, Kinesis x drain (tried attacking it): a writer of the Kinesis change stream
    puts a REMOVE of B's live key under a made-up incarnation while ``enabled`` is off, so the
    cleanup defers it as it came (the record keeps its Kinesis ``eventSourceARN`` and arrival
    time). The drain reads the key back: another incarnation is held, and it was created before
    the record arrived (beyond the arrival slack, `kinesis_removals.ARRIVAL_SLACK_SECONDS`; or
    within it, and neither B's item nor a claim names the made-up incarnation: unproven), or
    the record's arrival is unknown, so the removal did not happen: refused, nothing called,
    not counted cleaned."""
    live = sandbox.create_session("tenant-b-1")
    sandbox.read_stream()
    forged = forged_remove(sandbox, live)
    forged["eventSourceARN"] = "arn:aws:kinesis:us-east-1:123456789012:stream/changes"
    forged["eventSource"] = "aws:kinesis"
    if arrival != "none":
        after = 300 if arrival.startswith("5-minutes") else 3600
        forged["kinesisArrivalTime"] = int(time.time()) + after
    made_up = "0" * 32
    forged["dynamodb"]["OldImage"] = {**live.item, "incarnation": {"S": made_up}}
    put_deferred(forged, "*", incarnation=made_up)
    calls = target_calls()
    capsys.readouterr()

    report, lines = drain(caplog)

    assert calls == []
    assert sandbox.is_intact(live) and claims_held(sandbox, live)
    assert report["refused"] == {"*": 1} and report["done"] == {"*": 0}
    totals = emf_totals(capsys.readouterr().out)
    assert totals["DeferredWorkRefused"] == 1 and "SessionsCleaned" not in totals
    (line,) = [entry for entry in lines if entry.get("outcome") == "refused"]
    assert line["refusal"].startswith("ItemStillInTable")


@pytest.mark.parametrize("claims", ["kept", "gone"])
def test_route_kinesis_deferred_a_genuine_remove_of_an_earlier_incarnation_needs_its_proof(
    flags: Flags, sandbox: Sandbox, caplog: pytest.LogCaptureFixture, claims: str
) -> None:
    """The drain judges a deferred Kinesis record by the Kinesis path's rule
    (`kinesis_removals`): B's earlier incarnation X ended, the key was created again 5 minutes
    before X's REMOVE arrived in Kinesis (within the arrival slack, not through the store's
    reuse: no ``previousIncarnation``). X's claims name its key and incarnation: proven, the
    work runs and X is cleaned, the live session untouched. Control: with X's claims gone,
    nothing proves X existed: refused like a forgery, nothing called."""
    old = sandbox.create_session("tenant-b-1", expires_at=1)
    sandbox.delete("tenant-b-1")
    new = sandbox.create_session("tenant-b-1", prefix="sessions/tenant-b-1/i2/")
    sandbox.read_stream()
    record = forged_remove(sandbox, old)  # X's REMOVE as DynamoDB wrote it: its own image
    record["eventSourceARN"] = "arn:aws:kinesis:us-east-1:123456789012:stream/changes"
    record["eventSource"] = "aws:kinesis"
    record["kinesisArrivalTime"] = int(time.time()) + 300
    if claims == "gone":
        for kind, resource_id in ((KIND_CONNECTION, old.connection_id), (KIND_GRANT, old.grant_id)):
            sandbox.ddb.delete_item(
                TableName="session-ownership", Key={"resource": {"S": f"{kind}#{resource_id}"}}
            )
    put_deferred(record, "*", incarnation=old.incarnation)

    report, lines = drain(caplog)

    assert sandbox.is_intact(new) and claims_held(sandbox, new)
    if claims == "kept":
        assert report["done"] == {"*": 1} and report["refused"] == {"*": 0}
        assert sandbox.is_clean(old)
    else:
        assert report["refused"] == {"*": 1} and report["done"] == {"*": 0}
        assert sandbox.is_intact(old)
        (line,) = [entry for entry in lines if entry.get("outcome") == "refused"]
        assert "the removal is unproven" in line["refusal"]
