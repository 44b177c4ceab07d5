"""Replay refuses a ``--stream-arn`` it cannot honour, also when the settings name no table.

Settings that name no table are the usual case: the construct's cleanup function of a DynamoDB
stream has no ``SESSION_EXPIRY_TABLE_NAME``, so without ``--env-from-function`` the operator's
``--stream-arn`` is the only source of the table replay trusts. Before, nothing checked that
table: a ``--stream-arn`` of a table that does not exist (a typo, another Region) was trusted,
an empty queue answered exit 0, a queue's genuine messages were each kept as
``foreign-stream``, and a Kinesis time range cleaned nothing and exited 0 without a line.
Now the run is refused (exit 2) before any message or record is read, naming the value and
what was expected.

Real moto resources and the real CLI entry point (``replay.main``), as ``test_replay_trust``.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from runtime_support import SESSION, Sandbox, Session
from session_expiry_runtime.recovery import replay
from test_kinesis_source import KinesisSource, change
from test_replay import FailedBatch
from test_replay_trust import _settings, other_table_stream


@pytest.fixture
def failed(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> FailedBatch:
    """A failed batch in the queue; settings as the deployed function has them: no table."""
    batch = FailedBatch(sandbox)
    _settings(monkeypatch, sandbox, SESSION_EXPIRY_TABLE_NAME=True)
    return batch


def _received(failed: FailedBatch) -> int:
    """Messages received and not yet visible again (0: the queue was never read)."""
    attributes = failed.sqs.get_queue_attributes(
        QueueUrl=failed.queue_url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessagesNotVisible"])


@pytest.mark.parametrize("queue", ["one-message", "empty"])
def test_fails_a_stream_arn_of_a_table_that_does_not_exist_before_reading_the_queue(
    sandbox: Sandbox, failed: FailedBatch, capsys: pytest.CaptureFixture[str], queue: str
) -> None:
    """Before: exit 1 with the genuine message kept as ``foreign-stream``, or exit 0 and no
    line at all when the queue was empty."""
    if queue == "empty":
        failed.sqs.purge_queue(QueueUrl=failed.queue_url)
    missing = other_table_stream(sandbox)  # table "other": not in this account and Region

    status = replay.main(
        ["--queue-url", failed.queue_url, "--stream-arn", missing], session=SESSION
    )

    captured = capsys.readouterr()
    assert status == replay.EXIT_COULD_NOT_RUN
    assert captured.out == ""
    assert captured.err == (
        f"replay: StreamArnTableNotFound: --stream-arn {missing}: there is no table 'other' in "
        "us-east-1 (DescribeTable: ResourceNotFoundException, with the account replay runs "
        "as): expected a stream of the session table, the one the cleanup function's event "
        "source mapping reads\n"
    )
    assert _received(failed) == 0 and failed.connections_open()
    assert failed.queued() == (1 if queue == "one-message" else 0)


def test_fails_a_stream_arn_of_another_region_naming_both_tables(
    sandbox: Sandbox, failed: FailedBatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same table name in another Region: replay's clients reach this Region's table,
    whose ARN is not the one given."""
    elsewhere = sandbox.stream_arn.replace(":us-east-1:", ":eu-west-1:")
    here = sandbox.stream_arn.rsplit("/stream/", 1)[0]

    status = replay.main(
        ["--queue-url", failed.queue_url, "--stream-arn", elsewhere], session=SESSION
    )

    err = capsys.readouterr().err
    assert status == replay.EXIT_COULD_NOT_RUN
    assert (
        f"--stream-arn {elsewhere} names table {here.replace(':us-east-1:', ':eu-west-1:')}, "
        f"but the table 'sessions' replay reaches (us-east-1, the account it runs as) is {here}"
    ) in err
    assert "expected a stream of the session table in the Region and account" in err
    assert _received(failed) == 0 and failed.queued() == 1 and failed.connections_open()


