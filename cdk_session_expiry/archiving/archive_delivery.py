"""Archive at scale: an Amazon Data Firehose delivery stream instead of one object per session
(``archive_delivery=ArchiveDelivery.FIREHOSE``, only with ``archive_bucket``).

The cleanup's archive step hands each session's line to the stream with ``PutRecordBatch``,
shared by the invocation's sessions (``session_expiry_runtime.sinks.archive_delivery``); Firehose
buffers and writes GZIP objects of many lines under the **same partitions** as the per-object
mode, by dynamic partitioning (Firehose Developer Guide, "Dynamic partitioning in Amazon Data
Firehose"): a ``MetadataExtraction`` processor reads ``partition_date`` and
``partition_tenant`` of each record with jq (`PARTITION_QUERY`), and the prefix is
``<archive prefix>date=!{partitionKeyFromQuery:date}/tenant=!{partitionKeyFromQuery:tenant}/``.
One Glue table and one set of queries (``archive_query``) read both modes' objects, so
switching modes, either way, needs no migration.

Why GZIP JSON lines and not Parquet: the table stays one table whatever wrote an object (a
Parquet stream would need its own table: a table has one SerDe), the old image is an
application-defined structure that would be a JSON string column in Parquet too, Firehose's
format conversion is billed per GB on top of ingestion, and JSON lines compress about ten to
one. Parquet would scan less for column-selective queries; the queries here read a few small
columns of a modest archive.

**Durable** (the gate): a record ``PutRecordBatch`` accepted. Firehose keeps a Direct PUT
stream's records 24 hours and retries a failing S3 delivery for up to 24 hours (Developer Guide,
"Handling data delivery failure": "If data delivery fails for more than 24 hours, your data is
lost"). So the stream gets an alarm on ``DeliveryToS3.DataFreshness`` (the age of the oldest
record not yet delivered) above 1 hour: a day's margin before anything is lost. A record the
partition query cannot read goes to the error prefix
(``<archive prefix without its slash>-delivery-errors/``), outside the table.

Resources: the stream (``AWS::KinesisFirehose::DeliveryStream``, Direct PUT, server-side
encryption with an AWS owned key), its role (``s3:PutObject`` and the multipart actions on the
two prefixes only, ``s3:GetBucketLocation``/``ListBucket`` on the bucket, the bucket key's
``kms:GenerateDataKey``/``Decrypt`` when it has one), a log group for delivery errors. The
cleanup role gets ``firehose:PutRecordBatch`` on the stream only, and keeps ``s3:PutObject`` on
the archive prefix (a line over Firehose's 1,000 KiB record limit is written per object).

Defaults: buffering 128 MiB or 300 seconds (dynamic partitioning needs at least 64 MiB), so an
archived session reaches S3 within about 5 minutes. Firehose's quota of 500 active partitions
per stream (Developer Guide, "Dynamic partitioning") bounds the distinct ``date``/``tenant``
pairs buffered at once: above it records go to the error prefix; with many tenants ask for a
higher quota.
"""

from __future__ import annotations

from enum import Enum

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesisfirehose as firehose
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from .. import _runtime_contract as contract
from ..monitoring import alarms


class ArchiveDelivery(Enum):
    """How the archive step writes: ``PUT_OBJECT`` (one object per session) or ``FIREHOSE``
    (an Amazon Data Firehose stream writes GZIP objects of many sessions)."""

    PUT_OBJECT = "PutObject"
    FIREHOSE = "Firehose"


#: jq (Firehose's ``JQ-1.6`` engine) reading the partition keys of an archived record.
PARTITION_QUERY = "{date: .partition_date, tenant: .partition_tenant}"
BUFFER_SIZE_MIB = 128
BUFFER_INTERVAL = Duration.minutes(5)
#: The alarm's threshold: far below the 24 hours Firehose keeps undelivered records.
FRESHNESS_THRESHOLD = Duration.hours(1)


def delivery_prefix(archive_prefix: str) -> str:
    """The stream's S3 prefix: the per-object mode's two partition levels."""
    return (
        f"{archive_prefix}date=!{{partitionKeyFromQuery:date}}/"
        "tenant=!{partitionKeyFromQuery:tenant}/"
    )


def error_prefix(archive_prefix: str) -> str:
    """Where Firehose puts records it could not partition: beside the archive, not under it."""
    return (
        f"{archive_prefix.rstrip('/')}-delivery-errors/"
        "!{firehose:error-output-type}/!{timestamp:yyyy/MM/dd}/"
    )


def check_archive_delivery_props(
    *, archive_delivery: ArchiveDelivery, archive_bucket: s3.IBucket | None
) -> None:
    """Raises:
    ValueError: ``FIREHOSE`` without ``archive_bucket``."""
    if archive_delivery is ArchiveDelivery.FIREHOSE and archive_bucket is None:
        raise ValueError(
            "archive_delivery=ArchiveDelivery.FIREHOSE is set without archive_bucket: the "
            "stream delivers into the archive; expected an archive_bucket, or PUT_OBJECT"
        )


