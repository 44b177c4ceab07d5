"""Review of issue 21 (on-call operator): the replay CLI from an operator's shell.

Real moto resources and the real CLI entry point (``replay.main``), as ``test_replay_trust``.
Each test is a command an operator could type; what it must do: refuse a value it cannot honour
before touching anything (exit 2, naming the value and what was expected), and never report
success it did not earn.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from runtime_support import SESSION, Sandbox, aws_calls
from session_expiry_runtime.recovery import replay
from test_kinesis_source import KinesisSource, change
from test_replay import FailedBatch
from test_replay_trust import _settings


@pytest.fixture
def failed(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> FailedBatch:
    batch = FailedBatch(sandbox)
    _settings(monkeypatch, sandbox)
    return batch


def _visible(failed: FailedBatch) -> int:
    attributes = failed.sqs.get_queue_attributes(
        QueueUrl=failed.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def test_fails_to_report_an_empty_queue_on_a_rerun_after_a_message_was_kept(
    failed: FailedBatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An operator replays, one message is kept (exit 1), fixes what they can and runs the
    same command again at once: the kept message is still in the queue, so the rerun must not
    say "every message was replayed, or the queue was empty" (exit 0, no line)."""
    failed.sqs.send_message(QueueUrl=failed.queue_url, MessageBody="not an on-failure record")

    first = replay.main(["--queue-url", failed.queue_url], session=SESSION)
    capsys.readouterr()
    again = replay.main(["--queue-url", failed.queue_url], session=SESSION)

    assert first == replay.EXIT_SOME_KEPT
    assert failed.queued() == 1  # the kept message: never deleted
    assert again == replay.EXIT_SOME_KEPT
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert line["status"] == "invalid" and line["deleted"] is False
    assert _visible(failed) == 1  # visible again: the failure queue's alarm still sees it


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--from", "nonsense"], "--from"),
        (["--to", "2026-01-01T00:00:00Z"], "--to"),
        (["--key", "aws/lambda/some-object"], "--key"),
        (["--delete"], "--delete"),
    ],
    ids=["from", "to", "key", "delete"],
)
def test_fails_an_option_that_does_not_apply_to_the_queue_before_reading_it(
    failed: FailedBatch, capsys: pytest.CaptureFixture[str], extra: list[str], named: str
) -> None:
    """``--from nonsense`` with ``--queue-url`` was accepted and the whole queue replayed."""
    with pytest.raises(SystemExit) as exited:
        replay.main(["--queue-url", failed.queue_url, *extra], session=SESSION)

    assert exited.value.code == replay.EXIT_COULD_NOT_RUN
    err = capsys.readouterr().err
    assert named in err and "expected" in err
    assert _visible(failed) == 1  # never received
    assert failed.connections_open()  # nothing cleaned


@pytest.mark.parametrize(
    "source",
    [
        ["--bucket", "failures", "--key", "aws/lambda/some-object"],
        [
            *("--kinesis-stream-arn", "arn:aws:kinesis:us-east-1:123456789012:stream/s"),
            *("--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T01:00:00Z"),
        ],
    ],
    ids=["bucket", "kinesis"],
)
def test_fails_max_messages_with_a_source_that_is_not_the_queue(
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    source: list[str],
) -> None:
    """``--max-messages 1`` with ``--bucket`` was ignored: the object was replayed, exit 0."""
    _settings(monkeypatch, sandbox)
    with aws_calls() as calls, pytest.raises(SystemExit) as exited:
        replay.main([*source, "--max-messages", "1"], session=SESSION)

    assert exited.value.code == replay.EXIT_COULD_NOT_RUN
    assert (
        "--max-messages 1 does not apply to this source: expected it only with --queue-url URL"
    ) in capsys.readouterr().err
    assert calls == []  # refused before any AWS call


