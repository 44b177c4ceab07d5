"""Response timestamps through the standard library (``session_expiry_runtime.core.timestamps``).

The cleanup's clients come from a botocore session whose timestamp parser is
:func:`~session_expiry_runtime.core.timestamps.parse_timestamp` (botocore's documented parser
setting). It must give exactly what botocore's own parser gives, and the cleanup must still
list and delete everything through it: moto answers here, real boto3 parses.
"""

from __future__ import annotations

import datetime as dt

import pytest
from botocore.utils import parse_timestamp as botocore_parse_timestamp
from runtime_support import BUCKET, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import build_clients
from session_expiry_runtime.core.timestamps import parse_timestamp
from session_expiry_runtime.handler import handler

VALUES = [
    "2026-11-30T12:00:00.000Z",  # S3's LastModified
    "2026-11-30T12:00:00Z",
    "2026-11-30T12:00:00.123456Z",
    "2026-11-30T12:00:00.123456789Z",  # more digits than fromisoformat keeps before 3.11
    "2026-11-30T14:00:00+02:00",
    "2026-11-30t12:00:00z",
    "Wed, 12 Oct 2009 17:50:00 GMT",  # RFC 822: HTTP headers (Last-Modified, Expires)
    1_764_504_000,  # epoch seconds: JSON protocols (KMS CreationDate, ...)
    1_764_504_000.25,
    "1764504000",
    "2026-11-30T12:00:00",  # no time zone: botocore's answer, whatever it is
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_parse_timestamp_equals_botocores_parser(value: object) -> None:
    ours, theirs = parse_timestamp(value), botocore_parse_timestamp(value)
    assert ours == theirs
    assert ours.utcoffset() == theirs.utcoffset()


def test_iso_text_with_a_time_zone_takes_the_standard_library() -> None:
    # dateutil answers with its own tzutc(); fromisoformat with datetime.timezone.utc.
    parsed = parse_timestamp("2026-11-30T12:00:00.000Z")
    assert parsed.tzinfo is dt.timezone.utc
    assert parsed == dt.datetime(2026, 11, 30, 12, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("value", ["not a timestamp", "2026-13-45T99:00:00Z", ""])
def test_fails_on_text_botocores_parser_cannot_read_either(value: str) -> None:
    with pytest.raises(ValueError):
        botocore_parse_timestamp(value)
    with pytest.raises(ValueError):
        parse_timestamp(value)


def test_cleanup_clients_parse_s3_timestamps_with_the_standard_library(sandbox: Sandbox) -> None:
    sandbox.put_objects(["sessions/t/a.txt"])
    s3 = build_clients(sandbox.config).s3  # no session given: the cleanup's own

    # ListBuckets' CreationDate is ISO 8601 text in the XML (listed objects are parsed for
    # their keys only: test_listing_model).
    (listed,) = [b for b in s3.list_buckets()["Buckets"] if b["Name"] == BUCKET]
    (reference,) = [b for b in sandbox.s3.list_buckets()["Buckets"] if b["Name"] == BUCKET]
    head = s3.head_object(Bucket=BUCKET, Key="sessions/t/a.txt")  # header: RFC 822
    reference_head = sandbox.s3.head_object(Bucket=BUCKET, Key="sessions/t/a.txt")

    assert listed["CreationDate"].tzinfo is dt.timezone.utc  # the setting is in effect
    assert listed["CreationDate"] == reference["CreationDate"]
    assert head["LastModified"] == reference_head["LastModified"]


def test_handler_cleans_a_session_of_2500_objects_through_the_parser_setting(
    sandbox: Sandbox, fresh_handler: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    names = (*(f"o-{i:04d}" for i in range(2_497)), "a b", "c+d%", "é\u2028")
    gone = sandbox.create_session("s-1", prefix="sessions/s-1/i1/", object_names=names)
    kept = sandbox.create_session("s-10", prefix="sessions/s-10/i1/", object_names=("a", "b"))
    sandbox.read_stream()
    sandbox.delete("s-1")

    response = handler(event(*sandbox.lambda_records()), FakeContext())

    assert response == {"batchItemFailures": []}
    assert sandbox.is_clean(gone)
    assert sandbox.is_intact(kept)
