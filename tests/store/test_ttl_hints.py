"""A bare number as ``ttl`` is refused with both readings spelled out, so a value meant as
milliseconds is not "fixed" into a 1,000 times longer session."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from session_expiry_runtime.core.ttl import expiry_from_ttl

NOW = Decimal(1_767_225_600)


def test_fails_for_an_hour_in_milliseconds_and_names_the_millisecond_reading() -> None:
    with pytest.raises(ValueError) as caught:
        expiry_from_ttl(3_600_000, now=NOW)
    message = str(caught.value)
    assert "timedelta(milliseconds=3600000) is 1:00:00" in message
    # The seconds reading is shown for what it is (41 days), not offered as the fix.
    assert "timedelta(seconds=3600000) is 41 days, 16:00:00" in message
    assert "if you meant seconds" not in message


def test_fails_for_an_hour_in_seconds_and_names_the_seconds_reading() -> None:
    with pytest.raises(ValueError, match=re.escape("timedelta(seconds=3600) is 1:00:00")):
        expiry_from_ttl(3600, now=NOW)


@pytest.mark.parametrize("value", [0, -5, Decimal("NaN")])
def test_fails_for_a_number_with_no_positive_reading_without_readings(value: object) -> None:
    with pytest.raises(ValueError) as caught:
        expiry_from_ttl(value, now=NOW)
    assert "is " not in str(caught.value).split("timedelta(hours=1)", 1)[1]
