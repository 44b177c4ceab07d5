"""A DeleteConnection the API refuses fails the session's cleanup until the retries run out;
the record reaches the failure queue, and a replay after the outage cleans it."""

from datetime import timedelta

from cdk_session_expiry.testing import Fault


def test_a_refused_delete_connection_reaches_the_failure_queue_and_is_replayed(
    session_expiry_pipeline, store, new_id
):
    emulator = session_expiry_pipeline.emulator
    session_id = new_id("refused")
    emulator.open_connection(f"conn-{session_id}")
    store.create(session_id, ttl=timedelta(hours=1), connection_id=f"conn-{session_id}")
    fault = emulator.inject_fault(Fault.delete_connection(f"conn-{session_id}"))

    store.end(session_id)
    report = session_expiry_pipeline.run_cleanup()

    assert report.records_sent_to_on_failure == 1
    assert len(session_expiry_pipeline.on_failure_messages()) == 1
    assert f"conn-{session_id}" in emulator.open_connection_ids()

    emulator.clear_fault(fault)  # the outage is over
    replay = session_expiry_pipeline.replay_failures()

    assert replay.ok and replay.replayed == 1
    assert f"conn-{session_id}" not in emulator.open_connection_ids()
    assert session_expiry_pipeline.on_failure_messages() == []
