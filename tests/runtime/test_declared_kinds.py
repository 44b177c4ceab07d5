"""Every declared resource kind with a ``resource_targets`` key (``session_expiry_runtime/
kinds.py``), through the real batch handler (``process_batch``) against moto and the emulator's
release calls (``cdk_session_expiry/testing/models/_moto_resource_kinds.py``: moto lacks them).

The same five behaviours for each kind, from its declaration alone: released once (a second
delivery makes no call), "already gone" is done, another session's id is refused (``NotOwned``,
no call), an id a later incarnation took over is left alone (``Superseded``), and a failed
release fails only its own record. A new kind adds its sample here (`SAMPLES`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runtime_support import TABLE, FakeContext, Sandbox, event
from session_expiry_runtime.cleanup.cleaner import SessionCleaner, process_batch
from session_expiry_runtime.core.kinds import DECLARED_KINDS, ResourceKind
from session_expiry_runtime.store import ResourceOwnedError, SessionStore

from cdk_session_expiry.testing.models import _moto_resource_kinds as releases

#: Per targeted kind: (target as the API takes it, an id, another id), each of the API's form.
SAMPLES: dict[str, tuple[str, str, str]] = {
    "capacityProviderSession": ("agents_cp-a1B2c3D4e5", "cp-session-1", "cp-session-2"),
    "paymentSession": (
        "arn:aws:bedrock-agentcore:us-east-1:123456789012:payment-manager/shop-a1b2c3d4e5",
        "payment-session-0123456789abcde",
        "payment-session-fedcba987654321",
    ),
}

#: Targeted kinds of a service `_moto_resource_kinds` does not answer, each with a suite of its
#: own that runs the same behaviours against its own emulation.
OWN_SUITES = {"bedrockSession": "test_bedrock_sessions.py"}
TARGETED = [
    kind for kind in DECLARED_KINDS if kind.target is not None and kind.kind not in OWN_SUITES
]


def test_every_targeted_kind_has_a_sample_or_a_suite_of_its_own() -> None:
    assert sorted(SAMPLES) == sorted(kind.kind for kind in TARGETED)
    own = sorted(kind.kind for kind in DECLARED_KINDS if kind.kind in OWN_SUITES)
    assert own == sorted(OWN_SUITES)
    for suite in OWN_SUITES.values():
        assert (Path(__file__).parent / suite).is_file()


@pytest.fixture
def released(aws: None) -> Iterator[None]:
    releases.install()
    releases.reset()
    yield
    releases.reset()
    releases.uninstall()


@pytest.fixture(params=TARGETED, ids=lambda kind: kind.kind)
def kind(request: pytest.FixtureRequest, released: None) -> ResourceKind:
    declared: ResourceKind = request.param
    return declared


def _cleaner(sandbox: Sandbox, kind: ResourceKind) -> SessionCleaner:
    target = SAMPLES[kind.kind][0]
    return sandbox.cleaner(dataclasses.replace(sandbox.config, kind_targets=((kind.kind, target),)))


def _store(sandbox: Sandbox, kind: ResourceKind) -> SessionStore:
    target = SAMPLES[kind.kind][0]
    config = dataclasses.replace(sandbox.config, kind_targets=((kind.kind, target),))
    return SessionStore(config=config, dynamodb_client=sandbox.ddb)


def _removed(sandbox: Sandbox, *session_ids: str) -> list[dict[str, Any]]:
    sandbox.read_stream()
    for session_id in session_ids:
        sandbox.delete(session_id)
    return sandbox.removes()


def _failed(cleaner: SessionCleaner, records: list[dict[str, Any]]) -> list[str]:
    response = process_batch(event(*records), FakeContext(), cleaner)
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


def _lines(logs: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.session for r in logs.records if hasattr(r, "session")]


def test_released_once_then_a_redelivery_makes_no_call(
    sandbox: Sandbox, kind: ResourceKind, session_logs: pytest.LogCaptureFixture
) -> None:
    target, resource_id, _ = SAMPLES[kind.kind]
    store = _store(sandbox, kind)
    store.create("s-once")
    session = store.attach_resource("s-once", kind.kind, resource_id)
    assert session.attributes[kind.ids.attribute] == {resource_id}
    releases.hold(kind.kind, target, resource_id)
    records = _removed(sandbox, "s-once")
    cleaner = _cleaner(sandbox, kind)

    assert _failed(cleaner, records) == []
    assert _failed(cleaner, records) == []  # the claim is released: no second call

    assert releases.held(kind.kind) == set()
    assert releases.calls() == [releases.ReleaseCall(kind.kind, target, resource_id, True)]
    first, second = _lines(session_logs)
    assert first["steps"][kind.action] == "done"
    assert first[kind.ids.attribute] == [resource_id]
    assert second["steps"][kind.action] == "already-done"


def test_already_gone_is_done(
    sandbox: Sandbox, kind: ResourceKind, session_logs: pytest.LogCaptureFixture
) -> None:
    _, resource_id, _ = SAMPLES[kind.kind]
    store = _store(sandbox, kind)
    store.create("s-gone")
    store.attach_resource("s-gone", kind.kind, resource_id)  # never held: already gone

    assert _failed(_cleaner(sandbox, kind), _removed(sandbox, "s-gone")) == []

    assert [c.released for c in releases.calls()] == [False]
    (line,) = _lines(session_logs)
    assert line["steps"][kind.action] == "already-done"


def test_another_sessions_id_is_refused_and_never_sent(
    sandbox: Sandbox, kind: ResourceKind, session_logs: pytest.LogCaptureFixture
) -> None:
    target, resource_id, _ = SAMPLES[kind.kind]
    store = _store(sandbox, kind)
    store.create("s-owner")
    store.attach_resource("s-owner", kind.kind, resource_id)
    releases.hold(kind.kind, target, resource_id)
    store.create("s-forger")
    with pytest.raises(ResourceOwnedError):
        store.attach_resource("s-forger", kind.kind, resource_id)
    # A writer bypassing the store names the owner's id on its own item.
    sandbox.ddb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "s-forger"}},
        UpdateExpression="ADD #ids :id",
        ExpressionAttributeNames={"#ids": kind.ids.attribute},
        ExpressionAttributeValues={":id": {"SS": [resource_id]}},
    )

    assert _failed(_cleaner(sandbox, kind), _removed(sandbox, "s-forger")) == []

    assert releases.calls() == []
    assert releases.held(kind.kind) == {(target, resource_id)}
    (line,) = _lines(session_logs)
    assert line["ownership"][kind.action] == {resource_id: "NotOwned"}


def test_reuse_after_expiry_leaves_the_successors_resource(
    sandbox: Sandbox, kind: ResourceKind, session_logs: pytest.LogCaptureFixture
) -> None:
    target, resource_id, _ = SAMPLES[kind.kind]
    store = _store(sandbox, kind)
    store.create("s-reused")
    store.attach_resource("s-reused", kind.kind, resource_id)
    (old_remove,) = _removed(sandbox, "s-reused")  # its cleanup has not run yet
    store.create("s-reused")  # a new incarnation of the same key takes the id over
    store.attach_resource("s-reused", kind.kind, resource_id)
    releases.hold(kind.kind, target, resource_id)

    assert _failed(_cleaner(sandbox, kind), [old_remove]) == []

    assert releases.calls() == []
    assert releases.held(kind.kind) == {(target, resource_id)}
    (line,) = _lines(session_logs)
    assert line["ownership"][kind.action] == {resource_id: "Superseded"}


def test_a_failed_release_fails_only_its_record(
    sandbox: Sandbox, kind: ResourceKind, session_logs: pytest.LogCaptureFixture
) -> None:
    target, denied_id, released_id = SAMPLES[kind.kind]
    store = _store(sandbox, kind)
    for session_id, resource_id in (("s-denied", denied_id), ("s-fine", released_id)):
        store.create(session_id)
        store.attach_resource(session_id, kind.kind, resource_id)
        releases.hold(kind.kind, target, resource_id)
    releases.deny(kind.kind, target, denied_id)
    denied, fine = _removed(sandbox, "s-denied", "s-fine")

    failed = _failed(_cleaner(sandbox, kind), [denied, fine])

    assert failed == [denied["dynamodb"]["SequenceNumber"]]
    assert releases.held(kind.kind) == {(target, denied_id)}
    lines = {line["sequenceNumber"]: line for line in _lines(session_logs)}
    denied_line = lines[denied["dynamodb"]["SequenceNumber"]]
    assert denied_line["steps"][kind.action] == "failed"
    assert "AccessDeniedException" in str(denied_line["errors"])
    assert lines[fine["dynamodb"]["SequenceNumber"]]["steps"][kind.action] == "done"


def test_fails_attach_resource_of_an_id_the_api_would_refuse(
    sandbox: Sandbox, kind: ResourceKind
) -> None:
    store = _store(sandbox, kind)
    store.create("s-bad")
    bad = "x" * (kind.ids.lengths[1] + 1)
    expected = re.escape(kind.ids.expected)
    with pytest.raises(ValueError, match=f"{kind.label} id .*: expected {expected}"):
        store.attach_resource("s-bad", kind.kind, bad)


def test_fails_attach_resource_of_a_kind_whose_target_is_not_configured(
    sandbox: Sandbox, kind: ResourceKind
) -> None:
    store = SessionStore(config=sandbox.config, dynamodb_client=sandbox.ddb)
    store.create("s-off")
    assert kind.target is not None
    with pytest.raises(ValueError, match=f"its target is not configured .*{kind.target.env}"):
        store.attach_resource("s-off", kind.kind, SAMPLES[kind.kind][1])
