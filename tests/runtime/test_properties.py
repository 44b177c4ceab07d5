"""Property-based tests (hypothesis): record decoding and scratch prefix validation."""

from __future__ import annotations

import base64
import json
import posixpath
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from session_expiry_runtime.core.decode import (
    DecodeError,
    decode_attribute,
    decode_image,
    to_json_value,
)
from session_expiry_runtime.core.prefixes import (
    ScratchPrefixError,
    build_scratch_prefix,
    validate_scratch_prefix,
)

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: Whole item images are big examples; fewer of them keep the suite fast.
IMAGES = settings(FAST, max_examples=120)

# --- DynamoDB AttributeValues in Lambda's wire form --------------------------------------------
# DynamoDB numbers: up to 38 significant digits, magnitude 1E-130 .. 9.99..E+125, or zero.
numbers = st.one_of(
    st.just("0"),
    st.builds(
        lambda negative, digits, exponent: str(
            Decimal((int(negative), tuple(int(c) for c in str(digits)), exponent))
        ),
        st.booleans(),
        st.integers(min_value=1, max_value=10**38 - 1),
        st.integers(min_value=-130, max_value=88),
    ),
    st.integers(min_value=-(10**38) + 1, max_value=10**38 - 1).map(str),
)
b64 = st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode("ascii"))
scalars = st.one_of(
    st.text(max_size=20).map(lambda s: {"S": s}),
    numbers.map(lambda n: {"N": n}),
    b64.map(lambda b: {"B": b}),
    st.booleans().map(lambda b: {"BOOL": b}),
    st.just({"NULL": True}),
    st.lists(st.text(max_size=10), min_size=1, max_size=5, unique=True).map(lambda v: {"SS": v}),
    st.lists(numbers, min_size=1, max_size=5, unique=True).map(lambda v: {"NS": v}),
    st.lists(b64, min_size=1, max_size=5, unique=True).map(lambda v: {"BS": v}),
)
attribute_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5).map(lambda v: {"L": v}),
        st.dictionaries(st.text(max_size=10), children, max_size=5).map(lambda v: {"M": v}),
    ),
    max_leaves=25,
)
images = st.dictionaries(st.text(max_size=10), attribute_values, max_size=8)


def _check_exact(wire: dict[str, Any], value: Any, as_json: Any) -> None:
    ((tag, inner),) = wire.items()
    if tag == "N":
        assert value == Decimal(inner) and isinstance(value, Decimal)
        assert (as_json == int(value)) if isinstance(as_json, int) else Decimal(as_json) == value
    elif tag == "NS":
        assert value == {Decimal(n) for n in inner}
        assert sorted(Decimal(str(j)) for j in as_json) == sorted(value)
    elif tag == "B":
        assert value == base64.b64decode(inner) and as_json == inner
    elif tag == "BS":
        assert value == {base64.b64decode(b) for b in inner}
        assert as_json == sorted(as_json, key=lambda b: base64.b64decode(b))
    elif tag == "SS":
        assert as_json == sorted(inner)
    elif tag == "L":
        for w, v, j in zip(inner, value, as_json, strict=True):
            _check_exact(w, v, j)
    elif tag == "M":
        for k, w in inner.items():
            _check_exact(w, value[k], as_json[k])


@IMAGES
@given(images)
def test_any_image_decodes_exactly_and_serialises(image: dict[str, Any]) -> None:
    decoded = decode_image(image)
    as_json = to_json_value(decoded)
    text = json.dumps(as_json)
    assert json.loads(text) == as_json
    for name, wire in image.items():
        _check_exact(wire, decoded[name], as_json[name])


json_junk = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.sampled_from(["S", "N", "B", "SS", "NS", "BS", "M", "L", "NULL", "BOOL", "x"]),
            children,
            max_size=2,
        ),
    ),
    max_leaves=12,
)


@FAST
@given(json_junk)
def test_malformed_values_raise_only_decode_error(junk: Any) -> None:
    try:
        decoded = decode_attribute(junk)
    except DecodeError:
        return
    json.dumps(to_json_value(decoded))


# --- scratch prefixes ------------------------------------------------------------------------
ROOT = "sessions/"
segments = st.sampled_from(
    [
        "sessions",
        "s-1",
        "s-10",
        "t-1",
        "t-2",
        "",
        ".",
        "..",
        "*",
        "a b",
        "x\x00",
        "%2e%2e",
        "SESSIONS",
        "sessions..",
    ]
)
candidate_prefixes = st.one_of(
    st.text(max_size=30),
    st.builds(
        lambda lead, parts, trail: ("/" if lead else "") + "/".join(parts) + ("/" if trail else ""),
        st.booleans(),
        st.lists(segments, max_size=5),
        st.booleans(),
    ),
)
ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:@=+-]{0,12}", fullmatch=True)


@FAST
@given(candidate_prefixes)
def test_no_accepted_prefix_lies_outside_the_root(prefix: str) -> None:
    try:
        accepted = validate_scratch_prefix(prefix, ROOT)
    except ScratchPrefixError:
        return
    assert accepted == prefix
    assert prefix.startswith(ROOT) and len(prefix) > len(ROOT) and prefix.endswith("/")
    # No path trick resolves it outside the root, and it never is the root.
    normalised = posixpath.normpath(prefix)
    assert normalised.startswith(ROOT) and normalised + "/" == prefix
    assert all(part not in {"", ".", ".."} for part in prefix[:-1].split("/"))


@FAST
@given(candidate_prefixes, st.sampled_from(["t-1", "t-2", None, "", "../t-2", 7]))
def test_no_accepted_prefix_lies_outside_the_tenant(prefix: str, tenant: Any) -> None:
    try:
        validate_scratch_prefix(prefix, ROOT, tenant_id=tenant, tenant_scoped=True)
    except ScratchPrefixError:
        return
    tenant_root = f"{ROOT}{tenant}/"
    assert isinstance(tenant, str) and prefix.startswith(tenant_root) and prefix != tenant_root


@FAST
@given(ids, ids, st.one_of(st.none(), ids))
def test_built_prefixes_validate_and_never_cover_a_neighbour(
    a: str, b: str, tenant: str | None
) -> None:
    scoped = tenant is not None
    pa = build_scratch_prefix(ROOT, a, tenant_id=tenant, tenant_scoped=scoped, incarnation="i1")
    pb = build_scratch_prefix(ROOT, b, tenant_id=tenant, tenant_scoped=scoped, incarnation="i1")
    assert validate_scratch_prefix(pa, ROOT, tenant_id=tenant, tenant_scoped=scoped) == pa
    if a != b:  # e.g. s-1 and s-10: listing one prefix never lists the other's keys
        assert not (pb + "key").startswith(pa) and not (pa + "key").startswith(pb)
