"""checkov on the sample app, the README's minimal example and a stack with every feature on:
nothing fails, each skip carries its reason, and each skip still matches a real failure when
the skip metadata is taken out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack, assertions

from cdk_session_expiry import SessionExpiry
from sample_app.app import build_app

from .checkov_support import run_checkov
from .helpers import cdk_json_context
from .test_nag import ENV, everything

pytestmark = pytest.mark.slow

SAMPLE_CONTEXT = {"sample:account": "123456789012", "sample:region": "us-east-1"}


def _template(stack: Stack) -> dict[str, Any]:
    return assertions.Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def _templates(outdir: Path) -> dict[str, dict[str, Any]]:
    sample_app = build_app({**cdk_json_context(), **SAMPLE_CONTEXT}, outdir=str(outdir / "a"))
    (sample,) = (c for c in sample_app.node.children if isinstance(c, Stack))
    minimal = Stack(App(outdir=str(outdir / "b")), "Sessions")
    SessionExpiry(minimal, "Sessions")  # the README's minimal example
    full = Stack(App(context=cdk_json_context(), outdir=str(outdir / "c")), "Everything", env=ENV)
    everything(full)
    return {
        "sample": _template(sample),
        "minimal": _template(minimal),
        "everything": _template(full),
    }


def _without_skips(template: dict[str, Any]) -> dict[str, Any]:
    stripped = json.loads(json.dumps(template))
    for resource in stripped["Resources"].values():
        resource.get("Metadata", {}).pop("checkov", None)
    return stripped


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    work = tmp_path_factory.mktemp("checkov")
    scanned = work / "templates"
    scanned.mkdir()
    for name, template in _templates(work).items():
        (scanned / f"{name}.json").write_text(json.dumps(template))
        (scanned / f"{name}.unskipped.json").write_text(json.dumps(_without_skips(template)))
    return run_checkov(scanned)


def _relevant(finding: dict[str, Any]) -> bool:
    """The 'everything' stack's own test fixtures are not under test: only the construct's."""
    if finding["file"].startswith("everything"):
        return finding["resource"].split(".", 1)[1].startswith("Sessions")
    return True


def _set(findings: list[dict[str, Any]], file: str, result: str) -> set[tuple[str, str]]:
    return {
        (f["resource"], f["check_id"])
        for f in findings
        if f["file"] == file and f["result"] == result and _relevant(f)
    }


@pytest.mark.parametrize("name", ["sample", "minimal", "everything"])
def test_nothing_fails(findings: list[dict[str, Any]], name: str) -> None:
    assert sorted(_set(findings, f"{name}.json", "FAILED")) == []


@pytest.mark.parametrize("name", ["sample", "minimal", "everything"])
def test_each_skip_has_a_reason_and_matches_a_real_failure(
    findings: list[dict[str, Any]], name: str
) -> None:
    skipped = _set(findings, f"{name}.json", "SKIPPED")
    assert skipped, f"{name}: nothing skipped"
    assert all(f["comment"] for f in findings if f["result"] == "SKIPPED")
    # With the skip metadata taken out, exactly the skipped checks fail.
    assert _set(findings, f"{name}.unskipped.json", "FAILED") == skipped


def test_the_construct_explains_its_design_in_the_minimal_example(
    findings: list[dict[str, Any]],
) -> None:
    assert {check for _, check in _set(findings, "minimal.json", "SKIPPED")} == {
        "CKV_AWS_27",
        "CKV_AWS_115",
        "CKV_AWS_116",
        "CKV_AWS_117",
        "CKV_AWS_119",
        "CKV_AWS_158",
        "CKV_AWS_173",
    }
