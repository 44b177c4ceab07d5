"""Every replay run ends with one summary line on stderr, also when there was nothing to replay.

An empty queue and a Kinesis time range without a removal of the table print no JSON line on
stdout and exit 0: before, the run said nothing at all, so an operator could not tell "nothing
was there" from "replay looked somewhere else" (never skip in silence). The line names where
replay read, what became of each message (object, shard) and the exit status.

Real moto resources and the real CLI entry point (``replay.main``), as ``test_replay_trust``;
the Kinesis streaming destination lookup is stubbed (moto has none: the ``kinesis_destinations``
fixture).
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from runtime_support import SESSION, Sandbox
from session_expiry_runtime.recovery import replay
from test_kinesis_source import KinesisSource
from test_replay import FailedBatch
from test_replay_stream_arn import (
    _range,
    failed,  # noqa: F401 - the fixture
)
from test_replay_trust import _settings


def _summary(err: str) -> str:
    return err.splitlines()[-1]


def test_a_replayed_queue_ends_with_its_count_and_exit(
    sandbox: Sandbox,
    failed: FailedBatch,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--queue-url", failed.queue_url, "--stream-arn", sandbox.stream_arn]

    status = replay.main(argv, session=SESSION)

    assert status == replay.EXIT_ALL_REPLAYED
    assert _summary(capsys.readouterr().err) == (
        f"replay: {failed.queue_url}: 1 message(s): 1 replayed; exit 0"
    )


def test_an_empty_queue_is_said_not_passed_over(
    sandbox: Sandbox,
    failed: FailedBatch,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    failed.sqs.purge_queue(QueueUrl=failed.queue_url)
    argv = ["--queue-url", failed.queue_url, "--stream-arn", sandbox.stream_arn]

    status = replay.main(argv, session=SESSION)

    captured = capsys.readouterr()
    assert status == replay.EXIT_ALL_REPLAYED and captured.out == ""
    assert _summary(captured.err) == (
        f"replay: {failed.queue_url}: nothing to replay (no message); exit 0"
    )


def test_a_kinesis_range_without_a_removal_of_the_table_is_said(
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kinesis_destinations: dict[str, list[str]],
) -> None:
    _settings(monkeypatch, sandbox, SESSION_EXPIRY_TABLE_NAME=True)
    source = KinesisSource()
    kinesis_destinations["sessions"] = [source.arn]
    argv = ["--kinesis-stream-arn", source.arn, "--stream-arn", sandbox.stream_arn]
    bounds = _range(datetime.now(timezone.utc))

    status = replay.main([*argv, *bounds], session=SESSION)

    captured = capsys.readouterr()
    assert status == replay.EXIT_ALL_REPLAYED and captured.out == ""
    assert _summary(captured.err) == (
        f"replay: {source.arn}, REMOVE records of table sessions from {bounds[1]} to {bounds[3]}: "
        "nothing to replay (no shard with such a record); exit 0"
    )
