"""Adversarial props: each test is a counterexample that once got past the construct's
validation, kept as a regression test (see the comment on each)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_s3 as s3
from session_expiry_runtime.core.prefixes import ScratchPrefixError, validate_scratch_root
from session_expiry_runtime.sinks.archive import validate_archive_prefix

from cdk_session_expiry import SessionExpiry


@pytest.fixture
def stack() -> Stack:
    return Stack(App(), "Adversarial")


def _fails(stack: Stack, match: str, **props: Any) -> None:
    with pytest.raises(ValueError, match=match):
        SessionExpiry(stack, "Sessions", **props)


# Guards promise 7 against a construct/runtime mismatch: the runtime refuses '[' and ']' in
# the scratch root and the archive prefix (validate_scratch_root treats them as wildcards), so
# the deployed cleanup function raised on every invocation; the construct accepted them.
@pytest.mark.parametrize("root", ["sessions[1]/", "app/]x/"])
def test_fails_scratch_root_the_runtime_would_refuse(stack: Stack, root: str) -> None:
    with pytest.raises(ScratchPrefixError):
        validate_scratch_root(root)
    _fails(
        stack,
        re.escape(f"scratch_root={root!r}") + ".*wildcard",
        scratch_bucket=s3.Bucket(stack, "Scratch"),
        scratch_root=root,
    )


def test_fails_archive_prefix_the_runtime_would_refuse(stack: Stack) -> None:
    with pytest.raises(ValueError):
        validate_archive_prefix("archive[0]/")
    _fails(
        stack,
        re.escape("archive_prefix='archive[0]/'") + ".*wildcard",
        archive_bucket=s3.Bucket(stack, "Archive"),
        archive_prefix="archive[0]/",
    )
