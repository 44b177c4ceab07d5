"""Adversarial clocks and TTL values for SessionStore (promise 3: fail closed on time).

No counterexample was found here; these tests stay as guards. Each item is written raw (as
another writer might), then every read and write path is asked about it at a sub-second clock:
get, list, touch and attach must agree with each other and with ``ttl.is_live``, and a refused
write must leave the item byte for byte as it was.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from session_expiry_runtime.core.ttl import is_live, ttl_from_attribute
from session_expiry_runtime.store import SessionGoneError, SessionStore

from ._support import T0_EPOCH, TABLE, FakeClock, raw_item

NOW = Decimal(T0_EPOCH) + Decimal("0.5")  # the clock sits half-way through a second

#: (raw TTL attribute, live at NOW?)
CASES: list[tuple[dict[str, Any] | None, bool]] = [
    ({"N": str(T0_EPOCH)}, False),  # half a second ago
    ({"N": f"{T0_EPOCH}.5"}, False),  # exactly now
    ({"N": f"{T0_EPOCH}.500001"}, True),  # a microsecond ahead
    ({"N": str(T0_EPOCH + 1)}, True),
    ({"N": "-0"}, False),
    ({"N": "0"}, False),
    ({"N": str((T0_EPOCH + 60) * 1000)}, False),  # milliseconds: DynamoDB never expires it
    ({"N": "9.9E+125"}, False),  # DynamoDB's largest number
    ({"S": str(T0_EPOCH + 60)}, False),  # a String never expires in DynamoDB
    ({"L": [{"N": str(T0_EPOCH + 60)}]}, False),
    (None, False),  # missing
]


@pytest.mark.parametrize("ttl_attr", ["ttl", "expiresAt"])
@pytest.mark.parametrize(("ttl_value", "live"), CASES)
def test_every_path_agrees_on_liveness_at_a_sub_second_clock(
    make_store: Any,
    ddb: Any,
    clock: FakeClock,
    ttl_attr: str,
    ttl_value: dict[str, Any] | None,
    live: bool,
) -> None:
    store: SessionStore = make_store(ttl_attribute=ttl_attr, sort_key="sid")
    clock.advance(0.5)
    key = {"pk": {"S": "user-1"}, "sid": {"S": "s-1"}}
    item = {**key, "scratchPrefix": {"S": "sessions/s-1/x/"}}
    if ttl_value is not None:
        item[ttl_attr] = ttl_value
    ddb.put_item(TableName=TABLE, Item=item)

    assert is_live(ttl_from_attribute(ttl_value), now=NOW) is live
    assert (store.get("s-1", partition="user-1", consistent=True) is not None) is live
    assert [s.session_id for s in store.list("user-1", consistent=True)] == (
        ["s-1"] if live else []
    )
    if live:
        assert store.touch("s-1", partition="user-1", ttl=timedelta(minutes=5)).expires_at > NOW
        return
    before = raw_item(ddb, key)
    for write in (
        lambda: store.touch("s-1", partition="user-1", ttl=timedelta(hours=1)),
        lambda: store.attach_connection("s-1", "c-1", partition="user-1"),
        lambda: store.attach_grant("s-1", grant_id="g", grant_token="t", partition="user-1"),
    ):
        with pytest.raises(SessionGoneError):
            write()
    assert raw_item(ddb, key) == before  # no heartbeat revives it, nothing is attached
