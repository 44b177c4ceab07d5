"""A tiny stand-in for the sample app: the same pipeline shape with a handler tests control.

Table with a NEW_AND_OLD_IMAGES stream and a TTL attribute, a function whose code asset is
``handler_src/``, an event source mapping with a REMOVE filter, batch size 4, bisect, 2
retries, a 1-hour record age, partial batch responses and an SQS on-failure destination,
and a scratch bucket the handler deletes from. A second function of the same code asset
(``standin_tick.handler``) runs on an EventBridge schedule, every 2 minutes.
"""

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs

app = cdk.App()
stack = cdk.Stack(
    app, "StandInPipeline", env=cdk.Environment(account="123456789012", region="us-east-1")
)
table = dynamodb.Table(
    stack,
    "Sessions",
    partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
    stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
    time_to_live_attribute="expiresAt",
    billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
    removal_policy=cdk.RemovalPolicy.DESTROY,
)
bucket = s3.Bucket(stack, "Scratch", removal_policy=cdk.RemovalPolicy.DESTROY)
queue = sqs.Queue(stack, "OnFailure")
function = lambda_.Function(
    stack,
    "Cleanup",
    runtime=lambda_.Runtime.PYTHON_3_12,
    handler="standin_handler.handler",
    code=lambda_.Code.from_asset(str(Path(__file__).parent / "handler_src")),
    timeout=cdk.Duration.seconds(10),
    environment={
        "SCRATCH_BUCKET": bucket.bucket_name,
        "WEBSOCKET_ENDPOINT": "https://abc123.execute-api.us-east-1.amazonaws.com/prod",
    },
)
bucket.grant_delete(function)
function.add_event_source(
    sources.DynamoEventSource(
        table,
        starting_position=lambda_.StartingPosition.TRIM_HORIZON,
        batch_size=4,
        bisect_batch_on_error=True,
        retry_attempts=2,
        max_record_age=cdk.Duration.hours(1),
        report_batch_item_failures=True,
        on_failure=sources.SqsDlq(queue),
        filters=[
            lambda_.FilterCriteria.filter({"eventName": lambda_.FilterRule.is_equal("REMOVE")})
        ],
    )
)
tick = lambda_.Function(
    stack,
    "Tick",
    runtime=lambda_.Runtime.PYTHON_3_12,
    handler="standin_tick.handler",
    code=lambda_.Code.from_asset(str(Path(__file__).parent / "handler_src")),
    environment={"TICK_NAME": "stand-in tick"},
)
events.Rule(
    stack,
    "TickSchedule",
    schedule=events.Schedule.rate(cdk.Duration.minutes(2)),
    targets=[targets.LambdaFunction(tick)],
)
app.synth()
