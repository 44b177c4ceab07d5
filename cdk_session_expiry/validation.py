"""Early validation of SessionExpiry props.

Every check skips values that are CDK tokens (``Token.is_unresolved``): their value is only
known at deploy time. Every error is a ``ValueError`` (a value of the wrong type is a
[`PropTypeError`][cdk_session_expiry.PropTypeError], also a ``TypeError``) whose message names the
prop, the bad value and
what is expected.
"""

from __future__ import annotations

import keyword
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from . import _runtime_contract as contract
from .filters import CleanupEventFilter, passes_library_deletes

#: DynamoDB attribute names are 1..255 bytes (DynamoDB developer guide, "Naming rules").
_MAX_ATTRIBUTE_NAME_BYTES = 255
#: DynamoDB Streams keeps records for 24 hours: older limits are meaningless.
STREAM_RETENTION = Duration.hours(24)
MAX_WORKERS_LIMIT = 64
_VIEW_TYPES_WITH_OLD_IMAGES = {"NEW_AND_OLD_IMAGES", "OLD_IMAGE"}


def shown(value: object) -> str:
    """How a prop value appears in an error: a Duration in words, a construct by its path."""
    if isinstance(value, Duration):
        return value.to_human_string()
    path = getattr(getattr(value, "node", None), "path", None)
    if isinstance(path, str):  # a construct
        return f"<{type(value).__name__} {path}>"
    return repr(value)


def _has(*attributes: str) -> Callable[[object], bool]:
    # jsii interfaces (IKey, IBucket, ...) are not runtime-checkable: look for their members.
    return lambda value: all(hasattr(value, a) for a in attributes)


def _is(kind: type) -> Callable[[object], bool]:
    return lambda value: isinstance(value, kind)


def _alarm_actions(value: object) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, (str, bytes))
        and all(hasattr(a, "bind") for a in value)
    )


def _breaker_alarms(value: object) -> bool:
    # Imported here: circuit_breaker imports this module.
    from .switches.circuit_breaker import CircuitBreakerAlarm

    return (
        isinstance(value, Sequence)
        and not isinstance(value, (str, bytes))
        and all(isinstance(a, CircuitBreakerAlarm) for a in value)
    )


def _whole_number(value: object) -> bool:
    # bool is an int in Python, but True is no batch size; a CDK number token is a float, a
    # finite one (NaN and infinity are no JSON: asking jsii about them crashes its kernel).
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return math.isfinite(value) and Token.is_unresolved(value)
    return isinstance(value, int)


_DURATION = ("a Duration, e.g. Duration.hours(6)", _is(Duration))
_BOOL = ("True or False (a bool)", _is(bool))
_INT = ("a whole number (an int), e.g. 100", _whole_number)
_BUCKET = ("an s3.IBucket", _has("bucket_arn", "bucket_name"))
_KEY = ("a kms.IKey", _has("key_arn", "key_id"))

