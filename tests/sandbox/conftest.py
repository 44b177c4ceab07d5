"""Fixtures of the local pipeline's own tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cdk_session_expiry.testing import LocalEmulator

# The library's fixtures (session_expiry_*) come from the plugin tests/conftest.py loads.


@pytest.fixture(scope="module")
def emulator() -> Iterator[LocalEmulator]:
    with LocalEmulator() as emu:
        yield emu
