"""Replay acts only on failures of the configured table's streams (adversarial review: forged
on-failure records were trusted, and ``--delete`` removed the evidence).

Whoever can write the on-failure queue or bucket can write a failure record naming any stream,
and an S3 object carries its own records. Each test here writes such a record and checks that
replay keeps it (status ``foreign-stream``, ``still-in-table`` or ``invalid``, never deleted),
cleans nothing of the victim's (its connection, grant and scratch objects stay), and that the
exit status says so.

moto cannot re-enable a table's stream (``UpdateTable`` answers ``ResourceInUseException`` once
the table has had one), so the *previous stream of the same table* is its ARN with an earlier
label, exactly as AWS names a re-enabled table's earlier stream. moto finds a stream by the
table name in its ARN and ignores the label, so reading "the earlier stream" here reads the
table's records (AWS keeps a disabled stream readable for 24 hours).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from runtime_faults import answer, json_error
from runtime_support import REGION, SESSION, Sandbox, Session, event, to_lambda_record
from session_expiry_runtime.recovery import replay
from session_expiry_runtime.recovery.failure_records import (
    ForeignStream,
    check_stream,
    parse_failure_record,
)
from session_expiry_runtime.recovery.replay_trust import TrustedStreams
from test_replay import FailedBatch, failure_record, trusted

BUCKET = "failures"
KEY = "aws/lambda/esm-uuid/shard/2026/12/01/forged"
ACCOUNT = "123456789012"


@pytest.fixture
def failed(sandbox: Sandbox) -> FailedBatch:
    return FailedBatch(sandbox)


def previous_stream(sandbox: Sandbox) -> str:
    """The same table's earlier stream (a stream disabled and enabled again gets a new label)."""
    table = sandbox.stream_arn.rsplit("/stream/", 1)[0]
    return f"{table}/stream/2026-11-30T00:00:00.000"


def other_table_stream(sandbox: Sandbox) -> str:
    return sandbox.stream_arn.replace(":table/sessions/", ":table/other/")


def with_source(records: list[dict[str, Any]], arn: str | None) -> list[dict[str, Any]]:
    shaped = [dict(r) for r in records]
    for record in shaped:
        record.pop("eventSourceARN")
        if arn is not None:
            record["eventSourceARN"] = arn
    return shaped


def s3_message(
    sandbox: Sandbox, records: list[dict[str, Any]], *, stream_arn: str | None = None
) -> dict[str, Any]:
    """An S3 on-failure object: the metadata of ``records``' range plus ``records`` as payload."""
    body = failure_record(sandbox, records)
    body["DDBStreamBatchInfo"]["streamArn"] = stream_arn or sandbox.stream_arn
    body["payload"] = json.dumps(event(*records))
    return body


def replay_object(
    sandbox: Sandbox,
    body: dict[str, Any],
    *,
    dry_run: bool = False,
    trust: TrustedStreams | None = None,
) -> replay.ReplayOutcome:
    sandbox.s3.create_bucket(Bucket=BUCKET)
    sandbox.s3.put_object(Bucket=BUCKET, Key=KEY, Body=json.dumps(body).encode())
    return replay.replay_s3_object(
        sandbox.s3,
        BUCKET,
        KEY,
        streams=sandbox.streams,
        cleaner=sandbox.cleaner(),
        trusted=trust or trusted(sandbox),
        tables=sandbox.ddb,
        dry_run=dry_run,
        delete=True,
    )


def object_kept(sandbox: Sandbox) -> bool:
    listed = sandbox.s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return [o["Key"] for o in listed] == [KEY]


def forged_remove(victim: Session, sequence_number: str = "4" * 21) -> dict[str, Any]:
    """A REMOVE record written by hand: the victim's live item as its old image, no
    ``eventSourceARN`` (what the review's forged payload looked like)."""
    return {
        "eventID": "forged",
        "eventName": "REMOVE",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": {
            "ApproximateCreationDateTime": int(time.time()),
            "Keys": {"pk": victim.item["pk"]},
            "OldImage": victim.item,
            "SequenceNumber": sequence_number,
            "SizeBytes": 200,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }


