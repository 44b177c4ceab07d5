"""Issue 3, one test per kind, against moto with real boto3 calls and real stream records.

Stubs (see runtime_faults.py) are used only where moto differs from AWS, and each use says so.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from decimal import Decimal
from typing import Any

import pytest
from runtime_faults import (
    answer,
    json_error,
    rest_json_error,
    s3_delete_result_with_errors,
    s3_error,
    times,
)
from runtime_support import (
    BUCKET,
    SESSION,
    FakeContext,
    Sandbox,
    event,
    to_lambda_record,
)
from session_expiry_runtime.cleanup import cleaner as cleaner_module
from session_expiry_runtime.cleanup import runner as runner_module
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, process_batch


def session_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.session for r in caplog.records if hasattr(r, "session")]


def run(
    cleaner: SessionCleaner, records: list[dict[str, Any]], context: Any = None
) -> dict[str, Any]:
    return process_batch(event(*records), context or FakeContext(), cleaner)


def failed_ids(response: dict[str, Any]) -> list[str]:
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def seq(record: dict[str, Any]) -> str:
    return record["dynamodb"]["SequenceNumber"]


# --- decoding ------------------------------------------------------------------------------
def test_old_image_with_every_dynamodb_type_decodes_and_logs_exactly(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    big = "12345678901234567890123456789012345678"  # 38 significant digits
    session = sandbox.create_session(
        "s-types",
        extra={
            "blob": {"B": b"\x00\xffbinary"},
            "names": {"SS": ["zeta", "alpha"]},
            "numbers": {"NS": ["10", "-2.5", big]},
            "blobs": {"BS": [b"\x02", b"\x01"]},
            "nothing": {"NULL": True},
            "flag": {"BOOL": False},
            "zero": {"N": "0"},
            "tiny": {"N": "1E-130"},
            "big": {"N": big},
            "nested": {"M": {"list": {"L": [{"N": "0.1"}, {"B": b"x"}, {"M": {}}]}}},
        },
    )
    sandbox.read_stream()
    sandbox.delete("s-types")
    (record,) = sandbox.lambda_records()
    # Lambda's wire form: B as base64 text.
    assert record["dynamodb"]["OldImage"]["blob"] == {"B": "AP9iaW5hcnk="}

    response = run(sandbox.cleaner(), [record])

    assert failed_ids(response) == []
    assert sandbox.is_clean(session)
    (line,) = session_lines(session_logs)
    json.dumps(line)  # every field serialisable
    assert line["keys"] == {"pk": "s-types"}
    assert line["outcome"] == "cleaned"


# --- TTL classification (moto-made records; classify.py has the value table) ----------------
@pytest.mark.parametrize(
    ("ttl_attribute", "ttl_identity", "expected"),
    [
        ({"N": "1700000000"}, True, "ttl"),
        ({"N": "1700000000"}, False, "deleted-after-expiry"),  # global-table replica: no identity
        ({"N": "4102444800"}, False, "explicit"),  # 2100-01-01: deleted before it expired
        ({"S": "1700000000"}, True, "explicit"),  # String TTL never expires
        ({"N": "1700000000000"}, True, "explicit"),  # milliseconds never expire
        ({"N": "1700000000000"}, False, "explicit"),
    ],
)
def test_removal_is_classified(
    sandbox: Sandbox,
    session_logs: pytest.LogCaptureFixture,
    ttl_attribute: dict[str, str],
    ttl_identity: bool,
    expected: str,
) -> None:
    sandbox.create_session("s-c", expires_at=ttl_attribute)
    sandbox.read_stream()
    sandbox.delete("s-c")
    (record,) = sandbox.lambda_records(ttl_deletes={"s-c"} if ttl_identity else set())
    cleaner = sandbox.cleaner()

    assert failed_ids(run(cleaner, [record])) == []

    (line,) = session_lines(session_logs)
    assert line["reason"] == expected
    if expected == "explicit":
        assert "ttlLagSeconds" not in line
    else:
        assert (
            line["ttlLagSeconds"]
            == record["dynamodb"]["ApproximateCreationDateTime"] - 1_700_000_000
        )


def test_missing_ttl_is_explicit(sandbox: Sandbox, session_logs: pytest.LogCaptureFixture) -> None:
    s = sandbox.create_session("s-nottl")
    del s.item["expiresAt"]
    sandbox.ddb.put_item(TableName="sessions", Item=s.item)
    sandbox.read_stream()
    sandbox.delete("s-nottl")
    (record,) = sandbox.lambda_records(ttl_deletes={"s-nottl"})

    assert failed_ids(run(sandbox.cleaner(), [record])) == []
    assert session_lines(session_logs)[0]["reason"] == "explicit"


def test_ttl_lag_metric_is_emitted_in_seconds(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    for sid, ttl in (("s-lag1", 1_700_000_000), ("s-lag2", 1_700_000_100)):
        sandbox.create_session(sid, expires_at=ttl)
    sandbox.read_stream()
    sandbox.delete("s-lag1")
    sandbox.delete("s-lag2")
    records = sandbox.lambda_records(ttl_deletes={"s-lag1", "s-lag2"})
    capsys.readouterr()

    assert failed_ids(run(sandbox.cleaner(), records)) == []

    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    (lag_doc,) = [d for d in docs if "TtlLagSeconds" in d]
    expected = sorted(
        r["dynamodb"]["ApproximateCreationDateTime"] - t
        for r, t in zip(records, (1_700_000_000, 1_700_000_100), strict=True)
    )
    assert sorted(lag_doc["TtlLagSeconds"]) == expected
    (directive,) = lag_doc["_aws"]["CloudWatchMetrics"]
    assert {"Name": "TtlLagSeconds", "Unit": "Seconds"} in directive["Metrics"]
    assert directive["Dimensions"] == [[]]
    (ttl_doc,) = [d for d in docs if d.get("Reason") == "ttl"]
    assert ttl_doc["SessionsCleaned"] == 2


# --- failures ----------------------------------------------------------------------------
def _removed(sandbox: Sandbox, sid: str, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    session = sandbox.create_session(sid, **kwargs)
    sandbox.read_stream()
    sandbox.delete(sid)
    (record,) = sandbox.lambda_records()
    return session, record


def test_gone_connection_and_retired_grant_are_success(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    session, record = _removed(sandbox, "s-gone")
    cleaner = sandbox.cleaner()
    # Stub: moto answers 200 to DeleteConnection of a closed connection and to RetireGrant of a
    # retired grant; AWS answers 410 GoneException and 400 NotFoundException.
    gone = answer(
        cleaner.clients.apigateway,
        "DeleteConnection",
        times(1, rest_json_error(410, "GoneException")),
    )
    retired = answer(
        cleaner.clients.kms, "RetireGrant", times(1, json_error(400, "NotFoundException"))
    )

    assert failed_ids(run(cleaner, [record])) == []

    assert len(gone) == 1 and len(retired) == 1
    (line,) = session_lines(session_logs)
    assert line["steps"] == {
        "DeleteConnection": "already-done",
        "RetireGrant": "already-done",
        "DeleteScratch": "done",
    }
    assert sandbox.keys_under(session.prefix) == []


@pytest.mark.parametrize(
    ("target", "operation", "wire", "action"),
    [
        (
            "apigateway",
            "DeleteConnection",
            rest_json_error(403, "ForbiddenException"),
            "DeleteConnection",
        ),
        (
            "apigateway",
            "DeleteConnection",
            rest_json_error(429, "LimitExceededException"),
            "DeleteConnection",
        ),
        ("kms", "RetireGrant", json_error(400, "AccessDeniedException"), "RetireGrant"),
        ("kms", "RetireGrant", json_error(400, "KMSInvalidStateException"), "RetireGrant"),
        ("s3", "ListObjectsV2", s3_error(403, "AccessDenied"), "DeleteScratch"),
        ("s3", "DeleteObjects", s3_error(500, "InternalError"), "DeleteScratch"),
    ],
)
def test_fails_and_reports_the_record_when_a_call_keeps_failing(
    sandbox: Sandbox,
    session_logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    no_backoff: None,
    target: str,
    operation: str,
    wire: Any,
    action: str,
) -> None:
    session, record = _removed(sandbox, "s-fail")
    cleaner = sandbox.cleaner()
    # Stub: moto never answers these errors. Every attempt fails (no side effect).
    calls = answer(getattr(cleaner.clients, target), operation, lambda _: wire)
    capsys.readouterr()

    response = run(cleaner, [record])

    assert failed_ids(response) == [seq(record)]
    retryable = wire[0] >= 500 or "LimitExceeded" in wire[2].decode() + str(wire[1])
    assert len(calls) == (cleaner_module.MAX_ATTEMPTS if retryable else 1)
    (line,) = session_lines(session_logs)
    assert line["outcome"] == "failed" and line["failedActions"] == [action]
    # The other steps still ran: per-step isolation inside the record.
    others = {"DeleteConnection", "RetireGrant", "DeleteScratch"} - {action}
    assert all(line["steps"][o] == "done" for o in others)
    docs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert any(d.get("Action") == action and d["CleanupFailures"] == 1 for d in docs)
    assert not any("SessionsCleaned" in d for d in docs)
    del session


def test_throttling_is_retried_by_the_sdk_first(sandbox: Sandbox, no_backoff: None) -> None:
    session, record = _removed(sandbox, "s-throttle")
    cleaner = sandbox.cleaner()
    # Stub: moto never throttles. Throttles on every attempt but the last (the SDK's attempts
    # are sized to the time guard), then moto's real answer.
    retries = cleaner_module.MAX_ATTEMPTS - 1
    answer(
        cleaner.clients.kms, "RetireGrant", times(retries, json_error(400, "ThrottlingException"))
    )
    answer(
        cleaner.clients.apigateway,
        "DeleteConnection",
        times(retries, rest_json_error(429, "LimitExceededException")),
    )
    answer(cleaner.clients.s3, "DeleteObjects", times(retries, s3_error(503, "SlowDown")))

    assert failed_ids(run(cleaner, [record])) == []
    assert sandbox.is_clean(session)


def test_fails_on_delete_objects_errors_in_a_200_answer_then_cleans_on_retry(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    session, record = _removed(sandbox, "s-errors")
    cleaner = sandbox.cleaner()
    # Stub: moto's DeleteObjects never reports per-key Errors; S3 does, with HTTP 200.
    answer(
        cleaner.clients.s3,
        "DeleteObjects",
        times(1, s3_delete_result_with_errors([session.keys[0]])),
    )

    assert failed_ids(run(cleaner, [record])) == [seq(record)]
    (line,) = session_lines(session_logs)
    assert line["failedActions"] == ["DeleteScratch"]
    assert "AccessDenied" in line["errors"]["DeleteScratch"]
    assert sandbox.keys_under(session.prefix)  # nothing was deleted by the stubbed call

    # Redelivery (the event source mapping retries the failed record): clean, no failure.
    assert failed_ids(run(cleaner, [record])) == []
    assert sandbox.is_clean(session)


def test_a_record_error_never_escapes_and_the_identifier_is_exact(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, session_logs: pytest.LogCaptureFixture
) -> None:
    sessions = [
        sandbox.create_session(f"s-iso-{i}", expires_at=1_800_000_000 + i) for i in range(3)
    ]
    sandbox.read_stream()
    for s in sessions:
        sandbox.delete(s.session_id)
    records = sandbox.lambda_records()
    poison = records[1]
    real = runner_module.classify_removal

    def explode(**kwargs: Any) -> Any:
        if kwargs["ttl_value"] == Decimal(1_800_000_001):
            raise RuntimeError("bug")
        return real(**kwargs)

    monkeypatch.setattr(runner_module, "classify_removal", explode)

    response = run(sandbox.cleaner(), records)

    assert response == {"batchItemFailures": [{"itemIdentifier": seq(poison)}]}
    assert sandbox.is_clean(sessions[0]) and sandbox.is_clean(sessions[2])
    assert sandbox.is_intact(sessions[1])
    line = next(x for x in session_lines(session_logs) if x["outcome"] == "failed")
    assert (
        line["failedActions"] == ["Unexpected"]
        and "RuntimeError: bug" in line["errors"]["Unexpected"]
    )


def test_fails_on_undecodable_old_image(sandbox: Sandbox) -> None:
    _, record = _removed(sandbox, "s-bad")
    record["dynamodb"]["OldImage"]["broken"] = {"N": "not-a-number"}

    response = run(sandbox.cleaner(), [record])

    assert failed_ids(response) == [seq(record)]


def test_record_without_sequence_number_is_never_reported(sandbox: Sandbox) -> None:
    _, record = _removed(sandbox, "s-noseq")
    del record["dynamodb"]["SequenceNumber"]

    assert run(sandbox.cleaner(), [record]) == {"batchItemFailures": []}


# --- skips --------------------------------------------------------------------------------
def test_non_remove_records_and_missing_attributes_are_skipped_not_retried(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    session = sandbox.create_session("s-live")
    sandbox.ddb.update_item(
        TableName="sessions",
        Key={"pk": {"S": "s-live"}},
        UpdateExpression="SET #t = :t",
        ExpressionAttributeNames={"#t": "expiresAt"},
        ExpressionAttributeValues={":t": {"N": "1900000000"}},
    )
    sandbox.ddb.put_item(
        TableName="sessions", Item={"pk": {"S": "s-bare"}, "expiresAt": {"N": "1"}}
    )
    sandbox.delete("s-bare")
    records = sandbox.lambda_records()
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "INSERT", "REMOVE"]
    capsys.readouterr()

    assert run(sandbox.cleaner(), records) == {"batchItemFailures": []}

    assert sandbox.is_intact(session)  # INSERT/MODIFY never clean anything
    docs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    skipped = {d["Cause"]: d["RecordsSkipped"] for d in docs if "Cause" in d}
    assert skipped == {"NotRemove": 3, "MissingAttributes": 1}


def test_remove_without_old_image_is_skipped(
    aws: None, session_logs: pytest.LogCaptureFixture
) -> None:
    sandbox = Sandbox()
    # A real KEYS_ONLY stream: its REMOVE records carry no OldImage.
    ddb = SESSION.client("dynamodb")
    arn = ddb.create_table(
        TableName="keys-only",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
    )["TableDescription"]["LatestStreamArn"]
    ddb.put_item(TableName="keys-only", Item={"pk": {"S": "s-1"}, "connectionId": {"S": "c"}})
    ddb.delete_item(TableName="keys-only", Key={"pk": {"S": "s-1"}})
    streams = SESSION.client("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )
    raw = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    remove = to_lambda_record(raw[-1], arn)
    assert remove["eventName"] == "REMOVE" and "OldImage" not in remove["dynamodb"]

    assert run(sandbox.cleaner(), [remove]) == {"batchItemFailures": []}
    (line,) = session_lines(session_logs)
    assert line["cause"] == "NoOldImage"


# --- time guard ----------------------------------------------------------------------------
class ShrinkingContext(FakeContext):
    """Plenty of time for the first ``calls`` checks, then less than any guard."""

    def __init__(self, calls: int) -> None:
        super().__init__()
        self.calls = calls
        self.lock = threading.Lock()

    def get_remaining_time_in_millis(self) -> int:
        with self.lock:
            self.calls -= 1
            return 300_000 if self.calls >= 0 else 500


def test_time_guard_reports_unstarted_records_without_starting_them(sandbox: Sandbox) -> None:
    sessions = [sandbox.create_session(f"s-tg-{i}") for i in range(4)]
    sandbox.read_stream()
    for s in sessions:
        sandbox.delete(s.session_id)
    records = sandbox.lambda_records()
    config = sandbox.config.__class__(**{**sandbox.config.__dict__, "max_workers": 1})

    # Three readings with time left: the read-ahead's, before it marks the batch's ownership
    # records (batch._read_ahead), then one per record started. The latest reading (500 ms
    # left) puts the hard stop in the past when the releases would be sent: the two that acted
    # fail too (deferred_releases: their ownership records stay releasing until a retry
    # releases them).
    response = run(sandbox.cleaner(config), records, ShrinkingContext(calls=3))

    assert failed_ids(response) == [seq(r) for r in records]
    assert all(sandbox.is_clean(s) for s in sessions[:2])
    assert all(sandbox.is_intact(s) for s in sessions[2:])  # never started
    retry = run(sandbox.cleaner(config), records[:2], FakeContext())
    assert failed_ids(retry) == []


def test_time_guard_below_margin_from_the_start_touches_nothing(sandbox: Sandbox) -> None:
    session, record = _removed(sandbox, "s-late")

    response = run(sandbox.cleaner(), [record], FakeContext(remaining_ms=9_999))

    assert failed_ids(response) == [seq(record)]
    assert sandbox.is_intact(session)


# --- concurrency ---------------------------------------------------------------------------
def test_records_are_cleaned_concurrently_with_isolated_failures(
    sandbox: Sandbox, no_backoff: None
) -> None:
    sessions = [sandbox.create_session(f"s-par-{i}") for i in range(12)]
    sandbox.read_stream()
    for s in sessions:
        sandbox.delete(s.session_id)
    records = sandbox.lambda_records()
    cleaner = sandbox.cleaner()
    threads: set[str] = set()
    poisoned = sessions[5].connection_id

    def observe(request: Any) -> Any:
        threads.add(threading.current_thread().name)
        # Stub: a connection the API rejects (moto never answers 403).
        if request.url.endswith(poisoned.replace("=", "%3D")):
            return rest_json_error(403, "ForbiddenException")
        return None

    answer(cleaner.clients.apigateway, "DeleteConnection", observe)

    response = run(cleaner, records)

    assert failed_ids(response) == [seq(records[5])]
    assert len({t for t in threads if t.startswith("cleanup")}) > 1
    assert all(sandbox.is_clean(s) for i, s in enumerate(sessions) if i != 5)
    assert sandbox.connection_exists(poisoned)
    assert not sandbox.keys_under(sessions[5].prefix)  # its other steps still ran


def test_one_sessions_steps_run_at_the_same_time(sandbox: Sandbox) -> None:
    # Each of the three calls waits until the other two have started: if the steps ran one
    # after another, the barrier would break and every step would fail.
    session = sandbox.create_session("s-overlap")
    sandbox.read_stream()
    sandbox.delete(session.session_id)
    records = sandbox.lambda_records()
    cleaner = sandbox.cleaner()
    barrier = threading.Barrier(3, timeout=5)

    def meet(_request: Any) -> None:
        barrier.wait()
        return None  # let moto answer

    answer(cleaner.clients.apigateway, "DeleteConnection", meet)
    answer(cleaner.clients.kms, "RetireGrant", meet)
    answer(cleaner.clients.s3, "ListObjectsV2", meet)

    response = run(cleaner, records)

    assert response == {"batchItemFailures": []}
    assert not barrier.broken
    assert sandbox.is_clean(session)


def test_steps_run_one_after_another_without_a_step_pool(sandbox: Sandbox) -> None:
    session = sandbox.create_session("s-serial")
    sandbox.read_stream()
    sandbox.delete(session.session_id)
    (record,) = sandbox.lambda_records()
    cleaner = sandbox.cleaner()
    order: list[str] = []
    for client, operation in (
        (cleaner.clients.apigateway, "DeleteConnection"),
        (cleaner.clients.kms, "RetireGrant"),
        (cleaner.clients.s3, "ListObjectsV2"),
    ):
        answer(client, operation, lambda _r, op=operation: order.append(op))

    result = cleaner.clean(record)

    assert result.outcome == "cleaned"
    assert order == ["DeleteConnection", "RetireGrant", "ListObjectsV2"]


def test_client_pool_is_at_least_the_worker_count() -> None:
    config = cleaner_module.client_config(max_workers=32)
    # Step threads and record threads (archive writes) share the clients.
    assert config.max_pool_connections >= 64
    assert config.retries == {"mode": "standard", "total_max_attempts": cleaner_module.MAX_ATTEMPTS}


# --- prefix safety -------------------------------------------------------------------------
REFUSED_PREFIXES = [
    "sessions/",  # the root itself
    "sessions",
    "sessions/s-1",  # no trailing slash: would take sessions/s-10/ too
    "other/s-1/",
    "/sessions/s-1/",
    "sessions//s-1/",
    "sessions/../s-1/",
    "sessions/./s-1/",
    "sessions/s-*/",
    "sessions/s-1/\x00/",
    "",
]


@pytest.mark.parametrize("prefix", REFUSED_PREFIXES)
def test_fails_closed_on_refused_prefix_nothing_deleted_not_retried(
    sandbox: Sandbox,
    capsys: pytest.CaptureFixture[str],
    session_logs: pytest.LogCaptureFixture,
    prefix: str,
) -> None:
    bait = ["sessions/s-1/a", "sessions/s-10/a", "other/s-1/a", "sessions/x"]
    for key in bait:
        sandbox.s3.put_object(Bucket=BUCKET, Key=key, Body=b"keep")
    session, record = _removed(sandbox, "s-refuse")
    record["dynamodb"]["OldImage"]["scratchPrefix"] = {"S": prefix}
    capsys.readouterr()

    assert run(sandbox.cleaner(), [record]) == {"batchItemFailures": []}

    for key in bait:
        assert key in sandbox.keys_under(key)
    assert sorted(sandbox.keys_under(session.prefix)) == sorted(session.keys)
    (line,) = session_lines(session_logs)
    assert line["steps"]["DeleteScratch"] == "refused" and line["refusal"]
    docs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert any(d.get("ScratchPrefixesRefused") == 1 for d in docs)
    del session


def test_fails_closed_on_prefix_of_another_tenant(
    aws: None, session_logs: pytest.LogCaptureFixture
) -> None:
    sandbox = Sandbox(tenant_scoped=True)
    other = sandbox.create_session("s-other", tenant="t-2")
    mine = sandbox.create_session("s-mine", tenant="t-1")
    sandbox.read_stream()
    sandbox.delete("s-mine")
    (record,) = sandbox.lambda_records()
    # The old image claims another tenant's prefix: refused, nothing deleted.
    record["dynamodb"]["OldImage"]["scratchPrefix"] = {"S": other.prefix}

    assert run(sandbox.cleaner(), [record]) == {"batchItemFailures": []}

    assert sorted(sandbox.keys_under(other.prefix)) == sorted(other.keys)
    assert sorted(sandbox.keys_under(mine.prefix)) == sorted(mine.keys)
    assert session_lines(session_logs)[0]["steps"]["DeleteScratch"] == "refused"


def test_tenant_scoped_prefix_of_own_tenant_is_deleted(aws: None) -> None:
    sandbox = Sandbox(tenant_scoped=True)
    mine = sandbox.create_session("s-mine", tenant="t-1")
    sandbox.read_stream()
    sandbox.delete("s-mine")

    assert run(sandbox.cleaner(), sandbox.removes()) == {"batchItemFailures": []}
    assert sandbox.is_clean(mine)


ODD_NAMES = (
    "with space",
    "plus+sign",
    "percent%20literal",
    "100%",
    "unicode-ünï-日本-🙂",
    "ctrl-\x01-\x1f",
    "carriage\rreturn",
    "line\nfeed",
    "tab\tx",
    "del\x7f",
    "xml-&<>\"'",
    "trailing ",
    "nested/dir/../x",
)


def test_keys_with_any_characters_are_deleted(sandbox: Sandbox) -> None:
    session = sandbox.create_session("s-odd", object_names=ODD_NAMES)
    neighbour = sandbox.create_session("s-odd2", object_names=ODD_NAMES)
    assert sorted(sandbox.keys_under(session.prefix)) == sorted(session.keys)
    sandbox.read_stream()
    sandbox.delete("s-odd")

    assert run(sandbox.cleaner(), sandbox.removes()) == {"batchItemFailures": []}

    assert sandbox.keys_under(session.prefix) == []
    assert sandbox.is_intact(neighbour)


def test_more_than_1000_objects_are_listed_in_pages_and_deleted_in_chunks(sandbox: Sandbox) -> None:
    names = tuple(f"obj-{i:05d}" for i in range(2_050))
    session = sandbox.create_session("s-many", object_names=names)
    sandbox.read_stream()
    sandbox.delete("s-many")
    cleaner = sandbox.cleaner()
    sizes: list[int] = []

    def count(request: Any) -> None:
        sizes.append(request.body.count(b"<Object>"))

    answer(cleaner.clients.s3, "DeleteObjects", count)

    assert run(cleaner, sandbox.removes()) == {"batchItemFailures": []}

    assert sandbox.keys_under(session.prefix) == []
    assert sum(sizes) == 2_050 and max(sizes) <= 1_000


# --- reuse race ----------------------------------------------------------------------------
def test_late_remove_of_a_reused_session_id_leaves_the_new_incarnation_intact(
    sandbox: Sandbox,
) -> None:
    old = sandbox.create_session("s-7", expires_at=1_700_000_000)
    sandbox.read_stream()
    sandbox.delete("s-7")  # TTL removes the expired incarnation...
    new = sandbox.create_session("s-7")  # ...and the id is reused before the REMOVE is handled
    assert new.prefix != old.prefix
    records = sandbox.lambda_records(ttl_deletes={"s-7"})
    assert [r["eventName"] for r in records] == ["REMOVE", "INSERT"]

    assert run(sandbox.cleaner(), records) == {"batchItemFailures": []}

    assert sandbox.is_clean(old)
    assert sandbox.is_intact(new)


# --- duplicate delivery --------------------------------------------------------------------
def test_same_record_twice_in_a_batch_is_cleaned_once(
    sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    session, record = _removed(sandbox, "s-dup")
    capsys.readouterr()

    assert run(sandbox.cleaner(), [record, json.loads(json.dumps(record))]) == {
        "batchItemFailures": []
    }

    assert sandbox.is_clean(session)
    docs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert any(d.get("Reason") == "explicit" and d["SessionsCleaned"] == 1 for d in docs)
    assert any(d.get("Cause") == "DuplicateInBatch" for d in docs)


def test_redelivered_batch_ends_in_the_same_state_without_failures(sandbox: Sandbox) -> None:
    sessions = [sandbox.create_session(f"s-re-{i}") for i in range(3)]
    live = sandbox.create_session("s-live")
    sandbox.read_stream()
    for s in sessions:
        sandbox.delete(s.session_id)
    records = sandbox.removes()
    cleaner = sandbox.cleaner()
    assert run(cleaner, records) == {"batchItemFailures": []}
    # Stub: on re-delivery AWS answers GoneException / NotFoundException for what is already
    # gone; moto answers 200. Both must end the same way.
    answer(
        cleaner.clients.apigateway,
        "DeleteConnection",
        lambda _: rest_json_error(410, "GoneException"),
    )
    answer(cleaner.clients.kms, "RetireGrant", lambda _: json_error(400, "NotFoundException"))

    assert run(cleaner, records) == {"batchItemFailures": []}

    assert all(sandbox.is_clean(s) for s in sessions)
    assert sandbox.is_intact(live)


def test_time_guard_stops_a_large_scratch_deletion_between_pages(sandbox: Sandbox) -> None:
    names = tuple(f"obj-{i:05d}" for i in range(1_500))
    session = sandbox.create_session("s-big", object_names=names)
    sandbox.read_stream()
    sandbox.delete("s-big")
    (record,) = sandbox.removes()
    # Enough time to start the record, not enough to list a second page.
    response = run(sandbox.cleaner(), [record], ShrinkingContext(calls=1))

    assert failed_ids(response) == [seq(record)]
    assert len(sandbox.keys_under(session.prefix)) == 500  # first page of 1,000 deleted
    # The event source mapping re-delivers it; it finishes.
    assert failed_ids(run(sandbox.cleaner(), [record])) == []
    assert sandbox.is_clean(session)


def test_fails_closed_when_a_listing_names_a_key_outside_the_prefix(sandbox: Sandbox) -> None:
    session, record = _removed(sandbox, "s-1", prefix="sessions/s-1/i1/")
    sandbox.s3.put_object(Bucket=BUCKET, Key="sessions/s-10/keep", Body=b"x")
    cleaner = sandbox.cleaner()
    # Stub: S3 never lists a key outside the requested prefix; a decoding bug could. The
    # cleanup must then delete nothing and report the record.
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Name>{BUCKET}</Name><Prefix>sessions/s-1/i1/</Prefix><KeyCount>2</KeyCount>"
        "<MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>"
        "<Contents><Key>sessions/s-1/i1/a.txt</Key><Size>1</Size></Contents>"
        "<Contents><Key>sessions/s-10/keep</Key><Size>1</Size></Contents>"
        "</ListBucketResult>"
    )
    answer(cleaner.clients.s3, "ListObjectsV2", lambda _: (200, {}, body.encode()))

    assert failed_ids(run(cleaner, [record])) == [seq(record)]
    assert sandbox.keys_under("sessions/s-10/") == ["sessions/s-10/keep"]
    assert sorted(sandbox.keys_under(session.prefix)) == sorted(session.keys)


def _listing(truncated: bool | None, token: str | None) -> bytes:
    """A ``ListObjectsV2`` answer of no keys with ``IsTruncated`` ``truncated`` and
    ``NextContinuationToken`` ``token`` (either element left out when ``None``)."""
    is_truncated = (
        "" if truncated is None else f"<IsTruncated>{str(truncated).lower()}</IsTruncated>"
    )
    next_token = "" if token is None else f"<NextContinuationToken>{token}</NextContinuationToken>"
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Name>{BUCKET}</Name><Prefix>sessions/s-1/i1/</Prefix><KeyCount>0</KeyCount>"
        f"<MaxKeys>1000</MaxKeys>{is_truncated}{next_token}"
        "</ListBucketResult>"
    ).encode()


#: (IsTruncated, NextContinuationToken) of each answer in turn, the calls made, what is said
_UNLISTABLE = {
    "token-repeated": ([(True, "A"), (True, "A")], 2, "a continuation token it was sent before"),
    "token-cycle": (
        [(True, "A"), (True, "B"), (True, "A")],
        3,
        "a continuation token it was sent before",
    ),
    "token-missing": ([(True, None)], 1, "a truncated page without a NextContinuationToken"),
    # an empty token is no token (steps/scratch.py `_unlistable__mutmut_10`, issue 40)
    "token-empty": ([(True, "")], 1, "a truncated page without a NextContinuationToken"),
    "not-truncated-with-token": (
        [(False, "A")],
        1,
        "a page that is not truncated but names a NextContinuationToken",
    ),
    "is-truncated-missing": ([(None, None)], 1, "a page without IsTruncated"),
}


@pytest.mark.parametrize("case", list(_UNLISTABLE))
def test_fails_a_listing_that_does_not_say_how_it_goes_on(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture, case: str
) -> None:
    answers, calls, said = _UNLISTABLE[case]
    session, record = _removed(sandbox, "s-1", prefix="sessions/s-1/i1/")
    cleaner = sandbox.cleaner()
    # Stub: S3 sends NextContinuationToken exactly when IsTruncated is true, and a new one every
    # page; an answer that does not could leave objects unlisted or never end. The step fails
    # its record instead of reporting the prefix deleted (botocore's paginator stopped at a
    # missing token as if done and caught only a token repeated at once).
    urls: list[str] = []

    def unlistable(request: Any) -> tuple[int, dict[str, str], bytes]:
        urls.append(request.url)
        return 200, {}, _listing(*answers[min(len(urls), len(answers)) - 1])

    answer(cleaner.clients.s3, "ListObjectsV2", unlistable)

    assert failed_ids(run(cleaner, [record])) == [seq(record)]
    assert len(urls) == calls and "continuation-token" not in urls[0]
    sent = [token for _, token in answers[: calls - 1]]
    assert [u.split("continuation-token=")[1].split("&")[0] for u in urls[1:]] == sent
    (line,) = session_lines(session_logs)
    assert f"answered {said}: the rest" in line["errors"]["DeleteScratch"]
    assert sorted(sandbox.keys_under(session.prefix)) == sorted(session.keys)


def test_a_dry_run_stops_listing_at_the_time_guard(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    _, record = _removed(sandbox, "s-1", prefix="sessions/s-1/i1/")
    cleaner = sandbox.cleaner(dataclasses.replace(sandbox.config, dry_run=True))
    # Stub: a listing of many pages (a new token each), so the guard, not the end, stops it.
    urls: list[str] = []

    def endless(request: Any) -> tuple[int, dict[str, str], bytes]:
        urls.append(request.url)
        return 200, {}, _listing(True, f"t{len(urls)}")

    answer(cleaner.clients.s3, "ListObjectsV2", endless)
    # Enough time to start the record, not enough to list a second page.
    response = run(cleaner, [record], ShrinkingContext(calls=1))

    assert failed_ids(response) == [seq(record)]
    assert len(urls) == 1
    (line,) = session_lines(session_logs)
    assert "time guard reached while listing" in line["errors"]["TimeGuard"]


def test_log_lines_survive_lambdas_json_log_formatter(
    sandbox: Sandbox, session_logs: pytest.LogCaptureFixture
) -> None:
    sandbox.create_session(
        "s-fmt",
        extra={"blob": {"B": b"\x00"}, "nums": {"NS": ["1", "2.5"]}, "big": {"N": "1" * 38}},
    )
    sandbox.read_stream()
    # A binary key attribute too: the logged keys must serialise.
    sandbox.delete("s-fmt")
    (record,) = sandbox.removes()
    record["dynamodb"]["Keys"]["bin"] = {"B": "AP8="}

    run(sandbox.cleaner(), [record])

    (log_record,) = [r for r in session_logs.records if hasattr(r, "session")]
    # Lambda's JSON formatter (awslambdaric JsonFormatter) adds every extra attribute of the
    # record and encodes with a plain json.JSONEncoder: no default= to rescue Decimal or bytes.
    line = json.JSONEncoder(ensure_ascii=False).encode(
        {"message": log_record.getMessage(), "session": log_record.session}
    )
    assert json.loads(line)["session"]["keys"] == {"pk": "s-fmt", "bin": "AP8="}