#: What each typed prop of ``SessionExpiry`` must be (``None`` is always left to the prop's
#: default): a description for the error and a test.
PROP_TYPES: Mapping[str, tuple[str, Callable[[object], bool]]] = {
    "table": ("a dynamodb.ITable", _has("table_name", "table_arn")),
    "table_encryption_key": _KEY,
    "removal_policy": ("a RemovalPolicy, e.g. RemovalPolicy.RETAIN", _is(RemovalPolicy)),
    "deletion_protection": _BOOL,
    "cleanup_timeout": _DURATION,
    "cleanup_memory_size": _INT,
    "max_workers": _INT,
    "batch_size": _INT,
    "parallelization_factor": _INT,
    "retry_attempts": _INT,
    "cleanup_reserved_concurrency": _INT,
    "expiry_sweep_reserved_concurrency": _INT,
    "cleanup_log_retention": ("a logs.RetentionDays member", _is(logs.RetentionDays)),
    "max_batching_window": _DURATION,
    "max_record_age": _DURATION,
    "failure_queue": ("an sqs.IQueue", _has("queue_arn", "queue_url")),
    "websocket_stage": ("an apigatewayv2.IWebSocketStage", _has("api", "stage_name")),
    "grant_key": _KEY,
    "grant_sweep_interval": _DURATION,
    "grant_key_grant_quota": _INT,
    "grant_retire_budget": _INT,
    "tool_session_sweep_interval": _DURATION,
    "scratch_bucket": _BUCKET,
    "tenant_scoped_scratch": _BOOL,
    "scratch_retention": _DURATION,
    "alarm_iterator_age_threshold": _DURATION,
    "alarm_actions": ("a list of cloudwatch.IAlarmAction, e.g. [SnsAction(topic)]", _alarm_actions),
    "alarm_skipped_records": _BOOL,
    "expiry_sweep_interval": _DURATION,
    "expiry_sweep_shards": _INT,
    "expiry_sweep_workers": _INT,
    "expiry_sweeper_memory_size": _INT,
    "alarm_ttl_health_window": _DURATION,
    "cleanup_enabled": _BOOL,
    "cleanup_dry_run": _BOOL,
    "metrics_tenant_dimension": _BOOL,
    "tenant_insights": _BOOL,
    "archive_bucket": _BUCKET,
    "archive_transition_after": _DURATION,
    "archive_transition_storage_class": ("an s3.StorageClass", _is(s3.StorageClass)),
    "archive_expiration": _DURATION,
    "event_bus": ("an events.IEventBus", _has("event_bus_arn", "event_bus_name")),
    "failure_destination_bucket": _BUCKET,
    "function_encryption_key": _KEY,
    "agent_runtime": (
        "an AgentCore runtime (Runtime, CfnRuntime: IRuntimeRef) or its ARN",
        lambda v: isinstance(v, str) or hasattr(v, "runtime_ref"),
    ),
    "code_interpreter": (
        "an AgentCore code interpreter (ICodeInterpreterCustomRef), its ARN or identifier",
        lambda v: isinstance(v, str) or hasattr(v, "code_interpreter_custom_ref"),
    ),
    "browser": (
        "an AgentCore browser (IBrowserCustomRef), its ARN or identifier",
        lambda v: isinstance(v, str) or hasattr(v, "browser_custom_ref"),
    ),
    "agent_runtime_qualifier": ("a str, an endpoint name such as 'prod'", _is(str)),
    "allow_stopping_shared_aws_managed_tool_sessions": _BOOL,
    "custom_steps": (
        "a list of CustomCleanupStep",
        lambda v: (
            isinstance(v, Sequence)
            and not isinstance(v, (str, bytes))
            and all(hasattr(s, "spec") and hasattr(s, "handler") for s in v)
        ),
    ),
    "max_session_lifetime": _DURATION,
    "grant_grantees": (
        "a list of iam.IRole, the roles that receive session grants (for a role ARN: "
        'iam.Role.from_role_arn(self, "Grantee", arn))',
        lambda v: (
            isinstance(v, Sequence)
            and not isinstance(v, (str, bytes))
            and all(hasattr(r, "role_arn") and hasattr(r, "grant_principal") for r in v)
        ),
    ),
    "bind_grants_to_session": _BOOL,
    "alarm_cleanup_paused_after": _DURATION,
    "alarm_runbook_base_url": (
        "a str, an https:// URL, e.g. 'https://docs.example.com/session-expiry/operating/'",
        _is(str),
    ),
    "circuit_breaker": _BOOL,
    "circuit_breaker_alarms": (
        "a list of CircuitBreakerAlarm, e.g. [CircuitBreakerAlarm.ERRORS]",
        _breaker_alarms,
    ),
    "circuit_breaker_cool_down": _DURATION,
    "archive_query": _BOOL,
    "archive_delivery": (
        "an ArchiveDelivery member",
        lambda v: type(v).__name__ == "ArchiveDelivery",
    ),
    "agent_memory": (
        "an AgentCore Memory (Memory, CfnMemory: IMemoryRef), its ARN or its id",
        lambda v: isinstance(v, str) or hasattr(v, "memory_ref"),
    ),
    "agent_memory_record_namespaces": (
        "a list of namespace templates (str)",
        lambda v: (
            isinstance(v, Sequence)
            and not isinstance(v, (str, bytes))
            and all(isinstance(t, str) for t in v)
        ),
    ),
    "global_table": _BOOL,
    "change_source": (
        "a ChangeSource, e.g. ChangeSource.kinesis()",
        _has("is_kinesis", "record_age_limit"),
    ),
}


