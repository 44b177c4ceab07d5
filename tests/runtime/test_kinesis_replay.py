"""Replay over a time range of the Kinesis change stream (issue 23): ``--from``/``--to``.

A real moto Kinesis stream holds the table's changes (forwarded by the test: moto has no
Kinesis streaming destination, see ``test_kinesis_source.py``; the CLI's
``DescribeKinesisStreamingDestination`` is stubbed by the ``kinesis_destinations`` fixture); the
CLI reads it back ``AT_TIMESTAMP`` and cleans again exactly the sessions removed in the range.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from moto.core import DEFAULT_ACCOUNT_ID
from runtime_support import REGION, SESSION, TABLE, Sandbox, aws_calls
from session_expiry_runtime.recovery import kinesis_replay, replay
from test_kinesis_source import STREAM, KinesisSource, change


@pytest.fixture
def sandbox(
    aws: None, monkeypatch: pytest.MonkeyPatch, kinesis_destinations: dict[str, list[str]]
) -> Sandbox:
    box = Sandbox()
    for name, value in box.env().items():
        monkeypatch.setenv(name, value)
    # The session table's Kinesis streaming destination: the tests' KinesisSource stream.
    kinesis_destinations[TABLE] = [f"arn:aws:kinesis:{REGION}:{DEFAULT_ACCOUNT_ID}:stream/{STREAM}"]
    return box


def _removed(sandbox: Sandbox, source: KinesisSource, session_id: str, at: datetime) -> Any:
    session = sandbox.create_session(session_id, expires_at=1)
    sandbox.delete(session_id)
    (remove,) = [r for r in sandbox.read_stream() if r["eventName"] == "REMOVE"]
    source.put(change(remove, created_at_ms=int(at.timestamp() * 1000)))
    return session


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def test_cleans_again_exactly_the_sessions_removed_in_the_range(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    source = KinesisSource()
    now = datetime.now(timezone.utc)
    before = _removed(sandbox, source, "s-before", now - timedelta(hours=2))
    inside = [
        _removed(sandbox, source, f"s-in-{i}", now - timedelta(minutes=m))
        for i, m in enumerate((30, 1))
    ]
    argv = ["--kinesis-stream-arn", source.arn, "--from", _iso(now - timedelta(hours=1))]
    argv += ["--to", _iso(now)]

    status = replay.main(argv, session=SESSION)

    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert status == replay.EXIT_ALL_REPLAYED
    assert sum(line["cleaned"] for line in lines) == 2
    assert {line["status"] for line in lines} == {"replayed"}
    assert all(line["source"].startswith("kinesis:shardId-") for line in lines)
    assert all(sandbox.is_clean(s) for s in inside)
    assert sandbox.is_intact(before)  # removed before --from: not replayed


def test_dry_run_changes_nothing(sandbox: Sandbox, capsys: pytest.CaptureFixture[str]) -> None:
    source = KinesisSource()
    now = datetime.now(timezone.utc)
    session = _removed(sandbox, source, "s-1", now)
    argv = ["--kinesis-stream-arn", source.arn, "--dry-run"]
    argv += ["--from", _iso(now - timedelta(minutes=5)), "--to", _iso(now)]

    status = replay.main(argv, session=SESSION)

    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert status == replay.EXIT_ALL_REPLAYED
    assert (line["status"], line["cleaned"]) == ("dry-run", 1)
    assert sandbox.is_intact(session)


def test_fails_a_range_that_ends_before_it_starts(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    source = KinesisSource()
    argv = ["--kinesis-stream-arn", source.arn, "--from", "2026-01-02T00:00:00Z"]
    argv += ["--to", "2026-01-01T00:00:00Z"]
    assert replay.main(argv, session=SESSION) == replay.EXIT_COULD_NOT_RUN
    assert "expected from <= to" in capsys.readouterr().err


def test_fails_a_range_that_ends_in_the_future_before_any_call(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``--to`` after now names removals that have not happened: refused (exit 2) before any
    AWS call, instead of reading to each shard's tip and answering "replayed" for all of it."""
    source = KinesisSource()
    now = datetime.now(timezone.utc)
    session = _removed(sandbox, source, "s-1", now - timedelta(minutes=1))
    argv = ["--kinesis-stream-arn", source.arn, "--from", _iso(now - timedelta(minutes=5))]
    argv += ["--to", _iso(now + timedelta(days=1))]
    with aws_calls() as calls:
        status = replay.main(argv, session=SESSION)

    assert status == replay.EXIT_COULD_NOT_RUN
    err = capsys.readouterr().err
    assert "is in the future" in err and "expected a time at or before now" in err
    assert calls == []
    assert sandbox.is_intact(session)


