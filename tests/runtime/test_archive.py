"""Archive of cleaned sessions (issue 6): keys, content, encryption, ordering, metrics.

Against moto with real boto3 calls and real stream records; the one stub (an AccessDenied
PutObject) is behaviour moto never produces by itself.
"""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal
from typing import Any

import pytest
from runtime_faults import answer, s3_error
from runtime_support import SESSION, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, process_batch
from session_expiry_runtime.core.config import RuntimeConfig, validate_cleanup_config
from session_expiry_runtime.core.decode import decode_image, parse_record, to_json_value
from session_expiry_runtime.sinks import archive

ARCHIVE_BUCKET = "archive-bucket"
#: 2023-11-14T22:13:20Z
REMOVED_AT = Decimal(1_700_000_000)


def _config(**changes: Any) -> RuntimeConfig:
    return RuntimeConfig(archive_bucket=ARCHIVE_BUCKET, **changes)


def _key(config: RuntimeConfig, keys: dict[str, Any], tenant: object = None) -> str:
    return archive.archive_key(
        config,
        keys=keys,
        tenant=tenant,
        sequence_number="1100000000017454423010",
        approximate_creation_time=REMOVED_AT,
    )


# --- pure: the key layout ---------------------------------------------------------------------
def test_key_is_partitioned_by_day_and_tenant() -> None:
    assert _key(_config(), {"pk": "s-1"}, "t-1") == (
        "archive/date=2023-11-14/tenant=t-1/s-1/1100000000017454423010.json"
    )
    assert _key(_config(), {"pk": "s-1"}) == (
        "archive/date=2023-11-14/tenant=_none/s-1/1100000000017454423010.json"
    )


def test_key_lists_partition_then_sort_key_and_uses_the_prefix() -> None:
    config = _config(partition_key="id", sort_key="sk", archive_prefix="app/archive/")
    assert _key(config, {"sk": "v1", "id": Decimal(7)}) == (
        "app/archive/date=2023-11-14/tenant=_none/7,v1/1100000000017454423010.json"
    )


@pytest.mark.parametrize(
    ("tenant", "segment"),
    [
        ("a/b", "a%2Fb"),  # cannot fake a level
        ("..", "%2E%2E"),
        (".", "%2E"),
        ("_none", "%5Fnone"),  # a real tenant never collides with "no tenant"
        ("t=1,2", "t%3D1%2C2"),
        ("ü x\n", "%C3%BC%20x%0A"),
        ("", "_empty"),
    ],
)
def test_key_parts_are_sanitised(tenant: str, segment: str) -> None:
    key = _key(_config(), {"pk": tenant}, tenant)
    assert key == (
        f"archive/date=2023-11-14/tenant={segment}/{segment}/1100000000017454423010.json"
    )


def test_long_key_values_are_cut_and_hashed_deterministically() -> None:
    long_a, long_b = "x" * 2048, "x" * 2047 + "y"
    key_a, key_b = _key(_config(), {"pk": long_a}), _key(_config(), {"pk": long_b})
    assert key_a != key_b
    assert key_a == _key(_config(), {"pk": long_a})
    assert max(len(part) for part in key_a.split("/")) <= archive.MAX_SEGMENT_CHARACTERS
    assert len(key_a.encode()) < 1024


def test_record_without_creation_time_goes_under_an_unknown_day() -> None:
    key = archive.archive_key(
        _config(),
        keys={"pk": "s"},
        tenant=None,
        sequence_number="1",
        approximate_creation_time=None,
    )
    assert key.startswith("archive/date=_unknown/")


@pytest.mark.parametrize("prefix", ["", "/archive/", "archive", "arch*/", "a//b/"])
def test_fails_on_an_invalid_archive_prefix(prefix: str) -> None:
    with pytest.raises(ValueError, match="SESSION_EXPIRY_ARCHIVE_PREFIX"):
        validate_cleanup_config(_config(archive_prefix=prefix))


