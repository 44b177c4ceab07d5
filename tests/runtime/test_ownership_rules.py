"""The ownership rules (session_expiry_runtime.core.ownership): pure, no AWS."""

from __future__ import annotations

from decimal import Decimal

import pytest
from session_expiry_runtime.core import ownership as own
from session_expiry_runtime.core.grant_names import grant_name

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
    args: dict[str, object] = {"owner": ME, "incarnation": "inc1"}
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


def test_another_sessions_claim_is_not_owned_whenever_it_was_taken() -> None:
    # A forged image naming s-2's connection. When s-2 took it says nothing: claimedAt against
    # an image's notAfter or a record's timestamp is a comparison with what the forger wrote.
    for claimed_at in (Decimal(200), Decimal("500.9"), Decimal(503), Decimal(10**9)):
        assert verdict(claim(owner=OTHER, claimed_at=claimed_at)) == own.REFUSAL_NOT_OWNED


def test_rule_claim_taken_over_from_this_incarnation_is_superseded_not_not_owned() -> None:
    # Issue 40, rule 8 as the record now states it: s-2 took the id over from exactly s-1's
    # incarnation inc1 (released, or past s-1's absolute end), and says so in formerOwners.
    taken = claim(owner=OTHER, former_owners=(own.former_owner(ME, "inc1"),))
    assert verdict(taken) == own.REFUSAL_SUPERSEDED


def test_a_takeover_from_another_incarnation_or_key_is_still_not_owned() -> None:
    # formerOwners must name this key AND this incarnation: a forged image of s-1 with a
    # made-up incarnation, or of s-3, is refused and alarmed.
    taken = claim(owner=OTHER, former_owners=(own.former_owner(ME, "inc0"),))
    assert verdict(taken) == own.REFUSAL_NOT_OWNED
    s3 = own.owner_token({"pk": "s-3"})
    assert verdict(claim(owner=OTHER, former_owners=(own.former_owner(s3, "inc1"),))) == (
        own.REFUSAL_NOT_OWNED
    )


def test_rule_no_claim_is_unclaimed_and_alarmed_whatever_the_times() -> None:
    # Issue 40, rule 1, now without any time: no record is Unclaimed (alarmed). The quiet
    # ClaimExpired was decided from the image's notAfter, which its writer chooses; records are
    # kept 21 days past their owner's end, longer than anything can still ask for them.
    assert verdict(None) == own.REFUSAL_UNCLAIMED
    assert own.Verdict(verdict(None)).alarmed
    assert verdict(None, incarnation=None) == own.REFUSAL_LEGACY
    assert own.CLAIM_RETENTION_SECONDS >= (2 + 14) * 24 * 3600 + 6 * 3600


def test_classify_takes_no_time_from_the_image_or_the_record() -> None:
    with pytest.raises(TypeError):
        own.classify(None, owner=ME, incarnation="inc1", image_not_after=Decimal(1))  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        own.classify(None, owner=ME, incarnation="inc1", removed_at=Decimal(1))  # type: ignore[call-arg]


def test_legacy_items_are_never_owned_even_with_a_claim() -> None:
    # This key's own record: another incarnation took it (Superseded); another key's: an
    # image without an incarnation naming a held id is a forgery's shape (NotOwned, alarmed).
    assert verdict(claim(), incarnation=None) == own.REFUSAL_SUPERSEDED
    assert verdict(claim(owner=OTHER), incarnation=None) == own.REFUSAL_NOT_OWNED


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
    former = {own.ATTR_FORMER_OWNERS: {"L": [{"S": "a#1"}, {"N": "2"}, {"S": "b#2"}]}}
    assert own.Claim.from_item({**item, **former}) == claim(former_owners=("a#1", "b#2"))
    assert own.Claim.from_item({**item, own.ATTR_STATE: {"S": "mine"}}) is None
    assert own.Claim.from_item({**item, own.ATTR_CLAIMED_AT: {"S": "100"}}) is None
    assert own.Claim.from_item(None) is None


# --- issue 40: what mutation testing found unpinned ------------------------------------------


def test_built_in_and_custom_kinds_are_kinds_and_nothing_else_is() -> None:
    assert all(own.is_kind(kind) for kind in own.KINDS)
    assert own.is_kind("custom:DeleteSessionSecret")
    for not_a_kind in ("socket", "custom:", "custom:9lives", "custom:bad name", 3, None):
        assert not own.is_kind(not_a_kind), not_a_kind
    assert own.resource_key("custom:DropQueue", "q-1") == "custom:DropQueue#q-1"


