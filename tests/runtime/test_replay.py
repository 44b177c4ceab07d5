"""Failure replay (issue 6): from the SQS on-failure queue's metadata and from S3 objects.

A batch is made to fail against moto (DeleteConnection stubbed to 403, which moto never
answers), and the on-failure record Lambda would send for it is built from that batch's real
stream range (the shape of the Lambda Developer Guide's example, "Retain discarded records for a
DynamoDB event source in Lambda"). Replay then reads that range back from moto's stream.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from runtime_faults import answer, json_error, rest_json_error
from runtime_support import SESSION, FakeContext, Sandbox, Session, event
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, process_batch
from session_expiry_runtime.recovery import replay

FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:cleanup"


def trusted(sandbox: Sandbox) -> replay.TrustedStreams:
    """The streams of the sandbox's session table, as the CLI resolves them."""
    return replay.TrustedStreams.of(sandbox.stream_arn)


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
            trusted=kwargs.pop("trusted", trusted(self.sandbox)),
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
    # The first run retired the grants and released their claims (no call now): the failed step,
    # DeleteConnection, is what still runs. Stub: moto never refuses DeleteConnection.
    answer(
        still_failing.clients.apigateway,
        "DeleteConnection",
        lambda _: rest_json_error(403, "ForbiddenException"),
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
        failed.message,
        streams=TrimmedStream(sandbox.streams),
        cleaner=sandbox.cleaner(),
        trusted=trusted(sandbox),
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


def _info(**fields: str) -> dict[str, Any]:
    """Well-formed metadata (of another table: the format is checked first) with ``fields``."""
    info = {
        "shardId": "shardId-00000001573689847184-864758bb",
        "startSequenceNumber": "800000000003126276362",
        "endSequenceNumber": "800000000003126276362",
        "streamArn": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/x",
    }
    return {"DDBStreamBatchInfo": {**info, **fields}}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("not json", "not a JSON on-failure record"),
        (json.dumps({"KinesisBatchInfo": {}}), "no DDBStreamBatchInfo"),
        (json.dumps({"DDBStreamBatchInfo": {"shardId": "x"}}), "lacks startSequenceNumber"),
        (json.dumps(_info(shardId="shard-1")), "'shard-1': expected a shard id of 28 to 65"),
        (json.dumps(_info(startSequenceNumber="1" * 41)), "decimal sequence number (21 to 40"),
        (json.dumps(_info(endSequenceNumber="1" * 20)), "decimal sequence number (21 to 40"),
    ],
    ids=["not-json", "kinesis", "no-range", "short-shard", "long-sequence", "short-sequence"],
)
def test_fails_on_a_message_that_is_not_a_stream_failure_record(body: str, reason: str) -> None:
    with pytest.raises(replay.ReplayError, match=re.escape(reason)):
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
        "before-parameter-build.dynamodb-streams", lambda model, **_: reads.append(model.name)
    )

    outcome = replay.replay_s3_object(
        sandbox.s3,
        "failures",
        key,
        streams=sandbox.streams,
        cleaner=sandbox.cleaner(),
        trusted=trusted(sandbox),
        tables=sandbox.ddb,
        delete=True,
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
    out = capsys.readouterr().out
    lines = [json.loads(x) for x in out.splitlines()]  # stdout: outcome lines only
    assert [line["status"] for line in lines] == ["dry-run", "replayed"]
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


# --- replay never loses a failure (issue 12) ----------------------------------------------------


def _clear_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("SESSION_EXPIRY_"):
            monkeypatch.delenv(name)


def test_fails_cli_without_a_cleanup_target_and_keeps_the_message(
    sandbox: Sandbox,
    failed: FailedBatch,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _clear_settings(monkeypatch)

    status = replay.main(["--queue-url", failed.queue_url], session=SESSION)

    assert status == replay.EXIT_COULD_NOT_RUN == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no cleanup target is configured" in captured.err
    assert "cleanup function's environment" in captured.err
    assert "--env-from-function" in captured.err
    assert failed.queued() == 1 and failed.connections_open()


def test_fails_library_replay_without_a_cleanup_target(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    from session_expiry_runtime.core.config import RuntimeConfig

    with pytest.raises(replay.NoCleanupTarget, match="--env-from-function"):
        failed.replay(sandbox.cleaner(RuntimeConfig(table_name="sessions")))
    with pytest.raises(replay.NoCleanupTarget):
        replay.replay_s3_object(
            sandbox.s3,
            "any",
            "key",
            streams=sandbox.streams,
            cleaner=sandbox.cleaner(RuntimeConfig()),
            trusted=trusted(sandbox),
            tables=sandbox.ddb,
        )
    assert failed.queued() == 1 and failed.connections_open()


def test_cli_reads_the_settings_of_the_function_with_env_from_function(
    sandbox: Sandbox,
    failed: FailedBatch,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _clear_settings(monkeypatch)
    iam = SESSION.client("iam")
    role = iam.create_role(RoleName="cleanup", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    SESSION.client("lambda").create_function(
        FunctionName="cleanup",
        Runtime="python3.12",
        Role=role,
        Handler="session_expiry_runtime.handler.handler",
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},  # an empty zip: never run here
        Environment={"Variables": sandbox.env()},
    )

    status = replay.main(
        ["--queue-url", failed.queue_url, "--env-from-function", "cleanup"], session=SESSION
    )

    assert status == 0, capsys.readouterr().err
    assert all(sandbox.is_clean(s) for s in failed.sessions)


def _queue_message(failed: FailedBatch, body: dict[str, Any]) -> None:
    failed.sqs.send_message(QueueUrl=failed.queue_url, MessageBody=json.dumps(body))


def test_range_without_a_remove_record_is_kept_as_nothing_cleaned(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    sandbox.ddb.put_item(TableName="sessions", Item={"pk": {"S": "other"}, "n": {"N": "1"}})
    sandbox.ddb.put_item(TableName="sessions", Item={"pk": {"S": "other"}, "n": {"N": "2"}})
    records = sandbox.lambda_records()  # INSERT, MODIFY: nothing to clean
    failed.sqs.purge_queue(QueueUrl=failed.queue_url)
    _queue_message(failed, failure_record(sandbox, records))

    (outcome,) = failed.replay(sandbox.cleaner())

    assert outcome.status == "nothing-cleaned" and not outcome.deleted
    assert outcome.records == 2 and outcome.removes == 0
    assert failed.queued() == 1


def test_removes_that_name_nothing_to_clean_are_kept_with_their_cause(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    # A REMOVE whose old image names no connection, grant or scratch prefix is skipped
    # (MissingAttributes): its failure must not be deleted as if it had been cleaned.
    sandbox.ddb.put_item(TableName="sessions", Item={"pk": {"S": "bare"}, "x": {"S": "y"}})
    sandbox.delete("bare")
    bare = sandbox.removes()
    failed.sqs.purge_queue(QueueUrl=failed.queue_url)
    _queue_message(failed, failure_record(sandbox, bare))
    _queue_message(failed, failure_record(sandbox, [*failed.records, *bare]))

    only_bare, mixed = sorted(failed.replay(sandbox.cleaner()), key=lambda o: o.records)

    (number,) = [r["dynamodb"]["SequenceNumber"] for r in bare]
    assert only_bare.status == "nothing-cleaned" and not only_bare.deleted
    assert only_bare.not_cleaned == {number: "MissingAttributes"}
    assert mixed.status == "partly-cleaned" and not mixed.deleted
    assert mixed.cleaned == 3 and mixed.not_cleaned == {number: "MissingAttributes"}
    assert all(sandbox.is_clean(s) for s in failed.sessions)  # what could be cleaned, was
    assert failed.queued() == 2


def _put_failure_object(sandbox: Sandbox, key: str, body: dict[str, Any]) -> None:
    sandbox.s3.put_object(Bucket="failures", Key=key, Body=json.dumps(body).encode())


@pytest.mark.parametrize(
    ("tamper", "status", "reason"),
    [
        (lambda records: [], "invalid", "payload holds no Records"),
        (lambda records: [{"eventName": "REMOVE"}], "invalid", "is not a DynamoDB stream record"),
        (lambda records: ["REMOVE"], "invalid", "is not a DynamoDB stream record"),
        (
            lambda records: [
                {**r, "eventSourceARN": r["eventSourceARN"].replace("sessions", "other")}
                for r in records
            ],
            "foreign-stream",
            "has eventSourceARN",
        ),
        (lambda records: records[:1], "invalid", "not the whole failed range"),
        (
            lambda records: [
                *records,
                {
                    **records[-1],
                    "dynamodb": {**records[-1]["dynamodb"], "SequenceNumber": "9" * 30},
                },
            ],
            "invalid",
            "outside the failed range",
        ),
    ],
    ids=["empty", "wrong-shape", "not-a-mapping", "other-stream", "part-of-range", "other-range"],
)
def test_fails_to_delete_an_s3_failure_object_whose_payload_does_not_cover_its_range(
    sandbox: Sandbox, failed: FailedBatch, tamper: Any, status: str, reason: str
) -> None:
    sandbox.s3.create_bucket(Bucket="failures")
    body = failure_record(sandbox, failed.records)
    body["payload"] = json.dumps(event(*tamper(failed.records)))
    _put_failure_object(sandbox, "f.json", body)

    outcome = replay.replay_s3_object(
        sandbox.s3,
        "failures",
        "f.json",
        streams=sandbox.streams,
        cleaner=sandbox.cleaner(),
        trusted=trusted(sandbox),
        tables=sandbox.ddb,
        delete=True,
    )

    assert outcome.status == status and not outcome.deleted
    assert reason in (outcome.error or "")
    assert sandbox.s3.get_object(Bucket="failures", Key="f.json")  # kept
    assert failed.connections_open()  # nothing of a foreign or partial payload was cleaned


def test_a_malformed_message_is_reported_and_the_next_one_replayed(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    # The Streams API takes sequence numbers of 21 to 40 digits (botocore would refuse "1" with
    # ParamValidationError): malformed, whichever stream the message names.
    failed.sqs.purge_queue(QueueUrl=failed.queue_url)
    short = failure_record(sandbox, failed.records)
    short["DDBStreamBatchInfo"]["startSequenceNumber"] = "1"
    _queue_message(failed, short)
    _queue_message(failed, failed.message)
    seen: list[str] = []

    outcomes = failed.replay(sandbox.cleaner(), on_outcome=lambda o: seen.append(o.status))

    assert sorted(o.status for o in outcomes) == ["invalid", "replayed"]
    (bad,) = [o for o in outcomes if o.status == "invalid"]
    assert bad.error == (
        "DDBStreamBatchInfo startSequenceNumber '1': expected a decimal sequence number "
        "(21 to 40 digits)"
    )
    assert not bad.deleted
    assert sorted(seen) == ["invalid", "replayed"]
    assert all(sandbox.is_clean(s) for s in failed.sessions)
    assert failed.queued() == 1


def test_an_endpoint_error_of_one_message_is_reported_and_the_run_goes_on(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    from botocore.config import Config
    from botocore.exceptions import EndpointConnectionError

    _queue_message(failed, failed.message)  # the same range twice
    streams = SESSION.client("dynamodbstreams", config=Config(retries={"total_max_attempts": 1}))
    calls = [0]

    def unreachable_once(request: Any, **_: Any) -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise EndpointConnectionError(endpoint_url=request.url)

    streams.meta.events.register_first(
        "before-send.dynamodb-streams.GetShardIterator", unreachable_once
    )

    outcomes = replay.replay_queue(
        failed.sqs,
        failed.queue_url,
        streams=streams,
        cleaner=sandbox.cleaner(),
        trusted=trusted(sandbox),
        wait_seconds=0,
    )

    assert sorted(o.status for o in outcomes) == ["failed", "replayed"]
    (lost,) = [o for o in outcomes if o.status == "failed"]
    assert "EndpointConnectionError" in (lost.error or "") and not lost.deleted
    assert failed.queued() == 1


def test_cli_stdout_is_one_json_object_per_message_and_the_exit_status_says_some_were_kept(
    sandbox: Sandbox,
    failed: FailedBatch,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    _queue_message(failed, {"DDBStreamBatchInfo": {"shardId": "short"}})

    status = replay.main(["--queue-url", failed.queue_url], session=SESSION)

    assert status == replay.EXIT_SOME_KEPT == 1
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines()]
    assert len(lines) == 2 and all(isinstance(line, dict) for line in lines)
    assert sorted(line["status"] for line in lines) == ["invalid", "replayed"]
    assert '"_aws"' in captured.err  # the cleanup's EMF metrics: on stderr, not stdout
    assert failed.queued() == 1


def test_cli_help_documents_the_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        replay.main(["--help"])

    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "exit status" in text
    for line in (
        "0  every message was replayed",
        "1  at least one message was kept",
        "2  could not run",
    ):
        assert line in text


def test_cli_help_gives_the_queue_case_first(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        replay.main(["--help"])

    options = capsys.readouterr().out.split("options:", 1)[1]
    flags = [line.split()[0] for line in options.splitlines() if line.startswith("  --")]
    # The failure queue's run (--dry-run, then without it) before the S3 object's and the
    # Kinesis time range's own options.
    order = ["--queue-url", "--dry-run", "--env-from-function", "--key", "--from"]
    assert [flags.index(flag) for flag in order] == sorted(flags.index(f) for f in order)


def test_fails_cli_on_a_non_positive_max_messages(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        replay.main(["--queue-url", "u", "--max-messages", "0"])

    assert done.value.code == 2
    assert "expected a positive integer" in capsys.readouterr().err


def test_an_agentcore_only_configuration_is_a_cleanup_target() -> None:
    from session_expiry_runtime.core.config import RuntimeConfig

    arn = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/agent-1"
    assert replay.configured_targets(RuntimeConfig(agent_runtime_arn=arn)) == [
        "SESSION_EXPIRY_AGENT_RUNTIME_ARN"
    ]
    replay.require_cleanup_target(RuntimeConfig(agent_runtime_arn=arn))  # does not raise
    with pytest.raises(replay.NoCleanupTarget, match="SESSION_EXPIRY_BROWSER_ID"):
        replay.require_cleanup_target(RuntimeConfig())