def test_archive_settings_come_from_the_environment() -> None:
    config = RuntimeConfig.from_env(
        {
            "SESSION_EXPIRY_ARCHIVE_BUCKET": "b",
            "SESSION_EXPIRY_ARCHIVE_PREFIX": "x/",
            "SESSION_EXPIRY_ARCHIVE_KMS_KEY_ARN": "arn:aws:kms:us-east-1:1:key/k",
        }
    )
    assert (config.archive_bucket, config.archive_prefix, config.archive_kms_key_arn) == (
        "b",
        "x/",
        "arn:aws:kms:us-east-1:1:key/k",
    )
    assert RuntimeConfig.from_env({}).archive_bucket is None


# --- against moto -----------------------------------------------------------------------------
class Archive:
    def __init__(self, sandbox: Sandbox, *, kms: bool = False) -> None:
        self.sandbox = sandbox
        sandbox.s3.create_bucket(Bucket=ARCHIVE_BUCKET)
        self.key_arn = (
            sandbox.kms.create_key(Description="archive")["KeyMetadata"]["Arn"] if kms else None
        )
        self.config = dataclasses.replace(
            sandbox.config, archive_bucket=ARCHIVE_BUCKET, archive_kms_key_arn=self.key_arn
        )

    def cleaner(self) -> SessionCleaner:
        return self.sandbox.cleaner(self.config)

    def objects(self) -> dict[str, dict[str, Any]]:
        s3 = self.sandbox.s3
        keys = [
            o["Key"]
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=ARCHIVE_BUCKET)
            for o in page.get("Contents", [])
        ]
        return {
            k: json.loads(s3.get_object(Bucket=ARCHIVE_BUCKET, Key=k)["Body"].read()) for k in keys
        }

    def raw(self) -> dict[str, bytes]:
        s3 = self.sandbox.s3
        return {
            o["Key"]: s3.get_object(Bucket=ARCHIVE_BUCKET, Key=o["Key"])["Body"].read()
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=ARCHIVE_BUCKET)
            for o in page.get("Contents", [])
        }


@pytest.fixture
def store(sandbox: Sandbox) -> Archive:
    return Archive(sandbox)


def _run(cleaner: SessionCleaner, records: list[dict[str, Any]]) -> list[str]:
    response = process_batch(event(*records), FakeContext(), cleaner)
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def _metrics(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]