def test_a_range_ending_within_the_delivery_lag_says_to_run_it_again(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    source = KinesisSource()
    now = datetime.now(timezone.utc)
    session = _removed(sandbox, source, "s-1", now - timedelta(minutes=1))
    argv = ["--kinesis-stream-arn", source.arn, "--from", _iso(now - timedelta(minutes=5))]

    status = replay.main([*argv, "--to", _iso(now)], session=SESSION)

    assert status == replay.EXIT_ALL_REPLAYED and sandbox.is_clean(session)
    err = capsys.readouterr().err
    until = (now + kinesis_replay.ARRIVAL_SLACK).isoformat()
    assert f"may still reach the stream until {until}" in err
    assert "run the same range again" in err


def test_a_range_ended_longer_ago_than_the_delivery_lag_says_nothing_of_it() -> None:
    now = datetime.now(timezone.utc)
    assert kinesis_replay.late_arrivals(now - kinesis_replay.ARRIVAL_SLACK, now) is None
    assert kinesis_replay.late_arrivals(now - timedelta(minutes=14), now) is not None


def test_fails_a_time_without_a_zone() -> None:
    with pytest.raises(kinesis_replay.KinesisReplayError, match="expected a time zone"):
        kinesis_replay.parse_time("2026-01-01T00:00:00")


#: Python 3.10's ``datetime.fromisoformat`` accepts exactly "YYYY-MM-DD[*HH[:MM[:SS[.fff[fff]]]]
#: [+HH:MM[:SS[.ffffff]]]]" (its documentation: the output of ``isoformat()``): no ``Z``.
_PYTHON_310_ISOFORMAT = re.compile(
    r"\d{4}-\d{2}-\d{2}(.\d{2}(:\d{2}(:\d{2}(\.\d{3}(\d{3})?)?)?)?"
    r"([+-]\d{2}:\d{2}(:\d{2}(\.\d{6})?)?)?)?"
)


@pytest.mark.parametrize(
    ("text", "given"),
    [
        ("2026-01-01T12:00:00Z", "2026-01-01T12:00:00+00:00"),
        ("2026-01-01T12:00:00z", "2026-01-01T12:00:00+00:00"),
        ("2026-01-01T12:00:00.250Z", "2026-01-01T12:00:00.250+00:00"),
        ("2026-01-01T14:00:00+02:00", "2026-01-01T14:00:00+02:00"),
    ],
    ids=["Z", "z", "Z-milliseconds", "offset"],
)
def test_parses_a_time_in_utc_as_python_3_10_accepts_it(
    monkeypatch: pytest.MonkeyPatch, text: str, given: str
) -> None:
    """The tests run on a newer Python, whose fromisoformat accepts ``Z``: this stand-in has
    3.10's rule, so the test fails if ``parse_time`` hands ``Z`` to fromisoformat."""
    seen: list[str] = []

    class Python310Datetime(datetime):
        @classmethod
        def fromisoformat(cls, date_string: str) -> Any:
            seen.append(date_string)
            if not _PYTHON_310_ISOFORMAT.fullmatch(date_string):
                raise ValueError(f"Invalid isoformat string: {date_string!r}")
            return datetime.fromisoformat(date_string)

    monkeypatch.setattr(kinesis_replay, "datetime", Python310Datetime)

    value = kinesis_replay.parse_time(text)

    assert seen == [given]
    expected = datetime(2026, 1, 1, 12, 0, 0, 250_000 if ".250" in text else 0, timezone.utc)
    assert value == expected and value.tzinfo == timezone.utc


def test_fails_kinesis_stream_arn_without_a_range(sandbox: Sandbox) -> None:
    with pytest.raises(SystemExit):
        replay.main(["--kinesis-stream-arn", f"arn:aws:kinesis:us-east-1:1:stream/{STREAM}"])


def test_fails_a_stream_the_cleanup_function_does_not_read(aws: None) -> None:
    """``--env-from-function``: the function's event source mapping must read the stream."""
    import io
    import zipfile

    iam, lam = SESSION.client("iam"), SESSION.client("lambda")
    role = iam.create_role(
        RoleName="cleanup",
        AssumeRolePolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": "lambda.amazonaws.com"},
                        "Action": "sts:AssumeRole",
                    }
                ],
            }
        ),
    )["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return None\n")
    lam.create_function(
        FunctionName="cleanup",
        Runtime="python3.12",
        Role=role,
        Handler="handler.handler",
        Code={"ZipFile": code.getvalue()},
    )
    read = KinesisSource()
    other = SESSION.client("kinesis")
    other.create_stream(StreamName="other", ShardCount=1)
    other_arn = other.describe_stream(StreamName="other")["StreamDescription"]["StreamARN"]
    lam.create_event_source_mapping(
        FunctionName="cleanup", EventSourceArn=read.arn, StartingPosition="TRIM_HORIZON"
    )

    kinesis_replay.check_trusted(lam, "cleanup", read.arn)  # its own stream: accepted
    with pytest.raises(kinesis_replay.KinesisReplayError, match="is not what cleanup's event"):
        kinesis_replay.check_trusted(lam, "cleanup", other_arn)


