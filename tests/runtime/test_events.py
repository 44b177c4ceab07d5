"""Fan-out of one EventBridge event per cleaned session (issue 6).

Events are read back the way a consumer sees them: an EventBridge rule on the construct's
source and detail type, targeting an SQS queue, all in moto. moto never fails a PutEvents entry,
so partial failure (HTTP 200 with ``FailedEntryCount``) is stubbed with AWS's wire answer.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from runtime_faults import answer, json_error
from runtime_support import DEFAULT_ACCOUNT_ID, REGION, SESSION, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, process_batch
from session_expiry_runtime.core import config as runtime_config
from session_expiry_runtime.sinks import events as fan_out

from cdk_session_expiry import _runtime_contract as contract

BUS = "sessions-bus"
BUS_ARN = f"arn:aws:events:{REGION}:{DEFAULT_ACCOUNT_ID}:event-bus/{BUS}"


def test_event_source_and_detail_type_agree_with_the_construct() -> None:
    assert (runtime_config.EVENT_SOURCE, runtime_config.EVENT_DETAIL_TYPE) == (
        contract.EVENT_SOURCE,
        contract.EVENT_DETAIL_TYPE,
    )


class Bus:
    """A custom bus with a rule on the session events that delivers them to an SQS queue."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.events = SESSION.client("events")
        self.sqs = SESSION.client("sqs")
        self.events.create_event_bus(Name=BUS)
        self.queue_url = self.sqs.create_queue(QueueName="session-events")["QueueUrl"]
        queue_arn = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        self.events.put_rule(
            Name="cleaned",
            EventBusName=BUS,
            EventPattern=json.dumps(
                {"source": [contract.EVENT_SOURCE], "detail-type": [contract.EVENT_DETAIL_TYPE]}
            ),
        )
        self.events.put_targets(
            Rule="cleaned", EventBusName=BUS, Targets=[{"Id": "q", "Arn": queue_arn}]
        )
        self.config = dataclasses.replace(sandbox.config, event_bus_arn=BUS_ARN)

    def cleaner(self) -> SessionCleaner:
        return self.sandbox.cleaner(self.config)

    def received(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            page = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10)
            messages = page.get("Messages") or []
            if not messages:
                return out
            for m in messages:
                out.append(json.loads(m["Body"]))
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=m["ReceiptHandle"])


@pytest.fixture
def bus(sandbox: Sandbox) -> Bus:
    return Bus(sandbox)


def _run(cleaner: SessionCleaner, records: list[dict[str, Any]]) -> list[str]:
    response = process_batch(event(*records), FakeContext(), cleaner)
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def _metrics(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]


def _put_events_calls(cleaner: SessionCleaner) -> list[int]:
    sizes: list[int] = []
    cleaner.clients.events.meta.events.register(
        "provide-client-params.events.PutEvents",
        lambda params, **_: sizes.append(len(params["Entries"])),
    )
    return sizes


def test_one_event_per_cleaned_session_in_calls_of_at_most_ten(
    sandbox: Sandbox, bus: Bus, capsys: pytest.CaptureFixture[str]
) -> None:
    sessions = [sandbox.create_session(f"s-{i:02}", tenant=f"t-{i % 2}") for i in range(12)]
    sandbox.read_stream()
    for s in sessions:
        sandbox.delete(s.session_id)
    records = sandbox.removes()
    cleaner = bus.cleaner()
    calls = _put_events_calls(cleaner)
    capsys.readouterr()

    assert _run(cleaner, records) == []

    assert sorted(calls) == [2, 10]
    received = bus.received()
    assert len(received) == 12
    assert {e["source"] for e in received} == {"cdk-session-expiry"}
    assert {e["detail-type"] for e in received} == {"Session Cleaned"}
    by_id = {e["detail"]["sessionKey"]["pk"]: e["detail"] for e in received}
    assert sorted(by_id) == [s.session_id for s in sessions]
    first = by_id["s-00"]
    record = next(r for r in records if r["dynamodb"]["Keys"]["pk"]["S"] == "s-00")
    assert first["tenant"] == "t-0"
    assert first["reason"] == "explicit"  # expires in an hour: deleted before expiry
    assert first["sequenceNumber"] == record["dynamodb"]["SequenceNumber"]
    assert first["eventId"] == record["eventID"]
    assert first["ttlLagSeconds"] is None
    assert first["steps"] == {
        "DeleteConnection": "done",
        "RetireGrant": "done",
        "DeleteScratch": "done",
    }
    assert set(first) == {
        "sessionKey",
        "tenant",
        "reason",
        "ttlLagSeconds",
        "sequenceNumber",
        "eventId",
        "approximateCreationDateTime",
        "steps",
    }
    docs = _metrics(capsys)
    assert sum(d.get("SessionEventsPublished", 0) for d in docs) == 12
    assert sum(d.get("SessionsCleaned", 0) for d in docs) == 12