def test_a_stream_arn_of_the_session_table_as_the_only_source_is_still_replayed(
    sandbox: Sandbox, failed: FailedBatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status = replay.main(
        ["--queue-url", failed.queue_url, "--stream-arn", sandbox.stream_arn], session=SESSION
    )

    captured = capsys.readouterr()
    assert status == replay.EXIT_ALL_REPLAYED, captured.err
    (line,) = [json.loads(x) for x in captured.out.splitlines()]
    assert line["status"] == "replayed" and line["deleted"] is True
    assert all(sandbox.is_clean(s) for s in failed.sessions) and failed.queued() == 0


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def test_fails_kinesis_replay_with_a_stream_arn_of_a_table_that_does_not_exist(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: exit 0 and no line, the session removed in the range not cleaned."""
    _settings(monkeypatch, sandbox, SESSION_EXPIRY_TABLE_NAME=True)
    source = KinesisSource()
    now = datetime.now(timezone.utc)
    session = sandbox.create_session("s-1", expires_at=1)
    sandbox.delete("s-1")
    (remove,) = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    source.put(change(remove, created_at_ms=int(now.timestamp() * 1000)))
    missing = other_table_stream(sandbox)
    argv = ["--kinesis-stream-arn", source.arn, "--stream-arn", missing]
    argv += ["--from", _iso(now - timedelta(minutes=5)), "--to", _iso(now)]

    status = replay.main(argv, session=SESSION)

    captured = capsys.readouterr()
    assert status == replay.EXIT_COULD_NOT_RUN
    assert captured.out == ""
    assert f"StreamArnTableNotFound: --stream-arn {missing}: there is no table 'other'" in (
        captured.err
    )
    assert sandbox.is_intact(session)


def test_cli_help_says_a_lone_stream_arn_must_name_a_table_replay_reaches(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        replay.main(["--help"])

    text = " ".join(capsys.readouterr().out.split())
    assert "else a table that exists in the Region and account replay runs with" in text
    assert "a --stream-arn of another table than the settings' table or of a table replay " in (
        text
    )
    assert "It must be a Kinesis streaming destination of the table" in text
    assert "a --kinesis-stream-arn that is not the table's Kinesis streaming destination" in text


# --- Kinesis: the table must stream its changes to --kinesis-stream-arn ----------------------


def _removed_in_kinesis(sandbox: Sandbox, source: KinesisSource, now: datetime) -> Session:
    """A session removed now, its REMOVE in the Kinesis stream (as the destination writes it)."""
    session = sandbox.create_session("s-1", expires_at=1)
    sandbox.delete("s-1")
    (remove,) = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    source.put(change(remove, created_at_ms=int(now.timestamp() * 1000)))
    return session


def _range(now: datetime) -> list[str]:
    return ["--from", _iso(now - timedelta(minutes=5)), "--to", _iso(now)]


def test_fails_kinesis_replay_with_a_stream_arn_of_another_existing_table(
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kinesis_destinations: dict[str, list[str]],
) -> None:
    """Before: exit 0 and no line — the range held only the sessions table's REMOVE, and the
    table named (which exists) streams nowhere."""
    _settings(monkeypatch, sandbox, SESSION_EXPIRY_TABLE_NAME=True)
    source = KinesisSource()
    kinesis_destinations["sessions"] = [source.arn]
    sandbox.ddb.create_table(
        TableName="other",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    now = datetime.now(timezone.utc)
    session = _removed_in_kinesis(sandbox, source, now)
    argv = ["--kinesis-stream-arn", source.arn, "--stream-arn", other_table_stream(sandbox)]

    status = replay.main([*argv, *_range(now)], session=SESSION)

    captured = capsys.readouterr()
    assert status == replay.EXIT_COULD_NOT_RUN
    assert captured.out == ""
    assert captured.err.endswith(
        f"replay: KinesisReplayError: --kinesis-stream-arn {source.arn} is not a Kinesis "
        "streaming destination of table 'other' (its destinations: none): expected the stream "
        "that table's changes go to, or the table (--stream-arn) whose changes go to that "
        "stream\n"
    )
    assert sandbox.is_intact(session)


def test_fails_kinesis_replay_of_a_stream_the_settings_table_does_not_stream_to(
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kinesis_destinations: dict[str, list[str]],
) -> None:
    """The settings name the table, no ``--env-from-function``: another Kinesis stream was read,
    held none of the table's removals, and the run exited 0 without a line."""
    _settings(monkeypatch, sandbox)  # SESSION_EXPIRY_TABLE_NAME=sessions
    source = KinesisSource()
    kinesis_destinations["sessions"] = [source.arn]
    now = datetime.now(timezone.utc)
    session = _removed_in_kinesis(sandbox, source, now)
    source.kinesis.create_stream(StreamName="other-changes", ShardCount=1)
    other = source.kinesis.describe_stream(StreamName="other-changes")["StreamDescription"]
    argv = ["--kinesis-stream-arn", other["StreamARN"]]

    status = replay.main([*argv, *_range(now)], session=SESSION)

    captured = capsys.readouterr()
    assert status == replay.EXIT_COULD_NOT_RUN
    assert captured.out == ""
    assert (
        f"--kinesis-stream-arn {other['StreamARN']} is not a Kinesis streaming destination of "
        f"table 'sessions' (its destinations: {source.arn})"
    ) in captured.err
    assert sandbox.is_intact(session)


def test_kinesis_replay_of_the_tables_own_destination_cleans_the_range(
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kinesis_destinations: dict[str, list[str]],
) -> None:
    _settings(monkeypatch, sandbox, SESSION_EXPIRY_TABLE_NAME=True)
    source = KinesisSource()
    kinesis_destinations["sessions"] = [
        "arn:aws:kinesis:us-east-1:123456789012:stream/x",
        source.arn,
    ]
    now = datetime.now(timezone.utc)
    session = _removed_in_kinesis(sandbox, source, now)
    argv = ["--kinesis-stream-arn", source.arn, "--stream-arn", sandbox.stream_arn]

    status = replay.main([*argv, *_range(now)], session=SESSION)

    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert status == replay.EXIT_ALL_REPLAYED
    assert (line["status"], line["cleaned"]) == ("replayed", 1)
    assert sandbox.is_clean(session)