class ArchiveDeliveryStream(Construct):
    """The archive's delivery stream, its role, log group and freshness alarm.

    Args:
        bucket: the archive bucket.
        prefix: the archive prefix.
        log_retention: retention of the delivery error log group.
        alarm_actions: actions of the freshness alarm.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        bucket: s3.IBucket,
        prefix: str,
        log_retention: logs.RetentionDays,
        alarm_actions: list[cloudwatch.IAlarmAction],
    ) -> None:
        super().__init__(scope, id)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=log_retention, removal_policy=RemovalPolicy.RETAIN
        )
        log_stream = self.log_group.add_stream("S3Delivery")
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("firehose.amazonaws.com"),
            description="Delivers archived sessions into the archive bucket",
        )
        self._grant_delivery(bucket, prefix)
        #: The delivery stream (Direct PUT).
        self.stream = firehose.CfnDeliveryStream(
            self,
            "Stream",
            delivery_stream_type="DirectPut",
            delivery_stream_encryption_configuration_input=firehose.CfnDeliveryStream.DeliveryStreamEncryptionConfigurationInputProperty(
                key_type="AWS_OWNED_CMK"
            ),
            extended_s3_destination_configuration=self._destination(
                bucket, prefix, log_stream.log_stream_name
            ),
        )
        self.stream.node.add_dependency(self.role)
        #: ``DeliveryToS3.DataFreshness`` above 1 hour: records wait in Firehose (kept 24 h).
        self.freshness_alarm = cloudwatch.Alarm(
            self,
            "FreshnessAlarm",
            alarm_description=alarms.described(
                "Archived sessions have waited more than an hour in the Firehose stream: its "
                "S3 delivery fails (bucket policy, role, KMS key). Firehose keeps records 24 "
                "hours, then they are lost.",
                alarms.RUNBOOK_ARCHIVE_DELIVERY,
            ),
            metric=cloudwatch.Metric(
                namespace="AWS/Firehose",
                metric_name="DeliveryToS3.DataFreshness",
                dimensions_map={"DeliveryStreamName": self.stream.ref},
                statistic=cloudwatch.Stats.MAXIMUM,
                period=alarms.ALARM_PERIOD,
            ),
            threshold=FRESHNESS_THRESHOLD.to_seconds(),
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        for action in alarm_actions:
            self.freshness_alarm.add_alarm_action(action)

    def _destination(
        self, bucket: s3.IBucket, prefix: str, log_stream: str
    ) -> firehose.CfnDeliveryStream.ExtendedS3DestinationConfigurationProperty:
        cfn = firehose.CfnDeliveryStream
        key = bucket.encryption_key
        return cfn.ExtendedS3DestinationConfigurationProperty(
            bucket_arn=bucket.bucket_arn,
            role_arn=self.role.role_arn,
            prefix=delivery_prefix(prefix),
            error_output_prefix=error_prefix(prefix),
            compression_format="GZIP",
            buffering_hints=cfn.BufferingHintsProperty(
                interval_in_seconds=BUFFER_INTERVAL.to_seconds(), size_in_m_bs=BUFFER_SIZE_MIB
            ),
            dynamic_partitioning_configuration=cfn.DynamicPartitioningConfigurationProperty(
                enabled=True, retry_options=cfn.RetryOptionsProperty(duration_in_seconds=300)
            ),
            processing_configuration=cfn.ProcessingConfigurationProperty(
                enabled=True,
                processors=[
                    cfn.ProcessorProperty(
                        type="MetadataExtraction",
                        parameters=[
                            cfn.ProcessorParameterProperty(
                                parameter_name="MetadataExtractionQuery",
                                parameter_value=PARTITION_QUERY,
                            ),
                            cfn.ProcessorParameterProperty(
                                parameter_name="JsonParsingEngine", parameter_value="JQ-1.6"
                            ),
                        ],
                    )
                ],
            ),
            encryption_configuration=cfn.EncryptionConfigurationProperty(
                kms_encryption_config=cfn.KMSEncryptionConfigProperty(awskms_key_arn=key.key_arn)
            )
            if key is not None
            else None,
            cloud_watch_logging_options=cfn.CloudWatchLoggingOptionsProperty(
                enabled=True,
                log_group_name=self.log_group.log_group_name,
                log_stream_name=log_stream,
            ),
        )

    def _grant_delivery(self, bucket: s3.IBucket, prefix: str) -> None:
        """What Firehose needs to write into the bucket (Firehose Developer Guide, "Grant
        Firehose access to an Amazon S3 destination"), on the two prefixes only."""
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:AbortMultipartUpload", "s3:PutObject"],
                resources=[
                    bucket.arn_for_objects(f"{prefix}*"),
                    bucket.arn_for_objects(f"{prefix.rstrip('/')}-delivery-errors/*"),
                ],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "s3:GetBucketLocation",
                    "s3:ListBucket",
                    "s3:ListBucketMultipartUploads",
                ],
                resources=[bucket.bucket_arn],
            )
        )
        self.log_group.grant_write(self.role)
        if bucket.encryption_key is not None:
            bucket.encryption_key.grant(self.role, "kms:GenerateDataKey", "kms:Decrypt")

    def configure(self, function: lambda_.Function) -> None:
        """The cleanup's environment and ``firehose:PutRecordBatch`` on this stream only."""
        function.add_environment(contract.ENV_ARCHIVE_DELIVERY_STREAM, self.stream.ref)
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["firehose:PutRecordBatch"], resources=[self.stream.attr_arn]
            )
        )
