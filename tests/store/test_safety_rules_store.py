"""Rule 7 of the mutation review (issue 40), the writer side: a grant's ownership record is
taken fresh or again by the same incarnation only, never over an earlier incarnation of the
same key (``GRANT_CLAIM_CONDITION``). The other rules are in
``tests/runtime/test_safety_rules.py``.

moto's DynamoDB (``TransactWriteItems`` with ``CancellationReasons``), real boto3 calls.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from session_expiry_runtime.store import ResourceOwnedError, SessionStore

from ._support import FakeClock, claim_of, raw_item

HOUR = timedelta(hours=1)
S1 = {"pk": {"S": "s-1"}}


@pytest.fixture
def store(make_store: Any) -> SessionStore:
    return make_store(ownership=True)  # type: ignore[no-any-return]


def test_rule_attach_grant_refuses_a_grant_claimed_by_an_earlier_incarnation(
    store: SessionStore, ddb: Any, clock: FakeClock
) -> None:
    """Incarnation 1 of s-1 holds grant g-1 (its claim ``held``: its cleanup has not retired
    it yet). Incarnation 2 of the same key attaching g-1 is refused: the claim names the key
    but another incarnation, the claim and incarnation 2's item stay as they were."""
    first = store.attach_grant(
        store.create("s-1", ttl=HOUR).session_id, grant_id="g-1", grant_token="t-1"
    )
    clock.advance(HOUR.total_seconds() + 1)  # expired, not yet deleted by TTL
    second = store.create("s-1", ttl=HOUR)
    assert second.incarnation != first.incarnation
    claim_before, item_before = claim_of(ddb, "grant#g-1"), raw_item(ddb, S1)

    with pytest.raises(ResourceOwnedError) as refused:
        store.attach_grant("s-1", grant_id="g-1", grant_token="t-1")

    assert (refused.value.kind, refused.value.owner_key) == ("grant", {"pk": "s-1"})
    assert refused.value.owner_incarnation == first.incarnation
    assert claim_of(ddb, "grant#g-1") == claim_before
    assert raw_item(ddb, S1) == item_before


def test_rule_attach_grant_again_by_the_same_incarnation_is_idempotent(
    store: SessionStore, ddb: Any
) -> None:
    """The other half of the condition: the same incarnation attaching its grant again (a
    retried request) is accepted, and the claim stays its own."""
    created = store.create("s-1", ttl=HOUR)
    store.attach_grant("s-1", grant_id="g-1", grant_token="t-1")

    again = store.attach_grant("s-1", grant_id="g-1", grant_token="t-1")

    assert again.grant_id == "g-1"
    claim = claim_of(ddb, "grant#g-1")
    assert claim is not None and claim["incarnation"] == {"S": created.incarnation}
