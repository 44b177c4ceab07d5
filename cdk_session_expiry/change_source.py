"""Where the cleanup reads the table's changes from (``change_source``): the table's DynamoDB
stream (the default) or Kinesis Data Streams for DynamoDB (opt-in, for retention past 24 hours).

A DynamoDB stream keeps records 24 hours: a paused cleanup, a long outage of a target or a bad
deploy loses whatever was not cleaned by then. Kinesis Data Streams for DynamoDB keeps change
records as long as the Kinesis stream's retention, up to 365 days (8,760 hours) (Amazon DynamoDB
Developer Guide, "Using Kinesis Data Streams to capture changes to DynamoDB"; Amazon Kinesis Data
Streams Developer Guide, "Changing the data retention period").

[`ChangeSource.kinesis`][cdk_session_expiry.ChangeSource.kinesis] gives:

* the stream: a new one (``ChangeStream``: on-demand capacity, encrypted with the AWS managed key
  ``aws/kinesis``, retention ``retention``, default 7 days), or the one given;
* the table's Kinesis streaming destination, with ``ApproximateCreationDateTime`` in
  milliseconds (set explicitly: the AWS default is microseconds), on the table the construct
  creates. A table passed as ``table=`` must already stream into it (``kinesis_stream=`` on a
  ``Table``), checked for a ``Table`` of this app;
* the cleanup's event source mapping on the Kinesis stream instead of the DynamoDB stream, with
  the same guarantees (``cleanup.CleanupEventSource``): the filter under ``data`` (Lambda
  Developer Guide, "Filtering Kinesis events"), bisect on error, bounded retries and record
  age, partial batch response (Kinesis sequence numbers), the on-failure destination, start
  ``TRIM_HORIZON``;
* an alarm on the stream's ``GetRecords.IteratorAgeMilliseconds`` (``ChangeStreamIteratorAgeAlarm``)
  beside the one on the mapping's ``IteratorAge``;
* the retention every retention-bound limit uses (``max_record_age`` up to the retention, at
  most 7 days, the mapping's own limit; ``alarm_iterator_age_threshold`` and
  ``alarm_cleanup_paused_after`` below it; the kill switch's synth warning).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kinesis as kinesis
from constructs import Construct

from . import validation
from .monitoring import alarms as alarm_defaults

#: A DynamoDB stream's retention (DynamoDB Developer Guide, "Change data capture for DynamoDB
#: Streams").
DYNAMODB_STREAM_RETENTION = Duration.hours(24)
#: Retention of the Kinesis stream the construct creates, unless ``retention`` says otherwise.
DEFAULT_KINESIS_RETENTION = Duration.days(7)
#: A Kinesis stream's retention: 24 hours (its default) to 8,760 hours (365 days), whole hours.
MIN_KINESIS_RETENTION = Duration.hours(24)
MAX_KINESIS_RETENTION = Duration.hours(8_760)
#: The event source mapping's ``MaximumRecordAgeInSeconds`` limit (604,800 s): records older go
#: to the on-failure destination whatever the stream's retention.
MAX_MAPPING_RECORD_AGE = Duration.days(7)


class ChangeSourceKind(enum.Enum):
    """The two change sources."""

    DYNAMODB_STREAM = "DYNAMODB_STREAM"
    KINESIS = "KINESIS"


class ChangeSource:
    """Where the cleanup reads the table's changes from: make one with
    [`dynamodb_stream`][cdk_session_expiry.ChangeSource.dynamodb_stream] or
    [`kinesis`][cdk_session_expiry.ChangeSource.kinesis]."""

    def __init__(
        self,
        kind: ChangeSourceKind,
        *,
        stream: kinesis.IStream | None = None,
        retention: Duration | None = None,
    ) -> None:
        self.kind = kind
        self.stream = stream
        self._retention = retention

    @classmethod
    def dynamodb_stream(cls) -> ChangeSource:
        """The table's DynamoDB stream (24 hours' retention): the default."""
        return cls(ChangeSourceKind.DYNAMODB_STREAM)

    @classmethod
    def kinesis(
        cls, *, stream: kinesis.IStream | None = None, retention: Duration | None = None
    ) -> ChangeSource:
        """Kinesis Data Streams for DynamoDB (see the module docstring).

        Args:
            stream: the Kinesis stream the table streams into. Default: a new on-demand stream
                encrypted with ``aws/kinesis`` (``ChangeStream``).
            retention: the stream's retention, whole hours from 24 hours to 365 days. For a
                new stream it is set; for a given stream it says what the stream keeps (a
                ``Stream`` of this app is read instead). Default: 7 days for a new stream; a
                given stream's own (24 hours, Kinesis's default, when it cannot be read).

        Raises:
            ValueError: ``retention`` outside 24 hours .. 365 days or not whole hours.
        """
        if retention is not None:
            check_retention(retention)
        return cls(ChangeSourceKind.KINESIS, stream=stream, retention=retention)

    @property
    def is_kinesis(self) -> bool:
        return self.kind is ChangeSourceKind.KINESIS

    def retention(self) -> Duration:
        """How long the source keeps a change record (see
        [`kinesis`][cdk_session_expiry.ChangeSource.kinesis])."""
        if not self.is_kinesis:
            return DYNAMODB_STREAM_RETENTION
        if self.stream is None:
            return self._retention or DEFAULT_KINESIS_RETENTION
        cfn = self.stream.node.default_child
        if isinstance(cfn, kinesis.CfnStream):
            hours = Stack.of(self.stream).resolve(cfn.retention_period_hours)
            if isinstance(hours, int):
                return Duration.hours(hours)
        return self._retention or MIN_KINESIS_RETENTION

    def record_age_limit(self) -> Duration:
        """The largest ``max_record_age``: the retention, at most the mapping's 7 days."""
        retention = self.retention()
        if retention.to_seconds() > MAX_MAPPING_RECORD_AGE.to_seconds():
            return MAX_MAPPING_RECORD_AGE
        return retention


