"""The event source mapping's on-failure destination: SQS queue (default) or S3 bucket.

* **SQS** (``failure_queue``, a new encrypted queue by default) receives only metadata of a
  failed batch: shard id, start and end sequence numbers, stream ARN, batch size, arrival
  times (``DDBStreamBatchInfo``). Replaying it means reading that range back from the stream
  within its 24 hour retention (``python -m session_expiry_runtime.replay --queue-url ...``).
* **S3** (``failure_destination_bucket``) receives the same metadata plus the whole invocation
  event (``payload``), as ``aws/lambda/<ESM-UUID>/<shardID>/YYYY/MM/DD/...`` objects. Replay
  works at any later time (``--bucket ... --key ...``).

(AWS Lambda Developer Guide, "Retain discarded records for a DynamoDB event source in Lambda".)

aws-cdk-lib's ``S3OnFailureDestination`` grants the function read, write and delete on the whole
bucket; this module grants what Lambda needs to deliver, ``s3:PutObject`` (plus
``s3:ListBucket``, and ``kms:GenerateDataKey`` for a bucket with a customer managed key).
The S3 destination gets an alarm on the mapping's ``OnFailureDestinationDeliveredEventCount``
(``EventCount`` metrics, dimension ``EventSourceMappingUUID``), as the queue gets one on its
visible messages.
"""

from __future__ import annotations

import jsii
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from .monitoring import alarms as alarm_defaults

METRIC_DELIVERED = "OnFailureDestinationDeliveredEventCount"


def check_failure_destination(
    failure_queue: sqs.IQueue | None, failure_destination_bucket: s3.IBucket | None
) -> None:
    """Raises ValueError when both destinations are given (a mapping has one on-failure
    destination)."""
    if failure_queue is not None and failure_destination_bucket is not None:
        raise ValueError(
            f"failure_queue={failure_queue.node.path!r} and failure_destination_bucket="
            f"{failure_destination_bucket.node.path!r} are both set: an event source mapping has "
            "one on-failure destination; expected one of them"
        )


@jsii.implements(lambda_.IEventSourceDlq)
class S3FailureDestination:
    """S3 on-failure destination with least-privilege permissions (see module docstring)."""

    def __init__(self, bucket: s3.IBucket) -> None:
        self.bucket = bucket

    def bind(
        self, _target: lambda_.IEventSourceMapping, target_handler: lambda_.IFunction
    ) -> lambda_.DlqDestinationConfig:
        target_handler.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"], resources=[self.bucket.arn_for_objects("*")]
            )
        )
        target_handler.add_to_role_policy(
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self.bucket.bucket_arn])
        )
        if self.bucket.encryption_key is not None:
            target_handler.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["kms:GenerateDataKey"],
                    resources=[self.bucket.encryption_key.key_arn],
                )
            )
        return lambda_.DlqDestinationConfig(destination=self.bucket.bucket_arn)


def metric_delivered(mapping: lambda_.EventSourceMapping) -> cloudwatch.Metric:
    """``OnFailureDestinationDeliveredEventCount`` of ``mapping``, Sum over the alarm period."""
    return cloudwatch.Metric(
        namespace="AWS/Lambda",
        metric_name=METRIC_DELIVERED,
        dimensions_map={"EventSourceMappingUUID": mapping.event_source_mapping_id},
        statistic=cloudwatch.Stats.SUM,
        period=alarm_defaults.ALARM_PERIOD,
    )


def delivered_alarm(
    scope: Construct,
    *,
    mapping: lambda_.EventSourceMapping,
    actions: list[cloudwatch.IAlarmAction],
) -> cloudwatch.Alarm:
    """Alarm as soon as one record went to the S3 on-failure destination."""
    alarm = cloudwatch.Alarm(
        scope,
        "FailureDestinationAlarm",
        alarm_description=alarm_defaults.described(
            "Records went to the S3 on-failure destination: the cleanup gave up on them. "
            "Replay with python -m session_expiry_runtime.replay --bucket ... --key ...",
            alarm_defaults.RUNBOOK_ON_FAILURE_DESTINATION,
        ),
        metric=metric_delivered(mapping),
        threshold=1,
        evaluation_periods=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
    for action in actions:
        alarm.add_alarm_action(action)
    return alarm
