"""Every opt-in of SessionExpiry in one stack, deployed through the pytest plugin once per test
session (tests/sandbox/test_plugin_optins*.py): the dashboard and the construct's widgets on a
dashboard of the app's own, a sub-minute expiry sweeper, the grant sweep, the archive, fan-out to
an event bus (with a consumer queue), AgentCore targets, a custom step and feature flags in AWS
AppConfig; two application
functions are given session access, with different environments.
"""

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs

from cdk_session_expiry import CLEANUP_RUNTIME, CustomCleanupStep, SessionExpiry

RUNTIME_ARN = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/optins_agent-a1b2c3d4e5"
# Custom tools of this app: the AWS-managed aws.codeinterpreter.v1 / aws.browser.v1 are refused
# unless allow_stopping_shared_aws_managed_tool_sessions=True (docs/ownership.md).
CODE_INTERPRETER_ID = "optins_ci-a1b2c3d4e5"
BROWSER_ID = "optins_browser-a1b2c3d4e5"

app = cdk.App()
stack = cdk.Stack(app, "OptIns", env=cdk.Environment(account="123456789012", region="us-east-1"))
api = apigwv2.WebSocketApi(stack, "Api")
stage = apigwv2.WebSocketStage(stack, "Stage", web_socket_api=api, stage_name="prod")
scratch = s3.Bucket(stack, "Scratch", removal_policy=cdk.RemovalPolicy.DESTROY)
archive = s3.Bucket(stack, "Archive", removal_policy=cdk.RemovalPolicy.DESTROY)
grant_key = kms.Key(stack, "GrantKey", removal_policy=cdk.RemovalPolicy.DESTROY)
bus = events.EventBus(stack, "Bus")
consumer = sqs.Queue(stack, "Consumer")
events.Rule(
    stack,
    "SessionCleaned",
    event_bus=bus,
    event_pattern=events.EventPattern(source=["cdk-session-expiry"]),
    targets=[targets.SqsQueue(consumer)],
)
# Deletes the object a session names (attributes noteBucket/noteKey) when the session ends.
note = CustomCleanupStep(
    name="DeleteNote",
    code=Path(__file__).parent / "steps",
    handler="optin_steps.note.delete_note",
    attributes=["noteBucket", "noteKey"],
    # The opt-in under test: this step acts on what the image names (the sandbox's own bucket,
    # one tenant). An application with untrusted writers uses resource_attribute instead.
    allow_acting_on_image_values=True,
)
sessions = SessionExpiry(
    stack,
    "Sessions",
    websocket_stage=stage,
    scratch_bucket=scratch,
    grant_key=grant_key,
    archive_bucket=archive,
    event_bus=bus,
    expiry_sweep_interval=cdk.Duration.seconds(10),
    agent_runtime=RUNTIME_ARN,
    code_interpreter=CODE_INTERPRETER_ID,
    browser=BROWSER_ID,
    custom_steps=[note],
    alarm_ttl_health_window=cdk.Duration.hours(1),
    removal_policy=cdk.RemovalPolicy.DESTROY,
    metrics_tenant_dimension=True,
    tenant_insights=True,
    feature_flags=True,  # issue 26 part 1: kill switches in AWS AppConfig
)
scratch.grant_delete(note)
sessions.add_dashboard()
cloudwatch.Dashboard(stack, "AppDashboard", widgets=[sessions.widgets()])
cdk.CfnOutput(stack, "ConsumerQueueUrl", value=consumer.queue_url)


def _function(name: str) -> lambda_.Function:
    return lambda_.Function(
        stack,
        name,
        runtime=CLEANUP_RUNTIME,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
    )


connect = _function("Connect")
message = _function("Message")
sessions.grant_session_access(connect)
sessions.grant_session_access(message)
connect.add_environment("GREETING", "hello")  # the two environments differ
app.synth()