class PropTypeError(TypeError, ValueError):
    """A prop of the wrong type. A ``TypeError``, and a ``ValueError`` like every other
    rejected prop, so ``except ValueError`` catches all of them."""


def check_prop_types(props: Mapping[str, object]) -> None:
    """Reject a prop of the wrong type before anything reads it.

    ``props`` maps prop names to the values given; names not in `PROP_TYPES` and ``None``
    values are ignored.

    Raises:
        PropTypeError: e.g. ``max_record_age=3600`` (an int, not a ``Duration``) or a bucket
            given as ``websocket_stage``; the message names the prop, the value and the type
            expected.
    """
    for name, value in props.items():
        if value is None or name not in PROP_TYPES:
            continue
        expected, test = PROP_TYPES[name]
        if not test(value):
            raise PropTypeError(f"{name}={shown(value)}: expected {expected}")


def check_choice(name: str, value: object, choices: Sequence[str]) -> None:
    """Reject a value outside ``choices`` (e.g. a metric dimension value the runtime never emits).

    Raises:
        ValueError: ``value`` is not one of ``choices``.
    """
    if value not in choices:
        raise ValueError(f"{name}={value!r}: expected one of {', '.join(map(repr, choices))}")


def is_token(value: object) -> bool:
    """True when ``value`` (a str, number or Duration) is unresolved until deployment."""
    if isinstance(value, Duration):
        # Duration.to_string() renders a number token as a huge literal, not a token marker.
        return value.is_unresolved()
    return Token.is_unresolved(value)


def check_int_range(name: str, value: int, *, minimum: int, maximum: int) -> None:
    """Reject a whole number outside ``minimum..maximum`` (inclusive).

    Raises:
        PropTypeError: ``value`` is not an ``int`` (a ``bool`` is not one either).
        ValueError: ``value`` lies outside the range.
    """
    if is_token(value):
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise PropTypeError(
            f"{name}={value!r}: expected a whole number (an int) in {minimum}..{maximum}"
        )
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


# --- guards at synth: combinations that would lose a cleanup (issue 12) --------------------


def check_filter_with_sweeper(
    event_filter: CleanupEventFilter, expiry_sweep_interval: Duration | None
) -> None:
    """Reject an event filter that drops the expiry sweeper's deletes.

    The sweeper deletes each due session with ``DeleteItem``; its REMOVE record carries no
    ``userIdentity`` (only DynamoDB's TTL process sets one), so ``TTL_DELETES_ONLY`` would drop
    every swept session for good: its connection, grant and scratch data never cleaned.

    Raises:
        ValueError: ``expiry_sweep_interval`` is set with a filter that drops library deletes.
    """
    if expiry_sweep_interval is None or passes_library_deletes(event_filter):
        return
    raise ValueError(
        f"expiry_sweep_interval={shown(expiry_sweep_interval)} with event_filter="
        f"CleanupEventFilter.{event_filter.name}: the sweeper deletes due sessions with "
        "DeleteItem, whose REMOVE records carry no userIdentity, so the filter would drop "
        "every swept session and its connection, grant and scratch data would never be "
        "cleaned; expected event_filter=CleanupEventFilter.ALL_REMOVES, or no "
        "expiry_sweep_interval"
    )


