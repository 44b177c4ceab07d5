"""Time-to-live rules for sessions: the write guard and the fail-closed "is live" test.

DynamoDB expires an item only when its TTL attribute is a top-level Number holding epoch
**seconds**; a String, a nested value or epoch milliseconds never expires, and even a valid
expired item stays readable and writable until the best-effort deletion runs, typically
within a few days (Amazon DynamoDB Developer Guide, "Working with time to live (TTL)").
So the application decides liveness itself, and fails closed:

* write side (`expiry_from_ttl`, `expiry_from_timestamp`): only a positive
  ``datetime.timedelta`` of at least one second and at most ``max_ttl``, or an absolute
  expiry in the same window, becomes a TTL; everything else is a `ValueError` naming
  the value and the expected unit;
* read side (`is_live`): an item is live only when its TTL is a Number strictly after
  *now* and no further ahead than ``max_ttl`` (plus `CLOCK_SKEW_ALLOWANCE`); a TTL at
  or before now, a missing one, one of another type, or an implausible one (milliseconds,
  zero, negative, beyond the horizon) means expired.

Pure functions only: no AWS calls.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation

#: Longest session lifetime accepted by default (``max_ttl``): one year.
MAX_SESSION_TTL = timedelta(days=365)

#: Session lifetime used when a call gives neither ``ttl`` nor ``expires_at``: one hour.
DEFAULT_SESSION_TTL = timedelta(hours=1)

#: Slack added to the read-side horizon so a writer whose clock runs slightly ahead of the
#: reader's does not make a full-length session look implausible: five minutes.
CLOCK_SKEW_ALLOWANCE = timedelta(minutes=5)

#: Epoch seconds stay below 10**11 until the year 5138; a value in epoch *milliseconds* of any
#: date after March 1973 is at least 10**11 (13 digits today), and DynamoDB never expires it.
#: The one threshold for "this is not epoch seconds" on the write, read and cleanup side.
MILLISECONDS_THRESHOLD = 10**11

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_EXPECTED = "expected a datetime.timedelta, e.g. timedelta(hours=1)"
_EXPECTED_ABS = (
    "expected an aware datetime or an int of epoch seconds (10 digits today), e.g. 1767225600"
)


def now_seconds(now: datetime) -> Decimal:
    """Epoch seconds of an aware ``datetime``, exact to the microsecond.

    Raises:
        ValueError: ``now`` is not an aware ``datetime`` (a naive one has no defined epoch).
    """
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(
            f"clock returned {now!r}: expected an aware datetime, e.g. datetime.now(timezone.utc)"
        )
    # Integer arithmetic on the timedelta avoids float rounding of the microseconds.
    delta = now - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return Decimal(micros) / Decimal(1_000_000)


def horizon_seconds(now: Decimal, max_ttl: timedelta = MAX_SESSION_TTL) -> Decimal:
    """The latest TTL (epoch seconds) a live item may carry: ``now + max_ttl + skew``."""
    return now + Decimal(int((max_ttl + CLOCK_SKEW_ALLOWANCE).total_seconds()))


def validate_max_ttl(max_ttl: object) -> timedelta:
    """Check a ``max_ttl`` setting: a positive ``timedelta`` of at least one second.

    Raises:
        ValueError: anything else; the message names the value.
    """
    if not isinstance(max_ttl, timedelta) or max_ttl < timedelta(seconds=1):
        raise ValueError(f"max_ttl {max_ttl!r}: {_EXPECTED} of at least 1 second")
    return max_ttl


def expiry_from_ttl(ttl: object, *, now: Decimal, max_ttl: timedelta = MAX_SESSION_TTL) -> int:
    """Turn a relative lifetime into the TTL attribute value.

    Args:
        ttl: the session lifetime from ``now``; a ``datetime.timedelta`` between 1 second
            and ``max_ttl``.
        now: current time in epoch seconds (see `now_seconds`).
        max_ttl: the horizon; default `MAX_SESSION_TTL` (one year).

    Returns:
        Epoch seconds (``int``), rounded up to the next whole second.

    Raises:
        ValueError: ``ttl`` is not a ``timedelta`` (a number or a string: the unit would be a
            guess), looks like epoch milliseconds, is zero, negative, shorter than a second,
            or longer than ``max_ttl``. The message names the value and the expected unit.
    """
    if not isinstance(ttl, timedelta):
        if isinstance(ttl, (int, float, Decimal)) and not isinstance(ttl, bool):
            number = Decimal(ttl)
            if number.is_finite() and abs(number) >= MILLISECONDS_THRESHOLD:
                raise ValueError(
                    f"ttl {ttl!r}: looks like epoch milliseconds; {_EXPECTED} "
                    "(or expires_at= with epoch seconds)"
                )
            raise ValueError(
                f"ttl {ttl!r}: a bare number has no unit; {_EXPECTED}{_readings(number)}"
            )
        raise ValueError(f"ttl {ttl!r} ({type(ttl).__name__}): {_EXPECTED}")
    seconds = ttl.total_seconds()
    if seconds <= 0:
        raise ValueError(f"ttl {ttl!r}: must be positive; {_EXPECTED}")
    if seconds < 1:
        raise ValueError(f"ttl {ttl!r}: shorter than 1 second (TTL has 1-second resolution)")
    if ttl > max_ttl:
        hint = " (looks like milliseconds used as seconds)" if seconds >= 1e12 else ""
        raise ValueError(f"ttl {ttl!r}: beyond the horizon max_ttl={max_ttl!r}{hint}; {_EXPECTED}")
    micros = (ttl.days * 86_400 + ttl.seconds) * 1_000_000 + ttl.microseconds
    return math.ceil(now + Decimal(micros) / Decimal(1_000_000))


def _readings(number: Decimal) -> str:
    """What a bare ``ttl`` number would be as seconds and as milliseconds, each in words, so
    the caller picks the one meant (3600000 is 1:00:00 as milliseconds, 41 days as seconds)."""
    if not number.is_finite() or number <= 0:
        return ""
    readings = []
    for unit in ("seconds", "milliseconds"):
        try:
            as_delta = timedelta(**{unit: float(number)})
        except OverflowError:
            continue
        readings.append(f"timedelta({unit}={number}) is {as_delta}")
    return f" ({'; '.join(readings)})" if readings else ""


def expiry_from_timestamp(
    expires_at: object, *, now: Decimal, max_ttl: timedelta = MAX_SESSION_TTL
) -> int:
    """Turn an absolute expiry into the TTL attribute value.

    Args:
        expires_at: an aware ``datetime`` or an ``int`` of epoch **seconds**.
        now: current time in epoch seconds (see `now_seconds`).
        max_ttl: how far ahead of ``now`` it may lie; default `MAX_SESSION_TTL`.

    Returns:
        Epoch seconds (``int``), rounded up to the next whole second.

    Raises:
        ValueError: a string, float, bool, naive datetime, 13-digit (millisecond) value, a
            value at or before ``now``, or beyond ``now + max_ttl``. The message names the
            value and the expected unit.
    """
    if isinstance(expires_at, datetime):
        try:
            value = now_seconds(expires_at)
        except ValueError:
            raise ValueError(
                f"expires_at {expires_at!r}: naive datetime; {_EXPECTED_ABS}"
            ) from None
    elif isinstance(expires_at, int) and not isinstance(expires_at, bool):
        if abs(expires_at) >= MILLISECONDS_THRESHOLD:
            raise ValueError(
                f"expires_at {expires_at!r}: looks like epoch milliseconds "
                f"({len(str(abs(expires_at)))} digits); {_EXPECTED_ABS}"
            )
        value = Decimal(expires_at)
    else:
        raise ValueError(
            f"expires_at {expires_at!r} ({type(expires_at).__name__}): {_EXPECTED_ABS}"
        )
    if value <= now:
        raise ValueError(
            f"expires_at {expires_at!r}: at or before now ({now} epoch seconds); {_EXPECTED_ABS}"
        )
    if value > now + Decimal(int(max_ttl.total_seconds())):
        raise ValueError(
            f"expires_at {expires_at!r}: beyond the horizon now + max_ttl={max_ttl!r}; "
            f"{_EXPECTED_ABS}"
        )
    return math.ceil(value)


def ttl_from_attribute(attribute: Mapping[str, object] | None) -> Decimal | None:
    """The TTL of a low-level DynamoDB AttributeValue (``{"N": "1767225600"}``), or ``None``.

    ``None`` for a missing attribute, any type other than Number, or an unparsable or
    non-finite number: DynamoDB never expires such an item.
    """
    if not isinstance(attribute, Mapping) or set(attribute) != {"N"}:
        return None
    raw = attribute["N"]
    if not isinstance(raw, str):
        return None
    try:
        value = Decimal(raw)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def ttl_epoch_seconds(value: object) -> Decimal | None:
    """Return a decoded TTL value as epoch seconds, or ``None`` if DynamoDB would ignore it.

    Accepted: a finite, non-negative ``int`` or ``Decimal`` (as a deserialised ``N`` comes
    out) below `MILLISECONDS_THRESHOLD`. Rejected: strings (even numeric ones),
    booleans, floats, sets, milliseconds, negatives, ``None``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        return None
    number = Decimal(value)
    if not number.is_finite() or number < 0 or number >= MILLISECONDS_THRESHOLD:
        return None
    return number


def is_live(
    ttl: Decimal | int | None, *, now: Decimal, max_ttl: timedelta = MAX_SESSION_TTL
) -> bool:
    """Whether a session with this TTL (epoch seconds) is live at ``now``. Fails closed.

    Live only when ``now < ttl <= now + max_ttl + CLOCK_SKEW_ALLOWANCE``. ``None`` (missing
    or not a Number), a TTL at or before ``now``, zero, negative, milliseconds, or beyond
    the horizon all mean expired.
    """
    if ttl is None or isinstance(ttl, bool):
        return False
    value = Decimal(ttl)
    if value <= 0 or value >= MILLISECONDS_THRESHOLD:
        return False
    return now < value <= horizon_seconds(now, max_ttl)
