"""The ownership rules (session_expiry_runtime.ownership): pure, no AWS."""

from __future__ import annotations

from decimal import Decimal

import pytest
from session_expiry_runtime import ownership as own
from session_expiry_runtime.grant_names import grant_name

ME = own.owner_token({"pk": "s-1"})
OTHER = own.owner_token({"pk": "s-2"})


def claim(owner: str = ME, incarnation: str = "inc1", **kw: object) -> own.Claim:
    fields: dict[str, object] = {
        "resource": "connection#c-1",
        "owner": owner,
        "incarnation": incarnation,
        "state": own.STATE_HELD,
        "claimed_at": Decimal(100),
        "not_after": Decimal(1000),
        "state_since": Decimal(100),
    }
    fields.update(kw)
    return own.Claim(**fields)  # type: ignore[arg-type]


def verdict(c: own.Claim | None, **kw: object) -> str:
    args: dict[str, object] = {
        "owner": ME,
        "incarnation": "inc1",
        "removed_at": Decimal(500),
        "image_not_after": Decimal(1000),
    }
    args.update(kw)
    return own.classify(c, **args).status  # type: ignore[arg-type]


def test_owner_token_is_the_grant_name_key_encoding() -> None:
    # One canonical form of a key on every path: a grant's Name carries the same encoding.
    assert grant_name({"pk": "s-1"}, "inc1") == f"session-expiry:inc1:{ME}"
    assert own.owner_token({"sk": "a", "pk": "b"}) == own.owner_token({"pk": "b", "sk": "a"})


@pytest.mark.parametrize("key", [{}, {"pk": ""}, {"pk": 1}, "s-1", {"": "x"}])
def test_fails_owner_token_of_a_key_that_names_no_item(key: object) -> None:
    with pytest.raises(ValueError, match="owner key"):
        own.owner_token(key)  # type: ignore[arg-type]


def test_resource_key_names_kind_and_id() -> None:
    assert own.resource_key(own.KIND_CONNECTION, "c-1") == "connection#c-1"


@pytest.mark.parametrize(("kind", "rid"), [("socket", "c-1"), (own.KIND_GRANT, ""), ("", "x")])
def test_fails_resource_key_of_unknown_kind_or_empty_id(kind: str, rid: str) -> None:
    with pytest.raises(ValueError, match="resource"):
        own.resource_key(kind, rid)


def test_own_key_and_incarnation_is_owned() -> None:
    assert verdict(claim()) == own.VERDICT_OWNED
    assert verdict(claim(state=own.STATE_RELEASING)) == own.VERDICT_OWNED
    assert verdict(claim(state=own.STATE_RELEASED)) == own.VERDICT_RELEASED


def test_another_incarnation_of_the_same_key_is_superseded_never_owned() -> None:
    assert verdict(claim(incarnation="inc2")) == own.REFUSAL_SUPERSEDED


def test_another_sessions_claim_from_before_the_removal_is_not_owned() -> None:
    # A forged image naming s-2's connection: s-2 claimed it before s-1 was removed.
    assert verdict(claim(owner=OTHER, claimed_at=Decimal(200))) == own.REFUSAL_NOT_OWNED


def test_a_claim_taken_after_the_removal_or_the_absolute_end_is_superseded() -> None:
    assert verdict(claim(owner=OTHER, claimed_at=Decimal(503))) == own.REFUSAL_SUPERSEDED
    assert (
        verdict(claim(owner=OTHER, claimed_at=Decimal(400)), image_not_after=Decimal(300))
        == own.REFUSAL_SUPERSEDED
    )


def test_a_claim_taken_in_the_second_of_the_removal_is_not_owned() -> None:
    # ApproximateCreationDateTime is whole seconds: a forged item removed in the same second
    # (or the next) as the victim's claim must not pass for a later claimant.
    for claimed_at in (Decimal("500.9"), Decimal(502)):
        assert verdict(claim(owner=OTHER, claimed_at=claimed_at)) == own.REFUSAL_NOT_OWNED


def test_no_claim_is_unclaimed_unless_legacy_or_past_the_retention() -> None:
    assert verdict(None) == own.REFUSAL_UNCLAIMED
    assert verdict(None, incarnation=None) == own.REFUSAL_LEGACY
    late = Decimal(1000 + own.CLAIM_RETENTION_SECONDS + 1)
    assert verdict(None, removed_at=late) == own.REFUSAL_CLAIM_EXPIRED


def test_legacy_items_are_never_owned_even_with_a_claim() -> None:
    assert verdict(claim(), incarnation=None) == own.REFUSAL_LEGACY


def test_only_forgery_refusals_are_alarmed() -> None:
    assert own.ALARMED_REFUSALS == {own.REFUSAL_NOT_OWNED, own.REFUSAL_UNCLAIMED}


def test_claim_from_item_reads_a_well_formed_record_only() -> None:
    item = {
        own.ATTR_RESOURCE: {"S": "connection#c-1"},
        own.ATTR_OWNER: {"S": ME},
        own.ATTR_INCARNATION: {"S": "inc1"},
        own.ATTR_STATE: {"S": own.STATE_HELD},
        own.ATTR_CLAIMED_AT: {"N": "100"},
        own.ATTR_NOT_AFTER: {"N": "1000"},
    }
    read = own.Claim.from_item(item)
    assert read == claim()
    assert own.Claim.from_item({**item, own.ATTR_STATE: {"S": "mine"}}) is None
    assert own.Claim.from_item({**item, own.ATTR_CLAIMED_AT: {"S": "100"}}) is None
    assert own.Claim.from_item(None) is None
