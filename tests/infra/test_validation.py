"""Every rejected prop value raises a ValueError naming the value, before any resource exists."""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest
from aws_cdk import App, CfnParameter, Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from cdk_session_expiry import PropTypeError, SessionExpiry


@pytest.fixture
def stack() -> Stack:
    return Stack(App(), "Validation")


def _fails(stack: Stack, match: str, **props: Any) -> None:
    with pytest.raises(ValueError, match=match):
        SessionExpiry(stack, "Sessions", **props)


def _table(stack: Stack, **overrides: Any) -> dynamodb.Table:
    props: dict[str, Any] = {
        "partition_key": dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        "time_to_live_attribute": "expiresAt",
        "stream": dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        **overrides,
    }
    return dynamodb.Table(stack, "Own", **props)


# --- event source mapping -------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 10_001, -1])
def test_fails_batch_size_out_of_range(stack: Stack, value: int) -> None:
    _fails(stack, rf"batch_size={value}: expected a whole number in 1\.\.10000", batch_size=value)


@pytest.mark.parametrize("value", [1.5, True])
def test_fails_batch_size_not_a_whole_number(stack: Stack, value: Any) -> None:
    _fails(stack, rf"batch_size={value!r}: expected a whole number", batch_size=value)


@pytest.mark.parametrize(
    ("value", "shown"),
    [(Duration.seconds(301), "5 minutes 1 second"), (Duration.minutes(6), "6 minutes")],
)
def test_fails_max_batching_window_above_300_seconds(
    stack: Stack, value: Duration, shown: str
) -> None:
    _fails(
        stack,
        f"max_batching_window={shown}: expected between 0 seconds and 5 minutes",
        max_batching_window=value,
    )


def test_fails_max_batching_window_fraction_of_a_second(stack: Stack) -> None:
    _fails(
        stack,
        "max_batching_window=1 second 500 millis: expected a whole number of seconds",
        max_batching_window=Duration.millis(1500),
    )


@pytest.mark.parametrize("value", [0, 11])
def test_fails_parallelization_factor_out_of_range(stack: Stack, value: int) -> None:
    _fails(
        stack,
        rf"parallelization_factor={value}: expected a whole number in 1\.\.10",
        parallelization_factor=value,
    )


@pytest.mark.parametrize("value", [-1, 10_001])
def test_fails_retry_attempts_infinite_or_too_many(stack: Stack, value: int) -> None:
    _fails(
        stack,
        rf"retry_attempts={value}: expected a whole number in 0\.\.10000",
        retry_attempts=value,
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (Duration.seconds(59), "59 seconds"),
        (Duration.hours(25), "1 day 1 hour"),
        (Duration.days(7), "7 days"),
    ],
)
def test_fails_max_record_age_outside_60_seconds_to_24_hours(
    stack: Stack, value: Duration, shown: str
) -> None:
    _fails(
        stack,
        f"max_record_age={shown}: expected between 1 minute and 1 day",
        max_record_age=value,
    )


def test_fails_event_filter_not_an_enum_member(stack: Stack) -> None:
    _fails(
        stack,
        re.escape(
            "event_filter='ALL_REMOVES': expected a CleanupEventFilter member, e.g. "
            "CleanupEventFilter.ALL_REMOVES (from cdk_session_expiry import CleanupEventFilter)"
        ),
        event_filter="ALL_REMOVES",
    )


def test_tokens_are_not_validated(stack: Stack) -> None:
    batch = CfnParameter(stack, "Batch", type="Number")
    sessions = SessionExpiry(stack, "Sessions", batch_size=Token.as_number(batch.value_as_number))
    assert sessions.event_source_mapping is not None


# --- cleanup function -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"), [(Duration.minutes(16), "16 minutes"), (Duration.seconds(0), "0 seconds")]
)
def test_fails_cleanup_timeout_outside_1_second_to_15_minutes(
    stack: Stack, value: Duration, shown: str
) -> None:
    _fails(
        stack,
        f"cleanup_timeout={shown}: expected between 1 second and 15 minutes",
        cleanup_timeout=value,
    )


