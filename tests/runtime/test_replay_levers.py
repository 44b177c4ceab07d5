"""Replay obeys the levers the cleanup function obeys: its AppConfig feature flags.

Before, ``python -m session_expiry_runtime.replay`` never read the flags: with ``dryRun`` on it
closed the connections a failed batch had left open, answered ``replayed`` (exit 0) and deleted
the message; ``enabled`` off and a step switched off did not reach it either. Now it reads
them once, with the function's own reader, from the same settings (the environment, or the
function's with ``--env-from-function``), before any message is read:

* ``dryRun`` on: a dry run — nothing closed, the message kept, ``dry-run`` (exit 1: not asked);
* ``enabled`` off: refused (exit 2), the message never received, nothing touched;
* a step off: that step held back (``held-back``, ``held_back``), its work deferred, the
  message kept — replayed once the flag is on;
* ``--ignore-feature-flags``: replayed regardless, said on stderr;
* a read that fails: refused (exit 2), never taken for "all on";
* no flags configured: unchanged, AppConfig never called.

Every call is a real boto3 call through the real CLI (``replay.main``) against moto. The
stand-ins, for what moto does not reproduce: AppConfig environments, deployments and the
AppConfig Data API (``cdk_session_expiry.testing.models._moto_appconfig``, as the feature-flag tests
use it), and the failed batch's ``DeleteConnection`` answering 403 (``FailedBatch``: moto never
refuses it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from flags_support import Flags
from moto.core import DEFAULT_ACCOUNT_ID
from runtime_support import REGION, SESSION, TABLE, Sandbox
from session_expiry_runtime.recovery import replay
from test_kinesis_replay import _iso, _removed
from test_kinesis_source import STREAM, KinesisSource
from test_replay import FailedBatch
from test_replay_trust import _settings

from cdk_session_expiry.testing.models import _moto_appconfig

OVERRIDE = "--ignore-feature-flags"


@pytest.fixture
def failed(sandbox: Sandbox) -> FailedBatch:
    """Three sessions whose batch failed for good: their connections are still open (the
    grants and scratch objects went), the batch's metadata is on the queue."""
    batch = FailedBatch(sandbox)
    assert batch.connections_open() and batch.queued() == 1
    return batch


@pytest.fixture
def flags(sandbox: Sandbox) -> Iterator[Flags]:
    """The cleanup's feature flags in AppConfig, every flag on."""
    _moto_appconfig.install()
    try:
        served = Flags()
        served.deploy()
        yield served
    finally:
        _moto_appconfig.uninstall()


def _with_flags(monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox, flags: Flags) -> None:
    """The cleanup function's settings in replay's environment, its flags included."""
    _settings(monkeypatch, sandbox)
    for name, value in flags.env_vars().items():
        monkeypatch.setenv(name, value)


def _cleanup_function(sandbox: Sandbox, flags: Flags) -> None:
    """The cleanup function as the construct deploys it with ``feature_flags``: the flags'
    identifiers and the deferred-work and session tables in its environment (the drain reads
    deferred records back from the session table), an event source mapping on the table's
    stream."""
    role = SESSION.client("iam").create_role(RoleName="cleanup", AssumeRolePolicyDocument="{}")
    env = sandbox.env()
    lam = SESSION.client("lambda")
    lam.create_function(
        FunctionName="cleanup",
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler="session_expiry_runtime.handler.handler",
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},  # an empty zip: never run here
        Environment={"Variables": {**env, **flags.env_vars()}},
    )
    lam.create_event_source_mapping(
        EventSourceArn=sandbox.stream_arn, FunctionName="cleanup", StartingPosition="LATEST"
    )


def _lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in out.splitlines()]


