"""What a consumer of the testing plugin is told when the app or the CDK CLI is not there:
the directory searched, the fixture to override, how to install a CDK CLI — never this
repository's own set-up (``npm ci``, ``make setup``) nor a raw ``FileNotFoundError``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdk_session_expiry.testing import (
    CdkAppNotFoundError,
    CdkCliError,
    LocalEmulator,
    LocalPipeline,
)
from cdk_session_expiry.testing.cdk_cli import TESTED_CDK_CLI_VERSION, find_cdk_cli

REPO = Path(__file__).resolve().parents[2]
_REPOSITORY_ADVICE = ("npm ci", "make setup")


def test_fails_when_the_app_directory_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "infra"
    with pytest.raises(CdkAppNotFoundError) as caught:
        LocalPipeline.deploy(missing, emulator=LocalEmulator())
    message = str(caught.value)
    assert f"CDK app directory {missing} does not exist" in message
    assert "session_expiry_app_dir" in message
    assert not any(advice in message for advice in _REPOSITORY_ADVICE)


def test_fails_when_the_app_directory_has_no_cdk_json(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("# not a CDK app directory: no cdk.json\n")
    with pytest.raises(CdkAppNotFoundError) as caught:
        LocalPipeline.deploy(tmp_path, emulator=LocalEmulator())
    message = str(caught.value)
    assert f"no cdk.json in {tmp_path}" in message
    assert "session_expiry_app_dir" in message and "cdk synth" in message
    # Also a FileNotFoundError for code that caught the old raw error.
    assert isinstance(caught.value, FileNotFoundError)


def test_fails_without_a_cdk_cli_and_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = tmp_path / "project" / "infra"
    app.mkdir(parents=True)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(CdkCliError) as caught:
        find_cdk_cli(app)
    message = str(caught.value)
    assert f"node_modules/.bin/cdk in {app} and each of its parents" in message
    assert "'cdk' on PATH" in message
    assert f"npm install aws-cdk@{TESTED_CDK_CLI_VERSION}" in message
    assert not any(advice in message for advice in _REPOSITORY_ADVICE)


def test_a_cli_in_a_parent_node_modules_is_found(tmp_path: Path) -> None:
    cli = tmp_path / "node_modules" / ".bin" / "cdk"
    cli.parent.mkdir(parents=True)
    cli.write_text("#!/bin/sh\n")
    (tmp_path / "infra").mkdir()
    assert find_cdk_cli(tmp_path / "infra") == [str(cli)]


def test_the_version_named_in_the_advice_is_the_one_the_project_pins() -> None:
    pinned = json.loads((REPO / "package.json").read_text())["devDependencies"]["aws-cdk"]
    assert pinned == TESTED_CDK_CLI_VERSION


# --- no Node.js at all (issue 39) -----------------------------------------------------------

_NODE_MESSAGE = (
    "Node.js not found ('node' on PATH): the AWS CDK's Python packages run on the jsii runtime, "
    "which needs Node.js 22 or 24 (20 still works, with an end-of-life banner"
)


def _without_node(tmp_path: Path) -> dict[str, str]:
    """The environment with a PATH that holds no ``node`` (and no JSII_NODE)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "JSII_NODE"}
    empty = tmp_path / "bin-without-node"
    empty.mkdir()
    env["PATH"] = str(empty)
    return env


def test_the_plugin_says_node_is_missing_before_jsii_starts(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "import cdk_session_expiry.testing.pytest_plugin"],
        env=_without_node(tmp_path),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "NodeNotFoundError: " + _NODE_MESSAGE in done.stderr
    assert "jsii/_kernel" not in done.stderr  # aws_cdk was never imported: no jsii traceback
    assert "FileNotFoundError" not in done.stderr


def test_a_pytest_run_with_the_plugin_says_node_is_missing(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "test_nothing.py").write_text("def test_nothing() -> None:\n    pass\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "cdk_session_expiry.testing.pytest_plugin", "-q"],
        env=_without_node(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert _NODE_MESSAGE in done.stdout + done.stderr
    assert "FileNotFoundError" not in done.stdout + done.stderr


def test_require_node_finds_node_on_path_or_jsii_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdk_session_expiry._node import NodeNotFoundError, require_node

    fake = tmp_path / "node-22"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    monkeypatch.setenv("JSII_NODE", str(fake))
    assert require_node() == str(fake)
    monkeypatch.setenv("JSII_NODE", "node-that-is-not-there")
    with pytest.raises(NodeNotFoundError, match=r"^Node.js not found \(JSII_NODE="):
        require_node()
