"""Replay refuses what it cannot honour (issue 21, part A, point 3).

* ``--stream-arn`` of another deployment's table, with this deployment's settings: before the
  fix replay printed ``status=replayed``, exited 0 and deleted the other deployment's messages
  while its grants and objects remained. Now it exits 2 (could not run) before any message is
  received, naming both tables.
* Custom steps import as the deployed function imports them: from ``--steps-path``, or by
  default from the app's directory (its ``cdk.out``, as ``cdk synth`` staged the cleanup
  function's code). Before, ``cannot import 'my_steps...'`` from an operator's shell.
* Every failed record's cause is in the JSON line (``error`` was ``null``: the cause stayed in
  a log line the CLI drops).

Real moto resources (queue, table, stream, connections, grants, objects) and the real CLI entry
point (``replay.main``); the custom steps' code is staged by a real synth of ``SessionExpiry``.
The one stand-in: ``DeleteConnection`` answers 403 ``ForbiddenException`` where a test needs a
record to fail again (moto never refuses it), as ``runtime_faults`` does.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from runtime_faults import _response, rest_json_error
from runtime_support import REGION, SESSION, Sandbox
from session_expiry_runtime.recovery import replay
from session_expiry_runtime.recovery.replay_steps import StepsPathError, steps_path
from test_replay import FailedBatch
from test_replay_trust import _cleanup_function, _settings, other_table_failure

STEP_CODE = """
CALLS = []

def clean(old_image, reason):
    CALLS.append(old_image["pk"])
"""
STEPS = [{"name": "CountReplays", "handler": "my_steps.replayed.clean"}]


@pytest.fixture
def failed(sandbox: Sandbox) -> FailedBatch:
    return FailedBatch(sandbox)


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An app's directory: its custom step's code in ``cleanup_steps/my_steps/`` (what the
    ``CustomCleanupStep``'s ``code`` names), the current directory; ``sys.path`` and the
    imported modules are restored after the test."""
    package = tmp_path / "cleanup_steps" / "my_steps"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "replayed.py").write_text(textwrap.dedent(STEP_CODE))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path
    for name in [m for m in sys.modules if m == "my_steps" or m.startswith("my_steps.")]:
        del sys.modules[name]


def synth(app_dir: Path) -> Path:
    """``cdk synth`` of an app whose ``SessionExpiry`` runs the step: the cloud assembly."""
    from aws_cdk import App, Stack

    from cdk_session_expiry import CustomCleanupStep, SessionExpiry

    app = App(outdir=str(app_dir / "cdk.out"))
    stack = Stack(app, "Replayed")
    step = CustomCleanupStep(
        name="CountReplays",
        code=app_dir / "cleanup_steps",
        handler="my_steps.replayed.clean",
        allow_acting_on_image_values=True,  # it counts calls; it acts on nothing
    )
    SessionExpiry(stack, "Sessions", custom_steps=[step])
    app.synth()
    return app_dir / "cdk.out"


def _with_steps(monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox) -> None:
    _settings(monkeypatch, sandbox)
    monkeypatch.setenv("SESSION_EXPIRY_CUSTOM_STEPS", json.dumps(STEPS))


def _lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in out.splitlines()]


# --- --stream-arn of another table --------------------------------------------------------------


@pytest.mark.parametrize("settings_from", ["SESSION_EXPIRY_TABLE_NAME", "--env-from-function"])
def test_fails_cli_on_another_deployments_stream_before_any_message_is_read(
    sandbox: Sandbox,
    failed: FailedBatch,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    settings_from: str,
) -> None:
    """Deployment A's settings, deployment B's failure message and ``--stream-arn`` B."""
    victim = sandbox.create_session("b-session")
    foreign = other_table_failure(sandbox, victim)  # B: the table "other"
    failed.sqs.purge_queue(QueueUrl=failed.queue_url)
    failed.sqs.send_message(QueueUrl=failed.queue_url, MessageBody=json.dumps(foreign))
    args = [
        "--queue-url",
        failed.queue_url,
        "--stream-arn",
        foreign["DDBStreamBatchInfo"]["streamArn"],
    ]
    if settings_from == "--env-from-function":
        _cleanup_function(sandbox, mapped=True)  # A's function, mapped to A's stream
        _settings(monkeypatch, sandbox, **{k: True for k in sandbox.env()})
        args += ["--env-from-function", "cleanup"]
    else:
        _settings(monkeypatch, sandbox)

    status = replay.main(args, session=SESSION)

    assert status == replay.EXIT_COULD_NOT_RUN == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no message line: nothing was received
    a_table = sandbox.stream_arn.rsplit("/stream/", 1)[0]
    b_table = a_table.replace(":table/sessions", ":table/other")
    assert captured.err.startswith("replay: StreamArnNotOfSettingsTable: --stream-arn")
    assert f"is a stream of table {b_table}" in captured.err
    assert f"the cleanup settings are those of table {a_table}" in captured.err
    visible = failed.sqs.get_queue_attributes(
        QueueUrl=failed.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]["ApproximateNumberOfMessages"]
    assert visible == "1"  # never received: still visible, never deleted
    assert sandbox.is_intact(victim)