def check_filter_with_session_store(event_filter: CleanupEventFilter, caller: str) -> None:
    """Reject giving the session runtime to an application whose deletes the filter drops.

    ``SessionStore.end`` and ``SessionStore.create`` (which deletes an expired item before
    reusing its id) delete with ``DeleteItem``: no ``userIdentity``, so ``TTL_DELETES_ONLY``
    drops their REMOVE records, and nothing else cleans those sessions.

    Raises:
        ValueError: ``event_filter`` drops the library's own deletes.
    """
    if passes_library_deletes(event_filter):
        return
    raise ValueError(
        f"{caller} with event_filter=CleanupEventFilter.{event_filter.name}: SessionStore "
        "deletes with DeleteItem (end(), and create() removing an expired item before "
        "reusing its id); those REMOVE records carry no userIdentity and the filter drops "
        "them, so those sessions' connection, grant and scratch data would never be "
        "cleaned; expected event_filter=CleanupEventFilter.ALL_REMOVES"
    )


_STRING = "S"
_TYPE_NAMES = {"S": "String", "N": "Number", "B": "Binary"}


def check_key_attribute_types(table_path: str, props: Mapping[str, Any]) -> None:
    """Reject a session table whose partition or sort key is not a String.

    ``props`` are the resolved CloudFormation properties of a table of this app
    (``keySchema``, ``attributeDefinitions``). The session runtime writes session ids and
    partition values as Strings (``{"S": ...}``); a Number or Binary key attribute makes the
    first ``create`` fail with a type mismatch (DynamoDB ``ValidationException``).

    Raises:
        ValueError: a key attribute is a Number or Binary; the message names it and its type.
    """
    types = {
        d.get("attributeName"): d.get("attributeType")
        for d in props.get("attributeDefinitions") or []
    }
    roles = {"HASH": "partition key", "RANGE": "sort key"}
    for key in props.get("keySchema") or []:
        name, kind = key.get("attributeName"), types.get(key.get("attributeName"))
        if isinstance(kind, str) and kind != _STRING:
            raise ValueError(
                f"table {table_path}: {roles.get(key.get('keyType'), 'key')} {name!r} is a "
                f"{_TYPE_NAMES.get(kind, kind)} ({kind}): the session runtime writes session "
                "ids and partition values as Strings, so the first create would fail with a "
                "type mismatch; expected dynamodb.AttributeType.STRING"
            )


@dataclass(frozen=True)
class PrefixClaim:
    """An S3 prefix a ``SessionExpiry`` owns: a lifecycle rule and a role that may write or
    delete under it."""

    bucket: Any  # s3.IBucket
    prefix: str
    prop: str
    owner: str


#: Attribute under which a construct keeps its claims, for the constructs created after it.
_CLAIMS_ATTRIBUTE = "_session_expiry_prefix_claims"


def _same_bucket(a: Any, b: Any) -> bool:
    if a is b:
        return True
    names = (a.bucket_name, b.bucket_name)
    return not any(Token.is_unresolved(n) for n in names) and names[0] == names[1]


def _claims_of_others(scope: Construct) -> Iterator[PrefixClaim]:
    for construct in scope.node.root.node.find_all():
        if construct is not scope:
            yield from getattr(construct, _CLAIMS_ATTRIBUTE, ())


def _bucket_shown(bucket: Any) -> str:
    name = bucket.bucket_name
    return shown(bucket) if Token.is_unresolved(name) else repr(name)


