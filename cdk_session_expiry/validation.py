"""Early validation of SessionExpiry props.

Every check skips values that are CDK tokens (``Token.is_unresolved``): their value is only
known at deploy time. Every error is a ``ValueError`` whose message names the prop, the bad
value and what is expected.
"""

from __future__ import annotations

from aws_cdk import Duration, Token

#: DynamoDB attribute names are 1..255 bytes (DynamoDB developer guide, "Naming rules").
_MAX_ATTRIBUTE_NAME_BYTES = 255


def is_token(value: object) -> bool:
    """True when ``value`` (a str, number or Duration) is unresolved until deployment."""
    if isinstance(value, Duration):
        return Token.is_unresolved(value.to_string())
    return Token.is_unresolved(value)


def check_int_range(name: str, value: int, *, minimum: int, maximum: int) -> None:
    """Reject a whole number outside ``minimum..maximum`` (inclusive).

    Raises:
        ValueError: ``value`` is not an integer, or lies outside the range.
    """
    if is_token(value):
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}={value!r}: expected a whole number in {minimum}..{maximum}")
    if not minimum <= value <= maximum:
        raise ValueError(f"{name}={value}: expected a whole number in {minimum}..{maximum}")


def check_duration_range(
    name: str, value: Duration, *, minimum: Duration, maximum: Duration, whole: str = "seconds"
) -> None:
    """Reject a Duration outside ``minimum..maximum`` (inclusive) or not a whole ``whole`` unit.

    ``whole`` is ``"seconds"`` or ``"days"``: the unit the AWS API takes, so that a value CDK
    would have to round (e.g. 1.5 days for an S3 expiration) is rejected instead.

    Raises:
        ValueError: ``value`` is out of range or not a whole number of ``whole``.
    """
    if is_token(value):
        return
    seconds = value.to_seconds(integral=False)
    if whole == "days" and seconds % 86_400 != 0:
        raise ValueError(f"{name}={value.to_human_string()}: expected a whole number of days")
    if seconds != int(seconds):
        raise ValueError(f"{name}={value.to_human_string()}: expected a whole number of seconds")
    if not minimum.to_seconds() <= seconds <= maximum.to_seconds():
        raise ValueError(
            f"{name}={value.to_human_string()}: expected between "
            f"{minimum.to_human_string()} and {maximum.to_human_string()}"
        )


def check_duration_below(name: str, value: Duration, *, minimum: Duration, limit: Duration) -> None:
    """Reject a Duration below ``minimum`` or at/above ``limit`` (exclusive upper bound).

    Raises:
        ValueError: ``value`` is outside ``[minimum, limit)``.
    """
    if is_token(value):
        return
    seconds = value.to_seconds(integral=False)
    if not minimum.to_seconds() <= seconds < limit.to_seconds():
        raise ValueError(
            f"{name}={value.to_human_string()}: expected at least {minimum.to_human_string()} "
            f"and less than {limit.to_human_string()}"
        )


def check_attribute_name(name: str, value: str) -> None:
    """Reject an empty or over-long DynamoDB top-level attribute name.

    Raises:
        ValueError: ``value`` is empty, longer than 255 bytes, or has surrounding whitespace.
    """
    if is_token(value):
        return
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name}={value!r}: expected a non-empty DynamoDB attribute name")
    if value != value.strip():
        raise ValueError(f"{name}={value!r}: expected no leading or trailing whitespace")
    if len(value.encode("utf-8")) > _MAX_ATTRIBUTE_NAME_BYTES:
        raise ValueError(
            f"{name}={value!r}: expected at most {_MAX_ATTRIBUTE_NAME_BYTES} bytes (UTF-8)"
        )


def check_distinct_attribute_names(names: dict[str, str | None]) -> None:
    """Reject two props that name the same attribute (e.g. TTL attribute == partition key).

    ``names`` maps prop name to attribute name; ``None`` and tokens are ignored.

    Raises:
        ValueError: two props share one attribute name.
    """
    seen: dict[str, str] = {}
    for prop, attribute in names.items():
        if attribute is None or is_token(attribute):
            continue
        if attribute in seen:
            raise ValueError(
                f"{prop}={attribute!r} is also {seen[attribute]}: expected a distinct "
                "attribute name for each role"
            )
        seen[attribute] = prop


def check_non_empty_name(name: str, value: str) -> None:
    """Reject an empty string (e.g. a metrics namespace).

    Raises:
        ValueError: ``value`` is empty or only whitespace.
    """
    if is_token(value):
        return
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name}={value!r}: expected a non-empty string")
