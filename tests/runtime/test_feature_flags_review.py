"""Review of issue 26 (feature flags): attacks on "a disabled step's work is never lost, nor done
twice", through the real handler in moto (as ``test_feature_flags.py``)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from flags_support import DRAIN, Flags
from ownership_support import emf_totals
from runtime_support import TABLE, FakeContext, Sandbox, event
from session_expiry_runtime import handler as handler_module
from session_expiry_runtime.core.ownership import KIND_CONNECTION, KIND_GRANT, resource_key
from session_expiry_runtime.switches.deferred import DRAIN_STALE_SECONDS
from test_feature_flags import (
    deferred_items,
    flags,
    poll_now,
    remove,
    target_calls,
    unreachable,
)
from test_grant_sweeper import NOW, Grants
from test_kinesis_source import KinesisSource, change

__all__ = ["flags"]  # the fixture, shared with test_feature_flags.py


def test_claimed_steps_switched_off_keep_their_claims_and_are_done_once_back_on(
    flags: Flags, sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    flags.deploy(DeleteConnection=False, RetireGrant=False)
    sessions, records = remove(sandbox, "s-1", "s-2")

    assert handler_module.handler(event(*records), FakeContext()) == {"batchItemFailures": []}
    for s in sessions:  # the claimed steps not run, scratch deleted
        assert sandbox.connection_exists(s.connection_id)
        assert s.grant_id in sandbox.grant_ids()
        assert sandbox.keys_under(s.prefix) == []

    flags.deploy()
    calls = target_calls()
    report = handler_module.handler(DRAIN, FakeContext())
    again = handler_module.handler(DRAIN, FakeContext())

    assert report["done"] == {"DeleteConnection": 2, "RetireGrant": 2}, report
    assert again["done"] == {}
    assert all(sandbox.is_clean(s) for s in sessions)
    assert calls.count("DeleteConnection") == 2 and calls.count("RetireGrant") == 2
    assert "ResourcesRefused" not in str(emf_totals(capsys.readouterr().out))


def test_a_record_deferred_whole_keeps_a_step_still_off_deferred(
    flags: Flags, sandbox: Sandbox
) -> None:
    flags.deploy(enabled=False)
    sessions, records = remove(sandbox, "s-1")
    handler_module.handler(event(*records), FakeContext())

    flags.deploy(DeleteScratch=False)  # enabled on again, one step still off
    first = handler_module.handler(DRAIN, FakeContext())

    assert first["done"] == {"*": 1}
    s = sessions[0]
    assert not sandbox.connection_exists(s.connection_id)
    assert sorted(sandbox.keys_under(s.prefix)) == sorted(s.keys)
    assert [i["deferredStep"]["S"] for i in deferred_items(sandbox)] == ["DeleteScratch"]

    flags.deploy()
    second = handler_module.handler(DRAIN, FakeContext())
    assert second["done"] == {"DeleteScratch": 1}
    assert sandbox.is_clean(s) and deferred_items(sandbox) == []


def test_a_record_in_a_batch_twice_is_deferred_once(flags: Flags, sandbox: Sandbox) -> None:
    for off in ({"enabled": False}, {"DeleteScratch": False}):
        flags.deploy(**off)  # type: ignore[arg-type]
        _, records = remove(sandbox, f"dup-{len(off)}-{next(iter(off))}")
        handler_module.handler(event(records[0], records[0]), FakeContext())
    assert sorted(i["deferredStep"]["S"] for i in deferred_items(sandbox)) == ["*", "DeleteScratch"]


def test_enabled_off_with_dry_run_calls_no_target_and_drains_nothing(
    flags: Flags, sandbox: Sandbox
) -> None:
    flags.deploy(enabled=False, dryRun=True)
    sessions, records = remove(sandbox, "s-1")
    calls = target_calls()

    handler_module.handler(event(*records), FakeContext())
    flags.deploy(dryRun=True)  # enabled on, still a dry run
    handler_module.handler(DRAIN, FakeContext())

    assert calls == [] and sandbox.is_intact(sessions[0])


def test_a_record_deferred_again_while_a_drain_holds_its_item_is_done_once(
    flags: Flags, sandbox: Sandbox
) -> None:
    """A retried batch (a function error after the deferral, or an execution environment whose
    cached flags still say off) defers the same record again while a drain runs its item: the
    drain's hold must survive, or the item is left behind and done a second time."""
    flags.deploy(DeleteScratch=False)
    _, records = remove(sandbox, "s-1")
    handler_module.handler(event(*records), FakeContext())
    store = handler_module.get_cleaner().deferrals
    assert store is not None
    (item,) = deferred_items(sandbox)
    assert store.take(item, "drain-a", time.time())  # a drain runs it ...

    handler_module.handler(event(*records), FakeContext())  # ... the record comes again

    assert store.done(item, "drain-a")  # the drain settles its item
    assert deferred_items(sandbox) == []  # nothing left to do a second time