def check_retention(retention: Duration) -> None:
    """Reject a Kinesis retention outside 24 hours .. 365 days or not whole hours.

    Raises:
        ValueError: the message names the value and the expected range.
    """
    validation.check_duration_range(
        "retention", retention, minimum=MIN_KINESIS_RETENTION, maximum=MAX_KINESIS_RETENTION
    )
    if not validation.is_token(retention) and retention.to_seconds() % 3600:
        raise ValueError(
            f"retention={retention.to_human_string()}: expected whole hours (Kinesis "
            "RetentionPeriodHours)"
        )


def create_stream(scope: Construct, source: ChangeSource) -> kinesis.IStream:
    """The Kinesis stream of ``source``: the given one, or ``<scope>/ChangeStream``."""
    if source.stream is not None:
        return source.stream
    return kinesis.Stream(
        scope,
        "ChangeStream",
        stream_mode=kinesis.StreamMode.ON_DEMAND,
        encryption=kinesis.StreamEncryption.MANAGED,
        retention_period=source.retention(),
    )


def check_table_destination(table: dynamodb.ITable, stream: kinesis.IStream | None) -> None:
    """A table of this app passed as ``table=`` must stream into the Kinesis stream the cleanup
    reads: ``stream`` (``ChangeSource.kinesis(stream=...)``), or, without one, it cannot (the
    construct's new ``ChangeStream`` is written by no table but its own).

    A ``Table`` names its destination in ``KinesisStreamSpecification``, a ``TableV2`` in its
    replicas' ``KinesisStreamSpecification``; an imported table is taken on trust.

    Raises:
        ValueError: the table has no Kinesis streaming destination, or streams into another
            stream than ``stream`` (or ``stream`` is ``None``); the message names both.
    """
    cfn = table.node.default_child
    if isinstance(cfn, dynamodb.CfnTable):
        specs = [Stack.of(table).resolve(cfn._cfn_properties).get("kinesisStreamSpecification")]
    elif isinstance(cfn, dynamodb.CfnGlobalTable):
        replicas = Stack.of(table).resolve(cfn._cfn_properties).get("replicas") or []
        specs = [r.get("kinesisStreamSpecification") for r in replicas if isinstance(r, dict)]
    else:
        return  # an imported table: taken on trust
    arns = [spec.get("streamArn") for spec in specs if isinstance(spec, dict)]
    if not arns:
        raise ValueError(
            f"change_source=ChangeSource.kinesis(...) with table {table.node.path}, which has "
            "no Kinesis streaming destination: expected kinesis_stream=<the stream> and "
            "kinesis_precision_timestamp=ApproximateCreationDateTimePrecision.MILLISECOND on "
            "the table, and the same stream in ChangeSource.kinesis(stream=...)"
        )
    wanted = None if stream is None else Stack.of(table).resolve(stream.stream_arn)
    if wanted is None or wanted not in arns:
        given = "no stream (a new ChangeStream)" if stream is None else stream.node.path
        raise ValueError(
            f"change_source=ChangeSource.kinesis(stream=...) names {given}, but table "
            f"{table.node.path} streams into {arns[0]!r}: the cleanup would read a stream no "
            "change reaches; expected ChangeSource.kinesis(stream=<the table's kinesis_stream>)"
        )


def stream_iterator_age_alarm(
    scope: Construct,
    stream: kinesis.IStream,
    *,
    threshold: Duration,
    actions: Sequence[cloudwatch.IAlarmAction],
) -> cloudwatch.Alarm:
    """Maximum ``GetRecords.IteratorAgeMilliseconds`` of the stream above ``threshold``
    (``ChangeStreamIteratorAgeAlarm``): its oldest unread record is getting old."""
    return alarm_defaults.kinesis_iterator_age_alarm(
        scope, stream=stream, threshold=threshold, actions=actions
    )