def claim_s3_prefixes(scope: Construct, claims: Sequence[PrefixClaim]) -> None:
    """Record ``scope``'s S3 prefixes, rejecting any overlap with another ``SessionExpiry``.

    Two prefixes in one bucket overlap when one starts with the other (the same prefix, a
    nested one, or one construct's archive prefix inside another's scratch root): two
    lifecycle rules would act on one prefix, and two cleanup roles could delete it.
    Unresolved tokens are skipped.

    Raises:
        ValueError: a prefix of ``claims`` overlaps one of a construct created earlier in the
            same app; the message names both props, both prefixes, the bucket and the other
            construct.
    """
    others = list(_claims_of_others(scope))
    for mine in claims:
        if Token.is_unresolved(mine.prefix):
            continue
        for other in others:
            if Token.is_unresolved(other.prefix) or not _same_bucket(mine.bucket, other.bucket):
                continue
            if mine.prefix.startswith(other.prefix) or other.prefix.startswith(mine.prefix):
                raise ValueError(
                    f"{mine.prop}={mine.prefix!r} overlaps {other.prop}={other.prefix!r} of "
                    f"{other.owner} in bucket {_bucket_shown(mine.bucket)}: two lifecycle "
                    "rules would act on one prefix and two cleanup roles could delete it; "
                    "expected prefixes of which neither starts with the other"
                )
    setattr(scope, _CLAIMS_ATTRIBUTE, tuple(claims))


# --- the props of SessionExpiry, one concern at a time -----------------------------------------


def check_cleanup_function_props(
    *,
    cleanup_timeout: Duration,
    cleanup_memory_size: int,
    max_workers: int,
    metrics_namespace: str,
    event_filter: CleanupEventFilter,
) -> None:
    """Limits of the cleanup function (Lambda quotas) and of the runtime's settings.

    Raises:
        ValueError: timeout outside 1 s..15 min, memory outside 128..10,240 MiB, workers
            outside 1..64, an empty namespace, or an ``event_filter`` that is not a member.
    """
    check_duration_range(
        "cleanup_timeout",
        cleanup_timeout,
        minimum=Duration.seconds(1),
        maximum=Duration.minutes(15),
    )
    check_int_range("cleanup_memory_size", cleanup_memory_size, minimum=128, maximum=10_240)
    check_int_range("max_workers", max_workers, minimum=1, maximum=MAX_WORKERS_LIMIT)
    check_non_empty_name("metrics_namespace", metrics_namespace)
    if not isinstance(event_filter, CleanupEventFilter):
        raise ValueError(
            f"event_filter={event_filter!r}: expected a CleanupEventFilter member, e.g. "
            "CleanupEventFilter.ALL_REMOVES (from cdk_session_expiry import CleanupEventFilter)"
        )


def check_event_source_props(
    *,
    batch_size: int,
    max_batching_window: Duration | None,
    parallelization_factor: int,
    retry_attempts: int,
    max_record_age: Duration,
    record_age_limit: Duration = STREAM_RETENTION,
) -> None:
    """Limits of an event source mapping on a DynamoDB or Kinesis stream (Lambda API reference,
    CreateEventSourceMapping), with two made stricter: ``retry_attempts`` may not be -1
    (infinite) and ``max_record_age`` may not exceed ``record_age_limit`` (default a DynamoDB
    stream's 24 hour retention; the Kinesis source's retention, at most 7 days).

    Raises:
        ValueError: a value outside its limits.
    """
    check_int_range("batch_size", batch_size, minimum=1, maximum=10_000)
    if max_batching_window is not None:
        check_duration_range(
            "max_batching_window",
            max_batching_window,
            minimum=Duration.seconds(0),
            maximum=Duration.seconds(300),
        )
    check_int_range("parallelization_factor", parallelization_factor, minimum=1, maximum=10)
    check_int_range("retry_attempts", retry_attempts, minimum=0, maximum=10_000)
    check_duration_range(
        "max_record_age", max_record_age, minimum=Duration.seconds(60), maximum=record_age_limit
    )


def check_switches(**switches: object) -> None:
    """Reject an on/off prop (``cleanup_enabled=...``) that is not a bool.

    Raises:
        ValueError: the value is not ``True`` or ``False``.
    """
    for switch, flag in switches.items():
        if not isinstance(flag, bool):
            raise ValueError(f"{switch}={flag!r}: expected True or False")


