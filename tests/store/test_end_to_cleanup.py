"""``SessionStore.end`` hands the cleanup function a REMOVE record it cleans (issue 4).

The cleanup side's moto sandbox and Lambda-event reshaping are reused from
``tests/runtime/runtime_support.py`` (imported as ``runtime.runtime_support``: ``tests/`` is on
``sys.path`` and ``tests/runtime`` is a namespace package), so both sides agree on one shape.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from runtime.runtime_support import APP_ROLE, FakeContext, Sandbox, event
from session_expiry_runtime import handler as handler_module
from session_expiry_runtime.core.config import ENV_TTL_ATTRIBUTE
from session_expiry_runtime.store import SessionStore

from ._support import FakeClock

HOUR = timedelta(hours=1)


@pytest.fixture(params=["expiresAt", "ttl"])
def ttl_attr(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def sandbox(aws: None) -> Sandbox:
    return Sandbox()


@pytest.fixture
def real_time_clock() -> FakeClock:
    """Starts at the wall clock: moto stamps stream records with real time, and the cleanup
    classifies a removal whose TTL is already past that stamp as a TTL delete."""
    return FakeClock(datetime.now(timezone.utc))


@pytest.fixture
def wired(
    sandbox: Sandbox,
    ttl_attr: str,
    real_time_clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> SessionStore:
    """The store and the real cleanup handler configured for the same table and targets."""
    for name, value in sandbox.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(ENV_TTL_ATTRIBUTE, ttl_attr)
    monkeypatch.setattr(handler_module, "_cleaner", None)  # re-read the environment
    caplog.set_level(logging.INFO, logger="session_expiry_runtime")
    config = dataclasses.replace(sandbox.config, ttl_attribute=ttl_attr)
    return SessionStore(
        dynamodb_client=sandbox.ddb,
        kms_client=sandbox.kms,
        clock=real_time_clock,
        config=config,
    )


def session_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.session for r in caplog.records if hasattr(r, "session")]


def open_session(store: SessionStore, sandbox: Sandbox, session_id: str, connection_id: str) -> Any:
    sandbox.open_connection(connection_id)
    store.create(session_id, ttl=HOUR, connection_id=connection_id)
    s = store.create_grant(session_id, grantee_principal=APP_ROLE, operations=["Decrypt"])
    assert s.scratch_prefix is not None
    sandbox.put_objects([s.scratch_prefix + "a.txt", s.scratch_prefix + "b/c.bin"])
    return s


def test_end_is_cleaned_as_explicit(
    wired: SessionStore, sandbox: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    s = open_session(wired, sandbox, "s-1", "conn-1=")
    kept = open_session(wired, sandbox, "s-10", "conn-10=")
    sandbox.read_stream()  # consume the INSERT/MODIFY records

    assert wired.end("s-1") is True
    (record,) = sandbox.removes()
    assert "userIdentity" not in record

    assert handler_module.handler(event(record), FakeContext()) == {"batchItemFailures": []}

    assert not sandbox.connection_exists("conn-1=")
    assert s.grant_id not in sandbox.grant_ids()
    assert sandbox.keys_under(s.scratch_prefix) == []
    (line,) = session_lines(caplog)
    assert (line["outcome"], line["reason"]) == ("cleaned", "explicit")
    assert line["steps"] == {
        "DeleteConnection": "done",
        "RetireGrant": "done",
        "DeleteScratch": "done",
    }
    # The neighbouring session is untouched.
    assert sandbox.connection_exists("conn-10=")
    assert kept.grant_id in sandbox.grant_ids()
    assert len(sandbox.keys_under(kept.scratch_prefix)) == 2


def test_reuse_after_expiry_cleans_the_old_incarnation_only(
    wired: SessionStore,
    sandbox: Sandbox,
    real_time_clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    old = open_session(wired, sandbox, "s-1", "conn-old=")
    sandbox.read_stream()
    real_time_clock.advance(HOUR.total_seconds() + 1)  # expired, still stored

    new = wired.create("s-1", ttl=HOUR, connection_id="conn-new=")
    sandbox.open_connection("conn-new=")
    sandbox.put_objects([new.scratch_prefix + "n.txt"])
    (record,) = sandbox.removes()

    assert handler_module.handler(event(record), FakeContext()) == {"batchItemFailures": []}

    (line,) = session_lines(caplog)
    assert line["outcome"] == "cleaned"
    assert not sandbox.connection_exists("conn-old=")
    assert old.grant_id not in sandbox.grant_ids()
    assert sandbox.keys_under(old.scratch_prefix) == []
    # The new incarnation keeps its connection and its own scratch prefix.
    assert sandbox.connection_exists("conn-new=")
    assert sandbox.keys_under(new.scratch_prefix) == [new.scratch_prefix + "n.txt"]
    assert wired.get("s-1") == new