def test_cli_stream_arn_of_the_settings_table_is_replayed(
    sandbox: Sandbox,
    failed: FailedBatch,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _settings(monkeypatch, sandbox)

    status = replay.main(
        ["--queue-url", failed.queue_url, "--stream-arn", sandbox.stream_arn], session=SESSION
    )

    assert status == 0, capsys.readouterr().err
    assert failed.queued() == 0 and all(sandbox.is_clean(s) for s in failed.sessions)


# --- custom steps -------------------------------------------------------------------------------


def test_custom_steps_import_from_the_apps_cloud_assembly_by_default(
    sandbox: Sandbox,
    failed: FailedBatch,
    app_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assembly = synth(app_dir)
    _with_steps(monkeypatch, sandbox)

    status = replay.main(["--queue-url", failed.queue_url], session=SESSION)

    captured = capsys.readouterr()
    assert status == 0, captured.err
    (line,) = _lines(captured.out)
    assert line["status"] == "replayed" and line["deleted"] is True
    replayed = sys.modules["my_steps.replayed"]
    assert sorted(replayed.CALLS) == ["s-0", "s-1", "s-2"]
    assert Path(replayed.__file__).parent.parent.parent == assembly  # cdk.out/asset.<hash>/


def test_custom_steps_import_from_steps_path(
    sandbox: Sandbox,
    failed: FailedBatch,
    app_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _with_steps(monkeypatch, sandbox)

    status = replay.main(
        ["--queue-url", failed.queue_url, "--steps-path", "cleanup_steps"], session=SESSION
    )

    assert status == 0, capsys.readouterr().err
    replayed = sys.modules["my_steps.replayed"]
    assert sorted(replayed.CALLS) == ["s-0", "s-1", "s-2"]
    assert Path(replayed.__file__) == app_dir / "cleanup_steps" / "my_steps" / "replayed.py"


def test_fails_cli_when_a_custom_step_imports_from_nowhere_and_says_where_to_look(
    sandbox: Sandbox,
    failed: FailedBatch,
    app_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _with_steps(monkeypatch, sandbox)  # no cdk.out: never synthesized here

    status = replay.main(["--queue-url", failed.queue_url], session=SESSION)

    assert status == replay.EXIT_COULD_NOT_RUN
    err = capsys.readouterr().err
    assert "cannot import 'my_steps.replayed'" in err
    assert "--steps-path DIR" in err and "./cdk.out" in err
    assert failed.queued() == 1 and failed.connections_open()


def test_fails_a_steps_path_that_is_not_a_directory(app_dir: Path) -> None:
    with pytest.raises(StepsPathError, match=r"--steps-path 'nowhere': expected a directory"):
        steps_path(json.dumps(STEPS), ["nowhere"])


def test_fails_two_staged_copies_of_one_step_package(app_dir: Path) -> None:
    """Two cleanup functions of the latest synth stage different code as ``my_steps``: replay
    cannot tell which one the failed batch ran, and refuses to guess."""
    assembly = app_dir / "cdk.out"
    files = {}
    for name in ("asset.aaa", "asset.bbb"):
        (assembly / name / "session_expiry_runtime").mkdir(parents=True)
        (assembly / name / "my_steps").mkdir()
        files[name] = {"source": {"path": name, "packaging": "zip"}}
    (assembly / "App.assets.json").write_text(json.dumps({"files": files}))

    with pytest.raises(StepsPathError, match=r"'my_steps' is staged in 2 copies .* --steps-path"):
        steps_path(json.dumps(STEPS))


def test_a_stale_staged_copy_of_an_earlier_synth_is_not_used(app_dir: Path) -> None:
    assembly = synth(app_dir)
    stale = assembly / "asset.0000-earlier-synth"
    (stale / "session_expiry_runtime").mkdir(parents=True)
    (stale / "my_steps").mkdir()

    (found,) = steps_path(json.dumps(STEPS))
    assert found.parent == assembly and found != stale and (found / "my_steps").is_dir()


# --- every failed record's cause in the JSON line -----------------------------------------------


def test_a_record_that_fails_again_has_its_cause_in_the_json_line(
    sandbox: Sandbox,
    failed: FailedBatch,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _settings(monkeypatch, sandbox)
    session = boto3.session.Session(region_name=REGION)  # its clients carry the stub below

    def forbidden(request: Any, **_: Any) -> Any:
        return _response(request, *rest_json_error(403, "ForbiddenException", "no"), False)

    session.events.register_first("before-send.apigatewaymanagementapi.DeleteConnection", forbidden)

    status = replay.main(["--queue-url", failed.queue_url], session=session)

    assert status == replay.EXIT_SOME_KEPT
    (line,) = _lines(capsys.readouterr().out)
    assert line["status"] == "failed" and line["deleted"] is False
    assert sorted(line["failures"]) == sorted(line["failed_sequence_numbers"])
    assert len(line["failures"]) == 3
    connections = {s.connection_id for s in failed.sessions}
    for cause in line["failures"].values():
        (text,) = cause.values()
        assert list(cause) == ["DeleteConnection"]
        connection, _, error = text.partition(": ")
        assert connection in connections and error == "ForbiddenException: no"
    assert line["error"].startswith("3 record(s) failed again (see failures): ")
    assert line["error"].count(": ForbiddenException: no") == 3
    assert failed.queued() == 1
