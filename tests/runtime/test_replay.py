"""Failure replay (issue 6): from the SQS on-failure queue's metadata and from S3 objects.

A batch is made to fail against moto (DeleteConnection stubbed to 403, which moto never
answers), and the on-failure record Lambda would send for it is built from that batch's real
stream range (the shape of the Lambda Developer Guide's example, "Retain discarded records for a
DynamoDB event source in Lambda"). Replay then reads that range back from moto's stream.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from runtime_faults import answer, json_error, rest_json_error
from runtime_support import SESSION, FakeContext, Sandbox, Session, event
from session_expiry_runtime import replay
from session_expiry_runtime.cleaner import SessionCleaner, process_batch

FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:cleanup"


def _iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def failure_record(
    sandbox: Sandbox, records: list[dict[str, Any]], *, payload: bool = False
) -> dict[str, Any]:
    """The on-failure destination record Lambda sends for a batch of ``records``."""
    (shard,) = sandbox.streams.describe_stream(StreamArn=sandbox.stream_arn)["StreamDescription"][
        "Shards"
    ]
    body: dict[str, Any] = {
        "requestContext": {
            "requestId": "316aa6d0-8154-4d2f-9af7-85d5f4a6bc81",
            "functionArn": FUNCTION_ARN,
            "condition": "RetryAttemptsExhausted",
            "approximateInvokeCount": 11,
        },
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST"},
        "version": "1.0",
        "timestamp": _iso(int(datetime.now(timezone.utc).timestamp())),
        "DDBStreamBatchInfo": {
            "shardId": shard["ShardId"],
            "startSequenceNumber": records[0]["dynamodb"]["SequenceNumber"],
            "endSequenceNumber": records[-1]["dynamodb"]["SequenceNumber"],
            "approximateArrivalOfFirstRecord": _iso(
                records[0]["dynamodb"]["ApproximateCreationDateTime"]
            ),
            "approximateArrivalOfLastRecord": _iso(
                records[-1]["dynamodb"]["ApproximateCreationDateTime"]
            ),
            "batchSize": len(records),
            "streamArn": sandbox.stream_arn,
        },
    }
    if payload:
        body["payload"] = json.dumps(event(*records))
    return body


class FailedBatch:
    """Three sessions whose REMOVE batch failed for good; its metadata is in an SQS queue."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.sqs = SESSION.client("sqs")
        self.queue_url = self.sqs.create_queue(QueueName="cleanup-failures")["QueueUrl"]
        self.sessions: list[Session] = [sandbox.create_session(f"s-{i}") for i in range(3)]
        sandbox.read_stream()
        for s in self.sessions:
            sandbox.delete(s.session_id)
        self.records = sandbox.removes()
        failing = sandbox.cleaner()
        # Stub: moto never refuses DeleteConnection; AWS answers 403 when the policy is wrong.
        answer(
            failing.clients.apigateway,
            "DeleteConnection",
            lambda _: rest_json_error(403, "ForbiddenException"),
        )
        response = process_batch(event(*self.records), FakeContext(), failing)
        assert len(response["batchItemFailures"]) == 3
        # What the event source mapping sends once retries are exhausted: metadata only.
        self.message = failure_record(sandbox, self.records)
        self.sqs.send_message(QueueUrl=self.queue_url, MessageBody=json.dumps(self.message))

    def connections_open(self) -> bool:
        """The failed step's targets are still there (the other steps did succeed)."""
        return all(self.sandbox.connection_exists(s.connection_id) for s in self.sessions)

    def queued(self) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )

    def replay(self, cleaner: SessionCleaner, **kwargs: Any) -> list[replay.ReplayOutcome]:
        return replay.replay_queue(
            self.sqs,
            self.queue_url,
            streams=self.sandbox.streams,
            cleaner=cleaner,
            wait_seconds=0,
            **kwargs,
        )


@pytest.fixture
def failed(sandbox: Sandbox) -> FailedBatch:
    return FailedBatch(sandbox)


