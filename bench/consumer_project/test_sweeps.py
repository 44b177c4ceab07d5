"""The expiry sweeper, run now instead of waiting for its schedule: a session whose TTL passed
is deleted and then cleaned, a live one is left alone."""

import os
from datetime import datetime, timedelta, timezone

import boto3
from session_expiry_runtime.store import SessionStore


def _in_table(session_id: str) -> bool:
    table = os.environ["SESSION_EXPIRY_TABLE_NAME"]
    got = boto3.client("dynamodb").get_item(TableName=table, Key={"pk": {"S": session_id}})
    return "Item" in got


def test_a_sweep_run_now_deletes_what_is_due(
    session_expiry_pipeline, session_expiry_app_env, new_id
):
    # A store whose clock is two minutes behind: its one-minute session is already due.
    earlier = SessionStore.from_env(clock=lambda: datetime.now(timezone.utc) - timedelta(minutes=2))
    due, live = new_id("due"), new_id("live")
    session_expiry_pipeline.emulator.open_connection(f"conn-{due}")
    earlier.create(due, ttl=timedelta(minutes=1), connection_id=f"conn-{due}")
    SessionStore.from_env().create(live, ttl=timedelta(hours=1))

    summary = session_expiry_pipeline.run_expiry_sweep()
    session_expiry_pipeline.run_cleanup()

    assert summary["swept"] >= 1 and summary["failed"] == 0
    assert not _in_table(due) and _in_table(live)
    cleaned = session_expiry_pipeline.metrics.total(
        "SessionsCleaned", Reason="deleted-after-expiry"
    )
    assert cleaned >= 1
    assert f"conn-{due}" not in session_expiry_pipeline.emulator.open_connection_ids()


def test_pausing_the_cleanup_keeps_the_records_until_it_resumes(
    session_expiry_pipeline, store, new_id
):
    ended = new_id("paused")
    session_expiry_pipeline.emulator.open_connection(f"conn-{ended}")
    store.create(ended, ttl=timedelta(hours=1), connection_id=f"conn-{ended}")
    session_expiry_pipeline.pause_cleanup()
    try:
        store.end(ended)
        session_expiry_pipeline.run_cleanup()
        assert f"conn-{ended}" in session_expiry_pipeline.emulator.open_connection_ids()
    finally:
        session_expiry_pipeline.resume_cleanup()
    session_expiry_pipeline.run_cleanup()
    assert f"conn-{ended}" not in session_expiry_pipeline.emulator.open_connection_ids()