def test_fails_resource_key_naming_the_value_and_what_was_expected() -> None:
    with pytest.raises(ValueError) as raised:
        own.resource_key("socket", "c-1")
    assert str(raised.value) == (
        f"resource kind 'socket': expected one of {list(own.KINDS)} or 'custom:<step name>'"
    )
    for rid in ("", 3):
        with pytest.raises(ValueError) as raised:
            own.resource_key(own.KIND_CONNECTION, rid)  # type: ignore[arg-type]
        assert str(raised.value) == f"resource id {rid!r}: expected a non-empty string"


def test_owner_token_is_base64url_of_compact_sorted_utf8_json_without_padding() -> None:
    # The exact bytes matter: a grant's Name and every ownership record carry them, and a token
    # that changed with the key's order, spacing or escaping would make one owner two.
    assert own.owner_token({"pk": "s-1"}) == "eyJwayI6InMtMSJ9"  # {"pk":"s-1"}
    assert own.owner_token({"sk": "b", "pk": "a"}) == "eyJwayI6ImEiLCJzayI6ImIifQ"
    assert own.owner_token({"pk": "sé"}) == "eyJwayI6InPDqSJ9"  # é as UTF-8, not \\u00e9
    assert own.owner_token({"pk": "s"}) == "eyJwayI6InMifQ"  # two "=" of padding dropped
    assert own.owner_token({"pk": "sx"}) == "eyJwayI6InN4In0"  # one "=" dropped


def test_fails_owner_token_naming_the_key_and_what_was_expected() -> None:
    with pytest.raises(ValueError) as raised:
        own.owner_token({"pk": ""})
    assert str(raised.value) == (
        "owner key {'pk': ''}: expected a non-empty mapping of attribute names to non-empty "
        "String values, e.g. {'pk': 's-1'}"
    )


@pytest.mark.parametrize(
    "key", [{"pk": "s"}, {"pk": "sx"}, {"pk": "sxx"}, {"pk": "sxxx"}, {"pk": "a", "sk": "é"}]
)
def test_owner_key_of_token_reads_back_every_token_whatever_its_padding(
    key: dict[str, str],
) -> None:
    assert own.owner_key_of_token(own.owner_token(key)) == key


def _b64(text: str) -> str:
    import base64

    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "token",
    [
        None,
        "",
        3,
        own.owner_token({"pk": "s"}) + "==",  # padded: owner_token never pads
        "!!!not-base64",
        _b64("[]"),
        _b64("{}"),
        _b64('"s-1"'),
        _b64('{"pk":""}'),
        _b64('{"pk":1}'),
        _b64('{"":"x"}'),
        _b64('{"pk": "s-1"}'),  # the right key, not in owner_token's canonical encoding
        _b64('{"sk":"b","pk":"a"}'),  # keys not sorted
    ],
)
def test_owner_key_of_token_is_none_for_what_owner_token_does_not_write(token: object) -> None:
    assert own.owner_key_of_token(token) is None


def _item(**changes: object) -> dict[str, object]:
    item: dict[str, object] = {
        own.ATTR_RESOURCE: {"S": "connection#c-1"},
        own.ATTR_OWNER: {"S": ME},
        own.ATTR_INCARNATION: {"S": "inc1"},
        own.ATTR_STATE: {"S": own.STATE_HELD},
        own.ATTR_CLAIMED_AT: {"N": "100"},
        own.ATTR_NOT_AFTER: {"N": "1000"},
    }
    item.update(changes)
    return {k: v for k, v in item.items() if v is not None}


@pytest.mark.parametrize(
    "name",
    [
        own.ATTR_RESOURCE,
        own.ATTR_OWNER,
        own.ATTR_INCARNATION,
        own.ATTR_STATE,
        own.ATTR_CLAIMED_AT,
        own.ATTR_NOT_AFTER,
    ],
)
def test_a_record_missing_any_attribute_a_claim_needs_is_no_claim(name: str) -> None:
    assert own.Claim.from_item(_item(**{name: None})) is None


@pytest.mark.parametrize("bad", [{"S": ""}, {"S": 3}, {"N": "1"}, "s-1", None])
def test_a_record_whose_owner_is_not_a_non_empty_string_is_no_claim(bad: object) -> None:
    assert own.Claim.from_item(_item(**{own.ATTR_OWNER: bad})) is None


