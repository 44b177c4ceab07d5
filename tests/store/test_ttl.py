"""The pure TTL rules: write guard and fail-closed liveness, no AWS calls."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest
from session_expiry_runtime.core.ttl import (
    CLOCK_SKEW_ALLOWANCE,
    MAX_SESSION_TTL,
    expiry_from_timestamp,
    expiry_from_ttl,
    is_live,
    now_seconds,
    ttl_from_attribute,
)

from ._support import T0, T0_EPOCH

NOW = Decimal(T0_EPOCH)


def test_now_seconds_is_exact_epoch_seconds() -> None:
    assert now_seconds(T0) == T0_EPOCH
    assert now_seconds(T0 + timedelta(microseconds=250_000)) == Decimal("1767225600.25")
    other_zone = T0.astimezone(timezone(timedelta(hours=-5)))
    assert now_seconds(other_zone) == T0_EPOCH


@pytest.mark.parametrize(
    ("ttl", "live"),
    [
        (T0_EPOCH, False),  # exactly now: expired (DynamoDB may delete it from now on)
        (T0_EPOCH - 1, False),
        (T0_EPOCH + 1, True),
        (None, False),  # missing or not a Number
        (0, False),
        (-5, False),
        (T0_EPOCH * 1000, False),  # milliseconds
        (T0_EPOCH + int((MAX_SESSION_TTL + CLOCK_SKEW_ALLOWANCE).total_seconds()), True),
        (T0_EPOCH + int((MAX_SESSION_TTL + CLOCK_SKEW_ALLOWANCE).total_seconds()) + 1, False),
    ],
)
def test_is_live_boundaries(ttl: int | None, live: bool) -> None:
    assert is_live(ttl, now=NOW) is live


def test_is_live_compares_with_sub_second_now() -> None:
    assert is_live(T0_EPOCH + 1, now=NOW + Decimal("0.5")) is True
    assert is_live(T0_EPOCH, now=NOW - Decimal("0.5")) is True
    assert is_live(T0_EPOCH, now=NOW + Decimal("0.5")) is False


@pytest.mark.parametrize(
    "attribute",
    [None, {"S": str(T0_EPOCH + 60)}, {"N": "abc"}, {"NS": ["1"]}, {"N": "NaN"}, {"L": []}, "x"],
)
def test_ttl_from_attribute_rejects_non_numbers(attribute: object) -> None:
    assert ttl_from_attribute(attribute) is None  # type: ignore[arg-type]


def test_ttl_from_attribute_reads_numbers() -> None:
    assert ttl_from_attribute({"N": "1767225660"}) == 1_767_225_660
    assert ttl_from_attribute({"N": "1767225660.5"}) == Decimal("1767225660.5")


def test_expiry_from_ttl_rounds_up_to_whole_seconds() -> None:
    assert expiry_from_ttl(timedelta(hours=1), now=NOW) == T0_EPOCH + 3600
    assert expiry_from_ttl(timedelta(seconds=1), now=NOW + Decimal("0.2")) == T0_EPOCH + 2
    assert expiry_from_ttl(MAX_SESSION_TTL, now=NOW) == T0_EPOCH + 365 * 86_400


def test_expiry_from_timestamp_accepts_seconds_and_aware_datetimes() -> None:
    assert expiry_from_timestamp(T0_EPOCH + 60, now=NOW) == T0_EPOCH + 60
    assert expiry_from_timestamp(T0 + timedelta(minutes=1), now=NOW) == T0_EPOCH + 60


@pytest.mark.parametrize(
    ("value", "expected_in_message"),
    [
        (1_767_225_600_000, "milliseconds"),
        (3600, "no unit"),
        (3600.0, "no unit"),
        ("3600", "timedelta"),
        ("PT1H", "timedelta"),
        (True, "timedelta"),
        (timedelta(seconds=-1), "positive"),
        (timedelta(0), "positive"),
        (timedelta(milliseconds=500), "1 second"),
        (MAX_SESSION_TTL + timedelta(seconds=1), "horizon"),
        (timedelta(seconds=1_767_225_600_000), "milliseconds"),
    ],
)
def test_fails_ttl_guard(value: object, expected_in_message: str) -> None:
    with pytest.raises(ValueError) as info:
        expiry_from_ttl(value, now=NOW)
    message = str(info.value)
    assert repr(value) in message
    assert expected_in_message in message
    assert "timedelta" in message or "second" in message  # the expected unit


@pytest.mark.parametrize(
    ("value", "expected_in_message"),
    [
        (1_767_225_660_000, "milliseconds"),
        ("1767225660", "epoch seconds"),
        (1767225660.0, "epoch seconds"),
        (False, "epoch seconds"),
        (datetime(2026, 1, 1, 0, 1), "naive"),
        (T0_EPOCH, "at or before now"),
        (T0_EPOCH - 1, "at or before now"),
        (-1, "at or before now"),
        (T0_EPOCH + 366 * 86_400, "horizon"),
    ],
)
def test_fails_expires_at_guard(value: object, expected_in_message: str) -> None:
    with pytest.raises(ValueError) as info:
        expiry_from_timestamp(value, now=NOW)
    message = str(info.value)
    assert repr(value) in message
    assert expected_in_message in message
    assert "epoch seconds" in message


def test_fails_naive_clock() -> None:
    naive = datetime(2026, 1, 1)
    with pytest.raises(ValueError, match="aware datetime") as info:
        now_seconds(naive)
    assert repr(naive) in str(info.value)


def test_fails_non_finite_float_ttl() -> None:
    with pytest.raises(ValueError, match="nan"):
        expiry_from_ttl(float("nan"), now=NOW)