def test_every_dynamodb_type_round_trips_through_the_archive(
    sandbox: Sandbox, store: Archive
) -> None:
    big = "12345678901234567890123456789012345678"  # 38 significant digits
    session = sandbox.create_session(
        "s-types",
        tenant="tenant/1",
        expires_at=1_700_000_000,
        extra={
            "blob": {"B": b"\x00\xffbinary"},
            "names": {"SS": ["zeta", "alpha"]},
            "numbers": {"NS": ["10", "-2.5", big]},
            "blobs": {"BS": [b"\x02", b"\x01"]},
            "nothing": {"NULL": True},
            "flag": {"BOOL": False},
            "tiny": {"N": "1E-130"},
            "big": {"N": big},
            "nested": {"M": {"list": {"L": [{"N": "0.1"}, {"B": b"x"}, {"M": {}}]}}},
        },
    )
    sandbox.read_stream()
    sandbox.delete("s-types")
    (record,) = sandbox.removes(ttl_deletes={"s-types"})

    assert _run(store.cleaner(), [record]) == []

    assert sandbox.is_clean(session)
    ((key, body),) = store.objects().items()
    removed_at = parse_record(record).approximate_creation_time
    assert removed_at is not None
    assert key == archive.archive_key(
        store.config,
        keys={"pk": "s-types"},
        tenant="tenant/1",
        sequence_number=record["dynamodb"]["SequenceNumber"],
        approximate_creation_time=removed_at,
    )
    assert "/tenant=tenant%2F1/s-types/" in key
    # Lossless: the typed image decodes to exactly the removed item.
    expected = decode_image(json.loads(body["dynamodb_old_image"]))
    assert expected == decode_image(record["dynamodb"]["OldImage"])
    old_image = json.loads(body["old_image"])
    assert old_image == to_json_value(expected)
    assert old_image["big"] == big  # beyond 2**53: exact text, never a float
    assert old_image["names"] == ["alpha", "zeta"]
    assert old_image["blobs"] == ["AQ==", "Ag=="]
    assert old_image["blob"] == "AP9iaW5hcnk="
    assert old_image["tiny"] == "1E-130"
    assert json.loads(body["session_key"]) == {"pk": "s-types"}
    assert body == {
        "format_version": 2,
        "session_id": "s-types",
        "session_partition": None,
        "session_key": '{"pk":"s-types"}',
        "incarnation": session.incarnation,
        "tenant": "tenant/1",
        "reason": "ttl",
        "removed_at": int(removed_at),
        "expires_at": 1_700_000_000,
        "ttl_lag_seconds": float(int(removed_at) - 1_700_000_000),
        "sequence_number": record["dynamodb"]["SequenceNumber"],
        "event_id": record["eventID"],
        "partition_date": key.split("/")[1].removeprefix("date="),
        "partition_tenant": "tenant%2F1",
        "old_image": body["old_image"],
        "dynamodb_old_image": body["dynamodb_old_image"],
    }
    # Every value is a JSON scalar: a column of the Glue table, under any JSON SerDe.
    assert all(v is None or isinstance(v, (str, int, float)) for v in body.values())
    # One line, ending in a newline: JSON lines, as Athena's SerDes read them.
    (raw,) = store.raw().values()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1


def test_a_retry_overwrites_the_same_key(sandbox: Sandbox, store: Archive) -> None:
    sandbox.create_session("s-retry")
    sandbox.read_stream()
    sandbox.delete("s-retry")
    (record,) = sandbox.removes()
    cleaner = store.cleaner()

    assert _run(cleaner, [record]) == []
    first = store.objects()
    assert _run(cleaner, [record]) == []  # redelivered: at-least-once delivery

    assert store.objects() == first
    assert len(first) == 1


def test_archive_is_written_with_the_buckets_kms_key(sandbox: Sandbox) -> None:
    store = Archive(sandbox, kms=True)
    sandbox.create_session("s-kms")
    sandbox.read_stream()
    sandbox.delete("s-kms")

    assert _run(store.cleaner(), sandbox.removes()) == []

    (key,) = store.objects()
    head = sandbox.s3.head_object(Bucket=ARCHIVE_BUCKET, Key=key)
    assert head["ServerSideEncryption"] == "aws:kms"
    assert head["SSEKMSKeyId"] == store.key_arn
    assert head["ContentType"] == "application/x-ndjson"


def test_without_a_key_the_buckets_default_encryption_applies(
    sandbox: Sandbox, store: Archive
) -> None:
    cleaner = store.cleaner()
    sent: list[dict[str, Any]] = []
    cleaner.clients.archive.meta.events.register(
        "provide-client-params.s3.PutObject", lambda params, **_: sent.append(dict(params))
    )
    sandbox.create_session("s-sse")
    sandbox.read_stream()
    sandbox.delete("s-sse")

    assert _run(cleaner, sandbox.removes()) == []

    (params,) = sent
    assert "ServerSideEncryption" not in params and "SSEKMSKeyId" not in params


