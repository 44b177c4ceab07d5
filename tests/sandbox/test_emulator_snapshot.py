"""An emulator snapshot restores what moto held when it was taken, any number of times, and
nothing written after it (real requests against the emulator; no CDK deploy)."""

from __future__ import annotations

import threading

import pytest

from cdk_session_expiry.testing import EmulatorSnapshot, LocalEmulator, SnapshotError
from cdk_session_expiry.testing.models import _moto_internals


def _table(emulator: LocalEmulator, name: str) -> None:
    emulator.client("dynamodb").create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )


def _state(emulator: LocalEmulator) -> dict[str, object]:
    ddb, s3, sqs = (emulator.client(n) for n in ("dynamodb", "s3", "sqs"))
    url = sqs.get_queue_url(QueueName="snap-queue")["QueueUrl"]
    return {
        "items": ddb.scan(TableName="snap-table")["Items"],
        "object": s3.get_object(Bucket="snap-bucket", Key="k")["Body"].read(),
        "buckets": [b["Name"] for b in s3.list_buckets()["Buckets"]],
        "messages": sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]["ApproximateNumberOfMessages"],
        "connections": emulator.open_connection_ids(),
    }


def test_restore_brings_back_the_state_of_the_snapshot_each_time(emulator: LocalEmulator) -> None:
    _table(emulator, "snap-table")
    emulator.client("dynamodb").put_item(TableName="snap-table", Item={"pk": {"S": "a"}})
    emulator.client("s3").create_bucket(Bucket="snap-bucket")
    emulator.client("s3").put_object(Bucket="snap-bucket", Key="k", Body=b"before")
    url = emulator.client("sqs").create_queue(QueueName="snap-queue")["QueueUrl"]
    emulator.client("sqs").send_message(QueueUrl=url, MessageBody="m")
    emulator.open_connection("conn-snap")
    before = _state(emulator)
    snapshot = EmulatorSnapshot.take(emulator)

    for _ in range(2):  # a snapshot survives the resets of its restores
        emulator.client("dynamodb").put_item(TableName="snap-table", Item={"pk": {"S": "b"}})
        emulator.client("s3").put_object(Bucket="snap-bucket", Key="k", Body=b"after")
        emulator.client("s3").create_bucket(Bucket="snap-later")
        emulator.client("sqs").send_message(QueueUrl=url, MessageBody="n")
        emulator.open_connection("conn-later")
        snapshot.restore(emulator)
        assert _state(emulator) == before
    # The restored queue and table work (their locks are new, not the originals').
    emulator.client("sqs").send_message(QueueUrl=url, MessageBody="o")
    emulator.client("s3").create_bucket(Bucket="snap-later")  # its name is free again


def test_restore_clears_faults(emulator: LocalEmulator) -> None:
    from cdk_session_expiry.testing import Fault

    snapshot = EmulatorSnapshot.take(emulator)
    emulator.inject_fault(Fault.delete_connection("c-1"))
    snapshot.restore(emulator)
    assert emulator.faults == []


def test_fails_when_the_emulator_is_not_running() -> None:
    with pytest.raises(RuntimeError, match="not running"):
        EmulatorSnapshot.take(LocalEmulator())


def test_fails_naming_what_cannot_be_copied(emulator: LocalEmulator) -> None:
    from moto.s3.models import s3_backends

    emulator.client("s3").create_bucket(Bucket="snap-uncopyable")
    backend = s3_backends[emulator.account_id]["aws"]
    backend.uncopyable = (i for i in range(1))  # a generator: deepcopy cannot copy it
    try:
        with pytest.raises(SnapshotError, match=r"generator.*deploys the app again"):
            EmulatorSnapshot.take(emulator)
    finally:
        del backend.uncopyable


def test_copies_conditions_and_events_as_new_ones() -> None:
    event = threading.Event()
    event.set()
    condition = threading.Condition()
    copied_event, copied_condition = _moto_internals._copy((event, condition))
    assert copied_event.is_set() and copied_event is not event
    with copied_condition:
        copied_condition.notify_all()  # bound to its own lock, not the original's