@pytest.mark.parametrize("value", [127, 10_241])
def test_fails_cleanup_memory_size_out_of_range(stack: Stack, value: int) -> None:
    _fails(
        stack,
        rf"cleanup_memory_size={value}: expected a whole number in 128\.\.10240",
        cleanup_memory_size=value,
    )


@pytest.mark.parametrize("value", [0, 65])
def test_fails_max_workers_out_of_range(stack: Stack, value: int) -> None:
    _fails(stack, rf"max_workers={value}: expected a whole number in 1\.\.64", max_workers=value)


@pytest.mark.parametrize("value", ["", "  "])
def test_fails_metrics_namespace_empty(stack: Stack, value: str) -> None:
    _fails(
        stack,
        f"metrics_namespace={value!r}: expected a non-empty string",
        metrics_namespace=value,
    )


# --- alarms ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"), [(Duration.hours(24), "1 day"), (Duration.seconds(30), "30 seconds")]
)
def test_fails_alarm_iterator_age_threshold_not_below_stream_retention(
    stack: Stack, value: Duration, shown: str
) -> None:
    _fails(
        stack,
        f"alarm_iterator_age_threshold={shown}: expected at least 1 minute and less than 1 day",
        alarm_iterator_age_threshold=value,
    )


# --- scratch root and lifecycle -------------------------------------------------------------


@pytest.mark.parametrize(
    ("root", "reason"),
    [
        ("", "not an empty prefix"),
        ("/sessions/", "without a leading '/'"),
        ("sessions/*", "'\\*' is a wildcard"),
        ("sess?ions/", "'\\?' is a wildcard"),
        ("${aws:username}/", "'\\$' is an IAM policy variable marker"),
        ("sessions", "expected a prefix ending in '/', e.g. 'sessions/'"),
        ("app//sessions/", "without empty, '.' or '..' path segments"),
        ("../sessions/", "without empty, '.' or '..' path segments"),
        ("sessions\n/", "without control characters"),
        ("s" * 256 + "/", "expected at most 256 bytes"),
    ],
)
def test_fails_scratch_root(stack: Stack, root: str, reason: str) -> None:
    bucket = s3.Bucket(stack, "Scratch")
    _fails(
        stack,
        re.escape(f"scratch_root={root!r}") + ".*" + reason,
        scratch_bucket=bucket,
        scratch_root=root,
    )


def test_fails_scratch_root_without_scratch_bucket(stack: Stack) -> None:
    _fails(stack, "scratch_root='tmp/' is set without scratch_bucket", scratch_root="tmp/")


@pytest.mark.parametrize(
    ("value", "shown", "expected"),
    [
        (Duration.hours(36), "1 day 12 hours", "expected a whole number of days"),
        (Duration.days(0), "0 days", "expected between 1 day and"),
    ],
)
def test_fails_scratch_retention(stack: Stack, value: Duration, shown: str, expected: str) -> None:
    bucket = s3.Bucket(stack, "Scratch")
    _fails(
        stack,
        f"scratch_retention={shown}: {expected}",
        scratch_bucket=bucket,
        scratch_retention=value,
    )


def test_fails_scratch_retention_without_scratch_bucket(stack: Stack) -> None:
    _fails(
        stack,
        "scratch_retention=.* is set without scratch_bucket",
        scratch_retention=Duration.days(3),
    )


# --- attribute names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prop", "value", "expected"),
    [
        ("partition_key_name", "", "expected a non-empty DynamoDB attribute name"),
        ("time_to_live_attribute", " expiresAt", "expected no leading or trailing whitespace"),
        ("connection_id_attribute", "c" * 256, "expected at most 255 bytes"),
        ("sort_key_name", "", "expected a non-empty DynamoDB attribute name"),
    ],
)
def test_fails_attribute_name(stack: Stack, prop: str, value: str, expected: str) -> None:
    _fails(stack, re.escape(f"{prop}={value!r}: {expected}"), **{prop: value})


def test_fails_two_roles_sharing_one_attribute(stack: Stack) -> None:
    _fails(
        stack,
        "grant_id_attribute='connectionId' is also connection_id_attribute: expected a "
        "distinct attribute name",
        grant_id_attribute="connectionId",
    )