def check_scratch_props(
    *,
    scratch_bucket: s3.IBucket | None,
    retention: Duration,
    **scratch_only: object,
) -> None:
    """Reject scratch props without ``scratch_bucket`` and a backstop retention out of range.

    ``retention`` is the backstop retention in effect (given or default); ``scratch_only``
    holds the props that need a scratch bucket as given (``scratch_root``,
    ``scratch_retention``, ``tenant_scoped_scratch``); ``None`` and ``False`` mean unset. The
    root's own rules are ``lifecycle.check_scratch_root``'s.

    Raises:
        ValueError: one of ``scratch_only`` is set without a bucket; the retention is not
            whole days in 1..36,500.
    """
    if scratch_bucket is None:
        for name, value in scratch_only.items():
            if value is not None and value is not False:
                raise ValueError(
                    f"{name}={shown(value)} is set without scratch_bucket: "
                    f"expected a scratch_bucket, or no {name}"
                )
    check_duration_range(
        "scratch_retention",
        retention,
        minimum=Duration.days(1),
        maximum=Duration.days(36_500),
        whole="days",
    )


def check_table_only_props(**given: object) -> None:
    """Reject props that configure a new table (``removal_policy=...``) together with ``table=``.

    Raises:
        ValueError: one of them is set; the message says to set it on that table instead.
    """
    for prop, value in given.items():
        if value is not None:
            raise ValueError(
                f"{prop}={shown(value)} applies only to a table the construct creates: "
                f"expected no {prop} together with table=, set it on that table instead"
            )


def check_session_attributes(
    attribute_props: Mapping[str, str | None], *, reserved: Mapping[str, str] | None = None
) -> None:
    """Each session attribute name is a valid DynamoDB attribute name, and all are distinct —
    except that ``tenant_attribute`` may be the partition key of a table with a sort key (the
    tenant's sessions in one partition, the session id the sort key): the cleanup then takes the
    tenant from the stream record's keys instead of the old image.

    ``reserved`` maps a label (e.g. ``"the incarnation attribute"``) to an attribute name the
    runtime writes without a prop: no prop may name it.

    Raises:
        ValueError: an empty, padded or over-long name, two props (or a prop and a reserved
            name) naming one attribute, or the tenant as the partition key of a table without
            a sort key (the message names `sort_key_name`).
    """
    for prop, attribute in attribute_props.items():
        if attribute is not None:
            check_attribute_name(prop, attribute)
    names: dict[str, str | None] = {**(reserved or {}), **attribute_props}
    tenant = names.get("tenant_attribute")
    if tenant is not None and tenant == names.get("partition_key_name"):
        if names.get("sort_key_name") is None:
            raise ValueError(
                f"tenant_attribute={tenant!r} is also partition_key_name, on a table without a "
                "sort key: expected sort_key_name (the session id, e.g. 'sessionId') so that "
                "the partition is the tenant, or a tenant_attribute of its own"
            )
        del names["tenant_attribute"]  # the tenant is the partition: bound by the record's keys
    check_distinct_attribute_names(names)


def check_existing_table(
    table: dynamodb.ITable,
    *,
    partition_key_name: str | None,
    sort_key_name: str | None,
    time_to_live_attribute: str | None,
) -> tuple[str, str | None, str]:
    """Check a table passed as ``table=`` and settle its key and TTL attribute names.

    A table of this app (``Table``/``TableV2``) is read from its CloudFormation resource; an
    imported table is taken on trust apart from its stream ARN.

    Raises:
        ValueError: the table has no stream, a stream without old images, no time to live,
            or a key/TTL attribute different from the one given.
    """
    no_stream = ValueError(
        f"table {table.node.path} has no stream: expected "
        "stream=StreamViewType.NEW_AND_OLD_IMAGES on the table (dynamo_stream= on a TableV2), "
        "or table_stream_arn when importing it with Table.from_table_attributes"
    )
    if table.table_stream_arn is None:
        raise no_stream
    cfn = table.node.default_child
    if not isinstance(cfn, (dynamodb.CfnTable, dynamodb.CfnGlobalTable)):
        return (
            contract.DEFAULT_PARTITION_KEY if partition_key_name is None else partition_key_name,
            sort_key_name,
            contract.DEFAULT_TTL_ATTRIBUTE
            if time_to_live_attribute is None
            else time_to_live_attribute,
        )
    # The resolved properties of the table's resource, read the same way for Table (CfnTable)
    # and TableV2 (CfnGlobalTable, whose typed struct getters fail on its lazy values).
    props = Stack.of(table).resolve(cfn._cfn_properties)
    check_key_attribute_types(table.node.path, props)
    _check_stream_view_type(table, props, no_stream)
    keys = {k.get("keyType"): k.get("attributeName") for k in props.get("keySchema") or []}
    table_ttl = _table_ttl_attribute(table, props, time_to_live_attribute)
    own = {
        "partition_key_name": (partition_key_name, keys.get("HASH")),
        "sort_key_name": (sort_key_name, keys.get("RANGE")),
        "time_to_live_attribute": (time_to_live_attribute, table_ttl),
    }
    for prop, (given, actual) in own.items():
        if given is not None and given != actual:
            raise ValueError(
                f"{prop}={given!r} does not match table {table.node.path}: expected {actual!r}"
            )
    return own["partition_key_name"][1], own["sort_key_name"][1], table_ttl  # type: ignore[return-value]


