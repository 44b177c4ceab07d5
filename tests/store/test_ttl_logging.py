"""The store says when it cannot read a session's time to live, once per item, and still fails
closed (issue 12)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ._support import T0_EPOCH, TABLE
from .conftest import MakeStore

LOGGER = "session_expiry_runtime.store"


def _put(ddb: Any, session_id: str, ttl: Any) -> None:
    item: dict[str, Any] = {
        "pk": {"S": session_id},
        "scratchPrefix": {"S": f"sessions/{session_id}/x/"},
    }
    if ttl is not None:
        item["expiresAt"] = ttl
    ddb.put_item(TableName=TABLE, Item=item)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


@pytest.mark.parametrize(
    ("ttl", "kind", "value"),
    [
        ({"S": str(T0_EPOCH + 600)}, "String (S)", str(T0_EPOCH + 600)),
        ({"N": str((T0_EPOCH + 600) * 1000)}, "Number (N)", str((T0_EPOCH + 600) * 1000)),
        ({"N": "-5"}, "Number (N)", "-5"),
        ({"L": [{"N": "1"}]}, "List (L)", '[{"N": "1"}]'),
        (None, "missing", ""),
    ],
    ids=["string", "milliseconds", "negative", "list", "missing"],
)
def test_an_unreadable_ttl_is_logged_once_per_item_and_the_session_is_expired(
    make_store: MakeStore,
    ddb: Any,
    caplog: pytest.LogCaptureFixture,
    ttl: Any,
    kind: str,
    value: str,
) -> None:
    store = make_store()
    _put(ddb, "s-1", ttl)
    caplog.set_level(logging.WARNING, logger=LOGGER)

    assert store.get("s-1") is None  # fail closed, as before
    assert store.get("s-1", consistent=True) is None

    (warning,) = _warnings(caplog)  # once, however often the item is read
    details = warning.unreadableTtl  # type: ignore[attr-defined]
    assert details == {
        "key": {"pk": {"S": "s-1"}},
        "attribute": "expiresAt",
        "type": kind,
        "value": value,
    }
    message = warning.getMessage()
    assert "'expiresAt'" in message and '"s-1"' in message and "treated as expired" in message
    if ttl is not None:
        assert kind in message and repr(value) in message


def test_each_item_is_reported_and_a_new_bad_value_again(
    make_store: MakeStore, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store = make_store()
    caplog.set_level(logging.WARNING, logger=LOGGER)
    _put(ddb, "s-1", {"S": "soon"})
    _put(ddb, "s-2", {"S": "soon"})
    store.get("s-1")
    store.get("s-2")
    _put(ddb, "s-1", {"S": "later"})
    store.get("s-1")

    assert [w.unreadableTtl["value"] for w in _warnings(caplog)] == ["soon", "soon", "later"]  # type: ignore[attr-defined]


def test_a_readable_ttl_is_not_logged_whether_live_or_expired(
    make_store: MakeStore, ddb: Any, caplog: pytest.LogCaptureFixture
) -> None:
    store = make_store()
    caplog.set_level(logging.WARNING, logger=LOGGER)
    _put(ddb, "live", {"N": str(T0_EPOCH + 600)})
    _put(ddb, "expired", {"N": str(T0_EPOCH - 600)})

    assert store.get("live") is not None
    assert store.get("expired") is None
    assert _warnings(caplog) == []
