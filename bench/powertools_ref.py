"""Reference for the cold start only: the baseline cleanup written with Powertools for AWS Lambda.

Same clients and per-record work as :mod:`bench.naive`, wrapped the way the Powertools
documentation shows a DynamoDB Streams batch handler: ``Logger``, ``Metrics`` (EMF) and
``BatchProcessor(event_type=EventType.DynamoDBStreams)`` with ``process_partial_response``.
Imported only in ``bench/.venv-powertools``; never part of the project.
"""

from __future__ import annotations

import os
from typing import Any

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import (
    DynamoDBRecord,
)

KEY_ARN = os.environ["SESSION_EXPIRY_GRANT_KEY_ARN"]
BUCKET = os.environ["SESSION_EXPIRY_SCRATCH_BUCKET"]

logger = Logger(service="session-expiry")
metrics = Metrics(namespace="SessionExpiry", service="session-expiry")
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
s3 = boto3.client("s3")
kms = boto3.client("kms")
apigw = boto3.client(
    "apigatewaymanagementapi", endpoint_url=os.environ["SESSION_EXPIRY_WEBSOCKET_ENDPOINT"]
)


def record_handler(record: DynamoDBRecord) -> None:
    old = record.dynamodb.old_image if record.dynamodb else {}
    if old.get("connectionId"):
        try:
            apigw.delete_connection(ConnectionId=old["connectionId"])
        except apigw.exceptions.GoneException:
            pass
    if old.get("grantId"):
        kms.retire_grant(KeyId=KEY_ARN, GrantId=old["grantId"])
    if old.get("scratchPrefix"):
        for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, Prefix=old["scratchPrefix"]
        ):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                s3.delete_objects(Bucket=BUCKET, Delete={"Objects": keys, "Quiet": True})
    metrics.add_metric(name="SessionsCleaned", unit="Count", value=1)


@logger.inject_lambda_context
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
