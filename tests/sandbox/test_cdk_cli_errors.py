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