def test_a_drain_leaves_an_item_another_drain_holds_and_takes_a_stale_one(
    flags: Flags, sandbox: Sandbox
) -> None:
    flags.deploy(DeleteScratch=False)
    sessions, records = remove(sandbox, "s-1")
    handler_module.handler(event(*records), FakeContext())
    store = handler_module.get_cleaner().deferrals
    assert store is not None
    (item,) = deferred_items(sandbox)
    assert store.take(item, "drain-a", time.time())
    flags.deploy()

    assert handler_module.handler(DRAIN, FakeContext())["done"] == {"DeleteScratch": 0}
    assert sandbox.keys_under(sessions[0].prefix)  # held by the other run: not done here

    stale = time.time() - DRAIN_STALE_SECONDS - 1
    sandbox.ddb.update_item(
        TableName=sandbox.config.deferred_work_table_name,
        Key={"resource": item["resource"]},
        UpdateExpression="SET drainingSince = :t",
        ExpressionAttributeValues={":t": {"N": str(int(stale))}},
    )
    assert handler_module.handler(DRAIN, FakeContext())["done"] == {"DeleteScratch": 1}
    assert sandbox.is_clean(sessions[0]) and not store.done(item, "drain-a")


def test_a_deferred_step_of_a_reused_key_never_touches_the_new_session(
    flags: Flags, sandbox: Sandbox
) -> None:
    flags.deploy(DeleteConnection=False, RetireGrant=False, DeleteScratch=False)
    (old,), records = remove(sandbox, "s-1")
    handler_module.handler(event(*records), FakeContext())
    new = sandbox.create_session("s-1")  # the key reused before the flags are back on
    sandbox.read_stream()

    flags.deploy()
    report = handler_module.handler(DRAIN, FakeContext())

    assert report["done"] == {"DeleteConnection": 1, "RetireGrant": 1, "DeleteScratch": 1}
    assert sandbox.is_clean(old) and sandbox.is_intact(new)