def test_fails_a_range_starting_before_the_oldest_record_the_stream_keeps(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review of issue 23: the stream keeps 24 hours (moto's and Kinesis's default); a range
    from 48 hours ago cannot be replayed whole — the removals of its first day are gone — so
    the tool must not answer "all replayed" for it."""
    source = KinesisSource()
    now = datetime.now(timezone.utc)
    session = _removed(sandbox, source, "s-1", now - timedelta(minutes=5))
    start = now - timedelta(hours=48)
    argv = ["--kinesis-stream-arn", source.arn, "--from", _iso(start), "--to", _iso(now)]

    status = replay.main(argv, session=SESSION)

    err = capsys.readouterr().err
    assert status == replay.EXIT_COULD_NOT_RUN
    assert _iso(start) in err or start.isoformat() in err
    assert "24 hours" in err
    assert sandbox.is_intact(session)  # refused before anything was cleaned


def test_fails_a_range_starting_in_the_future(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    source = KinesisSource()
    start = datetime.now(timezone.utc) + timedelta(days=1)
    argv = ["--kinesis-stream-arn", source.arn, "--from", _iso(start)]
    argv += ["--to", _iso(start + timedelta(hours=1))]

    assert replay.main(argv, session=SESSION) == replay.EXIT_COULD_NOT_RUN
    assert "is in the future" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text", ["yesterday", "2026-13-01T00:00:00Z", "", "1767225600", "Z", "2026-01-01T00:00+00:00Z"]
)
def test_fails_a_malformed_time(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    source = KinesisSource()
    argv = ["--kinesis-stream-arn", source.arn, "--from", text or " ", "--to", "2026-01-01T00:00Z"]

    assert replay.main(argv, session=SESSION) == replay.EXIT_COULD_NOT_RUN
    err = capsys.readouterr().err
    assert f"{text or ' '!r}: expected an ISO 8601 time" in err  # the value as typed


def _deployed_cleanup(sandbox: Sandbox, stream_arn: str, *, table_name: bool = True) -> str:
    """A cleanup function in moto with the construct's environment for the Kinesis source
    (``SESSION_EXPIRY_TABLE_NAME`` included unless ``table_name`` is false, as before the
    review) and a Kinesis event source mapping on ``stream_arn``."""
    import io
    import zipfile

    iam, lam = SESSION.client("iam"), SESSION.client("lambda")
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "lambda.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    role = iam.create_role(RoleName="cleanup", AssumeRolePolicyDocument=json.dumps(trust))
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return None\n")
    env = {k: v for k, v in sandbox.env().items() if table_name or k != "SESSION_EXPIRY_TABLE_NAME"}
    lam.create_function(
        FunctionName="cleanup",
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler="handler.handler",
        Code={"ZipFile": code.getvalue()},
        Environment={"Variables": env},
    )
    lam.create_event_source_mapping(
        FunctionName="cleanup", EventSourceArn=stream_arn, StartingPosition="TRIM_HORIZON"
    )
    return "cleanup"


def test_replay_of_a_shared_stream_leaves_another_tables_removes_alone(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review of issue 23: another table streaming into the same Kinesis stream. Before, the
    cleanup function's settings named no table, so replay with ``--env-from-function`` kept
    every table's REMOVEs and cleaned a live session from another table's copy of its item."""
    for name in sandbox.env():
        monkeypatch.delenv(name, raising=False)  # the settings come from the function only
    source = KinesisSource()
    function = _deployed_cleanup(sandbox, source.arn)
    live = sandbox.create_session("s-live")  # still in the session table
    (insert,) = sandbox.read_stream()
    # Another table streaming into the same stream (a copy of the sessions, say) deletes its item.
    copy = change(insert)
    copy["tableName"] = "sessions-copy"
    copy["eventName"] = "REMOVE"
    copy["dynamodb"]["OldImage"] = copy["dynamodb"].pop("NewImage")
    source.put(copy)
    now = datetime.now(timezone.utc)
    argv = ["--kinesis-stream-arn", source.arn, "--env-from-function", function]
    argv += ["--from", _iso(now - timedelta(minutes=5)), "--to", _iso(now)]

    status = replay.main(argv, session=SESSION)

    assert sandbox.is_intact(live)
    assert status == replay.EXIT_ALL_REPLAYED
    # No REMOVE of the session table in the range: no outcome line (moto's Lambda, which
    # tries to run the mapping's function in Docker, prints its own noise there).
    assert [x for x in capsys.readouterr().out.splitlines() if x.startswith("{")] == []


def test_fails_replay_of_a_stream_without_the_tables_name(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in sandbox.env():
        monkeypatch.delenv(name, raising=False)
    source = KinesisSource()
    function = _deployed_cleanup(sandbox, source.arn, table_name=False)
    session = _removed(sandbox, source, "s-1", datetime.now(timezone.utc))
    now = datetime.now(timezone.utc)
    argv = ["--kinesis-stream-arn", source.arn, "--env-from-function", function]
    argv += ["--from", _iso(now - timedelta(minutes=5)), "--to", _iso(now)]

    assert replay.main(argv, session=SESSION) == replay.EXIT_COULD_NOT_RUN
    assert "SESSION_EXPIRY_TABLE_NAME" in capsys.readouterr().err
    assert sandbox.is_intact(session)


class _AlwaysBehind:
    """The moto Kinesis client, except that ``GetRecords`` answers empty pages that are still
    behind the shard's tip. Stub: Kinesis does answer so (an iterator crossing a long stretch
    of a shard), moto never does (it answers every record at once)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def get_records(self, **params: Any) -> dict[str, Any]:
        return {
            "Records": [],
            "NextShardIterator": params["ShardIterator"],
            "MillisBehindLatest": 60_000,
        }


def test_a_shard_given_up_on_before_its_tip_is_not_reported_replayed(sandbox: Sandbox) -> None:
    """Review of issue 23: read_shard stopped after MAX_EMPTY_PAGES empty pages while the shard
    was still behind, and the run answered no outcome at all (exit 0, "all replayed") for a
    range it had not read."""
    source = KinesisSource()
    now = datetime.now(timezone.utc)
    _removed(sandbox, source, "s-1", now - timedelta(minutes=1))
    cleaner = sandbox.cleaner()

    outcomes = kinesis_replay.replay_time_range(
        _AlwaysBehind(SESSION.client("kinesis")),
        source.arn,
        start=now - timedelta(minutes=5),
        end=now,
        cleaner=cleaner,
    )

    assert outcomes, "a shard not read to its tip must be reported"
    assert {o.status for o in outcomes} == {replay.STATUS_FAILED}
    assert all("behind" in str(o.error) for o in outcomes)


@pytest.mark.parametrize(
    "start, end",
    [
        (timedelta(minutes=-5), timedelta(days=1)),  # --to in the future
        (timedelta(minutes=-5), timedelta(minutes=-10)),  # --from after --to
    ],
)
def test_a_range_refused_with_env_from_function_makes_no_call(
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    start: timedelta,
    end: timedelta,
) -> None:
    """Review 34: "refused before any call" held without ``--env-from-function`` only; with it
    the function's settings were read first (``GetFunctionConfiguration``), then the range
    refused. A range that cannot be replayed is refused before anything is read."""
    for name in sandbox.env():
        monkeypatch.delenv(name, raising=False)  # the settings come from the function only
    source = KinesisSource()
    function = _deployed_cleanup(sandbox, source.arn)
    now = datetime.now(timezone.utc)
    argv = ["--kinesis-stream-arn", source.arn, "--env-from-function", function, "--dry-run"]
    argv += ["--from", _iso(now + start), "--to", _iso(now + end)]
    with aws_calls() as calls:
        status = replay.main(argv, session=SESSION)

    assert status == replay.EXIT_COULD_NOT_RUN
    assert "expected" in capsys.readouterr().err
    assert calls == []
