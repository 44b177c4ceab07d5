"""The real CDK CLI (from the committed lockfile) synthesizes the sample app."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .helpers import REPO


@pytest.mark.slow
def test_cdk_cli_synthesizes_the_sample_app(tmp_path: Path) -> None:
    if shutil.which("npx") is None or not (REPO / "node_modules" / ".bin" / "cdk").exists():
        pytest.fail("the CDK CLI is not installed: run `make setup` (npm ci)")
    env = {
        **os.environ,
        # cdk.json runs "python3 app.py": the venv's python3 must come first.
        "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "NODE_NO_WARNINGS": "1",
    }
    # No credentials: synth must work offline and never ask an account for anything.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        env.pop(name, None)
    outdir = tmp_path / "cdk.out"
    result = subprocess.run(
        ["npx", "--no-install", "cdk", "synth", "--quiet", "--output", str(outdir)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    template = json.loads((outdir / "SessionExpirySample.template.json").read_text())
    types = {r["Type"] for r in template["Resources"].values()}
    assert {
        "AWS::DynamoDB::Table",
        "AWS::Lambda::EventSourceMapping",
        "AWS::Lambda::LayerVersion",
        "AWS::ApiGatewayV2::Api",
    } <= types
    (cleanup,) = (
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"]["Handler"] == "session_expiry_runtime.handler.handler"
    )
    asset = outdir / f"asset.{cleanup['Code']['S3Key'].removesuffix('.zip')}"
    assert (asset / "session_expiry_runtime" / "handler.py").is_file()