# --- S3 on-failure objects ----------------------------------------------------------------------


def test_fails_on_a_forged_s3_payload_without_event_source_arn_and_keeps_it(
    sandbox: Sandbox,
) -> None:
    victim = sandbox.create_session("victim")
    body = s3_message(sandbox, [forged_remove(victim)])

    outcome = replay_object(sandbox, body)

    assert outcome.status == "foreign-stream" and not outcome.deleted
    assert outcome.error == (
        "payload record 0 has eventSourceARN None: expected the failed batch's stream "
        f"{sandbox.stream_arn!r}"
    )
    assert outcome.cleaned == 0
    assert sandbox.is_intact(victim)  # connection, grant and scratch objects all still there
    assert object_kept(sandbox)


def test_fails_on_a_payload_forged_with_this_streams_own_arn_for_a_live_session(
    sandbox: Sandbox,
) -> None:
    # The stream checks cannot catch this one: the forger wrote this stream's own ARN. The
    # victim's item is still in the table, and DynamoDB writes a REMOVE only once it is gone.
    victim = sandbox.create_session("victim")
    forged = {**forged_remove(victim), "eventSourceARN": sandbox.stream_arn}

    outcome = replay_object(sandbox, s3_message(sandbox, [forged]))

    assert outcome.status == "still-in-table" and not outcome.deleted
    table = sandbox.stream_arn.rsplit("/stream/", 1)[0]
    assert outcome.error == (
        "payload record 0 is a REMOVE of Keys {'pk': {'S': 'victim'}}, but "
        f"{table} still holds that item (GetItem, consistent read): expected it gone. Forged, "
        "or the key was used again since"
    )
    assert sandbox.is_intact(victim) and object_kept(sandbox)


