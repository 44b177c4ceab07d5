"""Every opt-in of SessionExpiry works through the pytest plugin (issue 22).

One app (tests/sandbox/optins_app) holds every opt-in: the dashboard and the construct's widgets
on the app's own dashboard, a 10-second expiry sweeper, the grant sweep, the archive, fan-out to
an event bus, AgentCore targets and a custom step. It is deployed once per test session with the
real CDK CLI into the emulator (the alarms the dashboards reference are created by the model the
emulator teaches moto's CloudFormation); test_plugin_restore.py starts from its snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from session_expiry_runtime.store import Session, SessionStore

from cdk_session_expiry import _runtime_contract as contract
from cdk_session_expiry.testing import AppFunctionError, Fault, LocalPipeline, app_function
from cdk_session_expiry.testing.agentcore import BROWSER, CODE_INTERPRETER, RUNTIME

pytestmark = pytest.mark.slow

APP = Path(__file__).resolve().parent / "optins_app"
RUNTIME_ARN = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/optins_agent-a1b2c3d4e5"
WAIT = 60.0  # the longest a test waits for an event (a scheduled run to start)
#: Two functions have session access, with different environments: the tests choose one.
APP_FUNCTION = "Connect"


@pytest.fixture(scope="module")
def session_expiry_app_dir() -> Path:
    return APP


@pytest.fixture(scope="module")
def session_expiry_app_function() -> str:
    return APP_FUNCTION


@pytest.fixture
def store(session_expiry_app_env: dict[str, str]) -> SessionStore:
    return SessionStore.from_env()


@pytest.fixture
def past_store(session_expiry_app_env: dict[str, str]) -> SessionStore:
    """Sessions "created two minutes ago": a one-minute session is due at once."""
    return SessionStore.from_env(clock=lambda: datetime.now(timezone.utc) - timedelta(minutes=2))


def _grant_ids(pipeline: LocalPipeline) -> set[str]:
    kms = pipeline.emulator.client("kms")
    key = pipeline.session_environment(APP_FUNCTION)[contract.ENV_GRANT_KEY_ARN]
    return {g["GrantId"] for g in kms.list_grants(KeyId=key)["Grants"]}


def _consumer_events(pipeline: LocalPipeline) -> list[dict[str, Any]]:
    sqs = pipeline.emulator.client("sqs")
    url = pipeline.stack.outputs["ConsumerQueueUrl"]  # the stack's outputs, as deployed
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    return [json.loads(m["Body"]) for m in got.get("Messages", [])]


def test_the_alarms_and_both_dashboards_are_deployed(
    session_expiry_pipeline: LocalPipeline,
) -> None:
    p = session_expiry_pipeline
    cloudwatch = p.emulator.client("cloudwatch")
    alarms = {a["AlarmName"]: a for a in cloudwatch.describe_alarms()["MetricAlarms"]}
    deployed = p.stack.physical_ids("AWS::CloudWatch::Alarm")
    assert len(deployed) >= 9 and set(deployed.values()) == set(alarms)
    iterator_age = next(a for lid, a in deployed.items() if lid.startswith("SessionsIteratorAge"))
    assert alarms[iterator_age]["MetricName"] == "IteratorAge"
    assert alarms[iterator_age]["Dimensions"] == [
        {"Name": "FunctionName", "Value": p.function.name}
    ]
    # Both dashboards graph the alarms' state by ARN: every ARN they name exists.
    arns = {a["AlarmArn"] for a in alarms.values()}
    dashboards = p.stack.physical_ids("AWS::CloudWatch::Dashboard")
    assert len(dashboards) == 2
    for name in dashboards.values():
        body = cloudwatch.get_dashboard(DashboardName=name)["DashboardBody"]
        named = {arn for widget in json.loads(body)["widgets"] for arn in _alarm_arns(widget)}
        assert named and named <= arns
    assert "AWS::CloudWatch::Alarm" not in p.unmodelled_resource_types
    # Expiry by tenant: the top-tenants table over the cleanup's log group is deployed; the
    # Contributor Insights rules are not (moto has none: docs/testing.md, "What differs").
    for name in dashboards.values():
        body = json.loads(cloudwatch.get_dashboard(DashboardName=name)["DashboardBody"])
        (table,) = [w for w in body["widgets"] if w["type"] == "log"]
        assert "by Tenant" in table["properties"]["query"]
    assert "AWS::CloudWatch::InsightRule" in p.unmodelled_resource_types
    assert p.function.environment[contract.ENV_METRICS_TENANT_DIMENSION] == "true"
    # The sweeper's asynchronous invoke settings (AWS::Lambda::EventInvokeConfig) too.
    sweeper = p.function_with_handler(contract.SWEEPER_HANDLER)
    invoke = p.emulator.client("lambda").get_function_event_invoke_config(FunctionName=sweeper.name)
    assert invoke["MaximumRetryAttempts"] == 0 and invoke["MaximumEventAgeInSeconds"] == 60


def _alarm_arns(widget: dict[str, Any]) -> Iterator[str]:
    properties = widget.get("properties", {})
    yield from properties.get("alarms", [])
    annotations = properties.get("annotations", {})
    yield from (a["alarm"] for a in annotations.get("alarms", []) if isinstance(a, dict))


def _session_with_every_target(
    p: LocalPipeline, store: SessionStore, session_id: str, **create: Any
) -> Session:
    env = p.session_environment(APP_FUNCTION)
    s3 = p.emulator.client("s3")
    p.emulator.open_connection(f"conn-{session_id}")
    agent_sessions = {
        RUNTIME: (RUNTIME_ARN, f"rs-{session_id}-".ljust(40, "0")),  # 33-256 characters
        CODE_INTERPRETER: ("optins_ci-a1b2c3d4e5", "ci01"),  # 1-40 letters and digits
        BROWSER: ("optins_browser-a1b2c3d4e5", "br01"),
    }
    for kind, (target, agent_session) in agent_sessions.items():
        p.emulator.start_agent_session(kind, target, agent_session)
    session = store.create(
        session_id,
        connection_id=f"conn-{session_id}",
        runtime_session_id=agent_sessions[RUNTIME][1],
        code_interpreter_session_id=agent_sessions[CODE_INTERPRETER][1],
        browser_session_id=agent_sessions[BROWSER][1],
        attributes={
            "noteBucket": env[contract.ENV_SCRATCH_BUCKET],
            "noteKey": f"notes/{session_id}",
        },
        **create,
    )
    s3.put_object(Bucket=env[contract.ENV_SCRATCH_BUCKET], Key=f"notes/{session_id}", Body=b"n")
    s3.put_object(
        Bucket=env[contract.ENV_SCRATCH_BUCKET], Key=f"{session.scratch_prefix}a.txt", Body=b"x"
    )
    return store.create_grant(
        session_id, grantee_principal=p.function.role_arn, operations=["Decrypt"]
    )


def test_an_expired_session_is_cleaned_by_every_target(
    session_expiry_pipeline: LocalPipeline, store: SessionStore
) -> None:
    p = session_expiry_pipeline
    session = _session_with_every_target(p, store, "every-target")
    assert session.grant_id in _grant_ids(p)

    report = p.expire_session("every-target")

    assert report.records_sent_to_on_failure == 0
    bucket = p.session_environment(APP_FUNCTION)[contract.ENV_SCRATCH_BUCKET]
    listed = p.emulator.client("s3").list_objects_v2(Bucket=bucket).get("Contents", [])
    keys = {o["Key"] for o in listed}
    assert "notes/every-target" not in keys  # the custom step ran
    assert not any(k.startswith(session.scratch_prefix) for k in keys)
    assert "conn-every-target" not in p.emulator.open_connection_ids()
    assert session.grant_id not in _grant_ids(p)
    assert {(c.operation, c.stopped) for c in p.emulator.agentcore.calls} == {
        ("StopRuntimeSession", True),
        ("StopCodeInterpreterSession", True),
        ("StopBrowserSession", True),
    }
    archive = p.stack.physical_ids("AWS::S3::Bucket")
    archived = p.emulator.client("s3").list_objects_v2(
        Bucket=next(v for k, v in archive.items() if k.startswith("Archive"))
    )
    assert any("every-target" in o["Key"] for o in archived.get("Contents", []))
    events = _consumer_events(p)
    assert [e["detail-type"] for e in events] == [contract.EVENT_DETAIL_TYPE]
    assert p.metrics.total(contract.METRIC_SESSIONS_CLEANED, Reason=contract.REASON_TTL) == 1


def test_the_sub_minute_sweeper_sweeps_once_on_demand(
    session_expiry_pipeline: LocalPipeline, past_store: SessionStore
) -> None:
    p = session_expiry_pipeline
    past_store.create("due-now", ttl=timedelta(minutes=1))

    summary = p.run_expiry_sweep()  # one pass, not a minute of passes

    assert (summary["passes"], summary["swept"], summary["intervalSeconds"]) == (1, 1, 10)
    p.run_cleanup()
    swept = p.metrics.total(
        contract.METRIC_SESSIONS_CLEANED, Reason=contract.REASON_DELETED_AFTER_EXPIRY
    )
    assert swept == 1


def test_stopping_the_sub_minute_sweeper_ends_its_run_after_the_pass_in_progress(
    session_expiry_pipeline: LocalPipeline,
) -> None:
    runner = session_expiry_pipeline.start_expiry_sweeper()
    assert runner.wait_for_run(timeout=WAIT)

    session_expiry_pipeline.stop_schedules()

    (run,) = runner.runs
    assert run.error is None, run.error
    # A run lasts a minute and makes a pass every 10 s (6 passes); stopped, it ended after
    # the pass in progress instead of waiting out its minute.
    assert 1 <= run.response["passes"] < 6, run.response


def test_the_grant_sweep_retires_an_orphan_grant_on_demand(
    session_expiry_pipeline: LocalPipeline, store: SessionStore
) -> None:
    p = session_expiry_pipeline
    p.pause_cleanup()  # the session's REMOVE record waits on the stream
    try:
        store.create("orphan", ttl=timedelta(hours=1))
        grant_id = store.create_grant(
            "orphan", grantee_principal=p.function.role_arn, operations=["Decrypt"]
        ).grant_id
        store.end("orphan")
        assert p.run_cleanup().records_read == 0 or grant_id in _grant_ids(p)
        assert p.emulator.age_grants(3600) >= 1  # past the sweep's 15-minute grace period

        first = p.run_grant_sweep()  # the session is gone: its grant is pending, not an orphan
        assert first["orphans_retired"] == 0 and grant_id in _grant_ids(p)
        assert p.end_grant_pending_bounds() >= 1  # the stream path's bound has passed

        report = p.run_grant_sweep()

        assert report["orphans_retired"] == 1 and report["failures"] == 0
        assert grant_id not in _grant_ids(p)
    finally:
        p.resume_cleanup()
    assert p.run_cleanup().records_sent_to_on_failure == 0  # the cleanup finds it retired


def test_a_failed_delete_connection_reaches_the_failure_queue_and_is_replayed(
    session_expiry_pipeline: LocalPipeline, store: SessionStore
) -> None:
    p = session_expiry_pipeline
    p.emulator.open_connection("conn-refused")
    store.create("refused", ttl=timedelta(hours=1), connection_id="conn-refused")
    fault = p.emulator.inject_fault(Fault.delete_connection("conn-refused"))
    store.end("refused")

    report = p.run_cleanup()

    assert report.records_sent_to_on_failure == 1
    assert len(p.on_failure_messages()) == 1
    assert "conn-refused" in p.emulator.open_connection_ids()
    p.emulator.clear_fault(fault)  # the outage ends
    replay = p.replay_failures()
    assert replay.ok and replay.replayed == 1, replay
    assert "conn-refused" not in p.emulator.open_connection_ids()
    assert p.on_failure_messages() == []


def test_fails_when_several_functions_have_session_access_and_none_is_chosen(
    session_expiry_pipeline: LocalPipeline,
) -> None:
    with pytest.raises(AppFunctionError) as raised:
        session_expiry_pipeline.application_env()
    message = str(raised.value)
    assert "OptIns/Connect" in message and "OptIns/Message" in message
    assert "session_expiry_app_function" in message


def test_fails_when_the_chosen_function_is_not_in_the_stack(
    session_expiry_pipeline: LocalPipeline,
) -> None:
    with pytest.raises(AppFunctionError, match=r"'Nope' matches no function of the stack"):
        session_expiry_pipeline.application_env("Nope")


def test_the_chosen_function_gives_its_own_environment(
    session_expiry_pipeline: LocalPipeline, session_expiry_app_env: dict[str, str]
) -> None:
    assert session_expiry_app_env["GREETING"] == "hello"  # Connect's, as the fixture chose
    assert "GREETING" not in session_expiry_pipeline.application_env("OptIns/Message")


def test_the_app_env_names_the_archive_bucket(
    session_expiry_pipeline: LocalPipeline, session_expiry_app_env: dict[str, str]
) -> None:
    buckets = session_expiry_pipeline.stack.physical_ids("AWS::S3::Bucket")
    archive = next(v for k, v in buckets.items() if k.startswith("Archive"))
    assert session_expiry_app_env[contract.ENV_ARCHIVE_BUCKET] == archive
    assert session_expiry_app_env[contract.ENV_ARCHIVE_PREFIX] == contract.DEFAULT_ARCHIVE_PREFIX


def test_without_a_function_given_access_the_session_environment_is_rebuilt(
    session_expiry_pipeline: LocalPipeline,
) -> None:
    """The rule for an app with no function given session access, checked against a function
    that has it: the same variables, but the maximum session lifetime (the runtime's default)."""
    p = session_expiry_pipeline
    functions = app_function.stack_functions(p.stack)
    cleanup = next(f for f in functions if f.name == p.function.name)
    rebuilt = app_function.derived_session_environment(
        functions, table_name=p.table_name, cleanup=cleanup
    )
    granted = p.session_environment("Message")
    granted.pop(contract.ENV_MAX_SESSION_LIFETIME_SECONDS)
    assert rebuilt == granted