def test_fails_the_tenant_as_the_partition_key_without_a_sort_key(stack: Stack) -> None:
    # The tenant may be the partition key only with a sort key (the session id): the message
    # names the prop that makes it valid, not only the clash.
    _fails(
        stack,
        re.escape(
            "tenant_attribute='pk' is also partition_key_name, on a table without a sort key: "
            "expected sort_key_name (the session id, e.g. 'sessionId')"
        ),
        tenant_attribute="pk",
    )


def test_the_tenant_may_be_the_partition_key_of_a_table_with_a_sort_key(stack: Stack) -> None:
    # The schema that binds the tenant segment to the record's keys (docs/concepts.md, "The tenant
    # segment"): partition = tenant, sort key = session id.
    sessions = SessionExpiry(
        stack,
        "Tenants",
        partition_key_name="tenantId",
        sort_key_name="sessionId",
        tenant_attribute="tenantId",
        tenant_scoped_scratch=True,
        scratch_bucket=s3.Bucket(stack, "Scratch"),
    )
    env = sessions.session_environment()
    assert env["SESSION_EXPIRY_TENANT_ATTRIBUTE"] == env["SESSION_EXPIRY_PARTITION_KEY"]
    assert env["SESSION_EXPIRY_SORT_KEY"] == "sessionId"


def test_fails_the_tenant_as_the_sort_key(stack: Stack) -> None:
    _fails(
        stack,
        "tenant_attribute='sk' is also sort_key_name: expected a distinct attribute name",
        sort_key_name="sk",
        tenant_attribute="sk",
    )


# --- existing tables ------------------------------------------------------------------------


def test_fails_table_without_stream(stack: Stack) -> None:
    table = _table(stack, stream=None)
    _fails(
        stack,
        "table Validation/Own has no stream: expected stream=StreamViewType.NEW_AND_OLD_IMAGES",
        table=table,
    )


def test_fails_imported_table_without_stream_arn(stack: Stack) -> None:
    table = dynamodb.Table.from_table_name(stack, "Imported", "sessions")
    _fails(
        stack, "table Validation/Imported has no stream: expected .*table_stream_arn", table=table
    )


@pytest.mark.parametrize(
    "view_type", [dynamodb.StreamViewType.KEYS_ONLY, dynamodb.StreamViewType.NEW_IMAGE]
)
def test_fails_table_stream_without_old_images(
    stack: Stack, view_type: dynamodb.StreamViewType
) -> None:
    table = _table(stack, stream=view_type)
    _fails(
        stack,
        f"stream view type {view_type.value}: expected NEW_AND_OLD_IMAGES",
        table=table,
    )


def test_fails_table_without_time_to_live(stack: Stack) -> None:
    table = _table(stack, time_to_live_attribute=None)
    _fails(
        stack,
        "table Validation/Own has no time to live: expected time_to_live_attribute='expiresAt'",
        table=table,
    )


@pytest.mark.parametrize(
    ("prop", "value", "actual"),
    [
        ("partition_key_name", "id", "pk"),
        ("sort_key_name", "sk", None),
        ("time_to_live_attribute", "ttl", "expiresAt"),
    ],
)
def test_fails_table_names_that_do_not_match_the_table(
    stack: Stack, prop: str, value: str, actual: str | None
) -> None:
    table = _table(stack)
    _fails(
        stack,
        re.escape(f"{prop}={value!r} does not match table Validation/Own: expected {actual!r}"),
        table=table,
        **{prop: value},
    )


@pytest.mark.parametrize(
    ("prop", "value"),
    [
        ("removal_policy", RemovalPolicy.DESTROY),
        ("deletion_protection", True),
        ("table_encryption_key", None),
    ],
)
def test_fails_table_only_props_with_an_existing_table(stack: Stack, prop: str, value: Any) -> None:
    table = _table(stack)
    if prop == "table_encryption_key":
        value = kms.Key(stack, "Key")
    _fails(
        stack,
        f"{prop}=.* applies only to a table the construct creates",
        table=table,
        **{prop: value},
    )


def test_table_with_old_image_stream_is_accepted(stack: Stack) -> None:
    table = _table(stack, stream=dynamodb.StreamViewType.OLD_IMAGE)
    assert SessionExpiry(stack, "Sessions", table=table).table is table


