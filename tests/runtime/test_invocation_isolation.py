"""No state crosses an invocation boundary (issue 21, part A, point 2).

Two invocations of the real handler in one warm process, sharing its clients as Lambda's warm
execution environment does. The first one's ``DeleteObjects`` goes to a localhost endpoint that
answers a byte every 100 ms for ever (``SlowEndpoint("trickle")`` of ``test_time_guard``: no
read timeout fires), so the runner abandons it at the hard stop, still in flight. The second
invocation's sessions go to moto as usual. Before the fix the process-wide ``DeleteObjects``
batcher still counted the abandoned call as in flight, the second invocation's scratch deletes
waited behind it, and its healthy sessions were reported failed (``TimeGuard``).

Real time, a few seconds: the first invocation has a 4 s deadline and a 2 s time guard.
"""

from __future__ import annotations

import json
import threading
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.awsrequest import AWSPreparedRequest
from runtime_support import SESSION, Sandbox, Session, event
from session_expiry_runtime import handler as handler_module
from test_time_guard import DEADLINE_SECONDS, MARGIN_MS, Context, SlowEndpoint

#: A bound for a broken test, never reached by a passing one.
JOIN_BOUND_S = 30


def _sessions(sandbox: Sandbox, prefix: str, count: int) -> tuple[list[Session], list[Any]]:
    sessions = [sandbox.create_session(f"{prefix}-{i}") for i in range(count)]
    sandbox.read_stream()
    for session in sessions:
        sandbox.delete(session.session_id)
    return sessions, sandbox.removes()


def _hang_delete_objects_of(s3: Any, sessions: list[Session], endpoint: SlowEndpoint) -> None:
    """Send the DeleteObjects calls that carry these sessions' keys to ``endpoint`` (which never
    finishes answering) instead of moto; every other call goes to moto."""
    prefixes = tuple(s.prefix for s in sessions)

    def redirect(request: AWSPreparedRequest, **_: Any) -> None:
        body = request.body if isinstance(request.body, bytes) else b""
        if any(p.encode() in body for p in prefixes):
            parts = urlsplit(request.url)
            request.url = f"{endpoint.url}{parts.path}?{parts.query}"

    s3.meta.events.register_first("before-send.s3.DeleteObjects", redirect)


