"""The local event source mapping poller follows Lambda's documented semantics.

Each test writes real items to a moto table (the emulator), reads them back from its stream,
and delivers them to a tiny in-test handler. Sequence numbers are compared by position, since
moto numbers a table's records from a fixed start.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from cdk_session_expiry.testing import (
    EventSourceMappingConfig,
    EventSourceMappingPoller,
    LocalEmulator,
    ShardBlocked,
)

TTL_FILTER = json.dumps(
    {
        "eventName": ["REMOVE"],
        "userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]},
    }
)
REMOVE_FILTER = json.dumps({"eventName": ["REMOVE"]})


class Table:
    """A fresh table with a NEW_AND_OLD_IMAGES stream in the emulator."""

    def __init__(self, emulator: LocalEmulator) -> None:
        self.emulator = emulator
        self.ddb = emulator.client("dynamodb")
        self.name = f"t-{uuid.uuid4().hex[:8]}"
        desc = self.ddb.create_table(
            TableName=self.name,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )["TableDescription"]
        self.stream_arn = desc["LatestStreamArn"]

    def put(self, pk: str, **attrs: Any) -> None:
        item = {"pk": {"S": pk}, **attrs}
        self.ddb.put_item(TableName=self.name, Item=item)

    def delete(self, pk: str) -> None:
        self.ddb.delete_item(TableName=self.name, Key={"pk": {"S": pk}})

    def put_and_delete(self, *pks: str) -> None:
        for pk in pks:
            self.put(pk)
        for pk in pks:
            self.delete(pk)

    def queue(self) -> tuple[str, str]:
        sqs = self.emulator.client("sqs")
        url = sqs.create_queue(QueueName=f"q-{self.name}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        return url, arn


class Recorder:
    """A handler that records the keys it received and answers with ``respond(keys, seqs)``."""

    def __init__(self, respond: Callable[[list[str], list[str]], Any] | None = None) -> None:
        self.calls: list[list[str]] = []
        self.events: list[dict[str, Any]] = []
        self._respond = respond

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        keys = [r["dynamodb"]["Keys"]["pk"]["S"] for r in event["Records"]]
        seqs = [r["dynamodb"]["SequenceNumber"] for r in event["Records"]]
        self.calls.append(keys)
        self.events.append(event)
        assert context.get_remaining_time_in_millis() > 0
        if self._respond is None:
            return {"batchItemFailures": []}
        return self._respond(keys, seqs)


def poller(table: Table, handler: Any, **config: Any) -> EventSourceMappingPoller:
    clock = config.pop("clock", time.time)
    stall = config.pop("stall_after_attempts", 50)
    return EventSourceMappingPoller(
        EventSourceMappingConfig(event_source_arn=table.stream_arn, **config),
        handler,
        clients=table.emulator.client,
        clock=clock,
        stall_after_attempts=stall,
    )


@pytest.fixture
def table(emulator: LocalEmulator) -> Table:
    return Table(emulator)


# -- filtering ---------------------------------------------------------------------------------
def test_records_matching_no_filter_are_dropped_for_good(table: Table) -> None:
    table.put("a")
    table.put("b")
    table.put("a", v={"N": "2"})  # MODIFY
    table.delete("a")
    handler = Recorder()
    p = poller(table, handler, filter_patterns=(REMOVE_FILTER,))
    report = p.poll()
    assert handler.calls == [["a"]]
    assert report.records_read == 4
    assert report.records_filtered_out == 3
    # Dropped for good: the checkpoint passed them, a later poll does not deliver them.
    table.delete("b")
    p.poll()
    assert handler.calls == [["a"], ["b"]]
    assert report.records_read == 5


def test_filters_are_ored_and_keys_inside_one_pattern_are_anded(table: Table) -> None:
    insert_of_x = json.dumps({"eventName": ["INSERT"], "dynamodb": {"Keys": {"pk": {"S": ["x"]}}}})
    table.put_and_delete("x", "y")
    handler = Recorder()
    poller(table, handler, filter_patterns=(insert_of_x, REMOVE_FILTER), batch_size=10).poll()
    # INSERT x (first pattern), REMOVE x and REMOVE y (second); INSERT y matches neither.
    assert handler.calls == [["x", "x", "y"]]
    assert [r["eventName"] for r in handler.events[0]["Records"]] == ["INSERT", "REMOVE", "REMOVE"]


def test_filter_matching_is_case_sensitive(table: Table) -> None:
    table.put_and_delete("a")
    handler = Recorder()
    report = poller(table, handler, filter_patterns=(json.dumps({"eventName": ["remove"]}),)).poll()
    assert handler.calls == []
    assert report.records_filtered_out == 2


def test_ttl_filter_delivers_only_ttl_shaped_deletes(table: Table) -> None:
    table.put("ttl", expiresAt={"N": "100"})
    table.put("explicit", expiresAt={"N": "100"})
    assert table.emulator.ttl_delete(table.name, {"pk": {"S": "ttl"}}, ttl_attribute="expiresAt")
    table.delete("explicit")
    handler = Recorder()
    poller(table, handler, filter_patterns=(TTL_FILTER,)).poll()
    assert handler.calls == [["ttl"]]
    record = handler.events[0]["Records"][0]
    assert record["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def test_ttl_delete_skips_items_not_yet_expired_or_with_wrong_ttl_type(table: Table) -> None:
    now = 1_700_000_000
    table.put("future", expiresAt={"N": str(now + 60)})
    table.put("millis", expiresAt={"N": str(now * 1000)})
    table.put("string", expiresAt={"S": str(now - 60)})
    table.put("due", expiresAt={"N": str(now)})
    emu = table.emulator
    for pk in ("future", "millis", "string"):
        assert (
            emu.ttl_delete(table.name, {"pk": {"S": pk}}, ttl_attribute="expiresAt", now=now)
            is None
        )
    assert emu.ttl_delete(table.name, {"pk": {"S": "due"}}, ttl_attribute="expiresAt", now=now)
    remaining = {i["pk"]["S"] for i in table.ddb.scan(TableName=table.name)["Items"]}
    assert remaining == {"future", "millis", "string"}


def test_explicit_deletes_carry_no_user_identity(table: Table) -> None:
    table.put_and_delete("a")
    handler = Recorder()
    poller(table, handler, filter_patterns=(REMOVE_FILTER,)).poll()
    assert "userIdentity" not in handler.events[0]["Records"][0]


# -- record shape ------------------------------------------------------------------------------
def test_records_have_the_lambda_event_shape(table: Table) -> None:
    table.put(
        "a",
        blob={"B": b"\x00\xffhi"},
        big={"N": "12345678901234567890123456789012345678"},
        tags={"SS": ["x", "y"]},
    )
    table.delete("a")
    handler = Recorder()
    poller(table, handler, filter_patterns=(REMOVE_FILTER,)).poll()
    record = handler.events[0]["Records"][0]
    assert record["eventSource"] == "aws:dynamodb"
    assert record["eventSourceARN"] == table.stream_arn
    assert record["awsRegion"] == "us-east-1"
    old = record["dynamodb"]["OldImage"]
    assert old["blob"] == {"B": base64.b64encode(b"\x00\xffhi").decode()}
    assert old["big"] == {"N": "12345678901234567890123456789012345678"}
    assert sorted(old["tags"]["SS"]) == ["x", "y"]
    created = record["dynamodb"]["ApproximateCreationDateTime"]
    assert isinstance(created, int) and abs(created - time.time()) < 120
    assert record["dynamodb"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"


# -- batching ----------------------------------------------------------------------------------
def test_batches_hold_at_most_batch_size_records_in_order(table: Table) -> None:
    keys = [f"k{i}" for i in range(10)]
    table.put_and_delete(*keys)
    handler = Recorder()
    poller(table, handler, filter_patterns=(REMOVE_FILTER,), batch_size=4).poll()
    assert handler.calls == [keys[0:4], keys[4:8], keys[8:10]]


def test_a_later_poll_delivers_only_new_records(table: Table) -> None:
    table.put_and_delete("a", "b")
    handler = Recorder()
    p = poller(table, handler, filter_patterns=(REMOVE_FILTER,))
    p.poll()
    p.poll()
    table.put_and_delete("c")
    p.poll()
    assert handler.calls == [["a", "b"], ["c"]]


# -- partial batch responses -------------------------------------------------------------------
def test_partial_batch_response_is_ignored_without_report_batch_item_failures(table: Table) -> None:
    table.put_and_delete("a", "b", "c")
    handler = Recorder(lambda keys, seqs: {"batchItemFailures": [{"itemIdentifier": seqs[1]}]})
    report = poller(
        table,
        handler,
        filter_patterns=(REMOVE_FILTER,),
        batch_size=3,
        report_batch_item_failures=False,
    ).poll()
    assert handler.calls == [["a", "b", "c"]]
    assert report.retries == 0


def test_partial_batch_response_redelivers_from_the_lowest_reported_record(table: Table) -> None:
    table.put_and_delete("a", "b", "c", "d", "e")

    def respond(keys: list[str], seqs: list[str]) -> Any:
        if len(keys) == 5:  # report d and b: checkpoint after a, re-deliver b..e
            return {"batchItemFailures": [{"itemIdentifier": seqs[3]}, {"itemIdentifier": seqs[1]}]}
        return {"batchItemFailures": []}

    handler = Recorder(respond)
    report = poller(
        table,
        handler,
        filter_patterns=(REMOVE_FILTER,),
        batch_size=5,
        report_batch_item_failures=True,
        maximum_retry_attempts=3,
    ).poll()
    assert handler.calls == [["a", "b", "c", "d", "e"], ["b", "c", "d", "e"]]
    assert [i.outcome for i in report.invocations] == ["partial", "success"]
    assert report.retries == 1
    assert report.records_sent_to_on_failure == 0


@pytest.mark.parametrize(
    "response",
    [
        None,
        {},
        {"batchItemFailures": []},
        {"batchItemFailures": None},
        {"other": 1},
    ],
)
def test_empty_or_null_responses_are_complete_success(table: Table, response: Any) -> None:
    table.put_and_delete("a", "b")
    handler = Recorder(lambda keys, seqs: response)
    report = poller(
        table,
        handler,
        filter_patterns=(REMOVE_FILTER,),
        report_batch_item_failures=True,
        maximum_retry_attempts=3,
    ).poll()
    assert handler.calls == [["a", "b"]]
    assert report.retries == 0


@pytest.mark.parametrize(
    "failure",
    [
        {"itemIdentifier": ""},
        {"itemIdentifier": None},
        {"itemIdentifer": "SEQ"},  # wrong key name
        {"itemIdentifier": "999"},  # not a sequence number of this batch
        "SEQ",  # not an object
    ],
    ids=["empty", "none", "wrong-key", "unknown", "not-an-object"],
)
def test_fails_whole_batch_on_bad_item_identifier(table: Table, failure: Any) -> None:
    table.put_and_delete("a", "b", "c")

    def respond(keys: list[str], seqs: list[str]) -> Any:
        if len(handler.calls) == 1:
            bad = json.loads(json.dumps(failure).replace("SEQ", seqs[2]))
            return {"batchItemFailures": [{"itemIdentifier": seqs[2]}, bad]}
        return {"batchItemFailures": []}

    handler = Recorder(respond)
    report = poller(
        table,
        handler,
        filter_patterns=(REMOVE_FILTER,),
        batch_size=3,
        report_batch_item_failures=True,
        maximum_retry_attempts=3,
    ).poll()
    # The whole batch failed and was retried as a whole, not from c.
    assert handler.calls == [["a", "b", "c"], ["a", "b", "c"]]
    assert report.invocations[0].outcome == "invalid_response"
    assert report.retries == 1


def test_fails_whole_batch_when_response_is_not_an_object(table: Table) -> None:
    table.put_and_delete("a")
    handler = Recorder(lambda keys, seqs: "ok" if len(handler.calls) == 1 else None)
    report = poller(
        table,
        handler,
        filter_patterns=(REMOVE_FILTER,),
        report_batch_item_failures=True,
        maximum_retry_attempts=1,
    ).poll()
    assert handler.calls == [["a"], ["a"]]
    assert report.invocations[0].outcome == "invalid_response"


# -- function errors, retries, bisect, on-failure destination ---------------------------------
def test_function_error_retries_whole_batch_then_sends_metadata_to_on_failure_queue(
    table: Table,
) -> None:
    table.put_and_delete("a", "b", "c", "d")
    url, arn = table.queue()

    def respond(keys: list[str], seqs: list[str]) -> Any:
        if "a" in keys:
            raise RuntimeError("boom")
        return None

    handler = Recorder(respond)
    report = poller(
        table,
        handler,
        filter_patterns=(REMOVE_FILTER,),
        batch_size=3,
        maximum_retry_attempts=2,
        on_failure_destination=arn,
    ).poll()
    # 1 invocation + 2 retries of [a, b, c], then the next batch [d].
    assert handler.calls == [["a", "b", "c"]] * 3 + [["d"]]
    assert report.retries == 2
    assert report.records_sent_to_on_failure == 3
    messages = table.emulator.client("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10)[
        "Messages"
    ]
    assert len(messages) == 1
    body = json.loads(messages[0]["Body"])
    seqs = [r["dynamodb"]["SequenceNumber"] for r in handler.events[0]["Records"]]
    info = body["DDBStreamBatchInfo"]
    assert info["shardId"].startswith("shardId-")
    assert info["startSequenceNumber"] == seqs[0]
    assert info["endSequenceNumber"] == seqs[2]
    assert info["batchSize"] == 3
    assert info["streamArn"] == table.stream_arn
    assert body["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert body["requestContext"]["approximateInvokeCount"] == 3
    assert body["responseContext"]["functionError"] == "Unhandled"
    assert "Records" not in body and "payload" not in body  # metadata only


def test_maximum_retry_attempts_zero_means_no_retry(table: Table) -> None:
    table.put_and_delete("a")
    handler = Recorder(lambda keys, seqs: (_ for _ in ()).throw(ValueError("x")))
    report = poller(
        table, handler, filter_patterns=(REMOVE_FILTER,), maximum_retry_attempts=0
    ).poll()
    assert handler.calls == [["a"]]
    assert report.records_sent_to_on_failure == 1


def test_bisect_isolates_a_poison_record_without_consuming_retries(table: Table) -> None:
    table.put_and_delete("a", "b", "c", "d")
    url, arn = table.queue()

    def respond(keys: list[str], seqs: list[str]) -> Any:
        if "c" in keys:
            raise RuntimeError("poison")
        return {"batchItemFailures": []}

    handler = Recorder(respond)
    report = poller(
        table,
        handler,
        filter_patterns=(REMOVE_FILTER,),
        batch_size=4,
        bisect_batch_on_function_error=True,
        maximum_retry_attempts=1,
        on_failure_destination=arn,
    ).poll()
    assert handler.calls == [
        ["a", "b", "c", "d"],  # fails: bisect, no retry used
        ["a", "b"],  # succeeds
        ["c", "d"],  # fails: bisect, no retry used
        ["c"],  # fails
        ["c"],  # the one retry fails: on-failure destination
        ["d"],  # succeeds
    ]
    assert report.bisections == 2
    assert report.retries == 1
    assert report.records_sent_to_on_failure == 1
    body = json.loads(
        table.emulator.client("sqs").receive_message(QueueUrl=url)["Messages"][0]["Body"]
    )
    assert body["DDBStreamBatchInfo"]["batchSize"] == 1
    c_seq = handler.events[3]["Records"][0]["dynamodb"]["SequenceNumber"]
    assert body["DDBStreamBatchInfo"]["startSequenceNumber"] == c_seq


def test_partial_response_with_bisect_retries_only_the_remaining_records(table: Table) -> None:
    table.put_and_delete("a", "b", "c", "d")

    def respond(keys: list[str], seqs: list[str]) -> Any:
        if "c" in keys:
            return {"batchItemFailures": [{"itemIdentifier": seqs[keys.index("c")]}]}
        return None

    handler = Recorder(respond)
    report = poller(
        table,
        handler,
        filter_patterns=(REMOVE_FILTER,),
        batch_size=4,
        bisect_batch_on_function_error=True,
        report_batch_item_failures=True,
        maximum_retry_attempts=2,
    ).poll()
    assert handler.calls == [["a", "b", "c", "d"], ["c", "d"], ["c", "d"]]
    assert report.bisections == 0
    assert report.records_sent_to_on_failure == 2
    assert report.on_failure_messages[0]["DDBStreamBatchInfo"]["batchSize"] == 2


def test_maximum_record_age_discards_old_records_without_invoking(table: Table) -> None:
    table.put_and_delete("a", "b")
    url, arn = table.queue()
    handler = Recorder()
    report = poller(
        table,
        handler,
        filter_patterns=(REMOVE_FILTER,),
        maximum_record_age_seconds=60,
        on_failure_destination=arn,
        clock=lambda: time.time() + 120,
    ).poll()
    assert handler.calls == []
    assert report.records_sent_to_on_failure == 2
    body = json.loads(
        table.emulator.client("sqs").receive_message(QueueUrl=url)["Messages"][0]["Body"]
    )
    assert body["requestContext"]["condition"] == "RecordAgeExceeded"
    assert body["requestContext"]["approximateInvokeCount"] == 0
    assert "responseContext" not in body
    assert body["DDBStreamBatchInfo"]["batchSize"] == 2


def test_records_younger_than_maximum_record_age_are_delivered(table: Table) -> None:
    table.put_and_delete("a")
    handler = Recorder()
    report = poller(
        table,
        handler,
        filter_patterns=(REMOVE_FILTER,),
        maximum_record_age_seconds=60,
        clock=lambda: time.time() + 30,
    ).poll()
    assert handler.calls == [["a"]]
    assert report.records_sent_to_on_failure == 0


def test_without_destination_exhausted_records_are_discarded(table: Table) -> None:
    table.put_and_delete("a", "b")
    handler = Recorder(
        lambda keys, seqs: (_ for _ in ()).throw(ValueError("x")) if "a" in keys else None
    )
    report = poller(
        table, handler, filter_patterns=(REMOVE_FILTER,), batch_size=1, maximum_retry_attempts=1
    ).poll()
    assert handler.calls == [["a"], ["a"], ["b"]]
    assert report.records_sent_to_on_failure == 1
    assert len(report.on_failure_messages) == 1


def test_fails_loudly_when_retries_are_unbounded_and_the_batch_keeps_failing(table: Table) -> None:
    table.put_and_delete("a")
    handler = Recorder(lambda keys, seqs: (_ for _ in ()).throw(ValueError("x")))
    with pytest.raises(ShardBlocked, match="MaximumRetryAttempts=-1"):
        poller(
            table,
            handler,
            filter_patterns=(REMOVE_FILTER,),
            maximum_retry_attempts=-1,
            stall_after_attempts=5,
        ).poll()
    assert len(handler.calls) == 5


def test_config_reads_the_mapping_as_lambda_reports_it() -> None:
    config = EventSourceMappingConfig.from_api(
        {
            "UUID": "u",
            "EventSourceArn": "arn:aws:dynamodb:us-east-1:1:table/t/stream/x",
            "FunctionArn": "arn:aws:lambda:us-east-1:1:function:f",
            "BatchSize": 25,
            "FilterCriteria": {"Filters": [{"Pattern": REMOVE_FILTER}]},
            "BisectBatchOnFunctionError": True,
            "MaximumRetryAttempts": 5,
            "MaximumRecordAgeInSeconds": 3600,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "DestinationConfig": {"OnFailure": {"Destination": "arn:aws:sqs:us-east-1:1:q"}},
            "StartingPosition": "TRIM_HORIZON",
            "State": "Enabled",
        }
    )
    assert (
        config.batch_size,
        config.filter_patterns,
        config.bisect_batch_on_function_error,
        config.maximum_retry_attempts,
        config.maximum_record_age_seconds,
        config.report_batch_item_failures,
        config.on_failure_destination,
    ) == (25, (REMOVE_FILTER,), True, 5, 3600, True, "arn:aws:sqs:us-east-1:1:q")
    defaults = EventSourceMappingConfig.from_api({"EventSourceArn": "a", "FunctionArn": "f"})
    assert (
        defaults.batch_size,
        defaults.maximum_retry_attempts,
        defaults.maximum_record_age_seconds,
        defaults.report_batch_item_failures,
        defaults.bisect_batch_on_function_error,
    ) == (100, -1, -1, False, False)


def test_fails_on_invalid_filter_pattern(table: Table) -> None:
    with pytest.raises(ValueError, match="invalid filter pattern"):
        poller(table, Recorder(), filter_patterns=('{"eventName": "REMOVE"}',))
