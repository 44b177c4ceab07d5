"""Shared test settings.

Environment defaults are set before any test module imports aws_cdk or boto3: the jsii
runtime reads its variables when it starts, and boto3 must never reach a real account.
"""

from __future__ import annotations

import os

_DEFAULTS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    # boto3 against moto's DynamoDB Streams endpoint needs the plain endpoint.
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    "JSII_DEPRECATED": "quiet",
    "NODE_NO_WARNINGS": "1",
}
for _name, _value in _DEFAULTS.items():
    os.environ.setdefault(_name, _value)
# Never let a developer's real profile leak into a test.
os.environ.pop("AWS_PROFILE", None)


import gc  # noqa: E402 - after the environment defaults, like everything below them
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

# The library's pytest plugin, loaded as a user's root conftest loads it: its fixtures deploy an
# app into the local emulator (tests/sandbox); tests that do not ask for them are left alone.
pytest_plugins = ["cdk_session_expiry.testing.pytest_plugin"]


@pytest.fixture(autouse=True)
def _collector_as_found() -> Iterator[None]:
    """The cleanup handler tunes the process's garbage collector on its first invocation
    (``session_expiry_runtime.core.gc_settings``); in this one test process, each test ends with the
    collector as it found it."""
    before = gc.get_threshold()
    yield
    if gc.get_freeze_count():
        gc.unfreeze()
    if gc.get_threshold() != before:
        gc.set_threshold(*before)