def test_fails_a_steps_path_that_is_not_a_directory_without_custom_steps(
    failed: FailedBatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped ``--steps-path`` was silently ignored when the settings name no custom step."""
    status = replay.main(
        ["--queue-url", failed.queue_url, "--steps-path", "/no/such/dir"], session=SESSION
    )

    assert status == replay.EXIT_COULD_NOT_RUN
    assert "--steps-path '/no/such/dir': expected a directory" in capsys.readouterr().err
    assert _visible(failed) == 1


@pytest.mark.parametrize(
    "arn",
    ["garbage", "arn:aws:dynamodb:us-east-1:123456789012:table/sessions/stream/2026-01-01"],
    ids=["garbage", "dynamodb-stream"],
)
def test_fails_a_kinesis_stream_arn_that_is_not_one_and_names_it(
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    arn: str,
) -> None:
    """Before: ``replay: EndpointResolutionError: Invalid ARN: Failed to parse ARN.`` — neither
    the option nor the value nor what was expected."""
    _settings(monkeypatch, sandbox)
    argv = ["--kinesis-stream-arn", arn, "--from", "2026-01-01T00:00:00Z"]
    argv += ["--to", "2026-01-01T01:00:00Z"]

    status = replay.main(argv, session=SESSION)

    assert status == replay.EXIT_COULD_NOT_RUN
    err = capsys.readouterr().err
    assert f"--kinesis-stream-arn {arn!r}" in err
    assert "expected arn:<partition>:kinesis:<region>:<account>:stream/<name>" in err


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def test_fails_kinesis_replay_of_another_tables_removes_when_the_settings_name_no_table(
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kinesis_destinations: dict[str, list[str]],
) -> None:
    """A Kinesis data stream can carry several tables' changes. Settings as the deployed
    cleanup function has them (no ``SESSION_EXPIRY_TABLE_NAME``), ``--stream-arn`` naming this
    deployment's table: a REMOVE of the table ``other`` must not be cleaned or counted."""
    _settings(monkeypatch, sandbox, SESSION_EXPIRY_TABLE_NAME=True)
    source = KinesisSource()
    kinesis_destinations["sessions"] = [source.arn]  # so does table other, in this story
    now = datetime.now(timezone.utc)
    victim = sandbox.create_session("b-session", expires_at=1)
    sandbox.delete("b-session")
    (remove,) = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    other: dict[str, Any] = change(remove, created_at_ms=int(now.timestamp() * 1000))
    other["tableName"] = "other"
    source.put(other)
    argv = ["--kinesis-stream-arn", source.arn, "--stream-arn", sandbox.stream_arn]
    argv += ["--from", _iso(now - timedelta(minutes=5)), "--to", _iso(now)]

    status = replay.main(argv, session=SESSION)

    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert sum(line["cleaned"] for line in lines) == 0
    assert sandbox.is_intact(victim)
    assert status == replay.EXIT_ALL_REPLAYED  # nothing of this table in the range


def test_fails_kinesis_replay_when_nothing_names_the_table(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The documented command with the deployed function's settings (no table name) and no
    ``--stream-arn``: refused before any record is read, naming what is expected."""
    _settings(monkeypatch, sandbox, SESSION_EXPIRY_TABLE_NAME=True)
    source = KinesisSource()
    now = datetime.now(timezone.utc)
    victim = sandbox.create_session("s-1", expires_at=1)
    sandbox.delete("s-1")
    (remove,) = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    source.put(change(remove, created_at_ms=int(now.timestamp() * 1000)))
    argv = ["--kinesis-stream-arn", source.arn]
    argv += ["--from", _iso(now - timedelta(minutes=5)), "--to", _iso(now)]

    status = replay.main(argv, session=SESSION)

    assert status == replay.EXIT_COULD_NOT_RUN
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"--kinesis-stream-arn {source.arn}: the settings name no table" in captured.err
    assert "expected --stream-arn TABLE_ARN" in captured.err
    assert sandbox.is_intact(victim)


def test_fails_kinesis_replay_with_a_stream_arn_of_another_table_than_the_settings(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--stream-arn`` was silently ignored on the Kinesis path."""
    _settings(monkeypatch, sandbox)  # SESSION_EXPIRY_TABLE_NAME=sessions
    source = KinesisSource()
    other = sandbox.stream_arn.replace(":table/sessions/", ":table/other/")
    argv = ["--kinesis-stream-arn", source.arn, "--stream-arn", other]
    argv += ["--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T01:00:00Z"]

    status = replay.main(argv, session=SESSION)

    assert status == replay.EXIT_COULD_NOT_RUN
    assert "StreamArnNotOfSettingsTable" in capsys.readouterr().err