def _check_stream_view_type(
    table: dynamodb.ITable, props: Mapping[str, object], no_stream: ValueError
) -> None:
    view_type = (props.get("streamSpecification") or {}).get("streamViewType")  # type: ignore[attr-defined]
    if view_type is None:
        raise no_stream
    if isinstance(view_type, str) and view_type not in _VIEW_TYPES_WITH_OLD_IMAGES:
        raise ValueError(
            f"table {table.node.path} has stream view type {view_type}: expected "
            "NEW_AND_OLD_IMAGES (or OLD_IMAGE), since REMOVE records must carry the old image. "
            "The view type cannot change in place: set stream=StreamViewType.NEW_AND_OLD_IMAGES "
            "(dynamo_stream= on a TableV2)."
        )


def _table_ttl_attribute(
    table: dynamodb.ITable, props: Mapping[str, object], time_to_live_attribute: str | None
) -> str:
    ttl_spec = props.get("timeToLiveSpecification") or {}
    table_ttl = ttl_spec.get("attributeName") if ttl_spec.get("enabled") is True else None  # type: ignore[attr-defined]
    if table_ttl is None:
        raise ValueError(
            f"table {table.node.path} has no time to live: expected "
            f"time_to_live_attribute={time_to_live_attribute or contract.DEFAULT_TTL_ATTRIBUTE!r}"
            " on the table"
        )
    return table_ttl  # type: ignore[no-any-return]


# --- user-defined cleanup steps (issue 10; the runtime's rules: steps/custom.py) -------------

#: A custom step's name, as the runtime accepts it (``steps.custom.NAME``).
CUSTOM_STEP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_IGNORED_ENTRIES = ("__pycache__",)
_IGNORED_SUFFIXES = (".pyc", ".pyo")


def check_custom_step(
    *,
    name: str,
    code: object,
    handler: str,
    preview: str | None,
    attributes: object,
    reserved_names: Sequence[str],
) -> None:
    """One custom step's name, code directory, handler, preview and attributes.

    Raises:
        PropTypeError: ``code`` is not a path (e.g. a ``lambda_.Code``), or ``attributes`` is
            not a list of strings.
        ValueError: a name that is not a letter then up to 63 letters, digits, ``-``, ``_``, or
            is a built-in step's action; a directory that does not exist or holds its own
            ``session_expiry_runtime``; a handler or preview that is not
            ``package.module.function`` or whose module file is not in the directory.
    """
    if not isinstance(name, str) or not CUSTOM_STEP_NAME.fullmatch(name):
        raise ValueError(
            f"custom step name={name!r}: expected a letter, then up to 63 letters, digits, '-' "
            "or '_' (the metric's Action), e.g. 'DeleteSessionSecret'"
        )
    if name in reserved_names:
        raise ValueError(
            f"custom step name={name!r} is a built-in step's action: expected another name"
        )
    directory = _check_step_directory(name, code)
    for prop, dotted in (("handler", handler), ("preview", preview)):
        if dotted is not None or prop == "handler":
            _check_step_function(name, prop, dotted, directory)
    if isinstance(attributes, (str, bytes)) or not isinstance(attributes, Sequence):
        raise PropTypeError(
            f"custom step {name!r} attributes={attributes!r}: expected a list of attribute "
            "names, e.g. ['secretName']"
        )
    for attribute in attributes:
        check_attribute_name(f"custom step {name!r} attribute", attribute)


