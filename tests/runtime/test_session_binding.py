"""Issue 11 through the real handler entry point against moto: the cleanup deletes only the
session's own incarnation prefix (derived from the record's Keys), and closes every connection
the session recorded (the String Set and the single-id attribute of older items)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from ownership_support import OWNERSHIP_TABLE, adopt
from runtime_support import ENDPOINT, SESSION, TABLE, FakeContext, Sandbox, event
from session_expiry_runtime.core.config import RuntimeConfig
from session_expiry_runtime.core.ownership import KIND_CONNECTION
from session_expiry_runtime.handler import handler
from session_expiry_runtime.store import SessionStore


def _use_env(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, **extra: str) -> None:
    for name, value in {**sandbox.env(), **extra}.items():
        monkeypatch.setenv(name, value)


def _emf(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]


def _lines(logs: pytest.LogCaptureFixture) -> dict[str, dict[str, Any]]:
    lines = [r.session for r in logs.records if hasattr(r, "session")]
    return {line["keys"]["pk"]: line for line in lines}


NEIGHBOUR = "sessions/s-10/0a1b2c/"
OWN_OTHER_INCARNATION = "sessions/s-1/live-incarnation/"


@pytest.mark.parametrize(
    ("session_id", "named_prefix", "victim_prefix"),
    [
        ("s-1", NEIGHBOUR, NEIGHBOUR),  # a neighbour's prefix: s-10 starts with s-1
        ("s-1", "sessions/s-1/", OWN_OTHER_INCARNATION),  # no incarnation: every one of s-1
        ("s-1", "sessions/s-2/abc/", "sessions/s-2/abc/"),  # another session outright
    ],
    ids=["neighbour", "no-incarnation", "other-session"],
)
def test_an_image_naming_another_prefix_is_refused_metered_and_deletes_nothing(
    sandbox: Sandbox,
    fresh_handler: None,
    monkeypatch: pytest.MonkeyPatch,
    session_logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    session_id: str,
    named_prefix: str,
    victim_prefix: str,
) -> None:
    _use_env(sandbox, monkeypatch)
    victims = [victim_prefix + name for name in ("a", "b c", "keep")]
    sandbox.put_objects(victims)
    hostile = sandbox.create_session(session_id, prefix=named_prefix, object_names=())
    sandbox.read_stream()
    sandbox.delete(session_id)
    (record,) = sandbox.removes()

    assert handler(event(record), FakeContext()) == {"batchItemFailures": []}

    assert sorted(sandbox.keys_under(victim_prefix)) == sorted(victims)
    line = _lines(session_logs)[session_id]
    assert line["steps"]["DeleteScratch"] == "refused"
    assert "not the session's own prefix" in line["refusal"]
    # The connection and grant of the session itself are still released.
    assert not sandbox.connection_exists(hostile.connection_id)
    assert hostile.grant_id not in sandbox.grant_ids()
    refused = [d for d in _emf(capsys) if "ScratchPrefixesRefused" in d]
    assert [d["ScratchPrefixesRefused"] for d in refused] == [1]


def test_another_tenants_prefix_is_refused(
    aws: None,
    fresh_handler: None,
    monkeypatch: pytest.MonkeyPatch,
    session_logs: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sandbox = Sandbox(tenant_scoped=True)
    _use_env(sandbox, monkeypatch)
    victims = ["sessions/t1/s-2/abc/a", "sessions/t1/s-2/abc/b"]
    sandbox.put_objects(victims)
    sandbox.create_session("s-1", tenant="t1", prefix="sessions/t1/s-2/abc/", object_names=())
    sandbox.read_stream()
    sandbox.delete("s-1")
    (record,) = sandbox.removes()

    assert handler(event(record), FakeContext()) == {"batchItemFailures": []}

    assert sorted(sandbox.keys_under("sessions/t1/")) == victims
    assert _lines(session_logs)["s-1"]["steps"]["DeleteScratch"] == "refused"
    assert [d["ScratchPrefixesRefused"] for d in _emf(capsys) if "ScratchPrefixesRefused" in d] == [
        1
    ]


def test_the_sessions_own_incarnation_prefix_is_deleted_and_its_neighbours_kept(
    sandbox: Sandbox, fresh_handler: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use_env(sandbox, monkeypatch)
    neighbours = ["sessions/s-10/x/keep", "sessions/s-1/other-incarnation/keep", "sessions/s-1x"]
    sandbox.put_objects(neighbours)
    own = sandbox.create_session("s-1", prefix="sessions/s-1/0f3a/", object_names=("a", "b c"))
    sandbox.read_stream()
    sandbox.delete("s-1")
    (record,) = sandbox.removes()

    assert handler(event(record), FakeContext()) == {"batchItemFailures": []}

    assert sandbox.keys_under(own.prefix) == []
    assert sorted(sandbox.keys_under("sessions/")) == sorted(neighbours)


def _store(sandbox: Sandbox) -> SessionStore:
    config = RuntimeConfig(
        table_name=TABLE, websocket_endpoint=ENDPOINT, ownership_table_name=OWNERSHIP_TABLE
    )
    return SessionStore(
        dynamodb_client=sandbox.ddb,
        connections_client=SESSION.client("apigatewaymanagementapi", endpoint_url=ENDPOINT),
        config=config,
    )


def test_concurrent_reconnects_then_the_cleanup_closes_the_last(
    sandbox: Sandbox, fresh_handler: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use_env(sandbox, monkeypatch)
    store = _store(sandbox)
    ids = [f"conn-{i}=" for i in range(10)]
    for cid in ids:
        sandbox.open_connection(cid)
    store.create("s-1", ttl=timedelta(hours=1), connection_id=ids[0])
    with ThreadPoolExecutor(max_workers=5) as pool:
        list(pool.map(lambda cid: store.attach_connection("s-1", cid), ids[1:]))
    still_open = [cid for cid in ids if sandbox.connection_exists(cid)]
    session = store.get("s-1", consistent=True)
    assert session is not None
    assert len(still_open) == 1 and session.connection_ids == set(still_open)
    adopt(sandbox.ddb, TABLE, {"pk": {"S": "s-1"}})  # the store's ownership records
    sandbox.read_stream()
    store.end("s-1")
    (record,) = sandbox.removes()

    assert handler(event(record), FakeContext()) == {"batchItemFailures": []}

    assert [cid for cid in ids if sandbox.connection_exists(cid)] == []


def test_every_recorded_connection_is_closed(
    sandbox: Sandbox,
    fresh_handler: None,
    monkeypatch: pytest.MonkeyPatch,
    session_logs: pytest.LogCaptureFixture,
) -> None:
    _use_env(sandbox, monkeypatch)
    kept_open = ["kept-1=", "kept-2="]
    for cid in kept_open:
        sandbox.open_connection(cid)
    s = sandbox.create_session("s-1", extra={"connectionIds": {"SS": kept_open}})
    for cid in kept_open:  # each recorded connection is claimed, as SessionStore records it
        sandbox.claim(KIND_CONNECTION, cid, "s-1", str(s.incarnation))
    sandbox.read_stream()
    sandbox.delete("s-1")
    (record,) = sandbox.removes()

    assert handler(event(record), FakeContext()) == {"batchItemFailures": []}

    assert not any(sandbox.connection_exists(c) for c in [s.connection_id, *kept_open])
    line = _lines(session_logs)["s-1"]
    assert line["connectionIds"] == sorted([s.connection_id, *kept_open])
    assert line["steps"]["DeleteConnection"] == "done"


def test_an_item_in_the_old_single_id_form_is_still_cleaned(
    sandbox: Sandbox, fresh_handler: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use_env(sandbox, monkeypatch)
    s = sandbox.create_session("s-1")  # connectionId only, no connectionIds
    assert "connectionIds" not in s.item
    sandbox.read_stream()
    sandbox.delete("s-1")
    (record,) = sandbox.removes()

    assert handler(event(record), FakeContext()) == {"batchItemFailures": []}

    assert sandbox.is_clean(s)


def test_a_connection_set_of_another_type_is_reported_and_the_single_id_still_closed(
    sandbox: Sandbox,
    fresh_handler: None,
    monkeypatch: pytest.MonkeyPatch,
    session_logs: pytest.LogCaptureFixture,
) -> None:
    _use_env(sandbox, monkeypatch)
    s = sandbox.create_session("s-1", extra={"connectionIds": {"S": "not-a-set"}})
    sandbox.read_stream()
    sandbox.delete("s-1")
    (record,) = sandbox.removes()

    assert handler(event(record), FakeContext()) == {"batchItemFailures": []}

    assert not sandbox.connection_exists(s.connection_id)
    line = _lines(session_logs)["s-1"]
    assert line["invalidAttributes"] == ["connectionIds"]
    assert line["connectionIds"] == [s.connection_id]
