"""Grant names that identify their session: pure, no AWS."""

from __future__ import annotations

import base64
import json
import re

import pytest
from session_expiry_runtime.core.grant_names import (
    GRANT_NAME_PREFIX,
    MAX_GRANT_NAME_LENGTH,
    GrantOwner,
    grant_name,
    parse_grant_name,
)

# CreateGrant Name: letters, digits and :/_- (AWS KMS API Reference, "CreateGrant").
_KMS_NAME = re.compile(r"[A-Za-z0-9:/_-]{1,256}")


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def test_name_form_is_exact() -> None:
    name = grant_name({"pk": "s-1"}, "0f3a")
    assert name == "session-expiry:0f3a:" + _b64('{"pk":"s-1"}')
    assert name == "session-expiry:0f3a:eyJwayI6InMtMSJ9"
    assert GRANT_NAME_PREFIX == "session-expiry:"


def test_key_attributes_are_sorted() -> None:
    a = grant_name({"sk": "s-1", "pk": "user-7"}, "abc")
    b = grant_name({"pk": "user-7", "sk": "s-1"}, "abc")
    assert a == b == "session-expiry:abc:" + _b64('{"pk":"user-7","sk":"s-1"}')


@pytest.mark.parametrize(
    ("key", "incarnation"),
    [
        ({"pk": "s-1"}, "0123456789abcdef0123456789abcdef"),
        ({"pk": "user 7/ünïcode ✓", "sk": "s.1:@=+"}, "inc_-A9"),
        ({"pk": "a" * 150}, "x"),
        ({'p"k': 'va"l\\ue', "x": "y"}, "i"),
        ({"pk": "\u0000\u001f"}, "i"),
    ],
)
def test_round_trip(key: dict[str, str], incarnation: str) -> None:
    name = grant_name(key, incarnation)
    assert name is not None
    assert _KMS_NAME.fullmatch(name), name
    assert parse_grant_name(name) == GrantOwner(key=key, incarnation=incarnation)


def test_none_when_longer_than_256_characters() -> None:
    # Find the longest value that fits: one more character must give None.
    fits = None
    for n in range(1, 300):
        if grant_name({"pk": "a" * n}, "inc") is None:
            break
        fits = n
    assert fits is not None
    longest = grant_name({"pk": "a" * fits}, "inc")
    assert longest is not None and len(longest) <= MAX_GRANT_NAME_LENGTH == 256
    assert grant_name({"pk": "a" * (fits + 1)}, "inc") is None
    assert grant_name({"pk": "s-1"}, "i" * 300) is None


@pytest.mark.parametrize("incarnation", ["", "a:b", "a/b", "a.b", "a b", "ä", "a=", "a\n"])
def test_none_for_an_incarnation_a_name_part_cannot_hold(incarnation: str) -> None:
    assert grant_name({"pk": "s-1"}, incarnation) is None


@pytest.mark.parametrize(
    "key",
    # DynamoDB never stores an empty key value (nor an empty attribute name): no item has it.
    [{}, {"pk": 1}, {1: "s"}, "pk=s-1", None, [("pk", "s")], {"pk": ""}, {"": "s-1"}],
)
def test_fails_for_a_key_that_is_not_a_mapping_of_strings(key: object) -> None:
    with pytest.raises(ValueError, match="grant name key"):
        grant_name(key, "inc")  # type: ignore[arg-type]


def test_fails_for_an_incarnation_that_is_not_a_string() -> None:
    with pytest.raises(ValueError, match="incarnation"):
        grant_name({"pk": "s-1"}, 7)  # type: ignore[arg-type]


_GOOD = "session-expiry:0f3a:" + _b64('{"pk":"s-1"}')


@pytest.mark.parametrize(
    "name",
    [
        None,
        7,
        b"session-expiry:0f3a:eyJwayI6InMtMSJ9",
        "",
        "session-abc123",  # the names written before this module
        "other-app:0f3a:" + _b64('{"pk":"s-1"}'),
        "Session-Expiry:0f3a:" + _b64('{"pk":"s-1"}'),
        "session-expiry:",
        "session-expiry:0f3a",
        "session-expiry:0f3a:",
        "session-expiry::" + _b64('{"pk":"s-1"}'),
        "session-expiry:0f/3a:" + _b64('{"pk":"s-1"}'),
        "session-expiry:0f3a:" + _b64('{"pk":"s-1"}') + "==",  # padding
        "session-expiry:0f3a:" + _b64('{"pk":"s-1"}') + ":x",
        "session-expiry:0f3a:" + _b64('{"pk": "s-1"}'),  # not compact
        "session-expiry:0f3a:" + _b64('{"sk":"b","pk":"a"}'),  # not sorted
        "session-expiry:0f3a:" + _b64('{"pk":"s-1","pk":"s-2"}'),  # duplicate key
        "session-expiry:0f3a:" + _b64('"s-1"'),
        "session-expiry:0f3a:" + _b64("[]"),
        "session-expiry:0f3a:" + _b64("{}"),
        "session-expiry:0f3a:" + _b64('{"pk":1}'),
        "session-expiry:0f3a:" + _b64('{"pk":null}'),
        "session-expiry:0f3a:" + _b64("[" * 150),
        "session-expiry:0f3a:" + _b64('{"pk":"\\u00e9"}'),  # escaped, not the UTF-8 form
        "session-expiry:0f3a:" + base64.urlsafe_b64encode(b"\xff\xfe{}").decode().rstrip("="),
        "session-expiry:0f3a:eyJwayI6InMtMSJ",  # truncated
        "session-expiry:0f3a:e",  # impossible base64 length
        "session-expiry:0f3a:eyJwa+I6InMtMSJ9",  # standard, not url-safe, alphabet
        "session-expiry:0f3a:" + _b64('{"pk":"' + "a" * 300 + '"}'),  # > 256 characters
        _GOOD + "\n",
        "session-expiry:0f3a:" + _b64('{"pk":""}'),  # an empty key value names no item
        "session-expiry:0f3a:" + _b64('{"":"s-1"}'),  # nor an empty attribute name
        " " + _GOOD,
    ],
)
def test_parse_refuses_hostile_or_foreign_names(name: object) -> None:
    assert parse_grant_name(name) is None


def test_parse_accepts_the_good_name() -> None:
    assert parse_grant_name(_GOOD) == GrantOwner(key={"pk": "s-1"}, incarnation="0f3a")
    assert json.loads(base64.urlsafe_b64decode(_GOOD.rsplit(":", 1)[1] + "=")) == {"pk": "s-1"}
