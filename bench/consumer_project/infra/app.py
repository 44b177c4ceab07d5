"""The consumer's CDK app: a WebSocket stage, a scratch bucket, sessions with the dashboard on
and an expiry sweeper every minute, and the $connect function that uses SessionStore."""

import aws_cdk as cdk
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3

from cdk_session_expiry import CLEANUP_RUNTIME, SessionExpiry

app = cdk.App()
stack = cdk.Stack(app, "ConsumerSessions")
api = apigwv2.WebSocketApi(stack, "Api")
stage = apigwv2.WebSocketStage(stack, "Stage", web_socket_api=api, stage_name="prod")
scratch = s3.Bucket(stack, "Scratch", removal_policy=cdk.RemovalPolicy.DESTROY)
sessions = SessionExpiry(
    stack,
    "Sessions",
    websocket_stage=stage,
    scratch_bucket=scratch,
    expiry_sweep_interval=cdk.Duration.minutes(1),
    removal_policy=cdk.RemovalPolicy.DESTROY,
)
sessions.add_dashboard()
connect = lambda_.Function(
    stack,
    "Connect",
    runtime=CLEANUP_RUNTIME,
    handler="index.handler",
    code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
)
sessions.grant_session_access(connect)
app.synth()