def test_replay_from_queue_metadata_cleans_the_range_and_deletes_the_message(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    assert failed.connections_open()

    (outcome,) = failed.replay(sandbox.cleaner())

    assert outcome.status == "replayed", outcome.error
    assert outcome.records == 3 and outcome.failed_sequence_numbers == []
    assert outcome.deleted
    assert all(sandbox.is_clean(s) for s in failed.sessions)
    assert failed.queued() == 0


def test_replay_that_fails_again_keeps_the_message(sandbox: Sandbox, failed: FailedBatch) -> None:
    still_failing = sandbox.cleaner()
    answer(
        still_failing.clients.kms, "RetireGrant", lambda _: json_error(400, "AccessDeniedException")
    )

    (outcome,) = failed.replay(still_failing)

    assert outcome.status == "failed" and not outcome.deleted
    assert sorted(outcome.failed_sequence_numbers) == sorted(
        r["dynamodb"]["SequenceNumber"] for r in failed.records
    )
    assert failed.queued() == 1


def test_dry_run_reads_the_range_and_changes_nothing(sandbox: Sandbox, failed: FailedBatch) -> None:
    (outcome,) = failed.replay(sandbox.cleaner(), dry_run=True)

    assert outcome.status == "dry-run" and outcome.records == 3 and not outcome.deleted
    assert failed.connections_open()
    assert failed.queued() == 1


def test_fails_clearly_and_keeps_the_message_when_the_range_is_older_than_24_hours(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    later = datetime.now(timezone.utc) + timedelta(hours=25)

    (outcome,) = failed.replay(sandbox.cleaner(), now=lambda: later)

    assert outcome.status == "aged-out"
    assert "more than 24 hours ago" in (outcome.error or "")
    assert failed.connections_open()
    assert failed.queued() == 1


class TrimmedStream:
    """The real moto streams client, except that the shard's oldest record is gone.

    moto never trims its stream; in AWS, records older than 24 hours are trimmed, and a range
    whose start was trimmed comes back without its first records.
    """

    def __init__(self, streams: Any) -> None:
        self.streams = streams

    def get_shard_iterator(self, **kwargs: Any) -> Any:
        return self.streams.get_shard_iterator(**kwargs)

    def get_records(self, **kwargs: Any) -> Any:
        page = self.streams.get_records(**kwargs)
        return {**page, "Records": page["Records"][1:]}


def test_fails_clearly_when_the_first_records_are_gone_from_the_stream(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    start = failed.message["DDBStreamBatchInfo"]["startSequenceNumber"]

    outcome = replay.replay_message(
        failed.message, streams=TrimmedStream(sandbox.streams), cleaner=sandbox.cleaner()
    )

    assert outcome.status == "aged-out"
    assert f"record {start} is no longer in" in (outcome.error or "")
    assert failed.connections_open()


def test_trimmed_data_access_is_reported_as_aged_out(sandbox: Sandbox, failed: FailedBatch) -> None:
    # Stub: moto never trims its stream; AWS answers TrimmedDataAccessException (HTTP 400).
    answer(
        sandbox.streams,
        "GetShardIterator",
        lambda _: json_error(400, "TrimmedDataAccessException"),
    )

    (outcome,) = failed.replay(sandbox.cleaner())

    assert outcome.status == "aged-out" and "trimmed" in (outcome.error or "")
    assert failed.queued() == 1


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("not json", "not a JSON on-failure record"),
        (json.dumps({"KinesisBatchInfo": {}}), "no DDBStreamBatchInfo"),
        (json.dumps({"DDBStreamBatchInfo": {"shardId": "x"}}), "lacks startSequenceNumber"),
    ],
)
def test_fails_on_a_message_that_is_not_a_stream_failure_record(body: str, reason: str) -> None:
    with pytest.raises(replay.ReplayError, match=reason):
        replay.parse_failure_record(body)


def test_replay_from_an_s3_failure_object_uses_its_payload(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    sandbox.s3.create_bucket(Bucket="failures")
    key = "aws/lambda/esm-uuid/shard/2026/01/01/2026-01-01T00.00.00-abc"
    body = failure_record(sandbox, failed.records, payload=True)
    sandbox.s3.put_object(Bucket="failures", Key=key, Body=json.dumps(body).encode())
    reads: list[str] = []
    sandbox.streams.meta.events.register(
        "before-call.dynamodbstreams", lambda model, **_: reads.append(model.name)
    )

    outcome = replay.replay_s3_object(
        sandbox.s3, "failures", key, streams=sandbox.streams, cleaner=sandbox.cleaner(), delete=True
    )

    assert outcome.status == "replayed" and outcome.deleted and outcome.records == 3
    assert reads == []  # the whole event was in the object: no stream read, no 24 h limit
    assert all(sandbox.is_clean(s) for s in failed.sessions)
    assert "Contents" not in sandbox.s3.list_objects_v2(Bucket="failures")


def test_the_cli_replays_the_queue(
    sandbox: Sandbox,
    failed: FailedBatch,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)

    status = replay.main(["--queue-url", failed.queue_url, "--dry-run"], session=SESSION)
    assert status == 0
    assert failed.connections_open()

    status = replay.main(["--queue-url", failed.queue_url], session=SESSION)

    assert status == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert [line["status"] for line in lines if "status" in line][-1] == "replayed"
    assert all(sandbox.is_clean(s) for s in failed.sessions)
    assert failed.queued() == 0


def test_fails_cli_on_an_unknown_function_with_one_line_not_a_traceback(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    status = replay.main(
        ["--queue-url", "https://sqs.example/q", "--env-from-function", "nope"], session=SESSION
    )

    assert status == 2
    err = capsys.readouterr().err
    assert err.startswith("replay: ResourceNotFoundException:") and "nope" in err
    assert "Traceback" not in err


def test_getrecords_records_are_reshaped_like_lambdas() -> None:
    record = {
        "eventID": "e",
        "eventName": "REMOVE",
        "awsRegion": "us-east-1",
        "userIdentity": {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"},
        "dynamodb": {
            "ApproximateCreationDateTime": datetime(2026, 1, 1, tzinfo=timezone.utc),
            "Keys": {"pk": {"S": "s"}},
            "OldImage": {"b": {"B": b"\x01"}, "l": {"L": [{"BS": [b"\x02"]}]}},
            "SequenceNumber": "100000000000000000001",
        },
    }

    shaped = replay.to_lambda_record(record, stream_arn="arn:stream")

    assert shaped["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    assert shaped["dynamodb"]["ApproximateCreationDateTime"] == 1_767_225_600
    assert shaped["dynamodb"]["OldImage"] == {"b": {"B": "AQ=="}, "l": {"L": [{"BS": ["Ag=="]}]}}
    assert shaped["eventSourceARN"] == "arn:stream"
    json.dumps(shaped)
