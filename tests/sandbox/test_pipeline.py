"""The deployed-shape pipeline, through the library's pytest fixtures.

A stand-in app (tests/sandbox/standin_app) is bootstrapped and deployed into the emulator with
the real CDK CLI once for this module; everything asserted here is read back from the emulator.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from cdk_session_expiry.testing import LocalPipeline, Schedule

pytestmark = pytest.mark.slow

STANDIN = Path(__file__).resolve().parent / "standin_app"


@pytest.fixture(scope="module")
def session_expiry_app_dir() -> Path:  # overrides the plugin's default (rootdir)
    return STANDIN


@pytest.fixture(scope="module")
def session_expiry_app_function() -> str:
    # No function of the stand-in stack was given session access: its tests run with the
    # environment of the one function they stand in for, chosen by its construct path.
    return "Cleanup"


def test_mapping_is_read_back_from_the_emulator(session_expiry_pipeline: LocalPipeline) -> None:
    m = session_expiry_pipeline.mapping
    assert (
        m.event_source_arn
        == session_expiry_pipeline.emulator.client("dynamodb").describe_table(
            TableName=session_expiry_pipeline.table_name
        )["Table"]["LatestStreamArn"]
    )
    assert m.filter_patterns == ('{"eventName":["REMOVE"]}',)
    assert (
        m.batch_size,
        m.bisect_batch_on_function_error,
        m.maximum_retry_attempts,
        m.maximum_record_age_seconds,
        m.report_batch_item_failures,
        m.starting_position,
    ) == (4, True, 2, 3600, True, "TRIM_HORIZON")
    assert m.on_failure_destination and ":sqs:" in m.on_failure_destination
    assert session_expiry_pipeline.ttl_attribute == "expiresAt"
    # The bootstrap stack's bucket policy is one of the types moto's CloudFormation skips.
    assert "AWS::S3::BucketPolicy" in session_expiry_pipeline.unmodelled_resource_types


def test_handler_runs_from_the_deployed_code_asset(session_expiry_pipeline: LocalPipeline) -> None:
    fn = session_expiry_pipeline.function
    assert fn.handler == "standin_handler.handler"
    root = fn.task_root()
    assert (root / "standin_handler.py").read_text() == (
        STANDIN / "handler_src" / "standin_handler.py"
    ).read_text()
    env = fn.runtime_env()
    assert env["SCRATCH_BUCKET"] == fn.environment["SCRATCH_BUCKET"]
    assert env["AWS_ENDPOINT_URL"] == session_expiry_pipeline.emulator.endpoint_url
    # The execute-api endpoint is pointed at the emulator's API Gateway Management API.
    assert env["WEBSOCKET_ENDPOINT"] == session_expiry_pipeline.emulator.endpoint_url


def test_expired_and_ended_items_are_cleaned_by_the_deployed_function(
    session_expiry_pipeline: LocalPipeline, session_expiry_app_env: dict[str, str]
) -> None:
    p = session_expiry_pipeline
    emu = p.emulator
    import boto3  # application code: plain boto3 from the environment the fixture applied

    assert os.environ["AWS_ENDPOINT_URL"] == emu.endpoint_url
    # The function chosen by session_expiry_app_function, as deployed.
    assert session_expiry_app_env["SCRATCH_BUCKET"] == p.function.environment["SCRATCH_BUCKET"]
    assert os.environ["SCRATCH_BUCKET"] == p.function.environment["SCRATCH_BUCKET"]
    s3, ddb = boto3.client("s3"), boto3.client("dynamodb")
    bucket = p.function.environment["SCRATCH_BUCKET"]
    now = int(time.time())
    for name, ttl in (
        ("expired", now - 10),
        ("ended", now + 3600),
        ("live", now + 3600),
        ("poison", now + 3600),
    ):
        s3.put_object(Bucket=bucket, Key=f"obj-{name}", Body=b"x")
        emu.open_connection(f"conn-{name}")
        item = {
            "pk": {"S": name},
            "expiresAt": {"N": str(ttl)},
            "scratchKey": {"S": f"obj-{name}"},
            "connectionId": {"S": f"conn-{name}"},
        }
        if name == "poison":
            item["poison"] = {"BOOL": True}
        ddb.put_item(TableName=p.table_name, Item=item)
    assert p.expire_due() and len(p.expire_due()) == 0  # one sweep; nothing left due
    ddb.delete_item(TableName=p.table_name, Key={"pk": {"S": "ended"}})
    ddb.delete_item(TableName=p.table_name, Key={"pk": {"S": "poison"}})

    report = p.run_cleanup()

    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])}
    assert "obj-expired" not in keys and "obj-ended" not in keys
    assert {"obj-live", "obj-poison"} <= keys
    open_ids = emu.open_connection_ids()
    assert "conn-live" in open_ids and "conn-expired" not in open_ids
    # The handler's log lines come from the extracted asset and carry the TTL identity.
    logged = [json.loads(line) for line in p.logs if line.startswith("{")]
    assert all(entry["module"].startswith(str(p.function.task_root())) for entry in logged)
    identities = [entry["userIdentity"] for entry in logged]
    assert {"type": "Service", "principalId": "dynamodb.amazonaws.com"} in identities
    # The poison record is reported by the partial batch response: 1 + 2 retries, then the
    # deployed on-failure queue receives its metadata.
    assert report.records_sent_to_on_failure == 1
    messages = p.on_failure_messages()
    assert len(messages) == 1
    assert messages[0]["DDBStreamBatchInfo"]["batchSize"] == 1
    assert messages[0]["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert messages[0]["DDBStreamBatchInfo"]["streamArn"] == p.stream_arn
    # Peeked, not consumed: the message is still there for a replay.
    assert p.on_failure_messages() == messages


def test_a_second_run_delivers_only_new_records(session_expiry_pipeline: LocalPipeline) -> None:
    before = len(session_expiry_pipeline.run_cleanup().invocations)
    assert len(session_expiry_pipeline.run_cleanup().invocations) == before


# --- the stack's other functions, settings changed after deploy, the code asset's commands ----


def test_schedule_of_a_function_is_read_back_from_the_emulator(
    session_expiry_pipeline: LocalPipeline,
) -> None:
    tick = session_expiry_pipeline.function_with_handler("standin_tick.handler")
    schedule = session_expiry_pipeline.schedule_of(tick)
    assert (schedule.expression, schedule.interval_seconds, schedule.enabled) == (
        "rate(2 minutes)",
        120,
        True,
    )
    assert ":rule/" in schedule.rule_arn
    with pytest.raises(LookupError, match="no EventBridge schedule"):
        session_expiry_pipeline.schedule_of(session_expiry_pipeline.function)


def test_fails_to_find_a_function_by_an_unknown_handler(
    session_expiry_pipeline: LocalPipeline,
) -> None:
    with pytest.raises(LookupError, match=r"expected one function with handler 'nope\.handler'"):
        session_expiry_pipeline.function_with_handler("nope.handler")


def test_a_second_function_runs_from_its_own_code_asset_with_its_environment(
    session_expiry_pipeline: LocalPipeline,
) -> None:
    p = session_expiry_pipeline
    tick = p.function_with_handler("standin_tick.handler")
    schedule = p.schedule_of(tick)
    local = p.local_function("standin_tick.handler")
    assert p.local_function("standin_tick.handler") is local  # started once, kept warm
    answer = local(schedule.scheduled_event(), None)
    assert answer["detailType"] == "Scheduled Event"
    assert answer["resources"] == [schedule.rule_arn]
    assert answer["tickName"] == "stand-in tick"
    assert Path(answer["module"]).resolve().parent == local.function.task_root().resolve()


def test_scheduled_event_has_the_eventbridge_shape() -> None:
    schedule = Schedule(
        rule_arn="arn:aws:events:eu-west-1:111122223333:rule/tick", expression="rate(1 hour)"
    )
    event = schedule.scheduled_event(datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc))
    assert {k: event[k] for k in ("source", "detail-type", "account", "region", "time")} == {
        "source": "aws.events",
        "detail-type": "Scheduled Event",
        "account": "111122223333",
        "region": "eu-west-1",
        "time": "2026-01-02T03:04:05Z",
    }
    assert event["resources"] == [schedule.rule_arn] and event["detail"] == {}
    assert schedule.interval_seconds == 3600
    assert Schedule(rule_arn="x", expression="rate(1 day)").interval_seconds == 86_400


def test_fails_on_a_schedule_that_is_not_a_rate() -> None:
    with pytest.raises(ValueError, match=r"'cron\(0 12 \* \* \? \*\)': expected rate"):
        _ = Schedule(rule_arn="x", expression="cron(0 12 * * ? *)").interval_seconds


def test_refresh_follows_the_kill_switch_and_a_new_function_environment(
    session_expiry_pipeline: LocalPipeline,
) -> None:
    p = session_expiry_pipeline
    lam, ddb = p.emulator.client("lambda"), p.emulator.client("dynamodb")
    p.run_cleanup()
    variables = dict(p.function.environment)
    try:
        lam.update_event_source_mapping(UUID=p.mapping.uuid, Enabled=False)
        p.refresh()
        assert p.mapping.enabled is False
        ddb.put_item(TableName=p.table_name, Item={"pk": {"S": "paused"}})
        ddb.delete_item(TableName=p.table_name, Key={"pk": {"S": "paused"}})
        before = len(p.run_cleanup().invocations)
        assert len(p.run_cleanup().invocations) == before  # disabled: nothing delivered

        lam.update_function_configuration(
            FunctionName=p.function.name,
            Environment={"Variables": {**variables, "MARKER": "second configuration"}},
        )
        lam.update_event_source_mapping(UUID=p.mapping.uuid, Enabled=True)
        p.refresh()
        assert p.mapping.enabled is True
        report = p.run_cleanup()
        # Resumed where it stopped: the record written while disabled, by the new environment.
        (invocation,) = report.invocations[before:]
        assert len(invocation.sequence_numbers) == 1
        logged = [json.loads(line) for line in p.logs if line.startswith("{")]
        assert logged[-1]["seq"] == invocation.sequence_numbers[0]
        assert logged[-1]["marker"] == "second configuration"
    finally:
        lam.update_event_source_mapping(UUID=p.mapping.uuid, Enabled=True)
        lam.update_function_configuration(
            FunctionName=p.function.name, Environment={"Variables": variables}
        )
        p.refresh()


def test_run_module_runs_a_command_of_the_code_asset_with_the_function_settings(
    session_expiry_pipeline: LocalPipeline,
) -> None:
    p = session_expiry_pipeline
    done = p.run_module("standin_cli", "--queue-url", "q")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["argv"] == ["--queue-url", "q"]
    assert answer["bucket"] == p.function.environment["SCRATCH_BUCKET"]
    assert Path(answer["module"]).resolve().parent == p.function.task_root().resolve()


def test_fails_when_the_module_is_not_in_the_code_asset(
    session_expiry_pipeline: LocalPipeline,
) -> None:
    # json is importable, but from the interpreter, not from the deployed code asset.
    done = session_expiry_pipeline.run_module("json")
    assert done.returncode == 3
    assert "not the code asset" in done.stderr