def _table_v2(stack: Stack, **overrides: Any) -> dynamodb.TableV2:
    props: dict[str, Any] = {
        "partition_key": dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
        "sort_key": dynamodb.Attribute(name="started", type=dynamodb.AttributeType.STRING),
        "time_to_live_attribute": "exp",
        "dynamo_stream": dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
        **overrides,
    }
    return dynamodb.TableV2(stack, "OwnV2", **props)


def test_table_v2_supplies_its_key_and_ttl_names(stack: Stack) -> None:
    sessions = SessionExpiry(stack, "Sessions", table=_table_v2(stack))
    assert (
        sessions.partition_key_name,
        sessions.sort_key_name,
        sessions.time_to_live_attribute,
    ) == ("id", "started", "exp")


def test_fails_table_v2_stream_without_old_images(stack: Stack) -> None:
    table = _table_v2(stack, dynamo_stream=dynamodb.StreamViewType.KEYS_ONLY)
    _fails(stack, "stream view type KEYS_ONLY: expected NEW_AND_OLD_IMAGES", table=table)


def test_fails_table_v2_without_stream(stack: Stack) -> None:
    table = _table_v2(stack, dynamo_stream=None)
    _fails(stack, "table Validation/OwnV2 has no stream", table=table)


# --- types ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prop", "value", "expected"),
    [
        ("max_record_age", 3600, "3600: expected a Duration"),
        ("cleanup_timeout", 300, "300: expected a Duration"),
        ("scratch_retention", 7, "7: expected a Duration"),
        ("expiry_sweep_interval", "5 minutes", "'5 minutes': expected a Duration"),
        ("grant_key", "arn:aws:kms:us-east-1:123456789012:key/x", "expected a kms.IKey"),
        ("websocket_stage", "BUCKET", "expected an apigatewayv2.IWebSocketStage"),
        ("alarm_actions", "arn:aws:sns:us-east-1:123456789012:t", "expected a list of"),
        ("tenant_scoped_scratch", "false", "'false': expected True or False"),
        ("removal_policy", "retain", "'retain': expected a RemovalPolicy"),
    ],
)
def test_fails_prop_of_the_wrong_type(stack: Stack, prop: str, value: Any, expected: str) -> None:
    with pytest.raises(PropTypeError, match=f"^{prop}=.*" + re.escape(expected)) as raised:
        SessionExpiry(stack, "Sessions", **{prop: value})
    assert isinstance(raised.value, TypeError) and isinstance(raised.value, ValueError)


def _props_annotated(*kinds: str) -> list[str]:
    """The keyword-only props of ``SessionExpiry`` whose annotation names one of ``kinds``."""
    parameters = inspect.signature(SessionExpiry.__init__).parameters.values()
    return [
        p.name
        for p in parameters
        if p.kind is p.KEYWORD_ONLY
        and set(re.findall(r"[A-Za-z_.]+", str(p.annotation))) & set(kinds)
    ]


INT_PROPS = _props_annotated("int")
#: ``feature_flags`` takes a bool or its options class: its own test below.
BOOL_PROPS = [p for p in _props_annotated("bool") if p != "feature_flags"]
DURATION_PROPS = _props_annotated("Duration")


def test_the_typed_props_are_found() -> None:
    assert "batch_size" in INT_PROPS and "cleanup_reserved_concurrency" in INT_PROPS
    assert "cleanup_enabled" in BOOL_PROPS and "max_record_age" in DURATION_PROPS
    assert "archive_query" in BOOL_PROPS  # issue 24
    # issue 38: expiry_sweep_shards, expiry_sweep_workers, expiry_sweeper_memory_size and
    # grant_key_grant_quota; issue 36: tool_session_sweep_interval; grant_retire_budget
    assert (len(INT_PROPS), len(BOOL_PROPS), len(DURATION_PROPS)) == (12, 12, 14)


def test_fails_on_a_str_for_feature_flags_with_a_prop_type_error(stack: Stack) -> None:
    with pytest.raises(PropTypeError) as raised:
        SessionExpiry(stack, "Sessions", feature_flags="true")  # type: ignore[arg-type]
    assert str(raised.value) == (
        "feature_flags='true': expected True, False or FeatureFlags(...) "
        "(from cdk_session_expiry import FeatureFlags)"
    )