def test_ttl_deletes_carry_their_lag_and_the_archive_key(sandbox: Sandbox, bus: Bus) -> None:
    sandbox.s3.create_bucket(Bucket="archive-bucket")
    sandbox.create_session("s-ttl", expires_at=1_700_000_000)
    sandbox.read_stream()
    sandbox.delete("s-ttl")
    config = dataclasses.replace(bus.config, archive_bucket="archive-bucket")

    assert _run(sandbox.cleaner(config), sandbox.removes(ttl_deletes={"s-ttl"})) == []

    (received,) = bus.received()
    detail = received["detail"]
    assert detail["reason"] == "ttl"
    assert detail["ttlLagSeconds"] == detail["approximateCreationDateTime"] - 1_700_000_000
    assert detail["archiveKey"].startswith("archive/date=")
    assert detail["steps"]["Archive"] == "done"
    assert detail["tenant"] is None


def test_skipped_and_failed_records_get_no_event(sandbox: Sandbox, bus: Bus) -> None:
    sandbox.create_session("s-insert-only")
    records = sandbox.lambda_records()  # an INSERT: skipped, no event
    cleaner = bus.cleaner()
    calls = _put_events_calls(cleaner)

    assert _run(cleaner, records) == []

    assert calls == [] and bus.received() == []


def test_fails_exactly_the_records_whose_entries_failed(
    sandbox: Sandbox, bus: Bus, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(3):
        sandbox.create_session(f"s-{i}")
    sandbox.read_stream()
    for i in range(3):
        sandbox.delete(f"s-{i}")
    records = sandbox.removes()
    cleaner = bus.cleaner()
    sent: list[list[dict[str, Any]]] = []
    cleaner.clients.events.meta.events.register(
        "provide-client-params.events.PutEvents",
        lambda params, **_: sent.append(params["Entries"]),
    )
    # Stub: moto never fails an entry. AWS answers HTTP 200 with FailedEntryCount and an
    # ErrorCode in the failed entry's position (EventBridge API Reference, PutEvents).
    partial = {
        "FailedEntryCount": 1,
        "Entries": [
            {"EventId": "11111111-1111-1111-1111-111111111111"},
            {"ErrorCode": "InternalFailure", "ErrorMessage": "stubbed"},
            {"EventId": "33333333-3333-3333-3333-333333333333"},
        ],
    }
    answer(
        cleaner.clients.events,
        "PutEvents",
        lambda _: (
            200,
            {"content-type": "application/x-amz-json-1.1"},
            json.dumps(partial).encode(),
        ),
    )
    capsys.readouterr()

    failed = _run(cleaner, records)

    (entries,) = sent
    second = json.loads(entries[1]["Detail"])["sequenceNumber"]
    assert failed == [second]
    docs = _metrics(capsys)
    assert sum(d.get("SessionEventsPublished", 0) for d in docs) == 2
    assert sum(d.get("SessionsCleaned", 0) for d in docs) == 2  # the failed one comes back
    assert any(d.get("Action") == "PublishEvent" and d["CleanupFailures"] == 1 for d in docs)


def test_a_put_events_call_that_raises_fails_all_its_records(sandbox: Sandbox, bus: Bus) -> None:
    sandbox.create_session("s-a")
    sandbox.create_session("s-b")
    sandbox.read_stream()
    sandbox.delete("s-a")
    sandbox.delete("s-b")
    records = sandbox.removes()
    cleaner = bus.cleaner()
    # Stub: an AccessDenied PutEvents (e.g. the bus policy changed); moto allows everything.
    answer(cleaner.clients.events, "PutEvents", lambda _: json_error(400, "AccessDeniedException"))

    failed = _run(cleaner, records)

    assert sorted(failed) == sorted(r["dynamodb"]["SequenceNumber"] for r in records)
    # Redelivered with the bus reachable: cleaned again (idempotent) and published.
    assert _run(bus.cleaner(), records) == []
    assert len(bus.received()) == 2


def test_without_an_event_bus_nothing_is_published(sandbox: Sandbox) -> None:
    cleaner = sandbox.cleaner()
    assert cleaner.clients.events is None
    sandbox.create_session("s-quiet")
    sandbox.read_stream()
    sandbox.delete("s-quiet")
    assert _run(cleaner, sandbox.removes()) == []


def test_event_entries_name_the_bus() -> None:
    from session_expiry_runtime.cleanup.cleaner import RecordResult

    result = RecordResult("1", "cleaned", tenant="t")
    result.log.update(keys={"pk": "s"}, reason="explicit", sequenceNumber="1")
    entry = fan_out.event_entry(result, BUS_ARN)
    assert entry["EventBusName"] == BUS_ARN
    assert json.loads(entry["Detail"]) == {
        "sessionKey": {"pk": "s"},
        "tenant": "t",
        "reason": "explicit",
        "sequenceNumber": "1",
        "ttlLagSeconds": None,
    }
