"""The README's pytest-plugin example, run as written against a consumer's app: it passes when
the deployed cleanup works, and fails when nothing is cleaned (the same app with the cleanup
switched off), so the example proves what it claims."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cdk_session_expiry.testing import Invocation, PollReport

REPO = Path(__file__).resolve().parents[2]

#: A consumer's CDK app, as the README's "Attach it to what the application already has" shows.
CONSUMER_APP = textwrap.dedent(
    """
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
        removal_policy=cdk.RemovalPolicy.DESTROY,
        cleanup_enabled=CLEANUP_ENABLED,
    )
    connect = lambda_.Function(
        stack,
        "Connect",
        runtime=CLEANUP_RUNTIME,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\\n    return None\\n"),
    )
    sessions.grant_session_access(connect)
    app.synth()
    """
)


def _readme_plugin_example() -> tuple[str, str]:
    """The two python blocks of the README's plugin section: conftest.py and the test."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Testing your session code (pytest plugin)", 1)[1]
    section = section.split("\n## ", 1)[0].split("\n### ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(blocks) >= 2, "the README's plugin section lost its conftest/test blocks"
    return blocks[0], blocks[1]


def _consumer_project(root: Path, *, cleanup_enabled: bool) -> Path:
    conftest, test = _readme_plugin_example()
    assert 'Path(__file__).parent / "infra"' in conftest
    (root / "conftest.py").write_text(conftest)
    (root / "test_sessions.py").write_text(test)
    infra = root / "infra"
    infra.mkdir()
    (infra / "app.py").write_text(
        CONSUMER_APP.replace("CLEANUP_ENABLED", "True" if cleanup_enabled else "False")
    )
    (infra / "cdk.json").write_text(
        '{"app": "python3 app.py", "context": {"cli-telemetry": false}}'
    )
    return root


def _run_pytest(project: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTEST_"))}
    # The CDK CLI this repository pins, found on PATH as a consumer's global install would be.
    env["PATH"] = os.pathsep.join([str(REPO / "node_modules" / ".bin"), env.get("PATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_sessions.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )


@pytest.mark.slow
def test_the_readme_example_passes_when_sessions_are_cleaned(tmp_path: Path) -> None:
    result = _run_pytest(_consumer_project(tmp_path, cleanup_enabled=True))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout


@pytest.mark.slow
def test_the_readme_example_fails_when_nothing_is_cleaned(tmp_path: Path) -> None:
    result = _run_pytest(_consumer_project(tmp_path, cleanup_enabled=False))
    assert result.returncode == 1, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 failed" in result.stdout
    # It fails on the cleanup's effect: the expired session's connection is still open.
    assert "conn-expired" in result.stdout, result.stdout[-4000:]


def test_poll_report_counts_invocations_by_outcome() -> None:
    report = PollReport(
        invocations=[
            Invocation("shard-1", ("1", "2"), "function_error", 0),
            Invocation("shard-1", ("1",), "success", 0),
            Invocation("shard-1", ("2",), "partial", 0),
            Invocation("shard-1", ("2",), "success", 1),
        ]
    )
    assert report.outcomes() == {"function_error": 1, "success": 2, "partial": 1}
    assert (report.function_errors, report.partial_failures) == (1, 1)