def test_a_warm_invocation_after_an_abandoned_delete_objects_cleans_its_sessions(
    sandbox: Sandbox,
    fresh_handler: None,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    for name, value in {
        **sandbox.env(),
        "SESSION_EXPIRY_TIME_GUARD_MS": str(MARGIN_MS),
    }.items():
        monkeypatch.setenv(name, value)
    endpoint = SlowEndpoint("trickle")
    request.addfinalizer(endpoint.close)
    first, first_records = _sessions(sandbox, "first", 3)
    second, second_records = _sessions(sandbox, "second", 3)
    cleaner = handler_module.get_cleaner()  # the warm process's one cleaner and clients
    _hang_delete_objects_of(cleaner.clients.s3, first, endpoint)

    abandoned = Context(DEADLINE_SECONDS)
    response = handler_module.handler(event(*first_records), abandoned)

    assert {f["itemIdentifier"] for f in response["batchItemFailures"]} == {
        r["dynamodb"]["SequenceNumber"] for r in first_records
    }
    assert all(sandbox.keys_under(s.prefix) for s in first)  # the call is still hanging

    # Its own time: the same deadline; a record still waiting at its time guard would fail.
    warm = Context(DEADLINE_SECONDS)
    assert handler_module.handler(event(*second_records), warm) == {"batchItemFailures": []}

    assert all(sandbox.is_clean(s) for s in second)
    assert handler_module.get_cleaner() is cleaner  # the same warm process, clients and steps


def _join_abandoned_threads() -> None:
    """Wait for the record and step threads an earlier hard stop left running (bounded)."""
    for thread in threading.enumerate():
        if thread.name.startswith("cleanup"):
            thread.join(JOIN_BOUND_S)
            assert not thread.is_alive(), f"{thread.name} still running"


def test_a_record_abandoned_at_the_hard_stop_never_counts_in_a_later_invocation(
    sandbox: Sandbox,
    fresh_handler: None,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The abandoned records finish after their invocation returned (the endpoint goes away,
    their calls fail): their results are dropped. Before the fix their record threads wrote
    their metrics into the process's recorder, and the next invocation flushed them as its own."""
    for name, value in {**sandbox.env(), "SESSION_EXPIRY_TIME_GUARD_MS": str(MARGIN_MS)}.items():
        monkeypatch.setenv(name, value)
    endpoint = SlowEndpoint("trickle")
    request.addfinalizer(endpoint.close)
    first, first_records = _sessions(sandbox, "first", 2)
    second, second_records = _sessions(sandbox, "second", 3)
    cleaner = handler_module.get_cleaner()
    _hang_delete_objects_of(cleaner.clients.s3, first, endpoint)
    handler_module.handler(event(*first_records), Context(DEADLINE_SECONDS))
    capsys.readouterr()
    endpoint.close()  # the abandoned DeleteObjects fail now; their records finish, failed
    _join_abandoned_threads()

    assert handler_module.handler(event(*second_records), Context(DEADLINE_SECONDS)) == {
        "batchItemFailures": []
    }

    emf = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith('{"_aws"')]
    assert [d["SessionsCleaned"] for d in emf if d.get("Reason") == "explicit"] == [3]
    assert [d for d in emf if "CleanupFailures" in d] == []
    assert all(sandbox.is_clean(s) for s in second)


def _hang_put_record_batch_while(
    firehose: Any, hanging: threading.Event, endpoint: SlowEndpoint
) -> None:
    """Send the PutRecordBatch calls made while ``hanging`` is set to ``endpoint`` (which never
    finishes answering) instead of moto; every other call goes to moto."""

    def redirect(request: AWSPreparedRequest, **_: Any) -> None:
        if hanging.is_set():
            parts = urlsplit(request.url)
            request.url = f"{endpoint.url}{parts.path}?{parts.query}"

    firehose.meta.events.register_first("before-send.firehose.PutRecordBatch", redirect)


def test_a_warm_invocation_after_an_abandoned_put_record_batch_archives_its_sessions(
    sandbox: Sandbox,
    fresh_handler: None,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    # The archive's Firehose batcher, as the DeleteObjects batcher above: a call abandoned at
    # the hard stop, never answered, must not hold the next invocation's lines. Before, one
    # batcher per process: its remainder call stayed "in flight" for good, and every later
    # invocation's archive gate waited behind it until its own time guard failed the record.
    sandbox.s3.create_bucket(Bucket="archive")
    SESSION.client("firehose").create_delivery_stream(
        DeliveryStreamName="archive-stream",
        DeliveryStreamType="DirectPut",
        ExtendedS3DestinationConfiguration={
            "RoleARN": "arn:aws:iam::123456789012:role/archive-delivery",
            "BucketARN": "arn:aws:s3:::archive",
        },
    )
    for name, value in {
        **sandbox.env(),
        "SESSION_EXPIRY_TIME_GUARD_MS": str(MARGIN_MS),
        "SESSION_EXPIRY_ARCHIVE_BUCKET": "archive",
        "SESSION_EXPIRY_ARCHIVE_DELIVERY_STREAM": "archive-stream",
    }.items():
        monkeypatch.setenv(name, value)
    endpoint = SlowEndpoint("trickle")
    request.addfinalizer(endpoint.close)
    first, first_records = _sessions(sandbox, "first", 2)
    second, second_records = _sessions(sandbox, "second", 2)
    cleaner = handler_module.get_cleaner()
    assert cleaner.clients.firehose is not None
    hanging = threading.Event()
    hanging.set()
    _hang_put_record_batch_while(cleaner.clients.firehose, hanging, endpoint)

    response = handler_module.handler(event(*first_records), Context(DEADLINE_SECONDS))
    assert len(response["batchItemFailures"]) == 2  # its archive gate never opened
    assert all(sandbox.keys_under(s.prefix) for s in first)  # nothing acted on
    hanging.clear()  # the call is still hanging; the next ones go to moto

    warm = Context(DEADLINE_SECONDS)
    assert handler_module.handler(event(*second_records), warm) == {"batchItemFailures": []}
    assert all(sandbox.is_clean(s) for s in second)
