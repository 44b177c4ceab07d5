"""A session that expires is cleaned: its connection closed, its scratch objects deleted; the
dashboard and its alarms are deployed."""

import os
from datetime import timedelta

import boto3


def test_an_expired_session_is_cleaned(session_expiry_pipeline, store, new_id):
    emulator = session_expiry_pipeline.emulator
    s3 = boto3.client("s3")
    bucket = os.environ["SESSION_EXPIRY_SCRATCH_BUCKET"]
    expired, live = new_id("expired"), new_id("live")
    for session_id in (expired, live):
        emulator.open_connection(f"conn-{session_id}")
        session = store.create(
            session_id, ttl=timedelta(minutes=5), connection_id=f"conn-{session_id}"
        )
        for n in range(3):
            s3.put_object(Bucket=bucket, Key=f"{session.scratch_prefix}{n}.txt", Body=b"x")

    report = session_expiry_pipeline.expire_session(expired)

    assert report.records_sent_to_on_failure == 0
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert not any(f"/{expired}/" in k for k in keys)
    assert len([k for k in keys if f"/{live}/" in k]) == 3
    open_ids = emulator.open_connection_ids()
    assert f"conn-{expired}" not in open_ids and f"conn-{live}" in open_ids


def test_an_ended_session_is_cleaned(session_expiry_pipeline, store, new_id):
    ended = new_id("ended")
    session_expiry_pipeline.emulator.open_connection(f"conn-{ended}")
    store.create(ended, ttl=timedelta(hours=1), connection_id=f"conn-{ended}")

    store.end(ended)
    session_expiry_pipeline.run_cleanup()

    assert f"conn-{ended}" not in session_expiry_pipeline.emulator.open_connection_ids()


def test_the_dashboard_and_its_alarms_are_deployed(session_expiry_pipeline):
    cloudwatch = session_expiry_pipeline.emulator.client("cloudwatch")
    alarms = cloudwatch.describe_alarms()["MetricAlarms"]
    assert any(a["MetricName"] == "IteratorAge" for a in alarms)
    dashboards = cloudwatch.list_dashboards()["DashboardEntries"]
    assert len(dashboards) == 1
    body = cloudwatch.get_dashboard(DashboardName=dashboards[0]["DashboardName"])["DashboardBody"]
    assert all(a["AlarmArn"] in body for a in alarms)
