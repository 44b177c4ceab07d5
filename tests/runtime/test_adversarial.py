"""Adversarial inputs for the cleanup runtime: each test is a counterexample that once broke a
promise (see the comment on each), kept as a regression test.

Records come from real writes and deletes on a moto table (``runtime_support.Sandbox``); where
a shape cannot come out of DynamoDB (values outside its number range, nesting deeper than its
32 levels), the record is edited after it was read back, and the test says so.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_support import DEFAULT_ACCOUNT_ID, REGION, SESSION, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, process_batch
from session_expiry_runtime.recovery import replay
from test_replay import FailedBatch

BUS_ARN = f"arn:aws:events:{REGION}:{DEFAULT_ACCOUNT_ID}:event-bus/adversarial"


def _failed(cleaner: SessionCleaner, records: list[dict[str, Any]]) -> list[str]:
    response = process_batch(event(*records), FakeContext(), cleaner)
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def _seq(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["SequenceNumber"])


# Guards promise 2 (a per-record exception never escapes the handler) on the fan-out path: a
# tenant attribute held as a Number, binary or set (any DynamoDB type is allowed there) went
# into the event's Detail undecoded, json.dumps raised TypeError out of process_batch, and the
# whole batch failed with no partial batch response.
def test_fan_out_survives_a_tenant_that_is_not_a_string(sandbox: Sandbox) -> None:
    events_client = SESSION.client("events")
    events_client.create_event_bus(Name="adversarial")
    tenants = {
        "s-num": {"N": "42"},
        "s-bin": {"B": b"\x00\xff"},
        "s-set": {"SS": ["b", "a"]},
        "s-str": {"S": "t-1"},
    }
    sessions = [
        sandbox.create_session(sid, extra={"tenantId": value}) for sid, value in tenants.items()
    ]
    sandbox.read_stream()
    for s in sessions:
        sandbox.delete(s.session_id)
    records = sandbox.removes()
    config = dataclasses.replace(sandbox.config, event_bus_arn=BUS_ARN)
    cleaner = sandbox.cleaner(config)
    details: list[dict[str, Any]] = []
    cleaner.clients.events.meta.events.register(
        "provide-client-params.events.PutEvents",
        lambda params, **_: details.extend(json.loads(e["Detail"]) for e in params["Entries"]),
    )

    assert _failed(cleaner, records) == []

    assert all(sandbox.is_clean(s) for s in sessions)
    by_pk = {d["sessionKey"]["pk"]: d["tenant"] for d in details}
    assert by_pk == {"s-num": 42, "s-bin": "AP8=", "s-set": ["a", "b"], "s-str": "t-1"}


# Guards the replay CLI against malformed on-failure queue messages: a message whose sequence
# numbers are not decimal digits raised ValueError (int()) and one nested too deeply for the
# JSON parser raised RecursionError, out of replay_queue, so one bad message stopped the run and
# the good messages after it were never replayed. Each must be reported "invalid" and kept.
def test_replay_queue_reports_malformed_messages_and_replays_the_rest(sandbox: Sandbox) -> None:
    failed = FailedBatch(sandbox)
    info = failed.message["DDBStreamBatchInfo"]
    bad_bodies = [
        json.dumps({"DDBStreamBatchInfo": {**info, "startSequenceNumber": "abc"}}),
        json.dumps({"DDBStreamBatchInfo": {**info, "endSequenceNumber": "1e5"}}),
        json.dumps({"DDBStreamBatchInfo": {**info, "startSequenceNumber": "-1"}}),
        "[" * 100_000,  # fits in an SQS message (256 KiB)
        json.dumps({"DDBStreamBatchInfo": info, "payload": "[" * 100_000}),
    ]
    # The good message is already first in the queue; move it behind the bad ones.
    good = failed.sqs.receive_message(QueueUrl=failed.queue_url, MaxNumberOfMessages=1)
    failed.sqs.delete_message(
        QueueUrl=failed.queue_url, ReceiptHandle=good["Messages"][0]["ReceiptHandle"]
    )
    for body in [*bad_bodies, json.dumps(failed.message)]:
        failed.sqs.send_message(QueueUrl=failed.queue_url, MessageBody=body)

    outcomes = failed.replay(sandbox.cleaner())

    statuses = sorted(o.status for o in outcomes)
    assert statuses == ["invalid"] * len(bad_bodies) + ["replayed"]
    assert all(sandbox.is_clean(s) for s in failed.sessions)
    assert failed.queued() == len(bad_bodies)  # kept for an operator
    for body in bad_bodies:
        with pytest.raises(replay.ReplayError):
            replay.parse_failure_record(body)


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"S": "leaf"}
    for _ in range(depth):
        value = {"M": {"m": value}}
    return value


# Guards decode's contract ("malformed input raises DecodeError and nothing else") and the
# failure's label: an old image nested a few hundred levels deep (DynamoDB stores at most 32;
# this one is edited into the record after it was read back) raised RecursionError, so the
# record failed as "Unexpected" instead of "Decode". DynamoDB's own 32 levels still decode.
def test_nesting_deeper_than_dynamodb_allows_is_a_decode_failure(sandbox: Sandbox) -> None:
    from session_expiry_runtime.core.decode import DecodeError, decode_image

    session = sandbox.create_session("s-deep", extra={"deep": _nested(31)})  # 32 levels
    sandbox.read_stream()
    sandbox.delete("s-deep")
    (record,) = sandbox.removes()
    deep = json.loads(json.dumps(record))
    deep["dynamodb"]["OldImage"]["deep"] = _nested(600)

    with pytest.raises(DecodeError, match="nested"):
        decode_image(deep["dynamodb"]["OldImage"])
    result = sandbox.cleaner().clean(deep)
    assert (result.outcome, result.failed_actions) == ("failed", ("Decode",))
    assert _failed(sandbox.cleaner(), [deep]) == [_seq(deep)]
    assert sandbox.is_intact(session)

    assert _failed(sandbox.cleaner(), [record]) == []
    assert sandbox.is_clean(session)


# Guards to_json_value's contract ("never raises"): a Number beyond the decimal context's
# exponent range (DynamoDB stores at most 1E+125; this one is edited into the record) made
# abs() raise decimal.Overflow while the log line was built, and the record failed as
# "Unexpected" on every retry, so the session was never cleaned.
@pytest.mark.parametrize("number", ["1E+1000000", "-1E+1000000", "1E-1000000", "9" * 200])
def test_numbers_outside_the_decimal_context_still_clean(sandbox: Sandbox, number: str) -> None:
    from session_expiry_runtime.core.decode import decode_number, to_json_value

    assert to_json_value(decode_number(number)) == str(decode_number(number))
    session = sandbox.create_session("s-huge")
    sandbox.read_stream()
    sandbox.delete("s-huge")
    (record,) = sandbox.removes()
    record["dynamodb"]["OldImage"]["expiresAt"] = {"N": number}

    assert _failed(sandbox.cleaner(), [record]) == []
    assert sandbox.is_clean(session)


@settings(max_examples=300, deadline=None)
@given(st.from_regex(r"\A-?[0-9]{1,40}(\.[0-9]{0,40})?([eE][+-]?[0-9]{1,18})?\Z", fullmatch=True))
def test_every_number_the_decoder_accepts_serialises(text: str) -> None:
    # Same guard as above, over the whole number syntax the decoder accepts.
    from session_expiry_runtime.core.decode import DecodeError, decode_number, to_json_value

    try:
        number = decode_number(text)
    except DecodeError:
        return  # beyond Python's own exponent limit: refused as malformed, never a crash
    json.dumps(to_json_value(number))


#: Hostile scratch prefixes an old image may carry (``{sid}`` is the record's own session id),
#: and whether the cleanup may accept them. Only the session's own incarnation prefix,
#: ``sessions/{sid}/<one segment>/``, is accepted (issue 11). S3 keys are not normalised, so
#: ``%2e``, U+2028, NBSP, trailing blanks are ordinary characters; refused ones name another
#: session's prefix, leave the root, are the root, lack the trailing ``/``, hold ``..``/empty
#: segments, a lookalike of ``/``, no incarnation or more than one segment after the id.
_HOSTILE_PREFIXES = {
    "sessions/{sid}/0f3a9c/": True,
    "sessions/{sid}/a.b:c@d=e+f-/": True,
    "sessions/{sid}/a\u2028/": False,
    "sessions/{sid}/%2e%2e/": False,
    "sessions/{sid}/x /": False,
    "sessions/{sid}/\u00a0/": False,
    "sessions/{sid}/x/y/": False,
    "sessions/{sid}/": False,
    "sessions/{sid}x/i/": False,
    "sessions/a\u2028/": False,
    "sessions/%2e%2e/": False,
    "sessions/x /": False,
    "sessions/\u00a0/": False,
    "sessions/\ufeff/": False,
    "sessions/a\x85/": False,
    "sessions/\u2215/": False,
    "sessions/x/%2F/": False,
    "sessions/" + "s" * 900 + "/": False,
    "sessions\uff0fx/": False,
    "sessions/../x/": False,
    "sessions/x/../": False,
    "sessions//": False,
    "sessions/": False,
    "sessions/x": False,
    " sessions/x/": False,
    "Sessions/x/": False,
}


# Guards promise 1 end to end (no regression found; kept as a guard): whatever prefix the old
# image names, only keys under an accepted prefix are deleted -- with any characters in them --
# and every neighbour (the root's own keys, look-alike prefixes, other roots) stays.
def test_hostile_scratch_prefixes_never_reach_outside_their_own_prefix(sandbox: Sandbox) -> None:
    neighbours = [
        "sessions/keep",
        "sessions/x/keep",
        "sessions/a/keep",
        "sessions/.. /keep",
        "sessions/%2e%2e-not/keep",
        "other/keep",
    ]
    sandbox.put_objects(neighbours)
    sessions = {
        template: sandbox.create_session(
            f"h{i}",
            prefix=template.replace("{sid}", f"h{i}"),
            object_names=("o\u2028 +%\x01\r.txt", "k"),
        )
        for i, template in enumerate(_HOSTILE_PREFIXES)
    }
    sandbox.read_stream()
    for s in sessions.values():
        sandbox.delete(s.session_id)

    assert _failed(sandbox.cleaner(), sandbox.removes()) == []

    left = set(sandbox.keys_under(""))
    assert set(neighbours) <= left
    for prefix, accepted in _HOSTILE_PREFIXES.items():
        mine = set(sessions[prefix].keys)
        assert (mine & left) == (set() if accepted else mine), prefix


# Guards promise 2/6 against a poison record: an ApproximateCreationDateTime that is not epoch
# seconds (beyond year 5138, negative, or beyond the decimal context) made the TTL-lag
# subtraction raise decimal.Overflow or the archive's date partition raise ValueError, so the
# record failed on every retry and the session was never cleaned. It is now "unknown": the
# archive key says date=_unknown and no lag is computed.
@pytest.mark.parametrize("created", ["1E+1000000", 1e20, -1e15, "99999999999999"])
def test_implausible_creation_time_is_unknown_not_a_poison_record(
    sandbox: Sandbox, created: Any
) -> None:
    sandbox.s3.create_bucket(Bucket="archive-bucket")
    session = sandbox.create_session("s-when", expires_at=1_700_000_000)
    sandbox.read_stream()
    sandbox.delete("s-when")
    (record,) = sandbox.removes(ttl_deletes={"s-when"})
    record["dynamodb"]["ApproximateCreationDateTime"] = created
    config = dataclasses.replace(sandbox.config, archive_bucket="archive-bucket")
    cleaner = sandbox.cleaner(config)

    result = cleaner.clean(record)

    assert (result.outcome, result.reason, result.lag_seconds) == ("cleaned", "ttl", None)
    assert "/date=_unknown/" in "/" + result.log["archiveKey"]
    assert sandbox.is_clean(session)