def test_fails_the_record_and_touches_nothing_when_the_archive_write_fails(
    sandbox: Sandbox,
    store: Archive,
    capsys: pytest.CaptureFixture[str],
    session_logs: pytest.LogCaptureFixture,
) -> None:
    session = sandbox.create_session("s-denied")
    sandbox.read_stream()
    sandbox.delete("s-denied")
    (record,) = sandbox.removes()
    cleaner = store.cleaner()
    # Stub: moto accepts every PutObject; AWS answers 403 when the role or key policy denies it.
    denied = answer(cleaner.clients.archive, "PutObject", lambda _: s3_error(403, "AccessDenied"))
    capsys.readouterr()

    assert _run(cleaner, [record]) == [record["dynamodb"]["SequenceNumber"]]

    assert len(denied) == 1
    assert sandbox.is_intact(session)  # connection, grant and scratch untouched
    assert store.objects() == {}
    (line,) = [r.session for r in session_logs.records if hasattr(r, "session")]
    assert line["outcome"] == "failed"
    assert line["failedActions"] == ["Archive"]
    assert line["steps"] == {"Archive": "failed"}
    assert line["errors"]["Archive"].startswith("AccessDenied")
    docs = _metrics(capsys)
    assert any(d.get("Action") == "Archive" and d["CleanupFailures"] == 1 for d in docs)
    assert not any("SessionsArchived" in d or "SessionsCleaned" in d for d in docs)

    # The next delivery (a fresh cleaner: the write is allowed again) archives and cleans.
    fresh = store.cleaner()
    assert _run(fresh, [record]) == []
    assert sandbox.is_clean(session)
    assert len(store.objects()) == 1


def test_one_put_object_per_session_and_sessions_archived_is_counted(
    sandbox: Sandbox, store: Archive, capsys: pytest.CaptureFixture[str]
) -> None:
    cleaner = store.cleaner()
    calls: list[str] = []
    cleaner.clients.archive.meta.events.register(
        "before-call.s3", lambda model, **_: calls.append(model.name)
    )
    for i in range(5):
        sandbox.create_session(f"s-{i}")
    sandbox.read_stream()
    for i in range(5):
        sandbox.delete(f"s-{i}")
    capsys.readouterr()

    assert _run(cleaner, sandbox.removes()) == []

    assert calls == ["PutObject"] * 5  # the archive adds exactly one call per session
    docs = _metrics(capsys)
    assert sum(d.get("SessionsArchived", 0) for d in docs) == 5
    assert len(store.objects()) == 5


def test_archive_alone_counts_as_a_cleanup(sandbox: Sandbox) -> None:
    sandbox.s3.create_bucket(Bucket=ARCHIVE_BUCKET)
    config = RuntimeConfig(table_name="sessions", archive_bucket=ARCHIVE_BUCKET)
    sandbox.create_session("s-only")
    sandbox.read_stream()
    sandbox.delete("s-only")
    from session_expiry_runtime.cleanup.cleaner import build_clients
    from session_expiry_runtime.core.metrics import MetricsRecorder

    cleaner = SessionCleaner(config, build_clients(config, SESSION), MetricsRecorder("t"))
    (record,) = sandbox.removes()

    result = cleaner.clean(record)

    assert result.outcome == "cleaned" and result.archived
    assert result.log["steps"] == {"Archive": "done"}


def test_the_claim_token_is_never_archived() -> None:
    """The claim token is a live session's secret to the claim registrar (issue 35): the
    archive, which readers of the bucket query, keeps neither image's copy of it."""
    raw = {
        "eventID": "e-1",
        "eventName": "REMOVE",
        "dynamodb": {
            "Keys": {"pk": {"S": "s-1"}},
            "OldImage": {
                "pk": {"S": "s-1"},
                "incarnation": {"S": "a" * 32},
                "claimToken": {"S": "secret-token"},
            },
            "SequenceNumber": "100",
            "ApproximateCreationDateTime": 1_700_000_000,
        },
    }
    record = parse_record(raw)
    document = archive.archive_document(
        RuntimeConfig(table_name="t", partition_key="pk", archive_bucket="b"),
        record,
        keys={"pk": "s-1"},
        image=decode_image(raw["dynamodb"]["OldImage"]),
        reason="explicit",
        lag_seconds=None,
    )

    assert "secret-token" not in json.dumps(document)
    assert json.loads(document["old_image"]) == {"pk": "s-1", "incarnation": "a" * 32}