def _visible(failed: FailedBatch) -> int:
    """Messages visible now: a message replay never received is still visible."""
    attributes = failed.sqs.get_queue_attributes(
        QueueUrl=failed.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def _deferred(sandbox: Sandbox) -> list[str]:
    """The steps of the deferred work items in the deferred-work table."""
    items = sandbox.ddb.scan(TableName=str(sandbox.config.deferred_work_table_name))["Items"]
    return [i["deferredStep"]["S"] for i in items if i["resource"]["S"].startswith("deferred#")]


@pytest.mark.parametrize("settings_from", ["environment", "--env-from-function"])
def test_dry_run_flag_makes_replay_a_dry_run_that_keeps_the_message(
    sandbox: Sandbox,
    failed: FailedBatch,
    flags: Flags,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    settings_from: str,
) -> None:
    flags.deploy(dryRun=True)
    args = ["--queue-url", failed.queue_url]
    if settings_from == "--env-from-function":  # nothing of the flags in replay's environment
        _cleanup_function(sandbox, flags)
        _settings(monkeypatch, sandbox, **{k: True for k in sandbox.env()})
        args += ["--env-from-function", "cleanup"]
    else:
        _with_flags(monkeypatch, sandbox, flags)

    status = replay.main(args, session=SESSION)

    captured = capsys.readouterr()
    # Every message kept and not asked for with --dry-run: not "all replayed".
    assert status == replay.EXIT_SOME_KEPT == 1, captured.err
    (line,) = _lines(captured.out)
    assert line["status"] == "dry-run" and line["deleted"] is False
    assert line["cleaned"] == 3  # would be
    assert "the feature flag dryRun is on" in line["error"]
    assert failed.connections_open()  # nothing closed
    assert failed.queued() == 1  # the message kept
    assert _deferred(sandbox) == []  # a dry run defers nothing either
    assert "dryRun is on: replaying as a dry run" in captured.err
    assert f"{OVERRIDE} replays regardless" in captured.err
    assert captured.err.rstrip().endswith("1 message(s): 1 dry-run; exit 1")


def test_fails_to_start_while_enabled_is_off_and_touches_nothing(
    sandbox: Sandbox,
    failed: FailedBatch,
    flags: Flags,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags.deploy(enabled=False)
    _with_flags(monkeypatch, sandbox, flags)

    status = replay.main(["--queue-url", failed.queue_url], session=SESSION)

    assert status == replay.EXIT_COULD_NOT_RUN == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no message line: nothing was received
    (said,) = captured.err.splitlines()  # one line: the lever, its value, the override
    assert said.startswith("replay: LeverRefusal: the feature flag enabled is off (AppConfig")
    assert f"or pass {OVERRIDE} to replay regardless" in said
    assert _visible(failed) == 1  # never received
    assert failed.connections_open()
    assert _deferred(sandbox) == []


def test_a_step_switched_off_is_held_back_the_message_kept_until_it_is_on(
    sandbox: Sandbox,
    failed: FailedBatch,
    flags: Flags,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags.deploy(DeleteConnection=False)
    _with_flags(monkeypatch, sandbox, flags)

    status = replay.main(["--queue-url", failed.queue_url], session=SESSION)

    captured = capsys.readouterr()
    assert status == replay.EXIT_SOME_KEPT == 1, captured.err
    (line,) = _lines(captured.out)
    sequence_numbers = [r["dynamodb"]["SequenceNumber"] for r in failed.records]
    assert line["status"] == "held-back" and line["deleted"] is False
    assert line["cleaned"] == 0
    assert line["held_back"] == {
        s: {"DeleteConnection": "feature flag DeleteConnection is off"} for s in sequence_numbers
    }
    assert line["not_cleaned"] == dict.fromkeys(sequence_numbers, "held-back")
    assert "DeleteConnection held back by a feature flag" in line["error"]
    assert "DeleteConnection off: held back" in captured.err
    assert failed.connections_open()  # the step switched off called nothing
    assert failed.queued() == 1
    assert _deferred(sandbox) == ["DeleteConnection"] * 3  # as the cleanup defers it

    flags.deploy()  # back on: the kept message is replayed whole
    status = replay.main(["--queue-url", failed.queue_url], session=SESSION)

    (line,) = _lines(capsys.readouterr().out)
    assert status == 0 and line["status"] == "replayed" and line["deleted"] is True
    assert all(sandbox.is_clean(s) for s in failed.sessions)
    assert failed.queued() == 0


def test_override_replays_regardless_of_the_flags_and_says_so(
    sandbox: Sandbox,
    failed: FailedBatch,
    flags: Flags,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags.deploy(enabled=False, dryRun=True, DeleteConnection=False)
    _with_flags(monkeypatch, sandbox, flags)

    status = replay.main(["--queue-url", failed.queue_url, OVERRIDE], session=SESSION)

    captured = capsys.readouterr()
    assert status == 0, captured.err
    (line,) = _lines(captured.out)
    assert line["status"] == "replayed" and line["deleted"] is True
    assert all(sandbox.is_clean(s) for s in failed.sessions)
    assert failed.queued() == 0
    assert (
        f"replay: {OVERRIDE}: replaying regardless of the feature flags (AppConfig application "
        in captured.err
    )
    assert "which say enabled=off, dryRun=on, DeleteConnection=off" in captured.err


@pytest.mark.parametrize("case", ["profile gone", "nothing deployed", "overridden"])
def test_fails_to_start_when_the_flags_cannot_be_read_unless_overridden(
    sandbox: Sandbox,
    failed: FailedBatch,
    flags: Flags,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
) -> None:
    _with_flags(monkeypatch, sandbox, flags)
    if case == "nothing deployed":  # an environment without a deployment: an empty answer
        empty = flags.ac.create_environment(ApplicationId=flags.app, Name="empty")["Id"]
        monkeypatch.setenv("SESSION_EXPIRY_FLAGS_ENVIRONMENT", empty)
    else:  # a profile AppConfig does not know (deleted or replaced out of band)
        monkeypatch.setenv("SESSION_EXPIRY_FLAGS_PROFILE", "gone")
    override = case == "overridden"

    status = replay.main(
        ["--queue-url", failed.queue_url, *([OVERRIDE] if override else [])], session=SESSION
    )

    captured = capsys.readouterr()
    if override:
        assert status == 0, captured.err
        assert f"replay: {OVERRIDE}: the feature flags (AppConfig application" in captured.err
        assert "could not be read (ResourceNotFoundException" in captured.err
        assert failed.queued() == 0 and all(sandbox.is_clean(s) for s in failed.sessions)
        return
    assert status == replay.EXIT_COULD_NOT_RUN == 2
    assert captured.out == ""
    (said,) = captured.err.splitlines()
    assert said.startswith("replay: LeverRefusal: the feature flags could not be read (AppConfig")
    assert f"or pass {OVERRIDE}" in said
    why = "ResourceNotFoundException" if case == "profile gone" else "empty configuration"
    assert why in said
    assert _visible(failed) == 1 and failed.connections_open()


@pytest.mark.parametrize("override", [False, True])
def test_without_flags_configured_replay_is_unchanged_and_never_calls_appconfig(
    sandbox: Sandbox,
    failed: FailedBatch,
    flags: Flags,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    override: bool,
) -> None:
    """Flags exist in AppConfig (``enabled`` off), but the settings name none: not consulted.
    (Without the override this guards today's behaviour; it passed before the change too.)"""
    flags.deploy(enabled=False)
    _settings(monkeypatch, sandbox)  # no SESSION_EXPIRY_FLAGS_*
    calls: list[str] = []

    def record(model: Any, **_: Any) -> None:
        calls.append(model.name)

    SESSION.events.register("before-call.appconfigdata", record)
    try:
        status = replay.main(
            ["--queue-url", failed.queue_url, *([OVERRIDE] if override else [])],
            session=SESSION,
        )
    finally:
        SESSION.events.unregister("before-call.appconfigdata", record)

    captured = capsys.readouterr()
    assert status == 0, captured.err
    (line,) = _lines(captured.out)
    assert line["status"] == "replayed" and line["deleted"] is True
    assert line["held_back"] == {}
    assert all(sandbox.is_clean(s) for s in failed.sessions)
    assert calls == []
    if override:
        assert f"replay: {OVERRIDE}: no feature flags are configured: none ignored" in (
            captured.err
        )
    else:
        assert "feature flags" not in captured.err


@pytest.mark.parametrize("asked", [False, True])
def test_a_dry_run_not_asked_for_keeps_every_message_and_exits_1(
    sandbox: Sandbox,
    failed: FailedBatch,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    asked: bool,
) -> None:
    """The deploy-time dry run and the flag's agree: a dry run the operator did not ask for
    with ``--dry-run`` is not "every message replayed" (exit 0 before)."""
    _settings(monkeypatch, sandbox)
    monkeypatch.setenv("SESSION_EXPIRY_DRY_RUN", "true")

    status = replay.main(
        ["--queue-url", failed.queue_url, *(["--dry-run"] if asked else [])], session=SESSION
    )

    (line,) = _lines(capsys.readouterr().out)
    assert line["status"] == "dry-run" and line["deleted"] is False
    assert failed.connections_open() and failed.queued() == 1
    if asked:
        assert status == replay.EXIT_ALL_REPLAYED and line["error"] is None
    else:
        assert status == replay.EXIT_SOME_KEPT
        assert "SESSION_EXPIRY_DRY_RUN" in line["error"]


@pytest.mark.parametrize("lever", ["dryRun", "enabled"])
def test_a_kinesis_time_range_obeys_the_flags_too(
    sandbox: Sandbox,
    flags: Flags,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kinesis_destinations: dict[str, list[str]],
    lever: str,
) -> None:
    kinesis_destinations[TABLE] = [f"arn:aws:kinesis:{REGION}:{DEFAULT_ACCOUNT_ID}:stream/{STREAM}"]
    _with_flags(monkeypatch, sandbox, flags)
    source = KinesisSource()
    now = datetime.now(timezone.utc)
    session = _removed(sandbox, source, "s-1", now)
    flags.deploy(**{lever: lever == "dryRun"})
    argv = ["--kinesis-stream-arn", source.arn]
    argv += ["--from", _iso(now - timedelta(minutes=5)), "--to", _iso(now)]

    status = replay.main(argv, session=SESSION)

    captured = capsys.readouterr()
    assert sandbox.is_intact(session)
    if lever == "enabled":
        assert status == replay.EXIT_COULD_NOT_RUN and captured.out == ""
        assert "replay: LeverRefusal: the feature flag enabled is off" in captured.err
        return
    (line,) = _lines(captured.out)
    assert status == replay.EXIT_SOME_KEPT
    assert (line["status"], line["cleaned"]) == ("dry-run", 1)
    assert "the feature flag dryRun is on" in line["error"]


def test_cli_help_says_how_replay_obeys_the_feature_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        replay.main(["--help"])

    text = " ".join(capsys.readouterr().out.split())
    for words in (
        f"[{OVERRIDE}]",
        "replay regardless of the cleanup's feature flags (enabled, dryRun, one per step)",
        "enabled off: refused (exit 2), nothing read or changed",
        "dryRun on: a dry run (nothing changed, every message kept, status dry-run, exit 1)",
        "that step is held back as the cleanup holds it back",
        'A read that fails: refused (exit 2), never taken for "all on"',
        "partly-cleaned | held-back (all kept)",
        "2 could not run: the feature flag enabled is off or the flags could not be read",
    ):
        assert words in text