def _check_step_directory(name: str, code: object) -> Path:
    if not isinstance(code, (str, os.PathLike)):
        raise PropTypeError(
            f"custom step {name!r} code={shown(code)}: expected a directory path (str or "
            "pathlib.Path): its contents are copied beside session_expiry_runtime/ into the "
            "cleanup function's own code asset, and a function has one code package"
        )
    directory = Path(code).resolve()
    if not directory.is_dir():
        raise ValueError(
            f"custom step {name!r} code={str(code)!r}: expected an existing directory "
            f"(resolved to {str(directory)!r})"
        )
    if (directory / contract.RUNTIME_PACKAGE).exists():
        raise ValueError(
            f"custom step {name!r} code={str(code)!r} holds its own {contract.RUNTIME_PACKAGE}: "
            "expected only your modules (the construct stages the runtime beside them)"
        )
    return directory


def _check_step_function(name: str, prop: str, dotted: object, directory: Path) -> None:
    parts = dotted.split(".") if isinstance(dotted, str) else []
    if len(parts) < 2 or not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        raise ValueError(
            f"custom step {name!r} {prop}={dotted!r}: expected package.module.function (at "
            "least module.function), e.g. 'my_steps.secrets.delete_secret'"
        )
    if parts[0] == contract.RUNTIME_PACKAGE:
        raise ValueError(
            f"custom step {name!r} {prop}={dotted!r}: expected a function of your own code, not "
            f"of {contract.RUNTIME_PACKAGE}"
        )
    module = directory.joinpath(*parts[:-1])
    if not module.with_suffix(".py").is_file() and not (module / "__init__.py").is_file():
        raise ValueError(
            f"custom step {name!r} {prop}={dotted!r}: expected module {'.'.join(parts[:-1])!r} "
            f"in {str(directory)!r} (as {'/'.join(parts[:-1])}.py or "
            f"{'/'.join(parts[:-1])}/__init__.py)"
        )


def check_custom_step_set(steps: Sequence[tuple[str, Path]]) -> tuple[Path, ...]:
    """Names unique; directories that do not overwrite each other's top-level entries.

    ``steps`` are (name, resolved directory) pairs. Returns the distinct directories in order.

    Raises:
        ValueError: two steps share a name, or two directories hold the same top-level name
            (one would overwrite the other at the root of the code asset).
    """
    seen_names: set[str] = set()
    owners: dict[str, Path] = {}
    directories: list[Path] = []
    for name, directory in steps:
        if name in seen_names:
            raise ValueError(f"custom step name={name!r} is used twice: expected one step per name")
        seen_names.add(name)
        if directory in directories:
            continue
        directories.append(directory)
        for entry in staged_entries(directory):
            other = owners.setdefault(entry.name, directory)
            if other != directory:
                raise ValueError(
                    f"custom step {name!r}: {entry.name!r} is in both {str(other)!r} and "
                    f"{str(directory)!r}: expected distinct top-level names, since both are "
                    "copied to the root of the cleanup function's code"
                )
    return tuple(directories)


def staged_entries(directory: Path) -> list[Path]:
    """The top-level entries of a step directory that are copied (no bytecode caches)."""
    return [
        entry
        for entry in sorted(directory.iterdir())
        if entry.name not in _IGNORED_ENTRIES and not entry.name.endswith(_IGNORED_SUFFIXES)
    ]