@pytest.mark.parametrize("bad", [{"N": "x"}, {"N": "Infinity"}, {"N": "NaN"}, {"N": 5}, "100"])
def test_a_record_whose_time_is_not_a_finite_number_is_no_claim(bad: object) -> None:
    assert own.Claim.from_item(_item(**{own.ATTR_NOT_AFTER: bad})) is None
    assert own.Claim.from_item(_item(**{own.ATTR_CLAIMED_AT: bad})) is None


def test_a_claims_times_are_read_as_written_zero_included() -> None:
    read = own.Claim.from_item(
        _item(**{own.ATTR_CLAIMED_AT: {"N": "0"}, own.ATTR_NOT_AFTER: {"N": "0"}})
    )
    assert read is not None
    assert (read.claimed_at, read.not_after, read.state_since) == (0, 0, 0)
    since = own.Claim.from_item(_item(**{own.ATTR_STATE_SINCE: {"N": "150"}}))
    assert since is not None and since.state_since == Decimal(150)
    assert since.claimed_at == Decimal(100)
    assert own.Claim.from_item(_item()) == claim()  # no stateSince: since the claim was taken
    assert own.Claim.from_item({}) is None


@pytest.mark.parametrize("former", [{"S": "a#1"}, {"L": "a#1"}, "a#1"])
def test_former_owners_that_are_not_a_list_of_strings_read_as_none(former: object) -> None:
    read = own.Claim.from_item(_item(**{own.ATTR_FORMER_OWNERS: former}))
    assert read is not None and read.former_owners == ()


def test_every_verdict_carries_the_claim_it_was_decided_on() -> None:
    mine, other = claim(), claim(owner=OTHER)
    taken = claim(owner=OTHER, former_owners=(own.former_owner(ME, "inc1"),))
    for c, incarnation, status in (
        (mine, "inc1", own.VERDICT_OWNED),
        (mine, "inc2", own.REFUSAL_SUPERSEDED),
        (taken, "inc1", own.REFUSAL_SUPERSEDED),
        (other, "inc1", own.REFUSAL_NOT_OWNED),
    ):
        decided = own.classify(c, owner=ME, incarnation=incarnation)
        assert (decided.status, decided.claim) == (status, c)
    assert own.classify(None, owner=ME, incarnation="inc1") == own.Verdict(own.REFUSAL_UNCLAIMED)


def test_an_image_without_an_incarnation_is_not_the_former_holder_named_none() -> None:
    # A legacy image carries no incarnation; a record that took the id over from an
    # incarnation written "None" must not make that image Superseded (it is NotOwned: alarmed).
    taken = claim(owner=OTHER, former_owners=(own.former_owner(ME, "None"),))
    assert verdict(taken, incarnation=None) == own.REFUSAL_NOT_OWNED


# ``names_incarnation``: the proof a Kinesis REMOVE of a re-created key needs that the
# incarnation it names existed (a made-up incarnation is named by no claim).


@pytest.mark.parametrize(
    ("record", "named"),
    [
        pytest.param(None, False, id="no-record"),
        pytest.param(claim(), True, id="the-holder"),
        pytest.param(claim(incarnation="inc2"), False, id="the-owners-other-incarnation"),
        pytest.param(claim(owner=OTHER), False, id="another-owner-same-incarnation"),
        pytest.param(
            claim(OTHER, "inc9", former_owners=(own.former_owner(ME, "inc1"),)),
            True,
            id="a-former-holder",
        ),
        pytest.param(
            claim(OTHER, "inc9", former_owners=(own.former_owner(OTHER, "inc1"),)),
            False,
            id="another-owners-former-incarnation",
        ),
        pytest.param(
            claim(OTHER, "inc9", former_owners=(own.former_owner(ME, "inc2"),)),
            False,
            id="the-owners-other-former-incarnation",
        ),
    ],
)
def test_rule_an_incarnation_is_named_only_by_its_holder_or_a_former_holder(
    record: own.Claim | None, named: bool
) -> None:
    """A claim names ``ME``'s ``inc1`` when it holds the id for exactly that owner and
    incarnation, or lists exactly that pair among the holders it took the id over from; no
    record names nothing."""
    assert own.names_incarnation(record, owner=ME, incarnation="inc1") is named
