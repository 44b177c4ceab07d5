"""The consumer's root conftest: the plugin, and where the CDK app is."""

import uuid
from pathlib import Path

import pytest
from session_expiry_runtime.store import SessionStore

pytest_plugins = ["cdk_session_expiry.testing.pytest_plugin"]


@pytest.fixture(scope="module")
def session_expiry_app_dir() -> Path:
    return Path(__file__).parent / "infra"


@pytest.fixture
def store(session_expiry_app_env: dict[str, str]) -> SessionStore:
    """The application's store, with the deployed settings, talking to the emulator."""
    return SessionStore.from_env()


@pytest.fixture
def new_id():
    """Session ids of this test only: the tests keep apart by their own ids."""
    return lambda name: f"{name}-{uuid.uuid4().hex[:8]}"
