"""The deployed integration test (``integ/``), offline: its synthesized templates match the
committed snapshot (asset hashes normalised), its assertions are the ones documented, and
``make integ`` without credentials says so and exits 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from integ import run
from integ.integ_session_expiry import SCRATCH_PREFIX, STACK_NAME, build

from .helpers import REPO, cdk_json_context

SNAPSHOTS = REPO / "integ" / "snapshots"
_ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")


#: integ-tests-alpha salts each API call with the synth time, so that it runs on every deploy.
_SALT = re.compile(r'"salt": "\d+"')


def _normalised(template: dict[str, Any]) -> dict[str, Any]:
    text = _ASSET_HASH.sub("<asset-hash>", json.dumps(template))
    return json.loads(_SALT.sub('"salt": "<synth time>"', text))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    app = App(context=cdk_json_context(), outdir=str(tmp_path_factory.mktemp("integ")))
    build(app)
    stacks = [c for c in app.node.find_all() if isinstance(c, Stack)]
    return {s.artifact_id: _normalised(Template.from_stack(s).to_json()) for s in stacks}


def test_snapshot(templates: dict[str, dict[str, Any]]) -> None:
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        for old in SNAPSHOTS.glob("*.template.json"):
            old.unlink()
        for name, template in templates.items():
            (SNAPSHOTS / f"{name}.template.json").write_text(
                json.dumps(template, indent=1, sort_keys=True) + "\n"
            )
    committed = {p.name.removesuffix(".template.json") for p in SNAPSHOTS.glob("*.template.json")}
    assert committed == set(templates), "run with UPDATE_SNAPSHOTS=1 to write integ/snapshots"
    for name, template in templates.items():
        expected = json.loads((SNAPSHOTS / f"{name}.template.json").read_text())
        assert template == expected, f"{name} changed; review and run with UPDATE_SNAPSHOTS=1"


def test_assertions_end_a_session_and_wait_for_object_and_grant(
    templates: dict[str, dict[str, Any]],
) -> None:
    (assert_stack,) = (t for name, t in templates.items() if name != STACK_NAME)
    calls = sorted(
        r["Type"].removeprefix("Custom::DeployAssert@SdkCall")
        for r in assert_stack["Resources"].values()
        if r["Type"].startswith("Custom::DeployAssert@SdkCall")
    )
    assert calls == [
        "DynamoDBdeleteItem",
        "DynamoDBputItem",
        "KMScreateGrant",
        "KMSlistGrants",
        "S3listObjectsV2",
        "S3putObject",
    ]
    assert sorted(assert_stack["Outputs"]) == sorted(
        k for k in assert_stack["Outputs"] if k.startswith("AssertionResultsAwsApiCall")
    )
    assert len(assert_stack["Outputs"]) == 2
    listing = next(
        r["Properties"]
        for r in assert_stack["Resources"].values()
        if r["Type"] == "Custom::DeployAssert@SdkCallS3listObjectsV2"
    )
    assert json.loads(listing["expected"]) == {"$ObjectLike": {"KeyCount": 0}}
    assert SCRATCH_PREFIX in json.dumps(listing["parameters"])


def test_make_integ_without_credentials_says_so_and_exits_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        {
            "AWS_CONFIG_FILE": str(tmp_path / "none"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_REGION": "us-east-1",
        }
    )
    done = subprocess.run(
        [sys.executable, "-m", "integ.run"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == run.EXIT_NO_CREDENTIALS, done.stdout + done.stderr
    assert "no usable AWS credentials" in done.stderr
    assert "Nothing was deployed" in done.stderr
    assert "$ " not in done.stdout  # no cdk command ran


def test_assertion_results_are_read_from_the_outputs() -> None:
    outputs = {
        "SessionExpiryIntegTestDefaultTestDeployAssert9BA8AF34": {
            "AssertionResultsAwsApiCallS3listObjectsV2abc": '{"status":"success"}',
            "AssertionResultsAwsApiCallKMSlistGrantsdef": (
                '{"status":"fail","message":"Expected {Grants: []} ..."}'
            ),
            "Other": "x",
        },
        "SessionExpiryInteg": {},
    }
    results = run.assertion_results(outputs)
    assert set(results) == {
        "AssertionResultsAwsApiCallS3listObjectsV2abc",
        "AssertionResultsAwsApiCallKMSlistGrantsdef",
    }
    assert run.report(results) is False
    assert run.report({"a": {"status": "success"}}) is True
    assert run.report({}) is False