def test_a_deferred_claimed_step_whose_claim_expired_does_not_act_and_is_settled(
    flags: Flags, sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    flags.deploy(DeleteConnection=False)
    (s,), records = remove(sandbox, "s-1")
    handler_module.handler(event(*records), FakeContext())
    sandbox.ddb.delete_item(  # the ownership record's time to live passed
        TableName=sandbox.config.ownership_table_name,
        Key={"resource": {"S": resource_key(KIND_CONNECTION, s.connection_id)}},
    )
    capsys.readouterr()

    flags.deploy()
    report = handler_module.handler(DRAIN, FakeContext())
    totals = emf_totals(capsys.readouterr().out)

    # As Operating it documents: no call, refused Unclaimed (the skipped-records alarm counts
    # it), and the item settled, counted as done.
    assert sandbox.connection_exists(s.connection_id)
    assert totals["ResourcesRefused|Refusal=Unclaimed"] == 1
    assert report["done"] == {"DeleteConnection": 1} and deferred_items(sandbox) == []


@pytest.mark.parametrize("off", ["enabled", "DeleteScratch"])
def test_a_kinesis_record_delivered_twice_is_deferred_once_and_done_once(
    flags: Flags, sandbox: Sandbox, off: str
) -> None:
    source = KinesisSource()
    flags.deploy(**{off: False})
    s = sandbox.create_session("s-1")
    sandbox.read_stream()
    sandbox.delete("s-1")
    (removal,) = sandbox.read_stream()
    source.put(change(removal))
    source.put(change(removal))  # Kinesis delivers at least once: the same change again
    (batch,) = source.batches()

    assert handler_module.handler({"Records": batch}, FakeContext()) == {"batchItemFailures": []}
    step = "*" if off == "enabled" else off
    assert [i["deferredStep"]["S"] for i in deferred_items(sandbox)] == [step]

    flags.deploy()
    assert handler_module.handler(DRAIN, FakeContext())["done"] == {step: 1}
    assert sandbox.is_clean(s) and deferred_items(sandbox) == []


def test_a_new_execution_environment_that_cannot_read_the_flags_does_not_undo_enabled_off(
    flags: Flags, sandbox: Sandbox
) -> None:
    flags.deploy(enabled=False)  # the operator pulled the lever
    handler_module.get_cleaner()  # a cold start ...
    reader = handler_module._flags
    assert reader is not None
    reachable = reader.client
    unreachable()  # ... while AppConfig cannot be read
    sessions, records = remove(sandbox, "s-1")
    calls = target_calls()

    response = handler_module.handler(event(*records), FakeContext())

    # Never read: every record held as enabled off does (deferred, nothing called) ...
    assert response == {"batchItemFailures": []}
    assert calls == [] and sandbox.is_intact(sessions[0])
    assert [i["deferredStep"]["S"] for i in deferred_items(sandbox)] == ["*"]
    # ... and done once the flags are read again and on.
    reader.client = reachable
    poll_now()
    flags.deploy()
    assert handler_module.handler(DRAIN, FakeContext())["done"] == {"*": 1}
    assert sandbox.is_clean(sessions[0]) and deferred_items(sandbox) == []


def test_a_grant_whose_retire_step_is_off_is_retired_by_the_grant_sweep_past_its_bound(
    flags: Flags, sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    """RetireGrant off holds only until the grant sweep's pending bound (7 hours): the sweep
    then retires the grant as an orphan (fail closed, ``OrphanGrantsRetired`` alarms), and the
    drain afterwards finds it released and calls nothing (documented in Operating it)."""
    grants = Grants(sandbox)
    grant_id = grants.grant("s-1", "inc1")
    grants.session("s-1", "inc1", holds=grant_id)
    sandbox.ddb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "s-1"}},
        UpdateExpression="SET incarnation = :i",
        ExpressionAttributeValues={":i": {"S": "inc1"}},
    )
    sandbox.claim(KIND_GRANT, grant_id, "s-1", "inc1")
    sandbox.read_stream()
    sandbox.delete("s-1")
    flags.deploy(RetireGrant=False)
    handler_module.handler(event(*sandbox.removes()), FakeContext())
    assert grant_id in sandbox.grant_ids()
    assert [i["deferredStep"]["S"] for i in deferred_items(sandbox)] == ["RetireGrant"]

    grants.sweeper().sweep()  # first sighting: pending
    late = grants.sweeper(now=NOW + timedelta(seconds=7 * 3600 + 1))
    assert late.sweep().orphans_retired == 1  # the lever does not hold past the bound
    assert grant_id not in sandbox.grant_ids()

    flags.deploy()
    capsys.readouterr()
    calls = target_calls()
    assert handler_module.handler(DRAIN, FakeContext())["done"] == {"RetireGrant": 1}
    assert calls == [] and deferred_items(sandbox) == []
    assert "ResourcesRefused" not in str(emf_totals(capsys.readouterr().out))
