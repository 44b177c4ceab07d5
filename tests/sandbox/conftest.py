"""Fixtures of the local pipeline's own tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cdk_session_expiry.testing import LocalEmulator

# The library's fixtures, as a user's conftest would load them (a root conftest would use
# ``pytest_plugins = ["cdk_session_expiry.testing.pytest_plugin"]``).
from cdk_session_expiry.testing.pytest_plugin import (  # noqa: F401
    session_expiry_app_dir,
    session_expiry_app_env,
    session_expiry_emulator,
    session_expiry_pipeline,
    session_expiry_stack,
)


@pytest.fixture(scope="module")
def emulator() -> Iterator[LocalEmulator]:
    with LocalEmulator() as emu:
        yield emu
