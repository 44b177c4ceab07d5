"""The levers the status command reports, in one small stack deployed through the pytest plugin
(tests/sandbox/test_plugin_status.py): the circuit breaker, feature flags in AWS AppConfig and
one step (DeleteScratch, with the scratch bucket), beside what every SessionExpiry has (the
mapping, the failure queue, the pause watch, the alarms)."""

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3

from cdk_session_expiry import SessionExpiry

app = cdk.App()
stack = cdk.Stack(app, "Status", env=cdk.Environment(account="123456789012", region="us-east-1"))
scratch = s3.Bucket(stack, "Scratch", removal_policy=cdk.RemovalPolicy.DESTROY)
SessionExpiry(
    stack,
    "Sessions",
    scratch_bucket=scratch,
    circuit_breaker=True,
    feature_flags=True,
    removal_policy=cdk.RemovalPolicy.DESTROY,
)
app.synth()