@pytest.mark.parametrize("prop", INT_PROPS)
def test_fails_on_a_str_for_an_int_prop_with_a_prop_type_error(stack: Stack, prop: str) -> None:
    with pytest.raises(PropTypeError) as raised:
        SessionExpiry(stack, "Sessions", **{prop: "100"})
    assert str(raised.value) == f"{prop}='100': expected a whole number (an int), e.g. 100"


@pytest.mark.parametrize("prop", INT_PROPS)
def test_fails_on_a_bool_or_a_float_for_an_int_prop(stack: Stack, prop: str) -> None:
    for value in (True, 100.0):
        with pytest.raises(PropTypeError, match=rf"^{prop}={value!r}: expected a whole number"):
            SessionExpiry(stack, f"Sessions{value}", **{prop: value})


@pytest.mark.parametrize("prop", BOOL_PROPS)
def test_fails_on_a_str_for_a_bool_prop_with_a_prop_type_error(stack: Stack, prop: str) -> None:
    with pytest.raises(PropTypeError) as raised:
        SessionExpiry(stack, "Sessions", **{prop: "true"})
    assert str(raised.value) == f"{prop}='true': expected True or False (a bool)"


@pytest.mark.parametrize("prop", DURATION_PROPS)
def test_fails_on_a_number_for_a_duration_prop_with_a_prop_type_error(
    stack: Stack, prop: str
) -> None:
    with pytest.raises(PropTypeError) as raised:
        SessionExpiry(stack, "Sessions", **{prop: 3600})
    assert str(raised.value) == f"{prop}=3600: expected a Duration, e.g. Duration.hours(6)"


def test_a_number_token_is_accepted_for_an_int_prop(stack: Stack) -> None:
    size = CfnParameter(stack, "BatchSize", type="Number", default=100).value_as_number
    sessions = SessionExpiry(stack, "Sessions", batch_size=size)
    assert sessions.event_source_mapping is not None


def test_check_int_range_raises_a_prop_type_error_for_a_str() -> None:
    from cdk_session_expiry.validation import check_int_range

    with pytest.raises(PropTypeError, match=r"^batch_size='7': expected a whole number \(an int\)"):
        check_int_range("batch_size", "7", minimum=1, maximum=10)  # type: ignore[arg-type]


def test_fails_a_bucket_given_as_websocket_stage_names_the_bucket_by_path(stack: Stack) -> None:
    bucket = s3.Bucket(stack, "Scratch")
    _fails(
        stack,
        r"^websocket_stage=<Bucket Validation/Scratch>: expected an apigatewayv2\.IWebSocketStage",
        websocket_stage=bucket,
    )


def test_fails_table_only_prop_with_an_existing_table_names_the_key_by_path(stack: Stack) -> None:
    key = kms.Key(stack, "TableKey")
    _fails(
        stack,
        r"^table_encryption_key=<Key Validation/TableKey> applies only to a table the construct",
        table=_table(stack),
        table_encryption_key=key,
    )


def test_fails_scratch_retention_without_bucket_shows_the_duration(stack: Stack) -> None:
    _fails(
        stack,
        r"^scratch_retention=3 days is set without scratch_bucket",
        scratch_retention=Duration.days(3),
    )


def test_fails_tenant_scoped_scratch_without_bucket(stack: Stack) -> None:
    _fails(
        stack,
        r"^tenant_scoped_scratch=True is set without scratch_bucket",
        tenant_scoped_scratch=True,
    )


@pytest.mark.parametrize(
    ("method", "kwargs", "match"),
    [
        ("metric_sessions_cleaned", {"reason": "bogus"}, r"^reason='bogus': expected one of 'ttl'"),
        ("metric_cleanup_failures", {"action": "Delete"}, r"^action='Delete': expected one of"),
        ("metric_records_skipped", {"cause": "no-old-image"}, r"^cause='no-old-image': expected"),
    ],
)
def test_fails_metric_for_a_dimension_value_the_runtime_never_emits(
    stack: Stack, method: str, kwargs: dict[str, str], match: str
) -> None:
    sessions = SessionExpiry(stack, "Sessions")
    with pytest.raises(ValueError, match=match):
        getattr(sessions, method)(**kwargs)
