"""Builds the sample CDK app from context, with cdk-nag's AWS Solutions checks registered."""

from __future__ import annotations

import json
import os
from typing import Any

from aws_cdk import App, Duration, Environment, Validations
from cdk_nag import AwsSolutionsChecks

from .stack import DEFAULT_STAGE_NAME, SessionExpirySampleStack

#: Context keys (``cdk synth -c key=value`` or ``cdk.json``) and their defaults.
CONTEXT_STACK_NAME = "sample:stackName"  # default "SessionExpirySample"
CONTEXT_ACCOUNT = "sample:account"  # default $CDK_DEFAULT_ACCOUNT, else environment-agnostic
CONTEXT_REGION = "sample:region"  # default $CDK_DEFAULT_REGION, else us-east-1
CONTEXT_STAGE_NAME = "sample:stageName"  # default "live"
CONTEXT_SESSION_TTL_MINUTES = "sample:sessionTtlMinutes"  # default 60
#: The kill switch: ``false`` disables the cleanup's event source mapping; the stream position
#: is kept and records resume when it is ``true`` again (within the stream's 24 hours).
CONTEXT_CLEANUP_ENABLED = "sample:cleanupEnabled"  # default true
#: ``true``: the cleanup and the sweeper log and count what they would do, and change nothing.
CONTEXT_CLEANUP_DRY_RUN = "sample:cleanupDryRun"  # default false
#: ``false``: the account already has API Gateway's CloudWatch Logs role (``cloudWatchRoleArn``,
#: one per account and Region), which WebSocket access logging needs; the stack leaves it alone.
CONTEXT_API_GATEWAY_LOGS_ROLE = "sample:apiGatewayLogsRole"  # default true
#: AgentCore targets whose sessions the cleanup stops; each unset by default, so a deploy to a
#: real account never names AgentCore resources that do not exist there. The runtime's ARN (and
#: optional endpoint), and a custom code interpreter / browser of the app by ARN or id
#: (``<name>-<10 letters or digits>``; the construct refuses the AWS-managed
#: ``aws.codeinterpreter.v1`` / ``aws.browser.v1``). ``make sandbox`` sets them for the emulator.
CONTEXT_AGENT_RUNTIME_ARN = "sample:agentRuntimeArn"
CONTEXT_AGENT_RUNTIME_QUALIFIER = "sample:agentRuntimeQualifier"
CONTEXT_CODE_INTERPRETER = "sample:codeInterpreter"
CONTEXT_BROWSER = "sample:browser"
#: An AgentCore Memory (ARN or id) whose events of each ended session the cleanup deletes, and
#: the long-term record namespaces (comma-separated templates with {sessionId}) deleted with
#: them; unset by default (``make sandbox`` sets them for the emulator).
CONTEXT_AGENT_MEMORY = "sample:agentMemory"
#: JSON object of ``SessionExpiry(resource_targets=...)``: declared kinds' props → targets.
CONTEXT_RESOURCE_TARGETS = "sample:resourceTargets"
CONTEXT_AGENT_MEMORY_RECORD_NAMESPACES = "sample:agentMemoryRecordNamespaces"
DEFAULT_STACK_NAME = "SessionExpirySample"
FALLBACK_REGION = "us-east-1"


def build_app(
    context: dict[str, Any] | None = None, *, outdir: str | None = None, **app_kwargs: Any
) -> App:
    """The sample app with its one stack; ``context`` adds to ``cdk.json``'s context.

    Account and region come from context, else from the CLI's ``CDK_DEFAULT_ACCOUNT`` /
    ``CDK_DEFAULT_REGION``; without an account the stack is environment-agnostic, so
    ``cdk synth`` needs no credentials.
    """
    app = App(context=context, outdir=outdir, **app_kwargs)

    def ctx(key: str) -> Any:
        return app.node.try_get_context(key)

    account = ctx(CONTEXT_ACCOUNT) or os.environ.get("CDK_DEFAULT_ACCOUNT")
    region = ctx(CONTEXT_REGION) or os.environ.get("CDK_DEFAULT_REGION") or FALLBACK_REGION
    SessionExpirySampleStack(
        app,
        ctx(CONTEXT_STACK_NAME) or DEFAULT_STACK_NAME,
        env=Environment(account=account, region=region),
        stage_name=ctx(CONTEXT_STAGE_NAME) or DEFAULT_STAGE_NAME,
        session_ttl=Duration.minutes(int(ctx(CONTEXT_SESSION_TTL_MINUTES) or 60)),
        cleanup_enabled=context_flag(ctx(CONTEXT_CLEANUP_ENABLED), CONTEXT_CLEANUP_ENABLED, True),
        cleanup_dry_run=context_flag(ctx(CONTEXT_CLEANUP_DRY_RUN), CONTEXT_CLEANUP_DRY_RUN, False),
        api_gateway_logs_role=context_flag(
            ctx(CONTEXT_API_GATEWAY_LOGS_ROLE), CONTEXT_API_GATEWAY_LOGS_ROLE, True
        ),
        agent_runtime_arn=ctx(CONTEXT_AGENT_RUNTIME_ARN),
        agent_runtime_qualifier=ctx(CONTEXT_AGENT_RUNTIME_QUALIFIER),
        code_interpreter=ctx(CONTEXT_CODE_INTERPRETER),
        browser=ctx(CONTEXT_BROWSER),
        agent_memory=ctx(CONTEXT_AGENT_MEMORY),
        agent_memory_record_namespaces=[
            n for n in str(ctx(CONTEXT_AGENT_MEMORY_RECORD_NAMESPACES) or "").split(",") if n
        ]
        or None,
        resource_targets=json.loads(str(ctx(CONTEXT_RESOURCE_TARGETS)))
        if ctx(CONTEXT_RESOURCE_TARGETS)
        else None,
        description="Sample app of cdk-session-expiry: WebSocket sessions that fail closed",
    )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


def context_flag(value: Any, key: str, default: bool) -> bool:
    """A boolean context value: ``true``/``false`` from ``-c key=...`` (a string) or
    ``cdk.json`` (a JSON boolean); ``default`` when unset.

    Raises:
        ValueError: any other value; the message names the key and the value.
    """
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"context {key}={value!r}: expected true or false")
