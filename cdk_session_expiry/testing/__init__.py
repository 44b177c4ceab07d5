"""Test your session code against the deployed shape of your CDK app, without an AWS account.

``pip install 'cdk-session-expiry[testing]'`` (moto's server, boto3, pytest) and Node.js (22 or
24; 20 works with an end-of-life banner) with the CDK CLI are needed — importing this package
without Node.js on ``PATH`` raises
[`NodeNotFoundError`][cdk_session_expiry.testing.NodeNotFoundError] saying so; nothing here is
imported by the construct itself. The pytest fixtures are in
`cdk_session_expiry.testing.pytest_plugin`; the documentation's "Testing your code" page
describes every name below, and what differs from AWS.

* [`LocalEmulator`][cdk_session_expiry.testing.LocalEmulator] — moto's server on
  ``http://localhost:{port}`` in this process, taught
  what moto lacks (stream records kept, TTL deletes, CloudWatch alarms in CloudFormation,
  AgentCore Stop calls, injected faults).
* [`LocalPipeline`][cdk_session_expiry.testing.LocalPipeline] — the app deployed with the real CDK
  CLI ([`CdkCli`][cdk_session_expiry.testing.CdkCli]) and read
  back: the deployed cleanup handler fed by the deployed event source mapping's semantics
  ([`EventSourceMappingPoller`][cdk_session_expiry.testing.EventSourceMappingPoller]), the
  sweepers, the kill switch, the replay CLI.
* [`EmulatorSnapshot`][cdk_session_expiry.testing.EmulatorSnapshot] — the emulator's state after a
  deploy, restored for each test module
  instead of deploying again.
"""

# ruff: noqa: E402  (the Node.js check runs between the imports, before any imports aws_cdk)

from __future__ import annotations

from cdk_session_expiry._node import NodeNotFoundError, require_node

# Before anything below imports aws_cdk (which starts Node.js): a missing Node.js is said
# plainly, with the versions that work, instead of jsii's traceback.
require_node()

from cdk_session_expiry.testing.agentcore import AgentCoreCall
from cdk_session_expiry.testing.app_function import AppFunctionError
from cdk_session_expiry.testing.cdk_cli import CdkAppNotFoundError, CdkCli, CdkCliError
from cdk_session_expiry.testing.deployment import (
    DeployedFunction,
    DeployedStack,
    FunctionError,
    FunctionTimeout,
    LocalLambda,
)
from cdk_session_expiry.testing.emulator import Fault, LocalEmulator
from cdk_session_expiry.testing.failure_replay import ReplayResult
from cdk_session_expiry.testing.models._moto_internals import (
    MotoInternalsChanged,
    check_moto_internals,
)
from cdk_session_expiry.testing.pipeline import EmfMetrics, LocalPipeline
from cdk_session_expiry.testing.poller import (
    EventSourceMappingConfig,
    EventSourceMappingPoller,
    Invocation,
    PollReport,
    ShardBlocked,
)
from cdk_session_expiry.testing.schedules import Schedule, ScheduledRun, ScheduleRunner
from cdk_session_expiry.testing.snapshot import EmulatorSnapshot, SnapshotError

__all__ = [
    "AgentCoreCall",
    "AppFunctionError",
    "CdkAppNotFoundError",
    "CdkCli",
    "CdkCliError",
    "DeployedFunction",
    "DeployedStack",
    "EmfMetrics",
    "EmulatorSnapshot",
    "EventSourceMappingConfig",
    "EventSourceMappingPoller",
    "Fault",
    "FunctionError",
    "FunctionTimeout",
    "Invocation",
    "LocalEmulator",
    "LocalLambda",
    "LocalPipeline",
    "MotoInternalsChanged",
    "NodeNotFoundError",
    "PollReport",
    "ReplayResult",
    "Schedule",
    "ScheduleRunner",
    "ScheduledRun",
    "ShardBlocked",
    "SnapshotError",
    "check_moto_internals",
]
