"""Fixtures of the cleanup runtime tests (moto in-process, real boto3 calls)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from moto import mock_aws
from runtime_support import Sandbox
from session_expiry_runtime import handler as handler_module


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def sandbox(aws: None) -> Sandbox:
    return Sandbox()


@pytest.fixture
def session_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Captures the one-line-per-session log records (their ``session`` field)."""
    caplog.set_level(logging.INFO, logger="session_expiry_runtime")
    return caplog


@pytest.fixture
def fresh_handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make ``handler.handler`` read its environment again (it caches one cleaner per process)."""
    monkeypatch.setattr(handler_module, "_cleaner", None)
    yield
    handler_module._cleaner = None


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's standard retry mode, minus its exponential backoff sleeps (tests only)."""
    from botocore.retries import standard

    monkeypatch.setattr(standard.ExponentialBackoff, "delay_amount", lambda self, context: 0)