def test_fails_on_a_genuine_payload_whose_key_was_used_again(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    sandbox.ddb.put_item(TableName="sessions", Item={"pk": {"S": "s-1"}, "x": {"S": "new"}})

    outcome = replay_object(sandbox, s3_message(sandbox, failed.records))

    assert outcome.status == "still-in-table" and not outcome.deleted
    assert "payload record 1 is a REMOVE of Keys {'pk': {'S': 's-1'}}" in (outcome.error or "")
    assert failed.connections_open()  # kept whole, for the operator: nothing was cleaned
    assert object_kept(sandbox)


def test_fails_closed_when_the_table_cannot_be_read(sandbox: Sandbox, failed: FailedBatch) -> None:
    # Stub: moto does not enforce IAM; AWS answers AccessDeniedException without GetItem.
    answer(sandbox.ddb, "GetItem", lambda _: json_error(400, "AccessDeniedException"))

    outcome = replay_object(sandbox, s3_message(sandbox, failed.records))

    assert outcome.status == "failed" and not outcome.deleted
    assert (outcome.error or "").startswith("AccessDeniedException")
    assert failed.connections_open() and object_kept(sandbox)


def test_fails_on_a_payload_without_a_table_client(sandbox: Sandbox, failed: FailedBatch) -> None:
    outcome = replay.replay_message(
        s3_message(sandbox, failed.records),
        streams=sandbox.streams,
        cleaner=sandbox.cleaner(),
        trusted=trusted(sandbox),
    )

    assert outcome.status == "invalid"
    assert outcome.error == (
        "the record holds a payload, which only an S3 on-failure object carries, and no table "
        "client (tables=) was given to check its items are gone"
    )
    assert failed.connections_open()


def test_fails_on_a_queue_message_that_carries_a_payload(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    # Lambda sends a queue only the batch's metadata: a payload in a queue message is forged.
    victim = sandbox.create_session("victim")
    forged = {**forged_remove(victim), "eventSourceARN": sandbox.stream_arn}
    failed.sqs.purge_queue(QueueUrl=failed.queue_url)
    body = s3_message(sandbox, [forged])
    failed.sqs.send_message(QueueUrl=failed.queue_url, MessageBody=json.dumps(body))

    (outcome,) = failed.replay(sandbox.cleaner())

    assert outcome.status == "invalid" and not outcome.deleted
    assert "only an S3 on-failure object carries" in (outcome.error or "")
    assert sandbox.is_intact(victim) and failed.queued() == 1


@pytest.mark.parametrize(
    ("keys", "reason"),
    [
        ({"pk": {"B": "not base64!"}}, "Keys pk.B: expected base64 text, got 'not base64!'"),
        ({"pk": {"SS": ["a"]}}, "Keys pk={'SS': ['a']}: expected S, N or B"),
        ({"pk": "s-0"}, "Keys pk='s-0': expected S, N or B"),
        ({}, "is a REMOVE record without Keys"),
    ],
    ids=["bad-base64", "set", "not-typed", "no-keys"],
)
def test_fails_on_a_payload_remove_whose_keys_cannot_be_looked_up(
    sandbox: Sandbox, keys: dict[str, Any], reason: str
) -> None:
    record = {**forged_remove(sandbox.create_session("v")), "eventSourceARN": sandbox.stream_arn}
    body = {k: v for k, v in record["dynamodb"].items() if k != "OldImage"}
    record["dynamodb"] = {**body, "Keys": keys}

    outcome = replay_object(sandbox, s3_message(sandbox, [record]))

    assert outcome.status == "invalid" and not outcome.deleted
    assert reason in (outcome.error or "")


def test_binary_keys_are_looked_up_as_bytes() -> None:
    from session_expiry_runtime.recovery.removed_items import _key_for_get_item

    assert _key_for_get_item({"pk": {"B": "AQI="}, "sk": {"N": "7"}}, 0) == {
        "pk": {"B": b"\x01\x02"},
        "sk": {"N": "7"},
    }


def test_fails_on_an_s3_object_whose_stream_arn_names_another_table(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    other = other_table_stream(sandbox)
    body = s3_message(sandbox, with_source(failed.records, other), stream_arn=other)

    outcome = replay_object(sandbox, body)

    assert outcome.status == "foreign-stream" and not outcome.deleted
    table = sandbox.stream_arn.rsplit("/stream/", 1)[0]
    assert outcome.error == (
        f"DDBStreamBatchInfo.streamArn {other!r} is not a stream of the configured table: "
        f"expected {table}/stream/<label> (from --stream-arn)"
    )
    assert failed.connections_open() and object_kept(sandbox)
    # Trusting that table instead (whose items are gone), the very same object would be
    # cleaned (dry run here).
    sandbox.ddb.create_table(
        TableName="other",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    potent = replay_object(sandbox, body, dry_run=True, trust=TrustedStreams.of(other))
    assert potent.status == "dry-run" and potent.cleaned == 3


def _set(name: str, value: Any) -> Callable[[Sandbox, dict[str, Any]], None]:
    def tamper(sandbox: Sandbox, record: dict[str, Any]) -> None:
        if value is None:
            record.pop(name, None)
        else:
            record[name] = value(sandbox) if callable(value) else value

    return tamper


@pytest.mark.parametrize(
    ("tamper", "found"),
    [
        (_set("eventSourceARN", other_table_stream), "eventSourceARN 'arn:aws:dynamodb:"),
        (_set("eventSourceARN", previous_stream), "/stream/2026-11-30T00:00:00.000'"),
        (_set("eventSourceARN", None), "eventSourceARN None"),
        (_set("eventSource", "aws:kinesis"), "eventSource 'aws:kinesis': expected 'aws:dynamodb'"),
        (_set("eventSource", None), "eventSource None: expected 'aws:dynamodb'"),
    ],
    ids=["other-table", "previous-stream", "no-arn", "kinesis", "no-source"],
)
def test_fails_on_a_payload_record_of_another_stream_inside_a_valid_message(
    sandbox: Sandbox,
    failed: FailedBatch,
    tamper: Callable[[Sandbox, dict[str, Any]], None],
    found: str,
) -> None:
    records = [dict(r) for r in failed.records]
    tamper(sandbox, records[1])

    outcome = replay_object(sandbox, s3_message(sandbox, records))

    assert outcome.status == "foreign-stream" and not outcome.deleted
    assert outcome.error is not None and outcome.error.startswith("payload record 1 has ")
    assert found in outcome.error
    assert failed.connections_open()  # not even the two genuine records were cleaned
    assert object_kept(sandbox)


def test_fails_on_a_payload_record_whose_keys_do_not_match_its_old_image(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    victim = sandbox.create_session("victim")
    records = [dict(r) for r in failed.records]
    records[0]["dynamodb"] = {**records[0]["dynamodb"], "OldImage": victim.item}

    outcome = replay_object(sandbox, s3_message(sandbox, records))

    assert outcome.status == "invalid" and not outcome.deleted
    assert outcome.error == (
        "payload record 0 has Keys pk={'S': 's-0'} but OldImage pk={'S': 'victim'}: expected "
        "the same key (not a record DynamoDB wrote)"
    )
    assert sandbox.is_intact(victim) and failed.connections_open()
    assert object_kept(sandbox)


def test_an_s3_object_of_the_same_tables_previous_stream_is_replayed(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    earlier = previous_stream(sandbox)
    body = s3_message(sandbox, with_source(failed.records, earlier), stream_arn=earlier)

    outcome = replay_object(sandbox, body)

    assert outcome.status == "replayed" and outcome.deleted, outcome.error
    assert all(sandbox.is_clean(s) for s in failed.sessions)
    assert "Contents" not in sandbox.s3.list_objects_v2(Bucket=BUCKET)


# --- SQS on-failure queue -----------------------------------------------------------------------


def other_table_failure(sandbox: Sandbox, victim: Session) -> dict[str, Any]:
    """A real failure record of another table's stream whose one REMOVE names the victim's
    connection, grant and scratch prefix (its item was copied there, then deleted)."""
    other = sandbox.ddb.create_table(
        TableName="other",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]["LatestStreamArn"]
    sandbox.ddb.put_item(TableName="other", Item=victim.item)
    sandbox.ddb.delete_item(TableName="other", Key={"pk": victim.item["pk"]})
    (shard,) = sandbox.streams.describe_stream(StreamArn=other)["StreamDescription"]["Shards"]
    iterator = sandbox.streams.get_shard_iterator(
        StreamArn=other, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    raw = sandbox.streams.get_records(ShardIterator=iterator)["Records"]
    removes = [to_lambda_record(r, other) for r in raw if r["eventName"] == "REMOVE"]
    body = failure_record(sandbox, removes)
    body["DDBStreamBatchInfo"].update(streamArn=other, shardId=shard["ShardId"])
    return body


def _stream_calls(sandbox: Sandbox) -> list[str]:
    calls: list[str] = []
    sandbox.streams.meta.events.register(
        "before-parameter-build.dynamodb-streams.GetShardIterator",
        lambda params, **_: calls.append(params["StreamArn"]),
    )
    return calls


def test_fails_on_a_queue_message_naming_another_tables_stream(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    victim = sandbox.create_session("victim")
    foreign = other_table_failure(sandbox, victim)
    failed.sqs.send_message(QueueUrl=failed.queue_url, MessageBody=json.dumps(foreign))
    reads = _stream_calls(sandbox)

    outcomes = failed.replay(sandbox.cleaner())

    (kept,) = [o for o in outcomes if o.status == "foreign-stream"]
    (done,) = [o for o in outcomes if o.status == "replayed"]  # the run went on
    other = foreign["DDBStreamBatchInfo"]["streamArn"]
    assert f"streamArn {other!r} is not a stream of the configured table" in (kept.error or "")
    assert not kept.deleted and kept.records == 0 and done.deleted
    assert reads == [sandbox.stream_arn]  # the other table's stream was never read
    assert sandbox.is_intact(victim)
    assert failed.queued() == 1  # the foreign message stays
    # Trusting that table instead, the same message would clean the victim (dry run here).
    potent = replay.replay_message(
        foreign,
        streams=sandbox.streams,
        cleaner=sandbox.cleaner(),
        trusted=TrustedStreams.of(other),
        dry_run=True,
    )
    assert potent.status == "dry-run" and potent.cleaned == 1


def test_a_queue_message_of_the_same_tables_previous_stream_is_replayed_from_that_stream(
    sandbox: Sandbox, failed: FailedBatch
) -> None:
    earlier = previous_stream(sandbox)
    body = failure_record(sandbox, failed.records)
    body["DDBStreamBatchInfo"]["streamArn"] = earlier
    reads = _stream_calls(sandbox)

    outcome = replay.replay_message(
        body, streams=sandbox.streams, cleaner=sandbox.cleaner(), trusted=trusted(sandbox)
    )

    assert reads == [earlier]  # trusted: replay read the range from the stream the message names
    assert outcome.status == "replayed", outcome.error
    assert all(sandbox.is_clean(s) for s in failed.sessions)


# --- which streams are trusted ------------------------------------------------------------------

TABLE = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/sessions"


@pytest.mark.parametrize(
    "arn",
    [
        f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/other/stream/2026-12-01T00:00:00.000",
        f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/sessions2/stream/2026-12-01T00:00:00.000",
        f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/sessions-archive/stream/2026-12-01T00:00",
        f"arn:aws:dynamodb:us-west-2:{ACCOUNT}:table/sessions/stream/2026-12-01T00:00:00.000",
        "arn:aws:dynamodb:us-east-1:210987654321:table/sessions/stream/2026-12-01T00:00:00.000",
        f"arn:aws-cn:dynamodb:us-east-1:{ACCOUNT}:table/sessions/stream/2026-12-01T00:00:00.000",
        f"arn:aws:kinesis:us-east-1:{ACCOUNT}:stream/sessions",
        f"{TABLE}",
        f"{TABLE}/stream/",
        f"{TABLE}/stream/a/b",
        f"{TABLE}/index/gsi",
        f" {TABLE}/stream/2026-12-01T00:00:00.000",
        "",
    ],
    ids=[
        "other-table",
        "name-prefix",
        "name-dash-prefix",
        "other-region",
        "other-account",
        "other-partition",
        "kinesis",
        "table-not-stream",
        "no-label",
        "label-with-slash",
        "index",
        "leading-space",
        "empty",
    ],
)
def test_fails_to_trust_a_stream_not_of_the_configured_table(arn: str) -> None:
    trust = TrustedStreams.of(TABLE)
    info, _ = parse_failure_record(
        {
            "DDBStreamBatchInfo": {
                "shardId": "shardId-00000001573689847184-864758bb",
                "startSequenceNumber": "800000000003126276362",
                "endSequenceNumber": "800000000003126276362",
                "streamArn": arn or "x",
            }
        }
    )

    assert not trust.owns(arn)
    with pytest.raises(ForeignStream, match="is not a stream of the configured table: expected"):
        check_stream(info, trust)


def test_trusts_every_stream_label_of_the_configured_table() -> None:
    trust = TrustedStreams.of(f"{TABLE}/stream/2026-12-01T06:31:12.627005")

    assert trust.table_arns == (TABLE,)
    assert trust.owns(f"{TABLE}/stream/2026-12-01T06:31:12.627005")
    assert trust.owns(f"{TABLE}/stream/2025-01-01T00:00:00.000")  # an earlier stream
    assert trust.expected() == f"{TABLE}/stream/<label>"


@pytest.mark.parametrize(
    "arn", ["sessions", "arn:aws:sqs:us-east-1:123456789012:q", f"{TABLE}/stream/", ""]
)
def test_fails_on_a_configured_arn_that_is_no_dynamodb_table_or_stream(arn: str) -> None:
    with pytest.raises(ValueError, match="expected a DynamoDB stream ARN") as raised:
        TrustedStreams.of(arn)

    assert repr(arn) in str(raised.value)


# --- the CLI ------------------------------------------------------------------------------------


def _settings(monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox, **drop: bool) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("SESSION_EXPIRY_") or name == "AWS_LAMBDA_FUNCTION_NAME":
            monkeypatch.delenv(name)
    for name, value in sandbox.env().items():
        if not drop.get(name):
            monkeypatch.setenv(name, value)


def test_cli_keeps_a_forged_object_even_with_delete_and_exits_1(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _settings(monkeypatch, sandbox)
    victim = sandbox.create_session("victim")
    sandbox.s3.create_bucket(Bucket=BUCKET)
    body = s3_message(sandbox, [forged_remove(victim)])
    sandbox.s3.put_object(Bucket=BUCKET, Key=KEY, Body=json.dumps(body).encode())

    status = replay.main(["--bucket", BUCKET, "--key", KEY, "--delete"], session=SESSION)

    assert status == replay.EXIT_SOME_KEPT == 1
    captured = capsys.readouterr()
    (line,) = [json.loads(x) for x in captured.out.splitlines()]
    assert line["status"] == "foreign-stream" and line["deleted"] is False
    assert "eventSourceARN None" in line["error"]
    table = sandbox.stream_arn.rsplit("/stream/", 1)[0]
    assert f"replay: trusting the streams of {table} (from SESSION_EXPIRY_TABLE_NAME" in (
        captured.err
    )
    assert object_kept(sandbox) and sandbox.is_intact(victim)


def test_cli_exits_1_when_the_queue_held_a_foreign_message(
    sandbox: Sandbox,
    failed: FailedBatch,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _settings(monkeypatch, sandbox)
    victim = sandbox.create_session("victim")
    foreign = other_table_failure(sandbox, victim)
    failed.sqs.send_message(QueueUrl=failed.queue_url, MessageBody=json.dumps(foreign))

    status = replay.main(["--queue-url", failed.queue_url], session=SESSION)

    assert status == 1
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert sorted((x["status"], x["deleted"]) for x in lines) == [
        ("foreign-stream", False),
        ("replayed", True),
    ]
    assert sandbox.is_intact(victim) and failed.queued() == 1


def test_fails_cli_without_a_stream_to_trust(
    sandbox: Sandbox,
    failed: FailedBatch,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The cleanup function's own environment holds no table name (only its mapping names it).
    _settings(monkeypatch, sandbox, SESSION_EXPIRY_TABLE_NAME=True)

    status = replay.main(["--queue-url", failed.queue_url], session=SESSION)

    assert status == replay.EXIT_COULD_NOT_RUN == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("replay: NoTrustedStream: no stream to trust")
    assert "--stream-arn" in captured.err and "--env-from-function" in captured.err
    assert failed.queued() == 1 and failed.connections_open()


def _cleanup_function(sandbox: Sandbox, *, mapped: bool) -> None:
    """The cleanup function as the construct deploys it: no table name in its environment,
    an event source mapping on the table's stream."""
    role = SESSION.client("iam").create_role(RoleName="cleanup", AssumeRolePolicyDocument="{}")
    env = {k: v for k, v in sandbox.env().items() if k != "SESSION_EXPIRY_TABLE_NAME"}
    lam = SESSION.client("lambda")
    lam.create_function(
        FunctionName="cleanup",
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler="session_expiry_runtime.handler.handler",
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},  # an empty zip: never run here
        Environment={"Variables": env},
    )
    if mapped:  # after every table write: moto would invoke the function (Docker) on new records
        lam.create_event_source_mapping(
            EventSourceArn=sandbox.stream_arn, FunctionName="cleanup", StartingPosition="LATEST"
        )


@pytest.mark.parametrize("how", ["--env-from-function", "AWS_LAMBDA_FUNCTION_NAME"])
def test_cli_trusts_the_table_of_the_cleanup_functions_event_source_mapping(
    sandbox: Sandbox,
    failed: FailedBatch,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    how: str,
) -> None:
    _cleanup_function(sandbox, mapped=True)
    if how == "AWS_LAMBDA_FUNCTION_NAME":  # run with the function's own environment
        _settings(monkeypatch, sandbox, SESSION_EXPIRY_TABLE_NAME=True)
        monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "cleanup")
        args = ["--queue-url", failed.queue_url]
    else:
        _settings(monkeypatch, sandbox, **{k: True for k in sandbox.env()})
        args = ["--queue-url", failed.queue_url, "--env-from-function", "cleanup"]

    status = replay.main(args, session=SESSION)

    captured = capsys.readouterr()
    assert status == 0, captured.err
    table = sandbox.stream_arn.rsplit("/stream/", 1)[0]
    assert (
        f"replay: trusting the streams of {table} "
        "(from the event source mappings of function cleanup) and no other"
    ) in captured.err
    assert all(sandbox.is_clean(s) for s in failed.sessions) and failed.queued() == 0


def test_fails_cli_when_the_named_function_has_no_mapping_and_no_table_name(
    sandbox: Sandbox,
    failed: FailedBatch,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _cleanup_function(sandbox, mapped=False)
    _settings(monkeypatch, sandbox, **{k: True for k in sandbox.env()})

    status = replay.main(
        ["--queue-url", failed.queue_url, "--env-from-function", "cleanup"], session=SESSION
    )

    assert status == 2
    assert "no stream to trust" in capsys.readouterr().err
    assert failed.queued() == 1 and failed.connections_open()


def test_fails_cli_on_a_stream_arn_of_another_table_than_the_settings(
    sandbox: Sandbox,
    failed: FailedBatch,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--stream-arn`` narrows the trust, never moves it to another table: with the sessions
    table's settings, another table's stream is refused before anything is read (issue 21)."""
    _settings(monkeypatch, sandbox)  # SESSION_EXPIRY_TABLE_NAME names the sessions table
    other = other_table_stream(sandbox)

    status = replay.main(["--queue-url", failed.queue_url, "--stream-arn", other], session=SESSION)

    assert status == replay.EXIT_COULD_NOT_RUN
    captured = capsys.readouterr()
    assert captured.out == ""
    table = sandbox.stream_arn.rsplit("/stream/", 1)[0]
    assert f"is a stream of table {table.replace('/sessions', '/other')}" in captured.err
    assert f"the cleanup settings are those of table {table}" in captured.err
    assert failed.queued() == 1 and failed.connections_open()


def test_fails_cli_on_a_stream_arn_that_is_not_one(
    sandbox: Sandbox,
    failed: FailedBatch,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _settings(monkeypatch, sandbox)

    status = replay.main(
        ["--queue-url", failed.queue_url, "--stream-arn", "sessions"], session=SESSION
    )

    assert status == 2
    err = capsys.readouterr().err
    assert err.startswith("replay: ValueError: 'sessions': expected a DynamoDB stream ARN")
    assert failed.queued() == 1


def test_cli_help_says_what_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        replay.main(["--help"])

    text = " ".join(capsys.readouterr().out.split())
    for words in (
        "foreign-stream",
        "--stream-arn ARN",
        "DDBStreamBatchInfo.streamArn must be arn:<partition>:dynamodb:<region>:<account>:"
        "table/<table>/stream/<any label>",
        "eventSource aws:dynamodb, eventSourceARN equal to that streamArn",
        "Keys equal to its OldImage's key attributes",
        "still-in-table",
        "the item each REMOVE record names must be gone from the table",
        "even with --delete",
        "only Lambda should be able to write the on-failure queue or bucket",
    ):
        assert words in text
