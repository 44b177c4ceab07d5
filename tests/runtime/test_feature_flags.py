"""Feature flags in AWS AppConfig (issue 26 part 1), through the real handler in moto.

The flags are served by moto's AppConfig as the emulator teaches it
(``cdk_session_expiry.testing.models._moto_appconfig``: environments, deployments and the AppConfig
Data API, which moto lacks); every call is a real boto3 call. The handler reads the flags at
most every 15+ seconds per process: :func:`poll_now` tells the process's reader that the
interval has passed (what a clock would do), nothing else of it is touched.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from flags_support import DRAIN, Flags, poll_now
from ownership_support import emf_totals
from runtime_support import REGION, FakeContext, Sandbox, Session, event
from session_expiry_runtime import handler as handler_module
from session_expiry_runtime.switches.feature_flags import FlagSource, parse_flags

from cdk_session_expiry.testing.models import _moto_appconfig


@pytest.fixture
def flags(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, fresh_handler: None
) -> Iterator[Flags]:
    _moto_appconfig.install()
    try:
        served = Flags()
        served.deploy()
        for name, value in {**sandbox.env(), **served.env_vars()}.items():
            monkeypatch.setenv(name, value)
        yield served
    finally:
        _moto_appconfig.uninstall()


def target_calls() -> list[str]:
    """Every call the cleanup makes to a target (connections, grants, scratch), recorded."""
    calls: list[str] = []
    clients = handler_module.get_cleaner().clients
    for client in (clients.apigateway, clients.kms, clients.s3):
        client.meta.events.register("before-call", lambda model, **_: calls.append(model.name))
    return calls


def deferred_items(sandbox: Sandbox) -> list[dict[str, Any]]:
    items = sandbox.ddb.scan(TableName=sandbox.config.deferred_work_table_name)["Items"]
    return [i for i in items if i["resource"]["S"].startswith("deferred#")]


def remove(sandbox: Sandbox, *session_ids: str) -> tuple[list[Session], list[dict[str, Any]]]:
    """Create the sessions, delete them; their REMOVE records (Lambda's shape)."""
    sessions = [sandbox.create_session(s) for s in session_ids]
    sandbox.read_stream()
    for s in session_ids:
        sandbox.delete(s)
    return sessions, sandbox.removes()


def test_a_disabled_step_is_deferred_the_others_run_and_it_is_done_once_when_back_on(
    flags: Flags, sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    flags.deploy(DeleteScratch=False)
    sessions, records = remove(sandbox, "s-1", "s-2")

    response = handler_module.handler(event(*records), FakeContext())

    assert response == {"batchItemFailures": []}
    for s in sessions:  # connection and grant released, scratch kept
        assert not sandbox.connection_exists(s.connection_id)
        assert s.grant_id not in sandbox.grant_ids()
        assert sorted(sandbox.keys_under(s.prefix)) == sorted(s.keys)
    assert emf_totals(capsys.readouterr().out)["StepsDisabled|Action=DeleteScratch"] == 2
    assert {i["deferredStep"]["S"] for i in deferred_items(sandbox)} == {"DeleteScratch"}
    assert len(deferred_items(sandbox)) == 2

    assert handler_module.handler(DRAIN, FakeContext())["done"] == {}  # flag still off
    assert all(sandbox.keys_under(s.prefix) for s in sessions)

    flags.deploy()  # back on
    report = handler_module.handler(DRAIN, FakeContext())
    again = handler_module.handler(DRAIN, FakeContext())

    assert report["done"] == {"DeleteScratch": 2} and report["failed"] == {"DeleteScratch": 0}
    assert again["done"] == {}  # nothing left: none done twice
    assert all(sandbox.is_clean(s) for s in sessions)
    assert deferred_items(sandbox) == []
    totals = emf_totals(capsys.readouterr().out)
    assert totals["DeferredWorkDone|Action=DeleteScratch"] == 2
    assert totals["ScratchObjectsDeleted"] == 4  # 2 objects a session, deleted once
    assert "SessionsCleaned|Reason=explicit" not in totals  # counted at the removal only


def test_enabled_off_calls_no_target_and_everything_is_cleaned_once_when_back_on(
    flags: Flags, sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    flags.deploy(enabled=False)
    sessions, records = remove(sandbox, "s-1", "s-2", "s-3")
    calls = target_calls()

    response = handler_module.handler(event(*records), FakeContext())

    assert response == {"batchItemFailures": []}
    assert calls == []
    assert all(sandbox.is_intact(s) for s in sessions)
    assert emf_totals(capsys.readouterr().out)["SessionsDeferred"] == 3

    flags.deploy()
    report = handler_module.handler(DRAIN, FakeContext())
    handler_module.handler(DRAIN, FakeContext())

    assert report["done"] == {"*": 3}
    assert all(sandbox.is_clean(s) for s in sessions)
    assert calls.count("DeleteConnection") == 3 and calls.count("RetireGrant") == 3
    assert deferred_items(sandbox) == []
    assert emf_totals(capsys.readouterr().out)["SessionsCleaned|Reason=explicit"] == 3


def test_dry_run_flag_changes_nothing(flags: Flags, sandbox: Sandbox) -> None:
    flags.deploy(dryRun=True)
    sessions, records = remove(sandbox, "s-1")

    assert handler_module.handler(event(*records), FakeContext()) == {"batchItemFailures": []}

    assert sandbox.is_intact(sessions[0])
    assert deferred_items(sandbox) == []
    handler_module.handler(DRAIN, FakeContext())
    assert sandbox.is_intact(sessions[0])


def unreachable() -> None:
    """Point the process's AppConfig Data client at a closed localhost port: every read fails
    with a connection error (moto cannot make AppConfig unreachable)."""
    reader = handler_module._flags
    assert reader is not None
    reader.client = boto3.client(
        "appconfigdata",
        region_name=REGION,
        endpoint_url="http://127.0.0.1:9",
        config=boto3.session.Config(retries={"total_max_attempts": 1}, connect_timeout=1),
    )
    reader._token = None
    poll_now()


def test_appconfig_unreachable_keeps_the_last_good_flags_and_counts(
    flags: Flags, sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    flags.deploy(DeleteScratch=False)
    handler_module.handler(event(), FakeContext())  # a good read: DeleteScratch off
    unreachable()
    sessions, records = remove(sandbox, "s-1")

    handler_module.handler(event(*records), FakeContext())

    assert sorted(sandbox.keys_under(sessions[0].prefix)) == sorted(sessions[0].keys)
    assert not sandbox.connection_exists(sessions[0].connection_id)
    totals = emf_totals(capsys.readouterr().out)
    assert totals["FeatureFlagsReadFailures"] == 1
    assert totals["StepsDisabled|Action=DeleteScratch"] == 1


def test_appconfig_unreachable_from_the_start_holds_every_record_and_counts(
    flags: Flags, sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    handler_module.get_cleaner()
    unreachable()
    sessions, records = remove(sandbox, "s-1")

    response = handler_module.handler(event(*records), FakeContext())

    # Never read in this execution environment: no guess (the deploy-time defaults could undo
    # a lever the operator pulled); held as enabled off holds it, for the drain.
    assert response == {"batchItemFailures": []}
    assert sandbox.is_intact(sessions[0])
    assert [i["deferredStep"]["S"] for i in deferred_items(sandbox)] == ["*"]
    assert emf_totals(capsys.readouterr().out)["FeatureFlagsReadFailures"] == 1


def test_fails_to_deploy_a_flag_document_the_schema_refuses(sandbox: Sandbox) -> None:
    _moto_appconfig.install()
    try:
        ac = boto3.client("appconfig", region_name=REGION)
        app = ac.create_application(Name="a")["Id"]
        schema = {"type": "object", "required": ["flags", "values"]}
        profile = ac.create_configuration_profile(
            ApplicationId=app,
            Name="p",
            LocationUri="hosted",
            Type="AWS.AppConfig.FeatureFlags",
            Validators=[{"Type": "JSON_SCHEMA", "Content": json.dumps(schema)}],
        )["Id"]
        env = ac.create_environment(ApplicationId=app, Name="e")["Id"]
        strategy = ac.create_deployment_strategy(
            Name="s", DeploymentDurationInMinutes=0, GrowthFactor=100, ReplicateTo="NONE"
        )["Id"]
        version = ac.create_hosted_configuration_version(
            ApplicationId=app,
            ConfigurationProfileId=profile,
            Content=b'{"flags": {}}',
            ContentType="application/json",
        )["VersionNumber"]
        with pytest.raises(ac.exceptions.BadRequestException, match="'values' is a required"):
            ac.start_deployment(
                ApplicationId=app,
                EnvironmentId=env,
                DeploymentStrategyId=strategy,
                ConfigurationProfileId=profile,
                ConfigurationVersion=str(version),
            )
    finally:
        _moto_appconfig.uninstall()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not JSON"),
        (b"[]", "expected a JSON object"),
        (b'{"enabled": {"enabled": "yes"}}', "flag 'enabled'"),
    ],
)
def test_fails_to_parse_a_document_that_is_not_flags(body: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_flags(body, default_dry_run=False)


def test_a_deploy_time_dry_run_stays_on_whatever_the_flag() -> None:
    flags = parse_flags(b'{"dryRun": {"enabled": false}}', default_dry_run=True)
    assert flags.dry_run and flags.enabled and flags.disabled_steps == frozenset()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SESSION_EXPIRY_FLAGS_APPLICATION": "a"}, "all three"),
        (
            {
                "SESSION_EXPIRY_FLAGS_APPLICATION": "a",
                "SESSION_EXPIRY_FLAGS_ENVIRONMENT": "e",
                "SESSION_EXPIRY_FLAGS_PROFILE": "p",
                "SESSION_EXPIRY_FLAGS_POLL_SECONDS": "5",
            },
            "at least 15",
        ),
    ],
)
def test_fails_on_a_bad_flag_source(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FlagSource.from_env(env)
